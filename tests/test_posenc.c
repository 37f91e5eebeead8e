/* Encoding-level properties through the posenc interface (double build):
 *  - registry: every encoding is found by name; an unknown name is a usage error listing them;
 *  - RoPE preserves each head vector's norm, and q(t)·k(s) depends on t − s only;
 *  - PoPE's q'(t)·k'(s) equals Σ_c μq,c μk,c cos((t − s)θ_c − clamp(δ_c)) computed directly
 *    (δ as is with --pope-delta-clamp off), with δ partly outside [−2π, 0];
 *  - PoPE's δ initialised at offset K is Kθ_c wrapped into (−2π, 0], and every head's score with
 *    equal magnitudes then peaks at t − s = K. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "pelab/posenc.h"
#include "pelab/status.h"

enum { D = 12, H = 2, d = 6, NT = 6 };

struct qk {
    struct pelab_posenc pe;
    struct pelab_params params;
    double q[NT * D], k[NT * D];          /* (1,T,H,d) */
    double qo[H * NT * 2 * d], ko[H * NT * 2 * d]; /* (1,H,T,qk_dim) */
};

static void setup2(struct qk *s, const char *pe, const char *key, const char *val, const char *key2,
                   const char *val2) {
    memset(s, 0, sizeof *s);
    struct pelab_opts o = {0};
    if (key) pelab_opts_set(&o, key, val);
    if (key2) pelab_opts_set(&o, key2, val2);
    PELAB_ASSERT(pelab_posenc_init(&s->pe, pe, &o, &s->params, D, H, 1, 64) == PELAB_OK);
    s->pe.ctx = test_ctx();
    PELAB_ASSERT(pelab_params_alloc(&s->params) == PELAB_OK);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 11);
    if (s->pe.ops->init_params) s->pe.ops->init_params(&s->pe, &rng);
    for (int i = 0; i < NT * D; i++) s->q[i] = pelab_rng_normal(&rng), s->k[i] = pelab_rng_normal(&rng);
}

static void setup(struct qk *s, const char *pe, const char *key, const char *val) {
    setup2(s, pe, key, val, NULL, NULL);
}

static void run(struct qk *s, const int32_t *pos) {
    PELAB_ASSERT(pelab_posenc_prepare(&s->pe, pos, 1, NT) == PELAB_OK);
    pelab_posenc_qk_forward(&s->pe, 0, s->qo, s->ko, s->q, s->k, D, pos, 1, NT);
}

static double score(const struct qk *s, int h, int t, int u) {
    int w = s->pe.qk_dim;
    double sum = 0;
    for (int c = 0; c < w; c++) sum += s->qo[(h * NT + t) * w + c] * s->ko[(h * NT + u) * w + c];
    return sum;
}

static void check_registry(void) {
    const struct pelab_posenc_ops *const *all = pelab_posenc_all();
    int n = 0;
    for (; all[n]; n++) CHECK(pelab_posenc_find(all[n]->name) == all[n], "find %s", all[n]->name);
    /* what the analyses and a fine-tune read of a table comes with what it needs */
    for (int i = 0; all[i]; i++) {
        const struct pelab_posenc_ops *o = all[i];
        CHECK(!o->freq_norms || o->freq_label, "%s: freq_norms without freq_label", o->name);
        CHECK(!o->phase_bias || o->freqs, "%s: phase_bias without freqs", o->name);
        CHECK(!o->fine_tune || (o->eval_options && o->eval_options->name && o->fine_tune->reads),
              "%s: fine_tune without eval_options or reads", o->name);
        CHECK(!o->fine_tune || !o->fine_tune->source_context ||
                  pelab_optdef_find(o->eval_options, o->fine_tune->source_context),
              "%s: fine_tune's source_context is not one of its eval_options", o->name);
    }
    CHECK(n >= 3, "at least nope, rope, pope are registered");
    struct pelab_posenc pe;
    struct pelab_params p = {0};
    CHECK(pelab_posenc_init(&pe, "nosuch", NULL, &p, D, H, 1, 8) == PELAB_ERR_USAGE, "unknown name");
    CHECK(strstr(pelab_last_error(), "pope") != NULL, "message lists the known encodings: %s", pelab_last_error());
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "rope-layout", "diagonal");
    CHECK(pelab_posenc_init(&pe, "rope", &o, &p, D, H, 1, 8) == PELAB_ERR_USAGE, "bad choice");
    CHECK(strstr(pelab_last_error(), "--rope-layout") != NULL, "message names the option: %s", pelab_last_error());
    pelab_posenc_free(&pe);
    pelab_params_free(&p);
    CHECK(pelab_posenc_init(&pe, "rope", NULL, &p, 10, 2, 1, 8) == PELAB_ERR_USAGE, "odd head width");
    pelab_posenc_free(&pe);
    pelab_params_free(&p);
}

static void check_rope(const char *layout) {
    struct qk s;
    setup(&s, "rope", "rope-layout", layout);
    int32_t pos[NT] = {0, 1, 5, 17, 300, 4096}, shifted[NT];
    run(&s, pos);
    for (int t = 0; t < NT; t++)
        for (int h = 0; h < H; h++) {
            double n0 = 0, n1 = 0;
            for (int c = 0; c < d; c++) {
                n0 += s.q[t * D + h * d + c] * s.q[t * D + h * d + c];
                n1 += s.qo[(h * NT + t) * d + c] * s.qo[(h * NT + t) * d + c];
            }
            CHECK(fabs(n0 - n1) < 1e-12 * n0, "rope %s: norm changed %.17g → %.17g", layout, n0, n1);
        }
    double before[H][NT][NT];
    for (int h = 0; h < H; h++)
        for (int t = 0; t < NT; t++)
            for (int u = 0; u < NT; u++) before[h][t][u] = score(&s, h, t, u);
    for (int i = 0; i < NT; i++) shifted[i] = pos[i] + 777;
    run(&s, shifted);
    double worst = 0;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < NT; t++)
            for (int u = 0; u < NT; u++) worst = fmax(worst, fabs(score(&s, h, t, u) - before[h][t][u]));
    CHECK(worst < 1e-10, "rope %s: scores changed by %.3g under a shift", layout, worst);
    pelab_posenc_free(&s.pe);
    pelab_params_free(&s.params);
}

static double softplus(double x) { return log1p(exp(x)); }

static void check_pope(const char *key, const char *val, int sp) {
    struct qk s;
    setup(&s, "pope", key, val);
    CHECK(s.pe.qk_dim == 2 * d, "pope doubles the query/key width");
    const int clamp = !(key && strcmp(key, "pope-delta-clamp") == 0 && strcmp(val, "off") == 0);
    int32_t pos[NT] = {0, 3, 4, 40, 41, 1000};
    int delta = pelab_params_find(&s.params, "blocks.0.attn.pope.delta");
    double *dl = delta >= 0 ? pelab_params_data(&s.params, delta) : NULL;
    if (dl) dl[1] = 0.7, dl[d + 2] = -7.5; /* outside [−2π, 0]: clamped unless the clamp is off */
    run(&s, pos);
    double worst = 0;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < NT; t++)
            for (int u = 0; u < NT; u++) {
                double ref = 0;
                for (int c = 0; c < d; c++) {
                    double theta = pow(10000.0, -(double)c / d);
                    double mq = sp ? softplus(s.q[t * D + h * d + c]) : s.q[t * D + h * d + c];
                    double mk = sp ? softplus(s.k[u * D + h * d + c]) : s.k[u * D + h * d + c];
                    double dc = !dl ? 0 : clamp ? fmin(0, fmax(-2 * 3.14159265358979323846, dl[h * d + c]))
                                                : dl[h * d + c];
                    ref += mq * mk * cos((pos[t] - pos[u]) * theta - dc);
                }
                worst = fmax(worst, fabs(score(&s, h, t, u) - ref));
            }
    CHECK(worst < 1e-10, "pope %s=%s: q'·k' differs from Σ μq μk cos((t−s)θ − δ) by %.3g", key, val, worst);
    printf("  pope %s=%s: closed form agrees to %.3g\n", key, val, worst);
    pelab_posenc_free(&s.pe);
    pelab_params_free(&s.params);
}

/* --pope-delta-init offset, --pope-delta-offset K: δ_c = Kθ_c wrapped into (−2π, 0], and with
 * equal magnitudes (q = k = 1 everywhere) every head's score over t − s = 0..NT−1 peaks at K. */
static void check_pope_offset(int K) {
    struct qk s;
    char kstr[16];
    snprintf(kstr, sizeof kstr, "%d", K);
    setup2(&s, "pope", "pope-delta-init", "offset", "pope-delta-offset", kstr);
    const double two_pi = 2 * 3.14159265358979323846;
    const double *dl = pelab_params_data(&s.params, pelab_params_find(&s.params, "blocks.0.attn.pope.delta"));
    double worst = 0;
    for (int h = 0; h < H; h++)
        for (int c = 0; c < d; c++) {
            double theta = pow(10000.0, -(double)c / d), x = dl[h * d + c];
            CHECK(x > -two_pi && x <= 0, "offset %d: δ[%d][%d] = %.17g outside (−2π, 0]", K, h, c, x);
            /* x ≡ Kθ (mod 2π): x − Kθ is a whole number of turns */
            double turns = (K * theta - x) / two_pi;
            worst = fmax(worst, fabs(turns - round(turns)));
        }
    CHECK(worst < 1e-12, "offset %d: δ differs from Kθ mod 2π by %.3g turns", K, worst);
    for (int i = 0; i < NT * D; i++) s.q[i] = s.k[i] = 1;
    int32_t pos[NT] = {0, 1, 2, 3, 4, 5};
    run(&s, pos);
    for (int h = 0; h < H; h++) {
        int best = -1;
        for (int u = 0; u < NT; u++)
            if (best < 0 || score(&s, h, NT - 1, u) > score(&s, h, NT - 1, best)) best = u;
        CHECK(NT - 1 - best == K, "offset %d: head %d's score peaks at t − s = %d", K, h, NT - 1 - best);
    }
    pelab_posenc_free(&s.pe);
    pelab_params_free(&s.params);
}

int main(void) {
    check_registry();
    check_rope("interleaved");
    check_rope("half");
    check_pope("pope-delta-init", "uniform", 1);
    check_pope("pope-delta-init", "zero", 1);
    check_pope("pope-softplus", "off", 0);
    check_pope("pope-delta", "off", 1);
    check_pope("pope-delta-clamp", "off", 1);
    check_pope("pope-delta-clamp", "on", 1);
    for (int K = 0; K < NT; K++) check_pope_offset(K);
    return check_report("test_posenc");
}
