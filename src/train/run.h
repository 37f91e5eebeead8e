/* src/train/run.h — private to src/train: the state of one training run and the run-directory
 * files it keeps (formats in docs/FORMATS.md). */
#ifndef PELAB_TRAIN_RUN_H
#define PELAB_TRAIN_RUN_H

#include <stdint.h>
#include <stdio.h>
#include "pelab/json.h"
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

struct pelab_trainer {
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
    double last_loss, last_acc;   /* last logged interval means */
    int64_t saved_step; /* step of the last checkpoint, -1: none */

    FILE *log;          /* log.jsonl, appending */
};

/* settings from the run's options and the initialised model and task. */
void pelab_settings_build(struct pelab_settings *s, const struct pelab_opts *opts,
                          const struct pelab_model *m, const struct pelab_task *t);
/* config.json text. */
void pelab_settings_json(const struct pelab_settings *s, struct pelab_sb *sb);
/* Metadata entries "pelab.config.<name>" for every setting. */
int pelab_settings_metadata(const struct pelab_settings *s, struct pelab_opts *meta);

/* Checkpoint files. */
int pelab_state_save(const struct pelab_trainer *tr);
/* Loads state.safetensors into tr (weights, moments, counters). */
int pelab_state_load(struct pelab_trainer *tr, const char *path);
int pelab_model_file_save(const struct pelab_trainer *tr);

/* log.jsonl: a new empty log, or the existing one cut to the lines of steps <= `step`. */
int pelab_log_open(struct pelab_trainer *tr, int fresh);
int pelab_log_append(struct pelab_trainer *tr, const char *line);
int pelab_log_sync(struct pelab_trainer *tr);
void pelab_log_close(struct pelab_trainer *tr);

/* "DIR/name" into buf (PELAB_PATH_MAX). */
void pelab_path(char *buf, const char *dir, const char *name);

#endif
