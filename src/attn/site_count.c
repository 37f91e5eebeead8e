/* The COUNT site: positions the content counts (CoPE, posenc/pe_cope.c). The encoding gives, per
 * query t, the logits z_t (P,) of the counted positions 0..P−1 from the queries after QK; the
 * kernels form the gates and their running sums over keys (the arithmetic: attn/count.h):
 *
 *   g_u = σ(S⁰[t,u]);  p_s = Σ_{u=s..t} g_u;  S[t,s] = S⁰[t,s] + z_t(p_s)
 *
 * The count runs right to left from the diagonal, so the tiled forward visits a query tile's key
 * blocks from its diagonal back (right_to_left), carrying each row's count across them, and keeps
 * each row's total (cnt, in double, one number a row beside the log-sum-exp). Its backward visits
 * the blocks from key 0 up, where p_s = total − Σ_{u<s} g_u and the gates' gradient
 * dg_u = Σ_{s≤u} dp_s are both running sums in that order (the two carries), with each block's
 * gates and counts in its scratch: nothing of size T × T. The reference kernel keeps the gates
 * (B,H,T,T) and runs each whole row backward from them. The hooks are compiled for each vector
 * level (kernels/cpu/simd.h), as the kernels' own loops are: the gates' exponentials vectorise.
 */
#include "attn/count.h"
#include "attn/sites.h"
#include "kernels/cpu/simd.h"

enum { Z, GATES, CNT }; /* its buffers, as declared below */

/* Per row r: S⁰ → S over its visible keys, continuing its count (carry 0) from the block after
 * it; the reference kernel saves the gates, the tiled one the count so far (its total at the end). */
static PELAB_ALWAYS_INLINE void count_forward_body(const struct pelab_site_block *c) {
    const int P = c->s->pe->count_max, T = c->s->T;
    const pelab_real *z = c->buf[Z];
    pelab_real *gates = c->buf[GATES];
    double *cnt = c->buf[CNT];
    for (int r = 0; r < c->nq; r++) {
        const long row = pelab_site_query(c, r);
        double *run = &c->carry[2 * r];
        *run = pelab_count_row(c->S + r * c->ld, gates ? gates + row * T + c->j0 : NULL, pelab_site_visible(c, r),
                               z + row * P, P, *run);
        if (cnt) cnt[row] = *run;
    }
}

/* Reference backward, whole rows (j0 = 0): dS → the gradient at S⁰ from the saved gates; dz +=. */
static PELAB_ALWAYS_INLINE void count_backward_body(const struct pelab_site_block *c) {
    const int P = c->s->pe->count_max, T = c->s->T;
    const pelab_real *z = c->buf[Z], *gates = c->buf[GATES];
    for (int r = 0; r < c->nq; r++) {
        const long row = pelab_site_query(c, r);
        pelab_count_row_backward(c->S + r * c->ld, gates + row * T, pelab_site_visible(c, r), z + row * P, P,
                                 c->grad[Z] + row * P);
    }
}

/* The tiled backward's block scratch: each entry's count p (double) and gate, (tile, tile) each. */
static size_t count_tile_scratch(const struct pelab_posenc *pe, int tile) {
    return (size_t)tile * tile * (sizeof(double) + sizeof(pelab_real));
}

/* Tiled backward, blocks from key 0 up: the count left to right, p_s = cnt − Σ_{u<s} g_u (carry 0
 * sums the gates), S⁰ → S; each entry's p and gate kept for count_tile_backward. */
static PELAB_ALWAYS_INLINE void count_tile_recompute_body(const struct pelab_site_block *c) {
    const int P = c->s->pe->count_max, tile = c->nk;
    const pelab_real *zs = c->buf[Z];
    const double *cnt = c->buf[CNT];
    double *p_all = c->scratch;
    pelab_real *g_all = (pelab_real *)(p_all + (long)c->nq * tile), slope;
    for (int r = 0; r < c->nq; r++) {
        const long row = pelab_site_query(c, r);
        const int n = pelab_site_visible(c, r);
        const pelab_real *z = zs + row * P;
        const double total = cnt[row];
        pelab_real *sc = c->S + r * c->ld, *g = g_all + (long)r * tile;
        double *p = p_all + (long)r * tile, *run = &c->carry[2 * r];
#pragma omp simd
        for (int j = 0; j < n; j++) g[j] = pelab_count_gate(sc[j]);
        for (int j = 0; j < n; j++) {
            p[j] = total - *run;
            *run += g[j];
            sc[j] += pelab_count_logit(z, P, p[j], &slope);
        }
    }
}

/* Tiled backward: dS → the gradient at S⁰, dg_u = Σ_{s≤u} dp_s summed in carry 1; dz +=. */
static PELAB_ALWAYS_INLINE void count_tile_backward_body(const struct pelab_site_block *c) {
    const int P = c->s->pe->count_max, tile = c->nk;
    const pelab_real *zs = c->buf[Z];
    const double *p_all = c->scratch;
    const pelab_real *g_all = (const pelab_real *)(p_all + (long)c->nq * tile);
    for (int r = 0; r < c->nq; r++) {
        const long row = pelab_site_query(c, r);
        const int n = pelab_site_visible(c, r);
        const pelab_real *z = zs + row * P, *g = g_all + (long)r * tile;
        const double *p = p_all + (long)r * tile;
        pelab_real *ds = c->S + r * c->ld, *dz = c->grad[Z] + row * P, slope;
        double *drun = &c->carry[2 * r + 1];
        for (int j = 0; j < n; j++) {
            pelab_count_logit(z, P, p[j], &slope);
            pelab_count_logit_backward(dz, P, p[j], ds[j]);
            *drun += (double)ds[j] * slope;
            ds[j] += (pelab_real)*drun * g[j] * (1 - g[j]);
        }
    }
}

PELAB_SIMD_KERNEL(count_forward, (const struct pelab_site_block *c), (c))
PELAB_SIMD_KERNEL(count_backward, (const struct pelab_site_block *c), (c))
PELAB_SIMD_KERNEL(count_tile_recompute, (const struct pelab_site_block *c), (c))
PELAB_SIMD_KERNEL(count_tile_backward, (const struct pelab_site_block *c), (c))

static void count_forward(const struct pelab_site_block *c) { pelab_simd_fn(count_forward)(c); }
static void count_backward(const struct pelab_site_block *c) { pelab_simd_fn(count_backward)(c); }
static void count_tile_recompute(const struct pelab_site_block *c) { pelab_simd_fn(count_tile_recompute)(c); }
static void count_tile_backward(const struct pelab_site_block *c) { pelab_simd_fn(count_tile_backward)(c); }

const struct pelab_pe_site_decl pelab_site_count = {
    .name = "COUNT",
    .bit = PELAB_SITE_COUNT,
    .summary = "counts positions by gates on the logits, adds each query's logit of its count",
    .reads = PELAB_PE_READS_Q,
    .bufs = {{"z", "the encoding's logits of counted positions", "BHTP", PELAB_PE_OUT},
             {"gates", "the count's gates", "BHTT", PELAB_PE_SAVED_REF},
             {"cnt", "each row's count", "BHT", PELAB_PE_SAVED_TILED | PELAB_PE_DOUBLE}},
    .right_to_left = 1,
    .tile_scratch = count_tile_scratch,
    .forward = count_forward,
    .backward = count_backward,
    .tile_recompute = count_tile_recompute,
    .tile_backward = count_tile_backward,
};
