/* pelab analyze probe: how an indirect-indexing run's attention heads look up letters, at every
 * checkpoint it kept (DIR/checkpoints/state-*.safetensors, in step order) and at its final model,
 * so that a head's learning shows up before the accuracy does. One CSV row per (step, layer, head):
 *
 *   step        the update the weights are from
 *   acc         accuracy at the scored answer positions of the probe batches (the model's argmax)
 *   delta_pref  an encoding with a phase bias (posenc.h's phase_bias, PoPE's δ): the distance
 *               j = 0..T−1 a head's δ prefers, argmax_j Σ_c cos(jθ_c − δ_c) (the score with equal
 *               magnitudes, δ as the forward pass uses it); empty otherwise
 *   delta_cos1  the same: (1/F) Σ_c cos(θ_c − δ_c) over its F frequencies, 1 when δ is tuned
 *               exactly to distance 1; empty otherwise
 *   att_pref    the distance j the head attends to most from inside the source string: argmax_j
 *               of the mean over queries t = 1..L−1 of att(t, t − j)
 *   prev_mass   mean over those queries of att(t, t − 1): a previous-letter head has it near 1
 *   ans_src, ans_prev, ans_next, ans_target
 *               mean attention from each answer position to the source letter's position i in
 *               the string, to i − 1, to i + 1 (each averaged over the queries where it exists),
 *               and to the target's position i + shift
 *   ans_letter  mean attention from each answer position to its query's own copy of the source
 *               letter (", X, +1, "), six tokens back for a one-digit shift: a copy needs only this one
 *
 * Attention is the reference kernel's probabilities (pelab_model_attention) on the first
 * --batches batches of --split. The run is built from config.json alone, so a run still training
 * (no model.safetensors yet) or stopped early is probed over the checkpoints it has.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "checkpoints.h"
#include "pelab/dist.h"
#include "pelab/io.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "pelab/train.h"

static const struct pelab_optdef probe_options[] = {
    {"model", PELAB_OPT_STR, "", 0, 0, NULL, "run directory of an indirect-indexing run (required)"},
    {"out", PELAB_OPT_STR, "-", 0, 0, NULL, "CSV file to write (replaced atomically), or - for standard output"},
    {"batches", PELAB_OPT_INT, "2", 1, 1e6, NULL, "batches of the split to run the model on"},
    {"batch", PELAB_OPT_INT, "64", 1, 65536, NULL, "examples per batch"},
    {"split", PELAB_OPT_CHOICE, "val", 0, 0, "val|test|train", "split the examples come from (from its first example)"},
    PELAB_OPT_ROW_THREADS,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

static void analyze_probe_help(FILE *f) {
    struct pelab_group g = {"options", probe_options};
    fprintf(f, "usage: pelab analyze probe --model DIR [--out FILE|-] [--batches N] [--batch N]\n"
               "                           [--split val|test|train] [--threads N]\n\n"
               "For an indirect-indexing run, at each kept checkpoint and at the final model: per\n"
               "layer and head, the distance PoPE's δ prefers, the distance the head attends to\n"
               "from inside the string, its attention to the previous letter, and the attention\n"
               "from each answer position to the source letter, its neighbours and the target.\n"
               "Columns step,layer,head,acc,delta_pref,delta_cos1,att_pref,prev_mass,ans_src,\n"
               "ans_prev,ans_next,ans_target,ans_letter (see lab/analyze_probe.c).\n");
    pelab_args_help(f, &g, 1, NULL);
}

/* One scored query of a batch row: where its answer is read and which letters it concerns. */
struct query {
    int row, answer, letter, src, target; /* answer and query-letter positions; indices in the string */
};

/* The string's length and the queries of one row, read back from the tokens through the task's
 * token texts: the string is the leading letters; each answer position (a target) ends
 * "<string>, X, ±k, " with X the source letter. Returns the number of queries (at most max). */
static int parse_row(const struct pelab_task *t, const struct pelab_batch *b, int r, int *L,
                     struct query *q, int max) {
    const int32_t *tok = b->tokens + (size_t)r * b->T, *tgt = b->targets + (size_t)r * b->T;
    char text[1024];
    int n = 0;
    for (; n < b->T && n < (int)sizeof text - 1; n++) {
        const char *s = t->ops->token_text(t, tok[n]);
        text[n] = s && s[0] ? s[0] : '\0';
    }
    int len = 0;
    while (len < n && ((text[len] >= 'A' && text[len] <= 'Z') || (text[len] >= 'a' && text[len] <= 'z')))
        len++;
    *L = len;
    int count = 0;
    for (int a = 0; a < n && count < max; a++) {
        if (tgt[a] < 0) continue;
        /* text[a] = ' ', text[a−1] = ',', digits, a sign, ' ', ',', then the source letter */
        int p = a - 2, mag = 0, scale = 1;
        while (p > 0 && text[p] >= '0' && text[p] <= '9') mag += scale * (text[p] - '0'), scale *= 10, p--;
        if (p < 3 || (text[p] != '+' && text[p] != '-')) continue;
        int shift = text[p] == '-' ? -mag : mag;
        char letter = text[p - 3];
        int src = -1;
        for (int i = 0; i < len; i++)
            if (text[i] == letter) src = i;
        if (src < 0 || src + shift < 0 || src + shift >= len) continue;
        q[count++] = (struct query){r, a, p - 3, src, src + shift};
    }
    return count;
}

/* The probe of the weights now in the model: one row per layer and head, over nb batches of the
 * split, filled one at a time into b (the same examples at every step: the fill is indexed). */
static int probe_step(FILE *f, long step, struct pelab_run *run, struct pelab_batch *b, int nb,
                      enum pelab_split split) {
    struct pelab_model *m = &run->model;
    const int N = m->cfg.n_layers, H = m->cfg.n_heads;
    /* a phase bias δ (H,F) at frequencies θ (F,) (ops->phase_bias: PoPE's) */
    const struct pelab_posenc_ops *ops = m->pe.ops;
    const int F = ops->phase_bias ? ops->freqs(&m->pe, NULL) : 0;
    /* (N,H) sums: prev_mass, string queries; answer masses src, prev, next, target and counts */
    double *acc = calloc((size_t)N * H * 16, sizeof *acc);
    double *theta = F ? malloc((size_t)F * sizeof *theta) : NULL, *delta = F ? malloc((size_t)H * F * sizeof *delta) : NULL;
    double *dist = NULL;
    long correct = 0, scored = 0;
    int rc = acc && (!F || (theta && delta)) ? PELAB_OK : pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    if (F && !rc) ops->freqs(&m->pe, theta);
    for (int k = 0; !rc && k < nb; k++) {
        run->task.ops->fill(&run->task, split, (uint64_t)k * b->B, b);
        if ((rc = pelab_eval_positions(m, &run->task, b, (uint64_t)k * b->B))) break; /* as evaluated */
        const int T = b->T, V = m->cfg.vocab;
        pelab_model_forward(m, b->tokens, b->targets, b->pos, b->B, T);
        if (m->status) {
            rc = m->status;
            break;
        }
        if (!dist && !(dist = calloc((size_t)N * H * T, sizeof *dist))) {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
            break;
        }
        const pelab_real *logits = pelab_model_logits(m);
        for (long i = 0; i < (long)b->B * T; i++) {
            if (b->targets[i] < 0) continue;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (logits[i * V + v] > logits[i * V + best]) best = v;
            correct += best == b->targets[i];
            scored++;
        }
        for (int r = 0; r < b->B; r++) {
            struct query q[16];
            int L;
            const int nq = parse_row(&run->task, b, r, &L, q, 16);
            for (int l = 0; l < N; l++) {
                const pelab_real *att = pelab_model_attention(m, l);
                for (int h = 0; h < H; h++) {
                    const pelab_real *a = att + (((long)r * H + h) * T) * T; /* (T,T) */
                    double *s = acc + ((size_t)l * H + h) * 16;
                    double *dd = dist + ((size_t)l * H + h) * T;
                    for (int t = 1; t < L; t++) {
                        s[0] += a[(long)t * T + t - 1];
                        s[1] += 1;
                        for (int j = 0; j <= t; j++) dd[j] += a[(long)t * T + t - j];
                    }
                    for (int i = 0; i < nq; i++) {
                        const pelab_real *row = a + (long)q[i].answer * T;
                        s[2] += row[q[i].src], s[3] += 1;
                        if (q[i].src > 0) s[4] += row[q[i].src - 1], s[5] += 1;
                        if (q[i].src + 1 < L) s[6] += row[q[i].src + 1], s[7] += 1;
                        s[8] += row[q[i].target], s[9] += 1;
                        s[10] += row[q[i].letter], s[11] += 1;
                    }
                }
            }
        }
    }
    const int T = b->T;
    for (int l = 0; !rc && l < N; l++) {
        if (F && ops->phase_bias(&m->pe, l, delta)) { /* none in this run (switched off): δ = 0 */
            pelab_clear_error();
            for (int i = 0; i < H * F; i++) delta[i] = 0;
        }
        for (int h = 0; h < H; h++) {
            const double *s = acc + ((size_t)l * H + h) * 16;
            const double *dd = dist + ((size_t)l * H + h) * T;
            fprintf(f, "%ld,%d,%d,%.6f,", step, l, h, scored ? (double)correct / scored : 0.0);
            if (F) {
                /* score of distance j with equal magnitudes: Σ_c cos(jθ_c − δ_c) */
                int pref = 0;
                double best = -1e300, cos1 = 0;
                for (int j = 0; j < T; j++) {
                    double sc = 0;
                    for (int c = 0; c < F; c++) sc += cos(j * theta[c] - delta[h * F + c]);
                    if (sc > best) best = sc, pref = j;
                    if (j == 1) cos1 = sc / F;
                }
                fprintf(f, "%d,%.6f,", pref, cos1);
            } else {
                fprintf(f, ",,");
            }
            int apref = 0;
            for (int j = 1; j < T; j++)
                if (dd[j] > dd[apref]) apref = j;
            fprintf(f, "%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n", apref, s[1] ? s[0] / s[1] : 0,
                    s[3] ? s[2] / s[3] : 0, s[5] ? s[4] / s[5] : 0, s[7] ? s[6] / s[7] : 0,
                    s[9] ? s[8] / s[9] : 0, s[11] ? s[10] / s[11] : 0);
        }
    }
    free(acc);
    free(theta);
    free(delta);
    free(dist);
    return rc;
}

/* The run from config.json alone: its task and an untrained model of its settings. */
static int open_run(struct pelab_run *r, const char *dir) {
    memset(r, 0, sizeof *r);
    int rc = pelab_run_read_config(dir, &r->settings);
    if (rc) return rc;
    const char *task = pelab_opts_get(&r->settings, "task");
    if (!task || strcmp(task, "indirect") != 0)
        return pelab_fail(PELAB_ERR_USAGE, "%s: a run of task '%s'; analyze probe needs an indirect-indexing run",
                          dir, task ? task : "none");
    if ((rc = pelab_task_init(&r->task, task, &r->settings))) return rc;
    pelab_opts_set(&r->settings, "attention", "ref"); /* the kernel that keeps the probabilities */
    if ((rc = pelab_model_init(&r->model, &r->settings, r->task.vocab, r->task.seq_len))) {
        pelab_task_free(&r->task);
        return rc;
    }
    return PELAB_OK;
}

int pelab_analyze_probe(int argc, char **argv) {
    struct pelab_group g = {"options", probe_options};
    static struct pelab_opts opts;
    int help;
    int rc = pelab_args_parse(argc, argv, &g, 1, &opts, &help);
    if (!rc) rc = pelab_args_check_only(&opts, probe_options, "analyze probe");
    if (rc) return rc;
    if (help) {
        analyze_probe_help(stdout);
        return PELAB_OK;
    }
    const char *dir = pelab_opt_str(&opts, probe_options, "model");
    if (!dir[0]) return pelab_fail(PELAB_ERR_USAGE, "--model DIR is required (a run directory)");
    pelab_threads_set(pelab_dist_threads((int)pelab_opt_int(&opts, probe_options, "threads")));
    static struct pelab_run run;
    if ((rc = open_run(&run, dir))) return rc;

    char **files = NULL;
    int nf = 0;
    rc = pelab_weight_files(dir, &files, &nf);

    const int nb = (int)pelab_opt_int(&opts, probe_options, "batches");
    const int B = (int)pelab_opt_int(&opts, probe_options, "batch");
    static const enum pelab_split splits[] = {PELAB_SPLIT_VAL, PELAB_SPLIT_TEST, PELAB_SPLIT_TRAIN};
    const enum pelab_split split = splits[pelab_opt_choice(&opts, probe_options, "split")];
    struct pelab_batch batch = {0}; /* one batch at a time: --batches costs time, not memory */
    const int T = pelab_task_split_len(&run.task, split);
    if (!rc) rc = pelab_batch_alloc(&batch, B, T);
    if (!rc) rc = pelab_model_reserve(&run.model, B, T);

    const char *out = pelab_opt_str(&opts, probe_options, "out");
    struct pelab_atomic_file af = {0};
    FILE *f = stdout;
    if (!rc && strcmp(out, "-") != 0) {
        if (!(rc = pelab_atomic_open(&af, out))) f = af.f;
    }
    if (!rc)
        fprintf(f, "step,layer,head,acc,delta_pref,delta_cos1,att_pref,prev_mass,ans_src,ans_prev,ans_next,ans_target,ans_letter\n");
    long last = -1; /* model.safetensors is also saved with each checkpoint: probed once */
    for (int i = 0; !rc && i < nf; i++) {
        long step;
        if (!(rc = pelab_load_weights(&run.model, files[i], &step)) && step != last)
            rc = probe_step(f, step, &run, &batch, nb, split);
        last = step;
    }
    if (f != stdout) {
        if (rc) pelab_atomic_abort(&af);
        else rc = pelab_atomic_commit(&af);
    } else if (!rc && fflush(stdout) != 0) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "writing standard output failed");
    }
    pelab_batch_free(&batch);
    pelab_weight_files_free(files, nf);
    pelab_run_close(&run);
    return rc;
}
