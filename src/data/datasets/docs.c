/* The document list that dataset builders fill, and directory helpers. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/datasets/datasets.h"
#include "pelab/io.h"
#include "pelab/status.h"

int pelab_docs_add(struct pelab_docs *docs, const char *id, char *text, size_t len, int split) {
    char *id_copy = malloc(strlen(id) + 1);
    if (docs->n == docs->cap) {
        size_t cap = docs->cap ? 2 * docs->cap : 64;
        struct pelab_doc *d = realloc(docs->d, cap * sizeof *d);
        if (d) docs->d = d, docs->cap = cap;
    }
    if (!id_copy || docs->n == docs->cap) {
        free(id_copy);
        free(text);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for document %s", id);
    }
    strcpy(id_copy, id);
    docs->d[docs->n++] = (struct pelab_doc){id_copy, text, len, split};
    return PELAB_OK;
}

void pelab_docs_free(struct pelab_docs *docs) {
    for (size_t i = 0; i < docs->n; i++) {
        free(docs->d[i].id);
        free(docs->d[i].text);
    }
    free(docs->d);
    memset(docs, 0, sizeof *docs);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int pelab_list_dir(const char *dir, int (*keep)(const char *name), char ***names, size_t *count) {
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot open directory: %s", dir, strerror(errno));
    size_t cap = 0;
    int rc = PELAB_OK;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || !keep(e->d_name)) continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 256;
            char **grown = realloc(*names, cap * sizeof **names);
            if (!grown) {
                rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", dir);
                break;
            }
            *names = grown;
        }
        char *s = malloc(strlen(e->d_name) + 1);
        if (!s) {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", dir);
            break;
        }
        strcpy(s, e->d_name);
        (*names)[(*count)++] = s;
    }
    closedir(d);
    if (rc) {
        pelab_free_names(*names, *count);
        *names = NULL;
        *count = 0;
        return rc;
    }
    if (*count) qsort(*names, *count, sizeof **names, by_name);
    return PELAB_OK;
}

void pelab_free_names(char **names, size_t count) {
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

int pelab_read_source(const char *dir, const char *name, char **data, size_t *size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return pelab_read_file(path, data, size);
}
