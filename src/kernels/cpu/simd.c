/* The vector level of the kernels (simd.h): detected once, capped by PELAB_SIMD, forced by tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "kernels/cpu/simd.h"
#include "pelab/status.h"

static const char *const names[PELAB_SIMD_LEVELS] = {"portable", "avx2", "avx512"};
static int level = -1; /* not chosen yet; then the CPU's, capped by PELAB_SIMD: the process's */

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

/* The cap PELAB_SIMD names: a level's name in any case ("AVX2" is avx2); PELAB_SIMD_LEVELS, no
 * cap, when it is unset or empty; -1 for any other value (pelab_simd_check_env refuses it). */
static int env_cap(void) {
    const char *cap = getenv("PELAB_SIMD");
    if (!cap || !cap[0]) return PELAB_SIMD_LEVELS;
    for (int l = 0; l < PELAB_SIMD_LEVELS; l++)
        if (strcasecmp(cap, names[l]) == 0) return l;
    return -1;
}

int pelab_simd_check_env(void) {
    if (env_cap() >= 0) return PELAB_OK;
    return pelab_fail(PELAB_ERR_USAGE, "PELAB_SIMD=%s: expected %s, %s or %s (in any case), or unset for the "
                      "best level this CPU runs", getenv("PELAB_SIMD"), names[0], names[1], names[2]);
}

static int choose(void) {
    int best = PELAB_SIMD_PORTABLE;
    for (int l = PELAB_SIMD_LEVELS - 1; l > PELAB_SIMD_PORTABLE; l--)
        if (pelab_simd_supported((enum pelab_simd_level)l)) {
            best = l;
            break;
        }
    const int cap = env_cap();
    return cap >= 0 && cap < best ? cap : best;
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
