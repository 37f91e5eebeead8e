/* The strict CSV reader (RFC 4180): the whole file in one buffer, cut in place (the byte after
 * a cell becomes its NUL, and a quoted cell is unquoted where it stands: it only shrinks), cells
 * pointing into it. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "csv.h"
#include "pelab/io.h"
#include "pelab/status.h"

/* v (n elements held, *cap allocated, elem bytes each) with room for one more: v itself, or v
 * reallocated with *cap doubled; NULL when out of memory (v then left as it was). */
static void *grow(void *v, long n, long *cap, size_t elem) {
    if (n < *cap) return v;
    const long want = *cap ? 2 * *cap : 256;
    void *grown = realloc(v, (size_t)want * elem);
    if (grown) *cap = want;
    return grown;
}

/* The parser's place in the buffer: buf[i] is the next byte (buf[size] is a NUL), on line `line`. */
struct cursor {
    const char *path;
    char *buf;
    size_t i, size;
    long line;
    char **cells; /* every cell read, the header's first */
    long n, cap;
};

/* Whether buf[i] is a \r that ends a line: one before a \n, or the file's last byte. */
static int line_end_cr(const struct cursor *k, size_t i) {
    return k->buf[i] == '\r' && (k->buf[i + 1] == '\n' || i + 1 == k->size);
}

/* Whether the cursor is at an empty line: a line end (\n, \r\n, or a last \r) and nothing before. */
static int at_empty_line(const struct cursor *k) {
    return k->buf[k->i] == '\n' || line_end_cr(k, k->i);
}

/* One cell at the cursor, cut (and unquoted) in place and appended to k->cells; *sep is what ended
 * it: ',', '\n' or '\0' (the end of the file). A quoted cell may hold commas, line breaks and
 * quotes, doubled ("a ""b"", c" is: a "b", c); a quote anywhere else is refused, and so is text
 * after the closing quote. */
static int cell(struct cursor *k, char *sep) {
    char *start = k->buf + k->i, *end;
    if (*start == '"') {
        const long opened = k->line;
        end = start;
        for (k->i++;; k->i++) {
            if (k->i >= k->size)
                return pelab_fail(PELAB_ERR_RUNTIME, "%s:%ld: a quote opened here is never closed", k->path, opened);
            const char c = k->buf[k->i];
            if (c == '"' && k->buf[k->i + 1] != '"') break; /* the closing quote */
            k->i += c == '"';                               /* "" is one quote */
            k->line += c == '\n';
            *end++ = c;
        }
        k->i++;
        k->i += line_end_cr(k, k->i);
        if (k->i < k->size && k->buf[k->i] != ',' && k->buf[k->i] != '\n')
            return pelab_fail(PELAB_ERR_RUNTIME, "%s:%ld: text after a quoted cell's closing quote", k->path, k->line);
    } else {
        for (; k->i < k->size && k->buf[k->i] != ',' && k->buf[k->i] != '\n'; k->i++)
            if (k->buf[k->i] == '"')
                return pelab_fail(PELAB_ERR_RUNTIME, "%s:%ld: a quote inside a cell that does not begin with "
                                  "one (quote the whole cell and double the quotes in it)", k->path, k->line);
        end = k->buf + k->i;
        end -= end > start && line_end_cr(k, k->i - 1); /* a \r\n line end, or a last \r */
    }
    *sep = k->buf[k->i]; /* ',', '\n', or the NUL after the buffer */
    k->i += *sep != '\0';
    k->line += *sep == '\n';
    *end = '\0';         /* at or before the separator, read already */
    char **cells = grow(k->cells, k->n, &k->cap, sizeof *k->cells);
    if (!cells) return pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", k->path);
    k->cells = cells;
    k->cells[k->n++] = start;
    return PELAB_OK;
}

/* The record at the cursor, its cells appended; their count in *n, which stops at max + 1 (the
 * rest of the record then unread). */
static int record(struct cursor *k, int max, int *n) {
    char sep = ',';
    int rc = PELAB_OK;
    for (*n = 0; !rc && sep == ',' && *n <= max; ++*n) rc = cell(k, &sep);
    return rc;
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
    /* a UTF-8 byte order mark, which spreadsheets write first, is no part of the first column's name */
    const size_t bom = size >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    struct cursor k = {.path = name, .buf = buf, .i = bom, .size = size, .line = 1};
    long lines_cap = 0;
    int *lines;
    int rc = PELAB_OK, got = 0;
    if (memchr(buf, '\0', size)) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: not a CSV file (it holds NUL bytes)", name);
    else if (size == bom) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: empty: a CSV file needs a header line", name);
    else if (at_empty_line(&k)) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:1: the header line is empty", name);
    else if (!(rc = record(&k, PELAB_CSV_MAX_COLS, &got)) && got > PELAB_CSV_MAX_COLS)
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:1: more than %d columns", name, PELAB_CSV_MAX_COLS);
    c->cols = rc ? 0 : got;
    for (int j = 0; j < c->cols && !rc; j++) {
        if (!k.cells[j][0]) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:1: column %d of the header has no name", name, j + 1);
        for (int m = 0; m < j && !rc; m++)
            if (strcmp(k.cells[j], k.cells[m]) == 0)
                rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:1: column '%s' appears twice in the header", name, k.cells[j]);
    }
    while (!rc && k.i < k.size) {
        if (at_empty_line(&k)) { /* empty lines are allowed at the end only */
            const long empty = k.line;
            while (k.i < k.size && (k.buf[k.i] == '\n' || k.buf[k.i] == '\r')) k.i++;
            if (k.i < k.size) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:%ld: empty line inside the table", name, empty);
            break;
        }
        const long line = k.line;
        if ((rc = record(&k, c->cols, &got))) break;
        if (got != c->cols)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s:%ld: %s%d fields, but the header has %d", name, line,
                            got > c->cols ? "more than " : "", got > c->cols ? c->cols : got, c->cols);
        else if (line > 2147483647L) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: too many lines", name);
        else if (!(lines = grow(c->lines, c->rows, &lines_cap, sizeof *c->lines)))
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", name);
        else c->lines = lines, c->lines[c->rows++] = (int)line;
    }
    if (!rc && c->rows == 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: a header and no rows", name);
    c->names = k.cells; /* the header's cells, then the rows' */
    c->cells = rc ? NULL : k.cells + c->cols;
    if (rc) pelab_csv_free(c);
    return rc;
}

void pelab_csv_free(struct pelab_csv *c) {
    free(c->names); /* the cells too */
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
