/* seqpe — Sequential Position Encoding (Li et al. 2025, "SeqPE: Transformer with Sequential
 * Position Encoding"). A small causal Transformer reads each position's digits and gives its
 * embedding e_p ∈ R^D (seqpe_encoder.c); a position is the task's: one integer for sequences,
 * (row, column) on an image's grid, two digits per coordinate by default (the paper's Figure 1); the embedding enters the model in one of four ways
 * (--seqpe-mode, the paper's §3.5, Eqs. 11–14):
 *
 *   input      h0 = E[token] + e_p                                       site EMBED
 *   attn-add   score(t,s) = (q + pq_t)·(k + pk_s)                        site QK, width d
 *   attn-mul   score(t,s) = (q ⊙ pq_t)·(k ⊙ pk_s)                        site QK, width d
 *   attn-bias  score(t,s) = q·k + pq_t·pk_s                              site QK, width 2d
 *
 * with [pq; pk] = W^p e_p, W^p (2D, D) per layer or shared by all layers (--seqpe-proj), split
 * into the H heads as q and k are; scores are then scaled by 1/√d as always. attn-bias is the
 * bias pq_t·pk_s/√d added to the logits; it is formed at the QK site by concatenation,
 * q' = [q; pq], k' = [k; pk], which gives exactly that sum, lets either attention kernel compute
 * it tile by tile with no T×T buffer, and sends its gradient back to pq, pk through dq', dk'
 * (a BIAS-site function of (t, s) would need per-thread copies of gradients that are not
 * parameters). The encoding therefore acts at EMBED or QK as the mode says: init keeps that site
 * in pe->sites (posenc.h).
 *
 * Per pass, prepare() encodes each distinct position of the batch once (a table of U rows, e and
 * the projections of every layer); tokens read their row. The table is kept while the
 * parameters stay bit-for-bit the same: an evaluation computes it once for its positions and
 * every later batch with no new position reuses it, at any length the digits hold (b^k
 * positions). backward: the sites add into dE (U,D) (QK modes through W^p:
 * dW^p += dPᵀ·E, dE += dP·W^p), and backward_end() runs the encoder's backward once.
 *
 * Training (the posenc.h training hooks): shifted starts and the regularisers, in seqpe_train.c.
 *
 * Parameters: the encoder's under pe.seqpe.*, and W^p as pe.seqpe.qk.weight (shared) or
 * blocks.{l}.attn.seqpe.qk.weight (per layer), rows [W_q^p; W_k^p], init N(0, 0.02); no weight
 * decay on any of them (the paper's encoder has none).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/parallel.h"
#include "posenc/pe_seqpe.h"

enum { MODE_INPUT, MODE_ADD, MODE_MUL, MODE_BIAS };

const struct pelab_optdef pelab_seqpe_options[] = {
    {"seqpe-mode", PELAB_OPT_CHOICE, "input", 0, 0, "input|attn-add|attn-mul|attn-bias",
     "how e_p enters: added to the input, or through W^p to queries and keys (q+pq)·(k+pk), "
     "(q⊙pq)·(k⊙pk), q·k + pq·pk"},
    {"seqpe-proj", PELAB_OPT_CHOICE, "shared", 0, 0, "shared|per-layer",
     "attn modes: one W^p for all layers, or one per layer"},
    {"seqpe-base", PELAB_OPT_INT, "10", 2, 65536, NULL, "base b of the digit sequences"},
    {"seqpe-digits", PELAB_OPT_INT, "0", 0, 31, NULL,
     "digits k per coordinate (left-padded with 0): coordinates below b^k (0: 5 for sequences, "
     "2 per coordinate for images, as the paper's Figure 1)"},
    {"seqpe-dims", PELAB_OPT_INT, "0", 0, 8, NULL,
     "coordinates n of a position (0: the task's, 1 for sequences and 2 for images' (row, "
     "column); another value must match it)"},
    {"seqpe-layers", PELAB_OPT_INT, "2", 1, 64, NULL, "encoder blocks"},
    {"seqpe-width", PELAB_OPT_INT, "0", 0, 65536, NULL, "encoder width (0: d-model)"},
    {"seqpe-heads", PELAB_OPT_INT, "0", 0, 1024, NULL, "encoder attention heads (0: heads)"},
    {"seqpe-final-norm", PELAB_OPT_CHOICE, "auto", 0, 0, "auto|off|on",
     "RMSNorm on the encoder's [CLS] state before the output projection (auto: off, on with the "
     "authors' profile)"},
    {"seqpe-alpha", PELAB_OPT_REAL, "0.1", 0, 1e6, NULL,
     "weight α of the distance-alignment loss L_delta (0: off)"},
    {"seqpe-beta", PELAB_OPT_REAL, "0.1", 0, 1e6, NULL,
     "weight β of the distillation loss L_OOD to shifted positions (0: off)"},
    {"seqpe-max-pos", PELAB_OPT_INT, "0", 0, 2147483647.0, NULL,
     "Lmax: the regularisers and the shifted starts draw each coordinate below it (0: 20000, or "
     "b^k when the digits hold fewer)"},
    {"seqpe-shift-prob", PELAB_OPT_REAL, "0.1", 0, 1, NULL,
     "fraction of training sequences that start at a random position z in [0, Lmax - T) (images: "
     "each coordinate by its own z)"},
    {"seqpe-delta-batch", PELAB_OPT_INT, "32", 1, 65536, NULL, "L_delta: pivots per micro-batch"},
    {"seqpe-candidates", PELAB_OPT_INT, "32", 1, 4096, NULL, "L_delta: candidates |C| per pivot"},
    {"seqpe-ood-batch", PELAB_OPT_INT, "32", 1, 65536, NULL,
     "L_OOD: teacher sets (each with its own shift) per micro-batch"},
    {"seqpe-ood-positions", PELAB_OPT_INT, "32", 2, 4096, NULL,
     "L_OOD: teacher positions m per set (at most the training context's positions)"},
    /* the paper's regularisers or its authors' code's (docs/POSENC.md): the profile sets the
     * options below whose value is auto, each of which is one difference */
    {"seqpe-reg-profile", PELAB_OPT_CHOICE, "paper", 0, 0, "paper|authors",
     "the regularisers and shifted starts as the paper describes them, or as its authors' code "
     "runs them: the default of each option below"},
    {"seqpe-ood-loss", PELAB_OPT_CHOICE, "auto", 0, 0, "auto|paper|authors",
     "L_OOD: KL(P||S) averaged over rows (paper), or KL(P||S) + KL(S||P) averaged over all m x m "
     "entries (authors': about m/2 times weaker)"},
    {"seqpe-ood-shifts", PELAB_OPT_CHOICE, "auto", 0, 0, "auto|paper|authors",
     "L_OOD's shift: from [0, Lmax - T) (paper), or [T/4, Lmax - T) (authors; images: a coordinate "
     "at least the grid's extent)"},
    {"seqpe-local-window", PELAB_OPT_CHOICE, "auto", 0, 0, "auto|pivot|anywhere",
     "L_delta's local sets: a window that holds the pivot (paper), or one placed anywhere below "
     "Lmax (authors)"},
    {"seqpe-global-edits", PELAB_OPT_CHOICE, "auto", 0, 0, "auto|paper|authors",
     "L_delta's global sets: |C|/8 single digit edits of the pivot (paper), or |C|/4 chains of 1-3 "
     "edits kept only when farther than the nearest random candidate (authors)"},
    {"seqpe-global-frac", PELAB_OPT_REAL, "-1", -1, 1, NULL,
     "fraction of L_delta's candidate sets that are global (-1: 0.5, or 0.4 with the authors' "
     "profile)"},
    {"seqpe-shift-unit", PELAB_OPT_CHOICE, "auto", 0, 0, "auto|sequence|step",
     "--seqpe-shift-prob draws per sequence (paper), or per micro-batch, which then shifts every "
     "sequence and skips L_OOD (authors)"},
    {"seqpe-shift-pool", PELAB_OPT_INT, "-1", -1, 1000000, NULL,
     "shifted starts come from this many offsets fixed once (0: any offset; -1: 0, or 320 with "
     "the authors' profile)"},
    {0},
};


/* Whether a choice among auto|paper's|authors' (`name`) takes the authors' side: auto follows
 * the profile. */
static int authors_side(const struct pelab_opts *opts, const char *name, int authors) {
    const int c = pelab_opt_choice(opts, pelab_seqpe_options, name);
    return c == 0 ? authors : c == 2;
}

/* --seqpe-reg-profile and the options it sets: an option's auto takes the profile's value. */
static int profile_init(struct pelab_seqpe *s, const struct pelab_opts *opts) {
    const int authors = pelab_opt_choice(opts, pelab_seqpe_options, "seqpe-reg-profile") == 1;
    s->style.symmetric_ood = authors_side(opts, "seqpe-ood-loss", authors);
    s->style.far_shifts = authors_side(opts, "seqpe-ood-shifts", authors);
    s->style.window_anywhere = authors_side(opts, "seqpe-local-window", authors);
    s->style.hard_edits = authors_side(opts, "seqpe-global-edits", authors);
    s->shift_by_step = authors_side(opts, "seqpe-shift-unit", authors);
    s->final_norm = authors_side(opts, "seqpe-final-norm", authors);
    const double frac = pelab_opt_real(opts, pelab_seqpe_options, "seqpe-global-frac");
    if (frac < 0 && frac != -1)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-global-frac %g: give a fraction in [0, 1], or -1 "
                          "for the profile's", frac);
    s->style.global_frac = frac >= 0 ? frac : authors ? 0.4 : 0.5;
    const long pool = pelab_opt_int(opts, pelab_seqpe_options, "seqpe-shift-pool");
    s->pool_size = (int)(pool >= 0 ? pool : authors ? 320 : 0);
    return PELAB_OK;
}

static int seqpe_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct pelab_seqpe *s = calloc(1, sizeof *s);
    if (!s) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = s;
    s->mode = pelab_opt_choice(opts, pelab_seqpe_options, "seqpe-mode");
    s->shared = pelab_opt_choice(opts, pelab_seqpe_options, "seqpe-proj") == 0;
    const int base = (int)pelab_opt_int(opts, pelab_seqpe_options, "seqpe-base");
    int digits = (int)pelab_opt_int(opts, pelab_seqpe_options, "seqpe-digits");
    int dims = (int)pelab_opt_int(opts, pelab_seqpe_options, "seqpe-dims");
    const int layers = (int)pelab_opt_int(opts, pelab_seqpe_options, "seqpe-layers");
    int width = (int)pelab_opt_int(opts, pelab_seqpe_options, "seqpe-width");
    int heads = (int)pelab_opt_int(opts, pelab_seqpe_options, "seqpe-heads");
    if (!width) width = pe->D;
    if (!heads) heads = pe->H;
    if (dims == 0) dims = pe->pos_dims;
    if (dims != pe->pos_dims)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-dims %d: this task's positions are %d-D (leave "
                          "--seqpe-dims at 0 to follow the task)", dims, pe->pos_dims);
    if (digits == 0) digits = dims == 1 ? 5 : 2;
    /* the coordinates of the training context: 0 .. extent − 1 */
    const int extent = dims == 1 ? pe->max_seq : pe->grid + 1;
    int rc = profile_init(s, opts);
    if (!rc) rc = pelab_seqpe_encoder_init(&s->enc, params, "pe.seqpe", base, digits, dims, layers,
                                           width, heads, s->final_norm, pe->D);
    if (rc) return rc;
    if (extent > s->enc.capacity) {
        if (dims == 1)
            return pelab_fail(PELAB_ERR_USAGE, "--seqpe-digits %d in base %d hold positions below %lld, "
                              "fewer than the training context's %d", digits, base,
                              (long long)s->enc.capacity, extent);
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-digits %d in base %d hold coordinates up to %lld; "
                          "a grid of %d x %d patches has coordinates 1 to %d (give more digits)",
                          digits, base, (long long)s->enc.capacity - 1, pe->grid, pe->grid, pe->grid);
    }
    if (s->mode != MODE_INPUT) {
        s->n_proj = s->shared ? 1 : pe->n_layers;
        s->proj = malloc((size_t)pe->n_layers * sizeof *s->proj);
        if (!s->proj) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
        int64_t shape[2] = {2 * pe->D, pe->D};
        for (int l = 0; l < pe->n_layers; l++) {
            char name[PELAB_PARAM_NAME_MAX];
            if (s->shared && l > 0) {
                s->proj[l] = s->proj[0];
                continue;
            }
            if (s->shared) snprintf(name, sizeof name, "pe.seqpe.qk.weight");
            else snprintf(name, sizeof name, "blocks.%d.attn.seqpe.qk.weight", l);
            s->proj[l] = pelab_params_declare(params, name, 2, shape, 0);
        }
    }
    if (s->mode == MODE_BIAS) pe->qk_dim = 2 * pe->d;
    if ((rc = pelab_seqpe_train_init(s, opts, extent, pe->D))) return rc;
    pe->sites = s->mode == MODE_INPUT ? PELAB_SITE_EMBED : PELAB_SITE_QK;
    return PELAB_OK;
}

static void seqpe_free(struct pelab_posenc *pe) {
    struct pelab_seqpe *s = pe->state;
    if (!s) return;
    pelab_seqpe_encoder_free(&s->enc);
    pelab_seqpe_acts_free(&s->acts);
    free(s->proj);
    free(s->upos);
    free(s->row);
    free(s->scratch);
    free(s->pqk);
    free(s->dE);
    free(s->dpqk);
    free(s->snap);
    pelab_seqpe_train_free(s);
    free(s);
}

static void seqpe_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    struct pelab_seqpe *s = pe->state;
    pelab_seqpe_encoder_init_params(&s->enc, rng);
    for (int l = 0; l < s->n_proj; l++) {
        const struct pelab_param *p = &pe->params->list[s->proj[l]];
        pelab_real *w = pelab_params_data(pe->params, s->proj[l]);
        for (size_t j = 0; j < p->size; j++) w[j] = (pelab_real)(0.02 * pelab_rng_normal(rng));
    }
    s->have_table = 0;
}

/* --- the table of positions --------------------------------------------------------------- */

/* The encoding's parameters, one contiguous range of the table (posenc.h). */
static void param_range(const struct pelab_posenc *pe, pelab_real **data, size_t *n) {
    const struct pelab_param *first = &pe->params->list[pe->param_first];
    const struct pelab_param *last = &pe->params->list[pe->param_end - 1];
    *data = pe->params->data + first->offset;
    *n = last->offset + last->size - first->offset;
}

static int grow(void **buf, long n, size_t elem) {
    void *p = realloc(*buf, (size_t)n * elem);
    if (!p) return 0;
    *buf = p;
    return 1;
}

/* Each token's row in the current table; 0 when a position is not in it. */
/* Lexicographic order of two positions of n coordinates: <0, 0, >0. */
static int pos_cmp(const int32_t *a, const int32_t *b, int n) {
    for (int c = 0; c < n; c++)
        if (a[c] != b[c]) return a[c] < b[c] ? -1 : 1;
    return 0;
}

static int rows_in_table(struct pelab_seqpe *s, const int32_t *pos, long ntok) {
    const int n = s->enc.dims;
    for (long i = 0; i < ntok; i++) {
        const int32_t *p = pos + i * n;
        int lo = 0, hi = s->U; /* first upos >= p */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (pos_cmp(s->upos + (long)mid * n, p, n) < 0) lo = mid + 1;
            else hi = mid;
        }
        if (lo == s->U || pos_cmp(s->upos + (long)lo * n, p, n) != 0) return 0;
        s->row[i] = lo;
    }
    return 1;
}

/* E and [pq; pk] for the distinct positions of this pass, unless the table already holds them
 * all and the parameters have not changed since it was computed. */
static int seqpe_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct pelab_seqpe *s = pe->state;
    const long ntok = (long)B * T;
    const int D = pe->D;
    int rc = pelab_seqpe_check(&s->enc, pos, ntok);
    if (rc) return rc;
    if (ntok > s->tok_cap) {
        if (!grow((void **)&s->upos, ntok * s->enc.dims, sizeof *s->upos) || !grow((void **)&s->row, ntok, sizeof *s->row) ||
            !grow((void **)&s->scratch, 2 * ntok, sizeof *s->scratch))
            return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %ld positions", ntok);
        s->tok_cap = ntok;
    }
    pelab_real *params;
    size_t n_params;
    param_range(pe, &params, &n_params);
    if (!s->snap && !(s->snap = malloc(n_params * sizeof *s->snap)))
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int reuse = s->have_table && memcmp(s->snap, params, n_params * sizeof *params) == 0 &&
                rows_in_table(s, pos, ntok);
    if (!reuse) {
        s->have_table = 0;
        s->U = pelab_seqpe_unique(s->upos, s->row, pos, (int)ntok, s->enc.dims, s->scratch);
        if (s->U > s->row_cap) {
            long n = s->U;
            if (!grow((void **)&s->dE, n * D, sizeof *s->dE) ||
                !grow((void **)&s->dpqk, n * 2 * D, sizeof *s->dpqk) ||
                (s->n_proj && !grow((void **)&s->pqk, s->n_proj * n * 2 * D, sizeof *s->pqk)))
                return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d position embeddings", s->U);
            s->row_cap = n;
        }
        if ((rc = pelab_seqpe_acts_reserve(&s->acts, &s->enc, s->U))) return rc;
        pelab_seqpe_encoder_forward(pe->ctx, &s->enc, &s->acts, s->upos, s->U);
        for (int l = 0; l < s->n_proj; l++) /* [pq; pk] = W^p e                        (U,2D) */
            pelab_matmul_forward(pe->ctx, s->pqk + (long)l * s->U * 2 * D, s->acts.out,
                                 pelab_params_data(pe->params, s->proj[l]), s->U, D, 2 * D);
        memcpy(s->snap, params, n_params * sizeof *params);
        s->have_table = 1;
    }
    memset(s->dE, 0, (size_t)s->U * D * sizeof *s->dE);
    return PELAB_OK;
}

int pelab_seqpe_table_rows(const struct pelab_posenc *pe) {
    const struct pelab_seqpe *s = pe->state;
    return s->have_table ? s->U : 0;
}

/* --- EMBED (input mode) ------------------------------------------------------------------- */

static void seqpe_embed_forward(struct pelab_posenc *pe, pelab_real *out, const int32_t *pos,
                                int B, int T) {
    const struct pelab_seqpe *s = pe->state;
    const int D = pe->D;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)B * T; i++) {
        const pelab_real *e = s->acts.out + (long)s->row[i] * D;
        pelab_real *o = out + i * D;
        for (int j = 0; j < D; j++) o[j] += e[j];
    }
}

/* dE[row] += dout: rows are shared by tokens, so threads split the columns and walk the tokens
 * in order (fixed sums). */
static void seqpe_embed_backward(struct pelab_posenc *pe, const pelab_real *dout,
                                 const int32_t *pos, int B, int T) {
    struct pelab_seqpe *s = pe->state;
    const int D = pe->D;
#pragma omp parallel
    {
        long c0, c1;
        pelab_thread_slice(D, &c0, &c1);
        for (long i = 0; i < (long)B * T; i++) {
            pelab_real *d = s->dE + (long)s->row[i] * D;
            const pelab_real *g = dout + i * D;
            for (long j = c0; j < c1; j++) d[j] += g[j];
        }
    }
}

/* --- QK (attn modes) ---------------------------------------------------------------------- */

static void seqpe_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                             const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                             int B, int T) {
    const struct pelab_seqpe *s = pe->state;
    const int H = pe->H, d = pe->d, D = pe->D, dq = pe->qk_dim, mode = s->mode;
    const pelab_real *P = s->pqk + (long)(s->shared ? 0 : layer) * s->U * 2 * D;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const long i = (long)b * T + t;
            const pelab_real *pr = P + (long)s->row[i] * 2 * D;
            for (int h = 0; h < H; h++) {
                const pelab_real *qi = q + i * ld + (long)h * d, *ki = k + i * ld + (long)h * d;
                const pelab_real *pq = pr + (long)h * d, *pk = pr + D + (long)h * d;
                pelab_real *qh = qo + (((long)b * H + h) * T + t) * dq;
                pelab_real *kh = ko + (((long)b * H + h) * T + t) * dq;
                for (int c = 0; c < d; c++) {
                    if (mode == MODE_ADD) qh[c] = qi[c] + pq[c], kh[c] = ki[c] + pk[c];
                    else if (mode == MODE_MUL) qh[c] = qi[c] * pq[c], kh[c] = ki[c] * pk[c];
                    else qh[c] = qi[c], kh[c] = ki[c], qh[d + c] = pq[c], kh[d + c] = pk[c];
                }
            }
        }
}

static void seqpe_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                              const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                              const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    struct pelab_seqpe *s = pe->state;
    const int H = pe->H, d = pe->d, D = pe->D, dq_ = pe->qk_dim, mode = s->mode;
    const pelab_real *P = s->pqk + (long)(s->shared ? 0 : layer) * s->U * 2 * D;
    /* dq, dk: add passes the gradient through, mul scales it by pq, bias keeps its first half */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const long i = (long)b * T + t;
            const pelab_real *pr = P + (long)s->row[i] * 2 * D;
            for (int h = 0; h < H; h++) {
                const pelab_real *gq = dqo + (((long)b * H + h) * T + t) * dq_;
                const pelab_real *gk = dko + (((long)b * H + h) * T + t) * dq_;
                const pelab_real *pq = pr + (long)h * d, *pk = pr + D + (long)h * d;
                pelab_real *dqi = dq + i * ld + (long)h * d, *dki = dk + i * ld + (long)h * d;
                for (int c = 0; c < d; c++) {
                    dqi[c] = mode == MODE_MUL ? gq[c] * pq[c] : gq[c];
                    dki[c] = mode == MODE_MUL ? gk[c] * pk[c] : gk[c];
                }
            }
        }
    /* dP (U,2D) summed over the tokens of each row: threads split the 2D columns and walk the
     * tokens in order. Column j < D is pq's (head j/d, element j mod d), j ≥ D pk's. */
    memset(s->dpqk, 0, (size_t)s->U * 2 * D * sizeof *s->dpqk);
#pragma omp parallel
    {
        long c0, c1;
        pelab_thread_slice(2 * D, &c0, &c1);
        for (long i = 0; i < (long)B * T; i++) {
            const int b = (int)(i / T), t = (int)(i % T);
            pelab_real *dp = s->dpqk + (long)s->row[i] * 2 * D;
            for (long j = c0; j < c1; j++) {
                const int key = j >= D, h = (int)((j - key * D) / d), c = (int)((j - key * D) % d);
                const pelab_real *g = (key ? dko : dqo) + (((long)b * H + h) * T + t) * dq_;
                const pelab_real *x = (key ? k : q) + i * ld + (long)h * d;
                dp[j] += mode == MODE_ADD ? g[c] : mode == MODE_MUL ? g[c] * x[c] : g[d + c];
            }
        }
    }
    /* [pq; pk] = W^p e:  dW^p += dPᵀ·E,  dE += dP·W^p */
    pelab_matmul_backward(pe->ctx, s->dE, pelab_params_grad(pe->params, s->proj[layer]), s->dpqk,
                          s->acts.out, pelab_params_data(pe->params, s->proj[layer]), s->U, D, 2 * D);
}

/* The encoder's backward, once per backward pass, from everything the sites sent to dE. */
static void seqpe_backward_end(struct pelab_posenc *pe) {
    struct pelab_seqpe *s = pe->state;
    pelab_seqpe_encoder_backward(pe->ctx, &s->enc, &s->acts, s->dE);
    memset(s->dE, 0, (size_t)s->U * pe->D * sizeof *s->dE);
}

/* e_p of each position, through the table (so an analysis of many positions encodes each once). */
static int seqpe_position_vectors(struct pelab_posenc *pe, const int32_t *pos, int n, pelab_real *out) {
    struct pelab_seqpe *s = pe->state;
    int rc = seqpe_prepare(pe, pos, 1, n);
    if (rc) return rc;
    for (int i = 0; i < n; i++)
        memcpy(out + (long)i * pe->D, s->acts.out + (long)s->row[i] * pe->D, (size_t)pe->D * sizeof *out);
    return PELAB_OK;
}

const struct pelab_seqpe_encoder *pelab_seqpe_encoder_of(const struct pelab_posenc *pe) {
    const struct pelab_seqpe *s = pe->state;
    return &s->enc;
}

/* The automatic options (0, auto, −1) as init resolved them: what the run records is what it
 * ran. */
static int seqpe_resolve(const struct pelab_posenc *pe, struct pelab_opts *opts) {
    const struct pelab_seqpe *s = pe->state;
    const struct {
        const char *name;
        int64_t value; /* 0: not resolved here (L_max without the regularisers) */
    } chosen[] = {{"seqpe-digits", s->enc.digits}, {"seqpe-dims", s->enc.dims}, {"seqpe-width", s->enc.width},
                  {"seqpe-heads", s->enc.heads}, {"seqpe-max-pos", s->reg.max_pos}};
    int rc = PELAB_OK;
    for (size_t i = 0; i < sizeof chosen / sizeof chosen[0] && !rc; i++) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)chosen[i].value);
        if (chosen[i].value > 0 && pelab_opt_int(opts, pelab_seqpe_options, chosen[i].name) == 0)
            rc = pelab_opts_set(opts, chosen[i].name, v);
    }
    const struct {
        const char *name;
        const char *value;
    } styled[] = {{"seqpe-final-norm", s->final_norm ? "on" : "off"},
                  {"seqpe-ood-loss", s->style.symmetric_ood ? "authors" : "paper"},
                  {"seqpe-ood-shifts", s->style.far_shifts ? "authors" : "paper"},
                  {"seqpe-local-window", s->style.window_anywhere ? "anywhere" : "pivot"},
                  {"seqpe-global-edits", s->style.hard_edits ? "authors" : "paper"},
                  {"seqpe-shift-unit", s->shift_by_step ? "step" : "sequence"}};
    for (size_t i = 0; i < sizeof styled / sizeof styled[0] && !rc; i++)
        if (pelab_opt_choice(opts, pelab_seqpe_options, styled[i].name) == 0)
            rc = pelab_opts_set(opts, styled[i].name, styled[i].value);
    char v[32];
    snprintf(v, sizeof v, "%g", s->style.global_frac);
    if (!rc && pelab_opt_real(opts, pelab_seqpe_options, "seqpe-global-frac") < 0)
        rc = pelab_opts_set(opts, "seqpe-global-frac", v);
    snprintf(v, sizeof v, "%d", s->pool_size);
    if (!rc && pelab_opt_int(opts, pelab_seqpe_options, "seqpe-shift-pool") < 0)
        rc = pelab_opts_set(opts, "seqpe-shift-pool", v);
    return rc;
}

/* Both sites listed; init keeps the one of the chosen mode in pe->sites. */
const struct pelab_posenc_ops pelab_pe_seqpe = {
    .name = "seqpe",
    .display = "SeqPE",
    .summary = "learned encoder of each position's digits, added at the input or to q and k (SeqPE, Li et al. 2025)",
    .sites = PELAB_SITE_EMBED | PELAB_SITE_QK,
    .dims = 1u << 1 | 1u << 2,
    .contract = {PELAB_PE_BIDIRECTIONAL,
                 {"seqpe-mode=attn-add", "seqpe-mode=attn-mul seqpe-proj=per-layer seqpe-width=16 seqpe-heads=2",
                  "seqpe-mode=attn-bias", "seqpe-final-norm=on seqpe-base=3 seqpe-digits=5",
                  "seqpe-mode=attn-bias seqpe-reg-profile=authors",
                  /* two encoder blocks, the default, which .small makes one for the other cases */
                  "seqpe-mode=attn-bias seqpe-proj=per-layer seqpe-layers=2", NULL},
                 .small = "seqpe-layers=1 seqpe-delta-batch=4 seqpe-candidates=8 seqpe-ood-batch=3 seqpe-ood-positions=4"},
    .options = pelab_seqpe_options,
    .init = seqpe_init,
    .free = seqpe_free,
    .init_params = seqpe_init_params,
    .prepare = seqpe_prepare,
    .embed_forward = seqpe_embed_forward,
    .embed_backward = seqpe_embed_backward,
    .qk_forward = seqpe_qk_forward,
    .qk_backward = seqpe_qk_backward,
    .backward_end = seqpe_backward_end,
    .position_vectors = seqpe_position_vectors,
    .resolve = seqpe_resolve,
    .train_positions = pelab_seqpe_train_positions,
    .aux_names = pelab_seqpe_aux_names,
    .aux_forward = pelab_seqpe_aux_forward,
    .aux_backward = pelab_seqpe_aux_backward,
};
