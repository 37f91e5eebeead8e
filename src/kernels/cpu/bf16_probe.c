/* Whether --precision bf16 is faster than float32 here (pelab/precision.h): bf16's products are
 * not faster everywhere. With AMX they run at 2.4–3.2× float32's; on an AVX512-BF16 CPU without
 * AMX oneDNN's bf16 products were measured at 0.67–0.71× float32's (bench/RESULTS.md), which
 * makes a bf16 run slower for nothing. So the first bf16 run of a process measures one product
 * both ways and says so in one line when bf16 loses.
 *
 * The probe: C (4096, 512) = A (4096, 512) · Bᵀ (512, 512), a linear layer of 4,096 tokens of a
 * 512-wide model (2.1 GFLOP), in float32 (pelab_gemm) and with bf16 operands (pelab_gemm_bf16,
 * the operands' rounding included, as a training step pays it), alternately, best of PROBE_REPS
 * each after one untimed call of each: speedup = float32's time / bf16's. On the thread count in
 * force, so a result is the run's. About 0.1 s; the result is kept in a cache file,
 * $XDG_CACHE_HOME/pelab/bf16-probe (else ~/.cache/pelab/bf16-probe), one line
 *     <CPU model>\t<bf16 kernels>\t<threads>\t<speedup>
 * read back when its first three fields are this process's, measured again otherwise (another
 * CPU, kernels or thread count; a damaged file).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/matmul.h"
#include "pelab/clock.h"
#include "pelab/io.h"
#include "pelab/precision.h"
#include "pelab/real.h"
#include "pelab/status.h"
#include "pelab/threads.h"

#define PROBE_M 4096
#define PROBE_N 512
#define PROBE_K 512
#define PROBE_REPS 5

/* "<CPU model>\t<bf16 kernels>\t<threads>": what a cached speedup is valid for. */
static void probe_key(char *key, size_t size) {
    char cpu[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
            cpu[strcspn(cpu, "\n")] = '\0';
            break;
        }
    if (f) fclose(f);
    snprintf(key, size, "%s\t%s\t%d", cpu, pelab_bf16_kernels(), pelab_threads_get());
}

static void cache_path(char *path, size_t size) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0]) snprintf(path, size, "%s/pelab/bf16-probe", xdg);
    else snprintf(path, size, "%s/.cache/pelab/bf16-probe", home && home[0] ? home : "/tmp");
}

/* The cached speedup for `key`, or 0 when there is none (no file, another key, not a number). */
static double cached(const char *path, const char *key) {
    char *text;
    size_t n;
    if (pelab_read_small_file(path, &text, &n)) {
        pelab_clear_error();
        return 0;
    }
    const size_t k = strlen(key);
    double s = 0;
    char *end;
    if (n > k && strncmp(text, key, k) == 0 && text[k] == '\t') {
        s = strtod(text + k + 1, &end);
        if (end == text + k + 1 || *end != '\n' || !(s > 0 && s < 1e3)) s = 0;
    }
    free(text);
    return s;
}

/* float32's time of the probe's product over bf16's (0 if bf16's failed). */
static double measure(void) {
    pelab_real *a = malloc(sizeof *a * PROBE_M * PROBE_K), *b = malloc(sizeof *b * PROBE_N * PROBE_K),
               *c = malloc(sizeof *c * PROBE_M * PROBE_N);
    double best[2] = {1e30, 1e30};
    int failed = !a || !b || !c;
    for (long i = 0; !failed && i < (long)PROBE_M * PROBE_K; i++) a[i] = (pelab_real)((i * 7919 % 1000) / 1000.0 - 0.5);
    for (long i = 0; !failed && i < (long)PROBE_N * PROBE_K; i++) b[i] = (pelab_real)((i * 104729 % 1000) / 1000.0 - 0.5);
    struct pelab_ctx fp32; /* float32's products, in a context of the probe's own */
    pelab_ctx_init(&fp32);
    for (int r = 0; !failed && r <= PROBE_REPS; r++)
        for (int bf16 = 0; bf16 < 2 && !failed; bf16++) {
            const double t0 = pelab_clock_s();
            if (bf16) failed = pelab_gemm_bf16(0, 1, PROBE_M, PROBE_N, PROBE_K, 1, a, PROBE_K, b, PROBE_K, 0, c, PROBE_N);
            else pelab_gemm(&fp32, 0, 1, PROBE_M, PROBE_N, PROBE_K, 1, a, PROBE_K, b, PROBE_K, 0, c, PROBE_N);
            const double t = pelab_clock_s() - t0;
            if (r > 0 && t < best[bf16]) best[bf16] = t; /* r 0: untimed, oneDNN makes its kernel */
        }
    free(a), free(b), free(c);
    if (failed) pelab_clear_error();
    return failed ? 0 : best[0] / best[1];
}

double pelab_bf16_speedup(void) {
    static double speedup; /* this process's, once measured or read: the CPU's, as the cache file's */
    if (speedup > 0) return speedup;
    if (pelab_precision_check(PELAB_PRECISION_BF16)) return 0;
    char key[512], path[4096];
    probe_key(key, sizeof key);
    cache_path(path, sizeof path);
    if ((speedup = cached(path, key)) > 0) return speedup;
    if (!((speedup = measure()) > 0)) return 0;
    char dir[4096], line[600];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    const int n = snprintf(line, sizeof line, "%s\t%.3f\n", key, speedup);
    if (pelab_mkdir_p(dir) || pelab_write_file_atomic(path, line, (size_t)n)) pelab_clear_error(); /* kept for this process only */
    return speedup;
}

void pelab_bf16_advise(const struct pelab_ctx *ctx) {
    static int said; /* once per process: it is about the CPU */
    if (said || ctx->precision != PELAB_PRECISION_BF16 || pelab_bf16_emulated()) return;
    said = 1;
    const double s = pelab_bf16_speedup();
    if (s > 0 && s < 1)
        fprintf(stderr, "pelab: notice: --precision bf16 is slower than float32 on this CPU: its products "
                        "run at %.2fx float32's here (%s; measured on a 4096x512x512 product): "
                        "--precision fp32 is faster\n", s, pelab_bf16_kernels());
}
