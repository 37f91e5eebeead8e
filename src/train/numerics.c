/* Non-finite values in training: what --on-nan does with them (stop, skip the update, or roll
 * back to the last checkpoint with a lower learning rate), the messages naming where they
 * appeared, and PELAB_TEST_NAN, the test-only injector that makes them on purpose.
 *
 * Skips and rollbacks are deterministic — a skipped update consumes its batches, a rollback
 * reloads a checkpoint and scales the learning rate by a factor the state records — so a run
 * that skipped or rolled back still resumes bit for bit. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/dist.h"
#include "pelab/status.h"
#include "train/run.h"

#define POISON_ENV "PELAB_TEST_NAN"

/* ---- the injector --------------------------------------------------------------------------- */

int pelab_poison_init(struct pelab_poison *p) {
    memset(p, 0, sizeof *p);
    const char *v = getenv(POISON_ENV);
    if (!v || !*v) return PELAB_OK;
    char site[16] = "", once[8] = "";
    long long step;
    int used = 0;
    int n = sscanf(v, "%lld:%15[a-z]%n:%7[a-z]%n", &step, site, &used, once, &used);
    int ok = n >= 2 && step >= 1 && (size_t)used == strlen(v) && (n == 2 || !strcmp(once, "once"));
    if (ok && !strcmp(site, "grad")) p->site = PELAB_POISON_GRAD;
    else if (ok && !strcmp(site, "weight")) p->site = PELAB_POISON_WEIGHT;
    else if (ok && !strcmp(site, "update")) p->site = PELAB_POISON_UPDATE;
    else
        return pelab_fail(PELAB_ERR_USAGE, POISON_ENV " (test-only): '%s' is not STEP:grad, "
                          "STEP:weight or STEP:update, optionally followed by :once", v);
    p->step = step;
    p->once = n == 3;
    return PELAB_OK;
}

void pelab_poison_apply(struct pelab_trainer *tr, enum pelab_poison_site site, int64_t step) {
    struct pelab_poison *p = &tr->poison;
    if (p->site != site || p->step != step || (p->once && p->fired)) return;
    p->fired = 1;
    struct pelab_params *P = &tr->model.params;
    if (site == PELAB_POISON_GRAD) {
        P->grad[0] = (pelab_real)NAN;
        return;
    }
    int i = pelab_params_find(P, "blocks.0.mlp.fc.weight");
    pelab_params_data(P, i >= 0 ? i : 0)[0] =
        (pelab_real)(site == PELAB_POISON_WEIGHT ? NAN : INFINITY);
}

/* ---- where ---------------------------------------------------------------------------------- */

void pelab_describe_grads(const struct pelab_params *p, char *buf, size_t size) {
    buf[0] = '\0';
    for (int i = 0; i < p->count; i++) {
        const pelab_real *g = pelab_params_grad(p, i);
        for (size_t j = 0; j < p->list[i].size; j++)
            if (!isfinite((double)g[j])) {
                snprintf(buf, size, "first non-finite gradient: %s[%zu] = %g", p->list[i].name, j,
                         pelab_printable((double)g[j]));
                return;
            }
    }
}

int pelab_describe_params(const struct pelab_params *p, char *buf, size_t size) {
    static const char *const what[3] = {"weight", "AdamW first moment", "AdamW second moment"};
    const pelab_real *base[3] = {p->data, p->m, p->v};
    const long n = (long)p->total;
    /* one vector pass each; the named scan below only when one holds a non-finite value */
    if (pelab_all_finite(p->data, n) && pelab_all_finite(p->m, n) && pelab_all_finite(p->v, n)) return 0;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < p->count; i++) {
            const pelab_real *x = base[k] + p->list[i].offset;
            for (size_t j = 0; j < p->list[i].size; j++)
                if (!isfinite((double)x[j])) {
                    snprintf(buf, size, "first non-finite %s: %s[%zu] = %g", what[k],
                             p->list[i].name, j, pelab_printable((double)x[j]));
                    return 1;
                }
        }
    return 0;
}

/* ---- what happens --------------------------------------------------------------------------- */

static void kept_text(const struct pelab_trainer *tr, char *buf, size_t size) {
    if (tr->saved_step >= 0)
        snprintf(buf, size, "the checkpoint of step %" PRId64 " is kept", tr->saved_step);
    else
        snprintf(buf, size, "no checkpoint was saved");
}

/* Rolls back to the newest valid checkpoint (step 0 when there is none yet), the learning rate
 * scaled once more. */
static int rollback(struct pelab_trainer *tr, const char *event) {
    double scale = tr->lr_scale * tr->c.nan_lr_factor;
    int64_t rollbacks = tr->nan_rollbacks + 1;
    const int root = tr->ctx->dist.rank == 0; /* rank 0 reads, then sends to the others */
    int found = 0, rc = PELAB_OK;
    if (root) {
        pelab_log_close(tr);
        rc = pelab_ckpt_restore(tr, &found);
    }
    if ((rc = pelab_trainer_sync(tr, rc, &found))) return rc;
    if (!found) pelab_trainer_fresh_start(tr);
    tr->saved_step = found ? tr->step : -1;
    tr->lr_scale = scale;
    tr->nan_rollbacks = rollbacks;
    tr->nan_skips = 0;
    if (root && (rc = pelab_log_open(tr, 0))) return rc; /* cut back to the restored step */
    pelab_train_notice(tr, "%s; rolled back to step %" PRId64 " with the learning rate scaled by "
                       "%g (rollback %" PRId64 " of at most %" PRId64 ")", event, tr->step, scale,
                       rollbacks, tr->c.nan_retries);
    return PELAB_OK;
}

int pelab_nan_handle(struct pelab_trainer *tr, int64_t update_no, const char *what,
                     const char *detail, int applied) {
    char event[768], kept[64];
    snprintf(event, sizeof event, "step %" PRId64 ": %s is not finite (%s)", update_no, what,
             detail);
    kept_text(tr, kept, sizeof kept);
    const struct pelab_train_config *c = &tr->c;
    switch (c->on_nan) {
    case PELAB_ON_NAN_STOP:
        break;
    case PELAB_ON_NAN_SKIP:
        if (applied)
            return pelab_fail(PELAB_ERR_RUNTIME, "%s; stopped: an update already made cannot be "
                              "skipped (--on-nan rollback can go back to the checkpoint), %s",
                              event, kept);
        if (tr->nan_skips >= c->nan_retries)
            return pelab_fail(PELAB_ERR_RUNTIME, "%s; stopped: %" PRId64 " updates in a row "
                              "skipped (--nan-retries %" PRId64 "), %s", event,
                              tr->nan_skips + 1, c->nan_retries, kept);
        tr->step = update_no; /* the update's batches are consumed, the weights untouched */
        tr->nan_skips++;
        tr->log_skipped++;
        pelab_train_notice(tr, "%s; update skipped", event);
        return PELAB_OK;
    case PELAB_ON_NAN_ROLLBACK:
        if (tr->nan_rollbacks >= c->nan_retries)
            return pelab_fail(PELAB_ERR_RUNTIME, "%s; stopped: %" PRId64 " rollbacks already "
                              "(--nan-retries %" PRId64 "), %s", event, tr->nan_rollbacks,
                              c->nan_retries, kept);
        return rollback(tr, event);
    }
    return pelab_fail(PELAB_ERR_RUNTIME, "%s; stopped, %s", event, kept);
}
