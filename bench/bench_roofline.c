/* bench_roofline — the physical bound of one training step of a benchmark configuration: what its
 * tokens/s could be if every matrix product ran at the rate this machine's products reach at that
 * shape and every element-wise pass moved its bytes at the memory's bandwidth (float build).
 *
 *   build/bench/bench_roofline --config NAME --pe rope|pope --triad-gbs G [--threads N] [--reps N]
 *
 *   bound time = Σ over the step's products  FLOPs / rate(shape)
 *              + Σ over its memory-bound passes  bytes / G
 *
 * The products (bench/configs.h's shapes; N layers, BT = B·T tokens, d = D/H, dq the query/key
 * width after the encoding, 2d for PoPE):
 *   linear layers  per weight W (OC,C) of qkv (3D,D), proj (D,D), fc (4D,D), fc-proj (D,4D) and
 *                  the head (V,D) (images: the patch embedding (D,P) and the class token's head):
 *                  the forward x·Wᵀ (BT,OC,C), dx = dy·W (BT,C,OC), dW = dyᵀ·x (OC,C,BT)
 *   attention      per layer, sequence and head: S = Q·Kᵀ (T,T,dq), O = P·V (T,dv,T) and the
 *                  backward's dP = dO·Vᵀ (T,T,dv), dV = Pᵀ·dO (T,dv,T), dQ = dS·K (T,dq,T),
 *                  dK = dSᵀ·Q (T,dq,T); causal: half of each product's FLOPs is needed (the
 *                  tiled kernel's recomputation of S in the backward is not)
 * The linear layers' products are timed as pelab_gemm runs them, one at a time on every thread;
 * the attention's small per-head products (T rows, widths of 16 to 128) run at the rate of one
 * 2048³ product, the fastest this machine multiplies: per-head calls of a library gemm are far
 * slower at these shapes than the tiled kernel's own tile products, so no measured shape of
 * theirs is a ceiling, and the large product's rate is one. Each in float32 and in bf16 (where
 * the build and CPU have it); the bf16 bound takes, per product, the faster of the two, as a best
 * kernel would. Each the best of at least --reps timings (default 5) and 50 ms, after one untimed.
 * The memory-bound passes, in float32 words (4 bytes) read or written, at least once each:
 *   per token and layer, forward  20·D + 2·H·dq: the two norms (2D each), the encoding's q, k
 *                                 in and out (2D + 2H·dq), two residual adds (3D each), GELU (8D)
 *                       backward  30·D + 2·H·dq: the residual adds' gradients (3D each), GELU's
 *                                 (12D), the norms' (4D each), the encoding's (4D + 2H·dq)
 *   per token                     the embedding (2D, 3D back), the final norm (2D, 4D back), the
 *                                 logits' softmax and loss (3V; images: on the class token only)
 *   per parameter                 zeroing its gradient, the gradient's norm and AdamW: 9 words
 * The softmax's exponentials, the norms' and GELU's arithmetic and the attention's bookkeeping
 * are left out: the gap between a run and this bound is where they and the kernels lose.
 * --triad-gbs is the bandwidth to use (bench/run.sh passes bench_stream's triad rate).
 * Prints one JSON line:
 *   {"config":"M","pe":"rope","threads":2,"tokens":...,"product_gflop":...,"memory_mb":...,
 *    "products_fp32_ms":...,"products_bf16_ms":...,"memory_ms":...,
 *    "bound_fp32_tokens_per_s":...,"bound_bf16_tokens_per_s":...}   (bf16: null without bf16)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "configs.h"
#include "kernels/cpu/matmul.h"
#include "pelab/clock.h"
#include "pelab/precision.h"
#include "pelab/status.h"
#include "pelab/threads.h"

/* One kind of product of the step: op(A) (M,K) · op(B) (K,N), `count` times, of which `needed`
 * (½ for a causal attention product) counts toward the bound; `attention`: at the large
 * product's rate. */
struct product {
    int ta, tb, M, N, K;
    double count, needed;
    int attention;
};

/* Seconds one product of p takes: the best of at least reps timings and of as many as 50 ms
 * hold (at most 10,000), a ceiling's measure (as bench_stream's), which a thread descheduled
 * during a product of a few microseconds does not lower. */
static double product_seconds(struct pelab_ctx *ctx, const struct product *p, int reps, pelab_real *a,
                              pelab_real *b, pelab_real *c) {
    double best = 1e30, spent = 0;
    for (int r = -1; r < reps || (spent < 0.05 && r < 10000); r++) {
        const double t0 = pelab_clock_s();
        pelab_gemm(ctx, p->ta, p->tb, p->M, p->N, p->K, 1, a, p->ta ? p->M : p->K, b, p->tb ? p->K : p->N, 0, c,
                   p->N);
        const double t = pelab_clock_s() - t0;
        if (r >= 0 && t < best) best = t;
        spent += t;
    }
    return best;
}

/* GFLOP/s of product p at the current precision. */
static double product_rate(struct pelab_ctx *ctx, const struct product *p, int reps, pelab_real *a,
                           pelab_real *b, pelab_real *c) {
    return 2.0 * p->M * p->N * p->K / product_seconds(ctx, p, reps, a, b, c) / 1e9;
}

/* The step's products; returns their number. */
static int products_of(const struct bench_config *c, int dq, struct product *out) {
    const int BT = c->B * c->T, D = c->D, d = D / c->heads, image = c->patch_dim > 0;
    int n = 0;
    const int w[4][2] = {{3 * D, D}, {D, D}, {4 * D, D}, {D, 4 * D}}; /* (OC, C) of each block */
    for (int k = 0; k < 5 + image; k++) {
        int OC, C, rows = BT;
        double times = c->layers;
        if (k < 4) OC = w[k][0], C = w[k][1];
        else if (k == 4) OC = c->V, C = D, times = 1, rows = image ? c->B : BT; /* the head */
        else OC = D, C = c->patch_dim, times = 1;                              /* patches */
        out[n++] = (struct product){0, 1, rows, OC, C, times, times, 0};       /* y = x·Wᵀ */
        if (k < 5) out[n++] = (struct product){0, 0, rows, C, OC, times, times, 0}; /* dx = dy·W */
        out[n++] = (struct product){1, 0, OC, C, rows, times, times, 0};       /* dW = dyᵀ·x */
    }
    const double per = (double)c->layers * c->B * c->heads, half = image ? 1.0 : 0.5;
    const int T = c->T;
    const int att[6][5] = {{0, 1, T, T, dq}, {0, 0, T, d, T}, {0, 1, T, T, d},
                           {1, 0, T, d, T},  {0, 0, T, dq, T}, {1, 0, T, dq, T}};
    for (int k = 0; k < 6; k++)
        out[n++] = (struct product){att[k][0], att[k][1], att[k][2], att[k][3], att[k][4], per, per * half, 1};
    return n;
}

/* Float32 words the step's memory-bound passes move (see the header). */
static double memory_words(const struct bench_config *c, int dq, double params) {
    const double D = c->D, H = c->heads, BT = (double)c->B * c->T;
    const double layer = (20 * D + 2 * H * dq) + (30 * D + 2 * H * dq);
    const double token = 5 * D + 6 * D;
    const double logits = 3.0 * c->V * (c->patch_dim ? c->B : BT);
    return BT * (c->layers * layer + token) + logits + 9 * params;
}

static double parameters(const struct bench_config *c, int dq) {
    const double D = c->D;
    double p = c->layers * (12 * D * D + 2 * D) + c->V * D + D; /* blocks, tied head, final norm */
    if (c->patch_dim) p += D * c->patch_dim + D;                /* patch embedding, class token */
    return p + (dq > D / c->heads ? c->layers * D : 0);         /* PoPE's δ per layer and channel */
}

int main(int argc, char **argv) {
    pelab_blas_mend(argv); /* OpenBLAS's best kernels for this CPU (pelab/threads.h) */
    const char *config = NULL, *pe = NULL;
    int reps = 5, threads = 0, detail = 0;
    double gbs = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--config") == 0) config = v;
        else if (strcmp(a, "--pe") == 0) pe = v;
        else if (strcmp(a, "--triad-gbs") == 0) gbs = atof(v);
        else if (strcmp(a, "--threads") == 0) threads = atoi(v);
        else if (strcmp(a, "--reps") == 0) reps = atoi(v);
        else if (strcmp(a, "--detail") == 0) detail = atoi(v);
        else config = NULL, i = argc;
    }
    const struct bench_config *c = bench_config_find(config);
    if (!c || !pe || gbs <= 0 || reps < 1 ||  argc % 2 == 0) {
        fprintf(stderr, "usage: bench_roofline --config NAME --pe rope|pope --triad-gbs G [--threads N] "
                        "[--reps N]\n  configurations: bench/configs.h\n");
        return 2;
    }
    pelab_threads_set(threads);
    const int d = c->D / c->heads, dq = strcmp(pe, "pope") == 0 ? 2 * d : d;
    struct product p[32];
    const int n = products_of(c, dq, p);
    const struct product large = {0, 1, 2048, 2048, 2048, 1, 1, 0};
    size_t na = (size_t)2048 * 2048, nb = na, nc = na;
    double flops = 0;
    for (int i = 0; i < n; i++) {
        if ((size_t)p[i].M * p[i].K > na) na = (size_t)p[i].M * p[i].K;
        if ((size_t)p[i].K * p[i].N > nb) nb = (size_t)p[i].K * p[i].N;
        if ((size_t)p[i].M * p[i].N > nc) nc = (size_t)p[i].M * p[i].N;
        flops += 2.0 * p[i].M * p[i].N * p[i].K * p[i].needed;
    }
    pelab_real *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *cc = malloc(nc * sizeof *cc);
    if (!a || !b || !cc) {
        fprintf(stderr, "bench_roofline: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < na; i++) a[i] = (pelab_real)((i % 7) * 0.1 - 0.3);
    for (size_t i = 0; i < nb; i++) b[i] = (pelab_real)((i % 5) * 0.1 - 0.2);
    struct pelab_ctx fp32, half; /* the products in each precision */
    pelab_ctx_init(&fp32), pelab_ctx_init(&half);
    const int bf16 = pelab_precision_set(&half, PELAB_PRECISION_BF16) == PELAB_OK;
    double large32 = product_rate(&fp32, &large, reps, a, b, cc), large16 = large32;
    if (bf16) {
        const double r = product_rate(&half, &large, reps, a, b, cc);
        if (r > large16) large16 = r;
    }
    double t32 = 0, t16 = 0; /* seconds of the step's products */
    for (int i = 0; i < n; i++) {
        double r32 = large32, r16 = large16;
        if (!p[i].attention) {
            r32 = r16 = product_rate(&fp32, &p[i], reps, a, b, cc);
            if (bf16) {
                const double r = product_rate(&half, &p[i], reps, a, b, cc);
                if (r > r16) r16 = r;
            }
        }
        const double gflop = 2e-9 * p[i].M * p[i].N * p[i].K * p[i].needed;
        t32 += gflop / r32, t16 += gflop / r16;
        if (detail) /* each product's ceiling */
            fprintf(stderr, "%s (%d,%d,%d)%s x %.0f: fp32 %.1f, best %.1f GFLOP/s\n",
                    p[i].attention ? "attention" : "linear", p[i].M, p[i].N, p[i].K, p[i].ta ? "ᵀ" : "",
                    p[i].count, r32, r16);
    }
    const double bytes = 4 * memory_words(c, dq, parameters(c, dq));
    const double tm = bytes / (gbs * 1e9), tokens = (double)c->B * c->T;
    char bf[64] = "null", bft[64] = "null";
    if (bf16) {
        snprintf(bf, sizeof bf, "%.3f", 1e3 * t16);
        snprintf(bft, sizeof bft, "%.1f", tokens / (t16 + tm));
    }
    printf("{\"config\":\"%s\",\"pe\":\"%s\",\"threads\":%d,\"tokens\":%.0f,\"product_gflop\":%.3f,"
           "\"memory_mb\":%.2f,\"triad_gbs\":%.2f,\"large_fp32_gflops\":%.1f,\"large_bf16_gflops\":%.1f,\"products_fp32_ms\":%.3f,\"products_bf16_ms\":%s,"
           "\"memory_ms\":%.3f,\"bound_fp32_tokens_per_s\":%.1f,\"bound_bf16_tokens_per_s\":%s}\n",
           c->name, pe, pelab_threads_get(), tokens, flops / 1e9, bytes / 1e6, gbs, large32, large16, 1e3 * t32, bf, 1e3 * tm,
           tokens / (t32 + tm), bft);
    free(a), free(b), free(cc);
    return 0;
}
