/* pope — Polar Coordinate Position Embeddings (the PoPE paper, "Decoupling the 'What' and
 * 'Where' with Polar Coordinate Positional Embeddings").
 *
 * Per head, with q, k ∈ R^d after the projections and d frequencies θ_c = base^(−c/d):
 *   magnitudes  μ_q = softplus(q),  μ_k = softplus(k)            (--pope-softplus off: μ = x)
 *   phases      φ_q = t·θ_c,        φ_k = s·θ_c + δ_c            (δ ∈ R^{H×d} per layer)
 *   score(t,s)  = Σ_c μ_q,c μ_k,c cos((t − s)·θ_c − δ_c)
 * so content sets only the magnitudes and position only the phases. Implemented as ordinary
 * attention on width 2d:  q' = [μ_q cos φ_q ; μ_q sin φ_q],  k' = [μ_k cos φ_k ; μ_k sin φ_k].
 *
 * δ is used as clamp(δ, −2π, 0); its gradient flows where −2π ≤ δ ≤ 0. Init 0 (`zero`, the
 * paper's choice for length generalisation) or uniform in [−2π, 0] (`uniform`).
 *
 * backward, per element (c and its partner d+c):
 *   dμ_q = dq'_c cos φ_q + dq'_{d+c} sin φ_q;      dq = dμ_q · sigmoid(q)
 *   dμ_k = dk'_c cos φ_k + dk'_{d+c} sin φ_k;      dk = dμ_k · sigmoid(k)
 *   dδ_c += μ_k (−dk'_c sin φ_k + dk'_{d+c} cos φ_k)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "kernels/cpu/vmath.h"

#define TWO_PI 6.283185307179586

static const struct pelab_optdef pope_options[] = {
    {"pope-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL, "base of the frequencies θ_c = base^(−c/d)"},
    {"pope-softplus", PELAB_OPT_SWITCH, "on", 0, 0, NULL, "magnitudes softplus(x); off: x as is (ablation)"},
    {"pope-delta", PELAB_OPT_SWITCH, "on", 0, 0, NULL, "learnable phase bias δ per layer, head, frequency; off: δ = 0 (ablation)"},
    {"pope-delta-init", PELAB_OPT_CHOICE, "zero", 0, 0, "zero|uniform", "δ initial value: 0, or uniform in [−2π, 0]"},
    {0},
};

struct pope {
    int softplus, delta_init_uniform;
    int *delta;                /* (N,) parameter index per layer, or NULL when δ is off */
    double *theta;             /* (d,) */
    pelab_real *cos, *sin;     /* (B,T,d) of the current forward pass */
    long table_cap;
    pelab_real *dphase;        /* (B,T,H,d) backward scratch: ∂loss/∂φ_k before the sum into dδ */
    long dphase_cap;
};

static int pope_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct pope *p = calloc(1, sizeof *p);
    if (!p) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = p;
    pe->qk_dim = 2 * pe->d;
    p->softplus = pelab_opt_switch(opts, pope_options, "pope-softplus");
    p->delta_init_uniform = pelab_opt_choice(opts, pope_options, "pope-delta-init") == 1;
    double base = pelab_opt_real(opts, pope_options, "pope-base");
    p->theta = malloc((size_t)pe->d * sizeof *p->theta);
    if (!p->theta) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int c = 0; c < pe->d; c++) p->theta[c] = pow(base, -(double)c / pe->d);
    if (pelab_opt_switch(opts, pope_options, "pope-delta")) {
        p->delta = malloc((size_t)pe->n_layers * sizeof *p->delta);
        if (!p->delta) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
        for (int l = 0; l < pe->n_layers; l++) {
            char name[PELAB_PARAM_NAME_MAX];
            snprintf(name, sizeof name, "blocks.%d.attn.pope.delta", l);
            int64_t shape[2] = {pe->H, pe->d};
            p->delta[l] = pelab_params_declare(params, name, 2, shape, 0);
        }
    }
    return PELAB_OK;
}

static void pope_free(struct pelab_posenc *pe) {
    struct pope *p = pe->state;
    if (!p) return;
    free(p->delta);
    free(p->theta);
    free(p->cos);
    free(p->sin);
    free(p->dphase);
    free(p);
}

static void pope_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    struct pope *p = pe->state;
    if (!p->delta) return;
    for (int l = 0; l < pe->n_layers; l++) {
        pelab_real *delta = pelab_params_data(pe->params, p->delta[l]);
        for (int i = 0; i < pe->H * pe->d; i++)
            delta[i] = p->delta_init_uniform ? (pelab_real)(-TWO_PI * pelab_rng_uniform(rng)) : 0;
    }
}

/* Grows *buf to hold n elements. */
static int reserve(pelab_real **buf, long *cap, long n) {
    if (n <= *cap) return PELAB_OK;
    free(*buf);
    *buf = malloc((size_t)n * sizeof **buf);
    *cap = *buf ? n : 0;
    return *buf ? PELAB_OK : pelab_fail(PELAB_ERR_RUNTIME, "out of memory for PoPE tables (%ld entries)", n);
}

/* Angle tables for this pass, and the backward pass's δ scratch sized for it, so the backward
 * pass allocates nothing. */
static int pope_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct pope *p = pe->state;
    long ntok = (long)B * T;
    if (p->delta && reserve(&p->dphase, &p->dphase_cap, ntok * pe->H * pe->d)) return PELAB_ERR_RUNTIME;
    return pelab_posenc_angles(&p->cos, &p->sin, &p->table_cap, pos, ntok, p->theta, pe->d);
}

static inline pelab_real clamp_delta(pelab_real x) {
    return x < (pelab_real)-TWO_PI ? (pelab_real)-TWO_PI : x > 0 ? 0 : x;
}

/* cos and sin of clamp(δ) for one layer, (H,d) each; δ = 0 when off. */
static void delta_trig(const struct pelab_posenc *pe, int layer, pelab_real *dc, pelab_real *ds) {
    const struct pope *p = pe->state;
    const pelab_real *delta = p->delta ? pelab_params_data(pe->params, p->delta[layer]) : NULL;
    for (int i = 0; i < pe->H * pe->d; i++) {
        double a = delta ? clamp_delta(delta[i]) : 0;
        dc[i] = (pelab_real)cos(a);
        ds[i] = (pelab_real)sin(a);
    }
}

static void pope_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                            const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                            int B, int T) {
    const struct pope *p = pe->state;
    const int H = pe->H, d = pe->d, sp = p->softplus;
    pelab_real dc[H * d], ds[H * d];
    delta_trig(pe, layer, dc, ds);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            long i = (long)b * T + t;
            const pelab_real *cs = p->cos + i * d, *sn = p->sin + i * d;
            for (int h = 0; h < H; h++) {
                const pelab_real *qi = q + i * ld + (long)h * d, *ki = k + i * ld + (long)h * d;
                pelab_real *qh = qo + (((long)b * H + h) * T + t) * 2 * d;
                pelab_real *kh = ko + (((long)b * H + h) * T + t) * 2 * d;
                const pelab_real *hc = dc + h * d, *hs = ds + h * d;
                for (int c = 0; c < d; c++) {
                    pelab_real mq = sp ? pelab_vsoftplus(qi[c]) : qi[c];
                    pelab_real mk = sp ? pelab_vsoftplus(ki[c]) : ki[c];
                    pelab_real ck = cs[c] * hc[c] - sn[c] * hs[c]; /* cos(φ + δ) */
                    pelab_real sk = sn[c] * hc[c] + cs[c] * hs[c]; /* sin(φ + δ) */
                    qh[c] = mq * cs[c];
                    qh[d + c] = mq * sn[c];
                    kh[c] = mk * ck;
                    kh[d + c] = mk * sk;
                }
            }
        }
}

static void pope_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                             const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                             const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    struct pope *p = pe->state;
    const int H = pe->H, d = pe->d, sp = p->softplus;
    pelab_real dc[H * d], ds[H * d];
    delta_trig(pe, layer, dc, ds);
    const long ntok = (long)B * T;
    pelab_real *dphase = p->delta ? p->dphase : NULL; /* sized by prepare() */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            long i = (long)b * T + t;
            const pelab_real *cs = p->cos + i * d, *sn = p->sin + i * d;
            for (int h = 0; h < H; h++) {
                const pelab_real *qi = q + i * ld + (long)h * d, *ki = k + i * ld + (long)h * d;
                pelab_real *dqi = dq + i * ld + (long)h * d, *dki = dk + i * ld + (long)h * d;
                const pelab_real *gq = dqo + (((long)b * H + h) * T + t) * 2 * d;
                const pelab_real *gk = dko + (((long)b * H + h) * T + t) * 2 * d;
                const pelab_real *hc = dc + h * d, *hs = ds + h * d;
                for (int c = 0; c < d; c++) {
                    pelab_real ck = cs[c] * hc[c] - sn[c] * hs[c];
                    pelab_real sk = sn[c] * hc[c] + cs[c] * hs[c];
                    pelab_real dmq = gq[c] * cs[c] + gq[d + c] * sn[c];
                    pelab_real dmk = gk[c] * ck + gk[d + c] * sk;
                    dqi[c] = sp ? dmq * pelab_vsigmoid(qi[c]) : dmq;
                    dki[c] = sp ? dmk * pelab_vsigmoid(ki[c]) : dmk;
                    if (dphase) {
                        pelab_real mk = sp ? pelab_vsoftplus(ki[c]) : ki[c];
                        dphase[(i * H + h) * d + c] = mk * (gk[d + c] * ck - gk[c] * sk);
                    }
                }
            }
        }
    if (!dphase) return;
    /* dδ[h,c] = Σ over tokens, in token order; (h,c) columns split across threads. */
    const pelab_real *delta = pelab_params_data(pe->params, p->delta[layer]);
    pelab_real *ddelta = pelab_params_grad(pe->params, p->delta[layer]);
#pragma omp parallel for schedule(static)
    for (int j = 0; j < H * d; j++) {
        if (delta[j] < (pelab_real)-TWO_PI || delta[j] > 0) continue; /* clamped: no gradient */
        pelab_real sum = 0;
        for (long i = 0; i < ntok; i++) sum += dphase[i * H * d + j];
        ddelta[j] += sum;
    }
}

/* Frequency usage: d frequencies θ_c = base^(−c/d), magnitude μ_c = softplus(x_c) as the forward
 * pass forms it; with --pope-softplus off μ_c = x_c may be negative, and its magnitude is |x_c|
 * (a negative μ is the same complex number as |μ| at phase + π). */
static int pope_freqs(const struct pelab_posenc *pe, double *theta) {
    const struct pope *p = pe->state;
    for (int c = 0; theta && c < pe->d; c++) theta[c] = p->theta[c];
    return pe->d;
}

static void pope_freq_norms(const struct pelab_posenc *pe, double *out, const pelab_real *x) {
    const struct pope *p = pe->state;
    for (int c = 0; c < pe->d; c++) out[c] = p->softplus ? (double)pelab_vsoftplus(x[c]) : fabs((double)x[c]);
}

const struct pelab_posenc_ops pelab_pe_pope = {
    .name = "pope",
    .summary = "polar embedding: softplus magnitudes, phases p·base^(-c/d) + δ, width 2d (PoPE paper)",
    .sites = PELAB_SITE_QK,
    .options = pope_options,
    .init = pope_init,
    .free = pope_free,
    .init_params = pope_init_params,
    .prepare = pope_prepare,
    .qk_forward = pope_qk_forward,
    .qk_backward = pope_qk_backward,
    .freqs = pope_freqs,
    .freq_norms = pope_freq_norms,
};
