/* The PoPE machinery pope and pope2d share (pope_core.h). */
#include "posenc/pope_core.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vmath.h"
#include "pelab/posenc.h"
#include "pelab/status.h"

#define TWO_PI 6.283185307179586

/* Grows *buf to hold n elements. */
static int reserve(pelab_real **buf, long *cap, long n) {
    if (n <= *cap) return PELAB_OK;
    free(*buf);
    *buf = malloc((size_t)n * sizeof **buf);
    *cap = *buf ? n : 0;
    return *buf ? PELAB_OK : pelab_fail(PELAB_ERR_RUNTIME, "out of memory for PoPE tables (%ld entries)", n);
}

int pelab_pope_core_init(struct pelab_pope_core *c, int H, int d, int dims, int n_layers, int softplus, int clamp) {
    memset(c, 0, sizeof *c);
    c->H = H, c->d = d, c->dims = dims, c->softplus = softplus, c->clamp = clamp;
    c->theta = malloc((size_t)d * sizeof *c->theta);
    c->axis = dims > 1 ? calloc((size_t)d, sizeof *c->axis) : NULL;
    c->dtrig = malloc((size_t)n_layers * 2 * H * d * sizeof *c->dtrig);
    c->dsum = malloc((size_t)H * d * sizeof *c->dsum);
    if (!c->theta || (dims > 1 && !c->axis) || !c->dtrig || !c->dsum)
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    return PELAB_OK;
}

void pelab_pope_core_free(struct pelab_pope_core *c) {
    free(c->theta);
    free(c->axis);
    free(c->cos);
    free(c->sin);
    free(c->dphase);
    free(c->dtrig);
    free(c->dsum);
    memset(c, 0, sizeof *c);
}

/* Angle tables for this pass, and the backward pass's δ scratch sized for it, so the backward
 * pass allocates nothing. */
int pelab_pope_core_prepare(struct pelab_pope_core *c, const int32_t *pos, long ntok, int learn) {
    if (learn && reserve(&c->dphase, &c->dphase_cap, ntok * c->H * c->d)) return PELAB_ERR_RUNTIME;
    return pelab_posenc_angles_nd(&c->cos, &c->sin, &c->table_cap, pos, ntok, c->dims, c->axis, c->theta, c->d);
}

static inline pelab_real clamp_delta(pelab_real x) {
    return x < (pelab_real)-TWO_PI ? (pelab_real)-TWO_PI : x > 0 ? 0 : x;
}

/* cos and sin of clamp(δ) (of δ as is without the clamp) for one layer into c->dtrig, (2,H,d);
 * δ = 0 when NULL. The forward pass forms them and the backward pass of the same layer reads
 * them: δ does not change between. */
static void delta_trig(struct pelab_pope_core *c, int layer, const pelab_real *delta) {
    const int n = c->H * c->d;
    pelab_real *dc = c->dtrig + (long)layer * 2 * n, *ds = dc + n;
    for (int i = 0; i < n; i++) {
        double a = !delta ? 0 : c->clamp ? clamp_delta(delta[i]) : delta[i];
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

/* One head of one token: dq, dk (d,) and, with_phase, dph (d,) = ∂loss/∂φ_k per element.
 *   dμ_q = dq'_c cos φ + dq'_{d+c} sin φ,  dq = dμ_q σ(q)   (σ = softplus', from one exp)
 *   dμ_k likewise with φ + δ;  dφ_k = μ_k (dk'_{d+c} cos(φ + δ) − dk'_c sin(φ + δ))
 * softplus and with_phase are constants at each call, so no loop holds a branch: gcc at AVX2 and
 * below vectorises no loop that stores under a condition. */
static PELAB_ALWAYS_INLINE void pope_bwd_head(pelab_real *restrict dqi, pelab_real *restrict dki,
                                              pelab_real *restrict dph, const pelab_real *restrict qi,
                                              const pelab_real *restrict ki, const pelab_real *restrict gq,
                                              const pelab_real *restrict gk, const pelab_real *restrict cs,
                                              const pelab_real *restrict sn, const pelab_real *restrict hc,
                                              const pelab_real *restrict hs, int d, const int softplus,
                                              const int with_phase) {
    if (softplus) {
        PELAB_VMATH_SIMD
        for (int c = 0; c < d; c++) {
            const pelab_real ck = cs[c] * hc[c] - sn[c] * hs[c], sk = sn[c] * hc[c] + cs[c] * hs[c];
            pelab_real mq, sq, mk, sgk;
            pelab_vsoftplus_sigmoid(qi[c], &mq, &sq);
            pelab_vsoftplus_sigmoid(ki[c], &mk, &sgk);
            dqi[c] = (gq[c] * cs[c] + gq[d + c] * sn[c]) * sq;
            dki[c] = (gk[c] * ck + gk[d + c] * sk) * sgk;
            if (with_phase) dph[c] = mk * (gk[d + c] * ck - gk[c] * sk);
        }
    } else {
#pragma omp simd
        for (int c = 0; c < d; c++) {
            const pelab_real ck = cs[c] * hc[c] - sn[c] * hs[c], sk = sn[c] * hc[c] + cs[c] * hs[c];
            dqi[c] = gq[c] * cs[c] + gq[d + c] * sn[c];
            dki[c] = gk[c] * ck + gk[d + c] * sk;
            if (with_phase) dph[c] = ki[c] * (gk[d + c] * ck - gk[c] * sk);
        }
    }
}

/* Tokens [i0, i1): dq, dk and, with δ, ∂loss/∂φ_k per element (summed into dδ afterwards). */
static PELAB_ALWAYS_INLINE void pope_bwd_body(const struct pope_args *a, long i0, long i1) {
    const int d = a->d, H = a->H;
    for (long i = i0; i < i1; i++) {
        const long b = i / a->T, t = i % a->T;
        const pelab_real *cs = a->cos + i * d, *sn = a->sin + i * d;
        for (int h = 0; h < H; h++) {
            const long qk = i * a->ld + (long)h * d, g = ((b * H + h) * a->T + t) * 2 * d;
            pelab_real *dph = a->dphase ? a->dphase + (i * H + h) * d : NULL;
            const pelab_real *hc = a->dc + (long)h * d, *hs = a->ds + (long)h * d;
#define POPE_BWD_HEAD(softplus, with_phase)                                                              \
    pope_bwd_head(a->qo + qk, a->ko + qk, dph, a->q + qk, a->k + qk, a->gq + g, a->gk + g, cs, sn, hc, hs, \
                  d, softplus, with_phase)
            if (a->softplus && dph) POPE_BWD_HEAD(1, 1);
            else if (a->softplus) POPE_BWD_HEAD(1, 0);
            else if (dph) POPE_BWD_HEAD(0, 1);
            else POPE_BWD_HEAD(0, 0);
#undef POPE_BWD_HEAD
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

void pelab_pope_core_forward(struct pelab_pope_core *c, int layer, const pelab_real *delta, pelab_real *qo,
                             pelab_real *ko, const pelab_real *q, const pelab_real *k, int ld, int B, int T) {
    delta_trig(c, layer, delta);
    const long n = (long)c->H * c->d;
    const struct pope_args a = {.qo = qo, .ko = ko, .q = q, .k = k, .cos = c->cos, .sin = c->sin,
                                .dc = c->dtrig + layer * 2 * n, .ds = c->dtrig + layer * 2 * n + n,
                                .ld = ld, .T = T, .H = c->H, .d = c->d, .softplus = c->softplus};
    void (*const f)(const struct pope_args *, long, long) = pelab_simd_fn(pope_fwd);
#pragma omp parallel
    {
        long i0, i1;
        pelab_thread_slice((long)B * T, &i0, &i1);
        f(&a, i0, i1);
    }
}

void pelab_pope_core_backward(struct pelab_pope_core *c, int layer, const pelab_real *delta, pelab_real *ddelta,
                              pelab_real *dq, pelab_real *dk, const pelab_real *dqo, const pelab_real *dko,
                              const pelab_real *q, const pelab_real *k, int ld, int B, int T) {
    const long ntok = (long)B * T, n = (long)c->H * c->d;
    const int learn = ddelta != NULL; /* frozen δ: no ∂loss/∂φ_k at all */
    const struct pope_args a = {.qo = dq, .ko = dk, .gq = dqo, .gk = dko, .q = q, .k = k,
                                .cos = c->cos, .sin = c->sin, .dc = c->dtrig + layer * 2 * n,
                                .ds = c->dtrig + layer * 2 * n + n,
                                .dphase = learn ? c->dphase : NULL, /* sized by prepare() */
                                .ld = ld, .T = T, .H = c->H, .d = c->d, .softplus = c->softplus};
    void (*const f)(const struct pope_args *, long, long) = pelab_simd_fn(pope_bwd);
    void (*const fsum)(pelab_real *, const pelab_real *, long, long, long, long) = pelab_simd_fn(pope_dsum);
    const int clamp = c->clamp;
#pragma omp parallel
    {
        long lo, hi;
        pelab_thread_slice(ntok, &lo, &hi);
        f(&a, lo, hi);
        if (learn) {
            /* dδ[h,c] += Σ over tokens in token order; threads own slices of the (h,c) columns */
#pragma omp barrier
            pelab_thread_slice(n, &lo, &hi);
            fsum(c->dsum, c->dphase, ntok, n, lo, hi);
            for (long j = lo; j < hi; j++) /* clamped: no gradient */
                if (!clamp || !(delta[j] < (pelab_real)-TWO_PI || delta[j] > 0)) ddelta[j] += c->dsum[j];
        }
    }
}

int pelab_pope_core_freqs(const struct pelab_pope_core *c, double *theta) {
    for (int j = 0; theta && j < c->d; j++) theta[j] = c->theta[j];
    return c->d;
}

void pelab_pope_core_freq_norms(const struct pelab_pope_core *c, double *out, const pelab_real *x) {
    for (int j = 0; j < c->d; j++) out[j] = c->softplus ? (double)pelab_vsoftplus(x[j]) : fabs((double)x[j]);
}
