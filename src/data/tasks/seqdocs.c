/* seqdocs — examples of the tasks of documents (text, dna, music): windows of installed token
 * caches (docs/DATA.md), next-token prediction with the loss on every real position (SPEC §1).
 *
 * A window of length L is up to L+1 consecutive tokens w[0..len-1] of ONE document. The model
 * reads w[0..len-2] at positions 0..len-2 and is scored on predicting w[p+1] at each position
 * p >= from; positions len-1..T-1 are padding (pad id in, target -1: never scored). Windows never
 * cross documents: a document is a unit of text (a speech, a chapter, a book of the Bible, a
 * 120 kb stretch of chromosome, a chorale) and joining two would ask the model to predict across
 * a seam it has no token for (the caches hold no end-of-document ids).
 *
 * Training (example i of the train split; what a run's cursor counts):
 *     h = hash64(key ^ hash64(i)),   key = hash64(SALT ^ hash64(data-seed))
 *   per token (text, dna): a start drawn uniformly among the window starts of all training
 *     documents (a document of n tokens has n - L of them, one if n <= L+1), so every training
 *     token is equally likely to be read;
 *   per document (music): a document drawn uniformly, then a start in it, so a long chorale is no
 *     more likely than a short one (a chorale of n <= L+1 tokens is one window: all of it).
 *   Starts are multiples of `align` (music: 4, one time step of the four voices). Example i is a
 *   pure function of (data-seed, i): a resumed run reads the same windows.
 *
 * Evaluation cut at length L (val, test, long; train when it is evaluated), in document order:
 *   tile (text, dna): windows start at 0, L, 2L, … so each token but the document's first is
 *     scored once, with up to L tokens of context; the last window is moved back to end at the
 *     document's end (still L+1 tokens, so its scored positions keep their context) and scores
 *     only the tokens the previous windows did not; a document of n <= L+1 tokens is one padded
 *     window scoring n-1 tokens.
 *   crop (music): one window per document, its first min(n, L+1) tokens (the PoPE paper's one
 *     chorale per sequence, cropped to the training length).
 *   `full` (length sweeps): only documents of at least L+1 tokens, so every window has L inputs.
 * Documents of fewer than 2 tokens have nothing to predict and take part in nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tasks/seqdocs.h"
#include "pelab/dataset.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/tokcache.h"

#define SALT 0xD0C5D0C5A11CE5EDull
#define PATH_LEN 4096

struct seq_split {
    const struct pelab_tokcache *cache;
    uint32_t *doc; /* indices into cache->docs, documents of >= 2 tokens, in cache order */
    uint32_t n;
};

struct seqdocs {
    struct pelab_tokcache cache, ood;
    struct pelab_tokenizer tk;
    uint16_t *token_bytes;
    struct seq_split split[4]; /* train, val, test, long */
    uint64_t *starts;          /* (train n + 1): prefix sums of training window starts */
    int T, align, per_doc;
    enum seqdocs_cut cut;
    uint64_t key;
    char text[64];             /* token_text's result */
};

static const struct pelab_tokcache_doc *doc_row(const struct seq_split *s, uint32_t k) {
    return &s->cache->docs[s->doc[k]];
}

/* Training window starts of a document of n tokens at length T (in units of align). */
static uint64_t n_starts(uint64_t n, int T, int align) {
    return n >= (uint64_t)T + 1 ? (n - 1 - (uint64_t)T) / (uint64_t)align + 1 : 1;
}

/* The documents of cache c in split `which` (>= 2 tokens) appended to s. */
static int collect(struct seq_split *s, const struct pelab_tokcache *c, int which) {
    s->cache = c;
    uint32_t *doc = malloc(((size_t)c->n_docs + 1) * sizeof *doc);
    if (!doc) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %u documents", c->n_docs);
    s->doc = doc;
    s->n = 0;
    for (uint32_t k = 0; k < c->n_docs; k++)
        if (c->docs[k].split == which && c->docs[k].count >= 2) doc[s->n++] = k;
    return PELAB_OK;
}

const struct pelab_optdef seqdocs_eval_options[] = {
    PELAB_OPT_ROW_DATA_DIR_EVAL,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

void seqdocs_free(struct pelab_task *t) {
    struct seqdocs *s = t->state;
    if (!s) return;
    for (int i = 0; i < 4; i++) free(s->split[i].doc);
    free(s->starts);
    free(s->token_bytes);
    pelab_tokenizer_free(&s->tk);
    pelab_tokcache_close(&s->cache);
    pelab_tokcache_close(&s->ood);
    free(s);
    t->state = NULL;
    t->token_bytes = NULL;
}

/* token_bytes[v]: the length of v's decoded text (0 for padding and end of document). */
static int count_bytes(struct seqdocs *s, int V) {
    s->token_bytes = calloc((size_t)V, sizeof *s->token_bytes);
    if (!s->token_bytes) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    struct pelab_bytes out = {0};
    for (int32_t v = 0; v < V; v++) {
        if (v == s->tk.pad || v == s->tk.eod) continue;
        out.len = 0;
        int rc = s->tk.ops->decode(&s->tk, &v, 1, &out);
        if (rc) {
            pelab_bytes_free(&out);
            return rc;
        }
        s->token_bytes[v] = (uint16_t)(out.len < 65535 ? out.len : 65535);
    }
    pelab_bytes_free(&out);
    return PELAB_OK;
}

static int setup(struct pelab_task *t, struct seqdocs *s, const struct seqdocs_config *c) {
    const char *dir = pelab_data_dir(c->data_dir);
    int rc = pelab_dataset_open(dir, c->dataset, c->tokenizer, &s->cache);
    if (!rc && c->ood) rc = pelab_dataset_open(dir, c->ood, c->tokenizer, &s->ood);
    if (rc) return rc;
    char vocab_dir[PATH_LEN];
    if (snprintf(vocab_dir, sizeof vocab_dir, "%s/sources/gpt2", dir) >= (int)sizeof vocab_dir)
        return pelab_fail(PELAB_ERR_USAGE, "data directory '%.60s...' is too long", dir);
    if ((rc = pelab_tokenizer_load(&s->tk, c->tokenizer, vocab_dir))) return rc;
    if ((uint32_t)s->tk.vocab != s->cache.vocab)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s/%s/%s.ptok: vocabulary of %u tokens, the %s "
                          "tokenizer has %d (reinstall: pelab data install %s --force)", dir,
                          c->dataset, c->tokenizer, s->cache.vocab, c->tokenizer, s->tk.vocab,
                          c->dataset);
    for (int i = 0; i < 4 && !rc; i++) rc = collect(&s->split[i], &s->cache, i);
    if (!rc && c->ood) { /* the other genome's documents are all test documents */
        free(s->split[PELAB_SPLIT_TEST].doc);
        free(s->split[PELAB_SPLIT_LONG].doc);
        s->split[PELAB_SPLIT_TEST].doc = s->split[PELAB_SPLIT_LONG].doc = NULL;
        rc = collect(&s->split[PELAB_SPLIT_TEST], &s->ood, PELAB_DOC_TEST);
        if (!rc) rc = collect(&s->split[PELAB_SPLIT_LONG], &s->ood, PELAB_DOC_TEST);
    } else if (!rc && s->split[PELAB_SPLIT_LONG].n == 0) { /* no long split: the test documents */
        free(s->split[PELAB_SPLIT_LONG].doc);
        s->split[PELAB_SPLIT_LONG].doc = NULL;
        rc = collect(&s->split[PELAB_SPLIT_LONG], &s->cache, PELAB_DOC_TEST);
    }
    if (rc) return rc;
    for (int i = 0; i < 3; i++)
        if (s->split[i].n == 0)
            return pelab_fail(PELAB_ERR_RUNTIME, "dataset '%s' (%s) has no %s documents of two "
                              "tokens or more", i == PELAB_SPLIT_TEST && c->ood ? c->ood : c->dataset,
                              c->tokenizer, pelab_split_name((enum pelab_split)i));
    const struct seq_split *tr = &s->split[PELAB_SPLIT_TRAIN];
    s->starts = malloc(((size_t)tr->n + 1) * sizeof *s->starts);
    if (!s->starts) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    s->starts[0] = 0;
    for (uint32_t k = 0; k < tr->n; k++)
        s->starts[k + 1] = s->starts[k] + n_starts(doc_row(tr, k)->count, c->T, c->align);
    if (c->text && (rc = count_bytes(s, s->tk.vocab))) return rc;
    t->vocab = s->tk.vocab;
    t->seq_len = c->T;
    t->pad = s->tk.pad;
    t->lm = 1;
    t->token_bytes = s->token_bytes;
    return PELAB_OK;
}

int seqdocs_init(struct pelab_task *t, const struct seqdocs_config *c) {
    PELAB_ASSERT(c->T >= 1 && c->align >= 1);
    struct seqdocs *s = calloc(1, sizeof *s);
    if (!s) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the %s task", t->ops->name);
    s->T = c->T;
    s->align = c->align;
    s->per_doc = c->per_doc;
    s->cut = c->cut;
    s->key = pelab_hash64(SALT ^ pelab_hash64(c->data_seed));
    t->state = s;
    int rc = setup(t, s, c);
    if (rc) seqdocs_free(t);
    return rc;
}

/* ---- rows ------------------------------------------------------------------------------------ */

/* Row of a batch (T positions) from `len` tokens of document d starting at `start`, scored from
 * position `from`. */
static void write_row(const struct pelab_tokcache *c, const struct pelab_tokcache_doc *d,
                      uint64_t start, int len, int from, int32_t pad, int T, int32_t *tokens,
                      int32_t *targets, int32_t *pos) {
    PELAB_ASSERT(len >= 2 && len - 1 <= T && start + (uint64_t)len <= d->count);
    uint64_t base = d->start + start;
    for (int p = 0; p < T; p++) {
        pos[p] = p;
        if (p < len - 1) {
            tokens[p] = pelab_tokcache_token(c, base + (uint64_t)p);
            targets[p] = p >= from ? pelab_tokcache_token(c, base + (uint64_t)p + 1) : -1;
        } else {
            tokens[p] = pad;
            targets[p] = -1;
        }
    }
}

/* Training example i: a document of the train split and a start in it (see the top). */
static void train_window(const struct seqdocs *s, uint64_t i, uint32_t *k, uint64_t *start) {
    const struct seq_split *tr = &s->split[PELAB_SPLIT_TRAIN];
    uint64_t h = pelab_hash64(s->key ^ pelab_hash64(i)), j;
    if (s->per_doc) {
        *k = (uint32_t)(h % tr->n);
        j = pelab_hash64(h) % n_starts(doc_row(tr, *k)->count, s->T, s->align);
    } else { /* the document whose range of starts holds r: starts[k] <= r < starts[k+1] */
        uint64_t r = h % s->starts[tr->n];
        uint32_t lo = 0, hi = tr->n - 1;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo + 1) / 2;
            if (s->starts[mid] <= r) lo = mid;
            else hi = mid - 1;
        }
        *k = lo;
        j = r - s->starts[lo];
    }
    *start = j * (uint64_t)s->align;
}

/* ---- the evaluation cut ---------------------------------------------------------------------- */

/* Windows of a document of n tokens in the cut at length L (0: it takes no part). */
static uint64_t doc_windows(const struct seqdocs *s, uint64_t n, int L, int full) {
    if (n < 2 || (full && n < (uint64_t)L + 1)) return 0;
    if (s->cut == SEQDOCS_CROP || n <= (uint64_t)L + 1) return 1;
    return (n - 2) / (uint64_t)L + 1; /* ceil((n-1)/L) */
}

/* Window j of such a document: its first token, its length in tokens, its first scored position. */
static void doc_window(const struct seqdocs *s, uint64_t n, int L, uint64_t j, uint64_t *start,
                       int *len, int *from) {
    uint64_t k = doc_windows(s, n, L, 0);
    *from = 0;
    if (k == 1) {
        *start = 0;
        *len = (int)(n < (uint64_t)L + 1 ? n : (uint64_t)L + 1);
    } else if (j + 1 < k) {
        *start = j * (uint64_t)L;
        *len = L + 1;
    } else { /* the last: ends at the document's end, scores what the others left */
        *start = n - 1 - (uint64_t)L;
        *len = L + 1;
        *from = (int)(j * (uint64_t)L - *start);
    }
}

static const struct seq_split *split_of(const struct seqdocs *s, enum pelab_split split) {
    PELAB_ASSERT(split >= PELAB_SPLIT_TRAIN && split <= PELAB_SPLIT_LONG);
    return &s->split[split];
}

uint64_t seqdocs_windows(const struct pelab_task *t, enum pelab_split split, int L, int full,
                         struct pelab_window_count *c) {
    const struct seqdocs *s = t->state;
    const struct seq_split *sp = split_of(s, split);
    PELAB_ASSERT(L >= 1);
    memset(c, 0, sizeof *c);
    for (uint32_t k = 0; k < sp->n; k++) {
        uint64_t n = doc_row(sp, k)->count, w = doc_windows(s, n, L, full);
        if (n > c->longest) c->longest = n;
        if (!w) continue;
        c->documents++;
        c->windows += w;
        c->scored += s->cut == SEQDOCS_CROP && n > (uint64_t)L + 1 ? (uint64_t)L : n - 1;
    }
    return c->windows;
}

void seqdocs_fill_windows(const struct pelab_task *t, enum pelab_split split, int L, int full,
                          uint64_t first, struct pelab_batch *b) {
    const struct seqdocs *s = t->state;
    const struct seq_split *sp = split_of(s, split);
    PELAB_ASSERT(b->T >= L);
    struct pelab_window_count c;
    uint64_t count = seqdocs_windows(t, split, L, full, &c);
    PELAB_ASSERT(count > 0);
    /* Find window `first` (mod count), then walk on window by window. */
    uint64_t j = first % count, w = 0;
    uint32_t k = 0;
    while ((w = doc_windows(s, doc_row(sp, k)->count, L, full)) <= j) {
        j -= w;
        k++;
    }
    for (int r = 0; r < b->B; r++) {
        const struct pelab_tokcache_doc *d = doc_row(sp, k);
        uint64_t start;
        int len, from;
        doc_window(s, d->count, L, j, &start, &len, &from);
        size_t off = (size_t)r * (size_t)b->T;
        write_row(sp->cache, d, start, len, from, t->pad, b->T, b->tokens + off,
                  b->targets + off, b->pos + off);
        if (++j < w) continue;
        j = 0; /* the next document that takes part, wrapping at the end */
        do {
            k = k + 1 < sp->n ? k + 1 : 0;
        } while ((w = doc_windows(s, doc_row(sp, k)->count, L, full)) == 0);
    }
}

/* ---- task ops ---------------------------------------------------------------------------------- */

uint64_t seqdocs_split_size(const struct pelab_task *t, enum pelab_split split) {
    if (split == PELAB_SPLIT_TRAIN) return SEQDOCS_TRAIN_SIZE;
    struct pelab_window_count c;
    return seqdocs_windows(t, split, t->seq_len, 0, &c);
}

void seqdocs_fill(const struct pelab_task *t, enum pelab_split split, uint64_t first,
                  struct pelab_batch *b) {
    const struct seqdocs *s = t->state;
    if (split != PELAB_SPLIT_TRAIN) {
        seqdocs_fill_windows(t, split, t->seq_len, 0, first, b);
        return;
    }
    PELAB_ASSERT(b->T >= s->T);
    const struct seq_split *tr = &s->split[PELAB_SPLIT_TRAIN];
    for (int r = 0; r < b->B; r++) {
        uint32_t k;
        uint64_t start;
        train_window(s, (first + (uint64_t)r) % SEQDOCS_TRAIN_SIZE, &k, &start);
        const struct pelab_tokcache_doc *d = doc_row(tr, k);
        uint64_t left = d->count - start;
        int len = (int)(left < (uint64_t)s->T + 1 ? left : (uint64_t)s->T + 1);
        size_t off = (size_t)r * (size_t)b->T;
        write_row(tr->cache, d, start, len, 0, t->pad, b->T, b->tokens + off, b->targets + off,
                  b->pos + off);
    }
}

int seqdocs_decode(const struct pelab_task *t, const int32_t *ids, size_t n,
                   struct pelab_bytes *out) {
    const struct seqdocs *s = t->state;
    return s->tk.ops->decode(&s->tk, ids, n, out);
}

const char *seqdocs_token_text(const struct pelab_task *t, int32_t token) {
    struct seqdocs *s = t->state;
    if (token == t->pad) return "";
    struct pelab_bytes out = {0};
    if (token < 0 || token >= t->vocab || s->tk.ops->decode(&s->tk, &token, 1, &out))
        snprintf(s->text, sizeof s->text, "<unk>");
    else
        snprintf(s->text, sizeof s->text, "%.*s", (int)out.len, out.data);
    pelab_bytes_free(&out);
    return s->text;
}
