/* Cached attention (generation): a chunk of n new queries of one sequence against the keys and
 * values of the t0 positions kept from earlier chunks and its own, per head h:
 *
 *   K[h, t0..t0+n) = k_h;  V[h, t0..t0+n) = v_h                          (H,cap,dq), (H,cap,dv)
 *   (or bf16(k_h), bf16(v_h) in a bf16 cache, widened to float32 as they are read)
 *   KB[h, t0..t0+n) = kb_h (the KEY site's values, when the cache keeps them)
 *   S[i,j] = scale · q_h[i]·K[h,j] + bias_h(pos[t0 + i], pos[j]) + KB[h,j]  j ≤ t0 + i
 *   COUNT: S[i,j] += z_i(p), p counted from t0 + i back to j (attn/count.h)
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
#include "attn/count.h"
#include "core/prof.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vec16.h"
#include "kernels/cpu/vmath.h"
#include "pelab/status.h"

#define GEMM_ROWS 16

int pelab_attn_cache_init(struct pelab_attn_cache *c, int layers, int H, int dq, int dv, int cap,
                          int chunk, int key_bias, int bf16) {
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
    if (key_bias) c->kb = malloc((size_t)(LH * cap) * sizeof *c->kb);
    const int kv = bf16 ? c->k16 && c->v16 && c->wide_k && c->wide_v : c->k && c->v;
    if (kv && c->pos && c->scores && (c->kb || !key_bias)) return PELAB_OK;
    pelab_attn_cache_release(c);
    return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for a KV cache of %d positions", cap);
}

double pelab_attn_cache_bytes(int layers, int H, int dq, int dv, int cap, int chunk, int key_bias, int bf16) {
    const double LH = (double)layers * H, kv = (double)cap * (dq + dv), real = sizeof(pelab_real);
    const double keys_values = bf16 ? LH * kv * sizeof(uint16_t) + H * kv * real : LH * kv * real;
    return keys_values + (double)cap * sizeof(int32_t) + (double)H * chunk * cap * real +
           (key_bias ? LH * cap * real : 0);
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
    free(c->kb);
    *c = (struct pelab_attn_cache){0};
}

/* What each query row of a chunk reads (pelab_attn_cached_forward). */
struct cached_rows {
    const struct pelab_attn_call *s;
    pelab_real *scores;               /* (H,n,t0 + n) */
    const pelab_real *q, *K, *V, *KB; /* this layer's: q (H,n,dq), K (H,cap,dq), V (H,cap,dv), KB (cap,H) */
    const uint16_t *K16, *V16;        /* a bf16 cache's K and V (K, V then its widened scratch) */
    pelab_real *out;
    int t0, cap;                      /* positions cached before the chunk; the cache's capacity */
    int gemm; /* S and P·V are matrix products: the row only adds KB, counts and normalises */
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

/* Row i of head h (hi = h·n + i): the scores of keys 0..t (t = t0 + i), their softmax and, one
 * row at a time, Σ_j P_j V_j. Compiled per SIMD level: at a long context the dot product per
 * key and the sum over keys are most of a generated token's attention. */
static PELAB_ALWAYS_INLINE void cached_rows_body(const struct cached_rows *r, int hi) {
    const struct pelab_attn_call *s = r->s;
    const int n = s->T, h = hi / n, i = hi % n, t = r->t0 + i, nk = r->t0 + n, H = s->H;
    const int dq = s->dq, dv = s->dv, cap = r->cap, P = s->pe ? s->pe->count_max : 0;
    pelab_real *row = r->scores + (long)hi * nk;
    const long kh = (long)h * cap * dq, vh = (long)h * cap * dv; /* this head's keys, values */
    if (!r->gemm && r->K16) query_scores(row, r->q + (long)hi * dq, NULL, r->K16 + kh, t + 1, dq, s->scale);
    else if (!r->gemm) query_scores(row, r->q + (long)hi * dq, r->K + kh, NULL, t + 1, dq, s->scale);
    for (int j = 0; r->KB && j <= t; j++) row[j] += r->KB[(long)j * H + h];
    if (s->z) pelab_count_row(row, NULL, t + 1, s->z + (long)hi * P, P, 0);
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

void pelab_attn_cached_forward(struct pelab_attn_cache *c, pelab_real *out, const pelab_real *q,
                               const pelab_real *k, const pelab_real *v,
                               const struct pelab_attn_call *s) {
    PELAB_PROF_START();
    PELAB_ASSERT(s->B == 1 && s->T <= c->chunk && c->len + s->T <= c->cap && !s->bidirectional &&
                 s->dropout == 0 && !s->kb == !c->kb);
    const int H = s->H, dq = s->dq, dv = s->dv, n = s->T, t0 = c->len, nk = t0 + n, cap = c->cap;
    const int bf16 = c->k16 != NULL, gemm = n >= GEMM_ROWS;
    const long kl = (long)s->layer * H * cap * dq, vl = (long)s->layer * H * cap * dv; /* this layer's */
    /* a bf16 cache's chunk of many queries reads its keys and values widened (wide_k, wide_v) */
    pelab_real *K = bf16 ? c->wide_k : c->k + kl, *V = bf16 ? c->wide_v : c->v + vl;
    uint16_t *K16 = bf16 ? c->k16 + kl : NULL, *V16 = bf16 ? c->v16 + vl : NULL;
    for (int h = 0; h < H; h++) /* the chunk's keys and values join the cache */
        for (int i = 0; i < n; i++) {
            const long kto = ((long)h * cap + t0 + i) * dq, vto = ((long)h * cap + t0 + i) * dv;
            const pelab_real *kf = k + ((long)h * n + i) * dq, *vf = v + (long)i * s->ldv + (long)h * dv;
            if (bf16) {
                for (int e = 0; e < dq; e++) K16[kto + e] = pelab_to_bf16((float)kf[e]);
                for (int e = 0; e < dv; e++) V16[vto + e] = pelab_to_bf16((float)vf[e]);
            } else {
                memcpy(K + kto, kf, (size_t)dq * sizeof *K);
                memcpy(V + vto, vf, (size_t)dv * sizeof *V);
            }
        }
    for (long h = 0; bf16 && gemm && h < H; h++) { /* the exact float32 values of every cached one */
        for (long e = 0; e < (long)nk * dq; e++) K[h * cap * dq + e] = pelab_from_bf16(K16[h * cap * dq + e]);
        for (long e = 0; e < (long)nk * dv; e++) V[h * cap * dv + e] = pelab_from_bf16(V16[h * cap * dv + e]);
    }
    pelab_real *KB = c->kb ? c->kb + (long)s->layer * cap * H : NULL; /* (cap,H) */
    for (int h = 0; KB && h < H; h++)
        for (int i = 0; i < n; i++) KB[(long)(t0 + i) * H + h] = s->kb[(long)h * n + i];
    struct pelab_posenc *pe = s->pe;
    const int has_bias = pe && (pe->sites & PELAB_SITE_BIAS);
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) { /* bias_tile may run on several threads at once */
        pelab_real *S = c->scores + (long)h * n * nk;
        if (has_bias) pe->ops->bias_tile(pe, s->layer, h, S, c->pos + t0, n, c->pos, nk);
        else if (!gemm) memset(S, 0, (size_t)n * nk * sizeof *S);
    }
    if (gemm)
        for (int h = 0; h < H; h++) /* (n,nk) = scale · (n,dq)·(nk,dq)^T + bias */
            pelab_gemm(0, 1, n, nk, dq, s->scale, q + (long)h * n * dq, dq, K + (long)h * cap * dq, dq,
                       has_bias ? 1 : 0, c->scores + (long)h * n * nk, nk);
    const struct cached_rows r = {.s = s, .scores = c->scores, .q = q, .K = K, .V = V, .K16 = K16, .V16 = V16,
                                  .KB = KB, .out = out, .t0 = t0, .cap = cap, .gemm = gemm};
    void (*const rows)(const struct cached_rows *, int) = pelab_simd_fn(cached_rows);
#pragma omp parallel for schedule(static)
    for (int hi = 0; hi < H * n; hi++) rows(&r, hi);
    if (gemm)
        for (int h = 0; h < H; h++) /* out[:, h] (n,dv), rows ldo apart = (n,nk)·(nk,dv) */
            pelab_gemm(0, 0, n, dv, nk, 1, c->scores + (long)h * n * nk, nk, V + (long)h * cap * dv, dv,
                       0, out + (long)h * dv, s->ldo);
    PELAB_PROF_STOP(PELAB_PROF_ATTN_FWD, 0);
}
