/* The tasks of documents (text, dna, music) on small token caches written here, not on installed
 * data: training windows are a pure function of (data-seed, index), lie inside one training
 * document, are scored on every real position and never on padding, and music's start on a time
 * step; the evaluation cut scores each token of each document exactly once (tile) or each chorale's
 * beginning (crop), and `full` keeps only the documents that reach the length; the long split
 * falls back to the test documents; evaluation's NLL equals the mean of per-token losses computed
 * here from the logits, window by window; the sweep's lengths parse; a dataset that is not
 * installed names the command that installs it; a foreign cache is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/tmpdir.h"
#include "pelab/dataset.h"
#include "pelab/io.h"
#include "pelab/model.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/sweep.h"
#include "pelab/task.h"
#include "pelab/tokcache.h"
#include "pelab/tokenizer.h"
#include "pelab/train.h"

static const char *data; /* the data directory */

/* Document lengths and splits of the fixtures. moby-dick (byte tokens): short and long documents
 * in every split, two of them long; jsb: chorales of whole time steps, no long split. */
static const int TEXT_LEN[] = {300, 7, 1, 180, 95, 64, 33, 250, 12, 2, 400, 520};
static const int TEXT_SPLIT[] = {0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3};
#define N_TEXT (int)(sizeof TEXT_LEN / sizeof *TEXT_LEN)
static const int JSB_LEN[] = {120, 40, 200, 16, 64, 96, 48, 80};
static const int JSB_SPLIT[] = {0, 0, 0, 0, 1, 1, 2, 2};
#define N_JSB (int)(sizeof JSB_LEN / sizeof *JSB_LEN)

/* Writes dataset `name`'s cache for `tokenizer` (random tokens below `range`) and its info.json. */
static int write_dataset(const char *name, const char *tokenizer, const int *len, const int *split,
                         int n, int range, uint64_t seed) {
    struct pelab_tokenizer tk;
    int rc = pelab_tokenizer_load(&tk, tokenizer, NULL);
    if (rc) return rc;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", data, name);
    pelab_mkdir_p(path);
    struct pelab_tokcache_builder b;
    rc = pelab_tokcache_begin(&b, tokenizer, tk.vocab_hash, (uint32_t)tk.vocab);
    pelab_tokenizer_free(&tk);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, seed);
    int32_t ids[1024];
    for (int d = 0; d < n && !rc; d++) {
        char id[32];
        snprintf(id, sizeof id, "doc%d", d);
        for (int i = 0; i < len[d]; i++) ids[i] = (int32_t)pelab_rng_below(&rng, (uint64_t)range);
        rc = pelab_tokcache_add(&b, id, split[d], ids, (size_t)len[d]);
    }
    if (rc) {
        pelab_tokcache_discard(&b);
        return rc;
    }
    snprintf(path, sizeof path, "%s/%s/%s.ptok", data, name, tokenizer);
    if ((rc = pelab_tokcache_commit(&b, path))) return rc;
    snprintf(path, sizeof path, "%s/%s/info.json", data, name);
    return pelab_write_file_atomic(path, "{}\n", 3);
}

static int task_open(struct pelab_task *t, const char *task, const char *extra_key,
                     const char *extra_val, int T) {
    struct pelab_opts o;
    memset(&o, 0, sizeof o);
    char num[16];
    snprintf(num, sizeof num, "%d", T);
    pelab_opts_set(&o, "data-dir", data);
    pelab_opts_set(&o, "seq-len", num);
    if (!strcmp(task, "text")) {
        pelab_opts_set(&o, "dataset", "moby-dick");
        pelab_opts_set(&o, "tokenizer", "byte");
    }
    if (extra_key) pelab_opts_set(&o, extra_key, extra_val);
    return pelab_task_init(t, task, &o);
}

/* The cache the fixtures wrote, to check rows against. */
static struct pelab_tokcache text_cache, jsb_cache;

/* Finds where row r of b (its tokens, then its last target) lies in cache c: the document and
 * the offset whose tokens equal it. Returns the document index, or -1. */
static int locate(const struct pelab_tokcache *c, const struct pelab_batch *b, int r, int *len,
                  uint64_t *offset) {
    const int32_t *tok = b->tokens + (size_t)r * b->T, *tgt = b->targets + (size_t)r * b->T;
    int last = -1;
    for (int p = 0; p < b->T; p++)
        if (tgt[p] >= 0) last = p;
    if (last < 0) return -1;
    *len = last + 2; /* tokens of the window: inputs 0..last, and the target at last */
    for (uint32_t d = 0; d < c->n_docs; d++)
        for (uint64_t o = 0; o + (uint64_t)*len <= c->docs[d].count; o++) {
            int same = 1;
            for (int p = 0; p <= last && same; p++)
                same = pelab_tokcache_token(c, c->docs[d].start + o + (uint64_t)p) == tok[p];
            same = same && pelab_tokcache_token(c, c->docs[d].start + o + (uint64_t)last + 1) == tgt[last];
            if (same) {
                *offset = o;
                return (int)d;
            }
        }
    return -1;
}

/* A row is consistent: targets are the next tokens wherever set, positions 0.., and after the
 * window only padding, never scored. Returns the scored count. */
static int check_row(const struct pelab_task *t, const struct pelab_batch *b, int r,
                     const struct pelab_tokcache *c, int d, uint64_t off, int len,
                     const char *what) {
    const int32_t *tok = b->tokens + (size_t)r * b->T, *tgt = b->targets + (size_t)r * b->T;
    const int32_t *pos = b->pos + (size_t)r * b->T;
    int ok = 1, scored = 0;
    uint64_t base = c->docs[d].start + off;
    for (int p = 0; p < b->T; p++) {
        ok &= pos[p] == p;
        if (p < len - 1) {
            ok &= tok[p] == pelab_tokcache_token(c, base + (uint64_t)p);
            if (tgt[p] >= 0) {
                ok &= tgt[p] == pelab_tokcache_token(c, base + (uint64_t)p + 1);
                scored++;
            }
        } else {
            ok &= tok[p] == t->pad && tgt[p] == -1;
        }
    }
    CHECK(ok, "%s: row %d is not the window it claims to be", what, r);
    return scored;
}

static void test_training_windows(void) {
    struct pelab_task t, t2, t3;
    int T = 64;
    CHECK(task_open(&t, "text", NULL, NULL, T) == PELAB_OK, "text: %s", pelab_last_error());
    CHECK(task_open(&t2, "text", NULL, NULL, T) == PELAB_OK, "text again");
    CHECK(task_open(&t3, "text", "data-seed", "5", T) == PELAB_OK, "text, data-seed 5");
    if (!t.ops || !t2.ops || !t3.ops) return;
    CHECK(t.vocab == 258 && t.seq_len == T && t.pad == 256 && t.lm && t.token_bytes, "text task");
    CHECK(t.token_bytes[65] == 1 && t.token_bytes[256] == 0, "byte-level: one byte a token");
    struct pelab_batch b, b2, b3;
    pelab_batch_alloc(&b, 48, T);
    pelab_batch_alloc(&b2, 48, T);
    pelab_batch_alloc(&b3, 48, T);
    t.ops->fill(&t, PELAB_SPLIT_TRAIN, 1000, &b);
    t2.ops->fill(&t2, PELAB_SPLIT_TRAIN, 1000, &b2);
    t3.ops->fill(&t3, PELAB_SPLIT_TRAIN, 1000, &b3);
    size_t bytes = (size_t)48 * T * sizeof(int32_t);
    CHECK(!memcmp(b.tokens, b2.tokens, bytes) && !memcmp(b.targets, b2.targets, bytes),
          "the same examples twice");
    CHECK(memcmp(b.tokens, b3.tokens, bytes) != 0, "another data-seed, other windows");
    /* example 1003 is row 3 of a batch from 1000, and row 0 of a batch from 1003 */
    b2.B = 1;
    t.ops->fill(&t, PELAB_SPLIT_TRAIN, 1003, &b2);
    CHECK(!memcmp(b2.tokens, b.tokens + 3 * T, (size_t)T * sizeof(int32_t)),
          "an example is a function of its index alone");
    int seen[N_TEXT] = {0}, bad = 0;
    for (int round = 0; round < 4; round++) {
        t.ops->fill(&t, PELAB_SPLIT_TRAIN, (uint64_t)round * 48, &b);
        for (int r = 0; r < b.B; r++) {
            int len;
            uint64_t off;
            int d = locate(&text_cache, &b, r, &len, &off);
            if (d < 0 || TEXT_SPLIT[d] != 0) {
                bad++;
                continue;
            }
            seen[d]++;
            int scored = check_row(&t, &b, r, &text_cache, d, off, len, "train");
            int want = TEXT_LEN[d] <= T + 1 ? TEXT_LEN[d] : T + 1;
            CHECK(len == want && scored == len - 1,
                  "train row %d: %d tokens, %d scored (document of %d)", r, len, scored, TEXT_LEN[d]);
        }
    }
    CHECK(bad == 0, "%d training rows are not inside one training document", bad);
    CHECK(seen[0] && seen[3] && !seen[2], "training draws from the training documents of >= 2 tokens");
    CHECK(seen[0] > seen[1], "a long document is drawn more often than a short one (%d vs %d)",
          seen[0], seen[1]);
    pelab_batch_free(&b);
    pelab_batch_free(&b2);
    pelab_batch_free(&b3);
    pelab_task_free(&t);
    pelab_task_free(&t2);
    pelab_task_free(&t3);
}

/* Every window of the cut of `split` at L: each (document, token) scored at most once; returns
 * how many tokens were scored, and per document in scored[]. */
static uint64_t walk_cut(const struct pelab_task *t, const struct pelab_tokcache *c,
                         enum pelab_split split, int L, int full, int *scored, const char *what) {
    struct pelab_window_count wc;
    uint64_t n = t->ops->windows(t, split, L, full, &wc);
    struct pelab_batch b;
    pelab_batch_alloc(&b, 1, L + 3); /* wider than L: the padding must stay unscored */
    unsigned char *hit = calloc(c->n_tokens, 1);
    uint64_t total = 0;
    int twice = 0, full_ok = 1;
    for (uint64_t w = 0; w < n; w++) {
        t->ops->fill_windows(t, split, L, full, w, &b);
        int len;
        uint64_t off;
        int d = locate(c, &b, 0, &len, &off);
        CHECK(d >= 0, "%s: window %llu is not in a document", what, (unsigned long long)w);
        if (d < 0) continue;
        check_row(t, &b, 0, c, d, off, len, what);
        if (full) full_ok &= len == L + 1;
        for (int p = 0; p < b.T; p++) {
            if (b.targets[p] < 0) continue;
            uint64_t k = c->docs[d].start + off + (uint64_t)p + 1;
            twice += hit[k]++ != 0;
            scored[d]++;
            total++;
        }
    }
    CHECK(twice == 0, "%s: %d tokens scored twice", what, twice);
    CHECK(full_ok, "%s: a full cut has a window shorter than L + 1", what);
    CHECK(total == wc.scored, "%s: %llu scored, the count says %llu", what,
          (unsigned long long)total, (unsigned long long)wc.scored);
    free(hit);
    pelab_batch_free(&b);
    return total;
}

static void test_tile(void) {
    struct pelab_task t;
    int T = 64;
    if (task_open(&t, "text", NULL, NULL, T)) {
        CHECK(0, "text: %s", pelab_last_error());
        return;
    }
    /* val and test at T: every token but each document's first, exactly once */
    for (int s = PELAB_SPLIT_TRAIN; s <= PELAB_SPLIT_LONG; s++) {
        int scored[N_TEXT] = {0};
        walk_cut(&t, &text_cache, (enum pelab_split)s, T, 0, scored, pelab_split_name(s));
        int ok = 1;
        for (int d = 0; d < N_TEXT; d++)
            if (TEXT_SPLIT[d] == s) ok &= scored[d] == TEXT_LEN[d] - 1;
            else ok &= scored[d] == 0;
        CHECK(ok, "%s: the cut at T scores every token of the split's documents once", pelab_split_name(s));
    }
    struct pelab_window_count c;
    CHECK(t.ops->split_size(&t, PELAB_SPLIT_VAL) == t.ops->windows(&t, PELAB_SPLIT_VAL, T, 0, &c),
          "val examples are the cut at T");
    /* 95 tokens at T = 64: windows at 0 and 30 (the last ends at the end) */
    CHECK(c.windows == 4 && c.documents == 3 && c.scored == 94 + 63 + 32 && c.longest == 95,
          "val cut: %llu windows", (unsigned long long)c.windows);
    /* long, full, at 3 lengths: only documents that reach L+1 tokens */
    int L[] = {64, 399, 519};
    uint64_t docs[] = {2, 2, 1};
    for (int i = 0; i < 3; i++) {
        int scored[N_TEXT] = {0};
        uint64_t n = walk_cut(&t, &text_cache, PELAB_SPLIT_LONG, L[i], 1, scored, "long, full");
        t.ops->windows(&t, PELAB_SPLIT_LONG, L[i], 1, &c);
        CHECK(c.documents == docs[i] && n == (docs[i] == 2 ? 399u + 519u : 519u),
              "long at %d: %llu documents, %llu scored", L[i], (unsigned long long)c.documents,
              (unsigned long long)n);
    }
    CHECK(t.ops->windows(&t, PELAB_SPLIT_LONG, 520, 1, &c) == 0 && c.longest == 520,
          "no document reaches 520: no windows");
    pelab_task_free(&t);
}

static void test_crop(void) {
    struct pelab_task t;
    int T = 60;
    if (task_open(&t, "music", NULL, NULL, T)) {
        CHECK(0, "music: %s", pelab_last_error());
        return;
    }
    CHECK(t.vocab == 90 && t.pad == 89 && t.lm && !t.token_bytes, "music task");
    /* one window per chorale, its first min(n, T+1) tokens */
    for (int s = PELAB_SPLIT_VAL; s <= PELAB_SPLIT_LONG; s++) {
        int scored[N_JSB] = {0};
        walk_cut(&t, &jsb_cache, (enum pelab_split)s, T, 0, scored, "music cut");
        int ok = 1, want_split = s == PELAB_SPLIT_LONG ? PELAB_SPLIT_TEST : s;
        for (int d = 0; d < N_JSB; d++)
            ok &= scored[d] == (JSB_SPLIT[d] == want_split ? (JSB_LEN[d] < T + 1 ? JSB_LEN[d] - 1 : T) : 0);
        CHECK(ok, "%s: each chorale's beginning, once (long: the test chorales)", pelab_split_name(s));
    }
    /* training: per chorale, starts on a time step */
    struct pelab_batch b;
    pelab_batch_alloc(&b, 64, T);
    t.ops->fill(&t, PELAB_SPLIT_TRAIN, 7, &b);
    int bad = 0, seen[N_JSB] = {0};
    for (int r = 0; r < b.B; r++) {
        int len;
        uint64_t off;
        int d = locate(&jsb_cache, &b, r, &len, &off);
        if (d < 0 || JSB_SPLIT[d] != 0 || off % 4 != 0) {
            bad++;
            continue;
        }
        seen[d]++;
        check_row(&t, &b, r, &jsb_cache, d, off, len, "music train");
    }
    CHECK(bad == 0, "%d music training rows off a training chorale's time step", bad);
    CHECK(seen[0] && seen[1] && seen[2] && seen[3], "every training chorale drawn");
    pelab_batch_free(&b);
    pelab_task_free(&t);
}

/* pelab_evaluate's NLL against the per-token losses computed here from each window's logits. */
static void test_eval_nll(void) {
    struct pelab_task t;
    int T = 32;
    if (task_open(&t, "text", NULL, NULL, T)) return;
    struct pelab_opts o;
    memset(&o, 0, sizeof o);
    pelab_opts_set(&o, "d-model", "16");
    pelab_opts_set(&o, "heads", "2");
    pelab_opts_set(&o, "layers", "1");
    struct pelab_model m;
    CHECK(pelab_model_init(&m, &o, t.vocab, T) == PELAB_OK, "model: %s", pelab_last_error());
    pelab_model_init_weights(&m, 3);
    struct pelab_eval_result r;
    CHECK(pelab_evaluate(&m, &t, PELAB_SPLIT_VAL, 0, 0, 3, &r) == PELAB_OK, "evaluate");
    struct pelab_window_count c;
    uint64_t n = t.ops->windows(&t, PELAB_SPLIT_VAL, T, 0, &c);
    struct pelab_batch b;
    pelab_batch_alloc(&b, 1, T);
    double sum = 0;
    uint64_t count = 0;
    for (uint64_t w = 0; w < n; w++) {
        t.ops->fill_windows(&t, PELAB_SPLIT_VAL, T, 0, w, &b);
        pelab_model_forward(&m, b.tokens, b.targets, b.pos, 1, T);
        const pelab_real *logits = pelab_model_logits(&m);
        for (int p = 0; p < T; p++) {
            if (b.targets[p] < 0) continue;
            const pelab_real *row = logits + (size_t)p * t.vocab;
            double mx = row[0], z = 0;
            for (int v = 1; v < t.vocab; v++) mx = row[v] > mx ? row[v] : mx;
            for (int v = 0; v < t.vocab; v++) z += exp(row[v] - mx);
            sum += log(z) + mx - row[b.targets[p]];
            count++;
        }
    }
    CHECK(r.targets == count && count == c.scored && r.examples == n, "eval scored %llu of %llu",
          (unsigned long long)r.targets, (unsigned long long)count);
    CHECK_CLOSE(r.loss, sum / (double)count, 1e-12, 1e-12, "eval NLL = mean per-token NLL");
    CHECK_CLOSE(r.ppl, exp(sum / (double)count), 0, 1e-12, "perplexity");
    CHECK(r.bytes == count, "byte-level: a byte per token");
    CHECK_CLOSE(r.bpb, sum / (double)count / log(2.0), 0, 1e-12, "bits per byte");
    /* the sweep at 1x is the long split's cut at T */
    struct pelab_eval_result lr;
    CHECK(pelab_evaluate(&m, &t, PELAB_SPLIT_LONG, 0, 0, 4, &lr) == PELAB_OK, "evaluate long");
    struct pelab_sweep_length len[2];
    int nl;
    CHECK(pelab_sweep_parse("1x,3x", T, len, &nl) == PELAB_OK && nl == 2, "parse");
    struct pelab_sweep_row rows[2];
    CHECK(pelab_sweep(&m, &t, PELAB_SPLIT_LONG, len, nl, 4 * T, rows, NULL, NULL) == PELAB_OK,
          "sweep: %s", pelab_last_error());
    CHECK(rows[0].loss == lr.loss && rows[0].tokens == lr.targets && rows[0].length == T,
          "1x row %.17g, eval of the long split %.17g", rows[0].loss, lr.loss);
    CHECK(rows[1].length == 3 * T && rows[1].documents == 2 && rows[1].tokens == 399 + 519,
          "3x row");
    struct pelab_sweep_length far = {600, "600"};
    CHECK(pelab_sweep(&m, &t, PELAB_SPLIT_LONG, &far, 1, 64, rows, NULL, NULL) == PELAB_ERR_USAGE &&
          strstr(pelab_last_error(), "has 520"), "a length no document reaches: %s", pelab_last_error());
    pelab_batch_free(&b);
    pelab_model_free(&m);
    pelab_task_free(&t);
}

static void test_parse(void) {
    struct pelab_sweep_length l[PELAB_SWEEP_MAX];
    int n;
    CHECK(pelab_sweep_parse("1x,2x, 4x ,10x", 100, l, &n) == PELAB_OK && n == 4 &&
          l[0].tokens == 100 && l[2].tokens == 400 && l[3].tokens == 1000 &&
          !strcmp(l[2].label, "4x"), "multiples");
    CHECK(pelab_sweep_parse("512,1.5x", 100, l, &n) == PELAB_OK && n == 2 && l[0].tokens == 512 &&
          l[1].tokens == 150, "counts and a fraction");
    const char *bad[] = {"", "abc", "0x", "-3", "2x,", "1y", "5e", "0",
                         "000000000000000000000000512" /* longer than a label holds */};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(pelab_sweep_parse(bad[i], 100, l, &n) == PELAB_ERR_USAGE, "'%s' refused", bad[i]);
}

static void test_errors(void) {
    struct pelab_task t;
    struct pelab_opts o;
    memset(&o, 0, sizeof o);
    pelab_opts_set(&o, "data-dir", data);
    pelab_opts_set(&o, "dataset", "sotu");
    CHECK(pelab_task_init(&t, "text", &o) == PELAB_ERR_RUNTIME &&
          strstr(pelab_last_error(), "pelab data install sotu"),
          "a dataset not installed names the command: %s", pelab_last_error());
    memset(&o, 0, sizeof o);
    pelab_opts_set(&o, "data-dir", data);
    CHECK(pelab_task_init(&t, "dna", &o) == PELAB_ERR_RUNTIME &&
          strstr(pelab_last_error(), "pelab data install dna-human"), "dna: %s", pelab_last_error());
    /* a cache of another tokenizer under moby-dick/byte.ptok */
    char from[4096], to[4096];
    snprintf(from, sizeof from, "%s/jsb/jsb.ptok", data);
    snprintf(to, sizeof to, "%s/moby-dick/byte.ptok", data);
    char *bytes;
    size_t size;
    if (pelab_read_file(from, &bytes, &size) == PELAB_OK) {
        pelab_write_file_atomic(to, bytes, size);
        free(bytes);
    }
    CHECK(task_open(&t, "text", NULL, NULL, 16) == PELAB_ERR_RUNTIME &&
          strstr(pelab_last_error(), "byte.ptok"), "a foreign cache: %s", pelab_last_error());
}

int main(void) {
    data = tmpdir_create("pelab-seqtask");
    if (!data) return 1;
    CHECK(write_dataset("moby-dick", "byte", TEXT_LEN, TEXT_SPLIT, N_TEXT, 256, 11) == PELAB_OK,
          "fixture: %s", pelab_last_error());
    CHECK(write_dataset("jsb", "jsb", JSB_LEN, JSB_SPLIT, N_JSB, 89, 12) == PELAB_OK,
          "fixture: %s", pelab_last_error());
    char p[4096];
    snprintf(p, sizeof p, "%s/moby-dick/byte.ptok", data);
    CHECK(pelab_tokcache_open(&text_cache, p, NULL, 0) == PELAB_OK, "open fixture");
    snprintf(p, sizeof p, "%s/jsb/jsb.ptok", data);
    CHECK(pelab_tokcache_open(&jsb_cache, p, NULL, 0) == PELAB_OK, "open fixture");
    test_training_windows();
    test_tile();
    test_crop();
    test_eval_nll();
    test_parse();
    test_errors();
    pelab_tokcache_close(&text_cache);
    pelab_tokcache_close(&jsb_cache);
    tmpdir_remove();
    return check_report("test_seqtask");
}
