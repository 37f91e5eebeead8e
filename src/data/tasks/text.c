/* text — next-token prediction on natural-language text, the PoPE paper's language-modelling
 * setting (§4, OpenWebText with GPT-2's tokenizer) on the corpora pelab can install (docs/DATA.md):
 * State of the Union addresses, Moby Dick, the Brown Corpus, the King James Bible.
 *
 * Tokens: `byte` (258 ids: bytes, padding, end of document) or `gpt2` (GPT-2's BPE, 50,257 ids).
 * Examples are windows of seq-len + 1 tokens of one document (seqdocs.c): training windows start
 * anywhere in the training documents; val and test are cut into consecutive windows that score
 * every token once; the long split (the corpus's longest documents, or the test documents of
 * brown, which reserves none) serves the length-extrapolation sweep. Loss on every position;
 * reported as NLL per token, perplexity and bits per byte.
 */
#include "data/tasks/seqdocs.h"
#include "data/tasks/tasks.h"
#include "pelab/dataset.h"
#include "pelab/status.h"

static const struct pelab_optdef options[] = {
    {"dataset", PELAB_OPT_CHOICE, "sotu", 0, 0, "sotu|moby-dick|brown|bible",
     "corpus (install it first: pelab data install NAME)"},
    {"tokenizer", PELAB_OPT_CHOICE, "gpt2", 0, 0, "byte|gpt2",
     "tokens: bytes (vocabulary 258) or GPT-2's BPE (50257)"},
    {"seq-len", PELAB_OPT_INT, "1024", 1, 1048576, NULL,
     "training context T: windows of T+1 tokens, T of them scored"},
    PELAB_OPT_ROW_DATA_DIR,
    {"data-seed", PELAB_OPT_INT, "0", 0, 9007199254740991.0, NULL,
     "mixed into the draw of training windows: another order of the same data"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};


static int text_init(struct pelab_task *t, const struct pelab_opts *opts) {
    int rc = pelab_opts_check(opts, options);
    if (rc) return rc;
    struct seqdocs_config c = {
        .dataset = pelab_opt_str(opts, options, "dataset"),
        .tokenizer = pelab_opt_str(opts, options, "tokenizer"),
        .data_dir = pelab_opt_str(opts, options, "data-dir"),
        .T = (int)pelab_opt_int(opts, options, "seq-len"),
        .cut = SEQDOCS_TILE,
        .align = 1,
        .text = 1,
        .data_seed = (uint64_t)pelab_opt_real(opts, options, "data-seed"),
    };
    return seqdocs_init(t, &c);
}

const struct pelab_task_ops pelab_task_text = {
    .name = "text",
    .summary = "next-token prediction on text (sotu, moby-dick, brown, bible; byte or gpt2 "
               "tokens): NLL, perplexity, bits per byte",
    .options = options,
    .init = text_init,
    .eval_options = seqdocs_eval_options,
    SEQDOCS_TASK_OPS,
};
