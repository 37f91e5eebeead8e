/* Generation with a key/value cache (pelab/kv_cache.h): the model's forward pass
 * (nn/forward.c) on the new tokens of one sequence, t0 tokens already cached, n new ones in chunks
 * of at most `chunk`, with the cached attention (attn/attn_cached.c) in place of the kernels:
 *
 *   x = E[tok] (+ e(pos))                                                    (n,D)
 *   layer l:  qkv = RMSNorm(x)·Wqkv^T;  q', k' = PE(q, k, pos)               (n,3D), (H,n,dq)
 *             K_l[h, t0..t0+n) = k'_h;  V_l[h, t0..t0+n) = v_h               (H,cap,dq), (H,cap,d)
 *             the values per key of the encoding's sites likewise (continuing from t0 − 1's)
 *             atty = softmax(scale · q'·K_l^T + bias(pos, P) + the sites' terms) V_l  (causal)
 *             x += atty·Wo^T
 *             x += GELU(RMSNorm(x)·W1^T)·W2^T
 *   logits = RMSNorm(x)·E^T          (every new row, or only the last)
 *
 * P (cap,) are the cached tokens' positions, the keys of the bias rows. What differs from a full
 * pass is only the order of the attention's sums, so logits agree to rounding.
 *
 * A batch (pelab_kv_batch) steps several sequences' caches at once: one new token of each, the
 * rows of one pass whose products read every weight once for all of them (the bytes a decoded
 * token costs, shared), each row attending to its own cache.
 */
#include <stdlib.h>
#include <string.h>
#include "pelab/kv_cache.h"
#include "pelab/status.h"
#include "attn/attention.h"
#include "nn/forward.h"

#define CHUNK_MAX 64            /* new tokens per pass through the layers */
#define SCORES_MAX (8L << 20)   /* reals of the (H, chunk, t0+n) scores of one chunk, at most */

struct pelab_kv_cache {
    struct pelab_model *m;
    struct pelab_attn_cache kv; /* every layer's keys and values, the positions, the scores */
    pelab_real *logits;         /* (V,) the last token's */
};

/* Sequences of one model stepped together (pelab_kv_batch_step), and the step's gathered rows. */
struct pelab_kv_batch {
    int count;
    struct pelab_kv_cache **seq;      /* (count,) */
    struct pelab_attn_cache **active; /* (count,) the caches of the sequences a step takes */
    int32_t *tokens, *pos;            /* (count,) a step's tokens and positions, gathered */
    pelab_real *logits;               /* (count,V) */
};

int pelab_kv_cache_check(const struct pelab_model *m, long len) {
    const struct pelab_posenc *pe = &m->pe;
    return pe->ops->cache_check ? pe->ops->cache_check(pe, len) : PELAB_OK;
}

void pelab_kv_cache_free(struct pelab_kv_cache *c) {
    if (!c) return;
    pelab_attn_cache_release(&c->kv);
    free(c->logits);
    free(c);
}

/* New queries per pass of a cache of `capacity` positions: as many as SCORES_MAX scores allow. */
static long chunk_of(const struct pelab_model *m, int capacity) {
    const long chunk = SCORES_MAX / ((long)m->cfg.n_heads * capacity);
    return chunk < 1 ? 1 : chunk > CHUNK_MAX ? CHUNK_MAX : chunk;
}

int pelab_kv_batch_fit(const struct pelab_model *m, int capacity, int bf16, int most) {
    /* a cache's memory: what its attention cache allocates (as cache_new asks for it), the
     * logits and what a step gathers of its sites' values (the model's PLAN_LAST, one row) */
    const int H = m->cfg.n_heads;
    const double bytes = pelab_attn_cache_bytes(m->cfg.n_layers, H, m->pe.qk_dim, m->cfg.d_model / H, capacity,
                                                (int)chunk_of(m, capacity), &m->pe, bf16) +
                         (double)m->cfg.vocab * sizeof(pelab_real) +
                         pelab_posenc_plan_bytes(&m->pe, PELAB_PE_PLAN_LAST, 0, 1, 1, 1);
    const double fit = (double)PELAB_KV_BATCH_BYTES / bytes;
    return fit < 1 ? 1 : fit < most ? (int)fit : most;
}

static int cache_new(struct pelab_kv_cache **out, struct pelab_model *m, int capacity, int bf16) {
    *out = NULL;
    if (capacity < 1)
        return pelab_fail(PELAB_ERR_USAGE, "a KV cache needs room for a position (capacity %d)", capacity);
    int rc = pelab_kv_cache_check(m, capacity);
    if (rc) return rc;
    struct pelab_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    const long H = m->cfg.n_heads, chunk = chunk_of(m, capacity);
    c->m = m;
    rc = pelab_attn_cache_init(&c->kv, m->cfg.n_layers, (int)H, m->pe.qk_dim, m->cfg.d_model / (int)H,
                               capacity, (int)chunk, &m->pe, bf16);
    if (!rc && !(c->logits = malloc((size_t)m->cfg.vocab * sizeof *c->logits)))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for a KV cache of %d positions", capacity);
    if (rc) {
        pelab_kv_cache_free(c);
        return rc;
    }
    *out = c;
    return PELAB_OK;
}

int pelab_kv_cache_new(struct pelab_kv_cache **out, struct pelab_model *m, int capacity) {
    return cache_new(out, m, capacity, 0);
}

int pelab_kv_cache_new_bf16(struct pelab_kv_cache **out, struct pelab_model *m, int capacity) {
    return cache_new(out, m, capacity, 1);
}

void pelab_kv_cache_clear(struct pelab_kv_cache *c) { c->kv.len = 0; }

int pelab_kv_cache_length(const struct pelab_kv_cache *c) { return c->kv.len; }

const pelab_real *pelab_kv_cache_logits(const struct pelab_kv_cache *c) { return c->logits; }

/* The forward pass of generation (pelab_model_forward_generate) on caches of `cap` positions: an
 * encoding that centres positions per pass measures them from the cache's middle. */
static int generate(struct pelab_model *m, struct pelab_attn_cache *const *caches, const int32_t *tokens,
                    const int32_t *pos, int B, int T, int logits_from, pelab_real *logits) {
    struct pelab_posenc *pe = &m->pe;
    pe->has_cache_ref = 1;
    pe->cache_ref = (caches[0]->cap - 1) / 2;
    int rc = pelab_model_forward_generate(m, caches, tokens, pos, B, T, logits_from, logits);
    pe->has_cache_ref = 0;
    return rc;
}

/* One chunk of n ≤ chunk tokens through the model's layers; the logits of its rows into logits
 * (n,V) when not NULL, and the last row's into c->logits. */
static int append_chunk(struct pelab_kv_cache *c, const int32_t *tokens, const int32_t *pos, int n,
                        pelab_real *logits) {
    const long V = c->m->cfg.vocab;
    memcpy(c->kv.pos + c->kv.len, pos, (size_t)n * sizeof *pos); /* the bias rows' key positions */
    struct pelab_attn_cache *kv = &c->kv;
    int rc = generate(c->m, &kv, tokens, pos, 1, n, logits ? 0 : n - 1, logits ? logits : c->logits);
    if (rc) return rc;
    if (logits) memcpy(c->logits, logits + (n - 1) * V, (size_t)V * sizeof *logits);
    c->kv.len += n;
    return PELAB_OK;
}

int pelab_kv_cache_append(struct pelab_kv_cache *c, const int32_t *tokens, const int32_t *pos,
                          int n, pelab_real *logits) {
    if (n < 1) return pelab_fail(PELAB_ERR_USAGE, "nothing to append to the KV cache");
    if (n > c->kv.cap - c->kv.len)
        return pelab_fail(PELAB_ERR_USAGE, "the KV cache holds %d positions: %d cached and %d "
                          "more do not fit", c->kv.cap, c->kv.len, n);
    const int len0 = c->kv.len;
    const long V = c->m->cfg.vocab;
    for (int i = 0; i < n; i += c->kv.chunk) {
        const int k = n - i < c->kv.chunk ? n - i : c->kv.chunk;
        int rc = append_chunk(c, tokens + i, pos + i, k, logits ? logits + i * V : NULL);
        if (rc) {
            c->kv.len = len0; /* what the refused pass wrote past len0 is forgotten */
            return rc;
        }
    }
    return PELAB_OK;
}

void pelab_kv_batch_free(struct pelab_kv_batch *b) {
    if (!b) return;
    for (int i = 0; b->seq && i < b->count; i++) pelab_kv_cache_free(b->seq[i]);
    free(b->seq);
    free(b->active);
    free(b->tokens);
    free(b->pos);
    free(b->logits);
    free(b);
}

int pelab_kv_batch_new(struct pelab_kv_batch **out, struct pelab_model *m, int count, int capacity,
                       int bf16) {
    *out = NULL;
    if (count < 1) return pelab_fail(PELAB_ERR_USAGE, "a batch of KV caches needs a sequence (count %d)", count);
    struct pelab_kv_batch *b = calloc(1, sizeof *b);
    if (!b) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    const size_t n = (size_t)count, V = (size_t)m->cfg.vocab;
    b->count = count;
    b->seq = calloc(n, sizeof *b->seq);
    b->active = malloc(n * sizeof *b->active);
    b->tokens = malloc(n * sizeof *b->tokens);
    b->pos = malloc(n * sizeof *b->pos);
    b->logits = malloc(n * V * sizeof *b->logits);
    int rc = b->seq && b->active && b->tokens && b->pos && b->logits
                 ? PELAB_OK
                 : pelab_fail(PELAB_ERR_RUNTIME, "out of memory for a batch of %d KV caches", count);
    for (int i = 0; i < count && !rc; i++) rc = cache_new(&b->seq[i], m, capacity, bf16);
    if (rc) {
        pelab_kv_batch_free(b);
        return rc;
    }
    *out = b;
    return PELAB_OK;
}

struct pelab_kv_cache *pelab_kv_batch_sequence(struct pelab_kv_batch *b, int i) {
    PELAB_ASSERT(i >= 0 && i < b->count);
    return b->seq[i];
}

int pelab_kv_batch_step(struct pelab_kv_batch *b, const int32_t *tokens, const int32_t *pos) {
    int k = 0; /* the sequences that take a token, in order */
    for (int i = 0; i < b->count; i++) {
        if (tokens[i] < 0) continue;
        struct pelab_kv_cache *c = b->seq[i];
        if (c->kv.len == c->kv.cap)
            return pelab_fail(PELAB_ERR_USAGE, "sequence %d of the batch: its KV cache holds %d "
                              "positions, all cached", i, c->kv.cap);
        c->kv.pos[c->kv.len] = pos[i];
        b->active[k] = &c->kv;
        b->tokens[k] = tokens[i];
        b->pos[k++] = pos[i];
    }
    if (!k) return PELAB_OK;
    struct pelab_model *m = b->seq[0]->m;
    const size_t V = (size_t)m->cfg.vocab;
    int rc = generate(m, b->active, b->tokens, b->pos, k, 1, 0, b->logits);
    if (rc) return rc; /* what the refused pass wrote past each length is forgotten */
    for (int i = 0, j = 0; i < b->count; i++) {
        if (tokens[i] < 0) continue;
        struct pelab_kv_cache *c = b->seq[i];
        memcpy(c->logits, b->logits + j++ * V, V * sizeof *c->logits);
        c->kv.len++;
    }
    return PELAB_OK;
}
