/* Statistics over seeds (lab/stats.h). */
#include <math.h>
#include "stats.h"

/* t(0.975, ν) for ν = 1..30 degrees of freedom, to 6 decimals: the two-sided 95 % critical values
 * of Student's t distribution as tables print them (NIST/SEMATECH e-Handbook of Statistical
 * Methods, section 1.3.6.7.2, "Critical values of the Student's t distribution", column 0.975, to
 * 3 decimals; here computed to 6, and checked by lab/tests/test_stats.c against the t density
 * integrated numerically). lab/scripts/tables.py holds the same table. */
static const double T975[30] = {
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
    2.200985,  2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
    2.079614,  2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
};

double stats_t975(int df) {
    if (df <= 30) return T975[df - 1];
    /* Beyond the table: the Cornish–Fisher expansion of t in powers of 1/ν about the normal
     * quantile z (Abramowitz & Stegun 26.7.5), within 3e-8 of the quantile for ν > 30. */
    const double z = 1.959963984540054, v = df, z2 = z * z;
    const double g1 = (z2 + 1) * z / 4;
    const double g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
    const double g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
    const double g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
    return z + (g1 + (g2 + (g3 + g4 / v) / v) / v) / v;
}

void stats_summarise(const double *x, int n, struct stats_summary *s) {
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    s->n = n;
    s->mean = sum / n;
    for (int i = 0; i < n; i++) ss += (x[i] - s->mean) * (x[i] - s->mean);
    s->sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
    s->ci95 = n > 1 ? stats_t975(n - 1) * s->sd / sqrt(n) : NAN;
    if (!isfinite(s->mean)) s->sd = s->ci95 = NAN;
}

void stats_paired(const double *a, const double *b, int n, double *d, struct stats_summary *s) {
    for (int i = 0; i < n; i++) d[i] = a[i] - b[i];
    stats_summarise(d, n, s);
}

int stats_verdict(const struct stats_summary *s, int higher_better) {
    if (!isfinite(s->ci95)) return 0;
    const int sign = s->mean - s->ci95 > 0 ? 1 : s->mean + s->ci95 < 0 ? -1 : 0;
    return higher_better ? sign : -sign;
}
