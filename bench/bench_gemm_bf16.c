/* bench_gemm_bf16 — pelab_gemm in bf16 (oneDNN's bf16 matmul, float32 accumulation) against
 * pelab_gemm in fp32 (OpenBLAS's sgemm, threaded as pelab threads it), at the products of one
 * training step of the benchmark configurations (float build).
 *
 *   build/bench/bench_gemm_bf16 [--config NAME|S] [--reps N] [--threads N]
 *
 * A configuration's products are those of its linear layers (bench/configs.h), for
 * each weight W (OC,C) with BT = B·T rows: the forward x·Wᵀ (BT,OC,C), the backward dx = dy·W
 * (BT,C,OC) and dW = dyᵀ·x (OC,C,BT); the weights are qkv (3D,D), proj (D,D), fc (4D,D),
 * fcproj (D,4D) and the head (V,D). One pass runs each once (the layers repeat the same shapes),
 * and its rate is the pass's 2·M·N·K summed over its time. S is one 2048³ product, as
 * bench_sgemm's ceiling. Passes alternate fp32, bf16, fp32, ... back to back, after one untimed
 * pass of each (oneDNN creates its kernels then); the medians of `reps` passes (default 5) are
 * printed, one JSON line per configuration:
 *   {"config":"B","threads":2,"fp32_gflops":...,"bf16_gflops":...,"ratio":...}
 * with ratio = bf16 / fp32. The bf16 time includes the rounding of both operands to bf16.
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

struct shape {
    int ta, tb, M, N, K;
};

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* The products of one pass; returns their count. */
static int shapes_of(const char *name, struct shape *s) {
    if (strcmp(name, "S") == 0) {
        s[0] = (struct shape){0, 1, 2048, 2048, 2048};
        return 1;
    }
    const struct bench_config *c = bench_config_find(name);
    if (c) {
        const int BT = c->B * c->T, D = c->D;
        const int w[][2] = {{3 * D, D}, {D, D}, {4 * D, D}, {D, 4 * D}, {c->V, D}}; /* (OC, C) */
        int n = 0;
        for (int k = 0; k < 5; k++) {
            const int OC = w[k][0], C = w[k][1];
            s[n++] = (struct shape){0, 1, BT, OC, C}; /* y = x·Wᵀ */
            s[n++] = (struct shape){0, 0, BT, C, OC}; /* dx = dy·W */
            s[n++] = (struct shape){1, 0, OC, C, BT}; /* dW = dyᵀ·x */
        }
        return n;
    }
    return 0;
}

int main(int argc, char **argv) {
    pelab_blas_mend(argv); /* OpenBLAS's best kernels for this CPU (pelab/threads.h) */
    const char *config = NULL;
    int reps = 5, threads = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && strcmp(argv[i], "--config") == 0) config = v;
        else if (v && strcmp(argv[i], "--reps") == 0) reps = atoi(v);
        else if (v && strcmp(argv[i], "--threads") == 0) threads = atoi(v);
        else config = NULL, i = argc;
    }
    struct shape shapes[16];
    const int n = config ? shapes_of(config, shapes) : 0;
    if (n == 0 || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: bench_gemm_bf16 --config NAME|S [--reps N (1-100)] [--threads N]\n");
        return 2;
    }
    pelab_threads_set(threads);
    if (pelab_precision_check(PELAB_PRECISION_BF16) != PELAB_OK) {
        fprintf(stderr, "bench_gemm_bf16: %s\n", pelab_last_error());
        return 1;
    }
    /* One buffer per operand, as large as the largest product's */
    size_t na = 0, nb = 0, nc = 0;
    double flops = 0;
    for (int i = 0; i < n; i++) {
        const struct shape *s = &shapes[i];
        if ((size_t)s->M * s->K > na) na = (size_t)s->M * s->K;
        if ((size_t)s->K * s->N > nb) nb = (size_t)s->K * s->N;
        if ((size_t)s->M * s->N > nc) nc = (size_t)s->M * s->N;
        flops += 2.0 * s->M * s->N * s->K;
    }
    pelab_real *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_gemm_bf16: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < na; i++) a[i] = (pelab_real)((i % 7) * 0.1 - 0.3);
    for (size_t i = 0; i < nb; i++) b[i] = (pelab_real)((i % 5) * 0.1 - 0.2);
    struct pelab_ctx ctx[2]; /* fp32, bf16 */
    pelab_ctx_init(&ctx[0]), pelab_ctx_init(&ctx[1]);
    if (pelab_precision_set(&ctx[1], PELAB_PRECISION_BF16) != PELAB_OK) return 1; /* checked above */
    double *rate[2];
    rate[0] = malloc((size_t)reps * sizeof(double));
    rate[1] = malloc((size_t)reps * sizeof(double));
    if (!rate[0] || !rate[1]) return 1;
    for (int r = -1; r < reps; r++)
        for (int p = 0; p < 2; p++) {
            const double t0 = pelab_clock_s();
            for (int i = 0; i < n; i++) {
                const struct shape *s = &shapes[i];
                /* stored A (M,K) or (K,M), B (K,N) or (N,K), rows contiguous */
                pelab_gemm(&ctx[p], s->ta, s->tb, s->M, s->N, s->K, 1, a, s->ta ? s->M : s->K, b,
                           s->tb ? s->K : s->N, 0, c, s->N);
            }
            const double t = pelab_clock_s() - t0;
            if (r >= 0) rate[p][r] = flops / t / 1e9;
        }
    const double f = median(rate[0], reps), h = median(rate[1], reps);
    printf("{\"config\":\"%s\",\"threads\":%d,\"reps\":%d,\"gflop_per_pass\":%.2f,\"fp32_gflops\":%.1f,"
           "\"bf16_gflops\":%.1f,\"ratio\":%.2f}\n",
           config, pelab_threads_get(), reps, flops / 1e9, f, h, h / f);
    free(a), free(b), free(c), free(rate[0]), free(rate[1]);
    return 0;
}
