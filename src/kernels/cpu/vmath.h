/* Elementwise math that compilers can vectorise: no calls, no branches.
 *
 * Float build: exp by Cody–Waite range reduction and the Cephes polynomial (pelab_vexp below:
 * within 2^-23 relative on [ln FLT_MIN, 88], 0 below, e^88 above); log1p on [0, 1] by the atanh
 * series log(1 + y) = 2·atanh(y / (2 + y)), truncated where the next term is below 2e-8.
 * Double build: libm, so gradient checks and the twin comparison see exact functions.
 */
#ifndef PELAB_KERNELS_VMATH_H
#define PELAB_KERNELS_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "pelab/real.h"

#ifdef PELAB_DOUBLE

static inline double pelab_vexp(double x) { return exp(x); }
static inline double pelab_vexp_prob(double x) { return exp(x); }
static inline double pelab_vlog1p_unit(double y) { return log1p(y); }

#else

/* A float's bits and back. */
static inline uint32_t pelab_float_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}
static inline float pelab_bits_float(uint32_t b) {
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* e^x, for x in [−87.6, 88] (elsewhere not defined: pelab_vexp and pelab_vexp_prob mask it):
 *   n = round(x·log2 e): t = x·log2 e + 1.5·2^23 leaves n in t's low mantissa bits (the product
 *   rounded first: the arithmetic of this function before it handled the edges by masks);
 *   r = x − n·ln 2, |r| ≤ ln2/2 + ε: ln 2 = C1 + C2 with C1 = 0.693359375 (9 bits: n·C1 exact);
 *   e^r ≈ 1 + r + r²·P(r), P Cephes's degree-5 fit (expf.c), by Horner's rule with fused
 *   multiply-adds;
 *   e^x = 2^n·e^r, 2^n built in the exponent bits (n + 127) << 23 from t's bits (n = −127 gives
 *   the bits of 0).
 * Relative error below 0.71·2^-23 ≈ 8.4e−8 on [ln FLT_MIN, 88] (every third float there, against
 * libm's double exp; tests/test_vexp.c checks it at each vector level). The vector kernels
 * (kernels/cpu/vexp.h) compute the same operations in the same order, so every level gives the
 * same bits. */
static inline float pelab_vexp_unmasked(float x) {
    /* two statements, two roundings: no compiler fuses them, so every level rounds alike */
    const float y = x * 1.44269504088896341f;
    const float t = y + 12582912.0f;
    const float n = t - 12582912.0f;
    float r = fmaf(n, -0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r) + 1.0f;
    /* in unsigned arithmetic: a NaN or infinite x (whose result the callers mask) must not reach
     * a float-to-int conversion or a shift of a negative number, both undefined */
    return p * pelab_bits_float((pelab_float_bits(t) - 0x4B400000u + 127u) << 23);
}

/* Below this e^x is under float's normal range (ln FLT_MIN = −87.3365): pelab_vexp gives 0 there,
 * never a subnormal, whether or not the thread flushes them. */
#define PELAB_VEXP_MIN (-87.33f)
/* Above this pelab_vexp gives e^88 (the bits of pelab_vexp_unmasked(88)), never an infinity. */
#define PELAB_VEXP_MAX 88.0f
#define PELAB_VEXP_MAX_BITS 0x7EF882B7u

/* e^x: 0 for x < PELAB_VEXP_MIN (and −∞), e^88 for x > 88 (and +∞), NaN for NaN. The edges are
 * selected by integer masks, not by a conditional on floats: a compiler may not evaluate a float
 * operation that the program would not have (it could raise a flag), so a conditional clamp kept
 * the AVX2 and SSE2 loops around it scalar; masks vectorise at every level. */
static inline float pelab_vexp(float x) {
    const uint32_t under = -(uint32_t)(x < PELAB_VEXP_MIN), over = -(uint32_t)(x > PELAB_VEXP_MAX);
    const uint32_t e = pelab_float_bits(pelab_vexp_unmasked(x));
    return pelab_bits_float((e & ~(under | over)) | (PELAB_VEXP_MAX_BITS & over));
}

/* Below this an attention probability's numerator is 0 (pelab_vexp_prob). */
#define PELAB_VEXP_PROB_MIN (-69.0f)

/* An attention probability's numerator e^x, x ≤ 0 (a score less its row's maximum), with every
 * result below e^−69 ≈ 1e−30 made 0 (and e^−∞ = 0; NaN stays NaN). Beside the row's largest term,
 * 1, such a term changes no float sum; but its products (P·V, P·dP in the backward) fall below
 * float's normal range, where every multiplication takes a microcode assist on Intel CPUs: FoX,
 * whose decay passes −69 within 100 tokens at initialisation, trained 20 % slower for them. (The
 * double build keeps exp: its normal range reaches 1e−308.) x > 88 is not expected here and not
 * masked. */
static inline float pelab_vexp_prob(float x) {
    const uint32_t under = -(uint32_t)(x < PELAB_VEXP_PROB_MIN);
    return pelab_bits_float(pelab_float_bits(pelab_vexp_unmasked(x)) & ~under);
}

/* log(1 + y) for y in [0, 1]. */
static inline float pelab_vlog1p_unit(float y) {
    float z = y / (2.0f + y), z2 = z * z; /* z ≤ 1/3 */
    float s = 1.0f / 13;
    s = fmaf(s, z2, 1.0f / 11);
    s = fmaf(s, z2, 1.0f / 9);
    s = fmaf(s, z2, 1.0f / 7);
    s = fmaf(s, z2, 1.0f / 5);
    s = fmaf(s, z2, 1.0f / 3);
    s = fmaf(s, z2, 1.0f);
    return 2.0f * z * s;
}

#endif

/* `omp simd` for a loop that calls the functions here: they vectorise in the float build, but the
 * double build's libm calls do not, and a pragma the compiler cannot honour is a warning. */
#ifdef PELAB_DOUBLE
#define PELAB_VMATH_SIMD
#else
#define PELAB_VMATH_SIMD _Pragma("omp simd")
#endif

/* softplus(x) = log(1 + e^x) = max(x, 0) + log(1 + e^−|x|) */
static inline pelab_real pelab_vsoftplus(pelab_real x) {
    return (x > 0 ? x : 0) + pelab_vlog1p_unit(pelab_vexp(x > 0 ? -x : x));
}
static inline pelab_real pelab_vsigmoid(pelab_real x) { return 1 / (1 + pelab_vexp(-x)); }

/* softplus(x) and its derivative sigmoid(x) from one exponential e = e^−|x|:
 * softplus = max(x, 0) + log(1 + e);  sigmoid = 1/(1 + e) for x > 0, e/(1 + e) otherwise, as
 * r · (1 or e) with r = 1/(1 + e). In float the factor is chosen by its bits: with a select
 * between r and e·r, gcc at AVX2 and below keeps the multiply (which may trap) on its branch and
 * then vectorises no loop that calls this. */
static inline void pelab_vsoftplus_sigmoid(pelab_real x, pelab_real *sp, pelab_real *sg) {
    const pelab_real e = pelab_vexp(x > 0 ? -x : x), r = 1 / (1 + e);
    *sp = (x > 0 ? x : 0) + pelab_vlog1p_unit(e);
#ifdef PELAB_DOUBLE
    *sg = x > 0 ? r : e * r;
#else
    const uint32_t pos = -(uint32_t)(x > 0);
    *sg = r * pelab_bits_float((pelab_float_bits(e) & ~pos) | (pelab_float_bits(1.0f) & pos));
#endif
}

/* Σ a[i]·b[i], accumulated in pelab_real and vectorised (the sum's order is the compiler's, the
 * same for every call of a build). Always inlined: the attention kernels call it per score. */
static inline __attribute__((always_inline)) pelab_real pelab_vdot(const pelab_real *a, const pelab_real *b, int n) {
    pelab_real s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* max(m, x[0..n)), NaNs in x ignored: sixteen running maxima, so that the loop vectorises as an
 * elementwise maximum (compilers will not vectorise a floating-point max-reduction unless NaNs
 * are ruled out). Always inlined: the tiled attention calls it per row of a tile. */
static inline __attribute__((always_inline)) pelab_real pelab_vmax(const pelab_real *x, int n, pelab_real m) {
    enum { L = 16 };
    pelab_real part[L];
    for (int i = 0; i < L; i++) part[i] = m;
    int c = 0;
    for (; c + L <= n; c += L)
#pragma omp simd
        for (int i = 0; i < L; i++) part[i] = x[c + i] > part[i] ? x[c + i] : part[i];
    for (; c < n; c++) m = x[c] > m ? x[c] : m;
    for (int i = 0; i < L; i++) m = part[i] > m ? part[i] : m;
    return m;
}

#endif
