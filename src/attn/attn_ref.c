/* Reference attention: scores, softmax (causal or not) and weighted values per (batch, head), with
 * the probabilities kept for the backward pass (the arithmetic: kernels/cpu/softmax_attn.h).
 *
 *   S[t,s] = scale · q[t]·k[s] + bias(t,s) + the terms of the sites inside the block (KEY's kb[s],
 *            COUNT's z_t(p): attn/sites.h)       s ≤ t (causal) or every s (bidirectional)
 *   P[t,:] = softmax(S[t, 0..t]) (causal), softmax(S[t, :]) (bidirectional);  out[t] = Σ_s drop(P[t,s]) v[s]
 * backward:
 *   dP[t,s] = drop'(dout[t]·v[s]);  dS = P ⊙ (dP − rowsum(P ⊙ dP))
 *   dq[t] = scale Σ_s dS[t,s] k[s];  dk[s] = scale Σ_t dS[t,s] q[t];  dv[s] = Σ_t drop(P[t,s]) dout[t]
 *   the sites' backward hooks turn dS into the gradient at the scores before their terms, row by
 *   row, and add to their gradients (KEY: dkb[s] = Σ_t dS[t,s])
 * The encoding's BIAS and sites reach the kernel as its hooks, below.
 */
#include "attn/attention.h"
#include "attn/sites.h"
#include "kernels/cpu/softmax_attn.h"

/* (T, n) positions of sequence b. */
static inline const int32_t *seq_pos(const struct pelab_attn_call *s, int b) {
    return s->pos + (long)b * s->T * s->pe->pos_dims;
}

/* The call's shapes and dropout, as the kernel takes them. */
static struct pelab_softmax_attn shape_of(const struct pelab_attn_call *s) {
    return (struct pelab_softmax_attn){.B = s->B, .T = s->T, .H = s->H, .dq = s->dq, .dv = s->dv, .ldv = s->ldv,
                                       .ldo = s->ldo, .scale = s->scale, .bidirectional = s->bidirectional,
                                       .dropout = s->dropout, .key = s->key, .site = s->site, .row0 = s->row0};
}

/* A (T,T) := the BIAS site's values of head (b, h). */
static void head_bias(void *arg, int b, int h, pelab_real *A) {
    const struct pelab_attn_call *s = arg;
    const int32_t *pos = seq_pos(s, b);
    s->pe->ops->bias_tile(s->pe, s->layer, h, A, pos, s->T, pos, s->T);
}

/* Row t of (b, h), its e visible scores: the block the sites' hooks act on (one row, from key 0). */
static struct pelab_site_block site_row(const struct pelab_attn_call *s, int b, int h, int t, pelab_real *row, int e) {
    return (struct pelab_site_block){.s = s, .kernel = PELAB_PE_KERNEL_REF, .b = b, .h = h, .i0 = t, .nq = 1,
                                     .first = t, .j0 = 0, .nk = e, .S = row, .ld = s->T};
}

/* The row's scores with the sites' terms added. */
static void site_row_forward(void *arg, int b, int h, int t, pelab_real *row, int e) {
    double carry[2 * PELAB_PE_LAYER_SITES];
    struct pelab_attn_site_work w;
    pelab_attn_sites_row_work(carry, &w);
    const struct pelab_site_block blk = site_row(arg, b, h, t, row, e);
    pelab_attn_sites_forward(&blk, &w);
}

/* drow, the gradient at the row's scores with the sites' terms, becomes the one without them. */
static void site_row_backward(void *arg, int b, int h, int t, pelab_real *drow, int e) {
    double carry[2 * PELAB_PE_LAYER_SITES];
    struct pelab_attn_site_work w;
    pelab_attn_sites_row_work(carry, &w);
    const struct pelab_site_block blk = site_row(arg, b, h, t, drow, e);
    pelab_attn_sites_backward(&blk, &w);
}

static void site_head_begin(void *arg, int b, int h) { pelab_attn_sites_head_begin(arg, b, h); }

/* The encoding's part: its BIAS as the heads' scores, its sites on each row. */
static struct pelab_softmax_attn_hooks hooks_of(const struct pelab_attn_call *s) {
    const int sites = s->sites != NULL, bias = s->pe && (s->pe->sites & PELAB_SITE_BIAS);
    return (struct pelab_softmax_attn_hooks){.arg = (void *)s,
                                             .head_scores = bias ? head_bias : NULL,
                                             .row_scores = sites ? site_row_forward : NULL,
                                             .head_backward_begin = sites ? site_head_begin : NULL,
                                             .row_dscores = sites ? site_row_backward : NULL};
}

void pelab_attn_ref_forward(pelab_real *out, pelab_real *att, const pelab_real *q,
                            const pelab_real *k, const pelab_real *v, const struct pelab_attn_call *s) {
    const struct pelab_softmax_attn a = shape_of(s);
    const struct pelab_softmax_attn_hooks hooks = hooks_of(s);
    pelab_softmax_attn_forward(out, att, q, k, v, &a, &hooks);
}

void pelab_attn_ref_backward(pelab_real *dq, pelab_real *dk, pelab_real *dv, pelab_real *datt,
                             const pelab_real *dout, const pelab_real *att, const pelab_real *q,
                             const pelab_real *k, const pelab_real *v,
                             const struct pelab_attn_call *s) {
    const int B = s->B, T = s->T, H = s->H;
    const struct pelab_softmax_attn a = shape_of(s);
    const struct pelab_softmax_attn_hooks hooks = hooks_of(s);
    pelab_softmax_attn_backward(dq, dk, dv, datt, dout, att, q, k, v, &a, &hooks);
    /* Bias parameters are shared across batches (and, for some encodings, heads): summed in a
     * fixed order outside the parallel loop. */
    if (s->pe && (s->pe->sites & PELAB_SITE_BIAS) && s->pe->ops->bias_tile_backward) {
        pelab_real *grad = pelab_posenc_table_grad(s->pe);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                const int32_t *pos = seq_pos(s, b);
                s->pe->ops->bias_tile_backward(s->pe, s->layer, h, grad,
                                               datt + ((long)b * H + h) * T * T, pos, T, pos, T);
            }
    }
}
