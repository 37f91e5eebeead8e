/* Tiled attention: the function of the reference kernel (attn_ref.c) in memory linear in T, by
 * the online softmax of FlashAttention (Dao et al. 2022) and the backward of FlashAttention-2
 * (Dao 2023). Nothing of size T×T exists: per (b, h) and query tile I, key tiles J are visited
 * one at a time.
 *
 * forward, over the key tiles J that hold visible entries of query tile I (causal: s ≤ t; every
 * tile when s->bidirectional):
 *   S = scale · Q_I K_J^T + bias(I, J) + the terms of the sites inside the block  (nq, nk)
 *   (attn/sites.h: KEY's kb_J; COUNT's z(p), p the running sums of the gates σ(S) from the
 *   diagonal back, the key tiles then visited from the diagonal down, each row's total kept)
 *   m' = max(m, rowmax S);  α = e^(m − m');  P̃ = e^(S − m')
 *   ℓ = α ℓ + rowsum P̃;  acc = α acc + (P̃ ⊙ keep) V_J;  m = m'
 *   out_I = acc / ℓ;  lse_I = m + ln ℓ              lse (B,H,T) is all the backward needs
 * backward, per (b, h), query tile I, key tile J, with P recomputed from the saved lse:
 *   P = e^(S − lse);  dP = keep ⊙ dO_I V_J^T;  dS = P ⊙ (dP − D),  D = rowsum(dO_I ⊙ O_I)
 *   the sites' backward hooks turn dS into the gradient at the scores before their terms (KEY:
 *   dkb_J += column sums of dS; COUNT: from the count formed again, key tiles from 0 up)
 *   dV_J += (P ⊙ keep)^T dO_I;  dQ_I += scale dS K_J;  dK_J += scale dS^T Q_I;  bias grads += dS
 * D is the reference's rowsum(P ⊙ dP): O = Σ_s P_s keep_s V_s, so dO·O = Σ_s P_s (keep_s dO·V_s).
 *
 * Dropout drops exactly the reference's entries: an entry's mask bit is a hash of its index
 * ((b·H + h)·T + t)·T + s in the (B,H,T,T) array the reference holds — an index, never a buffer.
 *
 * Threads. The forward splits (b, h, query tile): rows are independent, so any schedule gives the
 * same bits. The backward splits (b, h): each owns its rows of dq, dk, dv and of the sites'
 * gradients, so nothing races. The BIAS encoding's parameter gradients are shared by every
 * (b, h); each thread passes the encoding's tile backward an array of its own, laid out as the
 * encoding's gradient range (posenc.h), and the arrays are summed in thread order at the end: the
 * same bits for a given thread count, and the encodings' tile backward runs on every thread. A
 * serial pass in (b, h) order would instead have to recompute every P and dP tile, or keep them,
 * which is the T×T memory this kernel exists to avoid.
 * Per thread: 2 tiles² + wide·(dq + dv) + tile·(dv + 5) reals (wide: the tile rounded up to a
 * vector block), plus the encoding's parameter count and its sites' carries and scratch, in
 * scratch the caller keeps between calls (struct pelab_attn_scratch), so a training step
 * allocates nothing here; without one (scratch NULL) each call allocates its own.
 *
 * bf16 (--precision bf16, the call's context's precision): the six tile products take bf16
 * operands with float32 accumulation (tile_bf16.h, AVX512-BF16 where the CPU has it); scores,
 * softmax, dropout, the bias and every sum outside the products stay in pelab_real. Those
 * products skip no masked blocks (a diagonal tile is computed whole, its masked entries unread
 * or multiplied by zeros).
 *
 * Vector level. The per-tile work (forward_tile, backward_head and all they call, inlined) is
 * compiled for AVX-512, AVX2 and the build's baseline (kernels/cpu/simd.h); each call picks the
 * level the CPU runs, outside the parallel region. The products' sums are fused multiply-adds at
 * AVX2 and AVX-512; the rows' maxima, exponentials (kernels/cpu/vexp.h) and sums and the tiles'
 * transposes are written out for those two levels, as the compiler did not vectorise them well
 * (short rows, masked ends, sums of a vector's lanes as a tree).
 *
 * Files. This one holds the walk: the per-thread scratch, the scores and the sites' blocks, the
 * online softmax over key tiles, the backward's tiles and the threads. What it inlines at each
 * level: tile_gemm.h (the products on tiles), tile_transpose.h (K_J and V_J transposed),
 * tile_rows.h (a row's maximum, exponentials and sums, the backward's P and dS) and tile_lanes.h
 * (the masked loads, stores and lane sums those two write out for AVX-512 and AVX2).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attn/attention.h"
#include "attn/sites.h"
#include "attn/tile_gemm.h"
#include "attn/tile_rows.h"
#include "attn/tile_transpose.h"
#include "kernels/cpu/tile_bf16.h"
#include "core/prof.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vmath.h"
#include "kernels/cpu/layers.h"
#include "kernels/cpu/parallel.h"
#include "pelab/ctx.h"
#include "pelab/status.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int tile_of(const struct pelab_attn_call *s) { return s->tile > 0 ? s->tile : PELAB_PE_TILE; }

/* Query tile i0's key tiles: those starting before key_stop (causal: up to the diagonal one). */
static int key_stop(const struct pelab_attn_call *s, int i0) { return s->bidirectional ? s->T : i0 + 1; }
/* Keys in key tile j0 for query tile i0 of nq rows (causal: the diagonal tile ends with its last
 * query). */
static int key_count(const struct pelab_attn_call *s, int i0, int nq, int j0) {
    if (s->bidirectional) return tile_min(tile_of(s), s->T - j0);
    return j0 < i0 ? tile_of(s) : nq;
}
/* Visible keys of query t in key tile j0 of nk keys: a prefix of it. */
static int visible(const struct pelab_attn_call *s, int t, int j0, int nk) {
    return s->bidirectional ? nk : tile_min(nk, t - j0 + 1);
}
/* (B,T,n) positions: token t of sequence b. */
static const int32_t *pos_at(const struct pelab_attn_call *s, int b, int t) {
    return s->pos + ((long)b * s->T + t) * s->pe->pos_dims;
}

/* --- per-thread scratch -------------------------------------------------------------------------- */

struct work {
    pelab_real *S;    /* (tile, tile) scores; then P̃ ⊙ keep */
    pelab_real *dP;   /* (tile, tile) backward: dO V^T, then dS */
    pelab_real *kt;   /* (dq, wide_of(tile)) K_J transposed, zero-padded: B of the scores' product */
    pelab_real *vt;   /* (dv, wide_of(tile)) V_J transposed, alike (backward) */
    pelab_real *acc;  /* (tile, dv) forward: unnormalised output rows */
    pelab_real *m, *l;/* (tile,) forward: running max and sum; backward: lse and D of the rows */
    pelab_real *keep; /* (tile,) one row's dropout keep-scales */
    pelab_real *mx, *alpha; /* (tile,) forward: each row's new maximum and its accumulator's factor */
    uint16_t *pack;   /* bf16 products: their packed operands (tile_bf16.h) */
    int bf16;         /* the products in bf16 (the call's context's --precision) */
    struct pelab_attn_site_work sites; /* the sites' carries and scratch */
    int right_to_left; /* the forward visits a query tile's key tiles from the diagonal back */
};

static int max3(int a, int b, int c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* Reals of packing space for the bf16 products: every dimension of a tile product is the tile,
 * dq or dv. */
static long pack_reals(int tile, int dq, int dv) {
    const int w = max3(tile, dq, dv);
    return (long)((pelab_tile_bf16_pack_size(w, w) * sizeof(uint16_t) + sizeof(pelab_real) - 1) / sizeof(pelab_real));
}

static long work_reals(int tile, int dq, int dv) {
    return 2L * tile * tile + (long)wide_of(tile) * (dq + dv) + (long)tile * (dv + 5) + pack_reals(tile, dq, dv);
}

/* Lays w out over buf (work_reals of it). */
static void work_carve(struct work *w, pelab_real *buf, int tile, int dq, int dv) {
    const long t2 = (long)tile * tile;
    w->S = buf;
    w->dP = w->S + t2;
    w->kt = w->dP + t2;
    w->vt = w->kt + (long)dq * wide_of(tile);
    w->acc = w->vt + (long)dv * wide_of(tile);
    w->m = w->acc + (long)tile * dv;
    w->l = w->m + tile;
    w->keep = w->l + tile;
    w->mx = w->keep + tile;
    w->alpha = w->mx + tile;
    w->pack = (uint16_t *)(w->alpha + tile);
}

/* --- the caller's scratch: per thread, the encoding's bias-gradient array when it has one, the
 * tiles, the sites' work; each part 64-byte aligned --------------------------------------------- */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static int has_bias(const struct pelab_attn_call *s) { return s->pe && (s->pe->sites & PELAB_SITE_BIAS); }

static int has_bias_grad(const struct pelab_attn_call *s) {
    return has_bias(s) && s->pe->ops->bias_tile_backward && pelab_posenc_grad_count(s->pe) > 0;
}

static size_t bias_bytes(const struct pelab_attn_call *s) {
    return has_bias_grad(s) ? align64(pelab_posenc_grad_count(s->pe) * sizeof(pelab_real)) : 0;
}

static size_t tiles_bytes(const struct pelab_attn_call *s) {
    return align64((size_t)work_reals(tile_of(s), s->dq, s->dv) * sizeof(pelab_real));
}

static size_t thread_bytes(const struct pelab_attn_call *s) {
    return bias_bytes(s) + tiles_bytes(s) + pelab_attn_sites_tile_bytes(s, tile_of(s));
}

int pelab_attn_scratch_reserve(struct pelab_attn_scratch *w, const struct pelab_attn_call *s) {
    const size_t need = (size_t)max_threads() * thread_bytes(s);
    if (need <= w->size) return PELAB_OK;
    unsigned char *mem = aligned_alloc(64, need);
    if (!mem) /* what it held stays, for fewer threads (team_size) */
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for attention tiles (tile %d, width %d)",
                          tile_of(s), s->dq);
    free(w->mem);
    w->mem = mem;
    w->size = need;
    return PELAB_OK;
}

/* The threads a call runs on: all, once the scratch holds a block for each; when it cannot grow
 * to that (out of memory with more threads than when it was sized), as many as it holds, so that a
 * backward after its forward never fails. 0 (error set) when it holds none. */
static int team_size(struct pelab_attn_scratch *w, const struct pelab_attn_call *s) {
    if (pelab_attn_scratch_reserve(w, s) == PELAB_OK) return max_threads();
    const size_t held = w->size / thread_bytes(s);
    if (held == 0) return 0;
    pelab_clear_error();
    return held < (size_t)max_threads() ? (int)held : max_threads();
}

void pelab_attn_scratch_free(struct pelab_attn_scratch *w) {
    free(w->mem);
    w->mem = NULL;
    w->size = 0;
}

/* Thread `id`'s block of the scratch. */
static unsigned char *thread_block(const struct pelab_attn_scratch *w, const struct pelab_attn_call *s, int id) {
    return w->mem + (size_t)id * thread_bytes(s);
}

/* The tiles of a thread's block; bf16: whether the products are in bf16 (call_bf16). */
static void thread_work(struct work *w, unsigned char *block, const struct pelab_attn_call *s, int bf16) {
    work_carve(w, (pelab_real *)(block + bias_bytes(s)), tile_of(s), s->dq, s->dv);
    pelab_attn_sites_tile_work(s, tile_of(s), block + bias_bytes(s) + tiles_bytes(s), &w->sites);
    w->right_to_left = pelab_attn_sites_right_to_left(s);
    w->bf16 = bf16;
}

static int call_bf16(const struct pelab_attn_call *s) {
    PELAB_ASSERT(s->ctx != NULL); /* a call runs in a context (attention.h) */
    return s->ctx->precision == PELAB_PRECISION_BF16;
}

/* The bias-gradient array of a thread's block (bias_count reals). */
static pelab_real *bias_grad_of(unsigned char *block) { return (pelab_real *)block; }

/* keep (n,) = dropout keep-scales of probabilities (b, h, t, j0 .. j0+n−1), returned; NULL without
 * dropout (every scale 1). */
static PELAB_ALWAYS_INLINE const pelab_real *keep_row(pelab_real *keep, int n, const struct pelab_attn_call *s,
                                                      int b, int h, int t, int j0) {
    if (s->dropout <= 0) return NULL;
    const uint64_t idx = pelab_attn_drop_index(s, b, h, t, j0);
    for (int c = 0; c < n; c++) keep[c] = pelab_dropout_scale(s->dropout, s->key, s->site, idx + (uint64_t)c);
    return keep;
}

/* w->S (nq, nk) = bias(I, J) + scale · Q_I K_J^T for query rows i0.. and key rows j0.. of (b, h);
 * leaves K_J^T in w->kt. Every entry is formed; callers read only the causal ones. */
static PELAB_ALWAYS_INLINE void scores(enum pelab_simd_level level, struct work *w, const pelab_real *q,
                                       const pelab_real *k, const struct pelab_attn_call *s, int b, int h,
                                       int i0, int nq, int j0, int nk) {
    const long bh = (long)b * s->H + h;
    const int dq = s->dq;
    if (has_bias(s)) {
        s->pe->ops->bias_tile(s->pe, s->layer, h, w->S, pos_at(s, b, i0), nq, pos_at(s, b, j0), nk);
    } else {
        memset(w->S, 0, (size_t)nq * nk * sizeof *w->S);
    }
    const pelab_real *QI = q + (bh * s->T + i0) * dq, *KJ = k + (bh * s->T + j0) * dq;
    if (w->bf16) { /* K_J^T read while packing */
        pelab_tile_gemm_bf16(w->S, nk, QI, dq, 0, KJ, dq, 1, nq, nk, dq, s->scale, w->pack);
    } else {
        tile_transpose(level, w->kt, wide_of(nk), KJ, dq, nk, dq);
        tile_gemm(level, w->S, nk, QI, dq, 0, w->kt, wide_of(nk), 1, nq, nk, dq, s->scale,
                  i0 == j0 && !s->bidirectional ? TILE_OUT_CAUSAL : TILE_FULL);
    }
}

/* The block of w->S (nq, nk) the sites' hooks act on (S, after the product, in pelab_real: bf16
 * rounds none of their terms); S is then pointed at dS for the backward's. */
static PELAB_ALWAYS_INLINE struct pelab_site_block tile_block(const struct work *w, const struct pelab_attn_call *s,
                                                             int b, int h, int i0, int nq, int j0, int nk) {
    return (struct pelab_site_block){.s = s, .kernel = PELAB_PE_KERNEL_TILED, .b = b, .h = h, .i0 = i0, .nq = nq,
                                     .first = i0, .j0 = j0, .nk = nk, .S = w->S, .ld = nk};
}

/* --- forward ------------------------------------------------------------------------------------- */

/* The online-softmax step of a key tile's rows: S (nq, nk) their scores, row r's first visible(r)
 * causal. Updates each row's running max m and sum l, leaves S = P̃ ⊙ keep (0 past the visible
 * ones) and scales each row's accumulator (acc, rows dv wide) by α = e^(m − m'). In phases over
 * the rows (maxima; the factors, as one vector loop; the exponentials), so that the rows' chains
 * of dependent operations overlap rather than run one row at a time. */
static PELAB_ALWAYS_INLINE void online_step(enum pelab_simd_level level, struct work *w, const struct pelab_attn_call *s,
                                            int b, int h, int i0, int nq, int j0, int nk) {
    pelab_real *restrict m = w->m, *restrict mx = w->mx, *restrict alpha = w->alpha;
    for (int r = 0; r < nq; r++) mx[r] = row_max(level, w->S + (long)r * nk, visible(s, i0 + r, j0, nk), m[r]);
    /* the first tile finds m = −∞ with ℓ = acc = 0: α = 0 */
    for (int r = 0; r < nq; r++) {
        const pelab_real e = pelab_vexp(m[r] - mx[r]);
        alpha[r] = m[r] == -INFINITY ? 0 : e;
    }
    for (int r = 0; r < nq; r++) {
        const int n = visible(s, i0 + r, j0, nk);
        pelab_real *restrict sc = w->S + (long)r * nk;
        const pelab_real sum = exp_row(level, sc, n, nk, mx[r]);
        const pelab_real *restrict keep = keep_row(w->keep, n, s, b, h, i0 + r, j0);
        if (keep)
            for (int c = 0; c < n; c++) sc[c] *= keep[c];
        w->l[r] = alpha[r] * w->l[r] + sum;
        m[r] = mx[r];
        pelab_real *restrict a = w->acc + (long)r * s->dv;
        if (alpha[r] != 1)
            for (int c = 0; c < s->dv; c++) a[c] *= alpha[r];
    }
}

/* Query tile I = rows i0 .. i0+nq−1 of (b, h): out_I and lse_I. Tiles are aligned (i0 and every
 * j0 are multiples of the tile), so the key tiles below the diagonal one are wholly causal. */
static PELAB_ALWAYS_INLINE void forward_tile_body(enum pelab_simd_level level, struct work *w, pelab_real *out,
                                                  pelab_real *lse,
                                                  const pelab_real *q, const pelab_real *k, const pelab_real *v,
                                                  const struct pelab_attn_call *s, int b, int h, int i0, int nq) {
    const int T = s->T, dv = s->dv, tile = tile_of(s);
    const long bh = (long)b * s->H + h;
    const int ntiles = (key_stop(s, i0) + tile - 1) / tile;
    for (int r = 0; r < nq; r++) w->m[r] = -INFINITY, w->l[r] = 0;
    pelab_attn_sites_rows_begin(s, &w->sites, nq);
    memset(w->acc, 0, (size_t)nq * dv * sizeof *w->acc);
    for (int jt = 0; jt < ntiles; jt++) {
        const int j0 = (w->right_to_left ? ntiles - 1 - jt : jt) * tile;
        const int nk = key_count(s, i0, nq, j0);
        scores(level, w, q, k, s, b, h, i0, nq, j0, nk);
        const struct pelab_site_block blk = tile_block(w, s, b, h, i0, nq, j0, nk);
        pelab_attn_sites_forward(&blk, &w->sites);
        online_step(level, w, s, b, h, i0, nq, j0, nk);
        /* acc (nq, dv) += P̃ (nq, nk) · V_J (nk, dv) */
        const pelab_real *VJ = v + ((long)b * T + j0) * s->ldv + (long)h * dv;
        if (w->bf16)
            pelab_tile_gemm_bf16(w->acc, dv, w->S, nk, 0, VJ, s->ldv, 0, nq, dv, nk, 1, w->pack);
        else
            tile_gemm(level, w->acc, dv, w->S, nk, 0, VJ, s->ldv, 0, nq, dv, nk, 1,
                      j0 == i0 && !s->bidirectional ? TILE_IN_LOWER : TILE_FULL);
    }
    for (int r = 0; r < nq; r++) {
        const int t = i0 + r;
        pelab_real *o = out + ((long)b * T + t) * s->ldo + (long)h * dv;
        const pelab_real inv = 1 / w->l[r], *a = w->acc + (long)r * dv;
        for (int c = 0; c < dv; c++) o[c] = a[c] * inv;
        lse[bh * T + t] = w->m[r] + (pelab_real)log((double)w->l[r]);
    }
}

/* forward_tile_avx512, _avx2, _portable: the tile loops above compiled for each vector level
 * (simd.h); the products, maxima and exponentials are where the forward's time goes. */
PELAB_SIMD_KERNEL_LEVEL(forward_tile,
                  (struct work *w, pelab_real *out, pelab_real *lse, const pelab_real *q, const pelab_real *k,
                   const pelab_real *v, const struct pelab_attn_call *s, int b, int h, int i0, int nq),
                  (w, out, lse, q, k, v, s, b, h, i0, nq))

int pelab_attn_tiled_forward(pelab_real *out, pelab_real *lse, const pelab_real *q,
                             const pelab_real *k, const pelab_real *v, const struct pelab_attn_call *s) {
    PELAB_PROF_START();
    const int B = s->B, H = s->H, tile = tile_of(s), nt = (s->T + tile - 1) / tile;
    struct pelab_attn_scratch own = {0}, *scratch = s->scratch ? s->scratch : &own;
    const int threads = team_size(scratch, s), bf16 = call_bf16(s);
    if (!threads) return PELAB_ERR_RUNTIME;
    void (*const forward_tile)(struct work *, pelab_real *, pelab_real *, const pelab_real *,
                               const pelab_real *, const pelab_real *, const struct pelab_attn_call *,
                               int, int, int, int) = pelab_simd_fn(forward_tile);
#pragma omp parallel num_threads(threads)
    {
        struct work w;
        thread_work(&w, thread_block(scratch, s, pelab_thread_index()), s, bf16);
        /* later query tiles visit more key tiles: dynamic scheduling balances them, and the rows
         * of a tile do not depend on which thread computes them */
#pragma omp for collapse(3) schedule(dynamic)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int it = nt - 1; it >= 0; it--)
                    forward_tile(&w, out, lse, q, k, v, s, b, h, it * tile, tile_min(tile, s->T - it * tile));
    }
    pelab_attn_scratch_free(&own);
    PELAB_PROF_STOP(PELAB_PROF_ATTN_FWD, 1.0 * B * H * s->T * (s->T + 1) * (s->dq + s->dv));
    return PELAB_OK;
}

/* --- backward ------------------------------------------------------------------------------------ */

/* Tile (I, J) of (b, h): dq_I, dk_J, dv_J += and the bias gradients (into bgrad, the thread's array), given
 * w->l = D_I and w->m = lse_I. */
static PELAB_ALWAYS_INLINE void backward_tile(enum pelab_simd_level level, struct work *w, pelab_real *bgrad,
                                              pelab_real *dq,
                                              pelab_real *dk, pelab_real *dv, const pelab_real *dout,
                                              const pelab_real *q, const pelab_real *k, const pelab_real *v,
                                              const struct pelab_attn_call *s, int b, int h, int i0, int nq,
                                              int j0, int nk) {
    const int T = s->T, dqw = s->dq, dvw = s->dv;
    const long bh = (long)b * s->H + h;
    const pelab_real *dO = dout + ((long)b * T + i0) * s->ldo + (long)h * dvw;  /* (nq, dv) rows ldo */
    const pelab_real *VJ = v + ((long)b * T + j0) * s->ldv + (long)h * dvw;     /* (nk, dv) rows ldv */
    pelab_real *dVJ = dv + ((long)b * T + j0) * s->ldv + (long)h * dvw;
    const pelab_real *QI = q + (bh * T + i0) * dqw, *KJ = k + (bh * T + j0) * dqw; /* (n, dq) */
    pelab_real *dQI = dq + (bh * T + i0) * dqw, *dKJ = dk + (bh * T + j0) * dqw;

    scores(level, w, q, k, s, b, h, i0, nq, j0, nk);
    struct pelab_site_block blk = tile_block(w, s, b, h, i0, nq, j0, nk);
    pelab_attn_sites_recompute(&blk, &w->sites);
    /* dP (nq, nk) = dO_I · V_J^T */
    memset(w->dP, 0, (size_t)nq * nk * sizeof *w->dP);
    const int diag = i0 == j0 && !s->bidirectional;
    if (w->bf16) {
        pelab_tile_gemm_bf16(w->dP, nk, dO, s->ldo, 0, VJ, s->ldv, 1, nq, nk, dvw, 1, w->pack);
    } else {
        tile_transpose(level, w->vt, wide_of(nk), VJ, s->ldv, nk, dvw);
        tile_gemm(level, w->dP, nk, dO, s->ldo, 0, w->vt, wide_of(nk), 1, nq, nk, dvw, 1,
                  diag ? TILE_OUT_CAUSAL : TILE_FULL);
    }
    /* S → P ⊙ keep,  dP → dS = P ⊙ (keep ⊙ dP − D); both 0 on masked entries */
    for (int r = 0; r < nq; r++) {
        const int t = i0 + r, n = visible(s, t, j0, nk);
        pelab_real *restrict p = w->S + (long)r * nk, *restrict ds = w->dP + (long)r * nk;
        grad_row(level, p, ds, keep_row(w->keep, n, s, b, h, t, j0), n, nk, w->m[r], w->l[r]);
    }
    blk.S = w->dP; /* dS → the gradient at the scores before the sites' terms */
    pelab_attn_sites_backward(&blk, &w->sites);
    /* dV_J (nk, dv) += (P ⊙ keep)^T (nk, nq) · dO_I (nq, dv)
     * dQ_I (nq, dq) += scale · dS · K_J;  dK_J (nk, dq) += scale · dS^T · Q_I */
    if (w->bf16) { /* the transposes read while packing */
        pelab_tile_gemm_bf16(dVJ, s->ldv, w->S, nk, 1, dO, s->ldo, 0, nk, dvw, nq, 1, w->pack);
        pelab_tile_gemm_bf16(dQI, dqw, w->dP, nk, 0, KJ, dqw, 0, nq, dqw, nk, s->scale, w->pack);
        pelab_tile_gemm_bf16(dKJ, dqw, w->dP, nk, 1, QI, dqw, 0, nk, dqw, nq, s->scale, w->pack);
    } else {
        tile_gemm(level, dVJ, s->ldv, w->S, nk, 1, dO, s->ldo, 0, nk, dvw, nq, 1, diag ? TILE_IN_UPPER : TILE_FULL);
        tile_gemm(level, dQI, dqw, w->dP, nk, 0, KJ, dqw, 0, nq, dqw, nk, s->scale, diag ? TILE_IN_LOWER : TILE_FULL);
        tile_gemm(level, dKJ, dqw, w->dP, nk, 1, QI, dqw, 0, nk, dqw, nq, s->scale, diag ? TILE_IN_UPPER : TILE_FULL);
    }
    if (bgrad) {
        s->pe->ops->bias_tile_backward(s->pe, s->layer, h, bgrad, w->dP, pos_at(s, b, i0), nq,
                                       pos_at(s, b, j0), nk);
    }
}

/* All of (b, h): its dq, dk, dv rows are assigned. */
static PELAB_ALWAYS_INLINE void backward_head_body(enum pelab_simd_level level, struct work *w, pelab_real *bgrad,
                                                   pelab_real *dq,
                                                   pelab_real *dk, pelab_real *dv, const pelab_real *dout,
                                                   const pelab_real *out, const pelab_real *lse,
                                                   const pelab_real *q, const pelab_real *k, const pelab_real *v,
                                                   const struct pelab_attn_call *s, int b, int h) {
    const int T = s->T, dvw = s->dv, tile = tile_of(s);
    const long bh = (long)b * s->H + h;
    memset(dq + bh * T * s->dq, 0, (size_t)T * s->dq * sizeof *dq);
    memset(dk + bh * T * s->dq, 0, (size_t)T * s->dq * sizeof *dk);
    if (s->site_grads) pelab_attn_sites_head_begin(s, b, h);
    for (int t = 0; t < T; t++)
        memset(dv + ((long)b * T + t) * s->ldv + (long)h * dvw, 0, (size_t)dvw * sizeof *dv);
    for (int i0 = 0; i0 < T; i0 += tile) {
        const int nq = tile_min(tile, T - i0);
        for (int r = 0; r < nq; r++) {
            const long row = ((long)b * T + i0 + r) * s->ldo + (long)h * dvw;
            w->m[r] = lse[bh * T + i0 + r];
            w->l[r] = dot(level, dout + row, out + row, dvw); /* D = rowsum(dO ⊙ O) */
        }
        pelab_attn_sites_rows_begin(s, &w->sites, nq);
        for (int j0 = 0; j0 < key_stop(s, i0); j0 += tile)
            backward_tile(level, w, bgrad, dq, dk, dv, dout, q, k, v, s, b, h, i0, nq, j0, key_count(s, i0, nq, j0));
    }
}

PELAB_SIMD_KERNEL_LEVEL(backward_head,
                  (struct work *w, pelab_real *bgrad, pelab_real *dq, pelab_real *dk, pelab_real *dv,
                   const pelab_real *dout, const pelab_real *out, const pelab_real *lse, const pelab_real *q,
                   const pelab_real *k, const pelab_real *v, const struct pelab_attn_call *s, int b, int h),
                  (w, bgrad, dq, dk, dv, dout, out, lse, q, k, v, s, b, h))

int pelab_attn_tiled_backward(pelab_real *dq, pelab_real *dk, pelab_real *dv, const pelab_real *dout,
                              const pelab_real *out, const pelab_real *lse, const pelab_real *q,
                              const pelab_real *k, const pelab_real *v, const struct pelab_attn_call *s) {
    PELAB_PROF_START();
    const int B = s->B, H = s->H, bias = has_bias_grad(s);
    struct pelab_attn_scratch own = {0}, *scratch = s->scratch ? s->scratch : &own;
    const int threads = team_size(scratch, s), bf16 = call_bf16(s);
    if (!threads) return PELAB_ERR_RUNTIME;
    int team = 1;
    void (*const backward_head)(struct work *, pelab_real *, pelab_real *, pelab_real *,
                                pelab_real *, const pelab_real *, const pelab_real *, const pelab_real *,
                                const pelab_real *, const pelab_real *, const pelab_real *,
                                const struct pelab_attn_call *, int, int) = pelab_simd_fn(backward_head);
#pragma omp parallel num_threads(threads)
    {
        const int id = pelab_thread_index();
        unsigned char *block = thread_block(scratch, s, id);
        struct work w;
        thread_work(&w, block, s, bf16);
        pelab_real *bgrad = NULL;
        if (bias) {
            bgrad = bias_grad_of(block);
            memset(bgrad, 0, pelab_posenc_grad_count(s->pe) * sizeof *bgrad);
        }
#ifdef _OPENMP
        if (id == 0) team = omp_get_num_threads();
#endif
        /* static: each thread's slice of (b, h), hence its bias sums, depends only on the count */
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                backward_head(&w, bgrad, dq, dk, dv, dout, out, lse, q, k, v, s, b, h);
    }
    if (bias) {
        const size_t n = pelab_posenc_grad_count(s->pe);
        pelab_real *grad = pelab_posenc_table_grad(s->pe);
        for (int t = 0; t < team; t++) { /* in thread order: the same bits every run */
            const pelab_real *g = bias_grad_of(thread_block(scratch, s, t));
            for (size_t i = 0; i < n; i++) grad[i] += g[i];
        }
    }
    pelab_attn_scratch_free(&own);
    /* scores recomputed, dP, dV, dQ, dK: 2 products of width dq and 2 of width dv */
    PELAB_PROF_STOP(PELAB_PROF_ATTN_BWD, 2.0 * B * H * s->T * (s->T + 1) * (s->dq + s->dv));
    return PELAB_OK;
}
