/* Products with bf16 weights and float32 activations, for generation: a one-token step reads
 * every weight once and does two flops per weight, so its time is the weights' bytes, and bf16
 * halves them. The weights widen to float32 as they are read (a shift: bf16 is a float32's top
 * half), the activations stay as they are, and the sums run in float32 — no instruction beyond
 * AVX-512F or AVX2 is needed, unlike the bf16 operands of pelab/precision.h.
 *
 *   out[r][o] = Σ_k x[r][k] · w[o][k],   w (OC, C), x (n, C), out (n, OC)
 *
 * w is kept in panels of PANEL outputs, k-major in pairs of k: panel p holds w[16p + j][2q + e]
 * at [q][j][e], so that the product reads each panel as one stream, in order, and each pair of k
 * adds x[r][2q] and x[r][2q + 1] times a vector of 16 weights each to 16 running sums — no
 * reduction across a vector, and each weight widened once for every row of a batch of sequences
 * decoding together (up to eight rows at a time; one row reads four panels side by side). The
 * pairs widen without a shuffle: one 32-bit lane holds both of an output's weights, the low one
 * widened by a shift, the high one by a mask (k-major single weights took a zero-extension, a
 * shuffle, per 16: configuration C's token, whose 74 MB a 300 MiB L3 serves at 42-46 GB/s, decoded
 * with bf16 weights at 0.72 of that). Each sum runs over k in order (2q, then 2q + 1): its bits
 * are the same whatever the thread count and whichever rows share the pass. Threads split the
 * panels (each reads its own part of w). An odd C pads each panel's last pair with a zero. */
#include <string.h>
#include "kernels/cpu/matmul.h"
#include "core/prof.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vec16.h"

enum { PANEL = PELAB_BF16W_PANEL, ROWS = 8 };

/* k pairs in a panel, and a panel's bf16 elements */
static long pairs(int C) { return (C + 1) / 2; }
static long panel_elems(int C) { return pairs(C) * 2 * PANEL; }

long pelab_bf16w_panel_size(int C, int OC) {
    return (long)(OC + PANEL - 1) / PANEL * panel_elems(C);
}

void pelab_bf16w_pack(uint16_t *panels, const pelab_real *w, int C, int OC) {
    const long P = (OC + PANEL - 1) / PANEL, Q = pairs(C);
    for (long p = 0; p < P; p++)
        for (long q = 0; q < Q; q++)
            for (long j = 0; j < PANEL; j++)
                for (long e = 0; e < 2; e++) {
                    const long o = p * PANEL + j, k = 2 * q + e;
                    panels[((p * Q + q) * PANEL + j) * 2 + e] =
                        o < OC && k < C ? pelab_to_bf16((float)w[o * C + k]) : 0;
                }
}

/* A panel's sums and weights of one k: vectors of PANEL (kernels/cpu/vec16.h), so that the sums
 * stay in registers across k, where arrays would live in memory (two halves of 8 cost AVX-512 a
 * fifth of its speed: they widen and add in 256-bit halves). */
_Static_assert(PANEL == 16, "a panel is one pelab_reals16");
struct sums {
    pelab_reals16 v; /* the panel's PANEL outputs */
};

/* The weights of a pair of k, wp[0..2·PANEL) as [j][e]: lo (e = 0) and hi (e = 1) widened. */
static PELAB_ALWAYS_INLINE void widen_pair(struct sums *lo, struct sums *hi, const uint16_t *wp) {
    pelab_widen16_pairs(&lo->v, &hi->v, wp);
}

/* s += xk · w */
static PELAB_ALWAYS_INLINE void add_row(struct sums *s, pelab_real xk, const struct sums *w) {
    s->v += xk * w->v;
}

/* Rows 0..R−1 of x (rows C apart) against S consecutive panels from wp, read side by side:
 * out[r][0..(S−1)·PANEL + m) (rows OC apart), m the last panel's outputs. R ≤ ROWS and S ≤ FOUR
 * are constants where it is called, R·S ≤ ROWS sums in registers. One row takes four whole panels
 * at once: four streams of weights and four chains of sums, where one panel alone is one stream
 * and one chain, which wait on one prefetcher and on the adder (configuration C's products, one
 * token, 2 threads, an Intel Xeon whose memory serves 24 GB/s: one panel at a time read 13 GB/s,
 * four 19.5). Each sum runs the same way in every grouping: the same bits. */
enum { FOUR = 4 };
static PELAB_ALWAYS_INLINE void panel_rows(pelab_real *out, const pelab_real *x, const uint16_t *wp,
                                           int R, int S, int C, int OC, int m) {
    struct sums s[FOUR][ROWS] = {{{{0}}}}, lo, hi;
    const long Q = pairs(C), whole = C / 2; /* pairs, and those with both k below C */
    for (long q = 0; q < whole; q++)
        for (int p = 0; p < S; p++) {
            widen_pair(&lo, &hi, wp + p * panel_elems(C) + q * 2 * PANEL);
            for (int r = 0; r < R; r++) {
                add_row(&s[p][r], x[(long)r * C + 2 * q], &lo);
                add_row(&s[p][r], x[(long)r * C + 2 * q + 1], &hi);
            }
        }
    if (whole < Q) /* C odd: the last k alone (x has no k = C) */
        for (int p = 0; p < S; p++) {
            widen_pair(&lo, &hi, wp + p * panel_elems(C) + whole * 2 * PANEL);
            for (int r = 0; r < R; r++) add_row(&s[p][r], x[(long)r * C + C - 1], &lo);
        }
    for (int p = 0; p < S; p++)
        for (int r = 0; r < R; r++)
            memcpy(out + (long)r * OC + p * PANEL, &s[p][r], (size_t)(p == S - 1 ? m : PANEL) * sizeof *out);
}

/* Panels [p0, p1) for every row r < n, ROWS rows per pass over a panel (one row: four whole panels
 * per pass while they last). */
static PELAB_ALWAYS_INLINE void matmul_bf16w_body(pelab_real *out, const pelab_real *x, const uint16_t *w,
                                                  int n, int C, int OC, long p0, long p1) {
    const long whole = OC / PANEL; /* panels with PANEL outputs */
    if (n == 1)
        for (; p0 + FOUR <= p1 && p0 + FOUR <= whole; p0 += FOUR)
            panel_rows(out + p0 * PANEL, x, w + p0 * panel_elems(C), 1, FOUR, C, OC, PANEL);
    for (long p = p0; p < p1; p++) {
        const uint16_t *wp = w + p * panel_elems(C);
        const long o = p * PANEL;
        const int m = OC - o < PANEL ? (int)(OC - o) : PANEL;
        for (int r = 0; r < n; r += ROWS) {
            pelab_real *y = out + (long)r * OC + o;
            const pelab_real *xr = x + (long)r * C;
            switch (n - r < ROWS ? n - r : ROWS) {
            case 8: panel_rows(y, xr, wp, 8, 1, C, OC, m); break;
            case 7: panel_rows(y, xr, wp, 7, 1, C, OC, m); break;
            case 6: panel_rows(y, xr, wp, 6, 1, C, OC, m); break;
            case 5: panel_rows(y, xr, wp, 5, 1, C, OC, m); break;
            case 4: panel_rows(y, xr, wp, 4, 1, C, OC, m); break;
            case 3: panel_rows(y, xr, wp, 3, 1, C, OC, m); break;
            case 2: panel_rows(y, xr, wp, 2, 1, C, OC, m); break;
            default: panel_rows(y, xr, wp, 1, 1, C, OC, m);
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
