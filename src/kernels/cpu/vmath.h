/* Elementwise math that compilers can vectorise: no calls, no branches.
 *
 * Float build: exp by Cody–Waite range reduction (x = n·ln2 + r, |r| ≤ ln2/2) and the Cephes
 * degree-6 polynomial for e^r, then 2^n built in the exponent bits (relative error ~2e-7 on
 * [−87, 88], inputs clamped to that range); log1p on [0, 1] by the atanh series
 * log(1 + y) = 2·atanh(y / (2 + y)), truncated where the next term is below 2e-8.
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

static inline float pelab_vexp(float x) {
    /* ternaries rather than fminf/rintf: those carry NaN and rounding-mode semantics that keep
     * the compiler from using vector min/max/round; 1.5·2^23 rounds to nearest by addition */
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    float t = x * 1.44269504088896341f + 12582912.0f; /* n in the low mantissa bits */
    float n = t - 12582912.0f;
    float r = fmaf(n, -0.693359375f, x); /* ln 2 split in two so n·C1 is exact */
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r) + 1.0f;
    /* 2^n from t's bits, in unsigned arithmetic: a NaN x (whose result is NaN through p) must
     * not reach a float-to-int conversion or a shift of a negative number, both undefined. */
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    uint32_t bits = (tb - 0x4B400000u + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* An attention probability's numerator e^x, x ≤ 0 (a score less its row's maximum), with every
 * result below e^−69 ≈ 1e−30 made 0. Beside the row's largest term, 1, such a term changes no
 * float sum; but its products (P·V, P·dP in the backward) fall below float's normal range, where
 * every multiplication takes a microcode assist on Intel CPUs: FoX, whose decay passes −69
 * within 100 tokens at initialisation, trained 20 % slower for them. (The double build keeps
 * exp: its normal range reaches 1e−308.) */
static inline float pelab_vexp_prob(float x) {
    const float e = pelab_vexp(x);
    return x < -69.0f ? 0.0f : e;
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
 * softplus = max(x, 0) + log(1 + e);  sigmoid = 1/(1 + e) for x > 0, e/(1 + e) otherwise. */
static inline void pelab_vsoftplus_sigmoid(pelab_real x, pelab_real *sp, pelab_real *sg) {
    const pelab_real e = pelab_vexp(x > 0 ? -x : x), r = 1 / (1 + e);
    *sp = (x > 0 ? x : 0) + pelab_vlog1p_unit(e);
    *sg = x > 0 ? r : e * r;
}

/* Σ a[i]·b[i], accumulated in pelab_real and vectorised (the sum's order is the compiler's, the
 * same for every call of a build). Always inlined: the attention kernels call it per score. */
static inline __attribute__((always_inline)) pelab_real pelab_vdot(const pelab_real *a, const pelab_real *b, int n) {
    pelab_real s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

#endif
