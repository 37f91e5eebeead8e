/* Properties of the encodings that read the tokens (double build), beyond the contract that
 * tests/test_contract.c checks for every encoding:
 *  - COUNT (attn/count.h): gates that are 1 on marker keys and 0 elsewhere count the markers: key s
 *    of query t is at position (markers in s..t), its logit z[that count]; counts past P − 1 take
 *    z[P − 1]; a fractional count interpolates between the two integers around it;
 *  - the count's backward (two passes right to left) against central differences of the row's
 *    logits, for the scores and for z, clamped entries included; a NaN logit gives NaNs, not an
 *    index out of the table;
 *  - fox with --fox-gate bias is a learned ALiBi: kb_t − kb_s = (t − s)·ln(1 + e^(−b)), and with
 *    --fox-gate data, kb continues a running sum from `prev` exactly as one longer pass would. */
#include <stdlib.h>
#include <string.h>
#include "attn/count.h"
#include "lib/check.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "posenc/site.h"

/* --- COUNT -------------------------------------------------------------------------------------- */

static void check_counting(void) {
    /* query t = 5 over keys 0..5; markers at 0, 2 and 5 (gates σ(±40) = 1 or 0 to 1e-17) */
    const double marker[6] = {40, -40, 40, -40, -40, 40};
    const int want[6] = {3, 2, 2, 1, 1, 1}; /* markers among s..5 */
    double z[8], row[6], gate[6];
    for (int n = 0; n < 8; n++) z[n] = 0.1 * n * n - 0.3 * n;
    memcpy(row, marker, sizeof row);
    double total = pelab_count_row(row, gate, 6, z, 8, 0);
    CHECK_CLOSE(total, 3, 1e-15, 0, "three markers counted");
    for (int s = 0; s < 6; s++) {
        CHECK_CLOSE(gate[s], marker[s] > 0, 1e-15, 0, "a marker's gate is 1, another key's 0");
        CHECK_CLOSE(row[s] - marker[s], z[want[s]], 1e-13, 0, "key s takes the logit of its count");
    }
    /* P = 2: counts 2 and 3 both take z[1] */
    memcpy(row, marker, sizeof row);
    pelab_count_row(row, gate, 6, z, 2, 0);
    CHECK_CLOSE(row[0] - marker[0], z[1], 1e-13, 0, "a count past P - 1 takes z[P - 1]");
    CHECK_CLOSE(row[5] - marker[5], z[1], 1e-13, 0, "a count of P - 1 takes z[P - 1]");
    /* fractional: one key with S⁰ = 0 (gate 1/2) after a marker: p = 1.5 → between z[1] and z[2] */
    double two[2] = {40, 0};
    pelab_count_row(two, NULL, 2, z, 8, 0);
    CHECK_CLOSE(two[1], z[0] + 0.5 * (z[1] - z[0]), 1e-13, 0, "p = 1/2 halfway between z[0] and z[1]");
    CHECK_CLOSE(two[0] - 40, z[1] + 0.5 * (z[2] - z[1]), 1e-13, 0, "p = 3/2 halfway between z[1] and z[2]");
    /* a NaN logit makes NaN counts, which take the clamped branch (never an index) and stay NaN */
    double bad[3] = {0.5, NAN, 0.5}, gbad[3], dbad[3] = {1, 1, 1}, dzbad[8] = {0};
    pelab_count_row(bad, gbad, 3, z, 8, 0);
    pelab_count_row_backward(dbad, gbad, 3, z, 8, dzbad);
    CHECK(isfinite(bad[2]) && isnan(bad[1]) && isnan(bad[0]), "a NaN logit: %g %g %g", bad[0], bad[1], bad[2]);
    CHECK(isnan(dzbad[7]), "a NaN count's gradient reaches z[P - 1]");
    printf("count: markers counted, clamped at P - 1, interpolated between integers; a NaN stays a NaN\n");
}

/* f = Σ_s c_s · S_s over one row's n keys, the count's forward of s0 with the logits z. */
struct row_case {
    double s0[12], z[16], c[12];
    int n, P;
};

static double row_objective(const struct row_case *r) {
    double row[12], f = 0;
    memcpy(row, r->s0, (size_t)r->n * sizeof *row);
    pelab_count_row(row, NULL, r->n, r->z, r->P, 0);
    for (int s = 0; s < r->n; s++) f += r->c[s] * row[s];
    return f;
}

/* ∂f/∂v[i] by central differences, v one of r's arrays */
static double central(struct row_case *r, double *v, int i) {
    const double h = 1e-6, keep = v[i];
    v[i] = keep + h;
    const double up = row_objective(r);
    v[i] = keep - h;
    const double down = row_objective(r);
    v[i] = keep;
    return (up - down) / (2 * h);
}

static void check_count_gradient(int P) {
    struct row_case r = {.n = 12, .P = P};
    double gate[12], ds[12], dz[16] = {0}, row[12];
    unsigned seed = 7;
    for (int i = 0; i < r.n; i++) {
        r.s0[i] = 3.0 * rand_r(&seed) / RAND_MAX - 1.5;
        r.c[i] = 2.0 * rand_r(&seed) / RAND_MAX - 1;
    }
    for (int n = 0; n < P; n++) r.z[n] = 2.0 * rand_r(&seed) / RAND_MAX - 1;
    memcpy(row, r.s0, sizeof row);
    pelab_count_row(row, gate, r.n, r.z, P, 0);
    memcpy(ds, r.c, sizeof ds);
    pelab_count_row_backward(ds, gate, r.n, r.z, P, dz);
    double worst = 0;
    for (int i = 0; i < r.n; i++) {
        const double fd = central(&r, r.s0, i);
        CHECK_CLOSE(ds[i], fd, 1e-8, 1e-6, "count backward: gradient at S0");
        worst = fmax(worst, fabs(ds[i] - fd));
    }
    for (int n = 0; n < P; n++) {
        const double fd = central(&r, r.z, n);
        CHECK_CLOSE(dz[n], fd, 1e-8, 1e-6, "count backward: gradient at z");
        worst = fmax(worst, fabs(dz[n] - fd));
    }
    printf("count backward, P %2d: central differences agree to %.1e\n", P, worst);
}

/* --- fox ---------------------------------------------------------------------------------------- */

struct enc {
    struct pelab_posenc pe;
    struct pelab_params params;
};

static void enc_init(struct enc *e, const char *gate, const char *bias) {
    memset(e, 0, sizeof *e);
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "fox-gate", gate);
    pelab_opts_set(&o, "fox-bias-init", bias);
    PELAB_ASSERT(pelab_posenc_init(&e->pe, "fox", &o, &e->params, 8, 2, 1, 32) == PELAB_OK);
    e->pe.ctx = test_ctx();
    PELAB_ASSERT(pelab_params_alloc(&e->params) == PELAB_OK);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 5);
    e->pe.ops->init_params(&e->pe, &rng);
}

static void enc_free(struct enc *e) {
    pelab_posenc_free(&e->pe);
    pelab_params_free(&e->params);
}

/* kb (B,H,T) from x (B,T,D) by fox's hook at the KEY site, continuing from prev (B,H) or, NULL, from
 * a sequence's start */
static void key_values(struct enc *e, double *kb, const double *x, const double *prev, int B, int T) {
    const struct pelab_pe_site_hooks *key = &e->pe.ops->layer_sites[0];
    PELAB_ASSERT(key->site == &pelab_site_key);
    const struct pelab_pe_site_io io = {.B = B, .T = T, .in = x, .out = {kb}, .prev = {prev}};
    key->forward(&e->pe, 0, &io);
}

static void check_fox(void) {
    enum { B = 1, H = 2, D = 8, T = 10 };
    double x[T * D], kb[H * T], part[H * T];
    unsigned seed = 3;
    for (int i = 0; i < T * D; i++) x[i] = 2.0 * rand_r(&seed) / RAND_MAX - 1;

    struct enc e;
    enc_init(&e, "bias", "1.5");
    key_values(&e, kb, x, NULL, B, T);
    const double slope = log1p(exp(-1.5)); /* −ln σ(1.5) */
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++)
            CHECK_CLOSE(kb[h * T + t] - kb[h * T], t * slope, 1e-12, 0, "fox bias gate: an ALiBi of slope -ln f");
    enc_free(&e);

    /* data gate: the last 4 tokens passed alone, continuing from token 5's kb, give the whole pass's */
    enc_init(&e, "data", "0");
    key_values(&e, kb, x, NULL, B, T);
    const double prev[H] = {kb[5], kb[T + 5]};
    key_values(&e, part, x + 6 * D, prev, B, 4);
    double worst = 0;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < 4; t++) worst = fmax(worst, fabs(part[h * 4 + t] - kb[h * T + 6 + t]));
    CHECK(worst < 1e-13, "fox: a pass continued from prev differs from the whole pass by %.2e", worst);
    enc_free(&e);
    printf("fox: the bias gate is an ALiBi of slope -ln sigma(b); a continued pass agrees to %.1e\n", worst);
}

int main(void) {
    check_counting();
    check_count_gradient(16);
    check_count_gradient(3); /* most counts clamped */
    check_fox();
    return check_report("test_content");
}
