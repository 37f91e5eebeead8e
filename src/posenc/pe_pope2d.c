/* pope2d — axial PoPE (Polar Coordinate Position Embeddings, the PoPE paper) for (row, column)
 * positions: of a head's d complex components, the first d/2 take their phase from the row and
 * the last d/2 from the column, each half with the frequencies of a d/2-wide PoPE:
 *
 *   θ_j = base^(−j/(d/2)), j < d/2;   p_c = row, θ_c' = θ_c (c < d/2);  p_c = col, θ_c' = θ_{c−d/2}
 *   magnitudes  μ_q = softplus(q),  μ_k = softplus(k)
 *   phases      φ_q,c = p_c(t)·θ_c',   φ_k,c = p_c(s)·θ_c' + δ_c      (δ ∈ R^{H×d} per layer)
 *   score(t,s)  = Σ_c μ_q,c μ_k,c cos((p_c(t) − p_c(s))·θ_c' − δ_c)
 * implemented as attention on width 2d: q' = [μ_q cos φ_q ; μ_q sin φ_q], k' likewise.
 * δ is used as clamp(δ, −2π, 0), its gradient flowing where −2π ≤ δ ≤ 0; init 0 or uniform in
 * [−2π, 0] (--pope2d-delta-init).
 *
 * The forward and backward passes are pope's (pope_core.c), with each component's coordinate
 * chosen by its axis. Site QK, query/key width 2d. Parameter `blocks.{l}.attn.pope2d.delta`
 * (H, d), no weight decay. Needs d even.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "posenc/pope_core.h"

#define TWO_PI 6.283185307179586

static const struct pelab_optdef pope2d_options[] = {
    {"pope2d-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL,
     "base of the frequencies θ_j = base^(−j/(d/2)), per axis"},
    {"pope2d-delta-init", PELAB_OPT_CHOICE, "zero", 0, 0, "zero|uniform", "δ initial value: 0, or uniform in [−2π, 0]"},
    {0},
};

struct pope2d {
    struct pelab_pope_core core; /* θ_c' and the axis (row, column) of component c */
    int first;      /* parameter index of layer 0's δ; layer l's is first + l */
    int uniform;    /* δ init uniform in [−2π, 0] */
};

static int pope2d_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    if (pe->d % 2)
        return pelab_fail(PELAB_ERR_USAGE, "--pe pope2d needs an even head width (d-model/heads = %d)", pe->d);
    struct pope2d *p = calloc(1, sizeof *p);
    if (!p) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = p;
    pe->qk_dim = 2 * pe->d;
    p->uniform = pelab_opt_choice(opts, pope2d_options, "pope2d-delta-init") == 1;
    const double base = pelab_opt_real(opts, pope2d_options, "pope2d-base");
    const int h = pe->d / 2;
    int rc = pelab_pope_core_init(&p->core, pe->H, pe->d, 2, pe->n_layers, 1, 1);
    if (rc) return rc;
    for (int c = 0; c < pe->d; c++) {
        p->core.theta[c] = pow(base, -(double)(c % h) / h);
        p->core.axis[c] = c >= h; /* the row, then the column */
    }
    for (int l = 0; l < pe->n_layers; l++) {
        char name[PELAB_PARAM_NAME_MAX];
        snprintf(name, sizeof name, "blocks.%d.attn.pope2d.delta", l);
        const int64_t shape[2] = {pe->H, pe->d};
        const int idx = pelab_params_declare(params, name, 2, shape, 0);
        if (l == 0) p->first = idx;
    }
    return PELAB_OK;
}

static void pope2d_free(struct pelab_posenc *pe) {
    struct pope2d *p = pe->state;
    if (!p) return;
    pelab_pope_core_free(&p->core);
    free(p);
}

static void pope2d_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    const struct pope2d *p = pe->state;
    for (int l = 0; l < pe->n_layers; l++) {
        pelab_real *delta = pelab_params_data(pe->params, p->first + l);
        for (int i = 0; i < pe->H * pe->d; i++)
            delta[i] = p->uniform ? (pelab_real)(-TWO_PI * pelab_rng_uniform(rng)) : 0;
    }
}

static int pope2d_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct pope2d *p = pe->state;
    return pelab_pope_core_prepare(&p->core, pos, (long)B * T, 1);
}

static void pope2d_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                              const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                              int B, int T) {
    struct pope2d *p = pe->state;
    pelab_pope_core_forward(&p->core, layer, pelab_params_data(pe->params, p->first + layer), qo, ko, q, k,
                            ld, B, T);
}

static void pope2d_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                               const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                               const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    struct pope2d *p = pe->state;
    pelab_pope_core_backward(&p->core, layer, pelab_params_data(pe->params, p->first + layer),
                             pelab_params_grad(pe->params, p->first + layer), dq, dk, dqo, dko, q, k, ld, B, T);
}

/* Frequency usage: d components, the row's d/2 frequencies then the column's. */
static int pope2d_freqs(const struct pelab_posenc *pe, double *theta) {
    const struct pope2d *p = pe->state;
    return pelab_pope_core_freqs(&p->core, theta);
}

static void pope2d_freq_norms(const struct pelab_posenc *pe, double *out, const pelab_real *x) {
    const struct pope2d *p = pe->state;
    pelab_pope_core_freq_norms(&p->core, out, x);
}

const struct pelab_posenc_ops pelab_pe_pope2d = {
    .name = "pope2d",
    .summary = "axial PoPE of (row, column): softplus magnitudes, the first d/2 phases turn with "
               "the row, the last d/2 with the column, δ per layer and head",
    .sites = PELAB_SITE_QK,
    .dims = 1u << 2,
    .contract = {PELAB_PE_RELATIVE | PELAB_PE_BIDIRECTIONAL, {"pope2d-delta-init=uniform", NULL}},
    .options = pope2d_options,
    .init = pope2d_init,
    .free = pope2d_free,
    .init_params = pope2d_init_params,
    .prepare = pope2d_prepare,
    .qk_forward = pope2d_qk_forward,
    .qk_backward = pope2d_qk_backward,
    .freqs = pope2d_freqs,
    .freq_norms = pope2d_freq_norms,
    .freq_label = "μ_c",
};
