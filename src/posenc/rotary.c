/* The rotation shared by the rotary encodings (rope, xpos): per-pass cos/sin tables with an
 * amplitude folded in, and the pair rotation of every head vector.
 *
 *   forward  (x, y) → (x·c − y·s, x·s + y·c)          c = a·cos φ, s = a·sin φ
 *   backward (dx, dy) → (dx·c + dy·s, −dx·s + dy·c)    the transpose, a·Rᵀ
 */
#include <math.h>
#include <stdlib.h>
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "pelab/status.h"
#include "posenc/rotary.h"

/* Grows a pair of tables to n elements each. */
static int reserve(pelab_real **a, pelab_real **b, long *cap, long n) {
    if (n <= *cap) return PELAB_OK;
    free(*a);
    free(*b);
    *a = malloc((size_t)n * sizeof **a);
    *b = malloc((size_t)n * sizeof **b);
    if (!*a || !*b) { /* neither kept: a table of cap 0 owns nothing */
        free(*a);
        free(*b);
        *a = *b = NULL;
        *cap = 0;
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for rotary tables (%ld entries)", n);
    }
    *cap = n;
    return PELAB_OK;
}

int pelab_rotary_reserve(struct pelab_rotary *r, long ntok, int n, int separate_keys) {
    long need = ntok * n;
    if (reserve(&r->cos_q, &r->sin_q, &r->cap, need)) return PELAB_ERR_RUNTIME;
    if (!separate_keys) {
        if (r->cap_k) free(r->cos_k), free(r->sin_k), r->cap_k = 0;
        r->cos_k = r->cos_q, r->sin_k = r->sin_q;
        return PELAB_OK;
    }
    if (!r->cap_k) r->cos_k = r->sin_k = NULL; /* they were aliases, not owned */
    return reserve(&r->cos_k, &r->sin_k, &r->cap_k, need);
}

int pelab_rotary_tables(struct pelab_rotary *r, const int32_t *pos, long ntok, const double *theta,
                        int n, double pos_div, double amp, int n_amp) {
    if (pelab_rotary_reserve(r, ntok, n, 0)) return PELAB_ERR_RUNTIME;
    pelab_real *cs = r->cos_q, *sn = r->sin_q;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < ntok; i++) {
        double p = pos_div == 1 ? (double)pos[i] : (double)pos[i] / pos_div;
        for (int c = 0; c < n; c++) {
            const double a = p * theta[c], scale = c < n_amp ? amp : 1;
            cs[i * n + c] = (pelab_real)(scale * cos(a));
            sn[i * n + c] = (pelab_real)(scale * sin(a));
        }
    }
    return PELAB_OK;
}

void pelab_rotary_free(struct pelab_rotary *r) {
    if (r->cap_k) {
        free(r->cos_k);
        free(r->sin_k);
    }
    free(r->cos_q);
    free(r->sin_q);
    r->cos_q = r->sin_q = r->cos_k = r->sin_k = NULL;
    r->cap = r->cap_k = 0;
}

/* Rotates one head vector x (d,) by one token's tables; sign −1 applies the transpose. One loop
 * per layout, so that each vectorises (the interleaved one with even/odd shuffles). */
static PELAB_ALWAYS_INLINE void rotate(pelab_real *restrict out, const pelab_real *restrict x,
                          const pelab_real *restrict cs, const pelab_real *restrict sn, int half,
                          int d, pelab_real sign) {
    const int P = d / 2;
    if (half) {
#pragma omp simd
        for (int c = 0; c < P; c++) {
            const pelab_real a = x[c], b = x[c + P], s = sign * sn[c];
            out[c] = a * cs[c] - b * s;
            out[c + P] = a * s + b * cs[c];
        }
    } else {
#pragma omp simd
        for (int c = 0; c < P; c++) {
            const pelab_real a = x[2 * c], b = x[2 * c + 1], s = sign * sn[c];
            out[2 * c] = a * cs[c] - b * s;
            out[2 * c + 1] = a * s + b * cs[c];
        }
    }
}

/* Tokens i0 .. i1−1 (token i = b·T + t) of pelab_rotary_apply, compiled for each vector level
 * (kernels/cpu/simd.h). */
static PELAB_ALWAYS_INLINE void apply_body(const struct pelab_rotary *r, pelab_real *qo, pelab_real *ko,
                                           const pelab_real *q, const pelab_real *k, int ld, int T, int H,
                                           int d, int inverse, long i0, long i1) {
    const int P = d / 2, half = r->half;
    const pelab_real sign = inverse ? -1 : 1;
    for (long i = i0; i < i1; i++) {
        const long b = i / T, t = i % T;
        const pelab_real *cq = r->cos_q + i * P, *sq = r->sin_q + i * P;
        const pelab_real *ck = r->cos_k + i * P, *sk = r->sin_k + i * P;
        for (int h = 0; h < H; h++) {
            long row = i * ld + (long)h * d, head = ((b * H + h) * T + t) * d;
            if (!inverse) {
                rotate(qo + head, q + row, cq, sq, half, d, sign);
                rotate(ko + head, k + row, ck, sk, half, d, sign);
            } else { /* q, k are the gradients in head layout; qo, ko the (B,T,H,d) outputs */
                rotate(qo + row, q + head, cq, sq, half, d, sign);
                rotate(ko + row, k + head, ck, sk, half, d, sign);
            }
        }
    }
}
PELAB_SIMD_KERNEL(apply, (const struct pelab_rotary *r, pelab_real *qo, pelab_real *ko, const pelab_real *q,
                          const pelab_real *k, int ld, int T, int H, int d, int inverse, long i0, long i1),
                  (r, qo, ko, q, k, ld, T, H, d, inverse, i0, i1))

void pelab_rotary_apply(const struct pelab_rotary *r, pelab_real *qo, pelab_real *ko,
                        const pelab_real *q, const pelab_real *k, int ld, int B, int T, int H, int d,
                        int inverse) {
    void (*const f)(const struct pelab_rotary *, pelab_real *, pelab_real *, const pelab_real *,
                    const pelab_real *, int, int, int, int, int, long, long) = pelab_simd_fn(apply);
#pragma omp parallel
    {
        long lo, hi;
        pelab_thread_slice((long)B * T, &lo, &hi);
        f(r, qo, ko, q, k, ld, T, H, d, inverse, lo, hi);
    }
}

void pelab_rotary_pair_norms(int half, double *out, const pelab_real *x, int d) {
    const int P = d / 2;
    for (int c = 0; c < P; c++) {
        double a = x[half ? c : 2 * c], b = x[half ? c + P : 2 * c + 1];
        out[c] = sqrt(a * a + b * b);
    }
}
