/* Products of a few rows with float weights read where they are, for generation: one token of
 * each of a few sequences decoding together, where a gemm would first copy every
 * weight into its packed panels (OpenBLAS's sgemm: the weights read, written and read again per
 * step) and a matrix–vector product per row would read them n times.
 *
 *   out[r][o] = Σ_k x[r][k] · w[o][k],   w (OC, C), x (n, C), out (n, OC)
 *
 * Each output is a dot product of its weight row with a row of x, in vectors of 16
 * (kernels/cpu/vec16.h) summed as a tree, the elements past the last whole vector one by one.
 * A pass holds R ≤ 8 rows against S weight rows, R·S ≤ 8 sums in registers: one row reads four
 * weight rows side by side, from the four quarters of the thread's outputs (four streams: one
 * stream waits on one prefetcher), two rows two, and three to eight rows one, each weight read
 * once for all of them (a batch of 8 read in two passes of 4 took 7.0 ms a step of configuration
 * C, where OpenBLAS's sgemm took 6.5). Each sum is computed the same way in every grouping: its
 * bits do not depend on n, the other rows or the threads. Threads split the outputs (each reads
 * its own weight rows). */
#include <string.h>
#include "core/prof.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vec16.h"

enum { MAX_ROWS = 8 };

/* out[r][at[s]] for rows r < R and weight rows at[s], s < S (R, S constants where called). */
static PELAB_ALWAYS_INLINE void dots(pelab_real *out, const pelab_real *x, const pelab_real *w, const long *at,
                                     int R, int S, int C, int OC) {
    pelab_reals16 sum[4][MAX_ROWS] = {{{0}}};
    const int whole = C / 16 * 16;
    for (int k = 0; k < whole; k += 16) {
        pelab_reals16 xr[MAX_ROWS], ws;
        for (int r = 0; r < R; r++) pelab_load16(&xr[r], x + (long)r * C + k);
        for (int s = 0; s < S; s++) {
            pelab_load16(&ws, w + at[s] * C + k);
            for (int r = 0; r < R; r++) sum[s][r] += xr[r] * ws;
        }
    }
    for (int s = 0; s < S; s++)
        for (int r = 0; r < R; r++) {
            pelab_real d = pelab_lanes_sum(&sum[s][r]);
            for (int k = whole; k < C; k++) d += x[(long)r * C + k] * w[at[s] * C + k];
            out[(long)r * OC + at[s]] = d;
        }
}

/* Outputs [o0, o1) of rows 0..R−1: S weight rows a pass (four for one row, two for two, else
 * one), from the S parts of the range. */
static PELAB_ALWAYS_INLINE void rows_range(pelab_real *out, const pelab_real *x, const pelab_real *w, int R,
                                           int C, int OC, long o0, long o1) {
    const int S = R == 1 ? 4 : R == 2 ? 2 : 1;
    const long part = (o1 - o0) / S;
    long at[4];
    for (long j = 0; j < part; j++) {
        for (int s = 0; s < S; s++) at[s] = o0 + s * part + j;
        dots(out, x, w, at, R, S, C, OC);
    }
    for (long o = o0 + S * part; o < o1; o++) dots(out, x, w, &o, R, 1, C, OC);
}

static PELAB_ALWAYS_INLINE void matmul_rows_body(pelab_real *out, const pelab_real *x, const pelab_real *w,
                                                 int n, int C, int OC, long o0, long o1) {
    for (int r = 0; r < n; r += MAX_ROWS) {
        pelab_real *y = out + (long)r * OC;
        const pelab_real *xr = x + (long)r * C;
        switch (n - r < MAX_ROWS ? n - r : MAX_ROWS) {
        case 8: rows_range(y, xr, w, 8, C, OC, o0, o1); break;
        case 7: rows_range(y, xr, w, 7, C, OC, o0, o1); break;
        case 6: rows_range(y, xr, w, 6, C, OC, o0, o1); break;
        case 5: rows_range(y, xr, w, 5, C, OC, o0, o1); break;
        case 4: rows_range(y, xr, w, 4, C, OC, o0, o1); break;
        case 3: rows_range(y, xr, w, 3, C, OC, o0, o1); break;
        case 2: rows_range(y, xr, w, 2, C, OC, o0, o1); break;
        default: rows_range(y, xr, w, 1, C, OC, o0, o1);
        }
    }
}

PELAB_SIMD_KERNEL(matmul_rows,
                  (pelab_real *out, const pelab_real *x, const pelab_real *w, int n, int C, int OC, long o0, long o1),
                  (out, x, w, n, C, OC, o0, o1))

void pelab_matmul_rows_forward(pelab_real *out, const pelab_real *inp, const pelab_real *w, int N, int C, int OC) {
    PELAB_PROF_START();
    void (*const kernel)(pelab_real *, const pelab_real *, const pelab_real *, int, int, int, long, long) =
        pelab_simd_fn(matmul_rows);
#pragma omp parallel if (OC >= 64)
    {
        long lo, hi;
        pelab_thread_slice(OC, &lo, &hi);
        if (hi > lo) kernel(out, inp, w, N, C, OC, lo, hi);
    }
    PELAB_PROF_STOP(PELAB_PROF_MATMUL_FWD, 2.0 * N * C * OC);
}
