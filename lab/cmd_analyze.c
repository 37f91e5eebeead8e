/* pelab analyze: views of what a trained run has learned, as CSV and, with --png, as a figure.
 *
 *   bias   BIAS encodings (alibi, t5, fire, fire-shared): bias per layer, head and distance
 *          t − s = 0..max-distance, columns layer,head,distance,bias;
 *          encodings with a phase bias (ops->phase_bias, PoPE's δ): δ per layer, head and
 *          frequency as the forward pass uses it, columns layer,head,freq,theta,delta.
 *          PNG: one panel per layer, one line per head.
 *   freq   QK encodings with frequencies (rope, xpos, pope, pope2d): per layer and frequency the mean
 *          magnitude of the query and key components over tokens and heads (pelab/freq.h),
 *          columns layer,freq,theta,query_norm,key_norm.
 *          PNG: two heatmaps (queries, keys), layers × frequencies, one colour scale.
 *
 * Only freq runs the model on the task's examples; bias reads the weights alone, so it opens the
 * run without its task (pelab_run_open_model) and works where the dataset is not installed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "lab.h"
#include "plot.h"
#include "pelab/dist.h"
#include "pelab/freq.h"
#include "pelab/io.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "pelab/train.h"

/* The most rows of analyze bias's table, layers × heads × (max-distance + 1): 2^24, about 0.4 GB
 * of CSV and 128 MiB of values in memory. A 12-layer model of 12 heads reaches 116,000
 * distances, past ten times any training context here; a table beyond it fills a disk before
 * it shows what a shorter one does not. */
#define BIAS_MAX_ROWS (1L << 24)

int pelab_analyze_seqpe(int argc, char **argv); /* lab/analyze_seqpe.c */
int pelab_analyze_probe(int argc, char **argv); /* lab/analyze_probe.c */
int pelab_analyze_attn_similarity(int argc, char **argv); /* lab/analyze_attn_similarity.c */

static const struct pelab_optdef common_options[] = {
    {"model", PELAB_OPT_STR, "", 0, 0, NULL, "run directory (required)"},
    {"out", PELAB_OPT_STR, "-", 0, 0, NULL, "CSV file to write (replaced atomically), or - for standard output"},
    PELAB_OPT_ROW_EDITED,
    {"png", PELAB_OPT_STR, "", 0, 0, NULL,
     "also draw the figure into this PNG file (replaced atomically; needs a build with cairo)"},
    {"width", PELAB_OPT_INT, "1000", PELAB_PLOT_MIN_SIDE, PELAB_PLOT_MAX_SIDE, NULL, "PNG width in pixels"},
    {"height", PELAB_OPT_INT, "700", PELAB_PLOT_MIN_SIDE, PELAB_PLOT_MAX_SIDE, NULL, "PNG height in pixels"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

static const struct pelab_optdef bias_options[] = {
    {"max-distance", PELAB_OPT_INT, "0", 0, 1e7, NULL,
     "largest distance t − s shown (0: the run's training context T); the table holds at most 2^24 "
     "rows, layers × heads × (max-distance + 1)"},
    {"query-pos", PELAB_OPT_INT, "-1", -1, 2147483647.0, NULL,
     "query position t of every row, the key at s = t − distance (negative keys are "
     "evaluated by the formula as they are); −1: t = distance and s = 0. Only FIRE depends "
     "on it, through max(t, L)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

static const struct pelab_optdef freq_options[] = {
    {"batches", PELAB_OPT_INT, "4", 1, 1e6, NULL,
     "batches of the split to run the model on (fewer where the split ends: no example counts twice)"},
    {"batch", PELAB_OPT_INT, "0", 0, 65536, NULL, "examples per batch (0: the run's training --batch)"},
    {"split", PELAB_OPT_CHOICE, "val", 0, 0, "val|test|train", "split the examples come from (from its first example)"},
    PELAB_OPT_ROW_THREADS,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

static const struct {
    const char *name;
    const struct pelab_optdef *table;
    int reads_data; /* runs the model on the task's examples: the task (its dataset) is opened */
} analyses[] = {{"bias", bias_options, 0}, {"freq", freq_options, 1}};

void pelab_cmd_analyze_help(FILE *f) {
    struct pelab_group g[] = {{"options of every analysis", common_options},
                              {"analyze bias", bias_options}, {"analyze freq", freq_options}};
    fprintf(f, "usage: pelab analyze bias --model DIR [--out FILE|-] [--png FILE] [--max-distance N] [--query-pos N]\n"
               "       pelab analyze freq --model DIR [--out FILE|-] [--png FILE] [--batches N] [--batch N]\n"
               "                          [--split val|test|train] [--threads N]\n\n"
               "Writes what the run's positional encoding learned as CSV (and, with --png, a figure):\n"
               "bias  alibi, t5, fire, fire-shared: the attention bias of every layer and head for\n"
               "      distances t - s = 0..max-distance; columns layer,head,distance,bias.\n"
               "      By default the query sits at t = distance and the key at s = 0, so FIRE's\n"
               "      rows with t ≥ L = |ℓ|·T use the normaliser ψ(t) (see --query-pos).\n"
               "      pope: the phase bias δ of every layer, head and frequency as the forward pass\n"
               "      uses it (clamped to [−2π, 0] unless --pope-delta-clamp off); columns\n"
               "      layer,head,freq,theta,delta.\n"
               "      PNG: one panel per layer, one line per head, against distance (δ: frequency).\n"
               "freq  rope, xpos, pope, pope2d: frequency usage, the mean magnitude of each frequency's\n"
               "      query and key components over the real (non-padding) tokens of --batches\n"
               "      batches (stopping at the split's end, with a notice: no example counts twice)\n"
               "      and every head, per layer; columns layer,freq,theta,query_norm,key_norm.\n"
               "      rope, xpos: d/2 frequencies, the norm of pair c in the run's layout (unchanged\n"
               "      by the rotation; xpos before its decay). pope: d frequencies, μ_c = softplus(q_c);\n"
               "      pope2d: the same, the row's d/2 frequencies then the column's.\n"
               "      PNG: heatmaps of queries and keys, layers × frequency index, one colour bar.\n"
               "Other encodings: a usage error. Extrapolation sweeps and other CSV tables are drawn\n"
               "with 'pelab plot lines'.\n");
    pelab_args_help(f, g, 3, NULL);
    fprintf(f, "\nalso: pelab analyze seqpe --model DIR  (SeqPE's e_p . e_q matrix; its --help for options)\n"
               "      pelab analyze probe --model DIR  (indirect indexing: per checkpoint, layer and head,\n"
               "                                        the offset δ prefers and the attention around the\n"
               "                                        source letter; its --help for options)\n"
               "      pelab analyze attn-similarity --models A,B,...  (how alike runs' attention heads\n"
               "                                        are, the NoPE paper's section 5.2; its --help)\n");
}

/* Every option must be common or the analysis's own; another analysis's is named as such. */
static int check_opts(const struct pelab_opts *o, int which) {
    for (int i = 0; i < o->count; i++) {
        const char *key = o->kv[i].key;
        const struct pelab_optdef *d = pelab_optdef_find(common_options, key);
        if (!d) d = pelab_optdef_find(analyses[which].table, key);
        if (!d) {
            for (size_t a = 0; a < sizeof analyses / sizeof analyses[0]; a++)
                if (pelab_optdef_find(analyses[a].table, key))
                    return pelab_fail(PELAB_ERR_USAGE, "--%s is an option of analyze %s, not of analyze %s",
                                      key, analyses[a].name, analyses[which].name);
            return pelab_fail(PELAB_ERR_USAGE, "unknown option --%s (see 'pelab help analyze')", key);
        }
        int rc = pelab_optdef_check(d, o->kv[i].val);
        if (rc) return rc;
    }
    return PELAB_OK;
}

/* ---- output: the CSV, and the PNG before the CSV is committed ------------------------------- */

struct view {
    int (*csv)(FILE *f, const struct view *v);
    int (*png)(const char *path, int width, int height, const struct view *v);
    const char *dir, *pe;
    const char *freq_label; /* freq: what a frequency's magnitude is (ops->freq_label) */
    int N, H, n;     /* layers, heads, points per (layer, head): distances or frequencies */
    double *x;       /* (n,) distance or frequency index */
    double *theta;   /* (n,) frequency of each point, or NULL */
    double *a, *b;   /* (N,H,n) bias or δ; freq: (N,n) query and key magnitudes (H = 1) */
};

/* Writes the view's CSV to --out and its figure to --png; when the figure fails, the CSV is
 * not left behind either. */
static int emit(const struct pelab_opts *o, const struct view *v) {
    const char *path = pelab_opt_str(o, common_options, "out"), *png = pelab_opt_str(o, common_options, "png");
    struct pelab_atomic_file af = {0};
    FILE *f = stdout;
    int rc;
    if (strcmp(path, "-") != 0) {
        if ((rc = pelab_atomic_open(&af, path))) return rc;
        f = af.f;
    }
    rc = v->csv(f, v);
    if (!rc && png[0])
        rc = v->png(png, (int)pelab_opt_int(o, common_options, "width"),
                    (int)pelab_opt_int(o, common_options, "height"), v);
    if (f != stdout) {
        if (rc) pelab_atomic_abort(&af);
        else rc = pelab_atomic_commit(&af);
    } else if (fflush(stdout) != 0 && !rc) rc = pelab_fail(PELAB_ERR_RUNTIME, "writing standard output failed");
    return rc;
}

static void view_free(struct view *v) {
    free(v->x);
    free(v->theta);
    free(v->a);
    free(v->b);
}

static int view_alloc(struct view *v, int with_theta, int with_b) {
    const size_t n = (size_t)v->n, all = (size_t)v->N * v->H * n;
    v->x = malloc(n * sizeof *v->x);
    v->theta = with_theta ? malloc(n * sizeof *v->theta) : NULL;
    v->a = malloc(all * sizeof *v->a);
    v->b = with_b ? malloc(all * sizeof *v->b) : NULL;
    if (!v->x || (with_theta && !v->theta) || !v->a || (with_b && !v->b))
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %zu values", all);
    return PELAB_OK;
}

/* Panels per layer, a line per head: y = v->a against v->x. */
static int png_per_head(const char *path, int width, int height, const struct view *v, const char *title,
                        const char *xlabel, const char *ylabel) {
    struct pelab_plot_panel *panels = calloc((size_t)v->N, sizeof *panels);
    struct pelab_plot_series *series = calloc((size_t)v->N * v->H, sizeof *series);
    char (*labels)[32] = calloc((size_t)v->N + v->H, sizeof *labels); /* heads, then layers */
    int rc = PELAB_OK;
    if (!panels || !series || !labels) rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int l = 0; !rc && l < v->N; l++) {
        snprintf(labels[v->H + l], sizeof labels[0], "layer %d", l);
        for (int h = 0; h < v->H; h++) {
            snprintf(labels[h], sizeof labels[0], "head %d", h);
            series[l * v->H + h] = (struct pelab_plot_series){labels[h], v->x, v->a + ((size_t)l * v->H + h) * v->n, v->n};
        }
        panels[l] = (struct pelab_plot_panel){labels[v->H + l], xlabel, ylabel, 0, 0, series + l * v->H, v->H, 0, 0};
    }
    if (!rc) rc = pelab_plot_lines(path, width, height, title, panels, v->N);
    free(labels);
    free(series);
    free(panels);
    return rc;
}

/* ---- bias: BIAS encodings' bias per distance, PoPE's δ per frequency ------------------------ */

static int csv_bias(FILE *f, const struct view *v) {
    fprintf(f, "layer,head,distance,bias\n");
    for (int l = 0; l < v->N; l++)
        for (int h = 0; h < v->H; h++)
            for (int i = 0; i < v->n; i++)
                fprintf(f, "%d,%d,%d,%.9g\n", l, h, i, v->a[((size_t)l * v->H + h) * v->n + i]);
    return PELAB_OK;
}

static int png_bias(const char *path, int width, int height, const struct view *v) {
    char title[256];
    snprintf(title, sizeof title, "%s: attention bias by distance (%s)", v->pe, v->dir);
    return png_per_head(path, width, height, v, title, "distance t − s", "bias");
}

static int csv_delta(FILE *f, const struct view *v) {
    fprintf(f, "layer,head,freq,theta,delta\n");
    for (int l = 0; l < v->N; l++)
        for (int h = 0; h < v->H; h++)
            for (int c = 0; c < v->n; c++)
                fprintf(f, "%d,%d,%d,%.9g,%.9g\n", l, h, c, v->theta[c], v->a[((size_t)l * v->H + h) * v->n + c]);
    return PELAB_OK;
}

static int png_delta(const char *path, int width, int height, const struct view *v) {
    char title[256];
    snprintf(title, sizeof title, "%s: phase bias δ by frequency, as the forward pass uses it (%s)", v->pe, v->dir);
    return png_per_head(path, width, height, v, title, "frequency index c", "δ");
}

/* bias(t, s) of every layer and head along the distances 0..maxd, one tile per (layer, head):
 * queries 0..maxd against key 0, or query q against keys q − 0..q − maxd. */
static int fill_bias(struct view *v, struct pelab_model *m, int maxd, long query_pos) {
    const int n = maxd + 1, nq = query_pos < 0 ? n : 1, nk = query_pos < 0 ? 1 : n;
    v->n = n;
    int rc = view_alloc(v, 0, 0);
    int32_t *pq = malloc((size_t)nq * sizeof *pq), *pk = malloc((size_t)nk * sizeof *pk);
    pelab_real *out = malloc((size_t)n * sizeof *out);
    if (!rc && (!pq || !pk || !out)) rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d distances", n);
    if (rc) goto done;
    for (int i = 0; i < n; i++) {
        v->x[i] = i;
        if (query_pos < 0) pq[i] = i;
        else pk[i] = (int32_t)(query_pos - i);
    }
    if (query_pos < 0) pk[0] = 0;
    else pq[0] = (int32_t)query_pos;
    if ((rc = pelab_posenc_prepare(&m->pe, query_pos < 0 ? pq : pk, 1, n))) goto done;
    for (int l = 0; l < v->N; l++)
        for (int h = 0; h < v->H; h++) {
            m->pe.ops->bias_tile(&m->pe, l, h, out, pq, nq, pk, nk);
            for (int i = 0; i < n; i++) v->a[((size_t)l * v->H + h) * n + i] = out[i];
        }
done:
    free(pq);
    free(pk);
    free(out);
    return rc;
}

/* The phase bias δ (H, F) per layer as the forward pass uses it (ops->phase_bias), with each
 * frequency θ_c (ops->freqs). */
static int fill_delta(struct view *v, struct pelab_model *m) {
    const struct pelab_posenc_ops *ops = m->pe.ops;
    v->n = ops->freqs(&m->pe, NULL);
    int rc = view_alloc(v, 1, 0);
    if (rc) return rc;
    ops->freqs(&m->pe, v->theta);
    for (int c = 0; c < v->n; c++) v->x[c] = c;
    for (int l = 0; l < v->N; l++)
        if ((rc = ops->phase_bias(&m->pe, l, v->a + (size_t)l * v->H * v->n)))
            return pelab_fail(rc, "%s: %s: no bias to show", v->dir, pelab_last_error());
    return PELAB_OK;
}

/* "a, b": the registered encodings that act at a site in `sites` or have a phase bias. */
static void names_with(char *out, size_t size, unsigned sites, int phase_bias) {
    *out = 0;
    for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p; p++)
        if (((*p)->sites & sites) || (phase_bias && (*p)->phase_bias))
            snprintf(out + strlen(out), size - strlen(out), "%s%s", *out ? ", " : "", (*p)->name);
}

static int analyze_bias(const struct pelab_opts *opts, struct pelab_run *run, struct view *v) {
    struct pelab_model *m = &run->model;
    const int is_bias = m->pe.sites & PELAB_SITE_BIAS;
    if (!is_bias && !m->pe.ops->phase_bias) {
        char bias[256], phase[256];
        names_with(bias, sizeof bias, PELAB_SITE_BIAS, 0);
        names_with(phase, sizeof phase, 0, 1);
        return pelab_fail(PELAB_ERR_USAGE, "%s: encoding '%s' has no attention bias or phase bias δ to show "
                          "(bias: %s; δ: %s)", v->dir, m->pe.ops->name, bias, phase);
    }
    int maxd = (int)pelab_opt_int(opts, bias_options, "max-distance");
    if (maxd == 0) maxd = m->cfg.max_seq;
    const long rows = (long)v->N * v->H * (maxd + 1L);
    if (is_bias && rows > BIAS_MAX_ROWS)
        return pelab_fail(PELAB_ERR_USAGE, "--max-distance %d: %ld rows (%d layer%s × %d head%s × %d distances), "
                          "more than the %ld (2^24) analyze bias writes", maxd, rows, v->N, v->N == 1 ? "" : "s",
                          v->H, v->H == 1 ? "" : "s", maxd + 1, BIAS_MAX_ROWS);
    int rc = is_bias ? fill_bias(v, m, maxd, pelab_opt_int(opts, bias_options, "query-pos"))
                     : fill_delta(v, m);
    v->csv = is_bias ? csv_bias : csv_delta;
    v->png = is_bias ? png_bias : png_delta;
    return rc ? rc : emit(opts, v);
}

/* ---- freq: frequency usage ------------------------------------------------------------------- */

static int csv_freq(FILE *f, const struct view *v) {
    fprintf(f, "layer,freq,theta,query_norm,key_norm\n");
    for (int l = 0; l < v->N; l++)
        for (int c = 0; c < v->n; c++)
            fprintf(f, "%d,%d,%.9g,%.9g,%.9g\n", l, c, v->theta[c], v->a[(size_t)l * v->n + c],
                    v->b[(size_t)l * v->n + c]);
    return PELAB_OK;
}

static int png_freq(const char *path, int width, int height, const struct view *v) {
    char title[256];
    snprintf(title, sizeof title, "%s: frequency usage, mean %s over tokens and heads (%s)", v->pe,
             v->freq_label, v->dir);
    struct pelab_plot_matrix maps[2] = {
        {"queries", "frequency index c", "layer", v->a, v->N, v->n},
        {"keys", "frequency index c", "layer", v->b, v->N, v->n},
    };
    return pelab_plot_heatmaps(path, width, height, title, "mean magnitude", maps, 2);
}

static int analyze_freq(const struct pelab_opts *opts, struct pelab_run *run, struct view *v) {
    struct pelab_model *m = &run->model;
    struct pelab_freq fq;
    int rc = pelab_freq_init(&fq, m);
    if (rc) return pelab_fail(rc, "%s: %s", v->dir, pelab_last_error());
    int batch = (int)pelab_opt_int(opts, freq_options, "batch");
    if (batch == 0) batch = (int)pelab_opt_int(&run->settings, pelab_train_options, "batch");
    /* the choice index follows "val|test|train" */
    static const enum pelab_split splits[] = {PELAB_SPLIT_VAL, PELAB_SPLIT_TEST, PELAB_SPLIT_TRAIN};
    enum pelab_split split = splits[pelab_opt_choice(opts, freq_options, "split")];
    const int batches = (int)pelab_opt_int(opts, freq_options, "batches");
    rc = pelab_freq_collect(&fq, m, &run->task, split, 0, batches, batch);
    const uint64_t asked = (uint64_t)batches * (uint64_t)batch;
    if (!rc && fq.examples < asked)
        fprintf(stderr, "notice: the %s split holds %" PRIu64 " examples, each counted once: %" PRIu64 " in %d "
                "batch%s of %d, not the %" PRIu64 " of %d batch%s of %d asked for\n", pelab_split_name(split),
                run->task.ops->split_size(&run->task, split), fq.examples, fq.batches, fq.batches == 1 ? "" : "es",
                fq.batch, asked, batches, batches == 1 ? "" : "es", batch);
    v->H = 1;
    v->n = fq.n_freqs;
    if (!rc && fq.tokens == 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: the batches hold no tokens but padding", v->dir);
    if (!rc) rc = view_alloc(v, 1, 1);
    for (int c = 0; !rc && c < v->n; c++) {
        v->x[c] = c;
        v->theta[c] = fq.theta[c];
        for (int l = 0; l < v->N; l++) {
            v->a[(size_t)l * v->n + c] = pelab_freq_query(&fq, l, c);
            v->b[(size_t)l * v->n + c] = pelab_freq_key(&fq, l, c);
        }
    }
    pelab_freq_free(&fq);
    v->csv = csv_freq;
    v->png = png_freq;
    return rc ? rc : emit(opts, v);
}

int pelab_cmd_analyze(struct pelab_ctx *ctx, int argc, char **argv) {
    if (argc > 0 && (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0)) {
        pelab_cmd_analyze_help(stdout);
        return PELAB_OK;
    }
    if (argc < 1 || strncmp(argv[0], "--", 2) == 0)
        return pelab_fail(PELAB_ERR_USAGE, "analyze needs an analysis first: pelab analyze bias|freq|seqpe|probe|attn-similarity --model DIR");
    if (strcmp(argv[0], "seqpe") == 0) return pelab_analyze_seqpe(argc - 1, argv + 1);
    if (strcmp(argv[0], "probe") == 0) return pelab_analyze_probe(argc - 1, argv + 1);
    if (strcmp(argv[0], "attn-similarity") == 0) return pelab_analyze_attn_similarity(argc - 1, argv + 1);
    int which = -1;
    for (size_t a = 0; a < sizeof analyses / sizeof analyses[0]; a++)
        if (strcmp(argv[0], analyses[a].name) == 0) which = (int)a;
    if (which < 0) return pelab_fail(PELAB_ERR_USAGE, "analyze: unknown analysis '%s' (known: bias, freq, seqpe, probe, attn-similarity)", argv[0]);
    struct pelab_group g[] = {{"options", common_options}, {"options", bias_options}, {"options", freq_options}};
    static struct pelab_opts opts;
    int help;
    int rc = pelab_args_parse(argc - 1, argv + 1, g, 3, &opts, &help);
    if (!rc) rc = check_opts(&opts, which);
    if (rc) return rc;
    if (help) {
        pelab_cmd_analyze_help(stdout);
        return PELAB_OK;
    }
    const char *dir = pelab_opt_str(&opts, common_options, "model");
    if (!dir[0]) return pelab_fail(PELAB_ERR_USAGE, "--model DIR is required (a run directory)");
    if (pelab_opt_str(&opts, common_options, "png")[0] && !pelab_plot_available())
        return pelab_plot_unavailable("--png");
    if (which == 1) pelab_threads_set(pelab_dist_threads((int)pelab_opt_int(&opts, freq_options, "threads")));
    pelab_safetensors_accept_edited(pelab_opt_switch(&opts, common_options, "edited"));
    const char *out = pelab_opt_str(&opts, common_options, "out");
    const char *png = pelab_opt_str(&opts, common_options, "png");
    if (strcmp(out, "-") != 0 && (rc = pelab_check_output("--out", out))) return rc;
    if (png[0] && (rc = pelab_check_output("--png", png))) return rc;
    static struct pelab_run run;
    rc = analyses[which].reads_data ? pelab_run_open(&run, dir) : pelab_run_open_model(&run, dir);
    if (rc) return rc;
    struct view v = {.dir = dir, .pe = run.model.pe.ops->name, .N = run.model.cfg.n_layers,
                     .H = run.model.cfg.n_heads,
                     .freq_label = run.model.pe.ops->freq_label ? run.model.pe.ops->freq_label : "magnitude"};
    rc = which == 0 ? analyze_bias(&opts, &run, &v) : analyze_freq(&opts, &run, &v);
    view_free(&v);
    pelab_run_close(&run);
    return rc;
}
