/* The evaluation-only forward pass: the loss of pelab_model_forward (model.c) without keeping
 * what a backward pass reads, for eval, sample and long-context sweeps.
 *
 * The training forward keeps every layer's activations, N·((7 + 2M)·D + 2·H·qk_dim)·B·T reals,
 * and the (B,T,V) logits. Here the layers share one set of buffers, overwritten layer after
 * layer, and the position-wise parts (the MLP, the final norm, the output layer and the loss)
 * run over chunks of `rows` positions, so what grows with B·T is
 *   x (D), ln (D), qkv (3D), qo and ko (H·qk_dim each), atty (D)     per position
 * plus the attention's log-sum-exps, and the chunks are (rows, M·D) and (rows, V).
 *
 *   x = E[tok] (+ e(pos))
 *   layer l:  ln = RMSNorm(x);  qkv = ln·Wqkv^T;  qo, ko = PE(q, k);  atty = Attn(qo, ko, v)
 *             x += atty·Wo^T                               (the product formed in ln)
 *             per chunk:  x += GELU(RMSNorm(x)·W1^T)·W2^T  (RMSNorm in ln, the product in atty)
 *   per chunk: logits = RMSNorm(x)·E^T;  loss, argmax and its probability per position
 *
 * Each operation is the training forward's, on the same operands in the same order (addition
 * commutes exactly), so losses agree to rounding (tests/test_model_eval.c: every encoding, both
 * attention kernels, equal to 1e-12 in the double build). A change to the layer in model.c
 * needs the same change here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/model.h"
#include "pelab/status.h"
#include "attn/attention.h"
#include "kernels/cpu/matmul.h"
#include "nn/layers.h"
#include "nn/model_eval.h"

struct pelab_eval_acts {
    long cap, cap_att;          /* positions (B·T) the buffers hold; reals of att */
    long rows;                  /* positions per chunk of the position-wise part */
    pelab_real *x, *ln, *rstd;  /* (B,T,D), (B,T,D), (B,T) */
    pelab_real *qkv;            /* (B,T,3D) */
    pelab_real *qo, *ko;        /* (B,H,T,dq) */
    pelab_real *lse;            /* (B,H,T) tiled kernel */
    pelab_real *att;            /* (B,H,T,T) reference kernel only */
    pelab_real *atty;           /* (B,T,D) */
    pelab_real *hidden;         /* (rows, M·D) */
    pelab_real *logits;         /* (rows, V) */
    pelab_real *losses;         /* (B,T) outputs */
    int32_t *pred;              /* (B,T) */
    pelab_real *pred_prob;      /* (B,T) */
    int32_t *targets;           /* (B,T) the targets, -1 where none */
    struct pelab_attn_scratch attn; /* the tiled kernel's per-thread tiles */
};

/* Chunk length: chunks of about 4M reals (16 MiB in float) at most, whole sequences when small.
 * A test sets another (pelab_model_eval_set_rows) to exercise the chunking on tiny models. */
static long rows_override;

void pelab_model_eval_set_rows(long rows) { rows_override = rows; }

static long chunk_rows(const struct pelab_model *m, long BT) {
    const long MD = (long)m->cfg.mlp_mult * m->cfg.d_model, V = m->cfg.vocab;
    long rows = rows_override > 0 ? rows_override : (4L << 20) / (MD > V ? MD : V);
    if (rows < 16 && !rows_override) rows = 16;
    return rows < BT ? rows : BT;
}

void pelab_model_eval_release(struct pelab_model *m) {
    struct pelab_eval_acts *e = m->eval;
    if (!e) return;
    pelab_real *bufs[] = {e->x, e->ln, e->rstd, e->qkv, e->qo, e->ko, e->lse, e->att, e->atty,
                          e->hidden, e->logits, e->losses, e->pred_prob};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(e->pred);
    free(e->targets);
    pelab_attn_scratch_free(&e->attn);
    free(e);
    m->eval = NULL;
}

/* Buffers for B×T (kept while large enough). */
static int eval_reserve(struct pelab_model *m, int B, int T) {
    const long BT = (long)B * T, H = m->cfg.n_heads, rows = chunk_rows(m, BT);
    const int ref = m->cfg.attention == PELAB_ATTN_KERNEL_REF;
    struct pelab_eval_acts *e = m->eval;
    if (e && BT <= e->cap && rows <= e->rows && (!ref || BT * H * T <= e->cap_att)) return PELAB_OK;
    pelab_model_eval_release(m);
    e = calloc(1, sizeof *e);
    if (!e) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    const long D = m->cfg.d_model, V = m->cfg.vocab, dq = m->pe.qk_dim;
    const long MD = m->cfg.mlp_mult * D;
    int ok = 1;
#define ALLOC(buf, n) (ok = ok && ((buf) = malloc((size_t)(n) * sizeof *(buf))) != NULL)
    ALLOC(e->x, BT * D);
    ALLOC(e->ln, BT * D);
    ALLOC(e->rstd, BT);
    ALLOC(e->qkv, BT * 3 * D);
    ALLOC(e->qo, BT * H * dq);
    ALLOC(e->ko, BT * H * dq);
    if (ref) ALLOC(e->att, BT * H * T);
    else ALLOC(e->lse, BT * H);
    ALLOC(e->atty, BT * D);
    ALLOC(e->hidden, rows * MD);
    ALLOC(e->logits, rows * V);
    ALLOC(e->losses, BT);
    ALLOC(e->pred, BT);
    ALLOC(e->pred_prob, BT);
    ALLOC(e->targets, BT);
#undef ALLOC
    m->eval = e; /* released below on failure */
    if (!ok) {
        pelab_model_eval_release(m);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for evaluating batch %d × length %d", B, T);
    }
    e->cap = BT;
    e->cap_att = ref ? BT * H * T : 0;
    e->rows = rows;
    return PELAB_OK;
}

#define W(i) pelab_params_data(&m->params, (i))

pelab_real pelab_model_forward_eval(struct pelab_model *m, const int32_t *tokens, const int32_t *targets,
                                    const int32_t *pos, int B, int T) {
    m->n_targets = 0;
    if ((m->status = eval_reserve(m, B, T))) return m->loss = (pelab_real)NAN;
    struct pelab_eval_acts *e = m->eval;
    const int N = m->cfg.n_layers, D = m->cfg.d_model, H = m->cfg.n_heads, V = m->cfg.vocab;
    const int d = D / H, MD = m->cfg.mlp_mult * D, dq = m->pe.qk_dim;
    const long BT = (long)B * T, rows = chunk_rows(m, BT);
    if (targets) memcpy(e->targets, targets, (size_t)BT * sizeof *targets);
    else for (long i = 0; i < BT; i++) e->targets[i] = -1;
    if ((m->status = pelab_posenc_prepare(&m->pe, pos, B, T))) return m->loss = (pelab_real)NAN;

    pelab_embed_forward(e->x, tokens, W(m->wte), (int)BT, D);
    pelab_posenc_embed_forward(&m->pe, e->x, pos, B, T);

    for (int l = 0; l < N; l++) {
        const struct pelab_layer_params *L = &m->layer[l];
        pelab_rmsnorm_forward(e->ln, e->rstd, e->x, W(L->ln1), (int)BT, D);
        pelab_matmul_forward(e->qkv, e->ln, W(L->qkv), (int)BT, D, 3 * D);
        pelab_posenc_qk_forward(&m->pe, l, e->qo, e->ko, e->qkv, e->qkv + D, 3 * D, pos, B, T);
        struct pelab_attn_shape s = {
            .B = B, .T = T, .H = H, .dq = dq, .dv = d, .ldv = 3 * D, .ldo = D,
            .scale = (pelab_real)(1.0 / sqrt((double)d)), .pe = &m->pe, .layer = l, .pos = pos,
            .scratch = &e->attn};
        if (e->att) pelab_attn_ref_forward(e->atty, e->att, e->qo, e->ko, e->qkv + 2 * D, &s);
        else if ((m->status = pelab_attn_tiled_forward(e->atty, e->lse, e->qo, e->ko, e->qkv + 2 * D, &s)))
            return m->loss = (pelab_real)NAN;
        pelab_matmul_forward(e->ln, e->atty, W(L->proj), (int)BT, D, D);
        for (long i = 0; i < BT * D; i++) e->x[i] += e->ln[i];

        for (long r0 = 0; r0 < BT; r0 += rows) {
            const int n = (int)(BT - r0 < rows ? BT - r0 : rows);
            pelab_real *x = e->x + r0 * D, *ln = e->ln + r0 * D, *out = e->atty + r0 * D;
            pelab_rmsnorm_forward(ln, e->rstd + r0, x, W(L->ln2), n, D);
            pelab_matmul_forward(e->hidden, ln, W(L->fc), n, D, MD);
            pelab_gelu_forward(e->hidden, e->hidden, (long)n * MD);
            pelab_matmul_forward(out, e->hidden, W(L->fcproj), n, MD, D);
            for (long i = 0; i < (long)n * D; i++) x[i] += out[i];
        }
    }

    double total = 0;
    const pelab_real *wout = W(m->lm_head >= 0 ? m->lm_head : m->wte);
    for (long r0 = 0; r0 < BT; r0 += rows) {
        const int n = (int)(BT - r0 < rows ? BT - r0 : rows);
        pelab_real *ln = e->ln + r0 * D;
        pelab_rmsnorm_forward(ln, e->rstd + r0, e->x + r0 * D, W(m->lnf), n, D);
        pelab_matmul_forward(e->logits, ln, wout, n, D, V);
        double sum;
        m->n_targets += pelab_crossentropy_eval(e->losses + r0, e->pred + r0, e->pred_prob + r0, &sum,
                                                e->logits, e->targets + r0, n, V);
    }
    /* the per-position losses summed in order, as the training forward's loss does */
    for (long i = 0; i < BT; i++) total += e->losses[i];
    m->loss = m->n_targets ? (pelab_real)(total / m->n_targets) : (targets ? 0 : -1);
    return m->loss;
}

const pelab_real *pelab_model_eval_losses(const struct pelab_model *m) {
    PELAB_ASSERT(m->eval != NULL);
    return m->eval->losses;
}

const int32_t *pelab_model_eval_pred(const struct pelab_model *m) {
    PELAB_ASSERT(m->eval != NULL);
    return m->eval->pred;
}

const pelab_real *pelab_model_eval_pred_prob(const struct pelab_model *m) {
    PELAB_ASSERT(m->eval != NULL);
    return m->eval->pred_prob;
}
