/* Generation with a key/value cache (pelab/kv_cache.h): the model's forward pass
 * (nn/forward.c) on the new tokens of one sequence, t0 tokens already cached, n new ones in chunks
 * of at most `chunk`, with the cached attention (attn/attn_cached.c) in place of the kernels:
 *
 *   x = E[tok] (+ e(pos))                                                    (n,D)
 *   layer l:  qkv = RMSNorm(x)·Wqkv^T;  q', k' = PE(q, k, pos)               (n,3D), (H,n,dq)
 *             K_l[h, t0..t0+n) = k'_h;  V_l[h, t0..t0+n) = v_h               (H,cap,dq), (H,cap,d)
 *             KB_l[t0..t0+n) = kb (KEY site, continuing from KB_l[t0 − 1])   (cap,H)
 *             atty = softmax(scale · q'·K_l^T + bias(pos, P) + KB_l (+ the count's z)) V_l  (causal)
 *             x += atty·Wo^T
 *             x += GELU(RMSNorm(x)·W1^T)·W2^T
 *   logits = RMSNorm(x)·E^T          (every new row, or only the last)
 *
 * P (cap,) are the cached tokens' positions, the keys of the bias rows. What differs from a full
 * pass is only the order of the attention's sums, so logits agree to rounding.
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

static int cache_new(struct pelab_kv_cache **out, struct pelab_model *m, int capacity, int bf16) {
    *out = NULL;
    if (capacity < 1)
        return pelab_fail(PELAB_ERR_USAGE, "a KV cache needs room for a position (capacity %d)", capacity);
    int rc = pelab_kv_cache_check(m, capacity);
    if (rc) return rc;
    struct pelab_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    const long H = m->cfg.n_heads;
    long chunk = SCORES_MAX / (H * capacity);
    chunk = chunk < 1 ? 1 : chunk > CHUNK_MAX ? CHUNK_MAX : chunk;
    c->m = m;
    rc = pelab_attn_cache_init(&c->kv, m->cfg.n_layers, (int)H, m->pe.qk_dim, m->cfg.d_model / (int)H,
                               capacity, (int)chunk, (m->pe.sites & PELAB_SITE_KEY) != 0, bf16);
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

/* One chunk of n ≤ chunk tokens through the model's layers; the logits of its rows into logits
 * (n,V) when not NULL, and the last row's into c->logits. */
static int append_chunk(struct pelab_kv_cache *c, const int32_t *tokens, const int32_t *pos, int n,
                        pelab_real *logits) {
    struct pelab_model *m = c->m;
    struct pelab_posenc *pe = &m->pe;
    const long V = m->cfg.vocab;
    memcpy(c->kv.pos + c->kv.len, pos, (size_t)n * sizeof *pos); /* the bias rows' key positions */
    /* an encoding that centres positions per pass measures them from the cache's middle */
    pe->has_cache_ref = 1;
    pe->cache_ref = (c->kv.cap - 1) / 2;
    int rc = pelab_model_forward_generate(m, &c->kv, tokens, pos, n, logits ? 0 : n - 1,
                                          logits ? logits : c->logits);
    pe->has_cache_ref = 0;
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
