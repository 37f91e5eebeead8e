/* sinusoidal2d — the fixed sinusoidal embedding of a (row, column) position, the 2-D form of
 * Vaswani et al. 2017 used by ViT/MAE-style models: half of the channels carry the row, half the
 * column. With h = D/2 and ω_i = base^(−2i/h):
 *
 *   P[(r, c), 2i]         = sin(r · ω_i),   P[(r, c), 2i + 1]     = cos(r · ω_i)     2i + 1 < h
 *   P[(r, c), h + 2i]     = sin(c · ω_i),   P[(r, c), h + 2i + 1] = cos(c · ω_i)
 *
 * (each half is the 1-D embedding of width h; an odd h ends with a sin column). Needs D even.
 * Site EMBED; no parameters. Angles in double.
 */
#include <math.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"

static const struct pelab_optdef sinusoidal2d_options[] = {
    {"sin2d-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL,
     "base of the frequencies base^(−2i/(D/2)), per axis"},
    {0},
};

struct sinusoidal2d {
    double *freq; /* ((h+1)/2,) ω_i */
};

static int sinusoidal2d_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    (void)params;
    if (pe->D % 2)
        return pelab_fail(PELAB_ERR_USAGE, "--pe sinusoidal2d needs an even --d-model (got %d)", pe->D);
    struct sinusoidal2d *s = calloc(1, sizeof *s);
    if (!s) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = s;
    const int h = pe->D / 2, n = (h + 1) / 2;
    const double base = pelab_opt_real(opts, sinusoidal2d_options, "sin2d-base");
    s->freq = malloc((size_t)n * sizeof *s->freq);
    if (!s->freq) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int i = 0; i < n; i++) s->freq[i] = pow(base, -2.0 * i / h);
    return PELAB_OK;
}

static void sinusoidal2d_free(struct pelab_posenc *pe) {
    struct sinusoidal2d *s = pe->state;
    if (!s) return;
    free(s->freq);
    free(s);
}

/* out (B,T,D) += P[pos], pos (B,T,2). */
static void sinusoidal2d_embed_forward(struct pelab_posenc *pe, pelab_real *out, const int32_t *pos,
                                       int B, int T) {
    const struct sinusoidal2d *s = pe->state;
    const int D = pe->D, h = D / 2;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)B * T; i++)
        for (int axis = 0; axis < 2; axis++) {
            pelab_real *o = out + i * D + axis * h;
            for (int j = 0; 2 * j < h; j++) {
                const double a = (double)pos[2 * i + axis] * s->freq[j];
                o[2 * j] += (pelab_real)sin(a);
                if (2 * j + 1 < h) o[2 * j + 1] += (pelab_real)cos(a);
            }
        }
}

const struct pelab_posenc_ops pelab_pe_sinusoidal2d = {
    .name = "sinusoidal2d",
    .summary = "fixed sin/cos embedding of (row, column): half the channels the row's, half the "
               "column's (2-D form of Vaswani et al. 2017)",
    .sites = PELAB_SITE_EMBED,
    .dims = 1u << 2,
    .contract = {PELAB_PE_BIDIRECTIONAL, {NULL}},
    .options = sinusoidal2d_options,
    .init = sinusoidal2d_init,
    .free = sinusoidal2d_free,
    .embed_forward = sinusoidal2d_embed_forward,
};
