/* tests/lib/models.h — the one list of encoding test cases, and the models the model-level tests
 * build. Every test of encodings takes its cases from for_each_pe_case: each registered encoding
 * (pelab_posenc_all) with its defaults and with each setting its contract names
 * (contract.variants), on each layout of positions it serves. A variant added to an encoding's
 * contract, or a newly registered encoding, reaches every such test with no test edited; a test
 * asks the encoding, not a list of names, what applies (its sites, its promises, its refusals). */
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
    int n_kv;                        /* options set: text[0 .. n_kv) */
    char text[PE_CASE_KV_MAX][2][64];
    /* "pe", name, key, value, ..., NULL: an option list, pointing into text (a copy by assignment
     * points into the original until pe_case_set relinks it) */
    const char *opts[2 * PE_CASE_KV_MAX + 3];
};

/* The layouts a test runs its cases on (bits): */
enum {
    PE_TEXT = 1 << 0,   /* 1-D positions, causal: every encoding that serves 1-D positions */
    PE_IMAGE = 1 << 1,  /* (row, column) positions on a grid, bidirectional: those that serve 2-D */
    PE_RASTER = 1 << 2, /* 1-D positions, bidirectional: those that promise PELAB_PE_BIDIRECTIONAL */
};

struct pe_walk {
    unsigned layouts;       /* PE_* bits */
    unsigned defaults_only; /* PE_* bits of the layouts that run each encoding's defaults alone */
    int grid;               /* PE_IMAGE: the side G of the training grid */
    const char *only;       /* one encoding's name (a test's command line), or NULL for all */
};

typedef void (*pe_case_fn)(struct pe_case *c, void *ctx);

/* Calls fn for each case of w: layouts in the order TEXT, IMAGE, RASTER, encodings in the
 * registry's order, each with its defaults first and then its variants. The case is fn's own
 * (pe_case_set may add options to it) and gone when fn returns. Returns how many cases ran; a
 * variant that is not "key=value ..." fails a CHECK. */
int for_each_pe_case(const struct pe_walk *w, pe_case_fn fn, void *ctx);

/* Sets option key of the case to value (replacing the value its settings give, if any); values
 * up to 63 characters. */
void pe_case_set(struct pe_case *c, const char *key, const char *value);

/* The case's contract.small set where the case's settings leave its keys unset: the cheaper
 * sizes of a test that runs every case many times. */
void pe_case_small(struct pe_case *c);

/* The value the case's options give key, or NULL. */
const char *pe_case_get(const struct pe_case *c, const char *key);

/* For a test whose positions run up to reach − 1, with max_seq the training length it tells the
 * model: when the case's encoding refuses such positions with its settings (a table that ends,
 * as the learned one's) and its contract names the option that sets how far it reaches
 * (contract.reach), sets that option to reach. A case that meets such positions another way
 * (interpolation) is left as it is. */
void pe_case_fit(struct pe_case *c, int max_seq, int reach);

/* The case's encoding alone, for a model of width D, H heads and `layers` layers trained at
 * max_seq positions, on its layout, its parameters declared into params (not allocated).
 * PELAB_OK, or the error (PELAB_ERR_USAGE: it refuses this shape; the message says why). */
int pe_case_init(struct pelab_posenc *pe, struct pelab_params *params, const struct pe_case *c, int D,
                 int H, int layers, int max_seq);

/* Whether encoding pe computes each position below len the same whatever the extent of the pass
 * (its cache_check accepts len); else prints that `what`, checked of case `label`, is not its
 * property, and why (dynamic NTK, LongRoPE's long factors, a table interpolated to each pass). */
int pe_extent_free(const struct pelab_posenc *pe, const char *label, long len, const char *what);

/* Position q as the case's layout has it: q itself (1-D), or (1 + q / G, 1 + q % G), row-major on
 * the grid of side G = layout.grid, coordinate 0 left for the class token (2-D). Writes
 * layout.dims coordinates. */
void pe_place(int32_t *out, int q, const struct pelab_pe_layout *layout);

/* A small model: d-model 16, heads 2, layers 2, then the options of `a` and of `b` ("key",
 * "value" pairs ending in NULL; either may be NULL; later ones win), a vocabulary of `vocab`,
 * max_seq positions and io (NULL: a token model with 1-D causal positions). Its weights are
 * initialised from `seed` and every parameter then moved off its initial value by N(0, spread²)
 * drawn from seed + 1: gains at 1 and tables or δ at 0 would hide a wrong gradient. PELAB_OK, or
 * the error (message set; nothing held). */
int test_model(struct pelab_model *m, const char *const *a, const char *const *b, int vocab,
               int max_seq, const struct pelab_model_io *io, uint64_t seed, double spread);

#endif
