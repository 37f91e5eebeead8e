/* Run-time choice of the vector instructions the elementwise and row kernels use.
 *
 * A kernel is written once, as an always-inline body of plain loops (the vmath.h functions,
 * `omp simd` where a loop reduces), and PELAB_SIMD_KERNEL compiles that body three times: for
 * AVX-512 (F, VL, BW, DQ), for AVX2 with FMA, and for the build's own target (the portable
 * fallback: SSE2 on a generic x86-64 build, whatever the compiler targets elsewhere). The first
 * call picks the best level the CPU supports (cpuid, through __builtin_cpu_supports), so one
 * binary runs everywhere and still uses 512-bit vectors where they exist. On other
 * architectures, or compilers without target attributes, the three are one.
 *
 *   static PELAB_ALWAYS_INLINE void gelu_body(pelab_real *out, const pelab_real *x, long n) {...}
 *   PELAB_SIMD_KERNEL(gelu, (pelab_real *out, const pelab_real *x, long n), (out, x, n))
 *   ...  pelab_simd_fn(gelu)(out, x, n);    the current level's variant
 *
 * Kernels take ranges, and their OpenMP loops stay outside the bodies: an outlined parallel
 * region would not inherit a target attribute. PELAB_SIMD=portable|avx2|avx512 (in any case) in
 * the environment caps the level (to compare them); tests force each level in turn.
 */
#ifndef PELAB_KERNELS_SIMD_H
#define PELAB_KERNELS_SIMD_H

enum pelab_simd_level {
    PELAB_SIMD_PORTABLE,
    PELAB_SIMD_AVX2,
    PELAB_SIMD_AVX512,
    PELAB_SIMD_LEVELS
};

/* The level kernels run at (chosen at the first call). */
enum pelab_simd_level pelab_simd_level(void);
/* Whether this CPU (and build) can run `level`. */
int pelab_simd_supported(enum pelab_simd_level level);
/* Sets the level (tests; it must be supported); returns the previous one. */
enum pelab_simd_level pelab_simd_force(enum pelab_simd_level level);
/* "portable", "avx2", "avx512" */
const char *pelab_simd_name(enum pelab_simd_level level);
/* PELAB_SIMD unset, empty or a level's name (in any case); else PELAB_ERR_USAGE naming the names
 * (the level itself then ignores it: the commands check first, pelab_kernels_check_env). */
int pelab_simd_check_env(void);

#define PELAB_ALWAYS_INLINE inline __attribute__((always_inline))

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PELAB_SIMD_X86 1
#define PELAB_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define PELAB_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#else
#define PELAB_TARGET_AVX2
#define PELAB_TARGET_AVX512
#endif

/* name##_portable, name##_avx2, name##_avx512 from name##_body, and their table. */
#define PELAB_SIMD_KERNEL(name, params, args)                                                    \
    PELAB_TARGET_AVX512 static void name##_avx512 params { name##_body args; }                  \
    PELAB_TARGET_AVX2 static void name##_avx2 params { name##_body args; }                      \
    static void name##_portable params { name##_body args; }                                    \
    static void (*const name##_at[PELAB_SIMD_LEVELS]) params = {name##_portable, name##_avx2,   \
                                                                 name##_avx512};

/* The same, for a body whose first parameter is the level it is compiled for (a constant in each
 * variant, so that `if (level == PELAB_SIMD_AVX512)` in an inlined body costs nothing): where a
 * level's instructions are written out (vexp.h) or a fused multiply-add must not become a call
 * (fmaf at the portable level, which has no FMA instruction, is a library call per element).
 * Intrinsics go in functions of their own with the level's target attribute, called under the
 * level's test: the compiler refuses them inlined into the body's portable variant, even where
 * that code is never reached.
 *
 *   static PELAB_ALWAYS_INLINE void rows_body(enum pelab_simd_level level, float *x, long n) {...}
 *   PELAB_SIMD_KERNEL_LEVEL(rows, (float *x, long n), (x, n))
 */
#define PELAB_SIMD_UNPAREN(...) __VA_ARGS__
#define PELAB_SIMD_KERNEL_LEVEL(name, params, args)                                              \
    PELAB_TARGET_AVX512 static void name##_avx512 params {                                      \
        name##_body(PELAB_SIMD_AVX512, PELAB_SIMD_UNPAREN args);                                 \
    }                                                                                            \
    PELAB_TARGET_AVX2 static void name##_avx2 params {                                          \
        name##_body(PELAB_SIMD_AVX2, PELAB_SIMD_UNPAREN args);                                   \
    }                                                                                            \
    static void name##_portable params { name##_body(PELAB_SIMD_PORTABLE, PELAB_SIMD_UNPAREN args); } \
    static void (*const name##_at[PELAB_SIMD_LEVELS]) params = {name##_portable, name##_avx2,   \
                                                                 name##_avx512};

/* The variant of kernel `name` for the current level. Call it outside parallel regions (or read
 * the level once before one): the first call does the detection. */
#define pelab_simd_fn(name) (name##_at[pelab_simd_level()])

#endif
