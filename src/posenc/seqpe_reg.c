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
 *
 * The authors' code (ghrua/seqpe, text_seqpe/src/transformers/custom_modules/pe_sampler.py and
 * pe_criterion.py; struct pelab_seqpe_reg_style chooses each) differs in five places:
 *   global sets  with probability 0.4, not 0.5; |C| + 1 distinct random positions R first, then
 *                ⌊|C|/4⌋ hard negatives, each a chain of 1–3 edits of p's digits (insert a digit
 *                while fewer than k, swap two, substitute one, delete one), kept only when farther
 *                from p than the nearest of R's first |C| + 1 − ⌊|C|/4⌋; C = the first |C| distinct
 *                of (edits, R) other than p. With n = 2 the edits act on the coordinates' digits
 *                written one after the other, and the result is cut back into two at a random
 *                place that leaves each at most k digits.
 *   local sets   a window of side max(⌊256^(1/n)⌋, ⌊(5|C|)^(1/n)⌋) placed uniformly below Lmax,
 *                whether or not it holds p; min(|C|, its size) distinct positions of it, then R,
 *                as above.
 *   L_OOD shift  z from [⌊L/4⌋, Lmax − L) (n = 1), or [0, Lmax − L)² with a coordinate ≥ L.
 *   L_OOD        symmetric, averaged over every (set, head, i, j) as F.kl_div's default does:
 *                L = Σ_{s,h,i} (KL(P_i ‖ S_i) + KL(S_i ‖ P_i)) / (sets·H·m·m);
 *                ∂/∂(student logit ij) = (S_ij − P_ij + S_ij·(a_ij − KL(S_i ‖ P_i))) / (sets·H·m·m),
 *                a_ij = log S_ij − log P_ij.
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

static int draw_candidates_authors(const struct pelab_seqpe_reg *r, int32_t *row, int global,
                                   int32_t *lead, struct pelab_rng *rng);

/* The candidates of one pivot (row[0] the pivot, row[1..C] its set); returns p⁺'s index in C.
 * Global or local: the paper's even odds as one bit (the draw every earlier run made), another
 * fraction against a uniform. */
static int draw_candidates(const struct pelab_seqpe_reg *r, int i, struct pelab_rng *rng) {
    int32_t *row = r->delta_pos + (long)i * (1 + r->cands) * r->dims;
    const double frac = r->style.global_frac;
    const int global = frac == 0.5 ? pelab_rng_below(rng, 2) == 0 : pelab_rng_uniform(rng) < frac;
    r->local[i] = !global;
    r->lead[i] = r->cands;
    if (global ? r->style.hard_edits : r->style.window_anywhere)
        return draw_candidates_authors(r, row, global, &r->lead[i], rng);
    const int n = r->dims, C = r->cands;
    const int32_t *p = row;
    int32_t *cand = row + n, q[PELAB_SEQPE_DIMS_MAX];
    int count = 0;
    if (global) { /* digit edits, then random positions */
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
        r->lead[i] = count;
        while (count < C) {
            random_pos(q, n, 0, r->max_pos, rng);
            if (same(q, p, n) || in_list(cand, count, q, n)) continue;
            memcpy(cand + (long)count++ * n, q, (size_t)n * sizeof *q);
        }
    } else { /* one window that holds p */
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

/* --- the authors' candidate sets --------------------------------------------------------------- */

/* A number as their code holds it, a string of digits in base b, most significant first: a chain
 * of edits may leave a leading 0 (an insertion after a lone "0"), which counts in its length and
 * in comparisons, as their strings do. */
struct digit_string {
    int len;
    int d[64];
};

static void digits_of(struct digit_string *s, int64_t v, int base) {
    int t[64], k = 0;
    do {
        t[k++] = (int)(v % base);
        v /= base;
    } while (v > 0 && k < 64);
    s->len = k;
    for (int i = 0; i < k; i++) s->d[i] = t[k - 1 - i];
}

static int64_t value_of(const struct digit_string *s, int base) {
    int64_t v = 0;
    for (int i = 0; i < s->len; i++) {
        if (v > (INT64_MAX - s->d[i]) / base) return INT64_MAX;
        v = v * base + s->d[i];
    }
    return v;
}

static int same_string(const struct digit_string *a, const struct digit_string *b) {
    return a->len == b->len && memcmp(a->d, b->d, (size_t)a->len * sizeof *a->d) == 0;
}

static void insert_at(struct digit_string *s, int i, int digit) {
    memmove(s->d + i + 1, s->d + i, (size_t)(s->len - i) * sizeof *s->d);
    s->d[i] = digit;
    s->len++;
}

static void remove_at(struct digit_string *s, int i) {
    memmove(s->d + i, s->d + i + 1, (size_t)(s->len - i - 1) * sizeof *s->d);
    s->len--;
}

/* Their four edits of `in` into `out`; 0 where theirs returns −1. k: the digits a number may
 * grow to (insertion stops at exactly k, as theirs does); values must stay below `limit`. */
static int edit_insert(const struct digit_string *in, struct digit_string *out, int base, int k,
                       int64_t limit, struct pelab_rng *rng) {
    if (in->len == k || in->len >= 63) return 0;
    *out = *in;
    const int i = (int)pelab_rng_below(rng, (uint64_t)in->len + 1);
    insert_at(out, i, i == 0 ? 1 + (int)pelab_rng_below(rng, (uint64_t)base - 1)
                             : (int)pelab_rng_below(rng, (uint64_t)base));
    return value_of(out, base) < limit;
}

static int edit_swap(const struct digit_string *in, struct digit_string *out, int base, int64_t limit,
                     struct pelab_rng *rng) {
    const int n = in->len;
    if (n == 1 || (n == 2 && (in->d[1] == 0 || in->d[0] == in->d[1]))) return 0;
    for (int tries = 0;; tries++) { /* a first draw and up to ten more, as theirs */
        int i = (int)pelab_rng_below(rng, (uint64_t)n), j = (int)pelab_rng_below(rng, (uint64_t)n - 1);
        if (j >= i) j++;
        if (j < i) { int t = i; i = j, j = t; }
        *out = *in;
        out->d[i] = in->d[j], out->d[j] = in->d[i];
        if (!((i == 0 && in->d[j] == 0) || same_string(out, in))) break;
        if (tries == 10) return 0;
    }
    return value_of(out, base) < limit;
}

static int edit_substitute(const struct digit_string *in, struct digit_string *out, int base,
                           int64_t limit, struct pelab_rng *rng) {
    if (in->len == 1 && base == 2 && in->d[0] == 1) return 0; /* no other digit may lead: theirs would not end */
    int i, digit;
    do {
        i = (int)pelab_rng_below(rng, (uint64_t)in->len);
        digit = (int)pelab_rng_below(rng, (uint64_t)base);
    } while ((i == 0 && digit == 0) || digit == in->d[i]);
    *out = *in;
    out->d[i] = digit;
    return value_of(out, base) < limit;
}

static int edit_delete(const struct digit_string *in, struct digit_string *out, struct pelab_rng *rng) {
    if (in->len == 1) return 0;
    int i = (int)pelab_rng_below(rng, (uint64_t)in->len);
    while (i == 0 && in->d[1] == 0) i = 1 + (int)pelab_rng_below(rng, (uint64_t)in->len - 1);
    *out = *in;
    remove_at(out, i);
    return 1;
}

/* One hard negative of the number v: a chain of 1–3 edits, each drawn from the four until one
 * applies and gives other than v's own string; −1 when a thousand draws find none. */
static int64_t hard_negative(int64_t v, int base, int k, int64_t limit, struct pelab_rng *rng) {
    struct digit_string start, cur, next;
    digits_of(&start, v, base);
    cur = start;
    const int want = 1 + (int)pelab_rng_below(rng, 3);
    for (int done = 0, tries = 0; done < want; tries++) {
        if (tries == 1000) return -1;
        int ok;
        switch (pelab_rng_below(rng, 4)) {
        case 0: ok = edit_insert(&cur, &next, base, k, limit, rng); break;
        case 1: ok = edit_swap(&cur, &next, base, limit, rng); break;
        case 2: ok = edit_substitute(&cur, &next, base, limit, rng); break;
        default: ok = edit_delete(&cur, &next, rng); break;
        }
        if (ok && !same_string(&next, &start)) cur = next, done++;
    }
    return value_of(&cur, base);
}

/* A hard negative of p (n ≤ 2) into q; 0 when there is none. With two coordinates theirs edits
 * the number written as p_0's digits then p_1's (so p_0 = 0 vanishes: (0, 5) is "5") below
 * Lmax², and cuts the result back at a place that leaves each side 1..k digits, a lone digit
 * first padded with a 0 on a side drawn at random. A side that a coordinate cannot hold gives
 * none. */
static int hard_negative_pos(const struct pelab_seqpe_reg *r, const int32_t *p, int32_t *q, struct pelab_rng *rng) {
    const int base = r->base, k = r->digits;
    if (r->dims == 1) {
        const int64_t v = hard_negative(p[0], base, k, r->max_pos, rng);
        if (v < 0) return 0;
        q[0] = (int32_t)v;
        return 1;
    }
    struct digit_string b, x;
    digits_of(&b, p[1], base);
    int64_t joined = p[0];
    for (int i = 0; i < b.len; i++) {
        if (joined > (INT64_MAX - b.d[i]) / base) return 0;
        joined = joined * base + b.d[i];
    }
    const int64_t v = hard_negative(joined, base, k, r->max_pos * r->max_pos, rng);
    if (v < 0) return 0;
    digits_of(&x, v, base);
    if (x.len < 2) insert_at(&x, pelab_rng_below(rng, 2) ? 0 : 1, 0);
    if (x.len > 2 * k) return 0;
    int cut;
    do cut = 1 + (int)pelab_rng_below(rng, (uint64_t)k);
    while (!(x.len - cut > 0 && x.len - cut <= k));
    struct digit_string left = x, right = x;
    left.len = cut;
    right.len = x.len - cut;
    memmove(right.d, x.d + cut, (size_t)right.len * sizeof *right.d);
    const int64_t v0 = value_of(&left, base), v1 = value_of(&right, base);
    if (v0 >= INT32_MAX || v1 >= INT32_MAX) return 0;
    q[0] = (int32_t)v0, q[1] = (int32_t)v1;
    return 1;
}

static double dist2(const int32_t *a, const int32_t *b, int n) {
    double d = 0;
    for (int c = 0; c < n; c++) d += ((double)a[c] - b[c]) * ((double)a[c] - b[c]);
    return d;
}

/* `count` distinct random positions below Lmax into list. */
static void distinct_random(const struct pelab_seqpe_reg *r, int32_t *list, int count, struct pelab_rng *rng) {
    for (int i = 0; i < count;) {
        random_pos(list + (long)i * r->dims, r->dims, 0, r->max_pos, rng);
        if (!in_list(list, i, list + (long)i * r->dims, r->dims)) i++;
    }
}

/* Their candidate set of pivot row[0] into row[1..C]: the special positions (edits or a window's)
 * in r->extra, then |C| + 1 random ones, merged: the first |C| distinct that are not p. */
static int draw_candidates_authors(const struct pelab_seqpe_reg *r, int32_t *row, int global,
                                   int32_t *lead, struct pelab_rng *rng) {
    const int n = r->dims, C = r->cands;
    const int32_t *p = row;
    int32_t *cand = row + n, *special = r->extra, *random = r->extra + (long)C * n;
    int n_special = 0;
    distinct_random(r, random, C + 1, rng);
    if (global) {
        const int n_hard = C / 4;
        double nearest = INFINITY; /* over the random positions but the last n_hard, as theirs */
        for (int i = 0; i < C + 1 - n_hard; i++) {
            const double d = dist2(p, random + (long)i * n, n);
            nearest = d < nearest ? d : nearest;
        }
        for (int i = 0; i < n_hard; i++) {
            int32_t *q = special + (long)n_special * n;
            if (hard_negative_pos(r, p, q, rng) && dist2(p, q, n) > nearest) n_special++;
        }
    } else {
        const int64_t side256 = (int64_t)floor(pow(256.0, 1.0 / n) + 1e-9);
        const int64_t side5c = (int64_t)floor(pow(5.0 * C, 1.0 / n) + 1e-9);
        const int64_t side = side256 > side5c ? side256 : side5c;
        int64_t lo[PELAB_SEQPE_DIMS_MAX], width[PELAB_SEQPE_DIMS_MAX];
        double size = 1;
        /* the start: below Lmax − side, except that theirs draws a sequence's below Lmax − 256
         * whatever the side (and then cuts the window at Lmax) */
        const int64_t room = r->max_pos - (n == 1 ? side256 : side);
        for (int c = 0; c < n; c++) {
            lo[c] = room > 0 ? (int64_t)((double)room * pelab_rng_uniform(rng)) : 0;
            width[c] = (lo[c] + side < r->max_pos ? lo[c] + side : r->max_pos) - lo[c];
            size *= (double)width[c];
        }
        if (size <= C) { /* the whole window, in order */
            for (long i = 0; i < (long)size; i++) {
                long idx = i;
                for (int c = n - 1; c >= 0; c--) special[i * n + c] = (int32_t)(lo[c] + idx % width[c]), idx /= width[c];
            }
            n_special = (int)size;
        } else
            while (n_special < C) {
                int32_t *q = special + (long)n_special * n;
                for (int c = 0; c < n; c++) q[c] = (int32_t)(lo[c] + (int64_t)pelab_rng_below(rng, (uint64_t)width[c]));
                if (!in_list(special, n_special, q, n)) n_special++;
            }
    }
    int count = 0;
    *lead = 0;
    for (int i = 0; i < n_special + C + 1 && count < C; i++) {
        const int32_t *q = i < n_special ? special + (long)i * n : random + (long)(i - n_special) * n;
        if (same(q, p, n) || in_list(cand, count, q, n)) continue;
        memcpy(cand + (long)count++ * n, q, (size_t)n * sizeof *q);
        *lead += i < n_special;
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
    const int64_t L = r->train_len, room = r->max_pos - L;
    if (!r->style.far_shifts)
        random_pos(z, n, 0, room, rng);
    else if (n == 1)
        random_pos(z, 1, L / 4, room - L / 4, rng);
    else { /* [0, Lmax − L)^n with some coordinate ≥ L */
        int far = 0;
        while (!far) {
            random_pos(z, n, 0, room, rng);
            for (int c = 0; c < n; c++) far |= z[c] >= L;
        }
    }
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

int pelab_seqpe_reg_init(struct pelab_seqpe_reg *r, int dims, int base, int digits, int64_t max_pos,
                         int train_len, int pivots, int cands, int sets, int m,
                         const struct pelab_seqpe_reg_style *style) {
    memset(r, 0, sizeof *r);
    r->dims = dims, r->base = base, r->digits = digits, r->max_pos = max_pos, r->train_len = train_len;
    r->pivots = pivots, r->cands = cands, r->sets = sets, r->ood_m = m;
    r->style = *style;
    PELAB_ASSERT(dims >= 1 && dims <= PELAB_SEQPE_DIMS_MAX);
    double space = pow((double)max_pos, dims), train = pow((double)train_len, dims);
    if (pivots && space < cands + 1.0)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-candidates %d needs more positions than the "
                          "%.0f below --seqpe-max-pos %lld", cands, space, (long long)max_pos);
    if (pivots && style->hard_edits && dims > 2)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-global-edits authors: positions of 1 or 2 "
                          "coordinates only (these have %d)", dims);
    const int64_t min_shift = !style->far_shifts ? 0 : dims == 1 ? train_len / 4 : train_len;
    if (sets && max_pos - train_len <= min_shift)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-max-pos %lld leaves no room to shift the "
                          "training context (%d) by %s%lld for --seqpe-beta", (long long)max_pos,
                          train_len, min_shift ? "at least " : "", (long long)(min_shift ? min_shift : 1));
    if (sets && train < m)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-ood-positions %d is more than the %.0f "
                          "positions of the training range", m, train);
    const long per_pivot = 1L + cands, per_set = 2L * m;
    r->delta_pos = malloc((size_t)(pivots * per_pivot * dims + 1) * sizeof *r->delta_pos);
    r->target = malloc((size_t)(pivots + 1) * sizeof *r->target);
    r->local = malloc((size_t)(pivots + 1) * sizeof *r->local);
    r->lead = malloc((size_t)(pivots + 1) * sizeof *r->lead);
    r->ood_pos = malloc((size_t)(sets * per_set * dims + 1) * sizeof *r->ood_pos);
    r->perm = malloc((size_t)(sets ? train : 1) * sizeof *r->perm);
    r->extra = malloc((size_t)((2L * cands + 1) * dims) * sizeof *r->extra);
    if (!r->delta_pos || !r->target || !r->local || !r->lead || !r->ood_pos || !r->perm || !r->extra)
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the SeqPE regularisers");
    return PELAB_OK;
}

void pelab_seqpe_reg_free(struct pelab_seqpe_reg *r) {
    free(r->delta_pos);
    free(r->target);
    free(r->local);
    free(r->lead);
    free(r->ood_pos);
    free(r->perm);
    free(r->extra);
    memset(r, 0, sizeof *r);
}

void pelab_seqpe_reg_draw(struct pelab_seqpe_reg *r, uint64_t key) {
    struct pelab_rng rng;
    pelab_rng_seed(&rng, pelab_hash64(key ^ 0x5E9E4E6D15EEDull));
    const int n = r->dims;
    for (int i = 0; i < r->pivots; i++) {
        random_pos(r->delta_pos + (long)i * (1 + r->cands) * n, n, 0, r->max_pos, &rng);
        r->target[i] = draw_candidates(r, i, &rng);
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
                            int symmetric, pelab_real *dE, double scale) {
    const int dh = D / H;
    PELAB_ASSERT(D % H == 0);
    double loss = 0, *zp = malloc((size_t)m * sizeof *zp), *zs = malloc((size_t)m * sizeof *zs);
    if (!zp || !zs) {
        free(zp);
        free(zs);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for L_OOD (%d positions)", m), NAN;
    }
    const double norm = (double)sets * H * m * (symmetric ? m : 1);
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
                double kl_sp = 0; /* KL(S‖P), the authors' second term */
                for (int j = 0; j < m; j++) {
                    const double a = (zs[j] - ls) - (zp[j] - lp); /* log S_j − log P_j */
                    loss -= exp(zp[j] - lp) * a;
                    kl_sp += exp(zs[j] - ls) * a;
                }
                if (symmetric) loss += kl_sp;
                if (!dE) continue;
                pelab_real *dsi = dE + (long)st[i] * D + (long)h * dh;
                for (int j = 0; j < m; j++) {
                    const double S = exp(zs[j] - ls), a = (zs[j] - ls) - (zp[j] - lp);
                    const double g = scale * (S - exp(zp[j] - lp) + (symmetric ? S * (a - kl_sp) : 0)) / norm;
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
