/* alibi — Attention with Linear Biases (Press et al. 2022, "Train Short, Test Long: Attention
 * with Linear Biases Enables Input Length Extrapolation").
 *
 *   bias_h(t, s) = −m_h · (t − s)
 *   H a power of 2:  m_h = 2^(−8(h+1)/H),  h = 0..H−1        (8 heads: 1/2, 1/4, …, 1/256)
 *   otherwise, c = 2^⌊log2 H⌋: the c slopes of c heads, then every other slope of the 2c-head
 *   sequence (indices 0, 2, 4, …) until there are H        (the paper's reference code)
 *
 * Site BIAS; no parameters, no options. The slopes are formed once, in double.
 */
#include <math.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"

struct alibi {
    double *slope; /* (H,) */
};

/* m_h for h < H of an H-head model, H a power of 2. */
static double pow2_slope(int h, int H) { return pow(2.0, -8.0 * (h + 1) / H); }

static int alibi_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct alibi *a = calloc(1, sizeof *a);
    if (!a) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = a;
    a->slope = malloc((size_t)pe->H * sizeof *a->slope);
    if (!a->slope) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int c = 1;
    while (2 * c <= pe->H) c *= 2;
    for (int h = 0; h < pe->H; h++)
        a->slope[h] = h < c ? pow2_slope(h, c) : pow2_slope(2 * (h - c), 2 * c);
    return PELAB_OK;
}

static void alibi_free(struct pelab_posenc *pe) {
    struct alibi *a = pe->state;
    if (!a) return;
    free(a->slope);
    free(a);
}

/* out (nq, nk) = −m_h (t − s); the difference is formed in double so large positions stay exact. */
static void alibi_bias_tile(struct pelab_posenc *pe, int layer, int h, pelab_real *out,
                            const int32_t *pos_q, int nq, const int32_t *pos_k, int nk) {
    const double m = ((const struct alibi *)pe->state)->slope[h];
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < nk; j++)
            out[(long)i * nk + j] = (pelab_real)(-m * ((double)pos_q[i] - (double)pos_k[j]));
}

const struct pelab_posenc_ops pelab_pe_alibi = {
    .name = "alibi",
    .display = "ALiBi",
    .summary = "linear bias -m_h (t-s), geometric slopes per head (Press et al. 2022)",
    .sites = PELAB_SITE_BIAS,
    .contract = {PELAB_PE_RELATIVE, {NULL}},
    .init = alibi_init,
    .free = alibi_free,
    .bias_tile = alibi_bias_tile,
};
