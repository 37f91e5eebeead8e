/* The tiled attention kernel's products in bf16 (--precision bf16): bf16 operands, float32
 * accumulation, on a tile at a time.
 *
 *   C (m, n) += alpha · bf16(op(A)) (m, kd) · bf16(op(B)) (kd, n)
 *   op(A)(i, x) = ta ? A[x·lda + i] : A[i·lda + x];   op(B)(x, j) = tb ? B[j·ldb + x] : B[x·ldb + j]
 *
 * The transposes are read while packing, so the kernel needs no transposed copies of its tiles.
 * With AMX (Sapphire Rapids and later Xeons) the products are TDPBF16PS on 16×16 tiles of C; with
 * AVX512-BF16 (Zen 4) VDPBF16PS: two bf16 products summed into each float32 lane per
 * instruction. Elsewhere, and in the double test build, the same
 * function by plain loops: the operands rounded to bf16, multiplied and summed in pelab_real. */
#ifndef PELAB_KERNELS_TILE_BF16_H
#define PELAB_KERNELS_TILE_BF16_H

#include <stddef.h>
#include <stdint.h>
#include "pelab/real.h"

/* uint16_t elements of packing space a product with m, n ≤ max_mn and kd ≤ max_k needs. */
size_t pelab_tile_bf16_pack_size(int max_mn, int max_k);

/* The product above; pack holds pelab_tile_bf16_pack_size(max(m, n), kd) elements. */
void pelab_tile_gemm_bf16(pelab_real *C, long ldc, const pelab_real *A, long lda, int ta,
                          const pelab_real *B, long ldb, int tb, int m, int n, int kd, pelab_real alpha,
                          uint16_t *pack);

/* The instructions the products run on: AMX's tile products where the CPU has them and Linux
 * grants the tile state, else AVX512-BF16's VDPBF16PS, else plain loops (and always in the double
 * build). */
enum pelab_tile_isa { PELAB_TILE_PLAIN, PELAB_TILE_AVX512_BF16, PELAB_TILE_AMX };
enum pelab_tile_isa pelab_tile_bf16_isa(void);
/* Caps the choice at `cap` (tests run each level this CPU has); returns the previous cap. */
enum pelab_tile_isa pelab_tile_bf16_cap(enum pelab_tile_isa cap);
const char *pelab_tile_bf16_isa_name(enum pelab_tile_isa isa);

#endif
