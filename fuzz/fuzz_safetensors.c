/* Fuzz target: the safetensors reader (pelab_safetensors_parse) on any bytes, then the parameter
 * loader on what it accepted, with a table declared from the file's own float tensors. Every
 * byte of an accepted tensor is read, so a tensor that points outside the file is an ASan error. */
#include "fuzz.h"
#include "pelab/io.h"
#include "pelab/params.h"
#include "pelab/safetensors.h"

#define NAME "fuzz.safetensors"

/* A table of the file's F32/F64 tensors of rank 1..4 (small ones), loaded from the file. */
static void load_params(const struct pelab_st_file *f) {
    struct pelab_params p = {0};
    size_t total = 0;
    for (int i = 0; i < f->count; i++) {
        const struct pelab_tensor *t = &f->tensors[i];
        if ((t->dtype != PELAB_DT_F32 && t->dtype != PELAB_DT_F64) || t->ndim < 1 ||
            strlen(t->name) >= PELAB_PARAM_NAME_MAX || pelab_params_find(&p, t->name) >= 0)
            continue;
        size_t n = 1;
        int ok = 1;
        for (int d = 0; d < t->ndim; d++) ok &= t->shape[d] > 0 && (n *= (size_t)t->shape[d]) < 65536;
        if (!ok || (total += n) > 65536) break;
        pelab_params_declare(&p, t->name, t->ndim, t->shape, 0);
    }
    if (pelab_params_alloc(&p) == PELAB_OK) {
        int rc = pelab_params_load(f, &p, NAME);
        if (rc) fuzz_check_refusal(rc, NAME ": ");
    }
    pelab_params_free(&p);
}

static void one(const uint8_t *data, size_t size) {
    struct pelab_st_file f;
    int rc = pelab_safetensors_parse(NAME, data, size, &f);
    if (rc) {
        fuzz_check_refusal(rc, NAME ": ");
        return;
    }
    uint32_t crc = 0;
    for (int i = 0; i < f.count; i++) {
        crc = pelab_crc32(crc, f.tensors[i].data, f.tensors[i].nbytes);
        if (pelab_st_find(&f, f.tensors[i].name) == NULL) abort();
    }
    (void)crc;
    load_params(&f);
    pelab_st_file_free(&f);
}

/* The bytes as they are (the checksums fuzzed too), then with their checksums made to match, so
 * that the layout checks behind them are reached. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one(data, size);
    uint8_t *fixed = malloc(size ? size : 1);
    if (!fixed) return 0;
    memcpy(fixed, data, size);
    fuzz_fix_checksums(fixed, size);
    if (memcmp(fixed, data, size) != 0) one(fixed, size);
    free(fixed);
    return 0;
}
