/* pelab compare: train every encoding × seed with otherwise identical settings, each in
 * OUT/<pe>-s<seed>/, and print the paper-style table (test accuracy and loss, mean ± std over
 * seeds; on tasks of documents test NLL and perplexity and perplexity at each --lengths entry; on
 * images accuracy at each --resolutions side; on the algorithmic tasks exact match over each
 * --buckets range of sizes: the sweeps of lab/compare_sweep.c). An entry of --pe may be a variant
 * of an encoding with settings of its own, NAME:option=value:... (lab/compare_variant.c), so one
 * command runs an ablation (seqpe:seqpe-alpha=0,seqpe). Finished runs (summary.json present) are
 * reused, unfinished ones resumed, so an interrupted comparison continues where it stopped: either
 * only when the run's config.json records the settings asked (pelab_train_check_run_settings). With
 * --jobs N, N runs train at once, each in a child process (lab/jobs.c) that runs what the
 * sequential loop runs. With --tune, each entry first trains at every point of a grid of optimiser
 * settings on seeds of its own and then trains its seeds at the point of least validation loss
 * (the grid, its runs and the choice: lab/compare_tune.c). The statistics and the reports are
 * lab/compare_report.c's. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "lab.h"
#include "compare.h"
#include "compare_sweep.h"
#include "compare_tune.h"
#include "jobs.h"
#include "pelab/clock.h"
#include "pelab/dist.h"
#include "pelab/image.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/model.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/sweep.h"
#include "pelab/task.h"
#include "pelab/train.h"

#define MAX_PES COMPARE_MAX_PES
#define MAX_SEEDS COMPARE_MAX_SEEDS
#define AUTO_LENGTHS "1x,2x,4x,8x,10x" /* --lengths auto: those of these the task can evaluate */
#define QA_AUTO_LENGTHS "1x,2x,4x,8x"   /* --lengths auto for qa: the SeqPE paper's Table II */
#define IMAGE_AUTO_RESOLUTIONS "1x,2x,3x" /* --resolutions auto: the SeqPE paper's 224 → 672 */

/* What the runs of a comparison share beyond their options: the entries of --pe (with --tune,
 * at the point each chose once the grid is trained), the sweep each run makes after training (its
 * kind and columns, compare.h, and the checked --lengths, --resolutions or --buckets text; "" for
 * none), and the tuning grid (tuning: --tune given). */
struct plan {
    struct compare_variant variants[MAX_PES];
    struct compare_sweep sweep;
    char sweep_spec[PELAB_OPT_VAL_MAX];
    int tuning;
    struct compare_tune tune;
};


static const struct pelab_optdef compare_options[] = {
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

void pelab_cmd_compare_help(FILE *f) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_train_groups(g, "compare", compare_options);
    fprintf(f, "usage: pelab compare --task T --pe a,b,c [--seeds N] [--jobs N] [--preset P]\n"
               "                     [--tune OPTION=V1,V2,... [--tune-seeds N]]\n"
               "                     [--out DIR] [training, model, task and encoding options]\n\n"
               "Trains each encoding x seed in DIR/<pe>-s<seed>/ (default DIR runs/compare-<task>),\n"
               "evaluates test accuracy and loss, prints a Markdown table and writes\n"
               "DIR/compare.json. On tasks of documents (text, dna, music) the table has test\n"
               "NLL and perplexity, and perplexity at each --lengths entry on the long documents\n"
               "(each run's sweep is kept in its DIR/<pe>-s<seed>/sweep.json and reused; the\n"
               "means go to DIR/sweep.csv for 'pelab plot lines'). On task qa the columns are the\n"
               "answer-span perplexity and the exact match of a greedy generation at each length\n"
               "(RUN/qa_sweep.json; the SeqPE paper's Table II); --pe rope:init-from=R1,alibi:init-from=R2\n"
               "fine-tunes each encoding's own pre-trained run. On the algorithmic tasks (copy,\n"
               "reverse, ...) the columns are the test exact match over --buckets of instance\n"
               "sizes, inside and beyond the trained ones, first one row per run, then the\n"
               "mean and std over seeds (RUN/sizes.json; DIR/sizes.csv for 'pelab plot lines').\n"
               "A run DIR holds already is reused (finished) or continued (interrupted) only\n"
               "if its config.json records the settings asked (all but --out, --threads,\n"
               "--keep); otherwise compare stops before training, naming the settings that\n"
               "differ. A run another process is training (a second compare on the same --out)\n"
               "is waited for, with a line naming that process, then read if it finished the run\n"
               "or continued if it stopped. An encoding option applies to the runs of its\n"
               "encoding only; so does an encoding's evaluation-time option ('pelab help eval',\n"
               "e.g. --ape-extend interpolate), which applies to the sweeps of its runs (a\n"
               "variant may give one: learned:ape-extend=interpolate; entries that differ only in\n"
               "such options share their runs, each with its own sweep). With --jobs N > 1 the runs\n"
               "print a line when they start and end and one about every 30 s; the results equal\n"
               "--jobs 1 at the same threads per run.\n\n"
               "Over several seeds a cell whose runs split between solved (exact match or accuracy\n"
               ">= 90 %%) and not says \"k of n solved\"; on the algorithmic tasks an entry that fits\n"
               "its trained sizes (>= 90 %% exact match over them) in fewer than all its seeds is\n"
               "marked with a dagger and a line under the table. Then one line per two entries: the\n"
               "mean difference over the same seeds of the main metric (exact match over the trained\n"
               "sizes; test loss for documents and qa; else test accuracy) and its 95 %% confidence\n"
               "interval (Student t, n - 1 degrees of freedom), \"ahead\" only when the interval\n"
               "excludes 0, else \"level\". compare.json adds each mean's interval (*_ci95).\n\n"
               "--tune lr=3e-4,1e-3,3e-3 first trains each entry at every value (every point of\n"
               "the grid: lr=...:warmup=... tunes both) on --tune-seeds seeds from --seed + 1000,\n"
               "in DIR/tune/<pe>+lr-<v>-s<seed>/, and takes the point of least mean validation loss\n"
               "(the runs' summary.json val_loss, never the test split or a sweep; a tie goes to the\n"
               "smaller value; a point whose run stopped on a non-finite loss is never taken); its\n"
               "--seeds runs then train there, in DIR/<pe>+lr-<v>-s<seed>/. The table gains a column\n"
               "per tuned option, compare.json the grid and each choice. Options that place,\n"
               "schedule or evaluate a run, and the model's, are refused.\n");
    pelab_args_help(f, g, n, "pe,out");
}

/* Fails with the current last error prefixed by `where` (copied first: pelab_fail writes the
 * buffer that pelab_last_error reads), unless the message names it first already. */
static int fail_naming(int code, const char *where) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pelab_last_error());
    const size_t n = strlen(where);
    if (strncmp(msg, where, n) == 0 && msg[n] == ':') return pelab_fail(code, "%s", msg);
    return pelab_fail(code, "%s: %s", where, msg);
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

/* "[rope s1]"; a tuning run's with its point, "[rope lr=3e-3 s1001]". */
static void run_label(char *buf, size_t size, const struct plan *pl, const struct compare_result *r) {
    char point[96] = "";
    if (r->point >= 0) {
        point[0] = ' ';
        compare_tune_point_text(&pl->tune, r->point, point + 1, sizeof point - 1);
    }
    snprintf(buf, size, "[%.50s%s s%" PRIu64 "]", r->pe, point, r->seed);
}

/* Whether r is not to be trained, said on stderr: it has its summary.json, or it shares the run
 * of an earlier entry (it differs only in evaluation-time options). */
static int finished_earlier(const struct plan *pl, const struct compare_result *r) {
    char path[sizeof r->dir + 16], label[160];
    snprintf(path, sizeof path, "%s/summary.json", r->dir);
    const int done = pelab_file_exists(path);
    if (!done && r->shares < 0) return 0;
    run_label(label, sizeof label, pl, r);
    fprintf(stderr, "%s  %s: %s\n", label, r->shares >= 0 ? "shares the run" : "finished earlier", r->dir);
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
static int run_sweep(struct plan *pl, const struct compare_result *r, double *at, double *em) {
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
static int train_one(struct plan *pl, const struct pelab_opts *opts, const struct compare_result *r, int child) {
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
static int train_after_others(struct plan *pl, const struct pelab_opts *opts, const struct compare_result *r,
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
    struct plan *pl;
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
static int diverged(const struct plan *pl, struct compare_result *r, const char *error) {
    if (r->point < 0 || !compare_tune_diverged(error)) return 0;
    char label[160];
    run_label(label, sizeof label, pl, r);
    fprintf(stderr, "%s  diverged, its point is not chosen: %s\n", label, error);
    r->diverged = 1;
    return 1;
}

static int train_parallel(struct plan *pl, const struct pelab_opts *opts, struct compare_result *rs, int n,
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

/* Trains the runs rs (n) that are not finished, `jobs` at a time (1: one after another in this
 * process; else in children on child_threads threads each), then reads every run's summary.json
 * (a diverged tuning run has none; a run that shares another's is read from it). */
static int train_runs(struct plan *pl, struct pelab_opts *opts, struct compare_result *rs, int n, int jobs,
                      const char *child_threads) {
    int rc;
    if (jobs == 1) {
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
        if ((rc = pelab_opts_set(opts, "threads", child_threads))) return rc;
        if ((rc = train_parallel(pl, opts, rs, n, jobs))) return rc;
    }
    for (int i = 0; i < n; i++) {
        if (rs[i].shares >= 0) rs[i].diverged = rs[rs[i].shares].diverged;
        if (!rs[i].diverged && (rc = compare_read_summary(&rs[i]))) return rc;
    }
    return PELAB_OK;
}

/* The evaluation runs of the entries (pl->variants, each --seeds times from seed0) into rs (*n):
 * each in out/<run name>-s<seed>, sharing the run of an earlier entry that differs only in
 * evaluation-time options. */
static int plan_runs(const struct plan *pl, const char *const *pes, int n_pes, int seeds, uint64_t seed0,
                     const char *out, struct compare_result *rs, int *n) {
    *n = 0;
    for (int p = 0; p < n_pes; p++)
        for (int s = 0; s < seeds; s++) {
            struct compare_result *r = &rs[*n];
            memset(r, 0, sizeof *r);
            snprintf(r->pe, sizeof r->pe, "%s", pes[p]);
            r->variant = p;
            r->point = -1;
            r->seed = seed0 + (uint64_t)s;
            snprintf(r->dir, sizeof r->dir, "%s/%s-s%" PRIu64, out, pl->variants[p].run_name, r->seed);
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
 * (made concrete by the first check: "auto") and which sweep the runs make. */
struct checks {
    char *lengths, *resolutions, *buckets;
    int sweeps, image_sweeps, size_sweeps;
};

/* Each run of rs (n): a run its directory holds already must have been made with its settings;
 * those of a seed below validate_below are validated with their sweep on the task and a fresh
 * model (pelab_train_validate_with). */
static int check_runs(struct plan *pl, const struct pelab_opts *opts, const struct compare_result *rs, int n,
                      const struct checks *ck, uint64_t validate_below) {
    static struct pelab_opts one;
    for (int i = 0; i < n; i++) {
        const struct compare_result *r = &rs[i];
        int rc = compare_variant_run_opts(&pl->variants[r->variant], opts, r->seed, r->dir, &one);
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

int pelab_cmd_compare(int argc, char **argv) {
    static struct pelab_group g[PELAB_GROUPS_MAX];
    int ng = pelab_args_train_groups(g, "compare", compare_options);
    static struct pelab_opts opts, one;
    static struct plan pl;
    struct compare_sweep *sweep = &pl.sweep;
    int help;
    int rc = pelab_args_parse(argc, argv, g, ng, &opts, &help);
    if (rc) return rc;
    if (help) {
        pelab_cmd_compare_help(stdout);
        return PELAB_OK;
    }
    if ((rc = pelab_opts_check(&opts, compare_options))) return rc;
    /* The encoding list. */
    static char pe_buf[PELAB_OPT_VAL_MAX];
    snprintf(pe_buf, sizeof pe_buf, "%s", pelab_opt_str(&opts, compare_options, "pe"));
    for (const char *s = pe_buf;; s++) { /* "rope,,pope" or "rope," is a slip, not two names */
        size_t len = strcspn(s, ","), blank = strspn(s, " ");
        if (blank >= len)
            return pelab_fail(PELAB_ERR_USAGE, "--pe '%s': an empty entry (give names separated "
                              "by commas: rope,pope,nope)", pe_buf);
        s += len;
        if (!*s) break;
    }
    const char *pes[MAX_PES];
    int n_pes = 0;
    for (char *s = strtok(pe_buf, ", "); s; s = strtok(NULL, ", ")) {
        for (int i = 0; i < n_pes; i++)
            if (strcmp(pes[i], s) == 0)
                return pelab_fail(PELAB_ERR_USAGE, "--pe: '%s' is listed twice", s);
        if (n_pes == MAX_PES)
            return pelab_fail(PELAB_ERR_USAGE, "--pe: at most %d encodings", MAX_PES);
        if ((rc = compare_variant_parse(s, &pl.variants[n_pes]))) return rc;
        pes[n_pes++] = s;
    }
    const char *names[MAX_PES]; /* the encodings themselves, for the check of the options */
    for (int p = 0; p < n_pes; p++) names[p] = pl.variants[p].name;
    if (n_pes == 0) return pelab_fail(PELAB_ERR_USAGE, "--pe: no encoding given");
    int seeds = (int)pelab_opt_int(&opts, compare_options, "seeds");
    int jobs = (int)pelab_opt_int(&opts, compare_options, "jobs");
    static char lengths[PELAB_OPT_VAL_MAX];
    snprintf(lengths, sizeof lengths, "%s", pelab_opt_str(&opts, compare_options, "lengths"));
    if (!lengths[0])
        return pelab_fail(PELAB_ERR_USAGE, "--lengths: an empty list (give lengths like 1x,2x,4x, "
                          "auto or none)");
    static char resolutions[PELAB_OPT_VAL_MAX];
    snprintf(resolutions, sizeof resolutions, "%s", pelab_opt_str(&opts, compare_options, "resolutions"));
    static char buckets[PELAB_OPT_VAL_MAX];
    snprintf(buckets, sizeof buckets, "%s", pelab_opt_str(&opts, compare_options, "buckets"));
    const int buckets_given = pelab_opts_get(&opts, "buckets") != NULL;
    const int resolutions_given = pelab_opts_get(&opts, "resolutions") != NULL;
    const int lengths_given = pelab_opts_get(&opts, "lengths") != NULL;
    if (!resolutions[0])
        return pelab_fail(PELAB_ERR_USAGE, "--resolutions: an empty list (give sides like 28,56,84, "
                          "multiples like 1x,2x,3x, auto or none)");
    static char tune_spec[PELAB_OPT_VAL_MAX];
    snprintf(tune_spec, sizeof tune_spec, "%s", pelab_opt_str(&opts, compare_options, "tune"));
    const int tune_seeds = (int)pelab_opt_int(&opts, compare_options, "tune-seeds");
    pl.tuning = tune_spec[0] != '\0';
    if (!pl.tuning && pelab_opts_get(&opts, "tune-seeds"))
        return pelab_fail(PELAB_ERR_USAGE, "--tune-seeds: no --tune grid to train on them (e.g. --tune "
                          "lr=3e-4,1e-3,3e-3)");
    pelab_opts_unset(&opts, "tune");
    pelab_opts_unset(&opts, "tune-seeds");
    pelab_opts_unset(&opts, "lengths");
    pelab_opts_unset(&opts, "resolutions");
    pelab_opts_unset(&opts, "buckets");
    pelab_opts_unset(&opts, "pe");
    pelab_opts_unset(&opts, "seeds");
    pelab_opts_unset(&opts, "jobs");
    if ((rc = compare_variants_take_eval_opts(&opts, pl.variants, n_pes))) return rc;

    static char task[PELAB_OPT_VAL_MAX], out[PELAB_OPT_VAL_MAX + 32], preset[PELAB_OPT_VAL_MAX];
    snprintf(task, sizeof task, "%s", pelab_opt_str(&opts, pelab_train_options, "task"));
    snprintf(preset, sizeof preset, "%s", pelab_opt_str(&opts, pelab_train_options, "preset"));
    rc = pelab_train_check_opts(&opts, task, names, n_pes, " (see 'pelab help compare')");
    if (rc) return rc;
    const char *o = pelab_opt_str(&opts, pelab_train_options, "out");
    if (o[0])
        snprintf(out, sizeof out, "%s", o);
    else
        snprintf(out, sizeof out, "runs/compare-%s", task);
    uint64_t seed0 = (uint64_t)pelab_opt_real(&opts, pelab_train_options, "seed");
    if (pl.tuning && (rc = compare_tune_parse(tune_spec, tune_seeds, seed0, &opts, &pl.tune))) return rc;
    /* --jobs: each child trains on threads/jobs threads (at least 1), a share fixed by the
     * options rather than by the runs left, so an interrupted run resumes on the thread count it
     * started with. The parent checks the runs on one thread: an OpenMP thread pool (libgomp's)
     * does not survive fork(), so none may exist when the children are forked. */
    char child_threads[32] = "";
    if (jobs > 1) {
        const int threads = pelab_dist_threads((int)pelab_opt_int(&opts, pelab_train_options, "threads"));
        snprintf(child_threads, sizeof child_threads, "%d", threads / jobs > 1 ? threads / jobs : 1);
        if ((rc = pelab_opts_set(&opts, "threads", "1"))) return rc;
    }

    /* Every run's settings, and its sweep on the task and a fresh model, are checked before
     * the first one starts. */
    const struct pelab_task_ops *tops = pelab_task_find(task);
    const enum pelab_task_sweep kind = tops ? tops->sweep : PELAB_TASK_SWEEP_NONE;
    const int sweeps = kind == PELAB_TASK_SWEEP_LENGTHS && strcmp(lengths, "none") != 0;
    sweep->qa = kind == PELAB_TASK_SWEEP_QA;
    if (sweep->qa && strcmp(lengths, "auto") == 0) snprintf(lengths, sizeof lengths, QA_AUTO_LENGTHS);
    const int qa_sweeps = sweep->qa && strcmp(lengths, "none") != 0;
    sweep->image = kind == PELAB_TASK_SWEEP_RESOLUTIONS;
    if (resolutions_given && !sweep->image)
        return pelab_fail(PELAB_ERR_USAGE, "--resolutions: task %s has no images (image task only)", task);
    if (sweep->image && lengths_given)
        return pelab_fail(PELAB_ERR_USAGE, "--lengths: task %s is swept over image sides: give "
                          "--resolutions (e.g. 1x,2x,3x)", task);
    if (sweep->image && strcmp(resolutions, "auto") == 0)
        snprintf(resolutions, sizeof resolutions, IMAGE_AUTO_RESOLUTIONS);
    const int image_sweeps = sweep->image && strcmp(resolutions, "none") != 0;
    const int sized = kind == PELAB_TASK_SWEEP_SIZES; /* an algorithmic task */
    if (!buckets[0])
        return pelab_fail(PELAB_ERR_USAGE, "--buckets: an empty list (give ranges of sizes like "
                          "1-20,21-40, auto or none)");
    if (buckets_given && !sized)
        return pelab_fail(PELAB_ERR_USAGE, "--buckets: task %s has no instance sizes (the "
                          "algorithmic tasks only: 'pelab help tasks')", task);
    if (sized && lengths_given)
        return pelab_fail(PELAB_ERR_USAGE, "--lengths: task %s is swept over instance sizes: give "
                          "--buckets (e.g. 1-20,21-40)", task);
    const int size_sweeps = sized && strcmp(buckets, "none") != 0;
    sweep->sizes = size_sweeps; /* the runs' sizes are read only for a sweep of them */
    if (qa_sweeps) { /* the lengths' form now; the task and the positions at each after training */
        struct pelab_sweep_length l[PELAB_SWEEP_MAX];
        int nl;
        if ((rc = pelab_sweep_parse(lengths, 1, l, &nl))) return rc;
    }
    /* Every run's settings, and its sweep on the task and a fresh model, are checked before any
     * run trains; with --tune the evaluation runs at every point of the grid (the model and the
     * sweep at each point once, on the first seed: a point's runs differ in their seed alone), and
     * the tuning runs' settings (they differ from those in their seed alone). */
    struct checks ck = {lengths, resolutions, buckets, sweeps, image_sweeps, size_sweeps};
    static struct compare_result rs[MAX_PES * MAX_SEEDS], tuning[MAX_PES * MAX_SEEDS];
    static struct compare_variant own[MAX_PES]; /* the entries' own variants, at no point */
    int n = 0, n_tuning = 0;
    memcpy(own, pl.variants, (size_t)n_pes * sizeof own[0]);
    if (pl.tuning) { /* the grid's runs, first: a grid too large is refused before any check */
        if ((rc = compare_tune_runs(&pl.tune, own, pes, n_pes, out, tuning, MAX_PES * MAX_SEEDS))) return rc;
        n_tuning = pl.tune.n_runs;
    }
    for (int point = 0; point < (pl.tuning ? pl.tune.n_points : 1); point++) {
        for (int p = 0; pl.tuning && p < n_pes; p++)
            if ((rc = compare_tune_point(&pl.tune, &own[p], point, &pl.variants[p]))) return rc;
        if ((rc = plan_runs(&pl, pes, n_pes, seeds, seed0, out, rs, &n))) return rc;
        if ((rc = check_runs(&pl, &opts, rs, n, &ck, seed0 + (uint64_t)(point == 0 ? seeds : 1)))) return rc;
    }
    if (pl.tuning) {
        for (int i = 0; i < n_tuning; i++) {
            if (tuning[i].shares >= 0) continue;
            if ((rc = compare_tune_point(&pl.tune, &own[tuning[i].variant], tuning[i].point, &pl.variants[0])) ||
                (rc = compare_variant_run_opts(&pl.variants[0], &opts, tuning[i].seed, tuning[i].dir, &one)) ||
                (rc = pelab_train_check_run_settings(&one, tuning[i].dir)))
                return rc;
        }
        memcpy(pl.variants, own, (size_t)n_pes * sizeof own[0]); /* tuning runs train at their points of these */
    }
    if ((rc = pelab_mkdir_p(out))) return rc;

    if ((sweeps || qa_sweeps) && strcmp(lengths, "none") != 0) snprintf(pl.sweep_spec, sizeof pl.sweep_spec, "%s", lengths);
    if (image_sweeps) snprintf(pl.sweep_spec, sizeof pl.sweep_spec, "%s", resolutions);
    if (size_sweeps) snprintf(pl.sweep_spec, sizeof pl.sweep_spec, "%s", buckets);
    if (pl.tuning) { /* the grid first, then each entry's evaluation runs at its point */
        if ((rc = train_runs(&pl, &opts, tuning, n_tuning, jobs, child_threads))) return rc;
        if ((rc = compare_tune_choose(&pl.tune, pes, n_pes))) return rc;
        for (int p = 0; p < n_pes; p++) {
            char point[96];
            compare_tune_point_text(&pl.tune, pl.tune.chosen[p], point, sizeof point);
            fprintf(stderr, "compare: %s trains at %s, of least mean validation loss on the tuning seeds\n",
                    pes[p], point);
            if ((rc = compare_tune_point(&pl.tune, &own[p], pl.tune.chosen[p], &pl.variants[p]))) return rc;
        }
        if ((rc = plan_runs(&pl, pes, n_pes, seeds, seed0, out, rs, &n))) return rc;
    }
    if ((rc = train_runs(&pl, &opts, rs, n, jobs, child_threads))) return rc;
    /* Each run's sweep (kept in its directory): a column per length, side or bucket of sizes. */
    for (int i = 0; !rc && sweep->sizes && i < n; i++)
        if (!(rs[i].size_em = calloc(PELAB_SIZES_MAX, sizeof *rs[i].size_em)))
            rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int i = 0; !rc && pl.sweep_spec[0] && i < n; i++) {
        char label[160];
        run_label(label, sizeof label, &pl, &rs[i]);
        pelab_eval_set_progress(pelab_eval_progress_print, label);
        rc = run_sweep(&pl, &rs[i], rs[i].at, rs[i].em);
        pelab_eval_set_progress(pelab_eval_progress_print, NULL);
        if (rc) rc = fail_naming(rc, rs[i].dir);
    }
    if (!rc)
        rc = compare_report(out, task, preset, rs, n, pes, n_pes, tops && tops->windows, sweep,
                            pl.tuning ? &pl.tune : NULL);
    for (int i = 0; i < n; i++) free(rs[i].size_em);
    if (rc) return rc;
    int runs = 0, tuned = 0;
    for (int i = 0; i < n; i++) runs += rs[i].shares < 0;
    for (int i = 0; i < n_tuning; i++) tuned += tuning[i].shares < 0;
    if (tuned)
        printf("\n%d runs in %s and %d tuning runs in %s/tune; results in %s/compare.json\n", runs, out, tuned,
               out, out);
    else
        printf("\n%d runs in %s; results in %s/compare.json\n", runs, out, out);
    return PELAB_OK;
}
