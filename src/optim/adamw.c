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

enum { SUM_BLOCKS = 64 }; /* fixed partial sums, so a sum's bits do not depend on the thread count */

/* out = Σ g[i]², in double */
static PELAB_ALWAYS_INLINE void sum_squares_body(double *out, const pelab_real *g, long n) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (long i = 0; i < n; i++) s += (double)g[i] * g[i];
    *out = s;
}
PELAB_SIMD_KERNEL(sum_squares, (double *out, const pelab_real *g, long n), (out, g, n))

/* out = Σ (x[i] − x[i]): 0 when every x[i] is finite, NaN when one is ±∞ or NaN */
static PELAB_ALWAYS_INLINE void sum_zeros_body(double *out, const pelab_real *x, long n) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (long i = 0; i < n; i++) s += (double)(x[i] - x[i]);
    *out = s;
}
PELAB_SIMD_KERNEL(sum_zeros, (double *out, const pelab_real *x, long n), (out, x, n))

/* Σ over SUM_BLOCKS blocks of x (n,) of f's sums, the blocks split among the threads and added in
 * block order. */
static double blocked_sum(void (*f)(double *, const pelab_real *, long), const pelab_real *x, long n) {
    double part[SUM_BLOCKS];
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
    for (int b = 0; b < SUM_BLOCKS; b++) {
        const long lo = n * b / SUM_BLOCKS, hi = n * (b + 1) / SUM_BLOCKS;
        f(&part[b], x + lo, hi - lo);
    }
    double s = 0;
    for (int b = 0; b < SUM_BLOCKS; b++) s += part[b];
    return s;
}

double pelab_grad_norm(const struct pelab_params *p) {
    PELAB_PROF_START();
    const double s = blocked_sum(pelab_simd_fn(sum_squares), p->grad, (long)p->total);
    PELAB_PROF_STOP(PELAB_PROF_OPTIM, 0);
    return sqrt(s);
}

int pelab_all_finite(const pelab_real *x, long n) {
    return blocked_sum(pelab_simd_fn(sum_zeros), x, n) == 0;
}

double pelab_clip_scale(double norm, double max_norm) {
    if (max_norm > 0 && isfinite(norm) && max_norm / (norm + 1e-6) < 1) return (pelab_real)(max_norm / (norm + 1e-6));
    return 1;
}
