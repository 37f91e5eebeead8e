/* Materialised softmax attention (softmax_attn.h): one (b, h) head per thread at a time, each
 * row's scores, softmax and weighted values in order, so a head's bits do not depend on the
 * threads. */
#include "kernels/cpu/softmax_attn.h"
#include <math.h>
#include <string.h>
#include "kernels/cpu/layers.h"
#include "kernels/cpu/vmath.h"

/* Keys 0 .. end(t)−1 are visible from query t. */
static inline int key_end(const struct pelab_softmax_attn *a, int t) { return a->bidirectional ? a->T : t + 1; }

/* keep-scale of probability (b, h, t, j) */
static inline pelab_real keep(const struct pelab_softmax_attn *a, int b, int h, int t, int j) {
    return a->dropout > 0 ? pelab_dropout_scale(a->dropout, a->key, a->site,
                                                pelab_softmax_attn_drop_index(a->row0, a->H, a->T, b, h, t, j))
                          : 1;
}

/* Head (b, h): A (T,T) from its bias to its probabilities, out's rows of the head. */
static void head_forward(pelab_real *out, pelab_real *A, const pelab_real *qh, const pelab_real *kh,
                         const pelab_real *v, const struct pelab_softmax_attn *a,
                         const struct pelab_softmax_attn_hooks *hk, int b, int h) {
    const int T = a->T, dq = a->dq, dv = a->dv;
    if (hk && hk->head_scores) hk->head_scores(hk->arg, b, h, A);
    else memset(A, 0, (size_t)T * T * sizeof *A);
    for (int t = 0; t < T; t++) {
        pelab_real *row = A + (long)t * T;
        pelab_real mx = -INFINITY;
        const int e = key_end(a, t);
        for (int j = 0; j < e; j++) row[j] += a->scale * pelab_vdot(qh + (long)t * dq, kh + (long)j * dq, dq);
        if (hk && hk->row_scores) hk->row_scores(hk->arg, b, h, t, row, e);
        for (int j = 0; j < e; j++) mx = row[j] > mx ? row[j] : mx;
        pelab_real sum = 0;
        for (int j = 0; j < e; j++) {
            row[j] = pelab_vexp_prob(row[j] - mx);
            sum += row[j];
        }
        for (int j = 0; j < e; j++) row[j] /= sum;
        for (int j = e; j < T; j++) row[j] = 0;

        pelab_real *o = out + ((long)b * T + t) * a->ldo + (long)h * dv;
        memset(o, 0, (size_t)dv * sizeof *o);
        for (int j = 0; j < e; j++) {
            pelab_real p = row[j] * keep(a, b, h, t, j);
            const pelab_real *vj = v + ((long)b * T + j) * a->ldv + (long)h * dv;
            for (int c = 0; c < dv; c++) o[c] += p * vj[c];
        }
    }
}

void pelab_softmax_attn_forward(pelab_real *out, pelab_real *att, const pelab_real *q, const pelab_real *k,
                                const pelab_real *v, const struct pelab_softmax_attn *a,
                                const struct pelab_softmax_attn_hooks *hooks) {
    const int B = a->B, T = a->T, H = a->H, dq = a->dq;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const long bh = (long)b * H + h;
            head_forward(out, att + bh * T * T, q + bh * T * dq, k + bh * T * dq, v, a, hooks, b, h);
        }
}

/* Head (b, h)'s gradients: dqh, dkh (T,dq) and its rows of dv assigned; dA (T,T) ends holding dS. */
static void head_backward(pelab_real *dqh, pelab_real *dkh, pelab_real *dv, pelab_real *dA, const pelab_real *dout,
                          const pelab_real *A, const pelab_real *qh, const pelab_real *kh, const pelab_real *v,
                          const struct pelab_softmax_attn *a, const struct pelab_softmax_attn_hooks *hk, int b,
                          int h) {
    const int T = a->T, dq_ = a->dq, dv_ = a->dv;
    memset(dqh, 0, (size_t)T * dq_ * sizeof *dqh);
    memset(dkh, 0, (size_t)T * dq_ * sizeof *dkh);
    if (hk && hk->head_backward_begin) hk->head_backward_begin(hk->arg, b, h);
    for (int j = 0; j < T; j++) memset(dv + ((long)b * T + j) * a->ldv + (long)h * dv_, 0, (size_t)dv_ * sizeof *dv);
    for (int t = 0; t < T; t++) {
        const pelab_real *o = dout + ((long)b * T + t) * a->ldo + (long)h * dv_;
        const pelab_real *row = A + (long)t * T;
        pelab_real *drow = dA + (long)t * T;
        pelab_real rowdot = 0;
        const int e = key_end(a, t);
        for (int j = 0; j < e; j++) {
            pelab_real m = keep(a, b, h, t, j);
            const pelab_real *vj = v + ((long)b * T + j) * a->ldv + (long)h * dv_;
            pelab_real *dvj = dv + ((long)b * T + j) * a->ldv + (long)h * dv_;
            pelab_real pm = row[j] * m;
            for (int c = 0; c < dv_; c++) dvj[c] += pm * o[c];
            drow[j] = m * pelab_vdot(o, vj, dv_);
            rowdot += row[j] * drow[j];
        }
        for (int j = 0; j < e; j++) drow[j] = row[j] * (drow[j] - rowdot);
        for (int j = e; j < T; j++) drow[j] = 0;
        if (hk && hk->row_dscores) hk->row_dscores(hk->arg, b, h, t, drow, e);
        for (int j = 0; j < e; j++) {
            pelab_real g = a->scale * drow[j];
            const pelab_real *qt = qh + (long)t * dq_, *kj = kh + (long)j * dq_;
            pelab_real *dqt = dqh + (long)t * dq_, *dkj = dkh + (long)j * dq_;
            for (int c = 0; c < dq_; c++) {
                dqt[c] += g * kj[c];
                dkj[c] += g * qt[c];
            }
        }
    }
}

void pelab_softmax_attn_backward(pelab_real *dq, pelab_real *dk, pelab_real *dv, pelab_real *datt,
                                 const pelab_real *dout, const pelab_real *att, const pelab_real *q,
                                 const pelab_real *k, const pelab_real *v, const struct pelab_softmax_attn *a,
                                 const struct pelab_softmax_attn_hooks *hooks) {
    const int B = a->B, T = a->T, H = a->H, dq_ = a->dq;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const long bh = (long)b * H + h;
            head_backward(dq + bh * T * dq_, dk + bh * T * dq_, dv, datt + bh * T * T, dout, att + bh * T * T,
                          q + bh * T * dq_, k + bh * T * dq_, v, a, hooks, b, h);
        }
}
