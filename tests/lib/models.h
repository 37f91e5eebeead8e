/* tests/lib/models.h — the models the model-level tests build, and the registry walk they share:
 * every registered encoding under each setting its contract names (its defaults, then
 * contract.variants), so that a variant added to an encoding's contract reaches every test that
 * takes its cases from here without editing them. */
#ifndef PELAB_TEST_MODELS_H
#define PELAB_TEST_MODELS_H

#include <stdint.h>
#include "pelab/model.h"

#define PE_CASE_KV_MAX 16

/* One encoding with one setting of its options, for one layout of positions. */
struct pe_case {
    const struct pelab_posenc_ops *ops;
    const char *settings;            /* "" (the defaults) or a contract variant "key=value ..." */
    struct pelab_pe_layout layout;   /* the positions it runs on */
    char label[160];                 /* "rope", "rope rope-scaling=yarn ...", with " [2-D]" etc. */
    char text[PE_CASE_KV_MAX][2][64];
    const char *opts[2 * PE_CASE_KV_MAX + 3]; /* "pe", name, key, value, ..., NULL: an option list */
};

/* The cases of every registered encoding that serves positions laid out as `lay` (bidirectional:
 * only those that promise it), with its defaults and, unless defaults_only, each contract
 * variant; `only` names one encoding, or NULL for all. Returns how many were written to out
 * (at most max); a variant that is not "key=value ..." or more cases than max fail a CHECK. */
int pe_cases(struct pe_case *out, int max, const struct pelab_pe_layout *lay, int defaults_only,
             const char *only);

/* A small model: d-model 16, heads 2, layers 2, then the options of `a` and of `b` ("key",
 * "value" pairs ending in NULL; either may be NULL; later ones win), a vocabulary of `vocab`,
 * max_seq positions and io (NULL: a token model with 1-D causal positions). Its weights are
 * initialised from `seed` and every parameter then moved off its initial value by N(0, spread²)
 * drawn from seed + 1: gains at 1 and tables or δ at 0 would hide a wrong gradient. PELAB_OK, or
 * the error (message set; nothing held). */
int test_model(struct pelab_model *m, const char *const *a, const char *const *b, int vocab,
               int max_seq, const struct pelab_model_io *io, uint64_t seed, double spread);

#endif
