/* Reading a run directory: config.json back into options, and a run opened for evaluation (or,
 * for the analyses that read no data, its model alone). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/model.h"
#include "pelab/posenc.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "pelab/task.h"
#include "pelab/train.h"
#include "train/run.h"

/* One group object of config.json into opts: numbers keep their own text, so a value reads
 * back exactly as it was written. */
static int read_group(const struct pelab_json *g, const char *path, const char *name,
                      struct pelab_opts *opts) {
    if (g->type != PELAB_JSON_OBJECT)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: \"%s\" is not an object", path, name);
    for (int i = 0; i < g->count; i++) {
        const struct pelab_json *v = g->items[i];
        char val[PELAB_OPT_VAL_MAX];
        if (v->type == PELAB_JSON_NUMBER && v->raw_len < sizeof val) {
            memcpy(val, v->raw, v->raw_len);
            val[v->raw_len] = '\0';
        } else if (v->type == PELAB_JSON_STRING && strlen(v->string) < sizeof val) {
            strcpy(val, v->string);
        } else if (v->type == PELAB_JSON_NUMBER || v->type == PELAB_JSON_STRING) {
            return pelab_fail(PELAB_ERR_RUNTIME, "%s: \"%s\".\"%s\" is longer than %d "
                              "characters", path, name, g->keys[i], PELAB_OPT_VAL_MAX - 1);
        } else {
            return pelab_fail(PELAB_ERR_RUNTIME, "%s: \"%s\".\"%s\" is not a number or a string",
                              path, name, g->keys[i]);
        }
        if (pelab_opts_set(opts, g->keys[i], val))
            return pelab_fail_context(PELAB_ERR_RUNTIME, "%s", path);
    }
    return PELAB_OK;
}

int pelab_run_read_config(const char *dir, struct pelab_opts *settings) {
    memset(settings, 0, sizeof *settings);
    char path[PELAB_PATH_MAX];
    pelab_path(path, dir, "config.json");
    if (!pelab_file_exists(path))
        return pelab_fail(PELAB_ERR_RUNTIME, "%s is not a pelab run directory (no config.json)",
                          dir);
    char *text;
    size_t size;
    int rc = pelab_read_small_file(path, &text, &size);
    if (rc) return rc;
    rc = pelab_config_parse(path, text, size, settings);
    free(text);
    return rc;
}

int pelab_config_parse(const char *path, const char *text, size_t size,
                       struct pelab_opts *settings) {
    memset(settings, 0, sizeof *settings);
    struct pelab_json *j = NULL;
    int rc = pelab_json_parse(text, size, &j);
    if (rc) return pelab_fail_context(PELAB_ERR_RUNTIME, "%s", path);
    if (!pelab_json_get(j, "pelab-version"))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s is not a pelab config (no \"pelab-version\")", path);
    /* "derived" (vocab, max-seq) follows from the task: not a setting. */
    for (int g = 0; g < PELAB_GROUP_DERIVED && !rc; g++) {
        const struct pelab_json *o = pelab_json_get(j, pelab_group_names[g]);
        if (!o) {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: group \"%s\" is missing", path,
                            pelab_group_names[g]);
            break;
        }
        rc = read_group(o, path, pelab_group_names[g], settings);
    }
    /* A run recorded before one of its encoding's options existed reads as it was made: the
     * value the encoding's table gives for runs without it, not today's default (posenc.h). */
    const char *pe = rc ? NULL : pelab_opts_get(settings, "pe");
    const struct pelab_posenc_ops *ops = pe ? pelab_posenc_find(pe) : NULL;
    for (const struct pelab_optdef *d = ops ? ops->options : NULL; d && d->name && !rc; d++) {
        const char *was = pelab_opts_get(settings, d->name) ? NULL : pelab_posenc_unrecorded(ops, d->name);
        if (was && pelab_opts_set(settings, d->name, was))
            rc = pelab_fail_context(PELAB_ERR_RUNTIME, "%s", path);
    }
    pelab_json_free(j);
    return rc;
}

/* Builds the run's encoding alone (no weights) from `opts`: the check of its options. */
static int probe_encoding(const struct pelab_opts *opts, const char *task, const char *pe, int max_seq) {
    struct pelab_posenc probe;
    struct pelab_params params = {0};
    struct pelab_model_io io;
    if (pelab_task_model_io(task, opts, &io)) return PELAB_ERR_USAGE;
    const struct pelab_optdef *M = pelab_model_options;
    int D = (int)pelab_opt_int(opts, M, "d-model"), H = (int)pelab_opt_int(opts, M, "heads");
    int rc = pelab_posenc_init_nd(&probe, pe, opts, &params, D, H, (int)pelab_opt_int(opts, M, "layers"),
                                  max_seq, &io.positions);
    pelab_posenc_free(&probe);
    pelab_params_free(&params);
    return rc;
}

/* The task's evaluation-time options (where the data is, dna's test genome) into the settings
 * the task is built from: each must be one of the run's task. */
static int add_task_eval_opts(struct pelab_opts *settings, const char *dir, const char *task,
                              const struct pelab_opts *eval_opts) {
    const struct pelab_task_ops *ops = pelab_task_find(task);
    for (int i = 0; eval_opts && i < eval_opts->count; i++) {
        const char *key = eval_opts->kv[i].key;
        const struct pelab_task_ops *owner = pelab_task_eval_option_owner(key);
        if (!owner) continue; /* an encoding's: add_eval_opts */
        if (!ops || !pelab_optdef_find(ops->eval_options, key))
            return pelab_fail(PELAB_ERR_USAGE, "--%s applies to runs of --task %s; %s was trained "
                              "with --task %s", key, owner->name, dir, task);
        if (pelab_opts_set(settings, key, eval_opts->kv[i].val)) return PELAB_ERR_USAGE;
    }
    return PELAB_OK;
}

/* Adds the encoding's evaluation-time options to the run's settings: each must be one of the
 * run's encoding, with a value that encoding accepts; anything else is a usage error naming it.
 * (The task's were added before the task was built.) */
static int add_eval_opts(struct pelab_run *r, const char *dir, const char *pe,
                         const struct pelab_opts *eval_opts) {
    if (!eval_opts || !eval_opts->count) return PELAB_OK;
    const struct pelab_posenc_ops *ops = pelab_posenc_find(pe);
    int any = 0;
    for (int i = 0; i < eval_opts->count; i++) {
        const char *key = eval_opts->kv[i].key;
        const struct pelab_posenc_ops *owner = pelab_posenc_eval_option_owner(key);
        if (!owner && pelab_task_eval_option_owner(key)) continue;
        if (!owner) return pelab_fail(PELAB_ERR_USAGE, "unknown option --%s", key);
        if (owner != ops)
            return pelab_fail(PELAB_ERR_USAGE, "--%s applies to runs of --pe %s; %s was trained with --pe %s",
                              key, owner->name, dir, pe);
        any = 1;
    }
    if (!any) return PELAB_OK;
    char cfg_path[PELAB_PATH_MAX];
    pelab_path(cfg_path, dir, "config.json");
    if (probe_encoding(&r->settings, r->task.ops->name, pe, r->task.seq_len))
        return pelab_fail_context(PELAB_ERR_RUNTIME, "%s", cfg_path);
    /* A run fine-tuned with evaluation-time options records them (--init-from): the method
     * given anew (the table's first option) replaces the recorded one with all its settings;
     * another option alone changes that one setting. */
    if (ops->eval_options && ops->eval_options->name &&
        pelab_opts_get(eval_opts, ops->eval_options->name))
        for (const struct pelab_optdef *d = ops->eval_options; d->name; d++)
            pelab_opts_unset(&r->settings, d->name);
    for (int i = 0; i < eval_opts->count; i++)
        if (pelab_posenc_eval_option_owner(eval_opts->kv[i].key) &&
            pelab_opts_set(&r->settings, eval_opts->kv[i].key, eval_opts->kv[i].val))
            return PELAB_ERR_USAGE;
    if (ops->eval_check) {
        const int rc = ops->eval_check(eval_opts, &r->settings);
        if (rc) return rc;
    }
    return probe_encoding(&r->settings, r->task.ops->name, pe, r->task.seq_len);
}

/* The model's V and T as config.json's "derived" group records them (the task's, when the run was
 * made). *found is 0 when there is no such group (then only the task can say). */
static int read_derived(const char *cfg_path, int *vocab, int *max_seq, int *found) {
    *found = 0;
    struct pelab_json *j;
    int rc = pelab_json_load(cfg_path, &j);
    if (rc) return rc;
    const struct pelab_json *d = pelab_json_get(j, "derived");
    const struct pelab_json *v = pelab_json_get(d, "vocab"), *t = pelab_json_get(d, "max-seq");
    const double most = 1 << 24; /* beyond any task's vocabulary and --seq-len */
    if (!d) {
        rc = PELAB_OK;
    } else if (!v || !t || v->type != PELAB_JSON_NUMBER || t->type != PELAB_JSON_NUMBER ||
               !(v->number >= 1 && v->number <= most && v->number == floor(v->number)) ||
               !(t->number >= 1 && t->number <= most && t->number == floor(t->number))) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: \"derived\" needs \"vocab\" and \"max-seq\", "
                        "whole numbers from 1 to %.0f", cfg_path, most);
    } else {
        *vocab = (int)v->number;
        *max_seq = (int)t->number;
        *found = 1;
    }
    pelab_json_free(j);
    return rc;
}

/* Two texts of one setting: config.json rewrites numbers ("1e-3" reads back as 0.001). */
static int same_setting(const char *a, const char *b) {
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    if (*a && *b && !*ea && !*eb) return x == y;
    return strcmp(a, b) == 0;
}

/* model.safetensors must be the model of config.json: every "pelab.config.<name>" its metadata
 * records equals config.json's `name` (`file`, before any evaluation-time option; what a resume
 * may change, the directory and the task's evaluation-time options excepted), its "vocab" and "max-seq" the model's V and T, and its
 * "step" a count no larger than config.json's "steps". A model copied from another run, or a
 * config.json edited after training, is refused naming the setting. */
static int check_model_meta(const struct pelab_st_file *f, const char *path,
                            const struct pelab_opts *file, const struct pelab_model *m,
                            int64_t *step) {
    static const char prefix[] = "pelab.config.";
    const size_t plen = sizeof prefix - 1;
    char derived[2][32];
    snprintf(derived[0], sizeof derived[0], "%d", m->cfg.vocab);
    snprintf(derived[1], sizeof derived[1], "%d", m->cfg.max_seq);
    for (int i = 0; i < f->metadata.count; i++) {
        const char *key = f->metadata.kv[i].key, *val = f->metadata.kv[i].val;
        if (strncmp(key, prefix, plen) != 0) continue;
        const char *name = key + plen;
        /* what a resume may change, where the run is, and where its data is (--data-dir) */
        if (pelab_train_resume_option(name) || strcmp(name, "out") == 0 ||
            pelab_task_eval_option_owner(name))
            continue;
        const char *mine = strcmp(name, "vocab") == 0     ? derived[0]
                           : strcmp(name, "max-seq") == 0 ? derived[1]
                                                          : pelab_opts_get(file, name);
        if (mine && !same_setting(mine, val))
            return pelab_fail(PELAB_ERR_RUNTIME, "%s was trained with %s = %s, but the run's "
                              "config.json has %s (the model of another run, or an edited "
                              "config.json?)", path, name, val, mine);
    }
    const char *v = pelab_opts_get(&f->metadata, "step");
    const char *steps = pelab_opts_get(file, "steps");
    char *end;
    long long n = v ? strtoll(v, &end, 10) : -1;
    if (!v || *v < '0' || *v > '9' || *end || n < 0 || (steps && n > strtoll(steps, NULL, 10)))
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: metadata 'step' is '%s', not a count up to the "
                          "run's %s steps", path, v ? v : "(missing)", steps ? steps : "?");
    *step = n;
    return PELAB_OK;
}

/* with_task 0: the task is not built (no data read) when config.json records V and T. */
static int run_open(struct pelab_run *r, const char *dir, const struct pelab_opts *eval_opts,
                    int with_task) {
    memset(r, 0, sizeof *r);
    int rc = pelab_run_read_config(dir, &r->settings);
    if (rc) return rc;
    char cfg_path[PELAB_PATH_MAX];
    pelab_path(cfg_path, dir, "config.json");
    const char *task = pelab_opts_get(&r->settings, "task");
    const char *pe = pelab_opts_get(&r->settings, "pe");
    if (!task || !pe)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: no %s setting", cfg_path, task ? "pe" : "task");
    if (pelab_train_check_opts(&r->settings, task, &pe, 1, NULL))
        return pelab_fail_context(PELAB_ERR_RUNTIME, "%s", cfg_path);
    /* config.json's settings alone, for the model file's to be checked against. */
    struct pelab_opts *file = malloc(sizeof *file);
    if (!file) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    *file = r->settings;
    if ((rc = add_task_eval_opts(&r->settings, dir, task, eval_opts))) {
        free(file);
        return rc;
    }
    int vocab = 0, max_seq = 0, found = 0;
    if (!with_task && (rc = read_derived(cfg_path, &vocab, &max_seq, &found))) goto out;
    if (!found) {
        /* A task that cannot read its data (a dataset not installed, a damaged cache) says which
         * file and what to run; only a setting it refuses is config.json's fault. */
        if ((rc = pelab_task_init(&r->task, task, &r->settings))) {
            if (rc != PELAB_ERR_RUNTIME) rc = pelab_fail_context(PELAB_ERR_RUNTIME, "%s", cfg_path);
            goto out;
        }
        if ((rc = add_eval_opts(r, dir, pe, eval_opts))) goto fail;
        vocab = r->task.vocab;
        max_seq = r->task.seq_len;
    }
    struct pelab_model_io io;
    if (pelab_task_model_io(task, &r->settings, &io) ||
        pelab_model_init_io(&r->model, &r->settings, vocab, max_seq, &io)) {
        if (r->task.ops) pelab_task_free(&r->task);
        rc = pelab_fail_context(PELAB_ERR_RUNTIME, "%s", cfg_path);
        goto out;
    }
    char path[PELAB_PATH_MAX];
    pelab_path(path, dir, "model.safetensors");
    struct pelab_st_file f;
    if (!pelab_file_exists(path)) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: no model saved yet (missing model.safetensors)",
                        dir);
        goto fail;
    }
    if ((rc = pelab_safetensors_read(path, &f))) goto fail;
    const char *format = pelab_opts_get(&f.metadata, "format");
    if (!format || strcmp(format, "pelab-model") != 0)
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: not a pelab model file (format '%s')", path,
                        format ? format : "none");
    else if (!(rc = check_model_meta(&f, path, file, &r->model, &r->step)))
        rc = pelab_params_load(&f, &r->model.params, path);
    pelab_st_file_free(&f);
    if (rc) goto fail;
    free(file);
    return PELAB_OK;
fail:
    pelab_run_close(r);
out:
    free(file);
    return rc;
}

int pelab_run_open(struct pelab_run *r, const char *dir) { return run_open(r, dir, NULL, 1); }

int pelab_run_open_with(struct pelab_run *r, const char *dir, const struct pelab_opts *eval_opts) {
    return run_open(r, dir, eval_opts, 1);
}

int pelab_run_open_model(struct pelab_run *r, const char *dir) { return run_open(r, dir, NULL, 0); }

void pelab_run_close(struct pelab_run *r) {
    if (r->model.params.data || r->model.layer) pelab_model_free(&r->model);
    if (r->task.ops) pelab_task_free(&r->task);
    memset(&r->task, 0, sizeof r->task);
}
