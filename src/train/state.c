/* Checkpoint files: state.safetensors (weights, AdamW moments and counters: everything an exact
 * resume needs) and model.safetensors (weights and settings: what eval, sample and PyTorch read).
 *
 * The state file carries the weights too, and is written before the model file: a run killed
 * between the two renames still resumes from a consistent state, and model.safetensors is at
 * worst one checkpoint older. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "train/run.h"

#ifdef PELAB_DOUBLE
#define REAL_DT PELAB_DT_F64
#else
#define REAL_DT PELAB_DT_F32
#endif

static int meta_printf(struct pelab_opts *meta, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int meta_printf(struct pelab_opts *meta, const char *key, const char *fmt, ...) {
    char val[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    return pelab_opts_set(meta, key, val);
}

static void tensor(struct pelab_tensor *t, const char *prefix, const struct pelab_param *p,
                   const pelab_real *base) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s%s", prefix, p->name);
    t->dtype = REAL_DT;
    t->ndim = p->ndim;
    for (int d = 0; d < p->ndim; d++) t->shape[d] = p->shape[d];
    t->data = base + p->offset;
    t->nbytes = p->size * sizeof(pelab_real);
}

int pelab_state_save(const struct pelab_trainer *tr) {
    const struct pelab_params *P = &tr->model.params;
    struct pelab_opts *meta = calloc(1, sizeof *meta);
    struct pelab_tensor *ts = calloc((size_t)P->count * 3, sizeof *ts);
    if (!meta || !ts) {
        free(meta);
        free(ts);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory writing a checkpoint");
    }
    for (int i = 0; i < P->count; i++) {
        tensor(&ts[3 * i], "", &P->list[i], P->data);
        tensor(&ts[3 * i + 1], "adam.m.", &P->list[i], P->m);
        tensor(&ts[3 * i + 2], "adam.v.", &P->list[i], P->v);
    }
    /* Doubles as C99 hex floats: exact, so the resumed run's logged means match bit for bit. */
    int rc = pelab_opts_set(meta, "format", "pelab-state");
    if (!rc) rc = pelab_opts_set(meta, "pelab-version", PELAB_VERSION);
    if (!rc) rc = meta_printf(meta, "step", "%" PRId64, tr->step);
    if (!rc) rc = meta_printf(meta, "data-cursor", "%" PRIu64, tr->cursor);
    if (!rc) rc = meta_printf(meta, "adam-step", "%" PRId64, tr->opt.step);
    if (!rc) rc = meta_printf(meta, "elapsed-s", "%a", tr->elapsed_s);
    if (!rc) rc = meta_printf(meta, "train-s", "%a", tr->train_s);
    if (!rc) rc = meta_printf(meta, "log-loss-sum", "%a", tr->log_loss);
    if (!rc) rc = meta_printf(meta, "log-acc-sum", "%a", tr->log_acc);
    if (!rc) rc = meta_printf(meta, "log-count", "%" PRId64, tr->log_n);
    if (!rc) rc = meta_printf(meta, "last-loss", "%a", tr->last_loss);
    if (!rc) rc = meta_printf(meta, "last-acc", "%a", tr->last_acc);
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "state.safetensors");
    if (!rc) rc = pelab_safetensors_write(path, ts, P->count * 3, meta);
    free(meta);
    free(ts);
    return rc;
}

int pelab_model_file_save(const struct pelab_trainer *tr) {
    struct pelab_opts *meta = calloc(1, sizeof *meta);
    if (!meta) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory writing a checkpoint");
    int rc = pelab_opts_set(meta, "format", "pelab-model");
    if (!rc) rc = pelab_opts_set(meta, "pelab-version", PELAB_VERSION);
    if (!rc) rc = meta_printf(meta, "step", "%" PRId64, tr->step);
    if (!rc) rc = pelab_settings_metadata(&tr->settings, meta);
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "model.safetensors");
    if (!rc) rc = pelab_params_save(path, &tr->model.params, meta);
    free(meta);
    return rc;
}

/* Copies one tensor of the file into dst, converting F32/F64, after checking its shape. */
static int load_tensor(const struct pelab_st_file *f, const char *path, const char *prefix,
                       const struct pelab_param *p, pelab_real *dst) {
    char name[160];
    snprintf(name, sizeof name, "%s%s", prefix, p->name);
    const struct pelab_tensor *t = pelab_st_find(f, name);
    if (!t) return pelab_fail(PELAB_ERR_RUNTIME, "%s: tensor '%s' is missing", path, name);
    int same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
    if (!same)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: tensor '%s' has another shape than the model's",
                          path, name);
    if (t->dtype == PELAB_DT_F32) {
        const float *s = t->data;
        for (size_t i = 0; i < p->size; i++) dst[i] = (pelab_real)s[i];
    } else if (t->dtype == PELAB_DT_F64) {
        const double *s = t->data;
        for (size_t i = 0; i < p->size; i++) dst[i] = (pelab_real)s[i];
    } else {
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: tensor '%s' is not F32 or F64", path, name);
    }
    return PELAB_OK;
}

static int meta_get(const struct pelab_st_file *f, const char *path, const char *key,
                    const char **val) {
    *val = pelab_opts_get(&f->metadata, key);
    if (!*val)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: metadata '%s' is missing", path, key);
    return PELAB_OK;
}

static int meta_int(const struct pelab_st_file *f, const char *path, const char *key, int64_t *x) {
    const char *v;
    int rc = meta_get(f, path, key, &v);
    if (rc) return rc;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < 0)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: metadata '%s' is not a count: '%s'", path, key, v);
    *x = n;
    return PELAB_OK;
}

static int meta_real(const struct pelab_st_file *f, const char *path, const char *key, double *x) {
    const char *v;
    int rc = meta_get(f, path, key, &v);
    if (rc) return rc;
    char *end;
    *x = strtod(v, &end);
    if (!*v || *end)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: metadata '%s' is not a number: '%s'", path, key, v);
    return PELAB_OK;
}

int pelab_state_load(struct pelab_trainer *tr, const char *path) {
    struct pelab_st_file f;
    int rc = pelab_safetensors_read(path, &f);
    if (rc) return rc;
    const char *format = pelab_opts_get(&f.metadata, "format");
    if (!format || strcmp(format, "pelab-state") != 0) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: not a pelab state file (format '%s')", path,
                        format ? format : "none");
        goto done;
    }
    const struct pelab_params *P = &tr->model.params;
    if (f.count != 3 * P->count) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: holds %d tensors, the model needs %d", path,
                        f.count, 3 * P->count);
        goto done;
    }
    for (int i = 0; i < P->count && !rc; i++) {
        const struct pelab_param *p = &P->list[i];
        rc = load_tensor(&f, path, "", p, P->data + p->offset);
        if (!rc) rc = load_tensor(&f, path, "adam.m.", p, P->m + p->offset);
        if (!rc) rc = load_tensor(&f, path, "adam.v.", p, P->v + p->offset);
    }
    int64_t cursor = 0, log_n = 0;
    if (!rc) rc = meta_int(&f, path, "step", &tr->step);
    if (!rc) rc = meta_int(&f, path, "data-cursor", &cursor);
    if (!rc) rc = meta_int(&f, path, "adam-step", &tr->opt.step);
    if (!rc) rc = meta_real(&f, path, "elapsed-s", &tr->elapsed_s);
    if (!rc) rc = meta_real(&f, path, "train-s", &tr->train_s);
    if (!rc) rc = meta_real(&f, path, "log-loss-sum", &tr->log_loss);
    if (!rc) rc = meta_real(&f, path, "log-acc-sum", &tr->log_acc);
    if (!rc) rc = meta_int(&f, path, "log-count", &log_n);
    if (!rc) rc = meta_real(&f, path, "last-loss", &tr->last_loss);
    if (!rc) rc = meta_real(&f, path, "last-acc", &tr->last_acc);
    tr->cursor = (uint64_t)cursor;
    tr->log_n = log_n;
done:
    pelab_st_file_free(&f);
    return rc;
}
