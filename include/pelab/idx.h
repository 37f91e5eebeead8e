/* pelab/idx.h — IDX files, the format of MNIST and Fashion-MNIST (LeCun et al.): a big-endian
 * header, then the elements in row-major order, big-endian.
 *
 *     bytes 0-1   0x00 0x00
 *     byte  2     element type: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64
 *     byte  3     rank r (number of dimensions)
 *     r × u32     the dimensions, first (slowest) first
 *     data        d0·d1·…·d(r-1) elements
 *
 * A file is read whole and must be exactly 4 + 4r + count·size bytes: a short file is
 * "truncated", a longer one has bytes the header does not describe; either is an error naming the
 * file, as is a bad magic, an unknown type, or a type or rank other than the caller expects.
 */
#ifndef PELAB_IDX_H
#define PELAB_IDX_H

#include <stddef.h>
#include <stdint.h>

enum pelab_idx_type {
    PELAB_IDX_U8 = 0x08,
    PELAB_IDX_I8 = 0x09,
    PELAB_IDX_I16 = 0x0B,
    PELAB_IDX_I32 = 0x0C,
    PELAB_IDX_F32 = 0x0D,
    PELAB_IDX_F64 = 0x0E
};

#define PELAB_IDX_MAX_RANK 8

struct pelab_idx {
    int type;                         /* enum pelab_idx_type */
    int rank;                         /* 1..PELAB_IDX_MAX_RANK */
    uint32_t dims[PELAB_IDX_MAX_RANK];
    uint64_t count;                   /* elements: the product of the dimensions */
    size_t elem_size;                 /* bytes per element: 1, 2, 4 or 8 */
    void *data;                       /* count elements, row-major, host byte order, malloc'ed */
};

/* Parses an IDX file held in buf[0..size-1], taking ownership of buf (malloc'ed; freed on failure
 * too; on success x->data lives in it). type and rank: what the caller expects (0: any); name:
 * the file, for messages ("PATH: truncated: ..."). PELAB_ERR_RUNTIME on any fault. */
int pelab_idx_parse(struct pelab_idx *x, char *buf, size_t size, const char *name, int type, int rank);

/* Reads and parses the file at path (pelab_idx_parse). */
int pelab_idx_read(struct pelab_idx *x, const char *path, int type, int rank);

void pelab_idx_free(struct pelab_idx *x);

/* "u8", "i8", "i16", "i32", "f32", "f64", or NULL for a byte that is no IDX type. */
const char *pelab_idx_type_name(int type);

#endif
