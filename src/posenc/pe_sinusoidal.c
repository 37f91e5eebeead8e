/* sinusoidal — the fixed absolute position embedding of Vaswani et al. 2017 ("Attention Is All
 * You Need", §3.5), added to the token embedding in the proportion the paper adds it:
 *
 *   h0 = E[tok] + σ·P[p],   σ = --sin-scale, default 0.02
 *   P[p, 2i] = sin(p · base^(−2i/D)),   P[p, 2i+1] = cos(p · base^(−2i/D)),   base 10000
 *
 * over the model width D (an odd D ends with a sin column). Angles are formed in double so that
 * large positions keep their precision. Site EMBED; no parameters, so nothing to backpropagate.
 *
 * Why σ. P's entries have root mean square 1/√2, whatever the training. The paper adds P to
 * token embeddings of unit size: its embeddings start at N(0, 1/D) (tensor2tensor's
 * layers/modalities.py, get_weights) and are multiplied by √D in the embedding layers (§3.4,
 * "we multiply those weights by √d_model"; modalities.py's multiply_embedding_mode "sqrt_depth"),
 * so a token's entries have rms 1 against P's 0.71. pelab's tied token embedding starts at
 * N(0, 0.02), GPT-2's: P unscaled is 35 times the token (every D), and √D alone still leaves it
 * 4.4 times the token at D 64. The paper's proportion is E/σ + P with σ = 0.02, the
 * embedding's init std (√D is 1/σ for the paper's init); σ times that is E + σ·P, which keeps the
 * residual stream at the scale GPT-2's pre-norm model starts it (the learned table's init too).
 * The two forms give the first block the same input (its RMSNorm ignores a common factor) but
 * not the same model: in a pre-norm Transformer the residual stream is never normalised, and
 * each block must write over h0 in it; at 50 times the size, they do not. Measured on copy at the
 * cpu preset (D 64, 3 layers, lr 3e-3), exact match on the trained sizes, one seed: after 600
 * updates E + P 0.3 %, E + P/√D 0.3 %, E/σ + P 0.5 %, E + σ·P 92.1 % (NoPE 74.0 %); after all
 * 2000, √D·E + P 0.4 %, E + P/√D 2.8 %, E + σ·P 100.0 % (docs/POSENC.md). The tied output layer
 * reads E as it is, as the paper's pre-softmax projection reads its weights without the √D:
 * scaling P leaves E's two uses alike.
 *
 * Runs recorded before --sin-scale existed were made with σ = 1: a config.json without it reads
 * as 1 (the table's `unrecorded`, pelab/posenc.h), so such a run evaluates and resumes as it was
 * trained.
 */
#include <math.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"

static const struct pelab_optdef sinusoidal_options[] = {
    {"sin-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL,
     "base of the frequencies base^(−2i/D)"},
    {"sin-scale", PELAB_OPT_REAL, "0.02", 0, 1e6, NULL,
     "factor σ of P in h0 = E[tok] + σ·P: 0.02, the token embedding's init std, adds P at the "
     "paper's proportion to unit-size tokens; 1: P as is (runs recorded without this option)"},
    {0},
};

/* Runs recorded before --sin-scale existed added P unscaled. */
static const char *const sinusoidal_unrecorded[] = {"sin-scale=1", NULL};

struct sinusoidal {
    double *freq; /* ((D+1)/2,) base^(−2i/D) */
    double scale; /* σ */
};

static int sinusoidal_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct sinusoidal *s = calloc(1, sizeof *s);
    if (!s) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = s;
    const int n = (pe->D + 1) / 2;
    double base = pelab_opt_real(opts, sinusoidal_options, "sin-base");
    s->scale = pelab_opt_real(opts, sinusoidal_options, "sin-scale");
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
            o[2 * j] += (pelab_real)(s->scale * sin(a));
            if (2 * j + 1 < D) o[2 * j + 1] += (pelab_real)(s->scale * cos(a));
        }
    }
}

const struct pelab_posenc_ops pelab_pe_sinusoidal = {
    .name = "sinusoidal",
    .summary = "fixed sin/cos absolute embedding added to the tokens (Vaswani et al. 2017)",
    .sites = PELAB_SITE_EMBED,
    .contract = {PELAB_PE_BIDIRECTIONAL, {"sin-scale=1", NULL}},
    .unrecorded = sinusoidal_unrecorded,
    .options = sinusoidal_options,
    .init = sinusoidal_init,
    .free = sinusoidal_free,
    .embed_forward = sinusoidal_embed_forward,
};
