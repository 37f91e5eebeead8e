/* bench_sgemm — the matrix-product rate pelab's training is measured against (float build).
 *
 *   build/bench/bench_sgemm [--threads N] [--size N] [--reps N]
 *
 * Times pelab_gemm (oneDNN's sgemm in a build with oneDNN, else OpenBLAS's; threaded as pelab
 * threads it: kernels/cpu/matmul.c) on N×N by N×N products (default 2048), best of `reps`
 * (default 5) after one untimed; then the same product through OpenBLAS's cblas_sgemm on all the
 * threads OpenBLAS runs with, where the build has OpenBLAS. Prints one JSON line:
 *   {"size":2048,"threads":2,"gflops":...,"kernels":"oneDNN 2.6.3 sgemm on AVX-512 ...",
 *    "openblas_gflops":...,"openblas_kernels":"OpenBLAS 0.3.21 SkylakeX kernels",
 *    "isa":"AVX-512","clock_mhz":2500,"peak_gflops_1fma":...,"peak_gflops_2fma":...}
 * The peaks are threads × clock × FLOPs per FMA instruction (2 × lanes of the widest vectors the
 * CPU has) with one or two FMA units a core (how many a core has is not visible from software), at
 * the clock /proc/cpuinfo reports. bench/run.sh divides each configuration's training GFLOP/s by
 * pelab's own rate, the other library's rate being printed beside it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/clock.h"
#include "pelab/threads.h"
#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/parallel.h"
#ifdef PELAB_BLAS
#include <cblas.h>
#endif

/* Best time of `reps` calls of product(n) after one untimed. */
static double best_time(void (*product)(int n, const float *a, const float *b, float *c), int n,
                        int reps, const float *a, const float *b, float *c) {
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        const double t0 = pelab_clock_s();
        product(n, a, b, c);
        const double t = pelab_clock_s() - t0;
        if (r > 0 && t < best) best = t;
    }
    return best;
}

/* as the linear layers: x · W^T */
static void pelab_product(int n, const float *a, const float *b, float *c) {
    struct pelab_ctx fp32;
    pelab_ctx_init(&fp32);
    pelab_gemm(&fp32, 0, 1, n, n, n, 1, a, n, b, n, 0, c, n);
}

#ifdef PELAB_BLAS
/* threaded as pelab threaded it before oneDNN: each OpenMP thread a slice of C's rows */
static void openblas_product(int n, const float *a, const float *b, float *c) {
#pragma omp parallel
    {
        long lo, hi;
        pelab_thread_slice(n, &lo, &hi);
        if (hi > lo)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(hi - lo), n, n, 1.0f, a + lo * n, n, b, n,
                        0.0f, c + lo * n, n);
    }
}
#endif

/* The "cpu MHz" of /proc/cpuinfo's first processor and the level of its flags (0, 0 without). */
static double cpu_mhz(int *isa) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    double mhz = 0;
    *isa = -1;
    if (!f) return 0;
    char line[8192];
    while (fgets(line, sizeof line, f) && (mhz == 0 || *isa < 0)) {
        const char *colon = strchr(line, ':');
        if (!colon) continue;
        if (mhz == 0 && strncmp(line, "cpu MHz", 7) == 0) mhz = atof(colon + 1);
        if (*isa < 0 && strncmp(line, "flags", 5) == 0) *isa = (int)pelab_isa_from_flags(colon + 1);
    }
    fclose(f);
    return mhz;
}

int main(int argc, char **argv) {
    pelab_blas_mend(argv); /* OpenBLAS's best kernels for this CPU (pelab/threads.h) */
    int threads = 0, n = 2048, reps = 5;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && strcmp(argv[i], "--threads") == 0) threads = atoi(v);
        else if (v && strcmp(argv[i], "--size") == 0) n = atoi(v);
        else if (v && strcmp(argv[i], "--reps") == 0) reps = atoi(v);
        else {
            fprintf(stderr, "usage: bench_sgemm [--threads N] [--size N] [--reps N]\n");
            return 2;
        }
    }
    if (n < 1 || reps < 1) return 2;
    pelab_threads_set(threads);
    const size_t nn = (size_t)n * n;
#ifdef PELAB_DOUBLE
#error "bench_sgemm times the float build"
#endif
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_sgemm: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nn; i++) a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    const double flops = 2.0 * n * nn;
    printf("{\"size\":%d,\"threads\":%d,\"gflops\":%.1f,\"kernels\":\"%s\"", n, pelab_threads_get(),
           flops / best_time(pelab_product, n, reps, a, b, c) / 1e9, pelab_sgemm_kernels());
#ifdef PELAB_BLAS
    printf(",\"openblas_gflops\":%.1f,\"openblas_kernels\":\"%s\"",
           flops / best_time(openblas_product, n, reps, a, b, c) / 1e9, pelab_blas_kernels());
#endif
    int isa;
    const double mhz = cpu_mhz(&isa);
    if (mhz > 0 && isa >= 0) {
        const int lanes = isa >= PELAB_ISA_AVX512 ? 16 : isa >= PELAB_ISA_AVX ? 8 : 4;
        const double peak = pelab_threads_get() * mhz * 1e-3 * lanes * 2;
        printf(",\"isa\":\"%s\",\"clock_mhz\":%.0f,\"peak_gflops_1fma\":%.1f,\"peak_gflops_2fma\":%.1f",
               pelab_isa_name((enum pelab_isa)isa), mhz, peak, 2 * peak);
    }
    printf("}\n");
    free(a);
    free(b);
    free(c);
    return 0;
}
