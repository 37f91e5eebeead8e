/* Token embedding lookup and its gradient. */
#include <string.h>
#include "core/prof.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/layers.h"

void pelab_embed_forward(pelab_real *out, const int32_t *tokens, const pelab_real *wte, int N, int C) {
    PELAB_PROF_START();
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++)
        memcpy(out + (long)i * C, wte + (long)tokens[i] * C, (size_t)C * sizeof *out);
    PELAB_PROF_STOP(PELAB_PROF_EMBED, 0);
}

/* Tokens repeat, so rows of dwte are summed into from many positions: threads split the columns
 * and each walks the tokens in order, which keeps every sum's order fixed. */
void pelab_embed_backward(pelab_real *dwte, const pelab_real *dout, const int32_t *tokens, int N, int C) {
    PELAB_PROF_START();
#pragma omp parallel
    {
        long c0, c1;
        pelab_thread_slice(C, &c0, &c1);
        for (int i = 0; i < N; i++) {
            pelab_real *d = dwte + (long)tokens[i] * C;
            const pelab_real *g = dout + (long)i * C;
            for (long c = c0; c < c1; c++) d[c] += g[c];
        }
    }
    PELAB_PROF_STOP(PELAB_PROF_EMBED, 0);
}
