/* stats (lab/stats.c): the t quantiles against Student's t density integrated numerically, the
 * 95 % interval of a mean and a paired difference against values worked out by hand, and the
 * verdict "ahead" or "level". */
#include <math.h>
#include "../stats.h"
#include "lib/check.h"

/* P(T ≤ t) for Student's t with v degrees of freedom, t ≥ 0: 1/2 plus the density's integral over
 * [0, t] by Simpson's rule (the density is smooth; 200000 intervals leave an error far below the
 * tolerance of the checks). */
static double t_cdf(double t, int v) {
    const double c = exp(lgamma((v + 1) / 2.0) - lgamma(v / 2.0)) / sqrt(v * 3.14159265358979323846);
    const int n = 200000;
    const double h = t / n;
    double s = 0;
    for (int i = 0; i <= n; i++) {
        const double x = i * h, f = c * pow(1 + x * x / v, -(v + 1) / 2.0);
        s += f * (i == 0 || i == n ? 1 : i % 2 ? 4 : 2);
    }
    return 0.5 + s * h / 3;
}

static void test_quantiles(void) {
    /* the table (1..30) and the expansion beyond it: each a 0.975 quantile to within its 6
     * decimals (a quantile off by 1e-6 moves the probability by up to 5e-8 at 30 degrees of
     * freedom, by less where the density is lower) */
    const int dfs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                       21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 40, 60, 99};
    for (size_t i = 0; i < sizeof dfs / sizeof dfs[0]; i++)
        CHECK_CLOSE(t_cdf(stats_t975(dfs[i]), dfs[i]), 0.975, 4e-8, 0, "P(T <= t975) at this df");
    /* the values every table prints, to 3 decimals */
    CHECK_CLOSE(stats_t975(1), 12.706, 5e-4, 0, "t975(1)");
    CHECK_CLOSE(stats_t975(2), 4.303, 5e-4, 0, "t975(2)");
    CHECK_CLOSE(stats_t975(30), 2.042, 5e-4, 0, "t975(30)");
    CHECK(stats_t975(31) < stats_t975(30) && stats_t975(99) > 1.96, "the expansion continues the table");
}

static void test_interval(void) {
    /* 1, 2, 4: mean 7/3, sd sqrt(7/3) = 1.5275, half-width 4.303·1.5275/√3 = 3.7946 (by hand) */
    struct stats_summary s;
    stats_summarise((const double[]){1, 2, 4}, 3, &s);
    CHECK(s.n == 3, "n");
    CHECK_CLOSE(s.mean, 2.333333, 1e-6, 0, "mean of 1, 2, 4");
    CHECK_CLOSE(s.sd, 1.527525, 1e-6, 0, "sd of 1, 2, 4");
    CHECK_CLOSE(s.ci95, 3.794583, 2e-6, 0, "95 % half-width of 1, 2, 4");
    /* one value: no spread, no interval */
    stats_summarise((const double[]){5}, 1, &s);
    CHECK(s.mean == 5 && s.sd == 0 && isnan(s.ci95), "one value: mean 5, sd 0, no interval");
    /* equal values: a point interval */
    stats_summarise((const double[]){0.5, 0.5}, 2, &s);
    CHECK(s.sd == 0 && s.ci95 == 0, "equal values: sd 0, half-width 0");
    /* a diverged run (NaN) makes the summary NaN, never a number */
    stats_summarise((const double[]){1, NAN, 2}, 3, &s);
    CHECK(isnan(s.mean) && isnan(s.sd) && isnan(s.ci95), "a NaN value: NaN summary");
}

static void test_paired(void) {
    /* a − b per seed: 2, 3, 0: mean 5/3, sd sqrt(7/3) = 1.5275, half-width 3.7946: the interval
     * −2.128 … 5.461 holds 0: level */
    double d[3];
    struct stats_summary s;
    stats_paired((const double[]){3, 5, 4}, (const double[]){1, 2, 4}, 3, d, &s);
    CHECK(d[0] == 2 && d[1] == 3 && d[2] == 0, "differences per seed");
    CHECK_CLOSE(s.mean, 1.666667, 1e-6, 0, "mean difference");
    CHECK_CLOSE(s.ci95, 3.794583, 2e-6, 0, "half-width of the difference");
    CHECK(stats_verdict(&s, 1) == 0 && stats_verdict(&s, 0) == 0, "an interval over 0: level");
    /* 2, 2, 1.5: mean 1.8333, sd 0.288675, half-width 4.302653·0.288675/√3 = 0.717109: 1.116 …
     * 2.550 excludes 0: a ahead where more is better, b ahead where less is */
    stats_paired((const double[]){3, 4, 5}, (const double[]){1, 2, 3.5}, 3, d, &s);
    CHECK_CLOSE(s.mean, 1.833333, 1e-6, 0, "mean difference");
    CHECK_CLOSE(s.sd, 0.288675, 1e-6, 0, "sd of the differences");
    CHECK_CLOSE(s.ci95, 0.717109, 2e-6, 0, "half-width of the difference");
    CHECK(stats_verdict(&s, 1) == 1, "a ahead (more is better)");
    CHECK(stats_verdict(&s, 0) == -1, "b ahead (less is better)");
    /* the same seeds the other way round */
    stats_paired((const double[]){1, 2, 3.5}, (const double[]){3, 4, 5}, 3, d, &s);
    CHECK(stats_verdict(&s, 1) == -1 && stats_verdict(&s, 0) == 1, "swapped: the verdict swaps");
    /* one seed: no interval, level */
    stats_paired((const double[]){9}, (const double[]){1}, 1, d, &s);
    CHECK(stats_verdict(&s, 1) == 0, "one seed: level");
}

int main(void) {
    test_quantiles();
    test_interval();
    test_paired();
    return check_report("stats");
}
