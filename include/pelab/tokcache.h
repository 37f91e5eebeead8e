/* pelab/tokcache.h — token caches: a dataset's documents as token ids, one file per (dataset,
 * tokenizer), memory-mapped when read. The same format holds a dataset's text itself (tokenizer
 * "text": one token per byte). Layout in docs/FORMATS.md ("Token cache").
 *
 * A cache records the tokenizer's name and vocabulary hash: opening it for another tokenizer or
 * vocabulary, or a cache that is truncated, corrupt (checksums), of another version or not a
 * cache at all, fails with one line naming the file and the fault. Files are written atomically.
 */
#ifndef PELAB_TOKCACHE_H
#define PELAB_TOKCACHE_H

#include <stddef.h>
#include <stdint.h>

#define PELAB_TOKCACHE_VERSION 1
#define PELAB_TOKCACHE_HEADER 72 /* bytes */

/* A document's split: hash of its id (train/val/test), or reserved for length extrapolation. */
enum pelab_doc_split {
    PELAB_DOC_TRAIN = 0,
    PELAB_DOC_VAL = 1,
    PELAB_DOC_TEST = 2,
    PELAB_DOC_LONG = 3 /* the longest documents, held out for extrapolation sweeps */
};
const char *pelab_doc_split_name(int split); /* "train", "val", "test", "long" */

/* One row of the document table, as stored (24 bytes, little-endian). */
struct pelab_tokcache_doc {
    uint64_t start;  /* first token */
    uint64_t count;  /* tokens */
    uint32_t id_off; /* document id: bytes id_off..id_off+id_len-1 of the string table */
    uint16_t id_len;
    uint8_t split;   /* enum pelab_doc_split */
    uint8_t reserved;
};

/* An open cache: everything points into the read-only mapping. */
struct pelab_tokcache {
    char tokenizer[16]; /* NUL-terminated */
    uint64_t vocab_hash;
    uint32_t vocab, width; /* width: bytes per token, 1, 2 or 4 (the narrowest for the tokens) */
    uint32_t n_docs;
    uint64_t n_tokens;
    uint32_t data_crc;
    const unsigned char *tokens;          /* n_tokens * width bytes */
    const struct pelab_tokcache_doc *docs; /* n_docs */
    const char *strings;
    uint64_t strings_size;
    void *map;
    size_t map_size;
};

/* Maps and checks `path`. want_tokenizer / want_hash: the vocabulary the caller needs (NULL / 0:
 * any). PELAB_ERR_RUNTIME with "PATH: fault" for a missing, foreign, truncated or corrupt file. */
int pelab_tokcache_open(struct pelab_tokcache *c, const char *path, const char *want_tokenizer,
                        uint64_t want_hash);
/* The same checks on a cache image already in memory, data[0..size-1] (8-byte aligned: the
 * document rows are read in place), named `name` in messages; c points into data, which must
 * outlive it (pelab_tokcache_close is not needed, but harmless). */
int pelab_tokcache_parse(struct pelab_tokcache *c, const char *name, const void *data, size_t size,
                         const char *want_tokenizer, uint64_t want_hash);
void pelab_tokcache_close(struct pelab_tokcache *c);
/* Token i (0 <= i < n_tokens). */
static inline int32_t pelab_tokcache_token(const struct pelab_tokcache *c, uint64_t i) {
    const unsigned char *p = c->tokens + i * c->width;
    return c->width == 1 ? p[0]
           : c->width == 2 ? (int32_t)(p[0] | p[1] << 8)
                           : (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                                       (uint32_t)p[3] << 24);
}

/* Building a cache in memory, document by document, then writing it atomically. */
struct pelab_tokcache_builder {
    char tokenizer[16];
    uint64_t vocab_hash;
    uint32_t vocab, width;
    unsigned char *tokens;
    uint64_t n_tokens, tokens_cap; /* cap in tokens */
    struct pelab_tokcache_doc *docs;
    uint32_t n_docs, docs_cap;
    char *strings;
    uint64_t strings_size, strings_cap;
};
/* Tokens are held at the width vocab needs (1 byte up to 256, 2 up to 65536, else 4); commit
 * stores them at the narrowest width that holds every token actually written. */
int pelab_tokcache_begin(struct pelab_tokcache_builder *b, const char *tokenizer,
                         uint64_t vocab_hash, uint32_t vocab);
/* Appends a document of ids (each in 0..vocab-1) or of bytes (width-1 caches only). */
int pelab_tokcache_add(struct pelab_tokcache_builder *b, const char *id, int split,
                       const int32_t *ids, size_t n);
int pelab_tokcache_add_bytes(struct pelab_tokcache_builder *b, const char *id, int split,
                             const char *bytes, size_t n);
/* Writes the cache to path atomically; the builder is freed either way. */
int pelab_tokcache_commit(struct pelab_tokcache_builder *b, const char *path);
void pelab_tokcache_discard(struct pelab_tokcache_builder *b);

#endif
