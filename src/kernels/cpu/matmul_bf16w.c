/* Products with bf16 weights and float32 activations, for generation: a one-token step reads
 * every weight once and does two flops per weight, so its time is the weights' bytes, and bf16
 * halves them. The weights widen to float32 as they are read (a shift: bf16 is a float32's top
 * half), the activations stay as they are, and the sums run in float32 — no instruction beyond
 * AVX-512F or AVX2 is needed, unlike the bf16 operands of pelab/precision.h.
 *
 *   out[r][o] = Σ_k x[r][k] · w[o][k],   w (OC, C) in bf16, x (n, C), out (n, OC)
 *
 * Threads split the outputs o (so each reads its own part of w); every sum runs in the same order
 * whatever the thread count. */
#include "kernels/cpu/matmul.h"
#include "core/prof.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

/* Four weight rows at a time: four independent sums hide the adds' latency, and each activation
 * vector is loaded once for all of them. Several activation rows (a batch of sequences decoding
 * together) go four at a time against them: sixteen sums, each weight widened once for four
 * rows — at one row per weight the widening would cost as much as the products. */
enum { ROWS = 4 };

/* out[r][o..o+3] for rows r..r+3 */
static PELAB_ALWAYS_INLINE void block4x4(pelab_real *out, const pelab_real *x, const uint16_t *w, int r,
                                         int C, int OC, long o) {
    const uint16_t *w0 = w + o * C, *w1 = w0 + C, *w2 = w1 + C, *w3 = w2 + C;
    const pelab_real *x0 = x + (long)r * C, *x1 = x0 + C, *x2 = x1 + C, *x3 = x2 + C;
    pelab_real s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
    pelab_real s20 = 0, s21 = 0, s22 = 0, s23 = 0, s30 = 0, s31 = 0, s32 = 0, s33 = 0;
#pragma omp simd reduction(+ : s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33)
    for (int k = 0; k < C; k++) {
        const pelab_real a = pelab_from_bf16(w0[k]), b = pelab_from_bf16(w1[k]);
        const pelab_real c = pelab_from_bf16(w2[k]), d = pelab_from_bf16(w3[k]);
        s00 += x0[k] * a, s01 += x0[k] * b, s02 += x0[k] * c, s03 += x0[k] * d;
        s10 += x1[k] * a, s11 += x1[k] * b, s12 += x1[k] * c, s13 += x1[k] * d;
        s20 += x2[k] * a, s21 += x2[k] * b, s22 += x2[k] * c, s23 += x2[k] * d;
        s30 += x3[k] * a, s31 += x3[k] * b, s32 += x3[k] * c, s33 += x3[k] * d;
    }
    pelab_real *y = out + (long)r * OC + o;
    y[0] = s00, y[1] = s01, y[2] = s02, y[3] = s03, y += OC;
    y[0] = s10, y[1] = s11, y[2] = s12, y[3] = s13, y += OC;
    y[0] = s20, y[1] = s21, y[2] = s22, y[3] = s23, y += OC;
    y[0] = s30, y[1] = s31, y[2] = s32, y[3] = s33;
}

/* The outputs [o0, o1) of every row r < n. */
static PELAB_ALWAYS_INLINE void matmul_bf16w_body(pelab_real *out, const pelab_real *x, const uint16_t *w,
                                                  int n, int C, int OC, long o0, long o1) {
    long o = o0;
    for (; o + ROWS <= o1; o += ROWS) {
        const uint16_t *w0 = w + o * C, *w1 = w0 + C, *w2 = w1 + C, *w3 = w2 + C;
        int r = 0;
        for (; r + ROWS <= n; r += ROWS) block4x4(out, x, w, r, C, OC, o);
        for (; r < n; r++) {
            const pelab_real *xr = x + (long)r * C;
            pelab_real s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
            for (int k = 0; k < C; k++) {
                s0 += xr[k] * pelab_from_bf16(w0[k]);
                s1 += xr[k] * pelab_from_bf16(w1[k]);
                s2 += xr[k] * pelab_from_bf16(w2[k]);
                s3 += xr[k] * pelab_from_bf16(w3[k]);
            }
            pelab_real *y = out + (long)r * OC + o;
            y[0] = s0, y[1] = s1, y[2] = s2, y[3] = s3;
        }
    }
    for (; o < o1; o++) {
        const uint16_t *wo = w + o * C;
        for (int r = 0; r < n; r++) {
            const pelab_real *xr = x + (long)r * C;
            pelab_real s = 0;
#pragma omp simd reduction(+ : s)
            for (int k = 0; k < C; k++) s += xr[k] * pelab_from_bf16(wo[k]);
            out[(long)r * OC + o] = s;
        }
    }
}

PELAB_SIMD_KERNEL(matmul_bf16w,
                  (pelab_real *out, const pelab_real *x, const uint16_t *w, int n, int C, int OC, long o0, long o1),
                  (out, x, w, n, C, OC, o0, o1))

void pelab_matmul_bf16w_forward(pelab_real *out, const pelab_real *inp, const uint16_t *w, int N, int C, int OC) {
    PELAB_PROF_START();
    enum { SLICE = 16 }; /* outputs per share: whole cache lines of out */
    void (*const kernel)(pelab_real *, const pelab_real *, const uint16_t *, int, int, int, long, long) =
        pelab_simd_fn(matmul_bf16w);
#pragma omp parallel if (OC >= 4 * SLICE)
    {
        long lo, hi;
        pelab_thread_slice((OC + SLICE - 1) / SLICE, &lo, &hi);
        lo *= SLICE, hi = hi * SLICE < OC ? hi * SLICE : OC;
        if (hi > lo) kernel(out, inp, w, N, C, OC, lo, hi);
    }
    PELAB_PROF_STOP(PELAB_PROF_MATMUL_FWD, 2.0 * N * C * OC);
}
