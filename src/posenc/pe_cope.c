/* cope — contextual position encoding (Golovneva, Wang, Weston and Sukhbaatar 2024, "Contextual
 * Position Encoding: Learning to Count What's Important", arXiv 2405.18719, §3): a key's position
 * is the number of keys between it and the query that the query's gates let through, so a head
 * can attend to "the third sentence back" rather than to "the 40th token back".
 *
 *   g_tu = σ(q_t·k_u/√d)                       the content logit of the pair, gated
 *   p_ts = Σ_{u=s..t} g_tu                      a fractional position, clamped at P − 1
 *   logit(t, s) = q_t·k_s/√d + z_t(p_ts),      z_t[n] = q_t·e[n]  (n = 0..P−1, e ∈ R^{P×d}),
 *                                              linear between ⌊p⌋ and ⌊p⌋ + 1
 *
 * Site COUNT (attn/site_count.c): the attention kernels form the gates and count; this file
 * gives z = q·e^T for every query, one product over all B·H·T rows, and its backward
 * dq += dz·e, de += dz^T·q. The gates read the logit before the count, as the paper's code reads
 * its masked attention logits. e is one table per layer shared by the heads (the paper's), or one
 * for every layer (--cope-table shared); zero at initialisation as in the paper's code, so the
 * model starts as NoPE. Positions are never read: the same at every offset, causal only.
 * P (--cope-max-pos, 64) bounds z, (B,H,T,P) reals per layer kept for the backward: with P as large
 * as the context it would be the T×T of the reference kernel again.
 */
#include <stdio.h>
#include <stdlib.h>
#include "kernels/cpu/matmul.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "posenc/site.h"

static const struct pelab_optdef cope_options[] = {
    {"cope-max-pos", PELAB_OPT_INT, "64", 1, 65536, NULL,
     "counted positions P: counts from P - 1 on share the last logit"},
    {"cope-table", PELAB_OPT_CHOICE, "per-layer", 0, 0, "per-layer|shared",
     "one table e of position vectors per layer, or one for all layers"},
    {0},
};

struct cope {
    int *table; /* (N,) parameter index of e per layer: all equal when shared */
};

static int cope_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct cope *c = calloc(1, sizeof *c);
    if (!c) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = c;
    pe->count_max = (int)pelab_opt_int(opts, cope_options, "cope-max-pos");
    const int shared = pelab_opt_choice(opts, cope_options, "cope-table") == 1;
    c->table = malloc((size_t)pe->n_layers * sizeof *c->table);
    if (!c->table) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int64_t shape[2] = {pe->count_max, pe->d};
    for (int l = 0; l < pe->n_layers; l++) {
        char name[PELAB_PARAM_NAME_MAX];
        if (shared && l > 0) {
            c->table[l] = c->table[0];
            continue;
        }
        if (shared) snprintf(name, sizeof name, "pe.cope.pos_emb");
        else snprintf(name, sizeof name, "blocks.%d.attn.cope.pos_emb", l);
        c->table[l] = pelab_params_declare(params, name, 2, shape, 0);
    }
    return PELAB_OK;
}

static void cope_free(struct pelab_posenc *pe) {
    struct cope *c = pe->state;
    if (!c) return;
    free(c->table);
    free(c);
}

/* e = 0: the paper's code starts its table at zero (pelab_params_alloc zeroed it already). */
static void cope_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    const struct cope *c = pe->state;
    for (int l = 0; l < pe->n_layers; l++) {
        pelab_real *e = pelab_params_data(pe->params, c->table[l]);
        for (long i = 0; i < (long)pe->count_max * pe->d; i++) e[i] = 0;
    }
}

/* COUNT: z (B·H·T, P) = q (B·H·T, d) · e^T, q the queries after QK */
static void cope_count_forward(struct pelab_posenc *pe, int layer, const struct pelab_pe_site_io *io) {
    const struct cope *c = pe->state;
    pelab_matmul_forward(pe->ctx, io->out[0], io->in, pelab_params_data(pe->params, c->table[layer]),
                         io->B * pe->H * io->T, pe->d, pe->count_max);
}

/* dq += dz·e, de += dz^T·q */
static void cope_count_backward(struct pelab_posenc *pe, int layer, const struct pelab_pe_site_io *io) {
    const struct cope *c = pe->state;
    pelab_matmul_backward(pe->ctx, io->din, pelab_params_grad(pe->params, c->table[layer]), io->dout[0], io->in,
                          pelab_params_data(pe->params, c->table[layer]), io->B * pe->H * io->T, pe->d, pe->count_max);
}

const struct pelab_posenc_ops pelab_pe_cope = {
    .name = "cope",
    .display = "CoPE",
    .summary = "positions counted by gates σ(q·k), logits q·e[p] interpolated (Golovneva et al. 2024)",
    .sites = PELAB_SITE_COUNT,
    .contract = {PELAB_PE_RELATIVE, {"cope-max-pos=4 cope-table=shared", NULL}},
    .options = cope_options,
    .init = cope_init,
    .free = cope_free,
    .init_params = cope_init_params,
    .layer_sites = (const struct pelab_pe_site_hooks[]){{&pelab_site_count, cope_count_forward, cope_count_backward},
                                                        {0}},
};
