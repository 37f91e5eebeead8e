/* pelab/tokenizer.h — text to token ids and back.
 *
 * Each tokenizer is one table of function pointers (src/data/tokenizers/<name>.c), listed once in
 * src/data/tokenizer.c:
 *
 *   byte   UTF-8 bytes as ids 0..255, then <pad> 256, <eod> 257            vocab 258
 *   gpt2   GPT-2's byte-level BPE from encoder.json + vocab.bpe             vocab 50257
 *   dna    the Nucleotide Transformer's non-overlapping 6-mers              vocab 4107
 *   jsb    JSB chorales as MIDI pitches in raster order, silence, padding   vocab 90
 *
 * docs/DATA.md gives each id layout. Encoding never fails on valid input; input a tokenizer has
 * no ids for (a letter in DNA, a word in a chorale) is a PELAB_ERR_RUNTIME naming the byte offset.
 * Decoding maps ids back to text; for input in canonical form (byte: any bytes; gpt2: any bytes;
 * dna: upper-case ACGTN; jsb: 4 pitches per line) decode(encode(x)) == x.
 */
#ifndef PELAB_TOKENIZER_H
#define PELAB_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

/* A growable array of token ids. */
struct pelab_tokens {
    int32_t *ids;
    size_t len, cap;
};
/* Appends one id; PELAB_ERR_RUNTIME when out of memory. */
int pelab_tokens_push(struct pelab_tokens *t, int32_t id);
void pelab_tokens_free(struct pelab_tokens *t);

/* A growable byte buffer (decoded text). */
struct pelab_bytes {
    char *data;
    size_t len, cap;
};
int pelab_bytes_append(struct pelab_bytes *b, const void *data, size_t n);
void pelab_bytes_free(struct pelab_bytes *b);

#define PELAB_TOKENIZER_NAME_MAX 16

struct pelab_tokenizer;

struct pelab_tokenizer_ops {
    const char *name; /* at most PELAB_TOKENIZER_NAME_MAX - 1 characters */
    const char *summary;
    /* Files it reads from its vocabulary directory (NULL: none, the table is built in). */
    const char *const *files;
    /* Sets vocab, pad, eod and vocab_hash; reads `files` from vocab_dir when it has any. */
    int (*load)(struct pelab_tokenizer *tk, const char *vocab_dir);
    void (*free)(struct pelab_tokenizer *tk);
    /* Appends the ids of text[0..n-1] to out. `what` names the input in messages ("FILE"). */
    int (*encode)(const struct pelab_tokenizer *tk, const char *text, size_t n, const char *what,
                  struct pelab_tokens *out);
    /* Appends the text of ids[0..n-1] to out; an id outside the vocabulary is an error. */
    int (*decode)(const struct pelab_tokenizer *tk, const int32_t *ids, size_t n,
                  struct pelab_bytes *out);
};

struct pelab_tokenizer {
    const struct pelab_tokenizer_ops *ops;
    int vocab;           /* V */
    int32_t pad;         /* padding id */
    int32_t eod;         /* end-of-document id (gpt2: <|endoftext|>; dna: <eos>) */
    uint64_t vocab_hash; /* FNV-1a 64 of the vocabulary files, or of a built-in layout's name */
    void *state;
};

const struct pelab_tokenizer_ops *pelab_tokenizer_find(const char *name);
const struct pelab_tokenizer_ops *const *pelab_tokenizer_all(void);
/* Loads tokenizer `name`; vocab_dir is where its files are (ignored by built-in tables).
 * PELAB_ERR_USAGE for an unknown name, PELAB_ERR_RUNTIME for files that are missing or do not
 * parse (one line naming the file and the fault). */
int pelab_tokenizer_load(struct pelab_tokenizer *tk, const char *name, const char *vocab_dir);
void pelab_tokenizer_free(struct pelab_tokenizer *tk);

/* FNV-1a 64 over data, continuing from h (start with PELAB_FNV64_INIT). */
#define PELAB_FNV64_INIT 0xcbf29ce484222325ull
uint64_t pelab_fnv64(uint64_t h, const void *data, size_t n);

#endif
