/* Thread count shared by OpenMP and OpenBLAS: with OpenMP, OpenBLAS is single-threaded and runs
 * inside OpenMP's threads (matmul.c), so one pool of threads does all the work. */
#include <stdio.h>
#include <unistd.h>
#include "kernels/cpu/simd.h"
#include "pelab/threads.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef PELAB_BLAS
void openblas_set_num_threads(int);
#endif

static int n_threads = 1;

void pelab_threads_set(int n) {
    if (n <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n = cores > 0 ? (int)cores : 1;
    }
    n_threads = n;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
#if defined(PELAB_BLAS) && defined(_OPENMP)
    openblas_set_num_threads(1); /* BLAS runs inside OpenMP's threads (matmul.c) */
#elif defined(PELAB_BLAS)
    openblas_set_num_threads(n);
#endif
}

int pelab_threads_get(void) { return n_threads; }

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
#if defined(PELAB_BLAS) && defined(_OPENMP)
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
    static char info[160];
    snprintf(info, sizeof info, "%s, %s, %s kernels", threads_info(), BUILD_TARGET,
             pelab_simd_name(pelab_simd_level()));
    return info;
}
