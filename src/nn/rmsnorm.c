/* RMSNorm (Zhang & Sennrich 2019) with a learnable gain, eps 1e-5. */
#include <math.h>
#include "core/prof.h"
#include "kernels/cpu/parallel.h"
#include "nn/layers.h"

#define RMSNORM_EPS 1e-5

void pelab_rmsnorm_forward(pelab_real *out, pelab_real *rstd, const pelab_real *x,
                           const pelab_real *g, int N, int C) {
    PELAB_PROF_START();
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const pelab_real *xi = x + (long)i * C;
        pelab_real *oi = out + (long)i * C;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)xi[c] * xi[c];
        pelab_real r = (pelab_real)(1.0 / sqrt(ss / C + RMSNORM_EPS));
        rstd[i] = r;
        for (int c = 0; c < C; c++) oi[c] = xi[c] * r * g[c];
    }
    PELAB_PROF_STOP(PELAB_PROF_NORM_FWD, 0);
}

void pelab_rmsnorm_backward(pelab_real *dx, pelab_real *dg, const pelab_real *dout,
                            const pelab_real *x, const pelab_real *g, const pelab_real *rstd,
                            int N, int C) {
    PELAB_PROF_START();
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int i = 0; i < N; i++) {
            const pelab_real *xi = x + (long)i * C, *di = dout + (long)i * C;
            pelab_real *dxi = dx + (long)i * C;
            pelab_real r = rstd[i];
            double dot = 0; /* Σ dx̂ ⊙ x̂ */
            for (int c = 0; c < C; c++) dot += (double)di[c] * g[c] * xi[c] * r;
            pelab_real mean = (pelab_real)(dot / C);
            for (int c = 0; c < C; c++) dxi[c] += r * (di[c] * g[c] - xi[c] * r * mean);
        }
        /* dg: each thread owns a slice of columns and sums rows in order. */
        long c0, c1;
        pelab_thread_slice(C, &c0, &c1);
        for (int i = 0; i < N; i++) {
            const pelab_real *xi = x + (long)i * C, *di = dout + (long)i * C;
            for (long c = c0; c < c1; c++) dg[c] += di[c] * xi[c] * rstd[i];
        }
    }
    PELAB_PROF_STOP(PELAB_PROF_NORM_BWD, 0);
}
