/* The COUNT site's arithmetic (posenc.h: positions the content counts, CoPE), shared by the three
 * attention kernels. For query t, with S⁰ its logits as the other terms make them:
 *
 *   g_u = σ(S⁰[t,u]);  p_s = Σ_{u=s..t} g_u  (visible keys u only);  S[t,s] = S⁰[t,s] + z_t(p_s)
 *   z_t(p) = z[⌊p⌋] + (p − ⌊p⌋)·(z[⌊p⌋+1] − z[⌊p⌋])   for p < P − 1;  z[P − 1] beyond (clamped)
 *
 * backward, from dS[t,s] = ∂L/∂S[t,s]:
 *   dz[⌊p_s⌋] += dS (1 − w), dz[⌊p_s⌋+1] += dS w  (w = p_s − ⌊p_s⌋; dz[P − 1] += dS when clamped)
 *   dp_s = dS · ∂z_t/∂p (0 when clamped);  dg_u = Σ_{s≤u} dp_s  (p_s sums the gates from s on)
 *   ∂L/∂S⁰[t,u] = dS[t,u] + dg_u · g_u (1 − g_u)
 */
#ifndef PELAB_ATTN_COUNT_H
#define PELAB_ATTN_COUNT_H

#include "kernels/cpu/simd.h"
#include "kernels/cpu/vmath.h"
#include "pelab/real.h"

static PELAB_ALWAYS_INLINE pelab_real pelab_count_gate(pelab_real s) { return 1 / (1 + pelab_vexp(-s)); }

/* z_t(p) for query t's logits z (P,), and *slope = ∂z_t/∂p, without a branch: p clamped to P − 1
 * (where lo = hi and the slope is 0); a NaN count takes the clamp too, and p − p (0 otherwise)
 * keeps it a NaN, never an index. */
static PELAB_ALWAYS_INLINE pelab_real pelab_count_logit(const pelab_real *z, int P, double p, pelab_real *slope) {
    const double q = p < P - 1 ? p : P - 1;
    const int lo = (int)q, hi = lo + 1 < P ? lo + 1 : lo;
    *slope = z[hi] - z[lo];
    return z[lo] + (pelab_real)(q - lo) * *slope + (pelab_real)(p - p);
}

/* dz (P,) += g · ∂z_t(p)/∂z, the same clamp */
static PELAB_ALWAYS_INLINE void pelab_count_logit_backward(pelab_real *dz, int P, double p, pelab_real g) {
    const double q = p < P - 1 ? p : P - 1;
    const int lo = (int)q, hi = lo + 1 < P ? lo + 1 : lo;
    const pelab_real w = (pelab_real)(q - lo);
    dz[lo] += g * (1 - w) + (pelab_real)(p - p);
    dz[hi] += g * w;
}

/* Keys 0..n−1 of one row, right to left, continuing a count p0 of the gates of the keys after
 * them: row S⁰ → S, each gate into gate[] when not NULL. Returns the count at key 0. The count is
 * summed in double, so that a key near the query and one thousands of keys back both get theirs
 * to float's precision; the gates of a chunk of keys are formed apart from it, so that their
 * exponentials vectorise. */
static PELAB_ALWAYS_INLINE double pelab_count_row(pelab_real *row, pelab_real *gate, int n, const pelab_real *z, int P,
                                     double p0) {
    enum { CHUNK = 64 };
    pelab_real g[CHUNK];
    double pc[CHUNK], p = p0;
    for (int end = n; end > 0; end -= CHUNK) {
        const int start = end > CHUNK ? end - CHUNK : 0, m = end - start;
#pragma omp simd
        for (int i = 0; i < m; i++) g[i] = pelab_count_gate(row[start + i]);
        for (int i = m - 1; i >= 0; i--) pc[i] = p += g[i]; /* the scan, alone serial */
#pragma omp simd
        for (int i = 0; i < m; i++) {
            pelab_real slope;
            row[start + i] += pelab_count_logit(z, P, pc[i], &slope);
        }
        for (int i = 0; gate && i < m; i++) gate[start + i] = g[i];
    }
    return p;
}

/* The backward of a whole row's pelab_count_row (p0 = 0), given its gates: ds (n,) the gradient at
 * S becomes the gradient at S⁰; dz (P,) +=. Two passes right to left: the first sums every dp_s
 * (DP), the second takes dg_u = DP − Σ_{s>u} dp_s. */
static PELAB_ALWAYS_INLINE void pelab_count_row_backward(pelab_real *ds, const pelab_real *gate, int n, const pelab_real *z,
                                            int P, pelab_real *dz) {
    double p = 0, DP = 0;
    pelab_real slope;
    for (int j = n - 1; j >= 0; j--) {
        p += gate[j];
        pelab_count_logit(z, P, p, &slope);
        DP += (double)ds[j] * slope;
        pelab_count_logit_backward(dz, P, p, ds[j]);
    }
    double after = 0; /* Σ_{s>u} dp_s */
    p = 0;
    for (int u = n - 1; u >= 0; u--) {
        p += gate[u];
        pelab_count_logit(z, P, p, &slope);
        const double dp = (double)ds[u] * slope;
        ds[u] += (pelab_real)(DP - after) * gate[u] * (1 - gate[u]);
        after += dp;
    }
}

#endif
