/* pelab analyze: views of what a trained run has learned, as CSV.
 *
 *   bias   BIAS encodings (alibi, t5, fire, fire-shared): bias per layer, head and distance
 *          t − s = 0..max-distance, columns layer,head,distance,bias;
 *          PoPE: δ per layer, head and frequency as the forward pass uses it (clamped to
 *          [−2π, 0]), columns layer,head,freq,theta,delta.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "pelab/io.h"
#include "pelab/status.h"
#include "pelab/train.h"

#define TWO_PI 6.283185307179586

int pelab_analyze_seqpe(int argc, char **argv); /* cli/analyze_seqpe.c */

static const struct pelab_optdef analyze_options[] = {
    {"model", PELAB_OPT_STR, "", 0, 0, NULL, "run directory (required)"},
    {"out", PELAB_OPT_STR, "-", 0, 0, NULL, "CSV file to write (replaced atomically), or - for standard output"},
    {"max-distance", PELAB_OPT_INT, "0", 0, 1e7, NULL,
     "bias: largest distance t − s shown (0: the run's training context T)"},
    {"query-pos", PELAB_OPT_INT, "-1", -1, 2147483647.0, NULL,
     "bias: query position t of every row, the key at s = t − distance (negative keys are "
     "evaluated by the formula as they are); −1: t = distance and s = 0. Only FIRE depends "
     "on it, through max(t, L)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

void pelab_cmd_analyze_help(FILE *f) {
    struct pelab_group g = {"options", analyze_options};
    fprintf(f, "usage: pelab analyze bias --model DIR [--out FILE|-] [--max-distance N] [--query-pos N]\n\n"
               "Writes what the run's positional encoding learned as CSV:\n"
               "  alibi, t5, fire, fire-shared: the attention bias of every layer and head for\n"
               "      distances t - s = 0..max-distance; columns layer,head,distance,bias.\n"
               "      By default the query sits at t = distance and the key at s = 0, so FIRE's\n"
               "      rows with t ≥ L = |ℓ|·T use the normaliser ψ(t) (see --query-pos).\n"
               "  pope: the phase bias δ of every layer, head and frequency, clamped to [−2π, 0]\n"
               "      as the forward pass uses it; columns layer,head,freq,theta,delta.\n"
               "Other encodings have neither: a usage error.\n");
    pelab_args_help(f, &g, 1, NULL);
    fprintf(f, "\nalso: pelab analyze seqpe --model DIR  (SeqPE's e_p . e_q matrix; its --help for options)\n");
}

/* bias(t, s) of every layer and head along the distances 0..maxd, one tile per (layer, head):
 * queries 0..maxd against key 0, or query q against keys q − 0..q − maxd. */
static int write_bias(FILE *f, struct pelab_model *m, int maxd, long query_pos) {
    const int n = maxd + 1, nq = query_pos < 0 ? n : 1, nk = query_pos < 0 ? 1 : n;
    int32_t *pq = malloc((size_t)nq * sizeof *pq), *pk = malloc((size_t)nk * sizeof *pk);
    pelab_real *out = malloc((size_t)n * sizeof *out);
    int rc = PELAB_OK;
    if (!pq || !pk || !out) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d distances", n);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (query_pos < 0) pq[i] = i;
        else pk[i] = (int32_t)(query_pos - i);
    }
    if (query_pos < 0) pk[0] = 0;
    else pq[0] = (int32_t)query_pos;
    if ((rc = pelab_posenc_prepare(&m->pe, query_pos < 0 ? pq : pk, 1, n))) goto done;
    fprintf(f, "layer,head,distance,bias\n");
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < m->cfg.n_heads; h++) {
            m->pe.ops->bias_tile(&m->pe, l, h, out, pq, nq, pk, nk);
            for (int i = 0; i < n; i++) fprintf(f, "%d,%d,%d,%.9g\n", l, h, i, (double)out[i]);
        }
done:
    free(pq);
    free(pk);
    free(out);
    return rc;
}

/* PoPE's δ (H, d) per layer, clamped, with each frequency θ_c = base^(−c/d). */
static int write_delta(FILE *f, struct pelab_model *m, const struct pelab_opts *settings, const char *dir) {
    const int H = m->cfg.n_heads, d = m->cfg.d_model / H;
    const double base = pelab_opt_real(settings, m->pe.ops->options, "pope-base");
    fprintf(f, "layer,head,freq,theta,delta\n");
    for (int l = 0; l < m->cfg.n_layers; l++) {
        char name[PELAB_PARAM_NAME_MAX];
        snprintf(name, sizeof name, "blocks.%d.attn.pope.delta", l);
        int i = pelab_params_find(&m->params, name);
        if (i < 0)
            return pelab_fail(PELAB_ERR_USAGE, "%s: a PoPE run without δ (--pope-delta off): no bias to show", dir);
        const pelab_real *delta = pelab_params_data(&m->params, i);
        for (int h = 0; h < H; h++)
            for (int c = 0; c < d; c++) {
                double x = delta[h * d + c];
                x = x < -TWO_PI ? -TWO_PI : x > 0 ? 0 : x;
                fprintf(f, "%d,%d,%d,%.9g,%.9g\n", l, h, c, pow(base, -(double)c / d), x);
            }
    }
    return PELAB_OK;
}

static int analyze_bias(const struct pelab_opts *opts) {
    const char *dir = pelab_opt_str(opts, analyze_options, "model");
    if (!dir[0]) return pelab_fail(PELAB_ERR_USAGE, "--model DIR is required (a run directory)");
    const char *path = pelab_opt_str(opts, analyze_options, "out");
    static struct pelab_run run;
    int rc = pelab_run_open(&run, dir);
    if (rc) return rc;
    struct pelab_model *m = &run.model;
    const int is_bias = (m->pe.ops->sites & PELAB_SITE_BIAS) && m->pe.ops->bias_tile;
    const int is_pope = strcmp(m->pe.ops->name, "pope") == 0;
    if (!is_bias && !is_pope) {
        rc = pelab_fail(PELAB_ERR_USAGE, "%s: encoding '%s' has no attention bias or PoPE δ to show "
                        "(bias: alibi, t5, fire, fire-shared; δ: pope)", dir, m->pe.ops->name);
        pelab_run_close(&run);
        return rc;
    }
    int maxd = (int)pelab_opt_int(opts, analyze_options, "max-distance");
    if (maxd == 0) maxd = m->cfg.max_seq;
    long query_pos = pelab_opt_int(opts, analyze_options, "query-pos");
    struct pelab_atomic_file af = {0};
    FILE *f = stdout;
    if (strcmp(path, "-") != 0) {
        if ((rc = pelab_atomic_open(&af, path))) {
            pelab_run_close(&run);
            return rc;
        }
        f = af.f;
    }
    rc = is_bias ? write_bias(f, m, maxd, query_pos) : write_delta(f, m, &run.settings, dir);
    if (f != stdout) {
        if (rc) pelab_atomic_abort(&af);
        else rc = pelab_atomic_commit(&af);
    } else if (fflush(stdout) != 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "writing standard output failed");
    pelab_run_close(&run);
    return rc;
}

int pelab_cmd_analyze(int argc, char **argv) {
    if (argc > 0 && (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0)) {
        pelab_cmd_analyze_help(stdout);
        return PELAB_OK;
    }
    if (argc < 1 || strncmp(argv[0], "--", 2) == 0)
        return pelab_fail(PELAB_ERR_USAGE, "analyze needs an analysis first: pelab analyze bias --model DIR");
    if (strcmp(argv[0], "seqpe") == 0) return pelab_analyze_seqpe(argc - 1, argv + 1);
    if (strcmp(argv[0], "bias") != 0)
        return pelab_fail(PELAB_ERR_USAGE, "analyze: unknown analysis '%s' (known: bias)", argv[0]);
    struct pelab_group g = {"options", analyze_options};
    static struct pelab_opts opts;
    int help;
    int rc = pelab_args_parse(argc - 1, argv + 1, &g, 1, &opts, &help);
    if (!rc) rc = pelab_args_check_only(&opts, analyze_options, "analyze");
    if (rc) return rc;
    if (help) {
        pelab_cmd_analyze_help(stdout);
        return PELAB_OK;
    }
    return analyze_bias(&opts);
}
