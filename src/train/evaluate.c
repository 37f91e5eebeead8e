/* Evaluation: loss and accuracy over target positions of a span of one split, forward only. */
#include <math.h>
#include "pelab/status.h"
#include "pelab/train.h"

int pelab_argmax(const pelab_real *row, int V) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (row[v] > row[best]) best = v;
    return best;
}

int pelab_evaluate(struct pelab_model *m, const struct pelab_task *t, enum pelab_split split,
                   uint64_t first, uint64_t count, int batch, struct pelab_eval_result *r) {
    r->loss = r->acc = 0;
    r->examples = r->targets = r->correct = 0;
    uint64_t size = t->ops->split_size(t, split);
    if (count == 0 || count > size) count = size;
    if (batch <= 0) return pelab_fail(PELAB_ERR_USAGE, "evaluation batch must be positive");
    int T = t->seq_len, rc;
    struct pelab_batch b;
    if ((rc = pelab_batch_alloc(&b, batch, T))) return rc;
    int was_training = m->training;
    m->training = 0;
    /* Sum per-position losses in double, so the mean does not depend on how examples fall
     * into batches. */
    double loss_sum = 0;
    for (uint64_t done = 0; done < count;) {
        int n = count - done < (uint64_t)batch ? (int)(count - done) : batch;
        b.B = n;
        t->ops->fill(t, split, first + done, &b);
        /* forward only: memory for one layer, not the activations a backward pass would read */
        pelab_model_forward_eval(m, b.tokens, b.targets, b.pos, n, T);
        if ((rc = m->status)) break;
        const pelab_real *losses = pelab_model_eval_losses(m);  /* (n,T) */
        const int32_t *pred = pelab_model_eval_pred(m);         /* (n,T) argmax of the logits */
        for (size_t i = 0; i < (size_t)n * (size_t)T; i++) {
            if (b.targets[i] < 0) continue;
            loss_sum += losses[i];
            r->targets++;
            if (pred[i] == b.targets[i]) r->correct++;
        }
        done += (uint64_t)n;
    }
    b.B = batch;
    pelab_batch_free(&b);
    m->training = was_training;
    if (rc) return rc;
    r->examples = count;
    if (r->targets) {
        r->loss = loss_sum / (double)r->targets;
        r->acc = (double)r->correct / (double)r->targets;
    }
    static const char *const names[] = {"train", "val", "test"};
    if (!isfinite(r->loss))
        return pelab_fail(PELAB_ERR_RUNTIME, "the %s loss is not finite (%g): the model's weights "
                          "or activations are", names[split], pelab_printable(r->loss));
    return PELAB_OK;
}
