/* Tile products with bf16 operands and float32 accumulation (tile_bf16.h).
 *
 * Packing. op(A) (m, kd) becomes a (m, kp) bf16 array, kp = kd rounded up to even (a zero pads an
 * odd kd), so the pair op(A)(i, 2p), op(A)(i, 2p+1) is one 32-bit word. op(B) (kd, n) becomes
 * (kp/2, np, 2): for each pair of rows p, the columns j = 0..np−1 (np = n rounded up to 16, zeros
 * after n), each as its two elements (B(2p, j), B(2p+1, j)). One 512-bit load of B's pair row p
 * then holds 16 columns, and VDPBF16PS against a broadcast pair of A adds
 *   A(i,2p)·B(2p,j) + A(i,2p+1)·B(2p+1,j)
 * into 16 float32 sums of row i at once.
 *
 * Blocks of MR = 8 rows by 16 columns of C are summed in 8 registers over all of kd and added to
 * C once (alpha applied then; masked loads and stores at the right edge). Packing is O(m·kd +
 * kd·n) against the product's O(m·n·kd): on tiles of 64 it is a few per cent.
 */
#include "attn/tile_bf16.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/simd.h"

enum { MR = 8, NR = 16 };

static int round_up(int x, int to) { return (x + to - 1) / to * to; }

size_t pelab_tile_bf16_pack_size(int max_mn, int max_k) {
    const size_t kp = (size_t)round_up(max_k, 2), np = (size_t)round_up(max_mn, NR);
    return (size_t)max_mn * kp + kp * np;
}

static inline uint16_t bf16_of(pelab_real x) { return pelab_to_bf16((float)x); }

/* Two bf16s side by side as one 32-bit word, lo in the low half (as they lie in memory): the
 * packed arrays are written a pair at a time, so that each loop below is one vector of integer
 * roundings and no loop writes half-words. */
typedef uint32_t __attribute__((may_alias)) pair_word;
static inline uint32_t pair_of(pelab_real lo, pelab_real hi) {
    return bf16_of(lo) | (uint32_t)bf16_of(hi) << 16;
}

/* a (m, kp) = bf16(op(A)), kd's odd column padded with zero. Transposed, the rows of A are read
 * whole (two at a time, for a pair) and written down a's columns. */
static PELAB_ALWAYS_INLINE void pack_a_body(uint16_t *a, const pelab_real *A, long lda, int ta, int m,
                                            int kd, int kp) {
    pair_word *a2 = (pair_word *)a;
    const int kw = kp / 2, even = kd / 2;
    if (!ta) {
        for (int i = 0; i < m; i++) {
            const pelab_real *row = A + (long)i * lda;
            for (int p = 0; p < even; p++) a2[(long)i * kw + p] = pair_of(row[2 * p], row[2 * p + 1]);
            if (kw > even) a2[(long)i * kw + even] = bf16_of(row[kd - 1]);
        }
        return;
    }
    for (int p = 0; p < even; p++) {
        const pelab_real *lo = A + (long)(2 * p) * lda, *hi = lo + lda;
        for (int i = 0; i < m; i++) a2[(long)i * kw + p] = pair_of(lo[i], hi[i]);
    }
    if (kw > even)
        for (int i = 0; i < m; i++) a2[(long)i * kw + even] = bf16_of(A[(long)(kd - 1) * lda + i]);
}

/* b (kp/2, np, 2) = bf16(op(B)) in pairs of rows, zeros past n and past kd. Transposed, a pair
 * is two neighbours of one row of B. */
static PELAB_ALWAYS_INLINE void pack_b_body(uint16_t *b, const pelab_real *B, long ldb, int tb, int n,
                                            int kd, int kp, int np) {
    pair_word *b2 = (pair_word *)b;
    const int kw = kp / 2, even = kd / 2;
    if (!tb) {
        for (int p = 0; p < even; p++) {
            const pelab_real *lo = B + (long)(2 * p) * ldb, *hi = lo + ldb;
            for (int j = 0; j < n; j++) b2[(long)p * np + j] = pair_of(lo[j], hi[j]);
        }
        if (kw > even) {
            const pelab_real *lo = B + (long)(kd - 1) * ldb;
            for (int j = 0; j < n; j++) b2[(long)even * np + j] = bf16_of(lo[j]);
        }
    } else {
        for (int j = 0; j < n; j++) {
            const pelab_real *row = B + (long)j * ldb;
            for (int p = 0; p < even; p++) b2[(long)p * np + j] = pair_of(row[2 * p], row[2 * p + 1]);
            if (kw > even) b2[(long)even * np + j] = bf16_of(row[kd - 1]);
        }
    }
    for (int p = 0; p < kw; p++)
        for (int j = n; j < np; j++) b2[(long)p * np + j] = 0;
}

static void pack_portable(uint16_t *a, uint16_t *b, const pelab_real *A, long lda, int ta,
                          const pelab_real *B, long ldb, int tb, int m, int n, int kd, int kp, int np) {
    pack_a_body(a, A, lda, ta, m, kd, kp);
    pack_b_body(b, B, ldb, tb, n, kd, kp, np);
}

/* The plain loops: C += alpha · a · b from the packed operands, in pelab_real. */
static void product_portable(pelab_real *C, long ldc, const uint16_t *a, const uint16_t *b, int m, int n,
                             int kp, int np, pelab_real alpha) {
    for (int i = 0; i < m; i++) {
        pelab_real *c = C + (long)i * ldc;
        for (int j = 0; j < n; j++) {
            pelab_real sum = 0;
            for (int x = 0; x < kp; x++)
                sum += (pelab_real)pelab_from_bf16(a[(long)i * kp + x]) *
                       (pelab_real)pelab_from_bf16(b[((long)(x / 2) * np + j) * 2 + (x & 1)]);
            c[j] += alpha * sum;
        }
    }
}

#if PELAB_SIMD_X86 && !defined(PELAB_DOUBLE)
#include <immintrin.h>
#define TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* Rows r0 .. r0+mr−1 (mr ≤ MR, a constant where inlined), columns j0 .. j0+16·nv−1 (nv = 1 or 2
 * vectors; the first `cols` of them stored). Two vectors of columns make 16 independent sums, each
 * broadcast pair of A serving two VDPBF16PS: with one, the 8 chains of dependent additions
 * and a broadcast per product held the tile products at about half the instruction's rate. */
TARGET_BF16 static inline __attribute__((always_inline)) void block(
    float *C, long ldc, const uint16_t *a, const uint16_t *b, int r0, int mr, int j0, int nv, int cols,
    int kp, int np, float alpha) {
    __m512 acc[MR][2];
    for (int i = 0; i < mr; i++)
        for (int v = 0; v < nv; v++) acc[i][v] = _mm512_setzero_ps();
    for (int p = 0; p < kp / 2; p++) {
        __m512bh bp[2];
        for (int v = 0; v < nv; v++)
            bp[v] = (__m512bh)_mm512_loadu_si512(b + ((long)p * np + j0 + v * NR) * 2);
        for (int i = 0; i < mr; i++) {
            uint32_t pair;
            memcpy(&pair, a + (long)(r0 + i) * kp + 2 * p, sizeof pair);
            const __m512bh ap = (__m512bh)_mm512_set1_epi32((int)pair);
            for (int v = 0; v < nv; v++) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ap, bp[v]);
        }
    }
    const __m512 al = _mm512_set1_ps(alpha);
    for (int v = 0; v < nv; v++) {
        const int left = cols - v * NR;
        const __mmask16 k = left >= NR ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        for (int i = 0; i < mr; i++) {
            float *c = C + (long)(r0 + i) * ldc + j0 + v * NR;
            _mm512_mask_storeu_ps(c, k, _mm512_fmadd_ps(al, acc[i][v], _mm512_maskz_loadu_ps(k, c)));
        }
    }
}

/* The same packing compiled for AVX-512: the roundings 16 lanes at a time (the same bits). */
TARGET_BF16 static void pack_native(uint16_t *a, uint16_t *b, const float *A, long lda, int ta,
                                    const float *B, long ldb, int tb, int m, int n, int kd, int kp, int np) {
    pack_a_body(a, A, lda, ta, m, kd, kp);
    pack_b_body(b, B, ldb, tb, n, kd, kp, np);
}

TARGET_BF16 static void product_native(float *C, long ldc, const uint16_t *a, const uint16_t *b, int m, int n,
                                       int kp, int np, float alpha) {
    const int m_full = m - m % MR;
    int j0 = 0;
    for (; n - j0 > NR; j0 += 2 * NR) { /* two vectors of columns, the second perhaps partial */
        const int cols = n - j0;
        for (int r0 = 0; r0 < m_full; r0 += MR) block(C, ldc, a, b, r0, MR, j0, 2, cols, kp, np, alpha);
        for (int r0 = m_full; r0 < m; r0++) block(C, ldc, a, b, r0, 1, j0, 2, cols, kp, np, alpha);
    }
    if (j0 < n) { /* one vector, perhaps partial */
        const int cols = n - j0;
        for (int r0 = 0; r0 < m_full; r0 += MR) block(C, ldc, a, b, r0, MR, j0, 1, cols, kp, np, alpha);
        for (int r0 = m_full; r0 < m; r0++) block(C, ldc, a, b, r0, 1, j0, 1, cols, kp, np, alpha);
    }
}

int pelab_tile_bf16_native(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
}
#else
int pelab_tile_bf16_native(void) { return 0; }
#endif

void pelab_tile_gemm_bf16(pelab_real *C, long ldc, const pelab_real *A, long lda, int ta,
                          const pelab_real *B, long ldb, int tb, int m, int n, int kd, pelab_real alpha,
                          uint16_t *pack) {
    if (m <= 0 || n <= 0 || kd <= 0) return;
    const int kp = round_up(kd, 2), np = round_up(n, NR);
    uint16_t *a = pack, *b = pack + (long)m * kp;
#if PELAB_SIMD_X86 && !defined(PELAB_DOUBLE)
    if (pelab_tile_bf16_native()) {
        pack_native(a, b, A, lda, ta, B, ldb, tb, m, n, kd, kp, np);
        product_native(C, ldc, a, b, m, n, kp, np, alpha);
        return;
    }
#endif
    pack_portable(a, b, A, lda, ta, B, ldb, tb, m, n, kd, kp, np);
    product_portable(C, ldc, a, b, m, n, kp, np, alpha);
}
