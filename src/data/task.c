/* Task registry and batch buffers. Each task is one table of function pointers (see
 * pelab/task.h), listed once in `tasks` below; everything else finds it by name. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tasks/tasks.h"
#include "pelab/status.h"
#include "pelab/task.h"
#include "pelab/tokcache.h"

static const struct pelab_task_ops *const tasks[] = {
    &pelab_task_indirect,
    &pelab_task_text,
    &pelab_task_dna,
    &pelab_task_music,
    &pelab_task_qa,
    &pelab_task_image,
    &pelab_task_copy,
    &pelab_task_reverse,
    &pelab_task_sort,
    &pelab_task_parity,
    &pelab_task_sum,
    &pelab_task_addition,
    &pelab_task_poly,
    &pelab_task_lego,
    &pelab_task_duplicate_string,
    &pelab_task_stack_manipulation,
    &pelab_task_binary_addition,
    &pelab_task_selective_copy,
    NULL,
};

const struct pelab_task_ops *const *pelab_task_all(void) { return tasks; }

const char *pelab_split_name(enum pelab_split split) { return pelab_doc_split_name((int)split); }

int pelab_task_split_len(const struct pelab_task *t, enum pelab_split split) {
    return split == PELAB_SPLIT_TEST && t->test_len ? t->test_len : t->seq_len;
}

const struct pelab_task_ops *pelab_task_eval_option_owner(const char *name) {
    for (int i = 0; tasks[i]; i++)
        if (pelab_optdef_find(tasks[i]->eval_options, name)) return tasks[i];
    return NULL;
}

const struct pelab_task_ops *pelab_task_find(const char *name) {
    for (int i = 0; tasks[i]; i++)
        if (strcmp(tasks[i]->name, name) == 0) return tasks[i];
    return NULL;
}

/* "a, b, c": the known task names, for the unknown-task message. */
static void known_names(char *buf, size_t size) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; tasks[i] && n < size; i++) {
        int w = snprintf(buf + n, size - n, "%s%s", i ? ", " : "", tasks[i]->name);
        if (w < 0) break;
        n += (size_t)w;
    }
}

int pelab_task_init(struct pelab_task *t, const char *name, const struct pelab_opts *opts) {
    memset(t, 0, sizeof *t);
    const struct pelab_task_ops *ops = pelab_task_find(name);
    if (!ops) {
        char known[256];
        known_names(known, sizeof known);
        return pelab_fail(PELAB_ERR_USAGE, "unknown task '%s' (known: %s)", name, known);
    }
    /* The opts list is shared by every module: keys this task does not define are not ours. */
    if (opts) {
        int rc = pelab_opts_check(opts, ops->options);
        if (!rc) rc = pelab_opts_check(opts, ops->eval_options);
        if (rc) return rc;
    }
    t->ops = ops;
    int rc = pelab_task_model_io(name, opts, &t->io);
    if (!rc) rc = ops->init(t, opts);
    if (rc) memset(t, 0, sizeof *t); /* a failing init frees what it allocated */
    return rc;
}

void pelab_task_free(struct pelab_task *t) {
    if (t->ops && t->ops->free) t->ops->free(t);
    memset(t, 0, sizeof *t);
}

int pelab_task_model_io(const char *name, const struct pelab_opts *opts, struct pelab_model_io *io) {
    const struct pelab_task_ops *ops = pelab_task_find(name);
    *io = (struct pelab_model_io){0, {1, 0, 0}};
    return ops && ops->model_io ? ops->model_io(opts, io) : PELAB_OK;
}

int pelab_task_open_split(const struct pelab_task *t, enum pelab_split split) {
    return t->ops->open_split ? t->ops->open_split(t, split) : PELAB_OK;
}

int pelab_batch_alloc_for(struct pelab_batch *b, const struct pelab_task *t, int B, int T) {
    int rc = pelab_batch_alloc(b, B, T);
    const int n = t->io.positions.dims, P = t->io.input_dim;
    if (rc || (n <= 1 && !P)) return rc;
    size_t bt = (size_t)B * (size_t)T;
    free(b->pos);
    b->pos = calloc(bt * (size_t)n, sizeof(int32_t));
    if (P) b->inputs = calloc(bt * (size_t)P, sizeof(pelab_real));
    if (!b->pos || (P && !b->inputs)) {
        pelab_batch_free(b);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for a batch of %d x %d inputs", B, T);
    }
    return PELAB_OK;
}

int pelab_batch_alloc(struct pelab_batch *b, int B, int T) {
    memset(b, 0, sizeof *b);
    if (B <= 0 || T <= 0)
        return pelab_fail(PELAB_ERR_USAGE, "batch of %d x %d tokens: both must be positive", B, T);
    size_t n = (size_t)B * (size_t)T;
    if (n > SIZE_MAX / 3 / sizeof(int32_t))
        return pelab_fail(PELAB_ERR_USAGE, "batch of %d x %d tokens is too large", B, T);
    b->tokens = calloc(n, sizeof(int32_t));
    b->targets = calloc(n, sizeof(int32_t));
    b->pos = calloc(n, sizeof(int32_t));
    if (!b->tokens || !b->targets || !b->pos) {
        pelab_batch_free(b);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for a batch of %d x %d tokens", B, T);
    }
    b->B = B;
    b->T = T;
    return PELAB_OK;
}

void pelab_batch_free(struct pelab_batch *b) {
    free(b->tokens);
    free(b->targets);
    free(b->pos);
    free(b->inputs);
    memset(b, 0, sizeof *b);
}
