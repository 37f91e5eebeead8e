/* Checkpoint contents: the state file (weights, AdamW moments and counters: everything an exact
 * resume needs, format "pelab-state" version 2) and model.safetensors (weights and settings:
 * what eval, sample and PyTorch read). Where checkpoints live is checkpoint.c's business.
 *
 * A state file is checked whole before anything of it is used: a file that passes the
 * safetensors checks (both CRCs) may still be foreign — another model's shapes, another run's
 * settings, a counter out of range, a non-finite weight — and is refused naming the fault, so
 * the caller can fall back to an older checkpoint with the run left as it was.
 *
 * Also the state at step 0 (pelab_trainer_fresh_start) and, across MPI ranks, rank 0's restored
 * state sent to the others (pelab_trainer_sync). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/dist.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "train/run.h"

#ifdef PELAB_DOUBLE
#define REAL_DT PELAB_DT_F64
#else
#define REAL_DT PELAB_DT_F32
#endif

#define STATE_FORMAT "pelab-state"
#define STATE_VERSION "2"
#define CONFIG_PREFIX "pelab.config."

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

/* "log-aux-sum.<name>": the log interval's sum of the encoding's own loss term i. */
static const char *aux_key(char *buf, size_t size, const struct pelab_trainer *tr, int i) {
    snprintf(buf, size, "log-aux-sum.%s", tr->model.pe.ops->aux_names[i]);
    return buf;
}

int pelab_state_save(const struct pelab_trainer *tr, const char *path) {
    const struct pelab_params *P = &tr->model.params;
    char key[96];
    struct pelab_opts *meta = calloc(1, sizeof *meta);
    struct pelab_tensor *ts = calloc((size_t)P->count * 3, sizeof *ts);
    if (!meta || !ts) {
        free(meta);
        free(ts);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory writing a checkpoint", path);
    }
    for (int i = 0; i < P->count; i++) {
        tensor(&ts[3 * i], "", &P->list[i], P->data);
        tensor(&ts[3 * i + 1], "adam.m.", &P->list[i], P->m);
        tensor(&ts[3 * i + 2], "adam.v.", &P->list[i], P->v);
    }
    /* Doubles as C99 hex floats: exact, so the resumed run's logged means match bit for bit. */
    int rc = pelab_opts_set(meta, "format", STATE_FORMAT);
    if (!rc) rc = pelab_opts_set(meta, "format-version", STATE_VERSION);
    if (!rc) rc = pelab_opts_set(meta, "pelab-version", PELAB_VERSION);
    if (!rc) rc = meta_printf(meta, "step", "%" PRId64, tr->step);
    if (!rc) rc = meta_printf(meta, "data-cursor", "%" PRIu64, tr->cursor);
    if (!rc) rc = meta_printf(meta, "adam-step", "%" PRId64, tr->opt.step);
    if (!rc) rc = meta_printf(meta, "elapsed-s", "%a", tr->elapsed_s);
    if (!rc) rc = meta_printf(meta, "train-s", "%a", tr->train_s);
    if (!rc) rc = meta_printf(meta, "log-loss-sum", "%a", tr->log_loss);
    if (!rc) rc = meta_printf(meta, "log-acc-sum", "%a", tr->log_acc);
    if (!rc) rc = meta_printf(meta, "log-count", "%" PRId64, tr->log_n);
    if (!rc) rc = meta_printf(meta, "log-skipped", "%" PRId64, tr->log_skipped);
    for (int i = 0; i < tr->n_aux && !rc; i++) /* the encoding's own loss terms */
        rc = meta_printf(meta, aux_key(key, sizeof key, tr, i), "%a", tr->log_aux[i]);
    if (!rc) rc = meta_printf(meta, "last-loss", "%a", tr->last_loss);
    if (!rc) rc = meta_printf(meta, "last-acc", "%a", tr->last_acc);
    if (!rc) rc = meta_printf(meta, "lr-scale", "%a", tr->lr_scale);
    if (!rc) rc = meta_printf(meta, "nan-rollbacks", "%" PRId64, tr->nan_rollbacks);
    if (!rc) rc = meta_printf(meta, "nan-skips", "%" PRId64, tr->nan_skips);
    if (!rc) rc = pelab_opts_set(meta, "trained-by", tr->trained_by);
    if (!rc) rc = pelab_settings_metadata(&tr->settings, meta);
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

/* ---- reading ------------------------------------------------------------------------------- */

/* The tensor prefix+p->name: present, the parameter's shape, F32 or F64, finite (and >= 0 for
 * second moments); NULL with the error otherwise. */
static const struct pelab_tensor *check_tensor(const struct pelab_st_file *f, const char *path,
                                               const char *prefix, const struct pelab_param *p) {
    char name[160];
    snprintf(name, sizeof name, "%s%s", prefix, p->name);
    const struct pelab_tensor *t = pelab_st_find(f, name);
    if (!t) {
        pelab_fail(PELAB_ERR_RUNTIME, "%s: tensor '%s' is missing", path, name);
        return NULL;
    }
    int same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
    if (!same) {
        pelab_fail(PELAB_ERR_RUNTIME, "%s: tensor '%s' has another shape than the model's", path,
                   name);
        return NULL;
    }
    if (t->dtype != PELAB_DT_F32 && t->dtype != PELAB_DT_F64) {
        pelab_fail(PELAB_ERR_RUNTIME, "%s: tensor '%s' is not F32 or F64", path, name);
        return NULL;
    }
    int second_moment = strcmp(prefix, "adam.v.") == 0;
    for (size_t i = 0; i < p->size; i++) {
        double x = pelab_tensor_element(t, i);
        if (!isfinite(x) || (second_moment && x < 0)) {
            pelab_fail(PELAB_ERR_RUNTIME, "%s: tensor '%s' holds %g at element %zu", path, name,
                       pelab_printable(x), i);
            return NULL;
        }
    }
    return t;
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
    if (!*v || *end || errno || n < 0 || *v < '0' || *v > '9')
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: metadata '%s' is not a count: '%s'", path, key,
                          v);
    *x = n;
    return PELAB_OK;
}

/* A finite number >= 0. */
static int meta_real(const struct pelab_st_file *f, const char *path, const char *key, double *x) {
    const char *v;
    int rc = meta_get(f, path, key, &v);
    if (rc) return rc;
    char *end;
    *x = strtod(v, &end);
    if (!*v || *end || !isfinite(*x) || *x < 0)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: metadata '%s' is not a finite number >= 0: "
                          "'%s'", path, key, v);
    return PELAB_OK;
}

/* Settings a resume may change, and the directory, which follows the run wherever it moves. */
static int may_differ(const char *key) {
    return pelab_train_resume_option(key) || strcmp(key, "out") == 0;
}

/* Two texts of one setting: config.json rewrites numbers ("1e-3" reads back as 0.001). */
static int same_setting(const char *a, const char *b) {
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    if (*a && *b && !*ea && !*eb) return x == y;
    return strcmp(a, b) == 0;
}

/* Every setting the checkpoint records must equal the run's (config.json): a checkpoint of
 * another run is refused even when its shapes fit. Settings only one side knows are skipped. */
static int check_settings(const struct pelab_st_file *f, const char *path,
                          const struct pelab_settings *s) {
    size_t plen = strlen(CONFIG_PREFIX);
    for (int i = 0; i < f->metadata.count; i++) {
        const char *key = f->metadata.kv[i].key;
        if (strncmp(key, CONFIG_PREFIX, plen) != 0 || may_differ(key + plen)) continue;
        for (int g = 0; g < PELAB_GROUPS; g++) {
            const char *mine = pelab_opts_get(&s->group[g], key + plen);
            if (mine && !same_setting(mine, f->metadata.kv[i].val))
                return pelab_fail(PELAB_ERR_RUNTIME, "%s: written with %s = %s, the run's "
                                  "config.json has %s (a checkpoint of another run?)", path,
                                  key + plen, f->metadata.kv[i].val, mine);
        }
    }
    return PELAB_OK;
}

/* The counters a checkpoint records. */
struct counters {
    int64_t step, cursor, adam_step, log_n, log_skipped, rollbacks, skips;
    double elapsed, train, log_loss, log_acc, last_loss, last_acc, lr_scale;
    double log_aux[PELAB_PE_AUX_MAX];
};

static int read_counters(const struct pelab_st_file *f, const char *path,
                         const struct pelab_trainer *tr, struct counters *c) {
    int rc = meta_int(f, path, "step", &c->step);
    if (!rc) rc = meta_int(f, path, "adam-step", &c->adam_step);
    if (!rc) rc = meta_int(f, path, "log-count", &c->log_n);
    if (!rc) rc = meta_int(f, path, "log-skipped", &c->log_skipped);
    if (!rc) rc = meta_int(f, path, "nan-rollbacks", &c->rollbacks);
    if (!rc) rc = meta_int(f, path, "nan-skips", &c->skips);
    if (!rc) rc = meta_real(f, path, "elapsed-s", &c->elapsed);
    if (!rc) rc = meta_real(f, path, "train-s", &c->train);
    if (!rc) rc = meta_real(f, path, "log-loss-sum", &c->log_loss);
    if (!rc) rc = meta_real(f, path, "log-acc-sum", &c->log_acc);
    if (!rc) rc = meta_real(f, path, "last-loss", &c->last_loss);
    if (!rc) rc = meta_real(f, path, "last-acc", &c->last_acc);
    if (!rc) rc = meta_real(f, path, "lr-scale", &c->lr_scale);
    char key[96];
    for (int i = 0; i < tr->n_aux && !rc; i++)
        rc = meta_real(f, path, aux_key(key, sizeof key, tr, i), &c->log_aux[i]);
    if (rc) return rc;
    /* The cursor is a full 64-bit count: read it unsigned. */
    const char *v;
    if ((rc = meta_get(f, path, "data-cursor", &v))) return rc;
    char *end;
    errno = 0;
    unsigned long long cur = strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end || errno)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: metadata 'data-cursor' is not a count: '%s'",
                          path, v);
    c->cursor = (int64_t)cur;
    if (c->adam_step > c->step || c->log_n + c->log_skipped > c->step || c->skips > c->step)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: counters do not fit step %" PRId64 " (adam-step "
                          "%" PRId64 ", log-count %" PRId64 ", log-skipped %" PRId64 ", nan-skips "
                          "%" PRId64 ")", path, c->step, c->adam_step, c->log_n, c->log_skipped,
                          c->skips);
    /* Every update, made or skipped, draws batch x accum examples from the seed-derived origin
     * (a rollback restores an earlier checkpoint's cursor with its step). */
    uint64_t want = tr->task.train_origin +
                    (uint64_t)c->step * (uint64_t)tr->c.batch * (uint64_t)tr->c.accum;
    if ((uint64_t)c->cursor != want)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: metadata 'data-cursor' %llu does not fit step "
                          "%" PRId64 " (the run's data cursor there is %llu: its origin plus "
                          "step x batch x accum)", path, (unsigned long long)c->cursor, c->step,
                          (unsigned long long)want);
    if (!(c->lr_scale > 0 && c->lr_scale <= 1))
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: metadata 'lr-scale' %g is not in (0, 1]", path,
                          c->lr_scale);
    return PELAB_OK;
}

/* The builds that trained a run continued from a checkpoint: the checkpoint's list ("unrecorded"
 * when it has none), and this build's commit unless it is the list's last (a resume that only
 * evaluates the run again counts: its summary's numbers are this build's). A list too long to
 * keep names its first build, "...", and this one. A list holds letters, digits, '+' (a commit's
 * "+changes"), '.' ("...") and ','; any other byte of the file's list is written as '?', so a
 * damaged list cannot put a broken character into the next checkpoint's header or the summary. */
static void continue_trained_by(char *out, size_t size, const char *recorded) {
    char list[PELAB_OPT_VAL_MAX];
    size_t len = 0;
    for (; recorded[len] && len + 1 < sizeof list; len++) {
        const unsigned char c = (unsigned char)recorded[len];
        list[len] = isalnum(c) || strchr("+.,", c) ? (char)c : '?';
    }
    list[len] = '\0';
    const char *now = pelab_commit();
    const char *last = strrchr(list, ',');
    last = last ? last + 1 : list;
    const int n = strcmp(last, now) == 0 ? snprintf(out, size, "%s", list) : snprintf(out, size, "%s,%s", list, now);
    if (n < 0 || (size_t)n >= size) {
        const size_t first = strcspn(list, ",");
        snprintf(out, size, "%.*s,...,%s", (int)(first < 64 ? first : 64), list, now);
    }
}

static int check_format(const struct pelab_st_file *f, const char *path) {
    const char *format = pelab_opts_get(&f->metadata, "format");
    if (!format || strcmp(format, STATE_FORMAT) != 0)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: not a pelab checkpoint (format '%s')", path,
                          format ? format : "none");
    const char *version = pelab_opts_get(&f->metadata, "format-version");
    if (!version || strcmp(version, STATE_VERSION) != 0)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: checkpoint format version %s; this pelab reads "
                          "version " STATE_VERSION " (start the run over, or use the pelab that "
                          "wrote it)", path, version ? version : "1 (pelab 0.1.0)");
    return PELAB_OK;
}

int pelab_state_from_file(struct pelab_trainer *tr, const struct pelab_st_file *f,
                          const char *path, int64_t expect_step) {
    int rc = check_format(f, path);
    if (rc) return rc;
    struct counters c;
    if ((rc = meta_int(f, path, "step", &c.step))) return rc;
    if (expect_step >= 0 && c.step != expect_step)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: holds step %" PRId64 ", its name says %" PRId64,
                          path, c.step, expect_step);
    if ((rc = read_counters(f, path, tr, &c))) return rc;
    if ((rc = check_settings(f, path, &tr->settings))) return rc;
    const struct pelab_params *P = &tr->model.params;
    if (f->count != 3 * P->count)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: holds %d tensors, the model needs %d", path,
                          f->count, 3 * P->count);
    const struct pelab_tensor **found = malloc((size_t)(3 * P->count + 1) * sizeof *found);
    if (!found) return pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", path);
    static const char *const prefix[3] = {"", "adam.m.", "adam.v."};
    for (int i = 0; i < 3 * P->count; i++)
        if (!(found[i] = check_tensor(f, path, prefix[i % 3], &P->list[i / 3]))) {
            free(found);
            return PELAB_ERR_RUNTIME;
        }

    /* Everything checked: now the run takes it. */
    pelab_real *dst[3] = {P->data, P->m, P->v};
    for (int i = 0; i < 3 * P->count; i++) {
        const struct pelab_param *p = &P->list[i / 3];
        pelab_tensor_copy(dst[i % 3] + p->offset, found[i], p->size);
    }
    free(found);
    tr->step = c.step;
    tr->cursor = (uint64_t)c.cursor;
    tr->opt.step = c.adam_step;
    tr->elapsed_s = c.elapsed;
    tr->train_s = c.train;
    tr->log_loss = c.log_loss;
    tr->log_acc = c.log_acc;
    for (int i = 0; i < tr->n_aux; i++) tr->log_aux[i] = c.log_aux[i];
    tr->log_n = c.log_n;
    tr->log_skipped = c.log_skipped;
    tr->last_loss = c.last_loss;
    tr->last_acc = c.last_acc;
    tr->lr_scale = c.lr_scale;
    tr->nan_rollbacks = c.rollbacks;
    tr->nan_skips = c.skips;
    const char *by = pelab_opts_get(&f->metadata, "trained-by");
    continue_trained_by(tr->trained_by, sizeof tr->trained_by, by && by[0] ? by : "unrecorded");
    return PELAB_OK;
}

int pelab_state_load(struct pelab_trainer *tr, const char *path, int64_t expect_step) {
    struct pelab_st_file f;
    int rc = pelab_safetensors_read(path, &f);
    if (rc) return rc;
    rc = pelab_state_from_file(tr, &f, path, expect_step);
    pelab_st_file_free(&f);
    return rc;
}

void pelab_trainer_fresh_start(struct pelab_trainer *tr) {
    if (tr->init_data) /* --init-from: the source's weights, a fresh optimizer */
        memcpy(tr->model.params.data, tr->init_data, tr->model.params.total * sizeof *tr->init_data);
    else
        pelab_model_init_weights(&tr->model, tr->c.seed);
    memset(tr->model.params.m, 0, tr->model.params.total * sizeof(pelab_real));
    memset(tr->model.params.v, 0, tr->model.params.total * sizeof(pelab_real));
    tr->opt.step = 0;
    tr->step = 0;
    tr->cursor = tr->task.train_origin;
    tr->elapsed_s = tr->train_s = 0;
    tr->log_loss = tr->log_acc = 0;
    tr->log_n = tr->log_skipped = 0;
    for (int i = 0; i < PELAB_PE_AUX_MAX; i++) tr->log_aux[i] = 0;
    tr->last_loss = tr->last_acc = 0;
    tr->lr_scale = 1;
    tr->nan_rollbacks = tr->nan_skips = 0;
    snprintf(tr->trained_by, sizeof tr->trained_by, "%s", pelab_commit());
}

/* What a restored checkpoint sets beyond the weights and moments (the counters above, and what a
 * run keeps of them between checkpoints), as plain bytes for a broadcast. */
struct sync_state {
    int64_t step, adam_step, log_n, log_skipped, nan_rollbacks, nan_skips, saved_step;
    uint64_t cursor;
    double elapsed_s, train_s, log_loss, log_acc, last_loss, last_acc, lr_scale;
    double log_aux[PELAB_PE_AUX_MAX];
    int aux_on[PELAB_PE_AUX_MAX];
    int found;
};

int pelab_trainer_sync(struct pelab_trainer *tr, int rc, int *found) {
    if ((rc = pelab_dist_agree(&tr->ctx->dist, rc)) || tr->ctx->dist.size == 1) return rc;
    struct sync_state k = {tr->step, tr->opt.step, tr->log_n, tr->log_skipped, tr->nan_rollbacks,
                         tr->nan_skips, tr->saved_step, tr->cursor, tr->elapsed_s, tr->train_s,
                         tr->log_loss, tr->log_acc, tr->last_loss, tr->last_acc, tr->lr_scale,
                         {0}, {0}, *found};
    memcpy(k.log_aux, tr->log_aux, sizeof k.log_aux);
    memcpy(k.aux_on, tr->aux_on, sizeof k.aux_on);
    pelab_dist_bcast(&tr->ctx->dist, &k, sizeof k);
    *found = k.found;
    if (!k.found) return PELAB_OK; /* every rank starts afresh, alike */
    const struct pelab_params *P = &tr->model.params;
    pelab_dist_bcast(&tr->ctx->dist, P->data, P->total * sizeof *P->data);
    pelab_dist_bcast(&tr->ctx->dist, P->m, P->total * sizeof *P->m);
    pelab_dist_bcast(&tr->ctx->dist, P->v, P->total * sizeof *P->v);
    tr->step = k.step;
    tr->opt.step = k.adam_step;
    tr->log_n = k.log_n;
    tr->log_skipped = k.log_skipped;
    tr->nan_rollbacks = k.nan_rollbacks;
    tr->nan_skips = k.nan_skips;
    tr->saved_step = k.saved_step;
    tr->cursor = k.cursor;
    tr->elapsed_s = k.elapsed_s;
    tr->train_s = k.train_s;
    tr->log_loss = k.log_loss;
    tr->log_acc = k.log_acc;
    tr->last_loss = k.last_loss;
    tr->last_acc = k.last_acc;
    tr->lr_scale = k.lr_scale;
    memcpy(tr->log_aux, k.log_aux, sizeof k.log_aux);
    memcpy(tr->aux_on, k.aux_on, sizeof k.aux_on);
    return PELAB_OK;
}
