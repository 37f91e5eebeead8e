/* The algorithmic tasks' examples as whole token sequences (algo.c), for the tests. */
#ifndef PELAB_DATA_TASKS_ALGO_H
#define PELAB_DATA_TASKS_ALGO_H

#include <stdint.h>
#include "pelab/task.h"

/* Example i of split as tokens: prompt, separator, target, end token, into seq (at least
 * 4·PELAB_SIZES_MAX + 8); *n_prompt the prompt's tokens; returns the sequence's length. */
int pelab_algo_example(const struct pelab_task *t, enum pelab_split split, uint64_t i, int32_t *seq,
                       int *n_prompt);

#endif
