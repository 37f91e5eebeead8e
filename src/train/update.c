/* One optimizer update (pelab_trainer_update, run.h):
 *   zero grad; accum × (batch at the data cursor, forward, backward with scale 1/accum);
 *   the ranks' sums and gradients combined; clip; lr from the schedule; AdamW step
 *
 * Everything an update depends on is a function of (settings, step, data cursor, weights,
 * moments): dropout masks are keyed by hash(seed, step) and indexed by the place of each element
 * in the update's rows, the encoding's draws are keyed by hash(seed, micro-step), batches by the
 * cursor. A checkpoint stores exactly those, so a resumed run repeats an uninterrupted one bit
 * for bit.
 *
 * Across R ranks (pelab/dist.h) every rank reads the whole micro-batch (B rows) and draws the
 * encoding's positions for all of it, so the data and the draws are those of one process; it
 * then runs forward and backward on its own rows [r0, r1) only. The micro-batch loss is a mean
 * over its n targets, so a rank's rows carry the weight n_rank / n:
 *   grad = Σ_micro (1/accum) · Σ_ranks (n_rank / n) · ∇ mean-loss(rank's rows)
 * which is one process's gradient up to the order of the sums. The dropout masks are those of
 * one process too: keyed by the update, and indexed by the row of the update's batch (micro-batch
 * i's rows are i·B .. i·B + B − 1, this rank's r0 + i·B on), so that neither the ranks nor the
 * split of the update into micro-batches changes them. Rank 0 alone adds the encoding's
 * own loss terms (SeqPE's regularisers: they do not depend on the batch). One allreduce sums the
 * flat gradient buffer (after the micro-batches: accumulation divides the communication by
 * accum), so every rank clips and steps on the same gradient and keeps the same weights. */
#include <math.h>
#include <stdio.h>
#include "pelab/dist.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "kernels/cpu/matmul.h"
#include "train/run.h"

/* Salt for the keys of the encoding's training-time draws (train_positions, aux_forward). */
#define PE_SALT 0x9E5A17D8A3C0FFEEull
#define RANDOM_POSITIONS_SALT 0x5A3D0B9C17E4F201ull /* --random-positions' draws, per micro-step */

/* Fraction of target positions of the last forward whose argmax is the target. */
static double batch_accuracy(const struct pelab_model *m, const struct pelab_batch *b) {
    const pelab_real *logits = pelab_model_logits(m);
    int V = m->cfg.vocab;
    size_t n = (size_t)b->B * (size_t)b->T, targets = 0, correct = 0;
    for (size_t i = 0; i < n; i++) {
        if (b->targets[i] < 0) continue;
        targets++;
        correct += pelab_argmax(logits + i * (size_t)V, V) == b->targets[i];
    }
    return targets ? (double)correct / (double)targets : 0;
}

/* An update's sums over its micro-batches, each term weighted by its share: the means of the
 * loss, the accuracy and the encoding's own loss terms. */
struct update_sums {
    double loss, acc, aux[PELAB_PE_AUX_MAX];
};

/* Micro-batch `micro` of an update: the batch at the data cursor, this rank's rows [r0, r1)
 * through forward and backward (weighted by their share of the targets), and on rank 0 the
 * encoding's own loss terms. PELAB_OK, an error status, or PELAB_UPDATE_NAN with *ev filled when the
 * loss, an activation (--check-finite) or the encoding's loss is not finite. */
static int micro_batch(struct pelab_trainer *tr, int micro, uint64_t r0, uint64_t r1,
                       struct update_sums *sum, struct pelab_nan_event *ev) {
    struct pelab_model *m = &tr->model;
    const struct pelab_posenc_ops *pe = m->pe.ops;
    const struct pelab_train_config *c = &tr->c;
    const int T = tr->task.seq_len;
    const size_t off = (size_t)r0 * (size_t)T, n_rows = (size_t)(r1 - r0);
    char where[512];
    int rc;
    tr->task.ops->fill(&tr->task, PELAB_SPLIT_TRAIN, tr->cursor, &tr->batch);
    tr->cursor += (uint64_t)c->batch;
    m->training = m->cfg.dropout > 0;
    m->dropout_row0 = (uint64_t)micro * (uint64_t)c->batch + r0;
    /* the encoding's own random choices, keyed by the micro-step */
    const uint64_t micro_key = pelab_hash64(
        c->seed ^ pelab_hash64((uint64_t)tr->step * (uint64_t)c->accum + (uint64_t)micro));
    const uint64_t pe_key = pelab_hash64(micro_key ^ PE_SALT);
    if (m->cfg.random_positions &&
        (rc = pelab_random_positions(tr->batch.pos, tr->batch.tokens, c->batch, T, tr->task.pad,
                                     m->cfg.random_positions, pelab_hash64(micro_key ^ RANDOM_POSITIONS_SALT), 0)))
        return rc;
    if (pe->train_positions) pe->train_positions(&m->pe, tr->batch.pos, c->batch, T, pe_key);
    size_t n_all = 0, n_mine = 0;
    for (size_t i = 0; i < (size_t)c->batch * (size_t)T; i++)
        if (tr->batch.targets[i] >= 0) {
            n_all++;
            n_mine += i >= off && i < off + n_rows * (size_t)T;
        }
    /* rows without a target add nothing (a rank whose rows have none skips them) */
    if (n_all == 0 || n_mine > 0) {
        const double w = n_all ? (double)n_mine / (double)n_all : 1; /* this rank's share */
        const struct pelab_model_io *io = &tr->task.io;
        struct pelab_batch mine = {(int)n_rows, T, tr->batch.tokens + off, tr->batch.targets + off,
                                   tr->batch.pos + off * (size_t)io->positions.dims,
                                   io->input_dim ? tr->batch.inputs + off * (size_t)io->input_dim : NULL};
        pelab_model_set_inputs(m, mine.inputs);
        if ((rc = pelab_model_forward(m, mine.tokens, mine.targets, mine.pos, mine.B, T))) return rc;
        const double l = m->loss;
        if (c->check_finite && pelab_model_find_nonfinite(m, where, sizeof where)) {
            snprintf(ev->what, sizeof ev->what, "an activation");
            snprintf(ev->detail, sizeof ev->detail, "%s", where);
            return PELAB_UPDATE_NAN;
        }
        if (!isfinite(l)) {
            snprintf(ev->what, sizeof ev->what, "the training loss");
            if (!pelab_model_find_nonfinite(m, where, sizeof where)) snprintf(where, sizeof where, "none");
            snprintf(ev->detail, sizeof ev->detail, "%g; first non-finite activation: %s",
                     pelab_printable(l), where);
            return PELAB_UPDATE_NAN;
        }
        sum->loss += l * w / c->accum;
        sum->acc += batch_accuracy(m, &mine) * w / c->accum;
        pelab_model_backward(m, (pelab_real)(w / c->accum));
        if ((rc = m->status)) return rc; /* a kernel that failed (out of memory) */
    }
    if (pe->aux_forward && tr->ctx->dist.rank == 0) { /* the encoding's own loss terms (SeqPE's regularisers) */
        double terms[PELAB_PE_AUX_MAX], total;
        if ((rc = pe->aux_forward(&m->pe, pelab_hash64(pe_key ^ 1), terms, &total))) return rc;
        if (!isfinite(total)) {
            snprintf(ev->what, sizeof ev->what, "the encoding's own loss");
            snprintf(ev->detail, sizeof ev->detail, "%g", pelab_printable(total));
            return PELAB_UPDATE_NAN;
        }
        pe->aux_backward(&m->pe, (pelab_real)(1.0 / c->accum));
        for (int i = 0; i < tr->n_aux; i++) sum->aux[i] += terms[i] / c->accum;
    }
    return pelab_gemm_take_failure(tr->ctx);
}

/* Across ranks: the update's sums, and whether any rank found a non-finite value (bad) — then
 * the first such rank's event goes to all — and otherwise the gradients, summed in one
 * allreduce. Returns 1 when some rank found one (its sums are then this rank's own). */
static int ranks_combine(struct pelab_trainer *tr, struct update_sums *sum, int bad, struct pelab_nan_event *ev) {
    if (tr->ctx->dist.size == 1) return bad;
    double st[3 + PELAB_PE_AUX_MAX] = {bad, sum->loss, sum->acc};
    for (int i = 0; i < tr->n_aux; i++) st[3 + i] = sum->aux[i];
    pelab_dist_sum_double(&tr->ctx->dist, st, 3 + (size_t)tr->n_aux);
    if (st[0] > 0) {
        pelab_dist_bcast_from(&tr->ctx->dist, ev, sizeof *ev, pelab_dist_first(&tr->ctx->dist, bad));
        return 1;
    }
    sum->loss = st[1], sum->acc = st[2];
    for (int i = 0; i < tr->n_aux; i++) sum->aux[i] = st[3 + i];
    pelab_dist_sum_real(&tr->ctx->dist, tr->model.params.grad, tr->model.params.total);
    return 0;
}

int pelab_trainer_update(struct pelab_trainer *tr, struct pelab_update *u) {
    struct pelab_nan_event *ev = &u->ev;
    struct pelab_model *m = &tr->model;
    const struct pelab_train_config *c = &tr->c;
    const int64_t update_no = tr->step + 1;
    const uint64_t cursor0 = tr->cursor;
    uint64_t r0, r1;
    pelab_dist_share(&tr->ctx->dist, (uint64_t)c->batch, &r0, &r1);
    const int fault = pelab_dist_test_fault(&tr->ctx->dist, update_no);
    char where[512];
    pelab_params_zero_grad(&m->params);
    pelab_poison_apply(tr, PELAB_POISON_WEIGHT, update_no);
    /* dropout: one key per update, not per micro-batch, so that accum micro-batches of B rows
     * draw the masks of one batch of accum·B rows */
    m->dropout_key = pelab_hash64(c->seed ^ pelab_hash64((uint64_t)tr->step));
    struct update_sums sum = {0};
    int rc = PELAB_OK, bad = 0;
    for (int micro = 0; micro < c->accum && !rc && !bad; micro++) {
        rc = micro_batch(tr, micro, r0, r1, &sum, ev);
        if (rc == PELAB_UPDATE_NAN) bad = 1, rc = PELAB_OK;
    }
    m->training = 0;
    m->dropout_row0 = 0;
    if ((rc = pelab_dist_agree(&tr->ctx->dist, rc))) return rc;
    bad = ranks_combine(tr, &sum, bad, ev);
    u->loss = sum.loss, u->acc = sum.acc;
    for (int i = 0; i < tr->n_aux; i++) u->aux[i] = sum.aux[i];
    if (bad) goto not_finite;
    pelab_poison_apply(tr, PELAB_POISON_GRAD, update_no);
    double norm = pelab_grad_norm(&m->params);
    if (!isfinite(norm)) {
        snprintf(ev->what, sizeof ev->what, "the gradient norm");
        pelab_describe_grads(&m->params, where, sizeof where);
        snprintf(ev->detail, sizeof ev->detail, "%g; %s", pelab_printable(norm), where);
        goto not_finite;
    }
    u->lr = pelab_schedule_lr(&tr->sched, tr->step) * tr->lr_scale;
    pelab_adamw_step(&tr->opt, &m->params, u->lr, pelab_clip_scale(norm, c->clip));
    if (fault == PELAB_DIST_FAULT_DIVERGE) m->params.data[0] += (pelab_real)1e-3;
    pelab_poison_apply(tr, PELAB_POISON_UPDATE, update_no);
    /* Finite gradients can still overflow a weight (a huge learning rate or weight decay):
     * such weights must reach neither an evaluation nor a checkpoint. */
    if (pelab_describe_params(&m->params, where, sizeof where)) {
        snprintf(ev->what, sizeof ev->what, "a weight after the update");
        snprintf(ev->detail, sizeof ev->detail, "%s", where);
        ev->applied = 1;
        return PELAB_UPDATE_NAN;
    }
    tr->step = update_no;
    tr->nan_skips = 0;
    return PELAB_OK;
not_finite:
    tr->cursor = cursor0 + (uint64_t)c->batch * (uint64_t)c->accum;
    return PELAB_UPDATE_NAN;
}
