/* Fuzz target: the CSV reader of `pelab plot lines` (lab/csv.c). Any bytes are parsed as a file;
 * a table that reads must be what lab/csv.h promises (1..PELAB_CSV_MAX_COLS unique, non-empty
 * column names, at least one row, every row with a cell per column, rising line numbers), must
 * read back cell for cell when written again with pelab_sb_csv_cell, and every cell goes through
 * the number reader as plot lines reads its x and y columns. A refusal is one line naming the
 * file (and, for a cell, its line). */
#include "fuzz.h"
#include "../lab/csv.h"
#include "pelab/json.h"

#define NAME "fuzz.csv"

/* The table written again, header and rows, each cell by pelab_sb_csv_cell. */
static void write_back(const struct pelab_csv *c, struct pelab_sb *sb) {
    for (int r = -1; r < c->rows; r++)
        for (int j = 0; j < c->cols; j++) {
            pelab_sb_csv_cell(sb, r < 0 ? c->names[j] : pelab_csv_cell(c, r, j));
            pelab_sb_append(sb, j + 1 < c->cols ? "," : "\n", 1);
        }
}

/* Whether b holds a's header and cells. */
static int same_table(const struct pelab_csv *a, const struct pelab_csv *b) {
    if (a->cols != b->cols || a->rows != b->rows) return 0;
    for (long k = 0; k < (long)(a->rows + 1) * a->cols; k++) /* the cells follow the names */
        if (strcmp(a->names[k], b->names[k]) != 0) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1); /* pelab_csv_parse takes it, as pelab_read_file gives it */
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    struct pelab_csv c;
    int rc = pelab_csv_parse(&c, NAME, buf, size);
    if (rc) {
        fuzz_check_refusal(rc, NAME ":");
        return 0;
    }
    if (c.cols < 1 || c.cols > PELAB_CSV_MAX_COLS || c.rows < 1) abort();
    for (int j = 0; j < c.cols; j++)
        if (!c.names[j][0] || pelab_csv_column(&c, c.names[j]) != j)
            abort(); /* empty, or not the first column of that name */
    for (int r = 0; r < c.rows; r++) {
        if (c.lines[r] < 2 || (r > 0 && c.lines[r] <= c.lines[r - 1])) abort();
        for (int j = 0; j < c.cols; j++) {
            double x;
            if ((rc = pelab_csv_number(&c, r, j, &x))) fuzz_check_refusal(rc, NAME ":");
        }
    }
    int col;
    if ((rc = pelab_csv_need(&c, "length", "--x", &col))) fuzz_check_refusal(rc, "--x: " NAME);
    else if (strcmp(c.names[col], "length") != 0) abort();
    struct pelab_sb sb = {0};
    write_back(&c, &sb);
    struct pelab_csv again;
    if (pelab_csv_parse(&again, NAME, sb.data, sb.len) || !same_table(&c, &again)) abort();
    pelab_csv_free(&again); /* it took sb.data */
    pelab_csv_free(&c);
    return 0;
}
