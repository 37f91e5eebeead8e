/* lab/stats.h — the statistics of compare's reports over seeds (lab/stats.c): mean and sample
 * standard deviation, the 95 % confidence interval of the mean (Student's t with n − 1 degrees of
 * freedom), and the paired comparison of two entries run on the same seeds. lab/scripts/tables.py
 * computes the same from the records (its T975 is this file's table). */
#ifndef PELAB_CLI_STATS_H
#define PELAB_CLI_STATS_H

/* The threshold of "solved" and of "fits its trained sizes": exact match (or accuracy) of a run. */
#define STATS_SOLVED 0.9

/* n values reduced: mean, sample standard deviation (n − 1; 0 for one value) and the half-width
 * of the 95 % t interval of the mean, t(0.975, n − 1)·sd/√n (NaN for one value: no interval). A
 * non-finite value makes all three NaN. */
struct stats_summary {
    int n;
    double mean, sd, ci95;
};

/* The 0.975 quantile of Student's t distribution with df ≥ 1 degrees of freedom. */
double stats_t975(int df);

/* x[0..n) (n ≥ 1) into s. */
void stats_summarise(const double *x, int n, struct stats_summary *s);

/* The paired differences a[i] − b[i] (the same seed i in both) into d, and d reduced into s. */
void stats_paired(const double *a, const double *b, int n, double *d, struct stats_summary *s);

/* Of a paired difference s of a metric where more is better (higher_better) or less is:
 * 1 when the interval lies wholly on a's better side ("a ahead"), -1 on b's, 0 when it holds 0
 * or there is none ("level"). */
int stats_verdict(const struct stats_summary *s, int higher_better);

#endif
