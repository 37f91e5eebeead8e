/* pelab/status.h — status codes, the last-error message, and the always-on assert.
 *
 * Outward-facing functions return an int status: PELAB_OK, or a code that doubles as the CLI's
 * exit code (1 runtime error, 2 usage error). On failure they set a one-line message with
 * context, read back with pelab_last_error(). The library never calls exit().
 */
#ifndef PELAB_STATUS_H
#define PELAB_STATUS_H

enum pelab_status {
    PELAB_OK = 0,
    PELAB_ERR_RUNTIME = 1, /* I/O, corrupt files, numerical failure */
    PELAB_ERR_USAGE = 2    /* bad options, incompatible settings */
};

/* Sets the thread's last error (printf-style) and returns `code`, so callers can write
 * `return pelab_fail(PELAB_ERR_USAGE, "--heads %d does not divide --d-model %d", h, d);`. */
int pelab_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds context to the last failure's message and returns `code`: "CONTEXT: message", CONTEXT
 * printf-style — `return pelab_fail_context(rc, "%s", path);` after a call that failed. */
int pelab_fail_context(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The message of the last failure on this thread ("" when none). */
const char *pelab_last_error(void);

/* Clears the last error. */
void pelab_clear_error(void);

/* Programmer errors: always checked, in every build. */
void pelab_assert_fail(const char *expr, const char *file, int line);
#define PELAB_ASSERT(cond) ((cond) ? (void)0 : pelab_assert_fail(#cond, __FILE__, __LINE__))

#endif
