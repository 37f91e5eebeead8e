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

double gradcheck_params(const char *label, gradcheck_fn f, void *ctx, struct pelab_params *params,
                        const double *grad, int first, int end) {
    double worst = 0;
    for (int i = first; i < end; i++) {
        const struct pelab_param *p = &params->list[i];
        char what[256];
        snprintf(what, sizeof what, "%s: %s", label, p->name);
        if (p->frozen) {
            double most = 0;
            for (size_t j = 0; j < p->size; j++) most = fmax(most, fabs(grad[p->offset + j]));
            CHECK(most == 0, "%s is frozen but got a gradient of %.3g", what, most);
            continue;
        }
        worst = fmax(worst, gradcheck(what, f, ctx, params->data + p->offset, grad + p->offset, (long)p->size,
                                      GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL));
    }
    return worst;
}

void fill_uniform(double *x, long n, double lo, double hi, unsigned long long *seed) {
    for (long i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = lo + (hi - lo) * (double)(*seed >> 11) * 0x1.0p-53;
    }
}
