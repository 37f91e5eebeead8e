/* Training options: the table, reading it into a config, and the check that every option of a
 * run belongs to a table that applies (training, model, the chosen task, the chosen encodings). */
#include <string.h>
#include "pelab/model.h"
#include "pelab/posenc.h"
#include "pelab/precision.h"
#include "pelab/status.h"
#include "pelab/task.h"
#include "pelab/threads.h"
#include "pelab/train.h"

#define BIG 1e9
#define SEED_MAX 9007199254740991.0 /* 2^53 - 1: every seed survives a JSON number */

const struct pelab_optdef pelab_train_options[] = {
    {"steps", PELAB_OPT_INT, "2000", 1, BIG, NULL, "optimizer updates"},
    {"batch", PELAB_OPT_INT, "64", 1, 65536, NULL, "examples per micro-batch"},
    {"accum", PELAB_OPT_INT, "1", 1, 4096, NULL,
     "gradient-accumulation micro-batches per update (effective batch = batch x accum)"},
    {"lr", PELAB_OPT_REAL, "1e-3", 0, 10, NULL, "peak learning rate, after warm-up"},
    {"min-lr", PELAB_OPT_REAL, "1e-4", 0, 10, NULL, "learning rate at the end of the cosine decay"},
    {"warmup", PELAB_OPT_INT, "100", 0, BIG, NULL, "linear warm-up updates"},
    {"decay-steps", PELAB_OPT_INT, "0", 0, BIG, NULL,
     "update at which the cosine decay reaches min-lr (0: --steps)"},
    {"weight-decay", PELAB_OPT_REAL, "0.01", 0, 10, NULL,
     "AdamW decoupled weight decay, on matrices only"},
    {"beta1", PELAB_OPT_REAL, "0.9", 0, 0.999999, NULL, "AdamW first-moment decay"},
    {"beta2", PELAB_OPT_REAL, "0.99", 0, 0.999999999, NULL, "AdamW second-moment decay"},
    {"eps", PELAB_OPT_REAL, "1e-8", 1e-30, 1, NULL,
     "AdamW epsilon (above 0: a parameter with no gradient yet would otherwise get 0/0)"},
    {"clip", PELAB_OPT_REAL, "1.0", 0, 1e6, NULL, "global gradient-norm clipping (0: off)"},
    {"seed", PELAB_OPT_INT, "1", 0, SEED_MAX, NULL,
     "fixes initialisation, data order and dropout"},
    PELAB_OPT_ROW_THREADS,
    PELAB_OPT_ROW_PRECISION,
    {"eval-every", PELAB_OPT_INT, "200", 0, BIG, NULL,
     "validate every N updates (0: only at the end)"},
    {"eval-batches", PELAB_OPT_INT, "8", 0, 1e6, NULL,
     "validation batches (of --batch examples) per evaluation during training"},
    {"log-every", PELAB_OPT_INT, "10", 1, BIG, NULL, "write a log.jsonl line every N updates"},
    {"save-every", PELAB_OPT_INT, "500", 0, BIG, NULL,
     "checkpoint every N updates (0: only at the end)"},
    {"keep", PELAB_OPT_INT, "2", 1, 1e6, NULL,
     "the newest N checkpoints are kept in DIR/checkpoints (a resume passes over a damaged one "
     "to the one before)"},
    {"on-nan", PELAB_OPT_CHOICE, "stop", 0, 0, "stop|skip|rollback",
     "a non-finite loss or gradient: stop the run; skip that update; or roll back to the last "
     "checkpoint with the learning rate times --nan-lr-factor"},
    {"nan-lr-factor", PELAB_OPT_REAL, "0.5", 1e-6, 0.999999, NULL,
     "--on-nan rollback: learning-rate factor applied at each rollback"},
    {"nan-retries", PELAB_OPT_INT, "3", 0, 1e6, NULL,
     "--on-nan skip: skipped updates in a row, rollback: rollbacks in the run, before giving up"},
    {"check-finite", PELAB_OPT_SWITCH, "off", 0, 0, NULL,
     "scan every activation after each training forward pass; the first non-finite one (named "
     "by layer and tensor) is handled as --on-nan says"},
    {"out", PELAB_OPT_STR, "", 0, 0, NULL, "run directory (default runs/<task>-<pe>-s<seed>)"},
    {"task", PELAB_OPT_STR, "indirect", 0, 0, NULL, "task to train on (see the task groups)"},
    {"init-from", PELAB_OPT_STR, "", 0, 0, NULL,
     "fine-tune: start from this run's weights, its model and encoding settings, its task and "
     "the task settings it shares, with a fresh optimizer and schedule; a new --task, dataset or "
     "--seq-len, and the evaluation-time options an encoding fine-tunes with (a length "
     "extension), may be given"},
    {"preset", PELAB_OPT_STR, "", 0, 0, NULL,
     "named defaults for the task (paper, cpu; 'pelab help presets' lists them with their "
     "settings); explicit options override"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

static void copy_str(char *dst, const char *src) {
    size_t n = strlen(src);
    if (n >= PELAB_OPT_VAL_MAX) n = PELAB_OPT_VAL_MAX - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int pelab_train_config_read(const struct pelab_opts *o, struct pelab_train_config *c) {
    const struct pelab_optdef *T = pelab_train_options;
    int rc = pelab_opts_check(o, T);
    if (rc) return rc;
    memset(c, 0, sizeof *c);
    c->steps = pelab_opt_int(o, T, "steps");
    c->batch = (int)pelab_opt_int(o, T, "batch");
    c->accum = (int)pelab_opt_int(o, T, "accum");
    c->lr = pelab_opt_real(o, T, "lr");
    c->min_lr = pelab_opt_real(o, T, "min-lr");
    c->warmup = pelab_opt_int(o, T, "warmup");
    c->decay_steps = pelab_opt_int(o, T, "decay-steps");
    if (c->decay_steps == 0) c->decay_steps = c->steps;
    c->weight_decay = pelab_opt_real(o, T, "weight-decay");
    c->beta1 = pelab_opt_real(o, T, "beta1");
    c->beta2 = pelab_opt_real(o, T, "beta2");
    c->eps = pelab_opt_real(o, T, "eps");
    c->clip = pelab_opt_real(o, T, "clip");
    c->seed = (uint64_t)pelab_opt_real(o, T, "seed");
    c->threads = (int)pelab_opt_int(o, T, "threads");
    c->precision = (enum pelab_precision)pelab_opt_choice(o, T, "precision");
    c->eval_every = pelab_opt_int(o, T, "eval-every");
    c->eval_batches = pelab_opt_int(o, T, "eval-batches");
    c->log_every = pelab_opt_int(o, T, "log-every");
    c->save_every = pelab_opt_int(o, T, "save-every");
    c->keep = pelab_opt_int(o, T, "keep");
    c->on_nan = (enum pelab_on_nan)pelab_opt_choice(o, T, "on-nan");
    c->nan_lr_factor = pelab_opt_real(o, T, "nan-lr-factor");
    c->nan_retries = pelab_opt_int(o, T, "nan-retries");
    c->check_finite = pelab_opt_switch(o, T, "check-finite");
    copy_str(c->out, pelab_opt_str(o, T, "out"));
    copy_str(c->task, pelab_opt_str(o, T, "task"));
    copy_str(c->preset, pelab_opt_str(o, T, "preset"));
    if (c->min_lr > c->lr)
        return pelab_fail(PELAB_ERR_USAGE, "--min-lr %g is above --lr %g", c->min_lr, c->lr);
    if (c->on_nan == PELAB_ON_NAN_ROLLBACK && c->save_every == 0)
        return pelab_fail(PELAB_ERR_USAGE, "--on-nan rollback needs checkpoints to roll back to "
                          "(--save-every N > 0; it is 0)");
    if (!c->task[0]) return pelab_fail(PELAB_ERR_USAGE, "--task: a task name is needed");
    if ((rc = pelab_precision_check(c->precision))) return rc;
    return PELAB_OK;
}

int pelab_train_resume_option(const char *name) {
    static const char *const ok[] = {"steps", "decay-steps", "threads", "keep", "on-nan",
                                     "nan-lr-factor", "nan-retries", "check-finite", "precision"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(name, ok[i]) == 0) return 1;
    return 0;
}

/* "a,b,c" from n names. */
static void join(char *buf, size_t size, const char *const *names, int n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len + 1 < size; i++) {
        size_t w = strlen(names[i]);
        if (len + w + 2 >= size) break;
        if (i) buf[len++] = ',';
        memcpy(buf + len, names[i], w + 1);
        len += w;
    }
}

/* Which table defines `key` and whether it applies: 1 found and checked, 0 unknown; a usage
 * failure for a value that fails its check or an option of a table that does not apply. */
static int check_one(const char *key, const char *val, const char *task, const char *const *pes,
                     int n_pes, int fine_tune, int *found) {
    const struct pelab_optdef *d = pelab_optdef_find(pelab_train_options, key);
    if (!d) d = pelab_optdef_find(pelab_model_options, key);
    if (d) {
        *found = 1;
        return pelab_optdef_check(d, val);
    }
    const struct pelab_task_ops *top = pelab_task_find(task);
    if (top && (d = pelab_optdef_find(top->options, key))) {
        *found = 1;
        return pelab_optdef_check(d, val);
    }
    for (int i = 0; i < n_pes; i++) {
        const struct pelab_posenc_ops *pop = pelab_posenc_find(pes[i]);
        if (pop && (d = pelab_optdef_find(pop->options, key))) {
            *found = 1;
            return pelab_optdef_check(d, val);
        }
    }
    /* Known elsewhere: an option of another task or encoding is a mistake worth naming. */
    for (const struct pelab_task_ops *const *t = pelab_task_all(); *t; t++)
        if (pelab_optdef_find((*t)->options, key)) {
            *found = 1;
            return pelab_fail(PELAB_ERR_USAGE, "--%s does not apply to --task %s", key, task);
        }
    for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p; p++)
        if (pelab_optdef_find((*p)->options, key)) {
            char list[PELAB_OPT_VAL_MAX];
            join(list, sizeof list, pes, n_pes);
            *found = 1;
            return pelab_fail(PELAB_ERR_USAGE, "--%s does not apply to --pe %s", key, list);
        }
    const struct pelab_task_ops *task_owner = pelab_task_eval_option_owner(key);
    if (task_owner) {
        *found = 1;
        return pelab_fail(PELAB_ERR_USAGE,
                          "--%s is an option of eval and sample (for --task %s runs), not of "
                          "training", key, task_owner->name);
    }
    const struct pelab_posenc_ops *owner = pelab_posenc_eval_option_owner(key);
    if (owner && fine_tune && pelab_posenc_fine_tune_option(key)) {
        /* length extension by fine-tuning: for a run of the encoding that owns it */
        char list[PELAB_OPT_VAL_MAX];
        join(list, sizeof list, pes, n_pes);
        *found = 1;
        for (int i = 0; i < n_pes; i++)
            if (strcmp(pes[i], owner->name) == 0)
                return pelab_optdef_check(pelab_optdef_find(owner->eval_options, key), val);
        return pelab_fail(PELAB_ERR_USAGE, "--%s applies to runs of --pe %s, not --pe %s", key,
                          owner->name, list);
    }
    if (owner) {
        *found = 1;
        return pelab_fail(PELAB_ERR_USAGE,
                          "--%s is an option of eval and sample (for --pe %s runs), not of training%s",
                          key, owner->name,
                          pelab_posenc_fine_tune_option(key)
                              ? " (except to fine-tune a trained run at a longer length: "
                                "--init-from RUN)"
                              : "");
    }
    *found = 0;
    return PELAB_OK;
}

int pelab_train_check_opts(const struct pelab_opts *o, const char *task, const char *const *pes,
                           int n_pes, const char *hint) {
    if (!pelab_task_find(task)) {
        struct pelab_task t;
        return pelab_task_init(&t, task, NULL); /* fails with the list of known tasks */
    }
    for (int i = 0; i < n_pes; i++)
        if (!pelab_posenc_find(pes[i])) {
            const char *names[64];
            int n = 0;
            for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p && n < 64; p++)
                names[n++] = (*p)->name;
            char known[PELAB_OPT_VAL_MAX];
            join(known, sizeof known, names, n);
            return pelab_fail(PELAB_ERR_USAGE, "--pe: unknown encoding '%s' (known: %s)", pes[i],
                              known);
        }
    const char *init_from = pelab_opts_get(o, "init-from");
    const int fine_tune = init_from && init_from[0];
    for (int i = 0; i < o->count; i++) {
        int found = 0;
        int rc = check_one(o->kv[i].key, o->kv[i].val, task, pes, n_pes, fine_tune, &found);
        if (rc) return rc;
        if (!found)
            return pelab_fail(PELAB_ERR_USAGE, "unknown option --%s%s", o->kv[i].key,
                              hint ? hint : "");
    }
    return PELAB_OK;
}
