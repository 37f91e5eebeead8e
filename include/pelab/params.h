/* pelab/params.h — the named parameter table.
 *
 * Every learnable tensor is declared here by name ("blocks.3.attn.pope.delta") with its shape
 * and whether weight decay applies. After all declarations one allocation holds the values, one
 * the gradients and two the AdamW moments, in declaration order; so the optimizer is one flat
 * loop, a checkpoint is one write, and safetensors names come for free.
 */
#ifndef PELAB_PARAMS_H
#define PELAB_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include "pelab/real.h"

#define PELAB_PARAM_NAME_MAX 64
#define PELAB_PARAM_MAX_DIM 4

struct pelab_param {
    char name[PELAB_PARAM_NAME_MAX];
    int ndim;
    int64_t shape[PELAB_PARAM_MAX_DIM];
    size_t offset; /* in elements, into data/grad/m/v */
    size_t size;   /* elements */
    int decay;     /* 1: decoupled weight decay applies */
    int frozen;    /* 1: not learnt (pelab_params_freeze): its owner computes no gradient for it */
};

struct pelab_params {
    struct pelab_param *list;
    int count, cap;
    size_t total;      /* elements in all parameters */
    pelab_real *data;  /* (total,) values */
    pelab_real *grad;  /* (total,) gradients, accumulated with += */
    pelab_real *m, *v; /* (total,) AdamW moments */
    int oom;           /* a declaration ran out of memory: pelab_params_alloc fails */
};

/* Declares a parameter; returns its index (>= 0). Must precede pelab_params_alloc. Asserts on
 * duplicate names or a table already allocated (programmer errors). Out of memory for the list,
 * it still returns the next index but records the failure, and pelab_params_alloc then returns
 * PELAB_ERR_RUNTIME: callers check once, at the allocation. */
int pelab_params_declare(struct pelab_params *p, const char *name, int ndim, const int64_t *shape,
                         int decay);
/* Marks parameter i as frozen: kept in the table and in checkpoints, but its owner computes no
 * gradient for it (its gradient stays 0, so AdamW leaves it). The contract test checks that. */
void pelab_params_freeze(struct pelab_params *p, int i);
/* Allocates data, grad, m, v (zeroed). Returns PELAB_OK or PELAB_ERR_RUNTIME (out of memory). */
int pelab_params_alloc(struct pelab_params *p);
void pelab_params_free(struct pelab_params *p);

/* Index of the parameter called `name`, or -1. */
int pelab_params_find(const struct pelab_params *p, const char *name);
static inline pelab_real *pelab_params_data(const struct pelab_params *p, int i) {
    return p->data + p->list[i].offset;
}
static inline pelab_real *pelab_params_grad(const struct pelab_params *p, int i) {
    return p->grad + p->list[i].offset;
}
void pelab_params_zero_grad(struct pelab_params *p);

#endif
