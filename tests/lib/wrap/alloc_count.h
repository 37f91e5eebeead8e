/* tests/lib/wrap/alloc_count.h — counts the library's allocations, for the tests that hold it to
 * "no allocation in a step" and "out of memory anywhere returns an error": a test program linked
 * with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc,--wrap=posix_memalign
 * and alloc_count.c (the Makefile's rule for test_alloc and test_contract) reroutes malloc,
 * calloc, realloc, aligned_alloc and posix_memalign through these counters. */
#ifndef PELAB_TEST_ALLOC_COUNT_H
#define PELAB_TEST_ALLOC_COUNT_H

extern int alloc_counting;  /* 1: count calls (and refuse the alloc_fail_at-th) */
extern long alloc_calls;    /* calls counted */
extern long alloc_fail_at;  /* > 0: the alloc_fail_at-th counted call fails (returns NULL) */

/* 1 when the wrappers see the library's calls (an allocation made through pelab_params_alloc
 * is counted): a wrapper never reached would pass every check. */
int alloc_count_works(void);

#endif
