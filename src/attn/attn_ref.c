/* Reference attention: scores, softmax (causal or not) and weighted values per (batch, head), with
 * the probabilities kept for the backward pass.
 *
 *   S[t,s] = scale · q[t]·k[s] + bias(t,s) + the terms of the sites inside the block (KEY's kb[s],
 *            COUNT's z_t(p): attn/sites.h)       s ≤ t (causal) or every s (bidirectional)
 *   P[t,:] = softmax(S[t, 0..t]) (causal), softmax(S[t, :]) (bidirectional);  out[t] = Σ_s drop(P[t,s]) v[s]
 * backward:
 *   dP[t,s] = drop'(dout[t]·v[s]);  dS = P ⊙ (dP − rowsum(P ⊙ dP))
 *   dq[t] = scale Σ_s dS[t,s] k[s];  dk[s] = scale Σ_t dS[t,s] q[t];  dv[s] = Σ_t drop(P[t,s]) dout[t]
 *   the sites' backward hooks turn dS into the gradient at the scores before their terms, row by
 *   row, and add to their gradients (KEY: dkb[s] = Σ_t dS[t,s])
 */
#include <math.h>
#include <string.h>
#include "attn/attention.h"
#include "attn/sites.h"
#include "kernels/cpu/vmath.h"
#include "nn/layers.h"

/* Keys 0 .. end(t)−1 are visible from query t. */
static inline int key_end(const struct pelab_attn_call *s, int t) { return s->bidirectional ? s->T : t + 1; }

/* (T, n) positions of sequence b. */
static inline const int32_t *seq_pos(const struct pelab_attn_call *s, int b) {
    return s->pos + (long)b * s->T * s->pe->pos_dims;
}

/* keep-scale of probability (b, h, t, j) */
static inline pelab_real keep(const struct pelab_attn_call *s, int b, int h, int t, int j) {
    return s->dropout > 0 ? pelab_dropout_scale(s->dropout, s->key, s->site, pelab_attn_drop_index(s, b, h, t, j)) : 1;
}

/* Row t of (b, h), its e visible scores: the block the sites' hooks act on (one row, from key 0). */
static struct pelab_site_block site_row(const struct pelab_attn_call *s, int b, int h, int t, pelab_real *row, int e) {
    return (struct pelab_site_block){.s = s, .kernel = PELAB_PE_KERNEL_REF, .b = b, .h = h, .i0 = t, .nq = 1,
                                     .first = t, .j0 = 0, .nk = e, .S = row, .ld = s->T};
}

/* The row's scores with the sites' terms added (none when the encoding acts at none). */
static void site_row_forward(const struct pelab_attn_call *s, int b, int h, int t, pelab_real *row, int e) {
    if (!s->sites) return;
    double carry[2 * PELAB_PE_LAYER_SITES];
    struct pelab_attn_site_work w;
    pelab_attn_sites_row_work(carry, &w);
    const struct pelab_site_block blk = site_row(s, b, h, t, row, e);
    pelab_attn_sites_forward(&blk, &w);
}

/* drow, the gradient at the row's scores with the sites' terms, becomes the one without them. */
static void site_row_backward(const struct pelab_attn_call *s, int b, int h, int t, pelab_real *drow, int e) {
    double carry[2 * PELAB_PE_LAYER_SITES];
    struct pelab_attn_site_work w;
    pelab_attn_sites_row_work(carry, &w);
    const struct pelab_site_block blk = site_row(s, b, h, t, drow, e);
    pelab_attn_sites_backward(&blk, &w);
}

void pelab_attn_ref_forward(pelab_real *out, pelab_real *att, const pelab_real *q,
                            const pelab_real *k, const pelab_real *v, const struct pelab_attn_call *s) {
    const int B = s->B, T = s->T, H = s->H, dq = s->dq, dv = s->dv;
    const int has_bias = s->pe && (s->pe->sites & PELAB_SITE_BIAS);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const long bh = (long)b * H + h;
            const pelab_real *qh = q + bh * T * dq, *kh = k + bh * T * dq;
            pelab_real *A = att + bh * T * T;
            if (has_bias) {
                const int32_t *pos = seq_pos(s, b);
                s->pe->ops->bias_tile(s->pe, s->layer, h, A, pos, T, pos, T);
            } else {
                memset(A, 0, (size_t)T * T * sizeof *A);
            }
            for (int t = 0; t < T; t++) {
                pelab_real *row = A + (long)t * T;
                pelab_real mx = -INFINITY;
                const int e = key_end(s, t);
                for (int j = 0; j < e; j++) row[j] += s->scale * pelab_vdot(qh + (long)t * dq, kh + (long)j * dq, dq);
                site_row_forward(s, b, h, t, row, e);
                for (int j = 0; j < e; j++) mx = row[j] > mx ? row[j] : mx;
                pelab_real sum = 0;
                for (int j = 0; j < e; j++) {
                    row[j] = pelab_vexp_prob(row[j] - mx);
                    sum += row[j];
                }
                for (int j = 0; j < e; j++) row[j] /= sum;
                for (int j = e; j < T; j++) row[j] = 0;

                pelab_real *o = out + ((long)b * T + t) * s->ldo + (long)h * dv;
                memset(o, 0, (size_t)dv * sizeof *o);
                for (int j = 0; j < e; j++) {
                    pelab_real p = row[j] * keep(s, b, h, t, j);
                    const pelab_real *vj = v + ((long)b * T + j) * s->ldv + (long)h * dv;
                    for (int c = 0; c < dv; c++) o[c] += p * vj[c];
                }
            }
        }
}

void pelab_attn_ref_backward(pelab_real *dq, pelab_real *dk, pelab_real *dv, pelab_real *datt,
                             const pelab_real *dout, const pelab_real *att, const pelab_real *q,
                             const pelab_real *k, const pelab_real *v,
                             const struct pelab_attn_call *s) {
    const int B = s->B, T = s->T, H = s->H, dq_ = s->dq, dv_ = s->dv, sites = s->sites != NULL;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const long bh = (long)b * H + h;
            const pelab_real *qh = q + bh * T * dq_, *kh = k + bh * T * dq_, *A = att + bh * T * T;
            pelab_real *dqh = dq + bh * T * dq_, *dkh = dk + bh * T * dq_, *dA = datt + bh * T * T;
            memset(dqh, 0, (size_t)T * dq_ * sizeof *dqh);
            memset(dkh, 0, (size_t)T * dq_ * sizeof *dkh);
            if (sites) pelab_attn_sites_head_begin(s, b, h);
            for (int j = 0; j < T; j++)
                memset(dv + ((long)b * T + j) * s->ldv + (long)h * dv_, 0, (size_t)dv_ * sizeof *dv);
            for (int t = 0; t < T; t++) {
                const pelab_real *o = dout + ((long)b * T + t) * s->ldo + (long)h * dv_;
                const pelab_real *row = A + (long)t * T;
                pelab_real *drow = dA + (long)t * T;
                pelab_real rowdot = 0;
                const int e = key_end(s, t);
                for (int j = 0; j < e; j++) {
                    pelab_real m = keep(s, b, h, t, j);
                    const pelab_real *vj = v + ((long)b * T + j) * s->ldv + (long)h * dv_;
                    pelab_real *dvj = dv + ((long)b * T + j) * s->ldv + (long)h * dv_;
                    pelab_real pm = row[j] * m;
                    for (int c = 0; c < dv_; c++) dvj[c] += pm * o[c];
                    drow[j] = m * pelab_vdot(o, vj, dv_);
                    rowdot += row[j] * drow[j];
                }
                for (int j = 0; j < e; j++) drow[j] = row[j] * (drow[j] - rowdot);
                for (int j = e; j < T; j++) drow[j] = 0;
                if (sites) site_row_backward(s, b, h, t, drow, e);
                for (int j = 0; j < e; j++) {
                    pelab_real g = s->scale * drow[j];
                    const pelab_real *qt = qh + (long)t * dq_, *kj = kh + (long)j * dq_;
                    pelab_real *dqt = dqh + (long)t * dq_, *dkj = dkh + (long)j * dq_;
                    for (int c = 0; c < dq_; c++) {
                        dqt[c] += g * kj[c];
                        dkj[c] += g * qt[c];
                    }
                }
            }
        }
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
