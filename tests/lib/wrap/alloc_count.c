/* The allocation counters of alloc_count.h: __wrap_* replace the library's calls when linked with
 * -Wl,--wrap=...; __real_* are the C library's. Not in tests/lib/ proper: every other test links
 * that, without --wrap, where __real_* would not resolve. */
#include <errno.h>
#include <stdlib.h>
#include "alloc_count.h"
#include "pelab/params.h"
#include "pelab/status.h"

int alloc_counting;
long alloc_calls;
long alloc_fail_at;

static int refuse(void) { return alloc_counting && alloc_fail_at > 0 && alloc_calls == alloc_fail_at; }

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);

void *__wrap_malloc(size_t n) {
    alloc_calls += alloc_counting;
    return refuse() ? NULL : __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t size) {
    alloc_calls += alloc_counting;
    return refuse() ? NULL : __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n) {
    alloc_calls += alloc_counting;
    return refuse() ? NULL : __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t align, size_t n) {
    alloc_calls += alloc_counting;
    return refuse() ? NULL : __real_aligned_alloc(align, n);
}
int __wrap_posix_memalign(void **p, size_t align, size_t n) {
    alloc_calls += alloc_counting;
    return refuse() ? ENOMEM : __real_posix_memalign(p, align, n);
}

int alloc_count_works(void) {
    alloc_counting = 1;
    alloc_calls = 0;
    struct pelab_params p = {0};
    const int64_t shape[1] = {3};
    pelab_params_declare(&p, "x", 1, shape, 0);
    PELAB_ASSERT(pelab_params_alloc(&p) == PELAB_OK);
    alloc_counting = 0;
    pelab_params_free(&p);
    return alloc_calls > 0;
}
