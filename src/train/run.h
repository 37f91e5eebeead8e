/* src/train/run.h — private to src/train: the state of one training run and the run-directory
 * files it keeps (formats in docs/FORMATS.md). */
#ifndef PELAB_TRAIN_RUN_H
#define PELAB_TRAIN_RUN_H

#include <stdint.h>
#include <stdio.h>
#include "pelab/json.h"
#include "pelab/safetensors.h"
#include "pelab/optim.h"
#include "pelab/train.h"

#define PELAB_PATH_MAX 4096

/* The resolved settings, grouped as config.json groups them. */
enum { PELAB_GROUP_TRAINING, PELAB_GROUP_MODEL, PELAB_GROUP_ENCODING, PELAB_GROUP_TASK,
       PELAB_GROUP_DERIVED, PELAB_GROUPS };
extern const char *const pelab_group_names[PELAB_GROUPS];
struct pelab_settings {
    struct pelab_opts group[PELAB_GROUPS];
    int number[PELAB_GROUPS][PELAB_OPTS_MAX]; /* 1: written as a JSON number */
};

/* PELAB_TEST_NAN=STEP:WHAT[:once] — a test-only fault injector (docs/FORMATS.md): at update STEP
 * put a NaN into the first gradient ("grad", after the backward pass) or into one weight
 * ("weight", before the forward pass), or an infinity into that weight after the optimizer step
 * ("update"); "once" fires the first time only. */
enum pelab_poison_site {
    PELAB_POISON_NONE, PELAB_POISON_GRAD, PELAB_POISON_WEIGHT, PELAB_POISON_UPDATE
};
struct pelab_poison {
    enum pelab_poison_site site;
    int64_t step;
    int once, fired;
};

struct pelab_trainer {
    struct pelab_ctx *ctx;       /* the caller's (pelab_train_in): the model's passes run in it */
    struct pelab_train_config c;
    struct pelab_opts opts;      /* every option of the run, as text */
    struct pelab_settings settings;
    char dir[PELAB_PATH_MAX];
    struct pelab_task task;
    struct pelab_model model;
    struct pelab_adamw opt;
    struct pelab_schedule sched;
    struct pelab_batch batch;
    int have_task, have_model, have_batch;

    /* What a checkpoint records beyond the weights and moments. */
    int64_t step;       /* updates done */
    uint64_t cursor;    /* next training example */
    double elapsed_s;   /* wall time of earlier segments of the run */
    double train_s;     /* time spent in updates, earlier segments */
    double log_loss, log_acc; /* sums over the current log interval */
    int64_t log_n;
    int64_t log_skipped;          /* updates skipped (--on-nan skip) in the current interval */
    double last_loss, last_acc;   /* last logged interval means */
    int n_aux;                    /* the encoding's own loss terms (its aux_names) */
    double log_aux[PELAB_PE_AUX_MAX]; /* their sums over the current log interval */
    int aux_on[PELAB_PE_AUX_MAX]; /* whether the last update computed each (its options may not) */
    double lr_scale;    /* learning-rate factor from rollbacks (1: none) */
    int64_t nan_rollbacks;        /* rollbacks so far in the run */
    int64_t nan_skips;  /* updates skipped in a row, up to the current step */
    int64_t saved_step; /* step of the last checkpoint, -1: none */
    /* The builds that trained the run: their commits (pelab_commit), oldest first, comma-separated;
     * "unrecorded" first for a run begun before checkpoints recorded them (state.c). */
    char trained_by[384];

    FILE *log;          /* log.jsonl, appending */
    int lock_fd;        /* the run directory, locked while training (-1: not held) */
    const struct pelab_train_hooks *hooks; /* may be NULL */
    struct pelab_poison poison;   /* PELAB_TEST_NAN: test-only NaN injection */
    int prev_precision; /* the context's precision before the run's, restored by trainer_free (-1: unset) */

    /* --init-from (init_from.c): the source's weights, the run's start (NULL: the seed's own
     * initialisation), and what config.json records of the source */
    pelab_real *init_data;        /* (params.total,) */
    int64_t init_step;            /* the source model file's step */
    char init_crc[32];            /* its data CRC-32, 8 hex digits ("none": an edited file) */
};

/* settings from the run's options and the initialised model and task. */
void pelab_settings_build(struct pelab_settings *s, const struct pelab_opts *opts,
                          const struct pelab_model *m, const struct pelab_task *t);
/* config.json text. */
void pelab_settings_json(const struct pelab_settings *s, struct pelab_sb *sb);
/* Metadata entries "pelab.config.<name>" for every setting. */
int pelab_settings_metadata(const struct pelab_settings *s, struct pelab_opts *meta);

/* The trainer (train.c), shared with resume.c: a trainer in the caller's context with its hooks
 * (NULL when out of memory) and its release; its run directory; its task, model and optimizer from tr->opts
 * (hint: a line added to a setting's error, or NULL); its batch buffers; config.json written
 * atomically; the training loop from tr->step on (loop.c). Each returns PELAB_OK or the status (message
 * set). pelab_trainer_ranks_agree: a collective, the ranks' resolved settings (tr->opts) compared
 * (one line from rank 0 naming the first difference). */
struct pelab_trainer *pelab_trainer_new(struct pelab_ctx *ctx, const struct pelab_train_hooks *hooks);
void pelab_trainer_free(struct pelab_trainer *tr);
int pelab_trainer_set_dir(struct pelab_trainer *tr, const char *dir);
int pelab_trainer_setup(struct pelab_trainer *tr, const char *hint);
int pelab_trainer_buffers(struct pelab_trainer *tr);
int pelab_trainer_write_config(struct pelab_trainer *tr);
int pelab_trainer_ranks_agree(struct pelab_trainer *tr);
int pelab_trainer_loop(struct pelab_trainer *tr, const struct pelab_train_hooks *hooks);
/* A new run's trainer from options: preset applied, everything checked and built, nothing
 * written. */
int pelab_trainer_prepare(struct pelab_trainer *tr, const struct pelab_opts *opts);
/* The resolved options into tr->settings, as config.json and the model file's metadata record
 * them (decay-steps resolved, so extending a run with --steps keeps its schedule). */
int pelab_trainer_resolve_settings(struct pelab_trainer *tr);

/* What an update found not finite: handed to pelab_nan_handle. Plain bytes (no pointers), so
 * the rank that found it can send it to the others. */
struct pelab_nan_event {
    char what[64];
    char detail[640];
    int applied; /* the weights were already updated */
};
/* One optimizer update's outcome: the means over its micro-batches of the loss, the accuracy and
 * the encoding's own loss terms (aux, tr->n_aux of them; NaN for a term its options switch
 * off), and the learning rate it stepped with. */
struct pelab_update {
    double loss, acc, aux[PELAB_PE_AUX_MAX], lr;
    struct pelab_nan_event ev;
};
#define PELAB_UPDATE_NAN (-1)
/* One optimizer update of tr at tr->step (update.c): PELAB_OK with tr->step advanced; an error
 * status; or PELAB_UPDATE_NAN, with u->ev filled and the update's batches consumed, when the
 * loss, the gradient or (with --check-finite) an activation is not finite: then no weight has
 * changed (or, u->ev.applied, a weight the update made is not finite). */
int pelab_trainer_update(struct pelab_trainer *tr, struct pelab_update *u);

/* A NOTICE to the progress hook (printf-style; one line; log.c). */
void pelab_train_notice(const struct pelab_trainer *tr, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Checkpoint files (state.c): the state (weights, moments, counters) in `path`, and
 * DIR/model.safetensors. */
int pelab_state_save(const struct pelab_trainer *tr, const char *path);
/* Loads a state file into tr after checking all of it: format and version, `step` equal to
 * `expect_step` (-1: any), tensors of the model's names and shapes, finite, counters in range,
 * settings equal to the run's. On failure tr is unchanged and the message names `path`. */
int pelab_state_load(struct pelab_trainer *tr, const char *path, int64_t expect_step);
int pelab_state_from_file(struct pelab_trainer *tr, const struct pelab_st_file *f,
                          const char *path, int64_t expect_step);
int pelab_model_file_save(const struct pelab_trainer *tr);

/* The checkpoint directory (checkpoint.c): DIR/checkpoints/state-<step>.safetensors, the newest
 * --keep of them. */
/* Writes the state of tr->step (log fsync'ed first), prunes, then writes model.safetensors. */
int pelab_ckpt_save(struct pelab_trainer *tr);
/* Loads the newest valid checkpoint, passing over damaged ones with a NOTICE each. *found = 0
 * when the run has none (nothing loaded); an error when it has some but none is valid. */
int pelab_ckpt_restore(struct pelab_trainer *tr, int *found);
/* After a restore: DIR/model.safetensors must hold the restored step's weights; a missing,
 * damaged or other one is rewritten (with a NOTICE). */
int pelab_ckpt_repair_model(struct pelab_trainer *tr);
/* Locks the run directory for this process (PELAB_ERR_RUNTIME if another holds it) and removes
 * the temporary files an interrupted write left. */
int pelab_run_lock(struct pelab_trainer *tr);
void pelab_run_unlock(struct pelab_trainer *tr);

/* Non-finite values (numerics.c). */
/* Reads PELAB_TEST_NAN into tr->poison (PELAB_ERR_USAGE for a malformed value). */
int pelab_poison_init(struct pelab_poison *p);
/* Applies the injector at `site` for update `step`, if it is due. */
void pelab_poison_apply(struct pelab_trainer *tr, enum pelab_poison_site site, int64_t step);
/* "first non-finite gradient: NAME[i] = nan", or "" when every gradient is finite. */
void pelab_describe_grads(const struct pelab_params *p, char *buf, size_t size);
/* 1 and "first non-finite weight: NAME[i] = inf" (or AdamW moment) when a weight or moment is
 * not finite, else 0. */
int pelab_describe_params(const struct pelab_params *p, char *buf, size_t size);
/* A non-finite value at update `update_no`: `what` ("the training loss") with `detail` (its
 * value and where it first appeared); `applied` when the update was already made (then it cannot
 * be skipped). Does what --on-nan says: PELAB_OK when training goes on (the update skipped, or
 * the run rolled back), else the error naming the step. */
int pelab_nan_handle(struct pelab_trainer *tr, int64_t update_no, const char *what,
                     const char *detail, int applied);

/* --init-from RUN (init_from.c). The source's model and encoding settings into opts (where given
 * and different: PELAB_ERR_USAGE naming the setting), its task when none is given, and the
 * task's settings it has under the same names. Nothing when opts has no init-from. The fine-tune
 * options the source was trained with (its encoding's `fine_tune`) are carried unless the method
 * is given anew; then the source's settings the new method does not read are left out, and
 * `dropped` says which ("--METHOD-OPTION NEW does not use them: --OPTION VALUE, ..."; empty
 * when none). */
int pelab_init_from_settings(struct pelab_opts *opts, char *dropped, size_t dropped_size);
/* The source's weights into tr->init_data, its step and checksum into tr->init_step, init_crc,
 * after checking the vocabulary and every tensor's name and shape against tr->model.
 * PELAB_ERR_RUNTIME (one line) for a missing or damaged source, PELAB_ERR_USAGE for a mismatch. */
int pelab_init_from_load(struct pelab_trainer *tr);
/* A resume: the step and checksum of the source recorded in DIR/config.json, into tr. */
int pelab_init_from_read_record(struct pelab_trainer *tr);
/* A resume that must start over: the source loaded again, refused unless it is still the
 * recorded one. */
int pelab_init_from_reload(struct pelab_trainer *tr);

/* Initial weights, moments and counters of a run at step 0. */
void pelab_trainer_fresh_start(struct pelab_trainer *tr);
/* Collective (pelab/dist.h), after rank 0 alone restored a checkpoint (rc its status, *found
 * whether it found one): the ranks agree on rc, then rank 0's *found, weights, moments and
 * counters go to every rank. */
int pelab_trainer_sync(struct pelab_trainer *tr, int rc, int *found);

/* log.jsonl: a new empty log, or the existing one cut to the lines of steps <= `step`. */
int pelab_log_open(struct pelab_trainer *tr, int fresh);
int pelab_log_append(struct pelab_trainer *tr, const char *line);
int pelab_log_sync(struct pelab_trainer *tr);
void pelab_log_close(struct pelab_trainer *tr);

/* "DIR/name" into buf (PELAB_PATH_MAX). */
void pelab_path(char *buf, const char *dir, const char *name);

#endif
