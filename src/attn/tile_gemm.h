/* The tiled attention's small dense products (attn_tiled.c): C += alpha · op(A) · B on tiles of
 * up to 64 × 64, in registers blocks of 8 rows, with the blocks a causal diagonal tile leaves
 * empty skipped. Static and always inlined: each vector level's variant of the kernel's per-tile
 * work (kernels/cpu/simd.h) compiles them for its own level, which it passes as `level`.
 * Included by attn_tiled.c alone. */
#ifndef PELAB_ATTN_TILE_GEMM_H
#define PELAB_ATTN_TILE_GEMM_H

#include <math.h>
#include "kernels/cpu/simd.h"
#include "pelab/real.h"

static inline int tile_min(int a, int b) { return a < b ? a : b; }

/* C (m, n) += alpha · op(A) (m, kd) · B (kd, n); C's and B's rows ldc and ldb apart. op(A) is A
 * (m, kd) with rows lda apart, or, a_trans, the transpose of A (kd, m) with rows lda apart, read in
 * place (a transposed copy of a 64-wide tile cost more than the product it fed).
 * Blocks of GEMM_MR rows × GEMM_NR columns of C are summed in a local array over all of kd and
 * added once: with constant bounds the compiler keeps the block in vector registers (8 rows of
 * 64 bytes: 8 AVX-512 or 16 AVX2 registers), and each row of B loaded serves 8 rows of C.
 * Measured on Zen 4, one thread, T 1024, d 64: 8 × 64 bytes ≈ 85 GFLOP/s forward, 4 × 64 bytes
 * 80, 4 × 128 bytes 63, 2 × 64 bytes 51.
 * b_wide: B's rows may be read to n rounded up to GEMM_NR (a padded buffer, wide_of), so the last
 * columns are a block too, of which only the first n are stored; otherwise they, and the rows past
 * the last whole block, take the plain loop. */
enum { GEMM_MR = 8, GEMM_NR = 64 / (int)sizeof(pelab_real) };

/* n rounded up to whole column blocks: the row stride of a buffer tile_gemm may read wide. */
static int wide_of(int n) { return (n + GEMM_NR - 1) / GEMM_NR * GEMM_NR; }

/* What a product on a diagonal tile (query i0 = key j0, so local row r and local key r are the
 * same position) may leave out, the causal mask being known:
 *   TILE_FULL        nothing (tiles below the diagonal);
 *   TILE_OUT_CAUSAL  C(r, j) is read only for j ≤ r: blocks wholly above the diagonal are skipped;
 *   TILE_IN_LOWER    op(A)(r, x) = 0 for x > r: row r sums over x ≤ r;
 *   TILE_IN_UPPER    op(A)(r, x) = 0 for x < r: row r sums over x ≥ r.
 * On a tile of 64 this skips about 40% of the products, and at T ≤ 64 every tile is diagonal. */
enum tile_mask { TILE_FULL, TILE_OUT_CAUSAL, TILE_IN_LOWER, TILE_IN_UPPER };

/* a·b + c: fused (one rounding) where the level has FMA instructions; at the portable level, which
 * has none, a product and a sum (fma there would be a library call per element). */
static PELAB_ALWAYS_INLINE pelab_real fma_at(enum pelab_simd_level level, pelab_real a, pelab_real b, pelab_real c) {
#ifdef PELAB_DOUBLE
    return level >= PELAB_SIMD_AVX2 ? fma(a, b, c) : a * b + c;
#else
    return level >= PELAB_SIMD_AVX2 ? fmaf(a, b, c) : a * b + c;
#endif
}

/* op(A)(r, x) */
static PELAB_ALWAYS_INLINE pelab_real op_a(const pelab_real *restrict A, long lda, int a_trans, int r, int x) {
    return a_trans ? A[(long)x * lda + r] : A[(long)r * lda + x];
}

static PELAB_ALWAYS_INLINE void tile_gemm(enum pelab_simd_level level, pelab_real *restrict C, long ldc,
                                          const pelab_real *restrict A, long lda, int a_trans,
                                          const pelab_real *restrict B, long ldb, int b_wide, int m, int n,
                                          int kd, pelab_real alpha, enum tile_mask mask) {
    const int m_full = m - m % GEMM_MR;
    const int n_blocks = b_wide ? wide_of(n) : n - n % GEMM_NR; /* columns the blocks cover */
    for (int r0 = 0; r0 < m_full; r0 += GEMM_MR) {
        const int x0 = mask == TILE_IN_UPPER ? tile_min(r0, kd) : 0;
        const int x1 = mask == TILE_IN_LOWER ? tile_min(r0 + GEMM_MR, kd) : kd;
        const int j1 = mask == TILE_OUT_CAUSAL ? tile_min(r0 + GEMM_MR, n_blocks) : n_blocks;
        for (int j0 = 0; j0 < j1; j0 += GEMM_NR) {
            pelab_real acc[GEMM_MR][GEMM_NR] = {{0}};
            for (int x = x0; x < x1; x++) {
                const pelab_real *restrict b = B + x * ldb + j0;
                for (int i = 0; i < GEMM_MR; i++) {
                    const pelab_real a = op_a(A, lda, a_trans, r0 + i, x);
#pragma omp simd
                    for (int j = 0; j < GEMM_NR; j++) acc[i][j] = fma_at(level, a, b[j], acc[i][j]);
                }
            }
            const int w = tile_min(GEMM_NR, n - j0);
            for (int i = 0; i < GEMM_MR; i++)
#pragma omp simd
                for (int j = 0; j < w; j++) C[(r0 + i) * ldc + j0 + j] = fma_at(level, alpha, acc[i][j], C[(r0 + i) * ldc + j0 + j]);
        }
    }
    /* rows past m_full, one at a time: each column block's row sums in one vector register */
    for (int r = m_full; r < m; r++) {
        const int x0 = mask == TILE_IN_UPPER ? tile_min(r, kd) : 0;
        const int x1 = mask == TILE_IN_LOWER ? tile_min(r + 1, kd) : kd;
        const int j1 = mask == TILE_OUT_CAUSAL ? tile_min(r + 1, n_blocks) : n_blocks;
        for (int j0 = 0; j0 < j1; j0 += GEMM_NR) {
            pelab_real acc[GEMM_NR] = {0};
            for (int x = x0; x < x1; x++) {
                const pelab_real a = op_a(A, lda, a_trans, r, x), *restrict b = B + x * ldb + j0;
#pragma omp simd
                for (int j = 0; j < GEMM_NR; j++) acc[j] = fma_at(level, a, b[j], acc[j]);
            }
            const int w = tile_min(GEMM_NR, n - j0);
#pragma omp simd
            for (int j = 0; j < w; j++) C[r * ldc + j0 + j] = fma_at(level, alpha, acc[j], C[r * ldc + j0 + j]);
        }
    }
    /* columns past the blocks (b_wide: none), every row */
    for (int r = 0; r < m && n_blocks < n; r++) {
        const int n_to = mask == TILE_OUT_CAUSAL ? tile_min(n, r + 1) : n;
        const int x0 = mask == TILE_IN_UPPER ? tile_min(r, kd) : 0;
        const int x1 = mask == TILE_IN_LOWER ? tile_min(r + 1, kd) : kd;
        pelab_real *restrict c = C + r * ldc;
        for (int x = x0; x < x1; x++) {
            const pelab_real a = alpha * op_a(A, lda, a_trans, r, x);
            const pelab_real *restrict b = B + x * ldb;
#pragma omp simd
            for (int j = n_blocks; j < n_to; j++) c[j] = fma_at(level, a, b[j], c[j]);
        }
    }
}

#endif
