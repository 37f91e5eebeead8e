/* OpenBLAS's kernels: which ran, and a better choice where OpenBLAS's CPU table falls short
 * (blas_kernels.h says why). */
#include "kernels/cpu/blas_kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include "pelab/threads.h"

/* Whether the space-separated list `flags` holds the word `name`. */
static int has_flag(const char *flags, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = flags; (p = strstr(p, name)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\t' ||
                                                             p[n] == '\n' || p[n] == '\0'))
            return 1;
    return 0;
}

enum pelab_isa pelab_isa_from_flags(const char *flags) {
    static const char *const avx512[] = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"};
    if (!has_flag(flags, "avx")) return PELAB_ISA_SSE3;
    if (!has_flag(flags, "avx2") || !has_flag(flags, "fma")) return PELAB_ISA_AVX;
    for (size_t i = 0; i < sizeof avx512 / sizeof avx512[0]; i++)
        if (!has_flag(flags, avx512[i])) return PELAB_ISA_AVX2;
    return has_flag(flags, "avx512_bf16") ? PELAB_ISA_AVX512_BF16 : PELAB_ISA_AVX512;
}

const char *pelab_isa_name(enum pelab_isa isa) {
    static const char *const names[] = {"SSE3", "AVX", "AVX2", "AVX-512", "AVX-512 with BF16"};
    return isa >= PELAB_ISA_SSE3 && isa <= PELAB_ISA_AVX512_BF16 ? names[isa] : "?";
}

/* OpenBLAS 0.3's x86-64 core names (driver/others/dynamic.c) by the instructions their kernels
 * use. A core of an older level is what OpenBLAS falls back to on a model it does not know. */
static const struct {
    const char *name;
    enum pelab_isa isa;
} cores[] = {
    {"Katmai", PELAB_ISA_SSE3},      {"Coppermine", PELAB_ISA_SSE3}, {"Northwood", PELAB_ISA_SSE3},
    {"Prescott", PELAB_ISA_SSE3},    {"Banias", PELAB_ISA_SSE3},     {"Atom", PELAB_ISA_SSE3},
    {"Core2", PELAB_ISA_SSE3},       {"Penryn", PELAB_ISA_SSE3},     {"Dunnington", PELAB_ISA_SSE3},
    {"Nehalem", PELAB_ISA_SSE3},     {"Athlon", PELAB_ISA_SSE3},     {"Opteron", PELAB_ISA_SSE3},
    {"Opteron(SSE3)", PELAB_ISA_SSE3}, {"Barcelona", PELAB_ISA_SSE3}, {"Nano", PELAB_ISA_SSE3},
    {"Bobcat", PELAB_ISA_SSE3},      {"Sandybridge", PELAB_ISA_AVX}, {"Bulldozer", PELAB_ISA_AVX},
    {"Piledriver", PELAB_ISA_AVX},   {"Steamroller", PELAB_ISA_AVX}, {"Excavator", PELAB_ISA_AVX},
    {"Haswell", PELAB_ISA_AVX2},     {"Zen", PELAB_ISA_AVX2},        {"SkylakeX", PELAB_ISA_AVX512},
    {"Cooperlake", PELAB_ISA_AVX512_BF16}, {"SapphireRapids", PELAB_ISA_AVX512_BF16},
};

int pelab_blas_core_isa(const char *core) {
    for (size_t i = 0; core && i < sizeof cores / sizeof cores[0]; i++)
        if (strcasecmp(core, cores[i].name) == 0) return (int)cores[i].isa;
    return -1;
}

const char *pelab_blas_better_core(enum pelab_isa cpu, const char *reported) {
    /* the best core of each level that every DYNAMIC_ARCH build of OpenBLAS 0.3 has */
    static const char *const best[] = {NULL, "Sandybridge", "Haswell", "SkylakeX", "Cooperlake"};
    const int have = pelab_blas_core_isa(reported);
    if (have < 0 || (int)cpu <= have) return NULL;
    return best[cpu];
}

#ifdef PELAB_BLAS
char *openblas_get_corename(void);
char *openblas_get_config(void);

/* The level of the instructions this process may run, as cpuid says (with the operating system's
 * support, which __builtin_cpu_supports checks: under valgrind, which emulates no AVX-512, it is
 * AVX2) written as a flags line for pelab_isa_from_flags; -1 on another architecture.
 * PELAB_CPU_FLAGS, when set, stands for that line (tests/cli_blas.sh plays a CPU that OpenBLAS
 * misjudges). */
static int cpu_isa(void) {
    const char *flags = getenv("PELAB_CPU_FLAGS");
    if (flags) return (int)pelab_isa_from_flags(flags);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    char line[256] = "";
#define FLAG(name, have) \
    if (have) strcat(line, " " name)
    FLAG("avx", __builtin_cpu_supports("avx"));
    FLAG("avx2", __builtin_cpu_supports("avx2"));
    FLAG("fma", __builtin_cpu_supports("fma"));
    FLAG("avx512f", __builtin_cpu_supports("avx512f"));
    FLAG("avx512cd", __builtin_cpu_supports("avx512cd"));
    FLAG("avx512bw", __builtin_cpu_supports("avx512bw"));
    FLAG("avx512dq", __builtin_cpu_supports("avx512dq"));
    FLAG("avx512vl", __builtin_cpu_supports("avx512vl"));
    unsigned a, b, c, d; /* AVX512_BF16: cpuid leaf 7, subleaf 1, eax bit 5 */
    FLAG("avx512_bf16", __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5 & 1));
#undef FLAG
    return (int)pelab_isa_from_flags(line);
#else
    return -1;
#endif
}

/* "OpenBLAS 0.3.21": the first two words of OpenBLAS's configuration string */
static void blas_version(char *out, size_t n) {
    const char *config = openblas_get_config();
    int words = 0;
    size_t i = 0;
    for (; config && config[i] && i + 1 < n; i++) {
        if (config[i] == ' ' && ++words == 2) break;
        out[i] = config[i];
    }
    out[i] = '\0';
}

/* The core OpenBLAS runs (*core), this CPU's level (*isa, -1 unknown), and the better core that
 * level allows, or NULL. */
static const char *better_than_running(const char **core, int *isa) {
    *core = openblas_get_corename();
    *isa = cpu_isa();
    return *isa < 0 ? NULL : pelab_blas_better_core((enum pelab_isa)*isa, *core);
}

const char *pelab_blas_kernels(void) {
    static char info[192];
    char version[64];
    blas_version(version, sizeof version);
    const char *core, *forced = getenv("OPENBLAS_CORETYPE");
    int isa;
    const char *better = better_than_running(&core, &isa);
    const int has_forced = forced && forced[0];
    snprintf(info, sizeof info, "%s %s kernels%s%s%s%s%s%s", version, core,
             has_forced || better ? " (" : "", has_forced ? "OPENBLAS_CORETYPE=" : "",
             has_forced ? forced : "", has_forced && better ? "; " : "",
             better ? "this CPU allows " : "", better ? better : "");
    if (has_forced || better) strncat(info, ")", sizeof info - strlen(info) - 1);
    return info;
}

void pelab_blas_mend(char **argv) {
    const char *forced = getenv("OPENBLAS_CORETYPE");
    if (forced && forced[0]) return; /* the user's choice, or this process after the re-run */
    const char *core;
    int isa;
    const char *better = better_than_running(&core, &isa);
    if (!better) return;
    /* under mpirun every rank runs this: the first one says it */
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank || atoi(rank) == 0)
        fprintf(stderr, "pelab: OpenBLAS chose its %s kernels on this %s CPU (a model it does not "
                        "know); running with OPENBLAS_CORETYPE=%s (set it to choose otherwise)\n",
                core, pelab_isa_name((enum pelab_isa)isa), better);
    /* OpenBLAS reads the variable in its constructor, before main: run this program again */
    if (setenv("OPENBLAS_CORETYPE", better, 1) == 0) execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE"); /* what this process runs, for the processes it starts too */
    fprintf(stderr, "pelab: could not run again with OPENBLAS_CORETYPE=%s; going on with %s\n",
            better, core);
}
#else
const char *pelab_blas_kernels(void) { return "portable matmul kernels"; }
void pelab_blas_mend(char **argv) { (void)argv; }
#endif
