/* test_seqpe_profile — SeqPE's two regulariser profiles (--seqpe-reg-profile paper|authors):
 * the sampling statistics of each (how often a set is global, how often a local window holds
 * its pivot, how often a digit edit is the target, how far the target lies), that the authors'
 * edits are chains of at most three of their four edits, their shifts' ranges, the symmetric
 * L_OOD against a direct computation and by central differences, shifts per micro-batch from a
 * fixed pool with no L_OOD on a shifted one, what the profile resolves to, and the refusals. */
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/gradcheck.h"
#include "pelab/params.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "posenc/seqpe.h"

static const struct pelab_seqpe_reg_style PAPER = {0.5, 0, 0, 0, 0}, AUTHORS = {0.4, 1, 1, 1, 1};

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --- is q within three edits of p (decimal strings; insert, swap any two, substitute, delete) -- */

/* A string as (length, value): "05" and "5" differ. */
static long long key_of(const int *d, int len) {
    long long v = 0;
    for (int i = 0; i < len; i++) v = v * 10 + d[i];
    return v * 16 + len;
}

static int neighbours(const int *d, int len, long long *out) { /* every string one edit away */
    int n = 0, t[16];
    for (int i = 0; i <= len && len < 12; i++)
        for (int x = 0; x < 10; x++) {
            memcpy(t, d, (size_t)i * sizeof *t), t[i] = x, memcpy(t + i + 1, d + i, (size_t)(len - i) * sizeof *t);
            out[n++] = key_of(t, len + 1);
        }
    for (int i = 0; i < len; i++) {
        for (int j = i + 1; j < len; j++) {
            memcpy(t, d, (size_t)len * sizeof *t), t[i] = d[j], t[j] = d[i];
            out[n++] = key_of(t, len);
        }
        for (int x = 0; x < 10; x++) {
            memcpy(t, d, (size_t)len * sizeof *t), t[i] = x;
            out[n++] = key_of(t, len);
        }
        if (len > 1) {
            memcpy(t, d, (size_t)i * sizeof *t), memcpy(t + i, d + i + 1, (size_t)(len - i - 1) * sizeof *t);
            out[n++] = key_of(t, len - 1);
        }
    }
    return n;
}

static int unkey(long long k, int *d) {
    const int len = (int)(k % 16);
    long long v = k / 16;
    for (int i = len - 1; i >= 0; i--) d[i] = (int)(v % 10), v /= 10;
    return len;
}

static int digits10(long long v, int *d) {
    int t[20], k = 0;
    do t[k++] = (int)(v % 10), v /= 10;
    while (v > 0);
    for (int i = 0; i < k; i++) d[i] = t[k - 1 - i];
    return k;
}

static int cmp_ll(const void *a, const void *b) {
    const long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Meet in the middle: q is within 3 edits of p when a string one edit from q (edits undo each
 * other in kind) is within 2 of p, or q itself is. */
static int within_three(long long p, long long q) {
    static long long *two;
    if (!two) two = malloc(sizeof *two * 400000);
    long long one[200], nb[200];
    int d[16];
    int len = digits10(p, d), n1 = neighbours(d, len, one), n2 = 0;
    two[n2++] = key_of(d, len);
    for (int i = 0; i < n1; i++) {
        two[n2++] = one[i];
        int e[16], le = unkey(one[i], e);
        n2 += neighbours(e, le, two + n2);
    }
    qsort(two, (size_t)n2, sizeof *two, cmp_ll);
    len = digits10(q, d);
    long long self = key_of(d, len);
    if (bsearch(&self, two, (size_t)n2, sizeof *two, cmp_ll)) return 1;
    const int nq = neighbours(d, len, nb);
    for (int i = 0; i < nq; i++)
        if (bsearch(&nb[i], two, (size_t)n2, sizeof *two, cmp_ll)) return 1;
    return 0;
}

/* --- the draws' statistics --------------------------------------------------------------------- */

struct draw_stats {
    double global;        /* fraction of sets that are global */
    double window_holds;  /* local sets whose window candidates span the pivot */
    double edit_target;   /* global sets whose target is one of its edits */
    double median_local;  /* median |p − p⁺| over local sets */
    int faults;           /* malformed sets, wrong targets, edits more than 3 edits away */
};

static struct draw_stats draw_stats(const struct pelab_seqpe_reg_style *style, const char *name) {
    enum { PIVOTS = 3000, C = 32 };
    const long max_pos = 20000;
    struct pelab_seqpe_reg r;
    CHECK(pelab_seqpe_reg_init(&r, 1, 10, 5, max_pos, 512, PIVOTS, C, 0, 2, style) == PELAB_OK, "%s",
          pelab_last_error());
    pelab_seqpe_reg_draw(&r, 2024);
    struct draw_stats st = {0};
    int local = 0, holds = 0, global = 0, edit_target = 0, checked = 0;
    static double dist[PIVOTS];
    for (int i = 0; i < PIVOTS; i++) {
        const int32_t *row = r.delta_pos + (long)i * (1 + C), p = row[0], *cand = row + 1;
        for (int a = 0; a < C; a++) {
            st.faults += cand[a] < 0 || cand[a] >= max_pos || cand[a] == p;
            for (int b = 0; b < a; b++) st.faults += cand[a] == cand[b];
        }
        st.faults += r.target[i] != pelab_seqpe_nearest(row, cand, C, 1);
        if (r.local[i]) {
            int32_t lo = cand[0], hi = cand[0];
            for (int a = 1; a < r.lead[i]; a++) lo = cand[a] < lo ? cand[a] : lo, hi = cand[a] > hi ? cand[a] : hi;
            st.faults += r.lead[i] < C - 1 || hi - lo >= 256; /* a window of side max(256, 5|C|) */
            holds += lo <= p && p <= hi;
            dist[local++] = abs(cand[r.target[i]] - p);
        } else {
            global++;
            edit_target += r.target[i] < r.lead[i];
            st.faults += r.lead[i] > (style->hard_edits ? C / 4 : C / 8);
            for (int a = 0; a < r.lead[i] && style->hard_edits && checked < 400 && p > 0; a++, checked++)
                st.faults += !within_three(p, cand[a]);
        }
    }
    qsort(dist, (size_t)local, sizeof *dist, cmp_double);
    st.global = (double)global / PIVOTS;
    st.window_holds = (double)holds / local;
    st.edit_target = (double)edit_target / global;
    st.median_local = dist[local / 2];
    printf("  %s: %.1f %% of sets global; windows span their pivot in %.1f %% of local sets; an edit "
           "is the target in %.1f %% of global sets; median |p - p+| in local sets %.0f\n",
           name, 100 * st.global, 100 * st.window_holds, 100 * st.edit_target, st.median_local);
    pelab_seqpe_reg_free(&r);
    return st;
}

static void check_draw_stats(void) {
    const struct draw_stats paper = draw_stats(&PAPER, "paper"), authors = draw_stats(&AUTHORS, "authors");
    CHECK(paper.faults == 0 && authors.faults == 0, "sets well formed, targets nearest, the authors' "
          "edits within three edits (%d, %d faults)", paper.faults, authors.faults);
    CHECK(fabs(paper.global - 0.5) < 0.04 && fabs(authors.global - 0.4) < 0.04,
          "global sets: 50 %% (paper), 40 %% (authors): %.3f, %.3f", paper.global, authors.global);
    /* around the pivot the window spans it unless the pivot is outside its 31 samples' hull
     * (~2/32); placed anywhere, about 256 / 20000 of the time */
    CHECK(paper.window_holds > 0.85 && authors.window_holds < 0.03,
          "local windows span the pivot: %.3f (paper), %.3f (authors)", paper.window_holds, authors.window_holds);
    CHECK(paper.edit_target > 0.15 && authors.edit_target < 0.02,
          "an edit is the target: %.3f (paper), %.3f (authors)", paper.edit_target, authors.edit_target);
    CHECK(paper.median_local <= 8 && authors.median_local >= 500,
          "median distance to the target in local sets: %g (paper), %g (authors)",
          paper.median_local, authors.median_local);
}

/* Two coordinates: the authors' edits cut back into two coordinates of at most k digits each. */
static void check_draws_2d(void) {
    enum { PIVOTS = 500, C = 16 };
    struct pelab_seqpe_reg r;
    CHECK(pelab_seqpe_reg_init(&r, 2, 10, 2, 40, 8, PIVOTS, C, 0, 2, &AUTHORS) == PELAB_OK, "%s",
          pelab_last_error());
    pelab_seqpe_reg_draw(&r, 5);
    int faults = 0, edits = 0, local = 0;
    for (int i = 0; i < PIVOTS; i++) {
        const int32_t *row = r.delta_pos + (long)i * (1 + C) * 2, *cand = row + 2;
        for (int a = 0; a < C; a++) {
            const int lim = !r.local[i] && a < r.lead[i] ? 100 : 40; /* edits: below b^k */
            faults += cand[2 * a] < 0 || cand[2 * a] >= lim || cand[2 * a + 1] < 0 || cand[2 * a + 1] >= lim;
            faults += cand[2 * a] == row[0] && cand[2 * a + 1] == row[1];
            for (int b = 0; b < a; b++) faults += cand[2 * a] == cand[2 * b] && cand[2 * a + 1] == cand[2 * b + 1];
        }
        faults += r.target[i] != pelab_seqpe_nearest(row, cand, C, 2);
        if (r.local[i]) { /* a 16 × 16 window (max(⌊√256⌋, ⌊√80⌋)) */
            local++;
            for (int c = 0; c < 2; c++) {
                int32_t lo = cand[c], hi = cand[c];
                for (int a = 1; a < r.lead[i]; a++) lo = cand[2 * a + c] < lo ? cand[2 * a + c] : lo, hi = cand[2 * a + c] > hi ? cand[2 * a + c] : hi;
                faults += hi - lo >= 16;
            }
        } else
            edits += r.lead[i];
    }
    CHECK(faults == 0 && edits > 0 && local > PIVOTS / 2, "2-D authors' sets well formed (%d faults, %d edits, "
          "%d local)", faults, edits, local);
    pelab_seqpe_reg_free(&r);
}

/* L_OOD's shifts: the authors' from [L/4, Lmax − L), or with two coordinates one at least L. */
static void check_far_shifts(void) {
    struct pelab_seqpe_reg r;
    CHECK(pelab_seqpe_reg_init(&r, 1, 10, 5, 300, 100, 0, 4, 400, 4, &AUTHORS) == PELAB_OK, "%s", pelab_last_error());
    pelab_seqpe_reg_draw(&r, 3);
    int lo = 1 << 30, hi = -1;
    for (int s = 0; s < r.sets; s++) {
        const int32_t *t = r.ood_pos + (long)s * 2 * r.ood_m;
        const int z = t[r.ood_m] - t[0];
        lo = z < lo ? z : lo, hi = z > hi ? z : hi;
    }
    CHECK(lo >= 25 && lo < 30 && hi < 200 && hi > 195, "1-D shifts in [25, 200): %d .. %d", lo, hi);
    pelab_seqpe_reg_free(&r);
    CHECK(pelab_seqpe_reg_init(&r, 2, 10, 2, 30, 6, 0, 4, 300, 4, &AUTHORS) == PELAB_OK, "%s", pelab_last_error());
    pelab_seqpe_reg_draw(&r, 4);
    int bad = 0, near0 = 0;
    for (int s = 0; s < r.sets; s++) {
        const int32_t *t = r.ood_pos + (long)s * 2 * r.ood_m * 2, *st = t + 2 * r.ood_m;
        const int z0 = st[0] - t[0], z1 = st[1] - t[1];
        bad += z0 < 0 || z1 < 0 || z0 >= 24 || z1 >= 24 || (z0 < 6 && z1 < 6);
        near0 += z0 < 6 || z1 < 6;
    }
    CHECK(bad == 0 && near0 > 0, "2-D shifts in [0, 24)^2 with a coordinate >= 6 (%d faults; %d with one below)", bad, near0);
    pelab_seqpe_reg_free(&r);
    CHECK(pelab_seqpe_reg_init(&r, 1, 10, 5, 120, 100, 0, 4, 2, 4, &AUTHORS) == PELAB_ERR_USAGE &&
              strstr(pelab_last_error(), "by at least 25"),
          "no room above L/4: %s", pelab_last_error());
    pelab_seqpe_reg_free(&r);
}

/* --- the symmetric L_OOD ------------------------------------------------------------------------- */

struct ood_ctx { double *E; int32_t *row; };
static double ood_f(void *p) {
    const struct ood_ctx *c = p;
    return pelab_seqpe_ood_loss(c->E, 6, 2, c->row, 2, 3, 1, NULL, 0);
}

/* Σ over sets, heads and (i, j) of P log(P/S) + S log(S/P), over sets·H·m·m: the m × m matrices
 * written out. */
static double ood_direct(const double *E, const int32_t *row) {
    double sum = 0;
    for (int s = 0; s < 2; s++)
        for (int h = 0; h < 2; h++) {
            double P[3][3], S[3][3];
            for (int side = 0; side < 2; side++)
                for (int i = 0; i < 3; i++) {
                    double z[3], mx = -INFINITY, tot = 0;
                    for (int j = 0; j < 3; j++) {
                        const double *a = E + row[s * 6 + side * 3 + i] * 6 + h * 3, *b = E + row[s * 6 + side * 3 + j] * 6 + h * 3;
                        z[j] = a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
                        mx = fmax(mx, z[j]);
                    }
                    for (int j = 0; j < 3; j++) tot += exp(z[j] - mx);
                    for (int j = 0; j < 3; j++) (side ? S : P)[i][j] = exp(z[j] - mx) / tot;
                }
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) sum += (P[i][j] - S[i][j]) * log(P[i][j] / S[i][j]);
        }
    return sum / (2.0 * 2 * 3 * 3);
}

static void check_symmetric_ood(void) {
    int32_t row[12] = {0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11};
    double E[12 * 6], dE[12 * 6] = {0};
    unsigned long long x = 11;
    for (int i = 0; i < 72; i++) x = x * 6364136223846793005ull + 1, E[i] = 3 * ((double)(x >> 11) * 0x1.0p-53 - 0.5);
    struct ood_ctx c = {E, row};
    const double l = pelab_seqpe_ood_loss(E, 6, 2, row, 2, 3, 1, dE, 1), direct = ood_direct(E, row);
    CHECK(l > 0 && fabs(l - direct) < 1e-14 * direct, "symmetric L_OOD %.17g = direct %.17g", l, direct);
    double teach = 0;
    for (int i = 0; i < 36; i++) teach = fmax(teach, fabs(dE[i]));
    CHECK(teach == 0, "the teachers get no gradient (%g)", teach);
    gradcheck("symmetric L_OOD students", ood_f, &c, E + 36, dE + 36, 36, 1e-6, 1e-9, 1e-6);
    const double paper = pelab_seqpe_ood_loss(E, 6, 2, row, 2, 3, 0, NULL, 0);
    CHECK(l < paper, "averaged over m x m entries it is the smaller (%g < %g)", l, paper);
}

/* --- shifts per micro-batch from a pool; what the profile resolves to; refusals ------------------ */

/* Options kv into o, and seqpe from them. */
static int init_seqpe(struct pelab_posenc *pe, struct pelab_params *params, struct pelab_opts *o,
                      const char *const *kv, int T) {
    memset(o, 0, sizeof *o);
    for (int i = 0; kv[i]; i += 2) pelab_opts_set(o, kv[i], kv[i + 1]);
    const int rc = pelab_posenc_init(pe, "seqpe", o, params, 8, 2, 1, T);
    pe->ctx = test_ctx();
    return rc;
}

static void check_step_shifts(void) {
    enum { B = 6, T = 10, STEPS = 600 };
    const char *kv[] = {"seqpe-reg-profile", "authors", "seqpe-shift-prob", "0.3", "seqpe-max-pos", "1000",
                        "seqpe-digits", "4", "seqpe-layers", "1", "seqpe-delta-batch", "2",
                        "seqpe-candidates", "4", "seqpe-ood-batch", "2", "seqpe-ood-positions", "3", NULL};
    struct pelab_posenc pe;
    struct pelab_params params = {0};
    static struct pelab_opts o;
    CHECK(init_seqpe(&pe, &params, &o, kv, T) == PELAB_OK, "%s", pelab_last_error());
    CHECK(pelab_params_alloc(&params) == PELAB_OK, "alloc");
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 1);
    pe.ops->init_params(&pe, &rng);
    static int32_t offsets[STEPS * B];
    int shifted = 0, partial = 0, n_off = 0, bad = 0, ood_ok = 1, repeats = 0;
    for (int step = 0; step < STEPS; step++) {
        int32_t pos[B * T];
        for (int i = 0; i < B * T; i++) pos[i] = i % T;
        pe.ops->train_positions(&pe, pos, B, T, 1000 + (uint64_t)step);
        int moved = 0;
        for (int b = 0; b < B; b++) {
            moved += pos[b * T] != 0;
            for (int t = 0; t < T; t++) bad += pos[b * T + t] != pos[b * T] + t;
            bad += pos[b * T] < 0 || pos[b * T] >= 990;
            if (pos[b * T]) offsets[n_off++] = pos[b * T];
        }
        for (int b = 0; b < B; b++)
            for (int c = 0; c < b; c++) repeats += pos[b * T] && pos[b * T] == pos[c * T];
        shifted += moved > 0;
        partial += moved > 0 && moved < B - 1; /* offset 0 is one of 990: at most one stays */
        if (step < 40) {
            double terms[PELAB_PE_AUX_MAX], total;
            CHECK(pe.ops->aux_forward(&pe, 7 + (uint64_t)step, terms, &total) == PELAB_OK, "aux_forward");
            ood_ok &= moved ? terms[1] == 0 : terms[1] > 0;
        }
    }
    int distinct = 0;
    for (int i = 0; i < n_off; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = offsets[j] == offsets[i];
        distinct += !seen;
    }
    CHECK(bad == 0 && partial == 0 && shifted > STEPS / 4 && shifted < STEPS * 7 / 20,
          "30 %% of micro-batches shifted whole (%d of %d; %d partial, %d faults)", shifted, STEPS, partial, bad);
    CHECK(distinct <= 320 && distinct > 250 && repeats == 0, "offsets from a pool of 320 (%d distinct of %d), "
          "consecutive entries: none twice in a micro-batch (%d)", distinct, n_off, repeats);
    CHECK(ood_ok, "a shifted micro-batch has no L_OOD (0), the others have it");
    CHECK(pelab_posenc_resolve(&pe, &o) == PELAB_OK, "resolve");
    const char *want[][2] = {{"seqpe-ood-loss", "authors"}, {"seqpe-ood-shifts", "authors"},
                             {"seqpe-local-window", "anywhere"}, {"seqpe-global-edits", "authors"},
                             {"seqpe-shift-unit", "step"}, {"seqpe-final-norm", "on"},
                             {"seqpe-global-frac", "0.4"}, {"seqpe-shift-pool", "320"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *got = pelab_opts_get(&o, want[i][0]);
        CHECK(got && !strcmp(got, want[i][1]), "the authors' profile resolves --%s to %s (%s)", want[i][0],
              want[i][1], got ? got : "unset");
    }
    pelab_posenc_free(&pe);
    pelab_params_free(&params);

    /* one difference at a time: the profile's default overridden */
    const char *kv2[] = {"seqpe-reg-profile", "authors", "seqpe-ood-loss", "paper", "seqpe-final-norm", "off", NULL};
    CHECK(init_seqpe(&pe, &params, &o, kv2, T) == PELAB_OK, "%s", pelab_last_error());
    CHECK(pelab_posenc_resolve(&pe, &o) == PELAB_OK, "resolve");
    CHECK(!strcmp(pelab_opts_get(&o, "seqpe-ood-loss"), "paper") && !strcmp(pelab_opts_get(&o, "seqpe-final-norm"), "off") &&
              !strcmp(pelab_opts_get(&o, "seqpe-local-window"), "anywhere"),
          "a given option stays as given; the rest follow the profile");
    CHECK(pelab_seqpe_encoder_of(&pe)->lnf < 0, "--seqpe-final-norm off wins over the profile");
    pelab_posenc_free(&pe);
    pelab_params_free(&params);

    const char *kv3[] = {"seqpe-global-frac", "-0.5", NULL};
    CHECK(init_seqpe(&pe, &params, &o, kv3, T) == PELAB_ERR_USAGE && strstr(pelab_last_error(), "--seqpe-global-frac"),
          "--seqpe-global-frac -0.5 refused: %s", pelab_last_error());
    pelab_posenc_free(&pe);
    pelab_params_free(&params);
}

int main(void) {
    pelab_threads_set(1);
    printf("the draws of each profile\n");
    check_draw_stats();
    check_draws_2d();
    check_far_shifts();
    check_symmetric_ood();
    check_step_shifts();
    return check_report("test_seqpe_profile");
}
