/* src/data/tasks/indirect.h — one example of the `indirect` task in readable form, for tests and
 * for `pelab sample`. The task itself is used through pelab/task.h. */
#ifndef PELAB_DATA_TASKS_INDIRECT_H
#define PELAB_DATA_TASKS_INDIRECT_H

#include <stdint.h>
#include "pelab/task.h"

/* Longest full text: 52 letters + ", c, " + "+15"-style shift (at most 3) + ", " + target + NUL. */
#define PELAB_INDIRECT_TEXT_MAX 64

struct pelab_indirect_example {
    /* "TzbkWoKDyscBepYvfwxEVQtgPa, c, -8, b": source, source letter, signed shift, target. The
     * model's input is all but the final character. */
    char text[PELAB_INDIRECT_TEXT_MAX];
    int source_len;   /* L, letters in the source string */
    int source_index; /* index of the source letter in the string, 0..L-1 */
    int shift;        /* nonzero, in [-max-shift, +max-shift] */
    int target_index; /* source_index + shift, 0..L-1 */
    char target;      /* the letter at target_index */
};

/* Example `index` (mod the split's size) of `split` for a task initialised as "indirect": the same
 * example fill() puts in a batch. */
void pelab_indirect_generate(const struct pelab_task *t, enum pelab_split split, uint64_t index,
                             struct pelab_indirect_example *ex);

/* Token id of one text character (see indirect.c for the table), or -1 if it has none. */
int32_t pelab_indirect_token(char c);

#endif
