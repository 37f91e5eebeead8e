/* pelab/safetensors.h — the safetensors format: 8-byte little-endian header length N, N bytes of
 * JSON {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}},
 * then the data. PyTorch (safetensors.torch) and other tools load these files unchanged.
 *
 * pelab adds metadata keys of its own: "format" (what the file holds, e.g. "pelab-model"),
 * "pelab.data-crc32" (CRC-32 of the data section, hex) and "pelab.header-crc32" (CRC-32 of the
 * length and the header, its own 8 digits counted as '0'), both checked on load, so every byte
 * of a file pelab wrote is covered. Files of pelab 0.1.0 carry only "pelab.crc32" (the data
 * section), which is still checked.
 */
#ifndef PELAB_SAFETENSORS_H
#define PELAB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "pelab/options.h"
#include "pelab/params.h"

enum pelab_dtype { PELAB_DT_F32, PELAB_DT_F64, PELAB_DT_I32, PELAB_DT_I64 };

struct pelab_tensor {
    char name[128];
    enum pelab_dtype dtype;
    int ndim;                 /* 0..4 */
    int64_t shape[4];
    const void *data;         /* writing: the caller's bytes; reading: inside the file buffer */
    size_t nbytes;
};

/* Element i of a F32 or F64 tensor (any alignment), and its first n values into dst. */
double pelab_tensor_element(const struct pelab_tensor *t, size_t i);
void pelab_tensor_copy(pelab_real *dst, const struct pelab_tensor *t, size_t n);

/* Writes tensors (in the given order) and metadata (string pairs; may be NULL) atomically. */
int pelab_safetensors_write(const char *path, const struct pelab_tensor *tensors, int n,
                            const struct pelab_opts *metadata);

/* A file read fully into memory and validated: header JSON well-formed, every dtype known, shape
 * × dtype size == byte length, offsets inside the data section, tensors not overlapping, the
 * data section fully covered, CRC matching when present. Any fault: PELAB_ERR_RUNTIME with
 * "PATH: what is wrong". */
struct pelab_st_file {
    char *buf;                /* whole file */
    size_t size;
    struct pelab_tensor *tensors;
    int count;
    struct pelab_opts metadata;
};
int pelab_safetensors_read(const char *path, struct pelab_st_file *f);
/* The same checks on bytes in memory (copied); `name` stands for the path in messages. */
int pelab_safetensors_parse(const char *name, const void *bytes, size_t size,
                            struct pelab_st_file *f);
void pelab_st_file_free(struct pelab_st_file *f);
/* on = 1: a file whose "format" is pelab's but that carries neither checksum (one edited on
 * purpose, its checksum keys removed) is read; off (the default): such a file is refused as
 * damaged. A file with one checksum and not the other is refused either way. Process-wide. */
void pelab_safetensors_accept_edited(int on);
const struct pelab_tensor *pelab_st_find(const struct pelab_st_file *f, const char *name);

/* The parameter table as one safetensors file, in pelab_real's dtype (F32, or F64 in the
 * double build); names and shapes from the table. */
int pelab_params_save(const char *path, const struct pelab_params *p, const struct pelab_opts *metadata);
/* Loads every parameter of an allocated table by name: each must be present with the same
 * shape (F32 or F64, converted), and the file must hold no tensor the table lacks. */
int pelab_params_load(const struct pelab_st_file *f, const struct pelab_params *p, const char *path);

#endif
