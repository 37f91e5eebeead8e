/* bench_generate — greedy generation throughput at a long context, with and without the KV cache
 * (float build).
 *
 *   build/bench/bench_generate --context N [--config C|D] [--cache on|off|bf16] [--tokens G] [--pe NAME]
 *                              [--weights fp32|bf16] [--batch B] [--threads N]
 *
 * Configuration C or D of the benchmarks (C: V 8192, D 384, 6 layers, 6 heads; D: GPT-2 small's
 * shape, V 50257, D 768, 12 layers, 12 heads; random weights), one
 * sequence: a prompt of N − G random tokens, then G tokens generated greedily, so the last one
 * sees a context of N tokens. With the cache the prompt is appended in one pass (prefill, timed
 * apart) and each new token is one more step; without it each new token is the evaluation-only
 * forward over the whole context so far (the cheapest recomputation: no training activations,
 * logits in chunks), its argmax the token. Prints one JSON line:
 *   {"context":...,"config":"C","pe":"rope","cache":"on","tokens":G,"tokens_per_s":...,"prefill_s":...,
 *    "peak_rss_mib":...,"threads":...,"bytes_per_token":...,"last":TOKEN}
 * bytes_per_token (with the cache): what one decoded token must read at least, every weight once
 * and the cached keys and values of the context, averaged over the timed tokens; memory
 * bandwidth over it bounds the tokens/s (bench/generate.sh, with bench_stream's rate). With
 * --weights bf16 the weight matrices are read in bf16 (pelab_model_use_bf16_weights), and with
 * --cache bf16 the cached keys and values (pelab_kv_cache_new_bf16): two bytes each in
 * bytes_per_token.
 * With --batch B (the cache on) B sequences, each its own random prompt, are prefilled one by one
 * and then step together (pelab_kv_batch_step: one pass over the weights for the B new tokens);
 * tokens_per_s counts all B·G tokens, bytes_per_token shares the weights among the B, and
 * prefill_s is the mean of the B prefills.
 * "last" is the final token (of the first sequence): with the same --tokens the two modes pick
 * the same tokens (greedy, the same weights), unless two logits tie within rounding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "pelab/clock.h"
#include "pelab/kv_cache.h"
#include "pelab/model.h"
#include "pelab/options.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "core/prof.h"
#include "configs.h"

static int V;

static int usage(void) {
    fprintf(stderr,
            "usage: bench_generate --context N [--config C|D] [--cache on|off|bf16] [--tokens G] [--pe NAME]\n"
            "                      [--weights fp32|bf16] [--threads N]\n"
            "  --context  tokens the last generated one sees (prompt N - G, then G generated)\n"
            "  --config   a language model of bench/configs.h (default C: V 8192 D 384 N 6 H 6)\n"
            "  --cache    on: KV cache (default); bf16: its keys and values in bf16; off: recompute the\n"
            "             context for every token\n"
            "  --tokens   tokens generated and timed (default 16)\n"
            "  --pe       positional encoding (default rope)\n"
            "  --weights  fp32 (default), or bf16: the weight matrices read in bf16\n"
            "  --batch    sequences decoded together (default 1; with the cache)\n"
            "  --threads  threads for OpenMP and BLAS (default 0: all cores)\n");
    return 2;
}

static int argmax(const pelab_real *row) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (row[v] > row[best]) best = v;
    return best;
}

int main(int argc, char **argv) {
    pelab_blas_mend(argv); /* OpenBLAS's best kernels for this CPU (pelab/threads.h) */
    const char *pe = "rope", *cache = "on", *weights = "fp32", *config = "C";
    int N = 0, G = 16, threads = 0, B = 1;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (strcmp(a, "--context") == 0) N = atoi(v);
        else if (strcmp(a, "--config") == 0) config = v;
        else if (strcmp(a, "--cache") == 0) cache = v;
        else if (strcmp(a, "--tokens") == 0) G = atoi(v);
        else if (strcmp(a, "--pe") == 0) pe = v;
        else if (strcmp(a, "--weights") == 0) weights = v;
        else if (strcmp(a, "--threads") == 0) threads = atoi(v);
        else if (strcmp(a, "--batch") == 0) B = atoi(v);
        else return usage();
    }
    const int kv16 = strcmp(cache, "bf16") == 0, cached = kv16 || strcmp(cache, "on") == 0;
    const int bf16 = strcmp(weights, "bf16") == 0;
    const struct bench_config *c = bench_config_find(config);
    if (G < 1 || N <= G || (!cached && strcmp(cache, "off")) || (!bf16 && strcmp(weights, "fp32")) || !c || c->patch_dim ||
        B < 1 || (B > 1 && !cached))
        return usage();
    V = c->V;
    pelab_threads_set(threads);

    struct pelab_opts opts = {0};
    char buf[3][16];
    snprintf(buf[0], sizeof buf[0], "%d", c->D), snprintf(buf[1], sizeof buf[1], "%d", c->heads);
    snprintf(buf[2], sizeof buf[2], "%d", c->layers);
    pelab_opts_set(&opts, "d-model", buf[0]);
    pelab_opts_set(&opts, "heads", buf[1]);
    pelab_opts_set(&opts, "layers", buf[2]);
    pelab_opts_set(&opts, "pe", pe);
    struct pelab_model m;
    memset(&m, 0, sizeof m);
    struct pelab_kv_batch *batch = NULL;
    if (pelab_model_init(&m, &opts, V, N) != PELAB_OK ||
        (cached && pelab_kv_batch_new(&batch, &m, B, N, kv16) != PELAB_OK)) {
        fprintf(stderr, "bench_generate: context %d: %s\n", N, pelab_last_error());
        return 1;
    }
    pelab_model_init_weights(&m, 1);
    m.training = 0;
    if (bf16 && pelab_model_use_bf16_weights(&m) != PELAB_OK) {
        fprintf(stderr, "bench_generate: %s\n", pelab_last_error());
        return 1;
    }
    /* the elements read as matrices: the embedding (the tied head) and each block's four */
    double matrix = (double)m.params.list[m.wte].size;
    for (int l = 0; l < m.cfg.n_layers; l++) {
        const struct pelab_layer_params *L = &m.layer[l];
        matrix += (double)(m.params.list[L->qkv].size + m.params.list[L->proj].size +
                           m.params.list[L->fc].size + m.params.list[L->fcproj].size);
    }

    /* (B,N) sequences, positions (N,), a step's tokens and positions (B,) */
    int32_t *tokens = malloc((size_t)B * N * sizeof *tokens), *pos = malloc((size_t)N * sizeof *pos);
    int32_t *step = malloc((size_t)B * sizeof *step), *step_pos = malloc((size_t)B * sizeof *step_pos);
    if (!tokens || !pos || !step || !step_pos) {
        fprintf(stderr, "bench_generate: out of memory\n");
        return 1;
    }
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 42);
    for (long t = 0; t < (long)B * N; t++) tokens[t] = (int32_t)pelab_rng_below(&rng, V);
    for (int t = 0; t < N; t++) pos[t] = t;
    const int P = N - G;
    pelab_prof_reset();
    double prefill = 0, t0 = pelab_clock_s();
    int rc = PELAB_OK;
    if (cached) {
        for (int b = 0; b < B && !rc; b++)
            rc = pelab_kv_cache_append(pelab_kv_batch_sequence(batch, b), tokens + (long)b * N, pos, P, NULL);
        prefill = (pelab_clock_s() - t0) / B;
        pelab_prof_reset();
        t0 = pelab_clock_s();
        for (int n = P; n < N && !rc; n++) {
            for (int b = 0; b < B; b++) {
                step[b] = tokens[(long)b * N + n] = argmax(pelab_kv_cache_logits(pelab_kv_batch_sequence(batch, b)));
                step_pos[b] = n;
            }
            if (n + 1 < N) rc = pelab_kv_batch_step(batch, step, step_pos);
        }
    } else {
        for (int n = P; n < N && !rc; n++) {
            pelab_model_forward_eval(&m, tokens, NULL, pos, 1, n);
            rc = m.status;
            if (!rc) tokens[n] = pelab_model_eval_pred(&m)[n - 1];
        }
    }
    double per = (pelab_clock_s() - t0) / ((double)G * B);
    pelab_prof_report(stderr, G, per * B); /* `make profile`: where a decoding step's time went */
    /* weights, and per layer the keys (H·qk_dim) and values (D) of the mean context P + G/2 */
    const double kv_row = (double)m.cfg.n_layers * (m.cfg.n_heads * m.pe.qk_dim + m.cfg.d_model);
    const double weight_bytes = sizeof(pelab_real) * (double)m.params.total - (bf16 ? (sizeof(pelab_real) - 2) * matrix : 0);
    const double bytes = weight_bytes / B + (cached ? (kv16 ? 2 : sizeof(pelab_real)) * kv_row * (P + G / 2.0) : 0);
    if (rc) {
        fprintf(stderr, "bench_generate: %s\n", pelab_last_error());
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"context\":%d,\"config\":\"%s\",\"pe\":\"%s\",\"cache\":\"%s\",\"weights\":\"%s\",\"batch\":%d,\"tokens\":%d,"
           "\"tokens_per_s\":%.2f,\"prefill_s\":%.3f,\"peak_rss_mib\":%.1f,\"threads\":%d,\"bytes_per_token\":%.0f,"
           "\"last\":%d}\n",
           N, config, pe, cache, weights, B, G, 1 / per, prefill, ru.ru_maxrss / 1024.0, pelab_threads_get(), bytes,
           tokens[N - 1]);
    pelab_kv_batch_free(batch);
    free(tokens);
    free(pos);
    free(step);
    free(step_pos);
    pelab_model_free(&m);
    return 0;
}
