/* log.jsonl: append-only, one whole line per write, flushed at once (so `tail -f` follows a run)
 * and fsync'ed before each checkpoint. A resume cuts the file back to the lines of steps up to the
 * checkpoint it continues from (dropping lines of lost steps and a torn last line) with an atomic
 * rewrite; the continued run then appends exactly the lines an uninterrupted run would have.
 * And notices: one line each, to the progress hook. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/status.h"
#include "train/run.h"

/* Length of the prefix of `text` made of complete lines with "step" <= `step`. */
static size_t kept_prefix(const char *text, size_t size, int64_t step) {
    size_t keep = 0;
    while (keep < size) {
        const char *nl = memchr(text + keep, '\n', size - keep);
        if (!nl) break; /* torn last line */
        size_t len = (size_t)(nl - (text + keep));
        struct pelab_json *j = NULL;
        if (pelab_json_parse(text + keep, len, &j)) break;
        const struct pelab_json *s = pelab_json_get(j, "step");
        int ok = s && s->type == PELAB_JSON_NUMBER && s->number <= (double)step;
        pelab_json_free(j);
        if (!ok) break;
        keep += len + 1;
    }
    pelab_clear_error();
    return keep;
}

int pelab_log_open(struct pelab_trainer *tr, int fresh) {
    char path[PELAB_PATH_MAX];
    pelab_path(path, tr->dir, "log.jsonl");
    int rc;
    if (fresh || !pelab_file_exists(path)) {
        rc = pelab_write_file_atomic(path, "", 0);
    } else {
        char *text;
        size_t size;
        if ((rc = pelab_read_file(path, &text, &size))) return rc;
        size_t keep = kept_prefix(text, size, tr->step);
        rc = keep == size ? PELAB_OK : pelab_write_file_atomic(path, text, keep);
        free(text);
    }
    if (rc) return rc;
    tr->log = fopen(path, "a");
    if (!tr->log) return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot open for appending", path);
    return PELAB_OK;
}

int pelab_log_append(struct pelab_trainer *tr, const char *line) {
    fputs(line, tr->log);
    fputc('\n', tr->log);
    if (fflush(tr->log) != 0 || ferror(tr->log))
        return pelab_fail(PELAB_ERR_RUNTIME, "%s/log.jsonl: write failed", tr->dir);
    return PELAB_OK;
}

int pelab_log_sync(struct pelab_trainer *tr) {
    if (fflush(tr->log) != 0 || fsync(fileno(tr->log)) != 0)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s/log.jsonl: flush failed", tr->dir);
    return PELAB_OK;
}

void pelab_log_close(struct pelab_trainer *tr) {
    if (tr->log) fclose(tr->log);
    tr->log = NULL;
}

/* A NOTICE: one line for the progress hook (which prints it as a warning). */
void pelab_train_notice(const struct pelab_trainer *tr, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!tr->hooks || !tr->hooks->progress) return;
    struct pelab_train_progress p = {0};
    p.event = PELAB_TRAIN_NOTICE;
    p.dir = tr->dir;
    p.step = tr->step;
    p.steps = tr->c.steps;
    p.message = msg;
    tr->hooks->progress(tr->hooks->ctx, &p);
}
