/* Multi-head attention for one layer, causal (a query sees keys at or before it) or bidirectional
 * (every key; the image task), given already position-transformed queries and
 * keys. Three kernels compute the same function:
 *   reference (attn_ref.c)  materialises the (T,T) probabilities of every head: the oracle that
 *                           faster kernels are tested against, and what its backward pass reads;
 *   tiled (attn_tiled.c)    online softmax over tiles of keys, memory linear in T: it saves only
 *                           each row's log-sum-exp and recomputes probabilities in the backward;
 *   cached (attn_cached.c)  generation: a chunk of new queries against the keys and values kept
 *                           from earlier chunks (forward only). */
#ifndef PELAB_ATTN_ATTENTION_H
#define PELAB_ATTN_ATTENTION_H

#include <stdint.h>
#include "pelab/ctx.h"
#include "pelab/posenc.h"
#include "pelab/real.h"
#include "kernels/cpu/softmax_attn.h"
#include "posenc/site.h"

struct pelab_attn_scratch;

/* The arguments of one attention call besides its arrays. */
struct pelab_attn_call {
    /* the context the call runs in (pelab/ctx.h): the tiled kernel's products in its precision,
     * the cached kernel's matrix products in it too (a failed one kept there); the reference
     * kernel does not read it */
    struct pelab_ctx *ctx;
    int B, T, H;
    int dq;            /* query/key width per head (d, or 2d for PoPE) */
    int dv;            /* value width per head, d */
    int ldv, ldo;      /* row strides of v (inside qkv: 3D) and of out (D) */
    pelab_real scale;  /* 1/sqrt(d) */
    /* the encoding (its BIAS site and the sites inside the block act in the kernels), or NULL */
    struct pelab_posenc *pe;
    int layer;
    const int32_t *pos; /* (B,T,n), n = pe->pos_dims coordinates per token */
    /* The encoding's sites inside the block (posenc/site.h, reached through attn/sites.h): this
     * layer's buffers of a PASS plan (what the encoding wrote, and what this kernel saves for its
     * backward), and in the backward the gradients of its OUT buffers (a GRAD plan, assigned);
     * NULL where the encoding acts at none. */
    const struct pelab_pe_site_bufs *sites, *site_grads;
    int bidirectional;  /* no causal mask: every query attends to every key of its sequence */
    /* attention-probability dropout (training only): p, mask key and site; row0 the batch row
     * of sequence 0 (a share of a batch: its first row's place in the whole batch) */
    double dropout;
    uint64_t key, site, row0;
    int tile;          /* tiled kernel: rows per query and key tile; 0 for PELAB_PE_TILE */
    /* tiled kernel: the caller's scratch, grown by the kernel when too small (more threads), or
     * NULL to allocate per call */
    struct pelab_attn_scratch *scratch;
};

/* Per-thread tiles (and bias-gradient arrays) of the tiled kernel, kept by the caller so that a
 * training step allocates nothing. Zero-initialised means empty. */
struct pelab_attn_scratch {
    unsigned char *mem;
    size_t size; /* bytes */
};

/* Sizes w for shape s (tile, widths, the BIAS encoding's parameters) and the current thread
 * count; keeps it when large enough. PELAB_OK or PELAB_ERR_RUNTIME (message set), w then keeping
 * what it held: the kernels run on as many threads as it has blocks for, so a backward never fails
 * after its forward. */
int pelab_attn_scratch_reserve(struct pelab_attn_scratch *w, const struct pelab_attn_call *s);
void pelab_attn_scratch_free(struct pelab_attn_scratch *w);


/* The dropout mask index of probability (b, h, t, j) (pelab_softmax_attn_drop_index: the masks
 * of the whole batch, whichever rows a call holds). */
static inline uint64_t pelab_attn_drop_index(const struct pelab_attn_call *s, int b, int h, int t, int j) {
    return pelab_softmax_attn_drop_index(s->row0, s->H, s->T, b, h, t, j);
}

/* q, k (B,H,T,dq); v (B,T,H,dv) rows ldv apart; out (B,T,H,dv) rows ldo apart (assigned);
 * att (B,H,T,T) probabilities before dropout (saved; causal: entries above the diagonal are 0). */
void pelab_attn_ref_forward(pelab_real *out, pelab_real *att, const pelab_real *q,
                            const pelab_real *k, const pelab_real *v, const struct pelab_attn_call *s);
/* dq, dk (B,H,T,dq) assigned; dv (B,T,H,dv, rows ldv apart) assigned; datt (B,H,T,T) scratch that
 * ends holding dscores; bias parameter gradients +=. */
void pelab_attn_ref_backward(pelab_real *dq, pelab_real *dk, pelab_real *dv, pelab_real *datt,
                             const pelab_real *dout, const pelab_real *att, const pelab_real *q,
                             const pelab_real *k, const pelab_real *v,
                             const struct pelab_attn_call *s);

/* Tiled kernel. q, k, v, out as for the reference; lse (B,H,T) each row's log-sum-exp of scores,
 * saved for the backward in place of att. No buffer grows with T²: per thread, a few tiles.
 * PELAB_OK, or PELAB_ERR_RUNTIME (message set) when that scratch cannot be allocated. */
int pelab_attn_tiled_forward(pelab_real *out, pelab_real *lse, const pelab_real *q,
                             const pelab_real *k, const pelab_real *v, const struct pelab_attn_call *s);
/* dq, dk (B,H,T,dq) assigned; dv (B,T,H,dv, rows ldv apart) assigned; bias parameter gradients +=
 * (the same bits run to run for a given thread count). dout, out (B,T,H,dv) rows ldo apart: the
 * output gradient and the forward's output; lse the forward's. PELAB_OK or PELAB_ERR_RUNTIME. */
int pelab_attn_tiled_backward(pelab_real *dq, pelab_real *dk, pelab_real *dv, const pelab_real *dout,
                              const pelab_real *out, const pelab_real *lse, const pelab_real *q,
                              const pelab_real *k, const pelab_real *v, const struct pelab_attn_call *s);

/* Keys and values of one sequence's positions so far, every layer's, for attention one chunk of
 * new queries at a time (generation), and the scores of one chunk. Zero-initialised means empty. */
struct pelab_attn_cache {
    int cap, len, chunk;   /* positions it holds at most, holds now; new queries per call at most */
    int layers, H, dq, dv;
    pelab_real *k, *v;     /* (layers,H,cap,dq), (layers,H,cap,dv); NULL when kept in bf16: */
    uint16_t *k16, *v16;   /* the same in bf16 (rounded to nearest even), or NULL */
    pelab_real *wide_k, *wide_v; /* (H,cap,dq), (H,cap,dv): one layer's k16, v16 widened, for the
                            * matrix products of a chunk of many queries; NULL without bf16 */
    struct pelab_pe_site_bufs sites; /* the encoding's PER_KEY site values of the cached keys, a
                            * PLAN_CACHE plan: (layers,H,cap,w) each */
    int32_t *pos;          /* (cap,) the cached positions: a bias row's key positions */
    pelab_real *scores;    /* (H,chunk,cap) */
};
/* Room for cap positions of `layers` layers, chunks of at most `chunk` queries, and the PER_KEY
 * values of pe's sites (pe NULL: none); keys and values in bf16 when bf16 is set (half the bytes a
 * generated token reads from the cache; scores and sums stay float32). PELAB_OK, or
 * PELAB_ERR_RUNTIME (message set; nothing held). */
int pelab_attn_cache_init(struct pelab_attn_cache *c, int layers, int H, int dq, int dv, int cap,
                          int chunk, const struct pelab_posenc *pe, int bf16);
void pelab_attn_cache_release(struct pelab_attn_cache *c);
/* The bytes pelab_attn_cache_init allocates for those arguments. */
double pelab_attn_cache_bytes(int layers, int H, int dq, int dv, int cap, int chunk, const struct pelab_posenc *pe,
                              int bf16);
/* Causal attention of s->T new queries of each of s->B sequences, sequence b against caches[b]
 * (at positions len .. len + s->T − 1 of that cache, whose positions the caller has put in its
 * pos from len; s->T ≤ its chunk) — its len cached keys and its new ones: layer s->layer's new keys
 * k (B,H,T,dq) and values v (B,T,H,dv, rows s->ldv apart), and the PER_KEY values of the
 * encoding's sites (s->sites), are stored at each cache's len (which the caller advances once every
 * layer has run), keys and values rounded to bf16 in a bf16 cache; q (B,H,T,dq); out
 * (B,T,H,dv, rows s->ldo apart) assigned. No dropout, not bidirectional. A generated token's
 * queries (T < 16) run every sequence's heads at once; a prompt's chunk one sequence at a time,
 * as matrix products. */
void pelab_attn_cached_forward(struct pelab_attn_cache *const *caches, pelab_real *out, const pelab_real *q,
                               const pelab_real *k, const pelab_real *v, const struct pelab_attn_call *s);

#endif
