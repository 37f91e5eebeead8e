/* The attention-similarity divergence (src/eval/attn_similarity.c) against the entropy form of
 * the Jensen–Shannon divergence, JSD(p, q) = H((p + q)/2) − (H(p) + H(q))/2: its values at equal
 * (0) and disjoint (ln 2) distributions and one worked by hand, and a layer's head-pair means over
 * random causal attention rows with rows of different real lengths. */
#include <math.h>
#include <stdlib.h>
#include "lib/check.h"
#include "pelab/attn_similarity.h"
#include "pelab/rng.h"

/* Entropy in nats of the n probabilities p. */
static double entropy(const double *p, int n) {
    double h = 0;
    for (int i = 0; i < n; i++) h -= p[i] > 0 ? p[i] * log(p[i]) : 0;
    return h;
}

static double jsd_entropy(const pelab_real *p, const pelab_real *q, int n) {
    double a[64], b[64], m[64];
    for (int i = 0; i < n; i++) a[i] = p[i], b[i] = q[i], m[i] = 0.5 * (a[i] + b[i]);
    return entropy(m, n) - 0.5 * (entropy(a, n) + entropy(b, n));
}

/* A random causal attention tensor (B,H,T,T): row t a distribution over keys 0..t, zeros above. */
static void random_attention(pelab_real *a, int B, int H, int T, struct pelab_rng *rng) {
    for (int rh = 0; rh < B * H; rh++)
        for (int t = 0; t < T; t++) {
            pelab_real *row = a + ((long)rh * T + t) * T;
            double s = 0;
            for (int k = 0; k < T; k++) s += row[k] = k <= t ? (pelab_real)(pelab_rng_below(rng, 1000) + 1) : 0;
            for (int k = 0; k <= t; k++) row[k] = (pelab_real)(row[k] / s);
        }
}

int main(void) {
    const pelab_real p[4] = {0.5f, 0.5f, 0, 0}, q[4] = {1, 0, 0, 0}, r[4] = {0, 0, 0.25f, 0.75f};
    CHECK(pelab_jsd(p, p, 4) == 0, "JSD(p, p) = %g", pelab_jsd(p, p, 4));
    CHECK_CLOSE(pelab_jsd(p, r, 4), log(2.0), 1e-7, 0, "disjoint supports: ln 2");
    /* by hand: m = (3/4, 1/4); ½[½ ln(2/3) + ½ ln 2] + ½ ln(4/3) */
    CHECK_CLOSE(pelab_jsd(p, q, 4), 0.5 * (0.5 * log(2.0 / 3) + 0.5 * log(2.0)) + 0.5 * log(4.0 / 3), 1e-7, 0, "worked example");
    CHECK_CLOSE(pelab_jsd(p, q, 4), pelab_jsd(q, p, 4), 0, 0, "symmetric");

    enum { B = 3, Ha = 2, Hb = 3, T = 7 };
    static pelab_real a[B * Ha * T * T], b[B * Hb * T * T];
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 5);
    random_attention(a, B, Ha, T, &rng);
    random_attention(b, B, Hb, T, &rng);
    const int len[B] = {7, 3, 5};
    double out[Ha * Hb];
    pelab_attn_head_divergence(a, Ha, b, Hb, B, T, len, out);
    for (int i = 0; i < Ha; i++)
        for (int j = 0; j < Hb; j++) {
            double s = 0;
            int rows = 0;
            for (int r0 = 0; r0 < B; r0++)
                for (int t = 0; t < len[r0]; t++, rows++)
                    s += jsd_entropy(a + (((long)r0 * Ha + i) * T + t) * T, b + (((long)r0 * Hb + j) * T + t) * T, t + 1);
            CHECK_CLOSE(out[i * Hb + j], s / rows, 1e-9, 1e-6, "head pair");
            CHECK(out[i * Hb + j] > 0.01 && out[i * Hb + j] < log(2.0), "head pair %d,%d: %g", i, j, out[i * Hb + j]);
        }
    pelab_attn_head_divergence(a, Ha, a, Ha, B, T, len, out); /* a model against itself */
    CHECK(out[0] == 0 && out[3] == 0 && out[1] > 0, "against itself: %g %g %g", out[0], out[3], out[1]);
    return check_report("test_attn_similarity");
}
