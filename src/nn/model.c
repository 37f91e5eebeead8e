/* The Transformer: parameters, activations, forward, backward.
 *
 *   x0 = E[tok] (+ e(pos))                                                   (B,T,D)
 *        patch model: x0[b,0] = c,  x0[b,t] = Wp·in[b,t] + bp  (t ≥ 1)  (+ e(pos))
 *   attention is causal, or bidirectional when cfg.positions.bidirectional (the image task)
 *   layer l:  a = RMSNorm(x_l);  qkv = a·Wqkv^T                              (B,T,3D)
 *             q', k' = PE(q, k, pos);  y = Attn(q', k', v)·Wo^T              (B,T,D)
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
#include "nn/layers.h"
#include "nn/model_eval.h"

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
    {0},
};

/* Activations of one forward pass, kept for the backward pass, and backward scratch. */
struct pelab_acts {
    pelab_real *x;                 /* (N+1, B,T,D) residual stream entering each layer, and final */
    pelab_real *ln1, *ln1_rstd;    /* (N, B,T,D), (N, B,T) */
    pelab_real *qkv;               /* (N, B,T,3D) */
    pelab_real *qo, *ko;           /* (N, B,H,T,dq) after the positional transform */
    pelab_real *att;               /* (N, B,H,T,T) attention probabilities (reference kernel) */
    pelab_real *lse;               /* (N, B,H,T) per-row log-sum-exp of scores (tiled kernel) */
    pelab_real *atty;              /* (N, B,T,D) heads' outputs, before Wo */
    pelab_real *xmid;              /* (N, B,T,D) residual after attention */
    pelab_real *ln2, *ln2_rstd;    /* (N, B,T,D), (N, B,T) */
    pelab_real *fch, *fch_gelu;    /* (N, B,T,M·D) */
    pelab_real *lnf, *lnf_rstd;    /* (B,T,D), (B,T) */
    pelab_real *logits;            /* (B,T,V); becomes dlogits in the backward pass */
    pelab_real *ce_stats;          /* (B,T,2) each row's max logit and 1/Σ e^(z − max) */
    pelab_real *losses;            /* (B,T) */
    int32_t *tokens, *targets, *pos; /* (B,T), (B,T), (B,T,n) copies of the last forward's inputs */
    pelab_real *inputs;            /* (B,T,P) patch model: copy of the last forward's input vectors */
    /* backward scratch, one layer */
    pelab_real *dres, *dbranch, *dln, *datty; /* (B,T,D) */
    pelab_real *dqkv;              /* (B,T,3D) */
    pelab_real *dqo, *dko;         /* (B,H,T,dq) */
    pelab_real *datt;              /* (B,H,T,T) reference kernel only */
    pelab_real *dfch, *dfch_gelu;  /* (B,T,M·D) */
    struct pelab_attn_scratch attn; /* the tiled kernel's per-thread tiles */
};

/* Dropout sites, one per (layer, place): masks differ between places and layers. */
enum { SITE_ATTN_PROBS, SITE_ATTN_OUT, SITE_MLP_OUT, SITES_PER_LAYER };

static uint64_t site(int layer, int place) { return (uint64_t)layer * SITES_PER_LAYER + place; }

/* The residual and MLP masks index the (rows, T, D) outputs of the whole batch the key covers;
 * this forward's sequence 0 is its row m->dropout_row0, so its element 0 is there at
 * dropout_row0·T·D. (The attention kernels index (rows, H, T, T) the same way.) */
static uint64_t residual_drop0(const struct pelab_model *m, int T) {
    return m->dropout_row0 * (uint64_t)T * (uint64_t)m->cfg.d_model;
}

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
    rc = pelab_posenc_init_nd(&m->pe, c->pe, opts, p, D, c->n_heads, N, max_seq, &c->positions);
    if (rc) return rc;
    return pelab_params_alloc(p);
}

int pelab_model_init(struct pelab_model *m, const struct pelab_opts *opts, int vocab, int max_seq) {
    return pelab_model_init_io(m, opts, vocab, max_seq, NULL);
}

int pelab_model_init_io(struct pelab_model *m, const struct pelab_opts *opts, int vocab, int max_seq,
                        const struct pelab_model_io *io) {
    memset(m, 0, sizeof *m);
    int rc = model_build(m, opts, vocab, max_seq, io);
    if (rc) pelab_model_free(m); /* nothing half-built stays behind; the message is kept */
    return rc;
}

static void acts_free(struct pelab_acts *a) {
    if (!a) return;
    pelab_real **bufs[] = {&a->x, &a->ln1, &a->ln1_rstd, &a->qkv, &a->qo, &a->ko, &a->att, &a->lse,
                           &a->atty, &a->xmid, &a->ln2, &a->ln2_rstd, &a->fch, &a->fch_gelu,
                           &a->lnf, &a->lnf_rstd, &a->logits, &a->ce_stats, &a->losses, &a->dres,
                           &a->dbranch, &a->dln, &a->datty, &a->dqkv, &a->dqo, &a->dko, &a->datt,
                           &a->dfch, &a->dfch_gelu};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(*bufs[i]);
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
    pelab_posenc_free(&m->pe);
    pelab_params_free(&m->params);
    free(m->layer);
    memset(m, 0, sizeof *m);
}

void pelab_model_set_attention(struct pelab_model *m, enum pelab_attn_kernel kernel) {
    if (m->cfg.attention == (int)kernel) return;
    acts_free(m->acts); /* the kernels save different things for the backward pass */
    m->acts = NULL;
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
    ALLOC(a->x, (N + 1) * BT * D);
    ALLOC(a->ln1, N * BT * D);
    ALLOC(a->ln1_rstd, N * BT);
    ALLOC(a->qkv, N * BT * 3 * D);
    ALLOC(a->qo, N * BT * H * dq);
    ALLOC(a->ko, N * BT * H * dq);
    /* what attention saves: the (T,T) probabilities, or with the tiled kernel one number a row */
    if (m->cfg.attention == PELAB_ATTN_KERNEL_REF) ALLOC(a->att, N * B * H * T * T);
    else ALLOC(a->lse, N * B * H * T);
    ALLOC(a->atty, N * BT * D);
    ALLOC(a->xmid, N * BT * D);
    ALLOC(a->ln2, N * BT * D);
    ALLOC(a->ln2_rstd, N * BT);
    ALLOC(a->fch, N * BT * MD);
    ALLOC(a->fch_gelu, N * BT * MD);
    ALLOC(a->lnf, BT * D);
    ALLOC(a->lnf_rstd, BT);
    ALLOC(a->logits, BT * V);
    ALLOC(a->ce_stats, BT * 2);
    ALLOC(a->losses, BT);
    ALLOC(a->tokens, BT);
    ALLOC(a->targets, BT);
    ALLOC(a->pos, BT * m->cfg.positions.dims);
    if (m->cfg.input_dim) ALLOC(a->inputs, BT * m->cfg.input_dim);
    ALLOC(a->dres, BT * D);
    ALLOC(a->dbranch, BT * D);
    ALLOC(a->dln, BT * D);
    ALLOC(a->datty, BT * D);
    ALLOC(a->dqkv, BT * 3 * D);
    ALLOC(a->dqo, BT * H * dq);
    ALLOC(a->dko, BT * H * dq);
    if (m->cfg.attention == PELAB_ATTN_KERNEL_REF) ALLOC(a->datt, (long)B * H * T * T);
    ALLOC(a->dfch, BT * MD);
    ALLOC(a->dfch_gelu, BT * MD);
#undef ALLOC
    const struct pelab_attn_shape s = {.B = B, .T = T, .H = (int)H, .dq = (int)dq, .dv = (int)(D / H), .pe = &m->pe};
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

/* x (B,T,D): the token embedding E[tok], or the patch model's class token and patch embedding. */
static void input_forward(struct pelab_model *m, pelab_real *x, const int32_t *tokens,
                          const pelab_real *inputs, int B, int T) {
    const int D = m->cfg.d_model, P = m->cfg.input_dim;
    const long BT = (long)B * T;
    if (!P) {
        pelab_embed_forward(x, tokens, pelab_params_data(&m->params, m->wte), (int)BT, D);
        return;
    }
    PELAB_ASSERT(inputs != NULL);
    pelab_matmul_forward(x, inputs, pelab_params_data(&m->params, m->patch_w), (int)BT, P, D); /* row 0's result replaced */
    const pelab_real *bias = pelab_params_data(&m->params, m->patch_b), *cls = pelab_params_data(&m->params, m->cls);
    for (long r = 0; r < BT; r++) {
        pelab_real *xr = x + r * D;
        if (r % T == 0) memcpy(xr, cls, (size_t)D * sizeof *xr);
        else for (int j = 0; j < D; j++) xr[j] += bias[j];
    }
}

/* Gradients of input_forward's parameters from dx (B,T,D), which it may overwrite. */
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
    pelab_gemm(1, 0, D, P, (int)BT, 1, dx, D, inputs, P, 1, pelab_params_grad(&m->params, m->patch_w), P);
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

/* dqo, dko (B,H,T,dq) and dv (inside dqkv) assigned from datty; bias parameter grads +=. */
static void attn_backward(struct pelab_model *m, int l, pelab_real *dv, const pelab_real *atty,
                          const pelab_real *qo, const pelab_real *ko, const pelab_real *v,
                          const struct pelab_attn_shape *s) {
    struct pelab_acts *a = m->acts;
    const long BHT = (long)s->B * s->H * s->T;
    if (m->cfg.attention == PELAB_ATTN_KERNEL_REF) {
        pelab_attn_ref_backward(a->dqo, a->dko, dv, a->datt, a->datty, a->att + l * BHT * s->T, qo,
                                ko, v, s);
        return;
    }
    /* after its forward it cannot fail: the per-thread scratch the forward used is kept, and when
     * it cannot grow (more threads since) the kernel runs on as many threads as it holds */
    int rc = pelab_attn_tiled_backward(a->dqo, a->dko, dv, a->datty, atty, a->lse + l * BHT, qo, ko, v, s);
    if (rc) m->status = rc;
}

/* The forward pass, for training and evaluation alike (nn/model_eval.h): the layers of the model
 * comment at the top, written once. What differs is where it writes (struct pelab_fwd):
 *   kept (training)   every layer's activations in slice l of the N-layer arrays, for the
 *                     backward; the whole batch at once; dropout on;
 *   not kept (eval)   one set of buffers overwritten layer after layer, the residual stream x
 *                     updated in place, and the position-wise part (MLP, final norm, output layer
 *                     and loss) over chunks of f->rows positions, which is what keeps evaluation's
 *                     memory linear in B·T with no (B,T,V) logits;
 *   generation        not kept, with the KV cache's attention (f->attend: the keys and values of
 *                     earlier passes) and logits only (nn/kv_cache.c).
 * The operations and their operands are the same for training and evaluation (a sum a + b where
 * one path wrote b + a: addition commutes exactly), so the two give the same loss bit for bit.
 * tokens, pos (B,T); f->targets (B,T), -1 where none. Sets m->status, m->n_targets, m->loss. */
pelab_real pelab_model_forward_pass(struct pelab_model *m, const struct pelab_fwd *f, const int32_t *tokens,
                                    const int32_t *pos, int B, int T) {
    const int N = m->cfg.n_layers, D = m->cfg.d_model, H = m->cfg.n_heads, V = m->cfg.vocab;
    const int d = D / H, MD = m->cfg.mlp_mult * D, dq = m->pe.qk_dim;
    const long BT = (long)B * T, BHT = BT * H, rows = f->rows;
    const int keep = f->keep, ref = m->cfg.attention == PELAB_ATTN_KERNEL_REF;
    const double p_drop = f->p_drop;
    const uint64_t drop0 = residual_drop0(m, T); /* x[0]'s index in the whole batch's (rows,T,D) */
    m->n_targets = 0;
    m->status = pelab_posenc_prepare(&m->pe, pos, B, T);
    if (m->status) return m->loss = (pelab_real)NAN; /* the encoding refused these positions */

    input_forward(m, f->x, tokens, f->inputs, B, T);
    pelab_posenc_embed_forward(&m->pe, f->x, pos, B, T);

    for (int l = 0; l < N; l++) {
        const struct pelab_layer_params *L = &m->layer[l];
        const long k = keep ? l : 0; /* the slice this layer writes */
        pelab_real *x = f->x + k * BT * D, *xout = keep ? x + BT * D : x;
        pelab_real *ln1 = f->ln + k * BT * D, *qkv = f->qkv + k * BT * 3 * D;
        pelab_real *qo = f->qo + k * BHT * dq, *ko = f->ko + k * BHT * dq;
        pelab_real *atty = f->atty + k * BT * D;

        pelab_rmsnorm_forward(ln1, f->rstd + k * BT, x, W(L->ln1), (int)BT, D);
        pelab_matmul_forward(qkv, ln1, W(L->qkv), (int)BT, D, 3 * D);
        pelab_posenc_qk_forward(&m->pe, l, qo, ko, qkv, qkv + D, 3 * D, pos, B, T);
        struct pelab_attn_shape s = {
            .B = B, .T = T, .H = H, .dq = dq, .dv = d, .ldv = 3 * D, .ldo = D,
            .scale = (pelab_real)(1.0 / sqrt((double)d)), .pe = &m->pe, .layer = l, .pos = pos,
            .bidirectional = m->cfg.positions.bidirectional,
            .dropout = p_drop, .key = m->dropout_key, .site = site(l, SITE_ATTN_PROBS),
            .row0 = m->dropout_row0, .scratch = f->scratch};
        /* what attention saves: the probabilities (reference) or each row's log-sum-exp (tiled) */
        if (f->attend) {
            if ((m->status = f->attend(f->ctx, l, atty, qo, ko, qkv))) return m->loss = (pelab_real)NAN;
        } else if (ref) pelab_attn_ref_forward(atty, f->att + k * BHT * T, qo, ko, qkv + 2 * D, &s);
        else if ((m->status = pelab_attn_tiled_forward(atty, f->lse + k * BHT, qo, ko, qkv + 2 * D, &s)))
            return m->loss = (pelab_real)NAN; /* out of memory for its scratch; the message says so */
        /* m = x + drop(atty·Wo^T): the branch formed in xmid (kept) or in ln1, spent (evaluation);
         * the residual added into the branch (kept) or into x in place */
        pelab_real *branch = keep ? f->xmid + k * BT * D : ln1;
        pelab_matmul_forward(branch, atty, W(L->proj), (int)BT, D, D);
        if (keep) pelab_dropout(branch, BT * D, p_drop, m->dropout_key, site(l, SITE_ATTN_OUT), drop0);
        pelab_real *xmid = keep ? branch : x;
        for (long i = 0; i < BT * D; i++) xmid[i] = x[i] + branch[i];

        /* x_{l+1} = m + drop(GELU(RMSNorm(m)·W1^T)·W2^T), per chunk of positions (one when kept:
         * the dropout masks index the whole (B,T,D) array) */
        for (long r0 = 0; r0 < BT; r0 += rows) {
            const int n = (int)(BT - r0 < rows ? BT - r0 : rows);
            pelab_real *ln2 = (keep ? f->ln2 + k * BT * D : f->ln) + r0 * D;
            pelab_real *rstd2 = (keep ? f->rstd2 + k * BT : f->rstd) + r0;
            pelab_real *fch = keep ? f->fch + (k * BT + r0) * MD : f->fch;           /* (n, MD) */
            pelab_real *act = keep ? f->fch_gelu + (k * BT + r0) * MD : f->fch;      /* in place */
            pelab_real *out = (keep ? xout : f->atty) + r0 * D;                      /* atty spent */
            pelab_rmsnorm_forward(ln2, rstd2, xmid + r0 * D, W(L->ln2), n, D);
            pelab_matmul_forward(fch, ln2, W(L->fc), n, D, MD);
            pelab_gelu_forward(act, fch, (long)n * MD);
            pelab_matmul_forward(out, act, W(L->fcproj), n, MD, D);
            if (keep)
                pelab_dropout(out, (long)n * D, p_drop, m->dropout_key, site(l, SITE_MLP_OUT),
                              drop0 + (uint64_t)r0 * (uint64_t)D);
            pelab_real *dst = keep ? out : xmid + r0 * D;
            const pelab_real *mid = xmid + r0 * D;
            for (long i = 0; i < (long)n * D; i++) dst[i] = mid[i] + out[i];
        }
    }

    /* logits = RMSNorm(x_N)·E^T and the loss, per chunk of positions */
    const pelab_real *xN = f->x + (keep ? (long)N * BT * D : 0);
    const pelab_real *wout = W(m->lm_head >= 0 ? m->lm_head : m->wte);
    if (f->logits_only) { /* generation: the rows asked for, no loss */
        const long r0 = f->logits_from, n = BT - r0;
        pelab_rmsnorm_forward(f->ln + r0 * D, f->rstd + r0, xN + r0 * D, W(m->lnf), (int)n, D);
        pelab_matmul_forward(f->logits, f->ln + r0 * D, wout, (int)n, D, V);
        return m->loss = 0;
    }
    for (long r0 = 0; r0 < BT; r0 += rows) {
        const int n = (int)(BT - r0 < rows ? BT - r0 : rows);
        pelab_real *lnf = (keep ? f->lnf : f->ln) + r0 * D, *rstdf = (keep ? f->lnf_rstd : f->rstd) + r0;
        pelab_real *logits = f->logits + (keep ? r0 * V : 0); /* (B,T,V) kept, else (rows, V) */
        pelab_rmsnorm_forward(lnf, rstdf, xN + r0 * D, W(m->lnf), n, D);
        pelab_matmul_forward(logits, lnf, wout, n, D, V);
        double part;
        if (keep)
            m->n_targets += pelab_crossentropy_forward(f->ce_stats + 2 * r0, f->losses + r0, &part,
                                                       logits, f->targets + r0, n, V);
        else
            m->n_targets += pelab_crossentropy_eval(f->losses + r0, f->pred + r0, f->pred_prob + r0, &part,
                                                    logits, f->targets + r0, n, V);
    }
    /* the per-position losses (0 without a target) summed in row order */
    double total = 0;
    for (long i = 0; i < BT; i++) total += f->losses[i];
    m->loss = m->n_targets ? (pelab_real)(total / m->n_targets) : (f->has_targets ? 0 : -1);
    return m->loss;
}

pelab_real pelab_model_forward(struct pelab_model *m, const int32_t *tokens, const int32_t *targets,
                               const int32_t *pos, int B, int T) {
    if ((m->status = pelab_model_reserve(m, B, T))) { /* out of memory; the message says for what */
        m->n_targets = 0;
        return m->loss = (pelab_real)NAN;
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
        .keep = 1, .rows = BT, .p_drop = m->training ? m->cfg.dropout : 0, .has_targets = targets != NULL,
        .x = a->x, .ln = a->ln1, .rstd = a->ln1_rstd, .qkv = a->qkv, .qo = a->qo, .ko = a->ko,
        .att = a->att, .lse = a->lse, .atty = a->atty, .xmid = a->xmid, .ln2 = a->ln2,
        .rstd2 = a->ln2_rstd, .fch = a->fch, .fch_gelu = a->fch_gelu, .lnf = a->lnf,
        .lnf_rstd = a->lnf_rstd, .logits = a->logits, .ce_stats = a->ce_stats, .losses = a->losses,
        .targets = a->targets, .inputs = a->inputs, .scratch = &a->attn};
    return pelab_model_forward_pass(m, &f, a->tokens, a->pos, B, T);
}

void pelab_model_backward(struct pelab_model *m, pelab_real loss_scale) {
    struct pelab_acts *a = m->acts;
    const int B = m->cur_B, T = m->cur_T;
    const int N = m->cfg.n_layers, D = m->cfg.d_model, H = m->cfg.n_heads, V = m->cfg.vocab;
    const int d = D / H, MD = m->cfg.mlp_mult * D, dq = m->pe.qk_dim;
    const long BT = (long)B * T;
    const double p_drop = m->training ? m->cfg.dropout : 0;
    const uint64_t drop0 = residual_drop0(m, T);
    PELAB_ASSERT(a != NULL && m->n_targets > 0);

    /* loss → logits → final norm; dres then carries d(residual stream) down the layers */
    pelab_real *dlogits = a->logits; /* written over the logits */
    pelab_crossentropy_backward(dlogits, a->logits, a->ce_stats, a->targets, loss_scale / m->n_targets, (int)BT, V);
    int out_w = m->lm_head >= 0 ? m->lm_head : m->wte;
    pelab_matmul_backward_assign(a->dln, G(out_w), dlogits, a->lnf, W(out_w), (int)BT, D, V);
    memset(a->dres, 0, (size_t)BT * D * sizeof *a->dres);
    pelab_rmsnorm_backward(a->dres, G(m->lnf), a->dln, a->x + N * BT * D, W(m->lnf), a->lnf_rstd, (int)BT, D);

    for (int l = N - 1; l >= 0; l--) {
        const struct pelab_layer_params *L = &m->layer[l];
        pelab_real *x = a->x + l * BT * D, *ln1 = a->ln1 + l * BT * D, *qkv = a->qkv + l * BT * 3 * D;
        pelab_real *qo = a->qo + l * BT * H * dq, *ko = a->ko + l * BT * H * dq;
        pelab_real *atty = a->atty + l * BT * D;
        pelab_real *xmid = a->xmid + l * BT * D, *ln2 = a->ln2 + l * BT * D;
        pelab_real *fch = a->fch + l * BT * MD, *fch_gelu = a->fch_gelu + l * BT * MD;

        /* MLP branch: x_{l+1} = m + drop(GELU(RMSNorm(m)·W1^T)·W2^T) */
        memcpy(a->dbranch, a->dres, (size_t)BT * D * sizeof *a->dres);
        pelab_dropout(a->dbranch, BT * D, p_drop, m->dropout_key, site(l, SITE_MLP_OUT), drop0);
        pelab_matmul_backward_assign(a->dfch_gelu, G(L->fcproj), a->dbranch, fch_gelu, W(L->fcproj), (int)BT, MD, D);
        pelab_gelu_backward(a->dfch, a->dfch_gelu, fch, BT * MD);
        pelab_matmul_backward_assign(a->dln, G(L->fc), a->dfch, ln2, W(L->fc), (int)BT, D, MD);
        pelab_rmsnorm_backward(a->dres, G(L->ln2), a->dln, xmid, W(L->ln2), a->ln2_rstd + l * BT, (int)BT, D);

        /* attention branch: m = x_l + drop(Attn(PE(RMSNorm(x_l)·Wqkv^T))·Wo^T) */
        memcpy(a->dbranch, a->dres, (size_t)BT * D * sizeof *a->dres);
        pelab_dropout(a->dbranch, BT * D, p_drop, m->dropout_key, site(l, SITE_ATTN_OUT), drop0);
        pelab_matmul_backward_assign(a->datty, G(L->proj), a->dbranch, atty, W(L->proj), (int)BT, D, D);
        struct pelab_attn_shape s = {
            .B = B, .T = T, .H = H, .dq = dq, .dv = d, .ldv = 3 * D, .ldo = D,
            .scale = (pelab_real)(1.0 / sqrt((double)d)), .pe = &m->pe, .layer = l, .pos = a->pos,
            .bidirectional = m->cfg.positions.bidirectional,
            .dropout = p_drop, .key = m->dropout_key, .site = site(l, SITE_ATTN_PROBS),
            .row0 = m->dropout_row0, .scratch = &a->attn};
        attn_backward(m, l, a->dqkv + 2 * D, atty, qo, ko, qkv + 2 * D, &s);
        pelab_posenc_qk_backward(&m->pe, l, a->dqkv, a->dqkv + D, a->dqo, a->dko, qkv, qkv + D,
                                 3 * D, a->pos, B, T);
        pelab_matmul_backward_assign(a->dln, G(L->qkv), a->dqkv, ln1, W(L->qkv), (int)BT, D, 3 * D);
        pelab_rmsnorm_backward(a->dres, G(L->ln1), a->dln, x, W(L->ln1), a->ln1_rstd + l * BT, (int)BT, D);
    }

    pelab_posenc_embed_backward(&m->pe, a->dres, a->pos, B, T);
    if (m->pe.ops->backward_end) m->pe.ops->backward_end(&m->pe);
    input_backward(m, a->dres, a->tokens, a->inputs, B, T);
}

const pelab_real *pelab_model_logits(const struct pelab_model *m) { return m->acts->logits; }
const pelab_real *pelab_model_losses(const struct pelab_model *m) { return m->acts->losses; }
const pelab_real *pelab_model_qkv(const struct pelab_model *m, int layer) {
    PELAB_ASSERT(m->acts != NULL && layer >= 0 && layer < m->cfg.n_layers);
    return m->acts->qkv + (long)layer * m->cur_B * m->cur_T * 3 * m->cfg.d_model;
}

const pelab_real *pelab_model_attention(const struct pelab_model *m, int layer) {
    PELAB_ASSERT(m->acts != NULL && layer >= 0 && layer < m->cfg.n_layers);
    if (!m->acts->att) return NULL;
    const long BHT = (long)m->cur_B * m->cfg.n_heads * m->cur_T;
    return m->acts->att + layer * BHT * m->cur_T;
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

int pelab_model_find_nonfinite(const struct pelab_model *m, char *buf, size_t size) {
    const struct pelab_acts *a = m->acts;
    PELAB_ASSERT(a != NULL);
    const long B = m->cur_B, T = m->cur_T, BT = B * T;
    const long N = m->cfg.n_layers, D = m->cfg.d_model, H = m->cfg.n_heads, V = m->cfg.vocab;
    const long MD = m->cfg.mlp_mult * D, dq = m->pe.qk_dim;
#define VIEW3(L, name, ptr, last, dn) \
    {L, name, ptr, 3, {B, T, last, 0}, dn}
#define VIEW4(L, name, ptr, d2, d3, dn) \
    {L, name, ptr, 4, {B, H, d2, d3}, dn}
    struct act_view first = VIEW3(-1, "token embedding (+ encoding) output", a->x, D, "(B,T,D)");
    if (scan_view(&first, buf, size)) return 1;
    for (long l = 0; l < N; l++) { /* in the order the forward pass computes them */
        int L = (int)l;
        struct act_view vs[] = {
            VIEW3(L, "attn_norm output", a->ln1 + l * BT * D, D, "(B,T,D)"),
            VIEW3(L, "attn.qkv output", a->qkv + l * BT * 3 * D, 3 * D, "(B,T,3D)"),
            VIEW4(L, "queries after the encoding", a->qo + l * BT * H * dq, T, dq, "(B,H,T,dq)"),
            VIEW4(L, "keys after the encoding", a->ko + l * BT * H * dq, T, dq, "(B,H,T,dq)"),
            /* the reference kernel keeps the probabilities, the tiled one each row's log-sum-exp */
            a->att ? (struct act_view)VIEW4(L, "attention probabilities", a->att + l * BT * H * T, T, T, "(B,H,T,T)")
                   : (struct act_view)VIEW4(L, "attention log-sum-exp", a->lse + l * BT * H, T, 1, "(B,H,T,1)"),
            VIEW3(L, "attention heads' output", a->atty + l * BT * D, D, "(B,T,D)"),
            VIEW3(L, "residual after attention", a->xmid + l * BT * D, D, "(B,T,D)"),
            VIEW3(L, "mlp_norm output", a->ln2 + l * BT * D, D, "(B,T,D)"),
            VIEW3(L, "mlp.fc output", a->fch + l * BT * MD, MD, "(B,T,M)"),
            VIEW3(L, "GELU output", a->fch_gelu + l * BT * MD, MD, "(B,T,M)"),
            VIEW3(L, "block output", a->x + (l + 1) * BT * D, D, "(B,T,D)"),
        };
        for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
            if (scan_view(&vs[i], buf, size)) return 1;
    }
    struct act_view last[] = {VIEW3(-1, "final_norm output", a->lnf, D, "(B,T,D)"),
                              VIEW3(-1, "logits", a->logits, V, "(B,T,V)")};
#undef VIEW3
#undef VIEW4
    for (size_t i = 0; i < sizeof last / sizeof last[0]; i++)
        if (scan_view(&last[i], buf, size)) return 1;
    return 0;
}
