/* t5 — learned relative-position buckets (Raffel et al. 2020, "Exploring the Limits of Transfer
 * Learning with a Unified Text-to-Text Transformer"), in its causal (one-directional) form.
 *
 *   n = max(t − s, 0);  max_exact = nb/2
 *   bucket(n) = n                                                            n < max_exact
 *             = min(nb − 1, max_exact + ⌊ln(n/max_exact) / ln(maxd/max_exact) · (nb − max_exact)⌋)
 *   bias_h(t, s) = b[bucket(n), h]                 b ∈ R^{nb×H}, learned, init 0
 *
 * Distances below max_exact have a bucket each; the rest share logarithmically wider buckets, and
 * every n ≥ maxd falls in the last one. The table is shared by all layers (`pe.t5.bias`) or one per
 * layer (`blocks.{l}.attn.t5.bias`, --t5-table per-layer).
 *
 * Site BIAS. Buckets of n < maxd are tabulated at init (in double, so both builds agree), so a
 * tile is a lookup per entry. backward: db[bucket(n), h] += dout over the unmasked entries (s ≤ t).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"

static const struct pelab_optdef t5_options[] = {
    {"t5-buckets", PELAB_OPT_INT, "32", 2, 65536, NULL, "relative-position buckets nb (half exact, half logarithmic)"},
    {"t5-max-distance", PELAB_OPT_INT, "128", 1, 1048576, NULL,
     "distance from which every key shares the last bucket (must exceed t5-buckets/2)"},
    {"t5-table", PELAB_OPT_CHOICE, "shared", 0, 0, "shared|per-layer", "one bias table for all layers, or one per layer"},
    {0},
};

struct t5 {
    int nb, maxd;
    int shared;
    int *table;  /* (N,) parameter index per layer: all equal when shared */
    int *bucket; /* (maxd,) bucket of n = 0..maxd−1 */
};

static int t5_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct t5 *t = calloc(1, sizeof *t);
    if (!t) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = t;
    t->nb = (int)pelab_opt_int(opts, t5_options, "t5-buckets");
    t->maxd = (int)pelab_opt_int(opts, t5_options, "t5-max-distance");
    t->shared = pelab_opt_choice(opts, t5_options, "t5-table") == 0;
    const int exact = t->nb / 2;
    if (t->maxd <= exact)
        return pelab_fail(PELAB_ERR_USAGE, "--t5-max-distance %d must exceed --t5-buckets/2 = %d",
                          t->maxd, exact);
    t->table = malloc((size_t)pe->n_layers * sizeof *t->table);
    t->bucket = malloc((size_t)t->maxd * sizeof *t->bucket);
    if (!t->table || !t->bucket) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    const double span = log((double)t->maxd / exact);
    for (int n = 0; n < t->maxd; n++) {
        int b = n < exact ? n : exact + (int)floor(log((double)n / exact) / span * (t->nb - exact));
        t->bucket[n] = b < t->nb - 1 ? b : t->nb - 1;
    }
    int64_t shape[2] = {t->nb, pe->H};
    for (int l = 0; l < pe->n_layers; l++) {
        char name[PELAB_PARAM_NAME_MAX];
        if (t->shared && l > 0) {
            t->table[l] = t->table[0];
            continue;
        }
        if (t->shared) snprintf(name, sizeof name, "pe.t5.bias");
        else snprintf(name, sizeof name, "blocks.%d.attn.t5.bias", l);
        t->table[l] = pelab_params_declare(params, name, 2, shape, 0);
    }
    return PELAB_OK;
}

static void t5_free(struct pelab_posenc *pe) {
    struct t5 *t = pe->state;
    if (!t) return;
    free(t->table);
    free(t->bucket);
    free(t);
}

/* The table starts at zero (no positional preference): pelab_params_alloc zeroed it already. */
static void t5_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    const struct t5 *t = pe->state;
    for (int l = 0; l < pe->n_layers; l++) {
        pelab_real *b = pelab_params_data(pe->params, t->table[l]);
        for (long i = 0; i < (long)t->nb * pe->H; i++) b[i] = 0;
    }
}

static inline int bucket_of(const struct t5 *t, int32_t q, int32_t k) {
    int64_t n = (int64_t)q - k;
    return n <= 0 ? 0 : n < t->maxd ? t->bucket[n] : t->nb - 1;
}

static void t5_bias_tile(struct pelab_posenc *pe, int layer, int h, pelab_real *out,
                         const int32_t *pos_q, int nq, const int32_t *pos_k, int nk) {
    const struct t5 *t = pe->state;
    const pelab_real *b = pelab_params_data(pe->params, t->table[layer]); /* (nb, H) */
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < nk; j++)
            out[(long)i * nk + j] = b[(long)bucket_of(t, pos_q[i], pos_k[j]) * pe->H + h];
}

static void t5_bias_tile_backward(struct pelab_posenc *pe, int layer, int h, pelab_real *grad,
                                  const pelab_real *dout, const int32_t *pos_q, int nq,
                                  const int32_t *pos_k, int nk) {
    const struct t5 *t = pe->state;
    pelab_real *db = pelab_posenc_grad(pe, grad, t->table[layer]); /* (nb, H) */
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < nk; j++)
            if (pos_k[j] <= pos_q[i])
                db[(long)bucket_of(t, pos_q[i], pos_k[j]) * pe->H + h] += dout[(long)i * nk + j];
}

const struct pelab_posenc_ops pelab_pe_t5 = {
    .name = "t5",
    .display = "T5",
    .summary = "learned bias per head and log-bucketed distance (Raffel et al. 2020)",
    .sites = PELAB_SITE_BIAS,
    .contract = {PELAB_PE_RELATIVE, {"t5-table=per-layer t5-buckets=6 t5-max-distance=8",
                                      "t5-buckets=6 t5-max-distance=8", NULL}},
    .options = t5_options,
    .init = t5_init,
    .free = t5_free,
    .init_params = t5_init_params,
    .bias_tile = t5_bias_tile,
    .bias_tile_backward = t5_bias_tile_backward,
};
