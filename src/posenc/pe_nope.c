/* nope — no positional information (Kazemnejad et al. 2023, "The Impact of Positional Encoding
 * on Length Generalization in Transformers"): a causal decoder can still infer order from the
 * mask alone. Acts at no site. */
#include "pelab/posenc.h"

const struct pelab_posenc_ops pelab_pe_nope = {
    .name = "nope",
    .display = "NoPE",
    .summary = "no positional encoding; order is visible only through the causal mask",
    .sites = 0,
    .dims = 1u << 1 | 1u << 2, /* reads no position */
    .contract = {PELAB_PE_RELATIVE | PELAB_PE_BIDIRECTIONAL, {NULL}},
};
