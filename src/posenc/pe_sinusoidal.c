/* sinusoidal — the fixed absolute position embedding of Vaswani et al. 2017 ("Attention Is All
 * You Need", §3.5), added to the token embedding:
 *
 *   P[p, 2i] = sin(p · base^(−2i/D)),   P[p, 2i+1] = cos(p · base^(−2i/D)),   base 10000
 *
 * over the model width D (an odd D ends with a sin column). Angles are formed in double so that
 * large positions keep their precision. Site EMBED; no parameters, so nothing to backpropagate.
 */
#include <math.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"

static const struct pelab_optdef sinusoidal_options[] = {
    {"sin-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL,
     "base of the frequencies base^(−2i/D)"},
    {0},
};

struct sinusoidal {
    double *freq; /* ((D+1)/2,) base^(−2i/D) */
};

static int sinusoidal_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct sinusoidal *s = calloc(1, sizeof *s);
    if (!s) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = s;
    const int n = (pe->D + 1) / 2;
    double base = pelab_opt_real(opts, sinusoidal_options, "sin-base");
    s->freq = malloc((size_t)n * sizeof *s->freq);
    if (!s->freq) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int i = 0; i < n; i++) s->freq[i] = pow(base, -2.0 * i / pe->D);
    return PELAB_OK;
}

static void sinusoidal_free(struct pelab_posenc *pe) {
    struct sinusoidal *s = pe->state;
    if (!s) return;
    free(s->freq);
    free(s);
}

static void sinusoidal_embed_forward(struct pelab_posenc *pe, pelab_real *out, const int32_t *pos,
                                     int B, int T) {
    const struct sinusoidal *s = pe->state;
    const int D = pe->D;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)B * T; i++) {
        pelab_real *o = out + i * D;
        for (int j = 0; 2 * j < D; j++) {
            double a = (double)pos[i] * s->freq[j];
            o[2 * j] += (pelab_real)sin(a);
            if (2 * j + 1 < D) o[2 * j + 1] += (pelab_real)cos(a);
        }
    }
}

const struct pelab_posenc_ops pelab_pe_sinusoidal = {
    .name = "sinusoidal",
    .summary = "fixed sin/cos absolute embedding added to the tokens (Vaswani et al. 2017)",
    .sites = PELAB_SITE_EMBED,
    .contract = {PELAB_PE_BIDIRECTIONAL, {NULL}},
    .options = sinusoidal_options,
    .init = sinusoidal_init,
    .free = sinusoidal_free,
    .embed_forward = sinusoidal_embed_forward,
};
