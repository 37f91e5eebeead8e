/* The tiled attention kernel in bf16 (--precision bf16): its tile product against float64, and
 * the kernel's forward and backward against its float32 self, within bounds derived from where it
 * rounds. Built twice: in the double test build (the tile product's plain loops) and, as
 * test_bf16_attn_f32, in the float build (AVX512-BF16 where the CPU has it). Skipped (exit 77) where
 * bf16 cannot run, as test_bf16.
 *
 * u = 2^-8 is bf16's unit roundoff, so a product of two rounded operands is off by at most
 * (2u + u²)|a||b|; sums of K float32 terms add at most (K + 3)·2^-23 of the sum of magnitudes.
 *
 * Tile product, C0 + alpha·op(A)·op(B): within (K + 3)·2^-23·S of the float64 product of the
 * operands rounded to bf16 (S = |c0| + |alpha|·Σ|â||b̂|): that pins the operands to bf16, ties to
 * even, and the sums to float32.
 *
 * Forward (same q, k, v): a score is off by at most δ = (2u + u²)·scale·Σ_x |q_x||k_x| (+ float32
 * sums), so a probability by a factor within e^{±2δ}; P̃ and V are rounded for their product, so
 *   |out16 − out32| ≤ ((2u + u² + ε)(1 + expm1(2δ_max)) + expm1(2δ_max))·Σ_s P_s |v_s|,
 * ε the float32 sums' share.
 * Backward (same dO, out and lse, so only the backward's own roundings differ): per entry, with
 * ε_P = expm1(δ_max) + 2^-21 (the exponential's own error) the relative error of a recomputed P,
 *   |ΔdP_ts| ≤ E_ts = (2u + u²)·Σ_c |dO_tc||V_sc|
 *   |ΔdS_ts| ≤ F_ts = P ε_P |dP − D| + P (1 + ε_P) E_ts
 *   |ΔdV_s|  ≤ Σ_t P_ts |dO_t| (ε_P + (2u + u²)(1 + ε_P))
 *   |ΔdQ_t|  ≤ scale·Σ_s |K_s| (F_ts + (2u + u²)(|dS_ts| + F_ts)),   dK the same with Q
 * each plus the float32 sums' (K + 3)·2^-23 of its magnitude, twice (both results have them).
 * The log-sum-exp the forward saves moves with the scores: |Δlse| ≤ δ_max plus the float32 sums. A control: the bf16 results differ
 * from the float32 ones (the bf16 path ran).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "attn/attention.h"
#include "kernels/cpu/tile_bf16.h"
#include "lib/check.h"
#include "pelab/precision.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/threads.h"

static const double U = 1.0 / 256; /* bf16's unit roundoff */
#define PROD (2 * U + U * U)        /* a product of two rounded operands */
#define SUMS(n) (((n) + 3) * ldexp(1, -22)) /* float32 sums of n terms, in both results */

/* x to 8 significant bits, ties to even (frexp and rint, independent of the library's bits). */
static double bf16_ref(double x) {
    if (x == 0 || !isfinite(x)) return x;
    int e;
    double m = frexp(x, &e);
    return ldexp(rint(ldexp(m, 8)), e - 8);
}

static double uniform(struct pelab_rng *r) { return (float)(2 * pelab_rng_uniform(r) - 1); }

/* --- the tile product --------------------------------------------------------------------------- */

static void check_tile(struct pelab_rng *rng, int ta, int tb, int m, int n, int k, double alpha) {
    const int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    const int lda = ac + 2, ldb = bc + 3, ldc = n + 5;
    pelab_real *A = malloc(sizeof *A * ar * lda), *B = malloc(sizeof *B * br * ldb);
    pelab_real *C = malloc(sizeof *C * m * ldc), *C0 = malloc(sizeof *C0 * m * ldc);
    const int w = m > n ? m : n;
    const size_t pack_n = pelab_tile_bf16_pack_size(w, k);
    uint16_t *pack = malloc(sizeof *pack * pack_n);
    memset(pack, 0xff, sizeof *pack * pack_n); /* bf16 NaNs: a word the packing leaves unwritten shows */
    /* float values (the kernel takes operands to float before bf16, bf16_ref from double) */
    for (long i = 0; i < (long)ar * lda; i++) A[i] = (pelab_real)(float)(uniform(rng) * (i % 9 == 4 ? 100 : 1));
    for (long i = 0; i < (long)br * ldb; i++) B[i] = (pelab_real)uniform(rng);
    for (long i = 0; i < (long)m * ldc; i++) C[i] = C0[i] = (pelab_real)uniform(rng);
    pelab_tile_gemm_bf16(C, ldc, A, lda, ta, B, ldb, tb, m, n, k, (pelab_real)alpha, pack);
    double worst = 0;
    int padding_ok = 1;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double sum = 0, mag = 0;
            for (int x = 0; x < k; x++) {
                const double a = bf16_ref(ta ? A[(long)x * lda + i] : A[(long)i * lda + x]);
                const double b = bf16_ref(tb ? B[(long)j * ldb + x] : B[(long)x * ldb + j]);
                sum += a * b, mag += fabs(a * b);
            }
            const double c0 = C0[(long)i * ldc + j], want = c0 + alpha * sum;
            const double tol = SUMS(k) * (fabs(c0) + fabs(alpha) * mag);
            worst = fmax(worst, fabs(C[(long)i * ldc + j] - want) / tol);
        }
        for (int j = n; j < ldc; j++)
            if (memcmp(&C[(long)i * ldc + j], &C0[(long)i * ldc + j], sizeof *C)) padding_ok = 0;
    }
    CHECK(worst <= 1, "tile ta %d tb %d %dx%dx%d: error %.3g times the bound", ta, tb, m, n, k, worst);
    CHECK(padding_ok, "tile ta %d tb %d %dx%dx%d: wrote past n", ta, tb, m, n, k);
    free(A), free(B), free(C), free(C0), free(pack);
}

static void check_tiles(void) {
    static const int shapes[][3] = {{1, 1, 1}, {8, 16, 2}, {7, 17, 3}, {64, 64, 64}, {64, 128, 63},
                                    {33, 5, 130}, {9, 31, 1}, {64, 16, 64}};
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 11);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int t = 0; t < 4; t++)
            check_tile(&rng, t & 1, t >> 1, shapes[i][0], shapes[i][1], shapes[i][2], t == 3 ? 0.125 : 1);
}

/* --- the kernel against its float32 self ---------------------------------------------------------- */

struct case_ {
    int B, T, H, dq, dv, bidirectional;
};

static double max_over(const double *bound, const pelab_real *a, const pelab_real *b, long n, double *worst) {
    double diff = 0;
    for (long i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        diff = fmax(diff, d);
        *worst = fmax(*worst, bound[i] > 0 ? d / bound[i] : (d > 0 ? INFINITY : 0));
    }
    return diff;
}

static void check_kernel(const struct case_ *c) {
    const int B = c->B, T = c->T, H = c->H, dq = c->dq, dv = c->dv, D = H * dv;
    const long nq = (long)B * H * T * dq, nv = (long)B * T * D, nl = (long)B * H * T;
    pelab_real *q = malloc(sizeof *q * nq), *k = malloc(sizeof *k * nq), *v = malloc(sizeof *v * nv);
    pelab_real *dout = malloc(sizeof *dout * nv), *o32 = malloc(sizeof *o32 * nv), *o16 = malloc(sizeof *o16 * nv);
    pelab_real *lse = malloc(sizeof *lse * nl), *lse16 = malloc(sizeof *lse16 * nl);
    pelab_real *g32[3], *g16[3];
    const long gn[3] = {nq, nq, nv};
    for (int i = 0; i < 3; i++) g32[i] = malloc(sizeof **g32 * gn[i]), g16[i] = malloc(sizeof **g16 * gn[i]);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 5);
    for (long i = 0; i < nq; i++) q[i] = (pelab_real)(2 * uniform(&rng)), k[i] = (pelab_real)(2 * uniform(&rng));
    for (long i = 0; i < nv; i++) v[i] = (pelab_real)uniform(&rng), dout[i] = (pelab_real)uniform(&rng);
    struct pelab_ctx fp32, bf16;
    pelab_ctx_init(&fp32), pelab_ctx_init(&bf16);
    PELAB_ASSERT(pelab_precision_set(&bf16, PELAB_PRECISION_BF16) == PELAB_OK);
    struct pelab_attn_call s = {.ctx = &fp32, .B = B, .T = T, .H = H, .dq = dq, .dv = dv, .ldv = D, .ldo = D,
                                .scale = (pelab_real)(1 / sqrt((double)dv)), .bidirectional = c->bidirectional};
    PELAB_ASSERT(pelab_attn_tiled_forward(o32, lse, q, k, v, &s) == PELAB_OK);
    PELAB_ASSERT(pelab_attn_tiled_backward(g32[0], g32[1], g32[2], dout, o32, lse, q, k, v, &s) == PELAB_OK);
    s.ctx = &bf16;
    PELAB_ASSERT(pelab_attn_tiled_forward(o16, lse16, q, k, v, &s) == PELAB_OK);
    /* the backward from the float32 forward's out and lse: only its own roundings differ */
    PELAB_ASSERT(pelab_attn_tiled_backward(g16[0], g16[1], g16[2], dout, o32, lse, q, k, v, &s) == PELAB_OK);

    /* the bounds, in double from the float32 operands */
    double *bo = calloc(nv, sizeof *bo), *bq = calloc(nq, sizeof *bq), *bk = calloc(nq, sizeof *bk),
           *bv = calloc(nv, sizeof *bv);
    double *P = malloc(sizeof *P * T * T), *dP = malloc(sizeof *dP * T * T), *E = malloc(sizeof *E * T * T);
    double dmax = 0; /* δ_max over every visible score */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < T; j++) {
                    double m = 0;
                    for (int x = 0; x < dq; x++)
                        m += fabs((double)q[(((long)b * H + h) * T + t) * dq + x] * k[(((long)b * H + h) * T + j) * dq + x]);
                    dmax = fmax(dmax, (PROD + SUMS(dq)) * s.scale * m);
                }
    const double eps_p = expm1(dmax) + ldexp(1, -21);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const pelab_real *Q = q + ((long)b * H + h) * T * dq, *K = k + ((long)b * H + h) * T * dq;
            for (int t = 0; t < T; t++) {
                const int n = c->bidirectional ? T : t + 1;
                const pelab_real *dO = dout + ((long)b * T + t) * D + h * dv, *O = o32 + ((long)b * T + t) * D + h * dv;
                double Dt = 0;
                for (int x = 0; x < dv; x++) Dt += (double)dO[x] * O[x];
                for (int j = 0; j < n; j++) {
                    double sc = 0, dp = 0, e = 0;
                    for (int x = 0; x < dq; x++) sc += (double)Q[t * dq + x] * K[j * dq + x];
                    const pelab_real *V = v + ((long)b * T + j) * D + h * dv;
                    for (int x = 0; x < dv; x++) dp += (double)dO[x] * V[x], e += fabs((double)dO[x] * V[x]);
                    P[t * T + j] = exp(sc * s.scale - lse[((long)b * H + h) * T + t]);
                    dP[t * T + j] = dp;
                    E[t * T + j] = (PROD + SUMS(dv)) * e;
                }
                for (int x = 0; x < dv; x++) { /* forward */
                    double sum = 0;
                    for (int j = 0; j < n; j++) sum += P[t * T + j] * fabs((double)v[((long)b * T + j) * D + h * dv + x]);
                    bo[((long)b * T + t) * D + h * dv + x] = ((PROD + SUMS(T)) * (1 + expm1(2 * dmax)) + expm1(2 * dmax)) * sum;
                }
                for (int j = 0; j < n; j++) {
                    const double p = P[t * T + j], ds = p * (dP[t * T + j] - Dt);
                    const double F = p * eps_p * fabs(dP[t * T + j] - Dt) + p * (1 + eps_p) * E[t * T + j];
                    const double wq = s.scale * (F + (PROD + SUMS(T)) * (fabs(ds) + F));
                    for (int x = 0; x < dq; x++) {
                        bq[(((long)b * H + h) * T + t) * dq + x] += wq * fabs((double)K[j * dq + x]);
                        bk[(((long)b * H + h) * T + j) * dq + x] += wq * fabs((double)Q[t * dq + x]);
                    }
                    for (int x = 0; x < dv; x++)
                        bv[((long)b * T + j) * D + h * dv + x] +=
                            p * fabs((double)dO[x]) * (eps_p + (PROD + SUMS(T)) * (1 + eps_p));
                }
            }
        }
    double w[5] = {0}, dlse = 0;
    for (long i = 0; i < nl; i++) { /* |Δlse| ≤ δ_max + the float32 sums of the row */
        const double d = fabs((double)lse16[i] - (double)lse[i]);
        dlse = fmax(dlse, d);
        w[4] = fmax(w[4], d / (dmax + SUMS(T) * (1 + fabs((double)lse[i]))));
    }
    const double d0 = max_over(bo, o16, o32, nv, &w[0]), d1 = max_over(bq, g16[0], g32[0], nq, &w[1]),
                 d2 = max_over(bk, g16[1], g32[1], nq, &w[2]), d3 = max_over(bv, g16[2], g32[2], nv, &w[3]);
    printf("B %d T %d H %d dq %d dv %d %s: max |bf16 - fp32| out %.2e dq %.2e dk %.2e dv %.2e lse %.2e; "
           "worst error/bound %.2f %.2f %.2f %.2f %.2f\n", B, T, H, dq, dv,
           c->bidirectional ? "bidirectional" : "causal", d0, d1, d2, d3, dlse, w[0], w[1], w[2], w[3], w[4]);
    static const char *what[5] = {"out", "dq", "dk", "dv", "lse"};
    for (int i = 0; i < 5; i++) CHECK(w[i] <= 1, "%s: error %.3g times its bound", what[i], w[i]);
    CHECK(d0 > 0 && d1 > 0 && d2 > 0 && d3 > 0, "bf16 results equal the fp32 ones: the bf16 path did not run");
    free(q), free(k), free(v), free(dout), free(o32), free(o16), free(lse), free(lse16);
    for (int i = 0; i < 3; i++) free(g32[i]), free(g16[i]);
    free(bo), free(bq), free(bk), free(bv), free(P), free(dP), free(E);
}

int main(void) {
    pelab_threads_set(0);
    if (pelab_precision_check(PELAB_PRECISION_BF16) != PELAB_OK) {
        printf("skipped: %s\n", pelab_last_error());
        return 77;
    }
    /* the tile products on every instruction set this CPU has, the best last (the kernel's) */
    const enum pelab_tile_isa best = pelab_tile_bf16_isa();
    for (int isa = PELAB_TILE_PLAIN; isa <= (int)best; isa++) {
        pelab_tile_bf16_cap((enum pelab_tile_isa)isa);
        printf("tile products: %s\n", pelab_tile_bf16_isa_name(pelab_tile_bf16_isa()));
        check_tiles();
    }
    /* T past one tile and not a multiple of it (67: an odd last tile, so odd inner dimensions);
     * PoPE-like dq = 2 dv; bidirectional (images) */
    static const struct case_ cases[] = {{2, 70, 2, 16, 16, 0}, {1, 130, 2, 32, 16, 0}, {2, 50, 3, 8, 8, 1},
                                         {1, 67, 2, 16, 16, 0}, {1, 67, 1, 8, 8, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_kernel(&cases[i]);
    return check_report(sizeof(pelab_real) == 4 ? "test_bf16_attn_f32" : "test_bf16_attn");
}
