/* Generation with a key/value cache (pelab/kv_cache.h): the layer of model.c on the new tokens
 * of one sequence, t0 tokens already cached, n new ones in chunks of at most `chunk`:
 *
 *   x = E[tok] (+ e(pos))                                                    (n,D)
 *   layer l:  qkv = RMSNorm(x)·Wqkv^T;  q', k' = PE(q, k, pos)               (n,3D), (H,n,dq)
 *             K_l[h, t0..t0+n) = k'_h;  V_l[h, t0..t0+n) = v_h               (H,cap,dq), (H,cap,d)
 *             S[h,i,j] = scale · q'_h[i]·K_l[h,j] + bias_h(pos[i], P[j])      j ≤ t0 + i
 *                                   (a prompt's chunk as matrix products, a new token as dots)
 *             atty[i,h] = Σ_j softmax_j(S[h,i,:]) V_l[h,j];  x += atty·Wo^T
 *             x += GELU(RMSNorm(x)·W1^T)·W2^T
 *   logits = RMSNorm(x)·E^T          (every new row, or only the last)
 *
 * P (cap,) are the cached tokens' positions, the keys of the bias rows. The layers are model.c's
 * (pelab_model_forward_pass) with this file's attention in place of the kernels; what differs
 * from a full pass is only the order of the attention's sums (the tiled kernel's online softmax),
 * so logits agree to rounding.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/kv_cache.h"
#include "pelab/status.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/vmath.h"
#include "nn/model_eval.h"

#define CHUNK_MAX 64            /* new tokens per pass through the layers */
#define SCORES_MAX (8L << 20)   /* reals of the (H, chunk, t0+n) scores of one chunk, at most */

struct pelab_kv_cache {
    struct pelab_model *m;
    int cap, len, chunk;
    pelab_real *k, *v;          /* (N,H,cap,dq), (N,H,cap,d) */
    int32_t *pos;               /* (cap,) the cached tokens' positions */
    /* scratch for one chunk */
    pelab_real *x, *ln, *rstd;  /* (chunk,D), (chunk,D), (chunk,) */
    pelab_real *qkv;            /* (chunk,3D) */
    pelab_real *qo, *ko;        /* (H,chunk,dq) */
    pelab_real *atty, *hidden;  /* (chunk,D), (chunk,M·D) */
    pelab_real *scores;         /* (H,chunk,cap): bias, then scores, then probabilities */
    pelab_real *logits;         /* (V,) the last token's */
};

int pelab_kv_cache_check(const struct pelab_model *m, long len) {
    const struct pelab_posenc *pe = &m->pe;
    return pe->ops->cache_check ? pe->ops->cache_check(pe, len) : PELAB_OK;
}

void pelab_kv_cache_free(struct pelab_kv_cache *c) {
    if (!c) return;
    pelab_real *bufs[] = {c->k, c->v, c->x, c->ln, c->rstd, c->qkv, c->qo, c->ko, c->atty,
                          c->hidden, c->scores, c->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(c->pos);
    free(c);
}

int pelab_kv_cache_new(struct pelab_kv_cache **out, struct pelab_model *m, int capacity) {
    *out = NULL;
    if (capacity < 1)
        return pelab_fail(PELAB_ERR_USAGE, "a KV cache needs room for a position (capacity %d)", capacity);
    int rc = pelab_kv_cache_check(m, capacity);
    if (rc) return rc;
    struct pelab_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    const long N = m->cfg.n_layers, D = m->cfg.d_model, H = m->cfg.n_heads, V = m->cfg.vocab;
    const long d = D / H, dq = m->pe.qk_dim, MD = m->cfg.mlp_mult * D, cap = capacity;
    long chunk = SCORES_MAX / (H * cap);
    chunk = chunk < 1 ? 1 : chunk > CHUNK_MAX ? CHUNK_MAX : chunk;
    c->m = m;
    c->cap = capacity;
    c->chunk = (int)chunk;
    int ok = 1;
#define ALLOC(buf, n) (ok = ok && ((buf) = malloc((size_t)(n) * sizeof *(buf))) != NULL)
    ALLOC(c->k, N * H * cap * dq);
    ALLOC(c->v, N * H * cap * d);
    ALLOC(c->pos, cap);
    ALLOC(c->x, chunk * D);
    ALLOC(c->ln, chunk * D);
    ALLOC(c->rstd, chunk);
    ALLOC(c->qkv, chunk * 3 * D);
    ALLOC(c->qo, H * chunk * dq);
    ALLOC(c->ko, H * chunk * dq);
    ALLOC(c->atty, chunk * D);
    ALLOC(c->hidden, chunk * MD);
    ALLOC(c->scores, H * chunk * cap);
    ALLOC(c->logits, V);
#undef ALLOC
    if (!ok) {
        pelab_kv_cache_free(c);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for a KV cache of %d positions", capacity);
    }
    *out = c;
    return PELAB_OK;
}

void pelab_kv_cache_clear(struct pelab_kv_cache *c) { c->len = 0; }

int pelab_kv_cache_length(const struct pelab_kv_cache *c) { return c->len; }

const pelab_real *pelab_kv_cache_logits(const struct pelab_kv_cache *c) { return c->logits; }

static inline pelab_real dot(const pelab_real *a, const pelab_real *b, int n) {
    pelab_real s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Layer l's attention for the chunk's n queries (qo) against the t0 + n cached keys and values,
 * into atty (n,D): per head, S = scale·Q·K^T (+ bias), the causal softmax of each row over
 * keys 0..t0+i (later keys get probability 0), atty_h = P·V. A chunk of GEMM_ROWS queries or more
 * (a prompt) forms S and P·V as matrix products; fewer (a generated token) as dot products, which
 * read the cache once instead of packing it for a product of one row. */
#define GEMM_ROWS 16
static void attend(struct pelab_kv_cache *c, int l, const int32_t *pos, int t0, int n,
                   const pelab_real *qo, pelab_real *atty) {
    struct pelab_model *m = c->m;
    struct pelab_posenc *pe = &m->pe;
    const int D = m->cfg.d_model, H = m->cfg.n_heads, d = D / H, dq = pe->qk_dim;
    const int nk = t0 + n, cap = c->cap, gemm = n >= GEMM_ROWS;
    const pelab_real scale = (pelab_real)(1.0 / sqrt((double)d));
    const pelab_real *K = c->k + (long)l * H * cap * dq, *Vv = c->v + (long)l * H * cap * d;
    const int has_bias = (pe->sites & PELAB_SITE_BIAS) != 0;
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) { /* bias_tile may run on several threads at once */
        pelab_real *S = c->scores + (long)h * n * nk;
        if (has_bias) pe->ops->bias_tile(pe, l, h, S, pos, n, c->pos, nk);
        else if (!gemm) memset(S, 0, (size_t)n * nk * sizeof *S);
    }
    if (gemm)
        for (int h = 0; h < H; h++) /* (n,nk) = scale · (n,dq)·(nk,dq)^T + bias */
            pelab_gemm(0, 1, n, nk, dq, scale, qo + (long)h * n * dq, dq,
                       K + (long)h * cap * dq, dq, has_bias ? 1 : 0, c->scores + (long)h * n * nk, nk);
#pragma omp parallel for collapse(2) schedule(static)
    for (int h = 0; h < H; h++)
        for (int i = 0; i < n; i++) {
            const int t = t0 + i; /* keys 0..t */
            pelab_real *row = c->scores + ((long)h * n + i) * nk;
            const pelab_real *q = qo + ((long)h * n + i) * dq, *Kh = K + (long)h * cap * dq;
            if (!gemm)
                for (int j = 0; j <= t; j++) row[j] += scale * dot(q, Kh + (long)j * dq, dq);
            pelab_real mx = -INFINITY;
            for (int j = 0; j <= t; j++) mx = row[j] > mx ? row[j] : mx;
            pelab_real sum = 0;
            for (int j = 0; j <= t; j++) {
                row[j] = pelab_vexp(row[j] - mx);
                sum += row[j];
            }
            for (int j = 0; j <= t; j++) row[j] /= sum;
            for (int j = t + 1; j < nk; j++) row[j] = 0;
            if (gemm) continue;
            pelab_real *o = atty + (long)i * D + (long)h * d;
            const pelab_real *Vh = Vv + (long)h * cap * d;
            memset(o, 0, (size_t)d * sizeof *o);
            for (int j = 0; j <= t; j++)
                for (int e = 0; e < d; e++) o[e] += row[j] * Vh[(long)j * d + e];
        }
    if (gemm)
        for (int h = 0; h < H; h++) /* atty[:, h] (n,d), rows D apart = (n,nk)·(nk,d) */
            pelab_gemm(0, 0, n, d, nk, 1, c->scores + (long)h * n * nk, nk, Vv + (long)h * cap * d,
                       d, 0, atty + (long)h * d, D);
}

/* The cache's attention for pelab_model_forward_pass (struct pelab_fwd's attend): layer l's
 * keys and values of the chunk into the cache at t0, then attend. */
struct chunk_pass {
    struct pelab_kv_cache *c;
    const int32_t *pos;
    int t0, n;
};

static int attend_cached(void *ctx, int l, pelab_real *atty, const pelab_real *qo,
                         const pelab_real *ko, const pelab_real *qkv) {
    const struct chunk_pass *p = ctx;
    struct pelab_kv_cache *c = p->c;
    const int D = c->m->cfg.d_model, H = c->m->cfg.n_heads, d = D / H, dq = c->m->pe.qk_dim;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < p->n; i++) {
            const long at = ((long)l * H + h) * c->cap + p->t0 + i;
            memcpy(c->k + at * dq, ko + ((long)h * p->n + i) * dq, (size_t)dq * sizeof *c->k);
            memcpy(c->v + at * d, qkv + (long)i * 3 * D + 2 * D + (long)h * d, (size_t)d * sizeof *c->v);
        }
    attend(c, l, p->pos, p->t0, p->n, qo, atty);
    return PELAB_OK;
}

/* One chunk of n ≤ c->chunk tokens through the model's layers (pelab_model_forward_pass, with
 * the cache's attention); the logits of its rows into logits (n,V) when not NULL, and the last
 * row's into c->logits. */
static int append_chunk(struct pelab_kv_cache *c, const int32_t *tokens, const int32_t *pos, int n,
                        pelab_real *logits) {
    struct pelab_model *m = c->m;
    struct pelab_posenc *pe = &m->pe;
    const long V = m->cfg.vocab;
    struct chunk_pass p = {.c = c, .pos = pos, .t0 = c->len, .n = n};
    memcpy(c->pos + c->len, pos, (size_t)n * sizeof *pos); /* the bias rows' key positions */
    const struct pelab_fwd f = {
        .keep = 0, .rows = n, .x = c->x, .ln = c->ln, .rstd = c->rstd, .qkv = c->qkv, .qo = c->qo,
        .ko = c->ko, .atty = c->atty, .fch = c->hidden, .attend = attend_cached, .ctx = &p,
        .logits_only = 1, .logits_from = logits ? 0 : n - 1, .logits = logits ? logits : c->logits};
    /* an encoding that centres positions per pass measures them from the cache's middle */
    pe->has_cache_ref = 1;
    pe->cache_ref = (c->cap - 1) / 2;
    pelab_model_forward_pass(m, &f, tokens, pos, 1, n);
    pe->has_cache_ref = 0;
    if (m->status) return m->status;
    if (logits) memcpy(c->logits, logits + (n - 1) * V, (size_t)V * sizeof *logits);
    c->len += n;
    return PELAB_OK;
}

int pelab_kv_cache_append(struct pelab_kv_cache *c, const int32_t *tokens, const int32_t *pos,
                          int n, pelab_real *logits) {
    if (n < 1) return pelab_fail(PELAB_ERR_USAGE, "nothing to append to the KV cache");
    if (n > c->cap - c->len)
        return pelab_fail(PELAB_ERR_USAGE, "the KV cache holds %d positions: %d cached and %d "
                          "more do not fit", c->cap, c->len, n);
    const int len0 = c->len;
    const long V = c->m->cfg.vocab;
    for (int i = 0; i < n; i += c->chunk) {
        const int k = n - i < c->chunk ? n - i : c->chunk;
        int rc = append_chunk(c, tokens + i, pos + i, k, logits ? logits + i * V : NULL);
        if (rc) {
            c->len = len0; /* what the refused pass wrote past len0 is forgotten */
            return rc;
        }
    }
    return PELAB_OK;
}
