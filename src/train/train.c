/* A training run (pelab_train, pelab/train.h): resolve options → task → model → AdamW (the
 * trainer), a new run's directory, then the loop (loop.c) of updates (update.c). Resuming a run
 * is resume.c's; what its checkpoints hold, state.c's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pelab/dist.h"
#include "pelab/io.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "pelab/precision.h"
#include "train/run.h"

/* Salt for the seed-derived start of the data cursor: different seeds see the data in another
 * order. */
#define CURSOR_SALT 0xC0A5E5DA7A5EEDull

struct pelab_trainer *pelab_trainer_new(struct pelab_ctx *ctx, const struct pelab_train_hooks *hooks) {
    struct pelab_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return NULL;
    tr->ctx = ctx;
    tr->lock_fd = -1;
    tr->hooks = tr->ctx->dist.rank == 0 ? hooks : NULL; /* rank 0 alone reports */
    tr->lr_scale = 1;
    tr->prev_precision = -1;
    return tr;
}

void pelab_trainer_free(struct pelab_trainer *tr) {
    if (tr->prev_precision >= 0) pelab_precision_set(tr->ctx, (enum pelab_precision)tr->prev_precision);
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
    tr->prev_precision = (int)tr->ctx->precision;
    if ((rc = pelab_precision_set(tr->ctx, c->precision))) return rc;
    pelab_bf16_advise(tr->ctx);
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
    pelab_model_set_ctx(&tr->model, tr->ctx);
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
    int ranks = tr->ctx->dist.size;
    if (tr->c.batch < ranks)
        return pelab_fail(PELAB_ERR_USAGE, "--batch %d is below the %d MPI ranks: every rank "
                          "takes at least one row of each micro-batch", tr->c.batch, ranks);
    uint64_t r0, r1;
    pelab_dist_share(&tr->ctx->dist, (uint64_t)tr->c.batch, &r0, &r1);
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

int pelab_trainer_resolve_settings(struct pelab_trainer *tr) {
    char v[32];
    snprintf(v, sizeof v, "%" PRId64, tr->c.decay_steps);
    int rc = pelab_opts_set(&tr->opts, "decay-steps", v);
    if (!rc) rc = pelab_opts_set(&tr->opts, "out", tr->dir);
    if (rc) return rc;
    pelab_settings_build(&tr->settings, &tr->opts, &tr->model, &tr->task);
    return init_from_record(tr);
}

int pelab_trainer_write_config(struct pelab_trainer *tr) {
    int rc = pelab_trainer_resolve_settings(tr);
    if (rc) return rc;
    struct pelab_sb sb = {0};
    pelab_settings_json(&tr->settings, &sb);
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "config.json");
    rc = pelab_write_file_atomic(path, sb.data, sb.len);
    pelab_sb_free(&sb);
    return rc;
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

int pelab_trainer_prepare(struct pelab_trainer *tr, const struct pelab_opts *opts) {
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
    struct pelab_ctx own; /* what a run would check, in one process */
    pelab_ctx_init(&own);
    struct pelab_trainer *tr = pelab_trainer_new(&own, NULL);
    if (!tr) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int rc = pelab_trainer_prepare(tr, opts);
    if (!rc && check) rc = check(&tr->model, &tr->task, ctx);
    pelab_trainer_free(tr);
    return rc;
}

int pelab_train_validate(const struct pelab_opts *opts) {
    return pelab_train_validate_with(opts, NULL, NULL);
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
int pelab_trainer_ranks_agree(struct pelab_trainer *tr) {
    const struct pelab_opts *o = &tr->opts;
    if (tr->ctx->dist.size == 1) return PELAB_OK;
    enum { WORD = PELAB_OPT_KEY_MAX + PELAB_OPT_VAL_MAX + 1 };
    char *text = malloc((size_t)o->count * WORD + 1), *words[PELAB_OPTS_MAX];
    if (!text) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int i = 0; i < o->count; i++) {
        words[i] = text + (size_t)i * WORD;
        snprintf(words[i], WORD, "%s=%s", o->kv[i].key, o->kv[i].val);
    }
    const int rc = pelab_dist_same_words(&tr->ctx->dist, o->count, words, "settings");
    free(text);
    return rc;
}

int pelab_train(const struct pelab_opts *opts, const struct pelab_train_hooks *hooks) {
    struct pelab_ctx ctx;
    pelab_ctx_init(&ctx);
    return pelab_train_in(&ctx, opts, hooks);
}

int pelab_train_in(struct pelab_ctx *ctx, const struct pelab_opts *opts,
                   const struct pelab_train_hooks *hooks) {
    struct pelab_trainer *tr = pelab_trainer_new(ctx, hooks);
    if (!tr) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    /* Across ranks: every rank checks and builds alike, then rank 0 alone writes the run
     * directory; each stage ends with the ranks agreeing that it went well. */
    const int root = tr->ctx->dist.rank == 0;
    int rc = pelab_trainer_prepare(tr, opts);
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
    if ((rc = pelab_dist_agree(&tr->ctx->dist, rc)) || (rc = pelab_trainer_ranks_agree(tr))) goto done;
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
    if ((rc = pelab_dist_agree(&tr->ctx->dist, rc))) goto done;
    rc = pelab_trainer_loop(tr, tr->hooks);
done:
    pelab_trainer_free(tr);
    return rc;
}

