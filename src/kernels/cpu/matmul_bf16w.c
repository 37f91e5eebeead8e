/* Products with bf16 weights and float32 activations, for generation: a one-token step reads
 * every weight once and does two flops per weight, so its time is the weights' bytes, and bf16
 * halves them. The weights widen to float32 as they are read (a shift: bf16 is a float32's top
 * half), the activations stay as they are, and the sums run in float32 — no instruction beyond
 * AVX-512F or AVX2 is needed, unlike the bf16 operands of pelab/precision.h.
 *
 *   out[r][o] = Σ_k x[r][k] · w[o][k],   w (OC, C), x (n, C), out (n, OC)
 *
 * w is kept in panels of PANEL outputs, k-major: panel p holds w[16p + j][k] at [k][j], so that
 * the product reads the weights as one stream, in order, and each k adds x[r][k] times a vector
 * of 16 weights to 16 running sums — no reduction across a vector, and each weight widened once
 * for every row of a batch of sequences decoding together (up to four rows at a time). Each sum
 * runs over k in order: its bits are the same whatever the thread count and whichever rows share
 * the pass. Threads split the panels (each reads its own part of w). */
#include <string.h>
#include "kernels/cpu/matmul.h"
#include "core/prof.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

enum { PANEL = PELAB_BF16W_PANEL, ROWS = 4 };

long pelab_bf16w_panel_size(int C, int OC) {
    return (long)(OC + PANEL - 1) / PANEL * PANEL * C;
}

void pelab_bf16w_pack(uint16_t *panels, const pelab_real *w, int C, int OC) {
    const long P = (OC + PANEL - 1) / PANEL;
    for (long p = 0; p < P; p++)
        for (long k = 0; k < C; k++)
            for (long j = 0; j < PANEL; j++) {
                const long o = p * PANEL + j;
                panels[(p * C + k) * PANEL + j] = o < OC ? pelab_to_bf16((float)w[o * C + k]) : 0;
            }
}

/* A panel's sums and weights of one k as two halves of 8: vectors (GCC's and clang's extension,
 * one AVX register each), so that the sums stay in registers across k, where arrays would live
 * in memory. SSE has no register that wide, and GCC lowers them through memory there: the
 * portable level is slower than the AVX ones by more than their width (on this kernel, one row,
 * about 3×; vectors of 4 would recover half of that and cost AVX a third). */
enum { HALF = PANEL / 2 };
typedef pelab_real reals8 __attribute__((vector_size(HALF * sizeof(pelab_real))));
typedef uint16_t halves8 __attribute__((vector_size(HALF * sizeof(uint16_t))));
typedef uint32_t words8 __attribute__((vector_size(HALF * sizeof(uint32_t))));
typedef float floats8 __attribute__((vector_size(HALF * sizeof(float))));
struct sums {
    reals8 lo, hi; /* outputs 0..7, 8..15 of the panel */
};

/* Weights wp[0..8) widened: a bf16 is a float32's top half. */
static PELAB_ALWAYS_INLINE void widen8(reals8 *out, const uint16_t *wp) {
    halves8 h;
    memcpy(&h, wp, sizeof h);
    const words8 u = __builtin_convertvector(h, words8) << 16;
    floats8 f;
    memcpy(&f, &u, sizeof f);
    *out = __builtin_convertvector(f, reals8);
}

/* s += xk · w */
static PELAB_ALWAYS_INLINE void add_row(struct sums *s, pelab_real xk, const struct sums *w) {
    s->lo += xk * w->lo;
    s->hi += xk * w->hi;
}

/* Rows 0..R−1 of x (rows C apart) against panel wp: out[r][0..m) of the panel's m outputs (rows
 * OC apart). R is a constant where it is called. */
static PELAB_ALWAYS_INLINE void panel_rows(pelab_real *out, const pelab_real *x, const uint16_t *wp,
                                           int R, int C, int OC, int m) {
    const pelab_real *x0 = x, *x1 = x0 + C, *x2 = x1 + C, *x3 = x2 + C;
    struct sums s0 = {{0}, {0}}, s1 = s0, s2 = s0, s3 = s0, w;
    for (int k = 0; k < C; k++) {
        widen8(&w.lo, wp + (long)k * PANEL);
        widen8(&w.hi, wp + (long)k * PANEL + HALF);
        add_row(&s0, x0[k], &w);
        if (R > 1) add_row(&s1, x1[k], &w);
        if (R > 2) add_row(&s2, x2[k], &w);
        if (R > 3) add_row(&s3, x3[k], &w);
    }
    const struct sums *row[ROWS] = {&s0, &s1, &s2, &s3};
    for (int r = 0; r < R; r++) memcpy(out + (long)r * OC, row[r], (size_t)m * sizeof *out);
}

/* Panels [p0, p1) for every row r < n, ROWS rows per pass over a panel. */
static PELAB_ALWAYS_INLINE void matmul_bf16w_body(pelab_real *out, const pelab_real *x, const uint16_t *w,
                                                  int n, int C, int OC, long p0, long p1) {
    for (long p = p0; p < p1; p++) {
        const uint16_t *wp = w + p * C * PANEL;
        const long o = p * PANEL;
        const int m = OC - o < PANEL ? (int)(OC - o) : PANEL;
        for (int r = 0; r < n; r += ROWS) {
            pelab_real *y = out + (long)r * OC + o;
            const pelab_real *xr = x + (long)r * C;
            switch (n - r < ROWS ? n - r : ROWS) {
            case 4: panel_rows(y, xr, wp, 4, C, OC, m); break;
            case 3: panel_rows(y, xr, wp, 3, C, OC, m); break;
            case 2: panel_rows(y, xr, wp, 2, C, OC, m); break;
            default: panel_rows(y, xr, wp, 1, C, OC, m);
            }
        }
    }
}

PELAB_SIMD_KERNEL(matmul_bf16w,
                  (pelab_real *out, const pelab_real *x, const uint16_t *w, int n, int C, int OC, long p0, long p1),
                  (out, x, w, n, C, OC, p0, p1))

void pelab_matmul_bf16w_forward(pelab_real *out, const pelab_real *inp, const uint16_t *w, int N, int C, int OC) {
    PELAB_PROF_START();
    void (*const kernel)(pelab_real *, const pelab_real *, const uint16_t *, int, int, int, long, long) =
        pelab_simd_fn(matmul_bf16w);
    const long P = (OC + PANEL - 1) / PANEL;
#pragma omp parallel if (P >= 4)
    {
        long lo, hi;
        pelab_thread_slice(P, &lo, &hi);
        if (hi > lo) kernel(out, inp, w, N, C, OC, lo, hi);
    }
    PELAB_PROF_STOP(PELAB_PROF_MATMUL_FWD, 2.0 * N * C * OC);
}
