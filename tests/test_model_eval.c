/* The evaluation-only forward (pelab_model_forward_eval) against the training forward, double
 * build: for every registered encoding under each setting of its contract (lib/models.h) and both
 * attention kernels (a 2-D encoding in a patch
 * model on a 3 × 3 grid, bidirectional, as the image task builds it), over one chunk and over
 * several, the same loss and per-position losses (to 1e-12), the argmax of the training logits
 * and its softmax probability; the training activations untouched; positions beyond a table
 * (an encoding whose contract names its reach) refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/models.h"
#include "lib/toy_site.h"
#include "nn/forward.h"
#include "pelab/model.h"
#include "pelab/rng.h"
#include "pelab/status.h"

enum { V = 11, B = 2, T = 9, BT = B * T, P = 3 };

/* A model of case c (a 2-D case: a patch model of input width P on a 3 × 3 grid, bidirectional,
 * as the image task builds it) with the given attention kernel. */
static int make_model(struct pelab_model *m, const struct pe_case *c, const char *attention) {
    const char *const kernel[] = {"attention", attention, NULL};
    const int patches = c->layout.dims == 2;
    const struct pelab_model_io io = {patches ? P : 0, c->layout};
    return test_model(m, c->opts, kernel, V, T + 2, &io, 3, 0.3) == PELAB_OK; /* room for the shifted row */
}

static void check_encoding(const struct pe_case *c, const char *attention, long rows) {
    const char *pe = c->label;
    const int patches = c->layout.dims == 2;
    struct pelab_model m;
    if (!make_model(&m, c, attention)) {
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
    pelab_model_forward(&m, tokens, targets, pos, B, T);
    const double loss = m.loss;
    const int n_targets = m.n_targets;
    static double logits[BT * V], losses[BT];
    memcpy(logits, pelab_model_logits(&m), sizeof logits);
    memcpy(losses, pelab_model_losses(&m), sizeof losses);

    struct pelab_ctx ctx; /* the evaluation's chunks of `rows` positions */
    pelab_ctx_init(&ctx);
    ctx.eval_rows = rows;
    pelab_model_set_ctx(&m, &ctx);
    pelab_model_forward_eval(&m, tokens, targets, pos, B, T);
    const double eloss = m.loss;
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
    CHECK(pelab_model_forward_eval(&m, tokens, NULL, pos, B, T) == PELAB_OK && m.loss == -1,
          "%s: loss without targets", pe);
    printf("  %-40s %-5s rows %2ld  loss %.12f  |Δ| %.2g\n", pe, attention, rows, eloss, fabs(eloss - loss));
    pelab_model_free(&m);
}

/* An encoding whose positions end (its contract names the option that sets how far: a table)
 * refuses positions past its end in the evaluation forward: a usage error, the loss NaN. */
static void check_refusal(struct pe_case *c, void *refusals) {
    if (!c->ops->contract.reach) return;
    struct pelab_model m;
    PELAB_ASSERT(make_model(&m, c, "tiled"));
    int32_t tokens[BT] = {0}, pos[BT];
    for (int i = 0; i < BT; i++) pos[i] = i; /* the second row runs past T + 2 */
    pelab_model_forward_eval(&m, tokens, NULL, pos, B, T);
    pelab_real l = m.loss;
    CHECK(isnan(l) && m.status == PELAB_ERR_USAGE, "%s beyond its table: loss %g, status %d", c->label,
          (double)l, m.status);
    ++*(int *)refusals;
    pelab_model_free(&m);
}

static void check_case(struct pe_case *c, void *unused) {
    for (int k = 0; k < 2; k++) {
        check_encoding(c, k ? "ref" : "tiled", 0); /* one chunk */
        check_encoding(c, k ? "ref" : "tiled", 5); /* four, the last short */
    }
}

int main(void) {
    CHECK(toy_site_register() == PELAB_OK, "%s", pelab_last_error()); /* a site of a test's own too */
    for_each_pe_case(&(struct pe_walk){PE_TEXT | PE_IMAGE, 0, 3, NULL}, check_case, NULL);
    int refusals = 0;
    for_each_pe_case(&(struct pe_walk){PE_TEXT, PE_TEXT, 0, NULL}, check_refusal, &refusals);
    CHECK(refusals > 0, "no encoding declares how far its positions reach: the refusal was not tested");
    return check_report("test_model_eval");
}
