/* The named parameter table: declare, then one allocation each for values, grads, moments. */
#include <stdlib.h>
#include <string.h>
#include "pelab/params.h"
#include "pelab/status.h"
#include "core/prof.h"

int pelab_params_declare(struct pelab_params *p, const char *name, int ndim, const int64_t *shape,
                         int decay) {
    PELAB_ASSERT(p->data == NULL);
    PELAB_ASSERT(ndim >= 1 && ndim <= PELAB_PARAM_MAX_DIM);
    PELAB_ASSERT(strlen(name) < PELAB_PARAM_NAME_MAX);
    if (p->oom) return p->count++; /* the list is short already: pelab_params_alloc fails */
    PELAB_ASSERT(pelab_params_find(p, name) < 0);
    if (p->count == p->cap) {
        const int cap = p->cap ? 2 * p->cap : 32;
        struct pelab_param *list = realloc(p->list, (size_t)cap * sizeof *list);
        if (!list) {
            p->oom = 1;
            return p->count++;
        }
        p->list = list;
        p->cap = cap;
    }
    struct pelab_param *q = &p->list[p->count];
    memset(q, 0, sizeof *q);
    strcpy(q->name, name);
    q->ndim = ndim;
    q->size = 1;
    for (int i = 0; i < ndim; i++) {
        PELAB_ASSERT(shape[i] > 0);
        q->shape[i] = shape[i];
        q->size *= (size_t)shape[i];
    }
    q->offset = p->total;
    q->decay = decay;
    p->total += q->size;
    return p->count++;
}

void pelab_params_freeze(struct pelab_params *p, int i) {
    if (!p->oom) p->list[i].frozen = 1; /* out of memory: the allocation fails anyway */
}

int pelab_params_alloc(struct pelab_params *p) {
    PELAB_ASSERT(p->data == NULL);
    if (p->oom) {
        const int count = p->count;
        pelab_params_free(p);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory declaring %d parameters", count);
    }
    size_t n = p->total ? p->total : 1;
    p->data = calloc(n, sizeof(pelab_real));
    p->grad = calloc(n, sizeof(pelab_real));
    p->m = calloc(n, sizeof(pelab_real));
    p->v = calloc(n, sizeof(pelab_real));
    if (!p->data || !p->grad || !p->m || !p->v) {
        size_t total = p->total; /* free clears it */
        pelab_params_free(p);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory allocating %zu parameters (%.1f GB "
                          "with gradients and AdamW moments)", total,
                          4.0 * (double)total * sizeof(pelab_real) / 1e9);
    }
    return PELAB_OK;
}

void pelab_params_free(struct pelab_params *p) {
    free(p->list);
    free(p->data);
    free(p->grad);
    free(p->m);
    free(p->v);
    memset(p, 0, sizeof *p);
}

int pelab_params_find(const struct pelab_params *p, const char *name) {
    for (int i = 0; i < p->count && i < p->cap; i++) /* after a failed declaration, the ones listed */
        if (strcmp(p->list[i].name, name) == 0) return i;
    return -1;
}

void pelab_params_zero_grad(struct pelab_params *p) {
    PELAB_PROF_START();
    memset(p->grad, 0, p->total * sizeof(pelab_real));
    PELAB_PROF_STOP(PELAB_PROF_OPTIM, 0);
}
