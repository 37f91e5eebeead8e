/* pelab/threads.h — one thread count for OpenMP loops and BLAS alike. */
#ifndef PELAB_THREADS_H
#define PELAB_THREADS_H

/* n <= 0: all cores. One pool of n threads runs everything: OpenMP's, with OpenBLAS called
 * single-threaded inside them (without OpenMP, OpenBLAS's own n threads run the products). */
void pelab_threads_set(int n);
int pelab_threads_get(void);
/* How the build does matrix products and threads, what it was compiled for and which vector
 * kernels run on this CPU, e.g. "OpenBLAS, OpenMP, portable x86-64 build, avx512 kernels". */
const char *pelab_build_info(void);

#endif
