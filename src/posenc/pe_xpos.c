/* xpos — RoPE with a per-pair decay (Sun et al. 2022, "A Length-Extrapolatable Transformer").
 *
 * Pairs, frequencies and rotation are RoPE's (interleaved layout, θ_c = base^(−2c/d)); pair c of
 * q at position t is also scaled by ζ_c^(t/γ_s) and of k at s by ζ_c^(−s/γ_s), with
 *
 *   ζ_c = (2c/d + γ) / (1 + γ),   γ = 0.4,   γ_s = scale_base = 512,
 *
 * so pair c of the score carries ζ_c^((t−s)/γ_s) ≤ 1: distant keys are damped, more so in the
 * fast pairs (small c) whose rotation alone would alias. The score depends on t − s only.
 *
 * Large positions: ζ_c^(t/γ_s) alone underflows (and ζ_c^(−s/γ_s) overflows) once t/γ_s is a
 * few hundred. Only t − s matters, so each row of the batch measures positions from its own
 * reference r = min + ⌊(max − min)/2⌋ of the row's positions (as the reference implementation,
 * torchscale, centres them): q is scaled by ζ_c^((t−r)/γ_s), k by ζ_c^(−(s−r)/γ_s), exponents
 * formed in double. Their product is exactly ζ_c^((t−s)/γ_s) in exact arithmetic, and a row whose
 * positions span fewer than ~72,000 (float; double: far more) stays in range. Generation with a
 * KV cache fixes r for all its passes (pe->cache_ref, the middle of the cache's capacity): keys
 * cached by earlier passes then share the reference of later queries.
 *
 * Site QK; no parameters. The scale is folded into RoPE's tables as an amplitude (rotary.c):
 * separate tables for queries (ζ^(+)) and keys (ζ^(−)).
 */
#include <math.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "posenc/rotary.h"

static const struct pelab_optdef xpos_options[] = {
    {"xpos-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL, "base of the frequencies θ_c = base^(−2c/d)"},
    {"xpos-scale-base", PELAB_OPT_REAL, "512", 1e-3, 1e12, NULL,
     "γ_s of the decay ζ_c^((t−s)/γ_s): larger decays more slowly"},
    {"xpos-gamma", PELAB_OPT_REAL, "0.4", 1e-6, 1e6, NULL, "γ of ζ_c = (2c/d + γ)/(1 + γ)"},
    {0},
};

struct xpos {
    struct pelab_rotary rot;
    double scale_base;
    double *theta;    /* (d/2,) */
    double *log_zeta; /* (d/2,) ln ζ_c */
};

static int xpos_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    if (pe->d % 2)
        return pelab_fail(PELAB_ERR_USAGE, "--pe xpos needs an even head width (d-model/heads = %d)", pe->d);
    struct xpos *x = calloc(1, sizeof *x);
    if (!x) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = x;
    const int P = pe->d / 2;
    double base = pelab_opt_real(opts, xpos_options, "xpos-base");
    double gamma = pelab_opt_real(opts, xpos_options, "xpos-gamma");
    x->scale_base = pelab_opt_real(opts, xpos_options, "xpos-scale-base");
    x->theta = malloc((size_t)P * sizeof *x->theta);
    x->log_zeta = malloc((size_t)P * sizeof *x->log_zeta);
    if (!x->theta || !x->log_zeta) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int c = 0; c < P; c++) {
        x->theta[c] = pow(base, -2.0 * c / pe->d);
        x->log_zeta[c] = log((2.0 * c / pe->d + gamma) / (1 + gamma));
    }
    return PELAB_OK;
}

static void xpos_free(struct pelab_posenc *pe) {
    struct xpos *x = pe->state;
    if (!x) return;
    pelab_rotary_free(&x->rot);
    free(x->theta);
    free(x->log_zeta);
    free(x);
}

/* Query tables ζ^((p−r)/γ_s)·(cos, sin)(p·θ), key tables ζ^(−(p−r)/γ_s)·(cos, sin)(p·θ). */
static int xpos_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct xpos *x = pe->state;
    const int P = pe->d / 2;
    if (pelab_rotary_reserve(&x->rot, (long)B * T, P, 1)) return PELAB_ERR_RUNTIME;
    pelab_real *cq = x->rot.cos_q, *sq = x->rot.sin_q, *ck = x->rot.cos_k, *sk = x->rot.sin_k;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        const int32_t *row = pos + (long)b * T;
        int64_t lo = row[0], hi = row[0];
        for (int t = 1; t < T; t++) {
            if (row[t] < lo) lo = row[t];
            if (row[t] > hi) hi = row[t];
        }
        const int64_t ref = pe->has_cache_ref ? pe->cache_ref : lo + (hi - lo) / 2;
        for (int t = 0; t < T; t++) {
            long i = ((long)b * T + t) * P;
            double rel = (double)(row[t] - ref) / x->scale_base;
            for (int c = 0; c < P; c++) {
                double a = (double)row[t] * x->theta[c], e = rel * x->log_zeta[c];
                double co = cos(a), si = sin(a), up = exp(e), down = exp(-e);
                cq[i + c] = (pelab_real)(up * co);
                sq[i + c] = (pelab_real)(up * si);
                ck[i + c] = (pelab_real)(down * co);
                sk[i + c] = (pelab_real)(down * si);
            }
        }
    }
    return PELAB_OK;
}

static void xpos_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                            const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                            int B, int T) {
    const struct xpos *x = pe->state;
    pelab_rotary_apply(&x->rot, qo, ko, q, k, ld, B, T, pe->H, pe->d, 0);
}

static void xpos_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                             const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                             const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    const struct xpos *x = pe->state;
    pelab_rotary_apply(&x->rot, dq, dk, dqo, dko, ld, B, T, pe->H, pe->d, 1);
}

/* Frequency usage: RoPE's d/2 pairs (interleaved); the magnitude is the pair's norm before the
 * decay ζ_c^(±p/γ_s), which depends on the position, not on the content. */
static int xpos_freqs(const struct pelab_posenc *pe, double *theta) {
    const struct xpos *x = pe->state;
    for (int c = 0; theta && c < pe->d / 2; c++) theta[c] = x->theta[c];
    return pe->d / 2;
}

static void xpos_freq_norms(const struct pelab_posenc *pe, double *out, const pelab_real *xv) {
    pelab_rotary_pair_norms(0, out, xv, pe->d);
}

const struct pelab_posenc_ops pelab_pe_xpos = {
    .name = "xpos",
    .display = "xPos",
    .summary = "RoPE with a per-pair decay ζ_c^((t-s)/512) of the score (Sun et al. 2022)",
    .sites = PELAB_SITE_QK,
    .contract = {PELAB_PE_RELATIVE, {"xpos-scale-base=8 xpos-gamma=0.2", NULL}},
    .options = xpos_options,
    .init = xpos_init,
    .free = xpos_free,
    .prepare = xpos_prepare,
    .qk_forward = xpos_qk_forward,
    .qk_backward = xpos_qk_backward,
    .freqs = xpos_freqs,
    .freq_norms = xpos_freq_norms,
    .freq_label = "pair norm",
};
