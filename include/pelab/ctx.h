/* pelab/ctx.h — the context the library's work runs in: what its caller chooses for it (the
 * precision of the matrix products, the MPI job it is part of, the rows of the evaluation
 * forward's chunks) and what the work reports back (the first matrix product that failed).
 *
 * The caller creates one (pelab_ctx_init) and passes it where these are needed: a model holds a
 * pointer to one (pelab_model_set_ctx; until then a context of its own, fp32 in one process), and
 * its encoding, its kernels and the evaluations of it read that one; a trainer runs in its
 * caller's (pelab_train_in). Nothing here is process-wide: two contexts on two threads run apart.
 * One thread uses a context at a time.
 *
 *   struct pelab_ctx ctx;
 *   pelab_ctx_init(&ctx);                                  fp32, one process
 *   pelab_precision_set(&ctx, PELAB_PRECISION_BF16);       checked: PELAB_ERR_USAGE where bf16 cannot run
 *   pelab_model_set_ctx(&model, &ctx);                     its passes now run in bf16
 *
 * The thread count is not here: OpenMP keeps it, for the thread that sets it (pelab/threads.h).
 */
#ifndef PELAB_CTX_H
#define PELAB_CTX_H

#include "pelab/dist.h"
#include "pelab/precision.h"

/* The first matrix product that failed since pelab_gemm_take_failure last looked (a bf16
 * product out of memory, a oneDNN error: src/kernels/cpu/matmul.h): its status, 0 when none,
 * and its message. */
struct pelab_gemm_failure {
    int status;
    char message[512];
};

struct pelab_ctx {
    enum pelab_precision precision; /* of the matrix products; set with pelab_precision_set */
    struct pelab_dist dist;         /* the MPI job: pelab_dist_init, else rank 0 of 1 */
    /* Rows per chunk of the evaluation-only forward's MLP, output layer and loss (0: its own rule,
     * about 4 MiB of the widest of them; a test sets a few to run the chunking on tiny models). */
    long eval_rows;
    struct pelab_gemm_failure gemm;
};

/* fp32, rank 0 of 1, the evaluation's own chunks, no failure. */
void pelab_ctx_init(struct pelab_ctx *ctx);

#endif
