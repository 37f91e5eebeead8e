/* The extrapolation columns of `pelab compare` on tasks of documents: each run's
 * length-extrapolation sweep (pelab/sweep.h) on the long documents, kept in RUN/sweep.json so
 * that a resumed comparison does not evaluate a finished run again.
 *
 * RUN/sweep.json: {"lengths": "<the --lengths text>", "rows": [sweep rows, docs/FORMATS.md]}.
 * A file made for other lengths, or one that does not parse, is made again.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compare_sweep.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/options.h"
#include "pelab/status.h"
#include "pelab/sweep.h"
#include "pelab/train.h"

/* Reads the perplexities of path if it was made for `spec` with n rows; 0 when it was. */
static int read_cached(const char *path, const char *spec, int n, double *ppl) {
    char *text;
    size_t size;
    if (pelab_read_file(path, &text, &size)) {
        pelab_clear_error();
        return -1;
    }
    struct pelab_json *j;
    int rc = pelab_json_parse(text, size, &j);
    free(text);
    if (rc) {
        pelab_clear_error();
        return -1;
    }
    const struct pelab_json *l = pelab_json_get(j, "lengths"), *rows = pelab_json_get(j, "rows");
    int ok = l && l->type == PELAB_JSON_STRING && strcmp(l->string, spec) == 0 && rows &&
             rows->type == PELAB_JSON_ARRAY && rows->count == n;
    for (int i = 0; ok && i < n; i++) {
        const struct pelab_json *p = pelab_json_get(rows->items[i], "perplexity");
        ok = p && p->type == PELAB_JSON_NUMBER;
        if (ok) ppl[i] = p->number;
    }
    pelab_json_free(j);
    return ok ? 0 : -1;
}

int pelab_compare_sweep(const char *run_dir, const char *spec, struct pelab_sweep_length *lengths,
                        int *n, double *ppl) {
    static struct pelab_run run;
    int rc = pelab_run_open_with(&run, run_dir, NULL);
    if (rc) return rc;
    rc = pelab_sweep_parse(spec, run.task.seq_len, lengths, n);
    char path[PELAB_OPT_VAL_MAX + 128];
    snprintf(path, sizeof path, "%s/sweep.json", run_dir);
    if (rc || read_cached(path, spec, *n, ppl) == 0) {
        pelab_run_close(&run);
        return rc;
    }
    static struct pelab_sweep_row rows[PELAB_SWEEP_MAX];
    rc = pelab_sweep(&run.model, &run.task, PELAB_SPLIT_LONG, lengths, *n, 8192, rows, NULL, NULL);
    pelab_run_close(&run);
    if (rc) return rc;
    struct pelab_sb sb = {0};
    pelab_sb_printf(&sb, "{\"lengths\": ");
    pelab_sb_json_string(&sb, spec);
    pelab_sb_printf(&sb, ", \"rows\": ");
    pelab_sweep_json(&sb, rows, *n);
    pelab_sb_printf(&sb, "}\n");
    rc = pelab_write_file_atomic(path, sb.data, sb.len);
    pelab_sb_free(&sb);
    for (int i = 0; i < *n; i++) ppl[i] = rows[i].ppl;
    return rc;
}
