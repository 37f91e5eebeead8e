/* bench_eval — evaluation (forward-only) throughput and peak memory at long contexts (float build).
 *
 *   build/bench/bench_eval --T N [--attention tiled|ref] [--pe NAME] [--reps N] [--warmup N]
 *                          [--threads N] [--forward eval|train]
 *
 * Configuration C of the benchmarks (V 8192, D 384, 6 layers, 6 heads), batch 1, random tokens,
 * every position with a target, pos = t. Times `reps` forward passes after `warmup` untimed ones
 * (the evaluation-only forward, or with --forward train the training forward, which keeps every
 * activation for a backward pass) and prints one JSON line:
 *   {"T":...,"attention":"tiled","pe":"rope","forward":"eval","tokens_per_s":...,"forward_s":...,
 *    "peak_rss_mib":...}
 * Peak RSS is the process's (getrusage ru_maxrss): run one kernel and length per process. A
 * length whose activations cannot be allocated exits 1 with the message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "pelab/clock.h"
#include "pelab/model.h"
#include "pelab/options.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/threads.h"

enum { V = 8192 };

static int usage(void) {
    fprintf(stderr,
            "usage: bench_eval --T N [--attention tiled|ref] [--pe NAME] [--reps N] [--warmup N] [--threads N]\n"
            "                  [--forward eval|train]\n"
            "  --T          context length (batch 1)\n"
            "  --attention  attention kernel (default tiled)\n"
            "  --pe         positional encoding (default rope)\n"
            "  --reps       timed forward passes (default 1)\n"
            "  --warmup     untimed forward passes first (default 0)\n"
            "  --threads    threads for OpenMP and BLAS (default 0: all cores)\n"
            "  --forward    eval: the evaluation-only forward (default); train: the training forward\n");
    return 2;
}

int main(int argc, char **argv) {
    pelab_blas_mend(argv); /* OpenBLAS's best kernels for this CPU (pelab/threads.h) */
    const char *attention = "tiled", *pe = "rope", *forward = "eval";
    int T = 0, reps = 1, warmup = 0, threads = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (strcmp(a, "--T") == 0) T = atoi(v);
        else if (strcmp(a, "--attention") == 0) attention = v;
        else if (strcmp(a, "--pe") == 0) pe = v;
        else if (strcmp(a, "--reps") == 0) reps = atoi(v);
        else if (strcmp(a, "--warmup") == 0) warmup = atoi(v);
        else if (strcmp(a, "--threads") == 0) threads = atoi(v);
        else if (strcmp(a, "--forward") == 0) forward = v;
        else return usage();
    }
    const int train = strcmp(forward, "train") == 0;
    if (T < 1 || reps < 1 || warmup < 0 || (!train && strcmp(forward, "eval"))) return usage();
    pelab_threads_set(threads);

    struct pelab_opts opts = {0};
    pelab_opts_set(&opts, "d-model", "384");
    pelab_opts_set(&opts, "heads", "6");
    pelab_opts_set(&opts, "layers", "6");
    pelab_opts_set(&opts, "pe", pe);
    pelab_opts_set(&opts, "attention", attention);
    struct pelab_model m;
    memset(&m, 0, sizeof m);
    if (pelab_model_init(&m, &opts, V, T) != PELAB_OK || (train && pelab_model_reserve(&m, 1, T) != PELAB_OK)) {
        fprintf(stderr, "bench_eval: T %d, %s: %s\n", T, attention, pelab_last_error());
        return 1;
    }
    pelab_model_init_weights(&m, 1);
    m.training = 0;

    int32_t *tokens = malloc((size_t)T * sizeof *tokens), *targets = malloc((size_t)T * sizeof *targets);
    int32_t *pos = malloc((size_t)T * sizeof *pos);
    if (!tokens || !targets || !pos) {
        fprintf(stderr, "bench_eval: out of memory\n");
        return 1;
    }
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 42);
    for (int t = 0; t < T; t++) {
        tokens[t] = (int32_t)pelab_rng_below(&rng, V);
        targets[t] = (int32_t)pelab_rng_below(&rng, V);
        pos[t] = t;
    }
    double t0 = 0, loss = 0;
    for (int r = 0; r < warmup + reps; r++) {
        if (r == warmup) t0 = pelab_clock_s();
        if (train) pelab_model_forward(&m, tokens, targets, pos, 1, T);
        else pelab_model_forward_eval(&m, tokens, targets, pos, 1, T);
        loss = m.loss;
        if (m.status) {
            fprintf(stderr, "bench_eval: %s\n", pelab_last_error());
            return 1;
        }
    }
    double per = (pelab_clock_s() - t0) / reps;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"T\":%d,\"attention\":\"%s\",\"pe\":\"%s\",\"forward\":\"%s\",\"tokens_per_s\":%.1f,"
           "\"forward_s\":%.3f,\"peak_rss_mib\":%.1f,\"threads\":%d,\"loss\":%.4f}\n",
           T, attention, pe, forward, T / per, per, ru.ru_maxrss / 1024.0, pelab_threads_get(), loss);
    free(tokens);
    free(targets);
    free(pos);
    pelab_model_free(&m);
    return 0;
}
