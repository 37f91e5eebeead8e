/* Multi-head softmax attention with the (T,T) probabilities of every head materialised: the
 * arithmetic of the reference kernel (src/attn/attn_ref.c, which adds an encoding's bias and sites
 * through the hooks below) and of SeqPE's position encoder (src/posenc/seqpe_encoder.c, which adds
 * nothing).
 *
 *   S[t,s] = scale · q[t]·k[s] (+ what the hooks add)       s ≤ t (causal) or every s (bidirectional)
 *   P[t,:] = softmax(S[t, visible]);  out[t] = Σ_s drop(P[t,s]) v[s]
 * backward:
 *   dP[t,s] = drop'(dout[t]·v[s]);  dS = P ⊙ (dP − rowsum(P ⊙ dP))   (then the hooks' row_dscores)
 *   dq[t] = scale Σ_s dS[t,s] k[s];  dk[s] = scale Σ_t dS[t,s] q[t];  dv[s] = Σ_t drop(P[t,s]) dout[t]
 */
#ifndef PELAB_KERNELS_SOFTMAX_ATTN_H
#define PELAB_KERNELS_SOFTMAX_ATTN_H

#include <stdint.h>
#include "pelab/real.h"

/* The shapes of one call and its dropout. */
struct pelab_softmax_attn {
    int B, T, H;
    int dq, dv;         /* query/key and value widths per head */
    int ldv, ldo;       /* row strides of v and out (and of dv, dout) */
    pelab_real scale;
    int bidirectional;  /* no causal mask */
    /* probability dropout: p, mask key and site; row0 the place of sequence 0 in the batch
     * whose masks are drawn (pelab_softmax_attn_drop_index) */
    double dropout;
    uint64_t key, site, row0;
};

/* What a caller adds to the scores of head (b, h), each member optional (NULL: nothing), called
 * from the threads that run the heads. */
struct pelab_softmax_attn_hooks {
    void *arg;
    /* A (T,T) := the bias of the head's scores (the products are added to it); NULL: zeros */
    void (*head_scores)(void *arg, int b, int h, pelab_real *A);
    /* row t's e visible scores, products and bias added: terms of its own added in place */
    void (*row_scores)(void *arg, int b, int h, int t, pelab_real *row, int e);
    /* backward, before the head's first row */
    void (*head_backward_begin)(void *arg, int b, int h);
    /* backward: row t's dS becomes the gradient at the scores before row_scores' terms */
    void (*row_dscores)(void *arg, int b, int h, int t, pelab_real *drow, int e);
};

/* The dropout mask index of probability (b, h, t, j): its place in the (rows, H, T, T)
 * probabilities of the whole batch, sequence b being row row0 + b of it, so that a share of
 * the rows draws the masks the whole batch draws there. */
static inline uint64_t pelab_softmax_attn_drop_index(uint64_t row0, int H, int T, int b, int h, int t, int j) {
    return (((row0 + (uint64_t)b) * (uint64_t)H + (uint64_t)h) * (uint64_t)T + (uint64_t)t) * (uint64_t)T +
           (uint64_t)j;
}

/* q, k (B,H,T,dq); v (B,T,H,dv) rows ldv apart; out (B,T,H,dv) rows ldo apart (assigned);
 * att (B,H,T,T) probabilities before dropout (saved; causal: entries above the diagonal are 0).
 * hooks may be NULL. */
void pelab_softmax_attn_forward(pelab_real *out, pelab_real *att, const pelab_real *q, const pelab_real *k,
                                const pelab_real *v, const struct pelab_softmax_attn *a,
                                const struct pelab_softmax_attn_hooks *hooks);
/* dq, dk (B,H,T,dq) assigned; dv (B,T,H,dv, rows ldv apart) assigned; datt (B,H,T,T) scratch that
 * ends holding dS (after row_dscores). */
void pelab_softmax_attn_backward(pelab_real *dq, pelab_real *dk, pelab_real *dv, pelab_real *datt,
                                 const pelab_real *dout, const pelab_real *att, const pelab_real *q,
                                 const pelab_real *k, const pelab_real *v, const struct pelab_softmax_attn *a,
                                 const struct pelab_softmax_attn_hooks *hooks);

#endif
