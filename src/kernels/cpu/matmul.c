/* GEMM: float32 products of two rows or more through oneDNN's sgemm when the build has oneDNN
 * (at the small shapes the experiments train, 64–256 wide, it ran 1.1–1.3× OpenBLAS's sgemm, which
 * packs both operands and zeroes C first), one-row products and the float64 build through CBLAS
 * (OpenBLAS), or a portable fallback (blocked, OpenMP over rows of C) without BLAS. */
#include "kernels/cpu/matmul.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "core/prof.h"
#include "pelab/threads.h"
#include "kernels/cpu/parallel.h"
#include "pelab/ctx.h"
#include "pelab/status.h"

#ifdef PELAB_BLAS
#include <cblas.h>
#if defined(PELAB_DNNL) && !defined(PELAB_DOUBLE)
#include <dnnl.h>
#define SGEMM_DNNL 1
#endif

/* C (1,N) = alpha · op(A) (1,K) · op(B) + beta · C as a matrix–vector product: a one-row product
 * reads B once, where a gemm would first copy it into its packed panels. */
static void blas_gemv(int trans_a, int trans_b, int N, int K, pelab_real alpha, const pelab_real *A,
                      int lda, const pelab_real *B, int ldb, pelab_real beta, pelab_real *C) {
    /* op(B)^T · a: B stored (N,K) when transposed (rows of B), (K,N) otherwise; a's elements
     * are lda apart when A is transposed (a column of A) */
    const int rows = trans_b ? N : K, cols = trans_b ? K : N, inc = trans_a ? lda : 1;
#ifdef PELAB_DOUBLE
    cblas_dgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans, rows, cols, alpha, B, ldb, A, inc, beta, C, 1);
#else
    cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans, rows, cols, alpha, B, ldb, A, inc, beta, C, 1);
#endif
}

/* One row (M = 1) by blas_gemv, whatever the caller's split: its bits do not depend on it. Two
 * rows or more in float32: oneDNN's sgemm (row-major, as pelab's arrays). With its AVX-512 kernels
 * a row's bits do not depend on how many rows its call holds from 16 rows on (gemm_fp32's slices
 * hold 16 or more), nor on how many columns from 2 on; below 16 rows it takes another kernel. Its
 * AVX2 kernels give a row other bits in calls of other sizes, so there the bits of a threaded
 * product depend on the thread count. 0, or oneDNN's status when it fails (out of memory). */
static int blas_gemm(int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                     const pelab_real *A, int lda, const pelab_real *B, int ldb, pelab_real beta,
                     pelab_real *C, int ldc) {
    if (M == 1) {
        blas_gemv(trans_a, trans_b, N, K, alpha, A, lda, B, ldb, beta, C);
        return 0;
    }
#ifdef PELAB_DOUBLE
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#elif defined(SGEMM_DNNL)
    if (K > 0)
        return (int)dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                               beta, C, ldc);
    pelab_gemm_scale_only(C, M, N, ldc, beta);
#else
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
    return 0;
}

/* With OpenMP, BLAS runs single-threaded inside OpenMP's threads (threads.c): each takes a slice of
 * C's rows, a multiple of 16, the last one also the rows past them, so that no slice holds fewer
 * than 16 (oneDNN gives the rows of a shorter call another kernel, and other bits). One pool of
 * threads then does all the work. Two pools (OpenBLAS's own threads beside OpenMP's) fight over
 * the cores: each spins waiting for work while the other computes, and on 2 cores that made 2
 * threads slower than 1. A product of a few rows is split by C's columns instead, a multiple of 64
 * (the last slice also the columns past them), so each thread reads its own part of B: there the
 * cost is B's bytes, and one core alone cannot read them at the memory's full rate. (Generation's
 * steps take pelab_matmul_rows_forward, which reads B in place.) */
#ifdef _OPENMP
/* The product in one slice a thread of C's rows (by_rows) or of its columns: whole blocks of
 * `block`, the last slice also the rest. The status of a failed slice (any one's). */
static int gemm_sliced(int by_rows, int block, int trans_a, int trans_b, int M, int N, int K,
                       pelab_real alpha, const pelab_real *A, int lda, const pelab_real *B, int ldb,
                       pelab_real beta, pelab_real *C, int ldc) {
    const int n = by_rows ? M : N;
    int status = 0;
#pragma omp parallel
    {
        long lo, hi;
        pelab_thread_slice(n / block, &lo, &hi);
        lo *= block, hi = hi == n / block ? n : hi * block;
        int st = 0;
        if (hi > lo && by_rows) /* rows lo.. of op(A): rows of A, or its columns when transposed */
            st = blas_gemm(trans_a, trans_b, (int)(hi - lo), N, K, alpha, trans_a ? A + lo : A + lo * lda, lda,
                           B, ldb, beta, C + lo * ldc, ldc);
        else if (hi > lo) /* columns lo.. of op(B): columns of B, or its rows when transposed */
            st = blas_gemm(trans_a, trans_b, M, (int)(hi - lo), K, alpha, A, lda,
                           trans_b ? B + lo * ldb : B + lo, ldb, beta, C + lo, ldc);
        if (st) {
#pragma omp atomic write
            status = st;
        }
    }
    return status;
}
#endif

static int gemm_fp32(int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                     const pelab_real *A, int lda, const pelab_real *B, int ldb, pelab_real beta,
                     pelab_real *C, int ldc) {
    enum { ROWS = 16, COLS = 64 };
#ifdef _OPENMP
    const int threaded = omp_get_max_threads() > 1 && !omp_in_parallel();
    if (threaded && M >= 2 * ROWS)
        return gemm_sliced(1, ROWS, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (threaded && N >= 2 * COLS)
        return gemm_sliced(0, COLS, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
    return blas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#else

/* C[i][j] = beta·C[i][j] + alpha · Σ_k a(i,k) b(k,j). The inner loop runs over j so that, when B
 * is not transposed, it streams a row of B and vectorises; a transposed B is first copied into
 * a row-major panel for the same reason. */
static int gemm_fp32(int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                     const pelab_real *A, int lda, const pelab_real *B, int ldb, pelab_real beta,
                     pelab_real *C, int ldc) {
    enum { KB = 128 };
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        pelab_real *c = C + (long)i * ldc;
        for (int j = 0; j < N; j++) c[j] = beta == 0 ? 0 : beta * c[j];
        for (int k0 = 0; k0 < K; k0 += KB) {
            int k1 = k0 + KB < K ? k0 + KB : K;
            for (int k = k0; k < k1; k++) {
                pelab_real a = alpha * (trans_a ? A[(long)k * lda + i] : A[(long)i * lda + k]);
                if (trans_b) {
                    for (int j = 0; j < N; j++) c[j] += a * B[(long)j * ldb + k];
                } else {
                    const pelab_real *b = B + (long)k * ldb;
                    for (int j = 0; j < N; j++) c[j] += a * b[j];
                }
            }
        }
    }
    return 0;
}

#endif

void pelab_gemm_scale_only(pelab_real *C, int M, int N, int ldc, pelab_real beta) {
    for (long i = 0; i < M; i++)
        for (long j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
}

const char *pelab_sgemm_kernels(void) {
#ifdef SGEMM_DNNL
    static char text[192];
    const dnnl_version_t *v = dnnl_version();
    snprintf(text, sizeof text, "oneDNN %d.%d.%d sgemm on %s (one-row products: OpenBLAS's sgemv)",
             v->major, v->minor, v->patch, pelab_dnnl_isa());
    return text;
#else
    return pelab_blas_kernels();
#endif
}

/* PELAB_TEST_GEMM_FAIL=N (tests only): the N-th product of the process fails as a bf16 one that
 * runs out of memory would, in any precision. The count is the process's, as the variable is. */
static long injected_failure(void) {
    static long at = -1, count;
    if (at < 0) {
        const char *v = getenv("PELAB_TEST_GEMM_FAIL");
        at = v ? atol(v) : 0;
    }
    return at > 0 && ++count == at;
}

int pelab_gemm_take_failure(struct pelab_ctx *ctx) {
    struct pelab_gemm_failure *f = &ctx->gemm;
    if (!f->status) return PELAB_OK;
    const int rc = f->status;
    f->status = PELAB_OK;
    return pelab_fail(rc, "%s", f->message);
}

/* A product that failed with rc: kept as ctx's failure (the first one), C filled with NaN. */
static void failed(struct pelab_ctx *ctx, int rc, pelab_real *C, int M, int N, int ldc) {
    struct pelab_gemm_failure *f = &ctx->gemm;
    if (!f->status) {
        f->status = rc;
        snprintf(f->message, sizeof f->message, "%s", pelab_last_error());
    }
    for (long i = 0; i < M; i++)
        for (long j = 0; j < N; j++) C[i * ldc + j] = (pelab_real)NAN;
}

void pelab_gemm(struct pelab_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, pelab_real alpha,
                const pelab_real *A, int lda, const pelab_real *B, int ldb, pelab_real beta,
                pelab_real *C, int ldc) {
    PELAB_ASSERT(ctx != NULL); /* a model's (pelab_model_set_ctx), an encoding's (pe->ctx), a call's */
    int rc;
    if (injected_failure())
        rc = pelab_fail(PELAB_ERR_RUNTIME, "matrix product %dx%dx%d: out of memory (PELAB_TEST_GEMM_FAIL)", M, N, K);
    else if (ctx->precision == PELAB_PRECISION_FP32) {
        const int status = gemm_fp32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        if (status == 0) return;
        rc = pelab_fail(PELAB_ERR_RUNTIME, "matrix product %dx%dx%d: oneDNN's sgemm failed (status %d)",
                        M, N, K, status);
    } else
        rc = pelab_gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (rc != PELAB_OK) failed(ctx, rc, C, M, N, ldc);
}

void pelab_matmul_forward(struct pelab_ctx *ctx, pelab_real *out, const pelab_real *inp, const pelab_real *w,
                          int N, int C, int OC) {
    PELAB_PROF_START();
    pelab_gemm(ctx, 0, 1, N, OC, C, 1, inp, C, w, C, 0, out, OC);
    PELAB_PROF_STOP(PELAB_PROF_MATMUL_FWD, 2.0 * N * C * OC);
}

static void backward(struct pelab_ctx *ctx, pelab_real *dinp, pelab_real *dw, const pelab_real *dout,
                     const pelab_real *inp, const pelab_real *w, int N, int C, int OC, pelab_real beta) {
    PELAB_PROF_START();
    if (ctx->precision == PELAB_PRECISION_BF16) { /* dout rounded to bf16 once for both products */
        const int injected = injected_failure() | injected_failure(); /* counted as the two products */
        const int rc = injected ? pelab_fail(PELAB_ERR_RUNTIME, "matrix product %dx%dx%d: out of memory "
                                             "(PELAB_TEST_GEMM_FAIL)", N, C, OC)
                                : pelab_gemm_bf16_backward(dinp, dw, dout, inp, w, N, C, OC, beta);
        if (rc != PELAB_OK) failed(ctx, rc, dinp, N, C, C), failed(ctx, rc, dw, OC, C, C);
    } else {
        pelab_gemm(ctx, 0, 0, N, C, OC, 1, dout, OC, w, C, beta, dinp, C);
        pelab_gemm(ctx, 1, 0, OC, C, N, 1, dout, OC, inp, C, 1, dw, C);
    }
    PELAB_PROF_STOP(PELAB_PROF_MATMUL_BWD, 4.0 * N * C * OC);
}

void pelab_matmul_backward(struct pelab_ctx *ctx, pelab_real *dinp, pelab_real *dw, const pelab_real *dout,
                           const pelab_real *inp, const pelab_real *w, int N, int C, int OC) {
    backward(ctx, dinp, dw, dout, inp, w, N, C, OC, 1);
}

void pelab_matmul_backward_assign(struct pelab_ctx *ctx, pelab_real *dinp, pelab_real *dw,
                                  const pelab_real *dout, const pelab_real *inp, const pelab_real *w,
                                  int N, int C, int OC) {
    backward(ctx, dinp, dw, dout, inp, w, N, C, OC, 0);
}
