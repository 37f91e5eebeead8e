/* Inverted dropout whose mask is a pure function of (key, site, index): the backward pass
 * recomputes it, nothing is stored, and threads share no generator. The index is the element's
 * place in the whole batch (first + i), so a share of the rows draws what the batch draws there. */
#include "pelab/rng.h"
#include "kernels/cpu/layers.h"

pelab_real pelab_dropout_scale(double p, uint64_t key, uint64_t site, uint64_t i) {
    return pelab_hash_uniform(key ^ pelab_hash64(site), i) < p ? 0 : (pelab_real)(1.0 / (1.0 - p));
}

void pelab_dropout(pelab_real *x, long n, double p, uint64_t key, uint64_t site, uint64_t first) {
    if (p <= 0) return;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) x[i] *= pelab_dropout_scale(p, key, site, first + (uint64_t)i);
}
