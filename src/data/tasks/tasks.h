/* src/data/tasks/tasks.h — the task tables the registry in src/data/task.c lists.
 * Adding a task: write src/data/tasks/<name>.c defining `pelab_task_<name>`, declare it here,
 * and add it to the table in task.c. */
#ifndef PELAB_DATA_TASKS_H
#define PELAB_DATA_TASKS_H

#include "pelab/task.h"

extern const struct pelab_task_ops pelab_task_indirect;
extern const struct pelab_task_ops pelab_task_text;
extern const struct pelab_task_ops pelab_task_dna;
extern const struct pelab_task_ops pelab_task_music;
extern const struct pelab_task_ops pelab_task_qa;
extern const struct pelab_task_ops pelab_task_image;
/* algo.c: length generalisation on algorithmic tasks */
extern const struct pelab_task_ops pelab_task_copy;
extern const struct pelab_task_ops pelab_task_reverse;
extern const struct pelab_task_ops pelab_task_sort;
extern const struct pelab_task_ops pelab_task_parity;
extern const struct pelab_task_ops pelab_task_sum;
extern const struct pelab_task_ops pelab_task_addition;
extern const struct pelab_task_ops pelab_task_poly;
extern const struct pelab_task_ops pelab_task_lego;
extern const struct pelab_task_ops pelab_task_duplicate_string;
extern const struct pelab_task_ops pelab_task_stack_manipulation;
extern const struct pelab_task_ops pelab_task_binary_addition;
extern const struct pelab_task_ops pelab_task_selective_copy;

#endif
