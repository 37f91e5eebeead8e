/* The lanes of a vector level for the tiled attention's kernels that are written once for AVX-512
 * and AVX2 (tile_transpose.h, tile_rows.h): a row's first lanes as a mask, masked loads and
 * stores, a vector's lanes summed as a tree. Float build on x86-64 only (PELAB_VEXP_VECTORS,
 * kernels/cpu/vexp.h); each function carries its level's target attribute and is called only
 * from that level's variant of the kernel. */
#ifndef PELAB_ATTN_TILE_LANES_H
#define PELAB_ATTN_TILE_LANES_H

#include "kernels/cpu/simd.h"
#include "kernels/cpu/vexp.h"

#ifdef PELAB_VEXP_VECTORS
/* Vector lanes: the first n of 16 (n ≥ 16: all; n ≤ 0: none) as an AVX-512 mask, the first n of 8
 * as AVX2's all-ones lanes. */
static inline __mmask16 lanes16(int n) { return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

PELAB_TARGET_AVX2 static inline __m256i lanes8(int n) {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n < 0 ? 0 : n > 8 ? 8 : n), index);
}

/* What the kernels written once for both levels (the transposes, the rows') need of a level beyond
 * the intrinsics they share but for the prefix (_mm512_add_ps, _mm256_add_ps, ...), for W = 16
 * (AVX-512) and W = 8 (AVX2):
 *   load_z<W>(in, p)        p's lanes in `in` (lanes<W>), zeros elsewhere
 *   load_or<W>(in, p, v)    p's lanes in `in`, v's elsewhere
 *   store_m<W>(in, p, v)    v's lanes in `in` to p, nothing else written
 *   zero_out<W>(in, v)      v's lanes in `in`, zeros elsewhere
 *   sum<W>(v), max<W>(v)    v's lanes summed (maximum) as a tree */
PELAB_TARGET_AVX512 static inline __m512 load_z16(__mmask16 in, const float *p) { return _mm512_maskz_loadu_ps(in, p); }
PELAB_TARGET_AVX512 static inline __m512 load_or16(__mmask16 in, const float *p, __m512 v) {
    return _mm512_mask_loadu_ps(v, in, p);
}
PELAB_TARGET_AVX512 static inline void store_m16(__mmask16 in, float *p, __m512 v) { _mm512_mask_storeu_ps(p, in, v); }
PELAB_TARGET_AVX512 static inline __m512 zero_out16(__mmask16 in, __m512 v) { return _mm512_maskz_mov_ps(in, v); }
PELAB_TARGET_AVX512 static inline float sum16(__m512 v) { return _mm512_reduce_add_ps(v); }
PELAB_TARGET_AVX512 static inline float max16(__m512 v) { return _mm512_reduce_max_ps(v); }

PELAB_TARGET_AVX2 static inline __m256 load_z8(__m256i in, const float *p) { return _mm256_maskload_ps(p, in); }
PELAB_TARGET_AVX2 static inline __m256 load_or8(__m256i in, const float *p, __m256 v) {
    return _mm256_blendv_ps(v, _mm256_maskload_ps(p, in), _mm256_castsi256_ps(in));
}
PELAB_TARGET_AVX2 static inline void store_m8(__m256i in, float *p, __m256 v) { _mm256_maskstore_ps(p, in, v); }
PELAB_TARGET_AVX2 static inline __m256 zero_out8(__m256i in, __m256 v) { return _mm256_and_ps(_mm256_castsi256_ps(in), v); }
PELAB_TARGET_AVX2 static inline float sum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
PELAB_TARGET_AVX2 static inline float max8(__m256 v) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
#endif

#endif
