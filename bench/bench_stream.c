/* bench_stream — the machine's memory bandwidth, the ceiling of one-token-at-a-time generation
 * (each token reads every weight and the KV cache once).
 *
 *   build/bench/bench_stream [--threads N] [--mib N] [--reps N]
 *
 * Two STREAM-style kernels (McCalpin's STREAM: the same idea, written here) over float arrays of
 * --mib MiB each (default 256, far beyond any cache), OpenMP over contiguous shares of the
 * arrays, best of --reps (default 5) after one untimed pass:
 *   read    s += a[i]                 bytes: one array read
 *   triad   a[i] = b[i] + q · c[i]    bytes: two read, one written (counted as STREAM does:
 *                                     3 arrays; the write's read-for-ownership is not counted)
 * Prints one JSON line: {"mib":256,"threads":2,"read_gbs":...,"triad_gbs":...}
 * bench/generate.sh divides decoding's bytes per token by read_gbs: the tokens/s bound.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/clock.h"
#include "pelab/threads.h"

static double best_of(int reps, double (*pass)(float *, float *, float *, long), float *a, float *b,
                      float *c, long n, double *sink) {
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        const double t0 = pelab_clock_s();
        *sink += pass(a, b, c, n);
        const double t = pelab_clock_s() - t0;
        if (r > 0 && t < best) best = t;
    }
    return best;
}

static double read_pass(float *a, float *b, float *c, long n) {
    (void)b, (void)c;
    /* blocks of 64 floats summed in 16 independent lanes (registers, vectors): the loop waits on
     * memory, not on a chain of additions */
    double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (long blk = 0; blk < n / 64; blk++) {
        const float *p = a + blk * 64;
        float lane[16] = {0};
        for (int k = 0; k < 64; k += 16)
            for (int j = 0; j < 16; j++) lane[j] += p[k + j];
        float s = 0;
        for (int j = 0; j < 16; j++) s += lane[j];
        total += s;
    }
    return total;
}

static double triad_pass(float *a, float *b, float *c, long n) {
    const float q = 3.0f;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + q * c[i];
    return a[n / 2];
}

int main(int argc, char **argv) {
    int threads = 0, mib = 256, reps = 5;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && strcmp(argv[i], "--threads") == 0) threads = atoi(v);
        else if (v && strcmp(argv[i], "--mib") == 0) mib = atoi(v);
        else if (v && strcmp(argv[i], "--reps") == 0) reps = atoi(v);
        else {
            fprintf(stderr, "usage: bench_stream [--threads N] [--mib N] [--reps N]\n");
            return 2;
        }
    }
    if (mib < 1 || reps < 1) return 2;
    pelab_threads_set(threads);
    const long n = (long)mib * (1L << 20) / (long)sizeof(float);
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b), *c = malloc((size_t)n * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_stream: out of memory for 3 x %d MiB\n", mib);
        return 1;
    }
    /* first touch by the threads that use each share (the same static schedule) */
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = 1.0f, b[i] = 2.0f, c[i] = 0.5f;
    double sink = 0;
    const double bytes = (double)n * sizeof(float);
    const double read_s = best_of(reps, read_pass, a, b, c, n, &sink);
    const double triad_s = best_of(reps, triad_pass, a, b, c, n, &sink);
    printf("{\"mib\":%d,\"threads\":%d,\"read_gbs\":%.2f,\"triad_gbs\":%.2f,\"check\":%g}\n", mib,
           pelab_threads_get(), bytes / read_s / 1e9, 3 * bytes / triad_s / 1e9, sink > 0 ? 1.0 : 0.0);
    free(a);
    free(b);
    free(c);
    return 0;
}
