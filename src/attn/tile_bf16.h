/* The tiled attention kernel's products in bf16 (--precision bf16): bf16 operands, float32
 * accumulation, on a tile at a time.
 *
 *   C (m, n) += alpha · bf16(op(A)) (m, kd) · bf16(op(B)) (kd, n)
 *   op(A)(i, x) = ta ? A[x·lda + i] : A[i·lda + x];   op(B)(x, j) = tb ? B[j·ldb + x] : B[x·ldb + j]
 *
 * The transposes are read while packing, so the kernel needs no transposed copies of its tiles.
 * With AVX512-BF16 (Zen 4, Sapphire Rapids) the products are VDPBF16PS: two bf16 products summed
 * into each float32 lane per instruction. Elsewhere, and in the double test build, the same
 * function by plain loops: the operands rounded to bf16, multiplied and summed in pelab_real. */
#ifndef PELAB_ATTN_TILE_BF16_H
#define PELAB_ATTN_TILE_BF16_H

#include <stddef.h>
#include <stdint.h>
#include "pelab/real.h"

/* uint16_t elements of packing space a product with m, n ≤ max_mn and kd ≤ max_k needs. */
size_t pelab_tile_bf16_pack_size(int max_mn, int max_k);

/* The product above; pack holds pelab_tile_bf16_pack_size(max(m, n), kd) elements. */
void pelab_tile_gemm_bf16(pelab_real *C, long ldc, const pelab_real *A, long lda, int ta,
                          const pelab_real *B, long ldb, int tb, int m, int n, int kd, pelab_real alpha,
                          uint16_t *pack);

/* Whether the products run on AVX512-BF16 instructions (1) or the plain loops (0). */
int pelab_tile_bf16_native(void);

#endif
