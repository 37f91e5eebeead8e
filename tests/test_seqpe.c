/* test_seqpe — SeqPE's parts on their own: digit sequences (1-D and 2-D, padding, [CLS]), the
 * range check, distinct positions, the encoder's gradients by central differences in double
 * precision on every parameter (one and two coordinates), the encoding's sites through the
 * interface (each mode, q, k and every parameter, positions repeated across tokens), its
 * position table (reused while the parameters stay the same, recomputed when they change), a
 * model trained at T evaluating at 16·T with one table for all its batches, and the regularisers:
 * their draws (1-D and 2-D: nearest targets, digit edits, windows, shifts), the gradients of
 * L_delta and L_OOD (teachers held constant) and of the whole α·L_delta + β·L_OOD through the
 * encoder, and the shifted starts of training sequences. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/gradcheck.h"
#include "pelab/model.h"
#include "pelab/params.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "posenc/seqpe.h"

static unsigned long long seed = 7;

static double *vec(long n, double lo, double hi) {
    double *x = calloc((size_t)n, sizeof *x);
    fill_uniform(x, n, lo, hi, &seed);
    return x;
}

static void check_digits(void) {
    struct pelab_params p = {0};
    struct pelab_seqpe_encoder e;
    CHECK(pelab_seqpe_encoder_init(&e, &p, "pe.seqpe", 10, 5, 1, 1, 4, 2, 1, 4) == PELAB_OK, "init");
    CHECK(e.seq == 6 && e.capacity == 100000, "1-D: S %d, capacity %lld", e.seq, (long long)e.capacity);
    int32_t tok[16], p123[1] = {123};
    pelab_seqpe_digits(&e, p123, tok);
    const int32_t want[6] = {0, 0, 1, 2, 3, 10};
    CHECK(memcmp(tok, want, sizeof want) == 0, "123 → 0 0 1 2 3 [CLS]: got %d %d %d %d %d %d",
          tok[0], tok[1], tok[2], tok[3], tok[4], tok[5]);
    int32_t ok[3] = {0, 99999, 5}, neg[2] = {3, -1}, big[2] = {3, 100000};
    CHECK(pelab_seqpe_check(&e, ok, 3) == PELAB_OK, "0, 99999 fit 5 digits");
    CHECK(pelab_seqpe_check(&e, neg, 2) == PELAB_ERR_USAGE, "a negative position is refused");
    CHECK(pelab_seqpe_check(&e, big, 2) == PELAB_ERR_USAGE, "100000 needs 6 digits");
    CHECK(strstr(pelab_last_error(), "100000") && strstr(pelab_last_error(), "--seqpe-digits"),
          "the message names the position and the option: %s", pelab_last_error());
    pelab_seqpe_encoder_free(&e);
    pelab_params_free(&p);

    /* 2-D, base 3, 2 digits per coordinate: (2, 7) → 0 2 | 2 1 | [CLS] */
    struct pelab_params p2 = {0};
    CHECK(pelab_seqpe_encoder_init(&e, &p2, "pe.seqpe", 3, 2, 2, 1, 4, 1, 1, 4) == PELAB_OK, "init 2-D");
    CHECK(e.seq == 5 && e.capacity == 9 && e.dim_emb >= 0, "2-D: S %d, capacity %lld", e.seq,
          (long long)e.capacity);
    int32_t c27[2] = {2, 7};
    pelab_seqpe_digits(&e, c27, tok);
    const int32_t want2[5] = {0, 2, 2, 1, 3};
    CHECK(memcmp(tok, want2, sizeof want2) == 0, "(2,7) base 3 → 0 2 2 1 [CLS]: got %d %d %d %d %d",
          tok[0], tok[1], tok[2], tok[3], tok[4]);
    int32_t bad[4] = {1, 2, 9, 0};
    CHECK(pelab_seqpe_check(&e, bad, 2) == PELAB_ERR_USAGE && strstr(pelab_last_error(), "coordinate 0"),
          "a coordinate of 9 does not fit 2 base-3 digits: %s", pelab_last_error());
    pelab_seqpe_encoder_free(&e);
    pelab_params_free(&p2);

    /* the heads must divide the width */
    struct pelab_params p3 = {0};
    CHECK(pelab_seqpe_encoder_init(&e, &p3, "pe.seqpe", 10, 3, 1, 1, 6, 4, 1, 4) == PELAB_ERR_USAGE &&
          strstr(pelab_last_error(), "--seqpe-heads"), "6 wide, 4 heads: %s", pelab_last_error());
    pelab_seqpe_encoder_free(&e);
    pelab_params_free(&p3);
}

static void check_unique(void) {
    int32_t coords[14] = {5, 1, 2, 0, 5, 1, 0, 0, 2, 0, 5, 0, 0, 9};
    int32_t uniq[14], row[7], scratch[14];
    int U = pelab_seqpe_unique(uniq, row, coords, 7, 2, scratch);
    const int32_t want[10] = {0, 0, 0, 9, 2, 0, 5, 0, 5, 1};
    CHECK(U == 5 && memcmp(uniq, want, sizeof want) == 0, "5 distinct pairs, sorted (got %d)", U);
    int good = 1;
    for (int i = 0; i < 7; i++)
        good &= uniq[row[i] * 2] == coords[i * 2] && uniq[row[i] * 2 + 1] == coords[i * 2 + 1];
    CHECK(good, "every pair maps to its row");
    int32_t one[5] = {4, 4, 4, 1, 4}, u1[5], r1[5];
    CHECK(pelab_seqpe_unique(u1, r1, one, 5, 1, scratch) == 2 && u1[0] == 1 && u1[1] == 4 &&
          r1[0] == 1 && r1[3] == 0, "1-D: {1, 4}");
}

/* --- the encoder's gradients ------------------------------------------------------------------ */
struct enc_ctx { struct pelab_seqpe_encoder e; struct pelab_params params; struct pelab_seqpe_acts a;
                 const int32_t *coords; int U; double *w; };
static double enc_f(void *p) {
    struct enc_ctx *c = p;
    pelab_seqpe_encoder_forward(test_ctx(), &c->e, &c->a, c->coords, c->U);
    double s = 0;
    for (long i = 0; i < (long)c->U * c->e.out_dim; i++) s += c->w[i] * c->a.out[i];
    return s;
}
static void check_encoder(const char *label, int base, int digits, int dims, int layers, int W,
                          int heads, int final_norm, int D, const int32_t *coords, int U) {
    static struct enc_ctx c;
    memset(&c, 0, sizeof c);
    CHECK(pelab_seqpe_encoder_init(&c.e, &c.params, "pe.seqpe", base, digits, dims, layers, W,
                                   heads, final_norm, D) == PELAB_OK, "%s: %s", label, pelab_last_error());
    CHECK(pelab_params_alloc(&c.params) == PELAB_OK, "alloc");
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 11);
    pelab_seqpe_encoder_init_params(&c.e, &rng);
    /* larger weights and gains away from 1, so every term of the gradient matters */
    for (size_t i = 0; i < c.params.total; i++) {
        seed = seed * 6364136223846793005ull + 1;
        c.params.data[i] += 0.4 * ((double)(seed >> 11) * 0x1.0p-53 - 0.5);
    }
    CHECK(pelab_seqpe_check(&c.e, coords, U) == PELAB_OK, "%s: positions fit", label);
    CHECK(pelab_seqpe_acts_reserve(&c.a, &c.e, U) == PELAB_OK, "reserve");
    c.coords = coords, c.U = U;
    c.w = vec((long)U * D, -1, 1);
    enc_f(&c);
    pelab_params_zero_grad(&c.params);
    pelab_seqpe_encoder_backward(test_ctx(), &c.e, &c.a, c.w);
    double *grad = malloc(c.params.total * sizeof *grad);
    memcpy(grad, c.params.grad, c.params.total * sizeof *grad);
    gradcheck_params(label, enc_f, &c, &c.params, grad, 0, c.params.count);
    /* a second backward on the same activations adds the same again */
    enc_f(&c);
    pelab_params_zero_grad(&c.params);
    pelab_seqpe_encoder_backward(test_ctx(), &c.e, &c.a, c.w);
    pelab_seqpe_encoder_backward(test_ctx(), &c.e, &c.a, c.w);
    double off = 0;
    for (size_t i = 0; i < c.params.total; i++) off = fmax(off, fabs(c.params.grad[i] - 2 * grad[i]));
    CHECK(off < 1e-12, "%s: a second backward added %.3g off the first", label, off);
    free(grad);
    free(c.w);
    pelab_seqpe_acts_free(&c.a);
    pelab_seqpe_encoder_free(&c.e);
    pelab_params_free(&c.params);
}

/* --- the sites through the interface --------------------------------------------------------- */
#define SB 2
#define ST 4
#define SD 8
#define SH 2
#define SN 2
struct site_ctx { struct pelab_posenc pe; struct pelab_params params; const int32_t *pos; int ld;
                  double *q, *k, *wq, *wk, *qo, *ko, *out, *w; };
/* Σ over both layers of wq·q' + wk·k' (QK modes), or w·(x + e) (input). */
static double site_f(void *p) {
    struct site_ctx *c = p;
    PELAB_ASSERT(pelab_posenc_prepare(&c->pe, c->pos, SB, ST) == PELAB_OK);
    double s = 0;
    if (c->pe.sites & PELAB_SITE_EMBED) {
        long n = (long)SB * ST * SD;
        memset(c->out, 0, (size_t)n * sizeof *c->out);
        c->pe.ops->embed_forward(&c->pe, c->out, c->pos, SB, ST);
        for (long i = 0; i < n; i++) s += c->w[i] * c->out[i];
        return s;
    }
    long n = (long)SB * SH * ST * c->pe.qk_dim;
    for (int l = 0; l < SN; l++) {
        pelab_posenc_qk_forward(&c->pe, l, c->qo, c->ko, c->q, c->k, c->ld, c->pos, SB, ST);
        for (long i = 0; i < n; i++) s += (l + 1) * (c->wq[i] * c->qo[i] + c->wk[i] * c->ko[i]);
    }
    return s;
}
static void check_sites(const char *mode, const char *proj) {
    static struct site_ctx c;
    memset(&c, 0, sizeof c);
    struct pelab_opts o = {0};
    const char *kv[] = {"seqpe-mode", mode, "seqpe-proj", proj, "seqpe-digits", "2", "seqpe-layers",
                        "1", "seqpe-width", "6", NULL};
    for (int i = 0; kv[i]; i += 2) pelab_opts_set(&o, kv[i], kv[i + 1]);
    CHECK(pelab_posenc_init(&c.pe, "seqpe", &o, &c.params, SD, SH, SN, 16) == PELAB_OK, "%s: %s",
          mode, pelab_last_error());
    c.pe.ctx = test_ctx();
    CHECK(pelab_params_alloc(&c.params) == PELAB_OK, "alloc");
    CHECK(c.pe.sites == (strcmp(mode, "input") ? PELAB_SITE_QK : PELAB_SITE_EMBED),
          "%s: it acts at its mode's site only (sites %#x)", mode, c.pe.sites);
    CHECK(c.pe.ops == pelab_posenc_find("seqpe"), "%s: the registered table, not a variant", mode);
    CHECK(c.pe.qk_dim == (strcmp(mode, "attn-bias") ? SD / SH : 2 * SD / SH), "%s: qk width %d", mode, c.pe.qk_dim);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 3);
    c.pe.ops->init_params(&c.pe, &rng);
    for (size_t i = 0; i < c.params.total; i++) { /* larger than init, gains away from 1 */
        seed = seed * 6364136223846793005ull + 1;
        c.params.data[i] += 0.4 * ((double)(seed >> 11) * 0x1.0p-53 - 0.5);
    }
    static const int32_t pos[SB * ST] = {3, 4, 9, 10, 3, 4, 2, 70}; /* 3 and 4 twice */
    c.pos = pos;
    c.ld = SD + 3;
    long n_in = (long)SB * ST * c.ld, n_out = (long)SB * SH * ST * c.pe.qk_dim, n_emb = (long)SB * ST * SD;
    c.q = vec(n_in, -1, 1), c.k = vec(n_in, -1, 1), c.wq = vec(n_out, -1, 1), c.wk = vec(n_out, -1, 1);
    c.qo = vec(n_out, 0, 0), c.ko = vec(n_out, 0, 0), c.out = vec(n_emb, 0, 0), c.w = vec(n_emb, -1, 1);
    double *dq = vec(n_in, 0, 0), *dk = vec(n_in, 0, 0), *gq = vec(n_out, 0, 0), *gk = vec(n_out, 0, 0);
    site_f(&c);
    pelab_params_zero_grad(&c.params);
    if (c.pe.sites & PELAB_SITE_EMBED) {
        c.pe.ops->embed_backward(&c.pe, c.w, pos, SB, ST);
    } else {
        double *tq = vec(n_in, 0, 0), *tk = vec(n_in, 0, 0);
        for (int l = SN - 1; l >= 0; l--) {
            for (long i = 0; i < n_out; i++) gq[i] = (l + 1) * c.wq[i], gk[i] = (l + 1) * c.wk[i];
            pelab_posenc_qk_backward(&c.pe, l, tq, tk, gq, gk, c.q, c.k, c.ld, pos, SB, ST);
            for (long i = 0; i < n_in; i++)
                if (i % c.ld < SD) dq[i] += tq[i], dk[i] += tk[i];
        }
        free(tq), free(tk);
    }
    pelab_posenc_backward_end(&c.pe);
    char what[96];
    if (!(c.pe.sites & PELAB_SITE_EMBED)) {
        snprintf(what, sizeof what, "%s (%s) q", mode, proj);
        gradcheck(what, site_f, &c, c.q, dq, n_in, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
        snprintf(what, sizeof what, "%s (%s) k", mode, proj);
        gradcheck(what, site_f, &c, c.k, dk, n_in, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    }
    double *grad = malloc(c.params.total * sizeof *grad);
    memcpy(grad, c.params.grad, c.params.total * sizeof *grad);
    snprintf(what, sizeof what, "%s (%s)", mode, proj);
    gradcheck_params(what, site_f, &c, &c.params, grad, 0, c.params.count);
    free(grad), free(dq), free(dk), free(gq), free(gk);
    free(c.q), free(c.k), free(c.wq), free(c.wk), free(c.qo), free(c.ko), free(c.out), free(c.w);
    pelab_posenc_free(&c.pe);
    pelab_params_free(&c.params);
}

/* The table: an evaluation's later batches reuse it, a parameter change recomputes it, and a
 * reused row equals a freshly computed one. */
static void check_table(void) {
    struct pelab_posenc pe;
    struct pelab_params params = {0};
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "seqpe-layers", "1");
    CHECK(pelab_posenc_init(&pe, "seqpe", &o, &params, SD, SH, SN, 16) == PELAB_OK, "%s", pelab_last_error());
    pe.ctx = test_ctx();
    CHECK(pelab_params_alloc(&params) == PELAB_OK, "alloc");
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 4);
    pe.ops->init_params(&pe, &rng);
    int32_t all[16], some[4] = {9, 2, 9, 15};
    for (int i = 0; i < 16; i++) all[i] = i;
    double first[16 * SD] = {0}, again[4 * SD] = {0}, fresh[4 * SD] = {0};
    CHECK(pelab_posenc_prepare(&pe, all, 2, 8) == PELAB_OK && pelab_seqpe_table_rows(&pe) == 16, "16 rows");
    pe.ops->embed_forward(&pe, first, all, 2, 8);
    CHECK(pelab_posenc_prepare(&pe, some, 1, 4) == PELAB_OK && pelab_seqpe_table_rows(&pe) == 16,
          "positions already in the table, same parameters: the table is reused (%d rows)",
          pelab_seqpe_table_rows(&pe));
    pe.ops->embed_forward(&pe, again, some, 1, 4);
    double off = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < SD; j++) off = fmax(off, fabs(again[i * SD + j] - first[some[i] * SD + j]));
    CHECK(off == 0, "rows read from the reused table are the ones computed (%.3g off)", off);
    int32_t more[2] = {3, 16};
    CHECK(pelab_posenc_prepare(&pe, more, 1, 2) == PELAB_OK && pelab_seqpe_table_rows(&pe) == 2,
          "a new position: a new table of the pass's 2 positions (%d rows)", pelab_seqpe_table_rows(&pe));
    params.data[params.list[pe.param_first].offset] += 0.5; /* E_digit[0][0] */
    CHECK(pelab_posenc_prepare(&pe, all, 2, 8) == PELAB_OK && pelab_seqpe_table_rows(&pe) == 16, "16 rows");
    CHECK(pelab_posenc_prepare(&pe, some, 1, 4) == PELAB_OK && pelab_seqpe_table_rows(&pe) == 16, "reused");
    params.data[params.list[pe.param_end - 1].offset] += 0.5; /* the last parameter changes */
    CHECK(pelab_posenc_prepare(&pe, some, 1, 4) == PELAB_OK && pelab_seqpe_table_rows(&pe) == 3,
          "changed parameters: recomputed for the pass's 3 positions (%d rows)", pelab_seqpe_table_rows(&pe));
    pe.ops->embed_forward(&pe, fresh, some, 1, 4);
    CHECK(pelab_posenc_prepare(&pe, all, 2, 8) == PELAB_OK, "prepare");
    memset(first, 0, sizeof first);
    pe.ops->embed_forward(&pe, first, all, 2, 8);
    off = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < SD; j++) off = fmax(off, fabs(fresh[i * SD + j] - first[some[i] * SD + j]));
    CHECK(off < 1e-14, "a position's embedding does not depend on the others in its pass (%.3g)", off);
    int32_t beyond[2] = {5, 100000};
    CHECK(pelab_posenc_prepare(&pe, beyond, 1, 2) == PELAB_ERR_USAGE && strstr(pelab_last_error(), "100000"),
          "a position with 6 digits is refused: %s", pelab_last_error());
    pelab_posenc_free(&pe);
    pelab_params_free(&params);
}

/* A model of training context 8 evaluates 128 positions in each mode: finite, the table computed
 * once for two batches; positions beyond b^k are refused with the model's usage status. */
static void check_long_eval(const char *mode) {
    struct pelab_opts o = {0};
    const char *kv[] = {"pe", "seqpe", "seqpe-mode", mode, "d-model", "8", "heads", "2", "layers", "2",
                        "seqpe-layers", "1", "seqpe-digits", "3", NULL};
    for (int i = 0; kv[i]; i += 2) pelab_opts_set(&o, kv[i], kv[i + 1]);
    struct pelab_model m;
    CHECK(pelab_model_init(&m, &o, 5, 8) == PELAB_OK, "%s: %s", mode, pelab_last_error());
    pelab_model_init_weights(&m, 2);
    enum { B = 2, T = 128 };
    static int32_t tok[B * T], tgt[B * T], pos[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = i % 5, tgt[i] = (i * 3) % 5, pos[i] = i % T;
    pelab_model_forward(&m, tok, tgt, pos, B, T);
    double l1 = m.loss;
    CHECK(m.status == PELAB_OK && isfinite(l1), "%s: 16× the training context: loss %g (%s)", mode,
          l1, pelab_last_error());
    CHECK(pelab_seqpe_table_rows(&m.pe) == T, "%s: one row per distinct position (%d)", mode,
          pelab_seqpe_table_rows(&m.pe));
    for (int i = 0; i < B * T; i++) tok[i] = (i * 7) % 5;
    pelab_model_forward(&m, tok, tgt, pos, 1, 64); /* a shorter batch: reused */
    double l2 = m.loss;
    CHECK(isfinite(l2) && pelab_seqpe_table_rows(&m.pe) == T, "%s: the table kept for a later batch", mode);
    pos[3] = 1000; /* 4 digits */
    pelab_model_forward(&m, tok, tgt, pos, B, T);
    double l3 = m.loss;
    CHECK(isnan(l3) && m.status == PELAB_ERR_USAGE && strstr(pelab_last_error(), "1000"),
          "%s: a position beyond 3 digits: %s", mode, pelab_last_error());
    pelab_model_free(&m);
}

/* --- the regularisers -------------------------------------------------------------------------- */
static const struct pelab_seqpe_reg_style PAPER = {0.5, 0, 0, 0, 0};
struct loss_ctx { double *E; int D, H, n, m, C; int32_t *row, *target; int ood; };
static double loss_f(void *p) {
    struct loss_ctx *c = p;
    return c->ood ? pelab_seqpe_ood_loss(c->E, c->D, c->H, c->row, c->n, c->m, 0, NULL, 0)
                  : pelab_seqpe_delta_loss(c->E, c->D, c->row, c->target, c->n, c->C, NULL, 0);
}
static void check_losses(void) {
    /* L_delta: 3 pivots × (1 + 4) rows of 10 embeddings, some shared between sets */
    int32_t row[15] = {0, 1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 2, 3, 1, 4}, target[3] = {2, 0, 3};
    struct loss_ctx c = {.D = 6, .n = 3, .C = 4, .row = row, .target = target};
    c.E = vec(10 * 6, -1, 1);
    double *dE = vec(10 * 6, 0, 0);
    double l = pelab_seqpe_delta_loss(c.E, 6, row, target, 3, 4, dE, 1);
    CHECK(l > 0 && fabs(l - loss_f(&c)) < 1e-15, "L_delta %g, the same without gradient", l);
    gradcheck("L_delta embeddings", loss_f, &c, c.E, dE, 60, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    /* a pivot far closer to its target than to the rest: loss near 0 */
    double E2[3 * 2] = {10, 0, 10, 0.1, -10, 0};
    int32_t row2[3] = {0, 1, 2}, t2[1] = {0};
    CHECK(pelab_seqpe_delta_loss(E2, 2, row2, t2, 1, 2, NULL, 0) < 1e-10, "confident and right: ~0");
    free(c.E), free(dE);

    /* L_OOD: 2 sets of 3 teachers (rows 0..5) and 3 students (rows 6..11), D 6 in 2 heads */
    int32_t orow[12] = {0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11};
    struct loss_ctx o = {.D = 6, .H = 2, .n = 2, .m = 3, .row = orow, .ood = 1};
    o.E = vec(12 * 6, -1.5, 1.5);
    dE = vec(12 * 6, 0, 0);
    l = pelab_seqpe_ood_loss(o.E, 6, 2, orow, 2, 3, 0, dE, 1);
    CHECK(l > 0, "KL of different embeddings > 0 (%g)", l);
    double teach = 0;
    for (int i = 0; i < 6 * 6; i++) teach = fmax(teach, fabs(dE[i]));
    CHECK(teach == 0, "the teachers (rows 0..5) get no gradient (%g)", teach);
    gradcheck("L_OOD students", loss_f, &o, o.E + 36, dE + 36, 36, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    memcpy(o.E + 36, o.E, 36 * sizeof *o.E); /* students equal to their teachers */
    for (int i = 0; i < 3; i++) memcpy(o.E + (9 + i) * 6, o.E + (6 + i) * 6, 6 * sizeof *o.E);
    for (int i = 0; i < 3; i++) memcpy(o.E + (6 + i) * 6, o.E + (0 + i) * 6, 6 * sizeof *o.E);
    for (int i = 0; i < 3; i++) memcpy(o.E + (3 + i) * 6, o.E + (0 + i) * 6, 6 * sizeof *o.E);
    for (int i = 0; i < 3; i++) memcpy(o.E + (9 + i) * 6, o.E + (0 + i) * 6, 6 * sizeof *o.E);
    CHECK(fabs(pelab_seqpe_ood_loss(o.E, 6, 2, orow, 2, 3, 0, NULL, 0)) < 1e-15, "students = teachers: KL 0");
    free(o.E), free(dE);
}

/* One coordinate's digits in base b, no leading zeros. */
static int digit_string(int64_t v, int b, int *d) {
    int k = 0;
    do d[k++] = (int)(v % b), v /= b;
    while (v > 0);
    return k;
}
/* q is p with two digits swapped, one dropped, or one inserted. */
static int is_edit(int64_t p, int64_t q, int b) {
    int a[40], c[40];
    int ka = digit_string(p, b, a), kc = digit_string(q, b, c);
    if (ka == kc) {
        int diff[40], nd = 0;
        for (int i = 0; i < ka; i++)
            if (a[i] != c[i]) diff[nd++] = i;
        return nd == 2 && a[diff[0]] == c[diff[1]] && a[diff[1]] == c[diff[0]];
    }
    const int *longer = ka > kc ? a : c, *shorter = ka > kc ? c : a;
    int kl = ka > kc ? ka : kc, ks = ka > kc ? kc : ka;
    if (kl != ks + 1) { /* a dropped leading digit may take zeros with it: compare as numbers */
        for (int i = 0; i < kl; i++) {
            int64_t x = 0;
            for (int j = kl - 1; j >= 0; j--)
                if (j != i) x = x * b + longer[j];
            if (x == (ka > kc ? q : p)) return 1;
        }
        return 0;
    }
    for (int i = 0; i < kl; i++) { /* remove digit i of the longer */
        int ok = 1;
        for (int j = 0, k = 0; j < kl && ok; j++) {
            if (j == i) continue;
            ok = longer[j] == shorter[k++];
        }
        if (ok) return 1;
    }
    return 0;
}

static void check_draws(int dims, long max_pos, int L, int C, int m) {
    struct pelab_seqpe_reg r;
    const int pivots = 200, sets = 20, n = dims;
    CHECK(pelab_seqpe_reg_init(&r, dims, 10, 5, max_pos, L, pivots, C, sets, m, &PAPER) == PELAB_OK, "%s", pelab_last_error());
    pelab_seqpe_reg_draw(&r, 99);
    int local = 0, bad = 0, no_edit = 0, far = 0;
    long side = 1;
    while (pow((double)side, dims) < (C + 1 > 256 ? C + 1 : 256)) side++;
    if (side > max_pos) side = max_pos;
    for (int i = 0; i < pivots; i++) {
        const int32_t *row = r.delta_pos + (long)i * (1 + C) * n, *cand = row + n;
        /* distinct, in range, not the pivot; the target is the nearest */
        for (int a = 0; a < C; a++) {
            for (int c = 0; c < n; c++) bad += cand[a * n + c] < 0 || cand[a * n + c] >= max_pos;
            bad += !memcmp(cand + a * n, row, (size_t)n * sizeof *row);
            for (int b = 0; b < a; b++) bad += !memcmp(cand + a * n, cand + b * n, (size_t)n * sizeof *row);
        }
        bad += r.target[i] != pelab_seqpe_nearest(row, cand, C, n);
        double best = INFINITY, got = 0;
        for (int a = 0; a < C; a++) {
            double d = 0;
            for (int c = 0; c < n; c++) d += pow((double)cand[a * n + c] - row[c], 2);
            best = fmin(best, d);
            if (a == r.target[i]) got = d;
        }
        bad += got != best;
        /* local sets lie in one window of the side; global ones hold digit edits */
        int in_window = 1;
        for (int c = 0; c < n; c++) {
            int32_t lo = row[c], hi = row[c];
            for (int a = 0; a < C; a++) lo = cand[a * n + c] < lo ? cand[a * n + c] : lo, hi = cand[a * n + c] > hi ? cand[a * n + c] : hi;
            in_window &= hi - lo < side;
        }
        if (in_window) {
            local++;
            continue;
        }
        int edits = 0;
        for (int a = 0; a < C; a++) {
            int differ = 0, edit = 0;
            for (int c = 0; c < n; c++)
                if (cand[a * n + c] != row[c]) differ++, edit = is_edit(row[c], cand[a * n + c], 10);
            edits += differ == 1 && edit;
        }
        no_edit += edits == 0;
        far += r.target[i] >= 0;
    }
    CHECK(bad == 0, "%d-D: every candidate set well formed, every target the nearest (%d faults)", n, bad);
    CHECK(local > pivots / 4 && local < 3 * pivots / 4, "%d-D: about half the sets are local (%d of %d)", n, local, pivots);
    CHECK(no_edit <= far / 10, "%d-D: global sets hold digit edits (%d of %d without)", n, no_edit, far);
    for (int s = 0; s < sets; s++) {
        const int32_t *t = r.ood_pos + (long)s * 2 * m * n, *st = t + (long)m * n;
        int32_t z[8];
        for (int c = 0; c < n; c++) z[c] = st[c] - t[c];
        for (int i = 0; i < m; i++) {
            for (int c = 0; c < n; c++) {
                bad += t[i * n + c] < 0 || t[i * n + c] >= L;
                bad += st[i * n + c] - t[i * n + c] != z[c] || z[c] < 0 || z[c] >= max_pos - L;
            }
            for (int j = 0; j < i; j++) bad += !memcmp(t + i * n, t + j * n, (size_t)n * sizeof *t);
        }
    }
    CHECK(bad == 0, "%d-D: teachers distinct in [0, L)^n, students shifted by one z in [0, Lmax - L)", n);
    /* a draw is a function of its key */
    int32_t *keep = malloc((size_t)pivots * (1 + C) * n * sizeof *keep);
    memcpy(keep, r.delta_pos, (size_t)pivots * (1 + C) * n * sizeof *keep);
    pelab_seqpe_reg_draw(&r, 100);
    CHECK(memcmp(keep, r.delta_pos, (size_t)pivots * (1 + C) * n * sizeof *keep) != 0, "another key, another draw");
    pelab_seqpe_reg_draw(&r, 99);
    CHECK(memcmp(keep, r.delta_pos, (size_t)pivots * (1 + C) * n * sizeof *keep) == 0, "the same key, the same draw");
    free(keep);
    pelab_seqpe_reg_free(&r);
}

/* α·L_delta + β·L_OOD through the interface: every encoder parameter. The numeric side holds the
 * teachers' embeddings at their values before any perturbation (L_OOD's stop-gradient): it encodes
 * the draw's positions with the same encoder, the teachers once. */
struct aux_ctx { struct pelab_posenc pe; struct pelab_params params; struct pelab_seqpe_acts a;
                 double *E, *teachers; int32_t *row, *list; double alpha, beta; };
static double aux_f(void *p) {
    struct aux_ctx *c = p;
    const struct pelab_seqpe_reg *r = pelab_seqpe_last_draw(&c->pe);
    const struct pelab_seqpe_encoder *e = pelab_seqpe_encoder_of(&c->pe);
    const int D = e->out_dim, nd = r->pivots * (1 + r->cands), no = r->sets * 2 * r->ood_m, N = nd + no;
    pelab_seqpe_encoder_forward(test_ctx(), e, &c->a, c->list, N); /* every listed position, one row each */
    memcpy(c->E, c->a.out, (size_t)N * D * sizeof *c->E);
    for (int s = 0; s < r->sets; s++) /* teachers: the frozen rows */
        memcpy(c->E + (long)(nd + s * 2 * r->ood_m) * D, c->teachers + (long)s * r->ood_m * D,
               (size_t)r->ood_m * D * sizeof *c->E);
    return c->alpha * pelab_seqpe_delta_loss(c->E, D, c->row, r->target, r->pivots, r->cands, NULL, 0) +
           c->beta * pelab_seqpe_ood_loss(c->E, D, c->pe.H, c->row + nd, r->sets, r->ood_m, 0, NULL, 0);
}
static void check_aux(const char *mode) {
    static struct aux_ctx c;
    memset(&c, 0, sizeof c);
    struct pelab_opts o = {0};
    const char *kv[] = {"seqpe-mode", mode, "seqpe-digits", "2", "seqpe-layers", "1", "seqpe-width", "4",
                        "seqpe-alpha", "0.3", "seqpe-beta", "0.7", "seqpe-delta-batch", "3",
                        "seqpe-candidates", "4", "seqpe-ood-batch", "2", "seqpe-ood-positions", "3", NULL};
    for (int i = 0; kv[i]; i += 2) pelab_opts_set(&o, kv[i], kv[i + 1]);
    c.alpha = 0.3, c.beta = 0.7;
    CHECK(pelab_posenc_init(&c.pe, "seqpe", &o, &c.params, SD, SH, SN, 8) == PELAB_OK, "%s", pelab_last_error());
    c.pe.ctx = test_ctx();
    CHECK(pelab_params_alloc(&c.params) == PELAB_OK, "alloc");
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 5);
    c.pe.ops->init_params(&c.pe, &rng);
    for (size_t i = 0; i < c.params.total; i++) { /* larger than init: confident similarities */
        seed = seed * 6364136223846793005ull + 1;
        c.params.data[i] += 1.2 * ((double)(seed >> 11) * 0x1.0p-53 - 0.5);
    }
    double terms[PELAB_PE_AUX_MAX], total;
    CHECK(c.pe.ops->aux_forward(&c.pe, 7, terms, &total) == PELAB_OK, "aux_forward");
    CHECK(fabs(total - (0.3 * terms[0] + 0.7 * terms[1])) < 1e-14 && terms[0] > 0 && terms[1] > 0,
          "%s: total %g = 0.3·%g + 0.7·%g", mode, total, terms[0], terms[1]);
    const struct pelab_seqpe_reg *r = pelab_seqpe_last_draw(&c.pe);
    CHECK(r->max_pos == 100, "Lmax 0 means min(20000, b^k) = 100 (got %lld)", (long long)r->max_pos);
    pelab_params_zero_grad(&c.params);
    c.pe.ops->aux_backward(&c.pe, 1);
    double *grad = malloc(c.params.total * sizeof *grad);
    memcpy(grad, c.params.grad, c.params.total * sizeof *grad);

    /* the numeric side: the draw's positions listed one row each, teachers encoded once */
    const struct pelab_seqpe_encoder *e = pelab_seqpe_encoder_of(&c.pe);
    const int D = e->out_dim, nd = r->pivots * (1 + r->cands), N = nd + r->sets * 2 * r->ood_m;
    c.list = malloc((size_t)N * sizeof *c.list);
    c.row = malloc((size_t)N * sizeof *c.row);
    c.E = malloc((size_t)N * D * sizeof *c.E);
    c.teachers = malloc((size_t)r->sets * r->ood_m * D * sizeof *c.teachers);
    memcpy(c.list, r->delta_pos, (size_t)nd * sizeof *c.list);
    memcpy(c.list + nd, r->ood_pos, (size_t)(N - nd) * sizeof *c.list);
    for (int i = 0; i < N; i++) c.row[i] = i;
    CHECK(pelab_seqpe_acts_reserve(&c.a, e, N) == PELAB_OK, "reserve");
    pelab_seqpe_encoder_forward(test_ctx(), e, &c.a, c.list, N);
    for (int s = 0; s < r->sets; s++)
        memcpy(c.teachers + (long)s * r->ood_m * D, c.a.out + (long)(nd + s * 2 * r->ood_m) * D,
               (size_t)r->ood_m * D * sizeof *c.teachers);
    CHECK(fabs(aux_f(&c) - total) < 1e-13, "%s: the numeric side computes the same total (%.17g, %.17g)",
          mode, aux_f(&c), total);
    char what[96];
    snprintf(what, sizeof what, "α·L_delta + β·L_OOD (%s)", mode);
    gradcheck_params(what, aux_f, &c, &c.params, grad, 0, c.params.count);
    /* the regularisers never reach W^p: it gets no gradient from them */
    if (strcmp(mode, "input")) {
        int wp = pelab_params_find(&c.params, "pe.seqpe.qk.weight");
        double g = 0;
        for (size_t j = 0; j < c.params.list[wp].size; j++) g = fmax(g, fabs(grad[c.params.list[wp].offset + j]));
        CHECK(g == 0, "W^p untouched by the regularisers (%g)", g);
    }
    free(grad), free(c.list), free(c.row), free(c.E), free(c.teachers);
    pelab_seqpe_acts_free(&c.a);
    pelab_posenc_free(&c.pe);
    pelab_params_free(&c.params);
}

/* The same in two dimensions, on the encoder and the losses directly (the model's positions are
 * 1-D): a draw of 2-D pivots, candidates, teachers and students, every position its own row. */
struct reg2_ctx { struct pelab_seqpe_encoder e; struct pelab_params params; struct pelab_seqpe_reg r;
                  struct pelab_seqpe_acts a; int32_t *list, *row; double *E, *teachers; };
static double reg2_f(void *p) {
    struct reg2_ctx *c = p;
    const struct pelab_seqpe_reg *r = &c->r;
    const int D = c->e.out_dim, nd = r->pivots * (1 + r->cands), N = nd + r->sets * 2 * r->ood_m;
    pelab_seqpe_encoder_forward(test_ctx(), &c->e, &c->a, c->list, N);
    memcpy(c->E, c->a.out, (size_t)N * D * sizeof *c->E);
    for (int s = 0; c->teachers && s < r->sets; s++)
        memcpy(c->E + (long)(nd + s * 2 * r->ood_m) * D, c->teachers + (long)s * r->ood_m * D,
               (size_t)r->ood_m * D * sizeof *c->E);
    return 0.4 * pelab_seqpe_delta_loss(c->E, D, c->row, r->target, r->pivots, r->cands, NULL, 0) +
           0.6 * pelab_seqpe_ood_loss(c->E, D, 2, c->row + nd, r->sets, r->ood_m, 0, NULL, 0);
}
static void check_reg_2d(void) {
    static struct reg2_ctx c;
    memset(&c, 0, sizeof c);
    CHECK(pelab_seqpe_encoder_init(&c.e, &c.params, "pe.seqpe", 3, 3, 2, 1, 6, 2, 0, 4) == PELAB_OK, "init");
    CHECK(pelab_params_alloc(&c.params) == PELAB_OK, "alloc");
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 8);
    pelab_seqpe_encoder_init_params(&c.e, &rng);
    for (size_t i = 0; i < c.params.total; i++) {
        seed = seed * 6364136223846793005ull + 1;
        c.params.data[i] += 1.2 * ((double)(seed >> 11) * 0x1.0p-53 - 0.5);
    }
    /* coordinates below 20 (3 base-3 digits hold 27), training range 5 × 5 */
    CHECK(pelab_seqpe_reg_init(&c.r, 2, 3, 3, 20, 5, 3, 6, 2, 4, &PAPER) == PELAB_OK, "%s", pelab_last_error());
    pelab_seqpe_reg_draw(&c.r, 11);
    const struct pelab_seqpe_reg *r = &c.r;
    const int D = 4, nd = r->pivots * (1 + r->cands), N = nd + r->sets * 2 * r->ood_m;
    c.list = malloc((size_t)N * 2 * sizeof *c.list);
    c.row = malloc((size_t)N * sizeof *c.row);
    c.E = malloc((size_t)N * D * sizeof *c.E);
    memcpy(c.list, r->delta_pos, (size_t)nd * 2 * sizeof *c.list);
    memcpy(c.list + nd * 2, r->ood_pos, (size_t)(N - nd) * 2 * sizeof *c.list);
    for (int i = 0; i < N; i++) c.row[i] = i;
    CHECK(pelab_seqpe_check(&c.e, c.list, N) == PELAB_OK, "2-D draws fit the digits");
    CHECK(pelab_seqpe_acts_reserve(&c.a, &c.e, N) == PELAB_OK, "reserve");
    /* analytic: losses with dE, then the encoder's backward */
    pelab_seqpe_encoder_forward(test_ctx(), &c.e, &c.a, c.list, N);
    double *dE = calloc((size_t)N * D, sizeof *dE);
    const double ld = pelab_seqpe_delta_loss(c.a.out, D, c.row, r->target, r->pivots, r->cands, dE, 0.4);
    const double lo = pelab_seqpe_ood_loss(c.a.out, D, 2, c.row + nd, r->sets, r->ood_m, 0, dE, 0.6);
    CHECK(ld > 0 && lo > 0, "2-D: L_delta %g, L_OOD %g", ld, lo);
    c.teachers = malloc((size_t)r->sets * r->ood_m * D * sizeof *c.teachers);
    for (int s = 0; s < r->sets; s++)
        memcpy(c.teachers + (long)s * r->ood_m * D, c.a.out + (long)(nd + s * 2 * r->ood_m) * D,
               (size_t)r->ood_m * D * sizeof *c.teachers);
    pelab_params_zero_grad(&c.params);
    pelab_seqpe_encoder_backward(test_ctx(), &c.e, &c.a, dE);
    double *grad = malloc(c.params.total * sizeof *grad);
    memcpy(grad, c.params.grad, c.params.total * sizeof *grad);
    gradcheck_params("2-D α·L_delta + β·L_OOD", reg2_f, &c, &c.params, grad, 0, c.params.count);
    free(grad), free(dE), free(c.list), free(c.row), free(c.E), free(c.teachers);
    pelab_seqpe_acts_free(&c.a);
    pelab_seqpe_reg_free(&c.r);
    pelab_seqpe_encoder_free(&c.e);
    pelab_params_free(&c.params);
}

/* --seqpe-shift-prob: that fraction of sequences moves, each by one z, within Lmax. */
static void check_shift(void) {
    struct pelab_posenc pe;
    struct pelab_params params = {0};
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "seqpe-shift-prob", "0.3");
    pelab_opts_set(&o, "seqpe-max-pos", "1000");
    CHECK(pelab_posenc_init(&pe, "seqpe", &o, &params, SD, SH, SN, 10) == PELAB_OK, "%s", pelab_last_error());
    pe.ctx = test_ctx();
    enum { B = 400, T = 10 };
    static int32_t pos[B * T], again[B * T];
    for (int i = 0; i < B * T; i++) pos[i] = i % T;
    pe.ops->train_positions(&pe, pos, B, T, 42);
    int moved = 0, bad = 0;
    for (int b = 0; b < B; b++) {
        const int32_t z = pos[b * T];
        moved += z != 0;
        for (int t = 0; t < T; t++) bad += pos[b * T + t] != z + t;
        bad += z < 0 || z + T > 1000;
    }
    CHECK(bad == 0 && moved > B / 5 && moved < 2 * B / 5, "30%% of rows shifted as a whole (%d of %d, %d faults)", moved, B, bad);
    for (int i = 0; i < B * T; i++) again[i] = i % T;
    pe.ops->train_positions(&pe, again, B, T, 42);
    CHECK(memcmp(pos, again, sizeof pos) == 0, "the same key moves the same rows");
    pelab_posenc_free(&pe);
    pelab_params_free(&params);
}

/* 2-D (an image's grid, G = 4, the class token at (0, 0)): the defaults follow the task (2
 * coordinates of 2 digits); a shifted sequence moves each coordinate by its own z, every token
 * alike, within Lmax; coordinate 0 draws what a 1-D sequence draws from the same key. */
static void check_shift_2d(void) {
    enum { G = 4, T = 1 + G * G, B = 300 };
    const struct pelab_pe_layout grid = {2, 1, G};
    struct pelab_posenc pe, pe1;
    struct pelab_params params = {0}, params1 = {0};
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "seqpe-shift-prob", "0.5");
    CHECK(pelab_posenc_init_nd(&pe, "seqpe", &o, &params, SD, SH, SN, T, &grid) == PELAB_OK, "2-D: %s",
          pelab_last_error());
    pe.ctx = test_ctx();
    const struct pelab_seqpe_encoder *e = pelab_seqpe_encoder_of(&pe);
    CHECK(e->dims == 2 && e->digits == 2 && e->capacity == 100, "2-D defaults: %d coordinates of %d digits",
          e->dims, e->digits);
    static int32_t pos[B * T * 2], base[B * T * 2];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) { /* (0, 0), then (r, c) for r, c in 1..G */
            base[(b * T + t) * 2] = t ? 1 + (t - 1) / G : 0;
            base[(b * T + t) * 2 + 1] = t ? 1 + (t - 1) % G : 0;
        }
    memcpy(pos, base, sizeof pos);
    pe.ops->train_positions(&pe, pos, B, T, 77);
    int moved = 0, bad = 0, apart = 0;
    for (int b = 0; b < B; b++) {
        const int32_t z0 = pos[b * T * 2] - base[b * T * 2], z1 = pos[b * T * 2 + 1] - base[b * T * 2 + 1];
        moved += z0 || z1;
        apart += z0 != z1;
        for (int t = 0; t < T; t++) {
            const int32_t *p = pos + (b * T + t) * 2, *q = base + (b * T + t) * 2;
            bad += p[0] != q[0] + z0 || p[1] != q[1] + z1 || p[0] < 0 || p[0] >= 100 || p[1] < 0 || p[1] >= 100;
        }
    }
    CHECK(bad == 0 && moved > B / 3 && moved < 2 * B / 3, "50%% of images shifted as a whole (%d of %d, %d faults)",
          moved, B, bad);
    CHECK(apart > moved * 9 / 10, "each coordinate its own shift (%d of %d moved apart)", apart, moved);
    /* coordinate 0 against the 1-D draw: the same rows move by the same z when the room is equal */
    struct pelab_opts o1 = {0};
    pelab_opts_set(&o1, "seqpe-shift-prob", "0.5");
    pelab_opts_set(&o1, "seqpe-max-pos", "100");
    CHECK(pelab_posenc_init(&pe1, "seqpe", &o1, &params1, SD, SH, SN, G + 1) == PELAB_OK, "1-D: %s", pelab_last_error());
    pe1.ctx = test_ctx();
    static int32_t one[B * (G + 1)];
    for (int i = 0; i < B * (G + 1); i++) one[i] = i % (G + 1);
    pe1.ops->train_positions(&pe1, one, B, G + 1, 77);
    int same = 0;
    for (int b = 0; b < B; b++) same += one[b * (G + 1)] == pos[b * T * 2] - base[b * T * 2];
    CHECK(same == B, "coordinate 0 moves as a 1-D sequence would (%d of %d)", same, B);
    struct pelab_posenc bad_pe;
    struct pelab_params bad_params = {0};
    struct pelab_opts o2 = {0};
    pelab_opts_set(&o2, "seqpe-dims", "1");
    CHECK(pelab_posenc_init_nd(&bad_pe, "seqpe", &o2, &bad_params, SD, SH, SN, T, &grid) == PELAB_ERR_USAGE &&
              strstr(pelab_last_error(), "--seqpe-dims 1: this task's positions are 2-D"),
          "--seqpe-dims 1 on a grid: %s", pelab_last_error());
    pelab_posenc_free(&bad_pe);
    pelab_params_free(&bad_params);
    pelab_posenc_free(&pe);
    pelab_posenc_free(&pe1);
    pelab_params_free(&params);
    pelab_params_free(&params1);
}

int main(void) {
    pelab_threads_set(1); /* problems of a few rows: threads only cost (threading: test_attn) */
    check_digits();
    check_unique();
    printf("encoder gradients\n");
    const int32_t p1[5] = {0, 7, 31, 123, 999};
    check_encoder("1-D, 2 blocks", 10, 3, 1, 2, 8, 2, 1, 6, p1, 5);
    const int32_t p2[8] = {0, 0, 3, 1, 8, 8, 2, 5};
    check_encoder("2-D, base 3, 1 block", 3, 2, 2, 1, 6, 3, 1, 4, p2, 4);
    const int32_t p3[3] = {1, 2, 3};
    check_encoder("1-D, base 2, 3 blocks, 1 head, no final norm", 2, 4, 1, 3, 4, 1, 0, 5, p3, 3);
    printf("the sites through the interface\n");
    check_sites("input", "shared");
    check_sites("attn-add", "shared");
    check_sites("attn-mul", "per-layer");
    check_sites("attn-bias", "per-layer");
    check_sites("attn-bias", "shared");
    check_table();
    check_long_eval("input");
    check_long_eval("attn-add");
    check_long_eval("attn-mul");
    check_long_eval("attn-bias");
    printf("the regularisers\n");
    check_losses();
    check_draws(1, 20000, 50, 32, 32);
    check_draws(2, 30, 6, 8, 10);
    check_aux("input");
    check_aux("attn-bias");
    check_reg_2d();
    check_shift();
    check_shift_2d();
    return check_report("test_seqpe");
}
