/* Last-error message per thread, and the always-on assert. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "pelab/status.h"

static _Thread_local char last_error[1024];

int pelab_fail(int code, const char *fmt, ...) {
    char raw[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* One line, whatever the message quotes: a control character (a newline in an option name
     * or a file name) is written as \n, \t or \xNN. */
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p && n + 5 < sizeof last_error; p++) {
        if (*p >= 0x20 && *p != 0x7f)
            last_error[n++] = (char)*p;
        else if (*p == '\n' || *p == '\t')
            n += (size_t)snprintf(last_error + n, 3, "\\%c", *p == '\n' ? 'n' : 't');
        else
            n += (size_t)snprintf(last_error + n, 5, "\\x%02x", *p);
    }
    last_error[n] = '\0';
    return code;
}

int pelab_fail_context(int code, const char *fmt, ...) {
    char context[sizeof last_error], msg[sizeof last_error];
    snprintf(msg, sizeof msg, "%s", last_error); /* pelab_fail writes the buffer it reads */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    return pelab_fail(code, "%s: %s", context, msg);
}

const char *pelab_last_error(void) { return last_error; }

void pelab_clear_error(void) { last_error[0] = '\0'; }

void pelab_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "pelab: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    abort();
}
