/* The training loop: resolve options → task → model → AdamW, then per update
 *   zero grad; accum × (batch at the data cursor, forward, backward with scale 1/accum);
 *   clip; lr from the schedule; AdamW step
 * with evaluation, logging and checkpoints at their intervals, and a final evaluation of the
 * whole val and test splits into summary.json.
 *
 * Everything an update depends on is a function of (settings, step, data cursor, weights,
 * moments): dropout masks are keyed by hash(seed, step) and indexed by the place of each element
 * in the update's rows, the encoding's draws are keyed by hash(seed, micro-step), batches by the
 * cursor. A checkpoint stores exactly those, so a resumed run repeats an uninterrupted one bit
 * for bit. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pelab/clock.h"
#include "pelab/dist.h"
#include "pelab/io.h"
#include "pelab/rng.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "kernels/cpu/matmul.h"
#include "pelab/threads.h"
#include "pelab/precision.h"
#include "train/run.h"

/* Salt for the seed-derived start of the data cursor: different seeds see the data in another
 * order. */
#define CURSOR_SALT 0xC0A5E5DA7A5EEDull
/* Salt for the keys of the encoding's training-time draws (train_positions, aux_forward). */
#define PE_SALT 0x9E5A17D8A3C0FFEEull
#define RANDOM_POSITIONS_SALT 0x5A3D0B9C17E4F201ull /* --random-positions' draws, per micro-step */

struct pelab_trainer *pelab_trainer_new(const struct pelab_train_hooks *hooks) {
    struct pelab_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return NULL;
    tr->lock_fd = -1;
    tr->hooks = pelab_dist_rank() == 0 ? hooks : NULL; /* rank 0 alone reports */
    tr->lr_scale = 1;
    tr->prev_precision = -1;
    return tr;
}

void pelab_trainer_free(struct pelab_trainer *tr) {
    if (tr->prev_precision >= 0) pelab_precision_set((enum pelab_precision)tr->prev_precision);
    pelab_log_close(tr);
    pelab_run_unlock(tr);
    if (tr->have_batch) pelab_batch_free(&tr->batch);
    if (tr->have_model) pelab_model_free(&tr->model);
    if (tr->have_task) pelab_task_free(&tr->task);
    free(tr->init_data);
    free(tr);
}

/* Options → config, task, model, optimizer. Only checks and allocations: nothing is written. */
int pelab_trainer_setup(struct pelab_trainer *tr, const char *hint) {
    const char *task = pelab_opt_str(&tr->opts, pelab_train_options, "task");
    const char *pe = pelab_opt_str(&tr->opts, pelab_model_options, "pe");
    int rc = pelab_train_check_opts(&tr->opts, task, &pe, 1, hint);
    if (!rc) rc = pelab_train_config_read(&tr->opts, &tr->c);
    if (!rc) rc = pelab_poison_init(&tr->poison);
    if (rc) return rc;
    struct pelab_train_config *c = &tr->c;
    pelab_threads_set(pelab_dist_threads(c->threads));
    tr->prev_precision = (int)pelab_precision_get();
    if ((rc = pelab_precision_set(c->precision))) return rc;
    pelab_bf16_advise();
    if ((rc = pelab_task_init(&tr->task, c->task, &tr->opts))) return rc;
    tr->have_task = 1;
    /* Every split the run reads (training and val by init; val during training, val and test at
     * its end), read now: a damaged file stops the run before its first update, not after its
     * last. */
    for (int s = PELAB_SPLIT_VAL; s <= PELAB_SPLIT_TEST; s++)
        if ((rc = pelab_task_open_split(&tr->task, (enum pelab_split)s))) return rc;
    tr->task.augment = 1;
    tr->task.train_origin = pelab_hash64(c->seed ^ CURSOR_SALT) %
                            tr->task.ops->split_size(&tr->task, PELAB_SPLIT_TRAIN);
    if ((rc = pelab_model_init_io(&tr->model, &tr->opts, tr->task.vocab, tr->task.seq_len, &tr->task.io))) return rc;
    tr->have_model = 1;
    /* a task whose test split runs beyond the training context (the algorithmic tasks): the
     * encoding must take those positions, which the final evaluation reads; checked before
     * anything trains */
    if (tr->task.test_len > tr->task.seq_len && (rc = pelab_check_split_positions(&tr->model, &tr->task, PELAB_SPLIT_TEST)))
        return pelab_fail_context(rc, "task %s tests beyond the training context of %d positions, "
                                  "up to %d", c->task, tr->task.seq_len, tr->task.test_len);
    tr->n_aux = 0;
    for (const char *const *n = tr->model.pe.ops->aux_names; n && *n; n++) tr->n_aux++;
    PELAB_ASSERT(tr->n_aux <= PELAB_PE_AUX_MAX);
    tr->opt = (struct pelab_adamw){c->beta1, c->beta2, c->eps, c->weight_decay, 0};
    tr->sched = (struct pelab_schedule){c->lr, c->min_lr, c->warmup, c->decay_steps};
    tr->saved_step = -1;
    return PELAB_OK;
}

/* Activations and the batch buffer (kept out of setup: validation does not need them). The
 * batch buffer holds a whole micro-batch, the activations only this rank's rows of it. */
int pelab_trainer_buffers(struct pelab_trainer *tr) {
    int ranks = pelab_dist_size();
    if (tr->c.batch < ranks)
        return pelab_fail(PELAB_ERR_USAGE, "--batch %d is below the %d MPI ranks: every rank "
                          "takes at least one row of each micro-batch", tr->c.batch, ranks);
    uint64_t r0, r1;
    pelab_dist_share((uint64_t)tr->c.batch, &r0, &r1);
    int rc = pelab_model_reserve(&tr->model, (int)(r1 - r0), tr->task.seq_len);
    if (!rc) rc = pelab_batch_alloc_for(&tr->batch, &tr->task, tr->c.batch, tr->task.seq_len);
    if (!rc) tr->have_batch = 1;
    return rc;
}

/* --init-from: the source's step and checksum in the "derived" group. */
static int init_from_record(struct pelab_trainer *tr) {
    const char *src = pelab_opts_get(&tr->opts, "init-from");
    if (!src || !src[0]) return PELAB_OK;
    char v[32];
    snprintf(v, sizeof v, "%" PRId64, tr->init_step);
    struct pelab_settings *s = &tr->settings;
    struct pelab_opts *d = &s->group[PELAB_GROUP_DERIVED];
    int rc = pelab_opts_set(d, "init-from-step", v);
    if (!rc) {
        s->number[PELAB_GROUP_DERIVED][d->count - 1] = 1;
        rc = pelab_opts_set(d, "init-from-checksum", tr->init_crc);
    }
    if (!rc) s->number[PELAB_GROUP_DERIVED][d->count - 1] = 0;
    return rc;
}

/* The resolved options into tr->settings, as config.json and the model file's metadata record
 * them. decay-steps is recorded resolved, so extending a run with --steps keeps its schedule. */
static int resolve_settings(struct pelab_trainer *tr) {
    char v[32];
    snprintf(v, sizeof v, "%" PRId64, tr->c.decay_steps);
    int rc = pelab_opts_set(&tr->opts, "decay-steps", v);
    if (!rc) rc = pelab_opts_set(&tr->opts, "out", tr->dir);
    if (rc) return rc;
    pelab_settings_build(&tr->settings, &tr->opts, &tr->model, &tr->task);
    return init_from_record(tr);
}

int pelab_trainer_write_config(struct pelab_trainer *tr) {
    int rc = resolve_settings(tr);
    if (rc) return rc;
    struct pelab_sb sb = {0};
    pelab_settings_json(&tr->settings, &sb);
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "config.json");
    rc = pelab_write_file_atomic(path, sb.data, sb.len);
    pelab_sb_free(&sb);
    return rc;
}

static void report(const struct pelab_train_hooks *h, struct pelab_train_progress *p,
                   enum pelab_train_event ev) {
    p->event = ev;
    if (h && h->progress) h->progress(h->ctx, p);
}

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

/* What update() found not finite: handed to pelab_nan_handle. Plain bytes (no pointers), so
 * the rank that found it can send it to the others. */
#define UPDATE_NAN (-1)
struct nan_event {
    char what[64];
    char detail[640];
    int applied; /* the weights were already updated */
};

/* An update's sums over its micro-batches, each term weighted by its share: the means of the
 * loss, the accuracy and the encoding's own loss terms. */
struct update_sums {
    double loss, acc, aux[PELAB_PE_AUX_MAX];
};

/* Micro-batch `micro` of an update: the batch at the data cursor, this rank's rows [r0, r1)
 * through forward and backward (weighted by their share of the targets), and on rank 0 the
 * encoding's own loss terms. PELAB_OK, an error status, or UPDATE_NAN with *ev filled when the
 * loss, an activation (--check-finite) or the encoding's loss is not finite. */
static int micro_batch(struct pelab_trainer *tr, int micro, uint64_t r0, uint64_t r1,
                       struct update_sums *sum, struct nan_event *ev) {
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
            return UPDATE_NAN;
        }
        if (!isfinite(l)) {
            snprintf(ev->what, sizeof ev->what, "the training loss");
            if (!pelab_model_find_nonfinite(m, where, sizeof where)) snprintf(where, sizeof where, "none");
            snprintf(ev->detail, sizeof ev->detail, "%g; first non-finite activation: %s",
                     pelab_printable(l), where);
            return UPDATE_NAN;
        }
        sum->loss += l * w / c->accum;
        sum->acc += batch_accuracy(m, &mine) * w / c->accum;
        pelab_model_backward(m, (pelab_real)(w / c->accum));
        if ((rc = m->status)) return rc; /* a kernel that failed (out of memory) */
    }
    if (pe->aux_forward && pelab_dist_rank() == 0) { /* the encoding's own loss terms (SeqPE's regularisers) */
        double terms[PELAB_PE_AUX_MAX], total;
        if ((rc = pe->aux_forward(&m->pe, pelab_hash64(pe_key ^ 1), terms, &total))) return rc;
        if (!isfinite(total)) {
            snprintf(ev->what, sizeof ev->what, "the encoding's own loss");
            snprintf(ev->detail, sizeof ev->detail, "%g", pelab_printable(total));
            return UPDATE_NAN;
        }
        pe->aux_backward(&m->pe, (pelab_real)(1.0 / c->accum));
        for (int i = 0; i < tr->n_aux; i++) sum->aux[i] += terms[i] / c->accum;
    }
    return pelab_gemm_take_failure();
}

/* Across ranks: the update's sums, and whether any rank found a non-finite value (bad) — then
 * the first such rank's event goes to all — and otherwise the gradients, summed in one
 * allreduce. Returns 1 when some rank found one (its sums are then this rank's own). */
static int ranks_combine(struct pelab_trainer *tr, struct update_sums *sum, int bad, struct nan_event *ev) {
    if (pelab_dist_size() == 1) return bad;
    double st[3 + PELAB_PE_AUX_MAX] = {bad, sum->loss, sum->acc};
    for (int i = 0; i < tr->n_aux; i++) st[3 + i] = sum->aux[i];
    pelab_dist_sum_double(st, 3 + (size_t)tr->n_aux);
    if (st[0] > 0) {
        pelab_dist_bcast_from(ev, sizeof *ev, pelab_dist_first(bad));
        return 1;
    }
    sum->loss = st[1], sum->acc = st[2];
    for (int i = 0; i < tr->n_aux; i++) sum->aux[i] = st[3 + i];
    pelab_dist_sum_real(tr->model.params.grad, tr->model.params.total);
    return 0;
}

/* One optimizer update; loss and accuracy are the means over its micro-batches, and so are the
 * encoding's own loss terms, aux (tr->n_aux; NaN for a term its options switch off). UPDATE_NAN,
 * with *ev filled and the update's batches consumed, when the loss, the gradient or (with
 * --check-finite) an activation is not finite: then no weight has changed.
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
static int update(struct pelab_trainer *tr, double *loss, double *acc, double *aux, double *lr,
                  struct nan_event *ev) {
    struct pelab_model *m = &tr->model;
    const struct pelab_train_config *c = &tr->c;
    const int64_t update_no = tr->step + 1;
    const uint64_t cursor0 = tr->cursor;
    uint64_t r0, r1;
    pelab_dist_share((uint64_t)c->batch, &r0, &r1);
    const int fault = pelab_dist_test_fault(update_no);
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
        if (rc == UPDATE_NAN) bad = 1, rc = PELAB_OK;
    }
    m->training = 0;
    m->dropout_row0 = 0;
    if ((rc = pelab_dist_agree(rc))) return rc;
    bad = ranks_combine(tr, &sum, bad, ev);
    *loss = sum.loss, *acc = sum.acc;
    for (int i = 0; i < tr->n_aux; i++) aux[i] = sum.aux[i];
    if (bad) goto not_finite;
    pelab_poison_apply(tr, PELAB_POISON_GRAD, update_no);
    double norm = pelab_grad_norm(&m->params);
    if (!isfinite(norm)) {
        snprintf(ev->what, sizeof ev->what, "the gradient norm");
        pelab_describe_grads(&m->params, where, sizeof where);
        snprintf(ev->detail, sizeof ev->detail, "%g; %s", pelab_printable(norm), where);
        goto not_finite;
    }
    *lr = pelab_schedule_lr(&tr->sched, tr->step) * tr->lr_scale;
    pelab_adamw_step(&tr->opt, &m->params, *lr, pelab_clip_scale(norm, c->clip));
    if (fault == PELAB_DIST_FAULT_DIVERGE) m->params.data[0] += (pelab_real)1e-3;
    pelab_poison_apply(tr, PELAB_POISON_UPDATE, update_no);
    /* Finite gradients can still overflow a weight (a huge learning rate or weight decay):
     * such weights must reach neither an evaluation nor a checkpoint. */
    if (pelab_describe_params(&m->params, where, sizeof where)) {
        snprintf(ev->what, sizeof ev->what, "a weight after the update");
        snprintf(ev->detail, sizeof ev->detail, "%s", where);
        ev->applied = 1;
        return UPDATE_NAN;
    }
    tr->step = update_no;
    tr->nan_skips = 0;
    return PELAB_OK;
not_finite:
    tr->cursor = cursor0 + (uint64_t)c->batch * (uint64_t)c->accum;
    return UPDATE_NAN;
}

static int evaluate(struct pelab_trainer *tr, enum pelab_split split, uint64_t count,
                    struct pelab_eval_result *r) {
    int rc = pelab_evaluate(&tr->model, &tr->task, split, 0, count, tr->c.batch, r);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", pelab_last_error());
        return pelab_fail(rc, "step %" PRId64 ": %s", tr->step, msg);
    }
    return PELAB_OK;
}

static void log_line(struct pelab_sb *sb, const struct pelab_train_progress *p) {
    pelab_sb_printf(sb, "{\"step\": %" PRId64 ", \"lr\": ", p->step);
    pelab_sb_json_number(sb, p->lr);
    pelab_sb_printf(sb, ", \"loss\": ");
    pelab_sb_json_number(sb, p->loss);
    pelab_sb_printf(sb, ", \"acc\": ");
    pelab_sb_json_number(sb, p->acc);
    for (int i = 0; i < p->n_aux; i++) { /* the encoding's own loss terms, those switched on */
        if (isnan(p->aux[i])) continue;
        pelab_sb_printf(sb, ", ");
        pelab_sb_json_string(sb, p->aux_names[i]);
        pelab_sb_printf(sb, ": ");
        pelab_sb_json_number(sb, p->aux[i]);
    }
    if (p->has_val) {
        pelab_sb_printf(sb, ", \"val_loss\": ");
        pelab_sb_json_number(sb, p->val_loss);
        pelab_sb_printf(sb, ", \"val_acc\": ");
        pelab_sb_json_number(sb, p->val_acc);
    }
    if (p->skipped) pelab_sb_printf(sb, ", \"skipped\": %" PRId64, p->skipped);
    pelab_sb_printf(sb, ", \"tokens_per_s\": %.1f, \"elapsed_s\": %.3f}", p->tokens_per_s,
                    p->elapsed_s);
}

static int write_summary(struct pelab_trainer *tr, const struct pelab_eval_result *val,
                         const struct pelab_eval_result *test, double tokens_per_s) {
    struct pelab_sb sb = {0};
    pelab_sb_printf(&sb, "{\n  \"pelab-version\": ");
    pelab_sb_json_string(&sb, PELAB_VERSION);
    pelab_sb_printf(&sb, ",\n  \"task\": ");
    pelab_sb_json_string(&sb, tr->c.task);
    pelab_sb_printf(&sb, ",\n  \"pe\": ");
    pelab_sb_json_string(&sb, tr->model.cfg.pe);
    pelab_sb_printf(&sb, ",\n  \"seed\": %" PRIu64 ",\n  \"steps\": %" PRId64, tr->c.seed,
                    tr->step);
    struct { const char *key; double x; } f[] = {
        {"train_loss", tr->last_loss},   {"train_acc", tr->last_acc},
        {"val_loss", val->loss},         {"val_acc", val->acc},
        {"test_loss", test->loss},       {"test_acc", test->acc},
        {"wall_s", tr->elapsed_s},       {"train_s", tr->train_s},
        {"tokens_per_s", tokens_per_s},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        pelab_sb_printf(&sb, ",\n  \"%s\": ", f[i].key);
        pelab_sb_json_number(&sb, f[i].x);
    }
    if (tr->task.lm) { /* sequence modelling: the losses are NLL per token */
        struct { const char *key; double x; int on; } g[] = {
            {"val_ppl", val->ppl, 1},          {"test_ppl", test->ppl, 1},
            {"val_bpb", val->bpb, val->bytes > 0}, {"test_bpb", test->bpb, test->bytes > 0},
        };
        for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
            if (!g[i].on) continue;
            pelab_sb_printf(&sb, ",\n  \"%s\": ", g[i].key);
            pelab_sb_json_number(&sb, g[i].x);
        }
    }
    pelab_sb_printf(&sb, ",\n  \"val_examples\": %" PRIu64 ",\n  \"test_examples\": %" PRIu64
                    ",\n  \"parameters\": %zu",
                    val->examples, test->examples, tr->model.params.total);
    /* the kernels this process ran on (PELAB_SIMD and PELAB_SUBNORMALS change their bits) */
    pelab_sb_printf(&sb, ",\n  \"simd\": \"%s\",\n  \"subnormals\": \"%s\"\n}\n", pelab_simd_used(),
                    pelab_subnormal_mode());
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "summary.json");
    int rc = pelab_write_file_atomic(path, sb.data, sb.len);
    pelab_sb_free(&sb);
    return rc;
}

/* FNV-1a over the bytes of the weights and both moments. */
static uint64_t state_checksum(const struct pelab_params *P) {
    uint64_t h = 0xcbf29ce484222325ull;
    const pelab_real *buf[3] = {P->data, P->m, P->v};
    for (int k = 0; k < 3; k++) {
        const unsigned char *b = (const unsigned char *)buf[k];
        for (size_t i = 0; i < P->total * sizeof(pelab_real); i++)
            h = (h ^ b[i]) * 0x100000001b3ull;
    }
    return h;
}

/* A checkpoint of tr->step. Across ranks, first the weights and moments of every rank are
 * compared with rank 0's (a checksum each): ranks that drifted apart are an error, and the
 * checkpoint is not written. Rank 0 writes it. */
static int save(struct pelab_trainer *tr) {
    int ranks = pelab_dist_size();
    if (ranks > 1) {
        uint64_t all[ranks];
        pelab_dist_gather_u64(state_checksum(&tr->model.params), all);
        for (int r = 1; r < ranks; r++)
            if (all[r] != all[0]) {
                char kept[64] = "no checkpoint was saved";
                if (tr->saved_step >= 0)
                    snprintf(kept, sizeof kept, "the checkpoint of step %" PRId64 " is kept",
                             tr->saved_step);
                /* alike on every rank: rank 0 says it */
                return pelab_dist_agree(pelab_fail(
                    PELAB_ERR_RUNTIME, "step %" PRId64 ": the weights of MPI rank %d differ from "
                    "rank 0's (checksum %016" PRIx64 " vs %016" PRIx64 "): the ranks diverged; "
                    "stopped, %s", tr->step, r, all[r], all[0], kept));
            }
    }
    if (pelab_dist_rank() > 0) {
        tr->saved_step = tr->step;
        return PELAB_OK;
    }
    return pelab_ckpt_save(tr);
}

/* From tr->step to the last step, then the final evaluation. */
int pelab_trainer_loop(struct pelab_trainer *tr, const struct pelab_train_hooks *hooks) {
    const struct pelab_train_config *c = &tr->c;
    const int root = pelab_dist_rank() == 0;
    struct pelab_train_progress p = {0};
    p.dir = tr->dir;
    p.steps = c->steps;
    p.step = tr->step;
    p.elapsed_s = tr->elapsed_s;
    p.loss = tr->last_loss;
    p.acc = tr->last_acc;
    report(hooks, &p, PELAB_TRAIN_START);

    double t0 = pelab_clock_s(), elapsed0 = tr->elapsed_s, train0 = tr->train_s, seg_train = 0;
    int64_t seg_steps = 0;
    double tokens_per_update = (double)c->batch * tr->task.seq_len * c->accum;
    struct pelab_sb sb = {0};
    int rc = PELAB_OK;
    while (tr->step < c->steps) {
        double loss = 0, acc = 0, lr = 0, aux[PELAB_PE_AUX_MAX], ts = pelab_clock_s();
        struct nan_event ev = {0};
        int64_t before = tr->step;
        rc = update(tr, &loss, &acc, aux, &lr, &ev);
        int skipped = rc == UPDATE_NAN;
        /* every rank meets the same event alike (the update's sums are shared): rank 0 says it */
        if (skipped && (rc = pelab_dist_agree(
                            pelab_nan_handle(tr, before + 1, ev.what, ev.detail, ev.applied))))
            break;
        if (rc) break;
        double dt = pelab_clock_s() - ts;
        seg_train += dt;
        seg_steps++;
        tr->train_s = train0 + seg_train;
        tr->elapsed_s = elapsed0 + (pelab_clock_s() - t0);
        if (tr->step <= before) continue; /* rolled back: go on from the restored step */
        if (!skipped) {
            tr->log_loss += loss;
            tr->log_acc += acc;
            tr->log_n++;
            for (int i = 0; i < tr->n_aux; i++) {
                tr->aux_on[i] = !isnan(aux[i]);
                if (tr->aux_on[i]) tr->log_aux[i] += aux[i];
            }
        }

        int64_t s = tr->step;
        int last = s == c->steps;
        p.step = s;
        p.lr = skipped ? pelab_schedule_lr(&tr->sched, s - 1) * tr->lr_scale : lr;
        p.loss = tr->log_n ? tr->log_loss / (double)tr->log_n : NAN; /* all skipped: null */
        p.acc = tr->log_n ? tr->log_acc / (double)tr->log_n : NAN;
        p.n_aux = tr->n_aux;
        p.aux_names = tr->model.pe.ops->aux_names;
        for (int i = 0; i < tr->n_aux; i++)
            p.aux[i] = tr->log_n && tr->aux_on[i] ? tr->log_aux[i] / (double)tr->log_n : NAN;
        p.skipped = tr->log_skipped;
        p.tokens_per_s = seg_train > 0 ? tokens_per_update * (double)seg_steps / seg_train : 0;
        p.eta_s = (double)(c->steps - s) * (seg_train / (double)seg_steps);
        p.has_val = 0;
        if (c->eval_batches > 0 && ((c->eval_every > 0 && s % c->eval_every == 0) || last)) {
            struct pelab_eval_result r;
            if ((rc = evaluate(tr, PELAB_SPLIT_VAL, (uint64_t)(c->eval_batches * c->batch), &r)))
                break;
            p.has_val = 1;
            p.val_loss = r.loss;
            p.val_acc = r.acc;
            tr->elapsed_s = elapsed0 + (pelab_clock_s() - t0);
            p.elapsed_s = tr->elapsed_s;
            report(hooks, &p, PELAB_TRAIN_EVAL);
        }
        p.elapsed_s = tr->elapsed_s;
        p.logged = s % c->log_every == 0 || last || p.has_val;
        if (p.logged) {
            sb.len = 0;
            log_line(&sb, &p);
            if (root && (rc = pelab_log_append(tr, sb.data))) break;
            if (tr->log_n) {
                tr->last_loss = p.loss;
                tr->last_acc = p.acc;
            }
            tr->log_loss = tr->log_acc = 0;
            tr->log_n = tr->log_skipped = 0;
            for (int i = 0; i < tr->n_aux; i++) tr->log_aux[i] = 0;
        }
        report(hooks, &p, PELAB_TRAIN_STEP);
        if ((c->save_every > 0 && s % c->save_every == 0) || last) {
            if ((rc = save(tr))) break;
            report(hooks, &p, PELAB_TRAIN_SAVE);
        }
    }
    pelab_sb_free(&sb);
    if (rc) return rc;
    /* A run resumed at its end. */
    if (tr->saved_step != tr->step && (rc = save(tr))) return rc;

    struct pelab_eval_result val, test;
    if ((rc = evaluate(tr, PELAB_SPLIT_VAL, 0, &val))) return rc;
    if ((rc = evaluate(tr, PELAB_SPLIT_TEST, 0, &test))) return rc;
    tr->elapsed_s = elapsed0 + (pelab_clock_s() - t0);
    double tps = tr->train_s > 0 ? tokens_per_update * (double)tr->step / tr->train_s : 0;
    if (root && (rc = write_summary(tr, &val, &test, tps))) return rc;
    p.step = tr->step;
    p.has_val = 1;
    p.val_loss = val.loss;
    p.val_acc = val.acc;
    p.test_loss = test.loss;
    p.test_acc = test.acc;
    p.elapsed_s = tr->elapsed_s;
    p.tokens_per_s = tps;
    p.eta_s = 0;
    report(hooks, &p, PELAB_TRAIN_DONE);
    return PELAB_OK;
}

int pelab_trainer_set_dir(struct pelab_trainer *tr, const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--; /* "runs/x/" and "runs/x" are one directory */
    if (n == 0 || n >= sizeof tr->dir - 32)
        return pelab_fail(PELAB_ERR_USAGE, "--out: '%s' is not a usable directory name", dir);
    memcpy(tr->dir, dir, n);
    tr->dir[n] = '\0';
    return PELAB_OK;
}

/* A new run's trainer from options: preset applied, everything checked and built. */
static int trainer_prepare(struct pelab_trainer *tr, const struct pelab_opts *opts) {
    tr->opts = *opts;
    char dropped[512];
    int rc0 = pelab_init_from_settings(&tr->opts, dropped, sizeof dropped); /* before the preset: the source's model */
    if (rc0) return rc0;
    if (dropped[0])
        pelab_train_notice(tr, "--init-from %s: not carried over, as %s", pelab_opts_get(&tr->opts, "init-from"),
                           dropped);
    const char *preset = pelab_opt_str(&tr->opts, pelab_train_options, "preset");
    if (preset[0]) {
        char name[PELAB_OPT_VAL_MAX];
        strcpy(name, preset); /* opts may move while the preset fills it */
        int rc = pelab_preset_apply(&tr->opts,
                                    pelab_opt_str(&tr->opts, pelab_train_options, "task"), name,
                                    pelab_opt_str(&tr->opts, pelab_model_options, "pe"));
        if (rc) return rc;
    }
    if ((rc0 = pelab_posenc_eval_check(&tr->opts, &tr->opts))) return rc0;
    int rc = pelab_trainer_setup(tr, NULL);
    /* a new run records what it runs: the encoding's automatic settings as resolved */
    if (!rc) rc = pelab_posenc_resolve(&tr->model.pe, &tr->opts);
    if (!rc) rc = pelab_posenc_resolve(&tr->model.pe, &tr->model.opts);
    return rc ? rc : pelab_init_from_load(tr);
}

int pelab_train_validate_with(const struct pelab_opts *opts,
                              int (*check)(struct pelab_model *m, const struct pelab_task *t, void *ctx),
                              void *ctx) {
    struct pelab_trainer *tr = pelab_trainer_new(NULL);
    if (!tr) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int rc = trainer_prepare(tr, opts);
    if (!rc && check) rc = check(&tr->model, &tr->task, ctx);
    pelab_trainer_free(tr);
    return rc;
}

int pelab_train_validate(const struct pelab_opts *opts) {
    return pelab_train_validate_with(opts, NULL, NULL);
}

/* Settings that say where a run lives and how it is carried out, not what it trains: a run
 * made with others is still the run asked for. (--threads as in a resume, which takes it.) */
static int placement_setting(const char *key) {
    return strcmp(key, "out") == 0 || strcmp(key, "threads") == 0 || strcmp(key, "keep") == 0;
}

/* Whether a recorded value (config.json's) is the value asked: numbers by value ("1e-3" is
 * "0.001"), strings as text; another type never is. */
static int same_value(const struct pelab_json *recorded, const char *asked, int number) {
    if (recorded->type == PELAB_JSON_STRING) return !number && strcmp(recorded->string, asked) == 0;
    char *end;
    const double x = strtod(asked, &end);
    return recorded->type == PELAB_JSON_NUMBER && number && *asked && !*end && recorded->number == x;
}

/* Appends "--key recorded (asked: asked)" ("key recorded (now: value)" for a derived one) to the list of differences in sb, the first
 * MAX_SAID of them; n counts them all. unrecorded: what a run without the key was made with, or NULL. */
#define MAX_SAID 4
static void say_difference(struct pelab_sb *sb, int *n, int group, const char *key,
                           const struct pelab_json *recorded, const char *unrecorded, const char *asked) {
    if ((*n)++ >= MAX_SAID) return;
    const int derived = group == PELAB_GROUP_DERIVED; /* not an option: what the settings made */
    pelab_sb_printf(sb, "%s%s%s ", *n > 1 ? ", " : "", derived ? "" : "--", key);
    if (!recorded && unrecorded) {
        pelab_sb_printf(sb, "%s (a run from before the option; asked: %s)", unrecorded, asked);
        return;
    }
    if (!recorded)
        pelab_sb_printf(sb, "not recorded");
    else if (recorded->type == PELAB_JSON_NUMBER)
        pelab_sb_append(sb, recorded->raw, recorded->raw_len);
    else
        pelab_sb_printf(sb, "%s", recorded->type == PELAB_JSON_STRING ? recorded->string : "(not a value)");
    pelab_sb_printf(sb, " (%s: %s)", derived ? "now" : "asked", asked ? asked : "not given");
}

/* The settings s against the run's config.json j, group by group and both ways (the "derived"
 * group too: a fine-tune's source checkpoint, a vocabulary the data made), into diff; the
 * number of differences. */
static int count_differences(const struct pelab_settings *s, const struct pelab_json *j, struct pelab_sb *diff) {
    int n = 0;
    const char *pe = pelab_opts_get(&s->group[PELAB_GROUP_MODEL], "pe");
    const struct pelab_posenc_ops *pe_ops = pe ? pelab_posenc_find(pe) : NULL;
    for (int g = 0; g < PELAB_GROUPS; g++) {
        const struct pelab_json *o = pelab_json_get(j, pelab_group_names[g]);
        const struct pelab_opts *asked = &s->group[g];
        for (int i = 0; i < asked->count; i++) {
            const char *key = asked->kv[i].key;
            const struct pelab_json *v = o ? pelab_json_get(o, key) : NULL;
            if (placement_setting(key) || (v && same_value(v, asked->kv[i].val, s->number[g][i])))
                continue;
            /* an option of the encoding the run predates: made with the value its table gives */
            const char *unrecorded = v || g != PELAB_GROUP_ENCODING ? NULL : pelab_posenc_unrecorded(pe_ops, key);
            if (unrecorded && (strcmp(unrecorded, asked->kv[i].val) == 0 ||
                               (s->number[g][i] && strtod(unrecorded, NULL) == strtod(asked->kv[i].val, NULL))))
                continue;
            say_difference(diff, &n, g, key, v, unrecorded, asked->kv[i].val);
        }
        for (int i = 0; o && o->type == PELAB_JSON_OBJECT && i < o->count; i++)
            if (!pelab_opts_get(asked, o->keys[i]) && !placement_setting(o->keys[i]))
                say_difference(diff, &n, g, o->keys[i], o->items[i], NULL, NULL);
    }
    return n;
}

int pelab_train_check_run_settings(const struct pelab_opts *opts, const char *dir) {
    char path[PELAB_PATH_MAX];
    pelab_path(path, dir, "config.json");
    if (!pelab_file_exists(path)) return PELAB_OK; /* nothing there to reuse */
    struct pelab_trainer *tr = pelab_trainer_new(NULL);
    struct pelab_json *j = NULL;
    struct pelab_sb diff = {0};
    int rc = tr ? pelab_json_load(path, &j) : pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    if (!rc && !pelab_json_get(j, "pelab-version"))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s is not a pelab config (no \"pelab-version\")", path);
    /* the settings this run would record, as it would record them */
    if (!rc) rc = trainer_prepare(tr, opts);
    if (!rc) rc = pelab_trainer_set_dir(tr, dir);
    if (!rc) rc = resolve_settings(tr);
    int n = rc ? 0 : count_differences(&tr->settings, j, &diff);
    if (n)
        rc = pelab_fail(PELAB_ERR_USAGE, "%s holds a run of other settings: %s%s; give another --out, "
                        "or remove the run to train it anew", dir, diff.data,
                        n > MAX_SAID ? " and more" : "");
    pelab_sb_free(&diff);
    pelab_json_free(j);
    if (tr) pelab_trainer_free(tr);
    return rc;
}

/* Removes dir, then its parents up to `made` (a prefix of dir): the directories a run made.
 * rmdir fails, harmlessly, on one that holds anything. */
static void remove_new_dirs(const char *dir, const char *made) {
    char path[PELAB_PATH_MAX];
    snprintf(path, sizeof path, "%s", dir);
    for (;;) {
        (void)rmdir(path);
        char *slash = strrchr(path, '/');
        if (!slash || strlen(path) <= strlen(made)) return;
        *slash = '\0';
        if (strlen(path) < strlen(made)) return;
    }
}

/* Every rank resolved the same settings, key=value in order. The command lines agreed already
 * (cli/program.c), but each rank reads a preset's --init-from source or a resumed run's config.json
 * from its own file system. */
int pelab_trainer_ranks_agree(const struct pelab_opts *o) {
    if (pelab_dist_size() == 1) return PELAB_OK;
    enum { WORD = PELAB_OPT_KEY_MAX + PELAB_OPT_VAL_MAX + 1 };
    char *text = malloc((size_t)o->count * WORD + 1), *words[PELAB_OPTS_MAX];
    if (!text) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int i = 0; i < o->count; i++) {
        words[i] = text + (size_t)i * WORD;
        snprintf(words[i], WORD, "%s=%s", o->kv[i].key, o->kv[i].val);
    }
    const int rc = pelab_dist_same_words(o->count, words, "settings");
    free(text);
    return rc;
}

int pelab_train(const struct pelab_opts *opts, const struct pelab_train_hooks *hooks) {
    struct pelab_trainer *tr = pelab_trainer_new(hooks);
    if (!tr) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    /* Across ranks: every rank checks and builds alike, then rank 0 alone writes the run
     * directory; each stage ends with the ranks agreeing that it went well. */
    const int root = pelab_dist_rank() == 0;
    int rc = trainer_prepare(tr, opts);
    if (rc) goto agree;

    char dir[PELAB_OPT_VAL_MAX + 64];
    if (tr->c.out[0])
        snprintf(dir, sizeof dir, "%s", tr->c.out);
    else
        snprintf(dir, sizeof dir, "runs/%s-%s-s%" PRIu64, tr->c.task, tr->model.cfg.pe, tr->c.seed);
    if ((rc = pelab_trainer_set_dir(tr, dir))) goto agree;
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "config.json");
    if (pelab_file_exists(path)) {
        rc = pelab_fail(PELAB_ERR_USAGE,
                        "%s already holds a run (continue it with --resume %s, or pick another --out)",
                        tr->dir, tr->dir);
        goto agree;
    }
    rc = pelab_trainer_buffers(tr);
agree:
    if ((rc = pelab_dist_agree(rc)) || (rc = pelab_trainer_ranks_agree(&tr->opts))) goto done;
    pelab_trainer_fresh_start(tr);
    if (root) {
        /* The outermost directory of --out that does not exist yet: what a run that fails before
         * its config.json (a full disk) removes again, so it leaves nothing behind. */
        char made[PELAB_PATH_MAX];
        snprintf(made, sizeof made, "%s", tr->dir);
        if (pelab_file_exists(made)) made[0] = '\0';
        for (char *slash; made[0] && (slash = strrchr(made, '/')) && slash > made;) {
            *slash = '\0';
            if (pelab_file_exists(made)) {
                *slash = '/';
                break;
            }
        }
        if (!rc) rc = pelab_mkdir_p(tr->dir);
        /* (a directory whose lock another process holds is that process's, even one made here) */
        if (!rc && !(rc = pelab_run_lock(tr)) && (rc = pelab_trainer_write_config(tr)) && made[0])
            remove_new_dirs(tr->dir, made);
        if (!rc) rc = pelab_log_open(tr, 1);
    }
    if ((rc = pelab_dist_agree(rc))) goto done;
    rc = pelab_trainer_loop(tr, tr->hooks);
done:
    pelab_trainer_free(tr);
    return rc;
}

