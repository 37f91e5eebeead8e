/* Generation with bf16 weights (pelab_model_use_bf16_weights, pelab/model.h): the model's weight
 * matrices rounded to bf16 in place, and a bf16 copy of each, in the panels that decoding steps
 * read through pelab_matmul_bf16w_forward. Rounding the float32 values too makes every pass,
 * whichever product it takes, compute with the same weights. */
#include <stdlib.h>
#include "pelab/model.h"
#include "pelab/status.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/matmul.h"
#include "nn/forward.h"

struct pelab_bf16_weights {
    uint16_t *data; /* the matrices' panels one after another */
    long *at;       /* (params.count,): where parameter i's panels start in data, or −1 */
};

/* The parameters generation reads as matrices: the token embedding (the tied head), each
 * block's qkv, proj, fc and fcproj, and an untied head. idx (2 + 4N,); returns how many. */
static int matrices(const struct pelab_model *m, int *idx) {
    int n = 0;
    if (m->wte >= 0) idx[n++] = m->wte;
    if (m->lm_head >= 0) idx[n++] = m->lm_head;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const struct pelab_layer_params *L = &m->layer[l];
        idx[n++] = L->qkv, idx[n++] = L->proj, idx[n++] = L->fc, idx[n++] = L->fcproj;
    }
    return n;
}

void pelab_bf16_weights_free(struct pelab_bf16_weights *w) {
    if (!w) return;
    free(w->data);
    free(w->at);
    free(w);
}

int pelab_model_use_bf16_weights(struct pelab_model *m) {
    if (m->bf16w) return PELAB_OK;
    int *idx = malloc((size_t)(2 + 4 * m->cfg.n_layers) * sizeof *idx);
    struct pelab_bf16_weights *w = calloc(1, sizeof *w);
    if (w) w->at = malloc((size_t)m->params.count * sizeof *w->at);
    if (!idx || !w || !w->at) goto oom;
    const int n = matrices(m, idx);
    long total = 0;
    for (int i = 0; i < m->params.count; i++) w->at[i] = -1;
    for (int i = 0; i < n; i++) { /* every matrix (OC,C) */
        const struct pelab_param *p = &m->params.list[idx[i]];
        w->at[idx[i]] = total, total += pelab_bf16w_panel_size((int)p->shape[1], (int)p->shape[0]);
    }
    if (!(w->data = malloc((size_t)total * sizeof *w->data))) goto oom;
    for (int i = 0; i < n; i++) {
        const struct pelab_param *p = &m->params.list[idx[i]];
        pelab_real *x = pelab_params_data(&m->params, idx[i]);
        for (size_t j = 0; j < p->size; j++) x[j] = pelab_from_bf16(pelab_to_bf16((float)x[j]));
        pelab_bf16w_pack(w->data + w->at[idx[i]], x, (int)p->shape[1], (int)p->shape[0]);
    }
    free(idx);
    m->bf16w = w;
    return PELAB_OK;
oom:
    free(idx);
    pelab_bf16_weights_free(w);
    return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the bf16 weights");
}

const uint16_t *pelab_bf16_weights_of(const struct pelab_model *m, int param) {
    return m->bf16w && m->bf16w->at[param] >= 0 ? m->bf16w->data + m->bf16w->at[param] : NULL;
}
