/* SeqPE's two regularisers (Li et al. 2025, §3.3–3.4 and App. A.2–A.3): which positions they
 * look at (a random draw, a function of a key) and their losses on the encoder's embeddings.
 *
 * L_δ, distance alignment (Eq. 9). Per pivot p, uniform in [0, Lmax)^n, a candidate set C of
 * |C| positions other than p, drawn either way with probability 1/2:
 *   global  a few digit edits of p (|C|/8, at least 1: swap two digits, drop one, or insert one,
 *           in one coordinate written in base b without leading zeros), then random positions in
 *           [0, Lmax)^n, all distinct;
 *   local   distinct positions of one window around p: a side of ⌈max(256, |C|+1)^(1/n)⌉ per
 *           coordinate (at most Lmax), placed uniformly among those that contain p.
 *   p⁺ = the candidate nearest p in Euclidean distance (the first such in C's order);
 *   L_δ = mean over pivots of −log softmax_{c∈C}(e_p·e_c)[p⁺]
 *   ∂/∂z_c = (softmax_c − [c = p⁺]) / pivots,  z_c = e_p·e_c:  de_p += ∂z_c·e_c,  de_c += ∂z_c·e_p
 *
 * L_OOD, distillation to shifted positions (Eq. 10, multi-head as App. A.3). Per set, m distinct
 * teacher positions p_i in the training range [0, L)^n, one shift z uniform in [0, Lmax − L)^n,
 * students p_i + z. Each embedding is split into H chunks of D/H (the model's heads); per head h
 *   P_h = softmax_rows(e_{p_i}^h · e_{p_j}^h),   S_h = softmax_rows(e_{p_i+z}^h · e_{p_j+z}^h)  (m×m)
 *   L_OOD = mean over sets, heads and rows i of KL(P_h,i ‖ S_h,i),  P held constant (stop-grad)
 *   ∂/∂(student logit ij) = (S_ij − P_ij) / (sets·H·m); a logit e_i·e_j sends that times e_j to
 *   e_i and times e_i to e_j. Teachers get no gradient.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/status.h"
#include "posenc/seqpe.h"

/* --- drawing positions -------------------------------------------------------------------- */

static int same(const int32_t *a, const int32_t *b, int n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

static int in_list(const int32_t *list, int count, const int32_t *p, int n) {
    for (int i = 0; i < count; i++)
        if (same(list + (long)i * n, p, n)) return 1;
    return 0;
}

/* One digit edit of value v in base b (no leading zeros; 0 is "0"): swap two digits that differ,
 * drop a digit, or insert a digit; -1 when the drawn edit does not apply. */
static int64_t digit_edit(int64_t v, int base, struct pelab_rng *rng) {
    int d[40], k = 0;
    do {
        d[k++] = (int)(v % base);
        v /= base;
    } while (v > 0 && k < 39); /* d[0] least significant */
    switch (pelab_rng_below(rng, 3)) {
    case 0: { /* swap */
        if (k < 2) return -1;
        int i = (int)pelab_rng_below(rng, (uint64_t)k), j = (int)pelab_rng_below(rng, (uint64_t)k);
        if (d[i] == d[j]) return -1;
        int t = d[i];
        d[i] = d[j], d[j] = t;
        break;
    }
    case 1: { /* drop */
        if (k < 2) return -1;
        int i = (int)pelab_rng_below(rng, (uint64_t)k);
        memmove(d + i, d + i + 1, (size_t)(k - i - 1) * sizeof *d);
        k--;
        break;
    }
    default: { /* insert */
        int i = (int)pelab_rng_below(rng, (uint64_t)k + 1);
        memmove(d + i + 1, d + i, (size_t)(k - i) * sizeof *d);
        d[i] = (int)pelab_rng_below(rng, (uint64_t)base);
        k++;
        break;
    }
    }
    int64_t r = 0;
    for (int i = k - 1; i >= 0; i--) {
        r = r * base + d[i];
        if (r > INT32_MAX) return -1;
    }
    return r;
}

static void random_pos(int32_t *p, int n, int64_t lo, int64_t span, struct pelab_rng *rng) {
    for (int c = 0; c < n; c++) p[c] = (int32_t)(lo + (int64_t)pelab_rng_below(rng, (uint64_t)span));
}

/* Window side per coordinate for the local sets: ⌈max(256, |C|+1)^(1/n)⌉, at most Lmax. */
static int64_t window_side(const struct pelab_seqpe_reg *r) {
    const double want = r->cands + 1 > 256 ? r->cands + 1 : 256;
    int64_t w = (int64_t)ceil(pow(want, 1.0 / r->dims) - 1e-9);
    while (pow((double)w, r->dims) < want) w++;
    return w < r->max_pos ? w : r->max_pos;
}

/* The candidates of one pivot (row[0] the pivot, row[1..C] its set); returns p⁺'s index in C. */
static int draw_candidates(const struct pelab_seqpe_reg *r, int32_t *row, struct pelab_rng *rng) {
    const int n = r->dims, C = r->cands;
    const int32_t *p = row;
    int32_t *cand = row + n, q[PELAB_SEQPE_DIMS_MAX];
    int count = 0;
    if (pelab_rng_below(rng, 2) == 0) { /* global: digit edits, then random positions */
        const int n_edit = C / 8 > 0 ? C / 8 : 1;
        for (int tries = 0; count < n_edit && tries < 16 * n_edit; tries++) {
            memcpy(q, p, (size_t)n * sizeof *q);
            const int c = (int)pelab_rng_below(rng, (uint64_t)n);
            const int64_t v = digit_edit(p[c], r->base, rng);
            if (v < 0 || v >= r->max_pos) continue;
            q[c] = (int32_t)v;
            if (same(q, p, n) || in_list(cand, count, q, n)) continue;
            memcpy(cand + (long)count++ * n, q, (size_t)n * sizeof *q);
        }
        while (count < C) {
            random_pos(q, n, 0, r->max_pos, rng);
            if (same(q, p, n) || in_list(cand, count, q, n)) continue;
            memcpy(cand + (long)count++ * n, q, (size_t)n * sizeof *q);
        }
    } else { /* local: one window that holds p */
        const int64_t w = window_side(r);
        int64_t left[PELAB_SEQPE_DIMS_MAX];
        for (int c = 0; c < n; c++) {
            int64_t lo = p[c] - w + 1 > 0 ? p[c] - w + 1 : 0, hi = p[c] < r->max_pos - w ? p[c] : r->max_pos - w;
            left[c] = lo + (int64_t)pelab_rng_below(rng, (uint64_t)(hi - lo + 1));
        }
        while (count < C) {
            for (int c = 0; c < n; c++) q[c] = (int32_t)(left[c] + (int64_t)pelab_rng_below(rng, (uint64_t)w));
            if (same(q, p, n) || in_list(cand, count, q, n)) continue;
            memcpy(cand + (long)count++ * n, q, (size_t)n * sizeof *q);
        }
    }
    return pelab_seqpe_nearest(p, cand, C, n);
}

int pelab_seqpe_nearest(const int32_t *p, const int32_t *cand, int C, int n) {
    int best = 0;
    double best_d = INFINITY;
    for (int i = 0; i < C; i++) {
        double d = 0;
        for (int c = 0; c < n; c++) {
            double x = (double)cand[(long)i * n + c] - p[c];
            d += x * x;
        }
        if (d < best_d) best_d = d, best = i;
    }
    return best;
}

/* m distinct teachers in [0, L)^n (a partial shuffle of the range's indices), one shift, the
 * students. */
static void draw_ood(const struct pelab_seqpe_reg *r, int32_t *set, struct pelab_rng *rng, int32_t *perm) {
    const int n = r->dims, m = r->ood_m;
    long total = 1;
    for (int c = 0; c < n; c++) total *= r->train_len;
    for (long i = 0; i < total; i++) perm[i] = (int32_t)i;
    int32_t z[PELAB_SEQPE_DIMS_MAX];
    random_pos(z, n, 0, r->max_pos - r->train_len, rng);
    for (int i = 0; i < m; i++) {
        long j = i + (long)pelab_rng_below(rng, (uint64_t)(total - i));
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
        long idx = perm[i];
        for (int c = n - 1; c >= 0; c--) { /* index → coordinates, last coordinate fastest */
            set[(long)i * n + c] = (int32_t)(idx % r->train_len);
            set[((long)m + i) * n + c] = (int32_t)(idx % r->train_len) + z[c];
            idx /= r->train_len;
        }
    }
}

int pelab_seqpe_reg_init(struct pelab_seqpe_reg *r, int dims, int base, int64_t max_pos,
                         int train_len, int pivots, int cands, int sets, int m) {
    memset(r, 0, sizeof *r);
    r->dims = dims, r->base = base, r->max_pos = max_pos, r->train_len = train_len;
    r->pivots = pivots, r->cands = cands, r->sets = sets, r->ood_m = m;
    PELAB_ASSERT(dims >= 1 && dims <= PELAB_SEQPE_DIMS_MAX);
    double space = pow((double)max_pos, dims), train = pow((double)train_len, dims);
    if (pivots && space < cands + 1.0)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-candidates %d needs more positions than the "
                          "%.0f below --seqpe-max-pos %lld", cands, space, (long long)max_pos);
    if (sets && max_pos <= train_len)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-max-pos %lld leaves no room to shift the "
                          "training context (%d) for --seqpe-beta", (long long)max_pos, train_len);
    if (sets && train < m)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-ood-positions %d is more than the %.0f "
                          "positions of the training range", m, train);
    const long per_pivot = 1L + cands, per_set = 2L * m;
    r->delta_pos = malloc((size_t)(pivots * per_pivot * dims + 1) * sizeof *r->delta_pos);
    r->target = malloc((size_t)(pivots + 1) * sizeof *r->target);
    r->ood_pos = malloc((size_t)(sets * per_set * dims + 1) * sizeof *r->ood_pos);
    r->perm = malloc((size_t)(sets ? train : 1) * sizeof *r->perm);
    if (!r->delta_pos || !r->target || !r->ood_pos || !r->perm)
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the SeqPE regularisers");
    return PELAB_OK;
}

void pelab_seqpe_reg_free(struct pelab_seqpe_reg *r) {
    free(r->delta_pos);
    free(r->target);
    free(r->ood_pos);
    free(r->perm);
    memset(r, 0, sizeof *r);
}

void pelab_seqpe_reg_draw(struct pelab_seqpe_reg *r, uint64_t key) {
    struct pelab_rng rng;
    pelab_rng_seed(&rng, pelab_hash64(key ^ 0x5E9E4E6D15EEDull));
    const int n = r->dims;
    for (int i = 0; i < r->pivots; i++) {
        int32_t *row = r->delta_pos + (long)i * (1 + r->cands) * n;
        random_pos(row, n, 0, r->max_pos, &rng);
        r->target[i] = draw_candidates(r, row, &rng);
    }
    for (int s = 0; s < r->sets; s++) draw_ood(r, r->ood_pos + (long)s * 2 * r->ood_m * n, &rng, r->perm);
}

/* --- the losses --------------------------------------------------------------------------- */

static double dot_in_double(const pelab_real *a, const pelab_real *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* In place: z (n,) → softmax; returns log Σ exp(z). */
static double softmax(double *z, int n) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) mx = z[i] > mx ? z[i] : mx;
    for (int i = 0; i < n; i++) sum += (z[i] = exp(z[i] - mx));
    for (int i = 0; i < n; i++) z[i] /= sum;
    return mx + log(sum);
}

double pelab_seqpe_delta_loss(const pelab_real *E, int D, const int32_t *row,
                              const int32_t *target, int pivots, int C, pelab_real *dE,
                              double scale) {
    double loss = 0, *z = malloc((size_t)C * sizeof *z);
    if (!z) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for L_delta (%d candidates)", C), NAN;
    for (int i = 0; i < pivots; i++) {
        const int32_t *r = row + (long)i * (1 + C);
        const pelab_real *ep = E + (long)r[0] * D;
        for (int c = 0; c < C; c++) z[c] = dot_in_double(ep, E + (long)r[1 + c] * D, D);
        const double zt = z[target[i]];
        loss += softmax(z, C) - zt;
        if (!dE) continue;
        pelab_real *dp = dE + (long)r[0] * D;
        for (int c = 0; c < C; c++) {
            const double g = scale * (z[c] - (c == target[i])) / pivots;
            const pelab_real *ec = E + (long)r[1 + c] * D;
            pelab_real *dc = dE + (long)r[1 + c] * D;
            for (int j = 0; j < D; j++) {
                dp[j] += (pelab_real)(g * ec[j]);
                dc[j] += (pelab_real)(g * ep[j]);
            }
        }
    }
    free(z);
    return pivots ? loss / pivots : 0;
}

double pelab_seqpe_ood_loss(const pelab_real *E, int D, int H, const int32_t *row, int sets, int m,
                            pelab_real *dE, double scale) {
    const int dh = D / H;
    PELAB_ASSERT(D % H == 0);
    double loss = 0, *zp = malloc((size_t)m * sizeof *zp), *zs = malloc((size_t)m * sizeof *zs);
    if (!zp || !zs) {
        free(zp);
        free(zs);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for L_OOD (%d positions)", m), NAN;
    }
    const double norm = (double)sets * H * m;
    for (int s = 0; s < sets; s++) {
        const int32_t *tr = row + (long)s * 2 * m, *st = tr + m;
        for (int h = 0; h < H; h++)
            for (int i = 0; i < m; i++) {
                const pelab_real *ti = E + (long)tr[i] * D + (long)h * dh;
                const pelab_real *si = E + (long)st[i] * D + (long)h * dh;
                for (int j = 0; j < m; j++) {
                    zp[j] = dot_in_double(ti, E + (long)tr[j] * D + (long)h * dh, dh);
                    zs[j] = dot_in_double(si, E + (long)st[j] * D + (long)h * dh, dh);
                }
                /* KL(P‖S) = Σ_j P_j (log P_j − log S_j), the logs as z − log Σ exp z */
                double lp = -INFINITY, ls = -INFINITY;
                for (int j = 0; j < m; j++) lp = zp[j] > lp ? zp[j] : lp, ls = zs[j] > ls ? zs[j] : ls;
                double sp = 0, ss = 0;
                for (int j = 0; j < m; j++) sp += exp(zp[j] - lp), ss += exp(zs[j] - ls);
                lp += log(sp), ls += log(ss);
                for (int j = 0; j < m; j++) loss += exp(zp[j] - lp) * ((zp[j] - lp) - (zs[j] - ls));
                if (!dE) continue;
                pelab_real *dsi = dE + (long)st[i] * D + (long)h * dh;
                for (int j = 0; j < m; j++) {
                    const double g = scale * (exp(zs[j] - ls) - exp(zp[j] - lp)) / norm;
                    const pelab_real *sj = E + (long)st[j] * D + (long)h * dh;
                    pelab_real *dsj = dE + (long)st[j] * D + (long)h * dh;
                    for (int c = 0; c < dh; c++) {
                        dsi[c] += (pelab_real)(g * sj[c]);
                        dsj[c] += (pelab_real)(g * si[c]);
                    }
                }
            }
    }
    free(zp);
    free(zs);
    return sets ? loss / norm : 0;
}
