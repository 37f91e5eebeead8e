/* Encoding-level properties through the posenc interface (double build):
 *  - registry: every encoding is found by name; an unknown name is a usage error listing them;
 *  - RoPE preserves each head vector's norm, and q(t)·k(s) depends on t − s only;
 *  - PoPE's q'(t)·k'(s) equals Σ_c μq,c μk,c cos((t − s)θ_c − clamp(δ_c)) computed directly. */
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

static void setup(struct qk *s, const char *pe, const char *key, const char *val) {
    memset(s, 0, sizeof *s);
    struct pelab_opts o = {0};
    if (key) pelab_opts_set(&o, key, val);
    PELAB_ASSERT(pelab_posenc_init(&s->pe, pe, &o, &s->params, D, H, 1, 64) == PELAB_OK);
    PELAB_ASSERT(pelab_params_alloc(&s->params) == PELAB_OK);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 11);
    if (s->pe.ops->init_params) s->pe.ops->init_params(&s->pe, &rng);
    for (int i = 0; i < NT * D; i++) s->q[i] = pelab_rng_normal(&rng), s->k[i] = pelab_rng_normal(&rng);
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
    int32_t pos[NT] = {0, 3, 4, 40, 41, 1000};
    run(&s, pos);
    int delta = pelab_params_find(&s.params, "blocks.0.attn.pope.delta");
    const double *dl = delta >= 0 ? pelab_params_data(&s.params, delta) : NULL;
    double worst = 0;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < NT; t++)
            for (int u = 0; u < NT; u++) {
                double ref = 0;
                for (int c = 0; c < d; c++) {
                    double theta = pow(10000.0, -(double)c / d);
                    double mq = sp ? softplus(s.q[t * D + h * d + c]) : s.q[t * D + h * d + c];
                    double mk = sp ? softplus(s.k[u * D + h * d + c]) : s.k[u * D + h * d + c];
                    double dc = dl ? fmin(0, fmax(-2 * 3.14159265358979323846, dl[h * d + c])) : 0;
                    ref += mq * mk * cos((pos[t] - pos[u]) * theta - dc);
                }
                worst = fmax(worst, fabs(score(&s, h, t, u) - ref));
            }
    CHECK(worst < 1e-10, "pope %s=%s: q'·k' differs from Σ μq μk cos((t−s)θ − δ) by %.3g", key, val, worst);
    printf("  pope %s=%s: closed form agrees to %.3g\n", key, val, worst);
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
    return check_report("test_posenc");
}
