/* Fuzz target: the token-cache reader (pelab_tokcache_parse, the checks of pelab_tokcache_open on
 * bytes in memory) on any bytes, as they are and with their two checksums made to match. An
 * accepted cache has every token, document row and document id read, so a table that points
 * outside the file is an ASan error; it is then read again for another tokenizer and vocabulary,
 * which must be refused. */
#include "fuzz.h"
#include "pelab/tokcache.h"

#define NAME "fuzz.tokens"

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}

static void one(const uint8_t *data, size_t size) {
    struct pelab_tokcache c;
    int rc = pelab_tokcache_parse(&c, NAME, data, size, NULL, 0);
    if (rc) {
        fuzz_check_refusal(rc, NAME ": ");
        return;
    }
    uint64_t sum = 0;
    for (uint64_t i = 0; i < c.n_tokens; i++) sum += (uint32_t)pelab_tokcache_token(&c, i);
    for (uint32_t i = 0; i < c.n_docs; i++) {
        const struct pelab_tokcache_doc *d = &c.docs[i];
        if (d->start + d->count > c.n_tokens || strlen(pelab_doc_split_name(d->split)) == 1) abort();
        if (d->count) sum += (uint32_t)pelab_tokcache_token(&c, d->start + d->count - 1);
        sum += (uint32_t)pelab_crc32(0, c.strings + d->id_off, d->id_len);
    }
    (void)sum;
    const char *other = strcmp(c.tokenizer, "byte") ? "byte" : "gpt2";
    uint64_t hash = c.vocab_hash;
    pelab_tokcache_close(&c);
    fuzz_check_refusal(pelab_tokcache_parse(&c, NAME, data, size, other, 0), NAME ": ");
    fuzz_check_refusal(pelab_tokcache_parse(&c, NAME, data, size, NULL, ~hash ? ~hash : 1), NAME ": ");
}

/* The bytes as they are (the checksums fuzzed too), then with the data and header checksums made
 * to match, so that the checks behind them are reached (in an 8-byte aligned copy either way:
 * the reader takes its rows in place, as from a mapping). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    one(copy, size);
    if (size >= PELAB_TOKCACHE_HEADER) {
        uint32_t dcrc = pelab_crc32(0, copy + PELAB_TOKCACHE_HEADER, size - PELAB_TOKCACHE_HEADER);
        int changed = get32(copy + 64) != dcrc;
        put32(copy + 64, dcrc);
        uint32_t hcrc = pelab_crc32(0, copy, 68);
        changed |= get32(copy + 68) != hcrc;
        put32(copy + 68, hcrc);
        if (changed) one(copy, size);
    }
    free(copy);
    return 0;
}
