/* compare's plan (lab/compare_plan.h): compare's options, the entries of --pe, the sweep of the
 * task's kind, and the runs, each checked before any trains: its settings against a run its
 * directory holds already, its sweep on the task and a fresh model. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compare_plan.h"
#include "compare_sweep.h"
#include "jobs.h"
#include "pelab/dist.h"
#include "pelab/image.h"
#include "pelab/model.h"
#include "pelab/status.h"
#include "pelab/sweep.h"
#include "pelab/train.h"

#define MAX_PES COMPARE_MAX_PES
#define MAX_SEEDS COMPARE_MAX_SEEDS
#define AUTO_LENGTHS "1x,2x,4x,8x,10x" /* --lengths auto: those of these the task can evaluate */
#define QA_AUTO_LENGTHS "1x,2x,4x,8x"   /* --lengths auto for qa: the SeqPE paper's Table II */
#define IMAGE_AUTO_RESOLUTIONS "1x,2x,3x" /* --resolutions auto: the SeqPE paper's 224 → 672 */

const struct pelab_optdef compare_options[] = {
    {"pe", PELAB_OPT_STR, "rope,pope,nope", 0, 0, NULL,
     "encodings to compare, comma-separated; NAME:option=value:... is a variant with settings of "
     "its own (e.g. seqpe:seqpe-alpha=0:seqpe-beta=0,seqpe for an ablation); NAME:init-from=RUN "
     "fine-tunes that encoding's own trained run ({seed} in RUN: each run's seed; RoPE's "
     "--rope-scaling settings beside it are the fine-tune's); NAME:random-positions=N trains and evaluates it "
     "on randomised positions"},
    {"seeds", PELAB_OPT_INT, "3", 1, MAX_SEEDS, NULL,
     "runs per encoding, with seeds --seed, --seed+1, ..."},
    {"jobs", PELAB_OPT_INT, "1", 1, PELAB_JOBS_MAX, NULL,
     "runs trained at once, each in its own process on max(1, threads/N) threads (1: one after "
     "another in this process, on all --threads)"},
    /* the default is shown only: an empty --out means runs/compare-<task> */
    {"out", PELAB_OPT_STR, "runs/compare-<task>", 0, 0, NULL,
     "directory of the comparison: a run per encoding and seed in DIR/<pe>-s<seed>/"},
    {"lengths", PELAB_OPT_STR, "auto", 0, 0, NULL,
     "tasks of documents: columns of perplexity at these lengths on the long documents (the "
     "extrapolation sweep of 'pelab eval --lengths'), checked before any run trains; auto: "
     "those of " AUTO_LENGTHS " that the long documents hold; none: no such columns. qa: "
     "answer-span perplexity and exact match of a greedy generation at these lengths (auto: "
     QA_AUTO_LENGTHS ")"},
    {"buckets", PELAB_OPT_STR, "auto", 0, 0, NULL,
     "algorithmic tasks: columns of test exact match over these ranges of instance sizes (e.g. "
     "1-20,21-30,31-40; a single size is n); auto: the trained sizes, the untrained ones in up to "
     "4 equal parts, and all the untrained ones. Each run's exact match at every size is kept in "
     "its RUN/sizes.json, the means over seeds go to DIR/sizes.csv"},
    {"resolutions", PELAB_OPT_STR, "auto", 0, 0, NULL,
     "image: columns of test accuracy at these sides, the test images resized (bilinear) as "
     "'pelab eval --resolutions' does (sides like 28,56 or multiples like 2x); auto: "
     IMAGE_AUTO_RESOLUTIONS "; none: no such columns"},
    {"tune", PELAB_OPT_STR, "", 0, 0, NULL,
     "OPTION=V1,V2,...[:OPTION=...]: a grid of optimiser settings (lr, min-lr, warmup, decay-steps, "
     "weight-decay, beta1, beta2, eps, clip; e.g. lr=3e-4,1e-3,3e-3,1e-2) each entry of --pe trains "
     "at on the tuning seeds, in DIR/tune/<pe>+lr-<v>-s<seed>/; the point of least mean validation "
     "loss (summary.json val_loss; ties to the smaller value) is the entry's, its --seeds runs "
     "train there, named <pe>+lr-<v>-s<seed>"},
    {"tune-seeds", PELAB_OPT_INT, "1", 1, MAX_SEEDS, NULL,
     "--tune: runs per point of the grid, with seeds --seed+1000, --seed+1001, ... (never an "
     "evaluation seed)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* What the checks of a run's sweep read: the --lengths (--resolutions, --buckets) text
 * (PELAB_OPT_VAL_MAX bytes), the run's options, the evaluation-time options its sweep will be
 * evaluated with, and the sweep, whose buckets check_buckets sets. */
struct lengths_check {
    char *spec;
    const struct pelab_opts *opts, *eval;
    struct compare_sweep *sweep;
};

/* The model as the sweep will open it, in *e: m itself, or (with evaluation-time options) a
 * model of the run's options and those, built in `evaluated` (the caller frees it when *e != m). */
static int open_evaluated(const struct lengths_check *lc, struct pelab_model *m, const struct pelab_task *t,
                          struct pelab_model *evaluated, struct pelab_model **e) {
    *e = m;
    if (!lc->eval->count) return PELAB_OK;
    static struct pelab_opts merged;
    merged = *lc->opts;
    int rc = PELAB_OK;
    for (int i = 0; !rc && i < lc->eval->count; i++)
        rc = pelab_opts_set(&merged, lc->eval->kv[i].key, lc->eval->kv[i].val);
    if (!rc) rc = pelab_model_init_io(evaluated, &merged, t->vocab, t->seq_len, &t->io);
    if (!rc) *e = evaluated;
    return rc;
}

/* --lengths on a run's task and fresh model, before it trains: each length must fit a long
 * document and the encoding must accept its positions (with the run's evaluation-time options,
 * e.g. the learned table's --ape-extend interpolate). "auto" becomes the entries of AUTO_LENGTHS
 * that fit (none: "none"), with a notice naming the ones left out. */
static int check_lengths(struct pelab_model *m, const struct pelab_task *t, void *ctx) {
    const struct lengths_check *lc = ctx;
    char *spec = lc->spec;
    struct pelab_sweep_length l[PELAB_SWEEP_MAX];
    int n, rc;
    if (strcmp(spec, "auto") == 0) {
        if ((rc = pelab_sweep_parse(AUTO_LENGTHS, t->seq_len, l, &n))) return rc;
        char kept[PELAB_OPT_VAL_MAX] = "", left[PELAB_OPT_VAL_MAX] = "";
        unsigned long long longest = 0;
        for (int i = 0; i < n; i++) {
            struct pelab_window_count c;
            int fits = t->ops->windows(t, PELAB_SPLIT_LONG, l[i].tokens, 1, &c) != 0;
            char *to = fits ? kept : left;
            size_t used = strlen(to);
            snprintf(to + used, sizeof kept - used, "%s%s", used ? "," : "", l[i].label);
            longest = c.longest;
        }
        if (left[0])
            fprintf(stderr, "notice: --lengths auto leaves out %s: the longest long document of "
                    "task %s has %llu tokens\n", left, t->ops->name, longest);
        snprintf(spec, PELAB_OPT_VAL_MAX, "%s", kept[0] ? kept : "none");
    }
    if (strcmp(spec, "none") == 0) return PELAB_OK;
    if ((rc = pelab_sweep_parse(spec, t->seq_len, l, &n))) return rc;
    struct pelab_model evaluated, *e = m;
    if ((rc = open_evaluated(lc, m, t, &evaluated, &e))) return rc;
    rc = pelab_sweep_check(e, t, PELAB_SPLIT_LONG, l, n);
    if (e != m) pelab_model_free(&evaluated);
    return rc;
}

/* --resolutions on an image run's task, before it trains: each side must cut into whole patches,
 * and the encoding (with the sweep's evaluation-time options) must take its positions. */
static int check_resolutions(struct pelab_model *m, const struct pelab_task *t, void *ctx) {
    const struct lengths_check *lc = ctx;
    int train_side, patch, sides[PELAB_IMAGE_MAX_SIDES], n;
    struct pelab_model evaluated, *e = m;
    int rc = open_evaluated(lc, m, t, &evaluated, &e);
    /* the fresh task is at its trained side, and stays there */
    if (!rc) rc = pelab_task_sides((struct pelab_task *)t, e, lc->spec, sides, &n, &train_side, &patch);
    if (e != m) pelab_model_free(&evaluated);
    return rc;
}

/* Appends the bucket of sizes lo..hi to the sweep's columns. */
static void add_bucket(struct compare_sweep *sw, int lo, int hi) {
    sw->lo[sw->n] = lo, sw->hi[sw->n] = hi;
    snprintf(sw->lengths[sw->n].label, sizeof sw->lengths[sw->n].label, lo == hi ? "%d" : "%d-%d", lo, hi);
    sw->lengths[sw->n++].tokens = lo;
}

/* --buckets on an algorithmic task (its fresh task: the sizes of its test split), before any run
 * trains: "auto", or ranges lo-hi (or single sizes) within the test sizes, into the sweep's
 * columns. */
static int check_buckets(struct pelab_model *m, const struct pelab_task *t, void *ctx) {
    const struct lengths_check *lc = ctx;
    const char *spec = lc->spec;
    struct compare_sweep *sw = lc->sweep;
    int per_size;
    t->ops->sizes(t, &sw->train_max, &sw->test_max, &per_size);
    const int L = sw->train_max, M = sw->test_max;
    sw->n = 0;
    if (strcmp(spec, "auto") == 0) {
        add_bucket(sw, 1, L);
        const int parts = M - L < 4 ? M - L : 4;
        for (int i = 0; i < parts; i++) add_bucket(sw, L + 1 + (M - L) * i / parts, L + (M - L) * (i + 1) / parts);
        if (parts > 1) add_bucket(sw, L + 1, M);
        return PELAB_OK;
    }
    char items[PELAB_OPT_VAL_MAX];
    snprintf(items, sizeof items, "%s", spec);
    char *save;
    for (char *item = strtok_r(items, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        int lo, hi, used = 0;
        if (sscanf(item, "%d-%d%n", &lo, &hi, &used) != 2 || item[used]) {
            used = 0;
            if (sscanf(item, "%d%n", &lo, &used) != 1 || item[used])
                return pelab_fail(PELAB_ERR_USAGE, "--buckets: '%s' is not a range of sizes like 21-30 "
                                  "or a size", item);
            hi = lo;
        }
        if (lo < 1 || hi < lo || hi > M)
            return pelab_fail(PELAB_ERR_USAGE, "--buckets: %s is not within the test sizes 1..%d of "
                              "task %s (--algo-test-max)", item, M, t->ops->name);
        if (sw->n == PELAB_SWEEP_MAX)
            return pelab_fail(PELAB_ERR_USAGE, "--buckets: at most %d ranges", PELAB_SWEEP_MAX);
        add_bucket(sw, lo, hi);
    }
    return PELAB_OK;
}

/* Whether two variants' settings are the same, in any order. */
static int same_settings(const struct pelab_opts *a, const struct pelab_opts *b) {
    if (a->count != b->count) return 0;
    for (int i = 0; i < a->count; i++) {
        const char *v = pelab_opts_get(b, a->kv[i].key);
        if (!v || strcmp(v, a->kv[i].val) != 0) return 0;
    }
    return 1;
}

int compare_plan_runs(struct compare_plan *pl) {
    struct compare_result *rs = pl->rs;
    int *n = &pl->n;
    *n = 0;
    for (int p = 0; p < pl->n_pes; p++)
        for (int s = 0; s < pl->seeds; s++) {
            struct compare_result *r = &rs[*n];
            memset(r, 0, sizeof *r);
            snprintf(r->pe, sizeof r->pe, "%s", pl->pes[p]);
            r->variant = p;
            r->point = -1;
            r->seed = pl->seed0 + (uint64_t)s;
            snprintf(r->dir, sizeof r->dir, "%s/%s-s%" PRIu64, pl->out, pl->variants[p].run_name, r->seed);
            r->shares = -1;
            for (int j = 0; j < *n && r->shares < 0; j++)
                if (strcmp(rs[j].dir, r->dir) == 0) r->shares = j;
            if (r->shares >= 0 && !same_settings(&pl->variants[rs[r->shares].variant].set, &pl->variants[p].set))
                return pelab_fail(PELAB_ERR_USAGE, "--pe: %s and %s would train in one directory, %s",
                                  rs[r->shares].pe, r->pe, r->dir);
            (*n)++;
        }
    return PELAB_OK;
}

/* What check_runs checks a run's sweep against: the --lengths, --resolutions and --buckets texts
 * (made concrete by the first check: "auto"), whether each was given, and which sweep the runs
 * make. */
struct checks {
    char *lengths, *resolutions, *buckets;
    int lengths_given, resolutions_given, buckets_given;
    int sweeps, qa_sweeps, image_sweeps, size_sweeps;
};

/* Each run of pl->rs: a run its directory holds already must have been made with its settings;
 * those of a seed below validate_below are validated with their sweep on the task and a fresh
 * model (pelab_train_validate_with). */
static int check_runs(struct compare_plan *pl, const struct checks *ck, uint64_t validate_below) {
    static struct pelab_opts one;
    for (int i = 0; i < pl->n; i++) {
        const struct compare_result *r = &pl->rs[i];
        int rc = compare_variant_run_opts(&pl->variants[r->variant], &pl->opts, r->seed, r->dir, &one);
        if (rc) return rc;
        /* a run this --out holds already is reused only if it was made with these settings */
        if (r->shares < 0 && (rc = pelab_train_check_run_settings(&one, r->dir))) return rc;
        if (r->seed >= validate_below) continue;
        struct lengths_check lc = {ck->lengths, &one, &pl->variants[r->variant].eval, &pl->sweep};
        if (ck->image_sweeps) {
            lc.spec = ck->resolutions;
            rc = pelab_train_validate_with(&one, check_resolutions, &lc);
        } else if (ck->size_sweeps) {
            lc.spec = ck->buckets;
            rc = pelab_train_validate_with(&one, check_buckets, &lc);
        } else {
            rc = pelab_train_validate_with(&one, ck->sweeps ? check_lengths : NULL, &lc);
        }
        if (rc) return rc;
    }
    return PELAB_OK;
}

/* --pe into the entries: no empty entry, none twice, at most COMPARE_MAX_PES, each a valid variant. */
static int plan_entries(const struct pelab_opts *opts, struct compare_plan *pl) {
    int rc;
    snprintf(pl->pe_list, sizeof pl->pe_list, "%s", pelab_opt_str(opts, compare_options, "pe"));
    for (const char *s = pl->pe_list;; s++) { /* "rope,,pope" or "rope," is a slip, not two names */
        size_t len = strcspn(s, ","), blank = strspn(s, " ");
        if (blank >= len)
            return pelab_fail(PELAB_ERR_USAGE, "--pe '%s': an empty entry (give names separated "
                              "by commas: rope,pope,nope)", pl->pe_list);
        s += len;
        if (!*s) break;
    }
    pl->n_pes = 0;
    for (char *s = strtok(pl->pe_list, ", "); s; s = strtok(NULL, ", ")) {
        for (int i = 0; i < pl->n_pes; i++)
            if (strcmp(pl->pes[i], s) == 0)
                return pelab_fail(PELAB_ERR_USAGE, "--pe: '%s' is listed twice", s);
        if (pl->n_pes == MAX_PES)
            return pelab_fail(PELAB_ERR_USAGE, "--pe: at most %d encodings", MAX_PES);
        if ((rc = compare_variant_parse(s, &pl->variants[pl->n_pes]))) return rc;
        pl->pes[pl->n_pes++] = s;
    }
    if (pl->n_pes == 0) return pelab_fail(PELAB_ERR_USAGE, "--pe: no encoding given");
    return PELAB_OK;
}

/* The shared options, once compare's own are out: the entries' evaluation-time options taken
 * out too, the task, the preset, --out, the first seed, the tuning grid of tune_spec (tune_seeds
 * seeds a point), and the threads of a --jobs child. */
static int plan_shared(struct compare_plan *pl, const char *tune_spec, int tune_seeds) {
    struct pelab_opts *opts = &pl->opts;
    int rc;
    if ((rc = compare_variants_take_eval_opts(opts, pl->variants, pl->n_pes))) return rc;
    const char *names[MAX_PES]; /* the encodings themselves, for the check of the options */
    for (int p = 0; p < pl->n_pes; p++) names[p] = pl->variants[p].name;
    snprintf(pl->task, sizeof pl->task, "%s", pelab_opt_str(opts, pelab_train_options, "task"));
    snprintf(pl->preset, sizeof pl->preset, "%s", pelab_opt_str(opts, pelab_train_options, "preset"));
    rc = pelab_train_check_opts(opts, pl->task, names, pl->n_pes, " (see 'pelab help compare')");
    if (rc) return rc;
    const char *o = pelab_opt_str(opts, pelab_train_options, "out");
    if (o[0])
        snprintf(pl->out, sizeof pl->out, "%s", o);
    else
        snprintf(pl->out, sizeof pl->out, "runs/compare-%s", pl->task);
    pl->seed0 = (uint64_t)pelab_opt_real(opts, pelab_train_options, "seed");
    if (pl->tuning && (rc = compare_tune_parse(tune_spec, tune_seeds, pl->seed0, opts, &pl->tune))) return rc;
    /* --jobs: each child trains on threads/jobs threads (at least 1), a share fixed by the
     * options rather than by the runs left, so an interrupted run resumes on the thread count it
     * started with. The parent checks the runs on one thread: an OpenMP thread pool (libgomp's)
     * does not survive fork(), so none may exist when the children are forked. */
    pl->child_threads[0] = '\0';
    if (pl->jobs > 1) {
        const int threads = pelab_dist_threads((int)pelab_opt_int(opts, pelab_train_options, "threads"));
        const int share = threads / pl->jobs > 1 ? threads / pl->jobs : 1;
        snprintf(pl->child_threads, sizeof pl->child_threads, "%d", share);
        if ((rc = pelab_opts_set(opts, "threads", "1"))) return rc;
    }
    return PELAB_OK;
}

/* compare's own options out of the shared ones (given): the seeds, --jobs, the sweeps' texts
 * (into ck, with whether each was given) and the tuning grid's; then the shared ones. */
static int plan_options(const struct pelab_opts *given, struct compare_plan *pl, struct checks *ck) {
    struct pelab_opts *opts = &pl->opts;
    *opts = *given;
    pl->seeds = (int)pelab_opt_int(opts, compare_options, "seeds");
    pl->jobs = (int)pelab_opt_int(opts, compare_options, "jobs");
    snprintf(ck->lengths, PELAB_OPT_VAL_MAX, "%s", pelab_opt_str(opts, compare_options, "lengths"));
    if (!ck->lengths[0])
        return pelab_fail(PELAB_ERR_USAGE, "--lengths: an empty list (give lengths like 1x,2x,4x, "
                          "auto or none)");
    snprintf(ck->resolutions, PELAB_OPT_VAL_MAX, "%s", pelab_opt_str(opts, compare_options, "resolutions"));
    snprintf(ck->buckets, PELAB_OPT_VAL_MAX, "%s", pelab_opt_str(opts, compare_options, "buckets"));
    ck->buckets_given = pelab_opts_get(opts, "buckets") != NULL;
    ck->resolutions_given = pelab_opts_get(opts, "resolutions") != NULL;
    ck->lengths_given = pelab_opts_get(opts, "lengths") != NULL;
    if (!ck->resolutions[0])
        return pelab_fail(PELAB_ERR_USAGE, "--resolutions: an empty list (give sides like 28,56,84, "
                          "multiples like 1x,2x,3x, auto or none)");
    static char tune_spec[PELAB_OPT_VAL_MAX];
    snprintf(tune_spec, sizeof tune_spec, "%s", pelab_opt_str(opts, compare_options, "tune"));
    const int tune_seeds = (int)pelab_opt_int(opts, compare_options, "tune-seeds");
    pl->tuning = tune_spec[0] != '\0';
    if (!pl->tuning && pelab_opts_get(opts, "tune-seeds"))
        return pelab_fail(PELAB_ERR_USAGE, "--tune-seeds: no --tune grid to train on them (e.g. --tune "
                          "lr=3e-4,1e-3,3e-3)");
    /* in this order: an unset moves the last option into its place, so the order decides that
     * of the options left, which each run's options are built from */
    static const char *const own[] = {"tune", "tune-seeds", "lengths", "resolutions",
                                      "buckets", "pe", "seeds", "jobs"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) pelab_opts_unset(opts, own[i]);
    return plan_shared(pl, tune_spec, tune_seeds);
}

/* The sweep the task's kind makes (lengths, qa, resolutions, sizes; pelab/task.h) and which of
 * --lengths, --resolutions and --buckets apply to it: one given for another kind is a usage error;
 * auto becomes the kind's default list where it is fixed here. */
static int plan_sweep(struct compare_plan *pl, struct checks *ck) {
    struct compare_sweep *sweep = &pl->sweep;
    const char *task = pl->task;
    pl->tops = pelab_task_find(task);
    const enum pelab_task_sweep kind = pl->tops ? pl->tops->sweep : PELAB_TASK_SWEEP_NONE;
    ck->sweeps = kind == PELAB_TASK_SWEEP_LENGTHS && strcmp(ck->lengths, "none") != 0;
    sweep->qa = kind == PELAB_TASK_SWEEP_QA;
    if (sweep->qa && strcmp(ck->lengths, "auto") == 0)
        snprintf(ck->lengths, PELAB_OPT_VAL_MAX, QA_AUTO_LENGTHS);
    ck->qa_sweeps = sweep->qa && strcmp(ck->lengths, "none") != 0;
    sweep->image = kind == PELAB_TASK_SWEEP_RESOLUTIONS;
    if (ck->resolutions_given && !sweep->image)
        return pelab_fail(PELAB_ERR_USAGE, "--resolutions: task %s has no images (image task only)", task);
    if (sweep->image && ck->lengths_given)
        return pelab_fail(PELAB_ERR_USAGE, "--lengths: task %s is swept over image sides: give "
                          "--resolutions (e.g. 1x,2x,3x)", task);
    if (sweep->image && strcmp(ck->resolutions, "auto") == 0)
        snprintf(ck->resolutions, PELAB_OPT_VAL_MAX, IMAGE_AUTO_RESOLUTIONS);
    ck->image_sweeps = sweep->image && strcmp(ck->resolutions, "none") != 0;
    const int sized = kind == PELAB_TASK_SWEEP_SIZES; /* an algorithmic task */
    if (!ck->buckets[0])
        return pelab_fail(PELAB_ERR_USAGE, "--buckets: an empty list (give ranges of sizes like "
                          "1-20,21-40, auto or none)");
    if (ck->buckets_given && !sized)
        return pelab_fail(PELAB_ERR_USAGE, "--buckets: task %s has no instance sizes (the "
                          "algorithmic tasks only: 'pelab help tasks')", task);
    if (sized && ck->lengths_given)
        return pelab_fail(PELAB_ERR_USAGE, "--lengths: task %s is swept over instance sizes: give "
                          "--buckets (e.g. 1-20,21-40)", task);
    ck->size_sweeps = sized && strcmp(ck->buckets, "none") != 0;
    sweep->sizes = ck->size_sweeps; /* the runs' sizes are read only for a sweep of them */
    if (ck->qa_sweeps) { /* the lengths' form now; the task and the positions at each after training */
        struct pelab_sweep_length l[PELAB_SWEEP_MAX];
        int nl, rc;
        if ((rc = pelab_sweep_parse(ck->lengths, 1, l, &nl))) return rc;
    }
    return PELAB_OK;
}

/* The runs, planned and checked: every run's settings, and its sweep on the task and a fresh
 * model, before any run trains; with --tune the evaluation runs at every point of the grid (the
 * model and the sweep at each point once, on the first seed: a point's runs differ in their seed
 * alone), and the tuning runs' settings (they differ from those in their seed alone). */
static int plan_checked_runs(struct compare_plan *pl, const struct checks *ck) {
    static struct pelab_opts one;
    int rc;
    pl->n = 0, pl->n_tuning = 0;
    memcpy(pl->own, pl->variants, (size_t)pl->n_pes * sizeof pl->own[0]);
    if (pl->tuning) { /* the grid's runs, first: a grid too large is refused before any check */
        if ((rc = compare_tune_runs(&pl->tune, pl->own, pl->pes, pl->n_pes, pl->out, pl->tuning_runs,
                                    COMPARE_MAX_RUNS)))
            return rc;
        pl->n_tuning = pl->tune.n_runs;
    }
    for (int point = 0; point < (pl->tuning ? pl->tune.n_points : 1); point++) {
        for (int p = 0; pl->tuning && p < pl->n_pes; p++)
            if ((rc = compare_tune_point(&pl->tune, &pl->own[p], point, &pl->variants[p]))) return rc;
        if ((rc = compare_plan_runs(pl))) return rc;
        if ((rc = check_runs(pl, ck, pl->seed0 + (uint64_t)(point == 0 ? pl->seeds : 1)))) return rc;
    }
    if (pl->tuning) {
        for (int i = 0; i < pl->n_tuning; i++) {
            const struct compare_result *r = &pl->tuning_runs[i];
            if (r->shares >= 0) continue;
            if ((rc = compare_tune_point(&pl->tune, &pl->own[r->variant], r->point, &pl->variants[0])) ||
                (rc = compare_variant_run_opts(&pl->variants[0], &pl->opts, r->seed, r->dir, &one)) ||
                (rc = pelab_train_check_run_settings(&one, r->dir)))
                return rc;
        }
        /* tuning runs train at their points of these */
        memcpy(pl->variants, pl->own, (size_t)pl->n_pes * sizeof pl->own[0]);
    }
    return PELAB_OK;
}

int compare_plan_make(const struct pelab_opts *opts, struct compare_plan *pl) {
    static char lengths[PELAB_OPT_VAL_MAX], resolutions[PELAB_OPT_VAL_MAX], buckets[PELAB_OPT_VAL_MAX];
    struct checks ck = {.lengths = lengths, .resolutions = resolutions, .buckets = buckets};
    int rc;
    if ((rc = plan_entries(opts, pl)) || (rc = plan_options(opts, pl, &ck)) || (rc = plan_sweep(pl, &ck)) ||
        (rc = plan_checked_runs(pl, &ck)))
        return rc;
    /* the sweep's text, as the checks made it concrete (auto) */
    if ((ck.sweeps || ck.qa_sweeps) && strcmp(lengths, "none") != 0)
        snprintf(pl->sweep_spec, sizeof pl->sweep_spec, "%s", lengths);
    if (ck.image_sweeps) snprintf(pl->sweep_spec, sizeof pl->sweep_spec, "%s", resolutions);
    if (ck.size_sweeps) snprintf(pl->sweep_spec, sizeof pl->sweep_spec, "%s", buckets);
    return PELAB_OK;
}
