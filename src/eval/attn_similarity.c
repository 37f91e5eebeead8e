/* Attention similarity between two models (pelab/attn_similarity.h). The NoPE paper's code
 * (McGill-NLP/length-generalization, src/analyzers/attention_kl_analyzer.py) computes
 * ½ [KL(m ‖ p) + KL(m ‖ q)] instead, which is not bounded by ln 2; this is the textbook
 * divergence, symmetric and bounded. */
#include <math.h>
#include "pelab/attn_similarity.h"

/* p · ln(p / m), 0 when p is 0 (m > 0 wherever p is) */
static double term(double p, double m) { return p > 0 ? p * log(p / m) : 0; }

double pelab_jsd(const pelab_real *p, const pelab_real *q, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) {
        const double m = 0.5 * ((double)p[i] + (double)q[i]);
        s += term(p[i], m) + term(q[i], m);
    }
    return s > 0 ? 0.5 * s : 0; /* rounding can leave a tiny negative sum for equal p and q */
}

void pelab_attn_head_divergence(const pelab_real *a, int Ha, const pelab_real *b, int Hb, int B, int T,
                                const int *len, double *out) {
    long rows = 0;
    for (int r = 0; r < B; r++) rows += len[r];
    for (int i = 0; i < Ha; i++)
        for (int j = 0; j < Hb; j++) {
            double s = 0;
            for (int r = 0; r < B; r++) {
                const pelab_real *pa = a + ((long)r * Ha + i) * T * T, *pb = b + ((long)r * Hb + j) * T * T;
                for (int t = 0; t < len[r]; t++) s += pelab_jsd(pa + (long)t * T, pb + (long)t * T, t + 1);
            }
            out[i * Hb + j] = rows ? s / (double)rows : 0;
        }
}
