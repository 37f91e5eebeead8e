/* The vector level of the kernels (simd.h): detected once, capped by PELAB_SIMD, forced by tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/simd.h"

static const char *const names[PELAB_SIMD_LEVELS] = {"portable", "avx2", "avx512"};
static int level = -1; /* not chosen yet */

const char *pelab_simd_name(enum pelab_simd_level l) {
    return l >= 0 && l < PELAB_SIMD_LEVELS ? names[l] : "?";
}

int pelab_simd_supported(enum pelab_simd_level l) {
#ifdef PELAB_SIMD_X86
    __builtin_cpu_init();
    switch (l) {
    case PELAB_SIMD_PORTABLE: return 1;
    case PELAB_SIMD_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case PELAB_SIMD_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               pelab_simd_supported(PELAB_SIMD_AVX2);
    default: return 0;
    }
#else
    return l == PELAB_SIMD_PORTABLE;
#endif
}

static int choose(void) {
    int best = PELAB_SIMD_PORTABLE;
    for (int l = PELAB_SIMD_LEVELS - 1; l > PELAB_SIMD_PORTABLE; l--)
        if (pelab_simd_supported((enum pelab_simd_level)l)) {
            best = l;
            break;
        }
    const char *cap = getenv("PELAB_SIMD");
    for (int l = 0; cap && l < best; l++)
        if (strcmp(cap, names[l]) == 0) best = l;
    return best;
}

enum pelab_simd_level pelab_simd_level(void) {
    if (level < 0) level = choose();
    return (enum pelab_simd_level)level;
}

enum pelab_simd_level pelab_simd_force(enum pelab_simd_level l) {
    enum pelab_simd_level old = pelab_simd_level();
    if (pelab_simd_supported(l)) level = l;
    return old;
}
