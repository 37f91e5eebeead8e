#include <stdarg.h>
#include "check.h"
#include "pelab/ctx.h"

int check_failures, check_count;

void check_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    check_failures++;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int check_report(const char *name) {
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures ? 1 : (check_count ? 0 : 1); /* a test that checked nothing fails */
}

struct pelab_ctx *test_ctx(void) {
    static struct pelab_ctx ctx;
    static int made;
    if (!made++) pelab_ctx_init(&ctx);
    return &ctx;
}
