/* Token caches: the builder (documents appended in memory, one atomic write) and the reader
 * (mmap, then every field checked before use). Layout (docs/FORMATS.md), little-endian:
 *
 *     0  magic "PELABTOK"        8  version (u32)          12 width (u32: 1, 2, 4)
 *    16  tokenizer (16 bytes, NUL-padded)                   32 vocab hash (u64)
 *    40  vocab (u32)            44  documents D (u32)      48 tokens N (u64)
 *    56  string table bytes S (u64)
 *    64  CRC-32 of bytes 72..end (u32)                      68 CRC-32 of bytes 0..67 (u32)
 *    72  tokens, N × width bytes, zero-padded to a multiple of 8
 *        documents, D × 24 bytes (struct pelab_tokcache_doc)
 *        string table, S bytes (document ids, not NUL-terminated)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "pelab/io.h"
#include "pelab/status.h"
#include "pelab/tokcache.h"

static const char MAGIC[8] = {'P', 'E', 'L', 'A', 'B', 'T', 'O', 'K'};

_Static_assert(sizeof(struct pelab_tokcache_doc) == 24, "document rows are 24 bytes on disk");
/* Readers use the mapped rows as structs: the on-disk byte order must be the machine's. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token caches are little-endian; this reader maps their document rows directly"
#endif

const char *pelab_doc_split_name(int split) {
    static const char *const names[] = {"train", "val", "test", "long"};
    return split >= 0 && split <= 3 ? names[split] : "?";
}

static uint64_t pad8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const unsigned char *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }
static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> 8 * i);
}
static void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* ---- builder --------------------------------------------------------------------------------- */

int pelab_tokcache_begin(struct pelab_tokcache_builder *b, const char *tokenizer,
                         uint64_t vocab_hash, uint32_t vocab) {
    memset(b, 0, sizeof *b);
    if (strlen(tokenizer) >= sizeof b->tokenizer || !tokenizer[0] || vocab == 0)
        return pelab_fail(PELAB_ERR_USAGE, "token cache: bad tokenizer name '%s' or vocab %u",
                          tokenizer, (unsigned)vocab);
    strcpy(b->tokenizer, tokenizer);
    b->vocab_hash = vocab_hash;
    b->vocab = vocab;
    b->width = vocab <= 256 ? 1 : vocab <= 65536 ? 2 : 4;
    return PELAB_OK;
}

/* Room for n more tokens, a document row and its id. */
static int reserve(struct pelab_tokcache_builder *b, size_t n, size_t id_len) {
    if (b->n_tokens + n > b->tokens_cap) {
        uint64_t cap = b->tokens_cap ? b->tokens_cap : 1 << 16;
        while (cap < b->n_tokens + n) cap *= 2;
        unsigned char *t = realloc(b->tokens, cap * b->width);
        if (!t) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %llu tokens", (unsigned long long)cap);
        b->tokens = t;
        b->tokens_cap = cap;
    }
    if (b->n_docs == b->docs_cap) {
        uint32_t cap = b->docs_cap ? 2 * b->docs_cap : 256;
        struct pelab_tokcache_doc *d = realloc(b->docs, cap * sizeof *d);
        if (!d) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %u documents", (unsigned)cap);
        b->docs = d;
        b->docs_cap = cap;
    }
    if (b->strings_size + id_len > b->strings_cap) {
        uint64_t cap = b->strings_cap ? b->strings_cap : 4096;
        while (cap < b->strings_size + id_len) cap *= 2;
        char *s = realloc(b->strings, cap);
        if (!s) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for document ids");
        b->strings = s;
        b->strings_cap = cap;
    }
    return PELAB_OK;
}

static int add_row(struct pelab_tokcache_builder *b, const char *id, int split, size_t n) {
    size_t id_len = strlen(id);
    if (id_len == 0 || id_len > UINT16_MAX || split < 0 || split > PELAB_DOC_LONG)
        return pelab_fail(PELAB_ERR_USAGE, "token cache: bad document id '%.40s' or split %d", id, split);
    if (b->n_docs == UINT32_MAX) return pelab_fail(PELAB_ERR_RUNTIME, "token cache: too many documents");
    int rc = reserve(b, n, id_len);
    if (rc) return rc;
    memcpy(b->strings + b->strings_size, id, id_len);
    b->docs[b->n_docs++] = (struct pelab_tokcache_doc){b->n_tokens, n, (uint32_t)b->strings_size,
                                                       (uint16_t)id_len, (uint8_t)split, 0};
    b->strings_size += id_len;
    if (b->strings_size > UINT32_MAX) return pelab_fail(PELAB_ERR_RUNTIME, "token cache: document ids too long");
    return PELAB_OK;
}

int pelab_tokcache_add(struct pelab_tokcache_builder *b, const char *id, int split,
                       const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= b->vocab)
            return pelab_fail(PELAB_ERR_RUNTIME, "document %s: token %zu is %d, outside the "
                              "vocabulary 0..%u", id, i, (int)ids[i], (unsigned)b->vocab - 1);
    int rc = add_row(b, id, split, n);
    if (rc) return rc;
    unsigned char *p = b->tokens + b->n_tokens * b->width;
    for (size_t i = 0; i < n; i++, p += b->width) {
        uint32_t v = (uint32_t)ids[i];
        p[0] = (unsigned char)v;
        if (b->width > 1) p[1] = (unsigned char)(v >> 8);
        if (b->width > 2) p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
    }
    b->n_tokens += n;
    return PELAB_OK;
}

int pelab_tokcache_add_bytes(struct pelab_tokcache_builder *b, const char *id, int split,
                             const char *bytes, size_t n) {
    PELAB_ASSERT(b->width == 1);
    int rc = add_row(b, id, split, n);
    if (rc) return rc;
    if (n) memcpy(b->tokens + b->n_tokens, bytes, n);
    b->n_tokens += n;
    return PELAB_OK;
}

void pelab_tokcache_discard(struct pelab_tokcache_builder *b) {
    free(b->tokens);
    free(b->docs);
    free(b->strings);
    memset(b, 0, sizeof *b);
}

/* Little-endian rows (the struct's own layout on little-endian machines). */
static void encode_docs(const struct pelab_tokcache_builder *b, unsigned char *out) {
    for (uint32_t i = 0; i < b->n_docs; i++, out += 24) {
        const struct pelab_tokcache_doc *d = &b->docs[i];
        put64(out, d->start);
        put64(out + 8, d->count);
        put32(out + 16, d->id_off);
        out[20] = (unsigned char)d->id_len;
        out[21] = (unsigned char)(d->id_len >> 8);
        out[22] = d->split;
        out[23] = 0;
    }
}

/* The narrowest width that holds every token written: a byte-level cache (vocabulary 258, but
 * the specials never stored) takes one byte per token, not two. */
static void narrow(struct pelab_tokcache_builder *b) {
    uint32_t max = 0;
    for (uint64_t i = 0; i < b->n_tokens; i++) {
        const unsigned char *p = b->tokens + i * b->width;
        uint32_t v = b->width == 2 ? (uint32_t)(p[0] | p[1] << 8)
                                   : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if (v > max) max = v;
    }
    uint32_t width = max < 256 ? 1 : max < 65536 ? 2 : 4;
    if (width >= b->width) return;
    for (uint64_t i = 0; i < b->n_tokens; i++) /* in place, front to back: never overtakes */
        memmove(b->tokens + i * width, b->tokens + i * b->width, width);
    b->width = width;
}

int pelab_tokcache_commit(struct pelab_tokcache_builder *b, const char *path) {
    if (b->width > 1) narrow(b);
    uint64_t tok_bytes = b->n_tokens * b->width, tok_padded = pad8(tok_bytes);
    size_t docs_bytes = (size_t)b->n_docs * 24;
    unsigned char *docs = malloc(docs_bytes ? docs_bytes : 1);
    static const unsigned char zeros[8];
    if (!docs) {
        pelab_tokcache_discard(b);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", path);
    }
    encode_docs(b, docs);
    uint32_t crc = pelab_crc32(0, b->tokens, tok_bytes);
    crc = pelab_crc32(crc, zeros, tok_padded - tok_bytes);
    crc = pelab_crc32(crc, docs, docs_bytes);
    crc = pelab_crc32(crc, b->strings, b->strings_size);

    unsigned char h[PELAB_TOKCACHE_HEADER] = {0};
    memcpy(h, MAGIC, 8);
    put32(h + 8, PELAB_TOKCACHE_VERSION);
    put32(h + 12, b->width);
    memcpy(h + 16, b->tokenizer, strlen(b->tokenizer));
    put64(h + 32, b->vocab_hash);
    put32(h + 40, b->vocab);
    put32(h + 44, b->n_docs);
    put64(h + 48, b->n_tokens);
    put64(h + 56, b->strings_size);
    put32(h + 64, crc);
    put32(h + 68, pelab_crc32(0, h, 68));

    struct pelab_atomic_file af;
    int rc = pelab_atomic_open(&af, path);
    if (!rc) {
        int ok = fwrite(h, 1, sizeof h, af.f) == sizeof h &&
                 fwrite(b->tokens ? (const void *)b->tokens : zeros, 1, tok_bytes, af.f) == tok_bytes &&
                 fwrite(zeros, 1, tok_padded - tok_bytes, af.f) == tok_padded - tok_bytes &&
                 fwrite(docs, 1, docs_bytes, af.f) == docs_bytes &&
                 fwrite(b->strings ? b->strings : "", 1, b->strings_size, af.f) == b->strings_size;
        if (!ok) {
            int err = errno;
            pelab_atomic_abort(&af);
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot write: %s", path, strerror(err));
        } else {
            rc = pelab_atomic_commit(&af);
        }
    }
    free(docs);
    pelab_tokcache_discard(b);
    return rc;
}

/* ---- reader ---------------------------------------------------------------------------------- */

void pelab_tokcache_close(struct pelab_tokcache *c) {
    if (c->map) munmap(c->map, c->map_size);
    memset(c, 0, sizeof *c);
}

static int too_short(const char *path, uint64_t size) {
    return pelab_fail(PELAB_ERR_RUNTIME, "%s: truncated: %llu bytes, shorter than a token cache's "
                      "%d-byte header", path, (unsigned long long)size, PELAB_TOKCACHE_HEADER);
}

/* Every field of the cache image h[0..size-1] checked; c points into h. On failure c's fields
 * are left half set: the callers clear them. */
static int check(struct pelab_tokcache *c, const char *path, const unsigned char *h, uint64_t size,
                 const char *want_tokenizer, uint64_t want_hash) {
    if (size < PELAB_TOKCACHE_HEADER) return too_short(path, size);
    if (memcmp(h, MAGIC, 8) != 0)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: not a pelab token cache (bad magic)", path);
    uint32_t version = get32(h + 8);
    if (version != PELAB_TOKCACHE_VERSION)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: token cache version %u, this pelab "
                          "reads version %d: delete it and install the dataset again",
                          path, (unsigned)version, PELAB_TOKCACHE_VERSION);
    if (get32(h + 68) != pelab_crc32(0, h, 68))
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: corrupt: header checksum mismatch", path);
    c->width = get32(h + 12);
    memcpy(c->tokenizer, h + 16, 16);
    c->vocab_hash = get64(h + 32);
    c->vocab = get32(h + 40);
    c->n_docs = get32(h + 44);
    c->n_tokens = get64(h + 48);
    c->strings_size = get64(h + 56);
    c->data_crc = get32(h + 64);
    if ((c->width != 1 && c->width != 2 && c->width != 4) || c->tokenizer[15] != '\0' ||
        c->n_tokens > (UINT64_MAX >> 3) || c->strings_size > UINT32_MAX)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: corrupt: impossible header fields", path);
    uint64_t tok_padded = pad8(c->n_tokens * c->width);
    uint64_t expect = PELAB_TOKCACHE_HEADER + tok_padded + (uint64_t)c->n_docs * 24 + c->strings_size;
    if (size < expect)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: truncated: %llu bytes, the header says "
                          "%llu", path, (unsigned long long)size, (unsigned long long)expect);
    if (size > expect)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: corrupt: %llu bytes after the end the "
                          "header gives", path, (unsigned long long)(size - expect));
    if (want_tokenizer && strcmp(c->tokenizer, want_tokenizer) != 0)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: made by tokenizer '%s', not '%s'", path,
                          c->tokenizer, want_tokenizer);
    if (want_hash && c->vocab_hash != want_hash)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: made with another '%s' vocabulary "
                          "(hash %016llx, this one is %016llx): delete it to rebuild",
                          path, c->tokenizer, (unsigned long long)c->vocab_hash,
                          (unsigned long long)want_hash);
    if (pelab_crc32(0, h + PELAB_TOKCACHE_HEADER, size - PELAB_TOKCACHE_HEADER) != c->data_crc)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: corrupt: data checksum mismatch", path);
    c->tokens = h + PELAB_TOKCACHE_HEADER;
    c->docs = (const struct pelab_tokcache_doc *)(h + PELAB_TOKCACHE_HEADER + tok_padded);
    c->strings = (const char *)(h + PELAB_TOKCACHE_HEADER + tok_padded + (uint64_t)c->n_docs * 24);
    /* The rows tile the tokens in order, and ids lie in the string table. */
    uint64_t next = 0;
    for (uint32_t i = 0; i < c->n_docs; i++) {
        const struct pelab_tokcache_doc *d = &c->docs[i];
        if (d->start != next || d->count > c->n_tokens - d->start || d->split > PELAB_DOC_LONG ||
            d->id_len == 0 || (uint64_t)d->id_off + d->id_len > c->strings_size)
            return pelab_fail(PELAB_ERR_RUNTIME, "%s: corrupt: document %u's row is "
                          "inconsistent", path, (unsigned)i);
        next = d->start + d->count;
    }
    if (next != c->n_tokens)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: corrupt: the documents hold %llu of "
                          "%llu tokens", path, (unsigned long long)next,
                          (unsigned long long)c->n_tokens);
    return PELAB_OK;
}

int pelab_tokcache_parse(struct pelab_tokcache *c, const char *name, const void *data, size_t size,
                         const char *want_tokenizer, uint64_t want_hash) {
    PELAB_ASSERT((uintptr_t)data % 8 == 0);
    memset(c, 0, sizeof *c);
    int rc = check(c, name, data, size, want_tokenizer, want_hash);
    if (rc) memset(c, 0, sizeof *c);
    return rc;
}

int pelab_tokcache_open(struct pelab_tokcache *c, const char *path, const char *want_tokenizer,
                        uint64_t want_hash) {
    memset(c, 0, sizeof *c);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < PELAB_TOKCACHE_HEADER) { /* before mmap, which refuses 0 bytes */
        close(fd);
        return too_short(path, size);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED) return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot map: %s", path, strerror(err));
    int rc = check(c, path, map, size, want_tokenizer, want_hash);
    if (rc) {
        munmap(map, (size_t)size);
        memset(c, 0, sizeof *c);
        return rc;
    }
    c->map = map;
    c->map_size = (size_t)size;
    return PELAB_OK;
}
