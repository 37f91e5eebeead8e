/* safetensors: round trips of every dtype and rank, the parameter table saved and loaded exactly,
 * and a battery of damaged files, each refused with a message that starts with the path: every
 * truncation, every byte flipped, and one hand-made file per rule of the reader. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/tmpdir.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/params.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double rand_real(void) { /* splitmix64 → [-1, 1) */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 4503599627370496.0 - 1.0;
}

static struct pelab_tensor tensor(const char *name, enum pelab_dtype dt, int ndim, const int64_t *shape,
                                  const void *data, size_t nbytes) {
    struct pelab_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    t.data = data;
    t.nbytes = nbytes;
    return t;
}

/* 8-byte little-endian header length, header, `ndata` bytes of data (a ramp). */
static char *make_file(const char *header, uint64_t header_len, size_t ndata, size_t *size) {
    size_t hl = strlen(header);
    *size = 8 + hl + ndata;
    char *b = malloc(*size + 1);
    for (int i = 0; i < 8; i++) b[i] = (char)(header_len >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < ndata; i++) b[8 + hl + i] = (char)(i * 7 + 1);
    return b;
}

/* Writes the bytes, reads them as safetensors; returns the status and frees on success. */
static int try_read(const char *path, const char *bytes, size_t n) {
    PELAB_ASSERT(pelab_write_file_atomic(path, bytes, n) == PELAB_OK);
    struct pelab_st_file f;
    int rc = pelab_safetensors_read(path, &f);
    if (rc == PELAB_OK) pelab_st_file_free(&f);
    else if (f.buf != NULL || f.tensors != NULL || f.count != 0) rc = -1; /* not cleaned up */
    return rc;
}

/* The last error starts with "PATH: ". */
static int names_path(const char *path) {
    size_t n = strlen(path);
    return strncmp(pelab_last_error(), path, n) == 0 && strncmp(pelab_last_error() + n, ": ", 2) == 0;
}

static void refused(const char *name, const char *bytes, size_t n, const char *want) {
    const char *path = tmpdir_path(name);
    int rc = try_read(path, bytes, n);
    CHECK(rc == PELAB_ERR_RUNTIME, "%s: accepted (rc %d)", name, rc);
    CHECK(names_path(path), "%s: message does not start with the path: %s", name, pelab_last_error());
    CHECK(strstr(pelab_last_error(), want) != NULL, "%s: wanted '%s' in '%s'", name, want,
          pelab_last_error());
}

/* A header (its own length) and ndata bytes of data must be refused with `want`. */
static void refused_header(const char *name, const char *header, size_t ndata, const char *want) {
    size_t n;
    char *b = make_file(header, strlen(header), ndata, &n);
    refused(name, b, n, want);
    free(b);
}

static void accepted_header(const char *name, const char *header, size_t ndata, int count) {
    size_t n;
    char *b = make_file(header, strlen(header), ndata, &n);
    const char *path = tmpdir_path(name);
    PELAB_ASSERT(pelab_write_file_atomic(path, b, n) == PELAB_OK);
    struct pelab_st_file f;
    int rc = pelab_safetensors_read(path, &f);
    CHECK(rc == PELAB_OK, "%s: refused: %s", name, pelab_last_error());
    CHECK(rc || f.count == count, "%s: %d tensors, wanted %d", name, f.count, count);
    if (!rc) pelab_st_file_free(&f);
    free(b);
}

/* ---- round trips ----------------------------------------------------------------------------- */

static void test_round_trip(void) {
    float f32[6];
    double f64[4];
    int32_t i32[6];
    int64_t i64[1] = {-1234567890123456789LL};
    for (int i = 0; i < 6; i++) f32[i] = (float)rand_real(), i32[i] = -3 + 1000000 * i;
    for (int i = 0; i < 4; i++) f64[i] = rand_real() * 1e300;
    const int64_t s23[] = {2, 3}, s4[] = {4}, s2113[] = {2, 1, 1, 3}, s05[] = {0, 5};
    struct pelab_tensor in[] = {
        tensor("blocks.0.attn.w", PELAB_DT_F32, 2, s23, f32, sizeof f32),
        tensor("f64 \"quoted\" \xc3\xa9", PELAB_DT_F64, 1, s4, f64, sizeof f64),
        tensor("ints", PELAB_DT_I32, 4, s2113, i32, sizeof i32),
        tensor("scalar", PELAB_DT_I64, 0, NULL, i64, sizeof i64),
        tensor("empty", PELAB_DT_F32, 2, s05, NULL, 0),
    };
    int n = (int)(sizeof in / sizeof in[0]);
    struct pelab_opts meta = {0};
    pelab_opts_set(&meta, "format", "pelab-model");
    pelab_opts_set(&meta, "note", "line\nbreak \"q\" \xe2\x82\xac");
    pelab_opts_set(&meta, "pelab.data-crc32", "00000000"); /* stale: the writer recomputes it */
    pelab_opts_set(&meta, "pelab.crc32", "00000000");      /* pelab 0.1.0's: the writer drops it */
    const char *path = tmpdir_path("round.safetensors");
    CHECK(pelab_safetensors_write(path, in, n, &meta) == PELAB_OK, "write: %s", pelab_last_error());

    struct pelab_st_file f;
    int rc = pelab_safetensors_read(path, &f);
    CHECK(rc == PELAB_OK, "read: %s", pelab_last_error());
    if (rc) return;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (unsigned char)f.buf[i];
    CHECK(hl % 8 == 0 && f.buf[8] == '{', "header padded to 8 bytes, starts with '{'");
    CHECK(f.count == n, "tensor count %d", f.count);
    for (int i = 0; i < n && i < f.count; i++) {
        const struct pelab_tensor *t = &f.tensors[i];
        CHECK(strcmp(t->name, in[i].name) == 0, "tensors in the given order: %s", t->name);
        CHECK(t->dtype == in[i].dtype && t->ndim == in[i].ndim && t->nbytes == in[i].nbytes,
              "%s: dtype, rank, size", t->name);
        CHECK(memcmp(t->shape, in[i].shape, sizeof t->shape) == 0, "%s: shape", t->name);
        CHECK(in[i].nbytes == 0 || memcmp(t->data, in[i].data, in[i].nbytes) == 0, "%s: bytes", t->name);
        CHECK(pelab_st_find(&f, in[i].name) == t, "find %s", t->name);
    }
    CHECK(pelab_st_find(&f, "nope") == NULL, "find missing");
    CHECK(strcmp(pelab_opts_get(&f.metadata, "format"), "pelab-model") == 0, "metadata format");
    CHECK(strcmp(pelab_opts_get(&f.metadata, "note"), meta.kv[1].val) == 0, "metadata escapes");
    const char *crc = pelab_opts_get(&f.metadata, "pelab.data-crc32");
    CHECK(pelab_opts_get(&f.metadata, "pelab.crc32") == NULL, "0.1.0's checksum key not written");
    char want[16];
    snprintf(want, sizeof want, "%08x", (unsigned)pelab_crc32(0, f.buf + 8 + hl, f.size - 8 - hl));
    CHECK(crc && strcmp(crc, want) == 0, "crc written over the data section: %s vs %s", crc, want);
    pelab_st_file_free(&f);
    CHECK(f.buf == NULL && f.tensors == NULL && f.count == 0, "free resets");

    /* No tensors, no metadata: still a valid file. */
    const char *none = tmpdir_path("none.safetensors");
    CHECK(pelab_safetensors_write(none, NULL, 0, NULL) == PELAB_OK, "write nothing");
    rc = pelab_safetensors_read(none, &f);
    CHECK(rc == PELAB_OK && f.count == 0 && pelab_opts_get(&f.metadata, "pelab.data-crc32"),
          "read nothing: %s", pelab_last_error());
    if (!rc) pelab_st_file_free(&f);
}

/* Files as other tools write them: no metadata, no padding, zero-size tensors at the edges. */
static void test_foreign(void) {
    accepted_header("plain", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 1);
    accepted_header("empty-header", "{}", 0, 0);
    accepted_header("spaces", "  {\"__metadata__\":{}}     ", 0, 0);
    accepted_header("zero-sized",
                    "{\"z0\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
                    "\"a\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]},"
                    "\"z1\":{\"dtype\":\"F64\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
                    "\"extra-keys-ignored\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8],\"x\":1}}",
                    8, 4);
    /* A model file of pelab 0.1.0: the data checksum under its old name, no header checksum. */
    accepted_header("pelab-0.1.0", "{\"__metadata__\":{\"format\":\"pelab-model\",\"pelab.crc32\":"
                    "\"00000000\"}}", 0, 0);
}

/* ---- the parameter table --------------------------------------------------------------------- */

static void declare_model(struct pelab_params *p, int64_t wrows, int with_extra) {
    const int64_t emb[] = {5, 4}, w[] = {wrows, 4}, g[] = {4}, x[] = {2};
    pelab_params_declare(p, "tok_emb.weight", 2, emb, 1);
    pelab_params_declare(p, "blocks.0.w", 2, w, 1);
    pelab_params_declare(p, "ln_f.g", 1, g, 0);
    if (with_extra) pelab_params_declare(p, "extra", 1, x, 0);
    PELAB_ASSERT(pelab_params_alloc(p) == PELAB_OK);
}

/* Reads path and loads it into p; returns the status. */
static int load(const char *path, struct pelab_params *p) {
    struct pelab_st_file f;
    int rc = pelab_safetensors_read(path, &f);
    if (rc) return rc;
    rc = pelab_params_load(&f, p, path);
    pelab_st_file_free(&f);
    return rc;
}

static void test_params(void) {
    struct pelab_params a = {0}, b = {0};
    declare_model(&a, 4, 0);
    declare_model(&b, 4, 0);
    for (size_t i = 0; i < a.total; i++) a.data[i] = (pelab_real)rand_real();
    a.data[0] = (pelab_real)-0.0;
    a.data[1] = (pelab_real)1e-310; /* subnormal in double */
    struct pelab_opts meta = {0};
    pelab_opts_set(&meta, "format", "pelab-model");
    const char *path = tmpdir_path("model.safetensors");
    CHECK(pelab_params_save(path, &a, &meta) == PELAB_OK, "save: %s", pelab_last_error());
    CHECK(load(path, &b) == PELAB_OK, "load: %s", pelab_last_error());
    CHECK(memcmp(a.data, b.data, a.total * sizeof(pelab_real)) == 0, "save/load is exact");
    struct pelab_st_file f;
    if (pelab_safetensors_read(path, &f) == PELAB_OK) {
        const struct pelab_tensor *t = pelab_st_find(&f, "blocks.0.w");
        CHECK(t && t->dtype == (sizeof(pelab_real) == 8 ? PELAB_DT_F64 : PELAB_DT_F32), "dtype "
              PELAB_REAL_NAME);
        CHECK(f.count == 3 && strcmp(f.tensors[0].name, "tok_emb.weight") == 0 &&
              strcmp(f.tensors[2].name, "ln_f.g") == 0, "declaration order");
        CHECK(strcmp(pelab_opts_get(&f.metadata, "format"), "pelab-model") == 0, "metadata kept");
        pelab_st_file_free(&f);
    }

    /* F32 tensors load into the table, converted. */
    float f32[5 * 4 + 4 * 4 + 4];
    for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++) f32[i] = (float)rand_real();
    const int64_t emb[] = {5, 4}, w[] = {4, 4}, g[] = {4}, w34[] = {3, 4};
    struct pelab_tensor t32[] = {
        tensor("ln_f.g", PELAB_DT_F32, 1, g, f32 + 36, 16),
        tensor("tok_emb.weight", PELAB_DT_F32, 2, emb, f32, 80),
        tensor("blocks.0.w", PELAB_DT_F32, 2, w, f32 + 20, 64),
    };
    const char *p32 = tmpdir_path("f32.safetensors");
    CHECK(pelab_safetensors_write(p32, t32, 3, NULL) == PELAB_OK, "write f32");
    CHECK(load(p32, &b) == PELAB_OK, "load f32 (any order): %s", pelab_last_error());
    int same = 1;
    for (int i = 0; i < 40; i++) same &= b.data[i] == (pelab_real)f32[i];
    CHECK(same, "F32 values converted exactly");

    /* Refusals, each leaving the table as it was. */
    pelab_real before[40];
    memcpy(before, b.data, sizeof before);
    t32[2] = tensor("blocks.0.w", PELAB_DT_F32, 2, w34, f32 + 20, 48);
    const char *bad = tmpdir_path("wrong-shape.safetensors");
    pelab_safetensors_write(bad, t32, 3, NULL);
    CHECK(load(bad, &b) == PELAB_ERR_RUNTIME && names_path(bad) &&
          strstr(pelab_last_error(), "tensor 'blocks.0.w' has shape [3, 4], the model expects [4, 4]"),
          "wrong shape: %s", pelab_last_error());
    CHECK(memcmp(before, b.data, sizeof before) == 0, "a refused load changes nothing");

    struct pelab_params small = {0}, big = {0};
    declare_model(&small, 3, 0);
    CHECK(load(path, &small) == PELAB_ERR_RUNTIME && names_path(path) &&
          strstr(pelab_last_error(), "has shape [4, 4], the model expects [3, 4]"), "%s",
          pelab_last_error());
    declare_model(&big, 4, 1);
    CHECK(load(path, &big) == PELAB_ERR_RUNTIME && names_path(path) &&
          strstr(pelab_last_error(), "tensor 'extra' is missing"), "missing: %s", pelab_last_error());
    CHECK(pelab_params_save(bad, &big, NULL) == PELAB_OK, "save big");
    CHECK(load(bad, &a) == PELAB_ERR_RUNTIME && names_path(bad) &&
          strstr(pelab_last_error(), "unexpected tensor 'extra' (not a parameter of this model)"),
          "extra: %s", pelab_last_error());

    int32_t ints[4] = {1, 2, 3, 4};
    t32[0] = tensor("ln_f.g", PELAB_DT_I32, 1, g, ints, 16);
    t32[2] = tensor("blocks.0.w", PELAB_DT_F32, 2, w, f32 + 20, 64);
    pelab_safetensors_write(bad, t32, 3, NULL);
    CHECK(load(bad, &b) == PELAB_ERR_RUNTIME && strstr(pelab_last_error(), "dtype I32"),
          "integer dtype: %s", pelab_last_error());

    /* Non-finite weights are refused, the table left as it was. */
    float poisoned[16];
    memcpy(poisoned, f32 + 20, sizeof poisoned);
    poisoned[5] = (float)INFINITY;
    t32[2] = tensor("blocks.0.w", PELAB_DT_F32, 2, w, poisoned, 64);
    t32[0] = tensor("ln_f.g", PELAB_DT_F32, 1, g, f32 + 36, 16);
    pelab_safetensors_write(bad, t32, 3, NULL);
    memcpy(before, b.data, sizeof before);
    CHECK(load(bad, &b) == PELAB_ERR_RUNTIME && names_path(bad) &&
          strstr(pelab_last_error(), "tensor 'blocks.0.w' holds inf at element 5"),
          "non-finite weight: %s", pelab_last_error());
    CHECK(memcmp(before, b.data, sizeof before) == 0, "a refused non-finite load changes nothing");

    /* Misaligned data (header length not a multiple of 8), as a foreign writer may produce: the
     * loader must copy, not dereference (UBSan's alignment check watches this). */
    struct pelab_params one = {0};
    const int64_t s3[] = {3};
    pelab_params_declare(&one, "w", 1, s3, 0);
    pelab_params_alloc(&one);
    double vals[3] = {1.5, -2.25, 1e-300};
    size_t n;
    const char *odd = "{\"w\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[0,24]}}";
    PELAB_ASSERT(strlen(odd) % 8 != 0);
    char *raw = make_file(odd, strlen(odd), 0, &n);
    raw = realloc(raw, n + 24);
    memcpy(raw + n, vals, 24);
    const char *mis = tmpdir_path("misaligned.safetensors");
    pelab_write_file_atomic(mis, raw, n + 24);
    free(raw);
    CHECK(load(mis, &one) == PELAB_OK, "misaligned load: %s", pelab_last_error());
    CHECK(one.data[0] == (pelab_real)1.5 && one.data[1] == (pelab_real)-2.25 &&
          one.data[2] == (pelab_real)1e-300, "misaligned values");

    pelab_params_free(&a);
    pelab_params_free(&b);
    pelab_params_free(&small);
    pelab_params_free(&big);
    pelab_params_free(&one);
}

/* ---- damaged files --------------------------------------------------------------------------- */

/* A small valid file from the writer, read back as bytes. */
static char *small_file(size_t *size) {
    float a[6] = {1, 2, 3, 4, 5, 6};
    int64_t b[2] = {7, -8};
    const int64_t s23[] = {2, 3}, s2[] = {2};
    struct pelab_tensor t[] = {tensor("a", PELAB_DT_F32, 2, s23, a, sizeof a),
                               tensor("b", PELAB_DT_I64, 1, s2, b, sizeof b)};
    struct pelab_opts meta = {0};
    pelab_opts_set(&meta, "format", "test");
    const char *path = tmpdir_path("small.safetensors");
    PELAB_ASSERT(pelab_safetensors_write(path, t, 2, &meta) == PELAB_OK);
    char *data;
    PELAB_ASSERT(pelab_read_file(path, &data, size) == PELAB_OK);
    return data;
}

static void test_truncation_and_flips(void) {
    size_t size;
    char *good = small_file(&size);
    const char *path = tmpdir_path("cut.safetensors");
    int all_refused = 1, all_named = 1;
    for (size_t n = 0; n < size; n++) {
        int rc = try_read(path, good, n);
        if (rc != PELAB_ERR_RUNTIME) all_refused = 0;
        if (!names_path(path)) all_named = 0;
    }
    CHECK(all_refused, "every truncation of a %zu-byte file is refused", size);
    CHECK(all_named, "every truncation's message names the path");
    CHECK(try_read(path, good, size) == PELAB_OK, "the whole file reads");

    /* Flip each byte in turn (three ways): the two checksums cover the length, the header and
     * the data, so every flip is a clean refusal naming the path. */
    const char *fpath = tmpdir_path("flip.safetensors");
    static const unsigned char masks[] = {0x01, 0x80, 0xff};
    int clean = 1, caught = 1;
    char *bad = malloc(size);
    for (size_t i = 0; i < size; i++)
        for (size_t k = 0; k < sizeof masks; k++) {
            memcpy(bad, good, size);
            bad[i] ^= (char)masks[k];
            int rc = try_read(fpath, bad, size);
            if (rc != PELAB_OK && (rc != PELAB_ERR_RUNTIME || !names_path(fpath))) clean = 0;
            if (rc == PELAB_OK) caught = 0;
        }
    free(bad);
    CHECK(clean, "byte flips: a clean refusal naming the path");
    CHECK(caught, "every flip of a %zu-byte file is caught by a checksum", size);

    /* A header edit that keeps valid JSON: the metadata value "test" becomes "tesu". */
    char *edited = malloc(size);
    memcpy(edited, good, size);
    char *v = strstr(edited + 8, "\"test\"");
    PELAB_ASSERT(v != NULL);
    v[4] = 'u';
    refused("header-edit", edited, size, "header checksum mismatch");
    /* The same file re-spaced by another tool: the checksum's digits are no longer found. */
    struct pelab_sb sb = {0};
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (unsigned char)good[i];
    const char *key = strstr(good + 8, "\"pelab.header-crc32\":");
    PELAB_ASSERT(key != NULL);
    size_t split = (size_t)(key - good) + strlen("\"pelab.header-crc32\":");
    pelab_sb_append(&sb, "        ", 8);
    pelab_sb_append(&sb, good + 8, split - 8);
    pelab_sb_append(&sb, " ", 1);
    pelab_sb_append(&sb, good + split, 8 + hl - split);
    while ((sb.len - 8) % 8) pelab_sb_append(&sb, " ", 1);
    for (int i = 0; i < 8; i++) sb.data[i] = (char)((uint64_t)(sb.len - 8) >> (8 * i));
    pelab_sb_append(&sb, good + 8 + hl, size - 8 - hl);
    refused("respaced", sb.data, sb.len, "header checksum pelab.header-crc32 cannot be located");
    pelab_sb_free(&sb);
    free(edited);

    memcpy(good + size - 1, "\x55", 1);
    refused("bad-crc", good, size, "data checksum mismatch");
    free(good);
}

static void test_refusals(void) {
    size_t n;
    char *b;
    refused("empty", "", 0, "file is truncated (0 bytes");
    refused("short", "\x02\0\0\0\0", 5, "file is truncated (5 bytes");
    b = make_file("{}", (uint64_t)1 << 40, 0, &n);
    refused("huge-len", b, n, "header length 1099511627776 is over the 100 MB limit");
    free(b);
    b = make_file("{}", UINT64_MAX, 0, &n);
    refused("max-len", b, n, "over the 100 MB limit");
    free(b);
    b = make_file("{}", 1200, 290, &n);
    refused("long-len", b, n, "file is truncated (8-byte header length says 1200 bytes, file has 300)");
    free(b);
    b = make_file("", 0, 0, &n);
    refused("zero-len", b, n, "header is not valid JSON (JSON: at byte 0: expected a value");
    free(b);
    CHECK(pelab_safetensors_read(tmpdir_path("no-such.safetensors"), &(struct pelab_st_file){0}) ==
          PELAB_ERR_RUNTIME && names_path(tmpdir_path("no-such.safetensors")), "missing file");

    /* Headers with one tensor "a", or "a" and "b": {"a": {"dtype": .., "shape": .., ...}} */
#define T(dt, shape, offs) "{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":" offs "}"
#define A(dt, shape, offs) "{\"a\":" T(dt, shape, offs) "}"
#define AB(a, b) "{\"a\":" a ",\"b\":" b "}"
    refused_header("bad-json", "{\"a\":", 0, "header is not valid JSON (JSON: at byte 5: expected");
    refused_header("trailing-comma", "{\"a\":" T("F32", "[1]", "[0,4]") ",}", 4, "not valid JSON");
    refused_header("not-object", "[1,2]", 0, "header is not a JSON object");
    refused_header("unknown-dtype", A("BF16", "[2]", "[0,4]"), 4, "tensor 'a': unknown dtype 'BF16'");
    refused_header("past-end", "{\"tok_emb.weight\":" T("F32", "[100]", "[0,400]") "}", 392,
                   "tensor 'tok_emb.weight': data_offsets [0, 400] past the end of the data "
                   "(392 bytes)");
    refused_header("overlap", AB(T("F32", "[2]", "[0,8]"), T("F32", "[2]", "[4,12]")), 12,
                   "tensors 'a' and 'b' overlap");
    refused_header("same-place", AB(T("F32", "[2]", "[0,8]"), T("I32", "[2]", "[0,8]")), 8,
                   "overlap");
    refused_header("inside", AB(T("F32", "[2]", "[0,8]"), T("I32", "[0]", "[4,4]")), 8, "overlap");
    refused_header("gap", AB(T("F32", "[2]", "[0,8]"), T("F32", "[2]", "[12,20]")), 20,
                   "bytes [8, 12) of the data belong to no tensor (a gap before 'b')");
    refused_header("leading-gap", A("F32", "[2]", "[4,12]"), 12, "bytes [0, 4) of the data");
    refused_header("tail", A("F32", "[2]", "[0,8]"), 12,
                   "bytes [8, 12) of the data belong to no tensor (after the last one)");
    refused_header("data-no-tensors", "{}", 4, "bytes [0, 4) of the data belong to no tensor");
    refused_header("mismatch", A("F32", "[3]", "[0,8]"), 8,
                   "tensor 'a': shape [3] of F32 is 12 bytes, data_offsets [0, 8] span 8");
    refused_header("mismatch-scalar", A("F64", "[]", "[0,4]"), 4, "shape [] of F64 is 8 bytes");
    refused_header("huge-shape", A("F64", "[4611686018427387904,4611686018427387904,4]", "[0,0]"),
                   0, "impossibly large");
    refused_header("negative-dim", A("F32", "[-1]", "[0,4]"), 4,
                   "shape entry 0 is not a non-negative integer");
    refused_header("float-dim", A("F32", "[1,2.0]", "[0,8]"), 8, "shape entry 1 is not");
    refused_header("exp-dim", A("F32", "[1e0]", "[0,4]"), 4, "shape entry 0 is not");
    refused_header("dim-too-big", A("F32", "[9223372036854775808]", "[0,4]"), 4, "entry 0 is not");
    refused_header("string-dim", A("F32", "[\"1\"]", "[0,4]"), 4, "shape entry 0 is not");
    refused_header("five-dims", A("F32", "[1,1,1,1,1]", "[0,4]"), 4,
                   "5 dimensions (pelab reads at most 4)");
    refused_header("shape-not-array", A("F32", "1", "[0,4]"), 4,
                   "\"shape\" is missing or not an array");
    refused_header("no-shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4,
                   "\"shape\" is missing");
    refused_header("no-dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                   "\"dtype\" is missing or not a string");
    refused_header("dtype-number", "{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                   "\"dtype\" is missing");
    refused_header("no-offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4,
                   "\"data_offsets\" is not [begin, end]");
    refused_header("offsets-three", A("F32", "[1]", "[0,4,4]"), 4,
                   "\"data_offsets\" is not [begin, end]");
    refused_header("offsets-negative", A("F32", "[1]", "[-4,0]"), 4, "\"data_offsets\" is not");
    refused_header("offsets-overflow", A("F32", "[1]", "[0,18446744073709551616]"), 4,
                   "\"data_offsets\" is not");
    refused_header("offsets-reversed", A("F32", "[1]", "[8,4]"), 8,
                   "data_offsets [8, 4] end before they begin");
    refused_header("offsets-far", A("F32", "[1]", "[18446744073709551611,18446744073709551615]"), 4,
                   "past the end of the data (4 bytes)");
    refused_header("duplicate", "{\"a\":" T("F32", "[2]", "[0,8]") ",\"a\":" T("F32", "[2]", "[8,16]")
                   "}", 16, "tensor 'a' appears twice");
    refused_header("entry-not-object", "{\"a\":5}", 0, "tensor 'a': entry is not an object");
    refused_header("meta-not-object", "{\"__metadata__\":[1]}", 0, "__metadata__ is not an object");
    refused_header("meta-not-string", "{\"__metadata__\":{\"k\":1}}", 0,
                   "metadata 'k' is not a string");
    refused_header("meta-twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0,
                   "__metadata__ appears twice");
    refused_header("meta-key-twice", "{\"__metadata__\":{\"step\":\"1\",\"step\":\"9\"}}", 0,
                   "metadata 'step' appears twice");
    refused_header("meta-key-long", "{\"__metadata__\":{\"" "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
                   "\":\"v\"}}", 0, "metadata key 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk' is "
                   "longer than 39 bytes");
#define CRCS(d, h) "{\"__metadata__\":{\"pelab.data-crc32\":\"" d "\",\"pelab.header-crc32\":\"" h "\"}}"
    refused_header("crc-malformed", CRCS("zz", "00000000"), 0, "pelab.data-crc32 'zz' is not 8 hex digits");
    refused_header("crc-0x", CRCS("0x123456", "00000000"), 0, "is not 8 hex digits");
    refused_header("crc-alone", "{\"__metadata__\":{\"pelab.data-crc32\":\"00000000\"}}", 0,
                   "metadata has pelab.data-crc32 but not pelab.header-crc32: the file is damaged");
    refused_header("hcrc-alone", "{\"__metadata__\":{\"pelab.header-crc32\":\"00000000\"}}", 0,
                   "metadata has pelab.header-crc32 but not pelab.data-crc32");
    /* pelab 0.1.0's data checksum alone: still checked. */
    refused_header("old-crc-wrong", "{\"__metadata__\":{\"format\":\"pelab-model\",\"pelab.crc32\":"
                   "\"12345678\"}}", 0, "data checksum mismatch (pelab.crc32 says 12345678");
    refused_header("old-crc-malformed", "{\"__metadata__\":{\"pelab.crc32\":\"1\"}}", 0,
                   "pelab.crc32 '1' is not 8 hex digits");
    refused_header("no-crcs", "{\"__metadata__\":{\"format\":\"pelab-model\"}}", 0,
                   "a pelab-model file without the checksums");
    refused_header("hcrc-malformed", CRCS("00000000", "1234567"), 0,
                   "pelab.header-crc32 '1234567' is not 8 hex digits");
    refused_header("hcrc-wrong", CRCS("00000000", "12345678"), 0, "header checksum mismatch");
    refused_header("hcrc-twice", "{\"__metadata__\":{\"pelab.data-crc32\":\"00000000\",\"pelab.header-crc32\":"
                   "\"12345678\",\"x\":\"\",\"pelab.header-crc32\":\"12345678\"}}", 0, "metadata 'pelab.header-crc32' appears twice");
#undef CRCS
#undef AB
#undef A
#undef T

    char hdr[1400], name[201];
    memset(name, 'n', 200);
    name[200] = '\0';
    snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", name);
    refused_header("name-long", hdr, 4, "is longer than 127 bytes");
    char val[1101];
    memset(val, 'v', 1100);
    val[1100] = '\0';
    snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"key\":\"%s\"}}", val);
    refused_header("meta-value-long", hdr, 0, "metadata 'key': value is longer than 1023 bytes");
    /* PELAB_OPTS_MAX metadata entries read (a checkpoint holds every setting of a run and its own
     * counters, 83 for SeqPE's); one more is refused. */
    struct pelab_sb sb = {0};
    pelab_sb_append(&sb, "{\"__metadata__\":{", 17);
    for (int i = 0; i < PELAB_OPTS_MAX; i++) pelab_sb_printf(&sb, "%s\"k%d\":\"v\"", i ? "," : "", i);
    pelab_sb_append(&sb, "}}", 2);
    accepted_header("meta-most", sb.data, 0, 0);
    sb.len -= 2;
    pelab_sb_printf(&sb, ",\"k%d\":\"v\"}}", PELAB_OPTS_MAX);
    char want[64];
    snprintf(want, sizeof want, "more than %d entries", PELAB_OPTS_MAX);
    refused_header("meta-too-many", sb.data, 0, want);
    pelab_sb_free(&sb);
}

int main(void) {
    if (!tmpdir_create("pelab-test")) return 1;
    test_round_trip();
    test_foreign();
    test_params();
    test_truncation_and_flips();
    test_refusals();
    tmpdir_remove();
    return check_report("test_safetensors");
}
