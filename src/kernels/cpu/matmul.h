/* Matrix products on row-major pelab_real arrays: float32 products of two rows or more by oneDNN's
 * sgemm when the build has oneDNN, the rest by OpenBLAS when the build has it, otherwise a portable
 * blocked loop; in the bf16 precision (pelab/precision.h), oneDNN's bf16 matmul (gemm_bf16.c). */
#ifndef PELAB_KERNELS_MATMUL_H
#define PELAB_KERNELS_MATMUL_H

#include <stdint.h>
#include "pelab/ctx.h"
#include "pelab/real.h"

/* C (M,N) = alpha · op(A) · op(B) + beta · C, row-major; op(X) = X or X^T per trans flag.
 * op(A) is (M,K), op(B) is (K,N). lda/ldb/ldc are the row strides of A, B, C as stored.
 * Every matrix product of the library goes through here, in its context's precision
 * (ctx->precision): fp32, or bf16 operands with float32 accumulation. A product that fails (out
 * of memory, a oneDNN error) fills C with NaN, so that nothing downstream reads stale
 * numbers, and is kept as the context's failure (the first one: ctx->gemm), which the model's
 * passes collect with pelab_gemm_take_failure and report as such (not as a non-finite loss). */
void pelab_gemm(struct pelab_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                const pelab_real *A, int lda, const pelab_real *B, int ldb, pelab_real beta,
                pelab_real *C, int ldc);
/* PELAB_OK, or the status of ctx's first product that failed since the last call, with its
 * message as the last error; clears it. */
int pelab_gemm_take_failure(struct pelab_ctx *ctx);
/* The instructions oneDNN's kernels run here ("AVX-512 with AMX"; gemm_bf16.c, with oneDNN). */
const char *pelab_dnnl_isa(void);
/* C (M,N) = beta·C, row stride ldc: a product with K = 0, as BLAS defines it (beta 0 reads no C),
 * for the products whose library refuses K = 0 (oneDNN's). */
void pelab_gemm_scale_only(pelab_real *C, int M, int N, int ldc, pelab_real beta);

/* The bf16 product alone: C = alpha · bf16(op(A)) · bf16(op(B)) + beta · C, float32 accumulation.
 * PELAB_OK, or PELAB_ERR_RUNTIME (no oneDNN in the build, out of memory, a oneDNN failure) with C
 * untouched. */
int pelab_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                    const pelab_real *A, int lda, const pelab_real *B, int ldb, pelab_real beta,
                    pelab_real *C, int ldc);
/* A linear layer's two backward products in bf16, dout rounded once for both:
 *   dinp (N,C) = dout (N,OC) · w (OC,C) + beta · dinp;   dw (OC,C) += dout^T · inp (N,C).
 * PELAB_OK or PELAB_ERR_RUNTIME as pelab_gemm_bf16 (a failure may leave dinp written). */
int pelab_gemm_bf16_backward(pelab_real *dinp, pelab_real *dw, const pelab_real *dout, const pelab_real *inp,
                             const pelab_real *w, int N, int C, int OC, pelab_real beta);

/* out (N,OC) = inp (N,C) · w^T, with w (OC,C) as a PyTorch Linear weight; in ctx (pelab_gemm). */
void pelab_matmul_forward(struct pelab_ctx *ctx, pelab_real *out, const pelab_real *inp, const pelab_real *w,
                          int N, int C, int OC);
/* The same product for a few rows (generation's steps), reading w where it is, without the packed
 * copy a gemm makes (matmul_rows.c). Each output's bits do not depend on N, the other rows or the
 * threads. */
void pelab_matmul_rows_forward(pelab_real *out, const pelab_real *inp, const pelab_real *w, int N,
                               int C, int OC);
/* out (N,OC) = inp (N,C) · w^T with w (OC,C) in bf16 (matmul_bf16w.c): generation's products,
 * reading half the bytes; float32 activations and sums, on any CPU. w is held in panels of
 * PELAB_BF16W_PANEL outputs by pairs of k (pelab_bf16w_pack: pelab_bf16w_panel_size(C, OC)
 * elements, the outputs past OC and an odd C's last k + 1 zero). Each output's sum runs over k in order: its bits do not depend on N,
 * the other rows or the threads. */
enum { PELAB_BF16W_PANEL = 16 };
long pelab_bf16w_panel_size(int C, int OC);
void pelab_bf16w_pack(uint16_t *panels, const pelab_real *w, int C, int OC);
void pelab_matmul_bf16w_forward(pelab_real *out, const pelab_real *inp, const uint16_t *w, int N, int C, int OC);
/* dinp (N,C) += dout (N,OC) · w;  dw (OC,C) += dout^T · inp; in ctx (pelab_gemm). */
void pelab_matmul_backward(struct pelab_ctx *ctx, pelab_real *dinp, pelab_real *dw, const pelab_real *dout,
                           const pelab_real *inp, const pelab_real *w, int N, int C, int OC);
/* The same with dinp assigned (=), not added to: no zeroing pass, no read of the old dinp. */
void pelab_matmul_backward_assign(struct pelab_ctx *ctx, pelab_real *dinp, pelab_real *dw,
                                  const pelab_real *dout, const pelab_real *inp, const pelab_real *w,
                                  int N, int C, int OC);

#endif
