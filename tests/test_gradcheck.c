/* Gradient checks in double precision, by central differences: every layer on every input and
 * parameter; then, for every case of the one list (lib/models.h: each registered encoding with its
 * defaults and each setting of its contract), the encoding alone at each site it acts at (QK: q, k
 * and its parameters; EMBED and BIAS: its parameters, BIAS at two points of them and on tiles
 * below, across and past FIRE's L), the whole model (tied, and untied with dropout; the defaults
 * at 3 heads too) and, for the encodings of images and those that allow bidirectional attention,
 * the patch model. PoPE's clamp of δ is PoPE's own check. SeqPE's encoder alone and its
 * regularisers: test_seqpe. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/gradcheck.h"
#include "lib/models.h"
#include "pelab/model.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "attn/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/layers.h"


static unsigned long long seed = 42;

/* The draws of a case's check from its label alone (FNV-1a), so that they do not move when cases
 * are added before it. */
static void seed_from(const char *label) {
    seed = 14695981039346656037ull;
    for (const char *c = label; *c; c++) seed = (seed ^ (unsigned char)*c) * 1099511628211ull;
}

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
    gradcheck("rmsnorm x", norm_f, &c, c.x, dx, n, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    gradcheck("rmsnorm gain", norm_f, &c, c.g, dg, c.C, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
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
    gradcheck("gelu x", gelu_f, &c, c.x, dx, c.n, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
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
    gradcheck("linear input", lin_f, &c, c.x, dx, (long)c.N * c.C, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    gradcheck("linear weight", lin_f, &c, c.wt, dwt, (long)c.OC * c.C, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
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
    gradcheck("cross-entropy logits", ce_f, &c, c.logits, d, n, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
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
    gradcheck(what, attn_f, &c, c.q, dq, nq, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    snprintf(what, sizeof what, "attention k (dropout %.1f)", dropout);
    gradcheck(what, attn_f, &c, c.k, dk, nq, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    /* v is strided: the two padding columns per row must get exactly zero gradient */
    snprintf(what, sizeof what, "attention v (dropout %.1f)", dropout);
    gradcheck(what, attn_f, &c, c.v, dv, nv, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    free(c.q), free(c.k), free(c.v), free(c.w), free(c.out), free(c.att);
    free(dq), free(dk), free(dv), free(datt);
}

/* --- the encodings: the one list of cases (lib/models.h) ---------------------------------------- */

/* An encoding's parameters moved off their initial values, so that no gradient hides at a
 * special value: each entry x becomes scale·x plus, where x is 0 or `every`, a draw of N(0, spread²)
 * (T5's table, PoPE's δ, biases; every entry of a network whose weights start small, so that its
 * gradients stand above a central difference's rounding). With scale 1.05 and −0.93, FIRE's ℓ = 1
 * becomes 1.05 and −0.93 (L = 12·|ℓ| falls between positions, and |c|, |ℓ| are taken of negative
 * values too). */
static void move_params(struct pelab_posenc *pe, double scale, double spread, int every, uint64_t draw) {
    if (pe->param_end == pe->param_first) return;
    struct pelab_rng rng;
    pelab_rng_seed(&rng, draw);
    pelab_real *x = pe->params->data + pe->params->list[pe->param_first].offset;
    const long n = (long)pelab_posenc_grad_count(pe);
    for (long i = 0; i < n; i++) x[i] = scale * x[i] + (every || x[i] == 0 ? spread * pelab_rng_normal(&rng) : 0);
}

/* The case's encoding alone (pe_case_init) with its parameters allocated and initialised, or 0
 * after saying why it refuses the shape (a usage error: a width it cannot split, say). */
static int init_alone(struct pelab_posenc *pe, struct pelab_params *params, const struct pe_case *c, int D,
                      int H, int layers, int max_seq) {
    memset(params, 0, sizeof *params);
    int rc = pe_case_init(pe, params, c, D, H, layers, max_seq);
    if (rc == PELAB_ERR_USAGE) {
        printf("  %-40s refuses D %d, H %d: %s\n", c->label, D, H, pelab_last_error());
        pelab_posenc_free(pe);
        pelab_params_free(params);
        return 0;
    }
    CHECK(rc == PELAB_OK && pelab_params_alloc(params) == PELAB_OK, "%s: %s", c->label, pelab_last_error());
    if (rc) return 0;
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 5);
    if (pe->ops->init_params) pe->ops->init_params(pe, &rng);
    return 1;
}

static void free_alone(struct pelab_posenc *pe, struct pelab_params *params) {
    pelab_posenc_free(pe);
    pelab_params_free(params);
}

/* Whether the case's encoding accepts a width D over H heads. */
static int pe_case_init_fits(const struct pe_case *c, int D, int H) {
    struct pelab_posenc pe;
    struct pelab_params params = {0};
    const int ok = pe_case_init(&pe, &params, c, D, H, 2, 16) == PELAB_OK;
    free_alone(&pe, &params);
    return ok;
}

/* --- QK: q and k of layer 1 (inside rows `ld` apart), and the encoding's parameters ------------- */
struct qk_ctx { struct pelab_posenc pe; struct pelab_params params; int B, T, ld; int32_t *pos;
                double *q, *k, *wq, *wk, *qo, *ko; };
static double qk_f(void *p) {
    struct qk_ctx *c = p;
    long n = (long)c->B * c->pe.H * c->T * c->pe.qk_dim;
    PELAB_ASSERT(pelab_posenc_prepare(&c->pe, c->pos, c->B, c->T) == PELAB_OK);
    pelab_posenc_qk_forward(&c->pe, 1, c->qo, c->ko, c->q, c->k, c->ld, c->pos, c->B, c->T);
    return weighted_sum(c->wq, c->qo, n) + weighted_sum(c->wk, c->ko, n);
}
/* Positions of the QK check, two rows of 4: the second spanning far past the training length (16);
 * or near one another. */
static const int qk_far[8] = {3, 4, 9, 10, 0, 1, 2, 700}, qk_near[8] = {3, 4, 9, 10, 12, 13, 14, 15};

/* Sets up c for case v at positions `at` (its parameters moved by move_params when `move`), runs
 * the forward and the backward into dq, dk (n_in each) and the parameter gradients; 0 when the
 * encoding refuses the shape or the positions (said), or does not act at QK. */
static int qk_setup(struct qk_ctx *c, const struct pe_case *v, const int *at, int move, double **dq, double **dk) {
    memset(c, 0, sizeof *c);
    seed_from(v->label);
    c->B = 2, c->T = 4;
    /* head width 6, or 8 for an encoding that splits it in four (2-D rotations) */
    const int H = 2, D = pe_case_init_fits(v, 12, H) ? 12 : 16;
    if (!init_alone(&c->pe, &c->params, v, D, H, 2, 16)) return 0;
    if (!(c->pe.sites & PELAB_SITE_QK)) {
        free_alone(&c->pe, &c->params);
        return 0;
    }
    if (move) move_params(&c->pe, 1, 0.2, 1, 8);
    c->ld = D + 5;
    long n_in = (long)c->B * c->T * c->ld, n_out = (long)c->B * H * c->T * c->pe.qk_dim;
    c->pos = malloc(sizeof(int32_t) * 8 * 2);
    for (int i = 0; i < 8; i++) pe_place(c->pos + i * v->layout.dims, at[i], &v->layout);
    if (pelab_posenc_prepare(&c->pe, c->pos, c->B, c->T) == PELAB_ERR_USAGE) {
        printf("  %-40s refuses positions to %d: %s\n", v->label, at[7], pelab_last_error());
        free(c->pos);
        free_alone(&c->pe, &c->params);
        return 0;
    }
    /* weights of the outputs of order 1, as the inputs: the gradients stay of order 1 against the
     * tolerance's absolute floor */
    c->q = vec(n_in, -2, 2), c->k = vec(n_in, -2, 2), c->wq = vec(n_out, -1, 1), c->wk = vec(n_out, -1, 1);
    c->qo = vec(n_out, 0, 0), c->ko = vec(n_out, 0, 0);
    *dq = vec(n_in, 0, 0), *dk = vec(n_in, 0, 0);
    qk_f(c);
    pelab_params_zero_grad(&c->params);
    pelab_posenc_qk_backward(&c->pe, 1, *dq, *dk, c->wq, c->wk, c->q, c->k, c->ld, c->pos, c->B, c->T);
    pelab_posenc_backward_end(&c->pe);
    /* the stride's gap columns are never written by the backward: compare only real columns by
     * giving them the analytic value 0 and a function that ignores them (the numeric derivative
     * there is exactly 0) */
    for (long i = 0; i < n_in; i++)
        if (i % c->ld >= D) (*dq)[i] = (*dk)[i] = 0;
    return 1;
}
static void qk_free(struct qk_ctx *c, double *dq, double *dk) {
    free(c->q), free(c->k), free(c->wq), free(c->wk), free(c->qo), free(c->ko), free(c->pos), free(dq), free(dk);
    free_alone(&c->pe, &c->params);
}
/* At the near positions, and at the far ones unless the encoding's outputs there are beyond what
 * a float64 central difference resolves (xPos with a fast decay scales q and k by ζ^(∓n/scale_base)
 * over a row's span n: 1e±34 at scale-base 8 over 700). */
static void check_qk(struct pe_case *v, void *count) {
    static struct qk_ctx c;
    int ran = 0;
    if (!(v->ops->sites & PELAB_SITE_QK)) return;
    pe_case_small(v);
    for (int far = 0; far < 2; far++) {
        double *dq, *dk;
        if (!qk_setup(&c, v, far ? qk_far : qk_near, 1, &dq, &dk)) continue;
        const long n_in = (long)c.B * c.T * c.ld, n_out = (long)c.B * c.pe.H * c.T * c.pe.qk_dim;
        double most = 0;
        for (long i = 0; i < n_out; i++) most = fmax(most, fmax(fabs(c.qo[i]), fabs(c.ko[i])));
        if (most > 1e3) {
            printf("  %-40s outputs of %.3g at positions to %d: not differentiated numerically there\n",
                   v->label, most, (far ? qk_far : qk_near)[7]);
            qk_free(&c, dq, dk);
            continue;
        }
        char label[200], what[220];
        snprintf(label, sizeof label, "%s, positions to %d", v->label, (far ? qk_far : qk_near)[7]);
        snprintf(what, sizeof what, "%s: q", label);
        gradcheck(what, qk_f, &c, c.q, dq, n_in, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
        snprintf(what, sizeof what, "%s: k", label);
        gradcheck(what, qk_f, &c, c.k, dk, n_in, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
        double *grad = vec((long)c.params.total, 0, 0);
        memcpy(grad, c.params.grad, c.params.total * sizeof *grad);
        gradcheck_params(label, qk_f, &c, &c.params, grad, c.pe.param_first, c.pe.param_end);
        free(grad);
        qk_free(&c, dq, dk);
        ran++;
    }
    if (ran) ++*(int *)count;
}

/* PoPE's own clamp of δ to [−2π, 0] (its table's contract says nothing of it): from δ's initial
 * values, δ outside in two places of layer 1 gets no gradient while the clamp is on (the others
 * some), and some with --pope-delta-clamp off; a frozen δ gets none at all (gradcheck_params). */
static void check_pope_clamp(struct pe_case *v, void *count) {
    static struct qk_ctx c;
    double *dq, *dk;
    if (!qk_setup(&c, v, qk_far, 0, &dq, &dk)) return;
    if (c.params.total && !c.params.list[c.pe.param_first].frozen) {
        const long out0 = (long)c.pe.H * c.pe.d, out1 = out0 + 3; /* layer 1's δ[0][0] and δ[0][3] */
        c.params.data[out0] = 0.3, c.params.data[out1] = -7.0;
        qk_f(&c);
        pelab_params_zero_grad(&c.params);
        pelab_posenc_qk_backward(&c.pe, 1, dq, dk, c.wq, c.wk, c.q, c.k, c.ld, c.pos, c.B, c.T);
        const char *clamp = pe_case_get(v, "pope-delta-clamp");
        if (clamp && strcmp(clamp, "off") == 0)
            CHECK(c.params.grad[out0] != 0 && c.params.grad[out1] != 0,
                  "%s: δ outside [−2π, 0] must get a gradient", v->label);
        else
            CHECK(c.params.grad[out0] == 0 && c.params.grad[out1] == 0 && c.params.grad[out0 + 1] != 0,
                  "%s: clamped δ must get no gradient, the others some", v->label);
        ++*(int *)count;
    }
    qk_free(&c, dq, dk);
}

/* --- EMBED: the encoding's parameters through what it adds ----------------------------------------- */
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
/* Positions up to 21 against a training length of 4 (a table of 4 rows is read past its end by
 * interpolation; one without it is given 22, contract.reach); a repeated position sums its
 * gradients. */
static void check_embed(struct pe_case *v, void *count) {
    static struct embed_ctx c;
    if (!(v->ops->sites & PELAB_SITE_EMBED)) return;
    pe_case_small(v);
    memset(&c, 0, sizeof c);
    seed_from(v->label);
    c.B = 2, c.T = 4;
    pe_case_fit(v, 4, 22);
    if (!init_alone(&c.pe, &c.params, v, 6, 2, 2, 4)) return;
    if (!(c.pe.sites & PELAB_SITE_EMBED) || c.pe.param_end == c.pe.param_first) {
        free_alone(&c.pe, &c.params);
        return;
    }
    move_params(&c.pe, 1, 0.2, 1, 7);
    static const int at[8] = {0, 1, 2, 3, 21, 5, 5, 11};
    int32_t pos[16];
    for (int i = 0; i < 8; i++) pe_place(pos + i * v->layout.dims, at[i], &v->layout);
    c.pos = pos;
    long n = (long)c.B * c.T * c.pe.D;
    c.w = vec(n, -1, 1), c.out = vec(n, 0, 0);
    embed_f(&c);
    pelab_params_zero_grad(&c.params);
    c.pe.ops->embed_backward(&c.pe, c.w, pos, c.B, c.T);
    pelab_posenc_backward_end(&c.pe);
    double *grad = vec((long)c.params.total, 0, 0);
    memcpy(grad, c.params.grad, c.params.total * sizeof *grad);
    gradcheck_params(v->label, embed_f, &c, &c.params, grad, c.pe.param_first, c.pe.param_end);
    free(grad), free(c.w), free(c.out);
    free_alone(&c.pe, &c.params);
    ++*(int *)count;
}

/* --- BIAS: the encoding's parameters through its tiles ---------------------------------------------- */
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
    pelab_posenc_backward_end(&c->pe);
}
/* Every parameter of a BIAS encoding, moved off its init by `scale` (move_params); the
 * encoding prepared once for a pass over the tiles' positions (negative ones, which no pass has,
 * left out): a later parameter change leaves what it prepared stale, and the tiles must not read
 * it then. 0 when the case does not act at BIAS with parameters. */
static int check_bias_at(const struct pe_case *v, double scale) {
    static struct bias_ctx c;
    if (!(v->ops->sites & PELAB_SITE_BIAS)) return 0;
    memset(&c, 0, sizeof c);
    /* max_seq 12: L = 12·|ℓ| lies inside the second tile's queries */
    if (!init_alone(&c.pe, &c.params, v, 8, BIAS_H, BIAS_LAYERS, 12)) return 0;
    if (!(c.pe.sites & PELAB_SITE_BIAS) || c.pe.param_end == c.pe.param_first) {
        free_alone(&c.pe, &c.params);
        return 0;
    }
    move_params(&c.pe, scale, 1, 0, 9);
    seed_from(v->label);
    int32_t pass[TILE_MAX];
    int n = 0;
    for (int t = 0; t < N_TILES; t++)
        for (int i = 0; i < tiles[t].nk; i++)
            if (tiles[t].k[i] >= 0) pass[n++] = tiles[t].k[i];
    CHECK(pelab_posenc_prepare(&c.pe, pass, 1, n) == PELAB_OK, "%s: prepare: %s", v->label, pelab_last_error());
    fill_uniform(&c.w[0][0][0][0], (long)(sizeof c.w / sizeof(double)), -1, 1, &seed);
    pelab_params_zero_grad(&c.params);
    bias_backward(&c);
    double *grad = malloc(c.params.total * sizeof *grad);
    memcpy(grad, c.params.grad, c.params.total * sizeof *grad);
    char label[200];
    snprintf(label, sizeof label, "%s, parameters × %.2f", v->label, scale);
    gradcheck_params(label, bias_f, &c, &c.params, grad, c.pe.param_first, c.pe.param_end);
    /* gradients accumulate: a second backward adds the same again */
    bias_backward(&c);
    double off = 0;
    for (size_t i = 0; i < c.params.total; i++) off = fmax(off, fabs(c.params.grad[i] - 2 * grad[i]));
    CHECK(off < 1e-12, "%s: a second backward added %.3g off the first one", label, off);
    free(grad);
    free_alone(&c.pe, &c.params);
    return 1;
}
static void check_bias(struct pe_case *v, void *count) {
    pe_case_small(v);
    if (check_bias_at(v, 1.05) & check_bias_at(v, -0.93)) ++*(int *)count;
}

/* --- the whole model -------------------------------------------------------------------------- */
struct model_ctx { struct pelab_model m; int B, T; int32_t *tokens, *targets, *pos; };
static double model_f(void *p) {
    struct model_ctx *c = p;
    pelab_model_forward(&c->m, c->tokens, c->targets, c->pos, c->B, c->T);
    return c->m.loss;
}
/* The case's model (d-model 8, 2 heads, 2 layers unless `shape` says otherwise), every parameter
 * by central differences. */
static void check_model(const struct pe_case *v, const char *const *shape, double dropout) {
    struct model_ctx c = {.B = 2, .T = 6};
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "d-model", "8");
    pelab_opts_set(&o, "heads", "2");
    pelab_opts_set(&o, "layers", "2");
    pelab_opts_set(&o, "mlp-mult", "2");
    for (const char *const *kv = v->opts; kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    for (const char *const *kv = shape; kv && kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    char label[256];
    const char *tied = pelab_opts_get(&o, "tied");
    snprintf(label, sizeof label, "%s%s%s%s", v->label, shape ? ", 3 heads" : "",
             tied && strcmp(tied, "off") == 0 ? ", untied" : "", dropout > 0 ? ", dropout" : "");
    const int V = 7;
    seed_from(label);
    int rc = pelab_model_init(&c.m, &o, V, c.T);
    if (rc == PELAB_ERR_USAGE && shape) { /* a width the encoding cannot split */
        printf("  %-40s refuses the shape: %s\n", label, pelab_last_error());
        return;
    }
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
    gradcheck_params(label, model_f, &c, &c.m.params, grad, 0, c.m.params.count);
    free(grad);
    pelab_model_free(&c.m);
}
/* Each case tied without dropout, and untied with it; an encoding's defaults also at 3 heads of
 * width 2 (a head count no power of two: ALiBi's second slope rule). The second row's positions
 * 10..15 run past the training length 6 (a table that ends is given 16, contract.reach). */
static void check_models(struct pe_case *v, void *count) {
    pe_case_fit(v, 6, 16);
    pe_case_small(v);
    check_model(v, NULL, 0);
    pe_case_set(v, "tied", "off");
    check_model(v, NULL, 0.25);
    if (!v->settings[0]) {
        pe_case_set(v, "tied", "on");
        check_model(v, (const char *const[]){"d-model", "6", "heads", "3", NULL}, 0);
    }
    ++*(int *)count;
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
 * (row, column) from 1 with the class token at (0, 0), or raster 0..4 (1-D); bidirectional. */
static void check_patch_model(const struct pe_case *v, double dropout) {
    enum { P = 5, V = 4 };
    struct patch_ctx c = {.B = 2, .T = 5};
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "d-model", "8");
    pelab_opts_set(&o, "heads", "2");
    pelab_opts_set(&o, "layers", "2");
    pelab_opts_set(&o, "mlp-mult", "2");
    for (const char *const *kv = v->opts; kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    char label[200];
    snprintf(label, sizeof label, "patches %s%s", v->label, dropout > 0 ? ", dropout" : "");
    const int dims = v->layout.dims;
    const struct pelab_model_io io = {P, v->layout};
    seed_from(label);
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
    gradcheck_params(label, patch_f, &c, &c.m.params, grad, 0, c.m.params.count);
    /* the class token's input row is never read; a patch's is */
    c.in[0] += 5, c.in[5 * P] -= 3;
    CHECK(patch_f(&c) == l0, "%s: the class token's input row changed the loss", label);
    c.in[P + 2] += 0.5;
    CHECK(fabs(patch_f(&c) - l0) > 1e-9, "%s: a patch's input did not change the loss", label);
    free(grad);
    pelab_model_free(&c.m);
}
static void check_patch_models(struct pe_case *v, void *count) {
    pe_case_small(v);
    check_patch_model(v, 0);
    check_patch_model(v, 0.25);
    ++*(int *)count;
}

int main(void) {
    /* thousands of tiny forward passes: on one thread, as a central difference needs no more */
    pelab_threads_set(1);
    printf("layers\n");
    check_rmsnorm();
    check_gelu();
    check_linear();
    check_crossentropy();
    check_attention(0);
    check_attention(0.3);
    /* the cases: every registered encoding with its defaults and each contract variant, on 1-D
     * positions and (2-D encodings) on a grid of side 2, at their contracts' smaller sizes
     * (lib/models.h) */
    const struct pe_walk cases = {PE_TEXT | PE_IMAGE, 0, 2, NULL};
    int n[6] = {0};
    printf("QK encodings\n");
    for_each_pe_case(&cases, check_qk, &n[0]);
    for_each_pe_case(&(struct pe_walk){PE_TEXT, 0, 0, "pope"}, check_pope_clamp, &n[1]);
    printf("EMBED encodings\n");
    for_each_pe_case(&cases, check_embed, &n[2]);
    printf("BIAS encodings\n");
    for_each_pe_case(&(struct pe_walk){PE_TEXT, 0, 0, NULL}, check_bias, &n[3]);
    printf("whole model\n");
    for_each_pe_case(&(struct pe_walk){PE_TEXT, 0, 0, NULL}, check_models, &n[4]);
    printf("patch model (image task)\n");
    for_each_pe_case(&(struct pe_walk){PE_IMAGE | PE_RASTER, PE_RASTER, 2, NULL}, check_patch_models, &n[5]);
    printf("cases: QK %d, PoPE's clamp %d, EMBED %d, BIAS %d, whole model %d, patch model %d\n", n[0], n[1],
           n[2], n[3], n[4], n[5]);
    CHECK(n[0] > 0 && n[1] > 0 && n[2] > 0 && n[3] > 0 && n[4] > 0 && n[5] > 0,
          "a site no registered encoding acts at, or PoPE not registered: a check ran on no case");
    return check_report("test_gradcheck");
}
