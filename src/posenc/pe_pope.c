/* pope — Polar Coordinate Position Embeddings (the PoPE paper, "Decoupling the 'What' and
 * 'Where' with Polar Coordinate Positional Embeddings").
 *
 * Per head, with q, k ∈ R^d after the projections and d frequencies θ_c = base^(−c/d):
 *   magnitudes  μ_q = softplus(q),  μ_k = softplus(k)            (--pope-softplus off: μ = x)
 *   phases      φ_q = t·θ_c,        φ_k = s·θ_c + δ_c            (δ ∈ R^{H×d} per layer)
 *   score(t,s)  = Σ_c μ_q,c μ_k,c cos((t − s)·θ_c − δ_c)
 * so content sets only the magnitudes and position only the phases. Implemented as ordinary
 * attention on width 2d:  q' = [μ_q cos φ_q ; μ_q sin φ_q],  k' = [μ_k cos φ_k ; μ_k sin φ_k].
 *
 * δ is used as clamp(δ, −2π, 0); its gradient flows where −2π ≤ δ ≤ 0 (--pope-delta-clamp off: δ
 * as is, gradient everywhere; --pope-delta-train off: no gradient, δ keeps its initial value).
 * Init 0 (`zero`, the paper's choice for length generalisation), uniform in [−2π, 0] (`uniform`),
 * or `offset`: every head of every layer prefers the distance t − s = K (--pope-delta-offset K),
 *   δ_c = Kθ_c − 2π·ceil(Kθ_c / 2π)  ∈ (−2π, 0]   (≡ Kθ_c mod 2π, so cos(Kθ_c − δ_c) = 1 for all c);
 * with equal magnitudes the score Σ_c cos((t − s − K)θ_c) then peaks at t − s = K.
 *
 * The forward and backward passes, shared with pope2d, are in pope_core.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "posenc/pope_core.h"

#define TWO_PI 6.283185307179586

static const struct pelab_optdef pope_options[] = {
    {"pope-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL, "base of the frequencies θ_c = base^(−c/d)"},
    {"pope-softplus", PELAB_OPT_SWITCH, "on", 0, 0, NULL, "magnitudes softplus(x); off: x as is (ablation)"},
    {"pope-delta", PELAB_OPT_SWITCH, "on", 0, 0, NULL, "learnable phase bias δ per layer, head, frequency; off: δ = 0 (ablation)"},
    {"pope-delta-init", PELAB_OPT_CHOICE, "zero", 0, 0, "zero|uniform|offset",
     "δ initial value: 0; uniform in [−2π, 0]; or offset: every head prefers t − s = "
     "--pope-delta-offset (δ_c = Kθ_c wrapped into [−2π, 0])"},
    {"pope-delta-offset", PELAB_OPT_INT, "1", 0, 1e6, NULL,
     "the distance K that --pope-delta-init offset sets every head to prefer"},
    {"pope-delta-clamp", PELAB_OPT_SWITCH, "on", 0, 0, NULL,
     "δ used as clamp(δ, −2π, 0), no gradient outside; off: δ as is, gradient everywhere (ablation)"},
    {"pope-delta-train", PELAB_OPT_SWITCH, "on", 0, 0, NULL,
     "δ learnt; off: δ keeps its initial value (no gradient; ablation)"},
    {0},
};

enum delta_init { DELTA_ZERO, DELTA_UNIFORM, DELTA_OFFSET }; /* order of the choices */

struct pope {
    struct pelab_pope_core core; /* θ_c = base^(−c/d) of position t, softplus and clamp options */
    enum delta_init delta_init;
    int delta_offset;          /* K of DELTA_OFFSET */
    int train;                 /* --pope-delta-train */
    int *delta;                /* (N,) parameter index per layer, or NULL when δ is off */
};

static int pope_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct pope *p = calloc(1, sizeof *p);
    if (!p) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = p;
    pe->qk_dim = 2 * pe->d;
    p->delta_init = (enum delta_init)pelab_opt_choice(opts, pope_options, "pope-delta-init");
    p->delta_offset = (int)pelab_opt_int(opts, pope_options, "pope-delta-offset");
    p->train = pelab_opt_switch(opts, pope_options, "pope-delta-train");
    int rc = pelab_pope_core_init(&p->core, pe->H, pe->d, 1, pe->n_layers,
                                  pelab_opt_switch(opts, pope_options, "pope-softplus"),
                                  pelab_opt_switch(opts, pope_options, "pope-delta-clamp"));
    if (rc) return rc;
    double base = pelab_opt_real(opts, pope_options, "pope-base");
    for (int c = 0; c < pe->d; c++) p->core.theta[c] = pow(base, -(double)c / pe->d);
    if (pelab_opt_switch(opts, pope_options, "pope-delta")) {
        p->delta = malloc((size_t)pe->n_layers * sizeof *p->delta);
        if (!p->delta) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
        for (int l = 0; l < pe->n_layers; l++) {
            char name[PELAB_PARAM_NAME_MAX];
            snprintf(name, sizeof name, "blocks.%d.attn.pope.delta", l);
            int64_t shape[2] = {pe->H, pe->d};
            p->delta[l] = pelab_params_declare(params, name, 2, shape, 0);
            if (!p->train) pelab_params_freeze(params, p->delta[l]);
        }
    }
    return PELAB_OK;
}

static void pope_free(struct pelab_posenc *pe) {
    struct pope *p = pe->state;
    if (!p) return;
    free(p->delta);
    pelab_pope_core_free(&p->core);
    free(p);
}

static void pope_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    struct pope *p = pe->state;
    if (!p->delta) return;
    for (int l = 0; l < pe->n_layers; l++) {
        pelab_real *delta = pelab_params_data(pe->params, p->delta[l]);
        for (int i = 0; i < pe->H * pe->d; i++) {
            double x = 0;
            if (p->delta_init == DELTA_UNIFORM) x = -TWO_PI * pelab_rng_uniform(rng);
            if (p->delta_init == DELTA_OFFSET) {
                double a = fmod((double)p->delta_offset * p->core.theta[i % pe->d], TWO_PI); /* [0, 2π) */
                x = a > 0 ? a - TWO_PI : 0;
            }
            delta[i] = (pelab_real)x;
        }
    }
}

/* The pass's angle tables (and δ's gradient scratch), shared by every layer. */
static int pope_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct pope *p = pe->state;
    return pelab_pope_core_prepare(&p->core, pos, (long)B * T, p->delta != NULL);
}

static void pope_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                            const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                            int B, int T) {
    struct pope *p = pe->state;
    const pelab_real *delta = p->delta ? pelab_params_data(pe->params, p->delta[layer]) : NULL;
    pelab_pope_core_forward(&p->core, layer, delta, qo, ko, q, k, ld, B, T);
}

static void pope_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                             const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                             const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    struct pope *p = pe->state;
    const int learn = p->delta && p->train; /* frozen δ: no ∂loss/∂φ_k at all */
    const pelab_real *delta = p->delta ? pelab_params_data(pe->params, p->delta[layer]) : NULL;
    pelab_real *ddelta = learn ? pelab_params_grad(pe->params, p->delta[layer]) : NULL;
    pelab_pope_core_backward(&p->core, layer, delta, ddelta, dq, dk, dqo, dko, q, k, ld, B, T);
}

/* Frequency usage: d frequencies θ_c = base^(−c/d), magnitude μ_c = softplus(x_c) as the forward
 * pass forms it; with --pope-softplus off μ_c = x_c may be negative, and its magnitude is |x_c|
 * (a negative μ is the same complex number as |μ| at phase + π). */
static int pope_freqs(const struct pelab_posenc *pe, double *theta) {
    const struct pope *p = pe->state;
    return pelab_pope_core_freqs(&p->core, theta);
}

static void pope_freq_norms(const struct pelab_posenc *pe, double *out, const pelab_real *x) {
    const struct pope *p = pe->state;
    pelab_pope_core_freq_norms(&p->core, out, x);
}

/* Analyses: δ (H,d) of `layer` as the forward pass uses it, clamped to [−2π, 0] unless
 * --pope-delta-clamp off. */
static int pope_phase_bias(const struct pelab_posenc *pe, int layer, double *delta) {
    const struct pope *p = pe->state;
    if (!p->delta) return pelab_fail(PELAB_ERR_USAGE, "a PoPE run without δ (--pope-delta off)");
    const pelab_real *x = pelab_params_data(pe->params, p->delta[layer]);
    for (int i = 0; i < pe->H * pe->d; i++) {
        const double v = x[i];
        delta[i] = !p->core.clamp ? v : v < -TWO_PI ? -TWO_PI : v > 0 ? 0 : v;
    }
    return PELAB_OK;
}

const struct pelab_posenc_ops pelab_pe_pope = {
    .name = "pope",
    .display = "PoPE",
    .summary = "polar embedding: softplus magnitudes, phases p·base^(-c/d) + δ, width 2d (PoPE paper)",
    .sites = PELAB_SITE_QK,
    .contract = {PELAB_PE_RELATIVE | PELAB_PE_BIDIRECTIONAL, {"pope-softplus=off", "pope-delta=off", "pope-delta-init=uniform",
                                     "pope-delta-clamp=off pope-delta-init=offset pope-delta-offset=1",
                                     "pope-delta-init=uniform pope-delta-train=off",
                                     "pope-delta-init=offset pope-delta-offset=2", NULL}},
    .options = pope_options,
    .init = pope_init,
    .free = pope_free,
    .init_params = pope_init_params,
    .prepare = pope_prepare,
    .qk_forward = pope_qk_forward,
    .qk_backward = pope_qk_backward,
    .freqs = pope_freqs,
    .freq_norms = pope_freq_norms,
    .freq_label = "μ_c",
    .phase_bias = pope_phase_bias,
};
