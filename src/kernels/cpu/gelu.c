/* GELU with the tanh approximation (Hendrycks & Gimpel 2016), as GPT-2, written through the
 * identity 0.5·(1 + tanh(u)) = sigmoid(2u):
 *   GELU(x)  = x·σ(2u),  u = √(2/π)·(x + 0.044715·x³)
 *   GELU'(x) = σ(2u) + 2x·σ(2u)·(1 − σ(2u))·u'
 * so each element costs one vectorisable exp (vmath.h) at the SIMD level chosen at run time
 * (simd.h). out may be x (in place). */
#include "core/prof.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vmath.h"
#include "kernels/cpu/layers.h"

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

static PELAB_ALWAYS_INLINE void gelu_fwd_body(pelab_real *out, const pelab_real *x, long n) {
PELAB_VMATH_SIMD
    for (long i = 0; i < n; i++) {
        const pelab_real v = x[i];
        const pelab_real u = (pelab_real)GELU_K * (v + (pelab_real)0.044715 * v * v * v);
        out[i] = v * pelab_vsigmoid(2 * u);
    }
}
PELAB_SIMD_KERNEL(gelu_fwd, (pelab_real *out, const pelab_real *x, long n), (out, x, n))

static PELAB_ALWAYS_INLINE void gelu_bwd_body(pelab_real *dx, const pelab_real *dout, const pelab_real *x, long n) {
PELAB_VMATH_SIMD
    for (long i = 0; i < n; i++) {
        const pelab_real v = x[i];
        const pelab_real u = (pelab_real)GELU_K * (v + (pelab_real)0.044715 * v * v * v);
        const pelab_real du = (pelab_real)GELU_K * (1 + (pelab_real)(3 * 0.044715) * v * v);
        const pelab_real s = pelab_vsigmoid(2 * u);
        dx[i] = dout[i] * (s + 2 * v * s * (1 - s) * du);
    }
}
PELAB_SIMD_KERNEL(gelu_bwd, (pelab_real *dx, const pelab_real *dout, const pelab_real *x, long n),
                  (dx, dout, x, n))

void pelab_gelu_forward(pelab_real *out, const pelab_real *x, long n) {
    PELAB_PROF_START();
    void (*const f)(pelab_real *, const pelab_real *, long) = pelab_simd_fn(gelu_fwd);
#pragma omp parallel
    {
        long lo, hi;
        pelab_thread_slice(n, &lo, &hi);
        f(out + lo, x + lo, hi - lo);
    }
    PELAB_PROF_STOP(PELAB_PROF_GELU_FWD, 0);
}

void pelab_gelu_backward(pelab_real *dx, const pelab_real *dout, const pelab_real *x, long n) {
    PELAB_PROF_START();
    void (*const f)(pelab_real *, const pelab_real *, const pelab_real *, long) = pelab_simd_fn(gelu_bwd);
#pragma omp parallel
    {
        long lo, hi;
        pelab_thread_slice(n, &lo, &hi);
        f(dx + lo, dout + lo, x + lo, hi - lo);
    }
    PELAB_PROF_STOP(PELAB_PROF_GELU_BWD, 0);
}
