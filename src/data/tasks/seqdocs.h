/* src/data/tasks/seqdocs.h — what the tasks of documents (text, dna, music) share: a dataset's
 * installed token cache split into documents, training windows drawn at random, evaluation
 * windows cut in order, and the tokenizer for printing. Each task file defines its options and
 * fills a seqdocs_config; the functions below are its task ops. The windows are described at the
 * top of seqdocs.c. */
#ifndef PELAB_DATA_TASKS_SEQDOCS_H
#define PELAB_DATA_TASKS_SEQDOCS_H

#include <stdint.h>
#include "pelab/task.h"

/* How the val/test/long documents are cut into evaluation windows. */
enum seqdocs_cut {
    SEQDOCS_TILE, /* consecutive windows covering the whole document (text, dna) */
    SEQDOCS_CROP  /* one window per document, its beginning (music: one chorale a sequence) */
};

struct seqdocs_config {
    const char *dataset;   /* its train, val, test and long documents */
    const char *tokenizer; /* the cache to read */
    const char *data_dir;  /* "" or NULL: $PELAB_DATA, else data/ */
    const char *ood;       /* NULL, or a dataset whose test documents replace test and long */
    int T;                 /* training length: a window is T+1 tokens */
    enum seqdocs_cut cut;
    int per_doc;           /* training draws a document, then a start in it (else a start among all) */
    int align;             /* window starts are multiples of this (music: 4 voices a time step) */
    int text;              /* count the bytes of each token, for bits per byte */
    uint64_t data_seed;
};

/* Opens the caches and fills t (vocab, seq_len = T, pad, lm, token_bytes, state). A dataset that
 * is not installed fails with the command that installs it; a damaged or foreign cache with the
 * file and the fault (PELAB_ERR_RUNTIME). */
int seqdocs_init(struct pelab_task *t, const struct seqdocs_config *c);

void seqdocs_free(struct pelab_task *t);
/* The evaluation-time options of text and music (--data-dir: evaluating a run on another machine,
 * where the data may live elsewhere); dna adds its own. */
extern const struct pelab_optdef seqdocs_eval_options[];
uint64_t seqdocs_split_size(const struct pelab_task *t, enum pelab_split split);
void seqdocs_fill(const struct pelab_task *t, enum pelab_split split, uint64_t first,
                  struct pelab_batch *b);
const char *seqdocs_token_text(const struct pelab_task *t, int32_t token);
uint64_t seqdocs_windows(const struct pelab_task *t, enum pelab_split split, int L, int full,
                         struct pelab_window_count *c);
void seqdocs_fill_windows(const struct pelab_task *t, enum pelab_split split, int L, int full,
                          uint64_t first, struct pelab_batch *b);
int seqdocs_decode(const struct pelab_task *t, const int32_t *ids, size_t n,
                   struct pelab_bytes *out);

/* The members of struct pelab_task_ops every task of documents fills with the functions above;
 * each task adds its name, summary, options, init and eval_options. */
#define SEQDOCS_TASK_OPS                                                                           \
    .free = seqdocs_free, .split_size = seqdocs_split_size, .fill = seqdocs_fill,                  \
    .token_text = seqdocs_token_text, .windows = seqdocs_windows,                                  \
    .fill_windows = seqdocs_fill_windows, .decode = seqdocs_decode, .sweep = PELAB_TASK_SWEEP_LENGTHS

/* Training examples per run "epoch": each index is its own draw, so the split never repeats
 * within any realistic run (the cursor wraps after 2^48 examples). */
#define SEQDOCS_TRAIN_SIZE ((uint64_t)1 << 48)

#endif
