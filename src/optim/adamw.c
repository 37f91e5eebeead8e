/* AdamW (Loshchilov & Hutter 2019) exactly as torch.optim.AdamW:
 *   w ← w − lr·wd·w   (decoupled decay, where the parameter takes decay)
 *   m ← β1 m + (1 − β1) g;   v ← β2 v + (1 − β2) g²
 *   w ← w − lr/(1 − β1^t) · m / (sqrt(v)/sqrt(1 − β2^t) + ε)
 * and global-norm clipping as torch.nn.utils.clip_grad_norm_. */
#include <math.h>
#include "pelab/optim.h"
#include "core/prof.h"

void pelab_adamw_step(struct pelab_adamw *opt, struct pelab_params *p, double lr) {
    PELAB_PROF_START();
    opt->step++;
    const double bc1 = 1 - pow(opt->beta1, (double)opt->step);
    const double bc2_sqrt = sqrt(1 - pow(opt->beta2, (double)opt->step));
    const pelab_real step_size = (pelab_real)(lr / bc1);
    const pelab_real b1 = (pelab_real)opt->beta1, b2 = (pelab_real)opt->beta2;
    const pelab_real eps = (pelab_real)opt->eps, bc2s = (pelab_real)bc2_sqrt;
    for (int i = 0; i < p->count; i++) {
        const struct pelab_param *q = &p->list[i];
        pelab_real *w = p->data + q->offset, *g = p->grad + q->offset;
        pelab_real *m = p->m + q->offset, *v = p->v + q->offset;
        const pelab_real decay = q->decay ? (pelab_real)(1 - lr * opt->weight_decay) : 1;
        const long n = (long)q->size;
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++) {
            w[j] *= decay;
            m[j] = b1 * m[j] + (1 - b1) * g[j];
            v[j] = b2 * v[j] + (1 - b2) * g[j] * g[j];
            w[j] -= step_size * m[j] / (pelab_sqrt(v[j]) / bc2s + eps);
        }
    }
    PELAB_PROF_STOP(PELAB_PROF_OPTIM, 0);
}

double pelab_grad_norm(const struct pelab_params *p) {
    double s = 0;
    for (size_t i = 0; i < p->total; i++) s += (double)p->grad[i] * p->grad[i];
    return sqrt(s);
}

double pelab_clip_grad_norm(struct pelab_params *p, double max_norm) {
    PELAB_PROF_START();
    double norm = pelab_grad_norm(p);
    if (max_norm > 0 && isfinite(norm) && max_norm / (norm + 1e-6) < 1) {
        const pelab_real c = (pelab_real)(max_norm / (norm + 1e-6));
        for (size_t i = 0; i < p->total; i++) p->grad[i] *= c;
    }
    PELAB_PROF_STOP(PELAB_PROF_OPTIM, 0);
    return norm;
}
