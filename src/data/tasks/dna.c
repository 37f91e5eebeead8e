/* dna — next-token prediction on the human genome, the PoPE paper's genomic setting (§4, the
 * Human Reference Genome with the Nucleotide Transformer's tokenizer, sequences of 1,000 tokens),
 * on the part pelab can install: chromosome X of GRCh37 (dataset dna-human, 120,000-base
 * documents of 20,000 6-mer tokens; docs/DATA.md).
 *
 * Tokens: the `dna` tokenizer (non-overlapping 6-mers, vocabulary 4,107). Examples are windows of
 * seq-len + 1 tokens of one document (seqdocs.c), cut as for `text`. The length sweep uses the
 * test documents, each 20,000 tokens (20x the paper's length). `--test-genome pfal`, an
 * evaluation option, replaces the test documents by P. falciparum's (dna-pfal), the genome of
 * another species: an out-of-distribution test.
 */
#include <string.h>
#include "data/tasks/seqdocs.h"
#include "data/tasks/tasks.h"
#include "pelab/dataset.h"
#include "pelab/status.h"

static const struct pelab_optdef options[] = {
    {"seq-len", PELAB_OPT_INT, "1000", 1, 1048576, NULL,
     "training context T: windows of T+1 tokens, T of them scored"},
    PELAB_OPT_ROW_DATA_DIR,
    {"data-seed", PELAB_OPT_INT, "0", 0, 9007199254740991.0, NULL,
     "mixed into the draw of training windows: another order of the same data"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

static const struct pelab_optdef eval_options[] = {
    PELAB_OPT_ROW_DATA_DIR_EVAL,
    {"test-genome", PELAB_OPT_CHOICE, "human", 0, 0, "human|pfal",
     "test (and length-sweep) documents: human chromosome X, or P. falciparum (dna-pfal), "
     "another species' genome"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

static int dna_init(struct pelab_task *t, const struct pelab_opts *opts) {
    int rc = pelab_opts_check(opts, options);
    if (!rc) rc = pelab_opts_check(opts, eval_options);
    if (rc) return rc;
    int pfal = pelab_opt_choice(opts, eval_options, "test-genome") == 1;
    struct seqdocs_config c = {
        .dataset = "dna-human",
        .tokenizer = "dna",
        .data_dir = pelab_opt_str(opts, options, "data-dir"),
        .ood = pfal ? "dna-pfal" : NULL,
        .T = (int)pelab_opt_int(opts, options, "seq-len"),
        .cut = SEQDOCS_TILE,
        .align = 1,
        .data_seed = (uint64_t)pelab_opt_real(opts, options, "data-seed"),
    };
    return seqdocs_init(t, &c);
}

const struct pelab_task_ops pelab_task_dna = {
    .name = "dna",
    .summary = "next-token prediction on human chromosome X (6-mer tokens; P. falciparum as an "
               "out-of-distribution test): NLL, perplexity",
    .options = options,
    .init = dna_init,
    .eval_options = eval_options,
    SEQDOCS_TASK_OPS,
};
