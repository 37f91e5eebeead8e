/* bench_stream — the machine's memory bandwidth, the ceiling of one-token-at-a-time generation
 * (each token reads every weight and the KV cache once).
 *
 *   build/bench/bench_stream [--threads N] [--mib N] [--reps N]
 *
 * Two STREAM-style kernels (McCalpin's STREAM: the same idea, written here) over float arrays of
 * --mib MiB each (default 256; a last-level cache may hold less or more: Xeons of 2023 have up
 * to 320 MiB, and bench/generate.sh measures at the size a token reads), OpenMP over contiguous shares of the
 * arrays, at the best SIMD level the CPU has (PELAB_SIMD caps it), best of --reps (default: as
 * many passes as read 2 GiB, at least 5) after one untimed pass:
 *   read    s += a[i]                 bytes: one array read
 *   triad   a[i] = b[i] + q · c[i]    bytes: two read, one written (counted as STREAM does:
 *                                     3 arrays; the write's read-for-ownership is not counted)
 * Prints one JSON line: {"mib":256,"threads":2,"read_gbs":...,"triad_gbs":...}
 * bench/generate.sh divides decoding's bytes per token by read_gbs at that many MiB: the tokens/s
 * bound.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/clock.h"
#include "pelab/threads.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"

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

/* The sum of a[lo..hi) read as four streams at once, a quarter each, each summed in its own
 * vector of 16 floats (its own chain of additions, so that the loop waits on memory, not on the
 * adder). Four streams, because the hardware prefetchers serve several at once faster than one:
 * 24.2 GB/s against 21.6 for one stream per thread, here on 2 threads. Compiled per SIMD level
 * (kernels/cpu/simd.h): at the portable level (SSE2 on x86-64) two threads cannot issue reads as
 * fast as memory serves them (19.3 GB/s), and the bound would be the code's. */
typedef float floats16 __attribute__((vector_size(16 * sizeof(float))));
static PELAB_ALWAYS_INLINE void stream_read_body(const float *a, long lo, long hi, double *sum) {
    const long q = (hi - lo) / 64 * 16; /* a quarter, whole vectors */
    const float *p0 = a + lo, *p1 = p0 + q, *p2 = p1 + q, *p3 = p2 + q;
    floats16 s0 = {0}, s1 = s0, s2 = s0, s3 = s0, v;
    for (long i = 0; i < q; i += 16) {
        memcpy(&v, p0 + i, sizeof v), s0 += v;
        memcpy(&v, p1 + i, sizeof v), s1 += v;
        memcpy(&v, p2 + i, sizeof v), s2 += v;
        memcpy(&v, p3 + i, sizeof v), s3 += v;
    }
    double total = 0;
    for (int j = 0; j < 16; j++) total += s0[j] + s1[j] + s2[j] + s3[j];
    for (long i = lo + 4 * q; i < hi; i++) total += a[i];
    *sum = total;
}
PELAB_SIMD_KERNEL(stream_read, (const float *a, long lo, long hi, double *sum), (a, lo, hi, sum))

static PELAB_ALWAYS_INLINE void stream_triad_body(float *a, const float *b, const float *c, long lo, long hi) {
    const float q = 3.0f;
    for (long i = lo; i < hi; i++) a[i] = b[i] + q * c[i];
}
PELAB_SIMD_KERNEL(stream_triad, (float *a, const float *b, const float *c, long lo, long hi), (a, b, c, lo, hi))

static double read_pass(float *a, float *b, float *c, long n) {
    (void)b, (void)c;
    void (*const kernel)(const float *, long, long, double *) = pelab_simd_fn(stream_read);
    double total = 0;
#pragma omp parallel reduction(+ : total)
    {
        long lo, hi;
        double sum;
        pelab_thread_slice(n, &lo, &hi);
        kernel(a, lo, hi, &sum);
        total += sum;
    }
    return total;
}

static double triad_pass(float *a, float *b, float *c, long n) {
    void (*const kernel)(float *, const float *, const float *, long, long) = pelab_simd_fn(stream_triad);
#pragma omp parallel
    {
        long lo, hi;
        pelab_thread_slice(n, &lo, &hi);
        kernel(a, b, c, lo, hi);
    }
    return a[n / 2];
}

int main(int argc, char **argv) {
    int threads = 0, mib = 256, reps = 0;
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
    if (mib < 1 || reps < 0) return 2;
    /* passes enough to read 2 GiB, at least 5: a pass over a few MiB takes a millisecond, and
     * the best of 5 such passes was as low as 1 GB/s here (a 2-core virtual machine: one
     * descheduled thread holds up a whole pass), where the best of 256 reads 47 GB/s */
    if (reps == 0) reps = 2048 / mib > 5 ? 2048 / mib : 5;
    pelab_threads_set(threads);
    const long n = (long)mib * (1L << 20) / (long)sizeof(float);
    /* on cache lines: a vector of 16 floats read across two lines costs two reads (20.7 GB/s
     * against 24.2 here, 2 threads) */
    const size_t size = (size_t)n * sizeof(float);
    float *a = aligned_alloc(64, size), *b = aligned_alloc(64, size), *c = aligned_alloc(64, size);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_stream: out of memory for 3 x %d MiB\n", mib);
        return 1;
    }
    /* first touch by the threads that use each share (the passes' slices) */
#pragma omp parallel
    {
        long lo, hi;
        pelab_thread_slice(n, &lo, &hi);
        for (long i = lo; i < hi; i++) a[i] = 1.0f, b[i] = 2.0f, c[i] = 0.5f;
    }
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
