/* The tiled attention's rows (attn_tiled.c): a row's maximum, its exponentials e^(x − m) with
 * their sum (the forward's online softmax), the backward's P ⊙ keep and dS = P ⊙ (keep ⊙ dP − D)
 * and the dot product D = rowsum(dO ⊙ O); written out for AVX-512 and AVX2 with the vector
 * exponential (kernels/cpu/vexp.h), plain loops at the other levels and in the double build. Rows
 * are short (a tile of 64 at most, 21 or 50 at the small models) and end masked: the compiler's
 * own vectorisation of the plain loops summed a vector's lanes one after another and took the
 * masked end a float at a time. Static and always inlined into each vector level's variant of the
 * kernel's per-tile work, which passes its `level`. Included by attn_tiled.c alone. */
#ifndef PELAB_ATTN_TILE_ROWS_H
#define PELAB_ATTN_TILE_ROWS_H

#include "attn/tile_lanes.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vexp.h"
#include "kernels/cpu/vmath.h"
#include "pelab/real.h"

#ifdef PELAB_VEXP_VECTORS
/* The rows' kernels of a level: W lanes, intrinsics of prefix P on vectors V with masks M, for
 * functions of target TARGET. Whole vectors while they fit, then masked ones (AVX2's masked stores
 * are slow on some CPUs: only at a row's end).
 *   row_max<W>(x, n, m)     max(m, x[0..n)); NaNs in x ignored, as the plain loop
 *   exp_row<W>(x, n, nk, m) x[c] = e^(x[c] − m) (pelab_vexp_prob) for c < n, 0 for n ≤ c < nk;
 *                           returns their sum
 *   grad_row<W>(...)        the backward's row, grad_row's (below)
 *   dot<W>(a, b, n)         Σ a[c]·b[c], the lanes summed as a tree (an `omp simd` reduction's
 *                           are summed one after another, a chain longer than a short row's
 *                           products) */
#define ROW_KERNELS(W, P, V, M, TARGET)                                                           \
    TARGET static inline float row_max##W(const float *x, int n, float m) {                      \
        V v = P##_set1_ps(m);                                                                     \
        int c = 0;                                                                                \
        for (; c + W <= n; c += W) v = P##_max_ps(P##_loadu_ps(x + c), v);                       \
        if (c < n) v = P##_max_ps(load_or##W(lanes##W(n - c), x + c, v), v);                      \
        return max##W(v);                                                                         \
    }                                                                                             \
    TARGET static inline float exp_row##W(float *x, int n, int nk, float m) {                    \
        const V mv = P##_set1_ps(m);                                                              \
        V sum = P##_setzero_ps();                                                                 \
        int c = 0;                                                                                \
        for (; c + W <= n; c += W) {                                                              \
            const V e = pelab_vexp##W##_prob(P##_sub_ps(P##_loadu_ps(x + c), mv));                 \
            P##_storeu_ps(x + c, e);                                                              \
            sum = P##_add_ps(sum, e);                                                             \
        }                                                                                         \
        for (; c < nk; c += W) {                                                                  \
            const M in = lanes##W(n - c);                                                         \
            const V e = zero_out##W(in, pelab_vexp##W##_prob(P##_sub_ps(load_z##W(in, x + c), mv))); \
            store_m##W(lanes##W(nk - c), x + c, e);                                               \
            sum = P##_add_ps(sum, e);                                                             \
        }                                                                                         \
        return sum##W(sum);                                                                       \
    }                                                                                             \
    TARGET static inline void grad_row##W(float *p, float *ds, const float *keep, int n, int nk,  \
                                          float lse, float D) {                                   \
        const V lv = P##_set1_ps(lse), dv = P##_set1_ps(D), one = P##_set1_ps(1);                 \
        int c = 0;                                                                                \
        for (; c + W <= n; c += W) {                                                              \
            const V e = pelab_vexp##W##_prob(P##_sub_ps(P##_loadu_ps(p + c), lv));                 \
            const V k = keep ? P##_loadu_ps(keep + c) : one;                                      \
            P##_storeu_ps(p + c, P##_mul_ps(e, k));                                               \
            P##_storeu_ps(ds + c, P##_mul_ps(e, P##_sub_ps(P##_mul_ps(k, P##_loadu_ps(ds + c)), dv))); \
        }                                                                                         \
        for (; c < nk; c += W) {                                                                  \
            const M in = lanes##W(n - c), out = lanes##W(nk - c);                                 \
            const V e = zero_out##W(in, pelab_vexp##W##_prob(P##_sub_ps(load_z##W(in, p + c), lv))); \
            const V k = keep ? load_or##W(in, keep + c, one) : one;                               \
            const V g = P##_sub_ps(P##_mul_ps(k, load_z##W(in, ds + c)), dv);                     \
            store_m##W(out, p + c, P##_mul_ps(e, k));                                             \
            store_m##W(out, ds + c, zero_out##W(in, P##_mul_ps(e, g)));                           \
        }                                                                                         \
    }                                                                                             \
    TARGET static inline float dot##W(const float *a, const float *b, int n) {                   \
        V acc = P##_setzero_ps();                                                                 \
        int c = 0;                                                                                \
        for (; c + W <= n; c += W) acc = P##_fmadd_ps(P##_loadu_ps(a + c), P##_loadu_ps(b + c), acc); \
        if (c < n) {                                                                              \
            const M in = lanes##W(n - c);                                                         \
            acc = P##_fmadd_ps(load_z##W(in, a + c), load_z##W(in, b + c), acc);                  \
        }                                                                                         \
        return sum##W(acc);                                                                       \
    }

ROW_KERNELS(16, _mm512, __m512, __mmask16, PELAB_TARGET_AVX512)
ROW_KERNELS(8, _mm256, __m256, __m256i, PELAB_TARGET_AVX2)
#endif

/* max(m, x[0..n)); NaNs in x ignored (pelab_vmax at the other levels). */
static PELAB_ALWAYS_INLINE pelab_real row_max(enum pelab_simd_level level, const pelab_real *restrict x, int n,
                                              pelab_real m) {
#ifdef PELAB_VEXP_VECTORS
    if (level == PELAB_SIMD_AVX512) return row_max16(x, n, m);
    if (level == PELAB_SIMD_AVX2) return row_max8(x, n, m);
#endif
    return pelab_vmax(x, n, m);
}

/* Σ a[c]·b[c], c < n */
static PELAB_ALWAYS_INLINE pelab_real dot(enum pelab_simd_level level, const pelab_real *a, const pelab_real *b, int n) {
#ifdef PELAB_VEXP_VECTORS
    if (level == PELAB_SIMD_AVX512) return dot16(a, b, n);
    if (level == PELAB_SIMD_AVX2) return dot8(a, b, n);
#endif
    return pelab_vdot(a, b, n);
}

/* x[c] = e^(x[c] − m) for c < n (pelab_vexp_prob), 0 for n ≤ c < nk; returns their sum. */
static PELAB_ALWAYS_INLINE pelab_real exp_row(enum pelab_simd_level level, pelab_real *restrict x, int n, int nk,
                                              pelab_real m) {
#ifdef PELAB_VEXP_VECTORS
    if (level == PELAB_SIMD_AVX512) return exp_row16(x, n, nk, m);
    if (level == PELAB_SIMD_AVX2) return exp_row8(x, n, nk, m);
#endif
    /* the exponentials apart from the sum: that loop vectorises in the float build without a
     * pragma, which the double build's libm exp could not honour */
    for (int c = 0; c < n; c++) x[c] = pelab_vexp_prob(x[c] - m);
    pelab_real sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < n; c++) sum += x[c];
    for (int c = n; c < nk; c++) x[c] = 0;
    return sum;
}

/* The backward's row of P ⊙ keep (p: the scores in, the probabilities out) and of dS (ds: dP in):
 *   p[c] = P·keep[c],  ds[c] = P·(keep[c]·ds[c] − D),  P = e^(p[c] − lse)
 * for c < n, both 0 for n ≤ c < nk; keep NULL (no dropout) is all 1. */
static PELAB_ALWAYS_INLINE void grad_row(enum pelab_simd_level level, pelab_real *restrict p, pelab_real *restrict ds,
                                         const pelab_real *restrict keep, int n, int nk, pelab_real lse,
                                         pelab_real D) {
#ifdef PELAB_VEXP_VECTORS
    if (level == PELAB_SIMD_AVX512) {
        grad_row16(p, ds, keep, n, nk, lse, D);
        return;
    }
    if (level == PELAB_SIMD_AVX2) {
        grad_row8(p, ds, keep, n, nk, lse, D);
        return;
    }
#endif
    if (keep) {
        for (int c = 0; c < n; c++) { /* vectorises in the float build, as exp_row's loop */
            const pelab_real pc = pelab_vexp_prob(p[c] - lse);
            p[c] = pc * keep[c];
            ds[c] = pc * (keep[c] * ds[c] - D);
        }
    } else {
        for (int c = 0; c < n; c++) {
            const pelab_real pc = pelab_vexp_prob(p[c] - lse);
            p[c] = pc;
            ds[c] = pc * (ds[c] - D);
        }
    }
    for (int c = n; c < nk; c++) p[c] = ds[c] = 0;
}

#endif
