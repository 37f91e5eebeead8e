/* src/posenc/pope_core.h — private to src/posenc: what the PoPE encodings (pope, pope2d) share.
 *
 * Per head, with q, k ∈ R^d and a frequency θ_c and position coordinate p_c(t) per component c
 * (pope: p_c = t; pope2d: the row for the first d/2 components, the column for the rest):
 *   magnitudes  μ_q = softplus(q),  μ_k = softplus(k)            (softplus off: μ = x)
 *   phases      φ_q = p_c(t)·θ_c,   φ_k = p_c(s)·θ_c + δ_c       (δ ∈ R^{H×d} per layer)
 * as attention on width 2d: q' = [μ_q cos φ_q ; μ_q sin φ_q], k' = [μ_k cos φ_k ; μ_k sin φ_k].
 * backward, per element (c and its partner d+c):
 *   dμ_q = dq'_c cos φ_q + dq'_{d+c} sin φ_q;      dq = dμ_q · sigmoid(q)
 *   dμ_k = dk'_c cos φ_k + dk'_{d+c} sin φ_k;      dk = dμ_k · sigmoid(k)
 *   dδ_c += μ_k (−dk'_c sin φ_k + dk'_{d+c} cos φ_k)     (summed over tokens in token order)
 * The per-token loops are vectorised at run time (kernels/cpu/simd.h); a pass forms the cos/sin
 * tables of p_c·θ_c once (prepare) for every layer, and each layer's forward the cos/sin of its δ.
 */
#ifndef PELAB_POSENC_POPE_CORE_H
#define PELAB_POSENC_POPE_CORE_H

#include <stdint.h>
#include "pelab/real.h"

struct pelab_pope_core {
    int H, d, dims;            /* heads, width per head, coordinates per position */
    int softplus, clamp;       /* magnitudes softplus(x) (else x); δ used as clamp(δ, −2π, 0) */
    double *theta;             /* (d,) θ_c */
    int *axis;                 /* (d,) coordinate of component c (NULL: coordinate 0) */
    pelab_real *cos, *sin;     /* (B,T,d) cos φ, sin φ of the current pass */
    long table_cap;
    pelab_real *dphase;        /* (B,T,H,d) backward scratch: ∂loss/∂φ_k before the sum into dδ */
    long dphase_cap;
    pelab_real *dtrig;         /* (N,2,H,d) cos δ and sin δ of each layer, formed by its forward */
    pelab_real *dsum;          /* (H,d) backward scratch: one layer's dδ */
};

/* Allocates theta, axis (dims > 1) and the δ scratch for n_layers; the caller fills theta (and
 * axis). PELAB_ERR_RUNTIME when out of memory. */
int pelab_pope_core_init(struct pelab_pope_core *c, int H, int d, int dims, int n_layers, int softplus, int clamp);
void pelab_pope_core_free(struct pelab_pope_core *c);
/* The pass's angle tables for positions (ntok, dims), and room for the backward's dδ scratch
 * when `learn`. PELAB_ERR_RUNTIME when out of memory. */
int pelab_pope_core_prepare(struct pelab_pope_core *c, const int32_t *pos, long ntok, int learn);
/* Layer `layer`: qo, ko (B,H,T,2d) from q, k (B,T,H,d rows ld apart); delta (H,d) or NULL (δ = 0). */
void pelab_pope_core_forward(struct pelab_pope_core *c, int layer, const pelab_real *delta, pelab_real *qo,
                             pelab_real *ko, const pelab_real *q, const pelab_real *k, int ld, int B, int T);
/* Its backward: dq, dk (B,T,H,d rows ld apart) assigned from dqo, dko; ddelta (H,d) += dδ where δ
 * is not clamped (ddelta NULL: δ not learnt). */
void pelab_pope_core_backward(struct pelab_pope_core *c, int layer, const pelab_real *delta, pelab_real *ddelta,
                              pelab_real *dq, pelab_real *dk, const pelab_real *dqo, const pelab_real *dko,
                              const pelab_real *q, const pelab_real *k, int ld, int B, int T);

/* Frequency usage (posenc.h's freqs and freq_norms) of either PoPE: theta (d,) = θ_c of each
 * component (returns d; theta NULL: the count alone); out (d,) = μ_c of one head vector x (d,). */
int pelab_pope_core_freqs(const struct pelab_pope_core *c, double *theta);
void pelab_pope_core_freq_norms(const struct pelab_pope_core *c, double *out, const pelab_real *x);

#endif
