/* Private to the library and its tests: the forward pass that training and evaluation share, and
 * the evaluation-only forward's chunk length. */
#ifndef PELAB_NN_MODEL_EVAL_H
#define PELAB_NN_MODEL_EVAL_H

#include <stdint.h>
#include "pelab/model.h"
#include "attn/attention.h"

/* Where one forward pass writes. keep: training — every layer's activations are kept for the
 * backward, layer l's in slice l of arrays of N (x: N + 1) layers, and dropout applies; else
 * evaluation — one slice shared by the layers (x updated in place; xmid, ln2, rstd2, fch_gelu,
 * lnf, lnf_rstd and ce_stats unused: ln, rstd, atty and fch serve again, fch in place), and pred,
 * pred_prob receive each position's argmax and its probability. The position-wise part runs over
 * chunks of `rows` positions (BT when keep), fch (rows, M·D) and logits (rows, V) when not kept.
 * Shapes per slice: x, ln, atty, xmid, ln2, lnf (B,T,D); rstd, rstd2, lnf_rstd, losses (B,T);
 * qkv (B,T,3D); qo, ko (B,H,T,qk_dim); att (B,H,T,T) (reference kernel) or lse (B,H,T) (tiled);
 * fch, fch_gelu (B,T,M·D); logits (B,T,V); ce_stats (B,T,2); targets (B,T), -1 where none. */
struct pelab_fwd {
    int keep;
    long rows;
    double p_drop;
    int has_targets; /* the caller gave targets: the loss is 0, not -1, when none is >= 0 */
    pelab_real *x, *ln, *rstd, *qkv, *qo, *ko, *att, *lse, *atty;
    pelab_real *xmid, *ln2, *rstd2, *fch, *fch_gelu;
    pelab_real *lnf, *lnf_rstd, *logits, *ce_stats, *losses;
    int32_t *pred;
    pelab_real *pred_prob;
    const int32_t *targets;
    const pelab_real *inputs; /* patch model: (B,T,input_dim) */
    struct pelab_attn_scratch *scratch; /* the tiled kernel's per-thread tiles */
    /* Generation with a KV cache (nn/kv_cache.c), not kept: attend(ctx, l, atty, qo, ko, qkv)
     * takes the attention kernels' place (it stores layer l's keys and values with the earlier
     * ones and writes atty), and logits_only skips the loss: the output layer's rows
     * logits_from .. B·T − 1 into logits (B·T − logits_from, V). */
    int (*attend)(void *ctx, int layer, pelab_real *atty, const pelab_real *qo, const pelab_real *ko,
                  const pelab_real *qkv);
    void *ctx;
    int logits_only;
    long logits_from;
};

/* The forward pass of model.c into f's buffers: the mean loss (also m->loss), m->n_targets and
 * m->status as pelab_model_forward. */
pelab_real pelab_model_forward_pass(struct pelab_model *m, const struct pelab_fwd *f, const int32_t *tokens,
                                    const int32_t *pos, int B, int T);

/* Positions per chunk of the position-wise part (MLP, output layer, loss) of
 * pelab_model_forward_eval; 0 restores the default (about 4M reals of hidden or logits). Tests set
 * a small one so that tiny models run over several chunks. */
void pelab_model_eval_set_rows(long rows);

#endif
