/* The forward pass of the model comment (nn/model.c), once for training, evaluation and
 * generation (nn/forward.h), and the backward of its blocks:
 *
 *   x = embed(tokens or patches, pos)
 *   for each layer l:  x = block(l, x)
 *   head: logits = RMSNorm(x)·E^T, and the loss
 *
 * Where each step writes is the caller's buffer plan (struct pelab_fwd_bufs: kept slices for the
 * backward, or one slice reused with aliases), so the arithmetic below has no mode in it but the
 * attention's keys (the batch's, or the KV cache's) and what the head computes. Training and
 * evaluation run the same operations on the same operands, so they give the same loss bit for
 * bit (tests/test_model_eval.c).
 */
#include <math.h>
#include <string.h>
#include "pelab/model.h"
#include "pelab/ctx.h"
#include "pelab/status.h"
#include "attn/attention.h"
#include "attn/sites.h"
#include "kernels/cpu/matmul.h"
#include "nn/forward.h"
#include "kernels/cpu/layers.h"

#define W(i) pelab_params_data(&m->params, (i))
#define G(i) pelab_params_grad(&m->params, (i))

enum pelab_pe_kernel pelab_model_site_kernel(const struct pelab_model *m) {
    return m->cfg.attention == PELAB_ATTN_KERNEL_REF ? PELAB_PE_KERNEL_REF : PELAB_PE_KERNEL_TILED;
}

struct pelab_layer_bufs pelab_layer_bufs(const struct pelab_model *m, const struct pelab_fwd_bufs *b,
                                         int kept, int l, int B, int T) {
    const long BT = (long)B * T, D = m->cfg.d_model, BHT = BT * m->cfg.n_heads;
    const long MD = (long)m->cfg.mlp_mult * D, k = kept ? l : 0; /* the slice */
    return (struct pelab_layer_bufs){
        .x = b->x + k * BT * D, .out = b->x + (kept ? l + 1 : 0) * BT * D,
        .ln1 = b->ln1 + k * BT * D, .rstd1 = b->rstd1 + k * BT, .qkv = b->qkv + k * BT * 3 * D,
        .qo = b->qo + k * BHT * m->pe.qk_dim, .ko = b->ko + k * BHT * m->pe.qk_dim,
        .sites = pelab_posenc_plan_layer(&m->pe, &b->sites, PELAB_PE_PLAN_PASS, pelab_model_site_kernel(m), (int)k, B, T),
        .att = b->att ? b->att + k * BHT * T : NULL, .lse = b->lse ? b->lse + k * BHT : NULL,
        .atty = b->atty + k * BT * D, .xmid = b->xmid + k * BT * D, .ln2 = b->ln2 + k * BT * D,
        .rstd2 = b->rstd2 + k * BT, .fch = b->fch + k * BT * MD, .fch_gelu = b->fch_gelu + k * BT * MD,
        .branch = b->branch};
}

struct pelab_attn_call pelab_attn_call_for(struct pelab_model *m, int l, int B, int T,
                                           const int32_t *pos, double p_drop,
                                           struct pelab_attn_scratch *scratch) {
    const int D = m->cfg.d_model, H = m->cfg.n_heads, d = D / H;
    return (struct pelab_attn_call){
        .ctx = m->ctx, .B = B, .T = T, .H = H, .dq = m->pe.qk_dim, .dv = d, .ldv = 3 * D, .ldo = D,
        .scale = (pelab_real)(1.0 / sqrt((double)d)), .pe = &m->pe, .layer = l,
        .pos = pos, .bidirectional = m->cfg.positions.bidirectional, .dropout = p_drop,
        .key = m->dropout_key, .site = pelab_dropout_site(l, PELAB_DROP_ATTN_PROBS),
        .row0 = m->dropout_row0, .scratch = scratch};
}

/* Generation's steps of fewer rows than this (decoding) read the weights where they are: the bf16
 * copies when the model keeps them, else the float32 weights by the few-row product (one row as
 * fast as OpenBLAS's sgemv, 2–8 faster than its sgemm, which packs them first); a prompt's rows
 * take the gemm (on the same rounded values with bf16 weights), faster there. */
enum { FEW_ROWS = 16 };

/* out (n,OC) = in (n,C) · W_i^T, W_i (OC,C) parameter i. */
static void linear(struct pelab_model *m, const struct pelab_fwd *f, pelab_real *out, const pelab_real *in,
                   int i, int n, int C, int OC) {
    const int step = f->mode == PELAB_FWD_GENERATE && n < FEW_ROWS;
    const uint16_t *h = step ? pelab_bf16_weights_of(m, i) : NULL;
    if (h) pelab_matmul_bf16w_forward(out, in, h, n, C, OC);
    else if (step && m->ctx->precision == PELAB_PRECISION_FP32)
        pelab_matmul_rows_forward(out, in, W(i), n, C, OC);
    else pelab_matmul_forward(m->ctx, out, in, W(i), n, C, OC);
}

/* x (B,T,D): the token embedding E[tok], or the patch model's class token and patch embedding. */
static void input_forward(struct pelab_model *m, pelab_real *x, const int32_t *tokens,
                          const pelab_real *inputs, int B, int T) {
    const int D = m->cfg.d_model, P = m->cfg.input_dim;
    const long BT = (long)B * T;
    if (!P) {
        pelab_embed_forward(x, tokens, W(m->wte), (int)BT, D);
        return;
    }
    PELAB_ASSERT(inputs != NULL);
    pelab_matmul_forward(m->ctx, x, inputs, W(m->patch_w), (int)BT, P, D); /* row 0's result replaced */
    const pelab_real *bias = W(m->patch_b), *cls = W(m->cls);
    for (long r = 0; r < BT; r++) {
        pelab_real *xr = x + r * D;
        if (r % T == 0) memcpy(xr, cls, (size_t)D * sizeof *xr);
        else for (int j = 0; j < D; j++) xr[j] += bias[j];
    }
}

/* y = a + b over n elements (y may be a or b: in place) */
static void add(pelab_real *y, const pelab_real *a, const pelab_real *b, long n) {
    for (long i = 0; i < n; i++) y[i] = a[i] + b[i];
}

/* Attention of layer l into b->atty; what its backward reads saved in b->att (reference kernel)
 * or b->lse (tiled); in generation, against the cache. */
static int attention_forward(struct pelab_model *m, const struct pelab_fwd *f, int l,
                             const struct pelab_layer_bufs *b, const int32_t *pos, int B, int T) {
    struct pelab_attn_call s = pelab_attn_call_for(m, l, B, T, pos, f->p_drop, f->scratch);
    s.sites = &b->sites;
    const int D = m->cfg.d_model;
    const pelab_real *v = b->qkv + 2 * D;
    if (f->caches) { /* each sequence's rows against its own cache */
        pelab_attn_cached_forward(f->caches, b->atty, b->qo, b->ko, v, &s);
        return PELAB_OK;
    }
    if (m->cfg.attention == PELAB_ATTN_KERNEL_REF) {
        pelab_attn_ref_forward(b->atty, b->att, b->qo, b->ko, v, &s);
        return PELAB_OK;
    }
    return pelab_attn_tiled_forward(b->atty, b->lse, b->qo, b->ko, v, &s); /* its scratch may not fit */
}

/* The MLP of block l on positions r0 .. r0 + n − 1:
 *   out = xmid + drop(GELU(RMSNorm(xmid)·W1^T)·W2^T)
 * fch and fch_gelu hold the chunk alone (the whole batch, one chunk, when kept). */
static void mlp_forward(struct pelab_model *m, const struct pelab_fwd *f, int l,
                        const struct pelab_layer_bufs *b, long r0, int n, int T) {
    const struct pelab_layer_params *L = &m->layer[l];
    const int D = m->cfg.d_model, MD = m->cfg.mlp_mult * D;
    pelab_real *ln2 = b->ln2 + r0 * D, *branch = b->branch + r0 * D;
    pelab_rmsnorm_forward(ln2, b->rstd2 + r0, b->xmid + r0 * D, W(L->ln2), n, D);
    linear(m, f, b->fch, ln2, L->fc, n, D, MD);
    pelab_gelu_forward(b->fch_gelu, b->fch, (long)n * MD);
    linear(m, f, branch, b->fch_gelu, L->fcproj, n, MD, D);
    pelab_dropout(branch, (long)n * D, f->p_drop, m->dropout_key, pelab_dropout_site(l, PELAB_DROP_MLP_OUT),
                  pelab_residual_mask_start(m, T) + (uint64_t)r0 * (uint64_t)D);
    add(b->out + r0 * D, b->xmid + r0 * D, branch, (long)n * D);
}

/* The site values (posenc/site.h) of layer l at each KV cache's last position, which a generated
 * sequence's new ones continue, gathered into f->site_last; NULL without a cache. */
static const struct pelab_pe_site_bufs *cached_site_values(struct pelab_model *m, const struct pelab_fwd *f, int l,
                                                           int B) {
    if (!f->caches) return NULL;
    pelab_attn_sites_cache_last(f->caches, B, &m->pe, l, f->site_last);
    return f->site_last;
}

/* Block l:  qkv = RMSNorm(x)·Wqkv^T;  q', k' = PE(q, k, pos);  sites = PE_sites(RMSNorm(x), q');
 *           xmid = x + drop(Attn(q', k', v; sites)·Wo^T);  out = MLP(xmid), per chunk of f->rows. */
static int block_forward(struct pelab_model *m, const struct pelab_fwd *f, int l,
                         const struct pelab_layer_bufs *b, const int32_t *pos, int B, int T) {
    const struct pelab_layer_params *L = &m->layer[l];
    const int D = m->cfg.d_model;
    const long BT = (long)B * T;
    pelab_rmsnorm_forward(b->ln1, b->rstd1, b->x, W(L->ln1), (int)BT, D);
    linear(m, f, b->qkv, b->ln1, L->qkv, (int)BT, D, 3 * D);
    pelab_posenc_qk_forward(&m->pe, l, b->qo, b->ko, b->qkv, b->qkv + D, 3 * D, pos, B, T);
    const struct pelab_pe_site_inputs in = {.x = b->ln1, .q = b->qo, .pos = pos};
    pelab_posenc_sites_forward(&m->pe, l, &b->sites, cached_site_values(m, f, l, B), &in, B, T);
    int rc = attention_forward(m, f, l, b, pos, B, T);
    if (rc) return rc;
    linear(m, f, b->branch, b->atty, L->proj, (int)BT, D, D);
    pelab_dropout(b->branch, BT * D, f->p_drop, m->dropout_key, pelab_dropout_site(l, PELAB_DROP_ATTN_OUT),
                  pelab_residual_mask_start(m, T));
    add(b->xmid, b->x, b->branch, BT * D);
    for (long r0 = 0; r0 < BT; r0 += f->rows)
        mlp_forward(m, f, l, b, r0, (int)(BT - r0 < f->rows ? BT - r0 : f->rows), T);
    return PELAB_OK;
}

/* logits = RMSNorm(x_N)·E^T (or the output head's) and the loss, per chunk of f->rows positions;
 * in generation only the logits of the rows asked for. Returns the mean loss. */
static pelab_real head_forward(struct pelab_model *m, const struct pelab_fwd *f, const pelab_real *xN, long BT) {
    const int D = m->cfg.d_model, V = m->cfg.vocab;
    const struct pelab_fwd_bufs *b = &f->buf;
    const int head = m->lm_head >= 0 ? m->lm_head : m->wte;
    const pelab_real *wout = W(head);
    if (f->mode == PELAB_FWD_GENERATE) {
        const long r0 = f->logits_from, n = BT - r0;
        pelab_rmsnorm_forward(b->lnf + r0 * D, b->lnf_rstd + r0, xN + r0 * D, W(m->lnf), (int)n, D);
        linear(m, f, f->logits_out, b->lnf + r0 * D, head, (int)n, D, V);
        return 0;
    }
    for (long r0 = 0; r0 < BT; r0 += f->rows) {
        const int n = (int)(BT - r0 < f->rows ? BT - r0 : f->rows);
        double part;
        pelab_rmsnorm_forward(b->lnf + r0 * D, b->lnf_rstd + r0, xN + r0 * D, W(m->lnf), n, D);
        pelab_matmul_forward(m->ctx, b->logits, b->lnf + r0 * D, wout, n, D, V); /* the chunk's (n,V) */
        if (f->mode == PELAB_FWD_TRAIN)
            m->n_targets += pelab_crossentropy_forward(b->ce_stats + 2 * r0, b->losses + r0, &part,
                                                       b->logits, f->targets + r0, n, V);
        else
            m->n_targets += pelab_crossentropy_eval(b->losses + r0, b->pred + r0, b->pred_prob + r0,
                                                    &part, b->logits, f->targets + r0, n, V);
    }
    double total = 0; /* the per-position losses (0 without a target) summed in row order */
    for (long i = 0; i < BT; i++) total += b->losses[i];
    return m->n_targets ? (pelab_real)(total / m->n_targets) : (f->has_targets ? 0 : -1);
}

int pelab_model_forward_pass(struct pelab_model *m, const struct pelab_fwd *f, const int32_t *tokens,
                             const int32_t *pos, int B, int T) {
    const int kept = f->mode == PELAB_FWD_TRAIN, N = m->cfg.n_layers;
    PELAB_ASSERT(!kept || f->rows == (long)B * T);
    m->n_targets = 0;
    m->loss = (pelab_real)NAN;
    if ((m->status = pelab_posenc_prepare(&m->pe, pos, B, T))) return m->status; /* refused positions */
    input_forward(m, f->buf.x, tokens, f->inputs, B, T);
    pelab_posenc_embed_forward(&m->pe, f->buf.x, pos, B, T);
    struct pelab_layer_bufs b = {0};
    for (int l = 0; l < N; l++) {
        b = pelab_layer_bufs(m, &f->buf, kept, l, B, T);
        if ((m->status = block_forward(m, f, l, &b, pos, B, T))) {
            const int failed = pelab_gemm_take_failure(m->ctx); /* a product that failed first says so */
            return m->status = failed ? failed : m->status;
        }
    }
    m->loss = head_forward(m, f, b.out, (long)B * T);
    return m->status = pelab_gemm_take_failure(m->ctx); /* a product that failed: its error, not a NaN loss */
}

/* --- the backward of a block ------------------------------------------------------------------ */

/* The MLP's backward, the whole batch: g->dres = ∂L/∂out becomes ∂L/∂xmid. */
static void mlp_backward(struct pelab_model *m, int l, const struct pelab_layer_bufs *b,
                         const struct pelab_bwd_bufs *g, double p_drop, int B, int T) {
    const struct pelab_layer_params *L = &m->layer[l];
    const int D = m->cfg.d_model, MD = m->cfg.mlp_mult * D;
    const long BT = (long)B * T;
    memcpy(g->dbranch, g->dres, (size_t)BT * D * sizeof *g->dres);
    pelab_dropout(g->dbranch, BT * D, p_drop, m->dropout_key, pelab_dropout_site(l, PELAB_DROP_MLP_OUT),
                  pelab_residual_mask_start(m, T));
    pelab_matmul_backward_assign(m->ctx, g->dfch_gelu, G(L->fcproj), g->dbranch, b->fch_gelu, W(L->fcproj),
                                 (int)BT, MD, D);
    pelab_gelu_backward(g->dfch, g->dfch_gelu, b->fch, BT * MD);
    pelab_matmul_backward_assign(m->ctx, g->dln, G(L->fc), g->dfch, b->ln2, W(L->fc), (int)BT, D, MD);
    pelab_rmsnorm_backward(g->dres, G(L->ln2), g->dln, b->xmid, W(L->ln2), b->rstd2, (int)BT, D);
}

/* Attention's backward for layer l from g->datty: dqo, dko (B,H,T,dq), dv (inside dqkv) and the
 * gradients of the encoding's site outputs assigned; bias parameter grads +=. */
static void attention_backward(struct pelab_model *m, int l, const struct pelab_layer_bufs *b,
                               const struct pelab_bwd_bufs *g, const int32_t *pos, double p_drop, int B, int T) {
    struct pelab_attn_call s = pelab_attn_call_for(m, l, B, T, pos, p_drop, g->attn);
    s.sites = &b->sites, s.site_grads = &g->sites;
    const int D = m->cfg.d_model;
    const pelab_real *v = b->qkv + 2 * D;
    pelab_real *dv = g->dqkv + 2 * D;
    if (m->cfg.attention == PELAB_ATTN_KERNEL_REF) {
        pelab_attn_ref_backward(g->dqo, g->dko, dv, g->datt, g->datty, b->att, b->qo, b->ko, v, &s);
        return;
    }
    /* after its forward it cannot fail: the per-thread scratch the forward used is kept, and when
     * it cannot grow (more threads since) the kernel runs on as many threads as it holds */
    int rc = pelab_attn_tiled_backward(g->dqo, g->dko, dv, g->datty, b->atty, b->lse, b->qo, b->ko, v, &s);
    if (rc) m->status = rc;
}

/* Block l's steps in reverse:  MLP;  Wo;  Attn → dq', dk', dv and the sites' gradients;  the
 * sites that read q';  PE(q, k);  Wqkv → d RMSNorm(x);  the sites that read RMSNorm(x);  RMSNorm. */
void pelab_block_backward(struct pelab_model *m, int l, const struct pelab_layer_bufs *b,
                          const struct pelab_bwd_bufs *g, const int32_t *pos, double p_drop, int B, int T) {
    const struct pelab_layer_params *L = &m->layer[l];
    const int D = m->cfg.d_model;
    const long BT = (long)B * T;
    mlp_backward(m, l, b, g, p_drop, B, T);
    memcpy(g->dbranch, g->dres, (size_t)BT * D * sizeof *g->dres);
    pelab_dropout(g->dbranch, BT * D, p_drop, m->dropout_key, pelab_dropout_site(l, PELAB_DROP_ATTN_OUT),
                  pelab_residual_mask_start(m, T));
    pelab_matmul_backward_assign(m->ctx, g->datty, G(L->proj), g->dbranch, b->atty, W(L->proj), (int)BT, D, D);
    attention_backward(m, l, b, g, pos, p_drop, B, T);
    const struct pelab_pe_site_inputs in = {.x = b->ln1, .q = b->qo, .dx = g->dln, .dq = g->dqo, .pos = pos};
    pelab_posenc_sites_backward(&m->pe, l, PELAB_PE_READS_Q, &b->sites, &g->sites, &in, B, T);
    pelab_posenc_qk_backward(&m->pe, l, g->dqkv, g->dqkv + D, g->dqo, g->dko, b->qkv, b->qkv + D, 3 * D, pos, B, T);
    pelab_matmul_backward_assign(m->ctx, g->dln, G(L->qkv), g->dqkv, b->ln1, W(L->qkv), (int)BT, D, 3 * D);
    pelab_posenc_sites_backward(&m->pe, l, PELAB_PE_READS_X, &b->sites, &g->sites, &in, B, T);
    pelab_rmsnorm_backward(g->dres, G(L->ln1), g->dln, b->x, W(L->ln1), b->rstd1, (int)BT, D);
}
