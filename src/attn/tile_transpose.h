/* The tiled attention's transposes of K_J and V_J (attn_tiled.c), the B operands of its products,
 * padded with zeros to whole column blocks (tile_gemm.h's wide_of): by 16 × 16 (AVX-512) or
 * 8 × 8 (AVX2) blocks in registers, where a plain loop copied a float at a time; the plain loop
 * at the other levels and in the double build. Static and always inlined into each vector level's
 * variant of the kernel's per-tile work, which passes its `level`. Included by attn_tiled.c alone. */
#ifndef PELAB_ATTN_TILE_TRANSPOSE_H
#define PELAB_ATTN_TILE_TRANSPOSE_H

#include "attn/tile_lanes.h"
#include "kernels/cpu/simd.h"
#include "pelab/real.h"

/* out (n, m) = in (m, n)^T with out's rows ldo ≥ m apart, columns m .. ldo−1 zero; in's rows ldi
 * apart. */
static PELAB_ALWAYS_INLINE void transpose_plain(pelab_real *restrict out, long ldo, const pelab_real *restrict in,
                                                long ldi, int m, int n) {
    for (int j = 0; j < n; j++)
        for (long r = m; r < ldo; r++) out[j * ldo + r] = 0;
    for (int r = 0; r < m; r++)
        for (int j = 0; j < n; j++) out[(long)j * ldo + r] = in[r * ldi + j];
}

#ifdef PELAB_VEXP_VECTORS
/* A block's last round of the transpose below: a[4g + k] holds column k + 4q of rows 4g .. 4g+3 in
 * its 128-bit quarter (AVX2: half) q; t[c] is column c. */
PELAB_TARGET_AVX512 static inline void across16(const __m512 *a, __m512 *t) {
    for (int k = 0; k < 4; k++) {
        const __m512 v0 = _mm512_shuffle_f32x4(a[k], a[4 + k], 0x88), v1 = _mm512_shuffle_f32x4(a[k], a[4 + k], 0xDD);
        const __m512 v2 = _mm512_shuffle_f32x4(a[8 + k], a[12 + k], 0x88), v3 = _mm512_shuffle_f32x4(a[8 + k], a[12 + k], 0xDD);
        t[k] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        t[k + 8] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        t[k + 4] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        t[k + 12] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}
PELAB_TARGET_AVX2 static inline void across8(const __m256 *a, __m256 *t) {
    for (int k = 0; k < 4; k++) {
        t[k] = _mm256_permute2f128_ps(a[k], a[4 + k], 0x20);
        t[k + 4] = _mm256_permute2f128_ps(a[k], a[4 + k], 0x31);
    }
}

/* transpose<W>: the transpose by blocks of W × W in registers, for ldo = m rounded up to W: rows
 * past m are read as zeros, so the block writes out's padding too. A block is three rounds of
 * shuffles: pairs of rows interleaved, then fours, then across the 128-bit lanes (across<W>). */
#define TRANSPOSE_KERNEL(W, P, V, M, TARGET)                                                      \
    TARGET static inline void transpose##W(float *restrict out, long ldo, const float *restrict in, \
                                           long ldi, int m, int n) {                              \
        for (int r0 = 0; r0 < m; r0 += W)                                                         \
            for (int c0 = 0; c0 < n; c0 += W) {                                                   \
                const M cols = lanes##W(n - c0);                                                  \
                V a[W], t[W];                                                                     \
                for (int i = 0; i < W; i++)                                                       \
                    a[i] = r0 + i < m ? load_z##W(cols, in + (long)(r0 + i) * ldi + c0) : P##_setzero_ps(); \
                for (int i = 0; i < W; i += 2) {                                                  \
                    t[i] = P##_unpacklo_ps(a[i], a[i + 1]);                                       \
                    t[i + 1] = P##_unpackhi_ps(a[i], a[i + 1]);                                   \
                }                                                                                 \
                for (int i = 0; i < W; i += 4) {                                                  \
                    a[i] = P##_shuffle_ps(t[i], t[i + 2], 0x44);                                  \
                    a[i + 1] = P##_shuffle_ps(t[i], t[i + 2], 0xEE);                              \
                    a[i + 2] = P##_shuffle_ps(t[i + 1], t[i + 3], 0x44);                          \
                    a[i + 3] = P##_shuffle_ps(t[i + 1], t[i + 3], 0xEE);                          \
                }                                                                                 \
                across##W(a, t);                                                                  \
                for (int c = 0; c < W && c0 + c < n; c++) P##_storeu_ps(out + (long)(c0 + c) * ldo + r0, t[c]); \
            }                                                                                     \
    }

TRANSPOSE_KERNEL(16, _mm512, __m512, __mmask16, PELAB_TARGET_AVX512)
TRANSPOSE_KERNEL(8, _mm256, __m256, __m256i, PELAB_TARGET_AVX2)
#endif

/* out (n, m) = in (m, n)^T with out's rows ldo = wide_of(m) apart, columns m .. ldo−1 zero; in's
 * rows ldi apart. */
static PELAB_ALWAYS_INLINE void tile_transpose(enum pelab_simd_level level, pelab_real *restrict out, long ldo,
                                               const pelab_real *restrict in, long ldi, int m, int n) {
#ifdef PELAB_VEXP_VECTORS
    if (level == PELAB_SIMD_AVX512) {
        transpose16(out, ldo, in, ldi, m, n);
        return;
    }
    if (level == PELAB_SIMD_AVX2) {
        transpose8(out, ldo, in, ldi, m, n);
        return;
    }
#endif
    transpose_plain(out, ldo, in, ldi, m, n);
}

#endif
