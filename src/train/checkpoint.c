/* The checkpoints of a run directory:
 *
 *   DIR/checkpoints/state-<step, 10 digits>.safetensors   the newest --keep states
 *   DIR/model.safetensors                                 the weights of the newest one
 *
 * A checkpoint is written whole to a temporary sibling, fsync'ed, renamed into place and the
 * directory fsync'ed (pelab_atomic_*), then older ones beyond --keep are removed, then
 * model.safetensors is replaced. A process killed at any point leaves every checkpoint either
 * complete or absent (and perhaps a temporary file, removed by the next resume); a resume takes
 * the newest one that passes every check and passes over damaged ones, so a run loses at most
 * the updates since its last complete checkpoint. The run directory is locked (flock) while a
 * process trains in it, so two processes never write one run. */
#define _DEFAULT_SOURCE /* flock */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include "pelab/io.h"
#include "pelab/status.h"
#include "train/run.h"

#define CKPT_DIR "checkpoints"
#define CKPT_PREFIX "state-"
#define CKPT_SUFFIX ".safetensors"
#define CKPT_MAX 100000 /* checkpoint files considered in one directory */

struct ckpt {
    int64_t step;
    char name[48];
};

/* The step of a checkpoint file name "state-<digits>.safetensors", or -1. */
static int64_t ckpt_step(const char *name) {
    size_t np = strlen(CKPT_PREFIX), ns = strlen(CKPT_SUFFIX), n = strlen(name);
    if (n <= np + ns || n - np - ns > 18 || strncmp(name, CKPT_PREFIX, np) != 0 ||
        strcmp(name + n - ns, CKPT_SUFFIX) != 0)
        return -1;
    int64_t step = 0;
    for (size_t i = np; i < n - ns; i++) {
        if (name[i] < '0' || name[i] > '9') return -1;
        step = step * 10 + (name[i] - '0');
    }
    return step;
}

static int newest_first(const void *a, const void *b) {
    int64_t x = ((const struct ckpt *)a)->step, y = ((const struct ckpt *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The checkpoint files of DIR/checkpoints, newest first (none when the directory is absent). */
static int ckpt_list(const char *dir, struct ckpt **out, int *n) {
    *out = NULL;
    *n = 0;
    char path[PELAB_PATH_MAX];
    pelab_path(path, dir, CKPT_DIR);
    DIR *d = opendir(path);
    if (!d) {
        if (errno == ENOENT) return PELAB_OK;
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot list: %s", path, strerror(errno));
    }
    struct ckpt *list = NULL;
    int cap = 0, count = 0, rc = PELAB_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t step = ckpt_step(e->d_name);
        size_t len = strlen(e->d_name);
        if (step < 0 || len >= sizeof list->name) continue;
        if (count == CKPT_MAX) {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: more than %d checkpoints", path, CKPT_MAX);
            break;
        }
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            struct ckpt *grown = realloc(list, (size_t)cap * sizeof *list);
            if (!grown) {
                rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", path);
                break;
            }
            list = grown;
        }
        list[count].step = step;
        memcpy(list[count].name, e->d_name, len + 1);
        count++;
    }
    closedir(d);
    if (rc) {
        free(list);
        return rc;
    }
    if (count) qsort(list, (size_t)count, sizeof *list, newest_first);
    *out = list;
    *n = count;
    return PELAB_OK;
}

static void ckpt_path(char *buf, const char *dir, const char *name) {
    int n = snprintf(buf, PELAB_PATH_MAX, "%s/" CKPT_DIR "/%s", dir, name);
    PELAB_ASSERT(n > 0 && n < PELAB_PATH_MAX);
}

/* Keeps the newest `keep` checkpoints up to `step`; removes older ones, and newer ones, which
 * belong to updates this run went back on (a damaged checkpoint passed over, a rollback). */
static void prune(const struct pelab_trainer *tr) {
    struct ckpt *list;
    int n;
    if (ckpt_list(tr->dir, &list, &n)) {
        pelab_clear_error(); /* old files left over are harmless */
        return;
    }
    int64_t kept = 0;
    for (int i = 0; i < n; i++) {
        int keep = list[i].step <= tr->step && kept < tr->c.keep;
        if (keep) {
            kept++;
            continue;
        }
        char path[PELAB_PATH_MAX];
        ckpt_path(path, tr->dir, list[i].name);
        (void)unlink(path);
    }
    free(list);
}

int pelab_ckpt_save(struct pelab_trainer *tr) {
    char dir[PELAB_PATH_MAX], path[PELAB_PATH_MAX], name[48];
    pelab_path(dir, tr->dir, CKPT_DIR);
    snprintf(name, sizeof name, CKPT_PREFIX "%010" PRId64 CKPT_SUFFIX, tr->step);
    ckpt_path(path, tr->dir, name);
    int rc = pelab_log_sync(tr);
    if (!rc) rc = pelab_mkdir_p(dir);
    if (!rc) rc = pelab_state_save(tr, path);
    if (rc) return rc;
    prune(tr);
    if ((rc = pelab_model_file_save(tr))) return rc;
    tr->saved_step = tr->step;
    return PELAB_OK;
}

int pelab_ckpt_restore(struct pelab_trainer *tr, int *found) {
    struct ckpt *list;
    int n;
    *found = 0;
    int rc = ckpt_list(tr->dir, &list, &n);
    if (rc) return rc;
    char path[PELAB_PATH_MAX], first_error[1024] = "";
    for (int i = 0; i < n; i++) {
        ckpt_path(path, tr->dir, list[i].name);
        rc = pelab_state_load(tr, path, list[i].step);
        if (rc == PELAB_OK) {
            *found = 1;
            tr->saved_step = tr->step;
            break;
        }
        if (!first_error[0]) snprintf(first_error, sizeof first_error, "%s", pelab_last_error());
        if (i + 1 < n)
            pelab_train_notice(tr, "%s; falling back to the checkpoint of step %" PRId64,
                               pelab_last_error(), list[i + 1].step);
    }
    free(list);
    if (*found) prune(tr); /* what a kill between a checkpoint and its pruning left */
    if (n > 0 && !*found)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s/" CKPT_DIR ": none of the %d checkpoints is "
                          "usable (the newest: %s)", tr->dir, n, first_error);
    pelab_path(path, tr->dir, "state.safetensors");
    if (n == 0 && pelab_file_exists(path))
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: a checkpoint of pelab 0.1.0 (format version 1); "
                          "this pelab reads DIR/" CKPT_DIR "/ (start the run over, or use the "
                          "pelab that wrote it)", path);
    return PELAB_OK;
}

/* Why DIR/model.safetensors is not the weights of tr->step: "" when it is. */
static void model_fault(struct pelab_trainer *tr, const char *path, char *why, size_t size) {
    why[0] = '\0';
    if (!pelab_file_exists(path)) {
        snprintf(why, size, "%s is missing", path);
        return;
    }
    struct pelab_st_file f;
    if (pelab_safetensors_read(path, &f)) {
        snprintf(why, size, "%s", pelab_last_error());
        return;
    }
    const char *format = pelab_opts_get(&f.metadata, "format");
    const char *step = pelab_opts_get(&f.metadata, "step");
    char want[32];
    snprintf(want, sizeof want, "%" PRId64, tr->step);
    /* The gradients are free between updates: a scratch copy of the table to load into. */
    struct pelab_params scratch = tr->model.params;
    scratch.data = tr->model.params.grad;
    if (!format || strcmp(format, "pelab-model") != 0)
        snprintf(why, size, "%s: not a pelab model file", path);
    else if (!step || strcmp(step, want) != 0)
        snprintf(why, size, "%s holds step %s", path, step ? step : "none");
    else if (pelab_params_load(&f, &scratch, path))
        snprintf(why, size, "%s", pelab_last_error());
    else if (memcmp(scratch.data, tr->model.params.data,
                    scratch.total * sizeof(pelab_real)) != 0)
        snprintf(why, size, "%s holds other weights than the checkpoint", path);
    pelab_st_file_free(&f);
}

int pelab_ckpt_repair_model(struct pelab_trainer *tr) {
    char path[PELAB_PATH_MAX], why[PELAB_PATH_MAX + 1024];
    pelab_path(path, tr->dir, "model.safetensors");
    model_fault(tr, path, why, sizeof why);
    pelab_params_zero_grad(&tr->model.params);
    pelab_clear_error();
    if (!why[0]) return PELAB_OK;
    pelab_train_notice(tr, "%s; rewriting it from the checkpoint of step %" PRId64, why, tr->step);
    return pelab_model_file_save(tr);
}

/* ---- the lock, and what interrupted writes leave ------------------------------------------ */

/* Removes "<name>.tmp.XXXXXX" files of DIR/sub (sub may be "") that pelab_atomic_open made. */
static void remove_temps(const char *dir, const char *sub) {
    char path[PELAB_PATH_MAX];
    pelab_path(path, dir, sub);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *t = strstr(e->d_name, ".tmp.");
        if (!t || strlen(t) != strlen(".tmp.XXXXXX")) continue;
        char file[PELAB_PATH_MAX];
        if (snprintf(file, sizeof file, "%s/%s", path, e->d_name) < (int)sizeof file)
            (void)unlink(file);
    }
    closedir(d);
}

int pelab_run_lock(struct pelab_trainer *tr) {
    tr->lock_fd = open(tr->dir, O_RDONLY | O_DIRECTORY);
    if (tr->lock_fd < 0)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot open the run directory: %s", tr->dir,
                          strerror(errno));
    if (flock(tr->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        if (err == EWOULDBLOCK) {
            pelab_run_unlock(tr);
            const long pid = pelab_flock_holder(tr->dir);
            if (pid)
                return pelab_fail(PELAB_ERR_RUNTIME, "%s: process %ld is training this run (a pelab "
                                  "train or compare that holds its lock)", tr->dir, pid);
            return pelab_fail(PELAB_ERR_RUNTIME, "%s: another pelab process is training this run",
                              tr->dir);
        }
        /* A file system without locks: train unlocked rather than not at all. */
    }
    remove_temps(tr->dir, "");
    remove_temps(tr->dir, CKPT_DIR);
    return PELAB_OK;
}

void pelab_run_unlock(struct pelab_trainer *tr) {
    if (tr->lock_fd >= 0) close(tr->lock_fd);
    tr->lock_fd = -1;
}
