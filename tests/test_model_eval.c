/* The evaluation-only forward (pelab_model_forward_eval) against the training forward, double
 * build: for every registered encoding and both attention kernels (a 2-D encoding in a patch
 * model on a 3 × 3 grid, bidirectional, as the image task builds it), over one chunk and over
 * several, the same loss and per-position losses (to 1e-12), the argmax of the training logits
 * and its softmax probability; the training activations untouched; the same refusal of positions
 * beyond a learned table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "nn/model_eval.h"
#include "pelab/model.h"
#include "pelab/rng.h"
#include "pelab/status.h"

enum { V = 11, B = 2, T = 9, BT = B * T, P = 3 };

/* patches: a patch model of input width P with (row, column) positions on a 3 × 3 grid. */
static int make_model(struct pelab_model *m, const char *pe, const char *attention, int patches) {
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "pe", pe);
    pelab_opts_set(&o, "d-model", "16");
    pelab_opts_set(&o, "heads", "2");
    pelab_opts_set(&o, "layers", "2");
    pelab_opts_set(&o, "attention", attention);
    const struct pelab_model_io io = {patches ? P : 0, {patches ? 2 : 1, patches, patches ? 3 : 0}};
    if (pelab_model_init_io(m, &o, V, T + 2, &io) != PELAB_OK) return 0; /* room for the shifted row */
    pelab_model_init_weights(m, 3);
    /* every parameter away from its init (zero tables, unit gains, zero δ) */
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 4);
    for (size_t i = 0; i < m->params.total; i++)
        m->params.data[i] += (pelab_real)(0.3 * pelab_rng_normal(&rng));
    return 1;
}

static void check_encoding(const char *pe, const char *attention, long rows, int patches) {
    struct pelab_model m;
    if (!make_model(&m, pe, attention, patches)) {
        CHECK(0, "%s: %s", pe, pelab_last_error());
        return;
    }
    int32_t tokens[BT], targets[BT], pos[2 * BT];
    static double in[BT * P];
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 5);
    for (int i = 0; i < BT; i++) {
        tokens[i] = (int32_t)pelab_rng_below(&rng, V);
        targets[i] = i % 4 == 1 ? -1 : (int32_t)pelab_rng_below(&rng, V);
        if (!patches) {
            pos[i] = i % T + 2 * (i / T); /* the second row shifted, as a packed batch may be */
            continue;
        }
        const int t = i % T, q = t - 1 + (i / T); /* the second row's grid shifted by one cell */
        pos[2 * i] = t ? 1 + q / 3 : 0, pos[2 * i + 1] = t ? 1 + q % 3 : 0;
        for (int j = 0; j < P; j++) in[i * P + j] = pelab_rng_normal(&rng);
    }
    if (patches) pelab_model_set_inputs(&m, in);
    const double loss = pelab_model_forward(&m, tokens, targets, pos, B, T);
    const int n_targets = m.n_targets;
    static double logits[BT * V], losses[BT];
    memcpy(logits, pelab_model_logits(&m), sizeof logits);
    memcpy(losses, pelab_model_losses(&m), sizeof losses);

    pelab_model_eval_set_rows(rows);
    const double eloss = pelab_model_forward_eval(&m, tokens, targets, pos, B, T);
    CHECK(m.status == PELAB_OK, "%s %s: eval forward failed: %s", pe, attention, pelab_last_error());
    CHECK(fabs(eloss - loss) <= 1e-12 && isfinite(eloss), "%s %s rows %ld: loss %.17g, training %.17g",
          pe, attention, rows, eloss, loss);
    CHECK(m.n_targets == n_targets, "%s: %d targets, training %d", pe, m.n_targets, n_targets);
    const pelab_real *el = pelab_model_eval_losses(&m), *prob = pelab_model_eval_pred_prob(&m);
    const int32_t *pred = pelab_model_eval_pred(&m);
    double worst = 0, worst_p = 0;
    int wrong = 0;
    for (int i = 0; i < BT; i++) {
        worst = fmax(worst, fabs(el[i] - losses[i]));
        const double *z = logits + (long)i * V;
        int best = 0;
        double sum = 0;
        for (int v = 1; v < V; v++)
            if (z[v] > z[best]) best = v;
        for (int v = 0; v < V; v++) sum += exp(z[v] - z[best]);
        wrong += pred[i] != best;
        worst_p = fmax(worst_p, fabs(prob[i] - 1 / sum));
    }
    CHECK(worst <= 1e-12, "%s %s: per-position losses differ by %.3g", pe, attention, worst);
    CHECK(wrong == 0, "%s %s: %d predictions differ from the argmax of the logits", pe, attention, wrong);
    CHECK(worst_p <= 1e-12, "%s %s: probability of the prediction off by %.3g", pe, attention, worst_p);
    /* the training forward's activations are its own */
    CHECK(memcmp(logits, pelab_model_logits(&m), sizeof logits) == 0, "%s: eval changed the logits", pe);
    /* without targets: -1, as the training forward */
    CHECK(pelab_model_forward_eval(&m, tokens, NULL, pos, B, T) == -1, "%s: loss without targets", pe);
    printf("  %-10s %-5s rows %2ld  loss %.12f  |Δ| %.2g\n", pe, attention, rows, eloss, fabs(eloss - loss));
    pelab_model_free(&m);
}

/* A learned table refuses positions past its end in both forwards, with the same status. */
static void check_refusal(void) {
    struct pelab_model m;
    PELAB_ASSERT(make_model(&m, "learned", "tiled", 0));
    int32_t tokens[BT] = {0}, pos[BT];
    for (int i = 0; i < BT; i++) pos[i] = i; /* the second row runs past T + 2 */
    pelab_real l = pelab_model_forward_eval(&m, tokens, NULL, pos, B, T);
    CHECK(isnan(l) && m.status == PELAB_ERR_USAGE, "learned beyond its table: loss %g, status %d",
          (double)l, m.status);
    pelab_model_free(&m);
}

int main(void) {
    for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p; p++)
        for (int n = 1; n <= 2; n++) {
            if (!pelab_posenc_serves(*p, n)) continue;
            for (int k = 0; k < 2; k++) {
                check_encoding((*p)->name, k ? "ref" : "tiled", 0, n == 2);  /* one chunk */
                check_encoding((*p)->name, k ? "ref" : "tiled", 5, n == 2);  /* four, the last short */
            }
        }
    pelab_model_eval_set_rows(0);
    check_refusal();
    return check_report("test_model_eval");
}
