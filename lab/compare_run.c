/* compare's run (lab/compare_plan.h): the plan's runs trained where they are not finished, one
 * after another in this process or --jobs at a time, each in a child process (lab/jobs.c) that
 * does what the sequential loop does; a run another process trains is waited for; then each run's
 * sweep. With --tune the grid's runs train first, and each entry's runs at the point it chose
 * (lab/compare_tune.c). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compare_plan.h"
#include "compare_sweep.h"
#include "jobs.h"
#include "pelab/clock.h"
#include "pelab/io.h"
#include "pelab/precision.h"
#include "pelab/status.h"
#include "pelab/sweep.h"
#include "pelab/threads.h"
#include "pelab/train.h"

#define MAX_PES COMPARE_MAX_PES
#define MAX_SEEDS COMPARE_MAX_SEEDS

/* Fails with the current last error prefixed by `where` (copied first: pelab_fail writes the
 * buffer that pelab_last_error reads), unless the message names it first already. */
static int fail_naming(int code, const char *where) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pelab_last_error());
    const size_t n = strlen(where);
    if (strncmp(msg, where, n) == 0 && msg[n] == ':') return pelab_fail(code, "%s", msg);
    return pelab_fail(code, "%s: %s", where, msg);
}

/* "[rope s1]"; a tuning run's with its point, "[rope lr=3e-3 s1001]". */
static void run_label(char *buf, size_t size, const struct compare_plan *pl, const struct compare_result *r) {
    char point[96] = "";
    if (r->point >= 0) {
        point[0] = ' ';
        compare_tune_point_text(&pl->tune, r->point, point + 1, sizeof point - 1);
    }
    snprintf(buf, size, "[%.50s%s s%" PRIu64 "]", r->pe, point, r->seed);
}

/* What a finished run's summary.json (path) says of the builds that trained it, where they are
 * not this one alone or its products (bf16 ones for a bf16 run, else float32) were another
 * library's: " (trained by commit A, B [with float32 products: P]; this build is C [with Q])",
 * else "". Its numbers come from that arithmetic. */
static void other_build(char *note, size_t size, const char *path) {
    struct pelab_json *j = NULL;
    note[0] = '\0';
    if (pelab_json_load(path, &j)) { /* compare reads it again, and says what is wrong */
        pelab_clear_error();
        return;
    }
    const struct pelab_json *by = pelab_json_get(j, "trained-by");
    if (by && (by->type != PELAB_JSON_ARRAY || by->count == 0)) by = NULL;
    const struct pelab_json *bf16 = pelab_json_get(j, "bf16-products");
    const struct pelab_json *theirs = bf16 ? bf16 : pelab_json_get(j, "float32-products");
    const char *kind = bf16 ? "bf16" : "float32", *mine = bf16 ? pelab_bf16_kernels() : pelab_sgemm_kernels();
    const char *products = theirs && theirs->type == PELAB_JSON_STRING ? theirs->string : "not recorded";
    const int ours = by && by->count == 1 && by->items[0]->type == PELAB_JSON_STRING &&
                     strcmp(by->items[0]->string, pelab_commit()) == 0;
    const int same_products = strcmp(products, mine) == 0;
    struct pelab_sb sb = {0};
    if (!ours || !same_products) {
        if (!by) pelab_sb_printf(&sb, "by a build that did not record its commit");
        for (int i = 0; by && i < by->count; i++)
            pelab_sb_printf(&sb, "%s%s", i ? ", " : "by commit ",
                            by->items[i]->type == PELAB_JSON_STRING ? by->items[i]->string : "?");
        if (!same_products) pelab_sb_printf(&sb, " with %s products: %s", kind, products);
        pelab_sb_printf(&sb, "; this build is %s", pelab_commit());
        if (!same_products) pelab_sb_printf(&sb, " with %s", mine);
        snprintf(note, size, " (trained %s)", sb.data);
    }
    pelab_sb_free(&sb);
    pelab_json_free(j);
}

/* Whether r is not to be trained, said on stderr: it has its summary.json (and the builds that
 * trained it, when not this one), or it shares the run of an earlier entry (it differs only in
 * evaluation-time options). */
static int finished_earlier(const struct compare_plan *pl, const struct compare_result *r) {
    char path[sizeof r->dir + 16], label[160], note[1024] = "";
    snprintf(path, sizeof path, "%s/summary.json", r->dir);
    const int done = pelab_file_exists(path);
    if (!done && r->shares < 0) return 0;
    run_label(label, sizeof label, pl, r);
    if (r->shares < 0) other_build(note, sizeof note, path);
    fprintf(stderr, "%s  %s: %s%s\n", label, r->shares >= 0 ? "shares the run" : "finished earlier", r->dir,
            note);
    return 1;
}

#define CHILD_LINE_S 30 /* a --jobs child prints a step line at most this often */

/* Progress of a --jobs child: plain lines, never a line redrawn in place, and only the start,
 * the end and a logged step every CHILD_LINE_S seconds, so that several runs stay readable. */
struct child_printer {
    struct pelab_progress_printer pp;
    double last_line_s;
};

static void child_progress(void *ctx, const struct pelab_train_progress *p) {
    struct child_printer *cp = ctx;
    if (p->event == PELAB_TRAIN_START) cp->last_line_s = p->elapsed_s;
    if (p->event == PELAB_TRAIN_STEP) {
        if (!p->logged || p->elapsed_s - cp->last_line_s < CHILD_LINE_S) return;
        cp->last_line_s = p->elapsed_s;
    }
    pelab_progress_print(&cp->pp, p);
}

/* The run's sweep of the plan's sweep_spec, kept in its directory (compare_sweep.h): perplexity
 * per length into at (qa: span perplexity, and exact match into em), image accuracy per side, or
 * exact match per bucket of sizes. */
static int run_sweep(struct compare_plan *pl, const struct compare_result *r, double *at, double *em) {
    const struct pelab_opts *eval = &pl->variants[r->variant].eval;
    const char *sweep_spec = pl->sweep_spec;
    struct compare_sweep *sw = &pl->sweep;
    if (sw->sizes) {
        static double all[PELAB_SIZES_MAX];
        double *x = r->size_em ? r->size_em : all;
        int train_max, test_max;
        int rc = pelab_compare_sizes(r->dir, eval, &train_max, &test_max, x);
        if (!rc && (train_max != sw->train_max || test_max != sw->test_max)) /* a run made earlier */
            return pelab_fail(PELAB_ERR_USAGE, "it was trained on sizes 1..%d and tested on 1..%d, this "
                              "comparison asks 1..%d and 1..%d (--algo-train-max, --algo-test-max): give "
                              "another --out", train_max, test_max, sw->train_max, sw->test_max);
        for (int b = 0; !rc && b < sw->n; b++) { /* equal examples per size: the bucket's exact match */
            at[b] = 0;
            for (int k = sw->lo[b]; k <= sw->hi[b]; k++) at[b] += x[k - 1];
            at[b] /= sw->hi[b] - sw->lo[b] + 1;
        }
        return rc;
    }
    if (sw->image) return pelab_compare_resolutions(r->dir, sweep_spec, eval, sw->lengths, &sw->n, at);
    if (sw->qa) return pelab_compare_qa_sweep(r->dir, sweep_spec, eval, sw->lengths, &sw->n, at, em);
    return pelab_compare_sweep(r->dir, sweep_spec, eval, sw->lengths, &sw->n, at);
}

/* Trains one run, or continues it from its config.json: the whole work of the sequential loop
 * for a run, and of a --jobs child (`child`: progress as a child prints it). A tuning run trains
 * at its point of the grid and is not swept. */
static int train_one(struct compare_plan *pl, const struct pelab_opts *opts, const struct compare_result *r, int child) {
    static struct pelab_opts one;
    static struct compare_variant at_point;
    char path[sizeof r->dir + 16], label[160];
    run_label(label, sizeof label, pl, r);
    struct child_printer cp = {.last_line_s = 0};
    pelab_progress_printer_init(&cp.pp, label);
    struct pelab_train_hooks hooks = {pelab_progress_print, &cp.pp};
    if (child) {
        cp.pp.tty = 0;
        hooks = (struct pelab_train_hooks){child_progress, &cp};
    }
    int rc;
    snprintf(path, sizeof path, "%s/config.json", r->dir);
    const int resume = pelab_file_exists(path);
    if (resume) {
        /* An interrupted run continues with its own settings. */
        memset(&one, 0, sizeof one);
        const char *threads = pelab_opts_get(opts, "threads");
        if (threads && (rc = pelab_opts_set(&one, "threads", threads))) return rc;
    } else {
        const struct compare_variant *v = &pl->variants[r->variant];
        if (r->point >= 0 && (rc = compare_tune_point(&pl->tune, v, r->point, &at_point))) return rc;
        if ((rc = compare_variant_run_opts(r->point >= 0 ? &at_point : v, opts, r->seed, r->dir, &one))) return rc;
    }
    pelab_eval_set_progress(pelab_eval_progress_print, label); /* its evaluations' progress */
    rc = resume ? pelab_train_resume(r->dir, &one, &hooks) : pelab_train(&one, &hooks);
    pelab_progress_printer_end(&cp.pp);
    /* The run's extrapolation sweep while its process and threads are at hand: with --jobs the
     * sweeps run in parallel too; the parent then reads them from RUN/sweep.json. */
    if (!rc && pl->sweep_spec[0] && r->point < 0)
        rc = run_sweep(pl, r, (double[PELAB_SWEEP_MAX]){0}, (double[PELAB_SWEEP_MAX]){0});
    pelab_eval_set_progress(pelab_eval_progress_print, NULL);
    return rc ? fail_naming(rc, r->dir) : PELAB_OK;
}

/* train_one after any other process that trains r (another compare on this --out, a resume by
 * hand): a line names it and its run is waited for, then read if that process finished it, or
 * continued here if it stopped. A process that locked r at the same moment as this one (two
 * compares started together) is waited for alike. */
static int train_after_others(struct compare_plan *pl, const struct pelab_opts *opts, const struct compare_result *r,
                              int child) {
    char label[80], summary[sizeof r->dir + 16];
    run_label(label, sizeof label, pl, r);
    snprintf(summary, sizeof summary, "%s/summary.json", r->dir);
    for (;;) {
        const long pid = pelab_flock_holder(r->dir);
        if (pid) {
            fprintf(stderr, "%s  waits for process %ld, which is training %s\n", label, pid, r->dir);
            pelab_flock_wait(r->dir);
            if (pelab_file_exists(summary)) {
                fprintf(stderr, "%s  finished by process %ld: %s\n", label, pid, r->dir);
                return PELAB_OK;
            }
        }
        const int rc = train_one(pl, opts, r, child);
        if (!rc || !pelab_flock_holder(r->dir)) return rc;
    }
}

/* The line after each run: how many of this invocation's runs are done, and apart those that
 * failed or were stopped by a signal (never counted as done), and about how long the rest take:
 * each run still to go is taken to last the mean of those done (w), a running one what it has left
 * of w, and `parallel` of them run at once. No estimate before a run is done. */
static void overall_progress(const struct pelab_job *js, int total, int parallel, double started_s) {
    double now = pelab_clock_s(), w = 0, work = 0;
    int done = 0, failed = 0, stopped = 0;
    for (int i = 0; i < total; i++) {
        if (js[i].end_s == 0) continue;
        if (js[i].status >= 128) { /* 128 + the signal that killed its child (lab/jobs.h) */
            stopped++;
            continue;
        }
        if (js[i].status) {
            failed++;
            continue;
        }
        w += js[i].end_s - js[i].start_s;
        done++;
    }
    if (done) w /= done;
    for (int i = 0; i < total; i++)
        if (js[i].end_s == 0) work += js[i].start_s > 0 ? fmax(0, w - (now - js[i].start_s)) : w;
    char el[32], left[48] = "", others[48] = "";
    pelab_format_duration(el, sizeof el, now - started_s);
    if (failed) snprintf(others, sizeof others, ", %d failed", failed);
    if (stopped) snprintf(others + strlen(others), sizeof others - strlen(others), ", %d stopped", stopped);
    if (done && done + failed + stopped < total) {
        char t[32];
        pelab_format_duration(t, sizeof t, work / parallel);
        snprintf(left, sizeof left, "; about %s left", t);
    }
    fprintf(stderr, "compare: %d of %d runs done%s in %s%s\n", done, total, others, el, left);
}

/* --jobs: the unfinished runs, `jobs` at a time, each trained by train_one in a child. */
struct batch {
    struct compare_plan *pl;
    const struct pelab_opts *opts;
    struct compare_result *rs;
    const int *todo; /* job → index in rs */
    const struct pelab_job *js;
    int total, parallel;
    double started_s;
};

static int train_job(void *ctx, int i) {
    const struct batch *b = ctx;
    return train_after_others(b->pl, b->opts, &b->rs[b->todo[i]], 1);
}

static void job_ended(void *ctx, int i, int reaped) {
    const struct batch *b = ctx;
    overall_progress(b->js, b->total, b->parallel, b->started_s);
}

/* Whether a failed run is a tuning run whose training stopped on a non-finite loss (its error
 * `error`): then marked diverged, its point of the grid out of the choice, and said on stderr. */
static int diverged(const struct compare_plan *pl, struct compare_result *r, const char *error) {
    if (r->point < 0 || !compare_tune_diverged(error)) return 0;
    char label[160];
    run_label(label, sizeof label, pl, r);
    fprintf(stderr, "%s  diverged, its point is not chosen: %s\n", label, error);
    r->diverged = 1;
    return 1;
}

static int train_parallel(struct compare_plan *pl, const struct pelab_opts *opts, struct compare_result *rs, int n,
                          int jobs) {
    static int todo[MAX_PES * MAX_SEEDS];
    static struct pelab_job js[MAX_PES * MAX_SEEDS];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!finished_earlier(pl, &rs[i])) {
            run_label(js[m].name, sizeof js[m].name, pl, &rs[i]);
            todo[m++] = i;
        }
    struct batch b = {pl, opts, rs, todo, js, m, jobs, pelab_clock_s()};
    int failed = pelab_jobs_run(js, m, jobs, train_job, job_ended, &b);
    for (int i = 0; i < m; i++)
        if (js[i].status && diverged(pl, &rs[todo[i]], js[i].error)) failed--;
        else if (js[i].status) fprintf(stderr, "%s  failed: %s\n", js[i].name, js[i].error);
    if (failed)
        return pelab_fail(PELAB_ERR_RUNTIME, "%d of %d runs failed (listed above)", failed, m);
    return PELAB_OK;
}

/* Trains the runs rs (n) that are not finished, --jobs at a time (1: one after another in this
 * process; else in children on pl->child_threads threads each), then reads every run's
 * summary.json (a diverged tuning run has none; a run that shares another's is read from it). */
static int train_runs(struct compare_plan *pl, struct compare_result *rs, int n) {
    struct pelab_opts *opts = &pl->opts;
    int rc;
    if (pl->jobs == 1) {
        static struct pelab_job js[MAX_PES * MAX_SEEDS]; /* the runs to train, for their times */
        int todo = 0, done = 0;
        for (int i = 0; i < n; i++) todo += !finished_earlier(pl, &rs[i]);
        const double started_s = pelab_clock_s();
        for (int i = 0; i < n; i++) {
            char path[sizeof rs[i].dir + 16];
            snprintf(path, sizeof path, "%s/summary.json", rs[i].dir);
            if (rs[i].shares < 0 && !pelab_file_exists(path)) {
                js[done].start_s = pelab_clock_s();
                if ((rc = train_after_others(pl, opts, &rs[i], 0)) && !diverged(pl, &rs[i], pelab_last_error())) return rc;
                js[done++].end_s = pelab_clock_s();
                if (todo > 1) overall_progress(js, todo, 1, started_s);
            }
        }
    } else {
        if ((rc = pelab_opts_set(opts, "threads", pl->child_threads))) return rc;
        if ((rc = train_parallel(pl, opts, rs, n, pl->jobs))) return rc;
    }
    for (int i = 0; i < n; i++) {
        if (rs[i].shares >= 0) rs[i].diverged = rs[rs[i].shares].diverged;
        if (!rs[i].diverged && (rc = compare_read_summary(&rs[i]))) return rc;
    }
    return PELAB_OK;
}

/* With --tune: the grid's runs, then each entry's choice, said on stderr, and its evaluation runs
 * planned at the chosen point. */
static int tune(struct compare_plan *pl) {
    int rc;
    if ((rc = train_runs(pl, pl->tuning_runs, pl->n_tuning))) return rc;
    if ((rc = compare_tune_choose(&pl->tune, pl->pes, pl->n_pes))) return rc;
    for (int p = 0; p < pl->n_pes; p++) {
        char point[96];
        compare_tune_point_text(&pl->tune, pl->tune.chosen[p], point, sizeof point);
        fprintf(stderr, "compare: %s trains at %s, of least mean validation loss on the tuning seeds\n",
                pl->pes[p], point);
        if ((rc = compare_tune_point(&pl->tune, &pl->own[p], pl->tune.chosen[p], &pl->variants[p]))) return rc;
    }
    return compare_plan_runs(pl);
}

/* Each run's sweep (kept in its directory), read or made: a column per length, side or bucket of
 * sizes. */
static int sweep_runs(struct compare_plan *pl) {
    struct compare_result *rs = pl->rs;
    int rc = PELAB_OK;
    for (int i = 0; !rc && pl->sweep.sizes && i < pl->n; i++)
        if (!(rs[i].size_em = calloc(PELAB_SIZES_MAX, sizeof *rs[i].size_em)))
            rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int i = 0; !rc && pl->sweep_spec[0] && i < pl->n; i++) {
        char label[160];
        run_label(label, sizeof label, pl, &rs[i]);
        pelab_eval_set_progress(pelab_eval_progress_print, label);
        rc = run_sweep(pl, &rs[i], rs[i].at, rs[i].em);
        pelab_eval_set_progress(pelab_eval_progress_print, NULL);
        if (rc) rc = fail_naming(rc, rs[i].dir);
    }
    return rc;
}

int compare_run(struct compare_plan *pl) {
    int rc;
    if ((rc = pelab_mkdir_p(pl->out))) return rc;
    /* with --tune the grid first, then each entry's evaluation runs at its point */
    if (pl->tuning && (rc = tune(pl))) return rc;
    if ((rc = train_runs(pl, pl->rs, pl->n))) return rc;
    return sweep_runs(pl);
}
