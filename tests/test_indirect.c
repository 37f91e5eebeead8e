/* The task registry and the `indirect` task: examples parse back to their parts and obey the
 * sampling rules, the shift and length distributions match the procedure exactly (within 5σ),
 * batches encode the text with the documented token ids, splits are deterministic and disjoint,
 * fill wraps around, and options are read and refused as documented. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "data/tasks/indirect.h"
#include "pelab/status.h"
#include "pelab/task.h"

#define N 20000 /* examples examined per split */

/* The documented ids: 0 padding, then these characters in order from 1. */
static const char ORDER[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789, +-";

static int expect_id(char c) {
    const char *p = c ? strchr(ORDER, c) : NULL;
    return p ? 1 + (int)(p - ORDER) : -1;
}

static int is_letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

struct parts {
    char src[64];
    int L;
    char letter;
    int shift;
    char target;
};

/* Strict parse of "SRC, c, ±d, t"; 0 when the text has another shape. */
static int parse(const char *s, struct parts *p) {
    int L = 0;
    while (is_letter(s[L]) && L < 63) L++;
    if (L == 0) return 0;
    memcpy(p->src, s, (size_t)L);
    p->src[L] = '\0';
    p->L = L;
    s += L;
    if (strncmp(s, ", ", 2) != 0 || !is_letter(s[2]) || strncmp(s + 3, ", ", 2) != 0) return 0;
    p->letter = s[2];
    s += 5;
    if (*s != '+' && *s != '-') return 0;
    int sign = *s == '-' ? -1 : 1, mag = 0, nd = 0;
    for (s++; *s >= '0' && *s <= '9'; s++, nd++) mag = 10 * mag + (*s - '0');
    if (nd < 1 || nd > 2 || (nd == 2 && mag < 10)) return 0; /* no leading zeros */
    p->shift = sign * mag;
    if (strncmp(s, ", ", 2) != 0 || !is_letter(s[2]) || s[3] != '\0') return 0;
    p->target = s[2];
    return 1;
}

/* Why an example breaks the task's rules, or NULL. */
static const char *invalid(const struct pelab_indirect_example *ex, int min_len, int max_len,
                           int min_shift, int max_shift) {
    struct parts p;
    if (!parse(ex->text, &p)) return "text does not parse";
    if (p.L != ex->source_len) return "source_len disagrees with the text";
    if (p.L < min_len || p.L > max_len) return "length out of range";
    int seen[128] = {0};
    for (int i = 0; i < p.L; i++)
        if (seen[(int)p.src[i]]++) return "repeated letter";
    if (abs(p.shift) < min_shift || abs(p.shift) > max_shift) return "shift out of range";
    if (p.shift != ex->q[0].shift) return "shift disagrees with the text";
    if (ex->q[0].source_index < 0 || ex->q[0].source_index >= p.L) return "source index out of range";
    if (p.src[ex->q[0].source_index] != p.letter) return "source letter is not at source_index";
    if (ex->q[0].target_index != ex->q[0].source_index + ex->q[0].shift) return "target_index != index + shift";
    if (ex->q[0].target_index < 0 || ex->q[0].target_index >= p.L) return "target outside the string";
    if (p.src[ex->q[0].target_index] != p.target || ex->q[0].target != p.target) return "wrong target";
    return NULL;
}

/* Why a batch row does not encode `ex`, or NULL. */
static const char *row_mismatch(const struct pelab_batch *b, int r,
                                const struct pelab_indirect_example *ex) {
    const int32_t *tok = b->tokens + (size_t)r * b->T, *tgt = b->targets + (size_t)r * b->T,
                  *pos = b->pos + (size_t)r * b->T;
    int n = (int)strlen(ex->text) - 1; /* input: all but the target letter */
    if (ex->text[n - 1] != ' ') return "input does not end in a space";
    int ntargets = 0;
    for (int t = 0; t < b->T; t++) {
        if (pos[t] != t) return "position != t";
        if (t < n && tok[t] != expect_id(ex->text[t])) return "token != documented id of text";
        if (t >= n && tok[t] != 0) return "padding token != 0";
        if (tgt[t] != -1) ntargets++;
        if (tgt[t] != -1 && t != n - 1) return "target away from the last input position";
    }
    if (ntargets != 1) return "not exactly one target";
    if (tgt[n - 1] != expect_id(ex->q[0].target)) return "target id != the target letter's id";
    return NULL;
}

static int init_with(struct pelab_task *t, const char *const *kv) {
    struct pelab_opts o = {0};
    for (; kv && kv[0]; kv += 2) CHECK(pelab_opts_set(&o, kv[0], kv[1]) == PELAB_OK, "set");
    return pelab_task_init(t, "indirect", &o);
}

static void test_registry(void) {
    const struct pelab_task_ops *ops = pelab_task_find("indirect");
    CHECK(ops && strcmp(ops->name, "indirect") == 0, "find indirect");
    CHECK(pelab_task_find("nope") == NULL, "find unknown");
    const struct pelab_task_ops *const *all = pelab_task_all();
    int n = 0, has = 0;
    for (; all[n]; n++) has |= all[n] == ops;
    CHECK(n >= 1 && has, "pelab_task_all lists indirect (%d tasks)", n);
    /* a task's sweep kind is one its functions can run */
    for (int i = 0; all[i]; i++) {
        const struct pelab_task_ops *o = all[i];
        CHECK((o->sweep == PELAB_TASK_SWEEP_LENGTHS) == (o->windows != NULL), "%s: a lengths sweep is the "
              "sweep of a task of documents (windows)", o->name);
        CHECK((o->sweep == PELAB_TASK_SWEEP_SIZES) == (o->sizes != NULL), "%s: a sizes sweep is the sweep "
              "of a task of sizes", o->name);
        CHECK(o->sweep != PELAB_TASK_SWEEP_RESOLUTIONS || o->set_side, "%s: a resolution sweep needs set_side",
              o->name);
    }

    struct pelab_task t;
    pelab_clear_error();
    CHECK(pelab_task_init(&t, "x", NULL) == PELAB_ERR_USAGE, "unknown task refused");
    CHECK(strstr(pelab_last_error(), "unknown task 'x' (known: ") &&
              strstr(pelab_last_error(), "indirect"),
          "message: %s", pelab_last_error());
    CHECK(t.ops == NULL && t.state == NULL, "failed init leaves the task empty");
    pelab_task_free(&t); /* safe on an empty task */

    /* Keys of other modules share the list and are not this task's business. */
    const char *others[] = {"rope-base", "-1", "lr", "not-a-number", NULL};
    CHECK(init_with(&t, others) == PELAB_OK, "other modules' keys ignored: %s", pelab_last_error());
    pelab_task_free(&t);
    CHECK(pelab_task_init(&t, "indirect", NULL) == PELAB_OK, "NULL opts = defaults");
    pelab_task_free(&t);

    struct pelab_batch b;
    CHECK(pelab_batch_alloc(&b, 0, 4) == PELAB_ERR_USAGE, "empty batch refused");
    CHECK(pelab_batch_alloc(&b, 3, 5) == PELAB_OK && b.B == 3 && b.T == 5, "batch alloc");
    pelab_batch_free(&b);
    pelab_batch_free(&b); /* freeing twice is harmless */
}

static void test_defaults_and_vocab(void) {
    struct pelab_task t;
    CHECK(pelab_task_init(&t, "indirect", NULL) == PELAB_OK, "init: %s", pelab_last_error());
    CHECK(t.vocab == 67 && t.pad == 0, "vocab %d pad %d", t.vocab, t.pad);
    CHECK(t.seq_len == 40 + 2 + 1 + 2 + 3 + 2, "seq_len %d", t.seq_len);
    CHECK(t.ops->split_size(&t, PELAB_SPLIT_TRAIN) == 1000000, "train size");
    CHECK(t.ops->split_size(&t, PELAB_SPLIT_VAL) == 10000, "val size");
    CHECK(t.ops->split_size(&t, PELAB_SPLIT_TEST) == 10000, "test size");
    CHECK(strcmp(t.ops->token_text(&t, 0), "") == 0, "padding prints empty");
    for (int id = 1; id < 67; id++) {
        const char *s = t.ops->token_text(&t, id);
        CHECK(strlen(s) == 1 && s[0] == ORDER[id - 1], "token_text(%d) = '%s'", id, s);
        CHECK(pelab_indirect_token(ORDER[id - 1]) == id, "token('%c')", ORDER[id - 1]);
    }
    CHECK(pelab_indirect_token('A') == 1 && pelab_indirect_token('z') == 52 &&
              pelab_indirect_token('0') == 53 && pelab_indirect_token(',') == 63 &&
              pelab_indirect_token(' ') == 64 && pelab_indirect_token('-') == 66,
          "spot ids");
    CHECK(pelab_indirect_token('?') == -1, "no id for '?'");
    CHECK(strcmp(t.ops->token_text(&t, 67), "<unk>") == 0 &&
              strcmp(t.ops->token_text(&t, -1), "<unk>") == 0,
          "out of range prints <unk>");
    pelab_task_free(&t);
}

/* Exact shift, length and source-index probabilities of the sampling procedure: L uniform, index
 * uniform over the indices that admit a shift of m..M either way, shift uniform over those that
 * land in the string. (Redrawing the letter along with the shift would skew the index towards the
 * middle: pidx catches that.) */
static int fits(int i, int s, int L, int m) { return abs(s) >= m && i + s >= 0 && i + s < L; }
static void expected_hist(int min_len, int max_len, int m, int M, double *pshift /* [2M+1] */,
                          double *plen /* [max_len+1] */, double *pidx /* [max_len] */) {
    memset(pshift, 0, sizeof(double) * (size_t)(2 * M + 1));
    for (int L = min_len; L <= max_len; L++) {
        double pL = 1.0 / (max_len - min_len + 1);
        plen[L] = pL;
        int admissible = 0;
        for (int i = 0; i < L; i++)
            for (int s = -M, any = 0; s <= M && !any; s++) admissible += any = fits(i, s, L, m);
        for (int i = 0; i < L; i++) {
            int valid = 0;
            for (int s = -M; s <= M; s++) valid += fits(i, s, L, m);
            if (valid) pidx[i] += pL / admissible;
            for (int s = -M; s <= M; s++)
                if (fits(i, s, L, m)) pshift[s + M] += pL / admissible / valid;
        }
    }
}

/* |observed - expected| within 5σ (binomial) plus one, for a histogram of n draws; every value
 * expected at least 20 times must occur. */
static void check_hist(const int *obs, const double *p, int k, int n, const char *what, int offset) {
    for (int j = 0; j < k; j++) {
        double e = n * p[j], sd = sqrt(n * p[j] * (1 - p[j]));
        CHECK(fabs(obs[j] - e) <= 5 * sd + 1, "%s %d: %d drawn, %.1f expected", what, j + offset,
              obs[j], e);
        if (e >= 20) CHECK(obs[j] > 0, "%s %d never drawn", what, j + offset); /* P(miss) < 3e-9 */
    }
}

/* N examples of a split: validity, distributions, batch encoding, determinism. Writes the texts. */
static void check_split(const struct pelab_task *t, enum pelab_split split, int min_len,
                        int max_len, int m, int M, int T, char (*texts)[PELAB_INDIRECT_TEXT_MAX]) {
    enum { BATCH = 50 };
    struct pelab_batch b;
    CHECK(pelab_batch_alloc(&b, BATCH, T) == PELAB_OK, "alloc");
    int *shift_hist = calloc((size_t)(2 * M + 1), sizeof(int));
    int len_hist[64] = {0}, idx_hist[64] = {0}, letter_src[128] = {0}, letter_tgt[128] = {0};
    int bad = 0, bad_rows = 0, nondet = 0;
    const char *why = NULL, *why_row = NULL;
    char first_bad[PELAB_INDIRECT_TEXT_MAX] = "";
    for (int i0 = 0; i0 < N; i0 += BATCH) {
        t->ops->fill(t, split, (uint64_t)i0, &b);
        for (int r = 0; r < BATCH; r++) {
            struct pelab_indirect_example ex, again;
            pelab_indirect_generate(t, split, (uint64_t)(i0 + r), &ex);
            pelab_indirect_generate(t, split, (uint64_t)(i0 + r), &again);
            nondet += memcmp(&ex, &again, sizeof ex) != 0;
            const char *w = invalid(&ex, min_len, max_len, m, M);
            if (w && !bad++) why = w, strcpy(first_bad, ex.text);
            const char *wr = row_mismatch(&b, r, &ex);
            if (wr && !bad_rows++) why_row = wr;
            strcpy(texts[i0 + r], ex.text);
            if (w) continue;
            shift_hist[ex.q[0].shift + M]++;
            len_hist[ex.source_len]++;
            idx_hist[ex.q[0].source_index]++;
            letter_src[(int)ex.text[ex.q[0].source_index]]++;
            letter_tgt[(int)ex.q[0].target]++;
        }
    }
    CHECK(bad == 0, "split %d: %d invalid examples; first '%s': %s", split, bad, first_bad, why);
    CHECK(bad_rows == 0, "split %d: %d batch rows differ from the text; first: %s", split,
          bad_rows, why_row);
    CHECK(nondet == 0, "split %d: %d examples differ between two generations", split, nondet);

    double *pshift = malloc(sizeof(double) * (size_t)(2 * M + 1)), plen[64] = {0}, pidx[64] = {0};
    expected_hist(min_len, max_len, m, M, pshift, plen, pidx);
    CHECK(shift_hist[M] == 0, "shift 0 drawn");
    check_hist(shift_hist, pshift, 2 * M + 1, N, "shift", -M);
    check_hist(len_hist + min_len, plen + min_len, max_len - min_len + 1, N, "length", min_len);
    check_hist(idx_hist, pidx, max_len, N, "source index", 0);
    for (const char *c = ORDER; c < ORDER + 52; c++)
        CHECK(letter_src[(int)*c] > 0 && letter_tgt[(int)*c] > 0, "letter %c never used", *c);
    free(pshift);
    free(shift_hist);
    pelab_batch_free(&b);
}

static int cmp_text(const void *a, const void *b) { return strcmp(a, b); }

/* No example text appears in two splits (whole strings, N per split), nor at the same index. */
static void check_disjoint(char (*texts)[PELAB_INDIRECT_TEXT_MAX] /* [3][N] */) {
    int same_index = 0;
    for (int i = 0; i < N; i++)
        same_index += !strcmp(texts[i], texts[N + i]) || !strcmp(texts[i], texts[2 * N + i]) ||
                      !strcmp(texts[N + i], texts[2 * N + i]);
    CHECK(same_index == 0, "%d indices give the same example in two splits", same_index);

    /* Tag each text with its split in the last byte, sort, and compare neighbours. */
    char (*all)[PELAB_INDIRECT_TEXT_MAX + 1] = malloc(sizeof *all * 3 * N);
    for (int i = 0; i < 3 * N; i++) {
        memset(all[i], 0, sizeof all[i]);
        strcpy(all[i], texts[i]);
        all[i][PELAB_INDIRECT_TEXT_MAX] = (char)('0' + i / N);
    }
    qsort(all, 3 * N, sizeof *all, cmp_text);
    int shared = 0;
    for (int i = 1; i < 3 * N; i++)
        shared += !strcmp(all[i], all[i - 1]) &&
                  all[i][PELAB_INDIRECT_TEXT_MAX] != all[i - 1][PELAB_INDIRECT_TEXT_MAX];
    CHECK(shared == 0, "%d example texts shared between splits", shared);
    free(all);
}

static void test_default_splits(void) {
    struct pelab_task t;
    CHECK(pelab_task_init(&t, "indirect", NULL) == PELAB_OK, "init");
    char (*texts)[PELAB_INDIRECT_TEXT_MAX] = malloc(sizeof *texts * 3 * N);
    for (int s = 0; s < 3; s++)
        check_split(&t, (enum pelab_split)s, 20, 40, 1, 15, t.seq_len + 3, texts + s * N);
    check_disjoint(texts);
    free(texts);
    pelab_task_free(&t);
}

/* fill(first) near the end of a split continues at example 0. */
static void test_wrap(void) {
    struct pelab_task t;
    const char *kv[] = {"indirect-val-size", "7", NULL};
    CHECK(init_with(&t, kv) == PELAB_OK, "init");
    struct pelab_batch b;
    CHECK(pelab_batch_alloc(&b, 5, t.seq_len) == PELAB_OK, "alloc");
    struct {
        enum pelab_split split;
        uint64_t first;
    } cases[] = {{PELAB_SPLIT_TRAIN, 999998}, {PELAB_SPLIT_VAL, 5}, {PELAB_SPLIT_VAL, 7 * 3 + 6},
                 {PELAB_SPLIT_TEST, 9999}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t size = t.ops->split_size(&t, cases[c].split);
        t.ops->fill(&t, cases[c].split, cases[c].first, &b);
        for (int r = 0; r < b.B; r++) {
            struct pelab_indirect_example ex;
            pelab_indirect_generate(&t, cases[c].split, (cases[c].first + (uint64_t)r) % size, &ex);
            const char *w = row_mismatch(&b, r, &ex);
            CHECK(w == NULL, "wrap: split %d first %llu row %d: %s", cases[c].split,
                  (unsigned long long)cases[c].first, r, w);
        }
    }
    struct pelab_indirect_example a, z;
    pelab_indirect_generate(&t, PELAB_SPLIT_VAL, 3, &a);
    pelab_indirect_generate(&t, PELAB_SPLIT_VAL, 7 + 3, &z);
    CHECK(strcmp(a.text, z.text) == 0, "index taken modulo the split size");
    pelab_batch_free(&b);
    pelab_task_free(&t);
}

static void test_custom_options(void) {
    struct pelab_task t;
    const char *kv[] = {"indirect-min-len", "8", "indirect-max-len", "16", "indirect-max-shift", "5",
                        NULL};
    CHECK(init_with(&t, kv) == PELAB_OK, "custom init: %s", pelab_last_error());
    CHECK(t.seq_len == 16 + 2 + 1 + 2 + 2 + 2, "custom seq_len %d", t.seq_len);
    char (*texts)[PELAB_INDIRECT_TEXT_MAX] = malloc(sizeof *texts * N);
    check_split(&t, PELAB_SPLIT_TRAIN, 8, 16, 1, 5, t.seq_len, texts);
    pelab_task_free(&t);

    /* The extremes: every letter, shifts up to ±51, the longest text the buffer must hold. */
    const char *wide[] = {"indirect-min-len", "2", "indirect-max-len", "52", "indirect-max-shift",
                          "51", NULL};
    CHECK(init_with(&t, wide) == PELAB_OK, "wide init: %s", pelab_last_error());
    CHECK(t.seq_len == 52 + 2 + 1 + 2 + 3 + 2, "wide seq_len %d", t.seq_len);
    check_split(&t, PELAB_SPLIT_VAL, 2, 52, 1, 51, t.seq_len, texts);
    pelab_task_free(&t);

    /* --indirect-min-shift: only the far offsets, on the paper's strings and on short ones, where
     * some source letters admit none (their index is drawn again) */
    const char *far[] = {"indirect-min-shift", "3", "indirect-max-shift", "5", NULL};
    CHECK(init_with(&t, far) == PELAB_OK, "min-shift init: %s", pelab_last_error());
    check_split(&t, PELAB_SPLIT_TEST, 20, 40, 3, 5, t.seq_len, texts);
    pelab_task_free(&t);
    const char *short_far[] = {"indirect-min-len", "6", "indirect-max-len", "10", "indirect-min-shift", "5",
                               "indirect-max-shift", "7", NULL};
    CHECK(init_with(&t, short_far) == PELAB_OK, "short min-shift init: %s", pelab_last_error());
    check_split(&t, PELAB_SPLIT_TRAIN, 6, 10, 5, 7, t.seq_len, texts);
    pelab_task_free(&t);

    /* Another data seed is another draw, and reproducible. */
    struct pelab_task t0, t1, t1b;
    const char *seed1[] = {"data-seed", "1", NULL};
    CHECK(pelab_task_init(&t0, "indirect", NULL) == PELAB_OK, "t0");
    CHECK(init_with(&t1, seed1) == PELAB_OK && init_with(&t1b, seed1) == PELAB_OK, "t1");
    int same0 = 0, diff1 = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        struct pelab_indirect_example a, b, c;
        pelab_indirect_generate(&t0, PELAB_SPLIT_TRAIN, i, &a);
        pelab_indirect_generate(&t1, PELAB_SPLIT_TRAIN, i, &b);
        pelab_indirect_generate(&t1b, PELAB_SPLIT_TRAIN, i, &c);
        same0 += !strcmp(a.text, b.text);
        diff1 += strcmp(b.text, c.text) != 0;
    }
    CHECK(same0 == 0 && diff1 == 0, "data-seed: %d equal to seed 0, %d irreproducible", same0,
          diff1);
    pelab_task_free(&t0);
    pelab_task_free(&t1);
    pelab_task_free(&t1b);
    free(texts);
}

static void expect_refused(const char *const *kv, const char *option) {
    struct pelab_task t;
    pelab_clear_error();
    int rc = init_with(&t, kv);
    CHECK(rc == PELAB_ERR_USAGE, "%s %s: rc %d", kv[0], kv[1], rc);
    CHECK(strstr(pelab_last_error(), option) != NULL && !strchr(pelab_last_error(), '\n'),
          "message names %s: '%s'", option, pelab_last_error());
    CHECK(t.ops == NULL && t.state == NULL, "refused init leaves the task empty");
}

static void test_bad_options(void) {
    const char *a[] = {"indirect-max-len", "60", NULL};
    const char *b[] = {"indirect-min-len", "30", "indirect-max-len", "20", NULL};
    const char *c[] = {"indirect-max-shift", "0", NULL};
    const char *d[] = {"indirect-max-shift", "40", NULL}; /* = max-len 40: never fits */
    const char *e[] = {"indirect-min-len", "1", NULL};
    const char *f[] = {"indirect-max-len", "abc", NULL};
    const char *g[] = {"indirect-train-size", "0", NULL};
    const char *h[] = {"indirect-min-shift", "6", "indirect-max-shift", "5", NULL};
    const char *i[] = {"indirect-min-len", "6", "indirect-min-shift", "6", NULL};
    const char *j[] = {"indirect-min-shift", "2", "indirect-shift-zero", "on", NULL};
    const char *k[] = {"indirect-min-shift", "2", "indirect-curriculum", "100", NULL};
    expect_refused(a, "--indirect-max-len");
    expect_refused(b, "--indirect-min-len");
    expect_refused(c, "--indirect-max-shift");
    expect_refused(d, "--indirect-max-shift");
    expect_refused(e, "--indirect-min-len");
    expect_refused(f, "--indirect-max-len");
    expect_refused(g, "--indirect-train-size");
    expect_refused(h, "--indirect-min-shift 6 is greater than --indirect-max-shift 5");
    expect_refused(i, "--indirect-min-shift 6 must be less than --indirect-min-len 6");
    expect_refused(j, "--indirect-shift-zero draws");
    expect_refused(k, "--indirect-curriculum draws");
}

/* --indirect-queries K: one string, K scored queries. Query 0 and the string are those of the
 * single-query example with the same index; every target is its string's letter at index + shift
 * and sits at its own answer position; seq_len grows by one query's length per query. */
static void test_queries(void) {
    struct pelab_opts o1 = {0}, o3 = {0};
    const char *common[][2] = {{"indirect-min-len", "8"}, {"indirect-max-len", "16"},
                               {"indirect-max-shift", "5"}};
    for (int i = 0; i < 3; i++) {
        pelab_opts_set(&o1, common[i][0], common[i][1]);
        pelab_opts_set(&o3, common[i][0], common[i][1]);
    }
    pelab_opts_set(&o3, "indirect-queries", "3");
    struct pelab_task t1, t3;
    CHECK(pelab_task_init(&t1, "indirect", &o1) == PELAB_OK, "%s", pelab_last_error());
    CHECK(pelab_task_init(&t3, "indirect", &o3) == PELAB_OK, "%s", pelab_last_error());
    CHECK(t3.seq_len == 16 + 3 * 10 - 1, "seq_len with 3 queries: %d", t3.seq_len);
    const int n = 500;
    struct pelab_batch b;
    pelab_batch_alloc(&b, n, t3.seq_len);
    t3.ops->fill(&t3, PELAB_SPLIT_TRAIN, 0, &b);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        struct pelab_indirect_example e1, e3;
        pelab_indirect_generate(&t1, PELAB_SPLIT_TRAIN, (uint64_t)i, &e1);
        pelab_indirect_generate(&t3, PELAB_SPLIT_TRAIN, (uint64_t)i, &e3);
        bad += e3.n_queries != 3 || strncmp(e1.text, e3.text, strlen(e1.text)) != 0 ||
               e1.q[0].shift != e3.q[0].shift;
        const char *src = e3.text;
        const int32_t *tg = b.targets + (size_t)i * (size_t)t3.seq_len;
        int k = 0;
        for (int p = 0; p < t3.seq_len; p++) {
            if (tg[p] < 0) continue;
            const struct pelab_indirect_query *q = &e3.q[k < 3 ? k : 2];
            bad += k >= 3 || e3.text[p] != ' ' || e3.text[p + 1] != q->target ||
                   tg[p] != pelab_indirect_token(q->target) ||
                   src[q->source_index + q->shift] != q->target || q->shift == 0 ||
                   abs(q->shift) > 5;
            k++;
        }
        bad += k != 3;
    }
    CHECK(bad == 0, "%d faults in 3-query examples", bad);
    pelab_batch_free(&b);
    pelab_task_free(&t1);
    pelab_task_free(&t3);
}

/* --indirect-curriculum N: training example i has |shift| <= floor((M+1) i / N), 0 included (all
 * copies in the first stage); from N on, and in validation and test, the full task. fill() agrees
 * with generate(). */
static void test_curriculum(void) {
    struct pelab_task t;
    const char *kv[] = {"indirect-curriculum", "400", "indirect-max-shift", "3",
                        "indirect-min-len", "6", "indirect-max-len", "10", NULL};
    CHECK(init_with(&t, kv) == PELAB_OK, "init: %s", pelab_last_error());
    int seen[4] = {0}, full_seen[4] = {0}, val_zero = 0, late_zero = 0;
    for (uint64_t i = 0; i < 800; i++) {
        struct pelab_indirect_example ex, val;
        pelab_indirect_generate(&t, PELAB_SPLIT_TRAIN, i, &ex);
        pelab_indirect_generate(&t, PELAB_SPLIT_VAL, i, &val);
        int limit = i < 400 ? (int)(4 * i / 400) : 3;
        for (int k = 0; k < ex.n_queries; k++) {
            int a = abs(ex.q[k].shift);
            CHECK(a <= limit, "example %llu: shift %d beyond the stage's %d",
                  (unsigned long long)i, ex.q[k].shift, limit);
            CHECK(i < 400 || a > 0, "example %llu: shift 0 after the curriculum",
                  (unsigned long long)i);
            CHECK(ex.q[k].target == ex.text[ex.q[k].target_index], "target letter");
            if (i >= 300 && i < 400) late_zero += a == 0;
            if (i < 400) seen[a]++;
            else full_seen[a]++;
        }
        for (int k = 0; k < val.n_queries; k++) val_zero += val.q[k].shift == 0;
    }
    CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] > 0 && seen[3] > 0,
          "every stage drawn (%d %d %d %d)", seen[0], seen[1], seen[2], seen[3]);
    CHECK(full_seen[0] == 0 && full_seen[3] > 0, "full task after the curriculum");
    CHECK(late_zero > 0, "copies stay in the last stage's mix");
    CHECK(val_zero == 0, "validation never has shift 0 (%d)", val_zero);
    /* fill() uses the unreduced cursor: a batch across the copy stage's end equals generate(). */
    struct pelab_batch b;
    CHECK(pelab_batch_alloc(&b, 6, t.seq_len) == PELAB_OK, "alloc");
    t.ops->fill(&t, PELAB_SPLIT_TRAIN, 97, &b);
    for (int r = 0; r < b.B; r++) {
        struct pelab_indirect_example ex;
        pelab_indirect_generate(&t, PELAB_SPLIT_TRAIN, 97 + (uint64_t)r, &ex);
        const char *w = row_mismatch(&b, r, &ex);
        CHECK(w == NULL, "curriculum fill row %d: %s", r, w);
    }
    pelab_batch_free(&b);
    /* The curriculum counts from the run's origin (its seed-derived first cursor). */
    t.train_origin = 777777;
    int origin_zero = 0, before_zero = 0;
    for (uint64_t i = 0; i < 90; i++) {
        struct pelab_indirect_example ex, before;
        pelab_indirect_generate(&t, PELAB_SPLIT_TRAIN, 777777 + i, &ex);
        pelab_indirect_generate(&t, PELAB_SPLIT_TRAIN, i, &before);
        origin_zero += ex.q[0].shift == 0;
        before_zero += before.q[0].shift == 0;
    }
    CHECK(origin_zero == 90 && before_zero == 0, "copies only from the origin on (%d, %d)",
          origin_zero, before_zero);
    pelab_task_free(&t);
}

/* --indirect-shift-zero on: the full task draws shift 0 too (train, val and test), each shift of
 * [-M, M] that fits about as often; off (the default): never 0 outside the curriculum. */
static void test_shift_zero(void) {
    struct pelab_task on, off;
    const char *kv_on[] = {"indirect-shift-zero", "on", "indirect-max-shift", "1", "indirect-min-len", "6",
                           "indirect-max-len", "10", NULL};
    const char *kv_off[] = {"indirect-max-shift", "1", "indirect-min-len", "6", "indirect-max-len", "10",
                            NULL};
    CHECK(init_with(&on, kv_on) == PELAB_OK, "init: %s", pelab_last_error());
    CHECK(init_with(&off, kv_off) == PELAB_OK, "init: %s", pelab_last_error());
    int count[3][3] = {{0}}, off_zero = 0, n = 0;
    for (int split = PELAB_SPLIT_TRAIN; split <= PELAB_SPLIT_TEST; split++)
        for (uint64_t i = 0; i < 3000; i++) {
            struct pelab_indirect_example ex, ex_off;
            pelab_indirect_generate(&on, (enum pelab_split)split, i, &ex);
            pelab_indirect_generate(&off, (enum pelab_split)split, i, &ex_off);
            for (int k = 0; k < ex.n_queries; k++) {
                CHECK(abs(ex.q[k].shift) <= 1, "shift %d beyond ±1", ex.q[k].shift);
                CHECK(ex.q[k].target_index == ex.q[k].source_index + ex.q[k].shift &&
                      ex.q[k].target == ex.text[ex.q[k].target_index], "target of shift %d", ex.q[k].shift);
                count[split][ex.q[k].shift + 1]++;
                off_zero += ex_off.q[k].shift == 0;
                n += split == PELAB_SPLIT_TRAIN;
            }
        }
    for (int split = 0; split < 3; split++)
        CHECK(count[split][1] > 0, "split %d: shift 0 drawn with --indirect-shift-zero on", split);
    /* Expected shares: a source inside the string (L − 2 of L) takes −1, 0, +1 alike; one at an
     * end takes 0 or the one shift that fits, 1/2 each. L uniform in 6..10. */
    double p[3] = {0};
    for (int L = 6; L <= 10; L++) {
        p[0] += ((L - 2.0) / L / 3 + 0.5 / L) / 5;
        p[1] += ((L - 2.0) / L / 3 + 1.0 / L) / 5;
        p[2] += ((L - 2.0) / L / 3 + 0.5 / L) / 5;
    }
    for (int j = 0; j < 3; j++)
        CHECK(fabs(count[0][j] - n * p[j]) <= 5 * sqrt(n * p[j] * (1 - p[j])),
              "shift %d: %d of %d drawn, %.1f expected", j - 1, count[0][j], n, n * p[j]);
    CHECK(off_zero == 0, "shift 0 drawn %d times with --indirect-shift-zero off", off_zero);
    /* the batch encodes a copy like any other query: the target is the source letter */
    struct pelab_batch b;
    CHECK(pelab_batch_alloc(&b, 8, on.seq_len) == PELAB_OK, "alloc");
    on.ops->fill(&on, PELAB_SPLIT_VAL, 0, &b);
    for (int r = 0; r < b.B; r++) {
        struct pelab_indirect_example ex;
        pelab_indirect_generate(&on, PELAB_SPLIT_VAL, (uint64_t)r, &ex);
        const char *w = row_mismatch(&b, r, &ex);
        CHECK(w == NULL, "shift-zero fill row %d: %s", r, w);
    }
    pelab_batch_free(&b);
    pelab_task_free(&on);
    pelab_task_free(&off);
}

int main(void) {
    test_shift_zero();
    test_curriculum();
    test_registry();
    test_queries();
    test_defaults_and_vocab();
    test_default_splits();
    test_wrap();
    test_custom_options();
    test_bad_options();
    return check_report("test_indirect");
}
