/* test_twin — writes the fixtures that tests/ref/twin_check.py compares with the PyTorch twin.
 *
 *   build/tests/test_twin [DIR]
 *
 * For each case (an encoding and its settings) it builds a small model through the public API
 * and writes DIR/CASE/model.safetensors (initial weights, each setting in metadata
 * "pelab.config.<name>", as a run's model file has them) and
 * DIR/CASE/fixture.safetensors:
 *   tokens, targets, pos          (B,T) I32   one batch; positions shifted per row (t + 7b)
 *   logits (B,T,V), loss (1,)     F64         forward on that batch
 *   grad.<param>                  F64         gradients of that loss
 *   step{i}.tokens/targets/pos    (B,T) I32   the batches of 5 training steps, i = 0..4
 *   lrs, losses, grad_norms       (5,) F64    per step: schedule lr, loss, norm before clipping
 *   after5.<param>                F64         parameters after the 5 AdamW steps
 * and, for a case whose encoding adds loss terms of its own (SeqPE's regularisers), the terms
 * joining the loss and its gradients, with the positions each step drew:
 *   reg.delta_pos (P,1+C,n), reg.target (P,), reg.ood_pos (S,2m,n)   I32   the first draw
 *   step{i}.reg.*                                                          each step's draw
 *   loss_delta, loss_ood (1,), losses_delta, losses_ood (5,)         F64   L_delta and L_OOD
 * Without DIR it writes into a temporary directory and removes it. It asserts only what it can
 * see on its own (the settings recorded in the metadata are the ones the model was built with,
 * finite losses and gradients, the loss is the mean of the per-position losses);
 * agreement with the twin is twin_check.py's verdict. Built in double (PELAB_DOUBLE).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "lib/check.h"
#include "lib/tmpdir.h"
#include "lib/twin.h"
#include "pelab/model.h"
#include "pelab/optim.h"
#include "pelab/options.h"
#include "pelab/params.h"
#include "pelab/rng.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "posenc/seqpe.h"

#ifndef PELAB_DOUBLE
#error "test_twin is built with -DPELAB_DOUBLE: the fixtures hold pelab_real as F64"
#endif

struct twin_case {
    const char *name;
    const char *opts[24]; /* key, value, ..., NULL */
};

static const struct twin_case cases[] = {
    {"nope", {"pe", "nope", NULL}},
    {"rope-interleaved", {"pe", "rope", "rope-layout", "interleaved", NULL}},
    {"rope-half", {"pe", "rope", "rope-layout", "half", NULL}},
    {"pope", {"pe", "pope", "pope-delta-init", "uniform", NULL}},
    {"pope-softplus-off", {"pe", "pope", "pope-softplus", "off", "pope-delta-init", "uniform", NULL}},
    {"pope-delta-off", {"pe", "pope", "pope-delta", "off", NULL}},
    /* delta starts exactly on the clamp's upper edge, where the gradient must still pass */
    {"pope-delta-zero", {"pe", "pope", "pope-delta-init", "zero", NULL}},
    {"rope-untied", {"pe", "rope", "tied", "off", NULL}},
    /* positions reach 36 (t + 7b + 3i over the 5 steps); the training context is T = 11 */
    {"learned", {"pe", "learned", "ape-max-len", "40", NULL}},
    {"learned-interpolate", {"pe", "learned", "ape-extend", "interpolate", NULL}},
    /* P at the token embedding's scale (σ 0.02, the default), as is, and at another σ */
    {"sinusoidal", {"pe", "sinusoidal", "sin-base", "100", NULL}},
    {"sinusoidal-scale-1", {"pe", "sinusoidal", "sin-base", "100", "sin-scale", "1", NULL}},
    {"sinusoidal-scale-0.3", {"pe", "sinusoidal", "sin-scale", "0.3", NULL}},
    {"xpos", {"pe", "xpos", NULL}},
    {"xpos-fast-decay", {"pe", "xpos", "xpos-scale-base", "8", "xpos-gamma", "0.2", NULL}},
    {"rope-resonance", {"pe", "rope", "rope-resonance", "on", NULL}},
    /* RoPE's length extension (evaluation-time options; all the checks run anyway) */
    {"rope-pi", {"pe", "rope", "rope-scaling", "pi", "rope-scale", "4", NULL}},
    {"rope-ntk", {"pe", "rope", "rope-scaling", "ntk", "rope-scale", "4", NULL}},
    {"rope-dynamic-ntk", {"pe", "rope", "rope-scaling", "dynamic-ntk", "rope-scale", "3", NULL}},
    {"rope-yarn", {"pe", "rope", "rope-scaling", "yarn", "rope-scale", "4", "rope-original-len",
                   "2048", NULL}},
    {"rope-yarn-half-resonance", {"pe", "rope", "rope-layout", "half", "rope-resonance", "on",
                                  "rope-scaling", "yarn", "rope-scale", "8", "rope-original-len",
                                  "512", NULL}},
    /* partial RoPE and p-RoPE (r = 6 of d = 8, 2 of its 3 pairs turning) and Llama 3.1's
     * scaling (every one of its three regimes at d = 8) */
    {"rope-partial-p-half", {"pe", "rope", "rope-fraction", "0.75", "rope-p", "0.67", "rope-layout",
                             "half", NULL}},
    {"rope-llama3", {"pe", "rope", "rope-scaling", "llama3", "rope-scale", "8", "rope-original-len",
                     "64", "llama3-high-freq-factor", "8", NULL}},
    /* LongRoPE's factors (4 pairs) from a file read relative to the repository's root, where
     * tests/ref/run.sh runs both sides; passes past L_train 30 take the long set */
    /* YaRN's amplitude on the rotated pairs alone (r = 4 of d = 8) */
    {"rope-partial-yarn", {"pe", "rope", "rope-fraction", "0.5", "rope-scaling", "yarn", "rope-scale", "4",
                           "rope-original-len", "16", NULL}},
    {"rope-longrope", {"pe", "rope", "rope-scaling", "longrope", "rope-scale", "4", "rope-original-len",
                       "30", "longrope-factors", "tests/ref/longrope-d8.json", NULL}},
    /* bias encodings; the t5 tables are small enough that distances < T reach the log buckets */
    {"alibi", {"pe", "alibi", NULL}},
    {"alibi-6-heads", {"pe", "alibi", "heads", "6", "d-model", "36", NULL}},
    {"t5-shared", {"pe", "t5", "t5-buckets", "6", "t5-max-distance", "8", NULL}},
    {"t5-per-layer", {"pe", "t5", "t5-table", "per-layer", "t5-buckets", "8", "t5-max-distance", "12", NULL}},
    {"fire", {"pe", "fire", NULL}},
    {"fire-shared", {"pe", "fire-shared", "fire-width", "16", "fire-depth", "3", NULL}},
    /* SeqPE in each integration; positions reach 36, so 5 digits, or 4 in base 3, are enough */
    {"seqpe-input", {"pe", "seqpe", NULL}},
    {"seqpe-input-norm-base3", {"pe", "seqpe", "seqpe-base", "3", "seqpe-digits", "4",
                                "seqpe-final-norm", "on", "seqpe-layers", "1", NULL}},
    {"seqpe-attn-add", {"pe", "seqpe", "seqpe-mode", "attn-add", NULL}},
    {"seqpe-attn-mul-per-layer", {"pe", "seqpe", "seqpe-mode", "attn-mul", "seqpe-proj", "per-layer",
                                  "seqpe-width", "16", "seqpe-heads", "2", NULL}},
    {"seqpe-attn-bias", {"pe", "seqpe", "seqpe-mode", "attn-bias", NULL}},
    {"seqpe-attn-bias-per-layer", {"pe", "seqpe", "seqpe-mode", "attn-bias", "seqpe-proj",
                                   "per-layer", "seqpe-layers", "3", NULL}},
};

/* Cases whose encoding adds loss terms of its own, as training adds them: SeqPE with its
 * regularisers, α·L_delta + β·L_OOD on the draws of pelab's keys. */
static const struct twin_case aux_cases[] = {
    {"seqpe-reg-input", {"pe", "seqpe", "seqpe-alpha", "0.5", "seqpe-beta", "2", "seqpe-delta-batch",
                         "4", "seqpe-candidates", "8", "seqpe-ood-batch", "3", "seqpe-ood-positions",
                         "5", NULL}},
    {"seqpe-reg-attn-add-norm", {"pe", "seqpe", "seqpe-mode", "attn-add", "seqpe-final-norm", "on",
                                 "seqpe-alpha", "0.3", "seqpe-beta", "0.7", "seqpe-delta-batch", "3",
                                 "seqpe-candidates", "32", "seqpe-ood-batch", "2",
                                 "seqpe-max-pos", "300", NULL}},
    /* the authors' profile: their candidate sets, shifts and symmetric L_OOD, the final norm on */
    {"seqpe-reg-authors", {"pe", "seqpe", "seqpe-mode", "attn-bias", "seqpe-reg-profile", "authors",
                           "seqpe-alpha", "0.3", "seqpe-beta", "2", "seqpe-delta-batch", "3",
                           "seqpe-candidates", "8", "seqpe-ood-batch", "2", "seqpe-ood-positions", "4",
                           "seqpe-max-pos", "300", NULL}},
};

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : tmpdir_create("pelab-twin");
    if (!dir) return 1;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "test_twin: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        twin_write_case(dir, cases[i].name, cases[i].opts, TWIN_T, 1000 + i, 0);
    for (size_t i = 0; i < sizeof aux_cases / sizeof aux_cases[0]; i++)
        twin_write_case(dir, aux_cases[i].name, aux_cases[i].opts, TWIN_T, 2000 + i, 1);
    if (argc <= 1) tmpdir_remove();
    return check_report("test_twin_fixtures");
}
