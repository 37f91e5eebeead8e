/* posenc/site.h — sites as data. A site is where an encoding's terms enter the model. EMBED, QK
 * and BIAS have fixed places (the embedding, the queries and keys, the bias tiles) and their own
 * functions in struct pelab_posenc_ops. The sites inside a block whose terms the encoding
 * computes per layer into buffers that the attention kernels read (KEY: a value per key; COUNT:
 * each query's logits of counted positions) are declared here instead, as data:
 *
 *   name, bit     "KEY", PELAB_SITE_KEY
 *   reads         what the encoding's hooks read: the block's normed input x, or the queries
 *   bufs          its buffers, each a name and a shape in dimension letters ("BHT", "BHTP"):
 *                 those the encoding writes (OUT), those a kernel saves for its backward
 *   kernel hooks  what the attention kernels do with the buffers on a block of scores
 *
 * and an encoding lists, in ops->layer_sites, each such site it acts at with its two hooks there
 * (forward: write the OUT buffers; backward: from their gradients, into the input's gradient and
 * its parameters'). The model's buffer plans (training, evaluation, the backward's gradients),
 * the KV cache and the tests size every buffer from these declarations; the model calls the
 * hooks through pelab_posenc_sites_forward/_backward and the three kernels through
 * attn/sites.h, so that none of them names a site's buffers, and a new site is one declaration
 * (src/attn/site_key.c is the smallest) with nothing above posenc/ and attn/ edited.
 */
#ifndef PELAB_POSENC_SITE_H
#define PELAB_POSENC_SITE_H

#include <stddef.h>
#include <stdint.h>
#include "pelab/posenc.h"
#include "pelab/real.h"

#define PELAB_PE_LAYER_SITES 4 /* sites inside the blocks one encoding may act at */
#define PELAB_PE_SITE_BUFS 4   /* buffers one site may declare */

/* A site buffer's flags. */
enum pelab_pe_buf_flag {
    PELAB_PE_OUT = 1 << 0,         /* the encoding's forward hook assigns it; the kernels read it and
                                      the attention backward assigns its gradient (shape the same) */
    PELAB_PE_SAVED_REF = 1 << 1,   /* the reference kernel's forward writes it for its backward */
    PELAB_PE_SAVED_TILED = 1 << 2, /* the tiled kernel's forward writes it for its backward */
    PELAB_PE_PER_KEY = 1 << 3,     /* OUT, shape "BHT…": a value per key, which a KV cache keeps
                                      beside the keys (w = the product of the letters after BHT) */
    PELAB_PE_DOUBLE = 1 << 4,      /* of doubles, not pelab_real (a saved buffer: an OUT one and
                                      its gradient are pelab_real) */
};

/* One buffer of a site, per layer. Shape letters: B (batch rows), H (heads), T (positions),
 * P (pe->count_max, the width an encoding gives its site's buffers), Q (pe->qk_dim), D (pe->D).
 * Every shape begins with B and H: a kernel's (b, h) owns a contiguous slice. */
struct pelab_pe_buf {
    const char *name;  /* "kb" */
    const char *what;  /* in messages: "the encoding's key values" */
    const char *shape; /* "BHT" */
    unsigned flags;    /* PELAB_PE_* */
};

/* What a site's encoding hooks read. */
enum pelab_pe_input {
    PELAB_PE_READS_X, /* x (B,T,D): the block's normed input, what q, k and v are computed from */
    PELAB_PE_READS_Q, /* q (B,H,T,qk_dim): the queries after QK */
};

/* The attention kernels, as a site's kernel hooks see them. */
enum pelab_pe_kernel { PELAB_PE_KERNEL_REF, PELAB_PE_KERNEL_TILED, PELAB_PE_KERNEL_CACHED };

/* Buffers of an encoding's layer sites: [k][j] is buffer j (declaration order) of site k (the
 * order of ops->layer_sites); NULL where a plan holds none. One layer's, or a plan's whole arrays. */
struct pelab_pe_site_bufs {
    void *buf[PELAB_PE_LAYER_SITES][PELAB_PE_SITE_BUFS];
};

struct pelab_attn_call;
struct pelab_attn_cache;

/* A block of scores a site's kernel hooks act on: S (nq, nk), rows ld apart, the scores of query
 * rows i0 .. i0+nq−1 of the call's (B,H,T,…) buffers, head h of sequence b, against keys
 * j0 .. j0+nk−1. Query row r sees its first pelab_site_visible(c, r) keys of the block (attn/sites.h):
 * the causal mask puts query row 0 at key index `first` (i0; in generation, the cached
 * positions + i0). The forward hooks get the scores without the site's terms and add them; the
 * backward hooks get dS, the gradient at the scores with them, and turn it into the gradient at
 * the scores without them. */
struct pelab_site_block {
    const struct pelab_attn_call *s;
    enum pelab_pe_kernel kernel;
    const struct pelab_attn_cache *cache; /* generation: sequence b's KV cache, else NULL */
    int b, h, i0, nq, first, j0, nk;
    pelab_real *S;
    long ld;
    /* bound per site (attn/sites.c): */
    void *buf[PELAB_PE_SITE_BUFS];         /* its buffers at this layer, whole (B,H,T,…); NULL:
                                              saved by another kernel */
    pelab_real *grad[PELAB_PE_SITE_BUFS];  /* backward: the gradients of its OUT buffers, (B,H,T,…) */
    const pelab_real *keys[PELAB_PE_SITE_BUFS]; /* PER_KEY buffers: head h's values of keys 0, 1, …
                                              (w apart), from the batch or from the KV cache */
    double *carry;  /* (nq, 2): per query row, 0 before its first block, kept across its blocks */
    void *scratch;  /* tiled kernel: the site's per-thread scratch (tile_scratch bytes) */
};

/* A site inside the blocks. */
struct pelab_pe_site_decl {
    const char *name;    /* "KEY" */
    unsigned bit;        /* its PELAB_SITE_* bit in ops->sites and pe->sites */
    const char *summary; /* one line: what it adds where */
    enum pelab_pe_input reads;
    struct pelab_pe_buf bufs[PELAB_PE_SITE_BUFS + 1]; /* OUT ones first; name-NULL terminated */
    /* In the attention kernels, on blocks of scores. forward: every kernel's forward. backward:
     * the reference kernel's, on whole rows (nq = 1, j0 = 0), after its saved buffers.
     * tile_recompute and tile_backward: the tiled kernel's backward, which forms each block's
     * scores again, then calls tile_recompute on them (NULL: forward) and, once dS is formed,
     * tile_backward (NULL: backward), visiting key blocks from 0 up. Hooks run on many threads at
     * once, each (b, h) on one: they write only S, their carry and scratch, and the (b, h) slices
     * of the site's buffers and gradients. */
    int right_to_left; /* the tiled forward visits a query tile's key blocks from its diagonal
                          back (a running sum over keys, COUNT's); else from key 0 up */
    size_t (*tile_scratch)(const struct pelab_posenc *pe, int tile); /* bytes; NULL: none */
    void (*forward)(const struct pelab_site_block *c);
    void (*backward)(const struct pelab_site_block *c);
    void (*tile_recompute)(const struct pelab_site_block *c);
    void (*tile_backward)(const struct pelab_site_block *c);
};

/* What an encoding's hooks at a site see, for one layer of a batch B×T (buffers by declaration
 * index j; entries of other buffers NULL). */
struct pelab_pe_site_io {
    int B, T;
    pelab_real *out[PELAB_PE_SITE_BUFS];        /* forward: its OUT buffers, assigned */
    const pelab_real *dout[PELAB_PE_SITE_BUFS]; /* backward: their gradients, as the attention
                                                   backward assigned them */
    /* generation with a KV cache: each PER_KEY buffer's values (B,H,w) at each sequence's last
     * cached position (0 at a sequence's start), from which a running sum continues; else NULL */
    const pelab_real *prev[PELAB_PE_SITE_BUFS];
    const pelab_real *in; /* what the site reads (site->reads) */
    pelab_real *din;      /* backward: its gradient, += */
    const int32_t *pos;   /* (B,T,n) the positions */
};

/* The built-in sites (src/attn/site_<name>.c). */
extern const struct pelab_pe_site_decl pelab_site_key, pelab_site_count;

/* The encoding's layer sites: ops->layer_sites has pelab_posenc_layer_sites(pe) entries (at most
 * PELAB_PE_LAYER_SITES); entry k's site, or NULL when pe->sites lacks its bit (init's options
 * chose another). Plans, hooks and kernels index a site's buffers by that k. */
int pelab_posenc_layer_sites(const struct pelab_posenc *pe);
const struct pelab_pe_site_decl *pelab_posenc_layer_site(const struct pelab_posenc *pe, int k);

/* --- buffer plans: every site buffer sized from its declaration ------------------------------- */

enum pelab_pe_plan {
    PELAB_PE_PLAN_PASS,  /* a forward pass, per layer: the OUT buffers and what `kernel` saves */
    PELAB_PE_PLAN_GRAD,  /* a backward pass, one layer: the gradients of the OUT buffers */
    PELAB_PE_PLAN_LAST,  /* generation: each PER_KEY buffer's values at each sequence's last
                            cached position (B,H,w), the forward hooks' prev */
    PELAB_PE_PLAN_CACHE, /* a KV cache of T positions, per layer: each PER_KEY buffer (H,T,w) */
};

/* Elements of one layer of buffer `buf` in `plan` for B×T (kernel: the attention kernel of a
 * PASS); 0 when the plan holds no such buffer. */
long pelab_posenc_plan_count(const struct pelab_posenc *pe, const struct pelab_pe_buf *buf,
                             enum pelab_pe_plan plan, enum pelab_pe_kernel kernel, long B, long T);
/* Bytes of `layers` layers of the plan. */
double pelab_posenc_plan_bytes(const struct pelab_posenc *pe, enum pelab_pe_plan plan,
                               enum pelab_pe_kernel kernel, long layers, long B, long T);
/* Allocates them into bufs (every other entry NULL): PELAB_OK, or PELAB_ERR_RUNTIME (message set;
 * nothing held). */
int pelab_posenc_plan_alloc(const struct pelab_posenc *pe, struct pelab_pe_site_bufs *bufs,
                            enum pelab_pe_plan plan, enum pelab_pe_kernel kernel, long layers, long B,
                            long T);
void pelab_posenc_plan_free(struct pelab_pe_site_bufs *bufs);
/* Layer l's slices of a plan's arrays allocated for at least l + 1 layers of B×T. */
struct pelab_pe_site_bufs pelab_posenc_plan_layer(const struct pelab_posenc *pe,
                                                  const struct pelab_pe_site_bufs *whole,
                                                  enum pelab_pe_plan plan, enum pelab_pe_kernel kernel,
                                                  int l, long B, long T);
/* The shape's dimensions for B×T into dims (at most 4) and their letters as "(B,H,T)" into
 * letters (at least 16 bytes); returns how many. */
int pelab_posenc_buf_dims(const struct pelab_posenc *pe, const struct pelab_pe_buf *buf, long B, long T,
                          long dims[4], char *letters);
/* A PER_KEY buffer's values per (key, head), w. */
long pelab_posenc_buf_width(const struct pelab_posenc *pe, const struct pelab_pe_buf *buf);

/* --- the model's calls ---------------------------------------------------------------------- */

/* The inputs the sites may read, and their gradients (backward). */
struct pelab_pe_site_inputs {
    const pelab_real *x; /* (B,T,D) the block's normed input */
    const pelab_real *q; /* (B,H,T,qk_dim) the queries after QK */
    pelab_real *dx, *dq; /* backward: += */
    const int32_t *pos;  /* (B,T,n) */
};

/* Layer `layer`'s forward hooks, every site in order: its OUT buffers in bufs (a PASS plan's
 * layer) from the inputs; last: the PLAN_LAST buffers gathered from the KV caches in generation,
 * else NULL. */
void pelab_posenc_sites_forward(struct pelab_posenc *pe, int layer, const struct pelab_pe_site_bufs *bufs,
                                const struct pelab_pe_site_bufs *last,
                                const struct pelab_pe_site_inputs *in, int B, int T);
/* The backward hooks of the sites that read `reads`, in reverse order, from grads (a GRAD plan,
 * which the attention backward assigned): into in->dx or in->dq and the parameters' gradients.
 * The model calls it twice: for the queries before QK's backward, for x after qkv's. */
void pelab_posenc_sites_backward(struct pelab_posenc *pe, int layer, enum pelab_pe_input reads,
                                 const struct pelab_pe_site_bufs *bufs, const struct pelab_pe_site_bufs *grads,
                                 const struct pelab_pe_site_inputs *in, int B, int T);

#endif
