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

/* a (m, kp) = bf16(op(A)), kd's odd column padded with zero. */
static void pack_a(uint16_t *a, const pelab_real *A, long lda, int ta, int m, int kd, int kp) {
    for (int i = 0; i < m; i++) {
        uint16_t *row = a + (long)i * kp;
        if (ta)
            for (int x = 0; x < kd; x++) row[x] = bf16_of(A[(long)x * lda + i]);
        else
            for (int x = 0; x < kd; x++) row[x] = bf16_of(A[(long)i * lda + x]);
        if (kp > kd) row[kd] = 0;
    }
}

/* b (kp/2, np, 2) = bf16(op(B)) in pairs of rows, zeros past n and past kd. */
static void pack_b(uint16_t *b, const pelab_real *B, long ldb, int tb, int n, int kd, int kp, int np) {
    for (int x = 0; x < kp; x++) {
        uint16_t *pair = b + (long)(x / 2) * np * 2 + (x & 1);
        if (x >= kd) {
            for (int j = 0; j < np; j++) pair[2 * j] = 0;
            continue;
        }
        if (tb)
            for (int j = 0; j < n; j++) pair[2 * j] = bf16_of(B[(long)j * ldb + x]);
        else
            for (int j = 0; j < n; j++) pair[2 * j] = bf16_of(B[(long)x * ldb + j]);
        for (int j = n; j < np; j++) pair[2 * j] = 0;
    }
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

/* Rows r0 .. r0+mr−1 (mr ≤ MR, a constant where inlined), columns j0 .. j0+15 (the first `cols`
 * of them stored). */
TARGET_BF16 static inline __attribute__((always_inline)) void block(
    float *C, long ldc, const uint16_t *a, const uint16_t *b, int r0, int mr, int j0, int cols, int kp,
    int np, float alpha) {
    __m512 acc[MR];
    for (int i = 0; i < mr; i++) acc[i] = _mm512_setzero_ps();
    for (int p = 0; p < kp / 2; p++) {
        const __m512bh bp = (__m512bh)_mm512_loadu_si512(b + ((long)p * np + j0) * 2);
        for (int i = 0; i < mr; i++) {
            uint32_t pair;
            memcpy(&pair, a + (long)(r0 + i) * kp + 2 * p, sizeof pair);
            acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)_mm512_set1_epi32((int)pair), bp);
        }
    }
    const __mmask16 k = cols >= NR ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
    const __m512 al = _mm512_set1_ps(alpha);
    for (int i = 0; i < mr; i++) {
        float *c = C + (long)(r0 + i) * ldc + j0;
        _mm512_mask_storeu_ps(c, k, _mm512_fmadd_ps(al, acc[i], _mm512_maskz_loadu_ps(k, c)));
    }
}

TARGET_BF16 static void product_native(float *C, long ldc, const uint16_t *a, const uint16_t *b, int m, int n,
                                       int kp, int np, float alpha) {
    const int m_full = m - m % MR;
    for (int j0 = 0; j0 < n; j0 += NR) {
        const int cols = n - j0;
        for (int r0 = 0; r0 < m_full; r0 += MR) block(C, ldc, a, b, r0, MR, j0, cols, kp, np, alpha);
        for (int r0 = m_full; r0 < m; r0++) block(C, ldc, a, b, r0, 1, j0, cols, kp, np, alpha);
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
    pack_a(a, A, lda, ta, m, kd, kp);
    pack_b(b, B, ldb, tb, n, kd, kp, np);
#if PELAB_SIMD_X86 && !defined(PELAB_DOUBLE)
    if (pelab_tile_bf16_native()) {
        product_native(C, ldc, a, b, m, n, kp, np, alpha);
        return;
    }
#endif
    product_portable(C, ldc, a, b, m, n, kp, np, alpha);
}
