/* RMSNorm (Zhang & Sennrich 2019) with a learnable gain, eps 1e-5:
 *   forward   out = g ⊙ x̂,  x̂ = x·rstd,  rstd = 1/sqrt(mean(x²) + eps)        per row of C
 *   backward  dx += rstd·(dx̂ − x̂·mean(dx̂ ⊙ x̂)),  dx̂ = dout ⊙ g;   dg += Σ_rows dout ⊙ x̂
 * Each row is one pass to reduce and one to write, at the SIMD level chosen at run time
 * (simd.h); the sums of squares and dots are accumulated in double. */
#include <math.h>
#include "core/prof.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/layers.h"

#define RMSNORM_EPS 1e-5

/* rows [i0, i1) */
static PELAB_ALWAYS_INLINE void norm_fwd_body(pelab_real *out, pelab_real *rstd, const pelab_real *x,
                                              const pelab_real *g, long i0, long i1, int C) {
    for (long i = i0; i < i1; i++) {
        const pelab_real *xi = x + i * C;
        pelab_real *oi = out + i * C;
        double ss = 0;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < C; c++) ss += (double)xi[c] * xi[c];
        const pelab_real r = (pelab_real)(1.0 / sqrt(ss / C + RMSNORM_EPS));
        rstd[i] = r;
#pragma omp simd
        for (int c = 0; c < C; c++) oi[c] = xi[c] * r * g[c];
    }
}
PELAB_SIMD_KERNEL(norm_fwd, (pelab_real *out, pelab_real *rstd, const pelab_real *x, const pelab_real *g,
                             long i0, long i1, int C), (out, rstd, x, g, i0, i1, C))

/* dx of rows [i0, i1) */
static PELAB_ALWAYS_INLINE void norm_bwd_body(pelab_real *dx, const pelab_real *dout, const pelab_real *x,
                                              const pelab_real *g, const pelab_real *rstd, long i0,
                                              long i1, int C) {
    for (long i = i0; i < i1; i++) {
        const pelab_real *xi = x + i * C, *di = dout + i * C;
        pelab_real *dxi = dx + i * C;
        const pelab_real r = rstd[i];
        double dot = 0; /* Σ dx̂ ⊙ x̂ / rstd */
#pragma omp simd reduction(+ : dot)
        for (int c = 0; c < C; c++) dot += (double)(di[c] * g[c]) * xi[c];
        const pelab_real k = (pelab_real)(dot * r / C) * r; /* mean(dx̂ ⊙ x̂) · rstd */
#pragma omp simd
        for (int c = 0; c < C; c++) dxi[c] += r * (di[c] * g[c] - xi[c] * k);
    }
}
PELAB_SIMD_KERNEL(norm_bwd, (pelab_real *dx, const pelab_real *dout, const pelab_real *x, const pelab_real *g,
                             const pelab_real *rstd, long i0, long i1, int C),
                  (dx, dout, x, g, rstd, i0, i1, C))

/* dg columns [c0, c1) summed over all rows, in row order */
static PELAB_ALWAYS_INLINE void norm_dg_body(pelab_real *dg, const pelab_real *dout, const pelab_real *x,
                                             const pelab_real *rstd, long N, int C, long c0, long c1) {
    for (long i = 0; i < N; i++) {
        const pelab_real *xi = x + i * C, *di = dout + i * C;
        const pelab_real r = rstd[i];
#pragma omp simd
        for (long c = c0; c < c1; c++) dg[c] += di[c] * xi[c] * r;
    }
}
PELAB_SIMD_KERNEL(norm_dg, (pelab_real *dg, const pelab_real *dout, const pelab_real *x, const pelab_real *rstd,
                            long N, int C, long c0, long c1), (dg, dout, x, rstd, N, C, c0, c1))

void pelab_rmsnorm_forward(pelab_real *out, pelab_real *rstd, const pelab_real *x,
                           const pelab_real *g, int N, int C) {
    PELAB_PROF_START();
    void (*const f)(pelab_real *, pelab_real *, const pelab_real *, const pelab_real *, long, long, int) =
        pelab_simd_fn(norm_fwd);
#pragma omp parallel
    {
        long i0, i1;
        pelab_thread_slice(N, &i0, &i1);
        f(out, rstd, x, g, i0, i1, C);
    }
    PELAB_PROF_STOP(PELAB_PROF_NORM_FWD, 0);
}

void pelab_rmsnorm_backward(pelab_real *dx, pelab_real *dg, const pelab_real *dout,
                            const pelab_real *x, const pelab_real *g, const pelab_real *rstd,
                            int N, int C) {
    PELAB_PROF_START();
    void (*const fdx)(pelab_real *, const pelab_real *, const pelab_real *, const pelab_real *,
                      const pelab_real *, long, long, int) = pelab_simd_fn(norm_bwd);
    void (*const fdg)(pelab_real *, const pelab_real *, const pelab_real *, const pelab_real *, long,
                      int, long, long) = pelab_simd_fn(norm_dg);
#pragma omp parallel
    {
        long lo, hi;
        pelab_thread_slice(N, &lo, &hi);
        fdx(dx, dout, x, g, rstd, lo, hi, C);
        /* dg: each thread owns a slice of columns and sums the rows in order, so the bits do not
         * depend on the thread count */
        pelab_thread_slice(C, &lo, &hi);
        fdg(dg, dout, x, rstd, N, C, lo, hi);
    }
    PELAB_PROF_STOP(PELAB_PROF_NORM_BWD, 0);
}
