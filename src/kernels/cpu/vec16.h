/* Vectors of 16 reals (GCC's and clang's vector extension) for the decoding kernels, whose loops
 * the compiler does not vectorise well by itself: one register at AVX-512, two at AVX2, four at
 * SSE (where GCC lowers them through memory). Used inside bodies compiled per SIMD level
 * (kernels/cpu/simd.h), so each level gets its own instructions.
 *
 *   pelab_load16(&v, x)      v = x[0..16)
 *   pelab_widen16(&v, h)     v = 16 bf16 widened to reals: a bf16 is a float32's top half
 *   pelab_widen16_pairs(&lo, &hi, h)  h = 16 pairs of bf16 (32): lo = the first of each pair
 *                            widened (the 32-bit lane shifted up), hi = the second (masked)
 *   pelab_lanes_sum(&v)      Σ of the 16 lanes as a tree (8 + 8, 4 + 4, 2 + 2, 1 + 1): four steps,
 *                            where an in-order sum is a chain of 15 additions (GCC's lowering of an
 *                            `omp simd` reduction, which made a generated token's dot products wait
 *                            on it)
 * Vectors pass by pointer: a vector argument or result wider than the build's own target changes
 * the calling convention (GCC warns), though these are always inlined. */
#ifndef PELAB_KERNELS_VEC16_H
#define PELAB_KERNELS_VEC16_H

#include <stdint.h>
#include <string.h>
#include "pelab/real.h"

typedef pelab_real pelab_reals16 __attribute__((vector_size(16 * sizeof(pelab_real))));
typedef pelab_real pelab_reals8 __attribute__((vector_size(8 * sizeof(pelab_real))));
typedef pelab_real pelab_reals4 __attribute__((vector_size(4 * sizeof(pelab_real))));
typedef uint16_t pelab_halves16 __attribute__((vector_size(16 * sizeof(uint16_t))));
typedef uint32_t pelab_words16 __attribute__((vector_size(16 * sizeof(uint32_t))));
typedef float pelab_floats16 __attribute__((vector_size(16 * sizeof(float))));

static inline __attribute__((always_inline)) void pelab_load16(pelab_reals16 *v, const pelab_real *x) {
    memcpy(v, x, sizeof *v);
}

static inline __attribute__((always_inline)) void pelab_widen16(pelab_reals16 *v, const uint16_t *h) {
    pelab_halves16 b;
    memcpy(&b, h, sizeof b);
    const pelab_words16 u = __builtin_convertvector(b, pelab_words16) << 16;
    pelab_floats16 f;
    memcpy(&f, &u, sizeof f);
    *v = __builtin_convertvector(f, pelab_reals16);
}

static inline __attribute__((always_inline)) void pelab_widen16_pairs(pelab_reals16 *lo, pelab_reals16 *hi,
                                                                      const uint16_t *h) {
    pelab_words16 u;
    memcpy(&u, h, sizeof u);
    const pelab_words16 l = u << 16, m = u & 0xFFFF0000u;
    pelab_floats16 f;
    memcpy(&f, &l, sizeof f);
    *lo = __builtin_convertvector(f, pelab_reals16);
    memcpy(&f, &m, sizeof f);
    *hi = __builtin_convertvector(f, pelab_reals16);
}

static inline __attribute__((always_inline)) pelab_real pelab_lanes_sum(const pelab_reals16 *v) {
    pelab_reals8 h[2];
    memcpy(h, v, sizeof *v);
    const pelab_reals8 s8 = h[0] + h[1];
    pelab_reals4 q[2];
    memcpy(q, &s8, sizeof s8);
    const pelab_reals4 s4 = q[0] + q[1];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

#endif
