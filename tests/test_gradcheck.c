/* Gradient checks in double precision, by central differences: every layer on every input and
 * parameter, each encoding's QK transform (PoPE's δ included, RoPE's length-extension methods),
 * each BIAS encoding's parameters (T5's tables, FIRE's MLP, c and ℓ), the learned table (direct
 * and interpolated), and the whole model for each encoding (SeqPE in each integration; its
 * encoder alone in test_seqpe; sinusoidal with P scaled, by its default σ and others, and not),
 * tied and untied, with and without dropout. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/gradcheck.h"
#include "pelab/model.h"
#include "pelab/status.h"
#include "attn/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/layers.h"

#define H_STEP 1e-6
#define ATOL 1e-8
#define RTOL 1e-6

static unsigned long long seed = 42;

static double *vec(long n, double lo, double hi) {
    double *x = calloc((size_t)n, sizeof *x);
    fill_uniform(x, n, lo, hi, &seed);
    return x;
}

static double weighted_sum(const double *w, const double *y, long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += w[i] * y[i];
    return s;
}

/* --- RMSNorm ---------------------------------------------------------------------------------- */
struct norm_ctx { int N, C; double *x, *g, *w, *out, *rstd; };
static double norm_f(void *p) {
    struct norm_ctx *c = p;
    pelab_rmsnorm_forward(c->out, c->rstd, c->x, c->g, c->N, c->C);
    return weighted_sum(c->w, c->out, (long)c->N * c->C);
}
static void check_rmsnorm(void) {
    struct norm_ctx c = {.N = 5, .C = 7};
    long n = (long)c.N * c.C;
    c.x = vec(n, -2, 2), c.g = vec(c.C, 0.5, 1.5), c.w = vec(n, -1, 1);
    c.out = vec(n, 0, 0), c.rstd = vec(c.N, 0, 0);
    double *dx = vec(n, 0, 0), *dg = vec(c.C, 0, 0);
    norm_f(&c);
    pelab_rmsnorm_backward(dx, dg, c.w, c.x, c.g, c.rstd, c.N, c.C);
    gradcheck("rmsnorm x", norm_f, &c, c.x, dx, n, H_STEP, ATOL, RTOL);
    gradcheck("rmsnorm gain", norm_f, &c, c.g, dg, c.C, H_STEP, ATOL, RTOL);
    free(c.x), free(c.g), free(c.w), free(c.out), free(c.rstd), free(dx), free(dg);
}

/* --- GELU ------------------------------------------------------------------------------------- */
struct gelu_ctx { long n; double *x, *w, *out; };
static double gelu_f(void *p) {
    struct gelu_ctx *c = p;
    pelab_gelu_forward(c->out, c->x, c->n);
    return weighted_sum(c->w, c->out, c->n);
}
static void check_gelu(void) {
    struct gelu_ctx c = {.n = 40};
    c.x = vec(c.n, -4, 4), c.w = vec(c.n, -1, 1), c.out = vec(c.n, 0, 0);
    double *dx = vec(c.n, 0, 0);
    pelab_gelu_backward(dx, c.w, c.x, c.n);
    gradcheck("gelu x", gelu_f, &c, c.x, dx, c.n, H_STEP, ATOL, RTOL);
    free(c.x), free(c.w), free(c.out), free(dx);
}

/* --- linear ----------------------------------------------------------------------------------- */
struct lin_ctx { int N, C, OC; double *x, *wt, *w, *out; };
static double lin_f(void *p) {
    struct lin_ctx *c = p;
    pelab_matmul_forward(test_ctx(), c->out, c->x, c->wt, c->N, c->C, c->OC);
    return weighted_sum(c->w, c->out, (long)c->N * c->OC);
}
static void check_linear(void) {
    struct lin_ctx c = {.N = 6, .C = 5, .OC = 7};
    c.x = vec((long)c.N * c.C, -1, 1), c.wt = vec((long)c.OC * c.C, -1, 1);
    c.w = vec((long)c.N * c.OC, -1, 1), c.out = vec((long)c.N * c.OC, 0, 0);
    double *dx = vec((long)c.N * c.C, 0, 0), *dwt = vec((long)c.OC * c.C, 0, 0);
    pelab_matmul_backward(test_ctx(), dx, dwt, c.w, c.x, c.wt, c.N, c.C, c.OC);
    gradcheck("linear input", lin_f, &c, c.x, dx, (long)c.N * c.C, H_STEP, ATOL, RTOL);
    gradcheck("linear weight", lin_f, &c, c.wt, dwt, (long)c.OC * c.C, H_STEP, ATOL, RTOL);
    free(c.x), free(c.wt), free(c.w), free(c.out), free(dx), free(dwt);
}

/* --- cross-entropy ---------------------------------------------------------------------------- */
struct ce_ctx { int N, V; double *logits, *stats, *losses; int32_t *targets; };
static double ce_f(void *p) {
    struct ce_ctx *c = p;
    double sum;
    pelab_crossentropy_forward(c->stats, c->losses, &sum, c->logits, c->targets, c->N, c->V);
    return sum;
}
static void check_crossentropy(void) {
    int32_t targets[6] = {3, -1, 0, 8, -1, 2};
    struct ce_ctx c = {6, 9, NULL, NULL, NULL, targets};
    long n = (long)c.N * c.V;
    c.logits = vec(n, -3, 3), c.stats = vec(2 * c.N, 0, 0), c.losses = vec(c.N, 0, 0);
    double *d = vec(n, 0, 0);
    ce_f(&c);
    pelab_crossentropy_backward(d, c.logits, c.stats, targets, 1, c.N, c.V);
    gradcheck("cross-entropy logits", ce_f, &c, c.logits, d, n, H_STEP, ATOL, RTOL);
    free(c.logits), free(c.stats), free(c.losses), free(d);
}

/* --- reference attention ---------------------------------------------------------------------- */
struct attn_ctx { struct pelab_attn_call s; double *q, *k, *v, *w, *out, *att; };
static double attn_f(void *p) {
    struct attn_ctx *c = p;
    pelab_attn_ref_forward(c->out, c->att, c->q, c->k, c->v, &c->s);
    return weighted_sum(c->w, c->out, (long)c->s.B * c->s.T * c->s.ldo);
}
static void check_attention(double dropout) {
    struct attn_ctx c = {.s = {.B = 2, .T = 5, .H = 2, .dq = 6, .dv = 3, .ldv = 2 * 3 + 2, .ldo = 2 * 3,
                          .scale = 0.4, .dropout = dropout, .key = 99, .site = 3}};
    const struct pelab_attn_call *s = &c.s;
    long nq = (long)s->B * s->H * s->T * s->dq, nv = (long)s->B * s->T * s->ldv;
    long no = (long)s->B * s->T * s->ldo;
    c.q = vec(nq, -1, 1), c.k = vec(nq, -1, 1), c.v = vec(nv, -1, 1), c.w = vec(no, -1, 1);
    c.out = vec(no, 0, 0), c.att = vec((long)s->B * s->H * s->T * s->T, 0, 0);
    double *dq = vec(nq, 0, 0), *dk = vec(nq, 0, 0), *dv = vec(nv, 0, 0);
    double *datt = vec((long)s->B * s->H * s->T * s->T, 0, 0);
    attn_f(&c);
    pelab_attn_ref_backward(dq, dk, dv, datt, c.w, c.att, c.q, c.k, c.v, s);
    char what[64];
    snprintf(what, sizeof what, "attention q (dropout %.1f)", dropout);
    gradcheck(what, attn_f, &c, c.q, dq, nq, H_STEP, ATOL, RTOL);
    snprintf(what, sizeof what, "attention k (dropout %.1f)", dropout);
    gradcheck(what, attn_f, &c, c.k, dk, nq, H_STEP, ATOL, RTOL);
    /* v is strided: the two padding columns per row must get exactly zero gradient */
    snprintf(what, sizeof what, "attention v (dropout %.1f)", dropout);
    gradcheck(what, attn_f, &c, c.v, dv, nv, H_STEP, ATOL, RTOL);
    free(c.q), free(c.k), free(c.v), free(c.w), free(c.out), free(c.att);
    free(dq), free(dk), free(dv), free(datt);
}

/* --- QK encodings through the interface ------------------------------------------------------- */
struct qk_ctx { struct pelab_posenc pe; struct pelab_params params; int B, T, ld; int32_t *pos;
                double *q, *k, *wq, *wk, *qo, *ko; };
static double qk_f(void *p) {
    struct qk_ctx *c = p;
    long n = (long)c->B * c->pe.H * c->T * c->pe.qk_dim;
    PELAB_ASSERT(pelab_posenc_prepare(&c->pe, c->pos, c->B, c->T) == PELAB_OK);
    pelab_posenc_qk_forward(&c->pe, 1, c->qo, c->ko, c->q, c->k, c->ld, c->pos, c->B, c->T);
    return weighted_sum(c->wq, c->qo, n) + weighted_sum(c->wk, c->ko, n);
}
static void check_qk(const char *label, const char *pe_name, const char *k1, const char *v1,
                     const char *k2, const char *v2) {
    struct qk_ctx c = {.B = 2, .T = 4};
    struct pelab_opts o = {0};
    if (k1) pelab_opts_set(&o, k1, v1);
    if (k2) pelab_opts_set(&o, k2, v2);
    const int D = 12, H = 2, d = 6;
    CHECK(pelab_posenc_init(&c.pe, pe_name, &o, &c.params, D, H, 2, 16) == PELAB_OK, "%s", pelab_last_error());
    c.pe.ctx = test_ctx();
    CHECK(pelab_params_alloc(&c.params) == PELAB_OK, "alloc");
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 5);
    if (c.pe.ops->init_params) c.pe.ops->init_params(&c.pe, &rng);
    /* δ outside [−2π, 0] in two places of layer 1, the layer qk_f runs: clamped, so zero
     * gradient there (layer 0 gets none at all) */
    const long out0 = (long)H * d, out1 = (long)H * d + 3; /* layer 1's δ[0][0] and δ[0][3] */
    if ((long)c.params.total > out1) c.params.data[out0] = 0.3, c.params.data[out1] = -7.0;
    c.ld = D + 5;
    long n_in = (long)c.B * c.T * c.ld, n_out = (long)c.B * H * c.T * c.pe.qk_dim;
    int32_t pos[8] = {3, 4, 9, 10, 0, 1, 2, 700};
    c.pos = pos;
    c.q = vec(n_in, -2, 2), c.k = vec(n_in, -2, 2), c.wq = vec(n_out, -1, 1), c.wk = vec(n_out, -1, 1);
    c.qo = vec(n_out, 0, 0), c.ko = vec(n_out, 0, 0);
    double *dq = vec(n_in, 0, 0), *dk = vec(n_in, 0, 0);
    qk_f(&c);
    pelab_posenc_qk_backward(&c.pe, 1, dq, dk, c.wq, c.wk, c.q, c.k, c.ld, pos, c.B, c.T);
    /* the stride's gap columns are never written by the backward: compare only real columns by
     * giving them the analytic value 0 and a function that ignores them (the numeric derivative
     * there is exactly 0) */
    for (long i = 0; i < n_in; i++)
        if (i % c.ld >= D) dq[i] = dk[i] = 0;
    char what[80];
    snprintf(what, sizeof what, "%s q", label);
    gradcheck(what, qk_f, &c, c.q, dq, n_in, H_STEP, ATOL, RTOL);
    snprintf(what, sizeof what, "%s k", label);
    gradcheck(what, qk_f, &c, c.k, dk, n_in, H_STEP, ATOL, RTOL);
    /* PoPE's δ: clamped entries (0 and 3) get no gradient; without the clamp they do; frozen δ
     * gets none anywhere (the numeric derivative is not 0 there, so it is not compared) */
    const int unclamped = k1 && strcmp(k1, "pope-delta-clamp") == 0 && strcmp(v1, "off") == 0;
    const int frozen = k1 && strcmp(k1, "pope-delta-train") == 0 && strcmp(v1, "off") == 0;
    if (c.params.total && frozen) {
        double most = 0;
        for (size_t i = 0; i < c.params.total; i++) most = fmax(most, fabs(c.params.grad[i]));
        CHECK(most == 0, "%s: frozen δ got a gradient of %.3g", label, most);
    } else if (c.params.total) {
        snprintf(what, sizeof what, "%s parameters", label);
        gradcheck(what, qk_f, &c, c.params.data, c.params.grad, (long)c.params.total, H_STEP, ATOL, RTOL);
        if (unclamped)
            CHECK(c.params.grad[out0] != 0 && c.params.grad[out1] != 0, "%s: δ outside [−2π, 0] must get a gradient", label);
        else
            CHECK(c.params.grad[out0] == 0 && c.params.grad[out1] == 0 && c.params.grad[out0 + 1] != 0,
                  "%s: clamped δ must get no gradient, the others some", label);
    }
    free(c.q), free(c.k), free(c.wq), free(c.wk), free(c.qo), free(c.ko), free(dq), free(dk);
    pelab_posenc_free(&c.pe);
    pelab_params_free(&c.params);
}

/* --- EMBED encodings through the interface ---------------------------------------------------- */
struct embed_ctx { struct pelab_posenc pe; struct pelab_params params; int B, T; int32_t *pos;
                   double *w, *out; };
static double embed_f(void *p) {
    struct embed_ctx *c = p;
    long n = (long)c->B * c->T * c->pe.D;
    memset(c->out, 0, (size_t)n * sizeof *c->out);
    PELAB_ASSERT(pelab_posenc_prepare(&c->pe, c->pos, c->B, c->T) == PELAB_OK);
    c->pe.ops->embed_forward(&c->pe, c->out, c->pos, c->B, c->T);
    return weighted_sum(c->w, c->out, n);
}
/* The learned table's gradient, read directly and through interpolation (positions up to 21
 * against a table of `rows`). */
static void check_embed(const char *label, const char *k1, const char *v1, const char *k2,
                        const char *v2) {
    struct embed_ctx c = {.B = 2, .T = 4};
    struct pelab_opts o = {0};
    if (k1) pelab_opts_set(&o, k1, v1);
    if (k2) pelab_opts_set(&o, k2, v2);
    CHECK(pelab_posenc_init(&c.pe, "learned", &o, &c.params, 6, 2, 2, 4) == PELAB_OK, "%s", pelab_last_error());
    c.pe.ctx = test_ctx();
    CHECK(pelab_params_alloc(&c.params) == PELAB_OK, "alloc");
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 6);
    c.pe.ops->init_params(&c.pe, &rng);
    int32_t pos[8] = {0, 1, 2, 3, 21, 5, 5, 11}; /* a repeated position sums its gradients */
    c.pos = pos;
    long n = (long)c.B * c.T * c.pe.D;
    c.w = vec(n, -1, 1), c.out = vec(n, 0, 0);
    embed_f(&c);
    pelab_params_zero_grad(&c.params);
    c.pe.ops->embed_backward(&c.pe, c.w, pos, c.B, c.T);
    char what[80];
    snprintf(what, sizeof what, "%s table", label);
    gradcheck(what, embed_f, &c, c.params.data, c.params.grad, (long)c.params.total, H_STEP, ATOL, RTOL);
    free(c.w), free(c.out);
    pelab_posenc_free(&c.pe);
    pelab_params_free(&c.params);
}

/* --- BIAS encodings through the interface ----------------------------------------------------- */
/* Tiles of (query positions × key positions): contiguous below L, crossing L, scattered (too wide
 * a range to tabulate, one query far past L), rectangular, and negative positions. */
enum { N_TILES = 5 };
static const int32_t tile_q0[] = {0, 1, 2, 3, 4, 5}, tile_q1[] = {10, 11, 12, 13, 14, 15, 16, 17},
                     tile_q2[] = {3, 4, 9, 10, 0, 1, 2, 700}, tile_q3[] = {20, 21, 22},
                     tile_k3[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, tile_q4[] = {-3, 2},
                     tile_k4[] = {-5, -3, 0};
static const struct { const int32_t *q, *k; int nq, nk; } tiles[N_TILES] = {
    {tile_q0, tile_q0, 6, 6}, {tile_q1, tile_q1, 8, 8}, {tile_q2, tile_q2, 8, 8},
    {tile_q3, tile_k3, 3, 10}, {tile_q4, tile_k4, 2, 3}};
#define BIAS_LAYERS 2
#define BIAS_H 2
#define TILE_MAX 80

struct bias_ctx { struct pelab_posenc pe; struct pelab_params params;
                  double w[BIAS_LAYERS][BIAS_H][N_TILES][TILE_MAX]; };
/* Σ over layers, heads, tiles and unmasked entries (s ≤ t) of w · bias(t, s). */
static double bias_f(void *p) {
    struct bias_ctx *c = p;
    double out[TILE_MAX], sum = 0;
    for (int l = 0; l < BIAS_LAYERS; l++)
        for (int h = 0; h < BIAS_H; h++)
            for (int t = 0; t < N_TILES; t++) {
                c->pe.ops->bias_tile(&c->pe, l, h, out, tiles[t].q, tiles[t].nq, tiles[t].k, tiles[t].nk);
                for (int i = 0; i < tiles[t].nq; i++)
                    for (int j = 0; j < tiles[t].nk; j++)
                        if (tiles[t].k[j] <= tiles[t].q[i])
                            sum += c->w[l][h][t][i * tiles[t].nk + j] * out[i * tiles[t].nk + j];
            }
    return sum;
}
static void bias_backward(struct bias_ctx *c) {
    for (int l = 0; l < BIAS_LAYERS; l++)
        for (int h = 0; h < BIAS_H; h++)
            for (int t = 0; t < N_TILES; t++) /* masked entries get a weight too: ignored */
                c->pe.ops->bias_tile_backward(&c->pe, l, h,
                                              pelab_posenc_table_grad(&c->pe),
                                              c->w[l][h][t], tiles[t].q, tiles[t].nq, tiles[t].k, tiles[t].nk);
}
/* Every parameter of a BIAS encoding; `set` (name suffix, value) pairs move FIRE's c and ℓ off
 * their init (negative values too, through |c| and |ℓ|), and T5's table off zero. */
static void check_bias(const char *label, const char *pe_name, const char *const *kv,
                       const char *const *set) {
    static struct bias_ctx c;
    memset(&c, 0, sizeof c);
    struct pelab_opts o = {0};
    for (; kv && kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    /* max_seq 12: L = 12·|ℓ| lies inside the second tile's queries */
    CHECK(pelab_posenc_init(&c.pe, pe_name, &o, &c.params, 8, BIAS_H, BIAS_LAYERS, 12) == PELAB_OK, "%s: %s",
          label, pelab_last_error());
    c.pe.ctx = test_ctx();
    CHECK(pelab_params_alloc(&c.params) == PELAB_OK, "alloc");
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 9);
    c.pe.ops->init_params(&c.pe, &rng);
    for (int i = 0; i < c.params.count; i++) {
        const struct pelab_param *p = &c.params.list[i];
        size_t len = strlen(p->name);
        if (strstr(p->name, ".t5."))
            for (size_t j = 0; j < p->size; j++) c.params.data[p->offset + j] = pelab_rng_normal(&rng);
        for (const char *const *s = set; s && s[0]; s += 2)
            if (len >= strlen(s[0]) && strcmp(p->name + len - strlen(s[0]), s[0]) == 0)
                c.params.data[p->offset] = atof(s[1]);
    }
    fill_uniform(&c.w[0][0][0][0], (long)(sizeof c.w / sizeof(double)), -1, 1, &seed);
    pelab_params_zero_grad(&c.params);
    bias_backward(&c);
    double *grad = malloc(c.params.total * sizeof *grad);
    memcpy(grad, c.params.grad, c.params.total * sizeof *grad);
    for (int i = 0; i < c.params.count; i++) {
        const struct pelab_param *p = &c.params.list[i];
        char what[120];
        snprintf(what, sizeof what, "%s: %s", label, p->name);
        gradcheck(what, bias_f, &c, c.params.data + p->offset, grad + p->offset, (long)p->size,
                  H_STEP, ATOL, RTOL);
    }
    /* gradients accumulate: a second backward adds the same again */
    bias_backward(&c);
    double off = 0;
    for (size_t i = 0; i < c.params.total; i++) off = fmax(off, fabs(c.params.grad[i] - 2 * grad[i]));
    CHECK(off < 1e-12, "%s: a second backward added %.3g off the first one", label, off);
    free(grad);
    pelab_posenc_free(&c.pe);
    pelab_params_free(&c.params);
}

/* --- the whole model -------------------------------------------------------------------------- */
struct model_ctx { struct pelab_model m; int B, T; int32_t *tokens, *targets, *pos; };
static double model_f(void *p) {
    struct model_ctx *c = p;
    pelab_model_forward(&c->m, c->tokens, c->targets, c->pos, c->B, c->T);
    return c->m.loss;
}
static void check_model(const char *label, const char *const *kv, double dropout) {
    struct model_ctx c = {.B = 2, .T = 6};
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "d-model", "8");
    pelab_opts_set(&o, "heads", "2");
    pelab_opts_set(&o, "layers", "2");
    pelab_opts_set(&o, "mlp-mult", "2");
    for (; kv && kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    const int V = 7;
    int rc = pelab_model_init(&c.m, &o, V, c.T);
    CHECK(rc == PELAB_OK, "%s: %s", label, pelab_last_error());
    if (rc) return;
    pelab_model_init_weights(&c.m, 3);
    /* gains away from 1 and larger weights, so every term of the gradient matters */
    for (size_t i = 0; i < c.m.params.total; i++) {
        seed = seed * 6364136223846793005ull + 1;
        c.m.params.data[i] += (pelab_real)(0.3 * ((double)(seed >> 11) * 0x1.0p-53 - 0.5));
    }
    int32_t tokens[12] = {1, 5, 2, 6, 0, 3, 4, 4, 1, 0, 6, 2};
    int32_t targets[12] = {5, 2, -1, 0, 3, 1, -1, -1, 0, 6, 2, 4};
    int32_t pos[12] = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15};
    c.tokens = tokens, c.targets = targets, c.pos = pos;
    c.m.cfg.dropout = dropout;
    c.m.training = dropout > 0;
    c.m.dropout_key = 1234;
    model_f(&c);
    pelab_params_zero_grad(&c.m.params);
    pelab_model_backward(&c.m, 1);
    double *grad = malloc(c.m.params.total * sizeof *grad);
    memcpy(grad, c.m.params.grad, c.m.params.total * sizeof *grad);
    for (int i = 0; i < c.m.params.count; i++) {
        const struct pelab_param *p = &c.m.params.list[i];
        char what[120];
        snprintf(what, sizeof what, "%s: %s", label, p->name);
        gradcheck(what, model_f, &c, c.m.params.data + p->offset, grad + p->offset, (long)p->size,
                  H_STEP, ATOL, RTOL);
    }
    free(grad);
    pelab_model_free(&c.m);
}

/* --- the patch model (image task): patch embedding, class token, classifier ----------------- */
struct patch_ctx { struct pelab_model m; int B, T; int32_t tokens[10], targets[10], pos[20]; double in[10 * 5]; };
static double patch_f(void *p) {
    struct patch_ctx *c = p;
    pelab_model_set_inputs(&c->m, c->in);
    pelab_model_forward(&c->m, c->tokens, c->targets, c->pos, c->B, c->T);
    return c->m.loss;
}
/* B 2 sequences of a class token and a 2 × 2 grid of patches of 5 values, 4 classes, positions
 * (row, column) from 1 with the class token at (0, 0), or raster 0..4 (dims 1); bidirectional. */
static void check_patch_model(const char *label, const char *const *kv, int dims, double dropout) {
    enum { P = 5, V = 4 };
    struct patch_ctx c = {.B = 2, .T = 5};
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "d-model", "8");
    pelab_opts_set(&o, "heads", "2");
    pelab_opts_set(&o, "layers", "2");
    pelab_opts_set(&o, "mlp-mult", "2");
    for (; kv && kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    const struct pelab_model_io io = {P, {dims, 1, 2}};
    int rc = pelab_model_init_io(&c.m, &o, V, c.T, &io);
    CHECK(rc == PELAB_OK, "%s: %s", label, pelab_last_error());
    if (rc) return;
    CHECK(c.m.patch_w >= 0 && c.m.patch_b >= 0 && c.m.cls >= 0 && c.m.lm_head >= 0 && c.m.wte < 0,
          "%s: a patch model has patch_emb, cls_token and a classifier, and no token embedding", label);
    pelab_model_init_weights(&c.m, 3);
    for (size_t i = 0; i < c.m.params.total; i++) {
        seed = seed * 6364136223846793005ull + 1;
        c.m.params.data[i] += (pelab_real)(0.3 * ((double)(seed >> 11) * 0x1.0p-53 - 0.5));
    }
    fill_uniform(c.in, 10 * P, -1, 1, &seed);
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 5; t++) {
            c.tokens[b * 5 + t] = V;
            c.targets[b * 5 + t] = t == 0 ? (b ? 3 : 1) : -1;
            int32_t *q = c.pos + (b * 5 + t) * dims;
            if (dims == 1) q[0] = t;
            else q[0] = t ? 1 + (t - 1) / 2 : 0, q[1] = t ? 1 + (t - 1) % 2 : 0;
        }
    c.m.cfg.dropout = dropout;
    c.m.training = dropout > 0;
    c.m.dropout_key = 99;
    const double l0 = patch_f(&c);
    pelab_params_zero_grad(&c.m.params);
    pelab_model_backward(&c.m, 1);
    double *grad = malloc(c.m.params.total * sizeof *grad);
    memcpy(grad, c.m.params.grad, c.m.params.total * sizeof *grad);
    for (int i = 0; i < c.m.params.count; i++) {
        const struct pelab_param *p = &c.m.params.list[i];
        char what[120];
        snprintf(what, sizeof what, "%s: %s", label, p->name);
        gradcheck(what, patch_f, &c, c.m.params.data + p->offset, grad + p->offset, (long)p->size,
                  H_STEP, ATOL, RTOL);
    }
    /* the class token's input row is never read; a patch's is */
    c.in[0] += 5, c.in[5 * P] -= 3;
    CHECK(patch_f(&c) == l0, "%s: the class token's input row changed the loss", label);
    c.in[P + 2] += 0.5;
    CHECK(fabs(patch_f(&c) - l0) > 1e-9, "%s: a patch's input did not change the loss", label);
    free(grad);
    pelab_model_free(&c.m);
}

int main(void) {
    printf("layers\n");
    check_rmsnorm();
    check_gelu();
    check_linear();
    check_crossentropy();
    check_attention(0);
    check_attention(0.3);
    printf("QK encodings\n");
    check_qk("rope interleaved", "rope", NULL, NULL, NULL, NULL);
    check_qk("rope half", "rope", "rope-layout", "half", NULL, NULL);
    check_qk("pope", "pope", "pope-delta-init", "uniform", NULL, NULL);
    check_qk("pope softplus off", "pope", "pope-softplus", "off", "pope-delta-init", "uniform");
    check_qk("pope delta off", "pope", "pope-delta", "off", NULL, NULL);
    check_qk("pope clamp off", "pope", "pope-delta-clamp", "off", "pope-delta-init", "uniform");
    check_qk("pope delta frozen", "pope", "pope-delta-train", "off", "pope-delta-init", "uniform");
    check_qk("pope offset 2", "pope", "pope-delta-init", "offset", "pope-delta-offset", "2");
    check_qk("xpos", "xpos", NULL, NULL, NULL, NULL);
    check_qk("xpos fast decay", "xpos", "xpos-scale-base", "256", "xpos-gamma", "0.2");
    check_qk("rope resonance", "rope", "rope-resonance", "on", NULL, NULL);
    check_qk("rope pi", "rope", "rope-scaling", "pi", "rope-scale", "3");
    check_qk("rope ntk", "rope", "rope-scaling", "ntk", "rope-scale", "4");
    check_qk("rope dynamic-ntk", "rope", "rope-scaling", "dynamic-ntk", "rope-scale", "2");
    check_qk("rope yarn", "rope", "rope-scaling", "yarn", "rope-scale", "4");
    printf("EMBED encodings\n");
    check_embed("learned", "ape-max-len", "22", NULL, NULL);
    check_embed("learned interpolated", "ape-max-len", "9", "ape-extend", "interpolate");
    printf("BIAS encodings\n");
    check_bias("t5 shared", "t5", (const char *const[]){"t5-buckets", "8", "t5-max-distance", "20", NULL}, NULL);
    check_bias("t5 per layer", "t5", (const char *const[]){"t5-table", "per-layer", "t5-buckets", "6", "t5-max-distance", "5", NULL}, NULL);
    check_bias("fire", "fire", (const char *const[]){"fire-width", "8", NULL},
               (const char *const[]){".c", "0.37", ".ell", "1.07", NULL});
    check_bias("fire |c|, |ℓ| < 0", "fire", (const char *const[]){"fire-width", "5", "fire-depth", "3", NULL},
               (const char *const[]){".c", "-0.2", ".ell", "-0.93", NULL});
    check_bias("fire depth 0", "fire", (const char *const[]){"fire-depth", "0", NULL},
               (const char *const[]){".c", "0.25", ".ell", "1.3", NULL});
    check_bias("fire-shared", "fire-shared", (const char *const[]){"fire-width", "6", NULL},
               (const char *const[]){".c", "0.15", ".ell", "0.8", NULL});
    printf("whole model\n");
    check_model("nope", (const char *const[]){"pe", "nope", NULL}, 0);
    check_model("rope", (const char *const[]){"pe", "rope", NULL}, 0);
    check_model("rope half untied", (const char *const[]){"pe", "rope", "rope-layout", "half", "tied", "off", NULL}, 0);
    check_model("pope", (const char *const[]){"pe", "pope", "pope-delta-init", "uniform", NULL}, 0);
    check_model("pope no softplus", (const char *const[]){"pe", "pope", "pope-softplus", "off", NULL}, 0);
    check_model("pope no clamp", (const char *const[]){"pe", "pope", "pope-delta-clamp", "off", "pope-base", "100", NULL}, 0);
    check_model("pope offset 1", (const char *const[]){"pe", "pope", "pope-delta-init", "offset", NULL}, 0);
    check_model("pope dropout", (const char *const[]){"pe", "pope", "pope-delta-init", "uniform", NULL}, 0.25);
    check_model("rope dropout", (const char *const[]){"pe", "rope", NULL}, 0.25);
    check_model("learned", (const char *const[]){"pe", "learned", "ape-max-len", "16", NULL}, 0);
    check_model("learned interpolated", (const char *const[]){"pe", "learned", "ape-max-len", "8", "ape-extend", "interpolate", NULL}, 0);
    check_model("learned dropout untied", (const char *const[]){"pe", "learned", "ape-max-len", "16", "tied", "off", NULL}, 0.25);
    check_model("sinusoidal", (const char *const[]){"pe", "sinusoidal", NULL}, 0); /* E[tok] + 0.02·P */
    check_model("sinusoidal scale 1 untied", (const char *const[]){"pe", "sinusoidal", "sin-scale", "1", "tied", "off", NULL}, 0);
    check_model("sinusoidal scale 0.3 dropout", (const char *const[]){"pe", "sinusoidal", "sin-scale", "0.3", NULL}, 0.25);
    check_model("xpos", (const char *const[]){"pe", "xpos", NULL}, 0);
    check_model("xpos fast decay", (const char *const[]){"pe", "xpos", "xpos-scale-base", "4", NULL}, 0);
    check_model("rope resonance", (const char *const[]){"pe", "rope", "rope-resonance", "on", NULL}, 0);
    check_model("rope yarn", (const char *const[]){"pe", "rope", "rope-scaling", "yarn", "rope-scale", "4", "rope-original-len", "64", NULL}, 0);
    check_model("rope dynamic-ntk", (const char *const[]){"pe", "rope", "rope-scaling", "dynamic-ntk", "rope-scale", "2", NULL}, 0);
    /* one per bias encoding, small MLPs: the interface checks above cover the encodings' own
     * parameters in depth; here their place in the model (ALiBi's 3 heads take both slope rules;
     * the model's second row starts past FIRE's L) */
    check_model("alibi 3 heads", (const char *const[]){"pe", "alibi", "d-model", "6", "heads", "3", NULL}, 0);
    check_model("t5 per layer", (const char *const[]){"pe", "t5", "t5-table", "per-layer", "t5-buckets", "6", "t5-max-distance", "5", NULL}, 0);
    check_model("fire dropout", (const char *const[]){"pe", "fire", "fire-width", "6", NULL}, 0.25);
    check_model("fire-shared", (const char *const[]){"pe", "fire-shared", "fire-width", "5", "fire-depth", "3", NULL}, 0);
    /* SeqPE: its encoder (1 block, base 10, 2 digits) in each integration; the second row's
     * positions 10..15 share no digit sequence with the first's */
    check_model("seqpe input", (const char *const[]){"pe", "seqpe", "seqpe-digits", "2", "seqpe-layers", "1", "seqpe-width", "4", "seqpe-heads", "1", NULL}, 0);
    check_model("seqpe attn-add per layer", (const char *const[]){"pe", "seqpe", "seqpe-mode", "attn-add", "seqpe-proj", "per-layer", "seqpe-digits", "2", "seqpe-layers", "1", "seqpe-width", "4", "seqpe-heads", "1", NULL}, 0);
    check_model("seqpe attn-mul", (const char *const[]){"pe", "seqpe", "seqpe-mode", "attn-mul", "seqpe-digits", "2", "seqpe-layers", "1", "seqpe-width", "4", "seqpe-heads", "1", NULL}, 0);
    check_model("seqpe attn-bias dropout", (const char *const[]){"pe", "seqpe", "seqpe-mode", "attn-bias", "seqpe-digits", "2", "seqpe-layers", "1", "seqpe-width", "4", "seqpe-heads", "2", NULL}, 0.25);
    printf("patch model (image task)\n");
    check_patch_model("patches nope 2-D", (const char *const[]){"pe", "nope", NULL}, 2, 0);
    check_patch_model("patches rope raster dropout", (const char *const[]){"pe", "rope", NULL}, 1, 0.25);
    check_patch_model("patches learned raster", (const char *const[]){"pe", "learned", "ape-max-len", "5", NULL}, 1, 0);
    return check_report("test_gradcheck");
}
