/* AdamW (Loshchilov & Hutter 2019) exactly as torch.optim.AdamW:
 *   w ← w − lr·wd·w   (decoupled decay, where the parameter takes decay)
 *   m ← β1 m + (1 − β1) g;   v ← β2 v + (1 − β2) g²
 *   w ← w − lr/(1 − β1^t) · m / (sqrt(v)/sqrt(1 − β2^t) + ε)
 * and global-norm clipping as torch.nn.utils.clip_grad_norm_. The update is one parallel region
 * over every parameter, each thread a fixed slice of each, at the SIMD level chosen at run time
 * (simd.h); the norm is summed by one thread in a fixed order, so its bits do not depend on the
 * thread count. */
#include <math.h>
#include "pelab/optim.h"
#include "core/prof.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

struct adamw_coef {
    pelab_real decay, b1, b2, step_size, bc2_sqrt, eps;
};

/* elements [0, n) of one parameter */
static PELAB_ALWAYS_INLINE void adamw_body(pelab_real *w, pelab_real *m, pelab_real *v, const pelab_real *g,
                                           long n, const struct adamw_coef *k) {
    const pelab_real decay = k->decay, b1 = k->b1, b2 = k->b2, step_size = k->step_size;
    const pelab_real bc2s = k->bc2_sqrt, eps = k->eps;
#pragma omp simd
    for (long j = 0; j < n; j++) {
        const pelab_real mj = b1 * m[j] + (1 - b1) * g[j];
        const pelab_real vj = b2 * v[j] + (1 - b2) * g[j] * g[j];
        m[j] = mj;
        v[j] = vj;
        w[j] = w[j] * decay - step_size * mj / (pelab_sqrt(vj) / bc2s + eps);
    }
}
PELAB_SIMD_KERNEL(adamw, (pelab_real *w, pelab_real *m, pelab_real *v, const pelab_real *g, long n,
                          const struct adamw_coef *k), (w, m, v, g, n, k))

void pelab_adamw_step(struct pelab_adamw *opt, struct pelab_params *p, double lr) {
    PELAB_PROF_START();
    opt->step++;
    const double bc1 = 1 - pow(opt->beta1, (double)opt->step);
    const struct adamw_coef base = {
        .decay = 1, .b1 = (pelab_real)opt->beta1, .b2 = (pelab_real)opt->beta2,
        .step_size = (pelab_real)(lr / bc1), .bc2_sqrt = (pelab_real)sqrt(1 - pow(opt->beta2, (double)opt->step)),
        .eps = (pelab_real)opt->eps};
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

double pelab_grad_norm(const struct pelab_params *p) {
    double s = 0;
    const pelab_real *g = p->grad;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < p->total; i++) s += (double)g[i] * g[i];
    return sqrt(s);
}

double pelab_clip_grad_norm(struct pelab_params *p, double max_norm) {
    PELAB_PROF_START();
    double norm = pelab_grad_norm(p);
    if (max_norm > 0 && isfinite(norm) && max_norm / (norm + 1e-6) < 1) {
        const pelab_real c = (pelab_real)(max_norm / (norm + 1e-6));
        pelab_real *g = p->grad;
        const long n = (long)p->total;
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++) g[i] *= c;
    }
    PELAB_PROF_STOP(PELAB_PROF_OPTIM, 0);
    return norm;
}
