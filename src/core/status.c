/* Last-error message per thread, and the always-on assert. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "pelab/status.h"

static _Thread_local char last_error[1024];

int pelab_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *pelab_last_error(void) { return last_error; }

void pelab_clear_error(void) { last_error[0] = '\0'; }

void pelab_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "pelab: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    abort();
}
