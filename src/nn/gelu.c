/* GELU with the tanh approximation (Hendrycks & Gimpel 2016), as GPT-2. */
#include <math.h>
#include "nn/layers.h"

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

void pelab_gelu_forward(pelab_real *out, const pelab_real *x, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        pelab_real v = x[i];
        pelab_real u = (pelab_real)GELU_K * (v + (pelab_real)0.044715 * v * v * v);
        out[i] = (pelab_real)0.5 * v * (1 + pelab_tanh(u));
    }
}

void pelab_gelu_backward(pelab_real *dx, const pelab_real *dout, const pelab_real *x, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        pelab_real v = x[i];
        pelab_real u = (pelab_real)GELU_K * (v + (pelab_real)0.044715 * v * v * v);
        pelab_real th = pelab_tanh(u);
        pelab_real du = (pelab_real)GELU_K * (1 + (pelab_real)(3 * 0.044715) * v * v);
        dx[i] = dout[i] * ((pelab_real)0.5 * (1 + th) + (pelab_real)0.5 * v * (1 - th * th) * du);
    }
}
