/* The attention kernels' one way to the encoding's sites inside the blocks (posenc/site.h). A
 * kernel names no site: on each block of scores it calls pelab_attn_sites_forward (and, in its
 * backward, _recompute and _backward), which run the kernel hooks of every site the encoding acts
 * at, each bound to its own buffers of the call (s->sites, s->site_grads) or of the KV cache. */
#ifndef PELAB_ATTN_SITES_H
#define PELAB_ATTN_SITES_H

#include "attn/attention.h"
#include "posenc/site.h"

/* Keys of block c that its query row r sees: a prefix of the block. */
static inline int pelab_site_visible(const struct pelab_site_block *c, int r) {
    if (c->s->bidirectional) return c->nk;
    const int n = c->first + r - c->j0 + 1;
    return n < c->nk ? n : c->nk;
}

/* Query row r of block c as a row of the call's (B,H,T,…) buffers: (b·H + h)·T + i0 + r. */
static inline long pelab_site_query(const struct pelab_site_block *c, int r) {
    return ((long)c->b * c->s->H + c->h) * c->s->T + c->i0 + r;
}

/* Each site's carries and scratch, for one thread's tiles or one row. */
struct pelab_attn_site_work {
    double *carry[PELAB_PE_LAYER_SITES]; /* (rows, 2) */
    void *scratch[PELAB_PE_LAYER_SITES];
};

/* The tiled kernel visits a query tile's key tiles from its diagonal back (a site's running sum
 * over keys runs so). */
int pelab_attn_sites_right_to_left(const struct pelab_attn_call *s);
/* Bytes of one thread's site work in the tiled kernel (each part 64-byte aligned), and its layout
 * over mem (that many bytes, 64-byte aligned). */
size_t pelab_attn_sites_tile_bytes(const struct pelab_attn_call *s, int tile);
void pelab_attn_sites_tile_work(const struct pelab_attn_call *s, int tile, unsigned char *mem,
                                struct pelab_attn_site_work *w);
/* One row's work (the reference and cached kernels): carries in carry (2·PELAB_PE_LAYER_SITES),
 * zeroed; no scratch. */
void pelab_attn_sites_row_work(double *carry, struct pelab_attn_site_work *w);
/* Zeroes the carries of nq query rows, before their first block. */
void pelab_attn_sites_rows_begin(const struct pelab_attn_call *s, const struct pelab_attn_site_work *w, int nq);
/* Backward: zeroes the (b, h) slices of the sites' gradients (s->site_grads), which the hooks then
 * add to. */
void pelab_attn_sites_head_begin(const struct pelab_attn_call *s, int b, int h);

/* The block's scores blk->S with every site's terms added, in the encoding's order. */
void pelab_attn_sites_forward(const struct pelab_site_block *blk, const struct pelab_attn_site_work *w);
/* The tiled backward's: the same on the scores it forms again (tile_recompute where a site has one). */
void pelab_attn_sites_recompute(const struct pelab_site_block *blk, const struct pelab_attn_site_work *w);
/* blk->S = dS at the scores with the sites' terms becomes dS without them, in reverse order; the
 * sites' gradients +=. */
void pelab_attn_sites_backward(const struct pelab_site_block *blk, const struct pelab_attn_site_work *w);

/* Generation: sequence b's PER_KEY values of the call's s->T new keys (layer s->layer) into c at
 * c->len, beside the keys. */
void pelab_attn_sites_cache_append(struct pelab_attn_cache *c, const struct pelab_attn_call *s, int b);
/* Each PER_KEY buffer's values at each cache's last position (0 for an empty cache), layer
 * `layer`, into `last` (a PLAN_LAST plan of at least B rows): the forward hooks' prev. */
void pelab_attn_sites_cache_last(struct pelab_attn_cache *const *caches, int B, const struct pelab_posenc *pe,
                                 int layer, const struct pelab_pe_site_bufs *last);

#endif
