/* Causal multi-head attention for one layer, given already position-transformed queries and
 * keys. The reference kernel materialises the (T,T) probabilities of every head: it is the
 * oracle that faster kernels are tested against, and what the backward pass reads. */
#ifndef PELAB_ATTN_ATTENTION_H
#define PELAB_ATTN_ATTENTION_H

#include <stdint.h>
#include "pelab/posenc.h"
#include "pelab/real.h"

struct pelab_attn_shape {
    int B, T, H;
    int dq;            /* query/key width per head (d, or 2d for PoPE) */
    int dv;            /* value width per head, d */
    int ldv, ldo;      /* row strides of v (inside qkv: 3D) and of out (D) */
    pelab_real scale;  /* 1/sqrt(d) */
    /* BIAS site: pe with ops->bias_tile, or NULL */
    struct pelab_posenc *pe;
    int layer;
    const int32_t *pos; /* (B,T) */
    /* attention-probability dropout (training only): p, mask key and site */
    double dropout;
    uint64_t key, site;
};

/* q, k (B,H,T,dq); v (B,T,H,dv) rows ldv apart; out (B,T,H,dv) rows ldo apart (assigned);
 * att (B,H,T,T) probabilities before dropout (saved; entries above the diagonal are 0). */
void pelab_attn_ref_forward(pelab_real *out, pelab_real *att, const pelab_real *q,
                            const pelab_real *k, const pelab_real *v, const struct pelab_attn_shape *s);
/* dq, dk (B,H,T,dq) assigned; dv (B,T,H,dv, rows ldv apart) assigned; datt (B,H,T,T) scratch that
 * ends holding dscores; bias parameter gradients +=. */
void pelab_attn_ref_backward(pelab_real *dq, pelab_real *dk, pelab_real *dv, pelab_real *datt,
                             const pelab_real *dout, const pelab_real *att, const pelab_real *q,
                             const pelab_real *k, const pelab_real *v,
                             const struct pelab_attn_shape *s);

#endif
