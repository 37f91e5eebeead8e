/* rope — Rotary Position Embedding (Su et al. 2021, "RoFormer").
 *
 * Each head's d dimensions form d/2 pairs; pair c rotates by angle p·θ_c, θ_c = base^(−2c/d),
 * at the token's position p, for queries and keys alike, so q_t·k_s depends on positions only
 * through t − s. Pair layout `interleaved` is (x_{2c}, x_{2c+1}); `half` is (x_c, x_{c+d/2}).
 *
 *   forward  (x, y) → (x cos − y sin, x sin + y cos)
 *   backward (dx, dy) → (dx cos + dy sin, −dx sin + dy cos)    (the inverse rotation)
 *
 * Site QK; no parameters. prepare() fills cos/sin of every (token, pair) once per forward pass;
 * angles are formed in double so that large positions keep their precision.
 */
#include <math.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"

static const struct pelab_optdef rope_options[] = {
    {"rope-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL, "base of the frequencies θ_c = base^(−2c/d)"},
    {"rope-layout", PELAB_OPT_CHOICE, "interleaved", 0, 0, "interleaved|half",
     "which dimensions pair up: (2c, 2c+1) or (c, c+d/2)"},
    {0},
};

struct rope {
    int half;           /* layout */
    double *theta;      /* (d/2,) */
    pelab_real *cos, *sin; /* (B,T,d/2) of the current forward pass */
    long table_cap;
};

static int rope_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    if (pe->d % 2)
        return pelab_fail(PELAB_ERR_USAGE, "--pe rope needs an even head width (d-model/heads = %d)", pe->d);
    struct rope *r = calloc(1, sizeof *r);
    if (!r) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = r;
    r->half = pelab_opt_choice(opts, rope_options, "rope-layout") == 1;
    double base = pelab_opt_real(opts, rope_options, "rope-base");
    r->theta = malloc((size_t)(pe->d / 2) * sizeof *r->theta);
    if (!r->theta) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int c = 0; c < pe->d / 2; c++) r->theta[c] = pow(base, -2.0 * c / pe->d);
    return PELAB_OK;
}

static void rope_free(struct pelab_posenc *pe) {
    struct rope *r = pe->state;
    if (!r) return;
    free(r->theta);
    free(r->cos);
    free(r->sin);
    free(r);
}

static int rope_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct rope *r = pe->state;
    return pelab_posenc_angles(&r->cos, &r->sin, &r->table_cap, pos, (long)B * T, r->theta, pe->d / 2);
}

/* Index of the two members of pair c. */
static inline void pair(const struct rope *r, int d, int c, int *i0, int *i1) {
    if (r->half) *i0 = c, *i1 = c + d / 2;
    else *i0 = 2 * c, *i1 = 2 * c + 1;
}

/* Rotates one head vector x (d,) by the angles of one token; sign −1 applies the inverse. */
static inline void rotate(pelab_real *out, const pelab_real *x, const pelab_real *cs,
                          const pelab_real *sn, const struct rope *r, int d, pelab_real sign) {
    for (int c = 0; c < d / 2; c++) {
        int i0, i1;
        pair(r, d, c, &i0, &i1);
        pelab_real a = x[i0], b = x[i1], s = sign * sn[c];
        out[i0] = a * cs[c] - b * s;
        out[i1] = a * s + b * cs[c];
    }
}

static void rope_qk(struct pelab_posenc *pe, pelab_real *qo, pelab_real *ko, const pelab_real *q,
                    const pelab_real *k, int ld, int B, int T, int inverse) {
    const struct rope *r = pe->state;
    const int H = pe->H, d = pe->d, P = d / 2;
    const pelab_real sign = inverse ? -1 : 1;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            long i = (long)b * T + t;
            const pelab_real *cs = r->cos + i * P, *sn = r->sin + i * P;
            for (int h = 0; h < H; h++) {
                long row = i * ld + (long)h * d, head = (((long)b * H + h) * T + t) * d;
                if (!inverse) {
                    rotate(qo + head, q + row, cs, sn, r, d, sign);
                    rotate(ko + head, k + row, cs, sn, r, d, sign);
                } else { /* q, k here are the gradients in head layout; qo, ko the (B,T,H,d) outputs */
                    rotate(qo + row, q + head, cs, sn, r, d, sign);
                    rotate(ko + row, k + head, cs, sn, r, d, sign);
                }
            }
        }
}

static void rope_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                            const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                            int B, int T) {
    rope_qk(pe, qo, ko, q, k, ld, B, T, 0);
}

static void rope_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                             const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                             const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    rope_qk(pe, dq, dk, dqo, dko, ld, B, T, 1);
}

const struct pelab_posenc_ops pelab_pe_rope = {
    .name = "rope",
    .summary = "rotary embedding: pair c of q and k rotated by p·base^(-2c/d) (Su et al. 2021)",
    .sites = PELAB_SITE_QK,
    .options = rope_options,
    .init = rope_init,
    .free = rope_free,
    .prepare = rope_prepare,
    .qk_forward = rope_qk_forward,
    .qk_backward = rope_qk_backward,
};
