/* Cached attention (generation): a chunk of n new queries of one sequence against the keys and
 * values of the t0 positions kept from earlier chunks and its own, per head h:
 *
 *   K[h, t0..t0+n) = k_h;  V[h, t0..t0+n) = v_h                          (H,cap,dq), (H,cap,dv)
 *   (or bf16(k_h), bf16(v_h) in a bf16 cache, widened to float32 as they are read)
 *   the PER_KEY values of the sites inside the block (KEY's kb) kept beside them likewise
 *   S[i,j] = scale · q_h[i]·K[h,j] + bias_h(pos[t0 + i], pos[j])            j ≤ t0 + i
 *            + the sites' terms (attn/sites.h: KEY's kb[j] from the cache; COUNT's z_i(p), p
 *              counted from t0 + i back to j)
 *   out[i, h] = Σ_j softmax_j(S[i,:]) V[h,j]
 *
 * A chunk of GEMM_ROWS queries or more (a prompt) forms S and P·V as matrix products; fewer (a
 * generated token) as dot products, which read the cache once instead of packing it for a
 * product of one row; a bf16 cache's dot products widen each key and value as they read it, and
 * its matrix products read them widened once per chunk into one layer's float32 scratch. The
 * function is the reference kernel's on the whole sequence (the order of the sums aside):
 * tests/test_attn.c holds the two together, chunk by chunk.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attn/attention.h"
#include "attn/sites.h"
#include "core/prof.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vec16.h"
#include "kernels/cpu/vmath.h"
#include "pelab/status.h"

#define GEMM_ROWS 16

int pelab_attn_cache_init(struct pelab_attn_cache *c, int layers, int H, int dq, int dv, int cap,
                          int chunk, const struct pelab_posenc *pe, int bf16) {
    *c = (struct pelab_attn_cache){.cap = cap, .chunk = chunk, .layers = layers, .H = H, .dq = dq, .dv = dv};
    const long LH = (long)layers * H;
    if (bf16) {
        c->k16 = malloc((size_t)(LH * cap * dq) * sizeof *c->k16);
        c->v16 = malloc((size_t)(LH * cap * dv) * sizeof *c->v16);
        c->wide_k = malloc((size_t)((long)H * cap * dq) * sizeof *c->wide_k);
        c->wide_v = malloc((size_t)((long)H * cap * dv) * sizeof *c->wide_v);
    } else {
        c->k = malloc((size_t)(LH * cap * dq) * sizeof *c->k);
        c->v = malloc((size_t)(LH * cap * dv) * sizeof *c->v);
    }
    c->pos = malloc((size_t)cap * sizeof *c->pos);
    c->scores = malloc((size_t)((long)H * chunk * cap) * sizeof *c->scores);
    const int kv = bf16 ? c->k16 && c->v16 && c->wide_k && c->wide_v : c->k && c->v;
    if (kv && c->pos && c->scores &&
        pelab_posenc_plan_alloc(pe, &c->sites, PELAB_PE_PLAN_CACHE, 0, layers, 1, cap) == PELAB_OK)
        return PELAB_OK;
    pelab_attn_cache_release(c);
    return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for a KV cache of %d positions", cap);
}

double pelab_attn_cache_bytes(int layers, int H, int dq, int dv, int cap, int chunk, const struct pelab_posenc *pe,
                              int bf16) {
    const double LH = (double)layers * H, kv = (double)cap * (dq + dv), real = sizeof(pelab_real);
    const double keys_values = bf16 ? LH * kv * sizeof(uint16_t) + H * kv * real : LH * kv * real;
    return keys_values + (double)cap * sizeof(int32_t) + (double)H * chunk * cap * real +
           pelab_posenc_plan_bytes(pe, PELAB_PE_PLAN_CACHE, 0, layers, 1, cap);
}

void pelab_attn_cache_release(struct pelab_attn_cache *c) {
    free(c->k);
    free(c->v);
    free(c->k16);
    free(c->v16);
    free(c->wide_k);
    free(c->wide_v);
    free(c->pos);
    free(c->scores);
    pelab_posenc_plan_free(&c->sites);
    *c = (struct pelab_attn_cache){0};
}

/* What each query row of one sequence's chunk reads (pelab_attn_cached_forward). */
struct cached_rows {
    const struct pelab_attn_call *s;
    const struct pelab_attn_cache *cache;
    int b;                            /* the sequence: its rows of the call's (B,H,n,…) buffers */
    pelab_real *scores;               /* (H,n,t0 + n) */
    const pelab_real *q, *K, *V;      /* this layer's: q (H,n,dq), K (H,cap,dq), V (H,cap,dv) */
    const uint16_t *K16, *V16;        /* a bf16 cache's K and V (K, V then its widened scratch) */
    pelab_real *out;                  /* (n,H,dv), rows s->ldo apart */
    int t0, cap;                      /* positions cached before the chunk; the cache's capacity */
    int gemm; /* S and P·V are matrix products: the row only adds the sites' terms and normalises */
};

/* Keys and values of a cache in float32 (K) or bf16 (K16, widened as read): element e of row j. */
static PELAB_ALWAYS_INLINE pelab_real kv_at(const pelab_real *K, const uint16_t *K16, long j, int d, int e) {
    return K16 ? pelab_from_bf16(K16[j * d + e]) : K[j * d + e];
}

/* The dot products of q with R keys (R a constant where it is called), rows at[0..R) of K or K16:
 * vectors of 16 (kernels/cpu/vec16.h), each key its own sums, the lanes summed as a tree; the
 * elements past the last whole vector one by one. */
static PELAB_ALWAYS_INLINE void key_dots(pelab_real *d, const pelab_real *q, const pelab_real *K,
                                         const uint16_t *K16, const long *at, int R, int dq) {
    pelab_reals16 sum[4] = {{0}, {0}, {0}, {0}};
    const int whole = dq / 16 * 16;
    for (int e = 0; e < whole; e += 16) {
        pelab_reals16 qe, ke;
        pelab_load16(&qe, q + e);
        for (int r = 0; r < R; r++) {
            if (K16) pelab_widen16(&ke, K16 + at[r] * dq + e);
            else pelab_load16(&ke, K + at[r] * dq + e);
            sum[r] += qe * ke;
        }
    }
    for (int r = 0; r < R; r++) {
        d[r] = pelab_lanes_sum(&sum[r]);
        for (int e = whole; e < dq; e++) d[r] += q[e] * kv_at(K, K16, at[r], dq, e);
    }
}

/* One query's scores against keys 0..n−1: row[j] += scale · q·K[j]. Four keys at a time, one
 * from each quarter of the keys: four chains of sums and four streams of keys, where one key at a
 * time waits on its chain and on its lanes' sum, and one stream on one prefetcher. Measured on
 * configuration C at a context of 8,192 (one token, 2 threads, an Intel Xeon whose memory serves
 * 24 GB/s), a float32 cache read at: one key at a time 17 GB/s, four consecutive keys 17.5, two
 * from each half 19.6, one from each quarter 21, and with key_dots' tree sums 25 (an `omp simd`
 * reduction per key: 21). */
static PELAB_ALWAYS_INLINE void query_scores(pelab_real *row, const pelab_real *q, const pelab_real *K,
                                             const uint16_t *K16, int n, int dq, pelab_real scale) {
    const int m = n / 4; /* keys j, j + m, j + 2m, j + 3m together; the rest alone */
    pelab_real d[4];
    for (long j = 0; j < m; j++) {
        const long at[4] = {j, j + m, j + 2 * m, j + 3 * m};
        key_dots(d, q, K, K16, at, 4, dq);
        for (int r = 0; r < 4; r++) row[at[r]] += scale * d[r];
    }
    for (long j = 4L * m; j < n; j++) {
        key_dots(d, q, K, K16, &j, 1, dq);
        row[j] += scale * d[0];
    }
}

/* One query's output: o = Σ_j p[j] V[j] over values 0..n−1, four values per pass over o (which
 * is memory: a pass per value would load and store it once per value), one from each quarter
 * (four streams, as query_scores). */
static PELAB_ALWAYS_INLINE void query_values(pelab_real *restrict o, const pelab_real *restrict p,
                                             const pelab_real *V, const uint16_t *V16, int n, int dv) {
    memset(o, 0, (size_t)dv * sizeof *o);
    const int m = n / 4;
    for (int j = 0; j < m; j++)
#pragma omp simd
        for (int e = 0; e < dv; e++)
            o[e] += p[j] * kv_at(V, V16, j, dv, e) + p[j + m] * kv_at(V, V16, j + m, dv, e) +
                    p[j + 2 * m] * kv_at(V, V16, j + 2 * m, dv, e) + p[j + 3 * m] * kv_at(V, V16, j + 3 * m, dv, e);
    for (int j = 4 * m; j < n; j++)
#pragma omp simd
        for (int e = 0; e < dv; e++) o[e] += p[j] * kv_at(V, V16, j, dv, e);
}

/* Row i of head h, keys 0..t0 + i: the sites' terms added, from the cache's values of its keys. */
static void site_terms(const struct cached_rows *r, int h, int i, pelab_real *row) {
    double carry[2 * PELAB_PE_LAYER_SITES];
    struct pelab_attn_site_work w;
    pelab_attn_sites_row_work(carry, &w);
    const struct pelab_site_block blk = {.s = r->s, .kernel = PELAB_PE_KERNEL_CACHED, .cache = r->cache, .b = r->b,
                                         .h = h, .i0 = i, .nq = 1, .first = r->t0 + i, .j0 = 0,
                                         .nk = r->t0 + i + 1, .S = row, .ld = r->t0 + r->s->T};
    pelab_attn_sites_forward(&blk, &w);
}

/* Row i of head h (hi = h·n + i): the scores of keys 0..t (t = t0 + i), their softmax and, one
 * row at a time, Σ_j P_j V_j. Compiled per SIMD level: at a long context the dot product per
 * key and the sum over keys are most of a generated token's attention. */
static PELAB_ALWAYS_INLINE void cached_rows_body(const struct cached_rows *r, int hi) {
    const struct pelab_attn_call *s = r->s;
    const int n = s->T, h = hi / n, i = hi % n, t = r->t0 + i, nk = r->t0 + n;
    const int dq = s->dq, dv = s->dv, cap = r->cap;
    pelab_real *row = r->scores + (long)hi * nk;
    const long kh = (long)h * cap * dq, vh = (long)h * cap * dv; /* this head's keys, values */
    if (!r->gemm && r->K16) query_scores(row, r->q + (long)hi * dq, NULL, r->K16 + kh, t + 1, dq, s->scale);
    else if (!r->gemm) query_scores(row, r->q + (long)hi * dq, r->K + kh, NULL, t + 1, dq, s->scale);
    if (s->sites) site_terms(r, h, i, row);
    /* the softmax's passes, vectorised: its maximum alone, scalar, took 14 % of a generated
     * token's attention at a context of 4,096 (configuration C) */
    pelab_real mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j <= t; j++) mx = row[j] > mx ? row[j] : mx;
    pelab_real sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j <= t; j++) {
        row[j] = pelab_vexp_prob(row[j] - mx);
        sum += row[j];
    }
#pragma omp simd
    for (int j = 0; j <= t; j++) row[j] /= sum;
    for (int j = t + 1; j < nk; j++) row[j] = 0;
    if (r->gemm) return;
    pelab_real *o = r->out + (long)i * s->ldo + (long)h * dv;
    if (r->V16) query_values(o, row, NULL, r->V16 + vh, t + 1, dv);
    else query_values(o, row, r->V + vh, NULL, t + 1, dv);
}

PELAB_SIMD_KERNEL(cached_rows, (const struct cached_rows *r, int hi), (r, hi))

/* Sequence b's chunk joins caches[b]: its keys, values (rounded to bf16 in a bf16 cache) and the
 * sites' PER_KEY values at c->len; a chunk of matrix products widens a bf16 cache's keys and
 * values once. */
static void cache_append(struct pelab_attn_cache *c, const pelab_real *k, const pelab_real *v, int b,
                         const struct pelab_attn_call *s) {
    PELAB_ASSERT(s->T <= c->chunk && c->len + s->T <= c->cap);
    const int H = s->H, dq = s->dq, dv = s->dv, n = s->T, t0 = c->len, nk = t0 + n, cap = c->cap;
    const long kl = (long)s->layer * H * cap * dq, vl = (long)s->layer * H * cap * dv; /* this layer's */
    for (int h = 0; h < H; h++)
        for (int i = 0; i < n; i++) {
            const long kto = ((long)h * cap + t0 + i) * dq, vto = ((long)h * cap + t0 + i) * dv;
            const pelab_real *kf = k + ((long)h * n + i) * dq, *vf = v + (long)i * s->ldv + (long)h * dv;
            if (c->k16) {
                for (int e = 0; e < dq; e++) c->k16[kl + kto + e] = pelab_to_bf16((float)kf[e]);
                for (int e = 0; e < dv; e++) c->v16[vl + vto + e] = pelab_to_bf16((float)vf[e]);
            } else {
                memcpy(c->k + kl + kto, kf, (size_t)dq * sizeof *c->k);
                memcpy(c->v + vl + vto, vf, (size_t)dv * sizeof *c->v);
            }
        }
    for (long h = 0; c->k16 && n >= GEMM_ROWS && h < H; h++) { /* the exact float32 values of every cached one */
        for (long e = 0; e < (long)nk * dq; e++) c->wide_k[h * cap * dq + e] = pelab_from_bf16(c->k16[kl + h * cap * dq + e]);
        for (long e = 0; e < (long)nk * dv; e++) c->wide_v[h * cap * dv + e] = pelab_from_bf16(c->v16[vl + h * cap * dv + e]);
    }
    if (s->sites) pelab_attn_sites_cache_append(c, s, b);
}

/* What sequence b's rows read: its cache, and its slices of the batch's q (B,H,n,dq) and out
 * (B,n,H,dv). */
static struct cached_rows rows_of(const struct pelab_attn_cache *c, const struct pelab_attn_call *s, int b,
                                  const pelab_real *q, pelab_real *out) {
    const int H = s->H, n = s->T, cap = c->cap, bf16 = c->k16 != NULL;
    const long kl = (long)s->layer * H * cap * s->dq, vl = (long)s->layer * H * cap * s->dv;
    const long bh = (long)b * H * n;
    return (struct cached_rows){
        .s = s, .cache = c, .b = b, .scores = c->scores, .q = q + bh * s->dq, .out = out + (long)b * n * s->ldo,
        .K = bf16 ? c->wide_k : c->k + kl, .V = bf16 ? c->wide_v : c->v + vl,
        .K16 = bf16 ? c->k16 + kl : NULL, .V16 = bf16 ? c->v16 + vl : NULL,
        .t0 = c->len, .cap = cap, .gemm = n >= GEMM_ROWS};
}

/* Head h's scores of a chunk, (n, t0 + n) at r->scores: the BIAS site's values, or 0 where the
 * rows add their dot products to them. */
static void head_bias(const struct pelab_attn_cache *c, const struct cached_rows *r, int h) {
    const struct pelab_attn_call *s = r->s;
    const int n = s->T, nk = r->t0 + n;
    pelab_real *S = r->scores + (long)h * n * nk;
    struct pelab_posenc *pe = s->pe;
    if (pe && (pe->sites & PELAB_SITE_BIAS)) pe->ops->bias_tile(pe, s->layer, h, S, c->pos + r->t0, n, c->pos, nk);
    else if (!r->gemm) memset(S, 0, (size_t)n * nk * sizeof *S);
}

/* A chunk of many queries (a prompt) of one sequence: S and P·V as matrix products per head. */
static void chunk_products(const struct pelab_attn_cache *c, const struct cached_rows *r,
                           void (*rows)(const struct cached_rows *, int)) {
    const struct pelab_attn_call *s = r->s;
    const int H = s->H, n = s->T, nk = r->t0 + n, dq = s->dq, dv = s->dv, cap = r->cap;
    const int has_bias = s->pe && (s->pe->sites & PELAB_SITE_BIAS);
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) head_bias(c, r, h); /* bias_tile may run on several threads at once */
    for (int h = 0; h < H; h++) /* (n,nk) = scale · (n,dq)·(nk,dq)^T + bias */
        pelab_gemm(s->ctx, 0, 1, n, nk, dq, s->scale, r->q + (long)h * n * dq, dq, r->K + (long)h * cap * dq,
                   dq, has_bias ? 1 : 0, r->scores + (long)h * n * nk, nk);
#pragma omp parallel for schedule(static)
    for (int hi = 0; hi < H * n; hi++) rows(r, hi);
    for (int h = 0; h < H; h++) /* out[:, h] (n,dv), rows ldo apart = (n,nk)·(nk,dv) */
        pelab_gemm(s->ctx, 0, 0, n, dv, nk, 1, r->scores + (long)h * n * nk, nk, r->V + (long)h * cap * dv, dv,
                   0, r->out + (long)h * dv, s->ldo);
}

void pelab_attn_cached_forward(struct pelab_attn_cache *const *caches, pelab_real *out, const pelab_real *q,
                               const pelab_real *k, const pelab_real *v, const struct pelab_attn_call *s) {
    PELAB_PROF_START();
    PELAB_ASSERT(!s->bidirectional && s->dropout == 0);
    const int B = s->B, H = s->H, n = s->T;
    for (int b = 0; b < B; b++)
        cache_append(caches[b], k + (long)b * H * n * s->dq, v + (long)b * n * s->ldv, b, s);
    void (*const rows)(const struct cached_rows *, int) = pelab_simd_fn(cached_rows);
    if (n >= GEMM_ROWS) {
        for (int b = 0; b < B; b++) {
            const struct cached_rows r = rows_of(caches[b], s, b, q, out);
            chunk_products(caches[b], &r, rows);
        }
    } else { /* generated tokens: every sequence's heads at once, each head's bias, then its rows */
#pragma omp parallel for schedule(static)
        for (int bh = 0; bh < B * H; bh++) {
            const int b = bh / H, h = bh % H;
            const struct cached_rows r = rows_of(caches[b], s, b, q, out);
            head_bias(caches[b], &r, h);
            for (int i = 0; i < n; i++) rows(&r, h * n + i);
        }
    }
    PELAB_PROF_STOP(PELAB_PROF_ATTN_FWD, 0);
}
