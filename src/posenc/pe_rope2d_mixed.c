/* rope2d-mixed — rotary embedding of (row, column) with learned mixed frequencies (Heo et al.
 * 2024, "Rotary Position Embedding for Vision Transformer", RoPE-Mixed):
 *
 *   pair i of head h (interleaved: (x_2i, x_2i+1)) in layer l rotates by
 *       a = θx[l][h][i] · row + θy[l][h][i] · col
 *   θx, θy learnable per layer, head and pair; initialised (the paper's code) with the magnitudes
 *   m_j = base^(−4j/d), j = i mod d/4, along a random direction φ_h per head:
 *       θx = m_j cos(φ_h + [i ≥ d/4]·π/2),   θy = m_j sin(φ_h + [i ≥ d/4]·π/2)
 *
 * q_t·k_s depends on positions through (row_t − row_s, col_t − col_s) only. Site QK.
 * Parameter `blocks.{l}.attn.rope2d_mixed.theta` (2, H, d/2): [0] θx, [1] θy; no weight decay.
 *
 *   forward  (x0, x1) → (x0 cos a − x1 sin a, x0 sin a + x1 cos a)
 *   backward (dx0, dx1) = (d0 cos a + d1 sin a, −d0 sin a + d1 cos a)   for output gradient (d0, d1)
 *            ∂L/∂a = y0·d1 − y1·d0 (y the rotated pair), summed over q and k;
 *            dθx += ∂L/∂a · row,  dθy += ∂L/∂a · col
 * Angles are formed in double, each angle's cos and sin once per pass for q and k together.
 * Threads split the heads, each owning its heads' parameters, so the sums keep one order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"

static const double PI = 3.14159265358979323846;

static const struct pelab_optdef rope2d_mixed_options[] = {
    {"rope2d-mixed-base", PELAB_OPT_REAL, "10", 1.0000001, 1e15, NULL,
     "base of the initial magnitudes base^(−4j/d) (Heo et al. use 10)"},
    {0},
};

struct rope2d_mixed {
    int first;   /* parameter index of layer 0's theta; layer l's is first + l */
    double base;
};

static int rope2d_mixed_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    if (pe->d % 4)
        return pelab_fail(PELAB_ERR_USAGE, "--pe rope2d-mixed needs a head width that is a multiple of 4 "
                          "(d-model/heads = %d)", pe->d);
    struct rope2d_mixed *r = calloc(1, sizeof *r);
    if (!r) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = r;
    r->base = pelab_opt_real(opts, rope2d_mixed_options, "rope2d-mixed-base");
    for (int l = 0; l < pe->n_layers; l++) {
        char name[PELAB_PARAM_NAME_MAX];
        snprintf(name, sizeof name, "blocks.%d.attn.rope2d_mixed.theta", l);
        const int64_t shape[3] = {2, pe->H, pe->d / 2};
        const int idx = pelab_params_declare(params, name, 3, shape, 0);
        if (l == 0) r->first = idx;
    }
    return PELAB_OK;
}

static void rope2d_mixed_free(struct pelab_posenc *pe) { free(pe->state); }

static void rope2d_mixed_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    const struct rope2d_mixed *r = pe->state;
    const int H = pe->H, n = pe->d / 2, q = pe->d / 4;
    for (int l = 0; l < pe->n_layers; l++) {
        pelab_real *th = pelab_params_data(pe->params, r->first + l);
        for (int h = 0; h < H; h++) {
            const double phi = 2 * PI * pelab_rng_uniform(rng);
            for (int i = 0; i < n; i++) {
                const double m = pow(r->base, -4.0 * (i % q) / pe->d), dir = phi + (i >= q ? PI / 2 : 0);
                th[h * n + i] = (pelab_real)(m * cos(dir));
                th[H * n + h * n + i] = (pelab_real)(m * sin(dir));
            }
        }
    }
}

/* The angle a of pair i of head h at a token's (row, col), in double. */
static inline double angle(const pelab_real *th, int H, int n, int h, int i, double row, double col) {
    return (double)th[h * n + i] * row + (double)th[H * n + h * n + i] * col;
}

/* Head h of every token, q and k rotated together (each angle's cos and sin formed once):
 * in (B,T,H,d) rows ld apart → out (B,H,T,d). */
static void rotate_head(const struct pelab_posenc *pe, const pelab_real *th, pelab_real *qo, pelab_real *ko,
                        const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos, int B, int T, int h) {
    const int H = pe->H, d = pe->d, n = d / 2;
    for (long tok = 0; tok < (long)B * T; tok++) {
        const double row = pos[2 * tok], col = pos[2 * tok + 1];
        const long flat = tok * ld + (long)h * d, head = (((tok / T) * H + h) * T + tok % T) * d;
        for (int i = 0; i < n; i++) {
            const double a = angle(th, H, n, h, i, row, col);
            const pelab_real c = (pelab_real)cos(a), s = (pelab_real)sin(a);
            const pelab_real q0 = q[flat + 2 * i], q1 = q[flat + 2 * i + 1];
            const pelab_real k0 = k[flat + 2 * i], k1 = k[flat + 2 * i + 1];
            qo[head + 2 * i] = q0 * c - q1 * s, qo[head + 2 * i + 1] = q0 * s + q1 * c;
            ko[head + 2 * i] = k0 * c - k1 * s, ko[head + 2 * i + 1] = k0 * s + k1 * c;
        }
    }
}

static void rope2d_mixed_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                                    const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                                    int B, int T) {
    const struct rope2d_mixed *r = pe->state;
    const pelab_real *th = pelab_params_data(pe->params, r->first + layer);
#pragma omp parallel for schedule(static)
    for (int h = 0; h < pe->H; h++) rotate_head(pe, th, qo, ko, q, k, ld, pos, B, T, h);
}

/* Head h of every token, for q and k together, each angle's cos and sin formed once: ∂L/∂a of
 * every pair from the rotated vectors y = R(a)x (recomputed) and their gradients g, y0·g1 − y1·g0,
 * into dθx (× row) and dθy (× col); and the gradients rotated back, g (B,H,T,d) → dx (B,T,H,d). */
static void backward_head(const struct pelab_posenc *pe, const pelab_real *th, pelab_real *dth, pelab_real *dq,
                          pelab_real *dk, const pelab_real *gq, const pelab_real *gk, const pelab_real *q,
                          const pelab_real *k, int ld, const int32_t *pos, int B, int T, int h) {
    const int H = pe->H, d = pe->d, n = d / 2;
    for (long tok = 0; tok < (long)B * T; tok++) {
        const double row = pos[2 * tok], col = pos[2 * tok + 1];
        const long flat = tok * ld + (long)h * d, head = (((tok / T) * H + h) * T + tok % T) * d;
        for (int i = 0; i < n; i++) {
            const double a = angle(th, H, n, h, i, row, col), c = cos(a), s = sin(a);
            for (int side = 0; side < 2; side++) { /* q, then k */
                const pelab_real *x = side ? k : q, *g = side ? gk : gq;
                const double x0 = x[flat + 2 * i], x1 = x[flat + 2 * i + 1];
                const double y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
                const double ga = y0 * g[head + 2 * i + 1] - y1 * g[head + 2 * i];
                dth[h * n + i] += (pelab_real)(ga * row);
                dth[H * n + h * n + i] += (pelab_real)(ga * col);
            }
            const pelab_real cf = (pelab_real)c, sf = (pelab_real)-s;
            for (int side = 0; side < 2; side++) {
                const pelab_real *g = side ? gk : gq;
                pelab_real *dx = side ? dk : dq;
                const pelab_real g0 = g[head + 2 * i], g1 = g[head + 2 * i + 1];
                dx[flat + 2 * i] = g0 * cf - g1 * sf, dx[flat + 2 * i + 1] = g0 * sf + g1 * cf;
            }
        }
    }
}

static void rope2d_mixed_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                                     const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                                     const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    const struct rope2d_mixed *r = pe->state;
    const pelab_real *th = pelab_params_data(pe->params, r->first + layer);
    pelab_real *dth = pelab_params_grad(pe->params, r->first + layer);
#pragma omp parallel for schedule(static)
    for (int h = 0; h < pe->H; h++) backward_head(pe, th, dth, dq, dk, dqo, dko, q, k, ld, pos, B, T, h);
}

const struct pelab_posenc_ops pelab_pe_rope2d_mixed = {
    .name = "rope2d-mixed",
    .summary = "rotary embedding of (row, column) with learned frequencies θx, θy per layer, head "
               "and pair (Heo et al. 2024, RoPE-Mixed)",
    .sites = PELAB_SITE_QK,
    .dims = 1u << 2,
    .contract = {PELAB_PE_RELATIVE | PELAB_PE_BIDIRECTIONAL, {NULL}},
    .options = rope2d_mixed_options,
    .init = rope2d_mixed_init,
    .free = rope2d_mixed_free,
    .init_params = rope2d_mixed_init_params,
    .qk_forward = rope2d_mixed_qk_forward,
    .qk_backward = rope2d_mixed_qk_backward,
};
