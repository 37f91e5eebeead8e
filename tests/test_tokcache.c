/* Token caches: documents written and read back (tokens, ids, splits) at each token width; the
 * mapping is read-only and leaves no temporary files; and every kind of damage is refused with one
 * line naming the file and the fault: another magic, another version, a torn header, truncation,
 * extra bytes, flipped data, another tokenizer, another vocabulary, an inconsistent document row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/tmpdir.h"
#include "pelab/io.h"
#include "pelab/status.h"
#include "pelab/tokcache.h"

static const char *dir;

/* Writes a cache of 3 documents with ids 0..vocab-1 spread over the range. */
static int write_sample(const char *path, const char *tokenizer, uint64_t hash, uint32_t vocab) {
    struct pelab_tokcache_builder b;
    int32_t ids[100];
    for (int i = 0; i < 100; i++) ids[i] = (int32_t)((uint64_t)i * 7919 % vocab);
    ids[99] = (int32_t)vocab - 1;
    int rc = pelab_tokcache_begin(&b, tokenizer, hash, vocab);
    if (!rc) rc = pelab_tokcache_add(&b, "first", PELAB_DOC_TRAIN, ids, 40);
    if (!rc) rc = pelab_tokcache_add(&b, "empty", PELAB_DOC_VAL, ids, 0);
    if (!rc) rc = pelab_tokcache_add(&b, "third document", PELAB_DOC_LONG, ids + 40, 60);
    if (rc) {
        pelab_tokcache_discard(&b);
        return rc;
    }
    return pelab_tokcache_commit(&b, path);
}

static void test_round_trip(uint32_t vocab, uint32_t width) {
    const char *p = tmpdir_path("rt.ptok");
    CHECK(write_sample(p, "tok", 0x1234, vocab) == PELAB_OK, "write: %s", pelab_last_error());
    struct pelab_tokcache c;
    CHECK(pelab_tokcache_open(&c, p, "tok", 0x1234) == PELAB_OK, "open: %s", pelab_last_error());
    if (!c.map) return;
    CHECK(c.width == width, "vocab %u: width %u, expected %u", (unsigned)vocab, (unsigned)c.width, (unsigned)width);
    CHECK(c.vocab == vocab && c.n_docs == 3 && c.n_tokens == 100, "counts");
    int ok = 1;
    for (int i = 0; i < 99; i++) ok &= pelab_tokcache_token(&c, (uint64_t)i) == (int32_t)((uint64_t)i * 7919 % vocab);
    ok &= pelab_tokcache_token(&c, 99) == (int32_t)vocab - 1;
    CHECK(ok, "vocab %u: tokens read back", (unsigned)vocab);
    CHECK(c.docs[0].start == 0 && c.docs[0].count == 40 && c.docs[1].count == 0 &&
          c.docs[2].start == 40 && c.docs[2].count == 60, "document rows");
    CHECK(c.docs[2].split == PELAB_DOC_LONG && c.docs[1].split == PELAB_DOC_VAL, "splits");
    CHECK(c.docs[2].id_len == 14 && memcmp(c.strings + c.docs[2].id_off, "third document", 14) == 0, "ids");
    CHECK(strcmp(c.tokenizer, "tok") == 0 && c.vocab_hash == 0x1234, "vocabulary id");
    pelab_tokcache_close(&c);
    CHECK(c.map == NULL, "closed");
    CHECK(tmpdir_count_temps(dir) == 0, "no temporary files left");
}

/* Tokens that all fit a byte are stored in one byte each, whatever the vocabulary. */
static void test_narrowed(void) {
    const char *p = tmpdir_path("narrow.ptok");
    struct pelab_tokcache_builder b;
    int32_t ids[4] = {0, 255, 7, 200};
    CHECK(pelab_tokcache_begin(&b, "byte", 9, 258) == PELAB_OK && pelab_tokcache_add(&b, "d", 0, ids, 4) == PELAB_OK &&
          pelab_tokcache_commit(&b, p) == PELAB_OK, "write");
    struct pelab_tokcache c;
    CHECK(pelab_tokcache_open(&c, p, "byte", 9) == PELAB_OK, "open");
    CHECK(c.width == 1 && c.vocab == 258, "width %u", (unsigned)c.width);
    CHECK(pelab_tokcache_token(&c, 1) == 255 && pelab_tokcache_token(&c, 3) == 200, "tokens");
    pelab_tokcache_close(&c);
}

static void test_builder_refusals(void) {
    struct pelab_tokcache_builder b;
    CHECK(pelab_tokcache_begin(&b, "a-name-far-too-long-for-16", 1, 10) == PELAB_ERR_USAGE, "long name refused");
    CHECK(pelab_tokcache_begin(&b, "t", 1, 10) == PELAB_OK, "begin");
    int32_t bad[2] = {3, 10};
    CHECK(pelab_tokcache_add(&b, "d", PELAB_DOC_TRAIN, bad, 2) == PELAB_ERR_RUNTIME, "id == vocab refused");
    CHECK(strstr(pelab_last_error(), "outside the vocabulary") != NULL, "message: %s", pelab_last_error());
    CHECK(pelab_tokcache_add(&b, "", PELAB_DOC_TRAIN, bad, 1) == PELAB_ERR_USAGE, "empty id refused");
    pelab_tokcache_discard(&b);
}

/* Copies the good file to `name` with `edit` applied, then expects open to fail naming the file
 * and the fault. */
static unsigned char *good;
static size_t good_size;

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> 8 * i);
}
/* Recomputes both checksums (so a test reaches the check behind them). */
static void reseal(unsigned char *d, size_t n) {
    put32(d + 64, pelab_crc32(0, d + PELAB_TOKCACHE_HEADER, n - PELAB_TOKCACHE_HEADER));
    put32(d + 68, pelab_crc32(0, d, 68));
}

static void expect_refused(const char *name, const unsigned char *data, size_t n, const char *want_tok,
                           uint64_t want_hash, const char *fault) {
    const char *p = tmpdir_path(name);
    CHECK(pelab_write_file_atomic(p, data, n) == PELAB_OK, "write %s", name);
    struct pelab_tokcache c;
    int rc = pelab_tokcache_open(&c, p, want_tok, want_hash);
    CHECK(rc == PELAB_ERR_RUNTIME, "%s: open returned %d", name, rc);
    CHECK(strstr(pelab_last_error(), p) != NULL, "%s: message names the file: %s", name, pelab_last_error());
    CHECK(strstr(pelab_last_error(), fault) != NULL, "%s: message names '%s': %s", name, fault, pelab_last_error());
    CHECK(strchr(pelab_last_error(), '\n') == NULL, "%s: one line", name);
    CHECK(c.map == NULL, "%s: nothing left mapped", name);
}

static void test_damage(void) {
    char p[512];
    snprintf(p, sizeof p, "%s", tmpdir_path("good.ptok"));
    CHECK(write_sample(p, "gpt2", 0xABCDEF, 50257) == PELAB_OK, "write: %s", pelab_last_error());
    CHECK(pelab_read_file(p, (char **)&good, &good_size) == PELAB_OK, "read");
    unsigned char *d = malloc(good_size + 16);
    size_t n = good_size;

    memcpy(d, good, n);
    memcpy(d, "SAFETENS", 8);
    expect_refused("magic.ptok", d, n, NULL, 0, "not a pelab token cache");
    expect_refused("text.ptok", (const unsigned char *)"hello, world\n", 13, NULL, 0, "truncated");

    memcpy(d, good, n);
    put32(d + 8, 2);
    reseal(d, n);
    expect_refused("version.ptok", d, n, NULL, 0, "version 2");

    memcpy(d, good, n);
    d[44] ^= 1; /* document count, header CRC not updated */
    expect_refused("header.ptok", d, n, NULL, 0, "header checksum");

    expect_refused("short.ptok", good, n - 10, NULL, 0, "truncated");
    expect_refused("tiny.ptok", good, 40, NULL, 0, "truncated");
    memcpy(d, good, n);
    memset(d + n, 0, 16);
    expect_refused("long.ptok", d, n + 16, NULL, 0, "bytes after the end");

    memcpy(d, good, n);
    d[PELAB_TOKCACHE_HEADER + 5] ^= 0x40; /* a token, data CRC not updated */
    expect_refused("data.ptok", d, n, NULL, 0, "data checksum");

    expect_refused("tokenizer.ptok", good, n, "byte", 0, "made by tokenizer 'gpt2', not 'byte'");
    expect_refused("vocab.ptok", good, n, "gpt2", 0x1111, "another 'gpt2' vocabulary");

    /* Rows: the second document claims to start elsewhere (checksums resealed). */
    memcpy(d, good, n);
    size_t rows = PELAB_TOKCACHE_HEADER + ((100 * 2 + 7) & ~(size_t)7);
    d[rows + 24] = 7;
    reseal(d, n);
    expect_refused("rows.ptok", d, n, NULL, 0, "document 1");
    memcpy(d, good, n);
    d[rows + 22] = 9; /* split 9 */
    reseal(d, n);
    expect_refused("split.ptok", d, n, NULL, 0, "document 0");

    struct pelab_tokcache c;
    CHECK(pelab_tokcache_open(&c, tmpdir_path("missing.ptok"), NULL, 0) == PELAB_ERR_RUNTIME, "missing file");
    CHECK(strstr(pelab_last_error(), "missing.ptok") != NULL, "names it: %s", pelab_last_error());
    CHECK(pelab_tokcache_open(&c, p, "gpt2", 0xABCDEF) == PELAB_OK, "the good one still opens: %s", pelab_last_error());
    pelab_tokcache_close(&c);
    free(d);
    free(good);
}

/* A failed write leaves the old file and no temporary. */
static void test_atomic(void) {
    char p[512];
    snprintf(p, sizeof p, "%s", tmpdir_path("keep.ptok"));
    CHECK(write_sample(p, "t", 1, 300) == PELAB_OK, "write");
    struct pelab_tokcache_builder b;
    CHECK(pelab_tokcache_begin(&b, "t", 2, 300) == PELAB_OK, "begin");
    CHECK(pelab_tokcache_commit(&b, tmpdir_path("no-such-dir/x.ptok")) == PELAB_ERR_RUNTIME, "unwritable path refused");
    struct pelab_tokcache c;
    CHECK(pelab_tokcache_open(&c, p, "t", 1) == PELAB_OK, "old file intact");
    pelab_tokcache_close(&c);
    CHECK(tmpdir_count_temps(dir) == 0, "no temporary files left");
}

int main(void) {
    dir = tmpdir_create("pelab-tokcache");
    if (!dir) return 1;
    test_round_trip(256, 1);
    test_round_trip(257, 2);
    test_round_trip(65536, 2);
    test_round_trip(70000, 4);
    test_narrowed();
    test_builder_refusals();
    test_damage();
    test_atomic();
    tmpdir_remove();
    return check_report("test_tokcache");
}
