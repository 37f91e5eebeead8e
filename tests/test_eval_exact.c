/* Exact match in pelab_evaluate: over a task of examples with several scored positions (some
 * with none), the examples with a target whose every target is the argmax, counted against the
 * predictions of one forward pass per example, whatever the batch; with a vocabulary of 3 some
 * examples are right and some not, so the count is not trivially 0 or all. */
#include <string.h>
#include "lib/check.h"
#include "pelab/model.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/train.h"

enum { V = 3, T = 6, N = 300 };

static uint64_t fake_size(const struct pelab_task *t, enum pelab_split split) { return N; }

/* Example i: random tokens; targets at positions 2 and 4, none at all for every 7th. */
static void fake_fill(const struct pelab_task *t, enum pelab_split split, uint64_t first,
                      struct pelab_batch *b) {
    for (int r = 0; r < b->B; r++) {
        const uint64_t i = (first + (uint64_t)r) % N;
        struct pelab_rng rng;
        pelab_rng_seed(&rng, 100 + i);
        for (int p = 0; p < b->T; p++) {
            const size_t at = (size_t)r * b->T + p;
            b->tokens[at] = (int32_t)pelab_rng_below(&rng, V);
            b->targets[at] = (p == 2 || p == 4) && i % 7 ? (int32_t)pelab_rng_below(&rng, V) : -1;
            b->pos[at] = p;
        }
    }
}

static const char *fake_text(const struct pelab_task *t, int32_t token) { return ""; }

static const struct pelab_task_ops fake_ops = {
    .name = "fake", .split_size = fake_size, .fill = fake_fill, .token_text = fake_text};

int main(void) {
    struct pelab_task task = {.ops = &fake_ops, .vocab = V, .seq_len = T, .pad = 0};
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "pe", "nope");
    pelab_opts_set(&o, "d-model", "8");
    pelab_opts_set(&o, "heads", "2");
    pelab_opts_set(&o, "layers", "1");
    struct pelab_model m;
    PELAB_ASSERT(pelab_model_init(&m, &o, V, T) == PELAB_OK);
    pelab_model_init_weights(&m, 7);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 8);
    for (size_t i = 0; i < m.params.total; i++) m.params.data[i] += (pelab_real)(pelab_rng_normal(&rng));

    uint64_t exact = 0, answered = 0;
    struct pelab_batch b;
    PELAB_ASSERT(pelab_batch_alloc(&b, 1, T) == PELAB_OK);
    for (uint64_t i = 0; i < N; i++) {
        fake_fill(&task, PELAB_SPLIT_VAL, i, &b);
        pelab_model_forward_eval(&m, b.tokens, b.targets, b.pos, 1, T);
        const int32_t *pred = pelab_model_eval_pred(&m);
        int any = 0, all = 1;
        for (int p = 0; p < T; p++)
            if (b.targets[p] >= 0) {
                any = 1;
                all &= pred[p] == b.targets[p];
            }
        answered += (uint64_t)any;
        exact += (uint64_t)(any && all);
    }
    pelab_batch_free(&b);
    CHECK(exact > 0 && exact < answered, "exact %llu of %llu: the check would see nothing",
          (unsigned long long)exact, (unsigned long long)answered);
    for (int batch = 1; batch <= 64; batch *= 4) {
        struct pelab_eval_result r;
        CHECK(pelab_evaluate(&m, &task, PELAB_SPLIT_VAL, 0, 0, batch, &r) == PELAB_OK, "%s",
              pelab_last_error());
        CHECK(r.exact == exact && r.answered == answered,
              "batch %d: exact %llu of %llu, one pass per example gives %llu of %llu", batch,
              (unsigned long long)r.exact, (unsigned long long)r.answered,
              (unsigned long long)exact, (unsigned long long)answered);
        CHECK_CLOSE(r.exact_match, (double)exact / (double)answered, 0, 1e-15, "exact_match");
        CHECK(r.exact <= r.correct / 2, "exact %llu with %llu tokens right",
              (unsigned long long)r.exact, (unsigned long long)r.correct);
    }
    printf("  %llu of %llu examples exactly right\n", (unsigned long long)exact,
           (unsigned long long)answered);
    pelab_model_free(&m);
    return check_report("test_eval_exact");
}
