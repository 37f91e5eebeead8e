/* pelab analyze attn-similarity: how alike the attention of several runs is, on the same inputs
 * (the NoPE paper, Kazemnejad et al. 2023, §5.2, which finds NoPE's heads closest to T5's and far
 * from the absolute encodings' and RoPE's).
 *
 * Every run reads the same --examples sequences of --split (an algorithmic task: the test
 * examples of --size, by default its largest, beyond the trained sizes), with the reference
 * kernel, which keeps the attention probabilities. For two runs A and B and a layer l, head i of A
 * and head j of B have the divergence
 *
 *     D_l(i, j) = mean over sequences and real query positions t of JSD(att_A(t, ·), att_B(t, ·))
 *
 * (pelab/attn_similarity.h; nats, 0..ln 2), and the layer's value is min over (i, j): whether any
 * head of B attends as some head of A does. D(A, B) is the mean over layers (the runs must have as
 * many). Runs are grouped by encoding (their --pe, with :random-positions=N when set): the entry
 * (g, h) of the matrix is the mean and standard deviation of D(A, B) over the pairs of distinct
 * runs A of g and B of h — on the diagonal, two seeds of one encoding (the paper's NoPE vs NoPE').
 *
 * Output: the matrix as a Markdown table; --out CSV, one row per pair of runs and layer
 * (run_a,run_b,group_a,group_b,layer,min,mean: the minimum and mean over head pairs); --json the
 * matrices (groups: mean and std; runs: D(A, B)); --png the group matrix as a heat map.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "plot.h"
#include "pelab/attn_similarity.h"
#include "pelab/dist.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/posenc.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "pelab/train.h"

#define MAX_RUNS 64

static const struct pelab_optdef options[] = {
    {"models", PELAB_OPT_STR, "", 0, 0, NULL, "run directories, comma-separated: two or more, of one task (required)"},
    {"split", PELAB_OPT_CHOICE, "test", 0, 0, "test|val", "split the sequences come from"},
    {"examples", PELAB_OPT_INT, "10", 1, 1000, NULL, "sequences every run reads (the paper: 10)"},
    {"groups", PELAB_OPT_STR, "", 0, 0, NULL,
     "the group of each run of --models, comma-separated (default: its encoding, with "
     ":random-positions=N when set; give them to tell variants of one encoding apart)"},
    {"size", PELAB_OPT_INT, "0", 0, PELAB_SIZES_MAX, NULL,
     "algorithmic tasks, test split: the instance size of the sequences (0: the largest test size)"},
    {"out", PELAB_OPT_STR, "", 0, 0, NULL, "CSV of every pair of runs and layer (replaced atomically)"},
    {"json", PELAB_OPT_STR, "", 0, 0, NULL, "JSON of the matrices (replaced atomically)"},
    {"png", PELAB_OPT_STR, "", 0, 0, NULL, "the group matrix as a heat map (needs a build with cairo)"},
    {"width", PELAB_OPT_INT, "900", PELAB_PLOT_MIN_SIDE, PELAB_PLOT_MAX_SIDE, NULL, "PNG width in pixels"},
    {"height", PELAB_OPT_INT, "800", PELAB_PLOT_MIN_SIDE, PELAB_PLOT_MAX_SIDE, NULL, "PNG height in pixels"},
    PELAB_OPT_ROW_THREADS,
    PELAB_OPT_ROW_EDITED,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

static void help(FILE *f) {
    struct pelab_group g = {"options", options};
    fprintf(f, "usage: pelab analyze attn-similarity --models A,B,... [--split test|val] [--examples N]\n"
               "                                    [--size N] [--out CSV] [--json FILE] [--png FILE]\n\n"
               "Runs every model on the same sequences and compares their attention, layer by layer:\n"
               "the Jensen-Shannon divergence (nats, 0..ln 2) between the attention rows of a head\n"
               "of one run and a head of another, averaged over the real query positions, and its\n"
               "minimum over head pairs, averaged over layers: D(A, B). Runs are grouped by\n"
               "encoding; the table gives mean and std of D over pairs of distinct runs of two\n"
               "groups (the diagonal: seeds of one encoding against each other). The NoPE paper\n"
               "(its section 5.2) finds NoPE's heads closest to T5's.\n");
    pelab_args_help(f, &g, 1, NULL);
}

/* One run: its label (group), its attention on the shared sequences, N layers of (B,H,T,T). */
struct member {
    const char *dir, *task;
    char group[96];
    struct pelab_run run;
    pelab_real *att;
    int N, H;
};

/* The shared sequences: examples [first, first + B) of the split at length T, each row's real
 * tokens (len). */
struct inputs {
    enum pelab_split split;
    uint64_t first;
    int B, T, size;
    int len[1000];
};

/* Where the sequences come from, decided on the first run's task: an algorithmic task's test
 * examples of one size (at its own length), else the first examples of the split. */
static int choose_inputs(const struct pelab_opts *o, const struct pelab_task *t, struct inputs *in) {
    in->split = pelab_opt_choice(o, options, "split") == 0 ? PELAB_SPLIT_TEST : PELAB_SPLIT_VAL;
    in->B = (int)pelab_opt_int(o, options, "examples");
    in->size = (int)pelab_opt_int(o, options, "size");
    in->first = 0;
    in->T = pelab_task_split_len(t, in->split);
    const int sized = t->ops->sizes && in->split == PELAB_SPLIT_TEST;
    if (in->size && !sized)
        return pelab_fail(PELAB_ERR_USAGE, "--size: task %s has no test split of instance sizes%s",
                          t->ops->name, t->ops->sizes ? " on --split val (sizes are the test split's)" : "");
    uint64_t available = t->ops->split_size(t, in->split);
    if (sized) {
        int train_max, test_max, per_size;
        t->ops->sizes(t, &train_max, &test_max, &per_size);
        if (!in->size) in->size = test_max;
        if (in->size > test_max)
            return pelab_fail(PELAB_ERR_USAGE, "--size %d: the test split of task %s holds sizes 1..%d",
                              in->size, t->ops->name, test_max);
        in->first = (uint64_t)(in->size - 1) * per_size;
        in->T = t->ops->size_len(t, in->size);
        available = (uint64_t)per_size;
    }
    if ((uint64_t)in->B > available)
        return pelab_fail(PELAB_ERR_USAGE, "--examples %d: the %s split of task %s has %llu%s", in->B,
                          pelab_split_name(in->split), t->ops->name, (unsigned long long)available,
                          sized ? " of that size" : "");
    return PELAB_OK;
}

/* Runs member x on the shared sequences (its own task's, which must equal the first run's,
 * *tokens0: the tokens are compared; the first run hands its tokens over, and each row's real
 * tokens into in->len) and keeps its attention. */
static int attend(struct member *x, struct inputs *in, int32_t **tokens0) {
    struct pelab_model *m = &x->run.model;
    struct pelab_batch b;
    int rc = pelab_batch_alloc(&b, in->B, in->T);
    if (rc) return rc;
    x->run.task.ops->fill(&x->run.task, in->split, in->first, &b);
    if (*tokens0 && memcmp(b.tokens, *tokens0, sizeof *b.tokens * (size_t)in->B * in->T) != 0)
        rc = pelab_fail(PELAB_ERR_USAGE, "%s reads other sequences than the first run (its task or "
                        "task options differ): compare runs of one task", x->dir);
    for (int r = 0; !*tokens0 && r < in->B; r++) {
        int k = in->T;
        while (k > 1 && b.tokens[(size_t)r * in->T + k - 1] == x->run.task.pad) k--;
        in->len[r] = k;
    }
    if (!rc) rc = pelab_eval_positions(m, &x->run.task, &b, in->first);
    if (!rc) rc = pelab_check_positions(m, b.pos, in->B, in->T);
    pelab_model_set_attention(m, PELAB_ATTN_KERNEL_REF);
    if (!rc) rc = pelab_model_reserve(m, in->B, in->T);
    if (!rc) {
        m->training = 0;
        pelab_model_forward(m, b.tokens, b.targets, b.pos, in->B, in->T);
        rc = m->status;
    }
    const size_t per_layer = (size_t)in->B * x->H * in->T * in->T;
    if (!rc && !(x->att = malloc(sizeof *x->att * per_layer * x->N)))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the attention of %s", x->dir);
    for (int l = 0; !rc && l < x->N; l++)
        memcpy(x->att + per_layer * l, pelab_model_attention(m, l), sizeof *x->att * per_layer);
    if (!rc && !*tokens0) *tokens0 = b.tokens, b.tokens = NULL;
    pelab_batch_free(&b);
    return rc;
}

/* Opens the runs, checks that they can be compared, and computes each one's attention. */
static int open_members(const struct pelab_opts *o, struct member *xs, int *n, struct inputs *in) {
    static char list[PELAB_OPT_VAL_MAX];
    snprintf(list, sizeof list, "%s", pelab_opt_str(o, options, "models"));
    *n = 0;
    char *save;
    for (char *d = strtok_r(list, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_RUNS) return pelab_fail(PELAB_ERR_USAGE, "--models: at most %d runs", MAX_RUNS);
        xs[(*n)++].dir = d;
    }
    if (*n < 2) return pelab_fail(PELAB_ERR_USAGE, "--models: give two or more run directories, comma-separated");
    static char names[PELAB_OPT_VAL_MAX];
    snprintf(names, sizeof names, "%s", pelab_opt_str(o, options, "groups"));
    int ng = 0;
    for (char *g = strtok_r(names, ",", &save); names[0] && g; g = strtok_r(NULL, ",", &save), ng++)
        if (ng < *n) snprintf(xs[ng].group, sizeof xs[ng].group, "%s", g);
    if (names[0] && ng != *n)
        return pelab_fail(PELAB_ERR_USAGE, "--groups: %d names for %d runs (one per run of --models)", ng, *n);
    int32_t *tokens0 = NULL;
    int rc = PELAB_OK;
    for (int i = 0; i < *n && !rc; i++) {
        struct member *x = &xs[i];
        if ((rc = pelab_run_open(&x->run, x->dir))) break;
        struct pelab_model *m = &x->run.model;
        x->N = m->cfg.n_layers, x->H = m->cfg.n_heads, x->task = x->run.task.ops->name;
        if (!names[0]) snprintf(x->group, sizeof x->group, "%s", m->cfg.pe);
        if (!names[0] && m->cfg.random_positions)
            snprintf(x->group + strlen(x->group), sizeof x->group - strlen(x->group), ":random-positions=%d",
                     m->cfg.random_positions);
        if (i == 0) rc = choose_inputs(o, &x->run.task, in);
        else if (strcmp(x->task, xs[0].task) != 0)
            rc = pelab_fail(PELAB_ERR_USAGE, "%s is a run of task %s, %s of task %s: compare runs of one task",
                            x->dir, x->task, xs[0].dir, xs[0].task);
        else if (x->N != xs[0].N)
            rc = pelab_fail(PELAB_ERR_USAGE, "%s has %d layers, %s %d: layers are compared one to one",
                            x->dir, x->N, xs[0].dir, xs[0].N);
        if (!rc) rc = attend(x, in, &tokens0);
        pelab_run_close(&x->run); /* the attention is all that is kept */
    }
    free(tokens0);
    return rc;
}

/* D(A, B) of every pair (dab, n × n), and the CSV rows of every pair and layer into csv. */
static int divergences(const struct member *xs, int n, const struct inputs *in, double *dab, struct pelab_sb *csv) {
    int H = 0;
    for (int a = 0; a < n; a++) H = xs[a].H > H ? xs[a].H : H;
    double *hd = malloc(sizeof *hd * (size_t)H * H); /* one layer's head pairs */
    if (!hd) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pelab_sb_printf(csv, "run_a,run_b,group_a,group_b,layer,min,mean\n");
    for (int a = 0; a < n; a++) {
        dab[a * n + a] = 0;
        for (int b = a + 1; b < n; b++) {
            const struct member *x = &xs[a], *y = &xs[b];
            const size_t lx = (size_t)in->B * x->H * in->T * in->T, ly = (size_t)in->B * y->H * in->T * in->T;
            double sum = 0;
            for (int l = 0; l < x->N; l++) {
                pelab_attn_head_divergence(x->att + lx * l, x->H, y->att + ly * l, y->H, in->B, in->T, in->len, hd);
                double lo = INFINITY, mean = 0;
                for (int k = 0; k < x->H * y->H; k++) lo = fmin(lo, hd[k]), mean += hd[k];
                mean /= x->H * y->H;
                sum += lo;
                const char *names[4] = {x->dir, y->dir, x->group, y->group};
                for (int k = 0; k < 4; k++) pelab_sb_csv_cell(csv, names[k]), pelab_sb_append(csv, ",", 1);
                pelab_sb_printf(csv, "%d,%.9g,%.9g\n", l, lo, mean);
            }
            dab[a * n + b] = dab[b * n + a] = sum / x->N;
        }
    }
    free(hd);
    return PELAB_OK;
}

/* The runs grouped by encoding (in order of first appearance) and the group matrix: entry
 * (g, h) the mean, std and count of D(A, B) over pairs of distinct runs A of g, B of h. */
struct groups {
    const char *name[MAX_RUNS];
    int n, of[MAX_RUNS];
    double mean[MAX_RUNS * MAX_RUNS], sd[MAX_RUNS * MAX_RUNS];
    int pairs[MAX_RUNS * MAX_RUNS];
};

static void group_runs(const struct member *xs, int n, const double *dab, struct groups *gs) {
    gs->n = 0;
    for (int i = 0; i < n; i++) {
        gs->of[i] = -1;
        for (int k = 0; k < gs->n && gs->of[i] < 0; k++)
            if (strcmp(gs->name[k], xs[i].group) == 0) gs->of[i] = k;
        if (gs->of[i] < 0) gs->name[gs->of[i] = gs->n++] = xs[i].group;
    }
    const int ng = gs->n;
    for (int g = 0; g < ng; g++)
        for (int h = 0; h < ng; h++) {
            double d[MAX_RUNS * MAX_RUNS], s = 0, ss = 0;
            int k = 0;
            for (int a = 0; a < n; a++) /* each pair once within a group */
                for (int b = 0; b < n; b++)
                    if (a != b && gs->of[a] == g && gs->of[b] == h && (g != h || a < b)) s += d[k++] = dab[a * n + b];
            const double m = k ? s / k : NAN;
            for (int i = 0; i < k; i++) ss += (d[i] - m) * (d[i] - m);
            gs->mean[g * ng + h] = m, gs->sd[g * ng + h] = k > 1 ? sqrt(ss / (k - 1)) : 0, gs->pairs[g * ng + h] = k;
        }
}

/* The group matrix as a Markdown table on stdout. */
static void print_table(const struct groups *gs, int n, const struct inputs *in) {
    const int ng = gs->n;
    printf("attention similarity: %d runs, %d sequences of the %s split", n, in->B, pelab_split_name(in->split));
    if (in->size) printf(" of size %d", in->size);
    printf(", JSD in nats (mean ± std over pairs of distinct runs; blank: no such pair)\n\n|  |");
    for (int h = 0; h < ng; h++) printf(" %s |", gs->name[h]);
    printf("\n|---|");
    for (int h = 0; h < ng; h++) printf("---|");
    printf("\n");
    for (int g = 0; g < ng; g++) {
        printf("| %s |", gs->name[g]);
        for (int h = 0; h < ng; h++) {
            const int at = g * ng + h;
            if (!gs->pairs[at]) printf("  |");
            else if (gs->pairs[at] > 1) printf(" %.4f ± %.4f |", gs->mean[at], gs->sd[at]);
            else printf(" %.4f |", gs->mean[at]);
        }
        printf("\n");
    }
}

/* --json: the group matrices and each run's D against every run (docs/FORMATS.md). */
static void json_report(struct pelab_sb *js, const struct groups *gs, const struct member *xs, int n,
                        const double *dab, const struct inputs *in) {
    const int ng = gs->n;
    pelab_sb_printf(js, "{\"split\": \"%s\", \"size\": %d, \"examples\": %d, \"divergence\": \"jsd\", \"groups\": [",
                    pelab_split_name(in->split), in->size, in->B);
    for (int g = 0; g < ng; g++) {
        pelab_sb_printf(js, "%s", g ? ", " : "");
        pelab_sb_json_string(js, gs->name[g]);
    }
    const char *keys[2] = {"mean", "std"};
    const double *mats[2] = {gs->mean, gs->sd};
    for (int k = 0; k < 2; k++) {
        pelab_sb_printf(js, "], \"%s\": [", keys[k]);
        for (int g = 0; g < ng; g++) {
            pelab_sb_printf(js, "%s[", g ? ", " : "");
            for (int h = 0; h < ng; h++) {
                pelab_sb_printf(js, "%s", h ? ", " : "");
                if (gs->pairs[g * ng + h]) pelab_sb_json_number(js, mats[k][g * ng + h]);
                else pelab_sb_printf(js, "null");
            }
            pelab_sb_printf(js, "]");
        }
    }
    pelab_sb_printf(js, "], \"runs\": [");
    for (int a = 0; a < n; a++) {
        pelab_sb_printf(js, "%s{\"dir\": ", a ? ", " : "");
        pelab_sb_json_string(js, xs[a].dir);
        pelab_sb_printf(js, ", \"group\": ");
        pelab_sb_json_string(js, xs[a].group);
        pelab_sb_printf(js, ", \"d\": [");
        for (int b = 0; b < n; b++) {
            pelab_sb_printf(js, "%s", b ? ", " : "");
            pelab_sb_json_number(js, dab[a * n + b]);
        }
        pelab_sb_printf(js, "]}");
    }
    pelab_sb_printf(js, "]}\n");
}

/* --png: the group matrix as a heat map, the groups' names in the title (the axes count them). */
static int heat_map(const char *png, const struct pelab_opts *o, const struct groups *gs) {
    char legend[MAX_RUNS * 100] = "";
    for (int g = 0; g < gs->n; g++)
        snprintf(legend + strlen(legend), sizeof legend - strlen(legend), "%s%d %s", g ? ", " : "", g, gs->name[g]);
    struct pelab_plot_matrix mat = {legend, "group", "group", gs->mean, gs->n, gs->n};
    return pelab_plot_heatmaps(png, (int)pelab_opt_int(o, options, "width"), (int)pelab_opt_int(o, options, "height"),
                               "attention similarity: mean JSD over pairs of runs", "JSD (nats)", &mat, 1);
}

int pelab_analyze_attn_similarity(int argc, char **argv) {
    struct pelab_group g = {"options", options};
    static struct pelab_opts opts;
    int help_asked;
    int rc = pelab_args_parse(argc, argv, &g, 1, &opts, &help_asked);
    if (!rc) rc = pelab_args_check_only(&opts, options, "analyze attn-similarity");
    if (rc) return rc;
    if (help_asked) {
        help(stdout);
        return PELAB_OK;
    }
    if (!pelab_opt_str(&opts, options, "models")[0])
        return pelab_fail(PELAB_ERR_USAGE, "--models A,B,... is required (two or more run directories)");
    const char *out = pelab_opt_str(&opts, options, "out"), *json = pelab_opt_str(&opts, options, "json");
    const char *png = pelab_opt_str(&opts, options, "png");
    if (png[0] && !pelab_plot_available()) return pelab_plot_unavailable("--png");
    if (out[0] && (rc = pelab_check_output("--out", out))) return rc;
    if (json[0] && (rc = pelab_check_output("--json", json))) return rc;
    if (png[0] && (rc = pelab_check_output("--png", png))) return rc;
    pelab_threads_set(pelab_dist_threads((int)pelab_opt_int(&opts, options, "threads")));
    pelab_safetensors_accept_edited(pelab_opt_switch(&opts, options, "edited"));

    static struct member xs[MAX_RUNS];
    static struct inputs in;
    static double dab[MAX_RUNS * MAX_RUNS];
    static struct groups gs;
    int n = 0;
    struct pelab_sb csv = {0}, js = {0};
    rc = open_members(&opts, xs, &n, &in);
    if (!rc) rc = divergences(xs, n, &in, dab, &csv);
    if (!rc) {
        group_runs(xs, n, dab, &gs);
        print_table(&gs, n, &in);
        json_report(&js, &gs, xs, n, dab, &in);
    }
    if (!rc && png[0]) rc = heat_map(png, &opts, &gs);
    if (!rc && out[0]) rc = pelab_write_file_atomic(out, csv.data, csv.len);
    if (!rc && json[0]) rc = pelab_write_file_atomic(json, js.data, js.len);
    pelab_sb_free(&csv);
    pelab_sb_free(&js);
    for (int i = 0; i < n; i++) free(xs[i].att);
    return rc;
}
