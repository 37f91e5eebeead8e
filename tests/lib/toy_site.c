/* The SALIENCE site and its encoding (tests/lib/toy_site.h). */
#include <stdio.h>
#include <stdlib.h>
#include "toy_site.h"
#include "attn/sites.h"
#include "pelab/status.h"

/* --- the site: its buffers and what the kernels do with them ----------------------------------- */

/* S (nq, nk) += a_t · c_s over the block */
static void salience_forward(const struct pelab_site_block *c) {
    const pelab_real *a = c->buf[TOY_A], *keys = c->keys[TOY_C] + c->j0;
    for (int r = 0; r < c->nq; r++) {
        const pelab_real at = a[pelab_site_query(c, r)];
        pelab_real *row = c->S + r * c->ld;
        for (int j = 0; j < c->nk; j++) row[j] += at * keys[j];
    }
}

/* da_t += Σ_s dS[t,s] c_s, dc_s += dS[t,s] a_t over the block (masked entries of dS are 0) */
static void salience_backward(const struct pelab_site_block *c) {
    const pelab_real *a = c->buf[TOY_A], *keys = c->keys[TOY_C] + c->j0;
    pelab_real *da = c->grad[TOY_A];
    pelab_real *dc = c->grad[TOY_C] + ((long)c->b * c->s->H + c->h) * c->s->T + c->j0;
    for (int r = 0; r < c->nq; r++) {
        const long t = pelab_site_query(c, r);
        const pelab_real *ds = c->S + r * c->ld;
        pelab_real sum = 0;
        for (int j = 0; j < c->nk; j++) {
            sum += ds[j] * keys[j];
            dc[j] += ds[j] * a[t];
        }
        da[t] += sum;
    }
}

const struct pelab_pe_site_decl toy_site_salience = {
    .name = "SALIENCE",
    .bit = TOY_SITE_BIT,
    .summary = "adds a_t · c_s: a query's appetite times a key's salience, both from the tokens",
    .reads = PELAB_PE_READS_X,
    .bufs = {{"a", "the encoding's appetites of the queries", "BHT", PELAB_PE_OUT},
             {"c", "the encoding's saliences of the keys", "BHT", PELAB_PE_OUT | PELAB_PE_PER_KEY}},
    .forward = salience_forward,
    .backward = salience_backward,
};

/* --- the encoding ------------------------------------------------------------------------------- */

struct salience {
    int *w; /* (N, 2) parameter indices per layer: w_a, w_c (H, D) */
};

static int salience_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    struct salience *s = calloc(1, sizeof *s);
    if (!s) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = s;
    if (!(s->w = malloc((size_t)pe->n_layers * 2 * sizeof *s->w))) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    const int64_t shape[2] = {pe->H, pe->D};
    for (int l = 0; l < pe->n_layers; l++)
        for (int i = 0; i < 2; i++) {
            char name[PELAB_PARAM_NAME_MAX];
            snprintf(name, sizeof name, "blocks.%d.attn.salience.%s", l, i ? "key" : "query");
            s->w[2 * l + i] = pelab_params_declare(params, name, 2, shape, 1);
        }
    return PELAB_OK;
}

static void salience_free(struct pelab_posenc *pe) {
    struct salience *s = pe->state;
    if (s) free(s->w);
    free(s);
}

static void salience_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    const struct salience *s = pe->state;
    for (int i = 0; i < 2 * pe->n_layers; i++) {
        pelab_real *w = pelab_params_data(pe->params, s->w[i]);
        for (long j = 0; j < (long)pe->H * pe->D; j++) w[j] = (pelab_real)(0.1 * pelab_rng_normal(rng));
    }
}

/* a, c (B,H,T) = w_a,h · x_t, w_c,h · x_t */
static void salience_site_forward(struct pelab_posenc *pe, int layer, const struct pelab_pe_site_io *io) {
    const struct salience *s = pe->state;
    const int H = pe->H, D = pe->D, T = io->T;
    for (int i = 0; i < 2; i++) {
        const pelab_real *w = pelab_params_data(pe->params, s->w[2 * layer + i]);
        for (int b = 0; b < io->B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    const pelab_real *x = io->in + ((long)b * T + t) * D;
                    pelab_real sum = 0;
                    for (int e = 0; e < D; e++) sum += w[(long)h * D + e] * x[e];
                    io->out[TOY_A + i][((long)b * H + h) * T + t] = sum;
                }
    }
}

/* dx += da·w_a + dc·w_c;  dw_a += da x, dw_c += dc x */
static void salience_site_backward(struct pelab_posenc *pe, int layer, const struct pelab_pe_site_io *io) {
    const struct salience *s = pe->state;
    const int H = pe->H, D = pe->D, T = io->T;
    for (int i = 0; i < 2; i++) {
        const pelab_real *w = pelab_params_data(pe->params, s->w[2 * layer + i]);
        pelab_real *dw = pelab_params_grad(pe->params, s->w[2 * layer + i]);
        for (int b = 0; b < io->B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    const pelab_real g = io->dout[TOY_A + i][((long)b * H + h) * T + t];
                    const pelab_real *x = io->in + ((long)b * T + t) * D;
                    pelab_real *dx = io->din + ((long)b * T + t) * D;
                    for (int e = 0; e < D; e++) {
                        dw[(long)h * D + e] += g * x[e];
                        dx[e] += g * w[(long)h * D + e];
                    }
                }
    }
}

const struct pelab_posenc_ops toy_pe_salience = {
    .name = "salience",
    .summary = "a query's appetite times a key's salience, from the tokens (a test's site)",
    .sites = TOY_SITE_BIT,
    .contract = {PELAB_PE_RELATIVE, {NULL}},
    .init = salience_init,
    .free = salience_free,
    .init_params = salience_init_params,
    .layer_sites = (const struct pelab_pe_site_hooks[]){{&toy_site_salience, salience_site_forward,
                                                         salience_site_backward},
                                                        {0}},
};

int toy_site_register(void) {
    return pelab_posenc_find(toy_pe_salience.name) ? PELAB_OK : pelab_posenc_register(&toy_pe_salience);
}
