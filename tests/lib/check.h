/* tests/lib/check.h — the test programs' assertions. A failed CHECK prints file:line and the
 * message and is counted; check_report() prints the tally and gives the exit status, so every
 * test program's exit status is its verdict. */
#ifndef PELAB_TEST_CHECK_H
#define PELAB_TEST_CHECK_H

#include <math.h>
#include <stdio.h>

extern int check_failures, check_count;

void check_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        check_count++;                                                                      \
        if (!(cond)) check_fail(__FILE__, __LINE__, __VA_ARGS__);                           \
    } while (0)

/* |a - b| <= atol + rtol·|b| */
#define CHECK_CLOSE(a, b, atol, rtol, what)                                                 \
    do {                                                                                    \
        double a_ = (a), b_ = (b);                                                          \
        CHECK(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_), "%s: %.17g vs %.17g", what, a_, b_); \
    } while (0)

/* Prints "name: N checks, N failed" and returns the exit status (0 when nothing failed). */
int check_report(const char *name);

/* The context the tests' kernels, encodings and attention calls run in unless a test makes its
 * own (pelab/ctx.h): fp32, one process, made on the first call. A test that changes its precision
 * or rows sets them back. */
struct pelab_ctx *test_ctx(void);

#endif
