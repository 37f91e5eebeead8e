/* The vectorised kernels against plain references written here in double precision, at every
 * SIMD level this CPU runs (simd.h: portable, AVX2, AVX-512): RMSNorm, GELU and cross-entropy
 * forward and backward, the cross-entropy's evaluation variant, PoPE's and RoPE's transforms and
 * their gradients, AdamW and the scan for non-finite weights after it, the product with bf16
 * weights, float products of few rows (one token's, split across threads by columns), and the
 * tiled attention kernel (forward and backward) against the reference one. Odd sizes, so vector
 * remainders run too. Built twice: in double (build/tests/test_kernels, tolerance 1e-12) and in
 * float, what users run (build/tests/test_kernels_f32, tolerance about 100 float ulps, the error
 * of vmath.h's exp and log1p and of float sums). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "attn/attention.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/layers.h"
#include "pelab/optim.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "train/run.h"

#ifdef PELAB_DOUBLE
#define RTOL 1e-12
#define ATOL 1e-13
#else
#define RTOL 2e-5
#define ATOL 2e-6
#endif

#define PI 3.14159265358979323846

static unsigned long long seed = 7;

static double uniform(double lo, double hi) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(seed >> 11) / 9007199254740992.0;
}

static pelab_real *rvec(long n, double lo, double hi) {
    pelab_real *x = malloc((size_t)n * sizeof *x);
    for (long i = 0; i < n; i++) x[i] = (pelab_real)uniform(lo, hi);
    return x;
}

static double *dvec(long n) { return calloc((size_t)n, sizeof(double)); }

static const char *level_name;

/* The worst of |got − want| / (ATOL + RTOL·|want|) over n values: <= 1 passes. */
static void compare(const char *what, const pelab_real *got, const double *want, long n) {
    double worst = 0;
    long at = 0;
    for (long i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (ATOL + RTOL * fabs(want[i]));
        if (!(e <= worst)) worst = e, at = i; /* a NaN is the worst */
    }
    CHECK(worst <= 1, "%s %s: element %ld is %.9g, the reference %.9g", level_name, what, at,
          (double)got[at], want[at]);
}

/* --- RMSNorm ------------------------------------------------------------------------------------ */
static void check_rmsnorm(void) {
    const int N = 7, C = 37;
    pelab_real *x = rvec(N * C, -2, 2), *g = rvec(C, 0.5, 1.5), *dout = rvec(N * C, -1, 1);
    pelab_real *out = rvec(N * C, 0, 0), *rstd = rvec(N, 0, 0);
    pelab_real *dx = rvec(N * C, -1, 1), *dg = rvec(C, -1, 1); /* both accumulate */
    double *want = dvec(N * C), *wr = dvec(N), *wdx = dvec(N * C), *wdg = dvec(C);
    for (int c = 0; c < C; c++) wdg[c] = dg[c];
    for (int i = 0; i < N; i++) {
        const pelab_real *xi = x + i * C, *di = dout + i * C;
        double ss = 0, dot = 0;
        for (int c = 0; c < C; c++) ss += (double)xi[c] * xi[c];
        const double r = 1 / sqrt(ss / C + 1e-5);
        wr[i] = r;
        for (int c = 0; c < C; c++) {
            want[i * C + c] = xi[c] * r * g[c];
            dot += (double)di[c] * g[c] * xi[c] * r;
            wdg[c] += (double)di[c] * xi[c] * r;
        }
        for (int c = 0; c < C; c++)
            wdx[i * C + c] = dx[i * C + c] + r * (di[c] * (double)g[c] - xi[c] * r * dot / C);
    }
    pelab_rmsnorm_forward(out, rstd, x, g, N, C);
    pelab_rmsnorm_backward(dx, dg, dout, x, g, rstd, N, C);
    compare("rmsnorm out", out, want, N * C);
    compare("rmsnorm rstd", rstd, wr, N);
    compare("rmsnorm dx", dx, wdx, N * C);
    compare("rmsnorm dg", dg, wdg, C);
    free(x), free(g), free(dout), free(out), free(rstd), free(dx), free(dg);
    free(want), free(wr), free(wdx), free(wdg);
}

/* --- GELU --------------------------------------------------------------------------------------- */
static void check_gelu(void) {
    const long n = 1003;
    pelab_real *x = rvec(n, -6, 6), *dout = rvec(n, -1, 1), *out = rvec(n, 0, 0), *dx = rvec(n, 0, 0);
    double *want = dvec(n), *wdx = dvec(n);
    for (long i = 0; i < n; i++) {
        const double v = x[i], k = sqrt(2 / PI), u = k * (v + 0.044715 * v * v * v);
        const double th = tanh(u), du = k * (1 + 3 * 0.044715 * v * v);
        want[i] = 0.5 * v * (1 + th);
        wdx[i] = dout[i] * (0.5 * (1 + th) + 0.5 * v * (1 - th * th) * du);
    }
    pelab_gelu_forward(out, x, n);
    pelab_gelu_backward(dx, dout, x, n);
    compare("gelu out", out, want, n);
    compare("gelu dx", dx, wdx, n);
    pelab_gelu_forward(x, x, n); /* in place, as the evaluation forward runs it */
    compare("gelu in place", x, want, n);
    free(x), free(dout), free(out), free(dx), free(want), free(wdx);
}

/* --- cross-entropy ------------------------------------------------------------------------------ */
static void check_crossentropy(void) {
    const int N = 6, V = 1001;
    const int32_t targets[6] = {3, -1, 1000, 0, 517, -1};
    pelab_real *z = rvec((long)N * V, -8, 8), *stats = rvec(2 * N, 0, 0), *losses = rvec(N, 0, 0);
    pelab_real *el = rvec(N, 0, 0), *prob = rvec(N, 0, 0);
    int32_t pred[6];
    z[2 * V + 40] = z[2 * V + 900] = 9; /* two equal maxima: the first is the prediction */
    double *wl = dvec(N), *wd = dvec((long)N * V), *wp = dvec(N);
    double wsum = 0;
    int wpred[6], count = 0;
    for (int i = 0; i < N; i++) {
        const pelab_real *r = z + (long)i * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (r[v] > r[best]) best = v;
        double s = 0;
        for (int v = 0; v < V; v++) s += exp((double)r[v] - r[best]);
        wpred[i] = best;
        wp[i] = 1 / s;
        if (targets[i] >= 0) {
            wl[i] = log(s) - ((double)r[targets[i]] - r[best]);
            for (int v = 0; v < V; v++) wd[(long)i * V + v] = 0.5 * exp((double)r[v] - r[best]) / s;
            wd[(long)i * V + targets[i]] -= 0.5;
            count++;
        }
        wsum += wl[i];
    }
    double sum, esum;
    int n = pelab_crossentropy_forward(stats, losses, &sum, z, targets, N, V);
    int en = pelab_crossentropy_eval(el, pred, prob, &esum, z, targets, N, V);
    CHECK(n == count && en == count, "%s cross-entropy: %d and %d rows with a target, not %d",
          level_name, n, en, count);
    CHECK(fabs(sum - wsum) <= ATOL * N + RTOL * fabs(wsum), "%s cross-entropy sum %.9g, not %.9g",
          level_name, sum, wsum);
    CHECK(sum == esum, "%s cross-entropy: evaluation sum %.17g, forward %.17g", level_name, esum, sum);
    compare("cross-entropy losses", losses, wl, N);
    compare("cross-entropy eval losses", el, wl, N);
    compare("cross-entropy probability of the prediction", prob, wp, N);
    for (int i = 0; i < N; i++)
        CHECK(pred[i] == wpred[i], "%s cross-entropy: row %d predicts %d, not %d", level_name, i, pred[i], wpred[i]);
    pelab_crossentropy_backward(z, z, stats, targets, (pelab_real)0.5, N, V); /* in place */
    compare("cross-entropy dlogits", z, wd, (long)N * V);
    free(z), free(stats), free(losses), free(el), free(prob), free(wl), free(wd), free(wp);
}

/* --- PoPE and RoPE through the encoding interface ---------------------------------------------------- */
enum { PB = 2, PT = 5, PH = 3, Pd = 10, PD = PH * Pd, PLD = 3 * PD };

struct qk_case {
    struct pelab_params params;
    struct pelab_posenc pe;
    pelab_real *qkv, *qo, *ko, *gq, *gk, *dqkv; /* qkv (B,T,3D): q at 0, k at D */
    int32_t pos[PB * PT];
};

static int qk_case_init(struct qk_case *c, const char *name, const char *key, const char *value) {
    memset(c, 0, sizeof *c);
    struct pelab_opts o = {0};
    if (key) pelab_opts_set(&o, key, value);
    if (pelab_posenc_init(&c->pe, name, &o, &c->params, PD, PH, 1, 64) || pelab_params_alloc(&c->params))
        return 0;
    c->pe.ctx = test_ctx();
    for (size_t i = 0; i < c->params.total; i++) /* δ over [−7, 1]: some clamped at each end */
        c->params.data[i] = (pelab_real)uniform(-7, 1), c->params.grad[i] = (pelab_real)uniform(-1, 1);
    const long n = (long)PB * PT * PH * c->pe.qk_dim;
    c->qkv = rvec((long)PB * PT * PLD, -3, 3);
    c->qo = rvec(n, 0, 0), c->ko = rvec(n, 0, 0), c->gq = rvec(n, -1, 1), c->gk = rvec(n, -1, 1);
    c->dqkv = rvec((long)PB * PT * PLD, 0, 0);
    for (int i = 0; i < PB * PT; i++) c->pos[i] = i % PT + 1000 * (i / PT);
    return pelab_posenc_prepare(&c->pe, c->pos, PB, PT) == PELAB_OK;
}

static void qk_case_free(struct qk_case *c) {
    pelab_posenc_free(&c->pe);
    pelab_params_free(&c->params);
    free(c->qkv), free(c->qo), free(c->ko), free(c->gq), free(c->gk), free(c->dqkv);
}

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static void check_pope(int sp) {
    struct qk_case c;
    if (!qk_case_init(&c, "pope", "pope-softplus", sp ? "on" : "off")) {
        CHECK(0, "pope: %s", pelab_last_error());
        return;
    }
    const long n = (long)PB * PH * PT * 2 * Pd;
    double *wq = dvec(n), *wk = dvec(n), *wdq = dvec((long)PB * PT * PD), *wdk = dvec((long)PB * PT * PD);
    double *wdd = dvec(PH * Pd);
    const pelab_real *delta = c.params.data;
    for (int j = 0; j < PH * Pd; j++) wdd[j] = c.params.grad[j];
    for (int b = 0; b < PB; b++)
        for (int t = 0; t < PT; t++)
            for (int h = 0; h < PH; h++)
                for (int k = 0; k < Pd; k++) {
                    const long tok = (long)b * PT + t, head = (((long)b * PH + h) * PT + t) * 2 * Pd;
                    const double x = c.qkv[tok * PLD + h * Pd + k], y = c.qkv[tok * PLD + PD + h * Pd + k];
                    const double mq = sp ? softplus(x) : x, mk = sp ? softplus(y) : y;
                    const double dl = fmin(fmax(delta[h * Pd + k], -2 * PI), 0);
                    const double phi = c.pos[tok] * pow(10000, -(double)k / Pd), psi = phi + dl;
                    wq[head + k] = mq * cos(phi), wq[head + Pd + k] = mq * sin(phi);
                    wk[head + k] = mk * cos(psi), wk[head + Pd + k] = mk * sin(psi);
                    const double gq0 = c.gq[head + k], gq1 = c.gq[head + Pd + k];
                    const double gk0 = c.gk[head + k], gk1 = c.gk[head + Pd + k];
                    const double sq = sp ? 1 / (1 + exp(-x)) : 1, sk = sp ? 1 / (1 + exp(-y)) : 1;
                    wdq[tok * PD + h * Pd + k] = (gq0 * cos(phi) + gq1 * sin(phi)) * sq;
                    wdk[tok * PD + h * Pd + k] = (gk0 * cos(psi) + gk1 * sin(psi)) * sk;
                    if (delta[h * Pd + k] >= -2 * PI && delta[h * Pd + k] <= 0)
                        wdd[h * Pd + k] += mk * (gk1 * cos(psi) - gk0 * sin(psi));
                }
    pelab_posenc_qk_forward(&c.pe, 0, c.qo, c.ko, c.qkv, c.qkv + PD, PLD, c.pos, PB, PT);
    pelab_posenc_qk_backward(&c.pe, 0, c.dqkv, c.dqkv + PD, c.gq, c.gk, c.qkv, c.qkv + PD, PLD, c.pos, PB, PT);
    compare(sp ? "pope q'" : "pope (no softplus) q'", c.qo, wq, n);
    compare(sp ? "pope k'" : "pope (no softplus) k'", c.ko, wk, n);
    pelab_real *dq = rvec((long)PB * PT * PD, 0, 0), *dk = rvec((long)PB * PT * PD, 0, 0);
    for (long i = 0; i < (long)PB * PT; i++) {
        memcpy(dq + i * PD, c.dqkv + i * PLD, PD * sizeof *dq);
        memcpy(dk + i * PD, c.dqkv + i * PLD + PD, PD * sizeof *dk);
    }
    compare(sp ? "pope dq" : "pope (no softplus) dq", dq, wdq, (long)PB * PT * PD);
    compare(sp ? "pope dk" : "pope (no softplus) dk", dk, wdk, (long)PB * PT * PD);
    compare(sp ? "pope dδ" : "pope (no softplus) dδ", c.params.grad, wdd, PH * Pd);
    free(wq), free(wk), free(wdq), free(wdk), free(wdd), free(dq), free(dk);
    qk_case_free(&c);
}

static void check_rope(int half) {
    struct qk_case c;
    if (!qk_case_init(&c, "rope", "rope-layout", half ? "half" : "interleaved")) {
        CHECK(0, "rope: %s", pelab_last_error());
        return;
    }
    const long n = (long)PB * PH * PT * Pd, nt = (long)PB * PT * PD;
    double *wq = dvec(n), *wk = dvec(n), *wdq = dvec(nt), *wdk = dvec(nt);
    for (int b = 0; b < PB; b++)
        for (int t = 0; t < PT; t++)
            for (int h = 0; h < PH; h++)
                for (int p = 0; p < Pd / 2; p++) {
                    const long tok = (long)b * PT + t, head = (((long)b * PH + h) * PT + t) * Pd;
                    const int i0 = half ? p : 2 * p, i1 = half ? p + Pd / 2 : 2 * p + 1;
                    const double a = c.pos[tok] * pow(10000, -2.0 * p / Pd), cs = cos(a), sn = sin(a);
                    for (int s = 0; s < 2; s++) { /* q, then k */
                        const pelab_real *x = c.qkv + tok * PLD + s * PD + h * Pd;
                        const pelab_real *g = (s ? c.gk : c.gq) + head;
                        double *w = (s ? wk : wq) + head, *wd = (s ? wdk : wdq) + tok * PD + h * Pd;
                        w[i0] = x[i0] * cs - x[i1] * sn, w[i1] = x[i0] * sn + x[i1] * cs;
                        wd[i0] = g[i0] * cs + g[i1] * sn, wd[i1] = -g[i0] * sn + g[i1] * cs;
                    }
                }
    pelab_posenc_qk_forward(&c.pe, 0, c.qo, c.ko, c.qkv, c.qkv + PD, PLD, c.pos, PB, PT);
    pelab_posenc_qk_backward(&c.pe, 0, c.dqkv, c.dqkv + PD, c.gq, c.gk, c.qkv, c.qkv + PD, PLD, c.pos, PB, PT);
    compare(half ? "rope half q'" : "rope q'", c.qo, wq, n);
    compare(half ? "rope half k'" : "rope k'", c.ko, wk, n);
    pelab_real *d = rvec(2 * nt, 0, 0);
    for (long i = 0; i < (long)PB * PT; i++) {
        memcpy(d + i * PD, c.dqkv + i * PLD, PD * sizeof *d);
        memcpy(d + nt + i * PD, c.dqkv + i * PLD + PD, PD * sizeof *d);
    }
    compare(half ? "rope half dq" : "rope dq", d, wdq, nt);
    compare(half ? "rope half dk" : "rope dk", d + nt, wdk, nt);
    free(wq), free(wk), free(wdq), free(wdk), free(d);
    qk_case_free(&c);
}

/* --- tiled attention against the reference ---------------------------------------------------------- */

/* The tiled kernel's register blocks are 64 bytes wide, 16 floats or 8 doubles, and on diagonal
 * tiles it skips the blocks the causal mask empties: so it is checked in the float build too
 * (test_attn.c checks it in double, with every encoding). Three tiles, the last partial, widths
 * past one block. Forward and backward, the reference's results converted to double. */
/* The tiled kernel against the reference on one shape: B = 1, H = 2; causal, or bidirectional
 * (every key, as the image task runs it); attention dropout p. */
static void check_attention_shape(int T, int dq, int dv, int bidirectional, double p) {
    const int B = 1, H = 2, D = H * dv;
    const long BT = (long)B * T, nq = BT * H * dq;
    pelab_real *q = rvec(nq, -1, 1), *k = rvec(nq, -1, 1), *qkv = rvec(BT * 3 * D, -1, 1);
    pelab_real *dout = rvec(BT * D, -1, 1), *out[2], *dq_[2], *dk_[2], *dqkv[2];
    pelab_real *lse = rvec(BT * H, 0, 0), *att = rvec(BT * H * T, 0, 0), *datt = rvec(BT * H * T, 0, 0);
    const struct pelab_attn_call s = {.ctx = test_ctx(), .B = B, .T = T, .H = H, .dq = dq, .dv = dv,
                                       .ldv = 3 * D, .ldo = D, .scale = (pelab_real)0.3,
                                       .bidirectional = bidirectional, .dropout = p, .key = 11, .site = 3};
    for (int i = 0; i < 2; i++) {
        out[i] = rvec(BT * D, 0, 0), dq_[i] = rvec(nq, 0, 0), dk_[i] = rvec(nq, 0, 0);
        dqkv[i] = calloc((size_t)BT * 3 * D, sizeof **dqkv);
    }
    pelab_attn_ref_forward(out[0], att, q, k, qkv + 2 * D, &s);
    pelab_attn_ref_backward(dq_[0], dk_[0], dqkv[0] + 2 * D, datt, dout, att, q, k, qkv + 2 * D, &s);
    CHECK(pelab_attn_tiled_forward(out[1], lse, q, k, qkv + 2 * D, &s) == PELAB_OK, "tiled forward");
    CHECK(pelab_attn_tiled_backward(dq_[1], dk_[1], dqkv[1] + 2 * D, dout, out[1], lse, q, k, qkv + 2 * D,
                                    &s) == PELAB_OK, "tiled backward");
    double *want = dvec(BT * 3 * D);
    const struct { const char *what; pelab_real *ref, *got; long n; } parts[] = {
        {"out", out[0], out[1], BT * D}, {"dq", dq_[0], dq_[1], nq},
        {"dk", dk_[0], dk_[1], nq}, {"dv", dqkv[0], dqkv[1], BT * 3 * D}};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        char what[96];
        snprintf(what, sizeof what, "attention %s (T %d, widths %d and %d, %s, dropout %g)", parts[i].what, T, dq,
                 dv, bidirectional ? "bidirectional" : "causal", p);
        for (long j = 0; j < parts[i].n; j++) want[j] = parts[i].ref[j];
        compare(what, parts[i].got, want, parts[i].n);
    }
    for (int i = 0; i < 2; i++) free(out[i]), free(dq_[i]), free(dk_[i]), free(dqkv[i]);
    free(q), free(k), free(qkv), free(dout), free(lse), free(att), free(datt), free(want);
}

/* Widths 40 and 24 (vector remainders), heads 16 wide as the image and length-generalisation
 * models have them (queries and keys 32 wide: PoPE's), one tile and several, partial ones. */
static void check_attention(void) {
    check_attention_shape(150, 40, 24, 0, 0);
    check_attention_shape(50, 16, 16, 1, 0);
    check_attention_shape(23, 16, 16, 0, 0);
    check_attention_shape(130, 32, 16, 1, 0.3);
    check_attention_shape(70, 16, 16, 0, 0.2);
}

/* --- AdamW --------------------------------------------------------------------------------------- */
static void check_adamw(void) {
    struct pelab_params p = {0};
    const int64_t s1[1] = {37}, s2[2] = {5, 19};
    pelab_params_declare(&p, "gain", 1, s1, 0);
    pelab_params_declare(&p, "matrix", 2, s2, 1);
    PELAB_ASSERT(pelab_params_alloc(&p) == PELAB_OK);
    const long n = (long)p.total;
    for (long i = 0; i < n; i++)
        p.data[i] = (pelab_real)uniform(-1, 1), p.m[i] = (pelab_real)uniform(-0.1, 0.1),
        p.v[i] = (pelab_real)uniform(0, 0.01), p.grad[i] = (pelab_real)uniform(-1, 1);
    double *ww = dvec(n), *wm = dvec(n), *wv = dvec(n);
    struct pelab_adamw opt = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1, .step = 2};
    const double lr = 0.01, bc1 = 1 - pow(0.9, 3), bc2 = 1 - pow(0.99, 3);
    /* clipped to half the norm: the update reads each gradient times the factor */
    double sq = 0;
    for (long i = 0; i < n; i++) sq += (double)p.grad[i] * p.grad[i];
    const double norm = pelab_grad_norm(&p), c = pelab_clip_scale(norm, 0.5 * norm);
    CHECK(fabs(norm - sqrt(sq)) <= 1e-14 * sqrt(sq), "gradient norm %.17g, want %.17g", norm, sqrt(sq));
    CHECK(c == (pelab_real)(0.5 * norm / (norm + 1e-6)), "clipping factor %.17g", c);
    CHECK(pelab_clip_scale(norm, 2 * norm) == 1 && pelab_clip_scale(norm, 0) == 1 && pelab_clip_scale(NAN, 1) == 1,
          "clipping factor 1 below the limit, without one, or for a norm that is not finite");
    for (long i = 0; i < n; i++) {
        const double g = (pelab_real)(p.grad[i] * (pelab_real)c), decay = i >= 37 ? 1 - lr * 0.1 : 1;
        wm[i] = 0.9 * p.m[i] + 0.1 * g;
        wv[i] = 0.99 * p.v[i] + 0.01 * g * g;
        ww[i] = p.data[i] * decay - lr / bc1 * wm[i] / (sqrt(wv[i]) / sqrt(bc2) + 1e-8);
    }
    pelab_adamw_step(&opt, &p, lr, c);
    compare("adamw weights", p.data, ww, n);
    compare("adamw m", p.m, wm, n);
    compare("adamw v", p.v, wv, n);
    free(ww), free(wm), free(wv);
    pelab_params_free(&p);

    /* the norm of many gradients (summed in parallel blocks) has the same bits on 1 and 3 threads */
    struct pelab_params big = {0};
    const int64_t sb[1] = {200003};
    pelab_params_declare(&big, "w", 1, sb, 1);
    PELAB_ASSERT(pelab_params_alloc(&big) == PELAB_OK);
    double sq_big = 0;
    for (size_t i = 0; i < big.total; i++) {
        big.grad[i] = (pelab_real)uniform(-1, 1);
        sq_big += (double)big.grad[i] * big.grad[i];
    }
    const int saved = pelab_threads_get();
    pelab_threads_set(1);
    const double one = pelab_grad_norm(&big);
    pelab_threads_set(3);
    const double three = pelab_grad_norm(&big);
    pelab_threads_set(saved);
    CHECK(one == three && fabs(one - sqrt(sq_big)) <= 1e-13 * sqrt(sq_big),
          "gradient norm on 1 and 3 threads: %.17g, %.17g (want %.17g)", one, three, sqrt(sq_big));
    pelab_params_free(&big);
}

/* --- generation's products: bf16 weights, and a few rows of float weights ----------------------- */
/* out = x · w^T with w packed in bf16 panels (bf16 set; against the sums in double of the rounded
 * weights) or read as it is (pelab_matmul_rows_forward; against the sums in double): a row count
 * of 1 (a decoding step), 2, 3, 4, 6 and 9 (a batch of sequences: groups of eight rows and a
 * remainder), output counts that leave a partial panel and do not split evenly between threads
 * or their quarters, and widths that leave a vector remainder (and one of two whole vectors).
 * Each row of a batch is bit for bit the row multiplied alone. */
static void check_generation_products(int bf16) {
    static const int shapes[][3] = {{1, 29, 37}, {3, 29, 37}, {1, 67, 130}, {2, 5, 3}, {4, 67, 130},
                                    {9, 29, 37}, {2, 32, 75}, {1, 32, 75}, {6, 29, 37}};
    const char *what = bf16 ? "bf16-weight product" : "few-row product";
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int n = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        pelab_real *x = rvec((long)n * C, -2, 2), *wf = rvec((long)OC * C, -1, 1);
        pelab_real *out = malloc((size_t)n * OC * sizeof *out), *alone = malloc((size_t)OC * sizeof *alone);
        uint16_t *w = malloc((size_t)pelab_bf16w_panel_size(C, OC) * sizeof *w);
        double *want = dvec((long)n * OC);
        for (int r = 0; r < n; r++)
            for (int o = 0; o < OC; o++)
                for (int k = 0; k < C; k++) {
                    const pelab_real wok = wf[(long)o * C + k];
                    want[(long)r * OC + o] += (double)x[(long)r * C + k] *
                                              (bf16 ? (double)pelab_from_bf16(pelab_to_bf16((float)wok)) : (double)wok);
                }
        pelab_bf16w_pack(w, wf, C, OC);
        for (int r = -1; r < n; r++) { /* the batch, then each row alone */
            pelab_real *y = r < 0 ? out : alone;
            const pelab_real *xr = r < 0 ? x : x + (long)r * C;
            const int rows = r < 0 ? n : 1;
            if (bf16) pelab_matmul_bf16w_forward(y, xr, w, rows, C, OC);
            else pelab_matmul_rows_forward(y, xr, wf, rows, C, OC);
            if (r < 0) compare(what, out, want, (long)n * OC);
            else
                CHECK(memcmp(alone, out + (long)r * OC, (size_t)OC * sizeof *alone) == 0,
                      "%s %dx%dx%d: row %d alone differs from its row in the batch", what, n, C, OC, r);
        }
        free(x), free(wf), free(out), free(alone), free(w), free(want);
    }
}

/* --- products of few rows ------------------------------------------------------------------------ */
/* C = alpha·op(A)·op(B) + beta·C for M = 1 (a matrix–vector product per thread) and M = 3 (a gemm
 * per thread), every transposition, strides wider than the matrices, on 2 threads (each takes a
 * share of C's columns), against sums in double. */
static void check_gemm_few_rows(void) {
    const int saved = pelab_threads_get();
    pelab_threads_set(2);
    enum { N = 150, K = 37, PAD = 3 };
    for (int M = 1; M <= 3; M += 2)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int lda = (ta ? M : K) + PAD, ldb = (tb ? K : N) + PAD, ldc = N + PAD;
                pelab_real *A = rvec((long)(ta ? K : M) * lda, -1, 1), *B = rvec((long)(tb ? N : K) * ldb, -1, 1);
                pelab_real *C = rvec((long)M * ldc, -1, 1);
                double *want = dvec((long)M * ldc);
                const double alpha = 0.75, beta = -0.5;
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < ldc; j++) {
                        double sum = 0;
                        for (int k = 0; j < N && k < K; k++)
                            sum += (double)(ta ? A[(long)k * lda + i] : A[(long)i * lda + k]) *
                                   (double)(tb ? B[(long)j * ldb + k] : B[(long)k * ldb + j]);
                        /* the padding past column N stays as it was */
                        want[(long)i * ldc + j] = j < N ? alpha * sum + beta * (double)C[(long)i * ldc + j] : (double)C[(long)i * ldc + j];
                    }
                pelab_gemm(test_ctx(), ta, tb, M, N, K, (pelab_real)alpha, A, lda, B, ldb, (pelab_real)beta, C,
                           ldc);
                char what[64];
                snprintf(what, sizeof what, "gemm M %d trans %d%d", M, ta, tb);
                compare(what, C, want, (long)M * ldc);
                free(A), free(B), free(C), free(want);
            }
    pelab_threads_set(saved);
}

/* --- a row's bits, whatever its call ------------------------------------------------------------- */
/* The linear layers' products (x · W^T, dY · W, dY^T · X) of 40 rows give every row the same bits
 * on 1 thread as on 3 (each thread a slice of rows: none, 16 and 24, no slice of fewer than 16)
 * and as in two calls of 16 and 24 rows (kernels/cpu/matmul.c: from 16 rows on, a row's bits do
 * not depend on its call), with OpenBLAS and with oneDNN's AVX-512 kernels; oneDNN's AVX2 ones
 * give a row other bits in calls of other sizes (skipped, with a line). */
static void check_gemm_row_bits(void) {
    const int saved = pelab_threads_get();
    enum { M = 40, N = 96, K = 80, SPLIT = 16 };
#if defined(PELAB_BLAS) && defined(PELAB_DNNL) && !defined(PELAB_DOUBLE)
    const int row_bits = strncmp(pelab_dnnl_isa(), "AVX-512", 7) == 0;
    if (!row_bits) printf("  a row's bits whatever its call: skipped (oneDNN runs %s kernels)\n", pelab_dnnl_isa());
#else
    const int row_bits = 1;
#endif
    for (int kind = 0; row_bits && kind < 3; kind++) {
        const int ta = kind == 2, tb = kind == 0;
        const int m = ta ? N : M, k = ta ? M : K; /* dY^T X: rows of C are columns of dY (M, N) */
        const int lda = ta ? m : k, ldb = tb ? k : N;
        pelab_real *A = rvec((long)m * k, -1, 1), *B = rvec((long)k * N, -1, 1);
        pelab_real *C[3];
        for (int v = 0; v < 3; v++) C[v] = rvec((long)m * N, -1, 1);
        pelab_threads_set(1);
        pelab_gemm(test_ctx(), ta, tb, m, N, k, 1, A, lda, B, ldb, 0, C[0], N);
        pelab_gemm(test_ctx(), ta, tb, SPLIT, N, k, 1, A, lda, B, ldb, 0, C[1], N);
        pelab_gemm(test_ctx(), ta, tb, m - SPLIT, N, k, 1, ta ? A + SPLIT : A + (long)SPLIT * lda, lda, B, ldb, 0,
                   C[1] + (long)SPLIT * N, N);
        pelab_threads_set(3);
        pelab_gemm(test_ctx(), ta, tb, m, N, k, 1, A, lda, B, ldb, 0, C[2], N);
        CHECK(pelab_gemm_take_failure(test_ctx()) == PELAB_OK, "gemm failed: %s", pelab_last_error());
        CHECK(memcmp(C[0], C[1], (size_t)m * N * sizeof **C) == 0,
              "gemm trans %d%d: rows in calls of %d and %d rows differ from one call of %d", ta, tb, SPLIT,
              m - SPLIT, m);
        CHECK(memcmp(C[0], C[2], (size_t)m * N * sizeof **C) == 0,
              "gemm trans %d%d: 3 threads differ from 1", ta, tb);
        free(A), free(B);
        for (int v = 0; v < 3; v++) free(C[v]);
    }
#if defined(PELAB_BLAS) && defined(PELAB_DNNL) && !defined(PELAB_DOUBLE)
    /* a product oneDNN refuses (A's stride below its width) fills C with NaN and is kept as the
     * context's failure, with oneDNN's status */
    pelab_real *A = rvec(4 * 8, -1, 1), *B = rvec(8 * 4, -1, 1), *C = rvec(4 * 4, -1, 1);
    pelab_gemm(test_ctx(), 0, 0, 4, 4, 8, 1, A, 2, B, 4, 0, C, 4);
    const int rc = pelab_gemm_take_failure(test_ctx());
    CHECK(rc == PELAB_ERR_RUNTIME && strstr(pelab_last_error(), "oneDNN's sgemm failed") && isnan(C[0]) &&
              isnan(C[15]),
          "a refused product: status %d, '%s', C[0] %g", rc, pelab_last_error(), (double)C[0]);
    pelab_clear_error();
    free(A), free(B), free(C);
    CHECK(strncmp(pelab_sgemm_kernels(), "oneDNN ", 7) == 0, "float32 products: %s", pelab_sgemm_kernels());
#endif
    pelab_threads_set(saved);
}

/* --- subnormals ---------------------------------------------------------------------------------- */
/* pelab_threads_set sets every thread of the pool to flush subnormals (on x86-64), each of 3
 * threads then computes 1e-30 · 1e-10 as 0 and reads a subnormal input as 0; with
 * PELAB_SUBNORMALS=keep each keeps the IEEE result. Elsewhere: skipped, with a line. */
static void check_subnormals(void) {
#if defined(__x86_64__) || defined(__SSE__)
    const int saved = pelab_threads_get();
    for (int keep = 0; keep < 2; keep++) {
        if (keep) setenv("PELAB_SUBNORMALS", "keep", 1);
        pelab_threads_set(3);
        int flushed = 0, zero_products = 0, zero_inputs = 0, threads = 0;
#pragma omp parallel reduction(+ : flushed, zero_products, zero_inputs, threads)
        {
            volatile float tiny = 1e-30f, small = 1e-10f, sub = 1e-40f, one = 1.0f;
            flushed += pelab_subnormals_flushed();
            zero_products += tiny * small == 0.0f;
            zero_inputs += sub * one == 0.0f; /* DAZ: the subnormal operand is read as 0 */
            threads++;
        }
        const int want = keep ? 0 : threads;
        CHECK(flushed == want && zero_products == want && zero_inputs == want,
              "subnormals %s on %d threads: %d flushed, %d zero products, %d zero inputs (want %d)",
              keep ? "kept" : "flushed", threads, flushed, zero_products, zero_inputs, want);
    }
    unsetenv("PELAB_SUBNORMALS");
    pelab_threads_set(saved);
    CHECK(pelab_subnormals_flushed(), "subnormals not flushed again after PELAB_SUBNORMALS was unset");
#else
    printf("  subnormals: no MXCSR on this CPU, skipped\n");
#endif
}

/* The check after each update (pelab_describe_params): nothing said while every weight and AdamW
 * moment is finite, however large; the first ±∞ or NaN named wherever it sits, in either
 * parameter, in each of the three arrays, in the first, a middle and the last of the parallel
 * blocks the scan splits them into. */
static void check_finite_scan(void) {
    struct pelab_params p = {0};
    const int64_t s1[1] = {37}, s2[1] = {200003};
    pelab_params_declare(&p, "gain", 1, s1, 0);
    pelab_params_declare(&p, "w", 1, s2, 1);
    PELAB_ASSERT(pelab_params_alloc(&p) == PELAB_OK);
    const long n = (long)p.total;
    pelab_real *arrays[3] = {p.data, p.m, p.v};
    static const char *const what[3] = {"weight", "AdamW first moment", "AdamW second moment"};
    for (int k = 0; k < 3; k++)
        for (long i = 0; i < n; i++)
            arrays[k][i] = i % 3 == 1 ? (pelab_real)-0.0
                         : i % 3 == 2 ? (pelab_real)uniform(-1, 1)
                                      : (pelab_real)(i % 2 ? -1 : 1) * (sizeof(pelab_real) == 8 ? 1e300 : 3e38);
    char buf[256] = "";
    CHECK(pelab_describe_params(&p, buf, sizeof buf) == 0 && buf[0] == '\0',
          "%s finite scan: finite weights and moments reported as '%s'", level_name, buf);
    const long at[] = {0, 36, 37, 37 + 5000, n / 2, n - 1};
    const double bad[] = {INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 3; k++)
        for (size_t a = 0; a < sizeof at / sizeof at[0]; a++)
            for (int b = 0; b < 3; b++) {
                const pelab_real keep = arrays[k][at[a]];
                arrays[k][at[a]] = (pelab_real)bad[b];
                char want[256];
                snprintf(want, sizeof want, "first non-finite %s: %s[%ld] = %s", what[k], at[a] < 37 ? "gain" : "w",
                         at[a] < 37 ? at[a] : at[a] - 37, b == 0 ? "inf" : b == 1 ? "-inf" : "nan");
                buf[0] = '\0';
                const int found = pelab_describe_params(&p, buf, sizeof buf);
                CHECK(found == 1 && strcmp(buf, want) == 0, "%s finite scan: %g at %s[%ld]: %d, '%s', want '%s'",
                      level_name, bad[b], what[k], at[a], found, buf, want);
                arrays[k][at[a]] = keep;
            }
    pelab_params_free(&p);
}

int main(void) {
    check_subnormals();
    int levels = 0;
    for (int l = 0; l < PELAB_SIMD_LEVELS; l++) {
        if (!pelab_simd_supported((enum pelab_simd_level)l)) {
            printf("  %-8s not supported here: skipped\n", pelab_simd_name((enum pelab_simd_level)l));
            continue;
        }
        pelab_simd_force((enum pelab_simd_level)l);
        level_name = pelab_simd_name((enum pelab_simd_level)l);
        const int before = check_failures;
        check_rmsnorm();
        check_gelu();
        check_crossentropy();
        check_pope(1);
        check_pope(0);
        check_rope(0);
        check_rope(1);
        check_adamw();
        check_finite_scan();
        check_generation_products(1);
        check_generation_products(0);
        check_attention(); /* the tiled kernel's tile loops at this level */
        printf("  %-8s %s\n", level_name, check_failures == before ? "all kernels agree" : "FAILED");
        levels++;
    }
    CHECK(levels > 0, "no SIMD level ran");
    level_name = "blas";
    check_gemm_few_rows();
    check_gemm_row_bits();
    return check_report(sizeof(pelab_real) == 8 ? "test_kernels" : "test_kernels_f32");
}
