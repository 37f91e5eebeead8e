/* Central-difference gradient checks for the double build. */
#ifndef PELAB_TEST_GRADCHECK_H
#define PELAB_TEST_GRADCHECK_H

#include "pelab/params.h"

/* The step and tolerances of the suite's checks: a float64 central difference with h = 1e-6 is
 * within ~1e-10 of the derivative of a smooth function of order 1. */
#define GRADCHECK_STEP 1e-6
#define GRADCHECK_ATOL 1e-8
#define GRADCHECK_RTOL 1e-6

/* A scalar function of some state that the check perturbs in place. */
typedef double (*gradcheck_fn)(void *ctx);

/* For every i < n: perturbs x[i] by ±h, evaluates f, and compares (f+ − f−)/2h with
 * analytic[i]: |a − num| <= atol + rtol·max(|a|, |num|). Counts one CHECK per element and reports
 * the worst element of `what`. Returns the worst error ratio (<= 1 means pass). */
double gradcheck(const char *what, gradcheck_fn f, void *ctx, double *x, const double *analytic,
                 long n, double h, double atol, double rtol);

/* Every parameter i in [first, end) of params, one gradcheck each ("label: name", the suite's step
 * and tolerances), against its part of grad (laid out as params->grad), f reading params->data. A
 * frozen parameter (declared not learnt) must get no gradient at all. Returns the worst ratio. */
double gradcheck_params(const char *label, gradcheck_fn f, void *ctx, struct pelab_params *params,
                        const double *grad, int first, int end);

/* Fills x (n,) with uniform values in [lo, hi) from a small fixed generator. */
void fill_uniform(double *x, long n, double lo, double hi, unsigned long long *seed);

#endif
