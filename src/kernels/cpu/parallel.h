/* Helpers for OpenMP regions that must give the same bits for a given thread count: each thread
 * owns a fixed contiguous slice, so no floating-point sum depends on scheduling. */
#ifndef PELAB_KERNELS_PARALLEL_H
#define PELAB_KERNELS_PARALLEL_H

#ifdef _OPENMP
#include <omp.h>
#endif

/* This thread's number in the team running it (0 outside a parallel region). */
static inline int pelab_thread_index(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Inside a parallel region: this thread's slice [*lo, *hi) of [0, n). */
static inline void pelab_thread_slice(long n, long *lo, long *hi) {
#ifdef _OPENMP
    long nt = omp_get_num_threads(), id = omp_get_thread_num();
#else
    long nt = 1, id = 0;
#endif
    *lo = n * id / nt;
    *hi = n * (id + 1) / nt;
}

#endif
