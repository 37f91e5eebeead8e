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

/* One encoding's results over its seeds: what compare.json and the table report. acc is a
 * fraction (compare.json); acc_pct, for the table, is the mean and std of 100·acc per run, which
 * 100·acc_mean equals only to the last bit. */
struct pe_stats {
    const char *pe;
    int seeds;
    double acc_mean, acc_std, acc_pct_mean, acc_pct_std, loss_mean, loss_std, wall_mean, wall_std;
    double ppl_mean, ppl_std, len_mean[PELAB_SWEEP_MAX], len_std[PELAB_SWEEP_MAX];
    double em_mean[PELAB_SWEEP_MAX], em_std[PELAB_SWEEP_MAX];
};

/* st[p]: the runs in rs (n) of the entry pes[p], p < n_pes, reduced over their seeds. */
void compare_stats(struct pe_stats *st, const struct compare_result *rs, int n, const char *const *pes,
                   int n_pes, const struct compare_sweep *sw);
/* compare.json of the runs rs (n) and their reductions st (n_pes) into dir, atomically. */
int compare_write_json(const char *dir, const char *task, const char *preset, const struct compare_result *rs,
                       int n, const struct pe_stats *st, int n_pes, const struct compare_sweep *sw);
/* The table on stdout (documents: a task of documents, whose table has perplexities) and every
 * file of the report into dir. PELAB_OK or the status of a write. */
int compare_report(const char *dir, const char *task, const char *preset, const struct compare_result *rs,
                   int n, const char *const *pes, int n_pes, int documents, const struct compare_sweep *sw);
/* r's summary.json: its test accuracy, loss, perplexity (tasks of documents) and wall time. */
int compare_read_summary(struct compare_result *r);

#endif
