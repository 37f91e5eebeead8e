/* pelab/threads.h — one thread count for OpenMP loops and BLAS alike. */
#ifndef PELAB_THREADS_H
#define PELAB_THREADS_H

/* The cores this process may run on: its CPU affinity (taskset, a container's cpuset, an MPI
 * launcher's binding), or every online core where that cannot be read. At least 1. */
int pelab_threads_available(void);
/* n <= 0: pelab_threads_available(). n > 0 is taken as given, above the cores too (the
 * determinism tests run 3 threads on any machine); a --threads option comes through
 * pelab_dist_threads, which keeps it to the cores. One pool of n threads runs everything:
 * OpenMP's, with OpenBLAS called single-threaded inside them (without OpenMP, OpenBLAS's own n
 * threads run the products). On x86-64 it also sets the pool's threads, the caller's among them, to flush subnormal floats
 * to zero (FTZ and DAZ: on Intel cores each operation on one costs a microcode assist), unless
 * the environment has PELAB_SUBNORMALS=keep (any case). Without OpenMP, OpenBLAS's threads keep
 * theirs.
 * The count is not a context's (pelab/ctx.h): OpenMP keeps it, for the calling thread (a thread
 * that sets none runs on OpenMP's default), and OpenBLAS its own, for the process; pelab keeps
 * no copy that could disagree with them. */
void pelab_threads_set(int n);
/* The calling thread's count, as OpenMP has it (OpenBLAS's without OpenMP; 1 without either). */
int pelab_threads_get(void);
/* The --threads row of every option table that takes it (training's and the commands'), an
 * initialiser of struct pelab_optdef (pelab/options.h). */
#define PELAB_OPT_ROW_THREADS                                                                     \
    {"threads", PELAB_OPT_INT, "0", 0, 4096, NULL,                                                \
     "threads (0: all cores; under mpirun, a machine's cores divided among its ranks); at most "  \
     "the cores this process may use"}
/* 1 when the calling thread flushes subnormals to zero (both FTZ and DAZ set), else 0. */
int pelab_subnormals_flushed(void);
/* PELAB_SIMD and PELAB_SUBNORMALS hold values the kernels know (each unset, empty, or one of its
 * names in any case: portable, avx2, avx512; flush, keep); else PELAB_ERR_USAGE naming them.
 * Commands call it before any work, since the kernels read them later and cannot refuse. */
int pelab_kernels_check_env(void);
/* The vector kernels that run ("portable", "avx2", "avx512": the best this CPU runs, capped by
 * PELAB_SIMD) and what pelab_threads_set does with subnormals ("flushed", "kept", or "as the
 * CPU's default" off x86-64): what a run records of the kernels it ran on. */
const char *pelab_simd_used(void);
const char *pelab_subnormal_mode(void);
/* How the build does matrix products and threads, what it was compiled for and which vector
 * kernels run on this CPU, and whether pelab_threads_set flushes subnormals, e.g. "OpenBLAS,
 * OpenMP, portable x86-64 build, avx512 kernels, subnormals flushed". */
const char *pelab_build_info(void);
/* The commit the library was built from: 12 hex digits, with "+changes" when tracked files
 * differed from it; "unknown" when built outside a git checkout or without the Makefile. */
const char *pelab_commit(void);
/* OpenBLAS's kernels that run, e.g. "OpenBLAS 0.3.21 SkylakeX kernels"; with OPENBLAS_CORETYPE
 * set, also that, and the better core this CPU allows if there is one. */
const char *pelab_blas_kernels(void);
/* What runs the float32 products of two rows or more: "oneDNN 2.6.3 sgemm on AVX-512 (one-row
 * products: OpenBLAS's sgemv)" in a build with oneDNN, else pelab_blas_kernels(). */
const char *pelab_sgemm_kernels(void);
/* Call first in main(), before any other work: where OpenBLAS chose kernels below what the CPU's
 * instructions allow (a model its table does not know) and OPENBLAS_CORETYPE is unset, says so in
 * one line on stderr and runs the program again (execv of /proc/self/exe with the same argv) with
 * OPENBLAS_CORETYPE set to the best core the CPU allows; returns otherwise
 * (src/kernels/cpu/blas_kernels.h). */
void pelab_blas_mend(char **argv);

#endif
