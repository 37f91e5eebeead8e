/* Fuzz target: the IDX reader (pelab_idx_parse) on any bytes, as any file and as the image file
 * fashion-mnist wants (u8, rank 3). An accepted file has every element read, so a size check that
 * lets the data run past the buffer is an ASan error; its count must be the product of its
 * dimensions and fill the file exactly. */
#include "fuzz.h"
#include "pelab/idx.h"

#define NAME "fuzz.idx"

static void one(const uint8_t *data, size_t size, int type, int rank) {
    char *buf = malloc(size ? size : 1);
    if (!buf) return;
    memcpy(buf, data, size);
    struct pelab_idx x;
    int rc = pelab_idx_parse(&x, buf, size, NAME, type, rank);
    if (rc) {
        fuzz_check_refusal(rc, NAME ": ");
        return;
    }
    uint64_t count = 1, sum = 0;
    for (int i = 0; i < x.rank; i++) count *= x.dims[i];
    if (count != x.count || 4 + 4 * (uint64_t)x.rank + count * x.elem_size != size ||
        (type && x.type != type) || (rank && x.rank != rank))
        abort();
    const uint8_t *p = x.data;
    for (uint64_t i = 0; i < count * x.elem_size; i++) sum += p[i];
    (void)sum;
    pelab_idx_free(&x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one(data, size, 0, 0);
    one(data, size, PELAB_IDX_U8, 3);
    return 0;
}
