/* Central-difference gradient checks for the double build. */
#ifndef PELAB_TEST_GRADCHECK_H
#define PELAB_TEST_GRADCHECK_H

/* A scalar function of some state that the check perturbs in place. */
typedef double (*gradcheck_fn)(void *ctx);

/* For every i < n: perturbs x[i] by ±h, evaluates f, and compares (f+ − f−)/2h with
 * analytic[i]: |a − num| <= atol + rtol·max(|a|, |num|). Counts one CHECK per element and reports
 * the worst element of `what`. Returns the worst error ratio (<= 1 means pass). */
double gradcheck(const char *what, gradcheck_fn f, void *ctx, double *x, const double *analytic,
                 long n, double h, double atol, double rtol);

/* Fills x (n,) with uniform values in [lo, hi) from a small fixed generator. */
void fill_uniform(double *x, long n, double lo, double hi, unsigned long long *seed);

#endif
