/* Properties of the BIAS encodings (double build):
 *  - ALiBi's slopes are the published ones for 8, 12 and 16 heads (and the paper's recursion for
 *    every H up to 64); ALiBi and T5 biases depend on t − s only;
 *  - T5's buckets: exact below nb/2, monotone in distance, the last one from max-distance on, and
 *    the values of the formula for the defaults;
 *  - FIRE equals its formula evaluated here from the parameters, on every path of the tile code
 *    (the tile's own table, per entry, the pass's table, and after a weight changed since it);
 *    it depends on t − s, and on t only through max(t, L);
 *  - whole models: alibi and t5 give the same logits under a global position shift; fire does
 *    exactly when every query stays below L before and after the shift; for every encoding that
 *    may act at BIAS (lib/models.h), causality holds and a forward and backward on two threads
 *    gives the same bits twice. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/models.h"
#include "pelab/model.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/threads.h"

/* An encoding on its own: H heads, 2 layers, training context max_seq. */
struct enc {
    struct pelab_posenc pe;
    struct pelab_params params;
};

static void enc_init(struct enc *e, const char *name, int H, int max_seq, const char *const *kv) {
    memset(e, 0, sizeof *e);
    struct pelab_opts o = {0};
    for (; kv && kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    PELAB_ASSERT(pelab_posenc_init(&e->pe, name, &o, &e->params, 4 * H, H, 2, max_seq) == PELAB_OK);
    e->pe.ctx = test_ctx();
    PELAB_ASSERT(pelab_params_alloc(&e->params) == PELAB_OK);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 21);
    if (e->pe.ops->init_params) e->pe.ops->init_params(&e->pe, &rng);
}

static void enc_free(struct enc *e) {
    pelab_posenc_free(&e->pe);
    pelab_params_free(&e->params);
}

static double bias1(struct enc *e, int layer, int h, int32_t t, int32_t s) {
    double out;
    e->pe.ops->bias_tile(&e->pe, layer, h, &out, &t, 1, &s, 1);
    return out;
}

static double *param(struct enc *e, const char *name) {
    int i = pelab_params_find(&e->params, name);
    PELAB_ASSERT(i >= 0);
    return pelab_params_data(&e->params, i);
}

/* --- ALiBi ------------------------------------------------------------------------------------ */

/* The paper's reference recursion (get_slopes in Press et al.'s code), written independently of
 * the closed form in pe_alibi.c: start = 2^(−2^(−(log2 n − 3))), slopes start·start^i; for n not
 * a power of two, those of the closest lower power c, then get_slopes(2c)[0::2][:n − c]. */
static void paper_slopes(int n, double *out) {
    double lg = log2((double)n);
    if (lg == floor(lg)) {
        double start = pow(2.0, -pow(2.0, -(lg - 3)));
        for (int i = 0; i < n; i++) out[i] = start * pow(start, i);
        return;
    }
    int c = 1 << (int)floor(lg);
    double twice[2 * 64];
    paper_slopes(c, out);
    paper_slopes(2 * c, twice);
    for (int i = 0; i < n - c; i++) out[c + i] = twice[2 * i];
}

static void check_alibi_slopes(void) {
    double published[3][16];
    int heads[3] = {8, 12, 16};
    for (int i = 0; i < 8; i++) published[0][i] = 1.0 / (2 << i);      /* 1/2 … 1/256 */
    for (int i = 0; i < 16; i++) published[2][i] = pow(2.0, -0.5 * (i + 1)); /* 2^-0.5 … 2^-8 */
    for (int i = 0; i < 8; i++) published[1][i] = published[0][i];
    for (int i = 0; i < 4; i++) published[1][8 + i] = pow(2.0, -0.5 - i);     /* 2^-0.5 … 2^-3.5 */
    for (int k = 0; k < 3; k++) {
        struct enc e;
        enc_init(&e, "alibi", heads[k], 16, NULL);
        double ref[16], worst = 0;
        paper_slopes(heads[k], ref);
        for (int h = 0; h < heads[k]; h++) {
            double m = -bias1(&e, 1, h, 1, 0); /* bias(1, 0) = −m_h */
            worst = fmax(worst, fabs(m - published[k][h]) / published[k][h]);
            CHECK(fabs(ref[h] - published[k][h]) <= 1e-14 * published[k][h],
                  "alibi %d heads: the paper's recursion gives %.17g for head %d, published %.17g",
                  heads[k], ref[h], h, published[k][h]);
        }
        CHECK(worst <= 1e-15, "alibi %d heads: slopes off the published ones by %.3g", heads[k], worst);
        printf("  alibi %2d heads: slopes equal the published ones (%.3g)\n", heads[k], worst);
        enc_free(&e);
    }
    double worst = 0;
    for (int H = 1; H <= 64; H++) {
        struct enc e;
        enc_init(&e, "alibi", H, 16, NULL);
        double ref[64];
        paper_slopes(H, ref);
        for (int h = 0; h < H; h++) worst = fmax(worst, fabs(-bias1(&e, 0, h, 1, 0) - ref[h]) / ref[h]);
        enc_free(&e);
    }
    CHECK(worst <= 1e-14, "alibi: slopes differ from the paper's recursion by %.3g for some H ≤ 64", worst);
}

/* --- t − s only ------------------------------------------------------------------------------- */

enum { NQ = 7, NK = 9 };
static const int32_t qpos[NQ] = {0, 3, 5, 17, 64, 200, 1000};
static const int32_t kpos[NK] = {0, 1, 3, 4, 16, 60, 199, 700, 1003};

/* The tile at positions (q + a, k + a) equals the tile at (q, k), bit for bit, for shifts a. */
static void check_relative(const char *label, struct enc *e) {
    int32_t q2[NQ], k2[NK];
    double ref[NQ * NK], got[NQ * NK];
    const int32_t shifts[] = {1, 77, -1003, 123456789};
    int same = 1;
    for (int h = 0; h < e->pe.H; h++) {
        e->pe.ops->bias_tile(&e->pe, 1, h, ref, qpos, NQ, kpos, NK);
        for (size_t a = 0; a < sizeof shifts / sizeof *shifts; a++) {
            for (int i = 0; i < NQ; i++) q2[i] = qpos[i] + shifts[a];
            for (int j = 0; j < NK; j++) k2[j] = kpos[j] + shifts[a];
            e->pe.ops->bias_tile(&e->pe, 1, h, got, q2, NQ, k2, NK);
            same &= memcmp(ref, got, sizeof ref) == 0;
        }
    }
    CHECK(same, "%s: the bias changed under a shift of both positions", label);
}

static void check_alibi_relative(void) {
    struct enc e;
    enc_init(&e, "alibi", 6, 16, NULL);
    check_relative("alibi", &e);
    double worst = 0;
    for (int h = 0; h < 6; h++)
        for (int i = 0; i < NQ; i++)
            for (int j = 0; j < NK; j++)
                worst = fmax(worst, fabs(bias1(&e, 0, h, qpos[i], kpos[j]) - bias1(&e, 0, h, 1, 0) * (qpos[i] - kpos[j])));
    CHECK(worst < 1e-12, "alibi: bias(t, s) differs from −m_h (t − s) by %.3g", worst);
    enc_free(&e);
}

/* --- T5 --------------------------------------------------------------------------------------- */

/* With b[bucket, h] = bucket, the bias reads the bucket back. */
static void t5_identity_table(struct enc *e, const char *name) {
    double *b = param(e, name);
    for (int k = 0; k < e->params.list[pelab_params_find(&e->params, name)].shape[0]; k++)
        for (int h = 0; h < e->pe.H; h++) b[k * e->pe.H + h] = k + 1000.0 * h;
}

static void check_t5_buckets(int nb, int maxd, const char *table) {
    char snb[16], smaxd[16];
    snprintf(snb, sizeof snb, "%d", nb);
    snprintf(smaxd, sizeof smaxd, "%d", maxd);
    struct enc e;
    enc_init(&e, "t5", 3, 16, (const char *const[]){"t5-buckets", snb, "t5-max-distance", smaxd, "t5-table", table, NULL});
    int per_layer = strcmp(table, "per-layer") == 0;
    t5_identity_table(&e, per_layer ? "blocks.1.attn.t5.bias" : "pe.t5.bias");
    int ok_exact = 1, ok_mono = 1, ok_last = 1, ok_head = 1, ok_neg = 1, prev = 0;
    for (int n = 0; n <= 3 * maxd + 10; n++) {
        double v = bias1(&e, 1, 0, 5000 + n, 5000);
        int b = (int)v;
        ok_exact &= n >= nb / 2 || b == n;
        ok_mono &= b >= prev && b <= nb - 1;
        ok_last &= n < maxd || b == nb - 1;
        ok_head &= bias1(&e, 1, 2, 5000 + n, 5000) == v + 2000;
        prev = b;
    }
    for (int n = 1; n < 10; n++) ok_neg &= bias1(&e, 1, 1, 5000, 5000 + n) == 1000; /* s > t: n = 0 */
    CHECK(ok_exact, "t5 %d/%d: buckets below nb/2 are not the distance itself", nb, maxd);
    CHECK(ok_mono, "t5 %d/%d: buckets are not monotone in distance", nb, maxd);
    CHECK(ok_last, "t5 %d/%d: a distance ≥ max-distance is not in the last bucket", nb, maxd);
    CHECK(ok_head, "t5 %d/%d: head 2 does not read its own column", nb, maxd);
    CHECK(ok_neg, "t5 %d/%d: s > t is not bucket 0", nb, maxd);
    check_relative("t5", &e);
    enc_free(&e);
}

/* The formula's values for the defaults (32 buckets, max distance 128), as T5 computes them. */
static void check_t5_defaults(void) {
    struct enc e;
    enc_init(&e, "t5", 2, 16, NULL);
    t5_identity_table(&e, "pe.t5.bias");
    const int n[] = {0, 1, 15, 16, 17, 20, 24, 32, 48, 64, 100, 127, 128, 1000};
    const int want[] = {0, 1, 15, 16, 16, 17, 19, 21, 24, 26, 30, 31, 31, 31};
    for (size_t i = 0; i < sizeof n / sizeof *n; i++) {
        double b = bias1(&e, 0, 0, n[i], 0);
        CHECK(b == want[i], "t5 defaults: distance %d in bucket %g, expected %d", n[i], b, want[i]);
    }
    int hit[32] = {0};
    for (int d = 0; d < 200; d++) hit[(int)bias1(&e, 0, 0, d, 0)] = 1;
    int all = 1;
    for (int k = 0; k < 32; k++) all &= hit[k];
    CHECK(all, "t5 defaults: some bucket is never used by distances 0..199");
    enc_free(&e);
}

/* --- FIRE ------------------------------------------------------------------------------------- */

/* bias_h(t, s) from the parameters, straight from the formula (SPEC §2.2). */
static double fire_formula(struct enc *e, const char *prefix, int depth, int W, int h, double t,
                           double s) {
    char name[96];
    snprintf(name, sizeof name, "%s.c", prefix);
    double c = param(e, name)[0];
    snprintf(name, sizeof name, "%s.ell", prefix);
    double L = fabs(param(e, name)[0]) * e->pe.max_seq;
    double a[64], next[64];
    a[0] = log(fabs(c * (t - s)) + 1) / (log(fabs(c * fmax(t, L)) + 1) + 1e-6);
    int n_in = 1;
    for (int i = 0; i <= depth; i++) {
        int n_out = i == depth ? e->pe.H : W;
        snprintf(name, sizeof name, "%s.layers.%d.weight", prefix, i);
        const double *w = param(e, name), *b = NULL;
        if (i < depth) {
            snprintf(name, sizeof name, "%s.layers.%d.bias", prefix, i);
            b = param(e, name);
        }
        for (int o = 0; o < n_out; o++) {
            double z = b ? b[o] : 0;
            for (int k = 0; k < n_in; k++) z += w[o * n_in + k] * a[k];
            next[o] = i < depth && z < 0 ? 0 : z;
        }
        memcpy(a, next, sizeof(double) * (size_t)n_out);
        n_in = n_out;
    }
    return a[h];
}

static void check_fire(const char *name, const char *prefix, double ell) {
    const int W = 12, depth = 2, max_seq = 20; /* L = 20·|ℓ| */
    struct enc e;
    enc_init(&e, name, 3, max_seq, (const char *const[]){"fire-width", "12", NULL});
    char pname[96];
    snprintf(pname, sizeof pname, "%s.ell", prefix);
    param(&e, pname)[0] = ell;
    snprintf(pname, sizeof pname, "%s.c", prefix);
    param(&e, pname)[0] = 0.3;
    const double L = fabs(ell) * max_seq;
    /* tiles that take each path: contiguous below L (tabulated), crossing L, scattered (too wide
     * to tabulate) */
    int32_t contiguous[12], crossing[12], scattered[12] = {0, 2, 3, 9, 500, 4, 7, 1, 30, 31, 5, 6};
    for (int i = 0; i < 12; i++) contiguous[i] = i, crossing[i] = (int32_t)L - 6 + i;
    const int32_t *tiles[3] = {contiguous, crossing, scattered};
    double out[144], tile_own[3][3][144], worst = 0;
    for (int k = 0; k < 3; k++)
        for (int h = 0; h < 3; h++) {
            e.pe.ops->bias_tile(&e.pe, 1, h, tile_own[k][h], tiles[k], 12, tiles[k], 12);
            for (int i = 0; i < 12; i++)
                for (int j = 0; j < 12; j++)
                    worst = fmax(worst, fabs(tile_own[k][h][i * 12 + j] - fire_formula(&e, prefix, depth, W, h, tiles[k][i], tiles[k][j])));
        }
    CHECK(worst < 1e-12, "%s: tiles differ from the formula by %.3g", name, worst);
    /* the same tiles after a pass's prepare (its table of every distance to 500) give the same
     * bits; once a weight changes outside a pass, they are the formula's again, not the table's */
    int32_t pass[36];
    for (int k = 0; k < 3; k++) memcpy(pass + 12 * k, tiles[k], sizeof contiguous);
    CHECK(pelab_posenc_prepare(&e.pe, pass, 3, 12) == PELAB_OK, "%s: prepare: %s", name, pelab_last_error());
    int same = 1;
    for (int k = 0; k < 3; k++)
        for (int h = 0; h < 3; h++) {
            e.pe.ops->bias_tile(&e.pe, 1, h, out, tiles[k], 12, tiles[k], 12);
            same = same && memcmp(out, tile_own[k][h], sizeof out) == 0;
        }
    CHECK(same, "%s: the pass's table differs from the tiles' own", name);
    param(&e, pname)[0] = 0.35; /* c */
    worst = 0;
    for (int k = 0; k < 3; k++)
        for (int h = 0; h < 3; h++) {
            e.pe.ops->bias_tile(&e.pe, 1, h, out, tiles[k], 12, tiles[k], 12);
            for (int i = 0; i < 12; i++)
                for (int j = 0; j < 12; j++)
                    worst = fmax(worst, fabs(out[i * 12 + j] - fire_formula(&e, prefix, depth, W, h, tiles[k][i], tiles[k][j])));
        }
    CHECK(worst < 1e-12, "%s: after a weight changed, tiles differ from the formula by %.3g", name, worst);
    /* below L only t − s matters; at and above L, t itself does through max(t, L) */
    double below = 0, above = 1e300;
    int tl = (int)ceil(L);
    for (int n = 0; n < 6; n++)
        for (int t = n; t + 1 < L; t++) below = fmax(below, fabs(bias1(&e, 1, 0, t, t - n) - bias1(&e, 1, 0, n, 0)));
    for (int n = 1; n < 6; n++)
        for (int t = tl; t < tl + 5; t++) above = fmin(above, fabs(bias1(&e, 1, 0, t + 1, t + 1 - n) - bias1(&e, 1, 0, t, t - n)));
    CHECK(below < 1e-12, "%s: below L the bias depends on more than t − s (%.3g)", name, below);
    CHECK(above > 1e-9, "%s: above L the bias does not depend on t (%.3g)", name, above);
    printf("  %-11s ℓ %-5g formula %.3g, below L Δ %.3g, above L min Δ %.3g\n", name, ell, worst, below, above);
    enc_free(&e);
}

/* --- whole models ----------------------------------------------------------------------------- */

enum { V = 11, B = 2, T = 9 };
static const int32_t tokens[B * T] = {1, 4, 2, 9, 3, 3, 7, 0, 5, 10, 2, 6, 6, 1, 8, 2, 4, 3};

/* d-model 16, 2 heads, 2 layers, training context T; weights perturbed so that positions matter;
 * FIRE's ℓ set to `ell` (L = T·|ℓ|) when given. */
static void make_model(struct pelab_model *m, const char *const *kv, double ell) {
    PELAB_ASSERT(test_model(m, kv, NULL, V, T, NULL, 7, 0.3) == PELAB_OK);
    for (int i = 0; i < m->params.count; i++) {
        size_t len = strlen(m->params.list[i].name);
        if (ell && len > 4 && strcmp(m->params.list[i].name + len - 4, ".ell") == 0)
            pelab_params_data(&m->params, i)[0] = ell;
    }
}

static double shift_change(struct pelab_model *m, int32_t from, int32_t shift) {
    static pelab_real a[B * T * V];
    int32_t pos[B * T];
    for (int i = 0; i < B * T; i++) pos[i] = from + i % T;
    pelab_model_forward(m, tokens, NULL, pos, B, T);
    memcpy(a, pelab_model_logits(m), sizeof a);
    for (int i = 0; i < B * T; i++) pos[i] += shift;
    pelab_model_forward(m, tokens, NULL, pos, B, T);
    double d = 0;
    for (int i = 0; i < B * T * V; i++) d = fmax(d, fabs(a[i] - pelab_model_logits(m)[i]));
    return d;
}

static void check_model_shift(const char *label, const char *const *kv) {
    struct pelab_model m;
    make_model(&m, kv, 0);
    double d = shift_change(&m, 0, 1000);
    CHECK(d < 1e-9, "%s: logits changed by %.3g under a position shift", label, d);
    printf("  %-14s shift 0 → 1000: max |Δlogit| %.3g\n", label, d);
    pelab_model_free(&m);
}

/* FIRE: u = ψ(t − s)/ψ(max(t, L)). With every query below L before and after a shift the
 * normaliser is the constant ψ(L) and the logits stay; once queries pass L it is ψ(t), which a
 * shift changes, so the logits change. */
static void check_fire_shift(const char *pe) {
    struct pelab_model m;
    make_model(&m, (const char *const[]){"pe", pe, NULL}, 3.0); /* L = 27 */
    double inside = shift_change(&m, 0, 10);   /* 0..8 → 10..18, all below 27 */
    double past = shift_change(&m, 0, 1000);   /* → 1000..1008 */
    double above = shift_change(&m, 100, 50);  /* 100..108 → 150..158: all t ≥ L throughout */
    CHECK(inside < 1e-9, "%s: logits changed by %.3g under a shift that keeps every t < L", pe, inside);
    CHECK(past > 1e-6, "%s: logits unchanged by a shift past L", pe);
    CHECK(above > 1e-6, "%s: logits unchanged by a shift with every t ≥ L", pe);
    printf("  %-14s shift below L: %.3g; past L: %.3g; with t ≥ L: %.3g\n", pe, inside, past, above);
    pelab_model_free(&m);
}

static void check_causality(const char *label, const char *const *kv) {
    struct pelab_model m;
    make_model(&m, kv, 0.3); /* FIRE: L = 2.7, so rows on both sides of it */
    int32_t pos[B * T];
    for (int i = 0; i < B * T; i++) pos[i] = i % T + 2 * (i / T);
    static pelab_real a[B * T * V];
    pelab_model_forward(&m, tokens, NULL, pos, B, T);
    memcpy(a, pelab_model_logits(&m), sizeof a);
    for (int cut = 1; cut < T; cut++) {
        int32_t changed[B * T];
        memcpy(changed, tokens, sizeof changed);
        for (int b = 0; b < B; b++)
            for (int t = cut; t < T; t++) changed[b * T + t] = (changed[b * T + t] + 5) % V;
        pelab_model_forward(&m, changed, NULL, pos, B, T);
        double before = 0, after = 0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int v = 0; v < V; v++) {
                    long i = ((long)b * T + t) * V + v;
                    double d = fabs(a[i] - pelab_model_logits(&m)[i]);
                    if (t < cut) before = fmax(before, d);
                    else after = fmax(after, d);
                }
        CHECK(before < 1e-12, "%s: changing tokens from %d changed earlier logits by %.3g", label, cut, before);
        CHECK(after > 1e-6, "%s: changing tokens from %d changed nothing after it", label, cut);
    }
    pelab_model_free(&m);
}

/* Two threads, the same forward and backward twice: the same gradient bits. */
static void check_threads(const char *pe) {
    pelab_threads_set(2);
    struct pelab_model m;
    make_model(&m, (const char *const[]){"pe", pe, NULL}, 0.5);
    int32_t pos[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) pos[i] = i % T + 3 * (i / T), targets[i] = (tokens[i] + 2) % V;
    pelab_real *g = malloc(m.params.total * sizeof *g);
    for (int run = 0; run < 2; run++) {
        pelab_params_zero_grad(&m.params);
        pelab_model_forward(&m, tokens, targets, pos, B, T);
        pelab_model_backward(&m, 1);
        if (run == 0) memcpy(g, m.params.grad, m.params.total * sizeof *g);
    }
    CHECK(memcmp(g, m.params.grad, m.params.total * sizeof *g) == 0, "%s: two threads gave different gradient bits", pe);
    free(g);
    pelab_model_free(&m);
    pelab_threads_set(1);
}

/* Every encoding that may act at BIAS (lib/models.h), with its defaults: causality, and the same
 * gradient bits twice on two threads. */
static void check_bias_case(struct pe_case *c, void *count) {
    if (!(c->ops->sites & PELAB_SITE_BIAS)) return;
    check_causality(c->label, c->opts);
    check_threads(c->ops->name);
    ++*(int *)count;
}

int main(void) {
    pelab_threads_set(1);
    printf("alibi\n");
    check_alibi_slopes();
    check_alibi_relative();
    printf("t5\n");
    check_t5_defaults();
    check_t5_buckets(32, 128, "shared");
    check_t5_buckets(8, 20, "per-layer");
    check_t5_buckets(2, 2, "shared");
    check_t5_buckets(7, 50, "per-layer");
    printf("fire\n");
    check_fire("fire", "blocks.1.attn.fire", 1.0);
    check_fire("fire", "blocks.1.attn.fire", -0.65);
    check_fire("fire-shared", "pe.fire", 0.8);
    printf("whole models\n");
    check_model_shift("alibi", (const char *const[]){"pe", "alibi", NULL});
    check_model_shift("t5", (const char *const[]){"pe", "t5", "t5-buckets", "6", "t5-max-distance", "5", NULL});
    check_model_shift("t5 per layer", (const char *const[]){"pe", "t5", "t5-table", "per-layer", NULL});
    check_fire_shift("fire");
    check_fire_shift("fire-shared");
    int n = 0;
    for_each_pe_case(&(struct pe_walk){PE_TEXT, PE_TEXT, 0, NULL}, check_bias_case, &n);
    CHECK(n > 0, "no registered encoding acts at BIAS");
    return check_report("test_bias");
}
