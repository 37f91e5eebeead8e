/* The Transformer: parameters, activations, forward, backward.
 *
 *   x0 = E[tok] (+ e(pos))                                                   (B,T,D)
 *        patch model: x0[b,0] = c,  x0[b,t] = Wp·in[b,t] + bp  (t ≥ 1)  (+ e(pos))
 *   attention is causal, or bidirectional when cfg.positions.bidirectional (the image task)
 *   layer l:  a = RMSNorm(x_l);  qkv = a·Wqkv^T                              (B,T,3D)
 *             q', k' = PE(q, k, pos);  sites = PE_sites(a, q')  (posenc/site.h: buffers the
 *             encoding computes per layer, which Attn reads)
 *             y = Attn(q', k', v; sites)·Wo^T                                 (B,T,D)
 *             m = x_l + drop(y);  x_{l+1} = m + drop(GELU(RMSNorm(m)·W1^T)·W2^T)
 *   logits = RMSNorm(x_N)·E^T (or lm_head)                                   (B,T,V)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/model.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "attn/attention.h"
#include "kernels/cpu/matmul.h"
#include "nn/forward.h"
#include "kernels/cpu/layers.h"

const struct pelab_optdef pelab_model_options[] = {
    {"pe", PELAB_OPT_STR, "rope", 0, 0, NULL, "positional encoding (see 'pelab help encodings')"},
    {"d-model", PELAB_OPT_INT, "128", 1, 65536, NULL, "model width D"},
    {"heads", PELAB_OPT_INT, "4", 1, 1024, NULL, "attention heads H (head width D/H)"},
    {"layers", PELAB_OPT_INT, "4", 1, 1024, NULL, "Transformer blocks N"},
    {"mlp-mult", PELAB_OPT_INT, "4", 1, 64, NULL, "MLP hidden width as a multiple of D"},
    {"tied", PELAB_OPT_SWITCH, "on", 0, 0, NULL, "output projection shares the token embedding"},
    {"dropout", PELAB_OPT_REAL, "0", 0, 0.95, NULL, "attention and residual dropout probability (training only)"},
    {"attention", PELAB_OPT_CHOICE, "tiled", 0, 0, "ref|tiled",
     "attention kernel: tiled (online softmax, memory linear in T) or ref (T×T probabilities; the oracle)"},
    {"random-positions", PELAB_OPT_INT, "0", 0, 1e8, NULL,
     "randomised positions (Ruoss et al. 2023): each sequence reads a sorted random subset of "
     "[0, N) as its positions, in training and evaluation, and the encoding's tables span N "
     "(0: off; 1-D encodings that read positions)"},
    {0},
};

/* Activations of one training forward pass, kept for the backward pass (nn/forward.h's buffers,
 * every layer's slice: x (N+1, B,T,D), the others (N, ...)), and backward scratch. */
struct pelab_acts {
    struct pelab_fwd_bufs fwd;     /* branch is bwd.dbranch: scratch in the forward too */
    int32_t *tokens, *targets, *pos; /* (B,T), (B,T), (B,T,n) copies of the last forward's inputs */
    pelab_real *inputs;            /* (B,T,P) patch model: copy of the last forward's input vectors */
    struct pelab_bwd_bufs bwd;     /* backward scratch, one layer (nn/forward.h) */
    struct pelab_attn_scratch attn; /* the tiled kernel's per-thread tiles (bwd.attn) */
};

/* --- construction ------------------------------------------------------------------------- */

static int declare(struct pelab_params *p, const char *name, int ndim, int64_t d0, int64_t d1, int decay) {
    int64_t shape[2] = {d0, d1};
    return pelab_params_declare(p, name, ndim, shape, decay);
}

static int model_build(struct pelab_model *m, const struct pelab_opts *opts, int vocab, int max_seq,
                       const struct pelab_model_io *io) {
    int rc = pelab_opts_check(opts, pelab_model_options);
    if (rc) return rc;
    if (opts) m->opts = *opts;
    struct pelab_model_config *c = &m->cfg;
    c->input_dim = io ? io->input_dim : 0;
    c->positions = io ? io->positions : (struct pelab_pe_layout){1, 0, 0};
    m->patch_w = m->patch_b = m->cls = -1;
    c->vocab = vocab;
    c->max_seq = max_seq;
    c->d_model = (int)pelab_opt_int(opts, pelab_model_options, "d-model");
    c->n_heads = (int)pelab_opt_int(opts, pelab_model_options, "heads");
    c->n_layers = (int)pelab_opt_int(opts, pelab_model_options, "layers");
    c->mlp_mult = (int)pelab_opt_int(opts, pelab_model_options, "mlp-mult");
    c->tied = c->input_dim ? 0 : pelab_opt_switch(opts, pelab_model_options, "tied"); /* a classifier is its own */
    c->dropout = pelab_opt_real(opts, pelab_model_options, "dropout");
    c->attention = pelab_opt_choice(opts, pelab_model_options, "attention");
    c->random_positions = (int)pelab_opt_int(opts, pelab_model_options, "random-positions");
    const char *pe = pelab_opt_str(opts, pelab_model_options, "pe");
    if (strlen(pe) >= sizeof c->pe) return pelab_fail(PELAB_ERR_USAGE, "--pe: unknown encoding '%s'", pe);
    strcpy(c->pe, pe);
    if (vocab < 1 || max_seq < 1)
        return pelab_fail(PELAB_ERR_USAGE, "model needs vocab >= 1 and max-seq >= 1 (got %d, %d)", vocab, max_seq);
    if (c->d_model % c->n_heads)
        return pelab_fail(PELAB_ERR_USAGE, "--heads %d does not divide --d-model %d", c->n_heads, c->d_model);

    const int D = c->d_model, N = c->n_layers, MD = c->mlp_mult * c->d_model;
    struct pelab_params *p = &m->params;
    if (c->input_dim) {
        m->wte = -1;
        m->patch_w = declare(p, "patch_emb.weight", 2, D, c->input_dim, 1);
        m->patch_b = declare(p, "patch_emb.bias", 1, D, 0, 0);
        m->cls = declare(p, "cls_token", 1, D, 0, 0);
    } else {
        m->wte = declare(p, "tok_emb.weight", 2, vocab, D, 1);
    }
    m->layer = calloc((size_t)N, sizeof *m->layer);
    if (!m->layer) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int l = 0; l < N; l++) {
        char name[PELAB_PARAM_NAME_MAX];
        struct pelab_layer_params *L = &m->layer[l];
#define NAME(s) (snprintf(name, sizeof name, "blocks.%d.%s", l, s), name)
        L->ln1 = declare(p, NAME("attn_norm.weight"), 1, D, 0, 0);
        L->qkv = declare(p, NAME("attn.qkv.weight"), 2, 3 * D, D, 1);
        L->proj = declare(p, NAME("attn.proj.weight"), 2, D, D, 1);
        L->ln2 = declare(p, NAME("mlp_norm.weight"), 1, D, 0, 0);
        L->fc = declare(p, NAME("mlp.fc.weight"), 2, MD, D, 1);
        L->fcproj = declare(p, NAME("mlp.proj.weight"), 2, D, MD, 1);
#undef NAME
    }
    m->lnf = declare(p, "final_norm.weight", 1, D, 0, 0);
    m->lm_head = c->tied ? -1 : declare(p, c->input_dim ? "classifier.weight" : "lm_head.weight", 2, vocab, D, 1);
    if (c->random_positions && (c->positions.dims != 1 || c->input_dim))
        return pelab_fail(PELAB_ERR_USAGE, "--random-positions: this task's positions are not 1-D "
                          "(randomised positions are a sequence's)");
    if (c->random_positions && c->random_positions < max_seq)
        return pelab_fail(PELAB_ERR_USAGE, "--random-positions %d is below the training context of "
                          "%d positions", c->random_positions, max_seq);
    /* with randomised positions the encoding trains on positions of all [0, N) */
    const int context = c->random_positions ? c->random_positions : max_seq;
    rc = pelab_posenc_init_nd(&m->pe, c->pe, opts, p, D, c->n_heads, N, context, &c->positions);
    m->pe.ctx = m->ctx;
    if (rc) return rc;
    if (c->random_positions && !(m->pe.sites & (PELAB_SITE_EMBED | PELAB_SITE_QK | PELAB_SITE_BIAS))) /* nope, fox, cope */
        return pelab_fail(PELAB_ERR_USAGE, "--random-positions: --pe %s reads no positions", c->pe);
    if (c->random_positions && m->pe.ops->train_positions)
        return pelab_fail(PELAB_ERR_USAGE, "--random-positions with --pe %s is not supported: its "
                          "training already moves its positions (e.g. SeqPE's shifted starts)", c->pe);
    return pelab_params_alloc(p);
}

int pelab_model_init(struct pelab_model *m, const struct pelab_opts *opts, int vocab, int max_seq) {
    return pelab_model_init_io(m, opts, vocab, max_seq, NULL);
}

int pelab_model_init_io(struct pelab_model *m, const struct pelab_opts *opts, int vocab, int max_seq,
                        const struct pelab_model_io *io) {
    memset(m, 0, sizeof *m);
    if (!(m->own_ctx = malloc(sizeof *m->own_ctx))) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pelab_ctx_init(m->own_ctx);
    m->ctx = m->own_ctx;
    int rc = model_build(m, opts, vocab, max_seq, io);
    if (rc) pelab_model_free(m); /* nothing half-built stays behind; the message is kept */
    return rc;
}

static void acts_free(struct pelab_acts *a) {
    if (!a) return;
    struct pelab_fwd_bufs *f = &a->fwd;
    struct pelab_bwd_bufs *g = &a->bwd;
    pelab_real *bufs[] = {f->x, f->ln1, f->rstd1, f->qkv, f->qo, f->ko, f->att, f->lse, f->atty,
                          f->xmid, f->ln2, f->rstd2, f->fch, f->fch_gelu, f->lnf, f->lnf_rstd,
                          f->logits, f->ce_stats, f->losses, g->dres, g->dbranch, g->dln,
                          g->datty, g->dqkv, g->dqo, g->dko, g->datt, g->dfch, g->dfch_gelu};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    pelab_posenc_plan_free(&f->sites);
    pelab_posenc_plan_free(&g->sites);
    free(a->tokens);
    free(a->targets);
    free(a->pos);
    free(a->inputs);
    pelab_attn_scratch_free(&a->attn);
    free(a);
}

void pelab_model_free(struct pelab_model *m) {
    acts_free(m->acts);
    pelab_model_eval_release(m);
    pelab_bf16_weights_free(m->bf16w);
    pelab_posenc_free(&m->pe);
    pelab_params_free(&m->params);
    free(m->layer);
    free(m->own_ctx);
    memset(m, 0, sizeof *m);
}

void pelab_model_set_ctx(struct pelab_model *m, struct pelab_ctx *ctx) {
    m->ctx = m->pe.ctx = ctx ? ctx : m->own_ctx;
}

void pelab_model_set_attention(struct pelab_model *m, enum pelab_attn_kernel kernel) {
    if (m->cfg.attention == (int)kernel) return;
    acts_free(m->acts); /* the kernels save different things for the backward pass */
    m->acts = NULL;
    pelab_model_eval_release(m); /* and for an evaluation's own (lse or att, and the sites') */
    m->B = m->T = 0;
    m->cfg.attention = (int)kernel;
}

int pelab_model_reserve(struct pelab_model *m, int B, int T) {
    if (m->acts && B <= m->B && T <= m->T) return PELAB_OK;
    acts_free(m->acts);
    m->acts = NULL;
    m->B = m->T = 0;
    struct pelab_acts *a = calloc(1, sizeof *a);
    if (!a) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    const long N = m->cfg.n_layers, D = m->cfg.d_model, H = m->cfg.n_heads, V = m->cfg.vocab;
    const long BT = (long)B * T, dq = m->pe.qk_dim, MD = m->cfg.mlp_mult * D;
    int ok = 1;
#define ALLOC(buf, n) (ok = ok && ((buf) = malloc((size_t)(n) * sizeof *(buf))) != NULL)
    struct pelab_fwd_bufs *f = &a->fwd;
    ALLOC(f->x, (N + 1) * BT * D);
    ALLOC(f->ln1, N * BT * D);
    ALLOC(f->rstd1, N * BT);
    ALLOC(f->qkv, N * BT * 3 * D);
    ALLOC(f->qo, N * BT * H * dq);
    ALLOC(f->ko, N * BT * H * dq);
    /* the encoding's sites inside the blocks: their buffers, and their gradients, as declared */
    ok = ok && pelab_posenc_plan_alloc(&m->pe, &f->sites, PELAB_PE_PLAN_PASS, pelab_model_site_kernel(m), N, B, T) == PELAB_OK;
    ok = ok && pelab_posenc_plan_alloc(&m->pe, &a->bwd.sites, PELAB_PE_PLAN_GRAD, 0, 1, B, T) == PELAB_OK;
    /* what attention saves: the (T,T) probabilities, or with the tiled kernel one number a row */
    if (m->cfg.attention == PELAB_ATTN_KERNEL_REF) ALLOC(f->att, N * B * H * T * T);
    else ALLOC(f->lse, N * B * H * T);
    ALLOC(f->atty, N * BT * D);
    ALLOC(f->xmid, N * BT * D);
    ALLOC(f->ln2, N * BT * D);
    ALLOC(f->rstd2, N * BT);
    ALLOC(f->fch, N * BT * MD);
    ALLOC(f->fch_gelu, N * BT * MD);
    ALLOC(f->lnf, BT * D);
    ALLOC(f->lnf_rstd, BT);
    ALLOC(f->logits, BT * V);
    ALLOC(f->ce_stats, BT * 2);
    ALLOC(f->losses, BT);
    ALLOC(a->tokens, BT);
    ALLOC(a->targets, BT);
    ALLOC(a->pos, BT * m->cfg.positions.dims);
    if (m->cfg.input_dim) ALLOC(a->inputs, BT * m->cfg.input_dim);
    struct pelab_bwd_bufs *g = &a->bwd;
    ALLOC(g->dres, BT * D);
    ALLOC(g->dbranch, BT * D);
    f->branch = g->dbranch;
    ALLOC(g->dln, BT * D);
    ALLOC(g->datty, BT * D);
    ALLOC(g->dqkv, BT * 3 * D);
    ALLOC(g->dqo, BT * H * dq);
    ALLOC(g->dko, BT * H * dq);
    if (m->cfg.attention == PELAB_ATTN_KERNEL_REF) ALLOC(g->datt, (long)B * H * T * T);
    ALLOC(g->dfch, BT * MD);
    ALLOC(g->dfch_gelu, BT * MD);
    g->attn = &a->attn;
#undef ALLOC
    const struct pelab_attn_call s = pelab_attn_call_for(m, 0, B, T, NULL, 0, NULL);
    if (ok && m->cfg.attention == PELAB_ATTN_KERNEL_TILED) ok = pelab_attn_scratch_reserve(&a->attn, &s) == PELAB_OK;
    if (!ok) {
        acts_free(a);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for activations of batch %d × length %d", B, T);
    }
    m->acts = a;
    m->B = B;
    m->T = T;
    return PELAB_OK;
}

/* --- weights -------------------------------------------------------------------------------- */

void pelab_model_init_weights(struct pelab_model *m, uint64_t seed) {
    struct pelab_rng rng;
    pelab_rng_seed(&rng, seed);
    const double std = 0.02, resid_std = 0.02 / sqrt(2.0 * m->cfg.n_layers);
    for (int i = 0; i < m->params.count; i++) {
        const struct pelab_param *p = &m->params.list[i];
        pelab_real *w = m->params.data + p->offset;
        const char *name = p->name;
        size_t len = strlen(name);
        int is_gain = len > 11 && strcmp(name + len - 11, "norm.weight") == 0;
        int is_resid = strstr(name, "attn.proj.weight") || strstr(name, "mlp.proj.weight");
        if (!p->decay && !is_gain) continue; /* the encoding's parameters: its init_params */
        for (size_t j = 0; j < p->size; j++)
            w[j] = is_gain ? 1 : (pelab_real)(pelab_rng_normal(&rng) * (is_resid ? resid_std : std));
    }
    if (m->cls >= 0) /* ViT's class token: N(0, 0.02) like the other embeddings */
        for (int j = 0; j < m->cfg.d_model; j++) pelab_params_data(&m->params, m->cls)[j] = (pelab_real)(pelab_rng_normal(&rng) * std);
    if (m->pe.ops->init_params) m->pe.ops->init_params(&m->pe, &rng);
}

void pelab_model_set_inputs(struct pelab_model *m, const pelab_real *inputs) { m->inputs = inputs; }

/* Gradients of the input layer's parameters (nn/forward.c's input_forward) from dx (B,T,D), which it may overwrite. */
static void input_backward(struct pelab_model *m, pelab_real *dx, const int32_t *tokens,
                           const pelab_real *inputs, int B, int T) {
    const int D = m->cfg.d_model, P = m->cfg.input_dim;
    const long BT = (long)B * T;
    if (!P) {
        pelab_embed_backward(pelab_params_grad(&m->params, m->wte), dx, tokens, (int)BT, D);
        return;
    }
    pelab_real *dcls = pelab_params_grad(&m->params, m->cls), *dbias = pelab_params_grad(&m->params, m->patch_b);
    for (long r = 0; r < BT; r++) {
        pelab_real *d = dx + r * D;
        if (r % T == 0) { /* the class token's row: into c, then out of the patch product */
            for (int j = 0; j < D; j++) dcls[j] += d[j];
            memset(d, 0, (size_t)D * sizeof *d);
        } else {
            for (int j = 0; j < D; j++) dbias[j] += d[j];
        }
    }
    /* dWp (D,P) += dx^T (D,BT) · in (BT,P) */
    pelab_gemm(m->ctx, 1, 0, D, P, (int)BT, 1, dx, D, inputs, P, 1, pelab_params_grad(&m->params, m->patch_w),
               P);
}

int pelab_model_settings(const struct pelab_model *m, struct pelab_opts *out) {
    const struct pelab_optdef *tables[] = {pelab_model_options, m->pe.ops->options};
    char num[32];
    int rc = 0;
    memset(out, 0, sizeof *out);
    snprintf(num, sizeof num, "%d", m->cfg.vocab);
    rc = rc ? rc : pelab_opts_set(out, "vocab", num);
    snprintf(num, sizeof num, "%d", m->cfg.max_seq);
    rc = rc ? rc : pelab_opts_set(out, "max-seq", num);
    for (int t = 0; t < 2; t++)
        for (const struct pelab_optdef *d = tables[t]; d && d->name; d++) {
            const char *v = pelab_opts_get(&m->opts, d->name);
            rc = rc ? rc : pelab_opts_set(out, d->name, v ? v : d->def);
        }
    return rc;
}

/* --- forward / backward -------------------------------------------------------------------- */

#define W(i) pelab_params_data(&m->params, (i))
#define G(i) pelab_params_grad(&m->params, (i))

int pelab_model_forward(struct pelab_model *m, const int32_t *tokens, const int32_t *targets,
                        const int32_t *pos, int B, int T) {
    if ((m->status = pelab_model_reserve(m, B, T))) { /* out of memory; the message says for what */
        m->n_targets = 0;
        m->loss = (pelab_real)NAN;
        return m->status;
    }
    struct pelab_acts *a = m->acts;
    const long BT = (long)B * T;
    m->cur_B = B;
    m->cur_T = T;
    memcpy(a->tokens, tokens, (size_t)BT * sizeof *tokens);
    memcpy(a->pos, pos, (size_t)BT * m->cfg.positions.dims * sizeof *pos);
    if (m->cfg.input_dim) memcpy(a->inputs, m->inputs, (size_t)BT * m->cfg.input_dim * sizeof *a->inputs);
    if (targets) memcpy(a->targets, targets, (size_t)BT * sizeof *targets);
    else for (long i = 0; i < BT; i++) a->targets[i] = -1;
    const struct pelab_fwd f = {
        .mode = PELAB_FWD_TRAIN, .buf = a->fwd, .rows = BT, .p_drop = m->training ? m->cfg.dropout : 0,
        .targets = a->targets, .has_targets = targets != NULL, .inputs = a->inputs, .scratch = &a->attn};
    return pelab_model_forward_pass(m, &f, a->tokens, a->pos, B, T);
}

void pelab_model_backward(struct pelab_model *m, pelab_real loss_scale) {
    PELAB_ASSERT(!m->bf16w); /* a model that generates with bf16 weights: an update would leave its copy stale */
    struct pelab_acts *a = m->acts;
    const int B = m->cur_B, T = m->cur_T;
    const int N = m->cfg.n_layers, D = m->cfg.d_model, V = m->cfg.vocab;
    const long BT = (long)B * T;
    const double p_drop = m->training ? m->cfg.dropout : 0;
    const struct pelab_fwd_bufs *f = &a->fwd;
    const struct pelab_bwd_bufs *g = &a->bwd;
    PELAB_ASSERT(a != NULL && m->n_targets > 0);

    /* loss → logits → final norm; dres then carries d(residual stream) down the layers */
    pelab_real *dlogits = f->logits; /* written over the logits */
    pelab_crossentropy_backward(dlogits, f->logits, f->ce_stats, a->targets, loss_scale / m->n_targets, (int)BT, V);
    int out_w = m->lm_head >= 0 ? m->lm_head : m->wte;
    pelab_matmul_backward_assign(m->ctx, g->dln, G(out_w), dlogits, f->lnf, W(out_w), (int)BT, D, V);
    memset(g->dres, 0, (size_t)BT * D * sizeof *g->dres);
    pelab_rmsnorm_backward(g->dres, G(m->lnf), g->dln, f->x + N * BT * D, W(m->lnf), f->lnf_rstd, (int)BT, D);

    for (int l = N - 1; l >= 0; l--) {
        const struct pelab_layer_bufs b = pelab_layer_bufs(m, f, 1, l, B, T);
        pelab_block_backward(m, l, &b, g, a->pos, p_drop, B, T);
    }

    pelab_posenc_embed_backward(&m->pe, g->dres, a->pos, B, T);
    pelab_posenc_backward_end(&m->pe);
    input_backward(m, g->dres, a->tokens, a->inputs, B, T);
    const int rc = pelab_gemm_take_failure(m->ctx);
    if (rc && !m->status) m->status = rc;
}

const pelab_real *pelab_model_logits(const struct pelab_model *m) { return m->acts->fwd.logits; }
const pelab_real *pelab_model_losses(const struct pelab_model *m) { return m->acts->fwd.losses; }
const pelab_real *pelab_model_qkv(const struct pelab_model *m, int layer) {
    PELAB_ASSERT(m->acts != NULL && layer >= 0 && layer < m->cfg.n_layers);
    return pelab_layer_bufs(m, &m->acts->fwd, 1, layer, m->cur_B, m->cur_T).qkv;
}

const pelab_real *pelab_model_attention(const struct pelab_model *m, int layer) {
    PELAB_ASSERT(m->acts != NULL && layer >= 0 && layer < m->cfg.n_layers);
    return pelab_layer_bufs(m, &m->acts->fwd, 1, layer, m->cur_B, m->cur_T).att;
}

/* --- diagnostics ------------------------------------------------------------------------------ */

/* One activation buffer of the last forward, with its shape for the message. */
struct act_view {
    int layer; /* -1: outside the blocks */
    const char *name;
    const pelab_real *p;
    int nd;
    long dims[4];
    const char *dim_names;
};

/* The first non-finite element of v: 1 and its description in buf, or 0. */
static int scan_view(const struct act_view *v, char *buf, size_t size) {
    if (!v->p) return 0; /* a site the encoding does not act at */
    long n = 1;
    for (int i = 0; i < v->nd; i++) n *= v->dims[i];
    for (long k = 0; k < n; k++) {
        if (isfinite((double)v->p[k])) continue;
        long idx[4], rest = k;
        for (int i = v->nd - 1; i >= 0; i--) {
            idx[i] = rest % v->dims[i];
            rest /= v->dims[i];
        }
        char where[64] = "";
        size_t len = 0;
        for (int i = 0; i < v->nd && len < sizeof where; i++)
            len += (size_t)snprintf(where + len, sizeof where - len, "%s%ld", i ? ", " : "", idx[i]);
        char layer[32] = "";
        if (v->layer >= 0) snprintf(layer, sizeof layer, "blocks.%d.", v->layer);
        snprintf(buf, size, "%s%s %s at [%s] = %g", layer, v->name, v->dim_names, where,
                 pelab_printable((double)v->p[k]));
        return 1;
    }
    return 0;
}

/* Layer l's buffers of the encoding's sites that the encoding writes, as their declarations name
 * and shape them: 1 and the first non-finite element's description in buf, or 0. */
static int scan_sites(const struct pelab_model *m, const struct pelab_layer_bufs *b, int l, char *buf, size_t size) {
    const struct pelab_posenc *pe = &m->pe;
    for (int k = 0; k < pelab_posenc_layer_sites(pe); k++) {
        const struct pelab_pe_site_decl *site = pelab_posenc_layer_site(pe, k);
        for (int j = 0; site && site->bufs[j].name; j++) {
            const struct pelab_pe_buf *decl = &site->bufs[j];
            if (!(decl->flags & PELAB_PE_OUT)) continue;
            char name[128], letters[16];
            struct act_view v = {l, name, b->sites.buf[k][j], 0, {0}, letters};
            v.nd = pelab_posenc_buf_dims(pe, decl, m->cur_B, m->cur_T, v.dims, letters);
            snprintf(name, sizeof name, "%s (%s site)", decl->what, site->name);
            if (scan_view(&v, buf, size)) return 1;
        }
    }
    return 0;
}

int pelab_model_find_nonfinite(const struct pelab_model *m, char *buf, size_t size) {
    const struct pelab_acts *a = m->acts;
    PELAB_ASSERT(a != NULL);
    const struct pelab_fwd_bufs *f = &a->fwd;
    const long B = m->cur_B, T = m->cur_T, N = m->cfg.n_layers, D = m->cfg.d_model;
    const long H = m->cfg.n_heads, V = m->cfg.vocab, MD = m->cfg.mlp_mult * D, dq = m->pe.qk_dim;
#define VIEW3(L, name, ptr, last, dn) \
    {L, name, ptr, 3, {B, T, last, 0}, dn}
#define VIEW4(L, name, ptr, d2, d3, dn) \
    {L, name, ptr, 4, {B, H, d2, d3}, dn}
    struct act_view first = VIEW3(-1, "token embedding (+ encoding) output", f->x, D, "(B,T,D)");
    if (scan_view(&first, buf, size)) return 1;
    for (int l = 0; l < N; l++) { /* in the order the forward pass computes them */
        const struct pelab_layer_bufs b = pelab_layer_bufs(m, f, 1, l, (int)B, (int)T);
        struct act_view before[] = {
            VIEW3(l, "attn_norm output", b.ln1, D, "(B,T,D)"),
            VIEW3(l, "attn.qkv output", b.qkv, 3 * D, "(B,T,3D)"),
            VIEW4(l, "queries after the encoding", b.qo, T, dq, "(B,H,T,dq)"),
            VIEW4(l, "keys after the encoding", b.ko, T, dq, "(B,H,T,dq)"),
        };
        for (size_t i = 0; i < sizeof before / sizeof before[0]; i++)
            if (scan_view(&before[i], buf, size)) return 1;
        if (scan_sites(m, &b, l, buf, size)) return 1;
        struct act_view vs[] = {
            /* the reference kernel keeps the probabilities, the tiled one each row's log-sum-exp */
            b.att ? (struct act_view)VIEW4(l, "attention probabilities", b.att, T, T, "(B,H,T,T)")
                  : (struct act_view)VIEW4(l, "attention log-sum-exp", b.lse, T, 1, "(B,H,T,1)"),
            VIEW3(l, "attention heads' output", b.atty, D, "(B,T,D)"),
            VIEW3(l, "residual after attention", b.xmid, D, "(B,T,D)"),
            VIEW3(l, "mlp_norm output", b.ln2, D, "(B,T,D)"),
            VIEW3(l, "mlp.fc output", b.fch, MD, "(B,T,M)"),
            VIEW3(l, "GELU output", b.fch_gelu, MD, "(B,T,M)"),
            VIEW3(l, "block output", b.out, D, "(B,T,D)"),
        };
        for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
            if (scan_view(&vs[i], buf, size)) return 1;
    }
    struct act_view last[] = {VIEW3(-1, "final_norm output", f->lnf, D, "(B,T,D)"),
                              VIEW3(-1, "logits", f->logits, V, "(B,T,V)")};
#undef VIEW3
#undef VIEW4
    for (size_t i = 0; i < sizeof last / sizeof last[0]; i++)
        if (scan_view(&last[i], buf, size)) return 1;
    return 0;
}
