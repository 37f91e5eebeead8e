/* The SeqPE position encoder (Li et al. 2025, "SeqPE: Transformer with Sequential Position
 * Encoding", §3.2, Eq. 8): digits of a position → a small causal Transformer → e_p. Formulas and
 * shapes in seqpe.h. It reuses the main model's layer kernels (RMSNorm, linear, GELU) and the
 * reference attention's arithmetic (kernels/cpu/softmax_attn.h), with no encoding of its own: its
 * sequences are a few tokens long, so the (S,S) probabilities are tiny and materialising them is
 * the simple choice.
 *
 * backward, from dout = ∂loss/∂e_p (U,D):
 *   dW_out += doutᵀ·lnf;  d[CLS] = RMSNorm'(dout·W_out) (or dout·W_out without the final norm);
 *   the other rows of the last block get 0
 *   each block in reverse as in model.c (no dropout), then
 *   dE_digit[tok_j] += dx0_j,  dE_place[j] += dx0_j,  dE_dim[c] += dx0_j   summed in row order
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/status.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/softmax_attn.h"
#include "kernels/cpu/layers.h"
#include "posenc/seqpe.h"

#define W_(e, i) pelab_params_data((e)->params, (i))
#define G_(e, i) pelab_params_grad((e)->params, (i))

static int declare(struct pelab_params *p, const char *prefix, const char *name, int ndim,
                   int64_t d0, int64_t d1) {
    char full[PELAB_PARAM_NAME_MAX];
    int n = snprintf(full, sizeof full, "%s.%s", prefix, name);
    PELAB_ASSERT(n > 0 && n < (int)sizeof full);
    int64_t shape[2] = {d0, d1};
    return pelab_params_declare(p, full, ndim, shape, 0);
}

int pelab_seqpe_encoder_init(struct pelab_seqpe_encoder *e, struct pelab_params *params,
                             const char *prefix, int base, int digits, int dims, int layers,
                             int width, int heads, int final_norm, int out_dim) {
    memset(e, 0, sizeof *e);
    e->params = params;
    e->base = base, e->digits = digits, e->dims = dims;
    e->seq = dims * digits + 1;
    e->layers = layers, e->width = width, e->heads = heads, e->out_dim = out_dim;
    double cap = pow((double)base, (double)digits);
    e->capacity = cap > 2147483648.0 ? 2147483648LL : (int64_t)(cap + 0.5);
    if (width % heads)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-heads %d does not divide the encoder width %d "
                          "(--seqpe-width)", heads, width);
    const int W = width;
    e->digit_emb = declare(params, prefix, "digit_emb.weight", 2, base + 1, W);
    e->place_emb = declare(params, prefix, "place_emb.weight", 2, e->seq, W);
    e->dim_emb = dims > 1 ? declare(params, prefix, "dim_emb.weight", 2, dims, W) : -1;
    e->block = calloc((size_t)layers, sizeof *e->block);
    if (!e->block) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int l = 0; l < layers; l++) {
        char name[PELAB_PARAM_NAME_MAX];
        struct pelab_seqpe_block *b = &e->block[l];
#define NAME(s) (snprintf(name, sizeof name, "enc.%d.%s", l, s), name)
        b->ln1 = declare(params, prefix, NAME("attn_norm.weight"), 1, W, 0);
        b->qkv = declare(params, prefix, NAME("attn.qkv.weight"), 2, 3 * W, W);
        b->proj = declare(params, prefix, NAME("attn.proj.weight"), 2, W, W);
        b->ln2 = declare(params, prefix, NAME("mlp_norm.weight"), 1, W, 0);
        b->fc = declare(params, prefix, NAME("mlp.fc.weight"), 2, 4 * W, W);
        b->fcproj = declare(params, prefix, NAME("mlp.proj.weight"), 2, W, 4 * W);
#undef NAME
    }
    e->lnf = final_norm ? declare(params, prefix, "final_norm.weight", 1, W, 0) : -1;
    e->out = declare(params, prefix, "out.weight", 2, out_dim, W);
    return PELAB_OK;
}

void pelab_seqpe_encoder_free(struct pelab_seqpe_encoder *e) {
    free(e->block);
    e->block = NULL;
}

static void fill_normal(const struct pelab_seqpe_encoder *e, int i, double std, struct pelab_rng *rng) {
    pelab_real *w = W_(e, i);
    for (size_t j = 0; j < e->params->list[i].size; j++) w[j] = (pelab_real)(std * pelab_rng_normal(rng));
}

static void fill_ones(const struct pelab_seqpe_encoder *e, int i) {
    pelab_real *w = W_(e, i);
    for (size_t j = 0; j < e->params->list[i].size; j++) w[j] = 1;
}

void pelab_seqpe_encoder_init_params(const struct pelab_seqpe_encoder *e, struct pelab_rng *rng) {
    const double std = 0.02, resid = 0.02 / sqrt(2.0 * e->layers);
    fill_normal(e, e->digit_emb, std, rng);
    fill_normal(e, e->place_emb, std, rng);
    if (e->dim_emb >= 0) fill_normal(e, e->dim_emb, std, rng);
    for (int l = 0; l < e->layers; l++) {
        const struct pelab_seqpe_block *b = &e->block[l];
        fill_ones(e, b->ln1);
        fill_normal(e, b->qkv, std, rng);
        fill_normal(e, b->proj, resid, rng);
        fill_ones(e, b->ln2);
        fill_normal(e, b->fc, std, rng);
        fill_normal(e, b->fcproj, resid, rng);
    }
    if (e->lnf >= 0) fill_ones(e, e->lnf);
    fill_normal(e, e->out, std, rng);
}

int pelab_seqpe_check(const struct pelab_seqpe_encoder *e, const int32_t *coords, long U) {
    for (long i = 0; i < U * e->dims; i++) {
        if (coords[i] >= 0 && coords[i] < e->capacity) continue;
        char what[48] = "position";
        if (e->dims > 1) snprintf(what, sizeof what, "coordinate %ld of a position", i % e->dims);
        if (coords[i] < 0)
            return pelab_fail(PELAB_ERR_USAGE, "--pe seqpe: %s is negative (%d)", what, coords[i]);
        return pelab_fail(PELAB_ERR_USAGE,
                          "--pe seqpe: %s %d has more than %d digits in base %d (--seqpe-digits, "
                          "--seqpe-base: positions up to %lld)", what, coords[i], e->digits,
                          e->base, (long long)e->capacity - 1);
    }
    return PELAB_OK;
}

void pelab_seqpe_digits(const struct pelab_seqpe_encoder *e, const int32_t *coord, int32_t *tok) {
    const int k = e->digits;
    for (int c = 0; c < e->dims; c++) {
        int64_t v = coord[c];
        for (int i = k - 1; i >= 0; i--) {
            tok[c * k + i] = (int32_t)(v % e->base);
            v /= e->base;
        }
    }
    tok[e->seq - 1] = e->base; /* [CLS] */
}

void pelab_seqpe_acts_free(struct pelab_seqpe_acts *a) {
    pelab_real **bufs[] = {&a->x, &a->ln1, &a->rstd1, &a->qkv, &a->qh, &a->kh, &a->att, &a->atty,
                           &a->xmid, &a->ln2, &a->rstd2, &a->fch, &a->fchg, &a->cls, &a->lnf,
                           &a->rstdf, &a->out, &a->dres, &a->dln, &a->datty, &a->dqkv, &a->dqh,
                           &a->dkh, &a->datt, &a->dfch, &a->dfchg, &a->dcls, &a->dlnf};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(*bufs[i]);
    free(a->tok);
    memset(a, 0, sizeof *a);
}

int pelab_seqpe_acts_reserve(struct pelab_seqpe_acts *a, const struct pelab_seqpe_encoder *e, int U) {
    if (U <= a->cap) return PELAB_OK;
    pelab_seqpe_acts_free(a);
    const long L = e->layers, S = e->seq, W = e->width, D = e->out_dim, Hh = e->heads;
    const long NT = (long)U * S;
    int ok = 1;
#define ALLOC(buf, n) (ok = ok && ((buf) = malloc((size_t)(n) * sizeof *(buf))) != NULL)
    ALLOC(a->tok, NT);
    ALLOC(a->x, (L + 1) * NT * W);
    ALLOC(a->ln1, L * NT * W);
    ALLOC(a->rstd1, L * NT);
    ALLOC(a->qkv, L * NT * 3 * W);
    ALLOC(a->qh, L * NT * W);
    ALLOC(a->kh, L * NT * W);
    ALLOC(a->att, L * U * Hh * S * S);
    ALLOC(a->atty, L * NT * W);
    ALLOC(a->xmid, L * NT * W);
    ALLOC(a->ln2, L * NT * W);
    ALLOC(a->rstd2, L * NT);
    ALLOC(a->fch, L * NT * 4 * W);
    ALLOC(a->fchg, L * NT * 4 * W);
    ALLOC(a->cls, (long)U * W);
    ALLOC(a->lnf, (long)U * W);
    ALLOC(a->rstdf, U);
    ALLOC(a->out, (long)U * D);
    ALLOC(a->dres, NT * W);
    ALLOC(a->dln, NT * W);
    ALLOC(a->datty, NT * W);
    ALLOC(a->dqkv, NT * 3 * W);
    ALLOC(a->dqh, NT * W);
    ALLOC(a->dkh, NT * W);
    ALLOC(a->datt, (long)U * Hh * S * S);
    ALLOC(a->dfch, NT * 4 * W);
    ALLOC(a->dfchg, NT * 4 * W);
    ALLOC(a->dcls, (long)U * W);
    ALLOC(a->dlnf, (long)U * W);
#undef ALLOC
    if (!ok) {
        pelab_seqpe_acts_free(a);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the SeqPE encoder (%d positions)", U);
    }
    a->cap = U;
    return PELAB_OK;
}

/* (NT, 3W) rows → q, k (U,Hh,S,dh) head-major, or back (to_heads 0: q, k are gradients that are
 * written into the first two thirds of the rows). */
static void permute(pelab_real *rows, pelab_real *q, pelab_real *k, int U, int S, int Hh, int dh,
                    int to_heads) {
    const long W = (long)Hh * dh;
#pragma omp parallel for collapse(2) schedule(static)
    for (int u = 0; u < U; u++)
        for (int j = 0; j < S; j++)
            for (int h = 0; h < Hh; h++) {
                pelab_real *r = rows + ((long)u * S + j) * 3 * W + (long)h * dh;
                long o = (((long)u * Hh + h) * S + j) * dh;
                if (to_heads) {
                    memcpy(q + o, r, (size_t)dh * sizeof *q);
                    memcpy(k + o, r + W, (size_t)dh * sizeof *k);
                } else {
                    memcpy(r, q + o, (size_t)dh * sizeof *q);
                    memcpy(r + W, k + o, (size_t)dh * sizeof *k);
                }
            }
}

static struct pelab_softmax_attn attn_shape(const struct pelab_seqpe_encoder *e, int U) {
    const int dh = e->width / e->heads;
    return (struct pelab_softmax_attn){.B = U, .T = e->seq, .H = e->heads, .dq = dh, .dv = dh,
                                     .ldv = 3 * e->width, .ldo = e->width,
                                     .scale = (pelab_real)(1.0 / sqrt((double)dh))};
}

void pelab_seqpe_encoder_forward(struct pelab_ctx *ctx, const struct pelab_seqpe_encoder *e,
                                 struct pelab_seqpe_acts *a, const int32_t *coords, int U) {
    PELAB_ASSERT(U <= a->cap);
    const int S = e->seq, W = e->width, D = e->out_dim, n = e->dims, k = e->digits;
    const long NT = (long)U * S;
    a->U = U;
    for (int u = 0; u < U; u++) pelab_seqpe_digits(e, coords + (long)u * n, a->tok + (long)u * S);

    /* x0 = E_digit[tok] + E_place[j] (+ E_dim[c])                                     (NT,W) */
    const pelab_real *Ed = W_(e, e->digit_emb), *Ep = W_(e, e->place_emb);
    const pelab_real *Ec = e->dim_emb >= 0 ? W_(e, e->dim_emb) : NULL;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < NT; r++) {
        const int j = (int)(r % S);
        const pelab_real *d = Ed + (long)a->tok[r] * W, *p = Ep + (long)j * W;
        const pelab_real *c = Ec && j < n * k ? Ec + (long)(j / k) * W : NULL;
        pelab_real *x = a->x + r * W;
        for (int i = 0; i < W; i++) x[i] = d[i] + p[i] + (c ? c[i] : 0);
    }

    const struct pelab_softmax_attn s = attn_shape(e, U);
    for (int l = 0; l < e->layers; l++) {
        const struct pelab_seqpe_block *b = &e->block[l];
        pelab_real *x = a->x + l * NT * W, *xout = a->x + (l + 1) * NT * W;
        pelab_real *ln1 = a->ln1 + l * NT * W, *qkv = a->qkv + l * NT * 3 * W;
        pelab_real *qh = a->qh + l * NT * W, *kh = a->kh + l * NT * W;
        pelab_real *att = a->att + l * NT * e->heads * S, *atty = a->atty + l * NT * W;
        pelab_real *xmid = a->xmid + l * NT * W, *ln2 = a->ln2 + l * NT * W;
        pelab_real *fch = a->fch + l * NT * 4 * W, *fchg = a->fchg + l * NT * 4 * W;

        pelab_rmsnorm_forward(ln1, a->rstd1 + l * NT, x, W_(e, b->ln1), (int)NT, W);
        pelab_matmul_forward(ctx, qkv, ln1, W_(e, b->qkv), (int)NT, W, 3 * W);
        permute(qkv, qh, kh, U, S, e->heads, W / e->heads, 1);
        pelab_softmax_attn_forward(atty, att, qh, kh, qkv + 2 * W, &s, NULL);
        pelab_matmul_forward(ctx, xmid, atty, W_(e, b->proj), (int)NT, W, W);
        for (long i = 0; i < NT * W; i++) xmid[i] += x[i];
        pelab_rmsnorm_forward(ln2, a->rstd2 + l * NT, xmid, W_(e, b->ln2), (int)NT, W);
        pelab_matmul_forward(ctx, fch, ln2, W_(e, b->fc), (int)NT, W, 4 * W);
        pelab_gelu_forward(fchg, fch, NT * 4 * W);
        pelab_matmul_forward(ctx, xout, fchg, W_(e, b->fcproj), (int)NT, 4 * W, W);
        for (long i = 0; i < NT * W; i++) xout[i] += xmid[i];
    }

    /* e_p = W_out · RMSNorm(h_L[CLS])                                                  (U,D) */
    const pelab_real *hL = a->x + (long)e->layers * NT * W;
    for (int u = 0; u < U; u++)
        memcpy(a->cls + (long)u * W, hL + ((long)u * S + S - 1) * W, (size_t)W * sizeof *a->cls);
    if (e->lnf >= 0) pelab_rmsnorm_forward(a->lnf, a->rstdf, a->cls, W_(e, e->lnf), U, W);
    pelab_matmul_forward(ctx, a->out, e->lnf >= 0 ? a->lnf : a->cls, W_(e, e->out), U, W, D);
}

/* dE[row] += g for each token row, rows of dE shared by many tokens: threads split the columns
 * and walk the tokens in order, so each sum's order is fixed. */
static void embed_grads(const struct pelab_seqpe_encoder *e, const struct pelab_seqpe_acts *a,
                        const pelab_real *dx0, long NT) {
    const int S = e->seq, W = e->width, n = e->dims, k = e->digits;
    pelab_real *dEd = G_(e, e->digit_emb), *dEp = G_(e, e->place_emb);
    pelab_real *dEc = e->dim_emb >= 0 ? G_(e, e->dim_emb) : NULL;
#pragma omp parallel
    {
        long c0, c1;
        pelab_thread_slice(W, &c0, &c1);
        for (long r = 0; r < NT; r++) {
            const int j = (int)(r % S);
            const pelab_real *g = dx0 + r * W;
            pelab_real *d = dEd + (long)a->tok[r] * W, *p = dEp + (long)j * W;
            pelab_real *c = dEc && j < n * k ? dEc + (long)(j / k) * W : NULL;
            for (long i = c0; i < c1; i++) {
                d[i] += g[i];
                p[i] += g[i];
                if (c) c[i] += g[i];
            }
        }
    }
}

void pelab_seqpe_encoder_backward(struct pelab_ctx *ctx, const struct pelab_seqpe_encoder *e,
                                  struct pelab_seqpe_acts *a, const pelab_real *dout) {
    const int U = a->U, S = e->seq, W = e->width, D = e->out_dim;
    const long NT = (long)U * S;

    /* out → final norm → the [CLS] rows of the residual stream; the others get nothing */
    const int norm = e->lnf >= 0;
    pelab_real *dlnf = norm ? a->dlnf : a->dcls;
    memset(dlnf, 0, (size_t)U * W * sizeof *dlnf);
    pelab_matmul_backward(ctx, dlnf, G_(e, e->out), dout, norm ? a->lnf : a->cls, W_(e, e->out), U, W, D);
    if (norm) {
        memset(a->dcls, 0, (size_t)U * W * sizeof *a->dcls);
        pelab_rmsnorm_backward(a->dcls, G_(e, e->lnf), a->dlnf, a->cls, W_(e, e->lnf), a->rstdf, U, W);
    }
    memset(a->dres, 0, (size_t)NT * W * sizeof *a->dres);
    for (int u = 0; u < U; u++)
        memcpy(a->dres + ((long)u * S + S - 1) * W, a->dcls + (long)u * W, (size_t)W * sizeof *a->dres);

    const struct pelab_softmax_attn s = attn_shape(e, U);
    for (int l = e->layers - 1; l >= 0; l--) {
        const struct pelab_seqpe_block *b = &e->block[l];
        const pelab_real *x = a->x + l * NT * W, *ln1 = a->ln1 + l * NT * W;
        const pelab_real *qkv = a->qkv + l * NT * 3 * W;
        const pelab_real *qh = a->qh + l * NT * W, *kh = a->kh + l * NT * W;
        const pelab_real *att = a->att + l * NT * e->heads * S, *atty = a->atty + l * NT * W;
        const pelab_real *xmid = a->xmid + l * NT * W, *ln2 = a->ln2 + l * NT * W;
        const pelab_real *fch = a->fch + l * NT * 4 * W, *fchg = a->fchg + l * NT * 4 * W;

        /* MLP branch: x_{l+1} = m + GELU(RMSNorm(m)·W1ᵀ)·W2ᵀ */
        memset(a->dfchg, 0, (size_t)NT * 4 * W * sizeof *a->dfchg);
        pelab_matmul_backward(ctx, a->dfchg, G_(e, b->fcproj), a->dres, fchg, W_(e, b->fcproj), (int)NT, 4 * W,
                              W);
        pelab_gelu_backward(a->dfch, a->dfchg, fch, NT * 4 * W);
        memset(a->dln, 0, (size_t)NT * W * sizeof *a->dln);
        pelab_matmul_backward(ctx, a->dln, G_(e, b->fc), a->dfch, ln2, W_(e, b->fc), (int)NT, W, 4 * W);
        pelab_rmsnorm_backward(a->dres, G_(e, b->ln2), a->dln, xmid, W_(e, b->ln2), a->rstd2 + l * NT, (int)NT, W);

        /* attention branch: m = x + Attn(RMSNorm(x)·Wqkvᵀ)·Woᵀ */
        memset(a->datty, 0, (size_t)NT * W * sizeof *a->datty);
        pelab_matmul_backward(ctx, a->datty, G_(e, b->proj), a->dres, atty, W_(e, b->proj), (int)NT, W, W);
        pelab_softmax_attn_backward(a->dqh, a->dkh, a->dqkv + 2 * W, a->datt, a->datty, att, qh, kh,
                                    qkv + 2 * W, &s, NULL);
        permute(a->dqkv, a->dqh, a->dkh, U, S, e->heads, W / e->heads, 0);
        memset(a->dln, 0, (size_t)NT * W * sizeof *a->dln);
        pelab_matmul_backward(ctx, a->dln, G_(e, b->qkv), a->dqkv, ln1, W_(e, b->qkv), (int)NT, W, 3 * W);
        pelab_rmsnorm_backward(a->dres, G_(e, b->ln1), a->dln, x, W_(e, b->ln1), a->rstd1 + l * NT, (int)NT, W);
    }
    embed_grads(e, a, a->dres, NT);
}

/* --- distinct positions ----------------------------------------------------------------------- */

static int tuple_cmp(const int32_t *a, const int32_t *b, int n) {
    for (int c = 0; c < n; c++)
        if (a[c] != b[c]) return a[c] < b[c] ? -1 : 1;
    return 0;
}

/* Stable merge sort of the indices idx (N,) by their tuples; tmp (N,) scratch. */
static void sort_idx(int32_t *idx, int32_t *tmp, int N, const int32_t *coords, int n) {
    for (int w = 1; w < N; w *= 2) {
        for (int lo = 0; lo < N; lo += 2 * w) {
            int mid = lo + w < N ? lo + w : N, hi = lo + 2 * w < N ? lo + 2 * w : N;
            int i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                tmp[o++] = tuple_cmp(coords + (long)idx[j] * n, coords + (long)idx[i] * n, n) < 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[o++] = idx[i++];
            while (j < hi) tmp[o++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)N * sizeof *idx);
    }
}

int pelab_seqpe_unique(int32_t *uniq, int32_t *row, const int32_t *coords, int N, int n,
                       int32_t *scratch) {
    int32_t *idx = scratch, *tmp = scratch + N;
    for (int i = 0; i < N; i++) idx[i] = i;
    sort_idx(idx, tmp, N, coords, n);
    int U = 0;
    for (int i = 0; i < N; i++) {
        const int32_t *c = coords + (long)idx[i] * n;
        if (U == 0 || tuple_cmp(uniq + (long)(U - 1) * n, c, n) != 0) {
            memcpy(uniq + (long)U * n, c, (size_t)n * sizeof *c);
            U++;
        }
        row[idx[i]] = U - 1;
    }
    return U;
}
