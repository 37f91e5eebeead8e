/* The sites (posenc/site.h): their table, the buffer plans sized from their declarations, and
 * the model's calls of an encoding's hooks at the sites inside the blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/status.h"
#include "posenc/site.h"

/* EMBED, QK and BIAS: places of their own in the model and the kernels, reached through the
 * encoding's embed_*, qk_* and bias_tile* functions; no buffers. */
static const struct pelab_pe_site_decl site_embed = {
    .name = "EMBED", .bit = PELAB_SITE_EMBED, .summary = "adds e(p) to the token embedding"};
static const struct pelab_pe_site_decl site_qk = {
    .name = "QK", .bit = PELAB_SITE_QK, .summary = "transforms each head's query and key before q·k"};
static const struct pelab_pe_site_decl site_bias = {
    .name = "BIAS", .bit = PELAB_SITE_BIAS, .summary = "adds bias(h, t, s) to the logits, by tiles of positions"};

/* Every built-in site, in the order help lists them. */
static const struct pelab_pe_site_decl *const sites[] = {
    &site_embed, &site_qk, &site_bias, &pelab_site_key, &pelab_site_count, NULL,
};

void pelab_posenc_site_names(unsigned bits, char *out, size_t size) {
    *out = 0;
    for (int i = 0; sites[i]; i++)
        if (bits & sites[i]->bit) snprintf(out + strlen(out), size - strlen(out), "%s ", sites[i]->name);
}

int pelab_posenc_layer_sites(const struct pelab_posenc *pe) {
    int n = 0;
    for (const struct pelab_pe_site_hooks *u = pe->ops->layer_sites; u && u->site; u++) n++;
    PELAB_ASSERT(n <= PELAB_PE_LAYER_SITES);
    return n;
}

const struct pelab_pe_site_decl *pelab_posenc_layer_site(const struct pelab_posenc *pe, int k) {
    const struct pelab_pe_site_decl *site = pe->ops->layer_sites[k].site;
    return pe->sites & site->bit ? site : NULL;
}

/* --- plans ---------------------------------------------------------------------------------- */

/* The size of dimension `letter` for B×T. */
static long dim_of(const struct pelab_posenc *pe, char letter, long B, long T) {
    switch (letter) {
    case 'B': return B;
    case 'H': return pe->H;
    case 'T': return T;
    case 'P': return pe->count_max;
    case 'Q': return pe->qk_dim;
    case 'D': return pe->D;
    }
    PELAB_ASSERT(!"a site buffer's shape has a letter of B, H, T, P, Q, D");
    return 0;
}

int pelab_posenc_buf_dims(const struct pelab_posenc *pe, const struct pelab_pe_buf *buf, long B, long T,
                          long dims[4], char *letters) {
    const int n = (int)strlen(buf->shape);
    PELAB_ASSERT(n >= 2 && n <= 4 && buf->shape[0] == 'B' && buf->shape[1] == 'H');
    char *l = letters;
    *l++ = '(';
    for (int i = 0; i < n; i++) {
        dims[i] = dim_of(pe, buf->shape[i], B, T);
        *l++ = buf->shape[i];
        *l++ = i + 1 < n ? ',' : ')';
    }
    *l = 0;
    return n;
}

/* Elements of the shape for B×T. */
static long shape_count(const struct pelab_posenc *pe, const struct pelab_pe_buf *buf, long B, long T) {
    long dims[4], count = 1;
    char letters[16];
    const int n = pelab_posenc_buf_dims(pe, buf, B, T, dims, letters);
    for (int i = 0; i < n; i++) count *= dims[i];
    return count;
}

long pelab_posenc_buf_width(const struct pelab_posenc *pe, const struct pelab_pe_buf *buf) {
    PELAB_ASSERT(strncmp(buf->shape, "BHT", 3) == 0); /* a value (or w) per key and head */
    return shape_count(pe, buf, 1, 1) / pe->H;
}

long pelab_posenc_plan_count(const struct pelab_posenc *pe, const struct pelab_pe_buf *buf,
                             enum pelab_pe_plan plan, enum pelab_pe_kernel kernel, long B, long T) {
    const unsigned saved = kernel == PELAB_PE_KERNEL_REF ? PELAB_PE_SAVED_REF : PELAB_PE_SAVED_TILED;
    PELAB_ASSERT(!(buf->flags & PELAB_PE_OUT) || !(buf->flags & PELAB_PE_DOUBLE));
    switch (plan) {
    case PELAB_PE_PLAN_PASS: return buf->flags & (PELAB_PE_OUT | saved) ? shape_count(pe, buf, B, T) : 0;
    case PELAB_PE_PLAN_GRAD: return buf->flags & PELAB_PE_OUT ? shape_count(pe, buf, B, T) : 0;
    case PELAB_PE_PLAN_LAST: return buf->flags & PELAB_PE_PER_KEY ? shape_count(pe, buf, B, 1) : 0;
    case PELAB_PE_PLAN_CACHE: return buf->flags & PELAB_PE_PER_KEY ? shape_count(pe, buf, 1, T) : 0;
    }
    return 0;
}

static size_t elem_size(const struct pelab_pe_buf *buf) {
    return buf->flags & PELAB_PE_DOUBLE ? sizeof(double) : sizeof(pelab_real);
}

double pelab_posenc_plan_bytes(const struct pelab_posenc *pe, enum pelab_pe_plan plan,
                               enum pelab_pe_kernel kernel, long layers, long B, long T) {
    double bytes = 0;
    for (int k = 0; pe && k < pelab_posenc_layer_sites(pe); k++) {
        const struct pelab_pe_site_decl *site = pelab_posenc_layer_site(pe, k);
        for (const struct pelab_pe_buf *buf = site ? site->bufs : NULL; buf && buf->name; buf++)
            bytes += (double)layers * pelab_posenc_plan_count(pe, buf, plan, kernel, B, T) * elem_size(buf);
    }
    return bytes;
}

void pelab_posenc_plan_free(struct pelab_pe_site_bufs *bufs) {
    for (int k = 0; k < PELAB_PE_LAYER_SITES; k++)
        for (int j = 0; j < PELAB_PE_SITE_BUFS; j++) free(bufs->buf[k][j]);
    memset(bufs, 0, sizeof *bufs);
}

int pelab_posenc_plan_alloc(const struct pelab_posenc *pe, struct pelab_pe_site_bufs *bufs,
                            enum pelab_pe_plan plan, enum pelab_pe_kernel kernel, long layers, long B,
                            long T) {
    memset(bufs, 0, sizeof *bufs);
    for (int k = 0; pe && k < pelab_posenc_layer_sites(pe); k++) {
        const struct pelab_pe_site_decl *site = pelab_posenc_layer_site(pe, k);
        for (int j = 0; site && site->bufs[j].name; j++) {
            const long n = layers * pelab_posenc_plan_count(pe, &site->bufs[j], plan, kernel, B, T);
            if (n && !(bufs->buf[k][j] = malloc((size_t)n * elem_size(&site->bufs[j])))) {
                pelab_posenc_plan_free(bufs);
                return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the %s site's %s (%ld values)",
                                  site->name, site->bufs[j].name, n);
            }
        }
    }
    return PELAB_OK;
}

struct pelab_pe_site_bufs pelab_posenc_plan_layer(const struct pelab_posenc *pe,
                                                  const struct pelab_pe_site_bufs *whole,
                                                  enum pelab_pe_plan plan, enum pelab_pe_kernel kernel,
                                                  int l, long B, long T) {
    struct pelab_pe_site_bufs slice = {0};
    for (int k = 0; k < pelab_posenc_layer_sites(pe); k++) {
        const struct pelab_pe_site_decl *site = pelab_posenc_layer_site(pe, k);
        for (int j = 0; site && site->bufs[j].name; j++) {
            unsigned char *base = whole->buf[k][j];
            const long n = pelab_posenc_plan_count(pe, &site->bufs[j], plan, kernel, B, T);
            slice.buf[k][j] = base ? base + (size_t)l * n * elem_size(&site->bufs[j]) : NULL;
        }
    }
    return slice;
}

/* --- the hooks ------------------------------------------------------------------------------ */

/* What site k's hooks see of bufs (its OUT buffers), grads and last, reading `in`. */
static struct pelab_pe_site_io site_io(const struct pelab_pe_site_decl *site, int k, const struct pelab_pe_site_bufs *bufs,
                                       const struct pelab_pe_site_bufs *grads, const struct pelab_pe_site_bufs *last,
                                       const struct pelab_pe_site_inputs *in, int B, int T) {
    const int reads_x = site->reads == PELAB_PE_READS_X;
    struct pelab_pe_site_io io = {.B = B, .T = T, .in = reads_x ? in->x : in->q,
                                  .din = reads_x ? in->dx : in->dq, .pos = in->pos};
    for (int j = 0; site->bufs[j].name; j++) {
        if (!(site->bufs[j].flags & PELAB_PE_OUT)) continue;
        io.out[j] = bufs->buf[k][j];
        io.dout[j] = grads ? grads->buf[k][j] : NULL;
        io.prev[j] = last ? last->buf[k][j] : NULL;
    }
    return io;
}

void pelab_posenc_sites_forward(struct pelab_posenc *pe, int layer, const struct pelab_pe_site_bufs *bufs,
                                const struct pelab_pe_site_bufs *last,
                                const struct pelab_pe_site_inputs *in, int B, int T) {
    for (int k = 0; k < pelab_posenc_layer_sites(pe); k++) {
        const struct pelab_pe_site_decl *site = pelab_posenc_layer_site(pe, k);
        if (!site) continue;
        const struct pelab_pe_site_io io = site_io(site, k, bufs, NULL, last, in, B, T);
        pe->ops->layer_sites[k].forward(pe, layer, &io);
    }
}

void pelab_posenc_sites_backward(struct pelab_posenc *pe, int layer, enum pelab_pe_input reads,
                                 const struct pelab_pe_site_bufs *bufs, const struct pelab_pe_site_bufs *grads,
                                 const struct pelab_pe_site_inputs *in, int B, int T) {
    for (int k = pelab_posenc_layer_sites(pe) - 1; k >= 0; k--) {
        const struct pelab_pe_site_decl *site = pelab_posenc_layer_site(pe, k);
        if (!site || site->reads != reads) continue;
        const struct pelab_pe_site_io io = site_io(site, k, bufs, grads, NULL, in, B, T);
        pe->ops->layer_sites[k].backward(pe, layer, &io);
    }
}
