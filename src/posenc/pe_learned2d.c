/* learned2d — a learned absolute embedding of (row, column) positions on the training grid,
 * bilinearly interpolated to other grids (ViT, Dosovitskiy et al. 2021; DeiT, Touvron et al. 2021:
 * the APE baseline of the SeqPE paper's image experiments):
 *
 *   table P ∈ R^{(1 + G²) × D}, init normal(0, 0.02); G the training grid's side (the task's)
 *   P[0]                     the class token's position (0, 0), never interpolated
 *   P[1 + (r−1)·G + (c−1)]   grid cell (r, c), 1 ≤ r, c ≤ G
 *
 * A sequence whose largest coordinate is G' (its grid, taken square) reads the G × G part
 * resampled to G' × G' — bilinear, PyTorch's F.interpolate(align_corners=False) as
 * pelab_image_resize — per axis, for coordinate x (1 ≤ x ≤ G'):
 *
 *   u = max(0, (x − 1 + 0.5)·G/G' − 0.5),  i0 = ⌊u⌋,  i1 = min(i0 + 1, G − 1),  λ = u − i0
 *   e(r, c) = Σ over the axes' two taps (1−λr or λr)·(1−λc or λc) · P[1 + ir·G + ic]
 *
 * so G' = G reads the table directly (λ = 0). Site EMBED. Parameter `pos_emb2d.weight`, no weight
 * decay. backward: each tap's row += its weight · dout, over tokens in order (one thread).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/posenc.h"
#include "pelab/status.h"

struct learned2d {
    int table; /* parameter index */
    int G;
    int32_t *tap;    /* (B·T, 4) rows of the table each token reads */
    pelab_real *w;   /* (B·T, 4) their weights */
    long cap;
};

static int learned2d_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    (void)opts;
    if (pe->grid < 1)
        return pelab_fail(PELAB_ERR_USAGE, "--pe learned2d needs a task with a grid of positions (image)");
    struct learned2d *l = calloc(1, sizeof *l);
    if (!l) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = l;
    l->G = pe->grid;
    int64_t shape[2] = {1 + (int64_t)l->G * l->G, pe->D};
    l->table = pelab_params_declare(params, "pos_emb2d.weight", 2, shape, 0);
    return PELAB_OK;
}

static void learned2d_free(struct pelab_posenc *pe) {
    struct learned2d *l = pe->state;
    if (!l) return;
    free(l->tap);
    free(l->w);
    free(l);
}

static void learned2d_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    const struct learned2d *l = pe->state;
    pelab_real *P = pelab_params_data(pe->params, l->table);
    for (long i = 0; i < (1 + (long)l->G * l->G) * pe->D; i++) P[i] = (pelab_real)(0.02 * pelab_rng_normal(rng));
}

/* One axis: coordinate x of a grid of side Gp read from the table's side G: taps i0, i1, weight λ on i1. */
static void axis_taps(int x, int Gp, int G, int *i0, int *i1, double *lam) {
    double u = ((double)(x - 1) + 0.5) * G / Gp - 0.5;
    if (u < 0) u = 0;
    *i0 = (int)floor(u);
    if (*i0 > G - 1) *i0 = G - 1;
    *i1 = *i0 + 1 < G ? *i0 + 1 : G - 1;
    *lam = u - *i0;
    if (*i1 == *i0) *lam = 0;
}

static int learned2d_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct learned2d *l = pe->state;
    const long ntok = (long)B * T;
    for (long i = 0; i < ntok; i++) {
        const int r = pos[2 * i], c = pos[2 * i + 1];
        if (r < 0 || c < 0 || ((r == 0) != (c == 0)))
            return pelab_fail(PELAB_ERR_USAGE, "--pe learned2d: position (%d, %d): grid coordinates "
                              "start at 1, and (0, 0) is the class token's", r, c);
    }
    if (ntok > l->cap) {
        free(l->tap);
        free(l->w);
        l->tap = malloc((size_t)ntok * 4 * sizeof *l->tap);
        l->w = malloc((size_t)ntok * 4 * sizeof *l->w);
        l->cap = l->tap && l->w ? ntok : 0;
        if (!l->cap) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %ld positions", ntok);
    }
    const int G = l->G;
    for (int b = 0; b < B; b++) {
        const int32_t *p = pos + (long)b * T * 2;
        const int Gp = pelab_posenc_grid_side(p, T);
        for (int t = 0; t < T; t++) {
            const long i = (long)b * T + t;
            int32_t *tap = l->tap + 4 * i;
            pelab_real *w = l->w + 4 * i;
            if (p[2 * t] == 0) { /* the class token */
                tap[0] = tap[1] = tap[2] = tap[3] = 0;
                w[0] = 1, w[1] = w[2] = w[3] = 0;
                continue;
            }
            int r0, r1, c0, c1;
            double lr, lc;
            axis_taps(p[2 * t], Gp, G, &r0, &r1, &lr);
            axis_taps(p[2 * t + 1], Gp, G, &c0, &c1, &lc);
            tap[0] = 1 + r0 * G + c0, w[0] = (pelab_real)((1 - lr) * (1 - lc));
            tap[1] = 1 + r0 * G + c1, w[1] = (pelab_real)((1 - lr) * lc);
            tap[2] = 1 + r1 * G + c0, w[2] = (pelab_real)(lr * (1 - lc));
            tap[3] = 1 + r1 * G + c1, w[3] = (pelab_real)(lr * lc);
        }
    }
    return PELAB_OK;
}

static void learned2d_embed_forward(struct pelab_posenc *pe, pelab_real *out, const int32_t *pos,
                                    int B, int T) {
    (void)pos;
    const struct learned2d *l = pe->state;
    const int D = pe->D;
    const pelab_real *P = pelab_params_data(pe->params, l->table);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)B * T; i++) {
        pelab_real *o = out + i * D;
        for (int k = 0; k < 4; k++) {
            const pelab_real w = l->w[4 * i + k], *row = P + (long)l->tap[4 * i + k] * D;
            if (w != 0)
                for (int j = 0; j < D; j++) o[j] += w * row[j];
        }
    }
}

static void learned2d_embed_backward(struct pelab_posenc *pe, const pelab_real *dout, const int32_t *pos,
                                     int B, int T) {
    (void)pos;
    const struct learned2d *l = pe->state;
    const int D = pe->D;
    pelab_real *dP = pelab_params_grad(pe->params, l->table);
    for (long i = 0; i < (long)B * T; i++) {
        const pelab_real *g = dout + i * D;
        for (int k = 0; k < 4; k++) {
            const pelab_real w = l->w[4 * i + k];
            pelab_real *d = dP + (long)l->tap[4 * i + k] * D;
            if (w != 0)
                for (int j = 0; j < D; j++) d[j] += w * g[j];
        }
    }
}

/* e_p of each position: what EMBED adds to its token, the n positions read as one grid (its side
 * their largest coordinate, as a sequence's). */
static int learned2d_position_vectors(struct pelab_posenc *pe, const int32_t *pos, int n, pelab_real *out) {
    int rc = learned2d_prepare(pe, pos, 1, n);
    if (rc) return rc;
    memset(out, 0, (size_t)n * pe->D * sizeof *out);
    learned2d_embed_forward(pe, out, pos, 1, n);
    return PELAB_OK;
}

const struct pelab_posenc_ops pelab_pe_learned2d = {
    .name = "learned2d",
    .summary = "learned table on the training grid of (row, column), bilinearly interpolated to "
               "other grids; its own entry for the class token (ViT, DeiT)",
    .sites = PELAB_SITE_EMBED,
    .dims = 1u << 2,
    .contract = {PELAB_PE_BIDIRECTIONAL, {NULL}},
    .init = learned2d_init,
    .free = learned2d_free,
    .init_params = learned2d_init_params,
    .prepare = learned2d_prepare,
    .embed_forward = learned2d_embed_forward,
    .embed_backward = learned2d_embed_backward,
    .position_vectors = learned2d_position_vectors,
};
