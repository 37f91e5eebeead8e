/* lab/csv.h — a small, strict CSV reader (RFC 4180) for the tables pelab writes (and tables like
 * them): a header line of unique, non-empty column names (at most PELAB_CSV_MAX_COLS), then rows
 * with exactly as many cells, separated by commas. A cell that begins with a quote is quoted: it
 * may hold commas, line breaks and quotes (doubled), and ends at the next single quote; a quote
 * anywhere else is an error. A UTF-8 byte order mark at the start (spreadsheets write one) is
 * skipped. Lines end in \n (a \r before it is dropped); the last may lack it;
 * empty lines are refused except at the end. Anything else is an error naming the file, line and
 * what is wrong. pelab_sb_csv_cell (pelab/json.h) writes cells this reads back.
 */
#ifndef PELAB_CLI_CSV_H
#define PELAB_CLI_CSV_H

#include <stddef.h>

#define PELAB_CSV_MAX_COLS 4096

struct pelab_csv {
    const char *path;  /* for messages */
    int cols, rows;
    char **names;      /* (cols,), pointing into buf; the cells follow in the same allocation */
    char **cells;      /* (rows, cols), pointing into buf */
    int *lines;        /* (rows,) the file's line number of each row's first line */
    char *buf;
};

/* Reads `path` ("-": standard input). PELAB_ERR_RUNTIME with "PATH:LINE: …" for a malformed
 * file or one without rows. */
int pelab_csv_read(struct pelab_csv *c, const char *path);
/* The same from memory: buf (malloc'ed, size bytes and a NUL after them, as pelab_read_file
 * gives) becomes c->buf, freed by pelab_csv_free or on failure; `name` (kept, not copied) names
 * it in messages. */
int pelab_csv_parse(struct pelab_csv *c, const char *name, char *buf, size_t size);
void pelab_csv_free(struct pelab_csv *c);

/* Index of column `name`, or -1. */
int pelab_csv_column(const struct pelab_csv *c, const char *name);
/* Column `name`'s index, or PELAB_ERR_USAGE naming the columns there are (`option` names the
 * option that asked for it). */
int pelab_csv_need(const struct pelab_csv *c, const char *name, const char *option, int *col);
static inline const char *pelab_csv_cell(const struct pelab_csv *c, int row, int col) {
    return c->cells[(long)row * c->cols + col];
}
/* The cell as a number ("nan", "inf" allowed); PELAB_ERR_RUNTIME "PATH:LINE: column 'x': 'abc'
 * is not a number" otherwise. */
int pelab_csv_number(const struct pelab_csv *c, int row, int col, double *out);

#endif
