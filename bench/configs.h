/* bench/configs.h — the benchmark configurations: one table that bench_train, bench_roofline,
 * bench_gemm_bf16 and bench_generate read, and bench/twin_bench.py parses (its rows are one
 * line each: keep them so).
 *   A, B, C, D  language models of growing size (the benchmark's first four)
 *   I           the image task's `cpu` preset: 4 × 4 patches of a 28 × 28 image, a 7 × 7 grid
 *               and the class token (T 50), bidirectional, heads 16 wide
 *   L           the length-generalisation suite's `cpu` model (copy, sizes 1-10: T 21, the
 *               run's max-seq: 10 symbols, the separator, 10), heads 16 wide
 *   M           the indirect task's `mid` model (strings to 40 letters: T 50), heads 64 wide
 * steps and warmup are each configuration's default timed and untimed steps: the whole
 * `make bench` in about 20 minutes on 2 cores. */
#ifndef PELAB_BENCH_CONFIGS_H
#define PELAB_BENCH_CONFIGS_H

#include <stddef.h>
#include <string.h>

struct bench_config {
    const char *name;
    int V, D, layers, heads, T, B;
    int steps, warmup;
    int patch_dim, grid; /* the image model: patch vectors of this width on a grid × grid; 0: text */
};

static const struct bench_config bench_configs[] = {
    {"A", 64, 128, 4, 4, 64, 32, 12, 2, 0, 0},
    {"B", 64, 512, 8, 8, 64, 64, 2, 1, 0, 0},
    {"C", 8192, 384, 6, 6, 256, 8, 3, 1, 0, 0},
    {"D", 50257, 768, 12, 12, 64, 4, 2, 1, 0, 0},
    {"I", 10, 64, 4, 4, 50, 128, 4, 1, 16, 7},
    {"L", 66, 64, 3, 4, 21, 64, 30, 3, 0, 0},
    {"M", 67, 256, 4, 4, 50, 64, 6, 1, 0, 0},
};

/* The configuration called `name`, or NULL. */
static inline const struct bench_config *bench_config_find(const char *name) {
    for (size_t i = 0; name && i < sizeof bench_configs / sizeof bench_configs[0]; i++)
        if (strcmp(bench_configs[i].name, name) == 0) return &bench_configs[i];
    return NULL;
}

#endif
