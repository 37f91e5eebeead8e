/* bf16: the top 16 bits of a float32's pattern (sign, 8 exponent bits, 7 fraction bits), so 8
 * significant bits and a relative rounding error of at most 2^-9 (unit roundoff u = 2^-8 in the
 * bounds the tests state). */
#ifndef PELAB_KERNELS_BF16_H
#define PELAB_KERNELS_BF16_H

#include <stdint.h>
#include <string.h>

/* bf16(x), ties to even; a NaN stays a (quiet) NaN instead of rounding into infinity. Branch-free
 * so that packing loops vectorise. */
static inline uint16_t pelab_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t r = u + 0x7fffu + ((u >> 16) & 1u);
    r = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : r;
    return (uint16_t)(r >> 16);
}

/* The float32 value of a bf16. */
static inline float pelab_from_bf16(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
