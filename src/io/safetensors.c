/* safetensors files: a validating reader, an atomic writer, and the parameter table on top.
 *
 * Layout (https://github.com/huggingface/safetensors):
 *   bytes [0, 8)        N, the header length, unsigned 64-bit little-endian
 *   bytes [8, 8+N)      JSON header, padded with spaces so the data starts 8-byte aligned:
 *                       {"__metadata__": {str: str},
 *                        name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}}
 *   bytes [8+N, size)   the data section; offsets are relative to its start
 * The reader applies the reference implementation's rules (tensors tile the data section with
 * neither gaps nor overlaps) plus pelab's own checksums (CRC_KEY, HCRC_KEY). Tensor data inside
 * the file buffer may be misaligned, so values are read with memcpy, never by dereference.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"

/* Tensor bytes are copied verbatim between memory and file: the host must be little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pelab's safetensors code assumes a little-endian host"
#endif

#define HEADER_MAX ((uint64_t)100 * 1000 * 1000) /* as the reference: larger is not a header */
#define CRC_KEY "pelab.data-crc32"
#define HCRC_KEY "pelab.header-crc32"
#define OLD_CRC_KEY "pelab.crc32" /* pelab 0.1.0: the data section only, still read */
#define HCRC_PATTERN "\"" HCRC_KEY "\":\"" /* as the writer spells it: "pelab.header-crc32":" */
#define META_KEY "__metadata__"
#define MAX_DIM 4

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [PELAB_DT_F32] = {"F32", 4},
    [PELAB_DT_F64] = {"F64", 8},
    [PELAB_DT_I32] = {"I32", 4},
    [PELAB_DT_I64] = {"I64", 8},
};
#define NDTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

/* Fails with "PATH: message" (every reader and writer error names the file). */
static int st_fail(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int st_fail(const char *path, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pelab_fail(PELAB_ERR_RUNTIME, "%s: %s", path, msg);
}

/* Bytes of a tensor of this shape, or 0 with *ok = 0 when that overflows size_t. An empty
 * shape is a scalar (one element). */
static size_t shape_bytes(const int64_t *shape, int ndim, size_t esize, int *ok) {
    size_t n = esize;
    *ok = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) return 0;
    for (int i = 0; i < ndim; i++) {
        if ((uint64_t)shape[i] > SIZE_MAX / n) {
            *ok = 0;
            return 0;
        }
        n *= (size_t)shape[i];
    }
    return n;
}

/* "[3, 4]" into buf. */
static const char *shape_str(char *buf, size_t cap, const int64_t *shape, int ndim) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}

static int by_name(const void *a, const void *b) {
    const struct pelab_tensor *x = *(const struct pelab_tensor *const *)a;
    const struct pelab_tensor *y = *(const struct pelab_tensor *const *)b;
    return strcmp(x->name, y->name);
}

/* Pointers to the n tensors, sorted with cmp; NULL when out of memory. */
static const struct pelab_tensor **sorted(const struct pelab_tensor *t, int n,
                                          int (*cmp)(const void *, const void *)) {
    const struct pelab_tensor **p = malloc((n > 0 ? (size_t)n : 1) * sizeof *p);
    if (!p) return NULL;
    for (int i = 0; i < n; i++) p[i] = &t[i];
    qsort(p, (size_t)n, sizeof *p, cmp);
    return p;
}

/* Name of a tensor whose name occurs twice in the sorted list, or NULL. */
static const char *duplicate_name(const struct pelab_tensor **s, int n) {
    for (int i = 1; i < n; i++)
        if (strcmp(s[i - 1]->name, s[i]->name) == 0) return s[i]->name;
    return NULL;
}

/* ---- writing --------------------------------------------------------------------------------- */

/* A caller handing over an inconsistent tensor is a programmer error. */
static void assert_valid(const struct pelab_tensor *t) {
    PELAB_ASSERT(memchr(t->name, '\0', sizeof t->name) != NULL);
    PELAB_ASSERT((int)t->dtype >= 0 && (int)t->dtype < NDTYPES);
    PELAB_ASSERT(t->ndim >= 0 && t->ndim <= MAX_DIM);
    for (int d = 0; d < t->ndim; d++) PELAB_ASSERT(t->shape[d] >= 0);
    int ok;
    PELAB_ASSERT(shape_bytes(t->shape, t->ndim, dtypes[t->dtype].size, &ok) == t->nbytes && ok);
    PELAB_ASSERT(t->data != NULL || t->nbytes == 0);
}

/* The metadata object. The header checksum's 8 digits are written as zeros and filled in once
 * the whole header is known; returns their offset in sb. */
static size_t header_metadata(struct pelab_sb *sb, const struct pelab_opts *metadata,
                              uint32_t crc) {
    pelab_sb_json_string(sb, META_KEY);
    pelab_sb_append(sb, ":{", 2);
    for (int i = 0; metadata && i < metadata->count; i++) {
        const char *key = metadata->kv[i].key;
        if (!strcmp(key, CRC_KEY) || !strcmp(key, HCRC_KEY) || !strcmp(key, OLD_CRC_KEY))
            continue; /* ours, below */
        pelab_sb_json_string(sb, key);
        pelab_sb_append(sb, ":", 1);
        pelab_sb_json_string(sb, metadata->kv[i].val);
        pelab_sb_append(sb, ",", 1);
    }
    pelab_sb_json_string(sb, CRC_KEY);
    pelab_sb_printf(sb, ":\"%08x\",", (unsigned)crc);
    pelab_sb_append(sb, HCRC_PATTERN, strlen(HCRC_PATTERN));
    size_t at = sb->len;
    pelab_sb_append(sb, "00000000\"}", 10);
    return at;
}

/* CRC-32 of the 8-byte length and the header, with the header checksum's own 8 digits (at
 * `at`) counted as '0's: the value that goes there. */
static uint32_t header_crc(const char *header, size_t len, size_t at) {
    unsigned char n[8];
    for (int i = 0; i < 8; i++) n[i] = (unsigned char)((uint64_t)len >> (8 * i));
    uint32_t crc = pelab_crc32(0, n, 8);
    crc = pelab_crc32(crc, header, at);
    crc = pelab_crc32(crc, "00000000", 8);
    return pelab_crc32(crc, header + at + 8, len - at - 8);
}

/* The header JSON, padded with spaces to a multiple of 8 bytes, its checksum filled in. */
static void header_json(struct pelab_sb *sb, const struct pelab_tensor *t, int n,
                        const struct pelab_opts *metadata, uint32_t crc) {
    pelab_sb_append(sb, "{", 1);
    size_t at = header_metadata(sb, metadata, crc);
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        pelab_sb_append(sb, ",", 1);
        pelab_sb_json_string(sb, t[i].name);
        pelab_sb_printf(sb, ":{\"dtype\":\"%s\",\"shape\":[", dtypes[t[i].dtype].name);
        for (int d = 0; d < t[i].ndim; d++)
            pelab_sb_printf(sb, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        pelab_sb_printf(sb, "],\"data_offsets\":[%zu,%zu]}", offset, offset + t[i].nbytes);
        offset += t[i].nbytes;
    }
    pelab_sb_append(sb, "}", 1);
    while (sb->len % 8) pelab_sb_append(sb, " ", 1);
    char digits[9];
    snprintf(digits, sizeof digits, "%08x", (unsigned)header_crc(sb->data, sb->len, at));
    memcpy(sb->data + at, digits, 8);
}

/* Length prefix, header, then each tensor's bytes, into the open temporary file. */
static int write_body(FILE *out, const struct pelab_sb *header, const struct pelab_tensor *t,
                      int n) {
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)header->len >> (8 * i));
    if (fwrite(len, 1, 8, out) != 8) return 0;
    if (fwrite(header->data, 1, header->len, out) != header->len) return 0;
    for (int i = 0; i < n; i++)
        if (t[i].nbytes && fwrite(t[i].data, 1, t[i].nbytes, out) != t[i].nbytes) return 0;
    return 1;
}

int pelab_safetensors_write(const char *path, const struct pelab_tensor *tensors, int n,
                            const struct pelab_opts *metadata) {
    PELAB_ASSERT(n >= 0);
    uint32_t crc = 0;
    for (int i = 0; i < n; i++) {
        assert_valid(&tensors[i]);
        if (tensors[i].nbytes) crc = pelab_crc32(crc, tensors[i].data, tensors[i].nbytes);
    }
    const struct pelab_tensor **s = sorted(tensors, n, by_name);
    if (!s) return st_fail(path, "out of memory");
    PELAB_ASSERT(duplicate_name(s, n) == NULL);
    free(s);

    struct pelab_sb header = {0};
    header_json(&header, tensors, n, metadata, crc);
    struct pelab_atomic_file af;
    int rc = pelab_atomic_open(&af, path);
    if (rc == PELAB_OK && !write_body(af.f, &header, tensors, n)) {
        pelab_atomic_abort(&af);
        rc = st_fail(path, "cannot write (disk full?)");
    } else if (rc == PELAB_OK) {
        rc = pelab_atomic_commit(&af);
    }
    pelab_sb_free(&header);
    return rc;
}

/* ---- reading: one header entry --------------------------------------------------------------- */

/* A JSON number written as plain digits (no sign, fraction or exponent), at most `max`. */
static int json_uint(const struct pelab_json *j, uint64_t max, uint64_t *out) {
    if (!j || j->type != PELAB_JSON_NUMBER || j->raw_len == 0) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < j->raw_len; i++) {
        unsigned d = (unsigned)(j->raw[i] - '0');
        if (d > 9 || v > (max - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

static int read_dtype(const char *path, const char *name, const struct pelab_json *j,
                      enum pelab_dtype *dt) {
    if (!j || j->type != PELAB_JSON_STRING)
        return st_fail(path, "tensor '%s': \"dtype\" is missing or not a string", name);
    for (int i = 0; i < NDTYPES; i++)
        if (strcmp(j->string, dtypes[i].name) == 0) {
            *dt = (enum pelab_dtype)i;
            return PELAB_OK;
        }
    return st_fail(path, "tensor '%s': unknown dtype '%.32s' (pelab reads F32, F64, I32, I64)",
                   name, j->string);
}

static int read_shape(const char *path, struct pelab_tensor *t, const struct pelab_json *j) {
    if (!j || j->type != PELAB_JSON_ARRAY)
        return st_fail(path, "tensor '%s': \"shape\" is missing or not an array", t->name);
    if (j->count > MAX_DIM)
        return st_fail(path, "tensor '%s': %d dimensions (pelab reads at most %d)", t->name,
                       j->count, MAX_DIM);
    for (int d = 0; d < j->count; d++) {
        uint64_t v;
        if (!json_uint(j->items[d], INT64_MAX, &v))
            return st_fail(path, "tensor '%s': shape entry %d is not a non-negative integer",
                           t->name, d);
        t->shape[d] = (int64_t)v;
    }
    t->ndim = j->count;
    return PELAB_OK;
}

/* data_offsets [begin, end] inside a data section of `data_size` bytes. */
static int read_offsets(const char *path, const char *name, const struct pelab_json *j,
                        size_t data_size, size_t *begin, size_t *end) {
    uint64_t b, e;
    if (!j || j->type != PELAB_JSON_ARRAY || j->count != 2 ||
        !json_uint(j->items[0], UINT64_MAX, &b) || !json_uint(j->items[1], UINT64_MAX, &e))
        return st_fail(path, "tensor '%s': \"data_offsets\" is not [begin, end] (two "
                       "non-negative integers)", name);
    if (b > e)
        return st_fail(path, "tensor '%s': data_offsets [%llu, %llu] end before they begin", name,
                       (unsigned long long)b, (unsigned long long)e);
    if (e > data_size)
        return st_fail(path, "tensor '%s': data_offsets [%llu, %llu] past the end of the data "
                       "(%zu bytes)", name, (unsigned long long)b, (unsigned long long)e,
                       data_size);
    *begin = (size_t)b;
    *end = (size_t)e;
    return PELAB_OK;
}

/* One header entry `name` → {"dtype", "shape", "data_offsets"} into *t. */
static int read_tensor(const char *path, const char *name, const struct pelab_json *j,
                       const char *data, size_t data_size, struct pelab_tensor *t) {
    if (strlen(name) >= sizeof t->name)
        return st_fail(path, "tensor name '%.60s...' is longer than %zu bytes", name,
                       sizeof t->name - 1);
    strcpy(t->name, name);
    if (j->type != PELAB_JSON_OBJECT)
        return st_fail(path, "tensor '%s': entry is not an object", name);
    size_t begin = 0, end = 0;
    int rc = read_dtype(path, name, pelab_json_get(j, "dtype"), &t->dtype);
    if (!rc) rc = read_shape(path, t, pelab_json_get(j, "shape"));
    if (!rc)
        rc = read_offsets(path, name, pelab_json_get(j, "data_offsets"), data_size, &begin, &end);
    if (rc) return rc;
    int ok;
    size_t need = shape_bytes(t->shape, t->ndim, dtypes[t->dtype].size, &ok);
    if (!ok || need != end - begin) {
        char shape[128];
        shape_str(shape, sizeof shape, t->shape, t->ndim);
        const char *dt = dtypes[t->dtype].name;
        if (!ok)
            return st_fail(path, "tensor '%s': shape %s of %s is impossibly large", name, shape,
                           dt);
        return st_fail(path, "tensor '%s': shape %s of %s is %zu bytes, data_offsets [%zu, %zu] "
                       "span %zu", name, shape, dt, need, begin, end, end - begin);
    }
    t->data = data + begin;
    t->nbytes = end - begin;
    return PELAB_OK;
}

/* __metadata__: an object of strings, kept in f->metadata. */
static int read_metadata(const char *path, const struct pelab_json *j, struct pelab_opts *meta) {
    if (j->type != PELAB_JSON_OBJECT)
        return st_fail(path, "__metadata__ is not an object");
    for (int i = 0; i < j->count; i++) {
        const char *key = j->keys[i];
        const struct pelab_json *v = j->items[i];
        if (strlen(key) >= PELAB_OPT_KEY_MAX)
            return st_fail(path, "metadata key '%.60s' is longer than %d bytes", key,
                           PELAB_OPT_KEY_MAX - 1);
        if (v->type != PELAB_JSON_STRING)
            return st_fail(path, "metadata '%s' is not a string", key);
        if (strlen(v->string) >= PELAB_OPT_VAL_MAX)
            return st_fail(path, "metadata '%s': value is longer than %d bytes", key,
                           PELAB_OPT_VAL_MAX - 1);
        /* A second value would silently replace the first (the one the checksum may cover). */
        if (pelab_opts_get(meta, key))
            return st_fail(path, "metadata '%s' appears twice", key);
        if (pelab_opts_set(meta, key, v->string))
            return st_fail(path, "metadata '%s': more than %d entries", key, PELAB_OPTS_MAX);
    }
    return PELAB_OK;
}

/* ---- reading: the whole file ----------------------------------------------------------------- */

/* Every entry of the header object into f->tensors / f->metadata. */
static int read_entries(const char *path, const struct pelab_json *root, const char *data,
                        size_t data_size, struct pelab_st_file *f) {
    if (root->type != PELAB_JSON_OBJECT)
        return st_fail(path, "header is not a JSON object");
    f->tensors = calloc((size_t)(root->count ? root->count : 1), sizeof *f->tensors);
    if (!f->tensors) return st_fail(path, "out of memory");
    int seen_meta = 0;
    for (int i = 0; i < root->count; i++) {
        int rc;
        if (strcmp(root->keys[i], META_KEY) == 0) {
            if (seen_meta++) return st_fail(path, "__metadata__ appears twice");
            rc = read_metadata(path, root->items[i], &f->metadata);
        } else {
            rc = read_tensor(path, root->keys[i], root->items[i], data, data_size,
                             &f->tensors[f->count++]);
        }
        if (rc) return rc;
    }
    return PELAB_OK;
}

static int by_offset(const void *a, const void *b) {
    const struct pelab_tensor *x = *(const struct pelab_tensor *const *)a;
    const struct pelab_tensor *y = *(const struct pelab_tensor *const *)b;
    const char *xe = (const char *)x->data + x->nbytes, *ye = (const char *)y->data + y->nbytes;
    if (x->data != y->data) return (const char *)x->data < (const char *)y->data ? -1 : 1;
    return xe < ye ? -1 : xe > ye;
}

/* Tensors sorted by offset must tile [0, data_size): each begins where the previous ends. */
static int check_tiling(const char *path, const struct pelab_tensor **s, int n, const char *data,
                        size_t data_size) {
    size_t at = 0; /* where the next tensor must begin */
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)((const char *)s[i]->data - data), e = b + s[i]->nbytes;
        if (b < at)
            return st_fail(path, "tensors '%s' and '%s' overlap (bytes [%zu, %zu) of the data)",
                           s[i - 1]->name, s[i]->name, b, at < e ? at : e);
        if (b > at)
            return st_fail(path, "bytes [%zu, %zu) of the data belong to no tensor (a gap before "
                           "'%s')", at, b, s[i]->name);
        at = e;
    }
    if (at != data_size)
        return st_fail(path, "bytes [%zu, %zu) of the data belong to no tensor (after the last "
                       "one)", at, data_size);
    return PELAB_OK;
}

/* No duplicate names, and tensors tile the data section. */
static int check_layout(const char *path, const struct pelab_st_file *f, const char *data,
                        size_t data_size) {
    const struct pelab_tensor **s = sorted(f->tensors, f->count, by_name);
    if (!s) return st_fail(path, "out of memory");
    const char *dup = duplicate_name(s, f->count);
    int rc = dup ? st_fail(path, "tensor '%s' appears twice", dup) : PELAB_OK;
    if (!rc) {
        qsort(s, (size_t)f->count, sizeof *s, by_offset);
        rc = check_tiling(path, s, f->count, data, data_size);
    }
    free(s);
    return rc;
}

/* A metadata checksum value: 8 hex digits. */
static int crc_value(const char *path, const char *key, const char *v, uint32_t *crc) {
    int hex = strlen(v) == 8;
    for (int i = 0; hex && i < 8; i++) hex = isxdigit((unsigned char)v[i]) != 0;
    if (!hex) return st_fail(path, "metadata %s '%s' is not 8 hex digits", key, v);
    *crc = (uint32_t)strtoul(v, NULL, 16);
    return PELAB_OK;
}

/* The data checksum, when present (CRC_KEY, or OLD_CRC_KEY in a file of pelab 0.1.0): the
 * CRC-32 of the data section. */
static int check_crc(const char *path, const struct pelab_opts *meta, const char *data, size_t n) {
    const char *key = pelab_opts_get(meta, CRC_KEY) ? CRC_KEY : OLD_CRC_KEY;
    const char *want = pelab_opts_get(meta, key);
    if (!want) return PELAB_OK;
    uint32_t crc = 0;
    int rc = crc_value(path, key, want, &crc);
    if (rc) return rc;
    uint32_t got = pelab_crc32(0, data, n);
    if (crc != got)
        return st_fail(path, "data checksum mismatch (%s says %s, the data has %08x): the file "
                       "is corrupt", key, want, (unsigned)got);
    return PELAB_OK;
}

/* "pelab.header-crc32", when present: the CRC-32 of the length and the header (header_crc).
 * Its digits are found where pelab's writer puts them; a header that another tool rewrote no
 * longer has them there, and is refused like any other edit the checksum does not cover. */
static int check_header_crc(const char *path, const struct pelab_opts *meta, const char *header,
                            size_t len) {
    const char *want = pelab_opts_get(meta, HCRC_KEY);
    if (!want) return PELAB_OK;
    uint32_t crc = 0;
    int rc = crc_value(path, HCRC_KEY, want, &crc);
    if (rc) return rc;
    size_t plen = strlen(HCRC_PATTERN), at = 0;
    int found = 0;
    for (size_t i = 0; i + plen + 8 <= len; i++)
        if (header[i] == '"' && memcmp(header + i, HCRC_PATTERN, plen) == 0) {
            found++;
            at = i + plen;
        }
    if (found != 1)
        return st_fail(path, "header checksum %s cannot be located (the header was rewritten by "
                       "another tool?)", HCRC_KEY);
    uint32_t got = header_crc(header, len, at);
    if (crc != got)
        return st_fail(path, "header checksum mismatch (%s says %s, the header has %08x): the "
                       "file is corrupt", HCRC_KEY, want, (unsigned)got);
    return PELAB_OK;
}

/* pelab_safetensors_accept_edited: the user's consent (--edited) for the files the process loads,
 * given once by the command that loads them, before it opens any. */
static int accept_edited;

void pelab_safetensors_accept_edited(int on) { accept_edited = on; }

/* pelab writes both checksums, so one without the other is damage (a flipped key would
 * disable its own check otherwise); a pelab format ("format" pelab-...) needs them, or, from
 * pelab 0.1.0, the data checksum under its old name (whose flipped key leaves no checksum: a
 * pelab file without any is refused). */
static int check_crc_pair(const char *path, const struct pelab_opts *meta) {
    int data = pelab_opts_get(meta, CRC_KEY) != NULL;
    int header = pelab_opts_get(meta, HCRC_KEY) != NULL;
    const char *format = pelab_opts_get(meta, "format");
    uint32_t crc;
    if (data && header) {
        int rc = crc_value(path, CRC_KEY, pelab_opts_get(meta, CRC_KEY), &crc);
        return rc ? rc : crc_value(path, HCRC_KEY, pelab_opts_get(meta, HCRC_KEY), &crc);
    }
    if (data || header)
        return st_fail(path, "metadata has %s but not %s: the file is damaged",
                       data ? CRC_KEY : HCRC_KEY, data ? HCRC_KEY : CRC_KEY);
    if (format && strncmp(format, "pelab-", 6) == 0 && !pelab_opts_get(meta, OLD_CRC_KEY) &&
        !accept_edited)
        return st_fail(path, "a %s file without the checksums %s and %s (damaged, or written by "
                       "another tool; a file edited on purpose loads with --edited)", format,
                       CRC_KEY, HCRC_KEY);
    return PELAB_OK;
}

/* The 8-byte length, the header within the file, then entries, layout and checksum. */
static int parse_file(const char *path, struct pelab_st_file *f) {
    if (f->size < 8)
        return st_fail(path, "file is truncated (%zu bytes; a safetensors file starts with an "
                       "8-byte header length)", f->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | (unsigned char)f->buf[i];
    if (n > HEADER_MAX)
        return st_fail(path, "header length %llu is over the 100 MB limit (not a safetensors "
                       "file?)", (unsigned long long)n);
    if (n > f->size - 8)
        return st_fail(path, "file is truncated (8-byte header length says %llu bytes, file has "
                       "%zu)", (unsigned long long)n, f->size);
    struct pelab_json *root;
    if (pelab_json_parse(f->buf + 8, (size_t)n, &root)) /* st_fail copies the message first */
        return st_fail(path, "header is not valid JSON (%s)", pelab_last_error());
    const char *data = f->buf + 8 + n;
    size_t data_size = f->size - 8 - (size_t)n;
    int rc = read_entries(path, root, data, data_size, f);
    pelab_json_free(root);
    if (!rc) rc = check_layout(path, f, data, data_size);
    if (!rc) rc = check_crc_pair(path, &f->metadata);
    if (!rc) rc = check_header_crc(path, &f->metadata, f->buf + 8, (size_t)n);
    if (!rc) rc = check_crc(path, &f->metadata, data, data_size);
    return rc;
}

int pelab_safetensors_read(const char *path, struct pelab_st_file *f) {
    memset(f, 0, sizeof *f);
    int rc = pelab_read_file(path, &f->buf, &f->size);
    if (!rc) rc = parse_file(path, f);
    if (rc) pelab_st_file_free(f);
    return rc;
}

int pelab_safetensors_parse(const char *name, const void *bytes, size_t size,
                            struct pelab_st_file *f) {
    memset(f, 0, sizeof *f);
    f->buf = malloc(size + 1);
    if (!f->buf) return st_fail(name, "out of memory");
    if (size) memcpy(f->buf, bytes, size);
    f->buf[size] = '\0';
    f->size = size;
    int rc = parse_file(name, f);
    if (rc) pelab_st_file_free(f);
    return rc;
}

void pelab_st_file_free(struct pelab_st_file *f) {
    free(f->buf);
    free(f->tensors);
    memset(f, 0, sizeof *f);
}

const struct pelab_tensor *pelab_st_find(const struct pelab_st_file *f, const char *name) {
    for (int i = 0; i < f->count; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

/* ---- the parameter table --------------------------------------------------------------------- */

int pelab_params_save(const char *path, const struct pelab_params *p,
                      const struct pelab_opts *metadata) {
    struct pelab_tensor *t = calloc((size_t)(p->count ? p->count : 1), sizeof *t);
    if (!t) return st_fail(path, "out of memory");
    for (int i = 0; i < p->count; i++) {
        const struct pelab_param *q = &p->list[i];
        strcpy(t[i].name, q->name); /* PELAB_PARAM_NAME_MAX < sizeof t->name */
        t[i].dtype = sizeof(pelab_real) == 8 ? PELAB_DT_F64 : PELAB_DT_F32;
        t[i].ndim = q->ndim;
        memcpy(t[i].shape, q->shape, sizeof q->shape);
        t[i].data = pelab_params_data(p, i);
        t[i].nbytes = q->size * sizeof(pelab_real);
    }
    int rc = pelab_safetensors_write(path, t, p->count, metadata);
    free(t);
    return rc;
}

/* The tensor matching parameter q (present, same shape, a float dtype), or NULL with the error. */
static const struct pelab_tensor *match_param(const struct pelab_st_file *f,
                                              const struct pelab_param *q, const char *path) {
    const struct pelab_tensor *t = pelab_st_find(f, q->name);
    if (!t) {
        st_fail(path, "tensor '%s' is missing", q->name);
        return NULL;
    }
    if (t->ndim != q->ndim || memcmp(t->shape, q->shape, (size_t)q->ndim * sizeof *q->shape)) {
        char got[128], want[128];
        st_fail(path, "tensor '%s' has shape %s, the model expects %s", q->name,
                shape_str(got, sizeof got, t->shape, t->ndim),
                shape_str(want, sizeof want, q->shape, q->ndim));
        return NULL;
    }
    if (t->dtype != PELAB_DT_F32 && t->dtype != PELAB_DT_F64) {
        st_fail(path, "tensor '%s' has dtype %s; parameters must be F32 or F64", q->name,
                dtypes[t->dtype].name);
        return NULL;
    }
    return t;
}

double pelab_tensor_element(const struct pelab_tensor *t, size_t i) {
    const char *src = t->data;
    if (t->dtype == PELAB_DT_F32) {
        float x;
        memcpy(&x, src + 4 * i, 4);
        return x;
    }
    double x;
    memcpy(&x, src + 8 * i, 8);
    return x;
}

void pelab_tensor_copy(pelab_real *dst, const struct pelab_tensor *t, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (pelab_real)pelab_tensor_element(t, i);
}

/* Weights are finite: a NaN or an infinity would only surface later, as garbage. */
static int check_finite(const struct pelab_tensor *t, size_t n, const char *path) {
    for (size_t i = 0; i < n; i++) {
        double x = pelab_tensor_element(t, i);
        if (!isfinite(x))
            return st_fail(path, "tensor '%s' holds %g at element %zu", t->name,
                           pelab_printable(x), i);
    }
    return PELAB_OK;
}

/* Checks everything before copying anything, so a refused file leaves the table as it was. */
int pelab_params_load(const struct pelab_st_file *f, const struct pelab_params *p,
                      const char *path) {
    PELAB_ASSERT(p->data != NULL || p->count == 0);
    for (int i = 0; i < p->count; i++) {
        const struct pelab_tensor *t = match_param(f, &p->list[i], path);
        if (!t || check_finite(t, p->list[i].size, path)) return PELAB_ERR_RUNTIME;
    }
    for (int i = 0; i < f->count; i++)
        if (pelab_params_find(p, f->tensors[i].name) < 0)
            return st_fail(path, "unexpected tensor '%s' (not a parameter of this model)",
                           f->tensors[i].name);
    for (int i = 0; i < p->count; i++)
        pelab_tensor_copy(pelab_params_data(p, i), match_param(f, &p->list[i], path), p->list[i].size);
    return PELAB_OK;
}
