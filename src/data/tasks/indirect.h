/* src/data/tasks/indirect.h — one example of the `indirect` task in readable form, for tests and
 * for `pelab sample`. The task itself is used through pelab/task.h. */
#ifndef PELAB_DATA_TASKS_INDIRECT_H
#define PELAB_DATA_TASKS_INDIRECT_H

#include <stdint.h>
#include "pelab/task.h"

#define PELAB_INDIRECT_MAX_QUERIES 8
/* Longest full text: 52 letters, then per query ", c, " + a shift of at most 3 characters +
 * ", " + target (11), and a NUL. */
#define PELAB_INDIRECT_TEXT_MAX (52 + 11 * PELAB_INDIRECT_MAX_QUERIES + 1)

struct pelab_indirect_query {
    int source_index; /* index of the source letter in the string, 0..L-1 */
    int shift;        /* in [-max-shift, +max-shift], nonzero but in a curriculum's copy stage */
    int target_index; /* source_index + shift, 0..L-1 */
    char target;      /* the letter at target_index */
};

struct pelab_indirect_example {
    /* "TzbkWoKDyscBepYvfwxEVQtgPa, c, -8, b": source, source letter, signed shift, target; with
     * --indirect-queries K, K such ", letter, shift, target" groups follow the one string. The
     * model's input is all but the final character. */
    char text[PELAB_INDIRECT_TEXT_MAX];
    int source_len; /* L, letters in the source string */
    int n_queries;  /* K */
    struct pelab_indirect_query q[PELAB_INDIRECT_MAX_QUERIES];
};

/* Example `index` (mod the split's size) of `split` for a task initialised as "indirect": the same
 * example fill() puts in a batch. */
void pelab_indirect_generate(const struct pelab_task *t, enum pelab_split split, uint64_t index,
                             struct pelab_indirect_example *ex);

/* Token id of one text character (see indirect.c for the table), or -1 if it has none. */
int32_t pelab_indirect_token(char c);

#endif
