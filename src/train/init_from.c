/* --init-from RUN: a new run that starts from another run's weights (fine-tuning on a new task,
 * dataset or context length), with a fresh optimizer and schedule.
 *
 *   settings  the source's model and encoding settings are the new run's: one given that differs
 *             (another width, layer count, head count, encoding or encoding setting) is refused
 *             naming it; --dropout and --attention may differ (they do not change the weights'
 *             meaning). --task defaults to the source's; the task's settings that the source
 *             has under the same name are kept unless given (all of them for the same task; for
 *             text → qa the dataset, tokenizer, data and --seq-len). Training settings are not
 *             carried: the new run's own, or their defaults.
 *   fine-tune the evaluation-time options of an encoding with a `fine_tune` table (a length
 *             extension) are accepted by training here only: the fine-tuned run records them
 *             and evaluates with them. The one that measures from the training context (its
 *             `source_context`) is the source's context, not the new --seq-len, unless given.
 *   weights   the source's model.safetensors, checked as `eval` checks it, copied by name: every
 *             parameter of the new model must be the source's, of the same shape, and the
 *             vocabularies equal.
 *   record    config.json's "training" group keeps "init-from" (the path as given) and its
 *             "derived" group "init-from-step" and "init-from-checksum" (the source model file's
 *             step and data CRC-32): a resume that must start over checks them again.
 */
#include <inttypes.h>
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
#include "train/run.h"

/* Two texts of one setting: config.json rewrites numbers ("1e-3" reads back as 0.001). */
static int same_setting(const char *a, const char *b) {
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    if (*a && *b && !*ea && !*eb) return x == y;
    return strcmp(a, b) == 0;
}

/* Settings of the model table that may differ from the source's: neither changes what the
 * weights compute at evaluation. */
static int may_differ(const char *name) {
    return strcmp(name, "dropout") == 0 || strcmp(name, "attention") == 0;
}

/* Every option of `table`: the source's value (or the table's default) into opts where opts has
 * none; where opts has another, a usage error naming it. */
static int carry_table(struct pelab_opts *opts, const struct pelab_opts *src,
                       const struct pelab_optdef *table, const char *dir) {
    for (const struct pelab_optdef *d = table; d && d->name; d++) {
        const char *sv = pelab_opts_get(src, d->name);
        if (!sv) sv = d->def;
        const char *given = pelab_opts_get(opts, d->name);
        if (given) {
            if (!may_differ(d->name) && !same_setting(given, sv))
                return pelab_fail(PELAB_ERR_USAGE, "--init-from %s: that run has --%s %s, not %s "
                                  "(fine-tuning keeps the model and its encoding)", dir, d->name,
                                  sv, given);
            continue;
        }
        if (pelab_opts_set(opts, d->name, sv)) return PELAB_ERR_USAGE;
    }
    return PELAB_OK;
}

/* The source's training context, config.json's "derived" "max-seq"; `option` is what gives it
 * otherwise. */
static int source_context(const char *dir, const char *option, int *len) {
    char path[PELAB_PATH_MAX];
    pelab_path(path, dir, "config.json");
    struct pelab_json *j;
    int rc = pelab_json_load(path, &j);
    if (rc) return rc;
    const struct pelab_json *t = pelab_json_get(pelab_json_get(j, "derived"), "max-seq");
    if (!t || t->type != PELAB_JSON_NUMBER || !(t->number >= 1 && t->number <= 1 << 24))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "--init-from %s: config.json records no \"derived\" "
                        "\"max-seq\" (give --%s, the context it was trained at)", dir, option);
    else
        *len = (int)t->number;
    pelab_json_free(j);
    return rc;
}

/* The fine-tune options of the source's encoding (pe_ops->fine_tune) into opts: those the source
 * was fine-tuned with stay unless the method (the table's first option) is given anew; given
 * anew, the source's settings the new method does not read are dropped (not held against it)
 * and named in `dropped`. Then the option that measures from the training context takes the
 * source's, when read and not given. */
static int carry_fine_tune(struct pelab_opts *opts, const struct pelab_opts *src,
                           const struct pelab_posenc_ops *pe_ops, const char *dir, char *dropped,
                           size_t dropped_size) {
    const struct pelab_pe_fine_tune *ft = pe_ops->fine_tune;
    if (!ft) return PELAB_OK;
    const char *method = pe_ops->eval_options->name;
    const char *new_method = pelab_opts_get(opts, method);
    char list[384] = "";
    for (const struct pelab_optdef *d = pe_ops->eval_options; d->name; d++) {
        const char *sv = pelab_opts_get(src, d->name);
        if (!sv || pelab_opts_get(opts, d->name)) continue;
        if (new_method && !ft->reads(opts, d->name)) {
            size_t n = strlen(list);
            snprintf(list + n, sizeof list - n, "%s--%s %s", n ? ", " : "", d->name, sv);
            continue;
        }
        if (pelab_opts_set(opts, d->name, sv)) return PELAB_ERR_USAGE;
    }
    if (list[0]) snprintf(dropped, dropped_size, "--%s %s does not use them: %s", method, new_method, list);
    const char *len_opt = ft->source_context;
    if (!len_opt || !ft->reads(opts, len_opt) || pelab_opts_get(opts, len_opt)) return PELAB_OK;
    int len = 0;
    int rc = source_context(dir, len_opt, &len);
    if (rc) return rc;
    char v[32];
    snprintf(v, sizeof v, "%d", len);
    return pelab_opts_set(opts, len_opt, v);
}

int pelab_init_from_settings(struct pelab_opts *opts, char *dropped, size_t dropped_size) {
    dropped[0] = '\0';
    const char *dir = pelab_opts_get(opts, "init-from");
    if (!dir || !dir[0]) return PELAB_OK;
    struct pelab_opts *src = malloc(sizeof *src);
    if (!src) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int rc = pelab_run_read_config(dir, src);
    if (rc) {
        rc = pelab_fail_context(PELAB_ERR_RUNTIME, "--init-from");
        goto done;
    }
    const char *pe = pelab_opts_get(src, "pe"), *task = pelab_opts_get(src, "task");
    const struct pelab_posenc_ops *pe_ops = pe ? pelab_posenc_find(pe) : NULL;
    if (!pe_ops || !task || !pelab_task_find(task)) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "--init-from %s: its config.json names no known %s",
                        dir, pe_ops ? "task" : "encoding");
        goto done;
    }
    const char *given_pe = pelab_opts_get(opts, "pe");
    if (given_pe && strcmp(given_pe, pe) != 0) {
        rc = pelab_fail(PELAB_ERR_USAGE, "--init-from %s: that run has --pe %s, not %s "
                        "(fine-tuning keeps the model and its encoding)", dir, pe, given_pe);
        goto done;
    }
    if ((rc = carry_table(opts, src, pelab_model_options, dir))) goto done;
    if ((rc = carry_table(opts, src, pe_ops->options, dir))) goto done;
    if ((rc = carry_fine_tune(opts, src, pe_ops, dir, dropped, dropped_size))) goto done;
    if (!pelab_opts_get(opts, "task") && (rc = pelab_opts_set(opts, "task", task))) goto done;
    /* the task's settings the source has under the same names (all of them for the same task;
     * for text → qa, the dataset, tokenizer, data and length) */
    const struct pelab_task_ops *new_task = pelab_task_find(pelab_opts_get(opts, "task"));
    for (const struct pelab_optdef *d = new_task ? new_task->options : NULL; d && d->name; d++) {
        const char *sv = pelab_opts_get(src, d->name);
        if (sv && !pelab_opts_get(opts, d->name) && pelab_opts_set(opts, d->name, sv)) {
            rc = PELAB_ERR_USAGE;
            goto done;
        }
    }
done:
    free(src);
    return rc;
}

/* The source model file's data CRC-32 (8 hex digits), or "none" for a file edited on purpose. */
static int read_checksum(const char *dir, char *out, size_t size) {
    char path[PELAB_PATH_MAX];
    pelab_path(path, dir, "model.safetensors");
    struct pelab_st_file f;
    int rc = pelab_safetensors_read(path, &f);
    if (rc) return rc;
    const char *crc = pelab_opts_get(&f.metadata, "pelab.data-crc32");
    snprintf(out, size, "%s", crc ? crc : "none");
    pelab_st_file_free(&f);
    return PELAB_OK;
}

/* "(50, 16)" */
static void shape_text(char *buf, size_t size, const struct pelab_param *p) {
    size_t n = (size_t)snprintf(buf, size, "(");
    for (int k = 0; k < p->ndim && n < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, k ? ", " : "", p->shape[k]);
    if (n < size) snprintf(buf + n, size - n, ")");
}

int pelab_init_from_load(struct pelab_trainer *tr) {
    const char *dir = pelab_opts_get(&tr->opts, "init-from");
    if (!dir || !dir[0]) return PELAB_OK;
    struct pelab_run *src = calloc(1, sizeof *src);
    if (!src) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int rc = pelab_run_open_model(src, dir);
    char crc[32] = "";
    if (!rc) rc = read_checksum(dir, crc, sizeof crc);
    if (rc) {
        free(src);
        return pelab_fail_context(PELAB_ERR_RUNTIME, "--init-from");
    }
    const struct pelab_model *from = &src->model;
    struct pelab_model *to = &tr->model;
    if (from->cfg.vocab != to->cfg.vocab) {
        rc = pelab_fail(PELAB_ERR_USAGE, "--init-from %s: that run's vocabulary has %d tokens, "
                        "task %s here has %d (the same tokenizer is needed)", dir,
                        from->cfg.vocab, tr->task.ops->name, to->cfg.vocab);
        goto done;
    }
    for (int i = 0; i < to->params.count && !rc; i++) {
        const struct pelab_param *p = &to->params.list[i];
        int j = pelab_params_find(&from->params, p->name);
        const struct pelab_param *q = j >= 0 ? &from->params.list[j] : NULL;
        int same = q && q->ndim == p->ndim;
        for (int k = 0; same && k < p->ndim; k++) same = q->shape[k] == p->shape[k];
        if (!q)
            rc = pelab_fail(PELAB_ERR_USAGE, "--init-from %s: that run has no tensor %s", dir,
                            p->name);
        else if (!same) {
            char a[96], b[96];
            shape_text(a, sizeof a, q);
            shape_text(b, sizeof b, p);
            /* what sizes the tensor: the image patch (patch_emb.*), else the training context */
            const int patch = strncmp(p->name, "patch_emb.", 10) == 0;
            rc = pelab_fail(PELAB_ERR_USAGE, "--init-from %s: tensor %s is %s there and %s here "
                            "(%s)", dir, p->name, a, b,
                            patch ? "the patch embedding is sized by --patch: keep the source's --patch"
                                  : "a table sized by the training context: keep the source's context length");
        }
    }
    if (!rc && from->params.count != to->params.count)
        rc = pelab_fail(PELAB_ERR_USAGE, "--init-from %s: that run has %d tensors, this model %d",
                        dir, from->params.count, to->params.count);
    if (rc) goto done;
    free(tr->init_data);
    tr->init_data = malloc(to->params.total * sizeof *tr->init_data);
    if (!tr->init_data) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
        goto done;
    }
    for (int i = 0; i < to->params.count; i++) {
        const struct pelab_param *p = &to->params.list[i];
        const struct pelab_param *q = &from->params.list[pelab_params_find(&from->params, p->name)];
        memcpy(tr->init_data + p->offset, from->params.data + q->offset, p->size * sizeof *tr->init_data);
    }
    tr->init_step = src->step;
    snprintf(tr->init_crc, sizeof tr->init_crc, "%s", crc);
done:
    pelab_run_close(src);
    free(src);
    return rc;
}

int pelab_init_from_read_record(struct pelab_trainer *tr) {
    const char *dir = pelab_opts_get(&tr->opts, "init-from");
    if (!dir || !dir[0]) return PELAB_OK;
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "config.json");
    struct pelab_json *j;
    int rc = pelab_json_load(path, &j);
    if (rc) return rc;
    const struct pelab_json *d = pelab_json_get(j, "derived");
    const struct pelab_json *step = pelab_json_get(d, "init-from-step");
    const struct pelab_json *crc = pelab_json_get(d, "init-from-checksum");
    if (!step || step->type != PELAB_JSON_NUMBER || !(step->number >= 0) || !crc ||
        crc->type != PELAB_JSON_STRING || strlen(crc->string) >= sizeof tr->init_crc) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: \"derived\" lacks \"init-from-step\" and "
                        "\"init-from-checksum\" of its --init-from run", path);
    } else {
        tr->init_step = (int64_t)step->number;
        snprintf(tr->init_crc, sizeof tr->init_crc, "%s", crc->string);
    }
    pelab_json_free(j);
    return rc;
}

int pelab_init_from_reload(struct pelab_trainer *tr) {
    const char *dir = pelab_opts_get(&tr->opts, "init-from");
    if (!dir || !dir[0]) return PELAB_OK;
    int64_t step = tr->init_step;
    char crc[sizeof tr->init_crc];
    memcpy(crc, tr->init_crc, sizeof crc);
    int rc = pelab_init_from_load(tr);
    if (!rc && (tr->init_step != step || strcmp(tr->init_crc, crc) != 0))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "--init-from %s: that run's model is now step %" PRId64
                        " (checksum %s), not step %" PRId64 " (checksum %s) this run began from: "
                        "nothing was changed", dir, tr->init_step, tr->init_crc, step, crc);
    return rc;
}
