/* music — next-token prediction on the JSB chorales, the PoPE paper's music setting (§4 and
 * Appendix A.1: 4-voice chorales on a 16th-note grid, serialised in raster order, vocabulary 90,
 * sequences of at most 2,048 tokens, the published 229/76/77 split).
 *
 * Tokens: the `jsb` tokenizer (MIDI pitches, silence, padding; docs/DATA.md). One chorale per
 * sequence (seqdocs.c, cut `crop`): validation and test read each chorale's first seq-len + 1
 * tokens (the longest chorale has 2,560), padded; training draws a chorale uniformly, then a start
 * in it at a time-step boundary (a multiple of 4 tokens), so a chorale longer than the context is
 * seen in all its parts and every sequence starts with the soprano. The length sweep reads the
 * test chorales: at length L, the first L+1 tokens of each chorale that long.
 */
#include "data/tasks/seqdocs.h"
#include "data/tasks/tasks.h"
#include "pelab/dataset.h"
#include "pelab/status.h"

#define VOICES 4

static const struct pelab_optdef options[] = {
    {"seq-len", PELAB_OPT_INT, "2048", 1, 1048576, NULL,
     "training context T: each chorale cropped to T+1 tokens, T of them scored"},
    PELAB_OPT_ROW_DATA_DIR,
    {"data-seed", PELAB_OPT_INT, "0", 0, 9007199254740991.0, NULL,
     "mixed into the draw of training windows: another order of the same data"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};


static int music_init(struct pelab_task *t, const struct pelab_opts *opts) {
    int rc = pelab_opts_check(opts, options);
    if (rc) return rc;
    struct seqdocs_config c = {
        .dataset = "jsb",
        .tokenizer = "jsb",
        .data_dir = pelab_opt_str(opts, options, "data-dir"),
        .T = (int)pelab_opt_int(opts, options, "seq-len"),
        .cut = SEQDOCS_CROP,
        .per_doc = 1,
        .align = VOICES,
        .data_seed = (uint64_t)pelab_opt_real(opts, options, "data-seed"),
    };
    return seqdocs_init(t, &c);
}

const struct pelab_task_ops pelab_task_music = {
    .name = "music",
    .summary = "next-token prediction on the JSB chorales (raster order, one chorale a "
               "sequence): NLL, perplexity",
    .options = options,
    .init = music_init,
    .eval_options = seqdocs_eval_options,
    SEQDOCS_TASK_OPS,
};
