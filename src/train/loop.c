/* The training loop (pelab_trainer_loop, run.h): from tr->step to the last step, each update
 * (update.c) followed by what falls due at its step — a validation pass, the log line, the
 * progress report, a checkpoint — then a final evaluation of the whole val and test splits into
 * summary.json. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "pelab/clock.h"
#include "pelab/dist.h"
#include "pelab/io.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "train/run.h"

static void report(const struct pelab_train_hooks *h, struct pelab_train_progress *p,
                   enum pelab_train_event ev) {
    p->event = ev;
    if (h && h->progress) h->progress(h->ctx, p);
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
    /* the builds that trained the run, and the kernels this process ran on (another build,
     * PELAB_SIMD, PELAB_SUBNORMALS or product library changes their bits) */
    pelab_sb_printf(&sb, ",\n  \"trained-by\": [");
    char build[sizeof tr->trained_by];
    for (const char *b = tr->trained_by; *b;) {
        const size_t n = strcspn(b, ",");
        snprintf(build, sizeof build, "%.*s", (int)n, b);
        if (b != tr->trained_by) pelab_sb_printf(&sb, ", ");
        pelab_sb_json_string(&sb, build);
        b += n + (b[n] == ',');
    }
    pelab_sb_printf(&sb, "],\n  \"simd\": \"%s\",\n  \"subnormals\": \"%s\",\n  \"float32-products\": ",
                    pelab_simd_used(), pelab_subnormal_mode());
    pelab_sb_json_string(&sb, pelab_sgemm_kernels());
    if (tr->c.precision == PELAB_PRECISION_BF16) {
        pelab_sb_printf(&sb, ",\n  \"bf16-products\": ");
        pelab_sb_json_string(&sb, pelab_bf16_kernels());
    }
    pelab_sb_printf(&sb, "\n}\n");
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
    int ranks = tr->ctx->dist.size;
    if (ranks > 1) {
        uint64_t all[ranks];
        pelab_dist_gather_u64(&tr->ctx->dist, state_checksum(&tr->model.params), all);
        for (int r = 1; r < ranks; r++)
            if (all[r] != all[0]) {
                char kept[64] = "no checkpoint was saved";
                if (tr->saved_step >= 0)
                    snprintf(kept, sizeof kept, "the checkpoint of step %" PRId64 " is kept",
                             tr->saved_step);
                /* alike on every rank: rank 0 says it */
                return pelab_dist_agree(&tr->ctx->dist, pelab_fail(
                    PELAB_ERR_RUNTIME, "step %" PRId64 ": the weights of MPI rank %d differ from "
                    "rank 0's (checksum %016" PRIx64 " vs %016" PRIx64 "): the ranks diverged; "
                    "stopped, %s", tr->step, r, all[r], all[0], kept));
            }
    }
    if (tr->ctx->dist.rank > 0) {
        tr->saved_step = tr->step;
        return PELAB_OK;
    }
    return pelab_ckpt_save(tr);
}

/* One segment of a run (from its start or a resume): its clocks and the progress it reports. */
struct segment {
    const struct pelab_train_hooks *hooks;
    struct pelab_train_progress p;
    double t0, elapsed0, train0; /* the wall clock at its start; the run's times before it */
    double train_s;              /* its time in updates */
    int64_t updates;             /* updates it made (skipped ones too) */
    double tokens_per_update;
    struct pelab_sb line;        /* the log line */
};

static void segment_begin(struct pelab_trainer *tr, const struct pelab_train_hooks *hooks, struct segment *g) {
    const struct pelab_train_config *c = &tr->c;
    *g = (struct segment){.hooks = hooks, .tokens_per_update = (double)c->batch * tr->task.seq_len * c->accum};
    g->p = (struct pelab_train_progress){.dir = tr->dir, .steps = c->steps, .step = tr->step,
                                         .elapsed_s = tr->elapsed_s, .loss = tr->last_loss, .acc = tr->last_acc};
    report(hooks, &g->p, PELAB_TRAIN_START);
    g->t0 = pelab_clock_s(), g->elapsed0 = tr->elapsed_s, g->train0 = tr->train_s;
}

/* The run's times, after an update that took dt seconds. */
static void segment_clock(struct pelab_trainer *tr, struct segment *g, double dt) {
    g->train_s += dt;
    g->updates++;
    tr->train_s = g->train0 + g->train_s;
    tr->elapsed_s = g->elapsed0 + (pelab_clock_s() - g->t0);
}

/* An update that was made: its means into the log interval's sums. */
static void log_sums_add(struct pelab_trainer *tr, const struct pelab_update *u) {
    tr->log_loss += u->loss;
    tr->log_acc += u->acc;
    tr->log_n++;
    for (int i = 0; i < tr->n_aux; i++) {
        tr->aux_on[i] = !isnan(u->aux[i]);
        if (tr->aux_on[i]) tr->log_aux[i] += u->aux[i];
    }
}

/* The progress of step tr->step: the log interval's means so far, the speed and the time left. */
static void step_progress(const struct pelab_trainer *tr, struct segment *g, const struct pelab_update *u, int skipped) {
    const int64_t s = tr->step, n = tr->log_n;
    struct pelab_train_progress *p = &g->p;
    p->step = s;
    p->lr = skipped ? pelab_schedule_lr(&tr->sched, s - 1) * tr->lr_scale : u->lr;
    p->loss = n ? tr->log_loss / (double)n : NAN; /* all skipped: null */
    p->acc = n ? tr->log_acc / (double)n : NAN;
    p->n_aux = tr->n_aux;
    p->aux_names = tr->model.pe.ops->aux_names;
    for (int i = 0; i < tr->n_aux; i++) p->aux[i] = n && tr->aux_on[i] ? tr->log_aux[i] / (double)n : NAN;
    p->skipped = tr->log_skipped;
    p->tokens_per_s = g->train_s > 0 ? g->tokens_per_update * (double)g->updates / g->train_s : 0;
    p->eta_s = (double)(tr->c.steps - s) * (g->train_s / (double)g->updates);
    p->has_val = 0;
}

/* Whether `every` falls due at step s (the last step always). */
static int due(const struct pelab_trainer *tr, int64_t every) {
    return (every > 0 && tr->step % every == 0) || tr->step == tr->c.steps;
}

/* --eval-batches batches of the validation split, reported. */
static int validate(struct pelab_trainer *tr, struct segment *g) {
    struct pelab_eval_result r;
    int rc = evaluate(tr, PELAB_SPLIT_VAL, (uint64_t)(tr->c.eval_batches * tr->c.batch), &r);
    if (rc) return rc;
    g->p.has_val = 1;
    g->p.val_loss = r.loss;
    g->p.val_acc = r.acc;
    tr->elapsed_s = g->elapsed0 + (pelab_clock_s() - g->t0);
    g->p.elapsed_s = tr->elapsed_s;
    report(g->hooks, &g->p, PELAB_TRAIN_EVAL);
    return PELAB_OK;
}

/* The log line of a step that logs (every --log-every, the last, one with a validation), by rank
 * 0; then a new log interval. */
static int log_step(struct pelab_trainer *tr, struct segment *g) {
    struct pelab_train_progress *p = &g->p;
    p->logged = due(tr, tr->c.log_every) || p->has_val;
    if (!p->logged) return PELAB_OK;
    g->line.len = 0;
    log_line(&g->line, p);
    int rc = tr->ctx->dist.rank == 0 ? pelab_log_append(tr, g->line.data) : PELAB_OK;
    if (rc) return rc;
    if (tr->log_n) {
        tr->last_loss = p->loss;
        tr->last_acc = p->acc;
    }
    tr->log_loss = tr->log_acc = 0;
    tr->log_n = tr->log_skipped = 0;
    for (int i = 0; i < tr->n_aux; i++) tr->log_aux[i] = 0;
    return PELAB_OK;
}

/* One update, and what falls due at its step. */
static int loop_step(struct pelab_trainer *tr, struct segment *g) {
    const int64_t before = tr->step;
    struct pelab_update u = {0};
    const double ts = pelab_clock_s();
    int rc = pelab_trainer_update(tr, &u);
    const int skipped = rc == PELAB_UPDATE_NAN;
    /* every rank meets the same event alike (the update's sums are shared): rank 0 says it */
    if (skipped) {
        const struct pelab_nan_event *ev = &u.ev;
        rc = pelab_dist_agree(&tr->ctx->dist, pelab_nan_handle(tr, before + 1, ev->what, ev->detail, ev->applied));
    }
    if (rc) return rc;
    segment_clock(tr, g, pelab_clock_s() - ts);
    if (tr->step <= before) return PELAB_OK; /* rolled back: go on from the restored step */
    if (!skipped) log_sums_add(tr, &u);
    step_progress(tr, g, &u, skipped);
    if (tr->c.eval_batches > 0 && due(tr, tr->c.eval_every) && (rc = validate(tr, g))) return rc;
    g->p.elapsed_s = tr->elapsed_s;
    if ((rc = log_step(tr, g))) return rc;
    report(g->hooks, &g->p, PELAB_TRAIN_STEP);
    if (!due(tr, tr->c.save_every)) return PELAB_OK;
    if ((rc = save(tr))) return rc;
    report(g->hooks, &g->p, PELAB_TRAIN_SAVE);
    return PELAB_OK;
}

/* The whole val and test splits, summary.json (rank 0), and the DONE report. */
static int finish(struct pelab_trainer *tr, struct segment *g) {
    struct pelab_eval_result val, test;
    int rc = evaluate(tr, PELAB_SPLIT_VAL, 0, &val);
    if (!rc) rc = evaluate(tr, PELAB_SPLIT_TEST, 0, &test);
    if (rc) return rc;
    tr->elapsed_s = g->elapsed0 + (pelab_clock_s() - g->t0);
    const double tps = tr->train_s > 0 ? g->tokens_per_update * (double)tr->step / tr->train_s : 0;
    if (tr->ctx->dist.rank == 0 && (rc = write_summary(tr, &val, &test, tps))) return rc;
    struct pelab_train_progress *p = &g->p;
    p->step = tr->step;
    p->has_val = 1;
    p->val_loss = val.loss;
    p->val_acc = val.acc;
    p->test_loss = test.loss;
    p->test_acc = test.acc;
    p->elapsed_s = tr->elapsed_s;
    p->tokens_per_s = tps;
    p->eta_s = 0;
    report(g->hooks, p, PELAB_TRAIN_DONE);
    return PELAB_OK;
}

int pelab_trainer_loop(struct pelab_trainer *tr, const struct pelab_train_hooks *hooks) {
    struct segment g;
    segment_begin(tr, hooks, &g);
    int rc = PELAB_OK;
    while (!rc && tr->step < tr->c.steps) rc = loop_step(tr, &g);
    pelab_sb_free(&g.line);
    if (!rc && tr->saved_step != tr->step) rc = save(tr); /* a run resumed at its end */
    return rc ? rc : finish(tr, &g);
}
