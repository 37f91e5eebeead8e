/* lab/compare_plan.h — pelab compare in three steps (lab/cmd_compare.c calls them in turn):
 *
 *   plan    (lab/compare_plan.c) the runs the options ask for: each entry of --pe × seed, and with
 *           --tune the grid's runs; per run, whether it shares an earlier entry's run, and that a
 *           run its directory holds already is reused or continued only if its config.json records
 *           the settings asked; every run's settings and sweep checked before any trains
 *   run     (lab/compare_run.c) trains what is missing (the grid first and each entry's choice
 *           with --tune), one after another or --jobs at a time, then each run's sweep
 *   report  (compare.h's compare_report) the table, compare.json and the sweep's CSV
 *
 * Whether a run is finished, interrupted or new is read from its directory when its turn comes:
 * another compare on the same --out may finish or start it in the meantime. */
#ifndef PELAB_LAB_COMPARE_PLAN_H
#define PELAB_LAB_COMPARE_PLAN_H

#include <stdint.h>
#include "compare.h"
#include "compare_tune.h"
#include "pelab/options.h"
#include "pelab/task.h"

#define COMPARE_MAX_RUNS (COMPARE_MAX_PES * COMPARE_MAX_SEEDS)

/* compare's own options (the training options follow them in `pelab help compare`). */
extern const struct pelab_optdef compare_options[];

/* What a comparison trains and reports. */
struct compare_plan {
    /* the options: the shared training options (compare's own taken out), the entries of --pe as
     * given (pointers into pe_list), seeds from seed0, --jobs and the threads of each --jobs child
     * ("" for --jobs 1), the task (its ops, NULL for an unknown name), preset and --out */
    struct pelab_opts opts;
    char pe_list[PELAB_OPT_VAL_MAX];
    const char *pes[COMPARE_MAX_PES];
    int n_pes, seeds, jobs;
    uint64_t seed0;
    char child_threads[32];
    char task[PELAB_OPT_VAL_MAX], preset[PELAB_OPT_VAL_MAX], out[PELAB_OPT_VAL_MAX + 32];
    const struct pelab_task_ops *tops;
    /* the entries (with --tune, at the point each chose once the grid is trained) and their own
     * variants, at no point */
    struct compare_variant variants[COMPARE_MAX_PES], own[COMPARE_MAX_PES];
    /* the sweep each run makes after training: its kind and columns, and the checked --lengths,
     * --resolutions or --buckets text ("" for none) */
    struct compare_sweep sweep;
    char sweep_spec[PELAB_OPT_VAL_MAX];
    /* the tuning grid (tuning: --tune given) and its runs */
    int tuning;
    struct compare_tune tune;
    struct compare_result tuning_runs[COMPARE_MAX_RUNS];
    int n_tuning;
    /* the evaluation runs: entry by entry, seed by seed */
    struct compare_result rs[COMPARE_MAX_RUNS];
    int n;
};

/* The plan of the parsed options opts (compare's own among them): the entries, the sweep, the runs
 * and their checks. PELAB_ERR_USAGE, naming the option or the run, before anything is written. */
int compare_plan_make(const struct pelab_opts *opts, struct compare_plan *pl);

/* The evaluation runs of the entries (pl->variants, each pl->seeds times from pl->seed0) into
 * pl->rs: each in OUT/<run name>-s<seed>, sharing the run of an earlier entry that differs only in
 * evaluation-time options. */
int compare_plan_runs(struct compare_plan *pl);

/* Trains what the plan's runs lack and makes their sweeps (lab/compare_run.c): pl->rs read, each
 * with its summary and its sweep's columns (size_em allocated for a sweep of sizes: the caller
 * frees it). */
int compare_run(struct compare_plan *pl);

#endif
