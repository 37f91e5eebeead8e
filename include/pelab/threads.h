/* pelab/threads.h — one thread count for OpenMP loops and BLAS alike. */
#ifndef PELAB_THREADS_H
#define PELAB_THREADS_H

/* n <= 0: all cores. Sets OpenMP's and OpenBLAS's thread counts together, so the two pools do
 * not oversubscribe the machine. */
void pelab_threads_set(int n);
int pelab_threads_get(void);
/* How the build does matrix products and threads, e.g. "OpenBLAS, OpenMP". */
const char *pelab_build_info(void);

#endif
