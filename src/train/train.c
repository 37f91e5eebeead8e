/* The training loop: resolve options → task → model → AdamW, then per update
 *   zero grad; accum × (batch at the data cursor, forward, backward with scale 1/accum);
 *   clip; lr from the schedule; AdamW step
 * with evaluation, logging and checkpoints at their intervals, and a final evaluation of the
 * whole val and test splits into summary.json.
 *
 * Everything an update depends on is a function of (settings, step, data cursor, weights,
 * moments): dropout masks are keyed by hash(seed, micro-step), batches by the cursor. A
 * checkpoint stores exactly those, so a resumed run repeats an uninterrupted one bit for bit. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "pelab/io.h"
#include "pelab/rng.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "train/run.h"

/* Salt for the seed-derived start of the data cursor: different seeds see the data in another
 * order. */
#define CURSOR_SALT 0xC0A5E5DA7A5EEDull

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void trainer_free(struct pelab_trainer *tr) {
    pelab_log_close(tr);
    if (tr->have_batch) pelab_batch_free(&tr->batch);
    if (tr->have_model) pelab_model_free(&tr->model);
    if (tr->have_task) pelab_task_free(&tr->task);
    free(tr);
}

/* Options → config, task, model, optimizer. Only checks and allocations: nothing is written. */
static int trainer_setup(struct pelab_trainer *tr, const char *hint) {
    const char *task = pelab_opt_str(&tr->opts, pelab_train_options, "task");
    const char *pe = pelab_opt_str(&tr->opts, pelab_model_options, "pe");
    int rc = pelab_train_check_opts(&tr->opts, task, &pe, 1, hint);
    if (!rc) rc = pelab_train_config_read(&tr->opts, &tr->c);
    if (rc) return rc;
    struct pelab_train_config *c = &tr->c;
    pelab_threads_set(c->threads);
    if ((rc = pelab_task_init(&tr->task, c->task, &tr->opts))) return rc;
    tr->have_task = 1;
    if ((rc = pelab_model_init(&tr->model, &tr->opts, tr->task.vocab, tr->task.seq_len))) return rc;
    tr->have_model = 1;
    tr->opt = (struct pelab_adamw){c->beta1, c->beta2, c->eps, c->weight_decay, 0};
    tr->sched = (struct pelab_schedule){c->lr, c->min_lr, c->warmup, c->decay_steps};
    tr->saved_step = -1;
    return PELAB_OK;
}

/* Activations and the batch buffer (kept out of setup: validation does not need them). */
static int trainer_buffers(struct pelab_trainer *tr) {
    int rc = pelab_model_reserve(&tr->model, tr->c.batch, tr->task.seq_len);
    if (!rc) rc = pelab_batch_alloc(&tr->batch, tr->c.batch, tr->task.seq_len);
    if (!rc) tr->have_batch = 1;
    return rc;
}

/* The resolved options, config.json and the settings of the model file's metadata. decay-steps
 * is recorded resolved, so extending a run with --steps keeps its schedule. */
static int write_config(struct pelab_trainer *tr) {
    char v[32];
    snprintf(v, sizeof v, "%" PRId64, tr->c.decay_steps);
    int rc = pelab_opts_set(&tr->opts, "decay-steps", v);
    if (!rc) rc = pelab_opts_set(&tr->opts, "out", tr->dir);
    if (rc) return rc;
    pelab_settings_build(&tr->settings, &tr->opts, &tr->model, &tr->task);
    struct pelab_sb sb = {0};
    pelab_settings_json(&tr->settings, &sb);
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "config.json");
    rc = pelab_write_file_atomic(path, sb.data, sb.len);
    pelab_sb_free(&sb);
    return rc;
}

static int checkpoint(struct pelab_trainer *tr) {
    int rc = pelab_log_sync(tr);
    if (!rc) rc = pelab_state_save(tr);
    if (!rc) rc = pelab_model_file_save(tr);
    if (!rc) tr->saved_step = tr->step;
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

static int non_finite(const struct pelab_trainer *tr, int64_t update, const char *what, double x) {
    char kept[64] = "no checkpoint was saved";
    if (tr->saved_step >= 0)
        snprintf(kept, sizeof kept, "the checkpoint of step %" PRId64 " is kept", tr->saved_step);
    return pelab_fail(PELAB_ERR_RUNTIME, "step %" PRId64 ": %s is not finite (%g); stopped, %s",
                      update, what, x, kept);
}

/* One optimizer update; loss and accuracy are the means over its micro-batches. */
static int update(struct pelab_trainer *tr, double *loss, double *acc, double *lr) {
    struct pelab_model *m = &tr->model;
    const struct pelab_train_config *c = &tr->c;
    int64_t update_no = tr->step + 1;
    pelab_params_zero_grad(&m->params);
    *loss = *acc = 0;
    for (int micro = 0; micro < c->accum; micro++) {
        tr->task.ops->fill(&tr->task, PELAB_SPLIT_TRAIN, tr->cursor, &tr->batch);
        tr->cursor += (uint64_t)c->batch;
        m->training = m->cfg.dropout > 0;
        m->dropout_key =
            pelab_hash64(c->seed ^ pelab_hash64((uint64_t)tr->step * (uint64_t)c->accum +
                                                (uint64_t)micro));
        double l = pelab_model_forward(m, tr->batch.tokens, tr->batch.targets, tr->batch.pos,
                                       c->batch, tr->task.seq_len);
        if (m->status) return m->status;
        if (!isfinite(l)) return non_finite(tr, update_no, "the training loss", l);
        *loss += l / c->accum;
        *acc += batch_accuracy(m, &tr->batch) / c->accum;
        pelab_model_backward(m, (pelab_real)(1.0 / c->accum));
    }
    m->training = 0;
    double norm = pelab_clip_grad_norm(&m->params, c->clip);
    if (!isfinite(norm)) return non_finite(tr, update_no, "the gradient norm", norm);
    *lr = pelab_schedule_lr(&tr->sched, tr->step);
    pelab_adamw_step(&tr->opt, &m->params, *lr);
    tr->step = update_no;
    return PELAB_OK;
}

static int evaluate(struct pelab_trainer *tr, enum pelab_split split, uint64_t count,
                    struct pelab_eval_result *r) {
    return pelab_evaluate(&tr->model, &tr->task, split, 0, count, tr->c.batch, r);
}

static void log_line(struct pelab_sb *sb, const struct pelab_train_progress *p) {
    pelab_sb_printf(sb, "{\"step\": %" PRId64 ", \"lr\": ", p->step);
    pelab_sb_json_number(sb, p->lr);
    pelab_sb_printf(sb, ", \"loss\": ");
    pelab_sb_json_number(sb, p->loss);
    pelab_sb_printf(sb, ", \"acc\": ");
    pelab_sb_json_number(sb, p->acc);
    if (p->has_val) {
        pelab_sb_printf(sb, ", \"val_loss\": ");
        pelab_sb_json_number(sb, p->val_loss);
        pelab_sb_printf(sb, ", \"val_acc\": ");
        pelab_sb_json_number(sb, p->val_acc);
    }
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
    pelab_sb_printf(&sb, ",\n  \"val_examples\": %" PRIu64 ",\n  \"test_examples\": %" PRIu64
                    ",\n  \"parameters\": %zu\n}\n",
                    val->examples, test->examples, tr->model.params.total);
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "summary.json");
    int rc = pelab_write_file_atomic(path, sb.data, sb.len);
    pelab_sb_free(&sb);
    return rc;
}

/* From tr->step to the last step, then the final evaluation. */
static int train_loop(struct pelab_trainer *tr, const struct pelab_train_hooks *hooks) {
    const struct pelab_train_config *c = &tr->c;
    struct pelab_train_progress p = {0};
    p.dir = tr->dir;
    p.steps = c->steps;
    p.step = tr->step;
    p.elapsed_s = tr->elapsed_s;
    p.loss = tr->last_loss;
    p.acc = tr->last_acc;
    report(hooks, &p, PELAB_TRAIN_START);

    double t0 = now_s(), elapsed0 = tr->elapsed_s, train0 = tr->train_s, seg_train = 0;
    int64_t seg_steps = 0;
    double tokens_per_update = (double)c->batch * tr->task.seq_len * c->accum;
    struct pelab_sb sb = {0};
    int rc = PELAB_OK;
    while (tr->step < c->steps) {
        double loss = 0, acc = 0, lr = 0, ts = now_s();
        if ((rc = update(tr, &loss, &acc, &lr))) break;
        double dt = now_s() - ts;
        seg_train += dt;
        seg_steps++;
        tr->train_s = train0 + seg_train;
        tr->elapsed_s = elapsed0 + (now_s() - t0);
        tr->log_loss += loss;
        tr->log_acc += acc;
        tr->log_n++;

        int64_t s = tr->step;
        int last = s == c->steps;
        p.step = s;
        p.lr = lr;
        p.loss = tr->log_loss / (double)tr->log_n;
        p.acc = tr->log_acc / (double)tr->log_n;
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
            tr->elapsed_s = elapsed0 + (now_s() - t0);
            p.elapsed_s = tr->elapsed_s;
            report(hooks, &p, PELAB_TRAIN_EVAL);
        }
        p.elapsed_s = tr->elapsed_s;
        p.logged = s % c->log_every == 0 || last || p.has_val;
        if (p.logged) {
            sb.len = 0;
            log_line(&sb, &p);
            if ((rc = pelab_log_append(tr, sb.data))) break;
            tr->last_loss = p.loss;
            tr->last_acc = p.acc;
            tr->log_loss = tr->log_acc = 0;
            tr->log_n = 0;
        }
        report(hooks, &p, PELAB_TRAIN_STEP);
        if ((c->save_every > 0 && s % c->save_every == 0) || last) {
            if ((rc = checkpoint(tr))) break;
            report(hooks, &p, PELAB_TRAIN_SAVE);
        }
    }
    pelab_sb_free(&sb);
    if (rc) return rc;
    if (tr->saved_step != tr->step && (rc = checkpoint(tr))) return rc; /* resumed at the end */

    struct pelab_eval_result val, test;
    if ((rc = evaluate(tr, PELAB_SPLIT_VAL, 0, &val))) return rc;
    if ((rc = evaluate(tr, PELAB_SPLIT_TEST, 0, &test))) return rc;
    tr->elapsed_s = elapsed0 + (now_s() - t0);
    double tps = tr->train_s > 0 ? tokens_per_update * (double)tr->step / tr->train_s : 0;
    if ((rc = write_summary(tr, &val, &test, tps))) return rc;
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

/* Initial weights and data cursor of a run at step 0. */
static void fresh_start(struct pelab_trainer *tr) {
    pelab_model_init_weights(&tr->model, tr->c.seed);
    memset(tr->model.params.m, 0, tr->model.params.total * sizeof(pelab_real));
    memset(tr->model.params.v, 0, tr->model.params.total * sizeof(pelab_real));
    tr->opt.step = 0;
    tr->step = 0;
    tr->cursor = pelab_hash64(tr->c.seed ^ CURSOR_SALT) %
                 tr->task.ops->split_size(&tr->task, PELAB_SPLIT_TRAIN);
    tr->elapsed_s = tr->train_s = 0;
    tr->log_loss = tr->log_acc = 0;
    tr->log_n = 0;
    tr->last_loss = tr->last_acc = 0;
}

static int set_dir(struct pelab_trainer *tr, const char *dir) {
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
    const char *preset = pelab_opt_str(&tr->opts, pelab_train_options, "preset");
    if (preset[0]) {
        char name[PELAB_OPT_VAL_MAX];
        strcpy(name, preset); /* opts may move while the preset fills it */
        int rc = pelab_preset_apply(&tr->opts,
                                    pelab_opt_str(&tr->opts, pelab_train_options, "task"), name,
                                    pelab_opt_str(&tr->opts, pelab_model_options, "pe"));
        if (rc) return rc;
    }
    return trainer_setup(tr, NULL);
}

int pelab_train_validate(const struct pelab_opts *opts) {
    struct pelab_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int rc = trainer_prepare(tr, opts);
    trainer_free(tr);
    return rc;
}

int pelab_train(const struct pelab_opts *opts, const struct pelab_train_hooks *hooks) {
    struct pelab_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int rc = trainer_prepare(tr, opts);
    if (rc) goto done;

    char dir[PELAB_OPT_VAL_MAX + 64];
    if (tr->c.out[0])
        snprintf(dir, sizeof dir, "%s", tr->c.out);
    else
        snprintf(dir, sizeof dir, "runs/%s-%s-s%" PRIu64, tr->c.task, tr->model.cfg.pe, tr->c.seed);
    if ((rc = set_dir(tr, dir))) goto done;
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "config.json");
    if (pelab_file_exists(path)) {
        rc = pelab_fail(PELAB_ERR_USAGE,
                        "%s already holds a run (continue it with --resume %s, or pick another --out)",
                        tr->dir, tr->dir);
        goto done;
    }
    if ((rc = trainer_buffers(tr))) goto done;
    fresh_start(tr);
    if ((rc = pelab_mkdir_p(tr->dir))) goto done;
    if ((rc = write_config(tr))) goto done;
    if ((rc = pelab_log_open(tr, 1))) goto done;
    rc = train_loop(tr, hooks);
done:
    trainer_free(tr);
    return rc;
}

int pelab_train_resume(const char *dir, const struct pelab_opts *overrides,
                       const struct pelab_train_hooks *hooks) {
    struct pelab_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int rc = set_dir(tr, dir);
    if (!rc) rc = pelab_run_read_config(tr->dir, &tr->opts);
    if (rc) goto done;
    for (int i = 0; overrides && i < overrides->count; i++) {
        const char *k = overrides->kv[i].key;
        if (strcmp(k, "steps") != 0 && strcmp(k, "threads") != 0) {
            rc = pelab_fail(PELAB_ERR_USAGE, "--resume takes its settings from %s/config.json "
                            "(only --steps and --threads may be given; --%s was)", tr->dir, k);
            goto done;
        }
        const struct pelab_optdef *d = pelab_optdef_find(pelab_train_options, k);
        if ((rc = pelab_optdef_check(d, overrides->kv[i].val))) goto done;
        if ((rc = pelab_opts_set(&tr->opts, k, overrides->kv[i].val))) goto done;
    }
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "config.json");
    if (trainer_setup(tr, NULL)) {
        /* The overrides were checked above: the fault is in the file. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", pelab_last_error());
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: %s", path, msg);
        goto done;
    }
    if ((rc = trainer_buffers(tr))) goto done;
    /* The directory is the run's, wherever it was first written from. */
    if ((rc = pelab_opts_set(&tr->opts, "out", tr->dir))) goto done;

    pelab_path(path, tr->dir, "state.safetensors");
    if (pelab_file_exists(path)) {
        if ((rc = pelab_state_load(tr, path))) goto done;
        tr->saved_step = tr->step;
        /* Validate the model file too: a damaged one must not be found only by a later eval. */
        char mpath[PELAB_PATH_MAX];
        pelab_path(mpath, tr->dir, "model.safetensors");
        struct pelab_st_file f;
        if ((rc = pelab_safetensors_read(mpath, &f))) goto done;
        pelab_st_file_free(&f);
    } else {
        fresh_start(tr); /* killed before its first checkpoint */
    }
    if (tr->c.steps < tr->step) {
        rc = pelab_fail(PELAB_ERR_USAGE, "--steps %" PRId64 " is below the run's step %" PRId64,
                        tr->c.steps, tr->step);
        goto done;
    }
    if ((rc = write_config(tr))) goto done; /* records a new --steps / --threads */
    if ((rc = pelab_log_open(tr, 0))) goto done;
    rc = train_loop(tr, hooks);
done:
    trainer_free(tr);
    return rc;
}
