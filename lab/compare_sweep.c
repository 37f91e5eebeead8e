/* The extrapolation columns of `pelab compare` on tasks of documents, qa, images and the
 * algorithmic tasks: each run's length-extrapolation sweep (pelab/sweep.h) on the long documents,
 * kept in RUN/sweep.json so that a resumed comparison does not evaluate a finished run again.
 *
 * RUN/sweep.json: {"lengths": "<the --lengths text>", "step": N, "rows": [sweep rows,
 * docs/FORMATS.md]}; with evaluation-time options the file is RUN/sweep-<name=value,...>.json and
 * has "eval_options": "<name=value,...>" too, so that variants differing only in those options
 * (learned, learned:ape-extend=interpolate) share one run and keep a sweep each. "step" is the
 * step of the weights measured, so that a run trained further is measured again. A file made for
 * other lengths, other options or other weights, or one that does not parse, is made again.
 * Runs of task qa keep RUN/qa_sweep.json alike, with the rows of pelab/qa_sweep.h (test
 * questions, greedy generation of PELAB_QA_GEN_TOKENS tokens). Runs of task image keep
 * RUN/resolutions.json alike: {"lengths": "<the sides, comma-separated>", "step": N, "rows":
 * [{"side", "grid", "examples", "accuracy", "loss"}, ...]}, the whole test split at each side,
 * kept by side: a sweep evaluates only the sides the file lacks (or holds a row of that is not a
 * whole measurement of the test split) and adds them (Table V's four sides reuse Table III's
 * seven); the file is written under a lock (RUN/resolutions.json.lock), read again there, so that
 * two compares adding sides to one run at the same moment keep both's. Runs of an algorithmic
 * task keep RUN/sizes.json: {"sizes": "1-<test max>", "step": N, "train_max": L, "rows": [the
 * rows of 'pelab eval --json' on the test split]}, every size of the test split.
 */
#define _DEFAULT_SOURCE /* flock */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include "compare_sweep.h"
#include "pelab/image.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/options.h"
#include "pelab/qa_sweep.h"
#include "pelab/status.h"
#include "pelab/sweep.h"
#include "pelab/train.h"

/* "name=value,..." of the evaluation-time options, in the order given. */
static void eval_text(char *buf, size_t size, const struct pelab_opts *eval) {
    buf[0] = '\0';
    for (int i = 0; i < eval->count; i++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s=%s", i ? "," : "", eval->kv[i].key,
                 eval->kv[i].val);
}

/* A run's cached sweep: the text of its evaluation-time options ("name=value,...", "" for none),
 * the step of the weights measured, and its file, RUN/<base>.json or RUN/<base>-<etext>.json
 * ('/' written as '_'). */
struct sweep_cache {
    char etext[PELAB_OPTS_MAX * 64];
    char path[PELAB_OPT_VAL_MAX + PELAB_OPTS_MAX * 64 + 64];
    int64_t step;
};

/* The run opened with the evaluation-time options `eval`, and its cache file for `base` into sc. */
static int cache_open(struct pelab_run *run, struct sweep_cache *sc, const char *run_dir,
                      const struct pelab_opts *eval, const char *base) {
    eval_text(sc->etext, sizeof sc->etext, eval);
    snprintf(sc->path, sizeof sc->path, "%s/%s%s%s.json", run_dir, base, sc->etext[0] ? "-" : "",
             sc->etext);
    for (char *c = sc->path + strlen(run_dir) + 1; *c; c++)
        if (*c == '/') *c = '_';
    int rc = pelab_run_open_with(run, run_dir, eval);
    sc->step = run->step;
    return rc;
}

/* sc's file parsed, if it was made with sc's options from the weights of sc's step; NULL
 * otherwise (no file, one that does not parse, or another's). */
static struct pelab_json *cache_load(const struct sweep_cache *sc) {
    struct pelab_json *j;
    if (pelab_json_load(sc->path, &j)) {
        pelab_clear_error();
        return NULL;
    }
    const struct pelab_json *st = pelab_json_get(j, "step"), *e = pelab_json_get(j, "eval_options");
    const int same_step = st && st->type == PELAB_JSON_NUMBER && st->number == (double)sc->step;
    const int same_options = e ? e->type == PELAB_JSON_STRING && strcmp(e->string, sc->etext) == 0 : !sc->etext[0];
    if (same_step && same_options) return j;
    pelab_json_free(j);
    return NULL;
}

/* Reads each row's number `key` of sc's file into ppl (and, em not NULL, the exact matches) if it
 * is sc's (cache_load) and was made for `spec` (its "lengths", or `spec_key`) with n rows; 0 when
 * it was. */
static int read_cached_as(const struct sweep_cache *sc, const char *spec_key, const char *spec, int n,
                          const char *key, double *ppl, double *em) {
    struct pelab_json *j = cache_load(sc);
    if (!j) return -1;
    const struct pelab_json *l = pelab_json_get(j, spec_key), *rows = pelab_json_get(j, "rows");
    int ok = l && l->type == PELAB_JSON_STRING && strcmp(l->string, spec) == 0 && rows &&
             rows->type == PELAB_JSON_ARRAY && rows->count == n;
    for (int i = 0; ok && i < n; i++) {
        const struct pelab_json *p = pelab_json_get(rows->items[i], key);
        const struct pelab_json *x = em ? pelab_json_get(rows->items[i], "exact_match") : NULL;
        ok = p && p->type == PELAB_JSON_NUMBER && (!em || (x && x->type == PELAB_JSON_NUMBER));
        if (ok) ppl[i] = p->number;
        if (ok && em) em[i] = x->number;
    }
    pelab_json_free(j);
    return ok ? 0 : -1;
}

static int read_cached(const struct sweep_cache *sc, const char *spec, int n, const char *key, double *ppl,
                       double *em) {
    return read_cached_as(sc, "lengths", spec, n, key, ppl, em);
}

/* The start of a cache file, {"<spec_key>": spec, "step": N[, "eval_options": etext]; the caller
 * adds its rows. */
static void cache_head_as(struct pelab_sb *sb, const char *spec_key, const char *spec, const struct sweep_cache *sc) {
    pelab_sb_printf(sb, "{\"%s\": ", spec_key);
    pelab_sb_json_string(sb, spec);
    pelab_sb_printf(sb, ", \"step\": %lld", (long long)sc->step);
    if (sc->etext[0]) {
        pelab_sb_printf(sb, ", \"eval_options\": ");
        pelab_sb_json_string(sb, sc->etext);
    }
}

static void cache_head(struct pelab_sb *sb, const char *spec, const struct sweep_cache *sc) {
    cache_head_as(sb, "lengths", spec, sc);
}

/* An exclusive lock on sc's file for a read-merge-write, against another compare adding sides to
 * the same run at the same moment: flock on <file>.lock beside it (made once and kept: a lock file
 * removed and made again could let two processes hold a lock each). The lock's descriptor, or -1
 * where it cannot be had (a file system without locks, a directory this user cannot write): the
 * merge then goes unguarded, where the worst a race can do is lose a side to be measured again. */
static int cache_lock(const struct sweep_cache *sc) {
    char path[sizeof sc->path + 8];
    snprintf(path, sizeof path, "%s.lock", sc->path);
    int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0644), locked;
    while (fd >= 0 && (locked = flock(fd, LOCK_EX)) != 0 && errno == EINTR) continue;
    if (fd >= 0 && locked != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void cache_unlock(int fd) {
    if (fd >= 0) close(fd);
}

/* Closes the object in sb, writes it to path atomically and frees sb. */
static int cache_write(struct pelab_sb *sb, const char *path) {
    pelab_sb_printf(sb, "}\n");
    int rc = pelab_write_file_atomic(path, sb->data, sb->len);
    pelab_sb_free(sb);
    return rc;
}

int pelab_compare_sweep(const char *run_dir, const char *spec, const struct pelab_opts *eval,
                        struct pelab_sweep_length *lengths, int *n, double *ppl) {
    static struct pelab_run run;
    static struct sweep_cache sc;
    int rc = cache_open(&run, &sc, run_dir, eval, "sweep");
    if (rc) return rc;
    rc = pelab_sweep_parse(spec, run.task.seq_len, lengths, n);
    if (rc || read_cached(&sc, spec, *n, "perplexity", ppl, NULL) == 0) {
        pelab_run_close(&run);
        return rc;
    }
    static struct pelab_sweep_row rows[PELAB_SWEEP_MAX];
    rc = pelab_sweep(&run.model, &run.task, PELAB_SPLIT_LONG, lengths, *n, 8192, rows, NULL, NULL);
    pelab_run_close(&run);
    if (rc) return rc;
    struct pelab_sb sb = {0};
    cache_head(&sb, spec, &sc);
    pelab_sb_printf(&sb, ", \"rows\": ");
    pelab_sweep_json(&sb, rows, *n);
    rc = cache_write(&sb, sc.path);
    for (int i = 0; i < *n; i++) ppl[i] = rows[i].ppl;
    return rc;
}

int pelab_compare_qa_sweep(const char *run_dir, const char *spec, const struct pelab_opts *eval,
                           struct pelab_sweep_length *lengths, int *n, double *ppl, double *em) {
    static struct pelab_run run;
    static struct sweep_cache sc;
    int rc = cache_open(&run, &sc, run_dir, eval, "qa_sweep");
    if (rc) return rc;
    rc = pelab_sweep_parse(spec, run.task.seq_len, lengths, n);
    if (rc || read_cached(&sc, spec, *n, "span_perplexity", ppl, em) == 0) {
        pelab_run_close(&run);
        return rc;
    }
    static struct pelab_qa_row rows[PELAB_SWEEP_MAX];
    rc = pelab_qa_sweep(&run.model, &run.settings, PELAB_SPLIT_TEST, lengths, *n, 0, 8192,
                        PELAB_QA_GEN_TOKENS, rows, NULL, NULL);
    pelab_run_close(&run);
    if (rc) return rc;
    struct pelab_sb sb = {0};
    cache_head(&sb, spec, &sc);
    pelab_sb_printf(&sb, ", \"gen_tokens\": %d, \"rows\": ", PELAB_QA_GEN_TOKENS);
    pelab_qa_sweep_json(&sb, rows, *n);
    rc = cache_write(&sb, sc.path);
    for (int i = 0; i < *n; i++) {
        ppl[i] = rows[i].ppl;
        em[i] = rows[i].exact_match;
    }
    return rc;
}

/* One side of a run's image sweep, as RUN/resolutions.json keeps it (loss NAN: written null). */
struct side_row {
    int side, grid;
    uint64_t examples;
    double acc, loss;
};

/* The rows of sc's cached image sweep (cache_load) that are whole measurements of this run's test
 * split: a side of the patch grid (grid = side / patch), every one of the split's `examples`, an
 * accuracy in [0, 1]; others are left out, and so is a side beyond the first max. */
static int read_side_rows(const struct sweep_cache *sc, int patch, uint64_t examples, struct side_row *rows,
                          int max) {
    struct pelab_json *j = cache_load(sc);
    const struct pelab_json *r = j ? pelab_json_get(j, "rows") : NULL;
    int n = 0;
    for (int i = 0; r && r->type == PELAB_JSON_ARRAY && i < r->count && n < max; i++) {
        static const char *const keys[5] = {"side", "grid", "examples", "accuracy", "loss"};
        double v[5];
        int k = 0;
        for (; k < 5; k++) {
            const struct pelab_json *x = pelab_json_get(r->items[i], keys[k]);
            if (x && x->type == PELAB_JSON_NUMBER) v[k] = x->number;
            else if (x && x->type == PELAB_JSON_NULL && k == 4) v[k] = NAN;
            else break;
        }
        if (k == 5 && v[0] >= patch && v[0] <= PELAB_IMAGE_MAX_SIDE && v[0] == floor(v[0]) &&
            v[1] * patch == v[0] && v[2] == (double)examples && v[3] >= 0 && v[3] <= 1)
            rows[n++] = (struct side_row){(int)v[0], (int)v[1], examples, v[3], v[4]};
    }
    pelab_json_free(j);
    return n;
}

static int by_side(const void *a, const void *b) {
    const int x = ((const struct side_row *)a)->side, y = ((const struct side_row *)b)->side;
    return (x > y) - (x < y);
}

/* Writes the image sweep's rows (n ≤ PELAB_IMAGE_MAX_SIDES, sorted by side) as sc's file, its
 * "lengths" the sides, comma-separated. */
static int write_side_rows(const struct sweep_cache *sc, const struct side_row *rows, int n) {
    char text[PELAB_IMAGE_MAX_SIDES * 12] = ""; /* an int's 11 characters and a comma each */
    for (int k = 0; k < n; k++) snprintf(text + strlen(text), sizeof text - strlen(text), "%s%d", k ? "," : "", rows[k].side);
    struct pelab_sb sb = {0};
    cache_head(&sb, text, sc);
    pelab_sb_printf(&sb, ", \"rows\": [");
    for (int k = 0; k < n; k++) {
        pelab_sb_printf(&sb, "%s{\"side\": %d, \"grid\": %d, \"examples\": %llu, \"accuracy\": ", k ? ", " : "",
                        rows[k].side, rows[k].grid, (unsigned long long)rows[k].examples);
        pelab_sb_json_number(&sb, rows[k].acc);
        pelab_sb_printf(&sb, ", \"loss\": ");
        pelab_sb_json_number(&sb, rows[k].loss);
        pelab_sb_printf(&sb, "}");
    }
    pelab_sb_printf(&sb, "]");
    return cache_write(&sb, sc->path);
}

int pelab_compare_resolutions(const char *run_dir, const char *spec, const struct pelab_opts *eval,
                              struct pelab_sweep_length *lengths, int *n, double *acc) {
    static struct pelab_run run;
    static struct sweep_cache sc;
    int rc = cache_open(&run, &sc, run_dir, eval, "resolutions");
    if (rc) return rc;
    /* the sides asked, labelled as given */
    int train_side, patch, sides[PELAB_IMAGE_MAX_SIDES];
    rc = pelab_task_sides(&run.task, &run.model, spec, sides, n, &train_side, &patch);
    char items[PELAB_OPT_VAL_MAX];
    snprintf(items, sizeof items, "%s", spec);
    char *save, *item = strtok_r(items, ",", &save);
    for (int i = 0; !rc && i < *n; i++, item = strtok_r(NULL, ",", &save)) {
        snprintf(lengths[i].label, sizeof lengths[i].label, "%s", item ? item : "");
        lengths[i].tokens = sides[i];
    }
    /* the sides the file has (up to PELAB_IMAGE_MAX_SIDES), then those asked that it lacks (as
     * many again), each once */
    static struct side_row rows[2 * PELAB_IMAGE_MAX_SIDES];
    if (!rc) rc = pelab_task_open_split(&run.task, PELAB_SPLIT_TEST); /* its size, read on first use */
    const uint64_t examples = rc ? 0 : run.task.ops->split_size(&run.task, PELAB_SPLIT_TEST);
    const int kept = rc ? 0 : read_side_rows(&sc, patch, examples, rows, PELAB_IMAGE_MAX_SIDES);
    int missing[PELAB_IMAGE_MAX_SIDES], n_missing = 0;
    for (int i = 0; !rc && i < *n; i++) {
        int k = 0, m = 0;
        while (k < kept && rows[k].side != sides[i]) k++;
        while (m < n_missing && missing[m] != sides[i]) m++;
        if (k == kept && m == n_missing) missing[n_missing++] = sides[i];
    }
    struct pelab_eval_result r[PELAB_IMAGE_MAX_SIDES];
    if (!rc && n_missing) rc = pelab_evaluate_sides(&run.model, &run.task, PELAB_SPLIT_TEST, missing, n_missing, 0, 64, r);
    pelab_run_close(&run);
    if (rc) return rc;
    int total = kept;
    for (int i = 0; i < n_missing; i++)
        rows[total++] = (struct side_row){missing[i], missing[i] / patch, r[i].examples, r[i].acc, r[i].loss};
    for (int i = 0; i < *n; i++)
        for (int k = 0; k < total; k++)
            if (rows[k].side == sides[i]) acc[i] = rows[k].acc;
    if (!n_missing) return PELAB_OK;
    /* The file read again under its lock, with whatever another compare of this run added since
     * the read above, and the sides measured here; more than it holds: the sides not asked now go,
     * smallest first. */
    static struct side_row all[2 * PELAB_IMAGE_MAX_SIDES];
    const int lock = cache_lock(&sc);
    int n_all = read_side_rows(&sc, patch, examples, all, PELAB_IMAGE_MAX_SIDES);
    for (int k = kept; k < total; k++) {
        int j = 0;
        while (j < n_all && all[j].side != rows[k].side) j++;
        all[j] = rows[k];
        n_all += j == n_all;
    }
    qsort(all, (size_t)n_all, sizeof *all, by_side);
    for (int k = 0; n_all > PELAB_IMAGE_MAX_SIDES && k < n_all;) {
        int asked = 0;
        for (int i = 0; i < *n; i++) asked |= all[k].side == sides[i];
        if (asked) k++;
        else memmove(all + k, all + k + 1, sizeof *all * (size_t)(--n_all - k));
    }
    rc = write_side_rows(&sc, all, n_all);
    cache_unlock(lock);
    return rc;
}

int pelab_compare_sizes(const char *run_dir, const struct pelab_opts *eval, int *train_max, int *test_max,
                        double *em) {
    static struct pelab_run run;
    static struct sweep_cache sc;
    int rc = cache_open(&run, &sc, run_dir, eval, "sizes");
    if (rc) return rc;
    int per_size;
    run.task.ops->sizes(&run.task, train_max, test_max, &per_size);
    char spec[32];
    snprintf(spec, sizeof spec, "1-%d", *test_max);
    if (read_cached_as(&sc, "sizes", spec, *test_max, "exact_match", em, NULL) == 0) {
        pelab_run_close(&run);
        return PELAB_OK;
    }
    static struct pelab_eval_result r[PELAB_SIZES_MAX];
    rc = pelab_evaluate_sizes(&run.model, &run.task, 256, r);
    pelab_run_close(&run);
    if (rc) return rc;
    struct pelab_sb sb = {0};
    cache_head_as(&sb, "sizes", spec, &sc);
    pelab_sb_printf(&sb, ", \"train_max\": %d, \"rows\": ", *train_max);
    pelab_sizes_json(&sb, r, *test_max, *train_max);
    for (int i = 0; i < *test_max; i++) em[i] = r[i].exact_match;
    return cache_write(&sb, sc.path);
}
