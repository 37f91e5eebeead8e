/* IDX files (pelab/idx.h): the header checked field by field against the file's size, so that a
 * damaged file is named with what is wrong rather than read past its end. */
#include <stdlib.h>
#include <string.h>
#include "pelab/idx.h"
#include "pelab/io.h"
#include "pelab/status.h"

const char *pelab_idx_type_name(int type) {
    switch (type) {
    case PELAB_IDX_U8: return "u8";
    case PELAB_IDX_I8: return "i8";
    case PELAB_IDX_I16: return "i16";
    case PELAB_IDX_I32: return "i32";
    case PELAB_IDX_F32: return "f32";
    case PELAB_IDX_F64: return "f64";
    default: return NULL;
    }
}

static size_t type_size(int type) {
    return type == PELAB_IDX_I16 ? 2 : type == PELAB_IDX_I32 || type == PELAB_IDX_F32 ? 4 : type == PELAB_IDX_F64 ? 8 : 1;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* "60000x28x28" */
static void dims_text(char *buf, size_t size, const struct pelab_idx *x) {
    buf[0] = '\0';
    for (int i = 0; i < x->rank; i++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%u", i ? "x" : "", (unsigned)x->dims[i]);
}

static int parse(struct pelab_idx *x, unsigned char *b, size_t size, const char *name, int type, int rank) {
    if (size < 4) return pelab_fail(PELAB_ERR_RUNTIME, "%s: truncated: %zu bytes, not even an IDX header", name, size);
    if (b[0] || b[1] || !pelab_idx_type_name(b[2]))
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: not an IDX file (magic %02x %02x %02x %02x: expected 00 00, "
                          "a type 08/09/0b/0c/0d/0e, the rank)", name, b[0], b[1], b[2], b[3]);
    x->type = b[2];
    x->rank = b[3];
    x->elem_size = type_size(x->type);
    if (type && x->type != type)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: elements of type %s, expected %s", name,
                          pelab_idx_type_name(x->type), pelab_idx_type_name(type));
    if (rank && x->rank != rank) return pelab_fail(PELAB_ERR_RUNTIME, "%s: rank %d, expected %d", name, x->rank, rank);
    if (x->rank < 1 || x->rank > PELAB_IDX_MAX_RANK)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: rank %d, expected 1 to %d", name, x->rank, PELAB_IDX_MAX_RANK);
    size_t header = 4 + 4 * (size_t)x->rank;
    if (size < header)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: truncated: %zu bytes, the header of rank %d needs %zu", name,
                          size, x->rank, header);
    /* count·size + header must not overflow (a garbled dimension can be up to 2^32 - 1) */
    uint64_t count = 1, limit = (UINT64_MAX - header) / x->elem_size;
    int overflow = 0;
    for (int i = 0; i < x->rank; i++) {
        x->dims[i] = be32(b + 4 + 4 * i);
        if (x->dims[i] && count > limit / x->dims[i]) overflow = 1;
        else count *= x->dims[i];
    }
    char dims[PELAB_IDX_MAX_RANK * 12];
    dims_text(dims, sizeof dims, x);
    if (overflow)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: truncated: the header says %s %s, more than 2^64 bytes; "
                          "the file has %zu", name, dims, pelab_idx_type_name(x->type), size);
    const uint64_t need = header + count * x->elem_size;
    if (size < need)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: truncated: the header says %s %s (%llu bytes with the header), "
                          "the file has %zu", name, dims, pelab_idx_type_name(x->type),
                          (unsigned long long)need, size);
    if (size > need)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: %llu bytes after the data: the header says %s %s (%llu bytes "
                          "with the header), the file has %zu", name, (unsigned long long)(size - need), dims,
                          pelab_idx_type_name(x->type), (unsigned long long)need, size);
    x->count = count;
    /* the data moved to the start of the buffer, so that an f64 element is aligned */
    size_t n = (size_t)count * x->elem_size;
    memmove(b, b + header, n);
    if (x->elem_size > 1)
        for (size_t i = 0; i < n; i += x->elem_size)
            for (size_t k = 0; k < x->elem_size / 2; k++) {
                unsigned char t = b[i + k];
                b[i + k] = b[i + x->elem_size - 1 - k];
                b[i + x->elem_size - 1 - k] = t;
            }
    x->data = b;
    return PELAB_OK;
}

int pelab_idx_parse(struct pelab_idx *x, char *buf, size_t size, const char *name, int type, int rank) {
    memset(x, 0, sizeof *x);
    int rc = parse(x, (unsigned char *)buf, size, name, type, rank);
    if (rc) {
        free(buf);
        memset(x, 0, sizeof *x);
    }
    return rc;
}

int pelab_idx_read(struct pelab_idx *x, const char *path, int type, int rank) {
    memset(x, 0, sizeof *x);
    char *buf;
    size_t size;
    int rc = pelab_read_regular_file(path, &buf, &size);
    return rc ? rc : pelab_idx_parse(x, buf, size, path, type, rank);
}

void pelab_idx_free(struct pelab_idx *x) {
    free(x->data);
    memset(x, 0, sizeof *x);
}
