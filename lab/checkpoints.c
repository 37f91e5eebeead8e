/* The weights a run kept, in step order (checkpoints.h). */
#include "checkpoints.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/io.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Appends a copy of "dir/name" to (*files, *n); 0 when out of memory. */
static int append(char ***files, int *n, const char *dir, const char *name) {
    char **grown = realloc(*files, (size_t)(*n + 1) * sizeof **files);
    if (!grown) return 0;
    *files = grown;
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    if (!path) return 0;
    sprintf(path, "%s/%s", dir, name);
    (*files)[(*n)++] = path;
    return 1;
}

int pelab_weight_files(const char *dir, char ***files, int *n) {
    *files = NULL;
    *n = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/checkpoints", dir);
    int ok = 1;
    DIR *dp = opendir(path);
    for (struct dirent *e; ok && dp && (e = readdir(dp));) {
        const size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "state-", 6) == 0 && len >= 12 && strcmp(e->d_name + len - 12, ".safetensors") == 0)
            ok = append(files, n, path, e->d_name);
    }
    if (dp) closedir(dp);
    if (ok && *n > 1) qsort(*files, (size_t)*n, sizeof **files, cmp_str);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (ok && pelab_file_exists(path)) ok = append(files, n, dir, "model.safetensors");
    if (!ok) {
        pelab_weight_files_free(*files, *n);
        *files = NULL, *n = 0;
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory listing %s", dir);
    }
    if (*n == 0) return pelab_fail(PELAB_ERR_RUNTIME, "%s: no checkpoint and no model.safetensors", dir);
    return PELAB_OK;
}

void pelab_weight_files_free(char **files, int n) {
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
}

/* A state file also holds the optimizer's moments, which are passed over: parameters are found
 * by name. */
int pelab_load_weights(struct pelab_model *m, const char *path, long *step) {
    struct pelab_st_file f;
    int rc = pelab_safetensors_read(path, &f);
    if (rc) return rc;
    for (int i = 0; i < m->params.count && !rc; i++) {
        const struct pelab_param *p = &m->params.list[i];
        const struct pelab_tensor *t = pelab_st_find(&f, p->name);
        pelab_real *dst = pelab_params_data(&m->params, i);
        if (!t || (t->dtype != PELAB_DT_F32 && t->dtype != PELAB_DT_F64) ||
            t->nbytes != p->size * (t->dtype == PELAB_DT_F32 ? 4 : 8)) {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: no tensor '%s' of %zu reals", path, p->name, p->size);
            break;
        }
        for (size_t j = 0; j < p->size; j++) {
            double x;
            if (t->dtype == PELAB_DT_F32) {
                float v;
                memcpy(&v, (const char *)t->data + 4 * j, 4);
                x = v;
            } else {
                memcpy(&x, (const char *)t->data + 8 * j, 8);
            }
            dst[j] = (pelab_real)x;
        }
    }
    const char *s = pelab_opts_get(&f.metadata, "step");
    *step = s ? strtol(s, NULL, 10) : -1;
    pelab_st_file_free(&f);
    return rc;
}
