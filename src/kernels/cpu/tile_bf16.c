/* Tile products with bf16 operands and float32 accumulation (tile_bf16.h).
 *
 * Packing. op(A) (m, kd) becomes a (mp, kp) bf16 array, kp = kd rounded up to even (a zero pads an
 * odd kd), so the pair op(A)(i, 2p), op(A)(i, 2p+1) is one 32-bit word. op(B) (kd, n) becomes
 * (kp/2, np, 2): for each pair of rows p, the columns j = 0..np−1 (np = n rounded up to 16, zeros
 * after n), each as its two elements (B(2p, j), B(2p+1, j)). One 512-bit load of B's pair row p
 * then holds 16 columns, and VDPBF16PS against a broadcast pair of A adds
 *   A(i,2p)·B(2p,j) + A(i,2p+1)·B(2p+1,j)
 * into 16 float32 sums of row i at once. The same layout is what AMX's TDPBF16PS reads: a tile of
 * A is 16 rows of 32 bf16s, a tile of B 16 pair rows of 16 columns; for AMX, kp is kd rounded up to
 * 32 and mp = m rounded up to 16, the padding zeros, so that every tile is whole (mp = m otherwise).
 *
 * AVX512-BF16: blocks of MR = 8 rows by 16 columns of C are summed in 8 registers over all of kd
 * and added to C once (alpha applied then; masked loads and stores at the right edge). AMX (where
 * the CPU has it and Linux grants the tile state): each 16×16 block of C is one tile, summed over
 * kp in steps of 32 and added to C alike. Packing is O(m·kd + kd·n) against the product's
 * O(m·n·kd); on AMX, whose products take a few hundred cycles a tile, it is most of the time.
 */
#define _DEFAULT_SOURCE /* syscall, for arch_prctl */
#include "kernels/cpu/tile_bf16.h"
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/simd.h"

enum { MR = 8, NR = 16, TM = 16, TK = 32 }; /* TM, TK: an AMX tile of A is TM rows of TK bf16s */

static int round_up(int x, int to) { return (x + to - 1) / to * to; }

size_t pelab_tile_bf16_pack_size(int max_mn, int max_k) { /* the AMX layout, the larger */
    const size_t kp = (size_t)round_up(max_k, TK), np = (size_t)round_up(max_mn, NR);
    return (size_t)round_up(max_mn, TM) * kp + kp * np;
}

static inline uint16_t bf16_of(pelab_real x) { return pelab_to_bf16((float)x); }

/* Two bf16s side by side as one 32-bit word, lo in the low half (as they lie in memory): the
 * packed arrays are written a pair at a time, so that each loop below is one vector of integer
 * roundings and no loop writes half-words. */
typedef uint32_t __attribute__((may_alias)) pair_word;
static inline uint32_t pair_of(pelab_real lo, pelab_real hi) {
    return bf16_of(lo) | (uint32_t)bf16_of(hi) << 16;
}

/* a (mp, kp) = bf16(op(A)), zeros past kd and past m. Transposed, the rows of A are read whole (two
 * at a time, for a pair) and written down a's columns, except the words of rows < m16 and pairs
 * < e16, written before (by 16×16 transposes, pack_native). */
static PELAB_ALWAYS_INLINE void pack_a_body(uint16_t *a, const pelab_real *A, long lda, int ta, int m,
                                            int mp, int kd, int kp, int m16, int e16) {
    pair_word *a2 = (pair_word *)a;
    const int kw = kp / 2, even = kd / 2, used = (kd + 1) / 2;
    if (!ta) {
        for (int i = 0; i < m; i++) {
            const pelab_real *row = A + (long)i * lda;
            for (int p = 0; p < even; p++) a2[(long)i * kw + p] = pair_of(row[2 * p], row[2 * p + 1]);
            if (used > even) a2[(long)i * kw + even] = bf16_of(row[kd - 1]);
        }
    } else {
        for (int p = 0; p < even; p++) {
            const pelab_real *lo = A + (long)(2 * p) * lda, *hi = lo + lda;
            for (int i = p < e16 ? m16 : 0; i < m; i++) a2[(long)i * kw + p] = pair_of(lo[i], hi[i]);
        }
        if (used > even)
            for (int i = 0; i < m; i++) a2[(long)i * kw + even] = bf16_of(A[(long)(kd - 1) * lda + i]);
    }
    for (int i = 0; i < mp; i++)
        for (int p = i < m ? used : 0; p < kw; p++) a2[(long)i * kw + p] = 0;
}

/* b (kp/2, np, 2) = bf16(op(B)) in pairs of rows, zeros past n and past kd. Transposed, a pair
 * is two neighbours of one row of B; the words of columns < n16 and pairs < e16 are written
 * before (pack_native). */
static PELAB_ALWAYS_INLINE void pack_b_body(uint16_t *b, const pelab_real *B, long ldb, int tb, int n,
                                            int kd, int kp, int np, int n16, int e16) {
    pair_word *b2 = (pair_word *)b;
    const int kw = kp / 2, even = kd / 2, used = (kd + 1) / 2;
    if (!tb) {
        for (int p = 0; p < even; p++) {
            const pelab_real *lo = B + (long)(2 * p) * ldb, *hi = lo + ldb;
            for (int j = 0; j < n; j++) b2[(long)p * np + j] = pair_of(lo[j], hi[j]);
        }
        if (used > even) {
            const pelab_real *lo = B + (long)(kd - 1) * ldb;
            for (int j = 0; j < n; j++) b2[(long)even * np + j] = bf16_of(lo[j]);
        }
    } else {
        for (int j = 0; j < n; j++) {
            const pelab_real *row = B + (long)j * ldb;
            for (int p = j < n16 ? e16 : 0; p < even; p++) b2[(long)p * np + j] = pair_of(row[2 * p], row[2 * p + 1]);
            if (used > even) b2[(long)even * np + j] = bf16_of(row[kd - 1]);
        }
    }
    for (int p = 0; p < kw; p++)
        for (int j = p < used ? n : 0; j < np; j++) b2[(long)p * np + j] = 0;
}

static void pack_portable(uint16_t *a, uint16_t *b, const pelab_real *A, long lda, int ta,
                          const pelab_real *B, long ldb, int tb, int m, int mp, int n, int kd, int kp, int np) {
    pack_a_body(a, A, lda, ta, m, mp, kd, kp, 0, 0);
    pack_b_body(b, B, ldb, tb, n, kd, kp, np, 0, 0);
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

/* What this CPU and OS allow (find_isa, once: the machine's), and the tests' cap on it
 * (pelab_tile_bf16_cap), which runs each level the CPU has. */
static enum pelab_tile_isa best_isa = PELAB_TILE_PLAIN;
static _Atomic int isa_cap = PELAB_TILE_AMX;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

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

/* pelab_to_bf16 of 16 floats, each in the high half of its 32-bit lane (the low half not cleared). */
TARGET_BF16 static inline __m512i round16(const float *x) {
    const __m512i u = _mm512_loadu_si512(x), one = _mm512_set1_epi32(1);
    const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                                           _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
}

/* The 16 pair words of 32 consecutive floats x[0..31]: word q = (bf16 x[2q], bf16 x[2q+1]), the
 * high halves of the 32 rounded lanes in order. */
TARGET_BF16 static inline __m512i pairs_along(const float *x) {
    const __m512i high = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33,
                                          31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_permutex2var_epi16(round16(x), high, round16(x + 16));
}

/* The 16 pair words (bf16 lo[i], bf16 hi[i]) of two rows. */
TARGET_BF16 static inline __m512i pairs_across(const float *lo, const float *hi) {
    return _mm512_or_si512(_mm512_srli_epi32(round16(lo), 16),
                           _mm512_and_si512(round16(hi), _mm512_set1_epi32((int)0xffff0000u)));
}

/* r[q] (16 words each) → r[k] = (r[0][k], r[1][k], ..., r[15][k]): pairs of rows interleaved by
 * words, then by double words (each 128-bit lane then holds 4 rows' word c, c+4, c+8 or c+12), then
 * the lanes gathered by two rounds of 128-bit shuffles. */
TARGET_BF16 static inline void transpose16(__m512i r[16]) {
    __m512i t[16], u[16]; /* u[4g + c]: rows 4g..4g+3, words c, c+4, c+8, c+12 in its four lanes */
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) {
        u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    for (int c = 0; c < 4; c++) {
        const __m512i v = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), w = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
        const __m512i x = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
        const __m512i y = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
        r[c] = _mm512_shuffle_i32x4(v, x, 0x88);
        r[c + 8] = _mm512_shuffle_i32x4(v, x, 0xdd);
        r[c + 4] = _mm512_shuffle_i32x4(w, y, 0x88);
        r[c + 12] = _mm512_shuffle_i32x4(w, y, 0xdd);
    }
}

/* The same packing compiled for AVX-512: the roundings 16 lanes at a time (the same bits), and the
 * transposed operands in blocks of 16 rows by 16 pairs, each one transpose of 16×16 words and 16
 * whole-line stores instead of 256 scattered words. */
TARGET_BF16 static void pack_native(uint16_t *a, uint16_t *b, const float *A, long lda, int ta,
                                    const float *B, long ldb, int tb, int m, int mp, int n, int kd, int kp,
                                    int np) {
    pair_word *a2 = (pair_word *)a, *b2 = (pair_word *)b;
    const int kw = kp / 2, e16 = kd / 2 / 16 * 16, m16 = ta ? m / 16 * 16 : 0, n16 = tb ? n / 16 * 16 : 0;
    __m512i r[16];
    for (int i0 = 0; i0 < m16; i0 += 16) /* a's rows i0.., pairs p0..: A's rows 2p, 2p+1 from i0 */
        for (int p0 = 0; p0 < e16; p0 += 16) {
            for (int q = 0; q < 16; q++) {
                const float *lo = A + (long)(2 * (p0 + q)) * lda + i0;
                r[q] = pairs_across(lo, lo + lda);
            }
            transpose16(r);
            for (int i = 0; i < 16; i++) _mm512_storeu_si512(a2 + (long)(i0 + i) * kw + p0, r[i]);
        }
    for (int j0 = 0; j0 < n16; j0 += 16) /* b's pairs p0.., columns j0..: B's rows j0.. from 2·p0 */
        for (int p0 = 0; p0 < e16; p0 += 16) {
            for (int q = 0; q < 16; q++) r[q] = pairs_along(B + (long)(j0 + q) * ldb + 2 * p0);
            transpose16(r);
            for (int p = 0; p < 16; p++) _mm512_storeu_si512(b2 + (long)(p0 + p) * np + j0, r[p]);
        }
    pack_a_body(a, A, lda, ta, m, mp, kd, kp, m16, e16);
    pack_b_body(b, B, ldb, tb, n, kd, kp, np, n16, e16);
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

#define TARGET_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

/* The tile configuration LDTILECFG reads (palette 1): tile t has rows[t] rows of colsb[t] bytes. */
struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* C += alpha · a · b on AMX: tile 0 the 16×16 float block of C, 1 a 16×32 block of a, 2 a block of
 * b's 16 pair rows by 16 columns. The configuration is loaded at each call: oneDNN's kernels, on
 * the same threads, load their own. */
TARGET_AMX static void product_amx(float *C, long ldc, const uint16_t *a, const uint16_t *b, int m, int n,
                                   int kp, int np, float alpha) {
    struct tile_config cfg = {.palette = 1};
    for (int t = 0; t < 3; t++) cfg.rows[t] = TM, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
    float out[TM * NR] __attribute__((aligned(64)));
    const __m512 al = _mm512_set1_ps(alpha);
    for (int r0 = 0; r0 < m; r0 += TM)
        for (int j0 = 0; j0 < n; j0 += NR) {
            _tile_zero(0);
            for (int k0 = 0; k0 < kp; k0 += TK) {
                _tile_loadd(1, a + (long)r0 * kp + k0, kp * 2);
                _tile_loadd(2, b + ((long)(k0 / 2) * np + j0) * 2, np * 4);
                _tile_dpbf16ps(0, 1, 2);
            }
            _tile_stored(0, out, NR * 4);
            const int rows = m - r0 < TM ? m - r0 : TM, cols = n - j0;
            const __mmask16 k = cols >= NR ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
            for (int i = 0; i < rows; i++) {
                float *c = C + (long)(r0 + i) * ldc + j0;
                _mm512_mask_storeu_ps(c, k, _mm512_fmadd_ps(al, _mm512_load_ps(out + i * NR),
                                                            _mm512_maskz_loadu_ps(k, c)));
            }
        }
    _tile_release();
}

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

/* AMX-TILE and AMX-BF16 (CPUID 7.0 EDX bits 24, 22), their state enabled by the OS (XCR0 bits 17
 * and 18), and Linux's permission for this process to use the tile data (arch_prctl
 * ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, which oneDNN asks for too). */
static int amx_usable(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 22) & 1) || !((d >> 24) & 1)) return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return 0; /* OSXSAVE: xgetbv works */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) return 0;
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}


/* Whether the ISA name s (as oneDNN spells them: AVX512_CORE_BF16, ...) contains word, in any case. */
static int names(const char *s, const char *word) {
    for (; *s; s++) {
        size_t i = 0;
        while (word[i] && s[i] && toupper((unsigned char)s[i]) == word[i]) i++;
        if (!word[i]) return 1;
    }
    return 0;
}

/* What the CPU and OS allow, capped by oneDNN's own setting ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA)
 * where it is given, so that one setting chooses the instructions of every bf16 product: below
 * AMX (AVX512_CORE_BF16) the tiles leave AMX alone too; below AVX512-BF16, the plain loops. */
static void find_isa(void) {
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bf16")) return;
    const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
    if (!cap) cap = getenv("DNNL_MAX_CPU_ISA");
    if (cap && !names(cap, "ALL") && !names(cap, "AMX")) {
        best_isa = names(cap, "BF16") ? PELAB_TILE_AVX512_BF16 : PELAB_TILE_PLAIN;
        return;
    }
    best_isa = amx_usable() ? PELAB_TILE_AMX : PELAB_TILE_AVX512_BF16;
}
#else
static void find_isa(void) {}
#endif

enum pelab_tile_isa pelab_tile_bf16_isa(void) {
    pthread_once(&isa_once, find_isa);
    if (sizeof(pelab_real) != sizeof(float)) return PELAB_TILE_PLAIN;
    return best_isa < (enum pelab_tile_isa)isa_cap ? best_isa : (enum pelab_tile_isa)isa_cap;
}

enum pelab_tile_isa pelab_tile_bf16_cap(enum pelab_tile_isa cap) {
    return (enum pelab_tile_isa)atomic_exchange(&isa_cap, (int)cap);
}

const char *pelab_tile_bf16_isa_name(enum pelab_tile_isa isa) {
    return isa == PELAB_TILE_AMX ? "AMX-BF16" : isa == PELAB_TILE_AVX512_BF16 ? "AVX512-BF16"
                                                                              : "plain loops (operands rounded to bf16)";
}

void pelab_tile_gemm_bf16(pelab_real *C, long ldc, const pelab_real *A, long lda, int ta,
                          const pelab_real *B, long ldb, int tb, int m, int n, int kd, pelab_real alpha,
                          uint16_t *pack) {
    if (m <= 0 || n <= 0 || kd <= 0) return;
    const enum pelab_tile_isa isa = pelab_tile_bf16_isa();
    const int amx = isa == PELAB_TILE_AMX;
    const int kp = round_up(kd, amx ? TK : 2), np = round_up(n, NR), mp = amx ? round_up(m, TM) : m;
    uint16_t *a = pack, *b = pack + (long)mp * kp;
#if PELAB_SIMD_X86 && !defined(PELAB_DOUBLE)
    if (isa != PELAB_TILE_PLAIN) {
        pack_native(a, b, A, lda, ta, B, ldb, tb, m, mp, n, kd, kp, np);
        if (amx) product_amx(C, ldc, a, b, m, n, kp, np, alpha);
        else product_native(C, ldc, a, b, m, n, kp, np, alpha);
        return;
    }
#endif
    pack_portable(a, b, A, lda, ta, B, ldb, tb, m, mp, n, kd, kp, np);
    product_portable(C, ldc, a, b, m, n, kp, np, alpha);
}
