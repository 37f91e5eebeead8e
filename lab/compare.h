/* compare's reports (lab/compare_report.c): the runs of every entry of --pe reduced over their
 * seeds, printed as the paper-style table and written as DIR/compare.json and, with a sweep,
 * DIR/sweep.csv or DIR/resolutions.csv. lab/compare_plan.c plans the runs, lab/compare_run.c trains them. */
#ifndef PELAB_CLI_COMPARE_H
#define PELAB_CLI_COMPARE_H

#include <stdint.h>
#include "pelab/options.h"
#include "pelab/sweep.h"

#define COMPARE_MAX_PES 32
#define COMPARE_MAX_SEEDS 100

/* One run: its entry of --pe and seed, where it lives, and what it measured. */
struct compare_result {
    char pe[PELAB_OPT_VAL_MAX]; /* the --pe entry: an encoding, or a variant NAME:option=value:... */
    int variant;
    uint64_t seed;
    char dir[PELAB_OPT_VAL_MAX + 64];
    int shares;                  /* the index of the earlier result with the same run, or -1 */
    int point;                   /* a run of the tuning grid: its point (lab/compare_tune.h); else -1 */
    int diverged;                /* a tuning run stopped on a non-finite loss: no summary */
    double test_acc, test_loss, test_ppl, val_loss, wall_s;
    double at[PELAB_SWEEP_MAX];  /* the sweep at each entry: perplexity at each --lengths entry
                                  * (tasks of documents; qa: of the answer span); image: test
                                  * accuracy at each --resolutions side */
    double em[PELAB_SWEEP_MAX];  /* qa: exact match of the greedy generation at each entry */
    double *size_em;             /* algorithmic tasks: test exact match at each size 1..test_max
                                  * (the sweep's buckets, in `at`, are means of these) */
};

/* The sweep every run made after training: its columns' labels (and, as .tokens, their lengths,
 * or an image side in pixels), how many (0: none), and its kind: a qa sweep (span perplexity and
 * exact match, pelab/qa_sweep.h), an image resolution sweep (test accuracy per side) or, on an
 * algorithmic task, the test exact match per instance size, its columns buckets of sizes
 * lo[i]..hi[i] (labels "lo-hi") of the sizes 1..test_max, those up to train_max trained. */
struct compare_sweep {
    struct pelab_sweep_length lengths[PELAB_SWEEP_MAX];
    int n;
    int qa, image, sizes;
    int lo[PELAB_SWEEP_MAX], hi[PELAB_SWEEP_MAX], train_max, test_max;
};


/* One entry of --pe: the encoding, the settings of the variant (none for a plain encoding), the
 * evaluation-time options of its sweeps, and the name of its runs: the entry without those
 * options, so that entries differing only in them (learned, learned:ape-extend=interpolate) share
 * their runs and differ in their sweeps (lab/compare_variant.c). */
struct compare_variant {
    char name[32];
    struct pelab_opts set, eval;
    char run_name[PELAB_OPT_VAL_MAX];
};

/* v with one more setting key=val (a point of a tuning grid: rope → rope:lr=3e-3), named again
 * (rope+lr-3e-3); key must not be one of v's settings. */
int compare_variant_add(struct compare_variant *v, const char *key, const char *val);
/* "NAME" or "NAME:option=value:..." into v; each option must be the encoding's (or init-from,
 * random-positions), its value valid. PELAB_ERR_USAGE naming the entry otherwise. */
int compare_variant_parse(const char *entry, struct compare_variant *v);
/* Evaluation-time options of encodings (--ape-extend, --rope-scaling ...) out of the shared
 * options: each goes to the variants of its encoding that do not set it themselves, for their
 * sweeps; one whose encoding --pe does not list is a usage error. */
int compare_variants_take_eval_opts(struct pelab_opts *opts, struct compare_variant *variants, int n_pes);
/* The options of one run of v: the shared ones without other encodings' options, plus pe, seed,
 * out and v's own settings. */
int compare_variant_run_opts(const struct compare_variant *v, const struct pelab_opts *shared, uint64_t seed,
                             const char *dir, struct pelab_opts *o);

struct compare_tune;
/* The table on stdout (documents: a task of documents, whose table has perplexities; tune: the
 * tuning grid and its choices, NULL without --tune), with, over two seeds or more, the paired
 * comparison of every two entries on the main metric, and every file of the report into dir.
 * PELAB_OK or the status of a write. */
int compare_report(const char *dir, const char *task, const char *preset, const struct compare_result *rs,
                   int n, const char *const *pes, int n_pes, int documents, const struct compare_sweep *sw,
                   const struct compare_tune *tune);
/* r's summary.json: its test accuracy, loss, perplexity (tasks of documents), validation loss and
 * wall time. */
int compare_read_summary(struct compare_result *r);

#endif
