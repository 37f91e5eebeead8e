/* Properties the model must have whatever its weights, for every case of the one list
 * (lib/models.h: each registered encoding that serves 1-D positions, with its defaults and each
 * setting of its contract): one that declares itself relative (PELAB_PE_RELATIVE) ignores a global
 * shift of its positions by 1000 and more, and one that does not sees it; outputs at t never see
 * tokens after t; padding a batch changes nothing; a seed fixes every bit. Where an encoding's
 * computation follows the extent of the pass (its cache_check refuses a longer one: dynamic NTK,
 * LongRoPE's long factors, the learned table's interpolation), the shift and the padding are not
 * its properties, and it is said. RoPE's norms and PoPE's closed form: test_posenc.
 * Double build. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/models.h"
#include "pelab/model.h"
#include "pelab/status.h"
#include "pelab/task.h"

enum { V = 11, B = 2, T = 9 };

/* The case's model with larger weights than the init, so positions matter a lot to the logits. */
static void make_model(struct pelab_model *m, const struct pe_case *c) {
    PELAB_ASSERT(test_model(m, c->opts, NULL, V, T, NULL, 7, 0.3) == PELAB_OK);
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

/* Shifting every position by a constant: relative encodings unchanged, NoPE trivially so; the
 * others see it. A table that ends is given positions past 1000 (contract.reach); an encoding that
 * refuses them still (digits too few) says so, a usage error. */
static void check_shift(struct pe_case *c) {
    enum { SHIFT = 1000, ROW = 13 };
    pe_case_fit(c, T, 2048);
    struct pelab_model m;
    make_model(&m, c);
    const int relative = (c->ops->contract.promises & PELAB_PE_RELATIVE) != 0;
    int32_t pos[B * T], shifted[B * T];
    for (int i = 0; i < B * T; i++) pos[i] = i % T, shifted[i] = i % T + SHIFT + ROW * (i / T);
    pelab_real a[B * T * V], b[B * T * V];
    forward_logits(&m, tokens, pos, a);
    pelab_model_forward(&m, tokens, NULL, shifted, B, T);
    if (m.status == PELAB_ERR_USAGE) {
        CHECK(*pelab_last_error(), "%s: shifted positions refused without a message", c->label);
        printf("  shift invariance %-40s refuses positions past %d: %s\n", c->label, SHIFT, pelab_last_error());
    } else if (!relative || pe_extent_free(&m.pe, c->label, SHIFT + ROW + T, "shift invariance")) {
        memcpy(b, pelab_model_logits(&m), sizeof b);
        double d = max_diff(a, b, B * T * V);
        if (relative)
            CHECK(d < 1e-9, "%s: logits changed by %.3g under a position shift", c->label, d);
        else
            CHECK(d > 1e-3, "%s: absolute encoding should see the shift", c->label);
        printf("  shift invariance %-40s max |Δlogit| %.3g\n", c->label, d);
    }
    pelab_model_free(&m);
}

/* Changing the token at t+1 (and after) leaves every output at ≤ t exactly as it was. */
static void check_causality(const struct pe_case *c) {
    const char *pe = c->label;
    struct pelab_model m;
    make_model(&m, c);
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
 * logits at every real position (a table that ends is given the padded length). */
static void check_padding(struct pe_case *c) {
    const char *pe = c->label;
    struct pelab_task task;
    PELAB_ASSERT(pelab_task_init(&task, "indirect", NULL) == PELAB_OK);
    const int n = 6, T0 = task.seq_len, T1 = task.seq_len + 11;
    pe_case_fit(c, task.seq_len, T1);
    struct pelab_model m;
    PELAB_ASSERT(test_model(&m, c->opts, NULL, task.vocab, task.seq_len, NULL, 3, 0) == PELAB_OK);
    if (!pe_extent_free(&m.pe, c->label, T1, "padding")) {
        pelab_model_free(&m);
        pelab_task_free(&task);
        return;
    }
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
static void check_seed(const struct pe_case *c) {
    struct pelab_model a, b;
    make_model(&a, c);
    make_model(&b, c);
    CHECK(memcmp(a.params.data, b.params.data, a.params.total * sizeof(pelab_real)) == 0,
          "%s: same seed gave different parameters", c->label);
    int32_t pos[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) pos[i] = i % T, targets[i] = (tokens[i] + 1) % V;
    pelab_model_forward(&a, tokens, targets, pos, B, T);
    double la = a.loss;
    pelab_model_forward(&b, tokens, targets, pos, B, T);
    double lb = b.loss;
    CHECK(la == lb, "%s: same seed gave different losses", c->label);
    pelab_model_init_weights(&b, 8);
    CHECK(memcmp(a.params.data, b.params.data, a.params.total * sizeof(pelab_real)) != 0,
          "%s: different seeds gave the same parameters", c->label);
    pelab_model_free(&a);
    pelab_model_free(&b);
}

static void check_case(struct pe_case *c, void *count) {
    check_shift(c);
    check_causality(c);
    check_padding(c);
    check_seed(c);
    ++*(int *)count;
}

int main(void) {
    int n = 0;
    for_each_pe_case(&(struct pe_walk){PE_TEXT, 0, 0, NULL}, check_case, &n);
    CHECK(n > 0, "no encoding of 1-D positions is registered");
    printf("%d cases\n", n);
    return check_report("test_properties");
}
