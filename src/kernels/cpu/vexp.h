/* vmath.h's exponential on whole vectors, for the loops that the compiler does not vectorise well
 * by itself (a row's softmax with its sum, masked at the row's end): 16 floats at a time with
 * AVX-512, 8 with AVX2. Each computes pelab_vexp_unmasked's operations in the same order, so
 * every level gives the same bits; with AVX-512, 2^n·p is one VSCALEFPS (exact, as the product
 * with 2^n's bits is, for every result these functions are used for: normal floats).
 *
 *   pelab_vexp16_unmasked(x)    e^x, x in [−87.6, 88] (elsewhere not defined, as the scalar one)
 *   pelab_vexp16_prob(x)        pelab_vexp_prob: 0 below −69 and for −∞, NaN for NaN
 *   pelab_vexp8_unmasked(x), pelab_vexp8_prob(x)   the same with AVX2
 *
 * Float build on x86-64 only (PELAB_VEXP_VECTORS): the double build's exp is libm's. Called from
 * functions compiled for that level (kernels/cpu/simd.h). */
#ifndef PELAB_KERNELS_VEXP_H
#define PELAB_KERNELS_VEXP_H

#include "kernels/cpu/simd.h"
#include "kernels/cpu/vmath.h"

#if defined(PELAB_SIMD_X86) && !defined(PELAB_DOUBLE)
#define PELAB_VEXP_VECTORS 1
#include <immintrin.h>

/* pelab_vexp_unmasked's reduction and polynomial on a vector (intrinsics of prefix P on vectors V):
 * declares t (x·log2 e + 1.5·2^23, n in its low bits), n and p, with e^x = 2^n·p. */
#define PELAB_VEXP_POLYNOMIAL(P, V, x)                                                            \
    const V shift = P##_set1_ps(12582912.0f);                                                     \
    const V t = P##_add_ps(P##_mul_ps(x, P##_set1_ps(1.44269504088896341f)), shift);            \
    const V n = P##_sub_ps(t, shift);                                                             \
    V r = P##_fmadd_ps(n, P##_set1_ps(-0.693359375f), x);                                        \
    r = P##_fmadd_ps(n, P##_set1_ps(2.12194440e-4f), r);                                         \
    V p = P##_set1_ps(1.9875691500e-4f);                                                          \
    p = P##_fmadd_ps(p, r, P##_set1_ps(1.3981999507e-3f));                                       \
    p = P##_fmadd_ps(p, r, P##_set1_ps(8.3334519073e-3f));                                       \
    p = P##_fmadd_ps(p, r, P##_set1_ps(4.1665795894e-2f));                                       \
    p = P##_fmadd_ps(p, r, P##_set1_ps(1.6666665459e-1f));                                       \
    p = P##_fmadd_ps(p, r, P##_set1_ps(5.0000001201e-1f));                                       \
    p = P##_add_ps(P##_fmadd_ps(p, P##_mul_ps(r, r), r), P##_set1_ps(1.0f))

PELAB_TARGET_AVX512 static inline __m512 pelab_vexp16_unmasked(__m512 x) {
    PELAB_VEXP_POLYNOMIAL(_mm512, __m512, x);
    (void)t;
    return _mm512_scalef_ps(p, n);
}

PELAB_TARGET_AVX512 static inline __m512 pelab_vexp16_prob(__m512 x) {
    /* kept where not x < −69: NaN too */
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(PELAB_VEXP_PROB_MIN), _CMP_NLT_UQ);
    return _mm512_maskz_mov_ps(keep, pelab_vexp16_unmasked(x));
}

PELAB_TARGET_AVX2 static inline __m256 pelab_vexp8_unmasked(__m256 x) {
    PELAB_VEXP_POLYNOMIAL(_mm256, __m256, x);
    (void)n;
    /* 2^n: (n + 127) << 23 from t's bits, in 32-bit integer lanes (wrapping, as the scalar one) */
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(127 - 0x4B400000)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

PELAB_TARGET_AVX2 static inline __m256 pelab_vexp8_prob(__m256 x) {
    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(PELAB_VEXP_PROB_MIN), _CMP_NLT_UQ);
    return _mm256_and_ps(keep, pelab_vexp8_unmasked(x));
}

#endif

#endif
