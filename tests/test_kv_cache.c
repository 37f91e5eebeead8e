/* Generation with a KV cache (pelab/kv_cache.h) against the model's forward pass over the whole
 * context, for every registered encoding under each setting of its contract (lib/models.h): a prompt appended at once, in
 * pieces, or a longer one (attention as matrix products), then one token at a time gives every position's logits of the full pass (to 1e-12 in
 * the double build, 2e-5 of the logits' scale in float; built both ways), from shifted
 * positions too; greedy generation picks the same tokens as recomputing the context for every
 * token. With bf16 weights (pelab_model_use_bf16_weights) the cache's logits equal the full pass of
 * the model whose matrices this test rounds itself, and short steps read only the bf16 copies; a
 * bf16 cache is used and its logits finite. A batch of sequences stepped together gives each
 * the logits of its cache stepped alone. Refusals:
 * a learned table past its end (the cache keeps its length), dynamic NTK past L_train and the
 * interpolated learned table (pelab_kv_cache_check), a full cache. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/models.h"
#include "pelab/kv_cache.h"
#include "pelab/model.h"
#include "pelab/rng.h"
#include "pelab/status.h"

#ifdef PELAB_DOUBLE
#define TOL 1e-12
#else
#define TOL 2e-5
#endif

enum { V = 13, L = 30, PROMPT = 7, MAX_SEQ = 40, GEN = 10 };

/* A model with the options ("key", "value" pairs, NULL-terminated), weights away from their init. */
static int make_model(struct pelab_model *m, const char *const *opts) {
    return test_model(m, opts, NULL, V, MAX_SEQ, NULL, 3, 0.3) == PELAB_OK;
}

/* Every position's logits by the cache (in bf16 when bf16 is set): the prompt split as `pieces`
 * says (sizes summing to PROMPT, 0-terminated), then one token at a time. out (L,V). */
static int cached_logits(struct pelab_model *m, const int32_t *tok, const int32_t *pos,
                         const int *pieces, pelab_real *out, int bf16) {
    struct pelab_kv_cache *c;
    int rc = bf16 ? pelab_kv_cache_new_bf16(&c, m, L) : pelab_kv_cache_new(&c, m, L);
    int at = 0;
    for (int i = 0; !rc && pieces[i]; i++, at += pieces[i - 1])
        rc = pelab_kv_cache_append(c, tok + at, pos + at, pieces[i], out + (long)at * V);
    for (; !rc && at < L; at++) {
        rc = pelab_kv_cache_append(c, tok + at, pos + at, 1, out + (long)at * V);
        if (!rc && memcmp(pelab_kv_cache_logits(c), out + (long)at * V, V * sizeof *out) != 0)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "pelab_kv_cache_logits is not the last row");
    }
    if (!rc && pelab_kv_cache_length(c) != L)
        rc = pelab_fail(PELAB_ERR_RUNTIME, "length %d after %d tokens", pelab_kv_cache_length(c), L);
    if (c) pelab_kv_cache_free(c);
    return rc;
}

/* The cache's logits against the full pass's, to rounding. A bf16 cache (bf16 set) changes the
 * model: how far the rounding of k and v (2^-9 relative each) moves the logits depends on the
 * size of the scores (1–2 % of the largest logit for most encodings here, 12 % for SeqPE's
 * attn-mul, whose keys are scaled by its position vectors), so its arithmetic is held exactly at
 * the kernel (tests/test_attn.c: the reference kernel on keys and values rounded there); here its
 * logits must be finite and moved (the cache is the bf16 one). */
static void check_logits(const struct pe_case *c, int shift, int bf16) {
    const char *pe = c->ops->name, *extra = c->settings;
    struct pelab_model m;
    if (!make_model(&m, c->opts)) {
        CHECK(0, "%s %s: %s", pe, extra, pelab_last_error());
        return;
    }
    int32_t tok[L], pos[L];
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 5);
    for (int i = 0; i < L; i++) {
        tok[i] = (int32_t)pelab_rng_below(&rng, V);
        pos[i] = i + shift;
    }
    pelab_model_forward(&m, tok, NULL, pos, 1, L);
    CHECK(m.status == PELAB_OK, "%s: full forward: %s", pe, pelab_last_error());
    static pelab_real full[L * V], got[L * V];
    memcpy(full, pelab_model_logits(&m), sizeof full);
    double scale = 0;
    for (int i = 0; i < L * V; i++) scale = fmax(scale, fabs((double)full[i]));
    const double tol = TOL * fmax(1, scale);
    /* the prompt at once, in pieces, and a long one (the cache's matrix-product path) */
    static const int whole[] = {PROMPT, 0}, split[] = {3, 1, 3, 0}, longer[] = {20, 2, 0};
    const int *ways[] = {whole, split, longer};
    for (int w = 0; w < 3; w++) {
        memset(got, 0, sizeof got);
        int rc = cached_logits(&m, tok, pos, ways[w], got, bf16);
        CHECK(rc == PELAB_OK, "%s %s: cached: %s", pe, extra, pelab_last_error());
        double worst = 0;
        int where = 0;
        for (int i = 0; i < L * V; i++)
            if (!(fabs((double)got[i] - (double)full[i]) <= worst)) { /* a NaN is the worst */
                worst = fabs((double)got[i] - (double)full[i]);
                where = i / V;
            }
        if (bf16)
            CHECK(worst > tol && isfinite(worst), "%s %s shift %d: a bf16 cache moves the logits by %.3g at "
                  "position %d (max |logit| %.3g)", pe, extra, shift, worst, where, scale);
        else
            CHECK(worst <= tol, "%s %s shift %d: cached logits differ by %.3g at position %d (tolerance %.3g)",
                  pe, extra, shift, worst, where, tol);
        if (w == 0)
            printf("  %-12s %-28s shift %d %s max |logit| %.3g  |Δ| %.2g\n", pe, extra, shift,
                   bf16 ? "bf16 cache" : "          ", scale, worst);
    }
    pelab_model_free(&m);
}

/* x rounded to bf16's 8 significant bits, ties to even (rint's default mode), by arithmetic */
static double bf16_round(double x) {
    int e;
    const double f = frexp(x, &e); /* x = f · 2^e, 0.5 ≤ |f| < 1 */
    return ldexp(rint(ldexp(f, 8)), e - 8);
}

static double max_diff(const pelab_real *a, const pelab_real *b, long n) {
    double worst = 0;
    for (long i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        if (d != d) return INFINITY; /* a NaN on either side */
        worst = fmax(worst, d);
    }
    return worst;
}

/* The weight matrices of layer l (−1: the embedding and an untied head; −1 for none), mats (4,). */
static void matrices_of(const struct pelab_model *m, int l, int *mats) {
    const int outer[4] = {m->wte, m->lm_head, -1, -1};
    for (int i = 0; l < 0 && i < 4; i++) mats[i] = outer[i];
    if (l >= 0) mats[0] = m->layer[l].qkv, mats[1] = m->layer[l].proj, mats[2] = m->layer[l].fc, mats[3] = m->layer[l].fcproj;
}

/* Generation with bf16 weights, tied head and untied: a short prompt and each token read the bf16
 * copies, a long prompt the float32 product of the rounded values; both give the full pass of the
 * same model with its matrices rounded here, which differs from the unrounded model's by far more
 * than the tolerance. Then, with the float32 values of every matrix a decoding step multiplies by
 * gone (NaN: the blocks', the untied head's, and the tied head's rows of two tokens the test
 * never feeds, whose embedding rows nothing else reads), a short prompt and every token after it
 * give the same logits. */
static void check_bf16_weights(const struct pe_case *c, int tied) {
    const char *pe = c->ops->name, *extra = c->settings;
    const char *const head[] = {"tied", tied ? "on" : "off", NULL};
    struct pelab_model m, r;
    if (test_model(&m, c->opts, head, V, MAX_SEQ, NULL, 3, 0.3) || test_model(&r, c->opts, head, V, MAX_SEQ, NULL, 3, 0.3)) {
        CHECK(0, "%s %s: %s", pe, extra, pelab_last_error());
        return;
    }
    enum { UNUSED = 2 }; /* tokens V − 2, V − 1 are never fed */
    int32_t tok[L], pos[L];
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 7);
    for (int i = 0; i < L; i++) tok[i] = (int32_t)pelab_rng_below(&rng, V - UNUSED), pos[i] = i;
    static pelab_real plain[L * V], full[L * V], got[L * V];
    pelab_model_forward(&r, tok, NULL, pos, 1, L);
    memcpy(plain, pelab_model_logits(&r), sizeof plain);
    for (int l = -1; l < r.cfg.n_layers; l++) { /* the embedding and head, then each block's */
        int mats[4];
        matrices_of(&r, l, mats);
        for (int i = 0; i < 4; i++) {
            if (mats[i] < 0) continue;
            pelab_real *x = pelab_params_data(&r.params, mats[i]);
            for (size_t j = 0; j < r.params.list[mats[i]].size; j++)
                x[j] = (pelab_real)bf16_round((double)(float)x[j]); /* the library rounds floats */
        }
    }
    pelab_model_forward(&r, tok, NULL, pos, 1, L);
    memcpy(full, pelab_model_logits(&r), sizeof full);
    double scale = 0;
    for (int i = 0; i < L * V; i++) scale = fmax(scale, fabs((double)full[i]));
    const double tol = TOL * fmax(1, scale);
    const double rounding = max_diff(plain, full, L * V);
    CHECK(rounding > 10 * tol, "%s %s: rounding the matrices moved the logits by only %.3g", pe, extra, rounding);
    int rc = pelab_model_use_bf16_weights(&m);
    CHECK(rc == PELAB_OK, "%s %s: %s", pe, extra, pelab_last_error());
    static const int whole[] = {PROMPT, 0}, longer[] = {20, 2, 0};
    const int *ways[] = {whole, longer};
    for (int w = 0; w < 2 && !rc; w++) {
        rc = cached_logits(&m, tok, pos, ways[w], got, 0);
        CHECK(rc == PELAB_OK, "%s %s: cached with bf16 weights: %s", pe, extra, pelab_last_error());
        const double worst = max_diff(got, full, L * V);
        CHECK(worst <= tol, "%s %s tied %d: bf16-weight logits differ from the rounded model's by %.3g (tolerance %.3g)",
              pe, extra, tied, worst, tol);
        if (w == 0 && tied)
            printf("  %-12s %-28s bf16 weights: |Δ| %.2g (rounding moved them %.2g)\n", pe, extra, worst, rounding);
    }
    for (int l = -1; l < m.cfg.n_layers && !rc; l++) {
        int mats[4];
        matrices_of(&m, l, mats);
        mats[0] = l < 0 ? -1 : mats[0]; /* the embedding's rows are read: only two, below */
        for (int i = 0; i < 4; i++)
            for (size_t j = 0; mats[i] >= 0 && j < m.params.list[mats[i]].size; j++)
                pelab_params_data(&m.params, mats[i])[j] = (pelab_real)NAN;
    }
    const long D = m.cfg.d_model;
    for (long j = (V - UNUSED) * D; tied && j < V * D; j++) pelab_params_data(&m.params, m.wte)[j] = (pelab_real)NAN;
    if (!rc) {
        rc = cached_logits(&m, tok, pos, whole, got, 0);
        CHECK(rc == PELAB_OK && max_diff(got, full, L * V) <= tol,
              "%s %s tied %d: decoding with bf16 weights read the float32 matrices", pe, extra, tied);
    }
    pelab_model_free(&m);
    pelab_model_free(&r);
}

static int argmax(const pelab_real *row) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (row[v] > row[best]) best = v;
    return best;
}

/* Greedy continuation of a prompt: GEN tokens by the cache and by recomputing the context. */
static void check_greedy(const struct pe_case *cs) {
    const char *pe = cs->ops->name, *extra = cs->settings;
    struct pelab_model m;
    if (!make_model(&m, cs->opts)) {
        CHECK(0, "%s %s: %s", pe, extra, pelab_last_error());
        return;
    }
    int32_t a[PROMPT + GEN], b[PROMPT + GEN], pos[PROMPT + GEN];
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 6);
    for (int i = 0; i < PROMPT + GEN; i++) pos[i] = i;
    for (int i = 0; i < PROMPT; i++) a[i] = b[i] = (int32_t)pelab_rng_below(&rng, V);
    struct pelab_kv_cache *c;
    int rc = pelab_kv_cache_new(&c, &m, PROMPT + GEN);
    CHECK(rc == PELAB_OK, "%s: %s", pe, pelab_last_error());
    if (rc) {
        pelab_model_free(&m);
        return;
    }
    rc = pelab_kv_cache_append(c, a, pos, PROMPT, NULL);
    for (int n = PROMPT; n < PROMPT + GEN && !rc; n++) {
        a[n] = argmax(pelab_kv_cache_logits(c));
        if (n + 1 < PROMPT + GEN) rc = pelab_kv_cache_append(c, a + n, pos + n, 1, NULL);
    }
    CHECK(rc == PELAB_OK, "%s: greedy with the cache: %s", pe, pelab_last_error());
    for (int n = PROMPT; n < PROMPT + GEN; n++) {
        pelab_model_forward(&m, b, NULL, pos, 1, n);
        b[n] = argmax(pelab_model_logits(&m) + (long)(n - 1) * V);
    }
    CHECK(memcmp(a, b, sizeof a) == 0, "%s %s: greedy tokens differ with the cache", pe, extra);
    pelab_kv_cache_free(c);
    pelab_model_free(&m);
}

/* A batch of three sequences (prompts of different lengths, sequence 1 sitting out step 2) stepped
 * together gives each sequence the logits of its own cache stepped alone, to rounding; a bf16
 * batch those of a bf16 cache, to bf16's rounding. A full cache refuses the step, which changes
 * no sequence. */
static void check_batch(const struct pe_case *cs, int bf16) {
    const char *pe = cs->ops->name, *extra = cs->settings;
    enum { S = 3, STEPS = 8, CAP = 9 + STEPS };
    static const int prompt[S] = {7, 4, 9};
    struct pelab_model m;
    if (!make_model(&m, cs->opts)) {
        CHECK(0, "%s %s: %s", pe, extra, pelab_last_error());
        return;
    }
    int32_t tok[S][CAP], pos[CAP];
    static pelab_real alone[S][CAP][V];
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 7);
    for (int p = 0; p < CAP; p++) pos[p] = p;
    int rc = PELAB_OK;
    for (int i = 0; i < S && !rc; i++) { /* each sequence alone: every position's logits */
        for (int p = 0; p < CAP; p++) tok[i][p] = (int32_t)pelab_rng_below(&rng, V);
        struct pelab_kv_cache *c;
        rc = bf16 ? pelab_kv_cache_new_bf16(&c, &m, CAP) : pelab_kv_cache_new(&c, &m, CAP);
        for (int p = 0; p < CAP && !rc; p++) {
            rc = pelab_kv_cache_append(c, tok[i] + p, pos + p, 1, NULL);
            if (!rc) memcpy(alone[i][p], pelab_kv_cache_logits(c), sizeof alone[i][p]);
        }
        pelab_kv_cache_free(c);
    }
    struct pelab_kv_batch *b = NULL;
    if (!rc) rc = pelab_kv_batch_new(&b, &m, S, CAP, bf16);
    int at[S];
    for (int i = 0; i < S && !rc; i++) {
        at[i] = prompt[i];
        rc = pelab_kv_cache_append(pelab_kv_batch_sequence(b, i), tok[i], pos, prompt[i], NULL);
    }
    double worst = 0, scale = 0;
    for (int step = 0; step < STEPS && !rc; step++) {
        int32_t t[S], p[S];
        for (int i = 0; i < S; i++) {
            const int sits = i == 1 && step == 2;
            t[i] = sits ? -1 : tok[i][at[i]];
            p[i] = at[i];
        }
        rc = pelab_kv_batch_step(b, t, p);
        for (int i = 0; i < S && !rc; i++) {
            if (t[i] < 0) continue;
            const pelab_real *got = pelab_kv_cache_logits(pelab_kv_batch_sequence(b, i));
            for (int v = 0; v < V; v++) {
                const double d = fabs((double)got[v] - (double)alone[i][at[i]][v]);
                worst = d <= worst ? worst : d; /* a NaN is the worst */
                scale = fmax(scale, fabs((double)alone[i][at[i]][v]));
            }
            at[i]++;
        }
    }
    CHECK(rc == PELAB_OK, "%s %s: batch: %s", pe, extra, pelab_last_error());
    CHECK(at[0] == 7 + STEPS && at[1] == 4 + STEPS - 1 && at[2] == 9 + STEPS &&
              pelab_kv_cache_length(pelab_kv_batch_sequence(b, 1)) == at[1],
          "%s %s: the batch stepped its sequences to %d, %d, %d", pe, extra, at[0], at[1], at[2]);
    /* In a bf16 cache the products' other order of sums (a batch's rows together) can move a key
     * or value across a rounding boundary of bf16: by one bf16 unit, 2^-8 of it, where a float32
     * cache moves by float32's rounding. The bound follows (the logits of a wrong row or cache
     * move by whole units, 0.4–2.9 here). */
    const double tol = bf16 ? 0x1p-7 * fmax(1, scale) : TOL * fmax(1, scale);
    CHECK(worst <= tol, "%s %s%s: a batch's logits differ from each sequence's alone by %.3g (max "
          "|logit| %.3g, tolerance %.3g)", pe, extra, bf16 ? " bf16" : "", worst, scale, tol);
    /* sequence 2 is full: the step is refused and no sequence moves */
    if (!rc) {
        const int32_t t[S] = {1, 1, 1}, p[S] = {at[0], at[1], at[2]};
        CHECK(pelab_kv_batch_step(b, t, p) == PELAB_ERR_USAGE && strstr(pelab_last_error(), "sequence 2"),
              "%s: a full sequence in the batch: %s", pe, pelab_last_error());
        for (int i = 0; i < S; i++)
            CHECK(pelab_kv_cache_length(pelab_kv_batch_sequence(b, i)) == at[i],
                  "%s: a refused step moved sequence %d", pe, i);
    }
    pelab_kv_batch_free(b);
    pelab_model_free(&m);
}

/* Batches sized by memory: small caches all fit, caches past the budget one at a time, and a
 * bf16 cache's half-size keys and values fit more of them. */
static void check_batch_fit(void) {
    struct pelab_model m;
    PELAB_ASSERT(make_model(&m, (const char *const[]){"pe", "rope", "layers", "6", NULL}));
    CHECK(pelab_kv_batch_fit(&m, L, 0, 8) == 8, "8 caches of %d positions: %d fit", L, pelab_kv_batch_fit(&m, L, 0, 8));
    CHECK(pelab_kv_batch_fit(&m, L, 0, 3) == 3, "at most 3: %d", pelab_kv_batch_fit(&m, L, 0, 3));
    CHECK(pelab_kv_batch_fit(&m, 1 << 26, 0, 8) == 1, "caches of 2^26 positions: %d fit", pelab_kv_batch_fit(&m, 1 << 26, 0, 8));
    /* 6 layers · 2 heads · (8 + 8) = 192 reals a position of keys and values, 128 in bf16 (and a
     * layer widened), and some scores: a few caches of 2^19 positions a GiB in float, more in bf16 */
    const int cap = 1 << 19, f32 = pelab_kv_batch_fit(&m, cap, 0, 100), f16 = pelab_kv_batch_fit(&m, cap, 1, 100);
    CHECK(f32 >= 1 && f32 < 8 && f16 >= f32 && (sizeof(pelab_real) > 4 || f16 > f32),
          "caches of 2^19 positions: %d fit in float32, %d in bf16", f32, f16);
    pelab_model_free(&m);
}

static void check_refusals(void) {
    struct pelab_model m;
    struct pelab_kv_cache *c;
    /* a learned table refuses positions past its end: the cache keeps what it had */
    PELAB_ASSERT(make_model(&m, (const char *const[]){"pe", "learned", NULL}));
    int32_t tok[4] = {1, 2, 3, 4}, pos[4] = {0, 1, MAX_SEQ, MAX_SEQ + 1};
    PELAB_ASSERT(pelab_kv_cache_new(&c, &m, 8) == PELAB_OK);
    CHECK(pelab_kv_cache_append(c, tok, pos, 2, NULL) == PELAB_OK, "learned: %s", pelab_last_error());
    CHECK(pelab_kv_cache_append(c, tok + 2, pos + 2, 2, NULL) == PELAB_ERR_USAGE &&
              strstr(pelab_last_error(), "beyond the table"),
          "learned past its table: %s", pelab_last_error());
    CHECK(pelab_kv_cache_length(c) == 2, "a refused append changed the length to %d", pelab_kv_cache_length(c));
    /* a full cache */
    int32_t more[7] = {0}, mpos[7] = {2, 3, 4, 5, 6, 7, 8};
    CHECK(pelab_kv_cache_append(c, more, mpos, 7, NULL) == PELAB_ERR_USAGE &&
              strstr(pelab_last_error(), "the KV cache holds 8 positions"),
          "overflow: %s", pelab_last_error());
    pelab_kv_cache_free(c);
    pelab_model_free(&m);
    /* the interpolated table past its end, dynamic NTK past L_train: refused with the reason */
    PELAB_ASSERT(make_model(&m, (const char *const[]){"pe", "learned", "ape-extend", "interpolate", NULL}));
    CHECK(pelab_kv_cache_new(&c, &m, MAX_SEQ) == PELAB_OK, "learned within its table: %s", pelab_last_error());
    pelab_kv_cache_free(c);
    CHECK(pelab_kv_cache_new(&c, &m, MAX_SEQ + 1) == PELAB_ERR_USAGE && !c &&
              strstr(pelab_last_error(), "--ape-extend interpolate"),
          "learned interpolated: %s", pelab_last_error());
    pelab_model_free(&m);
    PELAB_ASSERT(make_model(&m, (const char *const[]){"pe", "rope", "rope-scaling", "dynamic-ntk", "rope-scale", "4", NULL}));
    CHECK(pelab_kv_cache_check(&m, MAX_SEQ) == PELAB_OK, "dynamic-ntk within L_train: %s", pelab_last_error());
    CHECK(pelab_kv_cache_new(&c, &m, 2 * MAX_SEQ) == PELAB_ERR_USAGE &&
              strstr(pelab_last_error(), "dynamic-ntk"),
          "dynamic-ntk past L_train: %s", pelab_last_error());
    pelab_model_free(&m);
}

static void check_case(struct pe_case *c, void *unused) {
    check_logits(c, 0, 0);
    check_logits(c, 5, 0);
    check_logits(c, 0, 1);
    check_greedy(c);
    check_batch(c, 0);
    check_batch(c, 1);
    check_bf16_weights(c, 1);
    check_bf16_weights(c, 0);
}

int main(void) {
    /* Generation is of sequences: every encoding of 1-D positions under each setting of its
     * contract (the 2-D ones, for images, are for bidirectional models that generate nothing) */
    for_each_pe_case(&(struct pe_walk){PE_TEXT, 0, 0, NULL}, check_case, NULL);
    check_refusals();
    check_batch_fit();
    return check_report("test_kv_cache");
}
