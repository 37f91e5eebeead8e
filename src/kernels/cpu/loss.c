/* Softmax cross-entropy over the vocabulary, on the positions that carry a target, without
 * storing probabilities: per row the forward keeps its maximum m and 1/s, s = Σ_v e^(z_v − m),
 * and the backward recomputes p_v = e^(z_v − m)/s while it writes the gradient over the logits.
 *   loss = log s − (z_target − m);   dz_v = scale·(p_v − [v = target])
 * Two reads of a row forward (max, then the sum of exponentials) and one read-write backward, at
 * the SIMD level chosen at run time (simd.h); the sums in double. */
#include <math.h>
#include <string.h>
#include "core/prof.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vmath.h"
#include "kernels/cpu/layers.h"

/* *max and s of one row (V,), both over sixteen lanes so that every compiler vectorises them:
 * the maximum as pelab_vmax's sixteen running maxima, the sum as sixteen partial sums of 16·16
 * terms each in the real type, added into sixteen double sums. */
static PELAB_ALWAYS_INLINE double row_sum_exp(const pelab_real *z, int V, pelab_real *max) {
    enum { L = 16, BLOCK = 16 * L };
    const pelab_real mx = pelab_vmax(z, V, z[0]);
    pelab_real part[L];
    double acc[L] = {0}, s = 0;
    int v;
    for (v = 0; v + BLOCK <= V; v += BLOCK) {
        for (int i = 0; i < L; i++) part[i] = 0;
        for (int b = 0; b < BLOCK; b += L)
            PELAB_VMATH_SIMD
            for (int i = 0; i < L; i++) part[i] += pelab_vexp(z[v + b + i] - mx);
        for (int i = 0; i < L; i++) acc[i] += part[i];
    }
    for (; v < V; v++) s += (double)pelab_vexp(z[v] - mx);
    for (int i = 0; i < L; i++) s += acc[i];
    *max = mx;
    return s;
}

/* The loss of a row with target t (−log p_t from the logits, not from p, so that tiny
 * probabilities keep their precision), or 0 without. */
static inline pelab_real row_loss(const pelab_real *z, int32_t t, pelab_real mx, double s) {
    return t >= 0 ? (pelab_real)(log(s) - (z[t] - mx)) : 0;
}

/* rows [i0, i1): stats (max, 1/s), losses */
static PELAB_ALWAYS_INLINE void ce_fwd_body(pelab_real *stats, pelab_real *losses, const pelab_real *logits,
                                            const int32_t *targets, long i0, long i1, int V) {
    for (long i = i0; i < i1; i++) {
        const pelab_real *z = logits + i * V;
        pelab_real mx;
        const double s = row_sum_exp(z, V, &mx);
        stats[2 * i] = mx;
        stats[2 * i + 1] = (pelab_real)(1 / s);
        losses[i] = row_loss(z, targets[i], mx, s);
    }
}
PELAB_SIMD_KERNEL(ce_fwd, (pelab_real *stats, pelab_real *losses, const pelab_real *logits,
                           const int32_t *targets, long i0, long i1, int V),
                  (stats, losses, logits, targets, i0, i1, V))

/* rows [i0, i1): losses, and the argmax (the first maximum: pelab_argmax's rule) with p of it */
static PELAB_ALWAYS_INLINE void ce_eval_body(pelab_real *losses, int32_t *pred, pelab_real *pred_prob,
                                             const pelab_real *logits, const int32_t *targets, long i0,
                                             long i1, int V) {
    for (long i = i0; i < i1; i++) {
        const pelab_real *z = logits + i * V;
        pelab_real mx;
        const double s = row_sum_exp(z, V, &mx);
        int best = 0;
        while (best < V - 1 && z[best] != mx) best++;
        pred[i] = best;
        pred_prob[i] = (pelab_real)(1 / s); /* e^(z_best − m) / s with z_best = m */
        losses[i] = row_loss(z, targets[i], mx, s);
    }
}
PELAB_SIMD_KERNEL(ce_eval, (pelab_real *losses, int32_t *pred, pelab_real *pred_prob, const pelab_real *logits,
                            const int32_t *targets, long i0, long i1, int V),
                  (losses, pred, pred_prob, logits, targets, i0, i1, V))

/* rows [i0, i1); d may be z */
static PELAB_ALWAYS_INLINE void ce_bwd_body(pelab_real *dlogits, const pelab_real *logits,
                                            const pelab_real *stats, const int32_t *targets,
                                            pelab_real scale, long i0, long i1, int V) {
    for (long i = i0; i < i1; i++) {
        pelab_real *d = dlogits + i * V;
        const pelab_real *z = logits + i * V;
        if (targets[i] < 0) {
            memset(d, 0, (size_t)V * sizeof *d);
            continue;
        }
        const pelab_real mx = stats[2 * i], k = scale * stats[2 * i + 1];
        PELAB_VMATH_SIMD
        for (int v = 0; v < V; v++) d[v] = k * pelab_vexp(z[v] - mx);
        d[targets[i]] -= scale;
    }
}
PELAB_SIMD_KERNEL(ce_bwd, (pelab_real *dlogits, const pelab_real *logits, const pelab_real *stats,
                           const int32_t *targets, pelab_real scale, long i0, long i1, int V),
                  (dlogits, logits, stats, targets, scale, i0, i1, V))

/* Σ losses in row order (the same bits for any thread count) and the rows with a target. */
static int total(const pelab_real *losses, const int32_t *targets, int N, double *sum) {
    int count = 0;
    double s = 0;
    for (int i = 0; i < N; i++) {
        s += losses[i];
        count += targets[i] >= 0;
    }
    *sum = s;
    return count;
}

int pelab_crossentropy_forward(pelab_real *stats, pelab_real *losses, double *sum,
                               const pelab_real *logits, const int32_t *targets, int N, int V) {
    PELAB_PROF_START();
    void (*const f)(pelab_real *, pelab_real *, const pelab_real *, const int32_t *, long, long, int) =
        pelab_simd_fn(ce_fwd);
#pragma omp parallel
    {
        long i0, i1;
        pelab_thread_slice(N, &i0, &i1);
        f(stats, losses, logits, targets, i0, i1, V);
    }
    const int count = total(losses, targets, N, sum);
    PELAB_PROF_STOP(PELAB_PROF_LOSS_FWD, 0);
    return count;
}

int pelab_crossentropy_eval(pelab_real *losses, int32_t *pred, pelab_real *pred_prob, double *sum,
                            const pelab_real *logits, const int32_t *targets, int N, int V) {
    PELAB_PROF_START();
    void (*const f)(pelab_real *, int32_t *, pelab_real *, const pelab_real *, const int32_t *, long,
                    long, int) = pelab_simd_fn(ce_eval);
#pragma omp parallel
    {
        long i0, i1;
        pelab_thread_slice(N, &i0, &i1);
        f(losses, pred, pred_prob, logits, targets, i0, i1, V);
    }
    const int count = total(losses, targets, N, sum);
    PELAB_PROF_STOP(PELAB_PROF_LOSS_FWD, 0);
    return count;
}

void pelab_crossentropy_backward(pelab_real *dlogits, const pelab_real *logits, const pelab_real *stats,
                                 const int32_t *targets, pelab_real scale, int N, int V) {
    PELAB_PROF_START();
    void (*const f)(pelab_real *, const pelab_real *, const pelab_real *, const int32_t *, pelab_real,
                    long, long, int) = pelab_simd_fn(ce_bwd);
#pragma omp parallel
    {
        long i0, i1;
        pelab_thread_slice(N, &i0, &i1);
        f(dlogits, logits, stats, targets, scale, i0, i1, V);
    }
    PELAB_PROF_STOP(PELAB_PROF_LOSS_BWD, 0);
}
