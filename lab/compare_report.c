/* compare's reports (lab/compare.h): statistics over seeds (lab/stats.h), the tables, the paired
 * comparison of the entries, compare.json and the sweep CSV files. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "compare.h"
#include "compare_tune.h"
#include "stats.h"
#include "pelab/clock.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/status.h"
#include "pelab/train.h"

/* One encoding's results over its seeds: what compare.json and the table report (mean, sample
 * sd, 95 % t half-width of each). acc is a fraction (compare.json); acc_pct, for the table, is
 * 100·acc per run reduced, which 100·acc_mean equals only to the last bit. Counts of runs:
 * acc_solved with test accuracy ≥ STATS_SOLVED, len_solved with exact match ≥ it over each bucket
 * of sizes, fitted with it over the trained sizes (algorithmic tasks). */
struct pe_stats {
    const char *pe;
    int seeds;
    struct stats_summary acc, acc_pct, loss, wall, ppl, len[PELAB_SWEEP_MAX], em[PELAB_SWEEP_MAX];
    struct stats_summary size[PELAB_SIZES_MAX]; /* algorithmic: exact match per size */
    int acc_solved, len_solved[PELAB_SWEEP_MAX], fitted;
};

/* What a report is made of: the runs, their reductions per entry, the sweep, the tuning grid
 * (NULL without --tune) and the kind of task (documents: one of documents). */
struct report {
    const struct compare_result *rs;
    int n;
    const struct pe_stats *st;
    int n_pes;
    const struct compare_sweep *sw;
    const struct compare_tune *tune;
    int documents;
};

/* The exact match of an algorithmic task's run over its trained sizes 1..train_max (equal examples
 * per size: the mean over them). */
static double trained_em(const struct compare_result *r, const struct compare_sweep *sw) {
    double s = 0;
    for (int z = 0; z < sw->train_max; z++) s += r->size_em[z];
    return s / sw->train_max;
}

/* The metric the entries are paired on: an algorithmic task's exact match over the trained sizes;
 * test loss on tasks of documents and qa; test accuracy otherwise. `pct`: a fraction shown in %. */
struct metric {
    const char *key, *what;
    int higher_better, pct, digits;
};

static struct metric main_metric(const struct report *R) {
    if (R->sw->sizes) return (struct metric){"trained_em", "exact match over the trained sizes (%)", 1, 1, 1};
    if (R->documents || R->sw->qa) return (struct metric){"test_loss", "test loss", 0, 0, 4};
    return (struct metric){"test_acc", "test accuracy (%)", 1, 1, 1};
}

static double metric_of(const struct report *R, const struct compare_result *r) {
    if (R->sw->sizes) return trained_em(r, R->sw);
    if (R->documents || R->sw->qa) return r->test_loss;
    return r->test_acc;
}

int compare_read_summary(struct compare_result *r) {
    char path[sizeof r->dir + 16];
    snprintf(path, sizeof path, "%s/summary.json", r->dir);
    struct pelab_json *j;
    int rc = pelab_json_load(path, &j);
    if (rc) return rc;
    const char *keys[4] = {"test_acc", "test_loss", "val_loss", "wall_s"};
    double *dst[4] = {&r->test_acc, &r->test_loss, &r->val_loss, &r->wall_s};
    for (int i = 0; i < 4 && !rc; i++) {
        const struct pelab_json *v = pelab_json_get(j, keys[i]);
        if (v && v->type == PELAB_JSON_NULL && i == 2) /* a validation loss that was not finite */
            *dst[i] = NAN;
        else if (!v || v->type != PELAB_JSON_NUMBER)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: no number \"%s\"", path, keys[i]);
        else
            *dst[i] = v->number;
    }
    const struct pelab_json *ppl = pelab_json_get(j, "test_ppl"); /* tasks of documents */
    r->test_ppl = ppl && ppl->type == PELAB_JSON_NUMBER ? ppl->number : 0;
    pelab_json_free(j);
    return rc;
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
        struct pe_stats *e = &st[p];
        memset(e, 0, sizeof *e);
        for (int k = 0; k < n; k++)
            if (strcmp(rs[k].pe, pes[p]) == 0) {
                mine[m] = &rs[k];
                acc[m] = rs[k].test_acc;
                pct[m] = 100 * rs[k].test_acc;
                loss[m] = rs[k].test_loss;
                ppl[m] = rs[k].test_ppl;
                wall[m++] = rs[k].wall_s;
                e->acc_solved += rs[k].test_acc >= STATS_SOLVED;
            }
        e->pe = pes[p];
        e->seeds = m;
        stats_summarise(acc, m, &e->acc);
        stats_summarise(pct, m, &e->acc_pct);
        stats_summarise(loss, m, &e->loss);
        stats_summarise(wall, m, &e->wall);
        stats_summarise(ppl, m, &e->ppl);
        for (int l = 0; l < sw->n; l++) {
            double x[S];
            for (int k = 0; k < m; k++) x[k] = mine[k]->at[l];
            stats_summarise(x, m, &e->len[l]);
            for (int k = 0; k < m; k++) e->len_solved[l] += sw->sizes && x[k] >= STATS_SOLVED;
            for (int k = 0; k < m; k++) x[k] = mine[k]->em[l];
            stats_summarise(x, m, &e->em[l]);
        }
        for (int z = 0; sw->sizes && z < sw->test_max; z++) {
            double x[S];
            for (int k = 0; k < m; k++) x[k] = mine[k]->size_em[z];
            stats_summarise(x, m, &e->size[z]);
        }
        for (int k = 0; sw->sizes && k < m; k++) e->fitted += trained_em(mine[k], sw) >= STATS_SOLVED;
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

/* ", "KEY_mean": [...], "KEY_std": [...]" (and "KEY_ci95": [...], the half-widths) of the n
 * reductions s. */
static void json_stats(struct pelab_sb *sb, const char *key, const struct stats_summary *s, int n) {
    const char *part[3] = {"mean", "std", "ci95"};
    for (int k = 0; k < 3; k++) {
        pelab_sb_printf(sb, ", \"%s_%s\": [", key, part[k]);
        for (int l = 0; l < n; l++) {
            pelab_sb_printf(sb, "%s", l ? ", " : "");
            pelab_sb_json_number(sb, k == 0 ? s[l].mean : k == 1 ? s[l].sd : s[l].ci95);
        }
        pelab_sb_printf(sb, "]");
    }
}

/* ", "key": x" */
static void json_field(struct pelab_sb *sb, const char *key, double x) {
    pelab_sb_printf(sb, ", \"%s\": ", key);
    pelab_sb_json_number(sb, x);
}

/* The runs of entry p, in the order of their seeds, into mine; their count. */
static int runs_of(const struct report *R, int p, const struct compare_result **mine) {
    int m = 0;
    for (int k = 0; k < R->n; k++)
        if (strcmp(R->rs[k].pe, R->st[p].pe) == 0) mine[m++] = &R->rs[k];
    return m;
}

/* The paired comparison of entries a and b on the main metric over their common seeds: the
 * differences per seed into d, reduced into s; the number of seeds. */
static int pair(const struct report *R, int a, int b, double *d, struct stats_summary *s) {
    const struct compare_result *ra[COMPARE_MAX_SEEDS], *rb[COMPARE_MAX_SEEDS];
    const int m = runs_of(R, a, ra);
    PELAB_ASSERT(m == runs_of(R, b, rb));
    double x[COMPARE_MAX_SEEDS], y[COMPARE_MAX_SEEDS];
    for (int k = 0; k < m; k++) {
        PELAB_ASSERT(ra[k]->seed == rb[k]->seed);
        x[k] = metric_of(R, ra[k]);
        y[k] = metric_of(R, rb[k]);
    }
    stats_paired(x, y, m, d, s);
    return m;
}

/* "a ahead", "b ahead" or "level" of the paired difference s of a and b. */
static void verdict_text(char *buf, size_t size, const struct report *R, int a, int b,
                         const struct stats_summary *s) {
    const int v = stats_verdict(s, main_metric(R).higher_better);
    if (v) snprintf(buf, size, "%s ahead", R->st[v > 0 ? a : b].pe);
    else snprintf(buf, size, "level");
}

/* compare.json's "pairs": every two entries over the same seeds on the main metric. */
static void json_pairs(struct pelab_sb *sb, const struct report *R) {
    const struct metric mt = main_metric(R);
    pelab_sb_printf(sb, ",\n  \"pairs\": {\"metric\": \"%s\", \"higher_better\": %s, \"rows\": [", mt.key,
                    mt.higher_better ? "true" : "false");
    int row = 0;
    for (int a = 0; a < R->n_pes; a++)
        for (int b = a + 1; b < R->n_pes; b++) {
            double d[COMPARE_MAX_SEEDS];
            struct stats_summary s;
            const int m = pair(R, a, b, d, &s);
            char verdict[PELAB_OPT_VAL_MAX + 16];
            verdict_text(verdict, sizeof verdict, R, a, b, &s);
            pelab_sb_printf(sb, "%s\n    {\"a\": ", row++ ? "," : "");
            pelab_sb_json_string(sb, R->st[a].pe);
            pelab_sb_printf(sb, ", \"b\": ");
            pelab_sb_json_string(sb, R->st[b].pe);
            json_lengths(sb, "diff", d, m);
            json_field(sb, "mean", s.mean);
            json_field(sb, "ci95", s.ci95);
            pelab_sb_printf(sb, ", \"verdict\": ");
            pelab_sb_json_string(sb, verdict);
            pelab_sb_printf(sb, "}");
        }
    pelab_sb_printf(sb, "\n  ]}");
}

/* compare.json of the report into dir, atomically. */
static int compare_write_json(const char *dir, const char *task, const char *preset, const struct report *R) {
    const struct compare_result *rs = R->rs;
    const struct compare_sweep *sw = R->sw;
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
    if (R->tune) {
        pelab_sb_printf(&sb, ",\n  ");
        compare_tune_json_head(&sb, R->tune);
    }
    pelab_sb_printf(&sb, ",\n  \"runs\": [");
    for (int i = 0; i < R->n; i++) {
        pelab_sb_printf(&sb, "%s\n    {\"pe\": ", i ? "," : "");
        pelab_sb_json_string(&sb, rs[i].pe);
        pelab_sb_printf(&sb, ", \"seed\": %" PRIu64 ", \"dir\": ", rs[i].seed);
        pelab_sb_json_string(&sb, rs[i].dir);
        json_field(&sb, "test_acc", rs[i].test_acc);
        json_field(&sb, "test_loss", rs[i].test_loss);
        json_field(&sb, "wall_s", rs[i].wall_s);
        json_field(&sb, "val_loss", rs[i].val_loss);
        if (sw->n && sw->image) {
            json_lengths(&sb, "sweep_acc", rs[i].at, sw->n);
        } else if (sw->n && sw->sizes) {
            json_lengths(&sb, "sweep_em", rs[i].at, sw->n);
            json_lengths(&sb, "size_em", rs[i].size_em, sw->test_max);
            json_field(&sb, "trained_em", trained_em(&rs[i], sw));
            pelab_sb_printf(&sb, ", \"fits_training\": %s", trained_em(&rs[i], sw) >= STATS_SOLVED ? "true" : "false");
        } else if (sw->n && sw->qa) {
            json_lengths(&sb, "sweep_span_ppl", rs[i].at, sw->n);
            json_lengths(&sb, "sweep_em", rs[i].em, sw->n);
        } else if (sw->n) {
            json_field(&sb, "test_ppl", rs[i].test_ppl);
            json_lengths(&sb, "sweep_ppl", rs[i].at, sw->n);
        }
        pelab_sb_printf(&sb, "}");
    }
    pelab_sb_printf(&sb, "\n  ],\n  \"encodings\": [");
    for (int p = 0; p < R->n_pes; p++) {
        const struct pe_stats *e = &R->st[p];
        pelab_sb_printf(&sb, "%s\n    {\"pe\": ", p ? "," : "");
        pelab_sb_json_string(&sb, e->pe);
        pelab_sb_printf(&sb, ", \"seeds\": %d", e->seeds);
        const char *keys[5] = {"test_acc_mean", "test_acc_std", "test_loss_mean", "test_loss_std",
                               "wall_s_mean"};
        double vals[5] = {e->acc.mean, e->acc.sd, e->loss.mean, e->loss.sd, e->wall.mean};
        for (int k = 0; k < 5; k++) json_field(&sb, keys[k], vals[k]);
        json_field(&sb, "test_acc_ci95", e->acc.ci95);
        json_field(&sb, "test_loss_ci95", e->loss.ci95);
        if (sw->n && sw->image) {
            json_stats(&sb, "sweep_acc", e->len, sw->n);
        } else if (sw->n && sw->sizes) {
            json_stats(&sb, "sweep_em", e->len, sw->n);
            json_stats(&sb, "size_em", e->size, sw->test_max);
            pelab_sb_printf(&sb, ", \"sweep_em_solved\": [");
            for (int l = 0; l < sw->n; l++) pelab_sb_printf(&sb, "%s%d", l ? ", " : "", e->len_solved[l]);
            pelab_sb_printf(&sb, "], \"fitted_seeds\": %d", e->fitted);
        } else if (sw->n && sw->qa) {
            json_stats(&sb, "sweep_span_ppl", e->len, sw->n);
            json_stats(&sb, "sweep_em", e->em, sw->n);
        } else if (sw->n) {
            json_field(&sb, "test_ppl_mean", e->ppl.mean);
            json_field(&sb, "test_ppl_std", e->ppl.sd);
            json_field(&sb, "test_ppl_ci95", e->ppl.ci95);
            json_stats(&sb, "sweep_ppl", e->len, sw->n);
        }
        if (!sw->n && !R->documents) /* a task scored by accuracy: the table's "solved" */
            pelab_sb_printf(&sb, ", \"test_acc_solved\": %d", e->acc_solved);
        if (R->tune) {
            pelab_sb_printf(&sb, ",\n     ");
            compare_tune_json_entry(&sb, R->tune, p);
        }
        pelab_sb_printf(&sb, "}");
    }
    pelab_sb_printf(&sb, "\n  ]");
    if (R->st[0].seeds >= 2 && R->n_pes >= 2) json_pairs(&sb, R);
    pelab_sb_printf(&sb, "\n}\n");
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
                pelab_sb_printf(&sb, ",%d,%d,%.9g,%.9g\n", z + 1, z < sw->train_max, st[p].size[z].mean,
                                st[p].size[z].sd);
            }
        return write_report(dir, "sizes.csv", &sb);
    }
    pelab_sb_printf(&sb, "%s\n", sw->image ? "pe,label,side,acc_mean,acc_std"
                                 : sw->qa   ? "pe,label,length,ppl_mean,ppl_std,em_mean,em_std"
                                            : "pe,label,length,ppl_mean,ppl_std");
    for (int p = 0; p < n_pes; p++)
        for (int l = 0; l < sw->n; l++) {
            pelab_sb_csv_cell(&sb, st[p].pe);
            pelab_sb_printf(&sb, ",%s,%d,%.9g,%.9g", sw->lengths[l].label, sw->lengths[l].tokens, st[p].len[l].mean,
                            st[p].len[l].sd);
            if (sw->qa) pelab_sb_printf(&sb, ",%.9g,%.9g", st[p].em[l].mean, st[p].em[l].sd);
            pelab_sb_printf(&sb, "\n");
        }
    return write_report(dir, sw->image ? "resolutions.csv" : "sweep.csv", &sb);
}

/* " mean ± std |" with `prec` decimals and `unit`, times `scale`; one seed has no spread:
 * " mean |". */
static void cell(int seeds, int prec, const struct stats_summary *s, double scale, const char *unit) {
    if (seeds > 1) printf(" %.*f ± %.*f%s |", prec, scale * s->mean, prec, scale * s->sd, unit);
    else printf(" %.*f%s |", prec, scale * s->mean, unit);
}

/* A cell of a fraction solved or not by each run (accuracy, exact match), in %: with "(k of n
 * solved)" when its runs split, k of them at STATS_SOLVED or above. */
static void solved_cell(int seeds, const struct stats_summary *s, int solved) {
    if (solved == 0 || solved == seeds) {
        cell(seeds, 1, s, 100, " %");
        return;
    }
    printf(" %.1f ± %.1f %% (%d of %d solved) |", 100 * s->mean, 100 * s->sd, solved, seeds);
}

/* The last cell of a row, the mean wall time of a run, and the line's end. */
static void time_cell(double wall_s) {
    char t[32];
    pelab_format_duration(t, sizeof t, wall_s);
    printf(" %s |\n", t);
}

/* Whether entry p fits its trained sizes in fewer than all its seeds (an algorithmic task). */
static int unfitted(const struct report *R, int p) {
    return R->sw->sizes && R->sw->n && R->st[p].fitted < R->st[p].seeds;
}

/* The header's first cells: the encoding and, with --tune, each tuned option. */
static void head_cells(const struct report *R, const char *more) {
    printf("\n| encoding |");
    for (int k = 0; R->tune && k < R->tune->n_keys; k++) printf(" %s |", R->tune->keys[k]);
    printf("%s", more);
}

/* "---|" for the tuned options' columns. */
static void rule_cells(const struct report *R) {
    for (int k = 0; R->tune && k < R->tune->n_keys; k++) printf("---|");
}

/* A row's first cells: entry p (with † when it does not fit its trained sizes in every seed)
 * and, with --tune, the value of each option it chose. */
static void name_cells(const struct report *R, int p) {
    printf("| %s%s |", R->st[p].pe, unfitted(R, p) ? "†" : "");
    for (int k = 0; R->tune && k < R->tune->n_keys; k++)
        printf(" %s |", compare_tune_value(R->tune, R->tune->chosen[p], k));
}

/* Tasks of documents: test NLL and perplexity, then perplexity at each sweep length. image:
 * test loss, then the accuracy at each side (the SeqPE paper's Table III). */
static void print_sweep_table(const struct report *R, int image) {
    const struct compare_sweep *sw = R->sw;
    head_cells(R, image ? " test loss |" : " test NLL | test ppl |");
    for (int l = 0; l < sw->n; l++)
        if (image) printf(" acc %d (%s) |", sw->lengths[l].tokens, sw->lengths[l].label);
        else printf(" ppl %s (%d) |", sw->lengths[l].label, sw->lengths[l].tokens);
    printf(image ? " time per run |\n|---|---|" : " time per run |\n|---|---|---|");
    rule_cells(R);
    for (int l = 0; l < sw->n; l++) printf("---|");
    printf("---|\n");
    for (int p = 0; p < R->n_pes; p++) {
        const struct pe_stats *e = &R->st[p];
        name_cells(R, p);
        cell(e->seeds, 4, &e->loss, 1, "");
        if (!image) cell(e->seeds, 3, &e->ppl, 1, "");
        for (int l = 0; l < sw->n; l++)
            if (image) cell(e->seeds, 2, &e->len[l], 100, " %");
            else cell(e->seeds, 3, &e->len[l], 1, "");
        time_cell(e->wall.mean);
    }
}

/* qa: the test loss of the answer span, then its perplexity and the generated exact match at
 * each length (the SeqPE paper's Table II). */
static void print_qa_table(const struct report *R) {
    const struct compare_sweep *sw = R->sw;
    head_cells(R, " test span NLL |");
    for (int l = 0; l < sw->n; l++) printf(" span ppl %s (%d) |", sw->lengths[l].label, sw->lengths[l].tokens);
    for (int l = 0; l < sw->n; l++) printf(" EM %s |", sw->lengths[l].label);
    printf(" time per run |\n|---|---|");
    rule_cells(R);
    for (int l = 0; l < 2 * sw->n; l++) printf("---|");
    printf("---|\n");
    for (int p = 0; p < R->n_pes; p++) {
        const struct pe_stats *e = &R->st[p];
        name_cells(R, p);
        cell(e->seeds, 4, &e->loss, 1, "");
        for (int l = 0; l < sw->n; l++) cell(e->seeds, 3, &e->len[l], 1, "");
        for (int l = 0; l < sw->n; l++) cell(e->seeds, 1, &e->em[l], 100, " %");
        time_cell(e->wall.mean);
    }
}

/* Algorithmic tasks: the test exact match over each bucket of sizes, first one row per run (when
 * an encoding has several seeds), then the mean ± std over seeds per encoding, "k of n solved"
 * where its seeds split; under it a line for each entry that fits its trained sizes in fewer than
 * all its seeds (marked †). */
static void print_sizes_table(const struct report *R) {
    const struct compare_sweep *sw = R->sw;
    int spread = 0;
    for (int p = 0; p < R->n_pes; p++) spread |= R->st[p].seeds > 1;
    for (int table = spread ? 0 : 1; table < 2; table++) {
        if (table) head_cells(R, "");
        else printf("\n| encoding | seed |");
        for (int l = 0; l < sw->n; l++)
            printf(" EM %s%s |", sw->lengths[l].label, sw->hi[l] <= sw->train_max ? " (trained)" : "");
        printf(table ? " time per run |\n|---|" : " time |\n|---|---|");
        if (table) rule_cells(R);
        for (int l = 0; l <= sw->n; l++) printf("---|");
        printf("\n");
        for (int i = 0; !table && i < R->n; i++) {
            printf("| %s | %" PRIu64 " |", R->rs[i].pe, R->rs[i].seed);
            for (int l = 0; l < sw->n; l++) printf(" %.1f %% |", 100 * R->rs[i].at[l]);
            time_cell(R->rs[i].wall_s);
        }
        for (int p = 0; table && p < R->n_pes; p++) {
            const struct pe_stats *e = &R->st[p];
            name_cells(R, p);
            for (int l = 0; l < sw->n; l++) solved_cell(e->seeds, &e->len[l], e->len_solved[l]);
            time_cell(e->wall.mean);
        }
    }
    int first = 1;
    for (int p = 0; p < R->n_pes; p++)
        if (unfitted(R, p)) {
            printf("%s† %s fits its trained sizes (≥ %.0f %% exact match) in %d of %d seeds: left out of "
                   "extrapolation rankings\n", first ? "\n" : "", R->st[p].pe, 100 * STATS_SOLVED,
                   R->st[p].fitted, R->st[p].seeds);
            first = 0;
        }
}

static void print_table(const struct report *R) {
    int spread = 0;
    for (int p = 0; p < R->n_pes; p++) spread |= R->st[p].seeds > 1;
    head_cells(R, "");
    printf(" test acc%s | test loss%s | time per run |\n|---|", spread ? " (mean ± std)" : "",
           spread ? " (mean ± std)" : "");
    rule_cells(R);
    printf("---|---|---|\n");
    for (int p = 0; p < R->n_pes; p++) {
        const struct pe_stats *e = &R->st[p];
        name_cells(R, p);
        solved_cell(e->seeds, &e->acc, e->acc_solved);
        cell(e->seeds, 4, &e->loss, 1, "");
        time_cell(e->wall.mean);
    }
}

/* "+1.2", "−0.3" (a minus sign, not a hyphen) with `digits` decimals. */
static void signed_text(char *buf, size_t size, double x, int digits) {
    snprintf(buf, size, "%s%.*f", x < 0 ? "−" : "+", digits, fabs(x));
}

/* Over two seeds or more: a line per two entries, the mean difference of the main metric over
 * their seeds and its 95 % t interval, "ahead" only when the interval excludes 0. */
static void print_pairs(const struct report *R) {
    const struct metric mt = main_metric(R);
    const struct compare_result *mine[COMPARE_MAX_SEEDS];
    const int m = runs_of(R, 0, mine);
    printf("\npaired over seeds");
    for (int k = 0; k < m; k++) printf("%s %" PRIu64, k ? "," : "", mine[k]->seed);
    printf(" on %s, A − B: the mean difference and its 95 %% confidence interval (Student t, n − 1 "
           "degrees of freedom); ahead only when the interval excludes 0\n", mt.what);
    for (int a = 0; a < R->n_pes; a++)
        for (int b = a + 1; b < R->n_pes; b++) {
            double d[COMPARE_MAX_SEEDS];
            struct stats_summary s;
            pair(R, a, b, d, &s);
            const double scale = mt.pct ? 100 : 1;
            char mean[32], lo[32], hi[32], verdict[PELAB_OPT_VAL_MAX + 16];
            signed_text(mean, sizeof mean, scale * s.mean, mt.digits);
            signed_text(lo, sizeof lo, scale * (s.mean - s.ci95), mt.digits);
            signed_text(hi, sizeof hi, scale * (s.mean + s.ci95), mt.digits);
            verdict_text(verdict, sizeof verdict, R, a, b, &s);
            printf("%s − %s: %s (95 %% CI %s … %s), %s\n", R->st[a].pe, R->st[b].pe, mean, lo, hi, verdict);
        }
}

int compare_report(const char *dir, const char *task, const char *preset, const struct compare_result *rs,
                   int n, const char *const *pes, int n_pes, int documents, const struct compare_sweep *sw,
                   const struct compare_tune *tune) {
    static struct pe_stats st[COMPARE_MAX_PES];
    compare_stats(st, rs, n, pes, n_pes, sw);
    const struct report R = {rs, n, st, n_pes, sw, tune, documents};
    if (sw->sizes && sw->n) print_sizes_table(&R);
    else if (sw->image && sw->n) print_sweep_table(&R, 1);
    else if (sw->qa && sw->n) print_qa_table(&R);
    else if (sw->n || documents) print_sweep_table(&R, 0);
    else print_table(&R);
    if (st[0].seeds >= 2 && n_pes >= 2) print_pairs(&R);
    int rc = compare_write_json(dir, task, preset, &R);
    if (!rc && sw->n) rc = write_sweep_csv(dir, st, n_pes, sw);
    return rc;
}
