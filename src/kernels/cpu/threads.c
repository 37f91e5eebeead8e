/* Thread count shared by OpenMP and OpenBLAS: with OpenMP, OpenBLAS is single-threaded and runs
 * inside OpenMP's threads (matmul.c), so one pool of threads does all the work. The pool's
 * threads also flush subnormal floats to zero (below). pelab keeps no count of its own: OpenMP
 * keeps it (the calling thread's nthreads-var, which every parallel region it starts reads), as
 * OpenBLAS keeps its own; pelab_threads_get asks them. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "kernels/cpu/simd.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef PELAB_BLAS
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
#endif

#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#define MXCSR_FTZ 0x8000 /* results below FLT_MIN / DBL_MIN become 0 */
#define MXCSR_DAZ 0x0040 /* subnormal inputs are read as 0 */
#endif

/* Subnormals (|x| < 2^-126 ≈ 1.2e-38 in float32) flushed to zero as results and read as zero as
 * inputs, on the calling thread. On Intel cores every operation that meets one takes a microcode
 * assist of a hundred cycles or more: the attention's e^(S − m) underflows into them once a
 * model's scores spread, and the products downstream meet them. A SeqPE fine-tune from a
 * pre-trained run took 2.6 times the CPU time with them kept (README, "Speed"). Nothing pelab computes
 * depends on values that small. PELAB_SUBNORMALS=keep keeps IEEE gradual underflow (as PyTorch
 * does by default). x86-64 only: elsewhere the CPU's default stands. */
static void set_subnormal_mode(int flush) {
#ifdef MXCSR_FTZ
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(flush ? csr | MXCSR_FTZ | MXCSR_DAZ : csr & ~(unsigned)(MXCSR_FTZ | MXCSR_DAZ));
#else
    (void)flush;
#endif
}

/* PELAB_SUBNORMALS: 1 flush (unset, empty or "flush"), 0 keep ("keep"), in any case; -1 for any
 * other value, which pelab_kernels_check_env refuses. */
static int env_flush(void) {
    const char *mode = getenv("PELAB_SUBNORMALS");
    if (!mode || !mode[0] || strcasecmp(mode, "flush") == 0) return 1;
    return strcasecmp(mode, "keep") == 0 ? 0 : -1;
}

/* What pelab_threads_set gives its threads: flush, unless PELAB_SUBNORMALS=keep. */
static int flush_wanted(void) { return env_flush() != 0; }

const char *pelab_subnormal_mode(void) {
#ifdef MXCSR_FTZ
    return flush_wanted() ? "flushed" : "kept";
#else
    return "as the CPU's default";
#endif
}

int pelab_kernels_check_env(void) {
    if (env_flush() < 0)
        return pelab_fail(PELAB_ERR_USAGE, "PELAB_SUBNORMALS=%s: expected flush or keep (in any case), or "
                          "unset to flush", getenv("PELAB_SUBNORMALS"));
    return pelab_simd_check_env();
}

const char *pelab_simd_used(void) { return pelab_simd_name(pelab_simd_level()); }

int pelab_subnormals_flushed(void) {
#ifdef MXCSR_FTZ
    return (_mm_getcsr() & (MXCSR_FTZ | MXCSR_DAZ)) == (MXCSR_FTZ | MXCSR_DAZ);
#else
    return 0;
#endif
}

int pelab_threads_available(void) {
#ifdef CPU_COUNT
    /* the cores taskset, a container's cpuset or mpirun's binding leave this process (a set of
     * more than CPU_SETSIZE = 1024 cores fails: then every online core) */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

void pelab_threads_set(int n) {
    if (n <= 0) n = pelab_threads_available();
    const int flush = flush_wanted();
#ifdef _OPENMP
    omp_set_num_threads(n);
    /* every thread of the pool, the caller's among them: the mode is per thread, and a thread
     * OpenMP creates later copies its creator's */
#pragma omp parallel
    set_subnormal_mode(flush);
#else
    set_subnormal_mode(flush);
#endif
#if defined(PELAB_BLAS) && defined(_OPENMP)
    openblas_set_num_threads(1); /* BLAS runs inside OpenMP's threads (matmul.c) */
#elif defined(PELAB_BLAS)
    openblas_set_num_threads(n);
#endif
}

int pelab_threads_get(void) {
#if defined(_OPENMP)
    return omp_get_max_threads();
#elif defined(PELAB_BLAS)
    return openblas_get_num_threads();
#else
    return 1;
#endif
}

/* The build's target: -march=native (or another ARCH) defines the macros of every extension it
 * enables; the portable default only the baseline's. */
#if defined(__AVX512F__)
#define BUILD_TARGET "built for AVX-512 CPUs"
#elif defined(__AVX2__)
#define BUILD_TARGET "built for AVX2 CPUs"
#elif defined(__x86_64__)
#define BUILD_TARGET "portable x86-64 build"
#else
#define BUILD_TARGET "portable build"
#endif

static const char *threads_info(void) {
#if defined(PELAB_BLAS) && defined(PELAB_DNNL) && !defined(PELAB_DOUBLE) && defined(_OPENMP)
    return "oneDNN sgemm, OpenBLAS, OpenMP"; /* kernels/cpu/matmul.c */
#elif defined(PELAB_BLAS) && defined(_OPENMP)
    return "OpenBLAS, OpenMP";
#elif defined(PELAB_BLAS)
    return "OpenBLAS, single-threaded loops (no OpenMP)";
#elif defined(_OPENMP)
    return "portable matmul (no OpenBLAS), OpenMP";
#else
    return "portable matmul (no OpenBLAS), single-threaded (no OpenMP)";
#endif
}

const char *pelab_build_info(void) {
    static char info[200];
    snprintf(info, sizeof info, "%s, %s, %s kernels, subnormals %s", threads_info(), BUILD_TARGET,
             pelab_simd_used(), pelab_subnormal_mode());
    return info;
}
