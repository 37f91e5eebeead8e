/* pelab/task.h — tasks: where batches come from.
 *
 * A task turns (split, example index) into token sequences deterministically, so the data-loader
 * state of a run is just a cursor. Batches are padded to a fixed T; targets are -1 wherever no
 * loss is taken (padding, and for `indirect` every position but the answer).
 *
 * Two kinds: generated tasks (`indirect`: final-token accuracy) and tasks of documents (`text`,
 * `dna`, `music`: next-token prediction on every real position, reported as NLL, perplexity and,
 * for text, bits per byte). The latter read installed token caches (pelab/dataset.h) and can cut
 * their documents into evaluation windows of any length (`windows`, `fill_windows`), which the
 * length-extrapolation sweep (pelab/sweep.h) uses.
 */
#ifndef PELAB_TASK_H
#define PELAB_TASK_H

#include <stddef.h>
#include <stdint.h>
#include "pelab/model.h"
#include "pelab/options.h"
#include "pelab/real.h"
#include "pelab/tokenizer.h"

/* PELAB_SPLIT_LONG exists only for tasks of documents (those with `windows`): the long documents
 * held out for length extrapolation (docs/DATA.md), or the test documents of a dataset that
 * reserves none. */
enum pelab_split { PELAB_SPLIT_TRAIN = 0, PELAB_SPLIT_VAL = 1, PELAB_SPLIT_TEST = 2,
                   PELAB_SPLIT_LONG = 3 };
const char *pelab_split_name(enum pelab_split split); /* "train", "val", "test", "long" */

/* What an evaluation cut of a split holds (see `windows`). */
struct pelab_window_count {
    uint64_t windows;   /* rows of the cut */
    uint64_t documents; /* documents taking part */
    uint64_t scored;    /* positions with a target, over all windows */
    uint64_t longest;   /* tokens of the split's longest document (taking part or not) */
};

struct pelab_batch {
    int B, T;
    int32_t *tokens;  /* (B,T) */
    int32_t *targets; /* (B,T), -1 = no loss */
    int32_t *pos;     /* (B,T,n), positions of n coordinates (the task's io.positions.dims) */
    pelab_real *inputs; /* (B,T,P) a patch task's input vectors (P = io.input_dim), else NULL */
};

struct pelab_task;

/* A batch of a token task: 1-D positions, no input vectors. */
/* The split's data read, where the task reads a split on first use (ops->open_split). */
int pelab_task_open_split(const struct pelab_task *t, enum pelab_split split);
int pelab_batch_alloc(struct pelab_batch *b, int B, int T);
/* T of split's batches: test_len for the test split when the task sets it, else seq_len. */
int pelab_task_split_len(const struct pelab_task *t, enum pelab_split split);
/* A batch of task t's shape (its positions' coordinates and input vectors). */
int pelab_batch_alloc_for(struct pelab_batch *b, const struct pelab_task *t, int B, int T);
void pelab_batch_free(struct pelab_batch *b);

/* How a task's runs are evaluated beyond what they trained on (the task table's `sweep`): what
 * `eval --lengths` or `--resolutions` and `compare`'s columns do for a run of it. */
enum pelab_task_sweep {
    PELAB_TASK_SWEEP_NONE = 0,    /* no sweep (indirect) */
    PELAB_TASK_SWEEP_LENGTHS,     /* tasks of documents (`windows`): evaluation windows of longer
                                     lengths on the long documents (pelab/sweep.h) */
    PELAB_TASK_SWEEP_QA,          /* the same questions in longer haystacks, span perplexity and
                                     exact match (pelab/qa_sweep.h) */
    PELAB_TASK_SWEEP_RESOLUTIONS, /* image tasks (`set_side`): the images resized to other sides */
    PELAB_TASK_SWEEP_SIZES,       /* algorithmic tasks (`sizes`): exact match per instance size,
                                     inside and beyond the trained sizes */
};

#define PELAB_SIZES_MAX 512 /* the largest instance size of a task with sizes (the algorithmic tasks) */

struct pelab_task_ops {
    const char *name;
    const char *summary;
    const struct pelab_optdef *options; /* NULL-name terminated; may be NULL */
    /* Reads its options; sets vocab and seq_len. */
    int (*init)(struct pelab_task *t, const struct pelab_opts *opts);
    void (*free)(struct pelab_task *t);
    /* Examples in a split. */
    uint64_t (*split_size)(const struct pelab_task *t, enum pelab_split split);
    /* Fills b->B examples of `split`, indices first, first+1, … (mod split size), padded to
     * b->T (>= seq_len). Positions are 0..T-1. */
    void (*fill)(const struct pelab_task *t, enum pelab_split split, uint64_t first,
                 struct pelab_batch *b);
    /* Text of one token, for printing ("" for padding). */
    const char *(*token_text)(const struct pelab_task *t, int32_t token);

    /* Optional: options that change what an evaluation reads, not what the model learns (where
     * the data lives, dna's out-of-distribution test genome). `eval` and `sample` accept them for
     * a run of this task; training refuses those not also in `options`; config.json never
     * records them. init reads them from the same opts as `options`. */
    const struct pelab_optdef *eval_options;
    /* Optional (tasks of documents): the evaluation cut of `split` at length L (any L >= 1; the
     * val/test examples of split_size/fill are this cut at L = seq_len). Each window holds up to
     * L+1 tokens of one document and scores up to L positions; together the windows score each
     * document's tokens as the task's cut says (task files). With `full`, only documents of at
     * least L+1 tokens take part, so every window has L inputs. Fills *c; returns c->windows. */
    uint64_t (*windows)(const struct pelab_task *t, enum pelab_split split, int L, int full,
                        struct pelab_window_count *c);
    /* Fills b->B windows first, first+1, … (mod the cut's size) of that cut, padded to b->T >= L,
     * positions 0..b->T-1. */
    void (*fill_windows)(const struct pelab_task *t, enum pelab_split split, int L, int full,
                         uint64_t first, struct pelab_batch *b);
    /* Optional: what the task feeds the model beyond tokens, from its options alone (no data read):
     * a patch task's input width and 2-D positions. Absent: token ids, 1-D positions, causal. */
    int (*model_io)(const struct pelab_opts *opts, struct pelab_model_io *io);
    /* Optional (image tasks): evaluate at images of side × side from now on (0: the trained
     * side), which changes seq_len; *train_side and *patch receive the trained side and the patch
     * size. PELAB_ERR_USAGE (pelab_image_check_side's message) for a side the patch does not
     * divide; PELAB_ERR_RUNTIME when out of memory. */
    int (*set_side)(struct pelab_task *t, int side, int *train_side, int *patch);
    /* Optional: reads a split's data on its first use (the image task's test images), so that
     * what a command does not read cannot stop it (a damaged test file, evaluating val).
     * PELAB_ERR_RUNTIME naming the file at fault. Called through pelab_task_open_split before
     * split_size or fill of that split (the training split and val are read by init); training
     * opens every split it evaluates before its first update. */
    int (*open_split)(const struct pelab_task *t, enum pelab_split split);
    /* Optional (the algorithmic tasks): instance sizes. Training and validation sizes run 1..
     * *train_max; the test split holds *per_size examples of each size 1..*test_max in order of
     * size (test example i has size 1 + i / per_size). */
    void (*sizes)(const struct pelab_task *t, int *train_max, int *test_max, int *per_size);
    /* With sizes: T of the test examples of size n (prompt, separator and target), <= test_len. */
    int (*size_len)(const struct pelab_task *t, int n);
    /* Optional: appends the text of ids[0..n-1] (the tokenizer's decode), for `sample`. */
    int (*decode)(const struct pelab_task *t, const int32_t *ids, size_t n,
                  struct pelab_bytes *out);
    /* Its sweep beyond training; LENGTHS needs `windows`, RESOLUTIONS `set_side`, SIZES `sizes`. */
    enum pelab_task_sweep sweep;
};

struct pelab_task {
    const struct pelab_task_ops *ops;
    int vocab;   /* V */
    int seq_len; /* longest sequence: the model's T */
    /* T of the test split's batches when it differs from seq_len, else 0: the algorithmic tasks
     * train on sizes 1..L (seq_len: the training context) and test sizes up to 2L, at positions
     * the model never trained on, as the length sweep of a task of documents does */
    int test_len;
    int pad;     /* padding token id */
    /* Training data cursor at step 0 (seed-derived, set by the trainer; 0 otherwise): a training
     * example's cursor minus the origin is how many examples came before it in the run, which
     * schedules such as a curriculum are functions of. */
    uint64_t train_origin;
    /* Set by the trainer: the training batches it draws may be augmented (the image task's
     * --aug-*); evaluation, of any split, never is. */
    int augment;
    /* Set by tasks of documents: every real position is scored and the loss is reported as NLL
     * per token and perplexity (accuracy otherwise). */
    int lm;
    /* Text tasks: bytes of text each token id stands for (vocab entries), so that an evaluation
     * can report bits per byte; NULL for other tasks. */
    const uint16_t *token_bytes;
    struct pelab_model_io io; /* what it feeds the model (model_io's; tokens, 1-D, causal without) */
    void *state;
};

const struct pelab_task_ops *pelab_task_find(const char *name);
const struct pelab_task_ops *const *pelab_task_all(void);
/* PELAB_ERR_USAGE for an unknown task (the message lists the known ones) or bad options. */
int pelab_task_init(struct pelab_task *t, const char *name, const struct pelab_opts *opts);
void pelab_task_free(struct pelab_task *t);
/* The model's io of task `name` with these options (task.io without building the task). */
int pelab_task_model_io(const char *name, const struct pelab_opts *opts, struct pelab_model_io *io);
/* The task, if any, whose evaluation-time table defines option `name`, else NULL. */
const struct pelab_task_ops *pelab_task_eval_option_owner(const char *name);

#endif
