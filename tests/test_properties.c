/* Properties the model must have whatever its weights: relative encodings (RoPE, PoPE, xPos,
 * whose decay ζ^((t−s)/γ_s) is relative too) ignore a global position shift and absolute ones
 * (learned, sinusoidal) do not, outputs at t never see tokens after t, padding changes nothing,
 * a seed fixes every bit, RoPE preserves norms, and PoPE's score is Σ μq μk cos((t−s)θ − δ).
 * Double build. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/models.h"
#include "pelab/model.h"
#include "pelab/status.h"
#include "pelab/task.h"

enum { V = 11, B = 2, T = 9 };

/* Encoding `pe` (and k = v if k) with larger weights than the init, so positions matter a lot
 * to the logits. */
static void make_model(struct pelab_model *m, const char *pe, const char *k, const char *v) {
    PELAB_ASSERT(test_model(m, (const char *const[]){"pe", pe, k, v, NULL}, NULL, V, T, NULL, 7, 0.3) == PELAB_OK);
}

static double max_diff(const pelab_real *a, const pelab_real *b, long n) {
    double d = 0;
    for (long i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static const int32_t tokens[B * T] = {1, 4, 2, 9, 3, 3, 7, 0, 5, 10, 2, 6, 6, 1, 8, 2, 4, 3};

static void forward_logits(struct pelab_model *m, const int32_t *tok, const int32_t *pos, pelab_real *out) {
    pelab_model_forward(m, tok, NULL, pos, B, T);
    memcpy(out, pelab_model_logits(m), sizeof(pelab_real) * B * T * V);
}

/* Shifting every position by a constant: relative encodings unchanged, NoPE trivially so. */
static void check_shift(const char *pe, const char *k, const char *v, int relative) {
    struct pelab_model m;
    make_model(&m, pe, k, v);
    int32_t pos[B * T], shifted[B * T];
    for (int i = 0; i < B * T; i++) pos[i] = i % T, shifted[i] = i % T + 1000 + 13 * (i / T);
    pelab_real a[B * T * V], b[B * T * V];
    forward_logits(&m, tokens, pos, a);
    forward_logits(&m, tokens, shifted, b);
    double d = max_diff(a, b, B * T * V);
    if (relative)
        CHECK(d < 1e-9, "%s %s: logits changed by %.3g under a position shift", pe, v ? v : "", d);
    else
        CHECK(d > 1e-3, "%s: absolute encoding should see the shift", pe);
    printf("  shift invariance %-6s %-12s max |Δlogit| %.3g\n", pe, v ? v : "", d);
    pelab_model_free(&m);
}

/* Changing the token at t+1 (and after) leaves every output at ≤ t exactly as it was. */
static void check_causality(const char *pe) {
    struct pelab_model m;
    make_model(&m, pe, NULL, NULL);
    int32_t pos[B * T];
    for (int i = 0; i < B * T; i++) pos[i] = i % T;
    pelab_real a[B * T * V], b[B * T * V];
    forward_logits(&m, tokens, pos, a);
    for (int cut = 1; cut < T; cut++) {
        int32_t changed[B * T];
        memcpy(changed, tokens, sizeof changed);
        for (int bb = 0; bb < B; bb++)
            for (int t = cut; t < T; t++) changed[bb * T + t] = (changed[bb * T + t] + 5) % V;
        forward_logits(&m, changed, pos, b);
        double before = 0, after = 0;
        for (int bb = 0; bb < B; bb++)
            for (int t = 0; t < T; t++)
                for (int v = 0; v < V; v++) {
                    long i = ((long)bb * T + t) * V + v;
                    double d = fabs(a[i] - b[i]);
                    if (t < cut) before = fmax(before, d);
                    else after = fmax(after, d);
                }
        CHECK(before < 1e-12, "%s: changing tokens from %d changed earlier logits by %.3g", pe, cut, before);
        CHECK(after > 1e-6, "%s: changing tokens from %d changed nothing after it", pe, cut);
    }
    pelab_model_free(&m);
}

/* The same indirect-indexing batch padded to a longer T gives the same loss and the same
 * logits at every real position. */
static void check_padding(const char *pe) {
    struct pelab_task task;
    PELAB_ASSERT(pelab_task_init(&task, "indirect", NULL) == PELAB_OK);
    struct pelab_model m;
    PELAB_ASSERT(test_model(&m, (const char *const[]){"pe", pe, NULL}, NULL, task.vocab, task.seq_len, NULL, 3, 0) == PELAB_OK);
    const int n = 6, T0 = task.seq_len, T1 = task.seq_len + 11;
    struct pelab_batch b0, b1;
    pelab_batch_alloc(&b0, n, T0);
    pelab_batch_alloc(&b1, n, T1);
    task.ops->fill(&task, PELAB_SPLIT_VAL, 100, &b0);
    task.ops->fill(&task, PELAB_SPLIT_VAL, 100, &b1);
    pelab_model_forward(&m, b0.tokens, b0.targets, b0.pos, n, T0);
    double l0 = m.loss;
    pelab_real *keep = malloc(sizeof(pelab_real) * n * T0 * task.vocab);
    memcpy(keep, pelab_model_logits(&m), sizeof(pelab_real) * n * T0 * task.vocab);
    pelab_model_forward(&m, b1.tokens, b1.targets, b1.pos, n, T1);
    double l1 = m.loss;
    CHECK(fabs(l0 - l1) < 1e-12, "%s: padding changed the loss: %.17g vs %.17g", pe, l0, l1);
    double d = 0;
    for (int i = 0; i < n; i++)
        d = fmax(d, max_diff(keep + (long)i * T0 * task.vocab,
                             pelab_model_logits(&m) + (long)i * T1 * task.vocab, (long)T0 * task.vocab));
    CHECK(d < 1e-12, "%s: padding changed logits by %.3g", pe, d);
    free(keep);
    pelab_batch_free(&b0);
    pelab_batch_free(&b1);
    pelab_model_free(&m);
    pelab_task_free(&task);
}

/* Same seed → same parameters and loss, bit for bit; another seed → different. */
static void check_seed(void) {
    struct pelab_model a, b;
    make_model(&a, "pope", "pope-delta-init", "uniform");
    make_model(&b, "pope", "pope-delta-init", "uniform");
    CHECK(memcmp(a.params.data, b.params.data, a.params.total * sizeof(pelab_real)) == 0,
          "same seed gave different parameters");
    int32_t pos[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) pos[i] = i % T, targets[i] = (tokens[i] + 1) % V;
    pelab_model_forward(&a, tokens, targets, pos, B, T);
    double la = a.loss;
    pelab_model_forward(&b, tokens, targets, pos, B, T);
    double lb = b.loss;
    CHECK(la == lb, "same seed gave different losses");
    pelab_model_init_weights(&b, 8);
    CHECK(memcmp(a.params.data, b.params.data, a.params.total * sizeof(pelab_real)) != 0,
          "different seeds gave the same parameters");
    pelab_model_free(&a);
    pelab_model_free(&b);
}

int main(void) {
    check_shift("nope", NULL, NULL, 1);
    check_shift("rope", NULL, NULL, 1);
    check_shift("rope", "rope-layout", "half", 1);
    check_shift("pope", "pope-delta-init", "uniform", 1);
    check_shift("pope", "pope-softplus", "off", 1);
    check_shift("xpos", NULL, NULL, 1);
    check_shift("xpos", "xpos-scale-base", "16", 1);
    check_shift("rope", "rope-resonance", "on", 1);
    check_shift("learned", "ape-max-len", "2048", 0);
    check_shift("sinusoidal", NULL, NULL, 0);
    check_shift("seqpe", NULL, NULL, 0);                   /* absolute in every integration */
    check_shift("seqpe", "seqpe-mode", "attn-add", 0);
    check_shift("seqpe", "seqpe-mode", "attn-bias", 0);
    check_causality("nope");
    check_causality("rope");
    check_causality("pope");
    check_causality("learned");
    check_causality("sinusoidal");
    check_causality("xpos");
    check_causality("seqpe");
    check_padding("rope");
    check_padding("pope");
    check_padding("sinusoidal");
    check_padding("seqpe");
    check_seed();
    return check_report("test_properties");
}
