/* The length-extrapolation sweep (pelab/sweep.h): parse the lengths, check them all, then one
 * evaluation of the task's cut per length. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/clock.h"
#include "pelab/options.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/sweep.h"
#include "pelab/train.h"

#define LENGTH_MAX (1 << 24) /* tokens; far beyond what fits a machine's memory */

int pelab_sweep_parse(const char *spec, int T, struct pelab_sweep_length *out, int *n) {
    double v[PELAB_SWEEP_MAX];
    char items[PELAB_SWEEP_MAX][PELAB_SIZE_ITEM_MAX];
    int rc = pelab_parse_sizes("lengths", spec, T, PELAB_SWEEP_MAX, v, items, n,
                               "is neither a multiple of the training length (2x, 1.5x) nor a token count (512)",
                               "1x,2x,4x or 512,1024");
    for (int i = 0; !rc && i < *n; i++) {
        if (strlen(items[i]) >= sizeof out[i].label) /* no length needs that many characters */
            return pelab_fail(PELAB_ERR_USAGE, "--lengths: '%s' is too long for a length", items[i]);
        if (v[i] < 1 || v[i] > LENGTH_MAX)
            return pelab_fail(PELAB_ERR_USAGE, "--lengths: '%s' is %.0f tokens; lengths run from 1 "
                              "to %d", items[i], v[i], LENGTH_MAX);
        out[i].tokens = (int)v[i];
        snprintf(out[i].label, sizeof out[i].label, "%s", items[i]);
    }
    return rc;
}

/* Whether the encoding accepts positions 0..L-1 (its prepare step refuses what it cannot
 * represent, naming the option that would allow it). */
static int check_positions(struct pelab_model *m, int L) {
    int32_t *pos = malloc((size_t)L * sizeof *pos);
    if (!pos) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d positions", L);
    for (int p = 0; p < L; p++) pos[p] = p;
    int rc = pelab_check_positions(m, pos, 1, L);
    free(pos);
    return rc;
}

int pelab_sweep_check(struct pelab_model *m, const struct pelab_task *t, enum pelab_split split,
                      const struct pelab_sweep_length *lengths, int n) {
    if (!t->ops->windows)
        return pelab_fail(PELAB_ERR_USAGE, "task %s has no documents to evaluate at other "
                          "lengths (tasks of documents: text, dna, music)", t->ops->name);
    int longest = 0;
    for (int i = 0; i < n; i++) {
        struct pelab_window_count c;
        int L = lengths[i].tokens;
        if (t->ops->windows(t, split, L, 1, &c) == 0)
            return pelab_fail(PELAB_ERR_USAGE, "--lengths %s: a window of %d tokens needs a "
                              "document of %d; the longest %s document of task %s has %llu",
                              lengths[i].label, L, L + 1, pelab_split_name(split), t->ops->name,
                              (unsigned long long)c.longest);
        if (L > longest) longest = L;
    }
    return check_positions(m, longest);
}

int pelab_sweep(struct pelab_model *m, const struct pelab_task *t, enum pelab_split split,
                const struct pelab_sweep_length *lengths, int n, long batch_tokens,
                struct pelab_sweep_row *rows,
                void (*progress)(void *ctx, const struct pelab_sweep_row *row), void *ctx) {
    int rc = pelab_sweep_check(m, t, split, lengths, n);
    if (rc) return rc;
    pelab_model_set_attention(m, PELAB_ATTN_KERNEL_TILED);
    double work = 0;
    uint64_t windows = 0;
    for (int i = 0; i < n; i++) {
        struct pelab_window_count c;
        uint64_t w = t->ops->windows(t, split, lengths[i].tokens, 1, &c);
        work += (double)w * pelab_eval_cost(m, lengths[i].tokens);
        windows += w;
    }
    char what[64];
    snprintf(what, sizeof what, "length sweep of %d length%s", n, n == 1 ? "" : "s");
    pelab_eval_span_begin(what, work, windows);
    for (int i = 0; i < n; i++) {
        int L = lengths[i].tokens;
        long b = batch_tokens / L;
        int batch = b < 1 ? 1 : b > 65536 ? 65536 : (int)b;
        double t0 = pelab_clock_s();
        struct pelab_eval_result r;
        pelab_eval_span_part(lengths[i].label);
        if ((rc = pelab_evaluate_windows(m, t, split, L, 1, batch, &r))) {
            pelab_eval_span_end();
            return rc;
        }
        struct pelab_window_count c;
        t->ops->windows(t, split, L, 1, &c);
        struct pelab_sweep_row *row = &rows[i];
        memset(row, 0, sizeof *row);
        row->length = L;
        snprintf(row->label, sizeof row->label, "%s", lengths[i].label);
        row->multiple = (double)L / t->seq_len;
        row->documents = c.documents;
        row->windows = r.examples;
        row->tokens = r.targets;
        row->loss = r.loss;
        row->ppl = r.ppl;
        row->bpb = r.bpb;
        row->seconds = pelab_clock_s() - t0;
        if (progress) progress(ctx, row);
    }
    pelab_eval_span_end();
    return PELAB_OK;
}

void pelab_sweep_json_row_start(struct pelab_sb *sb, int i, const char *label, int length,
                                double multiple) {
    pelab_sb_printf(sb, "%s{\"label\": ", i ? ", " : "");
    pelab_sb_json_string(sb, label);
    pelab_sb_printf(sb, ", \"length\": %d, \"multiple\": ", length);
    pelab_sb_json_number(sb, multiple);
}

void pelab_sweep_json(struct pelab_sb *sb, const struct pelab_sweep_row *rows, int n) {
    pelab_sb_printf(sb, "[");
    for (int i = 0; i < n; i++) {
        const struct pelab_sweep_row *r = &rows[i];
        pelab_sweep_json_row_start(sb, i, r->label, r->length, r->multiple);
        pelab_sb_printf(sb, ", \"documents\": %llu, \"windows\": %llu, \"tokens\": %llu, "
                        "\"loss\": ", (unsigned long long)r->documents,
                        (unsigned long long)r->windows, (unsigned long long)r->tokens);
        pelab_sb_json_number(sb, r->loss);
        pelab_sb_printf(sb, ", \"perplexity\": ");
        pelab_sb_json_number(sb, r->ppl);
        if (r->bpb > 0) {
            pelab_sb_printf(sb, ", \"bits_per_byte\": ");
            pelab_sb_json_number(sb, r->bpb);
        }
        pelab_sb_printf(sb, ", \"seconds\": ");
        pelab_sb_json_number(sb, r->seconds);
        pelab_sb_printf(sb, "}");
    }
    pelab_sb_printf(sb, "]");
}

void pelab_sweep_csv(struct pelab_sb *sb, const char *pe, const struct pelab_sweep_row *rows,
                     int n) {
    const int bpb = n > 0 && rows[0].bpb > 0;
    pelab_sb_printf(sb, "pe,label,length,multiple,documents,windows,tokens,nll,ppl%s\n",
                    bpb ? ",bpb" : "");
    for (int i = 0; i < n; i++) {
        const struct pelab_sweep_row *r = &rows[i];
        pelab_sb_csv_cell(sb, pe);
        pelab_sb_printf(sb, ",%s,%d,%.9g,%llu,%llu,%llu,%.9g,%.9g", r->label, r->length,
                        r->multiple, (unsigned long long)r->documents,
                        (unsigned long long)r->windows, (unsigned long long)r->tokens, r->loss,
                        r->ppl);
        if (bpb) pelab_sb_printf(sb, ",%.9g", r->bpb);
        pelab_sb_printf(sb, "\n");
    }
}
