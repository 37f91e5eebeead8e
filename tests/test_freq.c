/* Frequency usage (pelab/freq.h): the means equal the magnitudes computed here from the weights
 * (layer 0: q, k = RMSNorm(E[tok])·W^T; RoPE pairs in both layouts, xPos, PoPE's softplus μ and
 * its |x| without softplus), only kept positions count, doubling a layer's W_q doubles that layer's
 * query norms and nothing below it, the frequencies are the encodings', and an encoding without
 * frequencies is refused by name. Double build. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/models.h"
#include "pelab/freq.h"
#include "pelab/model.h"
#include "pelab/status.h"

enum { V = 13, B = 2, T = 7, D = 16, H = 2, d = D / H, N = 3 };

static const int32_t tokens[B * T] = {1, 4, 2, 9, 3, 12, 7, 0, 5, 10, 2, 6, 11, 8};
/* positions that count: the rest stand for padding */
static const unsigned char keep[B * T] = {1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0};

/* 3 layers of `pe` (and k = v if k), weights well away from the init's scale, gains other than 1 */
static void make_model(struct pelab_model *m, const char *pe, const char *k, const char *v) {
    const char *const opts[] = {"layers", "3", "pe", pe, k, v, NULL};
    PELAB_ASSERT(test_model(m, opts, NULL, V, T, NULL, 3, 0.4) == PELAB_OK);
}

static void forward(struct pelab_model *m) {
    int32_t pos[B * T];
    for (int i = 0; i < B * T; i++) pos[i] = i % T;
    pelab_model_forward(m, tokens, NULL, pos, B, T);
    PELAB_ASSERT(m->status == PELAB_OK);
}

/* Magnitude of frequency c in head vector x (d,), written from the encodings' definitions. */
static double magnitude(const char *kind, const double *x, int c) {
    if (!strcmp(kind, "interleaved")) return hypot(x[2 * c], x[2 * c + 1]);
    if (!strcmp(kind, "half")) return hypot(x[c], x[c + d / 2]);
    if (!strcmp(kind, "softplus")) return log1p(exp(x[c]));
    return fabs(x[c]); /* PoPE without softplus */
}

/* Layer 0's means from the weights: x0 = E[tok], a = g ⊙ x0 / sqrt(mean(x0²) + 1e-5), q = a·Wq^T,
 * k = a·Wk^T, magnitudes averaged over kept tokens and heads. */
static void layer0_means(const struct pelab_model *m, const char *kind, int F, double *qm, double *km) {
    const pelab_real *E = pelab_params_data(&m->params, pelab_params_find(&m->params, "tok_emb.weight"));
    const pelab_real *g = pelab_params_data(&m->params, pelab_params_find(&m->params, "blocks.0.attn_norm.weight"));
    const pelab_real *W = pelab_params_data(&m->params, pelab_params_find(&m->params, "blocks.0.attn.qkv.weight"));
    memset(qm, 0, (size_t)F * sizeof *qm);
    memset(km, 0, (size_t)F * sizeof *km);
    int counted = 0;
    for (int i = 0; i < B * T; i++) {
        if (!keep[i]) continue;
        counted++;
        const pelab_real *x = E + (long)tokens[i] * D;
        double ms = 0, a[D], q[D], k[D];
        for (int j = 0; j < D; j++) ms += (double)x[j] * x[j];
        for (int j = 0; j < D; j++) a[j] = g[j] * x[j] / sqrt(ms / D + 1e-5);
        for (int r = 0; r < D; r++) {
            q[r] = k[r] = 0;
            for (int j = 0; j < D; j++) q[r] += W[r * D + j] * a[j], k[r] += W[(D + r) * D + j] * a[j];
        }
        for (int h = 0; h < H; h++)
            for (int c = 0; c < F; c++) qm[c] += magnitude(kind, q + h * d, c), km[c] += magnitude(kind, k + h * d, c);
    }
    for (int c = 0; c < F; c++) qm[c] /= counted * H, km[c] /= counted * H;
}

/* The means of layer 0 against the weights, the frequencies against the formula, and the
 * count of tokens. */
static void check_encoding(const char *pe, const char *k, const char *v, const char *kind, int F, double freq_exp) {
    struct pelab_model m;
    make_model(&m, pe, k, v);
    struct pelab_freq f;
    CHECK(pelab_freq_init(&f, &m) == PELAB_OK, "%s: init: %s", pe, pelab_last_error());
    CHECK(f.n_freqs == F && f.n_layers == N, "%s %s: %d frequencies, %d layers", pe, kind, f.n_freqs, f.n_layers);
    for (int c = 0; c < F; c++) CHECK_CLOSE(f.theta[c], pow(10000, -freq_exp * c / d), 0, 1e-12, "θ_c");
    forward(&m);
    pelab_freq_add(&f, &m, keep);
    CHECK(f.tokens == 11, "%s: %llu tokens counted, expected the 11 kept", pe, (unsigned long long)f.tokens);
    double qm[d], km[d], worst = 0;
    layer0_means(&m, kind, F, qm, km);
    for (int c = 0; c < F; c++) {
        CHECK_CLOSE(pelab_freq_query(&f, 0, c), qm[c], 1e-12, 1e-9, "layer 0 query magnitude");
        CHECK_CLOSE(pelab_freq_key(&f, 0, c), km[c], 1e-12, 1e-9, "layer 0 key magnitude");
        worst = fmax(worst, fabs(pelab_freq_query(&f, 0, c) - qm[c]));
        for (int l = 0; l < N; l++)
            CHECK(pelab_freq_query(&f, l, c) >= 0 && isfinite(pelab_freq_key(&f, l, c)), "%s: layer %d", pe, l);
    }
    /* adding the same pass again changes no mean; all positions (keep NULL) change them */
    double before = pelab_freq_query(&f, 2, 1);
    pelab_freq_add(&f, &m, keep);
    CHECK_CLOSE(pelab_freq_query(&f, 2, 1), before, 0, 1e-12, "mean after adding the same pass twice");
    pelab_freq_add(&f, &m, NULL);
    CHECK(f.tokens == 22 + B * T && pelab_freq_query(&f, 2, 1) != before, "keep NULL counts every position");
    printf("  %-5s %-12s F %2d  layer-0 means match the weights (max |Δ| %.2g)\n", pe, kind, F, worst);
    pelab_freq_free(&f);
    pelab_model_free(&m);
}

/* Doubling W_q of layer 1 doubles layer 1's query magnitudes (RoPE's pair norms are
 * homogeneous), keeps its keys and everything of layer 0. */
static void check_scaling(void) {
    struct pelab_model m;
    make_model(&m, "rope", NULL, NULL);
    struct pelab_freq a, b;
    PELAB_ASSERT(pelab_freq_init(&a, &m) == PELAB_OK && pelab_freq_init(&b, &m) == PELAB_OK);
    forward(&m);
    pelab_freq_add(&a, &m, keep);
    pelab_real *W = pelab_params_data(&m.params, pelab_params_find(&m.params, "blocks.1.attn.qkv.weight"));
    for (int i = 0; i < D * D; i++) W[i] *= 2; /* rows 0..D-1: the queries */
    forward(&m);
    pelab_freq_add(&b, &m, keep);
    for (int c = 0; c < d / 2; c++) {
        CHECK_CLOSE(pelab_freq_query(&b, 1, c), 2 * pelab_freq_query(&a, 1, c), 0, 1e-12, "2·W_q: layer 1 queries double");
        CHECK_CLOSE(pelab_freq_key(&b, 1, c), pelab_freq_key(&a, 1, c), 0, 1e-12, "2·W_q: layer 1 keys stay");
        CHECK_CLOSE(pelab_freq_query(&b, 0, c), pelab_freq_query(&a, 0, c), 0, 1e-12, "2·W_q: layer 0 stays");
    }
    printf("  rope  2·W_q of layer 1 doubles its query norms only\n");
    pelab_freq_free(&a);
    pelab_freq_free(&b);
    pelab_model_free(&m);
}

/* An encoding without frequencies (every one of 1-D positions whose table has no freqs, lib/models.h)
 * is refused, naming those with. */
static void check_refusal(struct pe_case *c, void *count) {
    if (c->ops->freqs) return;
    const char *pe = c->ops->name;
    struct pelab_model m;
    make_model(&m, pe, NULL, NULL);
    struct pelab_freq f;
    int rc = pelab_freq_init(&f, &m);
    const char *msg = pelab_last_error();
    int named = 1;
    for (const struct pelab_posenc_ops *const *e = pelab_posenc_all(); *e; e++)
        if ((*e)->freqs && !strstr(msg, (*e)->name)) named = 0;
    CHECK(rc == PELAB_ERR_USAGE && strstr(msg, pe) && named, "%s: rc %d, '%s'", pe, rc, msg);
    pelab_model_free(&m);
    ++*(int *)count;
}

int main(void) {
    check_encoding("rope", NULL, NULL, "interleaved", d / 2, 2);
    check_encoding("rope", "rope-layout", "half", "half", d / 2, 2);
    check_encoding("xpos", NULL, NULL, "interleaved", d / 2, 2);
    check_encoding("pope", NULL, NULL, "softplus", d, 1);
    check_encoding("pope", "pope-softplus", "off", "abs", d, 1);
    check_scaling();
    int n = 0;
    for_each_pe_case(&(struct pe_walk){PE_TEXT, PE_TEXT, 0, NULL}, check_refusal, &n);
    CHECK(n > 0, "every registered encoding has frequencies: the refusal was not tested");
    return check_report("test_freq");
}
