/* bench_attn — the tiled attention kernel alone, forward and backward (float build).
 *
 *   build/bench/bench_attn [--shape NAME] [--B N] [--H N] [--T N] [--d N] [--causal 0|1]
 *                          [--reps N] [--threads N]
 *
 * Times pelab_attn_tiled_forward and pelab_attn_tiled_backward on random queries, keys and values
 * of one layer (no encoding inside the kernel, no dropout), the median of `reps` calls of each
 * (default 21) after two untimed, in wall time and in the process's CPU time (on a machine shared
 * with other work, the CPU time of one thread is the steadier measure: it leaves out the time the
 * process waited for a core). --shape NAME takes the attention of a benchmark configuration
 * (bench/configs.h): its B, heads, T and head width D / heads, causal but for the image model's
 * (every key visible), e.g.
 *   I  the image preset's ViT: B 128, 4 heads of 16, T 50, every key visible (the default)
 *   L  the length-generalisation `cpu` model: B 64, 4 heads of 16, causal
 *   C  configuration C: B 8, 6 heads of 64, T 256, causal
 * and the options after it change any part: --B, --H, --T, --d (width of a head), --causal.
 * Prints one JSON line:
 *   {"B":128,"H":4,"T":50,"d":16,"causal":0,"threads":1,"simd":"avx512","forward_ms":...,
 *    "backward_ms":...,"forward_cpu_ms":...,"backward_cpu_ms":...,"forward_gflops":...,
 *    "backward_gflops":...}
 * (GFLOP/s of the wall times).
 * counting the products of the visible scores as bench_train does (forward 2 products of width d,
 * backward 4; the backward's recomputation of the scores not counted).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "attn/attention.h"
#include "kernels/cpu/simd.h"
#include "pelab/clock.h"
#include "pelab/threads.h"
#include "configs.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the median of x (n), sorted in place */
static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static unsigned long long seed = 1;
static float uniform(void) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(seed >> 11) / 9007199254740992.0 * 2 - 1);
}
static float *rvec(long n) {
    float *x = malloc((size_t)n * sizeof *x);
    for (long i = 0; x && i < n; i++) x[i] = uniform();
    return x;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_attn [--shape NAME] [--B N] [--H N] [--T N] [--d N] [--causal 0|1] "
                    "[--reps N] [--threads N]\n  --shape  a configuration of bench/configs.h:");
    for (size_t i = 0; i < sizeof bench_configs / sizeof bench_configs[0]; i++)
        fprintf(stderr, " %s", bench_configs[i].name);
    fprintf(stderr, " (default I)\n");
    return 2;
}

/* The attention of configuration c: B, heads, T, a head's width; causal but for the image model's. */
static void shape_of(const struct bench_config *c, int *B, int *H, int *T, int *d, int *causal) {
    *B = c->B, *H = c->heads, *T = c->T, *d = c->D / c->heads, *causal = !c->patch_dim;
}

int main(int argc, char **argv) {
    pelab_blas_mend(argv);
    int B, H, T, d, causal, reps = 21, threads = 1;
    shape_of(bench_config_find("I"), &B, &H, &T, &d, &causal);
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (strcmp(a, "--shape") == 0) {
            const struct bench_config *c = bench_config_find(v);
            if (!c) return usage();
            shape_of(c, &B, &H, &T, &d, &causal);
        } else if (strcmp(a, "--B") == 0) B = atoi(v);
        else if (strcmp(a, "--H") == 0) H = atoi(v);
        else if (strcmp(a, "--T") == 0) T = atoi(v);
        else if (strcmp(a, "--d") == 0) d = atoi(v);
        else if (strcmp(a, "--causal") == 0) causal = atoi(v);
        else if (strcmp(a, "--reps") == 0) reps = atoi(v);
        else if (strcmp(a, "--threads") == 0) threads = atoi(v);
        else return usage();
    }
    if (B < 1 || H < 1 || T < 1 || d < 1 || reps < 1) return usage();
    pelab_threads_set(threads);
    const long BT = (long)B * T, D = (long)H * d, nq = BT * D;
    float *q = rvec(nq), *k = rvec(nq), *qkv = rvec(BT * 3 * D), *dout = rvec(BT * D);
    float *out = rvec(BT * D), *lse = rvec(BT * H), *dq = rvec(nq), *dk = rvec(nq), *dqkv = rvec(BT * 3 * D);
    double *times = malloc(4 * (size_t)reps * sizeof *times); /* wall and CPU, forward and backward */
    if (!q || !k || !qkv || !dout || !out || !lse || !dq || !dk || !dqkv || !times) {
        fprintf(stderr, "bench_attn: out of memory\n");
        return 1;
    }
    struct pelab_attn_scratch scratch = {0};
    const struct pelab_attn_call s = {.B = B, .T = T, .H = H, .dq = d, .dv = d, .ldv = 3 * D, .ldo = D,
                                      .scale = 0.25f, .bidirectional = !causal, .scratch = &scratch};
    for (int r = -2; r < reps; r++) {
        const double t0 = pelab_clock_s(), c0 = cpu_s();
        if (pelab_attn_tiled_forward(out, lse, q, k, qkv + 2 * D, &s) != 0) return 1;
        const double t1 = pelab_clock_s(), c1 = cpu_s();
        if (pelab_attn_tiled_backward(dq, dk, dqkv + 2 * D, dout, out, lse, q, k, qkv + 2 * D, &s) != 0) return 1;
        const double t2 = pelab_clock_s(), c2 = cpu_s();
        if (r >= 0)
            times[r] = t1 - t0, times[reps + r] = t2 - t1, times[2 * reps + r] = c1 - c0, times[3 * reps + r] = c2 - c1;
    }
    const double f = median(times, reps), b = median(times + reps, reps);
    const double fc = median(times + 2 * reps, reps), bc = median(times + 3 * reps, reps);
    const double visible = causal ? (double)T * (T + 1) / 2 : (double)T * T;
    const double flops = 2.0 * B * H * visible * 2 * d; /* Q·Kᵀ and P·V */
    printf("{\"B\":%d,\"H\":%d,\"T\":%d,\"d\":%d,\"causal\":%d,\"threads\":%d,\"simd\":\"%s\","
           "\"forward_ms\":%.3f,\"backward_ms\":%.3f,\"forward_cpu_ms\":%.3f,\"backward_cpu_ms\":%.3f,"
           "\"forward_gflops\":%.2f,\"backward_gflops\":%.2f}\n",
           B, H, T, d, causal, pelab_threads_get(), pelab_simd_name(pelab_simd_level()), 1e3 * f, 1e3 * b,
           1e3 * fc, 1e3 * bc, flops / f / 1e9, 2 * flops / b / 1e9);
    pelab_attn_scratch_free(&scratch);
    free(q), free(k), free(qkv), free(dout), free(out), free(lse), free(dq), free(dk), free(dqkv), free(times);
    return 0;
}
