/* bench_sgemm — the matrix-product rate pelab's training is measured against (float build).
 *
 *   build/bench/bench_sgemm [--threads N] [--size N] [--reps N]
 *
 * Times pelab_gemm (OpenBLAS's sgemm, threaded as pelab threads it) on N×N by N×N products
 * (default 2048), best of `reps` (default 5) after one untimed, and prints one JSON line:
 *   {"size":2048,"threads":2,"gflops":...}
 * bench/run.sh divides each configuration's training GFLOP/s by this rate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/clock.h"
#include "pelab/threads.h"
#include "kernels/cpu/matmul.h"

int main(int argc, char **argv) {
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
    pelab_real *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_sgemm: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nn; i++) a[i] = (pelab_real)(i % 7) * 0.1f, b[i] = (pelab_real)(i % 5) * 0.1f;
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        const double t0 = pelab_clock_s();
        pelab_gemm(0, 1, n, n, n, 1, a, n, b, n, 0, c, n); /* as the linear layers: x · W^T */
        const double t = pelab_clock_s() - t0;
        if (r > 0 && t < best) best = t;
    }
    printf("{\"size\":%d,\"threads\":%d,\"gflops\":%.1f}\n", n, pelab_threads_get(), 2.0 * n * nn / best / 1e9);
    free(a);
    free(b);
    free(c);
    return 0;
}
