/* compare's tuning (lab/compare_tune.c): --tune lr=3e-4,1e-3,3e-3 trains every entry of --pe at
 * each point of the grid on the tuning seeds (--tune-seeds N, from --seed + COMPARE_TUNE_SEED_OFFSET),
 * in DIR/tune/<run name>+lr-<value>-s<seed>/; each entry's point of least mean validation loss
 * (its runs' summary.json val_loss: the whole validation split at the end of training; never the
 * test split, never a sweep; ties to the smaller value) is its choice, and its evaluation runs
 * train at it, named as the variant of that setting (rope+lr-3e-3). lab/compare_run.c trains the
 * runs this file plans, and compare_report writes what it chose. */
#ifndef PELAB_CLI_COMPARE_TUNE_H
#define PELAB_CLI_COMPARE_TUNE_H

#include <stdint.h>
#include "compare.h"
#include "pelab/json.h"

#define COMPARE_TUNE_KEYS 4          /* options tuned at once */
#define COMPARE_TUNE_VALUES 16       /* values of one option */
#define COMPARE_TUNE_VALUE_MAX 32    /* characters of a value */
#define COMPARE_TUNE_SEED_OFFSET 1000 /* tuning seeds start at --seed + this: never an evaluation seed
                                       * (--seeds is at most COMPARE_MAX_SEEDS) */

/* The grid of --tune and what it chose. A point g is one value of each option: the values'
 * indices are the digits of g, the last option's the fastest. */
struct compare_tune {
    int n_keys, n_points;
    char keys[COMPARE_TUNE_KEYS][PELAB_OPT_KEY_MAX];
    int n_values[COMPARE_TUNE_KEYS];
    char values[COMPARE_TUNE_KEYS][COMPARE_TUNE_VALUES][COMPARE_TUNE_VALUE_MAX]; /* as given */
    double numbers[COMPARE_TUNE_KEYS][COMPARE_TUNE_VALUES];
    int seeds;          /* tuning seeds: seed0, seed0 + 1, ... */
    uint64_t seed0;
    /* the tuning runs (compare_tune_runs) and, once they are read, each entry's point */
    struct compare_result *runs;
    int n_runs;
    int chosen[COMPARE_MAX_PES];
};

/* --tune's text ("lr=3e-4,1e-3:warmup=0,100") into t, with `seeds` tuning seeds from
 * seed + COMPARE_TUNE_SEED_OFFSET. Each option must be one a run's training can be tuned on (the
 * optimiser's: lr, min-lr, warmup, ...), not also given among the shared options (`shared`), each
 * value valid for it and given once. One line of PELAB_ERR_USAGE otherwise, naming the option and
 * why: an evaluation-time option, one that places or schedules a run, one of the model's. */
int compare_tune_parse(const char *spec, int seeds, uint64_t seed, const struct pelab_opts *shared,
                       struct compare_tune *t);

/* The variant v at point g: v's settings and the point's, named as a variant of them
 * (rope+lr-3e-3, compare_variant_add). */
int compare_tune_point(const struct compare_tune *t, const struct compare_variant *v, int g,
                       struct compare_variant *out);

/* Option k's value at point g, as given ("3e-3"). */
const char *compare_tune_value(const struct compare_tune *t, int g, int k);

/* "lr=3e-3" ("lr=3e-3 warmup=100" for several options) of point g, into buf. */
void compare_tune_point_text(const struct compare_tune *t, int g, char *buf, size_t size);

/* The tuning runs of the n_pes entries (their variants and --pe texts) into t->runs (room for
 * `max`), every entry × point × tuning seed in out/tune/<name>-s<seed>, .point set, and .shares
 * where two entries differ only in evaluation-time options and so share a run. PELAB_ERR_USAGE
 * when the grid holds more than `max` runs. */
int compare_tune_runs(struct compare_tune *t, const struct compare_variant *variants, const char *const *pes,
                      int n_pes, const char *out, struct compare_result *runs, int max);

/* Once every tuning run is read (val_loss, diverged), each entry's point into t->chosen: the least
 * mean validation loss over the tuning seeds, a tie to the smaller values (the first option
 * first); a point where any run diverged or has no finite loss is never chosen.
 * PELAB_ERR_RUNTIME naming the entry when no point is left. */
int compare_tune_choose(struct compare_tune *t, const char *const *pes, int n_pes);

/* Whether a failed run's error says its training stopped on a non-finite loss or gradient (the
 * --on-nan policy gave up): a point of the grid that diverged, not a failure of the comparison. */
int compare_tune_diverged(const char *error);

/* compare.json's top-level "tune" (the options, their values, the seeds, the metric) and an
 * entry's ("grid": each point's values, run directories, validation losses and their mean;
 * "chosen"), each after ", ". */
void compare_tune_json_head(struct pelab_sb *sb, const struct compare_tune *t);
void compare_tune_json_entry(struct pelab_sb *sb, const struct compare_tune *t, int p);

#endif
