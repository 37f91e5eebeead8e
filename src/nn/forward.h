/* Private to the library and its tests: the one forward pass that training, evaluation and
 * generation share (nn/forward.c), and the buffer plans they hand it. */
#ifndef PELAB_NN_FORWARD_H
#define PELAB_NN_FORWARD_H

#include <stdint.h>
#include "pelab/model.h"
#include "attn/attention.h"

/* What a pass is for. The arithmetic is the same for all three; they differ in where it writes
 * (struct pelab_fwd_bufs), in the attention's keys (the whole batch, or the KV cache) and in
 * what the output layer computes. */
enum pelab_fwd_mode {
    PELAB_FWD_TRAIN,    /* every layer's activations kept for the backward; dropout; the loss and
                           what its backward reads */
    PELAB_FWD_EVAL,     /* one layer's buffers, overwritten layer after layer; the loss, each
                           position's argmax and its probability */
    PELAB_FWD_GENERATE, /* as EVAL, attending to the KV cache's keys; logits only */
};

/* The activations of a pass. TRAIN: arrays of N layers' slices (x: N + 1), each slice kept for
 * the backward. EVAL and GENERATE: one slice, and the plan's aliases: xmid = x (the residual
 * stream updated in place), ln2 = lnf = ln1, rstd2 = lnf_rstd = rstd1, fch_gelu = fch (GELU in
 * place), branch = ln1 (spent once qkv and W1's input are formed). Shapes per slice:
 *   x, ln1, atty, xmid, ln2, lnf (B,T,D); rstd1, rstd2, lnf_rstd, losses (B,T); qkv (B,T,3D);
 *   qo, ko (B,H,T,qk_dim); sites: the buffers of the encoding's sites inside the blocks, as
 *   their declarations shape them (posenc/site.h, a PASS plan: what the encoding writes and what
 *   the attention kernel keeps); att (B,H,T,T) (reference kernel) or lse (B,H,T) (tiled kernel);
 *   fch, fch_gelu (B,T,M·D) kept, (rows, M·D) otherwise; logits (B,T,V) kept, (rows, V) in
 *   EVAL; ce_stats (B,T,2) TRAIN only; pred, pred_prob (B,T) EVAL only;
 *   branch (B,T,D), never kept: a branch's output before it joins the residual stream. */
struct pelab_fwd_bufs {
    pelab_real *x, *ln1, *rstd1, *qkv, *qo, *ko, *att, *lse, *atty;
    struct pelab_pe_site_bufs sites;
    pelab_real *xmid, *ln2, *rstd2, *fch, *fch_gelu, *branch;
    pelab_real *lnf, *lnf_rstd, *logits, *ce_stats, *losses;
    int32_t *pred;
    pelab_real *pred_prob;
};

/* One pass: its mode, its buffers and its inputs beyond tokens and positions. */
struct pelab_fwd {
    enum pelab_fwd_mode mode;
    struct pelab_fwd_bufs buf;
    long rows;                 /* positions per chunk of the MLP and output layer (B·T in TRAIN:
                                  the dropout masks and the kept logits index the whole batch) */
    double p_drop;             /* dropout probability: the model's in TRAIN, else 0 */
    const int32_t *targets;    /* (B,T), -1 where none */
    int has_targets;           /* the caller gave targets: the loss is 0, not -1, when none is >= 0 */
    const pelab_real *inputs;  /* patch model: (B,T,input_dim) */
    struct pelab_attn_scratch *scratch;  /* the tiled kernel's per-thread tiles */
    struct pelab_attn_cache *const *caches; /* GENERATE: (B,) each sequence's earlier keys and values */
    const struct pelab_pe_site_bufs *site_last; /* GENERATE: a PLAN_LAST plan, scratch: what each
                                  sequence's site values continue from */
    pelab_real *logits_out;    /* GENERATE: rows logits_from .. B·T − 1 of the logits, (B·T − logits_from, V) */
    long logits_from;
};

/* Layer l's slice of each buffer: slice l of the kept arrays (TRAIN), or the one slice; out is
 * where the block writes x_{l+1} (slice l + 1 of x, or x itself, updated in place). */
struct pelab_layer_bufs {
    pelab_real *x, *out, *ln1, *rstd1, *qkv, *qo, *ko, *att, *lse, *atty;
    struct pelab_pe_site_bufs sites;
    pelab_real *xmid, *ln2, *rstd2, *fch, *fch_gelu, *branch;
};
struct pelab_layer_bufs pelab_layer_bufs(const struct pelab_model *m, const struct pelab_fwd_bufs *b,
                                         int kept, int l, int B, int T);

/* The arguments of layer l's attention call for a batch B×T at positions pos: the model's
 * shape, its encoding, dropout p and its mask key and sites, and the tiled kernel's scratch. */
struct pelab_attn_call pelab_attn_call_for(struct pelab_model *m, int l, int B, int T,
                                           const int32_t *pos, double p_drop,
                                           struct pelab_attn_scratch *scratch);

/* The attention kernel the model runs, as the sites' plans name it. */
enum pelab_pe_kernel pelab_model_site_kernel(const struct pelab_model *m);

/* The scratch of the backward pass, one layer's: dres (B,T,D) the gradient of the residual stream
 * (carried down the layers); dbranch, dln, datty (B,T,D); dqkv (B,T,3D); dqo, dko (B,H,T,qk_dim);
 * datt (B,H,T,T) reference kernel only; dfch, dfch_gelu (B,T,M·D); sites: the gradients of the
 * encoding's site outputs (a GRAD plan); attn: the tiled kernel's per-thread tiles. */
struct pelab_bwd_bufs {
    pelab_real *dres, *dbranch, *dln, *datty, *dqkv, *dqo, *dko, *datt, *dfch, *dfch_gelu;
    struct pelab_pe_site_bufs sites;
    struct pelab_attn_scratch *attn;
};

/* Block l's backward (nn/forward.c), mirroring its forward, from g->dres = ∂L/∂x_{l+1} on the
 * saved slices b: g->dres becomes ∂L/∂x_l; the layer's and the encoding's parameter gradients +=.
 * p_drop and pos: the forward's. Sets m->status on a failure of the attention backward. */
void pelab_block_backward(struct pelab_model *m, int l, const struct pelab_layer_bufs *b,
                          const struct pelab_bwd_bufs *g, const int32_t *pos, double p_drop, int B, int T);

/* Dropout sites, one per (layer, place): masks differ between places and layers. */
enum { PELAB_DROP_ATTN_PROBS, PELAB_DROP_ATTN_OUT, PELAB_DROP_MLP_OUT, PELAB_DROP_PLACES };
static inline uint64_t pelab_dropout_site(int layer, int place) {
    return (uint64_t)layer * PELAB_DROP_PLACES + (uint64_t)place;
}
/* The residual and MLP masks index the (rows, T, D) outputs of the whole batch the key covers:
 * this pass's sequence 0 is its row m->dropout_row0, so its element 0 is element
 * dropout_row0·T·D of the batch. */
static inline uint64_t pelab_residual_mask_start(const struct pelab_model *m, int T) {
    return m->dropout_row0 * (uint64_t)T * (uint64_t)m->cfg.d_model;
}

/* The forward pass of the model comment (nn/model.c) into f's buffers: PELAB_OK, or the status
 * of what refused it (the encoding's positions, the tiled kernel's scratch; message set). Sets
 * m->status, m->n_targets and m->loss (the mean loss; -1 without targets; NaN when refused). */
int pelab_model_forward_pass(struct pelab_model *m, const struct pelab_fwd *f, const int32_t *tokens,
                             const int32_t *pos, int B, int T);

/* Generation (nn/kv_cache.c): T tokens of each of B sequences (tokens, pos (B,T)) through the
 * layers, sequence b attending to caches[b]'s keys and its new ones; the logits of rows
 * logits_from .. B·T − 1 into logits. One pass over the weights for all B. On the evaluation
 * buffers (model_eval.c). PELAB_OK or the status. */
int pelab_model_forward_generate(struct pelab_model *m, struct pelab_attn_cache *const *caches,
                                 const int32_t *tokens, const int32_t *pos, int B, int T, int logits_from,
                                 pelab_real *logits);

/* Parameter `param`'s bf16 copy when the model generates with bf16 weights
 * (pelab_model_use_bf16_weights) and it is one of the matrices; NULL otherwise. */
const uint16_t *pelab_bf16_weights_of(const struct pelab_model *m, int param);
void pelab_bf16_weights_free(struct pelab_bf16_weights *w);


#endif
