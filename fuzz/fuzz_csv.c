/* Fuzz target: the CSV reader of `pelab plot lines` (cli/csv.c). Any bytes are parsed as a file;
 * a table that reads must be what cli/csv.h promises (1..PELAB_CSV_MAX_COLS unique, non-empty
 * column names, at least one row, every row with a cell per column, none holding a separator,
 * rising line numbers), and every cell goes through the number reader as plot lines reads its x
 * and y columns. A refusal is one line naming the file (and, for a cell, its line). */
#include "fuzz.h"
#include "../cli/csv.h"

#define NAME "fuzz.csv"

static int has_separator(const char *s) { return strpbrk(s, ",\n\"") != NULL; }

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
        if (!c.names[j][0] || has_separator(c.names[j]) || pelab_csv_column(&c, c.names[j]) != j)
            abort(); /* empty, not split, or not the first column of that name */
    for (int r = 0; r < c.rows; r++) {
        if (c.lines[r] < 2 || (r > 0 && c.lines[r] <= c.lines[r - 1])) abort();
        for (int j = 0; j < c.cols; j++) {
            if (has_separator(pelab_csv_cell(&c, r, j))) abort();
            double x;
            if ((rc = pelab_csv_number(&c, r, j, &x))) fuzz_check_refusal(rc, NAME ":");
        }
    }
    int col;
    if ((rc = pelab_csv_need(&c, "length", "--x", &col))) fuzz_check_refusal(rc, "--x: " NAME);
    else if (strcmp(c.names[col], "length") != 0) abort();
    pelab_csv_free(&c);
    return 0;
}
