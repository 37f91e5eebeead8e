/* The algorithmic tasks' examples as whole token sequences (algo.c), for the tests. */
#ifndef PELAB_DATA_TASKS_ALGO_H
#define PELAB_DATA_TASKS_ALGO_H

#include <stdint.h>
#include "pelab/task.h"

#define PELAB_ALGO_SEQ_MAX (8 * PELAB_SIZES_MAX + 8) /* tokens of the longest example of any task */

/* Example i of split as tokens: prompt, separator, target, end token, into seq (at least
 * PELAB_ALGO_SEQ_MAX); *n_prompt the prompt's tokens; returns the sequence's length. */
int pelab_algo_example(const struct pelab_task *t, enum pelab_split split, uint64_t i, int32_t *seq,
                       int *n_prompt);

#endif
