/* compare's reports (cli/compare.h): statistics over seeds, the tables, compare.json and the sweep
 * CSV files. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "compare.h"
#include "pelab/clock.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/status.h"
#include "pelab/train.h"

/* One encoding's results over its seeds: what compare.json and the table report. acc is a
 * fraction (compare.json); acc_pct, for the table, is the mean and std of 100·acc per run, which
 * 100·acc_mean equals only to the last bit. */
struct pe_stats {
    const char *pe;
    int seeds;
    double acc_mean, acc_std, acc_pct_mean, acc_pct_std, loss_mean, loss_std, wall_mean, wall_std;
    double ppl_mean, ppl_std, len_mean[PELAB_SWEEP_MAX], len_std[PELAB_SWEEP_MAX];
    double em_mean[PELAB_SWEEP_MAX], em_std[PELAB_SWEEP_MAX];
    double size_mean[PELAB_SIZES_MAX], size_std[PELAB_SIZES_MAX]; /* algorithmic: exact match per size */
};

int compare_read_summary(struct compare_result *r) {
    char path[sizeof r->dir + 16];
    snprintf(path, sizeof path, "%s/summary.json", r->dir);
    struct pelab_json *j;
    int rc = pelab_json_load(path, &j);
    if (rc) return rc;
    const char *keys[3] = {"test_acc", "test_loss", "wall_s"};
    double *dst[3] = {&r->test_acc, &r->test_loss, &r->wall_s};
    for (int i = 0; i < 3 && !rc; i++) {
        const struct pelab_json *v = pelab_json_get(j, keys[i]);
        if (!v || v->type != PELAB_JSON_NUMBER)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: no number \"%s\"", path, keys[i]);
        else
            *dst[i] = v->number;
    }
    const struct pelab_json *ppl = pelab_json_get(j, "test_ppl"); /* tasks of documents */
    r->test_ppl = ppl && ppl->type == PELAB_JSON_NUMBER ? ppl->number : 0;
    pelab_json_free(j);
    return rc;
}

/* Mean and sample standard deviation (0 for one value). */
static void mean_std(const double *x, int n, double *mean, double *std) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) ss += (x[i] - *mean) * (x[i] - *mean);
    *std = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

/* The report's file `name` in dir, written atomically from sb (freed). */
static int write_report(const char *dir, const char *name, struct pelab_sb *sb) {
    char path[PELAB_OPT_VAL_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = pelab_write_file_atomic(path, sb->data, sb->len);
    pelab_sb_free(sb);
    return rc;
}

/* st[p]: the runs in rs (n) of the entry pes[p], p < n_pes, reduced over their seeds. */
static void compare_stats(struct pe_stats *st, const struct compare_result *rs, int n, const char *const *pes,
                          int n_pes, const struct compare_sweep *sw) {
    for (int p = 0; p < n_pes; p++) {
        enum { S = COMPARE_MAX_SEEDS };
        double acc[S], pct[S], loss[S], wall[S], ppl[S];
        const struct compare_result *mine[COMPARE_MAX_SEEDS];
        int m = 0;
        for (int k = 0; k < n; k++)
            if (strcmp(rs[k].pe, pes[p]) == 0) {
                mine[m] = &rs[k];
                acc[m] = rs[k].test_acc;
                pct[m] = 100 * rs[k].test_acc;
                loss[m] = rs[k].test_loss;
                ppl[m] = rs[k].test_ppl;
                wall[m++] = rs[k].wall_s;
            }
        struct pe_stats *e = &st[p];
        e->pe = pes[p];
        e->seeds = m;
        mean_std(acc, m, &e->acc_mean, &e->acc_std);
        mean_std(pct, m, &e->acc_pct_mean, &e->acc_pct_std);
        mean_std(loss, m, &e->loss_mean, &e->loss_std);
        mean_std(wall, m, &e->wall_mean, &e->wall_std);
        mean_std(ppl, m, &e->ppl_mean, &e->ppl_std);
        for (int l = 0; l < sw->n; l++) {
            double x[S];
            for (int k = 0; k < m; k++) x[k] = mine[k]->at[l];
            mean_std(x, m, &e->len_mean[l], &e->len_std[l]);
            for (int k = 0; k < m; k++) x[k] = mine[k]->em[l];
            mean_std(x, m, &e->em_mean[l], &e->em_std[l]);
        }
        for (int z = 0; sw->sizes && z < sw->test_max; z++) {
            double x[S];
            for (int k = 0; k < m; k++) x[k] = mine[k]->size_em[z];
            mean_std(x, m, &e->size_mean[z], &e->size_std[z]);
        }
    }
}

/* ", "key": [x0, x1, ...]" of the n values x (one per sweep entry). */
static void json_lengths(struct pelab_sb *sb, const char *key, const double *x, int n) {
    pelab_sb_printf(sb, ", \"%s\": [", key);
    for (int l = 0; l < n; l++) {
        pelab_sb_printf(sb, "%s", l ? ", " : "");
        pelab_sb_json_number(sb, x[l]);
    }
    pelab_sb_printf(sb, "]");
}

/* compare.json of the runs rs (n) and their reductions st (n_pes) into dir, atomically. */
static int compare_write_json(const char *dir, const char *task, const char *preset,
                              const struct compare_result *rs, int n, const struct pe_stats *st,
                              int n_pes, const struct compare_sweep *sw) {
    struct pelab_sb sb = {0};
    pelab_sb_printf(&sb, "{\n  \"task\": ");
    pelab_sb_json_string(&sb, task);
    pelab_sb_printf(&sb, ",\n  \"preset\": ");
    pelab_sb_json_string(&sb, preset);
    if (sw->n && sw->sizes)
        pelab_sb_printf(&sb, ",\n  \"train_max\": %d,\n  \"test_max\": %d", sw->train_max, sw->test_max);
    if (sw->n) {
        pelab_sb_printf(&sb, ",\n  \"%s\": [", sw->image ? "resolutions" : sw->sizes ? "buckets" : "lengths");
        for (int l = 0; l < sw->n; l++) {
            pelab_sb_printf(&sb, "%s", l ? ", " : "");
            pelab_sb_json_string(&sb, sw->lengths[l].label);
        }
        pelab_sb_printf(&sb, "]");
    }
    pelab_sb_printf(&sb, ",\n  \"runs\": [");
    for (int i = 0; i < n; i++) {
        pelab_sb_printf(&sb, "%s\n    {\"pe\": ", i ? "," : "");
        pelab_sb_json_string(&sb, rs[i].pe);
        pelab_sb_printf(&sb, ", \"seed\": %" PRIu64 ", \"dir\": ", rs[i].seed);
        pelab_sb_json_string(&sb, rs[i].dir);
        pelab_sb_printf(&sb, ", \"test_acc\": ");
        pelab_sb_json_number(&sb, rs[i].test_acc);
        pelab_sb_printf(&sb, ", \"test_loss\": ");
        pelab_sb_json_number(&sb, rs[i].test_loss);
        pelab_sb_printf(&sb, ", \"wall_s\": ");
        pelab_sb_json_number(&sb, rs[i].wall_s);
        if (sw->n && sw->image) {
            json_lengths(&sb, "sweep_acc", rs[i].at, sw->n);
        } else if (sw->n && sw->sizes) {
            json_lengths(&sb, "sweep_em", rs[i].at, sw->n);
            json_lengths(&sb, "size_em", rs[i].size_em, sw->test_max);
        } else if (sw->n && sw->qa) {
            json_lengths(&sb, "sweep_span_ppl", rs[i].at, sw->n);
            json_lengths(&sb, "sweep_em", rs[i].em, sw->n);
        } else if (sw->n) {
            pelab_sb_printf(&sb, ", \"test_ppl\": ");
            pelab_sb_json_number(&sb, rs[i].test_ppl);
            json_lengths(&sb, "sweep_ppl", rs[i].at, sw->n);
        }
        pelab_sb_printf(&sb, "}");
    }
    pelab_sb_printf(&sb, "\n  ],\n  \"encodings\": [");
    for (int p = 0; p < n_pes; p++) {
        const struct pe_stats *e = &st[p];
        pelab_sb_printf(&sb, "%s\n    {\"pe\": ", p ? "," : "");
        pelab_sb_json_string(&sb, e->pe);
        pelab_sb_printf(&sb, ", \"seeds\": %d", e->seeds);
        const char *keys[5] = {"test_acc_mean", "test_acc_std", "test_loss_mean", "test_loss_std",
                               "wall_s_mean"};
        double vals[5] = {e->acc_mean, e->acc_std, e->loss_mean, e->loss_std, e->wall_mean};
        for (int k = 0; k < 5; k++) {
            pelab_sb_printf(&sb, ", \"%s\": ", keys[k]);
            pelab_sb_json_number(&sb, vals[k]);
        }
        if (sw->n && sw->image) {
            json_lengths(&sb, "sweep_acc_mean", e->len_mean, sw->n);
            json_lengths(&sb, "sweep_acc_std", e->len_std, sw->n);
        } else if (sw->n && sw->sizes) {
            json_lengths(&sb, "sweep_em_mean", e->len_mean, sw->n);
            json_lengths(&sb, "sweep_em_std", e->len_std, sw->n);
            json_lengths(&sb, "size_em_mean", e->size_mean, sw->test_max);
            json_lengths(&sb, "size_em_std", e->size_std, sw->test_max);
        } else if (sw->n && sw->qa) {
            json_lengths(&sb, "sweep_span_ppl_mean", e->len_mean, sw->n);
            json_lengths(&sb, "sweep_span_ppl_std", e->len_std, sw->n);
            json_lengths(&sb, "sweep_em_mean", e->em_mean, sw->n);
            json_lengths(&sb, "sweep_em_std", e->em_std, sw->n);
        } else if (sw->n) {
            pelab_sb_printf(&sb, ", \"test_ppl_mean\": ");
            pelab_sb_json_number(&sb, e->ppl_mean);
            pelab_sb_printf(&sb, ", \"test_ppl_std\": ");
            pelab_sb_json_number(&sb, e->ppl_std);
            json_lengths(&sb, "sweep_ppl_mean", e->len_mean, sw->n);
            json_lengths(&sb, "sweep_ppl_std", e->len_std, sw->n);
        }
        pelab_sb_printf(&sb, "}");
    }
    pelab_sb_printf(&sb, "\n  ]\n}\n");
    return write_report(dir, "compare.json", &sb);
}

/* One row per (encoding, sweep entry) with the mean and std over the seeds: DIR/sweep.csv, of the
 * perplexity at each length (qa: and the exact match), what `pelab plot lines --x length --y
 * ppl_mean --group pe --logx` draws; image: DIR/resolutions.csv, of the test accuracy at each
 * side (`--x side --y acc_mean --group pe`); algorithmic tasks: DIR/sizes.csv, of the test exact
 * match at every instance size (`--x size --y em_mean --group pe --shade 1,L`). */
static int write_sweep_csv(const char *dir, const struct pe_stats *st, int n_pes, const struct compare_sweep *sw) {
    struct pelab_sb sb = {0};
    if (sw->sizes) { /* algorithmic: DIR/sizes.csv, the exact match at every size */
        pelab_sb_printf(&sb, "pe,size,trained,em_mean,em_std\n");
        for (int p = 0; p < n_pes; p++)
            for (int z = 0; z < sw->test_max; z++) {
                pelab_sb_csv_cell(&sb, st[p].pe);
                pelab_sb_printf(&sb, ",%d,%d,%.9g,%.9g\n", z + 1, z < sw->train_max, st[p].size_mean[z],
                                st[p].size_std[z]);
            }
        return write_report(dir, "sizes.csv", &sb);
    }
    pelab_sb_printf(&sb, "%s\n", sw->image ? "pe,label,side,acc_mean,acc_std"
                                 : sw->qa   ? "pe,label,length,ppl_mean,ppl_std,em_mean,em_std"
                                            : "pe,label,length,ppl_mean,ppl_std");
    for (int p = 0; p < n_pes; p++)
        for (int l = 0; l < sw->n; l++) {
            pelab_sb_csv_cell(&sb, st[p].pe);
            pelab_sb_printf(&sb, ",%s,%d,%.9g,%.9g", sw->lengths[l].label, sw->lengths[l].tokens, st[p].len_mean[l], st[p].len_std[l]);
            if (sw->qa) pelab_sb_printf(&sb, ",%.9g,%.9g", st[p].em_mean[l], st[p].em_std[l]);
            pelab_sb_printf(&sb, "\n");
        }
    return write_report(dir, sw->image ? "resolutions.csv" : "sweep.csv", &sb);
}

/* " mean ± std |" with `prec` decimals and `unit`; one seed has no spread: " mean |". */
static void cell(int seeds, int prec, double mean, double std, const char *unit) {
    if (seeds > 1) printf(" %.*f ± %.*f%s |", prec, mean, prec, std, unit);
    else printf(" %.*f%s |", prec, mean, unit);
}

/* The last cell of a row, the mean wall time of a run, and the line's end. */
static void time_cell(const struct pe_stats *e) {
    char t[32];
    pelab_format_duration(t, sizeof t, e->wall_mean);
    printf(" %s |\n", t);
}

/* Tasks of documents: test NLL and perplexity, then perplexity at each sweep length. image:
 * test loss, then the accuracy at each side (the SeqPE paper's Table III). */
static void print_sweep_table(const struct pe_stats *st, int n_pes, int image, const struct compare_sweep *sw) {
    printf(image ? "\n| encoding | test loss |" : "\n| encoding | test NLL | test ppl |");
    for (int l = 0; l < sw->n; l++)
        if (image) printf(" acc %d (%s) |", sw->lengths[l].tokens, sw->lengths[l].label);
        else printf(" ppl %s (%d) |", sw->lengths[l].label, sw->lengths[l].tokens);
    printf(image ? " time per run |\n|---|---|" : " time per run |\n|---|---|---|");
    for (int l = 0; l < sw->n; l++) printf("---|");
    printf("---|\n");
    for (int p = 0; p < n_pes; p++) {
        const struct pe_stats *e = &st[p];
        printf("| %s |", e->pe);
        cell(e->seeds, 4, e->loss_mean, e->loss_std, "");
        if (!image) cell(e->seeds, 3, e->ppl_mean, e->ppl_std, "");
        for (int l = 0; l < sw->n; l++)
            if (image) cell(e->seeds, 2, 100 * e->len_mean[l], 100 * e->len_std[l], " %");
            else cell(e->seeds, 3, e->len_mean[l], e->len_std[l], "");
        time_cell(e);
    }
}

/* qa: the test loss of the answer span, then its perplexity and the generated exact match at
 * each length (the SeqPE paper's Table II). */
static void print_qa_table(const struct pe_stats *st, int n_pes, const struct compare_sweep *sw) {
    printf("\n| encoding | test span NLL |");
    for (int l = 0; l < sw->n; l++) printf(" span ppl %s (%d) |", sw->lengths[l].label, sw->lengths[l].tokens);
    for (int l = 0; l < sw->n; l++) printf(" EM %s |", sw->lengths[l].label);
    printf(" time per run |\n|---|---|");
    for (int l = 0; l < 2 * sw->n; l++) printf("---|");
    printf("---|\n");
    for (int p = 0; p < n_pes; p++) {
        const struct pe_stats *e = &st[p];
        printf("| %s |", e->pe);
        cell(e->seeds, 4, e->loss_mean, e->loss_std, "");
        for (int l = 0; l < sw->n; l++) cell(e->seeds, 3, e->len_mean[l], e->len_std[l], "");
        for (int l = 0; l < sw->n; l++)
            cell(e->seeds, 1, 100 * e->em_mean[l], 100 * e->em_std[l], " %");
        time_cell(e);
    }
}

/* Algorithmic tasks: the test exact match over each bucket of sizes, first one row per run (when
 * an encoding has several seeds), then the mean ± std over seeds per encoding. */
static void print_sizes_table(const struct compare_result *rs, int n, const struct pe_stats *st, int n_pes,
                              const struct compare_sweep *sw) {
    int spread = 0;
    for (int p = 0; p < n_pes; p++) spread |= st[p].seeds > 1;
    for (int table = spread ? 0 : 1; table < 2; table++) {
        printf(table ? "\n| encoding |" : "\n| encoding | seed |");
        for (int l = 0; l < sw->n; l++)
            printf(" EM %s%s |", sw->lengths[l].label, sw->hi[l] <= sw->train_max ? " (trained)" : "");
        printf(table ? " time per run |\n|---|" : " time |\n|---|---|");
        for (int l = 0; l <= sw->n; l++) printf("---|");
        printf("\n");
        for (int i = 0; !table && i < n; i++) {
            printf("| %s | %" PRIu64 " |", rs[i].pe, rs[i].seed);
            for (int l = 0; l < sw->n; l++) printf(" %.1f %% |", 100 * rs[i].at[l]);
            time_cell(&(struct pe_stats){.wall_mean = rs[i].wall_s});
        }
        for (int p = 0; table && p < n_pes; p++) {
            const struct pe_stats *e = &st[p];
            printf("| %s |", e->pe);
            for (int l = 0; l < sw->n; l++) cell(e->seeds, 1, 100 * e->len_mean[l], 100 * e->len_std[l], " %");
            time_cell(e);
        }
    }
}

static void print_table(const struct pe_stats *st, int n_pes) {
    int spread = 0;
    for (int p = 0; p < n_pes; p++) spread |= st[p].seeds > 1;
    printf("\n| encoding | test acc%s | test loss%s | time per run |\n|---|---|---|---|\n",
           spread ? " (mean ± std)" : "", spread ? " (mean ± std)" : "");
    for (int p = 0; p < n_pes; p++) {
        const struct pe_stats *e = &st[p];
        printf("| %s |", e->pe);
        cell(e->seeds, 1, e->acc_pct_mean, e->acc_pct_std, " %");
        cell(e->seeds, 4, e->loss_mean, e->loss_std, "");
        time_cell(e);
    }
}

int compare_report(const char *dir, const char *task, const char *preset, const struct compare_result *rs,
                   int n, const char *const *pes, int n_pes, int documents, const struct compare_sweep *sw) {
    static struct pe_stats st[COMPARE_MAX_PES];
    compare_stats(st, rs, n, pes, n_pes, sw);
    if (sw->sizes && sw->n) print_sizes_table(rs, n, st, n_pes, sw);
    else if (sw->image && sw->n) print_sweep_table(st, n_pes, 1, sw);
    else if (sw->qa && sw->n) print_qa_table(st, n_pes, sw);
    else if (sw->n || documents) print_sweep_table(st, n_pes, 0, sw);
    else print_table(st, n_pes);
    int rc = compare_write_json(dir, task, preset, rs, n, st, n_pes, sw);
    if (!rc && sw->n) rc = write_sweep_csv(dir, st, n_pes, sw);
    return rc;
}
