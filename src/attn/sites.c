/* The kernels' calls of the sites' kernel hooks (attn/sites.h): each active site in the
 * encoding's order, its block bound to its buffers. */
#include <string.h>
#include "attn/sites.h"
#include "pelab/status.h"

/* Site k of the call's encoding when it acts there, else NULL; k past its sites: NULL too. */
static const struct pelab_pe_site_decl *site_at(const struct pelab_attn_call *s, int k) {
    return s->pe && k < pelab_posenc_layer_sites(s->pe) ? pelab_posenc_layer_site(s->pe, k) : NULL;
}

static int site_count(const struct pelab_attn_call *s) { return s->pe ? pelab_posenc_layer_sites(s->pe) : 0; }

int pelab_attn_sites_right_to_left(const struct pelab_attn_call *s) {
    for (int k = 0; k < site_count(s); k++)
        if (site_at(s, k) && site_at(s, k)->right_to_left) return 1;
    return 0;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t carry_bytes(int tile) { return align64((size_t)tile * 2 * sizeof(double)); }

static size_t scratch_bytes(const struct pelab_attn_call *s, const struct pelab_pe_site_decl *site, int tile) {
    return align64(site->tile_scratch ? site->tile_scratch(s->pe, tile) : 0);
}

size_t pelab_attn_sites_tile_bytes(const struct pelab_attn_call *s, int tile) {
    size_t bytes = 0;
    for (int k = 0; k < site_count(s); k++)
        if (site_at(s, k)) bytes += carry_bytes(tile) + scratch_bytes(s, site_at(s, k), tile);
    return bytes;
}

void pelab_attn_sites_tile_work(const struct pelab_attn_call *s, int tile, unsigned char *mem,
                                struct pelab_attn_site_work *w) {
    memset(w, 0, sizeof *w);
    for (int k = 0; k < site_count(s); k++) {
        const struct pelab_pe_site_decl *site = site_at(s, k);
        if (!site) continue;
        w->carry[k] = (double *)mem;
        mem += carry_bytes(tile);
        w->scratch[k] = mem;
        mem += scratch_bytes(s, site, tile);
    }
}

void pelab_attn_sites_row_work(double *carry, struct pelab_attn_site_work *w) {
    memset(w, 0, sizeof *w);
    for (int k = 0; k < PELAB_PE_LAYER_SITES; k++) w->carry[k] = carry + 2 * k, carry[2 * k] = carry[2 * k + 1] = 0;
}

void pelab_attn_sites_rows_begin(const struct pelab_attn_call *s, const struct pelab_attn_site_work *w, int nq) {
    for (int k = 0; k < site_count(s); k++)
        if (site_at(s, k)) memset(w->carry[k], 0, (size_t)nq * 2 * sizeof *w->carry[k]);
}

void pelab_attn_sites_head_begin(const struct pelab_attn_call *s, int b, int h) {
    for (int k = 0; k < site_count(s); k++) {
        const struct pelab_pe_site_decl *site = site_at(s, k);
        for (int j = 0; site && site->bufs[j].name; j++) {
            pelab_real *grad = s->site_grads->buf[k][j];
            if (!grad) continue;
            /* the slice of (b, h): every shape begins with B, H */
            const long n = pelab_posenc_plan_count(s->pe, &site->bufs[j], PELAB_PE_PLAN_GRAD, 0, s->B, s->T) /
                           ((long)s->B * s->H);
            memset(grad + ((long)b * s->H + h) * n, 0, (size_t)n * sizeof *grad);
        }
    }
}

/* Block c, a copy of the kernel's, bound to site k's buffers and work. */
static void bind(struct pelab_site_block *c, int k, const struct pelab_pe_site_decl *site,
                 const struct pelab_attn_site_work *w) {
    const struct pelab_attn_call *s = c->s;
    const unsigned mine = c->kernel == PELAB_PE_KERNEL_REF     ? PELAB_PE_SAVED_REF
                          : c->kernel == PELAB_PE_KERNEL_TILED ? PELAB_PE_SAVED_TILED
                                                               : 0;
    PELAB_ASSERT(s->sites != NULL);
    c->carry = w->carry[k];
    c->scratch = w->scratch[k];
    for (int j = 0; j < PELAB_PE_SITE_BUFS; j++) {
        const struct pelab_pe_buf *buf = &site->bufs[j];
        c->buf[j] = c->grad[j] = NULL, c->keys[j] = NULL;
        if (!buf->name) break;
        if (buf->flags & (PELAB_PE_OUT | mine)) c->buf[j] = s->sites->buf[k][j];
        if ((buf->flags & PELAB_PE_OUT) && s->site_grads) c->grad[j] = s->site_grads->buf[k][j];
        if (!(buf->flags & PELAB_PE_PER_KEY)) continue;
        const long width = pelab_posenc_buf_width(s->pe, buf); /* head h's keys: the cache's or the batch's */
        if (c->cache)
            c->keys[j] = (const pelab_real *)c->cache->sites.buf[k][j] +
                         ((long)s->layer * s->H + c->h) * c->cache->cap * width;
        else
            c->keys[j] = (const pelab_real *)c->buf[j] + ((long)c->b * s->H + c->h) * s->T * width;
    }
}

/* The sites' forward hooks in order; recompute: the tiled backward's tile_recompute where a site
 * has one. */
static void forward_hooks(const struct pelab_site_block *blk, const struct pelab_attn_site_work *w, int recompute) {
    for (int k = 0; k < site_count(blk->s); k++) {
        const struct pelab_pe_site_decl *site = site_at(blk->s, k);
        if (!site) continue;
        struct pelab_site_block c = *blk;
        bind(&c, k, site, w);
        (recompute && site->tile_recompute ? site->tile_recompute : site->forward)(&c);
    }
}

void pelab_attn_sites_forward(const struct pelab_site_block *blk, const struct pelab_attn_site_work *w) {
    forward_hooks(blk, w, 0);
}

void pelab_attn_sites_recompute(const struct pelab_site_block *blk, const struct pelab_attn_site_work *w) {
    forward_hooks(blk, w, 1);
}

void pelab_attn_sites_backward(const struct pelab_site_block *blk, const struct pelab_attn_site_work *w) {
    for (int k = site_count(blk->s) - 1; k >= 0; k--) {
        const struct pelab_pe_site_decl *site = site_at(blk->s, k);
        if (!site) continue;
        struct pelab_site_block c = *blk;
        bind(&c, k, site, w);
        const int tiled = blk->kernel == PELAB_PE_KERNEL_TILED && site->tile_backward;
        (tiled ? site->tile_backward : site->backward)(&c);
    }
}

void pelab_attn_sites_cache_append(struct pelab_attn_cache *c, const struct pelab_attn_call *s, int b) {
    const int H = s->H, n = s->T;
    for (int k = 0; k < site_count(s); k++) {
        const struct pelab_pe_site_decl *site = site_at(s, k);
        for (int j = 0; site && site->bufs[j].name; j++) {
            if (!(site->bufs[j].flags & PELAB_PE_PER_KEY)) continue;
            PELAB_ASSERT(c->sites.buf[k][j] != NULL && s->sites->buf[k][j] != NULL);
            const long w = pelab_posenc_buf_width(s->pe, &site->bufs[j]);
            const pelab_real *from = (const pelab_real *)s->sites->buf[k][j] + (long)b * H * n * w; /* (H,n,w) */
            pelab_real *to = (pelab_real *)c->sites.buf[k][j] + (long)s->layer * H * c->cap * w; /* (H,cap,w) */
            for (int h = 0; h < H; h++)
                memcpy(to + ((long)h * c->cap + c->len) * w, from + (long)h * n * w, (size_t)(n * w) * sizeof *to);
        }
    }
}

void pelab_attn_sites_cache_last(struct pelab_attn_cache *const *caches, int B, const struct pelab_posenc *pe,
                                 int layer, const struct pelab_pe_site_bufs *last) {
    for (int k = 0; k < pelab_posenc_layer_sites(pe); k++) {
        const struct pelab_pe_site_decl *site = pelab_posenc_layer_site(pe, k);
        for (int j = 0; site && site->bufs[j].name; j++) {
            if (!(site->bufs[j].flags & PELAB_PE_PER_KEY)) continue;
            const long w = pelab_posenc_buf_width(pe, &site->bufs[j]);
            for (int b = 0; b < B; b++) {
                const struct pelab_attn_cache *c = caches[b];
                const pelab_real *cached = (const pelab_real *)c->sites.buf[k][j] + (long)layer * pe->H * c->cap * w;
                pelab_real *prev = (pelab_real *)last->buf[k][j] + (long)b * pe->H * w; /* (H,w) */
                for (int h = 0; h < pe->H; h++) {
                    if (c->len) memcpy(prev + h * w, cached + ((long)h * c->cap + c->len - 1) * w, (size_t)w * sizeof *prev);
                    else memset(prev + h * w, 0, (size_t)w * sizeof *prev);
                }
            }
        }
    }
}
