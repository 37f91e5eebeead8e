/* test_contract — every registered encoding against the contract its operations table declares
 * (pelab/posenc.h, docs/POSENC.md "Adding an encoding"). Nothing here names an encoding: the list
 * is pelab_posenc_all(), and each encoding runs with its defaults and with each option setting of
 * its table's contract.variants. For each, on a small model (double build):
 *
 *   sites       pe->sites is within ops->sites, and each site it acts at has its functions (a
 *               site inside the blocks: its hooks, and buffers whose every dimension is ≥ 1)
 *   vectors     position_vectors, where an encoding has it and acts at EMBED, is what EMBED adds
 *   gradients   central differences against the backward pass for every parameter of the model
 *               (the encoding's own included) and, at the QK site, for every entry of q and k
 *   kernels     the tiled attention kernel against the reference one, forward and every
 *               gradient, at T 1, T 70 (past one tile of 64, not a multiple of it), one head,
 *               and odd head widths (an encoding may refuse a shape with a usage error: skipped)
 *   causality   changing the tokens from t0 on leaves every output before t0 unchanged (a
 *               bidirectional case: changes them)
 *   shift       PELAB_PE_RELATIVE only: positions p + 5 give the outputs of positions p
 *   batch       a sequence's outputs are the same alone and inside a batch
 *   threads     1, 2 and 3 threads give the same outputs and gradients
 *   allocation  once warm, forward and backward (both kernels) allocate nothing
 *   save/load   the model saved, rebuilt from its recorded settings and loaded gives the same
 *               outputs, bit for bit
 *   memory      each allocation of building the model, a training step and an evaluation refused
 *               in turn: an error with a message every time, never an abort
 *
 * The same cases (lib/models.h) meet the PyTorch twin in test_twin (tests/ref/run.sh), and the
 * gradient, property, attention, evaluation, KV-cache and allocation tests.
 *
 * Each case runs on the positions its encoding serves: a 1-D encoding on 1-D positions with the
 * causal mask; one that promises PELAB_PE_BIDIRECTIONAL also without the mask (gradients and
 * kernels, its defaults); a 2-D encoding on (row, column) positions of a 9 × 9 grid without the
 * mask (the image task's layout), under every check.
 *
 *   build/tests/test_contract [NAME]      only the encoding NAME (all when absent)
 *
 * Allocations are counted by linking with -Wl,--wrap, as test_alloc does (the Makefile's rule). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/models.h"
#include "lib/gradcheck.h"
#include "lib/tmpdir.h"
#include "lib/wrap/alloc_count.h"
#include "pelab/model.h"
#include "pelab/rng.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "posenc/site.h"

#ifndef PELAB_DOUBLE
#error "test_contract is built with -DPELAB_DOUBLE"
#endif

/* --- the case: an encoding with one setting of its options -------------------------------------- */

enum { V = 7, MAX_SEQ = 96 };

enum { GRID = 9 }; /* 2-D cases: the training grid's side */

/* The positions' layout of the batches being made (the case's). */
static const struct pelab_pe_layout *batch_layout;

/* The model's shape: key, value pairs ending in NULL. */
static const char *const small[] = {"d-model", "8", "heads", "2", "layers", "2", "mlp-mult", "2", NULL};

/* Builds the variant's model with the given shape (NULL: small) and attention kernel, every
 * parameter moved off its initial value by N(0, 0.05²) (lib/models.h says why). Returns PELAB_OK,
 * or the error (PELAB_ERR_USAGE: the encoding refuses this shape). */
static int build(struct pelab_model *m, const struct pe_case *v, const char *const *shape,
                 const char *attention, uint64_t seed) {
    const char *opts[48];
    int n = 0;
    opts[n++] = "dropout", opts[n++] = "0", opts[n++] = "attention", opts[n++] = attention;
    for (int i = 0; small[i]; i++) opts[n++] = small[i];
    for (int i = 0; shape && shape[i]; i++) opts[n++] = shape[i];
    opts[n] = NULL;
    memset(m, 0, sizeof *m);
    const struct pelab_model_io io = {0, v->layout};
    int rc = test_model(m, opts, v->opts, V, MAX_SEQ, &io, seed, 0.05);
    if (rc) return rc;
    m->training = 0;
    return PELAB_OK;
}

struct batch {
    int B, T, dims;
    int32_t tokens[4 * 80], targets[4 * 80], pos[4 * 80 * 2];
};

/* Random tokens, a target at about 3 of 4 positions, pos = t + 3b + offset (placed by pe_place). */
static void make_batch(struct batch *b, int B, int T, int offset, uint64_t seed) {
    PELAB_ASSERT(B * T <= 4 * 80);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, seed);
    b->B = B, b->T = T, b->dims = batch_layout->dims;
    for (int i = 0; i < B; i++)
        for (int t = 0; t < T; t++) {
            b->tokens[i * T + t] = (int32_t)pelab_rng_below(&rng, V);
            b->targets[i * T + t] = pelab_rng_uniform(&rng) < 0.25 ? -1 : (int32_t)pelab_rng_below(&rng, V);
            pe_place(b->pos + (i * T + t) * b->dims, t + 3 * i + offset, batch_layout);
        }
    b->targets[0] = 1;
}

static double forward(struct pelab_model *m, const struct batch *b) {
    pelab_model_forward(m, b->tokens, b->targets, b->pos, b->B, b->T);
    return m->loss;
}

/* max |a − b| / max(max |b|, tiny) */
static double rel_diff(const double *a, const double *b, long n) {
    double d = 0, s = 1e-300;
    for (long i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i])), s = fmax(s, fabs(b[i]));
    return d / s;
}

static double *copy_of(const double *x, long n) {
    double *c = malloc((size_t)n * sizeof *c);
    PELAB_ASSERT(c != NULL);
    memcpy(c, x, (size_t)n * sizeof *c);
    return c;
}

/* Logits and every gradient of one forward and backward. */
struct result {
    double loss, *logits, *grad;
    long n_logits, n_grad;
};

static int run(struct pelab_model *m, const struct batch *b, struct result *r) {
    memset(r, 0, sizeof *r);
    r->loss = forward(m, b);
    if (m->status) return m->status;
    r->n_logits = (long)b->B * b->T * V;
    r->logits = copy_of(pelab_model_logits(m), r->n_logits);
    pelab_params_zero_grad(&m->params);
    pelab_model_backward(m, 1);
    r->n_grad = (long)m->params.total;
    r->grad = copy_of(m->params.grad, r->n_grad);
    return m->status;
}

static void result_free(struct result *r) {
    free(r->logits);
    free(r->grad);
}

/* --- the checks ------------------------------------------------------------------------------ */

static void check_sites(const struct pe_case *v) {
    struct pelab_model m;
    if (build(&m, v, NULL, "tiled", 1)) {
        CHECK(0, "%s: the model cannot be built: %s", v->label, pelab_last_error());
        return;
    }
    const struct pelab_posenc *pe = &m.pe;
    const struct pelab_posenc_ops *o = pe->ops;
    CHECK(o == v->ops, "%s: pe->ops is not the registered table", v->label);
    CHECK((pe->sites & ~o->sites) == 0, "%s: sites %#x, table lists %#x", v->label,
          pe->sites, o->sites);
    if (pe->sites & PELAB_SITE_EMBED)
        CHECK(o->embed_forward && (o->embed_backward || pe->param_end == pe->param_first),
              "%s: acts at EMBED without embed_forward (or with parameters and no embed_backward)", v->label);
    if (pe->sites & PELAB_SITE_QK)
        CHECK(o->qk_forward && o->qk_backward, "%s: acts at QK without qk_forward and qk_backward", v->label);
    if (pe->sites & PELAB_SITE_BIAS)
        CHECK(o->bias_tile && (o->bias_tile_backward || pe->param_end == pe->param_first),
              "%s: acts at BIAS without bias_tile (or with parameters and no bias_tile_backward)", v->label);
    /* the sites inside the blocks: each listed with both hooks, its buffers of some size */
    unsigned hooked = PELAB_SITE_EMBED | PELAB_SITE_QK | PELAB_SITE_BIAS;
    for (const struct pelab_pe_site_hooks *u = o->layer_sites; u && u->site; u++) {
        const struct pelab_pe_site_decl *site = u->site;
        hooked |= site->bit;
        if (!(pe->sites & site->bit)) continue;
        CHECK(u->forward && u->backward, "%s: acts at %s without its forward and backward hooks", v->label, site->name);
        for (const struct pelab_pe_buf *buf = site->bufs; buf->name; buf++) {
            long dims[4];
            char letters[16];
            const int nd = pelab_posenc_buf_dims(pe, buf, 1, 1, dims, letters);
            for (int i = 0; i < nd; i++)
                CHECK(dims[i] >= 1, "%s: the %s site's %s %s has a dimension of %ld", v->label, site->name,
                      buf->name, letters, dims[i]);
        }
    }
    CHECK((pe->sites & ~hooked) == 0, "%s: acts at sites %#x without hooks there", v->label, pe->sites & ~hooked);
    CHECK((o->contract.promises & ~(unsigned)(PELAB_PE_RELATIVE | PELAB_PE_BIDIRECTIONAL)) == 0,
          "%s: unknown promise bits %#x", v->label, o->contract.promises);
    pelab_model_free(&m);
}

/* An encoding's vector of each position (position_vectors, for analyses) is what it adds to that
 * token at EMBED, when it acts there. */
static void check_position_vectors(const struct pe_case *v) {
    struct pelab_model m;
    if (build(&m, v, NULL, "tiled", 1)) return; /* check_sites reports it */
    struct pelab_posenc *pe = &m.pe;
    if (pe->ops->position_vectors && (pe->sites & PELAB_SITE_EMBED)) {
        enum { N = 12 };
        const int D = pe->D;
        int32_t pos[N * 2];
        for (int q = 0; q < N; q++) pe_place(pos + q * v->layout.dims, q, &v->layout);
        double *vec = calloc((size_t)N * D, sizeof *vec), *emb = calloc((size_t)N * D, sizeof *emb);
        PELAB_ASSERT(vec && emb);
        CHECK(pe->ops->position_vectors(pe, pos, N, vec) == PELAB_OK, "%s: position_vectors: %s", v->label,
              pelab_last_error());
        CHECK(pelab_posenc_prepare(pe, pos, 1, N) == PELAB_OK, "%s: prepare: %s", v->label, pelab_last_error());
        pe->ops->embed_forward(pe, emb, pos, 1, N);
        const double d = rel_diff(vec, emb, (long)N * D);
        CHECK(d <= 1e-12, "%s: position_vectors differ from what EMBED adds by %.3g", v->label, d);
        free(vec);
        free(emb);
    }
    pelab_model_free(&m);
}

/* Every parameter of the model by central differences on the mean loss. */
struct model_ctx {
    struct pelab_model *m;
    const struct batch *b;
};
static double model_loss(void *p) {
    struct model_ctx *c = p;
    return forward(c->m, c->b);
}

/* The QK site alone: Σ w · [qo; ko] as a function of q and k (inside qkv, rows ld apart). */
struct qk_ctx {
    struct pelab_posenc *pe;
    int layer, B, T, ld;
    const int32_t *pos;
    double *qkv, *w, *out;
    long nout;
};
static double qk_objective(void *p) {
    struct qk_ctx *c = p;
    const int D = c->pe->D;
    pelab_posenc_prepare(c->pe, c->pos, c->B, c->T);
    pelab_posenc_qk_forward(c->pe, c->layer, c->out, c->out + c->nout, c->qkv, c->qkv + D, c->ld,
                            c->pos, c->B, c->T);
    double s = 0;
    for (long i = 0; i < 2 * c->nout; i++) s += c->w[i] * c->out[i];
    return s;
}

static void check_gradients(const struct pe_case *v) {
    struct pelab_model m;
    if (build(&m, v, NULL, "tiled", 2)) {
        CHECK(0, "%s: %s", v->label, pelab_last_error());
        return;
    }
    struct batch b;
    make_batch(&b, 2, 6, 1, 3);
    struct result r;
    if (run(&m, &b, &r)) {
        CHECK(0, "%s: forward refused: %s", v->label, pelab_last_error());
        result_free(&r);
        pelab_model_free(&m);
        return;
    }
    struct model_ctx c = {&m, &b};
    const double worst = gradcheck_params(v->label, model_loss, &c, &m.params, r.grad, 0, m.params.count);
    printf("  %-40s gradients of %d parameters: worst error %.3g of the tolerance\n", v->label,
           m.params.count, worst);
    result_free(&r);

    /* the QK site's inputs: q and k of each layer, through a fixed weighting of its outputs */
    if (m.pe.sites & PELAB_SITE_QK) {
        struct pelab_posenc *pe = &m.pe;
        const int B = 2, T = 5, H = pe->H, D = pe->D, dq = pe->qk_dim, ld = 3 * D;
        const long nin = (long)B * T * ld, nout = (long)B * H * T * dq;
        unsigned long long s = 11;
        double *qkv = malloc(sizeof(double) * nin), *w = malloc(sizeof(double) * 2 * nout);
        double *out = malloc(sizeof(double) * 2 * nout), *dqkv = calloc((size_t)nin, sizeof(double));
        PELAB_ASSERT(qkv && w && out && dqkv);
        fill_uniform(qkv, nin, -1, 1, &s);
        fill_uniform(w, 2 * nout, -1, 1, &s);
        int32_t pos[2 * 5 * 2];
        for (int i = 0; i < B * T; i++) pe_place(pos + i * pe->pos_dims, i % T + 2 * (i / T), &v->layout);
        for (int layer = 0; layer < pe->n_layers; layer++) {
            CHECK(pelab_posenc_prepare(pe, pos, B, T) == PELAB_OK, "%s: prepare: %s", v->label, pelab_last_error());
            struct qk_ctx qc = {pe, layer, B, T, ld, pos, qkv, w, out, nout};
            qk_objective(&qc);
            /* backward of the weighted sum: dqo = w (first half), dko = w (second half) */
            pelab_params_zero_grad(&m.params);
            pelab_posenc_qk_backward(pe, layer, dqkv, dqkv + D, w, w + nout, qkv, qkv + D, ld, pos, B, T);
            pelab_posenc_backward_end(pe);
            /* only the q and k columns are inputs; v's are not touched */
            for (int i = 0; i < B * T; i++) {
                char what[320];
                snprintf(what, sizeof what, "%s: layer %d, q and k of token %d", v->label, layer, i);
                gradcheck(what, qk_objective, &qc, qkv + (long)i * ld, dqkv + (long)i * ld, 2L * D,
                          GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
            }
        }
        free(qkv), free(w), free(out), free(dqkv);
    }
    pelab_model_free(&m);
}

/* The tiled kernel against the reference at awkward shapes. */
static void check_kernels(const struct pe_case *v) {
    static const struct {
        const char *what;
        const char *shape[9];
        int B, T;
    } shapes[] = {
        {"T 1", {NULL}, 2, 1},
        {"T 70 (past a tile of 64)", {NULL}, 1, 70},
        {"one head", {"heads", "1", NULL}, 2, 9},
        {"head width 5", {"d-model", "10", "heads", "2", NULL}, 2, 9},
        {"head width 3, 3 heads", {"d-model", "9", "heads", "3", NULL}, 2, 7},
    };
    int ran = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        struct pelab_model ref, tiled;
        int rc = build(&ref, v, shapes[k].shape, "ref", 5);
        if (rc == PELAB_ERR_USAGE) { /* the encoding refuses this shape (RoPE: an odd width) */
            printf("  %-40s kernels, %s: refused (%s)\n", v->label, shapes[k].what, pelab_last_error());
            continue;
        }
        CHECK(rc == PELAB_OK && build(&tiled, v, shapes[k].shape, "tiled", 5) == PELAB_OK, "%s: %s: %s",
              v->label, shapes[k].what, pelab_last_error());
        if (rc) continue;
        struct batch b;
        make_batch(&b, shapes[k].B, shapes[k].T, 0, 7);
        struct result rr, rt;
        int e1 = run(&ref, &b, &rr), e2 = run(&tiled, &b, &rt);
        CHECK(!e1 && !e2, "%s: %s: %s", v->label, shapes[k].what, pelab_last_error());
        if (!e1 && !e2) {
            const double dl = rel_diff(rt.logits, rr.logits, rr.n_logits), dg = rel_diff(rt.grad, rr.grad, rr.n_grad);
            CHECK(dl <= 1e-12 && dg <= 1e-10, "%s: %s: tiled differs from ref: logits %.3g, gradients %.3g",
                  v->label, shapes[k].what, dl, dg);
            ran++;
        }
        result_free(&rr), result_free(&rt);
        pelab_model_free(&ref), pelab_model_free(&tiled);
    }
    CHECK(ran >= 3, "%s: the kernels were compared at %d shapes only", v->label, ran);
}

/* A later token never changes an earlier output; with relative positions, shifting them all
 * changes nothing; a sequence's outputs do not depend on the others of its batch. */
static void check_properties(const struct pe_case *v) {
    struct pelab_model m;
    if (build(&m, v, NULL, "tiled", 9)) {
        CHECK(0, "%s: %s", v->label, pelab_last_error());
        return;
    }
    enum { B = 3, T = 11, T0 = 6 };
    struct batch b, c;
    make_batch(&b, B, T, 0, 21);
    forward(&m, &b);
    double *base = copy_of(pelab_model_logits(&m), (long)B * T * V);

    /* causality */
    c = b;
    for (int i = 0; i < B; i++)
        for (int t = T0; t < T; t++) c.tokens[i * T + t] = (c.tokens[i * T + t] + 1 + t) % V;
    forward(&m, &c);
    const double *lg = pelab_model_logits(&m);
    double worst = 0;
    for (int i = 0; i < B; i++)
        worst = fmax(worst, rel_diff(lg + (long)i * T * V, base + (long)i * T * V, (long)T0 * V));
    if (v->layout.bidirectional)
        CHECK(worst > 1e-6, "%s: bidirectional, but changing tokens from %d on left earlier outputs as "
              "they were (%.3g)", v->label, T0, worst);
    else
        CHECK(worst <= 1e-14, "%s: changing tokens from %d on changed earlier outputs by %.3g", v->label, T0, worst);
    double later = rel_diff(lg + (long)(T - 1) * V, base + (long)(T - 1) * V, V);
    CHECK(later > 1e-6, "%s: changing tokens did not change their own outputs (%.3g)", v->label, later);

    /* shift invariance */
    if (v->ops->contract.promises & PELAB_PE_RELATIVE) {
        c = b;
        for (int i = 0; i < B * T * b.dims; i++) c.pos[i] += 5;
        forward(&m, &c);
        CHECK(m.status == PELAB_OK, "%s: shifted positions refused: %s", v->label, pelab_last_error());
        const double d = rel_diff(pelab_model_logits(&m), base, (long)B * T * V);
        CHECK(d <= 1e-10, "%s: declared relative, but shifting positions by 5 changes outputs by %.3g", v->label, d);
    }

    /* batch independence: each sequence alone */
    for (int i = 0; i < B; i++) {
        struct batch one;
        one.B = 1, one.T = T, one.dims = b.dims;
        memcpy(one.tokens, b.tokens + i * T, sizeof(int32_t) * T);
        memcpy(one.targets, b.targets + i * T, sizeof(int32_t) * T);
        memcpy(one.pos, b.pos + i * T * b.dims, sizeof(int32_t) * T * b.dims);
        one.targets[0] = 1;
        forward(&m, &one);
        const double d = rel_diff(pelab_model_logits(&m), base + (long)i * T * V, (long)T * V);
        CHECK(d <= 1e-13, "%s: sequence %d alone differs from it in the batch by %.3g", v->label, i, d);
    }
    free(base);
    pelab_model_free(&m);
}

/* The same outputs and gradients on 1, 2 and 3 threads. */
static void check_threads(const struct pe_case *v) {
    static const char *const kernels[] = {"tiled", "ref"};
    for (int k = 0; k < 2; k++) {
        struct pelab_model m;
        if (build(&m, v, NULL, kernels[k], 13)) {
            CHECK(0, "%s: %s", v->label, pelab_last_error());
            return;
        }
        struct batch b;
        make_batch(&b, 3, 70, 0, 17);
        struct result r[3];
        for (int n = 1; n <= 3; n++) {
            pelab_threads_set(n);
            run(&m, &b, &r[n - 1]);
        }
        pelab_threads_set(1);
        for (int n = 2; n <= 3; n++) {
            const double dl = rel_diff(r[n - 1].logits, r[0].logits, r[0].n_logits);
            const double dg = rel_diff(r[n - 1].grad, r[0].grad, r[0].n_grad);
            CHECK(dl == 0 && dg <= 1e-13, "%s, %s: %d threads against 1: logits %.3g, gradients %.3g",
                  v->label, kernels[k], n, dl, dg);
        }
        for (int n = 0; n < 3; n++) result_free(&r[n]);
        pelab_model_free(&m);
    }
}

/* Nothing allocated by a warm forward and backward, either kernel. */
static void check_allocation(const struct pe_case *v) {
    static const char *const kernels[] = {"tiled", "ref"};
    for (int k = 0; k < 2; k++) {
        struct pelab_model m;
        if (build(&m, v, NULL, kernels[k], 19)) {
            CHECK(0, "%s: %s", v->label, pelab_last_error());
            return;
        }
        struct batch b;
        make_batch(&b, 2, 70, 0, 23);
        long n = 0;
        for (int step = 0; step < 3; step++) {
            alloc_counting = step > 0; /* the first may size what depends on the shape */
            alloc_calls = 0;
            pelab_params_zero_grad(&m.params);
            forward(&m, &b);
            pelab_model_backward(&m, 1);
            alloc_counting = 0;
            n += alloc_calls;
        }
        CHECK(n == 0, "%s, %s: %ld allocations in two warm forward and backward passes", v->label,
              kernels[k], n);
        pelab_model_free(&m);
    }
}

/* Out of memory at each allocation in turn, from building the model to a training step and an
 * evaluation: every one is an error returned with a message (PELAB_ERR_RUNTIME), never an abort,
 * and nothing after it runs on a half-built state. */
static void check_out_of_memory(const struct pe_case *v) {
    static const char *const kernels[] = {"tiled", "ref"};
    for (int kk = 0; kk < 2; kk++) {
        long k = 1, total = -1, refused = 0;
        for (;; k++) {
            struct pelab_model m;
            struct batch b;
            make_batch(&b, 2, 9, 0, 37);
            pelab_clear_error();
            alloc_calls = 0, alloc_fail_at = k, alloc_counting = 1;
            int rc = build(&m, v, NULL, kernels[kk], 41);
            int stage = 0; /* 0 build, 1 forward, 2 evaluation */
            if (!rc) {
                stage = 1;
                forward(&m, &b);
                rc = m.status;
                if (!rc) {
                    pelab_model_backward(&m, 1);
                    rc = m.status;
                }
                if (!rc) {
                    stage = 2;
                    pelab_model_forward_eval(&m, b.tokens, b.targets, b.pos, b.B, b.T);
                    rc = m.status;
                }
            }
            alloc_counting = 0, alloc_fail_at = 0;
            const int failed_here = alloc_calls >= k;
            if (stage > 0) pelab_model_free(&m); /* a failed build frees itself */
            if (!failed_here) { /* every allocation has been refused once */
                CHECK(rc == PELAB_OK, "%s, %s: fails with no allocation refused: %s", v->label,
                      kernels[kk], pelab_last_error());
                total = alloc_calls;
                break;
            }
            refused++;
            CHECK(rc == PELAB_ERR_RUNTIME && *pelab_last_error(),
                  "%s, %s: allocation %ld of %s refused: status %d, message '%s'", v->label,
                  kernels[kk], k, stage == 0 ? "building" : stage == 1 ? "training" : "evaluating",
                  rc, pelab_last_error());
        }
        CHECK(refused > 0, "%s, %s: no allocation was refused", v->label, kernels[kk]);
        if (kk == 0)
            printf("  %-40s out of memory at each of %ld allocations: an error every time\n", v->label, total);
    }
}

/* Saved, rebuilt from the settings it records, loaded: the same outputs. */
static void check_save_load(const struct pe_case *v, const char *dir) {
    struct pelab_model m, back;
    if (build(&m, v, NULL, "tiled", 29)) {
        CHECK(0, "%s: %s", v->label, pelab_last_error());
        return;
    }
    struct pelab_opts settings = {0}, meta = {0};
    CHECK(pelab_model_settings(&m, &settings) == PELAB_OK, "%s: settings: %s", v->label, pelab_last_error());
    pelab_opts_set(&meta, "format", "pelab-model");
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(pelab_params_save(path, &m.params, &meta) == PELAB_OK, "%s: save: %s", v->label, pelab_last_error());
    /* what a run directory's config gives back: the model's settings (and evaluation-time options
     * beside them, which are not settings of the model) */
    pelab_opts_unset(&settings, "vocab");
    pelab_opts_unset(&settings, "max-seq");
    for (const char *const *kv = v->opts + 2; kv[0]; kv += 2)
        if (pelab_optdef_find(v->ops->eval_options, kv[0])) pelab_opts_set(&settings, kv[0], kv[1]);
    memset(&back, 0, sizeof back);
    struct pelab_st_file f;
    const struct pelab_model_io io = {0, v->layout};
    int rc = pelab_model_init_io(&back, &settings, V, MAX_SEQ, &io);
    if (!rc) rc = pelab_safetensors_read(path, &f);
    if (!rc) {
        rc = pelab_params_load(&f, &back.params, path);
        pelab_st_file_free(&f);
    }
    CHECK(rc == PELAB_OK, "%s: rebuild and load: %s", v->label, pelab_last_error());
    if (!rc) {
        struct batch b;
        make_batch(&b, 2, 9, 2, 31);
        forward(&m, &b);
        double *want = copy_of(pelab_model_logits(&m), 2L * 9 * V);
        forward(&back, &b);
        CHECK(memcmp(want, pelab_model_logits(&back), sizeof(double) * 2 * 9 * V) == 0,
              "%s: outputs after save and load differ by %.3g", v->label,
              rel_diff(pelab_model_logits(&back), want, 2L * 9 * V));
        free(want);
        pelab_model_free(&back);
    }
    pelab_model_free(&m);
}

/* Every check the case's layout takes: a 1-D bidirectional case (the defaults of an encoding that
 * promises it) runs the gradients and the kernels without the mask. */
static void check_case(struct pe_case *v, void *dir) {
    const int before = check_failures;
    batch_layout = &v->layout;
    check_sites(v);
    check_position_vectors(v);
    check_gradients(v);
    check_kernels(v);
    if (v->layout.dims == 2 || !v->layout.bidirectional) {
        check_properties(v);
        check_threads(v);
        check_allocation(v);
        check_save_load(v, dir);
        check_out_of_memory(v);
    }
    printf("%-42s %s\n", v->label, check_failures == before ? "keeps its contract" : "FAILED");
}

int main(int argc, char **argv) {
    CHECK(alloc_count_works(), "the allocation counters saw no call of the library's");
    const char *dir = tmpdir_create("pelab-contract");
    if (!dir) return 1;
    const struct pe_walk all = {PE_TEXT | PE_IMAGE | PE_RASTER, PE_RASTER, GRID, argc > 1 ? argv[1] : NULL};
    const int n = for_each_pe_case(&all, check_case, (void *)dir);
    CHECK(n > 0, "no case: %s is not a registered encoding", argc > 1 ? argv[1] : "the registry is empty");
    tmpdir_remove();
    return check_report("test_contract");
}
