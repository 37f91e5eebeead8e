/* learned — a learned absolute position embedding (Gehring et al. 2017, "Convolutional Sequence
 * to Sequence Learning"; GPT-2, Radford et al. 2019): a table P ∈ R^{Tmax×D}, init normal(0, 0.02),
 * and h0 = E[token] + P[p].
 *
 * Tmax is --ape-max-len, by default the training context. A position beyond the table is an
 * error, unless the evaluation asks for --ape-extend interpolate: the table is then resampled to
 * the pass's length L' (its largest position + 1) by linear interpolation, as the SeqPE paper's
 * APE baseline does:
 *
 *   x = p·(Tmax − 1)/(L' − 1),  i = ⌊x⌋,  f = x − i,  e(p) = (1 − f)·P[i] + f·P[i + 1]
 *
 * so position 0 reads row 0 and position L' − 1 reads row Tmax − 1. A pass whose positions all
 * fit the table reads it directly, interpolate or not.
 *
 * Site EMBED. Parameter `pos_emb.weight` (Tmax, D), no weight decay. backward: dP[i] += (1−f)·dout,
 * dP[i+1] += f·dout, summed over tokens in order (one thread: the sum is tiny next to the model).
 */
#include <math.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"

static const struct pelab_optdef learned_options[] = {
    {"ape-max-len", PELAB_OPT_INT, "0", 0, 1e8, NULL,
     "rows of the learned table, Tmax (0: the training context)"},
    {0},
};

static const struct pelab_optdef learned_eval_options[] = {
    {"ape-extend", PELAB_OPT_CHOICE, "error", 0, 0, "error|interpolate",
     "positions beyond the learned table: an error, or the table linearly interpolated to the "
     "evaluated length"},
    {0},
};

struct learned {
    int table;        /* parameter index */
    int tmax;
    int interpolate;
    int stretched;    /* this pass reads the interpolated table */
    int32_t *row;     /* (B,T) the row i of each token, when stretched */
    pelab_real *frac; /* (B,T) its weight f on row i + 1 */
    long cap;
};

static int learned_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct learned *l = calloc(1, sizeof *l);
    if (!l) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = l;
    long max_len = pelab_opt_int(opts, learned_options, "ape-max-len");
    if (max_len && max_len < pe->max_seq)
        return pelab_fail(PELAB_ERR_USAGE, "--ape-max-len %ld is shorter than the training context (%d)",
                          max_len, pe->max_seq);
    l->tmax = max_len ? (int)max_len : pe->max_seq;
    l->interpolate = pelab_opt_choice(opts, learned_eval_options, "ape-extend") == 1;
    int64_t shape[2] = {l->tmax, pe->D};
    l->table = pelab_params_declare(params, "pos_emb.weight", 2, shape, 0);
    return PELAB_OK;
}

static void learned_free(struct pelab_posenc *pe) {
    struct learned *l = pe->state;
    if (!l) return;
    free(l->row);
    free(l->frac);
    free(l);
}

static void learned_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    const struct learned *l = pe->state;
    pelab_real *P = pelab_params_data(pe->params, l->table);
    for (long i = 0; i < (long)l->tmax * pe->D; i++) P[i] = (pelab_real)(0.02 * pelab_rng_normal(rng));
}

/* The interpolated table is resampled to each pass's length: embeddings of earlier passes would
 * not be what one pass computes. */
static int learned_cache_check(const struct pelab_posenc *pe, long len) {
    const struct learned *l = pe->state;
    if (l->interpolate && len > l->tmax)
        return pelab_fail(PELAB_ERR_USAGE, "--ape-extend interpolate resamples the table to each "
                          "pass's length once it passes %d positions (%ld here): cached positions "
                          "would be stale", l->tmax, len);
    return PELAB_OK;
}

/* Checks the positions against the table; when they run past it, the interpolation rows. */
static int learned_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct learned *l = pe->state;
    const long ntok = (long)B * T;
    long L = 0;
    for (long i = 0; i < ntok; i++) {
        if (pos[i] < 0)
            return pelab_fail(PELAB_ERR_USAGE, "--pe learned: position %d is negative", pos[i]);
        if (pos[i] + 1L > L) L = pos[i] + 1L;
    }
    l->stretched = L > l->tmax;
    if (!l->stretched) return PELAB_OK;
    if (!l->interpolate)
        return pelab_fail(PELAB_ERR_USAGE,
                          "--pe learned: position %ld is beyond the table of %d positions "
                          "(--ape-max-len); evaluate with --ape-extend interpolate to stretch it",
                          L - 1, l->tmax);
    if (ntok > l->cap) {
        free(l->row);
        free(l->frac);
        l->row = malloc((size_t)ntok * sizeof *l->row);
        l->frac = malloc((size_t)ntok * sizeof *l->frac);
        l->cap = l->row && l->frac ? ntok : 0;
        if (!l->cap) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %ld positions", ntok);
    }
    for (long i = 0; i < ntok; i++) {
        double x = (double)pos[i] * (l->tmax - 1) / (double)(L - 1);
        int r = (int)floor(x);
        if (r >= l->tmax - 1) r = l->tmax - 1, x = r; /* the last row: no neighbour to blend */
        l->row[i] = r;
        l->frac[i] = (pelab_real)(x - r);
    }
    return PELAB_OK;
}

static void learned_embed_forward(struct pelab_posenc *pe, pelab_real *out, const int32_t *pos,
                                  int B, int T) {
    const struct learned *l = pe->state;
    const int D = pe->D;
    const pelab_real *P = pelab_params_data(pe->params, l->table);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)B * T; i++) {
        pelab_real *o = out + i * D;
        if (!l->stretched) {
            const pelab_real *p = P + (long)pos[i] * D;
            for (int j = 0; j < D; j++) o[j] += p[j];
            continue;
        }
        const pelab_real f = l->frac[i], *p0 = P + (long)l->row[i] * D, *p1 = p0 + (f != 0 ? D : 0);
        for (int j = 0; j < D; j++) o[j] += (1 - f) * p0[j] + f * p1[j];
    }
}

static void learned_embed_backward(struct pelab_posenc *pe, const pelab_real *dout,
                                   const int32_t *pos, int B, int T) {
    const struct learned *l = pe->state;
    const int D = pe->D;
    pelab_real *dP = pelab_params_grad(pe->params, l->table);
    for (long i = 0; i < (long)B * T; i++) {
        const pelab_real *g = dout + i * D;
        if (!l->stretched) {
            pelab_real *d = dP + (long)pos[i] * D;
            for (int j = 0; j < D; j++) d[j] += g[j];
            continue;
        }
        const pelab_real f = l->frac[i];
        pelab_real *d0 = dP + (long)l->row[i] * D;
        for (int j = 0; j < D; j++) d0[j] += (1 - f) * g[j];
        if (f != 0)
            for (int j = 0; j < D; j++) d0[D + j] += f * g[j];
    }
}

const struct pelab_posenc_ops pelab_pe_learned = {
    .name = "learned",
    .summary = "learned absolute embedding table added to the tokens (Gehring et al. 2017, GPT-2)",
    .sites = PELAB_SITE_EMBED,
    .contract = {PELAB_PE_BIDIRECTIONAL, {"ape-extend=interpolate", NULL}, .reach = "ape-max-len"},
    .options = learned_options,
    .eval_options = learned_eval_options,
    .init = learned_init,
    .free = learned_free,
    .init_params = learned_init_params,
    .prepare = learned_prepare,
    .cache_check = learned_cache_check,
    .embed_forward = learned_embed_forward,
    .embed_backward = learned_embed_backward,
};
