/* The strict CSV reader: the whole file in one buffer, split in place (separators become NULs),
 * cells pointing into it. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "csv.h"
#include "pelab/io.h"
#include "pelab/status.h"

/* Fields of a line, without cutting it. */
static int count_fields(const char *s) {
    int n = 1;
    for (const char *p = s; (p = strchr(p, ',')); p++) n++;
    return n;
}

/* Splits the line s (NUL-terminated, no newline) at its commas, in place, into out[0..max);
 * returns the number of fields, or max + 1 when there are more (then s is left whole). */
static int split_fields(char *s, char **out, int max) {
    int n = count_fields(s);
    if (n > max) return max + 1;
    for (int i = 0; i < n; i++) {
        out[i] = s;
        char *comma = strchr(s, ',');
        if (comma) *comma = '\0', s = comma + 1;
    }
    return n;
}

/* Cuts the buffer into lines in place: returns the count, each start in starts (malloc'ed). */
static long split_lines(char *buf, size_t size, char ***starts) {
    long n = 0, cap = 64;
    char **v = malloc((size_t)cap * sizeof *v);
    for (size_t i = 0; v && i < size;) {
        if (n == cap) {
            char **grown = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!grown) {
                free(v);
                v = NULL;
                break;
            }
            v = grown;
        }
        v[n++] = buf + i;
        char *nl = memchr(buf + i, '\n', size - i);
        size_t end = nl ? (size_t)(nl - buf) : size;
        buf[end] = '\0'; /* buf has a NUL after its last byte */
        if (end > i && buf[end - 1] == '\r') buf[end - 1] = '\0';
        i = end + 1;
    }
    *starts = v;
    return v ? n : -1;
}

int pelab_csv_read(struct pelab_csv *c, const char *path) {
    memset(c, 0, sizeof *c);
    int in = strcmp(path, "-") == 0;
    char *buf;
    size_t size;
    int rc = pelab_read_file(in ? "/dev/stdin" : path, &buf, &size);
    return rc ? rc : pelab_csv_parse(c, in ? "standard input" : path, buf, size);
}

int pelab_csv_parse(struct pelab_csv *c, const char *name, char *buf, size_t size) {
    memset(c, 0, sizeof *c);
    c->path = name;
    c->buf = buf;
    int rc = PELAB_OK;
    if (memchr(c->buf, '\0', size)) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: not a CSV file (it holds NUL bytes)", c->path);
        pelab_csv_free(c);
        return rc;
    }
    char **lines;
    long n = split_lines(c->buf, size, &lines);
    if (n < 0) {
        pelab_csv_free(c);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", name);
    }
    while (n > 0 && lines[n - 1][0] == '\0') n--; /* empty lines at the end */
    if (n == 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: empty: a CSV file needs a header line", c->path);
    else if (n > 2147483647L) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: too many lines", c->path);
    for (long i = 0; !rc && i < n; i++)
        if (strchr(lines[i], '"'))
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:%ld: quoted fields are not supported", c->path, i + 1);
    if (!rc && count_fields(lines[0]) > PELAB_CSV_MAX_COLS)
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:1: more than %d columns", c->path, PELAB_CSV_MAX_COLS);
    /* Rows that fit the file: a row of cols fields takes at least cols bytes (cols - 1 commas and
     * a newline; the last row cols - 1), as the header does, so there are at most size / cols of
     * them. Sizing cells by the line count instead would let a file of short lines under a wide
     * header ask for cols pointers per byte. */
    long cap = 0;
    if (!rc) {
        int cols = count_fields(lines[0]);
        cap = (long)(size / (size_t)cols) < n - 1 ? (long)(size / (size_t)cols) : n - 1;
        c->names = malloc((size_t)cols * sizeof *c->names);
        c->cells = malloc((size_t)cap * cols * sizeof *c->cells + 1);
        c->lines = malloc((size_t)cap * sizeof *c->lines + 1);
        if (!c->names || !c->cells || !c->lines) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", c->path);
        else c->cols = split_fields(lines[0], c->names, cols);
    }
    for (int j = 0; !rc && j < c->cols; j++) {
        if (!c->names[j][0])
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:1: column %d of the header has no name", c->path, j + 1);
        for (int k = 0; !rc && k < j; k++)
            if (strcmp(c->names[j], c->names[k]) == 0)
                rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:1: column '%s' appears twice in the header", c->path, c->names[j]);
    }
    for (long i = 1; !rc && i < n; i++) {
        if (lines[i][0] == '\0') {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:%ld: empty line inside the table", c->path, i + 1);
            break;
        }
        PELAB_ASSERT(c->rows < cap); /* the bound above: rows before this one were whole */
        int got = split_fields(lines[i], c->cells + (long)c->rows * c->cols, c->cols);
        if (got != c->cols)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:%ld: %s%d fields, but the header has %d", c->path, i + 1,
                            got > c->cols ? "more than " : "", got > c->cols ? c->cols : got, c->cols);
        else c->lines[c->rows++] = (int)(i + 1);
    }
    if (!rc && c->rows == 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: a header and no rows", c->path);
    free(lines);
    if (rc) pelab_csv_free(c);
    return rc;
}

void pelab_csv_free(struct pelab_csv *c) {
    free(c->names);
    free(c->cells);
    free(c->lines);
    free(c->buf);
    memset(c, 0, sizeof *c);
}

int pelab_csv_column(const struct pelab_csv *c, const char *name) {
    for (int j = 0; j < c->cols; j++)
        if (strcmp(c->names[j], name) == 0) return j;
    return -1;
}

int pelab_csv_need(const struct pelab_csv *c, const char *name, const char *option, int *col) {
    *col = pelab_csv_column(c, name);
    if (*col >= 0) return PELAB_OK;
    char list[512] = "";
    for (int j = 0; j < c->cols; j++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", j ? "," : "", c->names[j]);
    }
    return pelab_fail(PELAB_ERR_USAGE, "%s: %s has no column '%s' (its columns: %s)", option, c->path, name, list);
}

int pelab_csv_number(const struct pelab_csv *c, int row, int col, double *out) {
    const char *s = pelab_csv_cell(c, row, col);
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    while (*end == ' ') end++;
    if (end == s || *end || (errno == ERANGE && (*out == HUGE_VAL || *out == -HUGE_VAL)))
        return pelab_fail(PELAB_ERR_RUNTIME, "%s:%d: column '%s': '%s' is not a number", c->path,
                          c->lines[row], c->names[col], s);
    return PELAB_OK;
}
