/* Continuing a run: its settings from config.json (with the few overrides a resume accepts), its
 * newest sound checkpoint restored on rank 0 and sent to the others, log.jsonl cut back to that
 * step, then the training loop (loop.c) from there. A run killed before its first checkpoint
 * starts over; one that lost its checkpoints but saved results is refused. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/dist.h"
#include "pelab/io.h"
#include "pelab/precision.h"
#include "pelab/status.h"
#include "train/run.h"

/* The overrides a resume accepts, checked and applied to tr->opts. */
static int apply_overrides(struct pelab_trainer *tr, const struct pelab_opts *overrides) {
    for (int i = 0; overrides && i < overrides->count; i++) {
        const char *k = overrides->kv[i].key;
        if (!pelab_train_resume_option(k))
            return pelab_fail(PELAB_ERR_USAGE, "--resume takes its settings from %s/config.json "
                              "(only --steps, --decay-steps, --threads, --keep, --on-nan, "
                              "--nan-lr-factor, --nan-retries and --check-finite may be given, "
                              "not --%s)", tr->dir,
                              k);
        const struct pelab_optdef *d = pelab_optdef_find(pelab_train_options, k);
        int rc = pelab_optdef_check(d, overrides->kv[i].val);
        if (!rc) rc = pelab_opts_set(&tr->opts, k, overrides->kv[i].val);
        if (rc) return rc;
    }
    return PELAB_OK;
}

/* An override that is fine alone but not with the run's settings (--on-nan rollback for a run
 * with --save-every 0) is a usage error, not a fault of config.json. */
static int check_combination(const struct pelab_opts *file, const struct pelab_opts *merged) {
    struct pelab_train_config c;
    if (pelab_train_config_read(file, &c)) {
        pelab_clear_error(); /* the file's own fault: reported below, with its path */
        return PELAB_OK;
    }
    return pelab_train_config_read(merged, &c);
}

/* What the learning rate does from the resumed step on, when that is not simply the rest of the
 * schedule the run began with: the schedule re-planned by --decay-steps (the rate jumps at the
 * resumed step), or --steps beyond the decay's end (the extra updates run at --min-lr). */
static void say_schedule(const struct pelab_trainer *tr, const struct pelab_opts *file) {
    const struct pelab_train_config *c = &tr->c;
    const char *was = pelab_opts_get(file, "decay-steps");
    long long before = was ? strtoll(was, NULL, 10) : c->decay_steps;
    if (before != c->decay_steps) {
        struct pelab_schedule old = tr->sched;
        old.decay_steps = before;
        pelab_train_notice(tr, "the cosine schedule is re-planned to reach --min-lr at update %"
                           PRId64 " (it was %lld): the learning rate of update %" PRId64 " is %g "
                           "(%g on the old schedule)", c->decay_steps, before, tr->step + 1,
                           pelab_schedule_lr(&tr->sched, tr->step) * tr->lr_scale,
                           pelab_schedule_lr(&old, tr->step) * tr->lr_scale);
    } else if (c->steps > c->decay_steps && tr->step < c->steps) {
        int64_t from = tr->step > c->decay_steps ? tr->step + 1 : c->decay_steps + 1;
        pelab_train_notice(tr, "updates %" PRId64 " to %" PRId64 " run at --min-lr %g: the cosine "
                           "schedule, fixed when the run began, ends at update %" PRId64 " "
                           "(--decay-steps N re-plans it from here)", from, c->steps,
                           c->min_lr * tr->lr_scale, c->decay_steps);
    }
}

/* A resume that found no checkpoint starts from step 0: right for a run killed before its first
 * checkpoint, which leaves neither a model nor a summary (model.safetensors follows the first
 * checkpoint). A run that has either lost its checkpoints, and starting over would overwrite
 * what it finished: refused, with nothing written. */
static int check_nothing_saved(const struct pelab_trainer *tr) {
    static const char *const saved[] = {"model.safetensors", "summary.json"};
    for (size_t i = 0; i < sizeof saved / sizeof *saved; i++) {
        char path[PELAB_PATH_MAX];
        pelab_path(path, tr->dir, saved[i]);
        if (pelab_file_exists(path))
            return pelab_fail(PELAB_ERR_RUNTIME, "%s/checkpoints holds no checkpoint to resume "
                              "from, but the run has saved %s: nothing was changed (train a new "
                              "run with another --out to start over)", tr->dir, saved[i]);
    }
    return PELAB_OK;
}

int pelab_train_resume(const char *dir, const struct pelab_opts *overrides,
                       const struct pelab_train_hooks *hooks) {
    struct pelab_ctx ctx;
    pelab_ctx_init(&ctx);
    return pelab_train_resume_in(&ctx, dir, overrides, hooks);
}

int pelab_train_resume_in(struct pelab_ctx *ctx, const char *dir, const struct pelab_opts *overrides,
                          const struct pelab_train_hooks *hooks) {
    struct pelab_trainer *tr = pelab_trainer_new(ctx, hooks);
    if (!tr) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    /* Across ranks: every rank reads config.json (a directory all of them see) and builds the
     * model; rank 0 alone locks the run, restores its checkpoint and sends it to the others,
     * then alone writes; each stage ends with the ranks agreeing that it went well. */
    const int root = tr->ctx->dist.rank == 0;
    struct pelab_opts *file = malloc(sizeof *file); /* config.json without the overrides */
    int rc = file ? pelab_trainer_set_dir(tr, dir) : pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    if (!rc) rc = pelab_run_read_config(tr->dir, &tr->opts);
    if (rc) goto agree;
    *file = tr->opts;
    if ((rc = apply_overrides(tr, overrides)) || (rc = check_combination(file, &tr->opts)))
        goto agree;
    /* a bf16 run on a machine without bf16 products: the machine's fault, not the file's */
    const char *precision = pelab_opts_get(&tr->opts, "precision");
    enum pelab_precision p;
    if (precision && pelab_precision_parse(precision, &p) == PELAB_OK && pelab_precision_check(p)) {
        char why[512];
        snprintf(why, sizeof why, "%s", pelab_last_error());
        rc = pelab_fail(PELAB_ERR_USAGE, "%s trains with --precision %s, which this machine cannot run (%s); "
                        "resume it with --precision fp32 to go on in float32", tr->dir, precision, why);
        goto agree;
    }
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "config.json");
    if ((rc = pelab_trainer_setup(tr, NULL))) {
        /* The overrides were checked above: a refused setting is the file's fault; a damaged
         * data file names itself. */
        if (rc == PELAB_ERR_USAGE) rc = pelab_fail_context(PELAB_ERR_RUNTIME, "%s", path);
        goto agree;
    }
    if ((rc = pelab_trainer_buffers(tr))) goto agree;
    /* The directory is the run's, wherever it was first written from. */
    if ((rc = pelab_opts_set(&tr->opts, "out", tr->dir))) goto agree;
    pelab_settings_build(&tr->settings, &tr->opts, &tr->model, &tr->task);
agree:
    if ((rc = pelab_dist_agree(&tr->ctx->dist, rc)) || (rc = pelab_trainer_ranks_agree(tr))) goto done;

    int found = 0;
    if (root) {
        rc = pelab_run_lock(tr);
        if (!rc) rc = pelab_ckpt_restore(tr, &found);
        if (!rc && !found) rc = check_nothing_saved(tr);
    }
    if ((rc = pelab_trainer_sync(tr, rc, &found))) goto done;
    /* A fine-tuning run (--init-from) that starts over starts from its source again: every rank
     * reads it (a directory all of them see). */
    if ((rc = pelab_dist_agree(&tr->ctx->dist, pelab_init_from_read_record(tr)))) goto done;
    if (!found && (rc = pelab_dist_agree(&tr->ctx->dist, pelab_init_from_reload(tr)))) goto done;
    if (!found) pelab_trainer_fresh_start(tr); /* killed before its first checkpoint */
    if (tr->c.steps < tr->step) {
        rc = pelab_dist_agree(&tr->ctx->dist, pelab_fail(PELAB_ERR_USAGE, "--steps %" PRId64 " is below the "
                                         "run's step %" PRId64, tr->c.steps, tr->step));
        goto done; /* alike on every rank: rank 0 says it */
    }
    if (root) {
        if (found) rc = pelab_ckpt_repair_model(tr);
        if (!rc) rc = pelab_trainer_write_config(tr); /* records the overrides */
        if (!rc) say_schedule(tr, file);
        if (!rc) rc = pelab_log_open(tr, 0);
    }
    if ((rc = pelab_dist_agree(&tr->ctx->dist, rc))) goto done;
    rc = pelab_trainer_loop(tr, tr->hooks);
done:
    free(file);
    pelab_trainer_free(tr);
    return rc;
}
