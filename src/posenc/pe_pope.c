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
 * δ is used as clamp(δ, −2π, 0); its gradient flows where −2π ≤ δ ≤ 0 (--pope-delta-clamp off: δ
 * as is, gradient everywhere; --pope-delta-train off: no gradient, δ keeps its initial value).
 * Init 0 (`zero`, the paper's choice for length generalisation), uniform in [−2π, 0] (`uniform`),
 * or `offset`: every head of every layer prefers the distance t − s = K (--pope-delta-offset K),
 *   δ_c = Kθ_c − 2π·ceil(Kθ_c / 2π)  ∈ (−2π, 0]   (≡ Kθ_c mod 2π, so cos(Kθ_c − δ_c) = 1 for all c);
 * with equal magnitudes the score Σ_c cos((t − s − K)θ_c) then peaks at t − s = K.
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
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vmath.h"

#define TWO_PI 6.283185307179586

static const struct pelab_optdef pope_options[] = {
    {"pope-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL, "base of the frequencies θ_c = base^(−c/d)"},
    {"pope-softplus", PELAB_OPT_SWITCH, "on", 0, 0, NULL, "magnitudes softplus(x); off: x as is (ablation)"},
    {"pope-delta", PELAB_OPT_SWITCH, "on", 0, 0, NULL, "learnable phase bias δ per layer, head, frequency; off: δ = 0 (ablation)"},
    {"pope-delta-init", PELAB_OPT_CHOICE, "zero", 0, 0, "zero|uniform|offset",
     "δ initial value: 0; uniform in [−2π, 0]; or offset: every head prefers t − s = "
     "--pope-delta-offset (δ_c = Kθ_c wrapped into [−2π, 0])"},
    {"pope-delta-offset", PELAB_OPT_INT, "1", 0, 1e6, NULL,
     "the distance K that --pope-delta-init offset sets every head to prefer"},
    {"pope-delta-clamp", PELAB_OPT_SWITCH, "on", 0, 0, NULL,
     "δ used as clamp(δ, −2π, 0), no gradient outside; off: δ as is, gradient everywhere (ablation)"},
    {"pope-delta-train", PELAB_OPT_SWITCH, "on", 0, 0, NULL,
     "δ learnt; off: δ keeps its initial value (no gradient; ablation)"},
    {0},
};

enum delta_init { DELTA_ZERO, DELTA_UNIFORM, DELTA_OFFSET }; /* order of the choices */

struct pope {
    int softplus;
    enum delta_init delta_init;
    int delta_offset;          /* K of DELTA_OFFSET */
    int clamp, train;          /* --pope-delta-clamp, --pope-delta-train */
    int *delta;                /* (N,) parameter index per layer, or NULL when δ is off */
    double *theta;             /* (d,) */
    pelab_real *cos, *sin;     /* (B,T,d) of the current forward pass */
    long table_cap;
    pelab_real *dphase;        /* (B,T,H,d) backward scratch: ∂loss/∂φ_k before the sum into dδ */
    long dphase_cap;
    pelab_real *dtrig;         /* (N,2,H,d) cos δ and sin δ of each layer, formed by its forward */
    pelab_real *dsum;          /* (H,d) backward scratch: one layer's dδ */
};

static int pope_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct pope *p = calloc(1, sizeof *p);
    if (!p) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = p;
    pe->qk_dim = 2 * pe->d;
    p->softplus = pelab_opt_switch(opts, pope_options, "pope-softplus");
    p->delta_init = (enum delta_init)pelab_opt_choice(opts, pope_options, "pope-delta-init");
    p->delta_offset = (int)pelab_opt_int(opts, pope_options, "pope-delta-offset");
    p->clamp = pelab_opt_switch(opts, pope_options, "pope-delta-clamp");
    p->train = pelab_opt_switch(opts, pope_options, "pope-delta-train");
    double base = pelab_opt_real(opts, pope_options, "pope-base");
    p->theta = malloc((size_t)pe->d * sizeof *p->theta);
    p->dtrig = malloc((size_t)pe->n_layers * 2 * pe->H * pe->d * sizeof *p->dtrig);
    p->dsum = malloc((size_t)pe->H * pe->d * sizeof *p->dsum);
    if (!p->theta || !p->dtrig || !p->dsum) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
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
    free(p->dtrig);
    free(p->dsum);
    free(p);
}

static void pope_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    struct pope *p = pe->state;
    if (!p->delta) return;
    for (int l = 0; l < pe->n_layers; l++) {
        pelab_real *delta = pelab_params_data(pe->params, p->delta[l]);
        for (int i = 0; i < pe->H * pe->d; i++) {
            double x = 0;
            if (p->delta_init == DELTA_UNIFORM) x = -TWO_PI * pelab_rng_uniform(rng);
            if (p->delta_init == DELTA_OFFSET) {
                double a = fmod((double)p->delta_offset * p->theta[i % pe->d], TWO_PI); /* [0, 2π) */
                x = a > 0 ? a - TWO_PI : 0;
            }
            delta[i] = (pelab_real)x;
        }
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

/* cos and sin of clamp(δ) (of δ as is with --pope-delta-clamp off) for one layer into p->dtrig,
 * (2,H,d); δ = 0 when off. The forward pass forms them and the backward pass of the same layer reads them: δ does not change between. */
static void delta_trig(const struct pelab_posenc *pe, int layer) {
    const struct pope *p = pe->state;
    const pelab_real *delta = p->delta ? pelab_params_data(pe->params, p->delta[layer]) : NULL;
    const int n = pe->H * pe->d;
    pelab_real *dc = p->dtrig + (long)layer * 2 * n, *ds = dc + n;
    for (int i = 0; i < n; i++) {
        double a = !delta ? 0 : p->clamp ? clamp_delta(delta[i]) : delta[i];
        dc[i] = (pelab_real)cos(a);
        ds[i] = (pelab_real)sin(a);
    }
}

/* What the per-token kernels read: one layer's operands. */
struct pope_args {
    pelab_real *qo, *ko;                 /* forward out (B,H,T,2d);  backward: dq, dk (B,T,H,d) */
    const pelab_real *gq, *gk;           /* backward: dqo, dko (B,H,T,2d) */
    const pelab_real *q, *k;             /* (B,T,H,d), rows ld apart */
    const pelab_real *cos, *sin;         /* (B,T,d) cos φ, sin φ of the pass */
    const pelab_real *dc, *ds;           /* (H,d) cos δ, sin δ of the layer */
    pelab_real *dphase;                  /* backward: (B,T,H,d) or NULL without δ */
    int ld, T, H, d, softplus;
};

/* Tokens [i0, i1) of the flattened (B,T): each head's q' = [μ_q cos φ; μ_q sin φ] and
 * k' = [μ_k cos(φ + δ); μ_k sin(φ + δ)], cos(φ + δ) = cos φ cos δ − sin φ sin δ. */
static PELAB_ALWAYS_INLINE void pope_fwd_body(const struct pope_args *a, long i0, long i1) {
    const int d = a->d, H = a->H;
    for (long i = i0; i < i1; i++) {
        const long b = i / a->T, t = i % a->T;
        const pelab_real *restrict cs = a->cos + i * d, *restrict sn = a->sin + i * d;
        for (int h = 0; h < H; h++) {
            const pelab_real *restrict qi = a->q + i * a->ld + (long)h * d;
            const pelab_real *restrict ki = a->k + i * a->ld + (long)h * d;
            pelab_real *restrict qh = a->qo + ((b * H + h) * a->T + t) * 2 * d;
            pelab_real *restrict kh = a->ko + ((b * H + h) * a->T + t) * 2 * d;
            const pelab_real *restrict hc = a->dc + (long)h * d, *restrict hs = a->ds + (long)h * d;
            if (a->softplus) {
                PELAB_VMATH_SIMD
                for (int c = 0; c < d; c++) {
                    const pelab_real mq = pelab_vsoftplus(qi[c]), mk = pelab_vsoftplus(ki[c]);
                    qh[c] = mq * cs[c];
                    qh[d + c] = mq * sn[c];
                    kh[c] = mk * (cs[c] * hc[c] - sn[c] * hs[c]);
                    kh[d + c] = mk * (sn[c] * hc[c] + cs[c] * hs[c]);
                }
            } else {
#pragma omp simd
                for (int c = 0; c < d; c++) {
                    qh[c] = qi[c] * cs[c];
                    qh[d + c] = qi[c] * sn[c];
                    kh[c] = ki[c] * (cs[c] * hc[c] - sn[c] * hs[c]);
                    kh[d + c] = ki[c] * (sn[c] * hc[c] + cs[c] * hs[c]);
                }
            }
        }
    }
}
PELAB_SIMD_KERNEL(pope_fwd, (const struct pope_args *a, long i0, long i1), (a, i0, i1))

/* Tokens [i0, i1): dq, dk and, with δ, ∂loss/∂φ_k per element (summed into dδ afterwards).
 *   dμ_q = dq'_c cos φ + dq'_{d+c} sin φ,  dq = dμ_q σ(q)   (σ = softplus', from one exp)
 *   dμ_k likewise with φ + δ;  dφ_k = μ_k (dk'_{d+c} cos(φ + δ) − dk'_c sin(φ + δ)) */
static PELAB_ALWAYS_INLINE void pope_bwd_body(const struct pope_args *a, long i0, long i1) {
    const int d = a->d, H = a->H;
    for (long i = i0; i < i1; i++) {
        const long b = i / a->T, t = i % a->T;
        const pelab_real *restrict cs = a->cos + i * d, *restrict sn = a->sin + i * d;
        for (int h = 0; h < H; h++) {
            const pelab_real *restrict qi = a->q + i * a->ld + (long)h * d;
            const pelab_real *restrict ki = a->k + i * a->ld + (long)h * d;
            pelab_real *restrict dqi = a->qo + i * a->ld + (long)h * d;
            pelab_real *restrict dki = a->ko + i * a->ld + (long)h * d;
            const pelab_real *restrict gq = a->gq + ((b * H + h) * a->T + t) * 2 * d;
            const pelab_real *restrict gk = a->gk + ((b * H + h) * a->T + t) * 2 * d;
            const pelab_real *restrict hc = a->dc + (long)h * d, *restrict hs = a->ds + (long)h * d;
            pelab_real *restrict dph = a->dphase ? a->dphase + (i * H + h) * d : NULL;
            if (a->softplus) {
                PELAB_VMATH_SIMD
                for (int c = 0; c < d; c++) {
                    const pelab_real ck = cs[c] * hc[c] - sn[c] * hs[c], sk = sn[c] * hc[c] + cs[c] * hs[c];
                    pelab_real mq, sq, mk, sgk;
                    pelab_vsoftplus_sigmoid(qi[c], &mq, &sq);
                    pelab_vsoftplus_sigmoid(ki[c], &mk, &sgk);
                    dqi[c] = (gq[c] * cs[c] + gq[d + c] * sn[c]) * sq;
                    dki[c] = (gk[c] * ck + gk[d + c] * sk) * sgk;
                    if (dph) dph[c] = mk * (gk[d + c] * ck - gk[c] * sk);
                }
            } else {
#pragma omp simd
                for (int c = 0; c < d; c++) {
                    const pelab_real ck = cs[c] * hc[c] - sn[c] * hs[c], sk = sn[c] * hc[c] + cs[c] * hs[c];
                    dqi[c] = gq[c] * cs[c] + gq[d + c] * sn[c];
                    dki[c] = gk[c] * ck + gk[d + c] * sk;
                    if (dph) dph[c] = ki[c] * (gk[d + c] * ck - gk[c] * sk);
                }
            }
        }
    }
}
PELAB_SIMD_KERNEL(pope_bwd, (const struct pope_args *a, long i0, long i1), (a, i0, i1))

/* dsum columns [j0, j1) = Σ over tokens, in token order, of dphase (ntok, n) */
static PELAB_ALWAYS_INLINE void pope_dsum_body(pelab_real *dsum, const pelab_real *dphase, long ntok,
                                               long n, long j0, long j1) {
    for (long j = j0; j < j1; j++) dsum[j] = 0;
    for (long i = 0; i < ntok; i++) {
        const pelab_real *restrict row = dphase + i * n;
#pragma omp simd
        for (long j = j0; j < j1; j++) dsum[j] += row[j];
    }
}
PELAB_SIMD_KERNEL(pope_dsum, (pelab_real *dsum, const pelab_real *dphase, long ntok, long n, long j0, long j1),
                  (dsum, dphase, ntok, n, j0, j1))

static void pope_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                            const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                            int B, int T) {
    struct pope *p = pe->state;
    delta_trig(pe, layer);
    const long n = (long)pe->H * pe->d;
    const struct pope_args a = {.qo = qo, .ko = ko, .q = q, .k = k, .cos = p->cos, .sin = p->sin,
                                .dc = p->dtrig + layer * 2 * n, .ds = p->dtrig + layer * 2 * n + n,
                                .ld = ld, .T = T, .H = pe->H, .d = pe->d, .softplus = p->softplus};
    void (*const f)(const struct pope_args *, long, long) = pelab_simd_fn(pope_fwd);
#pragma omp parallel
    {
        long i0, i1;
        pelab_thread_slice((long)B * T, &i0, &i1);
        f(&a, i0, i1);
    }
}

static void pope_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                             const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                             const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    struct pope *p = pe->state;
    const long ntok = (long)B * T, n = (long)pe->H * pe->d;
    const int learn = p->delta && p->train; /* frozen δ: no ∂loss/∂φ_k at all */
    const struct pope_args a = {.qo = dq, .ko = dk, .gq = dqo, .gk = dko, .q = q, .k = k,
                                .cos = p->cos, .sin = p->sin, .dc = p->dtrig + layer * 2 * n,
                                .ds = p->dtrig + layer * 2 * n + n,
                                .dphase = learn ? p->dphase : NULL, /* sized by prepare() */
                                .ld = ld, .T = T, .H = pe->H, .d = pe->d, .softplus = p->softplus};
    void (*const f)(const struct pope_args *, long, long) = pelab_simd_fn(pope_bwd);
    void (*const fsum)(pelab_real *, const pelab_real *, long, long, long, long) = pelab_simd_fn(pope_dsum);
    const pelab_real *delta = learn ? pelab_params_data(pe->params, p->delta[layer]) : NULL;
    pelab_real *ddelta = learn ? pelab_params_grad(pe->params, p->delta[layer]) : NULL;
    const int clamp = p->clamp;
#pragma omp parallel
    {
        long lo, hi;
        pelab_thread_slice(ntok, &lo, &hi);
        f(&a, lo, hi);
        if (delta) {
            /* dδ[h,c] += Σ over tokens in token order; threads own slices of the (h,c) columns */
#pragma omp barrier
            pelab_thread_slice(n, &lo, &hi);
            fsum(p->dsum, p->dphase, ntok, n, lo, hi);
            for (long j = lo; j < hi; j++) /* clamped: no gradient */
                if (!clamp || !(delta[j] < (pelab_real)-TWO_PI || delta[j] > 0)) ddelta[j] += p->dsum[j];
        }
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
    .contract = {PELAB_PE_RELATIVE | PELAB_PE_BIDIRECTIONAL, {"pope-softplus=off", "pope-delta=off", "pope-delta-init=uniform",
                                     "pope-delta-clamp=off pope-delta-init=offset pope-delta-offset=1",
                                     NULL}},
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
