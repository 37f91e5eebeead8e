/* The evaluation-only forward: the loss of pelab_model_forward without keeping what a backward
 * pass reads, for eval, sample and long-context sweeps, and generation's pass (nn/kv_cache.c).
 * The layers are nn/forward.c's (pelab_model_forward_pass); this file owns the buffers that pass
 * writes into when it keeps nothing.
 *
 * The training forward keeps every layer's activations, N·((7 + 2M)·D + 2·H·qk_dim)·B·T reals,
 * and the (B,T,V) logits. Here the layers share one set of buffers, overwritten layer after
 * layer, and the position-wise parts (the MLP, the final norm, the output layer and the loss)
 * run over chunks of `rows` positions, so what grows with B·T is
 *   x (D), ln (D), qkv (3D), qo and ko (H·qk_dim each), atty (D)     per position
 *   the buffers of the encoding's sites inside the blocks, as their declarations shape them
 * plus the attention's log-sum-exps, and the chunks are (rows, M·D) and (rows, V).
 * tests/test_model_eval.c holds its losses equal to the training forward's (every encoding, both
 * attention kernels, several chunk lengths).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/model.h"
#include "pelab/status.h"
#include "attn/attention.h"
#include "nn/forward.h"

struct pelab_eval_acts {
    long cap, cap_att;          /* positions (B·T) the buffers hold; reals of att */
    double site_bytes;          /* bytes of the sites' buffers (fwd.sites) */
    long rows;                  /* positions per chunk of the position-wise part */
    /* one layer's slice (nn/forward.h): x, ln1 (B,T,D); rstd1 (B,T); qkv (B,T,3D); qo, ko
     * (B,H,T,dq); lse (B,H,T) tiled or att (B,H,T,T) reference kernel; atty (B,T,D);
     * fch (rows, M·D); logits (rows, V); losses, pred, pred_prob (B,T); the rest aliases */
    struct pelab_fwd_bufs fwd;
    struct pelab_pe_site_bufs site_last; /* generation: what each sequence's site values continue
                                   from (a PLAN_LAST plan for up to B·T sequences) */
    int32_t *targets;           /* (B,T) the targets, -1 where none */
    struct pelab_attn_scratch attn; /* the tiled kernel's per-thread tiles */
};

/* Chunk length: chunks of about 4M reals (16 MiB in float) at most, whole sequences when small;
 * or the model's context's eval_rows (a test's, to exercise the chunking on tiny models). */
static long chunk_rows(const struct pelab_model *m, long BT) {
    const long MD = (long)m->cfg.mlp_mult * m->cfg.d_model, V = m->cfg.vocab, chosen = m->ctx->eval_rows;
    long rows = chosen > 0 ? chosen : (4L << 20) / (MD > V ? MD : V);
    if (rows < 16 && chosen <= 0) rows = 16;
    return rows < BT ? rows : BT;
}

void pelab_model_eval_release(struct pelab_model *m) {
    struct pelab_eval_acts *e = m->eval;
    if (!e) return;
    struct pelab_fwd_bufs *f = &e->fwd;
    pelab_real *bufs[] = {f->x, f->ln1, f->rstd1, f->qkv, f->qo, f->ko, f->lse, f->att, f->atty,
                          f->fch, f->logits, f->losses, f->pred_prob};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    pelab_posenc_plan_free(&f->sites);
    pelab_posenc_plan_free(&e->site_last);
    free(f->pred);
    free(e->targets);
    pelab_attn_scratch_free(&e->attn);
    free(e);
    m->eval = NULL;
}

/* Buffers for B×T (kept while large enough). */
static int eval_reserve(struct pelab_model *m, int B, int T) {
    const long BT = (long)B * T, H = m->cfg.n_heads, rows = chunk_rows(m, BT);
    const int ref = m->cfg.attention == PELAB_ATTN_KERNEL_REF;
    const double site_bytes = pelab_posenc_plan_bytes(&m->pe, PELAB_PE_PLAN_PASS, pelab_model_site_kernel(m), 1, B, T);
    struct pelab_eval_acts *e = m->eval;
    if (e && BT <= e->cap && rows <= e->rows && (!ref || BT * H * T <= e->cap_att) && site_bytes <= e->site_bytes)
        return PELAB_OK;
    pelab_model_eval_release(m);
    e = calloc(1, sizeof *e);
    if (!e) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    const long D = m->cfg.d_model, V = m->cfg.vocab, dq = m->pe.qk_dim;
    const long MD = m->cfg.mlp_mult * D;
    int ok = 1;
#define ALLOC(buf, n) (ok = ok && ((buf) = malloc((size_t)(n) * sizeof *(buf))) != NULL)
    struct pelab_fwd_bufs *f = &e->fwd;
    ALLOC(f->x, BT * D);
    ALLOC(f->ln1, BT * D);
    ALLOC(f->rstd1, BT);
    ALLOC(f->qkv, BT * 3 * D);
    ALLOC(f->qo, BT * H * dq);
    ALLOC(f->ko, BT * H * dq);
    ok = ok && pelab_posenc_plan_alloc(&m->pe, &f->sites, PELAB_PE_PLAN_PASS, pelab_model_site_kernel(m), 1, B, T) == PELAB_OK;
    ok = ok && pelab_posenc_plan_alloc(&m->pe, &e->site_last, PELAB_PE_PLAN_LAST, 0, 1, BT, 1) == PELAB_OK;
    if (ref) ALLOC(f->att, BT * H * T);
    else ALLOC(f->lse, BT * H);
    ALLOC(f->atty, BT * D);
    ALLOC(f->fch, rows * MD);
    ALLOC(f->logits, rows * V);
    ALLOC(f->losses, BT);
    ALLOC(f->pred, BT);
    ALLOC(f->pred_prob, BT);
    ALLOC(e->targets, BT);
    /* the plan: the residual stream in place, spent buffers reused */
    f->xmid = f->x;
    f->ln2 = f->lnf = f->branch = f->ln1;
    f->rstd2 = f->lnf_rstd = f->rstd1;
    f->fch_gelu = f->fch;
#undef ALLOC
    m->eval = e; /* released below on failure */
    if (!ok) {
        pelab_model_eval_release(m);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for evaluating batch %d × length %d", B, T);
    }
    e->cap = BT;
    e->cap_att = ref ? BT * H * T : 0;
    e->site_bytes = site_bytes;
    e->rows = rows;
    return PELAB_OK;
}

int pelab_model_forward_eval(struct pelab_model *m, const int32_t *tokens, const int32_t *targets,
                             const int32_t *pos, int B, int T) {
    m->n_targets = 0;
    if ((m->status = eval_reserve(m, B, T))) {
        m->loss = (pelab_real)NAN;
        return m->status;
    }
    struct pelab_eval_acts *e = m->eval;
    const long BT = (long)B * T;
    if (targets) memcpy(e->targets, targets, (size_t)BT * sizeof *targets);
    else for (long i = 0; i < BT; i++) e->targets[i] = -1;
    const struct pelab_fwd f = {
        .mode = PELAB_FWD_EVAL, .buf = e->fwd, .rows = chunk_rows(m, BT), .targets = e->targets,
        .has_targets = targets != NULL, .inputs = m->inputs, .scratch = &e->attn};
    return pelab_model_forward_pass(m, &f, tokens, pos, B, T);
}

int pelab_model_forward_generate(struct pelab_model *m, struct pelab_attn_cache *const *caches,
                                 const int32_t *tokens, const int32_t *pos, int B, int T, int logits_from,
                                 pelab_real *logits) {
    m->n_targets = 0;
    if ((m->status = eval_reserve(m, B, T))) return m->status;
    const struct pelab_fwd f = {
        .mode = PELAB_FWD_GENERATE, .buf = m->eval->fwd, .rows = chunk_rows(m, (long)B * T),
        .caches = caches, .site_last = &m->eval->site_last, .logits_out = logits, .logits_from = logits_from};
    return pelab_model_forward_pass(m, &f, tokens, pos, B, T);
}

const pelab_real *pelab_model_eval_losses(const struct pelab_model *m) {
    PELAB_ASSERT(m->eval != NULL);
    return m->eval->fwd.losses;
}

const int32_t *pelab_model_eval_pred(const struct pelab_model *m) {
    PELAB_ASSERT(m->eval != NULL);
    return m->eval->fwd.pred;
}

const pelab_real *pelab_model_eval_pred_prob(const struct pelab_model *m) {
    PELAB_ASSERT(m->eval != NULL);
    return m->eval->fwd.pred_prob;
}
