/* test_sites — sites as data (src/posenc/site.h): a site that src/ does not declare, SALIENCE
 * (tests/lib/toy_site.c: S[t,s] += a_t · c_s, a per query and c per key from the tokens), and its
 * encoding `salience`, registered here, run through the library unchanged (double build):
 *
 *   kernels    the tiled kernel against the reference, forward and every gradient (q, k, v and
 *              the site's a and c), causal and bidirectional, one tile and several, on one
 *              thread and two; the cached kernel (generation) in chunks of 1, 5 and 20 against
 *              the reference, its c kept in the KV cache
 *   gradients  the tiled backward by central differences on q, k, v, a and c
 *   model      a model of `salience` sizes its buffers from the declaration (the plans hold a and
 *              c, their gradients and, in a KV cache, c alone), and its backward agrees with
 *              central differences on every parameter, the encoding's own included; generation
 *              with a KV cache (a prompt as matrix products, then a token at a time) gives every
 *              position's logits of the whole pass
 *
 * test_alloc and test_model_eval register it too, so their walks of the registry cover it: no
 * allocation in a step, evaluation against training. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/gradcheck.h"
#include "lib/models.h"
#include "lib/toy_site.h"
#include "attn/attention.h"
#include "pelab/kv_cache.h"
#include "pelab/model.h"
#include "pelab/status.h"
#include "pelab/threads.h"

enum { B = 2, H = 2, HD = 4, D = H * HD, LAYERS = 2, LAYER = 1 };

static unsigned long long seed = 7;

static double *vec(long n, double lo, double hi) {
    double *x = calloc((size_t)(n ? n : 1), sizeof *x);
    fill_uniform(x, n, lo, hi, &seed);
    return x;
}

/* max |a − b| relative to max(1, max |b|) */
static double rel_diff(const double *a, const double *b, long n) {
    double d = 0, m = 0;
    for (long i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i])), m = fmax(m, fabs(b[i]));
    return d / fmax(1, m);
}

/* --- one layer's attention with the site -------------------------------------------------------- */

/* The encoding, one layer's inputs (q, k (B,H,T,d), v inside qkv (B,T,3D)) and its site buffers
 * a, c (B,H,T) of a PASS plan, with their gradients (a GRAD plan). */
struct setup {
    struct pelab_posenc pe;
    struct pelab_params params;
    struct pelab_attn_call s;
    struct pelab_pe_site_bufs sites, grads;
    double *q, *k, *qkv, *w; /* w (B,T,D): the weights of Σ w ⊙ out, the output's gradient */
};

static void setup_init(struct setup *u, int T, int tile, int bidirectional) {
    memset(u, 0, sizeof *u);
    PELAB_ASSERT(pelab_posenc_init(&u->pe, "salience", NULL, &u->params, D, H, LAYERS, T) == PELAB_OK);
    u->pe.ctx = test_ctx();
    PELAB_ASSERT(pelab_params_alloc(&u->params) == PELAB_OK);
    PELAB_ASSERT(pelab_posenc_plan_alloc(&u->pe, &u->sites, PELAB_PE_PLAN_PASS, PELAB_PE_KERNEL_TILED, 1, B, T) == PELAB_OK);
    PELAB_ASSERT(pelab_posenc_plan_alloc(&u->pe, &u->grads, PELAB_PE_PLAN_GRAD, 0, 1, B, T) == PELAB_OK);
    const long BT = (long)B * T;
    fill_uniform(u->sites.buf[0][TOY_A], BT * H, -1, 1, &seed);
    fill_uniform(u->sites.buf[0][TOY_C], BT * H, -1, 1, &seed);
    u->q = vec(BT * D, -1.5, 1.5), u->k = vec(BT * D, -1.5, 1.5);
    u->qkv = vec(BT * 3 * D, -1.5, 1.5), u->w = vec(BT * D, -1, 1);
    u->s = (struct pelab_attn_call){.ctx = test_ctx(), .B = B, .T = T, .H = H, .dq = HD, .dv = HD, .ldv = 3 * D,
                                    .ldo = D,
                                    .scale = 1 / sqrt((double)HD), .pe = &u->pe, .layer = LAYER,
                                    .sites = &u->sites, .site_grads = &u->grads, .tile = tile,
                                    .bidirectional = bidirectional};
}

static void setup_free(struct setup *u) {
    free(u->q), free(u->k), free(u->qkv), free(u->w);
    pelab_posenc_plan_free(&u->sites);
    pelab_posenc_plan_free(&u->grads);
    pelab_posenc_free(&u->pe);
    pelab_params_free(&u->params);
}

/* What a kernel gives: out, dq, dk, dv (inside (B,T,3D)), da, dc. */
struct result { double *out, *dq, *dk, *dv, *da, *dc; };

static void run_kernel(struct result *r, struct setup *u, int tiled) {
    const struct pelab_attn_call *s = &u->s;
    const long BT = (long)B * s->T;
    const double *v = u->qkv + 2 * D;
    *r = (struct result){vec(BT * D, 0, 0), vec(BT * D, 0, 0), vec(BT * D, 0, 0), vec(BT * 3 * D, 0, 0),
                         vec(BT * H, 0, 0), vec(BT * H, 0, 0)};
    if (tiled) {
        double *lse = vec(BT * H, 0, 0);
        CHECK(pelab_attn_tiled_forward(r->out, lse, u->q, u->k, v, s) == PELAB_OK, "tiled forward");
        CHECK(pelab_attn_tiled_backward(r->dq, r->dk, r->dv + 2 * D, u->w, r->out, lse, u->q, u->k, v, s) == PELAB_OK,
              "tiled backward");
        free(lse);
    } else {
        double *att = vec(BT * H * s->T, 0, 0), *datt = vec(BT * H * s->T, 0, 0);
        pelab_attn_ref_forward(r->out, att, u->q, u->k, v, s);
        pelab_attn_ref_backward(r->dq, r->dk, r->dv + 2 * D, datt, u->w, att, u->q, u->k, v, s);
        free(att), free(datt);
    }
    memcpy(r->da, u->grads.buf[0][TOY_A], (size_t)BT * H * sizeof *r->da);
    memcpy(r->dc, u->grads.buf[0][TOY_C], (size_t)BT * H * sizeof *r->dc);
}

static void result_free(struct result *r) { free(r->out), free(r->dq), free(r->dk), free(r->dv), free(r->da), free(r->dc); }

/* Rows t0 .. t0+n−1 of u's batch as a generation pass writes them for the cached kernel: q, k
 * (B,H,n,d), v inside (B,n,3D), and the site's a and c (B,H,n) into part. */
static void gather_chunk(const struct setup *u, int t0, int n, double *q, double *k, double *v,
                         const struct pelab_pe_site_bufs *part) {
    const int T = u->s.T;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n; i++) {
                const long from = ((long)b * H + h) * T + t0 + i, to = ((long)b * H + h) * n + i;
                memcpy(q + to * HD, u->q + from * HD, HD * sizeof *q);
                memcpy(k + to * HD, u->k + from * HD, HD * sizeof *k);
                for (int j = 0; j < 2; j++) ((double *)part->buf[0][j])[to] = ((double *)u->sites.buf[0][j])[from];
            }
        for (int i = 0; i < n; i++)
            memcpy(v + ((long)b * n + i) * 3 * D, u->qkv + ((long)b * T + t0 + i) * 3 * D, 3 * D * sizeof *v);
    }
}

/* The cached kernel, each sequence against a cache of its own, in chunks of `chunk` new queries:
 * max relative difference of its outputs from ref_out (B,T,D). */
static double cached_diff(struct setup *u, const double *ref_out, int chunk) {
    const int T = u->s.T;
    struct pelab_attn_cache c[B], *caches[B];
    for (int b = 0; b < B; b++) {
        CHECK(pelab_attn_cache_init(&c[b], LAYERS, H, HD, HD, T, chunk, &u->pe, 0) == PELAB_OK, "cache init");
        CHECK(c[b].sites.buf[0][TOY_C] != NULL && c[b].sites.buf[0][TOY_A] == NULL,
              "a KV cache keeps the per-key c, not the per-query a");
        caches[b] = &c[b];
    }
    struct pelab_pe_site_bufs part;
    PELAB_ASSERT(pelab_posenc_plan_alloc(&u->pe, &part, PELAB_PE_PLAN_PASS, PELAB_PE_KERNEL_TILED, 1, B, chunk) == PELAB_OK);
    double *out = vec((long)B * T * D, 0, 0), *q = vec((long)B * chunk * D, 0, 0), *k = vec((long)B * chunk * D, 0, 0);
    double *v = vec((long)B * chunk * 3 * D, 0, 0), *o = vec((long)B * chunk * D, 0, 0);
    struct pelab_attn_call sc = u->s;
    sc.sites = &part, sc.site_grads = NULL;
    for (int t0 = 0; t0 < T; t0 += chunk) {
        sc.T = T - t0 < chunk ? T - t0 : chunk;
        gather_chunk(u, t0, sc.T, q, k, v, &part);
        pelab_attn_cached_forward(caches, o, q, k, v + 2 * D, &sc);
        for (int b = 0; b < B; b++) { /* the chunk's rows of each sequence, whose cache moves on */
            for (int i = 0; i < sc.T; i++)
                memcpy(out + ((long)b * T + t0 + i) * D, o + ((long)b * sc.T + i) * D, D * sizeof *out);
            c[b].len += sc.T;
        }
    }
    const double d = rel_diff(out, ref_out, (long)B * T * D);
    free(out), free(q), free(k), free(v), free(o);
    pelab_posenc_plan_free(&part);
    for (int b = 0; b < B; b++) pelab_attn_cache_release(&c[b]);
    return d;
}

#define EQ_TOL 1e-12

static void check_kernels(int T, int tile, int bidirectional) {
    struct setup u;
    setup_init(&u, T, tile, bidirectional);
    const long BT = (long)B * T;
    char label[80];
    snprintf(label, sizeof label, "T %2d tile %2d%s", T, tile, bidirectional ? " bidirectional" : "");
    pelab_threads_set(1);
    struct result ref, tiled;
    run_kernel(&ref, &u, 0);
    /* the site acts: without a and c the output is another */
    double worst = 0, moved;
    {
        struct result plain;
        struct pelab_attn_call with = u.s;
        u.s.sites = u.s.site_grads = NULL, u.s.pe = NULL;
        run_kernel(&plain, &u, 0);
        u.s = with;
        moved = rel_diff(plain.out, ref.out, BT * D);
        CHECK(moved > 1e-3, "%s: the site's terms moved the output by only %.3g", label, moved);
        result_free(&plain);
    }
    for (int th = 1; th <= 2; th++) {
        pelab_threads_set(th);
        run_kernel(&tiled, &u, 1);
        const struct { const char *name; const double *x, *y; long n; } parts[] = {
            {"out", tiled.out, ref.out, BT * D}, {"dq", tiled.dq, ref.dq, BT * D}, {"dk", tiled.dk, ref.dk, BT * D},
            {"dv", tiled.dv, ref.dv, BT * 3 * D}, {"da", tiled.da, ref.da, BT * H}, {"dc", tiled.dc, ref.dc, BT * H}};
        for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
            const double d = rel_diff(parts[i].x, parts[i].y, parts[i].n);
            CHECK(d <= EQ_TOL, "%s, %d thread(s): the tiled kernel's %s differs from the reference's by %.3g", label,
                  th, parts[i].name, d);
            worst = fmax(worst, d);
        }
        result_free(&tiled);
    }
    pelab_threads_set(1);
    for (int chunk = 1; !bidirectional && chunk <= 20; chunk += chunk < 5 ? 4 : 15) {
        const double d = cached_diff(&u, ref.out, chunk);
        CHECK(d <= EQ_TOL, "%s: the cached kernel in chunks of %d differs from the reference by %.3g", label, chunk, d);
        worst = fmax(worst, d);
    }
    printf("  %-26s %s against the reference: |Δ| %.1e (the site moves out by %.2f)\n", label,
           bidirectional ? "the tiled kernel" : "the tiled and cached kernels", worst, moved);
    result_free(&ref);
    setup_free(&u);
}

/* --- the tiled backward by central differences ---------------------------------------------------- */

struct grad_ctx { struct setup u; double *out, *lse; };

/* Σ w ⊙ out, out from the tiled forward */
static double tiled_f(void *p) {
    struct grad_ctx *g = p;
    const struct pelab_attn_call *s = &g->u.s;
    PELAB_ASSERT(pelab_attn_tiled_forward(g->out, g->lse, g->u.q, g->u.k, g->u.qkv + 2 * D, s) == PELAB_OK);
    double sum = 0;
    for (long i = 0; i < (long)B * s->T * D; i++) sum += g->u.w[i] * g->out[i];
    return sum;
}

static void check_kernel_gradients(int T, int tile) {
    static struct grad_ctx g;
    setup_init(&g.u, T, tile, 0);
    const long BT = (long)B * T;
    g.out = vec(BT * D, 0, 0), g.lse = vec(BT * H, 0, 0);
    struct result r;
    run_kernel(&r, &g.u, 1);
    char what[80];
    const struct { const char *name; double *x, *analytic; long n; } inputs[] = {
        {"q", g.u.q, r.dq, BT * D}, {"k", g.u.k, r.dk, BT * D}, {"v", g.u.qkv, r.dv, BT * 3 * D},
        {"a", g.u.sites.buf[0][TOY_A], r.da, BT * H}, {"c", g.u.sites.buf[0][TOY_C], r.dc, BT * H}};
    for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
        snprintf(what, sizeof what, "salience, tiled T %d tile %d: %s", T, tile, inputs[i].name);
        gradcheck(what, tiled_f, &g, inputs[i].x, inputs[i].analytic, inputs[i].n, 1e-6, 1e-8, 1e-6);
    }
    result_free(&r);
    free(g.out), free(g.lse);
    setup_free(&g.u);
}

/* --- a model of the encoding ------------------------------------------------------------------- */

enum { MV = 11, MT = 12 };

struct model_ctx { struct pelab_model m; int32_t tokens[B * MT], targets[B * MT], pos[B * MT]; };

static double model_loss(void *p) {
    struct model_ctx *c = p;
    PELAB_ASSERT(pelab_model_forward(&c->m, c->tokens, c->targets, c->pos, B, MT) == PELAB_OK);
    return c->m.loss;
}

/* The plans of a model of `salience` hold the declared buffers at the declared sizes. */
static void check_plans(const struct pelab_posenc *pe) {
    const long per_layer = (long)B * H * MT * sizeof(double);
    const double pass = pelab_posenc_plan_bytes(pe, PELAB_PE_PLAN_PASS, PELAB_PE_KERNEL_REF, LAYERS, B, MT);
    CHECK(pass == 2.0 * LAYERS * per_layer, "a PASS plan of %d layers: %.0f bytes, a and c make %ld", LAYERS, pass,
          2 * LAYERS * per_layer);
    const double grad = pelab_posenc_plan_bytes(pe, PELAB_PE_PLAN_GRAD, 0, 1, B, MT);
    CHECK(grad == 2.0 * per_layer, "a GRAD plan: %.0f bytes, da and dc make %ld", grad, 2 * per_layer);
    const double cache = pelab_posenc_plan_bytes(pe, PELAB_PE_PLAN_CACHE, 0, LAYERS, 1, 100);
    CHECK(cache == (double)LAYERS * H * 100 * sizeof(double), "a KV cache of 100 positions keeps %.0f bytes of c", cache);
}

static void check_model(const char *attention) {
    static struct model_ctx c;
    const char *const opts[] = {"pe", "salience", "attention", attention, NULL};
    PELAB_ASSERT(test_model(&c.m, opts, NULL, MV, MT, NULL, 5, 0.05) == PELAB_OK);
    CHECK(c.m.pe.sites == TOY_SITE_BIT, "the model's encoding acts at %#x", c.m.pe.sites);
    check_plans(&c.m.pe);
    for (int i = 0; i < B * MT; i++) {
        c.tokens[i] = (int32_t)((i * 7 + 3) % MV), c.pos[i] = i % MT;
        c.targets[i] = i % 4 == 0 ? -1 : (int32_t)((i * 5 + 2) % MV);
    }
    pelab_params_zero_grad(&c.m.params);
    model_loss(&c);
    pelab_model_backward(&c.m, 1);
    CHECK(c.m.status == PELAB_OK, "%s: %s", attention, pelab_last_error());
    const struct pelab_params *p = &c.m.params;
    double *grad = malloc(p->total * sizeof *grad);
    memcpy(grad, p->grad, p->total * sizeof *grad);
    char what[120];
    snprintf(what, sizeof what, "a model of salience (%s kernel), every parameter", attention);
    gradcheck(what, model_loss, &c, p->data, grad, (long)p->total, 1e-6, 1e-8, 1e-6);
    double own = 0; /* the encoding's own parameters get gradients */
    for (int i = c.m.pe.param_first; i < c.m.pe.param_end; i++)
        for (size_t j = 0; j < p->list[i].size; j++) own = fmax(own, fabs(grad[p->list[i].offset + j]));
    CHECK(own > 1e-6, "%s: the encoding's parameters get no gradient (largest %.3g)", attention, own);
    free(grad);
    pelab_model_free(&c.m);
}

/* A model of `salience` generating with a KV cache: a prompt of 20 tokens at once (matrix
 * products), then one token at a time; every position's logits those of the whole pass. */
static void check_generation(void) {
    enum { L = 30, FIRST = 20 };
    struct pelab_model m;
    PELAB_ASSERT(test_model(&m, (const char *const[]){"pe", "salience", NULL}, NULL, MV, L, NULL, 3, 0.3) == PELAB_OK);
    int32_t tok[L], pos[L];
    for (int i = 0; i < L; i++) tok[i] = (int32_t)((i * 5 + 1) % MV), pos[i] = i;
    PELAB_ASSERT(pelab_model_forward(&m, tok, NULL, pos, 1, L) == PELAB_OK);
    static double full[L * MV], got[L * MV];
    memcpy(full, pelab_model_logits(&m), sizeof full);
    struct pelab_kv_cache *c;
    int rc = pelab_kv_cache_new(&c, &m, L);
    if (!rc) rc = pelab_kv_cache_append(c, tok, pos, FIRST, got);
    for (int t = FIRST; !rc && t < L; t++) rc = pelab_kv_cache_append(c, tok + t, pos + t, 1, got + (long)t * MV);
    CHECK(rc == PELAB_OK, "generation: %s", pelab_last_error());
    const double d = rel_diff(got, full, (long)L * MV);
    CHECK(d <= EQ_TOL, "generation with a KV cache differs from the whole pass by %.3g", d);
    printf("  generation with a KV cache against the whole pass: |Δ| %.1e\n", d);
    if (!rc) pelab_kv_cache_free(c);
    pelab_model_free(&m);
}

int main(void) {
    CHECK(toy_site_register() == PELAB_OK, "registering salience: %s", pelab_last_error());
    CHECK(toy_site_register() == PELAB_OK && pelab_posenc_register(&toy_pe_salience) == PELAB_ERR_USAGE,
          "a second registration of the same name is refused");
    char names[64];
    pelab_posenc_site_names(PELAB_SITE_QK | PELAB_SITE_KEY, names, sizeof names);
    CHECK(strcmp(names, "QK KEY ") == 0, "site names: '%s'", names);
    check_kernels(5, 0, 0);
    check_kernels(70, 0, 0);   /* past one tile of 64 */
    check_kernels(23, 4, 0);   /* six tiles */
    check_kernels(23, 4, 1);
    check_kernel_gradients(9, 4);
    check_model("tiled");
    check_model("ref");
    check_generation();
    return check_report("test_sites");
}
