/* Learning rate: linear warm-up, cosine decay to min_lr at decay_steps, then min_lr (nanoGPT). */
#include <math.h>
#include "pelab/optim.h"

#define PELAB_PI 3.14159265358979323846

double pelab_schedule_lr(const struct pelab_schedule *s, int64_t step) {
    if (step < s->warmup) return s->lr * (double)(step + 1) / (double)s->warmup;
    if (step >= s->decay_steps) return s->min_lr;
    double progress = (double)(step - s->warmup) / (double)(s->decay_steps - s->warmup);
    return s->min_lr + 0.5 * (1 + cos(PELAB_PI * progress)) * (s->lr - s->min_lr);
}
