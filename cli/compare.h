/* compare's reports (cli/compare_report.c): the runs of every entry of --pe reduced over their
 * seeds, printed as the paper-style table and written as DIR/compare.json and, with a sweep,
 * DIR/sweep.csv or DIR/resolutions.csv. cli/cmd_compare.c schedules and trains the runs. */
#ifndef PELAB_CLI_COMPARE_H
#define PELAB_CLI_COMPARE_H

#include <stdint.h>
#include "pelab/options.h"
#include "pelab/sweep.h"

#define COMPARE_MAX_PES 16
#define COMPARE_MAX_SEEDS 100

/* One run: its entry of --pe and seed, where it lives, and what it measured. */
struct compare_result {
    char pe[PELAB_OPT_VAL_MAX]; /* the --pe entry: an encoding, or a variant NAME:option=value:... */
    int variant;
    uint64_t seed;
    char dir[PELAB_OPT_VAL_MAX + 64];
    int shares;                  /* the index of the earlier result with the same run, or -1 */
    double test_acc, test_loss, test_ppl, wall_s;
    double at[PELAB_SWEEP_MAX];  /* the sweep at each entry: perplexity at each --lengths entry
                                  * (tasks of documents; qa: of the answer span); image: test
                                  * accuracy at each --resolutions side */
    double em[PELAB_SWEEP_MAX];  /* qa: exact match of the greedy generation at each entry */
};

/* The sweep every run made after training: its columns' labels (and, as .tokens, their lengths,
 * or an image side in pixels), how many (0: none), and its kind: a qa sweep (span perplexity and
 * exact match, pelab/qa_sweep.h) or an image resolution sweep (test accuracy per side). */
struct compare_sweep {
    struct pelab_sweep_length lengths[PELAB_SWEEP_MAX];
    int n;
    int qa, image;
};


/* The table on stdout (documents: a task of documents, whose table has perplexities) and every
 * file of the report into dir. PELAB_OK or the status of a write. */
int compare_report(const char *dir, const char *task, const char *preset, const struct compare_result *rs,
                   int n, const char *const *pes, int n_pes, int documents, const struct compare_sweep *sw);
/* r's summary.json: its test accuracy, loss, perplexity (tasks of documents) and wall time. */
int compare_read_summary(struct compare_result *r);

#endif
