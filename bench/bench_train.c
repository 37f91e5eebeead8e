/* bench_train — training throughput of one benchmark configuration (float build).
 *
 *   build/bench/bench_train --config A|B|C|D|I|L|M --pe rope|pope [--steps N] [--warmup N] [--threads N]
 *                           [--attention tiled|ref] [--precision fp32|bf16] [--random-positions N]
 *
 * Times whole training steps (zero grad, forward, backward, clip 1.0, AdamW) on random tokens,
 * every position with a target, pos = t (with --random-positions N: each step draws every row's
 * positions as training does, a sorted random subset of [0, N)), after `warmup` untimed steps. Configuration I is the
 * image task's model instead (the `cpu` image preset's ViT: 4 × 4 patches of a 28 × 28 image, a
 * 7 × 7 grid and the class token, T 50): random patch vectors, positions (row, column) with the
 * class token at (0, 0), bidirectional attention, a label on the class token only; --pe rope and
 * pope run their 2-D forms, rope2d and pope2d. Prints one JSON line (I adds images_per_s):
 *   {"config":"A","pe":"rope","precision":"fp32","tokens_per_s":...,"step_ms":...,"cpu_ms":...,
 *    "steps":...,"threads":...,"gflop_per_step":...,"gflops":...}
 * cpu_ms is a step's CPU time, the process's (every thread's, waiting ones too): on one thread of
 * a machine shared with other work, the steadier measure, as it leaves out the time the process
 * waited for a core.
 * A step's floating-point operations are counted as the model's arithmetic, not the kernels':
 *   matrix products  6·B·T·(12·N·D² + D·V)         (forward 2·, backward 4· per weight and token)
 *   attention        3·N·B·H·T·(T+1)·(dq + dv)     (the causal half of Q·Kᵀ and P·V, forward
 *                                                  once, backward twice; recomputation not counted)
 *   I:               6·B·T·(12·N·D² + D·P) + 6·B·D·V and 3·N·B·H·2T²·(dq + dv)  (the patch
 *                    embedding of width P, the classifier on the class token, every key visible)
 * with dq the query/key width per head (d, 2d for PoPE) and dv = d; the norms, GELU, loss and
 * optimizer are left out. bench/run.sh compares the GFLOP/s with bench_sgemm's rate.
 * bench/twin_bench.py prints the same line for the PyTorch twin; bench/run.sh puts them side
 * by side. Under mpirun (a build with MPI, pelab/dist.h) the ranks share each step's B rows and
 * sum their gradients with one allreduce, as `pelab train` does; the line (rank 0's) then also
 * gives the ranks, the parameters, and per step the mean time a rank waited for the others
 * before the allreduce (wait_ms: a barrier) and the allreduce itself (allreduce_ms):
 *   mpirun -np 2 build/bench/bench_train --config A --pe rope --threads 1
 * Built by `make profile` (build/prof/bench/bench_train, with -DPELAB_PROFILE), it also
 * prints to stderr a table of where a step's time went, per phase (src/core/prof.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "pelab/clock.h"
#include "pelab/dist.h"
#include "pelab/model.h"
#include "pelab/optim.h"
#include "pelab/options.h"
#include "pelab/precision.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "core/prof.h"
#include "configs.h"

/* The process's CPU time, seconds. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(void) {
    fprintf(stderr,
            "usage: bench_train --config NAME --pe rope|pope [--steps N] [--warmup N] [--threads N]\n"
            "                   [--attention tiled|ref] [--precision fp32|bf16] [--random-positions N]\n"
            "  --config   benchmark configuration (bench/configs.h):\n");
    for (size_t i = 0; i < sizeof bench_configs / sizeof bench_configs[0]; i++) {
        const struct bench_config *c = &bench_configs[i];
        fprintf(stderr, "             %s: V %d D %d N %d H %d T %d B %d%s, %d timed steps\n", c->name, c->V,
                c->D, c->layers, c->heads, c->T, c->B, c->patch_dim ? " (images)" : "", c->steps);
    }
    fprintf(stderr,
            "  --pe       positional encoding (rope or pope; any registered name works)\n"
            "  --steps    timed steps (default: the configuration's)\n"
            "  --warmup   untimed steps first (default: the configuration's)\n"
            "  --threads  threads for OpenMP and BLAS (default 0: all cores)\n"
            "  --attention  attention kernel (default tiled, the model's default)\n"
            "  --precision  of the matrix products (default fp32; bf16: pelab/precision.h)\n"
            "  --random-positions  N: every step draws the rows' positions from [0, N) (default 0: pos = t)\n");
    return 2;
}

int main(int argc, char **argv) {
    pelab_blas_mend(argv); /* OpenBLAS's best kernels for this CPU (pelab/threads.h) */
    const char *config = NULL, *pe = NULL, *attention = "tiled", *precision = "fp32";
    int steps = -1, warmup = -1, threads = 0, random_positions = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (strcmp(a, "--config") == 0) config = v;
        else if (strcmp(a, "--pe") == 0) pe = v;
        else if (strcmp(a, "--steps") == 0) steps = atoi(v);
        else if (strcmp(a, "--warmup") == 0) warmup = atoi(v);
        else if (strcmp(a, "--threads") == 0) threads = atoi(v);
        else if (strcmp(a, "--attention") == 0) attention = v;
        else if (strcmp(a, "--precision") == 0) precision = v;
        else if (strcmp(a, "--random-positions") == 0) random_positions = atoi(v);
        else return usage();
    }
    struct pelab_ctx ctx; /* the MPI job and --precision */
    pelab_ctx_init(&ctx);
    if (pelab_dist_init(&ctx.dist, &argc, &argv)) {
        fprintf(stderr, "bench_train: %s\n", pelab_last_error());
        return 1;
    }
    const struct bench_config *c = bench_config_find(config);
    if (!c || !pe) return usage();
    if (steps <= 0) steps = c->steps;
    if (warmup < 0) warmup = c->warmup;
    pelab_threads_set(threads);
    enum pelab_precision prec;
    if (pelab_precision_parse(precision, &prec) != PELAB_OK || pelab_precision_set(&ctx, prec) != PELAB_OK) {
        fprintf(stderr, "bench_train: %s\n", pelab_last_error());
        return 2;
    }

    char buf[32];
    struct pelab_opts opts = {0};
    snprintf(buf, sizeof buf, "%d", c->D);
    pelab_opts_set(&opts, "d-model", buf);
    snprintf(buf, sizeof buf, "%d", c->heads);
    pelab_opts_set(&opts, "heads", buf);
    snprintf(buf, sizeof buf, "%d", c->layers);
    pelab_opts_set(&opts, "layers", buf);
    const int image = c->patch_dim > 0;
    char pe_name[64];
    snprintf(pe_name, sizeof pe_name, "%s%s", pe, image && (!strcmp(pe, "rope") || !strcmp(pe, "pope")) ? "2d" : "");
    pelab_opts_set(&opts, "pe", pe_name);
    pelab_opts_set(&opts, "attention", attention);
    char rp[16];
    snprintf(rp, sizeof rp, "%d", random_positions);
    pelab_opts_set(&opts, "random-positions", rp);
    if (strcmp(pe, "pope") == 0) { /* the paper's PoPE, as the twin runs it */
        pelab_opts_set(&opts, "pope-softplus", "on");
        pelab_opts_set(&opts, "pope-delta", "on");
    }
    struct pelab_model m;
    memset(&m, 0, sizeof m);
    const struct pelab_model_io io = {c->patch_dim, {image ? 2 : 1, image, c->grid}};
    if (pelab_model_init_io(&m, &opts, c->V, c->T, &io) != PELAB_OK ||
        pelab_model_reserve(&m, c->B, c->T) != PELAB_OK || c->B < ctx.dist.size) {
        fprintf(stderr, "bench_train: %s\n", pelab_last_error());
        return 1;
    }
    pelab_model_set_ctx(&m, &ctx);
    pelab_model_init_weights(&m, 1);
    m.training = 1; /* dropout is 0: the same work as evaluation, plus the bookkeeping */

    size_t n = (size_t)c->B * c->T;
    const int dims = image ? 2 : 1;
    int32_t *tokens = malloc(n * sizeof *tokens), *targets = malloc(n * sizeof *targets);
    int32_t *pos = malloc(n * dims * sizeof *pos);
    pelab_real *inputs = image ? malloc(n * c->patch_dim * sizeof *inputs) : NULL;
    if (!tokens || !targets || !pos || (image && !inputs)) {
        fprintf(stderr, "bench_train: out of memory\n");
        return 1;
    }
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 42);
    for (size_t i = 0; i < n; i++) {
        const int t = (int)(i % (size_t)c->T);
        tokens[i] = image ? 0 : (int32_t)pelab_rng_below(&rng, (uint64_t)c->V);
        targets[i] = image && t > 0 ? -1 : (int32_t)pelab_rng_below(&rng, (uint64_t)c->V);
        if (image) /* the class token at (0, 0), patch t − 1 at (row + 1, column + 1) */
            pos[2 * i] = t ? 1 + (t - 1) / c->grid : 0, pos[2 * i + 1] = t ? 1 + (t - 1) % c->grid : 0;
        else
            pos[i] = t;
    }
    for (size_t i = 0; image && i < n * c->patch_dim; i++) inputs[i] = (pelab_real)pelab_rng_normal(&rng);

    struct pelab_adamw opt = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    /* this rank's rows, and their share of the batch's loss (every position has a target) */
    uint64_t r0, r1;
    pelab_dist_share(&ctx.dist, (uint64_t)c->B, &r0, &r1);
    const int rows = (int)(r1 - r0);
    const size_t off = (size_t)r0 * (size_t)c->T;
    if (image) pelab_model_set_inputs(&m, inputs + off * c->patch_dim);
    double t0 = 0, c0 = 0, loss = 0, allreduce = 0, wait = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) t0 = pelab_clock_s(), c0 = cpu_s(), allreduce = wait = 0, pelab_prof_reset();
        if (random_positions && pelab_random_positions(pos + off, tokens + off, rows, c->T, 0, random_positions,
                                                       (uint64_t)s, 0) != PELAB_OK) {
            fprintf(stderr, "bench_train: %s\n", pelab_last_error());
            return 1;
        }
        pelab_params_zero_grad(&m.params);
        pelab_model_forward(&m, tokens + off, targets + off, pos + off * dims, rows, c->T);
        loss = m.loss * rows / c->B;
        pelab_model_backward(&m, (pelab_real)rows / (pelab_real)c->B);
        double ta = pelab_clock_s();
        pelab_dist_barrier(&ctx.dist);
        double tb = pelab_clock_s();
        pelab_dist_sum_real(&ctx.dist, m.params.grad, m.params.total);
        wait += tb - ta;
        allreduce += pelab_clock_s() - tb;
        pelab_adamw_step(&opt, &m.params, 1e-3, pelab_clip_scale(pelab_grad_norm(&m.params), 1.0));
    }
    const double elapsed = pelab_clock_s() - t0, cpu = cpu_s() - c0;
    pelab_dist_sum_double(&ctx.dist, &loss, 1);
    const double D = c->D, BT = (double)n, d = (double)c->D / c->heads, dq = m.pe.qk_dim;
    const double flops =
        image ? 6 * BT * (12.0 * c->layers * D * D + D * c->patch_dim) + 6.0 * c->B * D * c->V +
                    3.0 * c->layers * c->B * c->heads * 2.0 * c->T * c->T * (dq + d)
              : 6 * BT * (12.0 * c->layers * D * D + D * c->V) +
                    3.0 * c->layers * c->B * c->heads * c->T * (c->T + 1.0) * (dq + d);
    if (ctx.dist.rank == 0)
        printf("{\"config\":\"%s\",\"pe\":\"%s\",\"random_positions\":%d,\"precision\":\"%s\",\"tokens_per_s\":%.1f,"
               "\"step_ms\":%.3f,\"cpu_ms\":%.3f,\"steps\":%d,\"threads\":%d,\"loss\":%.4f,\"gflop_per_step\":%.2f,"
               "\"gflops\":%.1f,\"ranks\":%d,\"params\":%zu,\"wait_ms\":%.3f,"
               "\"allreduce_ms\":%.3f,\"images_per_s\":%.1f}\n",
               c->name, pe, random_positions, precision, (double)n * steps / elapsed, 1e3 * elapsed / steps,
               1e3 * cpu / steps, steps,
               pelab_threads_get(), loss, flops / 1e9, flops * steps / elapsed / 1e9,
               ctx.dist.size, m.params.total, 1e3 * wait / steps, 1e3 * allreduce / steps,
               image ? (double)c->B * steps / elapsed : 0.0);
    /* `make profile`: where the step's time went (a build with -DPELAB_PROFILE only) */
    pelab_prof_report(stderr, steps, elapsed / steps);
    free(tokens);
    free(targets);
    free(pos);
    free(inputs);
    pelab_model_free(&m);
    pelab_dist_finalize(&ctx.dist);
    return 0;
}
