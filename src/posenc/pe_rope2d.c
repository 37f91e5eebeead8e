/* rope2d — axial rotary embedding for (row, column) positions (Heo et al. 2024, "Rotary Position
 * Embedding for Vision Transformer", RoPE-Axial):
 *
 *   of a head's d/2 pairs (interleaved: (x_2c, x_2c+1)), pair c rotates by
 *       r · θ_c          for c < d/4         (the row r)
 *       col · θ_{c−d/4}  for c ≥ d/4         (the column)
 *   θ_j = base^(−2j/(d/2)) = base^(−4j/d), j < d/4: the frequencies of a d/2-wide RoPE, so each
 *   axis spans RoPE's whole range.
 *
 * q_t·k_s then depends on positions only through (r_t − r_s, c_t − c_s): relative on each axis.
 *
 * Evaluation on a larger grid G' > G (the training grid's side; --rope2d-extend): extrapolate
 * (default) turns by the coordinates as they are, so offsets up to G' − 1 appear, of which only
 * those below G were trained; interpolate scales each sequence's coordinates by G/G' (G' its
 * largest coordinate), position interpolation in 2-D: every offset stays within the trained
 * range, and an object resized with the image keeps its offsets in position units.
 * Needs d a multiple of 4. Site QK; no parameters. prepare() fills the cos/sin tables of every
 * (token, pair) once per pass (angles in double); the rotation is rotary.c's.
 */
#include <math.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "posenc/rotary.h"

static const struct pelab_optdef rope2d_options[] = {
    {"rope2d-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL,
     "base of the frequencies θ_j = base^(−4j/d), per axis"},
    {0},
};

static const struct pelab_optdef rope2d_eval_options[] = {
    {"rope2d-extend", PELAB_OPT_CHOICE, "extrapolate", 0, 0, "extrapolate|interpolate",
     "a grid larger than the training one: the coordinates as they are, or scaled by G/G' into "
     "the training grid's range (position interpolation)"},
    {0},
};

struct rope2d {
    struct pelab_rotary rot; /* tables of the current pass, interleaved layout */
    double *theta;           /* (d/4,) θ_j */
    int interpolate;         /* --rope2d-extend interpolate */
};

static int rope2d_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    (void)params;
    if (pe->d % 4)
        return pelab_fail(PELAB_ERR_USAGE, "--pe rope2d needs a head width that is a multiple of 4 "
                          "(d-model/heads = %d)", pe->d);
    struct rope2d *r = calloc(1, sizeof *r);
    if (!r) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = r;
    const double base = pelab_opt_real(opts, rope2d_options, "rope2d-base");
    const int n = pe->d / 4;
    r->theta = malloc((size_t)n * sizeof *r->theta);
    if (!r->theta) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int j = 0; j < n; j++) r->theta[j] = pow(base, -4.0 * j / pe->d);
    r->interpolate = pelab_opt_choice(opts, rope2d_eval_options, "rope2d-extend") == 1;
    return PELAB_OK;
}

static void rope2d_free(struct pelab_posenc *pe) {
    struct rope2d *r = pe->state;
    if (!r) return;
    free(r->theta);
    pelab_rotary_free(&r->rot);
    free(r);
}

/* pos (B,T,2): table row i = [row·θ_0 .. row·θ_{n−1}, col·θ_0 .. col·θ_{n−1}]·scale as cos and
 * sin; scale = G/G' for a sequence of largest coordinate G' > G under interpolate, else 1. */
static int rope2d_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct rope2d *r = pe->state;
    const int n = pe->d / 4, pairs = pe->d / 2;
    if (pelab_rotary_reserve(&r->rot, (long)B * T, pairs, 0)) return PELAB_ERR_RUNTIME;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        const int32_t *seq = pos + (long)b * T * 2;
        const int Gp = r->interpolate && pe->grid > 0 ? pelab_posenc_grid_side(seq, T) : 0;
        const double scale = Gp > pe->grid ? (double)pe->grid / Gp : 1;
        for (int t = 0; t < T; t++) {
            const long i = (long)b * T + t;
            for (int axis = 0; axis < 2; axis++)
                for (int j = 0; j < n; j++) {
                    const double a = (double)seq[2 * t + axis] * scale * r->theta[j];
                    r->rot.cos_q[i * pairs + axis * n + j] = (pelab_real)cos(a);
                    r->rot.sin_q[i * pairs + axis * n + j] = (pelab_real)sin(a);
                }
        }
    }
    return PELAB_OK;
}

static void rope2d_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                              const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                              int B, int T) {
    (void)layer, (void)pos;
    const struct rope2d *r = pe->state;
    pelab_rotary_apply(&r->rot, qo, ko, q, k, ld, B, T, pe->H, pe->d, 0);
}

static void rope2d_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                               const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                               const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    (void)layer, (void)pos, (void)q, (void)k;
    const struct rope2d *r = pe->state;
    pelab_rotary_apply(&r->rot, dq, dk, dqo, dko, ld, B, T, pe->H, pe->d, 1);
}

const struct pelab_posenc_ops pelab_pe_rope2d = {
    .name = "rope2d",
    .summary = "axial rotary embedding of (row, column): half the pairs turn with the row, half "
               "with the column (Heo et al. 2024, RoPE-Axial)",
    .sites = PELAB_SITE_QK,
    .dims = 1u << 2,
    .contract = {PELAB_PE_RELATIVE | PELAB_PE_BIDIRECTIONAL, {NULL}},
    .options = rope2d_options,
    .eval_options = rope2d_eval_options,
    .init = rope2d_init,
    .free = rope2d_free,
    .prepare = rope2d_prepare,
    .qk_forward = rope2d_qk_forward,
    .qk_backward = rope2d_qk_backward,
};
