/* The registry of positional encodings, and the model's entry points into them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "core/prof.h"
#include "posenc/site.h"

extern const struct pelab_posenc_ops pelab_pe_nope, pelab_pe_rope, pelab_pe_pope;
extern const struct pelab_posenc_ops pelab_pe_learned, pelab_pe_sinusoidal, pelab_pe_xpos;
extern const struct pelab_posenc_ops pelab_pe_alibi, pelab_pe_t5, pelab_pe_fire, pelab_pe_fire_shared;
extern const struct pelab_posenc_ops pelab_pe_seqpe, pelab_pe_fox, pelab_pe_cope;
extern const struct pelab_posenc_ops pelab_pe_learned2d, pelab_pe_sinusoidal2d, pelab_pe_rope2d;
extern const struct pelab_posenc_ops pelab_pe_rope2d_mixed, pelab_pe_pope2d;

#define REGISTRY_MAX 32 /* the built-in encodings and those pelab_posenc_register adds, at most */

static const struct pelab_posenc_ops *registry[REGISTRY_MAX + 1] = {
    &pelab_pe_nope,
    &pelab_pe_rope,
    &pelab_pe_pope,
    &pelab_pe_learned,
    &pelab_pe_sinusoidal,
    &pelab_pe_xpos,
    &pelab_pe_alibi,
    &pelab_pe_t5,
    &pelab_pe_fire,
    &pelab_pe_fire_shared,
    &pelab_pe_seqpe,
    &pelab_pe_fox,
    &pelab_pe_cope,
    &pelab_pe_learned2d,
    &pelab_pe_sinusoidal2d,
    &pelab_pe_rope2d,
    &pelab_pe_rope2d_mixed,
    &pelab_pe_pope2d,
    NULL, /* the end; pelab_posenc_register fills on from here */
};

const struct pelab_posenc_ops *const *pelab_posenc_all(void) { return registry; }

int pelab_posenc_register(const struct pelab_posenc_ops *ops) {
    int n = 0;
    while (registry[n]) n++;
    if (pelab_posenc_find(ops->name)) return pelab_fail(PELAB_ERR_USAGE, "encoding '%s' is registered already", ops->name);
    if (n == REGISTRY_MAX) return pelab_fail(PELAB_ERR_USAGE, "the registry of encodings is full (%d)", REGISTRY_MAX);
    registry[n] = ops; /* registry[n + 1] is the end */
    return PELAB_OK;
}

const struct pelab_posenc_ops *pelab_posenc_find(const char *name) {
    for (int i = 0; registry[i]; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}

const struct pelab_posenc_ops *pelab_posenc_eval_option_owner(const char *name) {
    for (int i = 0; registry[i]; i++)
        if (pelab_optdef_find(registry[i]->eval_options, name)) return registry[i];
    return NULL;
}

const char *pelab_posenc_unrecorded(const struct pelab_posenc_ops *ops, const char *name) {
    const size_t n = strlen(name);
    for (const char *const *u = ops ? ops->unrecorded : NULL; u && *u; u++)
        if (strncmp(*u, name, n) == 0 && (*u)[n] == '=') return *u + n + 1;
    return NULL;
}

int pelab_posenc_fine_tune_option(const char *name) {
    const struct pelab_posenc_ops *owner = pelab_posenc_eval_option_owner(name);
    return owner && owner->fine_tune;
}

int pelab_posenc_eval_check(const struct pelab_opts *given, const struct pelab_opts *settings) {
    for (int i = 0; registry[i]; i++) {
        const int rc = registry[i]->eval_check ? registry[i]->eval_check(given, settings) : PELAB_OK;
        if (rc) return rc;
    }
    return PELAB_OK;
}

const char *pelab_posenc_display(const struct pelab_posenc_ops *ops) {
    return ops->display ? ops->display : ops->name;
}

int pelab_posenc_serves(const struct pelab_posenc_ops *ops, int n) {
    return ((ops->dims ? ops->dims : 1u << 1) >> n) & 1u;
}

/* "a, b, c": the registered encodings that serve n-D positions. */
static void names_serving(char *out, size_t size, int n) {
    *out = 0;
    for (int i = 0; registry[i]; i++)
        if (pelab_posenc_serves(registry[i], n))
            snprintf(out + strlen(out), size - strlen(out), "%s%s", *out ? ", " : "", registry[i]->name);
}

/* PELAB_OK when ops serves the layout, else the usage error. */
static int check_layout(const struct pelab_posenc_ops *ops, const struct pelab_pe_layout *l) {
    char known[256];
    if (!pelab_posenc_serves(ops, l->dims)) {
        names_serving(known, sizeof known, l->dims);
        if (l->dims == 2)
            return pelab_fail(PELAB_ERR_USAGE, "--pe %s: a 1-D encoding, and this task's positions are 2-D "
                              "(row, column): choose a 2-D encoding (%s) or give --positions raster", ops->name, known);
        return pelab_fail(PELAB_ERR_USAGE, "--pe %s: an encoding of %s positions, and this task's positions "
                          "are %d-D (encodings for it: %s)", ops->name, pelab_posenc_serves(ops, 2) ? "2-D" : "n-D",
                          l->dims, known);
    }
    if (l->bidirectional && !(ops->contract.promises & PELAB_PE_BIDIRECTIONAL))
        return pelab_fail(PELAB_ERR_USAGE, "--pe %s: causal only, and this task's attention is "
                          "bidirectional", ops->name);
    return PELAB_OK;
}

/* The bits of the sites inside the blocks the table lists hooks for. */
static unsigned layer_site_bits(const struct pelab_posenc_ops *ops) {
    unsigned bits = 0;
    for (const struct pelab_pe_site_hooks *u = ops->layer_sites; u && u->site; u++) bits |= u->site->bit;
    return bits;
}

int pelab_posenc_init(struct pelab_posenc *pe, const char *name, const struct pelab_opts *opts,
                      struct pelab_params *params, int D, int H, int n_layers, int max_seq) {
    return pelab_posenc_init_nd(pe, name, opts, params, D, H, n_layers, max_seq, NULL);
}

int pelab_posenc_init_nd(struct pelab_posenc *pe, const char *name, const struct pelab_opts *opts,
                         struct pelab_params *params, int D, int H, int n_layers, int max_seq,
                         const struct pelab_pe_layout *layout) {
    static const struct pelab_pe_layout text = {1, 0, 0};
    if (!layout) layout = &text;
    memset(pe, 0, sizeof *pe);
    pe->ops = pelab_posenc_find(name);
    if (!pe->ops) {
        char known[256] = "";
        for (int i = 0; registry[i]; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                     registry[i]->name);
        return pelab_fail(PELAB_ERR_USAGE, "--pe: unknown encoding '%s' (known: %s)", name, known);
    }
    int rc = check_layout(pe->ops, layout);
    if (rc) return rc;
    pe->pos_dims = layout->dims;
    pe->bidirectional = layout->bidirectional;
    pe->grid = layout->grid;
    pe->D = D;
    pe->H = H;
    pe->d = D / H;
    pe->n_layers = n_layers;
    pe->max_seq = max_seq;
    pe->qk_dim = pe->d;
    pe->sites = pe->ops->sites;
    pe->params = params;
    rc = pelab_opts_check(opts, pe->ops->options);
    if (!rc) rc = pelab_opts_check(opts, pe->ops->eval_options);
    if (rc) return rc;
    pe->param_first = params->count;
    const struct pelab_posenc_ops *ops = pe->ops;
    rc = ops->init ? ops->init(pe, opts, params) : PELAB_OK;
    pe->param_end = params->count;
    /* one table per encoding, and its sites a subset of the ones the table lists (posenc.h) */
    if (!rc && (pe->ops != ops || (pe->sites & ~ops->sites) || (layer_site_bits(ops) & ~ops->sites)))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "encoding %s replaced its table or acts at a site it does "
                        "not list", name);
    pe->ops = ops;
    return rc;
}

void pelab_posenc_free(struct pelab_posenc *pe) {
    if (pe->ops && pe->ops->free) pe->ops->free(pe);
    memset(pe, 0, sizeof *pe);
}

int pelab_posenc_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    PELAB_PROF_START();
    int rc = pe->ops->prepare ? pe->ops->prepare(pe, pos, B, T) : PELAB_OK;
    PELAB_PROF_STOP(PELAB_PROF_PE_PREPARE, 0);
    return rc;
}

int pelab_posenc_resolve(const struct pelab_posenc *pe, struct pelab_opts *opts) {
    return pe->ops->resolve ? pe->ops->resolve(pe, opts) : PELAB_OK;
}

int pelab_posenc_grid_side(const int32_t *pos, int T) {
    int side = 1;
    for (int i = 0; i < 2 * T; i++) side = pos[i] > side ? pos[i] : side;
    return side;
}

int pelab_posenc_angles(pelab_real **cos_out, pelab_real **sin_out, long *cap, const int32_t *pos,
                        long ntok, const double *theta, int n) {
    return pelab_posenc_angles_nd(cos_out, sin_out, cap, pos, ntok, 1, NULL, theta, n);
}

int pelab_posenc_angles_nd(pelab_real **cos_out, pelab_real **sin_out, long *cap, const int32_t *pos, long ntok,
                           int dims, const int *axis, const double *theta, int n) {
    long need = ntok * n;
    if (need > *cap) {
        free(*cos_out);
        free(*sin_out);
        *cos_out = malloc((size_t)need * sizeof **cos_out);
        *sin_out = malloc((size_t)need * sizeof **sin_out);
        if (!*cos_out || !*sin_out) {
            free(*cos_out);
            free(*sin_out);
            *cos_out = *sin_out = NULL;
            *cap = 0;
            return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for angle tables (%ld entries)", need);
        }
        *cap = need;
    }
    pelab_real *cs = *cos_out, *sn = *sin_out;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < ntok; i++)
        for (int c = 0; c < n; c++) {
            double a = (double)pos[i * dims + (axis ? axis[c] : 0)] * theta[c];
            cs[i * n + c] = (pelab_real)cos(a);
            sn[i * n + c] = (pelab_real)sin(a);
        }
    return PELAB_OK;
}

/* Identity QK: copies between the token-major (B,T,H,d) layout, rows ld apart, and the
 * head-major (B,H,T,d) layout attention reads; to_heads picks the direction. */
static void permute(pelab_real *a, pelab_real *b, const pelab_real *a_src, const pelab_real *b_src,
                    int ld, int B, int T, int H, int d, int to_heads) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int bb = 0; bb < B; bb++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                long tok = ((long)bb * T + t) * ld + (long)h * d;
                long head = (((long)bb * H + h) * T + t) * d;
                long dst = to_heads ? head : tok, src = to_heads ? tok : head;
                memcpy(a + dst, a_src + src, (size_t)d * sizeof *a);
                memcpy(b + dst, b_src + src, (size_t)d * sizeof *b);
            }
}

size_t pelab_posenc_grad_count(const struct pelab_posenc *pe) {
    if (pe->param_end <= pe->param_first) return 0;
    const struct pelab_param *first = &pe->params->list[pe->param_first];
    const struct pelab_param *last = &pe->params->list[pe->param_end - 1];
    return last->offset + last->size - first->offset;
}

void pelab_posenc_backward_end(struct pelab_posenc *pe) {
    if (pe->ops->backward_end) pe->ops->backward_end(pe);
}

pelab_real *pelab_posenc_table_grad(const struct pelab_posenc *pe) {
    return pe->param_end > pe->param_first ? pe->params->grad + pe->params->list[pe->param_first].offset
                                           : pe->params->grad;
}

pelab_real *pelab_posenc_grad(const struct pelab_posenc *pe, pelab_real *grad, int param) {
    return grad + (pe->params->list[param].offset - pe->params->list[pe->param_first].offset);
}

void pelab_posenc_embed_forward(struct pelab_posenc *pe, pelab_real *out, const int32_t *pos, int B, int T) {
    if (pe->sites & PELAB_SITE_EMBED) pe->ops->embed_forward(pe, out, pos, B, T);
}

void pelab_posenc_embed_backward(struct pelab_posenc *pe, const pelab_real *dout, const int32_t *pos,
                                 int B, int T) {
    if ((pe->sites & PELAB_SITE_EMBED) && pe->ops->embed_backward)
        pe->ops->embed_backward(pe, dout, pos, B, T);
}

void pelab_posenc_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                             const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                             int B, int T) {
    PELAB_PROF_START();
    if (pe->sites & PELAB_SITE_QK) pe->ops->qk_forward(pe, layer, qo, ko, q, k, ld, pos, B, T);
    else permute(qo, ko, q, k, ld, B, T, pe->H, pe->d, 1);
    PELAB_PROF_STOP(PELAB_PROF_PE_FWD, 0);
}

void pelab_posenc_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                              const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                              const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    PELAB_PROF_START();
    if (pe->sites & PELAB_SITE_QK) pe->ops->qk_backward(pe, layer, dq, dk, dqo, dko, q, k, ld, pos, B, T);
    else permute(dq, dk, dqo, dko, ld, B, T, pe->H, pe->d, 0);
    PELAB_PROF_STOP(PELAB_PROF_PE_BWD, 0);
}
