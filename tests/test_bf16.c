/* The bf16 precision (pelab/precision.h): the bf16 matrix product against a float64 reference,
 * the float32 precision left as it was, and a model's bf16 logits against its float32 ones for
 * every registered encoding. Built twice: in the double test build and, as test_bf16_f32, in the
 * float build users run. Skipped (exit 77, with pelab's one-line reason) where bf16 cannot run:
 * a build without oneDNN, or a CPU without AVX512-BF16 unless PELAB_BF16_EMULATION=1 lets oneDNN
 * emulate it (tests/run.sh sets it on AVX-512 CPUs; tests/cli_precision.sh checks the refusal
 * through the command line).
 *
 * Tolerances, for C = alpha·op(A)·op(B) + beta·C0 with S = |alpha|·Σ_k |a_k||b_k| + |beta|·|c0|:
 *   bf16(x) has relative error at most u = 2^-8 (unit roundoff of 8 significant bits, ties to
 *   even), so one product of rounded operands is off by at most (2u + u²)|a||b| = (2^-7 + 2^-16)|a||b|;
 *   float32 accumulation of K terms adds at most K·2^-24·Σ|â b̂| <= K·2^-23·Σ|a||b| (Higham's γ_K,
 *   any order), and the scaling by alpha, the sum with beta·c0 and the store at most 3 roundings:
 *     against the exact product of the given operands   |err| <= (2^-7 + 2^-16 + (K+3)·2^-23)·S
 *     against the exact product of the rounded operands |err| <= (K+3)·2^-23·S
 *   The second bound is what pins the operands to bf16 (ties to even) and the sums to float32; a
 *   product with K = 1 is exact in float32, so there the result must equal â·b̂ to the bit.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/matmul.h"
#include "lib/check.h"
#include "pelab/model.h"
#include "pelab/posenc.h"
#include "pelab/precision.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/threads.h"

/* x (a float value) to 8 significant bits, ties to even: written independently of the library's
 * bit manipulation, with frexp and rint (round-to-nearest-even mode). */
static double bf16_ref(double x) {
    if (x == 0 || !isfinite(x)) return x;
    int e;
    double m = frexp(x, &e); /* |m| in [0.5, 1) */
    return ldexp(rint(ldexp(m, 8)), e - 8);
}

/* Uniform in [-1, 1), a float value; every 7th one tiny, every 11th one large, so that the
 * operands span exponents. */
static double rnd(struct pelab_rng *r, long i) {
    double x = 2 * pelab_rng_uniform(r) - 1;
    if (i % 7 == 3) x *= 1e-3;
    if (i % 11 == 5) x *= 300;
    return (float)x;
}

static void check_product(struct pelab_ctx *ctx, struct pelab_rng *rng, int ta, int tb, int M, int N, int K,
                          double alpha, double beta) {
    /* stored A: (M,K) or (K,M), B: (K,N) or (N,K), each with 3 columns of padding */
    const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    const int lda = ac + 3, ldb = bc + 3, ldc = N + 3;
    pelab_real *A = malloc(sizeof *A * ar * lda), *B = malloc(sizeof *B * br * ldb);
    pelab_real *C = malloc(sizeof *C * M * ldc), *C0 = malloc(sizeof *C0 * M * ldc);
    for (long i = 0; i < (long)ar * lda; i++) A[i] = (pelab_real)rnd(rng, i);
    for (long i = 0; i < (long)br * ldb; i++) B[i] = (pelab_real)rnd(rng, i + 1);
    for (long i = 0; i < (long)M * ldc; i++) C[i] = C0[i] = (pelab_real)rnd(rng, i + 2);
    pelab_gemm(ctx, ta, tb, M, N, K, (pelab_real)alpha, A, lda, B, ldb, (pelab_real)beta, C, ldc);
    double worst = 0, worst_r = 0; /* the largest error over its bound, both references */
    int padding_ok = 1, exact_ok = 1;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double exact = 0, rounded = 0, S = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(long)k * lda + i] : A[(long)i * lda + k];
                double b = tb ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
                exact += a * b;
                rounded += bf16_ref(a) * bf16_ref(b); /* exact in double: 16 significant bits */
                S += fabs(a * b);
            }
            const double c0 = C0[(long)i * ldc + j], c = C[(long)i * ldc + j];
            S = fabs(alpha) * S + fabs(beta * c0);
            exact = alpha * exact + (beta == 0 ? 0 : beta * c0);
            rounded = alpha * rounded + (beta == 0 ? 0 : beta * c0);
            const double tol = (ldexp(1, -7) + ldexp(1, -16) + (K + 3) * ldexp(1, -23)) * S;
            const double tol_r = (K + 3) * ldexp(1, -23) * S;
            if (tol > 0) worst = fmax(worst, fabs(c - exact) / tol);
            else if (c != exact) worst = INFINITY;
            if (tol_r > 0) worst_r = fmax(worst_r, fabs(c - rounded) / tol_r);
            else if (c != rounded) worst_r = INFINITY;
            if (K == 1 && alpha == 1 && beta == 0 && c != rounded) exact_ok = 0;
        }
        for (int j = N; j < ldc; j++) /* the padding of C is not written */
            if (memcmp(&C[(long)i * ldc + j], &C0[(long)i * ldc + j], sizeof *C) != 0) padding_ok = 0;
    }
    CHECK(worst <= 1, "ta %d tb %d %dx%dx%d alpha %g beta %g: error %.3g times the bf16 bound", ta, tb,
          M, N, K, alpha, beta, worst);
    CHECK(worst_r <= 1, "ta %d tb %d %dx%dx%d alpha %g beta %g: error %.3g times the float32 bound "
          "against the product of the bf16-rounded operands", ta, tb, M, N, K, alpha, beta, worst_r);
    CHECK(exact_ok, "ta %d tb %d %dx%dx1: not exactly the product of the bf16-rounded operands", ta, tb, M, N);
    CHECK(padding_ok, "ta %d tb %d %dx%dx%d: wrote past N into C's padding", ta, tb, M, N, K);
    free(A), free(B), free(C), free(C0);
}

static void check_products(void) {
    static const int shapes[][3] = {{1, 1, 1},   {3, 5, 7},     {17, 33, 65},  {64, 48, 130},
                                    {130, 7, 1}, {31, 129, 257}, {1, 70, 300}, {96, 1, 33}};
    static const double ab[][2] = {{1, 0}, {1, 1}, {0.5, -2}};
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 21);
    struct pelab_ctx bf16;
    pelab_ctx_init(&bf16);
    PELAB_ASSERT(pelab_precision_set(&bf16, PELAB_PRECISION_BF16) == PELAB_OK);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (size_t c = 0; c < sizeof ab / sizeof ab[0]; c++)
                check_product(&bf16, &rng, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], ab[c][0],
                              ab[c][1]);
    CHECK(pelab_gemm_take_failure(&bf16) == PELAB_OK, "a bf16 product failed: %s", pelab_last_error());
}

/* A linear layer's backward in one call (dout rounded once for both products) gives the bits of
 * its two products made one at a time, which check_products bounds. */
static void check_backward(int N, int C, int OC, double beta) {
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 23);
    pelab_real *dout = malloc(sizeof *dout * N * OC), *inp = malloc(sizeof *inp * N * C);
    pelab_real *w = malloc(sizeof *w * OC * C), *dinp[2], *dw[2];
    for (int i = 0; i < 2; i++) dinp[i] = malloc(sizeof *dinp[i] * N * C), dw[i] = malloc(sizeof *dw[i] * OC * C);
    for (long i = 0; i < (long)N * OC; i++) dout[i] = (pelab_real)(float)(2 * pelab_rng_uniform(&rng) - 1);
    for (long i = 0; i < (long)N * C; i++)
        inp[i] = (pelab_real)(float)(2 * pelab_rng_uniform(&rng) - 1), dinp[0][i] = dinp[1][i] = (pelab_real)0.25;
    for (long i = 0; i < (long)OC * C; i++)
        w[i] = (pelab_real)(float)(2 * pelab_rng_uniform(&rng) - 1), dw[0][i] = dw[1][i] = (pelab_real)-0.5;
    int rc = pelab_gemm_bf16(0, 0, N, C, OC, 1, dout, OC, w, C, (pelab_real)beta, dinp[0], C);
    if (!rc) rc = pelab_gemm_bf16(1, 0, OC, C, N, 1, dout, OC, inp, C, 1, dw[0], C);
    if (!rc) rc = pelab_gemm_bf16_backward(dinp[1], dw[1], dout, inp, w, N, C, OC, (pelab_real)beta);
    CHECK(rc == PELAB_OK, "backward %dx%dx%d: %s", N, C, OC, pelab_last_error());
    CHECK(memcmp(dinp[0], dinp[1], sizeof *dinp[0] * N * C) == 0 && memcmp(dw[0], dw[1], sizeof *dw[0] * OC * C) == 0,
          "backward %dx%dx%d beta %g: other bits than its two products one at a time", N, C, OC, beta);
    free(dout), free(inp), free(w);
    for (int i = 0; i < 2; i++) free(dinp[i]), free(dw[i]);
}

/* A thread of its own doing bf16 products in a context of its own: its own oneDNN stream,
 * primitives and buffers, freed when it ends (the sanitizer build's leak check sees that). */
struct thread_product {
    int threads;
    const pelab_real *A, *B;
    pelab_real *C;
    int M, N, K, rc;
};
static void *bf16_in_new_thread(void *arg) {
    struct thread_product *t = arg;
    pelab_threads_set(t->threads); /* OpenMP's thread count is per thread: the same split, the same bits */
    struct pelab_ctx ctx;
    pelab_ctx_init(&ctx);
    t->rc = pelab_precision_set(&ctx, PELAB_PRECISION_BF16);
    if (!t->rc) pelab_gemm(&ctx, 0, 1, t->M, t->N, t->K, 1, t->A, t->K, t->B, t->K, 0, t->C, t->N);
    if (!t->rc) t->rc = pelab_gemm_take_failure(&ctx);
    return NULL;
}

/* fp32 is a context's default and stays what it was: the same bits before and after bf16
 * products in another context, and a context on another thread runs in its own precision. */
static void check_fp32_unchanged(void) {
    enum { M = 70, N = 50, K = 90 };
    static pelab_real A[M * K], B[N * K], C1[M * N], C2[M * N], C3[M * N], C4[M * N];
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 5);
    for (int i = 0; i < M * K; i++) A[i] = (pelab_real)rnd(&rng, i);
    for (int i = 0; i < N * K; i++) B[i] = (pelab_real)rnd(&rng, i);
    struct pelab_ctx fp32, bf16;
    pelab_ctx_init(&fp32), pelab_ctx_init(&bf16);
    CHECK(fp32.precision == PELAB_PRECISION_FP32, "a context does not start in fp32");
    pelab_gemm(&fp32, 0, 1, M, N, K, 1, A, K, B, K, 0, C1, N);
    CHECK(pelab_precision_set(&bf16, PELAB_PRECISION_BF16) == PELAB_OK, "bf16: %s", pelab_last_error());
    pelab_gemm(&bf16, 0, 1, M, N, K, 1, A, K, B, K, 0, C3, N);
    struct thread_product tp = {pelab_threads_get(), A, B, C4, M, N, K, -1};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, bf16_in_new_thread, &tp) == 0, "pthread_create");
    pthread_join(th, NULL);
    CHECK(tp.rc == PELAB_OK && memcmp(C3, C4, sizeof C3) == 0, "bf16 on another thread: other bits");
    pelab_gemm(&fp32, 0, 1, M, N, K, 1, A, K, B, K, 0, C2, N);
    CHECK(memcmp(C1, C2, sizeof C1) == 0, "fp32 products changed after bf16 ones");
    CHECK(memcmp(C1, C3, sizeof C1) != 0, "bf16 products equal the fp32 ones bit for bit");
}

/* One model, every encoding: logits and loss in bf16 against fp32, same weights and batch.
 * Tolerance: (4·layers + 1)·u·max|logit| with u = 2^-8, bf16's unit roundoff: one unit roundoff
 * of the logits' scale for each product on the path from the embedding to the logits (qkv, proj,
 * fc, fcproj per layer, and the head). A product's worst case is 2u of Σ|a||b| (above), but its
 * rounding errors have random signs and mostly cancel: the encodings measured 5e-3 to 1.2e-2
 * against bounds of 5e-2 to 6e-2 (logits up to 1.7), with the attention kernel's score and value
 * products in bf16 as well (test_bf16_attn bounds those on their own). The loss, a mean of log-softmaxes, moves by
 * at most twice the largest logit change. And the bf16 logits must differ from the fp32 ones (no
 * silent float32). */
enum { V = 29, BATCH = 2, T = 24, BT = BATCH * T, LAYERS = 2 };

static void check_model(const char *pe) {
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "pe", pe);
    pelab_opts_set(&o, "d-model", "64");
    pelab_opts_set(&o, "heads", "4");
    pelab_opts_set(&o, "layers", "2");
    struct pelab_model m;
    if (pelab_model_init(&m, &o, V, T) != PELAB_OK) {
        CHECK(0, "%s: %s", pe, pelab_last_error());
        return;
    }
    pelab_model_init_weights(&m, 3);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 4);
    for (size_t i = 0; i < m.params.total; i++) /* every parameter away from its init */
        m.params.data[i] += (pelab_real)(0.05 * pelab_rng_normal(&rng));
    int32_t tokens[BT], targets[BT], pos[BT];
    for (int i = 0; i < BT; i++) {
        tokens[i] = (int32_t)pelab_rng_below(&rng, V);
        targets[i] = (int32_t)pelab_rng_below(&rng, V);
        pos[i] = i % T;
    }
    static pelab_real l32[BT * V];
    pelab_model_forward(&m, tokens, targets, pos, BATCH, T); /* in the model's own context: fp32 */
    const double loss32 = m.loss;
    memcpy(l32, pelab_model_logits(&m), sizeof l32);
    struct pelab_ctx bf16;
    pelab_ctx_init(&bf16);
    PELAB_ASSERT(pelab_precision_set(&bf16, PELAB_PRECISION_BF16) == PELAB_OK);
    pelab_model_set_ctx(&m, &bf16);
    pelab_model_forward(&m, tokens, targets, pos, BATCH, T);
    const double loss16 = m.loss;
    const pelab_real *l16 = pelab_model_logits(&m);
    double scale = 0, diff = 0;
    for (int i = 0; i < BT * V; i++) {
        scale = fmax(scale, fabs((double)l32[i]));
        diff = fmax(diff, fabs((double)l16[i] - (double)l32[i]));
    }
    const double tol = (4 * LAYERS + 1) * ldexp(1, -8) * scale;
    printf("%-12s max |logit| %.3f, max |bf16 - fp32| %.2e (bound %.2e), loss %.6f vs %.6f\n", pe,
           scale, diff, tol, loss16, loss32);
    CHECK(isfinite(loss16) && diff <= tol, "%s: bf16 logits differ by %.3g, bound %.3g", pe, diff, tol);
    CHECK(diff > 0, "%s: bf16 logits equal the fp32 ones bit for bit", pe);
    CHECK(fabs(loss16 - loss32) <= 2 * tol, "%s: loss %.9g in bf16, %.9g in fp32", pe, loss16, loss32);
    pelab_model_free(&m);
}

int main(void) {
    pelab_threads_set(0); /* all cores, and pelab_threads_get() says how many */
    enum pelab_precision p;
    CHECK(pelab_precision_parse("fp16", &p) == PELAB_ERR_USAGE && strstr(pelab_last_error(), "fp16"),
          "--precision fp16 accepted or no message: %s", pelab_last_error());
    CHECK(pelab_precision_parse("bf16", &p) == PELAB_OK && p == PELAB_PRECISION_BF16, "bf16 not parsed");
    if (pelab_precision_check(PELAB_PRECISION_BF16) != PELAB_OK) {
        const char *why = pelab_last_error();
        CHECK(strstr(why, "bf16") && !strchr(why, '\n'), "refusal is not one line naming bf16: %s", why);
        struct pelab_ctx ctx;
        pelab_ctx_init(&ctx);
        CHECK(pelab_precision_set(&ctx, PELAB_PRECISION_BF16) != PELAB_OK &&
                  ctx.precision == PELAB_PRECISION_FP32,
              "bf16 set although refused");
        if (check_report("test_bf16")) return 1;
        printf("skipped: %s\n", why);
        return 77;
    }
    check_products();
    check_backward(70, 33, 129, 0);
    check_backward(257, 64, 48, 1);
    check_fp32_unchanged();
    /* every encoding of 1-D positions, in the sequence model (2-D ones: test_contract's patch
     * model runs them, in float32) */
    for (const struct pelab_posenc_ops *const *e = pelab_posenc_all(); *e; e++)
        if (pelab_posenc_serves(*e, 1)) check_model((*e)->name);
    return check_report(sizeof(pelab_real) == 4 ? "test_bf16_f32" : "test_bf16");
}
