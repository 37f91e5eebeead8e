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
 * vector is loaded once for all of them. */
enum { ROWS = 4 };

/* The outputs [o0, o1) of every row r < n. */
static PELAB_ALWAYS_INLINE void matmul_bf16w_body(pelab_real *out, const pelab_real *x, const uint16_t *w,
                                                  int n, int C, int OC, long o0, long o1) {
    long o = o0;
    for (; o + ROWS <= o1; o += ROWS) {
        const uint16_t *w0 = w + o * C, *w1 = w0 + C, *w2 = w1 + C, *w3 = w2 + C;
        for (int r = 0; r < n; r++) {
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
