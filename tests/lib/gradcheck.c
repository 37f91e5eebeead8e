#include <math.h>
#include <stdio.h>
#include "check.h"
#include "gradcheck.h"

double gradcheck(const char *what, gradcheck_fn f, void *ctx, double *x, const double *analytic,
                 long n, double h, double atol, double rtol) {
    double worst = 0;
    long worst_i = -1;
    for (long i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double fp = f(ctx);
        x[i] = keep - h;
        double fm = f(ctx);
        x[i] = keep;
        double num = (fp - fm) / (2 * h), a = analytic[i];
        double tol = atol + rtol * fmax(fabs(a), fabs(num));
        double ratio = fabs(a - num) / tol;
        CHECK(ratio <= 1, "%s[%ld]: analytic %.12g, numeric %.12g", what, i, a, num);
        if (ratio > worst) worst = ratio, worst_i = i;
    }
    printf("  %-40s %6ld elements, worst error %.3g of tolerance (at %ld)\n", what, n, worst, worst_i);
    return worst;
}

void fill_uniform(double *x, long n, double lo, double hi, unsigned long long *seed) {
    for (long i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = lo + (hi - lo) * (double)(*seed >> 11) * 0x1.0p-53;
    }
}
