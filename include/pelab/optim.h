/* pelab/optim.h — AdamW, the learning-rate schedule, global-norm clipping.
 *
 * AdamW as PyTorch's torch.optim.AdamW (decoupled decay applied first, bias-corrected moments);
 * the schedule as nanoGPT: linear warm-up, cosine decay to a minimum, then constant.
 */
#ifndef PELAB_OPTIM_H
#define PELAB_OPTIM_H

#include <stdint.h>
#include "pelab/params.h"

struct pelab_adamw {
    double beta1, beta2, eps, weight_decay;
    int64_t step; /* updates done so far */
};

/* One update of every parameter with learning rate lr, from the gradients times grad_scale
 * (pelab_clip_scale's factor; 1 for the gradients as they are); decay only where param.decay is
 * set. */
void pelab_adamw_step(struct pelab_adamw *opt, struct pelab_params *p, double lr, double grad_scale);

struct pelab_schedule {
    double lr, min_lr;
    int64_t warmup, decay_steps; /* decay ends at decay_steps; min_lr after */
};

/* Learning rate for update number `step` (0-based). */
double pelab_schedule_lr(const struct pelab_schedule *s, int64_t step);

/* Global L2 norm of all gradients (in double). */
double pelab_grad_norm(const struct pelab_params *p);
/* Whether every x[i] (n,) is finite: one vector pass split among the threads as the norm's is
 * (training checks the weights and AdamW moments with it after each update). */
int pelab_all_finite(const pelab_real *x, long n);
/* The factor torch's clip_grad_norm_ scales the gradients by: max_norm / (norm + 1e-6) (rounded
 * to pelab_real) when that is below 1, else 1; max_norm <= 0 disables clipping. Clipping is
 *   pelab_adamw_step(opt, p, lr, pelab_clip_scale(pelab_grad_norm(p), max_norm)). */
double pelab_clip_scale(double norm, double max_norm);

#endif
