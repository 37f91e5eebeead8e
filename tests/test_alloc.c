/* No allocation inside a training step: after the model's buffers are reserved and one step has
 * run, further steps (forward, backward, clipping, AdamW) call malloc, calloc, realloc,
 * aligned_alloc and posix_memalign not once, for every registered encoding, both attention
 * kernels, with and without dropout; nor does a repeated evaluation-only forward. The same in the
 * bf16 precision where it runs (its primitives and bf16 buffers are made by the first step; the
 * counters see pelab's calls, not those inside the oneDNN shared library). Every encoding under
 * each setting of its contract (lib/models.h); the library's calls are counted by
 * lib/wrap/alloc_count.c. Double build. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/models.h"
#include "lib/toy_site.h"
#include "lib/wrap/alloc_count.h"
#include "pelab/model.h"
#include "pelab/optim.h"
#include "pelab/precision.h"
#include "pelab/rng.h"
#include "pelab/status.h"

enum { V = 11, B = 2, T = 70, BT = B * T }; /* T past one attention tile */

/* A 2-D case runs in a patch model (input width 3) with (row, column) positions on a 9 × 9 grid,
 * bidirectional, as the image task builds it. */
static void check_steps(const struct pe_case *c, const char *attention, const char *dropout) {
    const char *pe = c->label;
    const int patches = c->layout.dims == 2;
    const char *const run[] = {"attention", attention, "dropout", dropout, NULL};
    struct pelab_model m;
    const struct pelab_model_io io = {patches ? 3 : 0, c->layout};
    if (test_model(&m, c->opts, run, V, T, &io, 1, 0) != PELAB_OK || pelab_model_reserve(&m, B, T) != PELAB_OK) {
        CHECK(0, "%s: %s", pe, pelab_last_error());
        return;
    }
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
    pelab_model_set_ctx(&m, test_ctx()); /* its precision: main's */
    struct pelab_adamw opt = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    long step_calls = 0;
    for (int step = 0; step < 3; step++) {
        alloc_counting = step > 0; /* the first step may size what depends on the thread count */
        alloc_calls = 0;
        m.training = 1;
        m.dropout_key = (uint64_t)step + 1;
        pelab_params_zero_grad(&m.params);
        pelab_model_forward(&m, tokens, targets, pos, B, T);
        pelab_model_backward(&m, 1);
        pelab_adamw_step(&opt, &m.params, 1e-3, pelab_clip_scale(pelab_grad_norm(&m.params), 1.0));
        alloc_counting = 0;
        step_calls += alloc_calls;
    }
    CHECK(m.status == PELAB_OK, "%s: %s", pe, pelab_last_error());
    CHECK(step_calls == 0, "%s %s dropout %s: %ld allocations in two training steps", pe, attention,
          dropout, step_calls);
    long eval_calls = 0;
    for (int rep = 0; rep < 2; rep++) {
        alloc_counting = rep > 0;
        alloc_calls = 0;
        pelab_model_forward_eval(&m, tokens, targets, pos, B, T);
        alloc_counting = 0;
        eval_calls += alloc_calls;
    }
    CHECK(eval_calls == 0, "%s %s: %ld allocations in a repeated evaluation forward", pe, attention, eval_calls);
    printf("  %-11s %-5s dropout %-3s %s  allocations per step %ld, per evaluation %ld\n", pe, attention,
           dropout, pelab_precision_name(test_ctx()->precision), step_calls / 2, eval_calls);
    pelab_model_free(&m);
}

/* Both kernels without dropout, and the tiled one with it for an encoding's defaults. */
static void check_case(struct pe_case *c, void *unused) {
    check_steps(c, "tiled", "0");
    check_steps(c, "ref", "0");
    if (!c->settings[0]) check_steps(c, "tiled", "0.1");
}

static void check_bf16(struct pe_case *c, void *unused) { check_steps(c, "tiled", "0.1"); }

int main(void) {
    CHECK(alloc_count_works(), "the allocation counters saw no call of the library's");
    CHECK(toy_site_register() == PELAB_OK, "%s", pelab_last_error()); /* a site of a test's own too */
    for_each_pe_case(&(struct pe_walk){PE_TEXT | PE_IMAGE, 0, 9, NULL}, check_case, NULL);
    if (pelab_precision_set(test_ctx(), PELAB_PRECISION_BF16) == PELAB_OK) {
        for_each_pe_case(&(struct pe_walk){PE_TEXT, PE_TEXT, 0, NULL}, check_bf16, NULL);
        pelab_precision_set(test_ctx(), PELAB_PRECISION_FP32);
    }
    return check_report("test_alloc");
}
