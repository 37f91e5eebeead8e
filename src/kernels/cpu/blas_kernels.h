/* Which OpenBLAS kernels run, and mending OpenBLAS's choice on CPUs its table of models does not
 * know.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels once, in its constructor, from a table of
 * CPU models. A model newer than the library (an Intel Xeon of family 6, model 207, for OpenBLAS
 * 0.3.21) gets the generic "Prescott" SSE3 kernels: sgemm ~2.5x slower than the AVX-512 ones,
 * silently. pelab does not depend on that table: it reads the instruction sets this process may
 * run (cpuid, with the operating system's support), takes the best OpenBLAS core those allow,
 * and compares it with the core OpenBLAS chose. The comparison is a pure function of (CPU flags,
 * reported core), the flags written as /proc/cpuinfo writes them, so the tests run it on recorded
 * pairs on any machine. */
#ifndef PELAB_KERNELS_BLAS_KERNELS_H
#define PELAB_KERNELS_BLAS_KERNELS_H

/* Instruction-set levels, each the least an OpenBLAS x86-64 core of that level needs. */
enum pelab_isa {
    PELAB_ISA_SSE3,        /* Prescott, Core2, Nehalem, ... */
    PELAB_ISA_AVX,         /* Sandybridge, Bulldozer, ... */
    PELAB_ISA_AVX2,        /* Haswell, Zen (AVX2 and FMA) */
    PELAB_ISA_AVX512,      /* SkylakeX (F, CD, BW, DQ, VL) */
    PELAB_ISA_AVX512_BF16, /* Cooperlake (and AVX512_BF16) */
};

/* The level a /proc/cpuinfo `flags` line allows (space-separated names, e.g. "fma avx2 avx512f"). */
enum pelab_isa pelab_isa_from_flags(const char *flags);
/* "SSE3", "AVX", "AVX2", "AVX-512", "AVX-512 with BF16" */
const char *pelab_isa_name(enum pelab_isa isa);
/* The level an OpenBLAS core's kernels use, or -1 for a name this table does not know (a newer
 * OpenBLAS's core: then pelab leaves the choice alone). */
int pelab_blas_core_isa(const char *core);
/* The OpenBLAS core to run instead of `reported` on a CPU of level `cpu`, or NULL when `reported`
 * is as good as the CPU allows (or unknown). Only cores that OpenBLAS 0.3.x builds with
 * DYNAMIC_ARCH: Cooperlake, SkylakeX, Haswell, Sandybridge. */
const char *pelab_blas_better_core(enum pelab_isa cpu, const char *reported);

#endif
