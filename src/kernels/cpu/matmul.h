/* Matrix products on row-major pelab_real arrays: OpenBLAS when the build has it, otherwise a
 * portable blocked loop; in the bf16 precision (pelab/precision.h), oneDNN's bf16 matmul
 * (gemm_bf16.c). */
#ifndef PELAB_KERNELS_MATMUL_H
#define PELAB_KERNELS_MATMUL_H

#include "pelab/real.h"

/* C (M,N) = alpha · op(A) · op(B) + beta · C, row-major; op(X) = X or X^T per trans flag.
 * op(A) is (M,K), op(B) is (K,N). lda/ldb/ldc are the row strides of A, B, C as stored.
 * Every matrix product of the library goes through here, in the calling thread's precision
 * (pelab_precision_get): fp32 as before, or bf16 operands with float32 accumulation. A bf16
 * product that fails (out of memory, a oneDNN error: it cannot report a status) fills C with NaN,
 * which the loss and every non-finite check downstream then see, and sets the thread's last error. */
void pelab_gemm(int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                const pelab_real *A, int lda, const pelab_real *B, int ldb, pelab_real beta,
                pelab_real *C, int ldc);

/* The bf16 product alone: C = alpha · bf16(op(A)) · bf16(op(B)) + beta · C, float32 accumulation.
 * PELAB_OK, or PELAB_ERR_RUNTIME (no oneDNN in the build, out of memory, a oneDNN failure) with C
 * untouched. */
int pelab_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                    const pelab_real *A, int lda, const pelab_real *B, int ldb, pelab_real beta,
                    pelab_real *C, int ldc);

/* out (N,OC) = inp (N,C) · w^T, with w (OC,C) as a PyTorch Linear weight. */
void pelab_matmul_forward(pelab_real *out, const pelab_real *inp, const pelab_real *w, int N,
                          int C, int OC);
/* dinp (N,C) += dout (N,OC) · w;  dw (OC,C) += dout^T · inp. */
void pelab_matmul_backward(pelab_real *dinp, pelab_real *dw, const pelab_real *dout,
                           const pelab_real *inp, const pelab_real *w, int N, int C, int OC);
/* The same with dinp assigned (=), not added to: no zeroing pass, no read of the old dinp. */
void pelab_matmul_backward_assign(pelab_real *dinp, pelab_real *dw, const pelab_real *dout,
                                  const pelab_real *inp, const pelab_real *w, int N, int C, int OC);

#endif
