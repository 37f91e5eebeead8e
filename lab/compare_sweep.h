/* lab/compare_sweep.h — the extrapolation columns of `pelab compare` (lab/compare_sweep.c):
 * perplexity at each length for tasks of documents; span perplexity and exact match for qa;
 * accuracy at each resolution for images; exact match at each instance size for the algorithmic
 * tasks. */
#ifndef PELAB_CLI_COMPARE_SWEEP_H
#define PELAB_CLI_COMPARE_SWEEP_H

#include "pelab/sweep.h"

/* Perplexity of the run in run_dir at each length of spec ("1x,2x,...", parsed against the run's
 * training length into lengths[0..*n)), on the long documents, with the evaluation-time options
 * `eval` (none: an empty set): read from run_dir/sweep.json when it was made for spec and those
 * options, else evaluated and written there (atomically). */
int pelab_compare_sweep(const char *run_dir, const char *spec, const struct pelab_opts *eval,
                        struct pelab_sweep_length *lengths, int *n, double *ppl);

/* The same for a run of task qa (pelab/qa_sweep.h) on the test questions, kept in
 * run_dir/qa_sweep.json: answer-span perplexity and generated exact match at each length. */
int pelab_compare_qa_sweep(const char *run_dir, const char *spec, const struct pelab_opts *eval,
                           struct pelab_sweep_length *lengths, int *n, double *ppl, double *em);

/* The same for a run of task image: test accuracy at each side of spec ("1x,2x,3x" or sides in
 * pixels, as 'pelab eval --resolutions'), the sides into lengths[0..*n) (label as given, .tokens
 * the side), kept in run_dir/resolutions.json. */
int pelab_compare_resolutions(const char *run_dir, const char *spec, const struct pelab_opts *eval,
                              struct pelab_sweep_length *lengths, int *n, double *acc);

/* The same for a run of an algorithmic task (pelab/task.h, `sizes`): the exact match of its test
 * split at each size 1..*test_max into em (room for PELAB_SIZES_MAX), *train_max its trained
 * sizes, kept in run_dir/sizes.json. */
int pelab_compare_sizes(const char *run_dir, const struct pelab_opts *eval, int *train_max, int *test_max,
                        double *em);

#endif
