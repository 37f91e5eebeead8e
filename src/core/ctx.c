/* The context's defaults (pelab/ctx.h). */
#include "pelab/ctx.h"
#include <string.h>

void pelab_ctx_init(struct pelab_ctx *ctx) {
    memset(ctx, 0, sizeof *ctx);
    ctx->precision = PELAB_PRECISION_FP32;
    ctx->dist.size = 1; /* rank 0 of 1, MPI not started */
}
