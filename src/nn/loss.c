/* Softmax cross-entropy over the vocabulary, on the positions that carry a target. */
#include <math.h>
#include <string.h>
#include "core/prof.h"
#include "nn/layers.h"

int pelab_crossentropy_forward(pelab_real *probs, pelab_real *losses, double *sum,
                               const pelab_real *logits, const int32_t *targets, int N, int V) {
    PELAB_PROF_START();
    int count = 0;
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : count)
    for (int i = 0; i < N; i++) {
        const pelab_real *z = logits + (long)i * V;
        pelab_real *p = probs + (long)i * V;
        pelab_real mx = z[0];
        for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        double s = 0;
        for (int v = 0; v < V; v++) {
            p[v] = pelab_exp(z[v] - mx);
            s += p[v];
        }
        pelab_real inv = (pelab_real)(1.0 / s);
        for (int v = 0; v < V; v++) p[v] *= inv;
        if (targets && targets[i] >= 0) {
            /* −log softmax computed from the logits, not from p, so tiny probabilities keep
             * their precision. */
            losses[i] = (pelab_real)(log(s) - (z[targets[i]] - mx));
            count++;
        } else {
            losses[i] = 0;
        }
    }
    for (int i = 0; i < N; i++) total += losses[i]; /* fixed order: same bits for any threads */
    *sum = total;
    PELAB_PROF_STOP(PELAB_PROF_LOSS_FWD, 0);
    return count;
}

void pelab_crossentropy_backward(pelab_real *dlogits, const pelab_real *probs,
                                 const int32_t *targets, pelab_real scale, int N, int V) {
    PELAB_PROF_START();
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        pelab_real *d = dlogits + (long)i * V;
        const pelab_real *p = probs + (long)i * V;
        if (targets[i] < 0) {
            memset(d, 0, (size_t)V * sizeof *d);
            continue;
        }
        for (int v = 0; v < V; v++) d[v] = scale * p[v];
        d[targets[i]] -= scale;
    }
    PELAB_PROF_STOP(PELAB_PROF_LOSS_BWD, 0);
}
