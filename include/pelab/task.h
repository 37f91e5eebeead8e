/* pelab/task.h — tasks: where batches come from.
 *
 * A task turns (split, example index) into token sequences deterministically, so the data-loader
 * state of a run is just a cursor. Batches are padded to a fixed T; targets are -1 wherever no
 * loss is taken (padding, and for `indirect` every position but the answer).
 */
#ifndef PELAB_TASK_H
#define PELAB_TASK_H

#include <stddef.h>
#include <stdint.h>
#include "pelab/options.h"

enum pelab_split { PELAB_SPLIT_TRAIN = 0, PELAB_SPLIT_VAL = 1, PELAB_SPLIT_TEST = 2 };

struct pelab_batch {
    int B, T;
    int32_t *tokens;  /* (B,T) */
    int32_t *targets; /* (B,T), -1 = no loss */
    int32_t *pos;     /* (B,T), positions */
};

int pelab_batch_alloc(struct pelab_batch *b, int B, int T);
void pelab_batch_free(struct pelab_batch *b);

struct pelab_task;

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
};

struct pelab_task {
    const struct pelab_task_ops *ops;
    int vocab;   /* V */
    int seq_len; /* longest sequence: the model's T */
    int pad;     /* padding token id */
    /* Training data cursor at step 0 (seed-derived, set by the trainer; 0 otherwise): a training
     * example's cursor minus the origin is how many examples came before it in the run, which
     * schedules such as a curriculum are functions of. */
    uint64_t train_origin;
    void *state;
};

const struct pelab_task_ops *pelab_task_find(const char *name);
const struct pelab_task_ops *const *pelab_task_all(void);
/* PELAB_ERR_USAGE for an unknown task (the message lists the known ones) or bad options. */
int pelab_task_init(struct pelab_task *t, const char *name, const struct pelab_opts *opts);
void pelab_task_free(struct pelab_task *t);

#endif
