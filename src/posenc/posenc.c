/* The registry of positional encodings, and the model's entry points into them. */
#include <stdio.h>
#include <string.h>
#include "pelab/posenc.h"
#include "pelab/status.h"

extern const struct pelab_posenc_ops pelab_pe_nope, pelab_pe_rope, pelab_pe_pope;

static const struct pelab_posenc_ops *const registry[] = {
    &pelab_pe_nope,
    &pelab_pe_rope,
    &pelab_pe_pope,
    NULL,
};

const struct pelab_posenc_ops *const *pelab_posenc_all(void) { return registry; }

const struct pelab_posenc_ops *pelab_posenc_find(const char *name) {
    for (int i = 0; registry[i]; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}

int pelab_posenc_init(struct pelab_posenc *pe, const char *name, const struct pelab_opts *opts,
                      struct pelab_params *params, int D, int H, int n_layers, int max_seq) {
    memset(pe, 0, sizeof *pe);
    pe->ops = pelab_posenc_find(name);
    if (!pe->ops) {
        char known[256] = "";
        for (int i = 0; registry[i]; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                     registry[i]->name);
        return pelab_fail(PELAB_ERR_USAGE, "--pe: unknown encoding '%s' (known: %s)", name, known);
    }
    pe->D = D;
    pe->H = H;
    pe->d = D / H;
    pe->n_layers = n_layers;
    pe->max_seq = max_seq;
    pe->qk_dim = pe->d;
    pe->params = params;
    int rc = pelab_opts_check(opts, pe->ops->options);
    if (rc) return rc;
    return pe->ops->init ? pe->ops->init(pe, opts, params) : PELAB_OK;
}

void pelab_posenc_free(struct pelab_posenc *pe) {
    if (pe->ops && pe->ops->free) pe->ops->free(pe);
    memset(pe, 0, sizeof *pe);
}

int pelab_posenc_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    return pe->ops->prepare ? pe->ops->prepare(pe, pos, B, T) : PELAB_OK;
}

/* Identity QK: (B,T,H,d) rows ld apart → (B,H,T,d). */
void pelab_posenc_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                             const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                             int B, int T) {
    if (pe->ops->qk_forward) {
        pe->ops->qk_forward(pe, layer, qo, ko, q, k, ld, pos, B, T);
        return;
    }
    const int H = pe->H, d = pe->d;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                long src = ((long)b * T + t) * ld + (long)h * d;
                long dst = (((long)b * H + h) * T + t) * d;
                memcpy(qo + dst, q + src, (size_t)d * sizeof *qo);
                memcpy(ko + dst, k + src, (size_t)d * sizeof *ko);
            }
}

void pelab_posenc_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                              const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                              const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    if (pe->ops->qk_backward) {
        pe->ops->qk_backward(pe, layer, dq, dk, dqo, dko, q, k, ld, pos, B, T);
        return;
    }
    const int H = pe->H, d = pe->d;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                long dst = ((long)b * T + t) * ld + (long)h * d;
                long src = (((long)b * H + h) * T + t) * d;
                memcpy(dq + dst, dqo + src, (size_t)d * sizeof *dq);
                memcpy(dk + dst, dko + src, (size_t)d * sizeof *dk);
            }
}
