/* No allocation inside a training step: after the model's buffers are reserved and one step has
 * run, further steps (forward, backward, clipping, AdamW) call malloc, calloc, realloc,
 * aligned_alloc and posix_memalign not once, for every registered encoding, both attention
 * kernels, with and without dropout; nor does a repeated evaluation-only forward. The same in the
 * bf16 precision where it runs (its primitives and bf16 buffers are made by the first step; the
 * counters see pelab's calls, not those inside the oneDNN shared library). The library's
 * calls are counted by linking it with -Wl,--wrap (the Makefile's rule for this program), which
 * reroutes them through the counters below. Double build. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "pelab/model.h"
#include "pelab/optim.h"
#include "pelab/precision.h"
#include "pelab/rng.h"
#include "pelab/status.h"

static int counting;
static long calls;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);

void *__wrap_malloc(size_t n) {
    calls += counting;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t size) {
    calls += counting;
    return __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n) {
    calls += counting;
    return __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t align, size_t n) {
    calls += counting;
    return __real_aligned_alloc(align, n);
}
int __wrap_posix_memalign(void **p, size_t align, size_t n) {
    calls += counting;
    return __real_posix_memalign(p, align, n);
}

enum { V = 11, B = 2, T = 70, BT = B * T }; /* T past one attention tile */

/* patches: a patch model (input width 3) with (row, column) positions on a 9 × 9 grid,
 * bidirectional, as the image task builds it (2-D encodings). */
static void check_steps(const char *pe, const char *attention, const char *dropout, int patches) {
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "pe", pe);
    pelab_opts_set(&o, "d-model", "16");
    pelab_opts_set(&o, "heads", "2");
    pelab_opts_set(&o, "layers", "2");
    pelab_opts_set(&o, "attention", attention);
    pelab_opts_set(&o, "dropout", dropout);
    struct pelab_model m;
    const struct pelab_model_io io = {patches ? 3 : 0, {patches ? 2 : 1, patches, patches ? 9 : 0}};
    if (pelab_model_init_io(&m, &o, V, T, &io) != PELAB_OK || pelab_model_reserve(&m, B, T) != PELAB_OK) {
        CHECK(0, "%s: %s", pe, pelab_last_error());
        return;
    }
    pelab_model_init_weights(&m, 1);
    int32_t tokens[BT], targets[BT], pos[2 * BT];
    static pelab_real in[BT * 3];
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 2);
    for (int i = 0; i < BT; i++) {
        tokens[i] = (int32_t)pelab_rng_below(&rng, V), targets[i] = (int32_t)pelab_rng_below(&rng, V);
        const int t = i % T, q = t - 1;
        if (!patches) pos[i] = t;
        else pos[2 * i] = t ? 1 + q / 9 : 0, pos[2 * i + 1] = t ? 1 + q % 9 : 0;
        for (int j = 0; j < 3; j++) in[3 * i + j] = (pelab_real)pelab_rng_normal(&rng);
    }
    if (patches) pelab_model_set_inputs(&m, in);
    struct pelab_adamw opt = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    long step_calls = 0;
    for (int step = 0; step < 3; step++) {
        counting = step > 0; /* the first step may size what depends on the thread count */
        calls = 0;
        m.training = 1;
        m.dropout_key = (uint64_t)step + 1;
        pelab_params_zero_grad(&m.params);
        pelab_model_forward(&m, tokens, targets, pos, B, T);
        pelab_model_backward(&m, 1);
        pelab_clip_grad_norm(&m.params, 1.0);
        pelab_adamw_step(&opt, &m.params, 1e-3);
        counting = 0;
        step_calls += calls;
    }
    CHECK(m.status == PELAB_OK, "%s: %s", pe, pelab_last_error());
    CHECK(step_calls == 0, "%s %s dropout %s: %ld allocations in two training steps", pe, attention,
          dropout, step_calls);
    long eval_calls = 0;
    for (int rep = 0; rep < 2; rep++) {
        counting = rep > 0;
        calls = 0;
        pelab_model_forward_eval(&m, tokens, targets, pos, B, T);
        counting = 0;
        eval_calls += calls;
    }
    CHECK(eval_calls == 0, "%s %s: %ld allocations in a repeated evaluation forward", pe, attention, eval_calls);
    printf("  %-11s %-5s dropout %-3s %s  allocations per step %ld, per evaluation %ld\n", pe, attention,
           dropout, pelab_precision_name(pelab_precision_get()), step_calls / 2, eval_calls);
    pelab_model_free(&m);
}

int main(void) {
    /* the counters must see the library's calls: a wrapped malloc that is never reached would
     * pass every check below */
    counting = 1;
    calls = 0;
    struct pelab_params p = {0};
    const int64_t shape[1] = {3};
    pelab_params_declare(&p, "x", 1, shape, 0);
    PELAB_ASSERT(pelab_params_alloc(&p) == PELAB_OK);
    counting = 0;
    CHECK(calls > 0, "the allocation counters saw no call of the library's");
    pelab_params_free(&p);

    for (const struct pelab_posenc_ops *const *e = pelab_posenc_all(); *e; e++) {
        const int patches = !pelab_posenc_serves(*e, 1);
        check_steps((*e)->name, "tiled", "0", patches);
        check_steps((*e)->name, "ref", "0", patches);
    }
    check_steps("rope", "tiled", "0.1", 0);
    check_steps("fire", "tiled", "0.1", 0);
    check_steps("nope", "tiled", "0.1", 1);
    if (pelab_precision_set(PELAB_PRECISION_BF16) == PELAB_OK) {
        check_steps("rope", "tiled", "0.1", 0);
        check_steps("pope", "tiled", "0", 0);
        check_steps("seqpe", "tiled", "0", 0);
        pelab_precision_set(PELAB_PRECISION_FP32);
    }
    return check_report("test_alloc");
}
