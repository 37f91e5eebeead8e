/* AdamW (Loshchilov & Hutter 2019) exactly as torch.optim.AdamW:
 *   w ← w − lr·wd·w   (decoupled decay, where the parameter takes decay)
 *   m ← β1 m + (1 − β1) g;   v ← β2 v + (1 − β2) g²
 *   w ← w − lr/(1 − β1^t) · m / (sqrt(v)/sqrt(1 − β2^t) + ε)
 * and global-norm clipping as torch.nn.utils.clip_grad_norm_: the gradients times the clipping
 * factor, taken inside the update (g·c is the same float product either way; one pass over the
 * gradients fewer, a tenth of a bf16 step of configuration D). The update is one parallel region
 * over every parameter, each thread a fixed slice of each, at the SIMD level chosen at run time
 * (simd.h). The norm is summed in NORM_BLOCKS fixed blocks, in parallel, and the blocks' sums
 * added in order, so its bits do not depend on the thread count. */
#include <math.h>
#include "pelab/optim.h"
#include "core/prof.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

struct adamw_coef {
    pelab_real decay, b1, b2, step_size, bc2_sqrt, eps, grad_scale;
};

/* elements [0, n) of one parameter */
static PELAB_ALWAYS_INLINE void adamw_body(pelab_real *w, pelab_real *m, pelab_real *v, const pelab_real *g,
                                           long n, const struct adamw_coef *k) {
    const pelab_real decay = k->decay, b1 = k->b1, b2 = k->b2, step_size = k->step_size;
    const pelab_real bc2s = k->bc2_sqrt, eps = k->eps, c = k->grad_scale;
#pragma omp simd
    for (long j = 0; j < n; j++) {
        const pelab_real gj = g[j] * c;
        const pelab_real mj = b1 * m[j] + (1 - b1) * gj;
        const pelab_real vj = b2 * v[j] + (1 - b2) * gj * gj;
        m[j] = mj;
        v[j] = vj;
        w[j] = w[j] * decay - step_size * mj / (pelab_sqrt(vj) / bc2s + eps);
    }
}
PELAB_SIMD_KERNEL(adamw, (pelab_real *w, pelab_real *m, pelab_real *v, const pelab_real *g, long n,
                          const struct adamw_coef *k), (w, m, v, g, n, k))

void pelab_adamw_step(struct pelab_adamw *opt, struct pelab_params *p, double lr, double grad_scale) {
    PELAB_PROF_START();
    opt->step++;
    const double bc1 = 1 - pow(opt->beta1, (double)opt->step);
    const struct adamw_coef base = {
        .decay = 1, .b1 = (pelab_real)opt->beta1, .b2 = (pelab_real)opt->beta2,
        .step_size = (pelab_real)(lr / bc1), .bc2_sqrt = (pelab_real)sqrt(1 - pow(opt->beta2, (double)opt->step)),
        .eps = (pelab_real)opt->eps, .grad_scale = (pelab_real)grad_scale};
    struct adamw_coef decayed = base;
    decayed.decay = (pelab_real)(1 - lr * opt->weight_decay);
    void (*const f)(pelab_real *, pelab_real *, pelab_real *, const pelab_real *, long,
                    const struct adamw_coef *) = pelab_simd_fn(adamw);
#pragma omp parallel
    for (int i = 0; i < p->count; i++) {
        const struct pelab_param *q = &p->list[i];
        long lo, hi;
        pelab_thread_slice((long)q->size, &lo, &hi);
        const size_t o = q->offset + (size_t)lo;
        f(p->data + o, p->m + o, p->v + o, p->grad + o, hi - lo, q->decay ? &decayed : &base);
    }
    PELAB_PROF_STOP(PELAB_PROF_OPTIM, 0);
}

enum { NORM_BLOCKS = 64 }; /* the norm's fixed partial sums: enough for any thread count here */

/* out = Σ g[i]², in double */
static PELAB_ALWAYS_INLINE void sum_squares_body(double *out, const pelab_real *g, long n) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (long i = 0; i < n; i++) s += (double)g[i] * g[i];
    *out = s;
}
PELAB_SIMD_KERNEL(sum_squares, (double *out, const pelab_real *g, long n), (out, g, n))

double pelab_grad_norm(const struct pelab_params *p) {
    PELAB_PROF_START();
    double part[NORM_BLOCKS];
    const long n = (long)p->total;
    void (*const f)(double *, const pelab_real *, long) = pelab_simd_fn(sum_squares);
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (int b = 0; b < NORM_BLOCKS; b++) {
        const long lo = n * b / NORM_BLOCKS, hi = n * (b + 1) / NORM_BLOCKS;
        f(&part[b], p->grad + lo, hi - lo);
    }
    double s = 0;
    for (int b = 0; b < NORM_BLOCKS; b++) s += part[b];
    PELAB_PROF_STOP(PELAB_PROF_OPTIM, 0);
    return sqrt(s);
}

double pelab_clip_scale(double norm, double max_norm) {
    if (max_norm > 0 && isfinite(norm) && max_norm / (norm + 1e-6) < 1) return (pelab_real)(max_norm / (norm + 1e-6));
    return 1;
}
