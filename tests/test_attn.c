/* The tiled and cached attention kernels against the reference kernel (the oracle), double build,
 * for every case of the one list (lib/models.h: each registered encoding with its defaults and
 * each setting of its contract). The kernel-level checks take the cases that reach the kernels
 * through q, k and the bias alone (QK and BIAS encodings, and NoPE; a shape an encoding refuses is
 * said and passed over); the whole-model ones take every case of 1-D positions.
 *  - outputs, dq, dk, dv and the BIAS encoding's parameter gradients agree to ~1e-12 (a QK
 *    encoding may change the query/key width: PoPE's 2d, values d), with and without dropout, for
 *    T = 1, T a multiple of the tile and T not one, several batch rows and heads, positions from
 *    0 and shifted, the dropout masks of batch rows counted from 0 and from an offset, on one
 *    thread and on two; without the causal mask for the encodings that allow it, on 1-D and
 *    (row, column) positions;
 *  - the cached kernel (generation), every sequence of the same causal cases without dropout fed
 *    in chunks of 1, 5 and 20 queries (dot products, and matrix products from 16), gives the
 *    reference's outputs to ~1e-12;
 *  - a batch split into two shares of rows, each run with the batch row of its first sequence:
 *    the shares' outputs and input gradients are the whole batch's rows, their parameter
 *    gradients add up to the whole batch's, with dropout, for both kernels (MPI ranks run so);
 *  - the tiled backward by central differences (q, k, v, and a BIAS encoding's parameters), with
 *    and without dropout (its masks from batch row 3);
 *  - two threads give the same bits twice;
 *  - whole models with --attention ref and tiled: the same loss and gradients; with dropout, the
 *    rows of a batch run as two shares (dropout_row0) give its per-position losses and, weighted
 *    by their targets, its gradients;
 *  - a 10240-token forward runs in an address space too small for one (H,T,T) matrix (SPEC §5).
 *
 *   build/tests/test_attn [NAME]      only the encoding NAME's cases (all when absent)
 */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "lib/check.h"
#include "lib/models.h"
#include "lib/gradcheck.h"
#include "pelab/model.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "attn/attention.h"
#include "kernels/cpu/bf16.h"

#define LAYERS 2
#define LAYER 1 /* the layer the kernels run as: per-layer parameters must pick theirs */

static unsigned long long seed = 11;

static double *vec(long n, double lo, double hi) {
    double *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    fill_uniform(x, n, lo, hi, &seed);
    return x;
}

static double max_abs(const double *a, long n) {
    double m = 0;
    for (long i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

/* max |a − b| relative to max(1, max |b|) */
static double rel_diff(const double *a, const double *b, long n) {
    double d = 0;
    for (long i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i]));
    return d / fmax(1, max_abs(b, n));
}

/* --- one layer's attention, its inputs formed by the encoding's QK transform ------------------- */

struct attn_case {
    const struct pe_case *pc; /* the encoding, its options and its positions' layout (bidirectional: no mask) */
    int B, H, d, T, tile;
    double dropout;
    int shifted;           /* positions start at 1000 + 37·b instead of 0 */
    int row0;              /* the dropout masks' batch row of sequence 0 */
};

/* An encoding, its parameters behind one unrelated parameter (so theirs do not start at offset 0,
 * as in a model), and one layer's inputs and buffers. */
struct attn_setup {
    struct pelab_posenc pe;
    struct pelab_params params;
    struct pelab_attn_call s;
    int32_t *pos;
    double *qkv, *qo, *ko, *dout;  /* (B,T,3D); (B,H,T,dq) ×2; (B,T,D) */
};

static void setup_free(struct attn_setup *a);

/* A description of case c for messages. */
static const char *describe(const struct attn_case *c) {
    static char label[256];
    snprintf(label, sizeof label, "%s B %d H %d T %3d tile %2d d %d dropout %.1f row0 %d%s", c->pc->label, c->B,
             c->H, c->T, c->tile ? c->tile : PELAB_PE_TILE, c->d, c->dropout, c->row0,
             c->shifted ? " shifted" : "");
    return label;
}

/* 1 when a is set up for case c; 0 when the case does not reach the kernels through q, k and the
 * bias alone, or its encoding refuses the shape or the positions (said). */
static int setup_init(struct attn_setup *a, const struct attn_case *c) {
    memset(a, 0, sizeof *a);
    const int D = c->H * c->d;
    const long BT = (long)c->B * c->T;
    int64_t five = 5;
    pelab_params_declare(&a->params, "other.weight", 1, &five, 1);
    /* max_seq 8: FIRE's L = 8·|ℓ| falls inside the longer cases' queries */
    int rc = pe_case_init(&a->pe, &a->params, c->pc, D, c->H, LAYERS, 8);
    if (rc == PELAB_OK && (a->pe.sites & ~(unsigned)(PELAB_SITE_QK | PELAB_SITE_BIAS))) {
        setup_free(a);
        return 0;
    }
    if (rc == PELAB_ERR_USAGE) printf("  %s: refused: %s\n", describe(c), pelab_last_error());
    PELAB_ASSERT(rc == PELAB_OK || rc == PELAB_ERR_USAGE);
    if (rc) {
        setup_free(a);
        return 0;
    }
    PELAB_ASSERT(pelab_params_alloc(&a->params) == PELAB_OK);
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 5);
    if (a->pe.ops->init_params) a->pe.ops->init_params(&a->pe, &rng);
    /* every parameter away from its init (T5's table starts at 0, PoPE's δ too) */
    for (size_t i = 0; i < a->params.total; i++) a->params.data[i] += 0.5 * (pelab_rng_uniform(&rng) - 0.5);
    const struct pelab_pe_layout *lay = &c->pc->layout;
    a->pos = malloc((size_t)BT * lay->dims * sizeof *a->pos);
    for (long i = 0; i < BT; i++) {
        long b = i / c->T, t = i % c->T;
        pe_place(a->pos + i * lay->dims, (int)(c->shifted ? 1000 + 37 * b + t : t), lay);
    }
    if (pelab_posenc_prepare(&a->pe, a->pos, c->B, c->T) == PELAB_ERR_USAGE) {
        printf("  %s: positions refused: %s\n", describe(c), pelab_last_error());
        setup_free(a);
        return 0;
    }
    const int dq = a->pe.qk_dim;
    a->qkv = vec(BT * 3 * D, -1.5, 1.5);
    a->qo = vec(BT * D / c->d * dq, 0, 0);
    a->ko = vec(BT * D / c->d * dq, 0, 0);
    a->dout = vec(BT * D, -1, 1);
    pelab_posenc_qk_forward(&a->pe, LAYER, a->qo, a->ko, a->qkv, a->qkv + D, 3 * D, a->pos, c->B, c->T);
    a->s = (struct pelab_attn_call){
        .ctx = test_ctx(), .B = c->B, .T = c->T, .H = c->H, .dq = dq, .dv = c->d, .ldv = 3 * D, .ldo = D,
        .scale = 1 / sqrt((double)c->d), .pe = &a->pe, .layer = LAYER, .pos = a->pos,
        .dropout = c->dropout, .key = 77, .site = 4, .row0 = (uint64_t)c->row0, .tile = c->tile,
        .bidirectional = lay->bidirectional};
    return 1;
}

static void setup_free(struct attn_setup *a) {
    free(a->pos), free(a->qkv), free(a->qo), free(a->ko), free(a->dout);
    pelab_posenc_free(&a->pe);
    pelab_params_free(&a->params);
}

/* What one kernel gives: out, dq, dk, dv (inside a (B,T,3D) buffer) and the parameter gradients. */
struct result { double *out, *dq, *dk, *dv, *grad; };

/* One kernel on the nb sequences b0 .. b0+nb−1 of a's batch (their inputs, positions and output
 * gradients), the first of them counted as batch row row0 by the dropout masks. */
static void run_rows(struct result *r, struct attn_setup *a, int tiled, int b0, int nb, uint64_t row0) {
    struct pelab_attn_call sh = a->s;
    const struct pelab_attn_call *s = &sh;
    const int D = s->H * s->dv;
    const long BT = (long)nb * s->T, nq = BT * s->H * s->dq, first = (long)b0 * s->T;
    sh.B = nb;
    sh.row0 = row0;
    sh.pos = a->pos + first * a->pe.pos_dims;
    const double *q = a->qo + first * s->H * s->dq, *k = a->ko + first * s->H * s->dq;
    const double *v = a->qkv + first * 3 * D + 2 * D, *dout = a->dout + first * D;
    r->out = vec(BT * D, 0, 0);
    r->dq = vec(nq, 0, 0), r->dk = vec(nq, 0, 0), r->dv = vec(BT * 3 * D, 0, 0);
    memset(r->dv, 0, (size_t)BT * 3 * D * sizeof *r->dv); /* only v's columns are written */
    pelab_params_zero_grad(&a->params);
    if (tiled) {
        double *lse = vec(BT * s->H, 0, 0);
        CHECK(pelab_attn_tiled_forward(r->out, lse, q, k, v, s) == PELAB_OK, "tiled forward");
        CHECK(pelab_attn_tiled_backward(r->dq, r->dk, r->dv + 2 * D, dout, r->out, lse, q, k, v, s) == PELAB_OK,
              "tiled backward");
        free(lse);
    } else {
        long tt = BT * s->H * s->T;
        double *att = vec(tt, 0, 0), *datt = vec(tt, 0, 0);
        pelab_attn_ref_forward(r->out, att, q, k, v, s);
        pelab_attn_ref_backward(r->dq, r->dk, r->dv + 2 * D, datt, dout, att, q, k, v, s);
        free(att), free(datt);
    }
    pelab_posenc_backward_end(&a->pe);
    r->grad = vec((long)a->params.total, 0, 0);
    memcpy(r->grad, a->params.grad, a->params.total * sizeof *r->grad);
}

static void result_free(struct result *r) { free(r->out), free(r->dq), free(r->dk), free(r->dv), free(r->grad); }

/* The whole batch of a. */
static void run_kernel(struct result *r, struct attn_setup *a, int tiled) { run_rows(r, a, tiled, 0, a->s.B, a->s.row0); }

#define EQ_TOL 1e-12

/* The cached kernel on a's batch, every sequence against a cache of its own, in chunks of `chunk`
 * new queries (one call per chunk for all B sequences: a generated token's path for chunks under
 * 16, the matrix products' for longer ones), keys and values in bf16 when bf16 is set: max
 * relative difference of its outputs from ref_out (B,T,D). */
static double cached_diff(struct attn_setup *a, const double *ref_out, int chunk, int bf16) {
    const struct pelab_attn_call *s = &a->s;
    const int B = s->B, H = s->H, dq = s->dq, dv = s->dv, T = s->T, D = H * dv;
    struct pelab_attn_cache c[4], *caches[4];
    CHECK(B <= 4, "cached_diff: batch %d over 4", B);
    if (B > 4) return INFINITY;
    for (int b = 0; b < B; b++) {
        CHECK(pelab_attn_cache_init(&c[b], LAYERS, H, dq, dv, T, chunk, NULL, bf16) == PELAB_OK, "cache init");
        caches[b] = &c[b];
    }
    double *out = vec((long)B * T * D, 0, 0), *q = vec((long)B * H * chunk * dq, 0, 0);
    double *k = vec((long)B * H * chunk * dq, 0, 0), *v = vec((long)B * chunk * 3 * D, 0, 0);
    double *o = vec((long)B * chunk * D, 0, 0);
    for (int t0 = 0; t0 < T; t0 += chunk) {
        const int n = T - t0 < chunk ? T - t0 : chunk;
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) /* the chunk's rows of (B,H,T,dq) as (B,H,n,dq) */
                for (int i = 0; i < n; i++) {
                    const long from = (((long)b * H + h) * T + t0 + i) * dq, to = (((long)b * H + h) * n + i) * dq;
                    memcpy(q + to, a->qo + from, (size_t)dq * sizeof *q);
                    memcpy(k + to, a->ko + from, (size_t)dq * sizeof *k);
                }
            for (int i = 0; i < n; i++) { /* rows (B,n) of qkv, of which the values are read */
                memcpy(v + ((long)b * n + i) * 3 * D, a->qkv + ((long)b * T + t0 + i) * 3 * D, (size_t)3 * D * sizeof *v);
                c[b].pos[t0 + i] = a->pos[(long)b * T + t0 + i];
            }
        }
        struct pelab_attn_call sc = *s;
        sc.T = n, sc.pos = NULL;
        pelab_attn_cached_forward(caches, o, q, k, v + 2 * D, &sc);
        for (int b = 0; b < B; b++) {
            memcpy(out + ((long)b * T + t0) * D, o + (long)b * n * D, (size_t)n * D * sizeof *out);
            c[b].len += n;
        }
    }
    const double d = rel_diff(out, ref_out, (long)B * T * D);
    free(out), free(q), free(k), free(v), free(o);
    for (int b = 0; b < B; b++) pelab_attn_cache_release(&c[b]);
    return d;
}

/* 1 when the case ran. */
static int check_against_ref(const struct attn_case *c) {
    struct attn_setup a;
    if (!setup_init(&a, c)) return 0;
    const struct pelab_attn_call *s = &a.s;
    const long BT = (long)c->B * c->T, D = (long)c->H * c->d, nq = BT * c->H * s->dq;
    const int bidirectional = c->pc->layout.bidirectional;
    char label[300];
    snprintf(label, sizeof label, "%s dq %d", describe(c), s->dq);
    pelab_threads_set(1);
    struct result ref, tiled[2];
    run_kernel(&ref, &a, 0);
    double worst = 0;
    for (int th = 0; th < 2; th++) {
        pelab_threads_set(th + 1);
        run_kernel(&tiled[th], &a, 1);
        const struct result *t = &tiled[th];
        const struct { const char *name; const double *x, *y; long n; } parts[] = {
            {"out", t->out, ref.out, BT * D}, {"dq", t->dq, ref.dq, nq}, {"dk", t->dk, ref.dk, nq},
            {"dv", t->dv, ref.dv, BT * 3 * D}, {"bias grads", t->grad, ref.grad, (long)a.params.total}};
        for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
            double d = rel_diff(parts[i].x, parts[i].y, parts[i].n);
            CHECK(d <= EQ_TOL, "%s, %d thread(s): %s differs from the reference by %.3g", label, th + 1,
                  parts[i].name, d);
            worst = fmax(worst, d);
        }
    }
    if (!bidirectional && c->dropout == 0) /* generation's kernel: causal, no dropout */
        for (int chunk = 1; chunk <= 20; chunk += chunk < 5 ? 4 : 15) {
            double d = cached_diff(&a, ref.out, chunk, 0);
            CHECK(d <= EQ_TOL, "%s: the cached kernel in chunks of %d differs from the reference by %.3g",
                  label, chunk, d);
            worst = fmax(worst, d);
        }
    if (!bidirectional && c->dropout == 0) { /* a bf16 cache: the reference on rounded k and v */
        const long nk = BT * c->H * s->dq;
        double *ko = malloc((size_t)nk * sizeof *ko), *qkv = malloc((size_t)BT * 3 * D * sizeof *qkv);
        memcpy(ko, a.ko, (size_t)nk * sizeof *ko);
        memcpy(qkv, a.qkv, (size_t)BT * 3 * D * sizeof *qkv);
        for (long i = 0; i < nk; i++) a.ko[i] = pelab_from_bf16(pelab_to_bf16((float)a.ko[i]));
        for (long r = 0; r < BT; r++)
            for (long e = 2 * D; e < 3 * D; e++) a.qkv[r * 3 * D + e] = pelab_from_bf16(pelab_to_bf16((float)a.qkv[r * 3 * D + e]));
        struct result rounded;
        run_kernel(&rounded, &a, 0);
        const double moved = rel_diff(rounded.out, ref.out, BT * D);
        CHECK(c->T == 1 || moved > 1e-5, "%s: rounding k and v to bf16 moved the output by only %.3g", label, moved);
        for (int chunk = 1; chunk <= 20; chunk += 19) {
            const double d = cached_diff(&a, rounded.out, chunk, 1);
            CHECK(d <= EQ_TOL, "%s: the bf16 cache in chunks of %d differs from the reference on rounded k, v by %.3g",
                  label, chunk, d);
        }
        memcpy(a.ko, ko, (size_t)nk * sizeof *ko);
        memcpy(a.qkv, qkv, (size_t)BT * 3 * D * sizeof *qkv);
        free(ko), free(qkv);
        result_free(&rounded);
    }
    /* the parameter gradients must not be trivially zero where the encoding has parameters (at
     * T = 1 they are: a softmax over one key has zero gradient) */
    int first = a.pe.param_first;
    if (a.pe.ops->bias_tile_backward && a.pe.param_end > first && c->T > 1) {
        const struct pelab_param *p = &a.params.list[first];
        CHECK(max_abs(ref.grad + p->offset, (long)(a.params.total - p->offset)) > 1e-6,
              "%s: the encoding's parameters got no gradient", label);
    }
    CHECK(max_abs(ref.grad, 5) == 0 && max_abs(tiled[1].grad, 5) == 0,
          "%s: a parameter outside the encoding got a gradient", label);
    printf("  %s  max rel. diff %.2g\n", label, worst);
    result_free(&ref), result_free(&tiled[0]), result_free(&tiled[1]);
    pelab_threads_set(1);
    setup_free(&a);
    return 1;
}

/* Causal: shapes with T not a multiple of the tile, T = 1, T a multiple, T = tile + 1, one partial
 * tile; heads 20 wide (the cached kernel's dot products: a vector of 16 and 4 alone, 40 for PoPE's
 * doubled q and k: two vectors and 8 alone) over 23 keys (five groups of four and three alone);
 * each without dropout, with masks from batch row 0 and from row 5. Then the default tile, more
 * than one of it (and a partial last one). Bidirectional (every key of the sequence), as the image
 * task runs it: partial tiles, an image's 50 tokens in one default tile with heads 16 wide, and
 * more than one default tile, with and without dropout. */
static int check_cases(const struct pe_case *pc) {
    int ran = 0;
    if (!pc->layout.bidirectional) {
        const struct { int B, H, d, T, tile, shifted; } shapes[] = {
            {2, 3, 4, 13, 4, 0}, {1, 2, 4, 1, 4, 0}, {3, 2, 2, 12, 3, 1}, {2, 2, 4, 9, 8, 1},
            {1, 3, 2, 7, 0, 0}, {1, 2, 20, 23, 8, 0}};
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
            for (int drop = 0; drop < 3; drop++) { /* none; from batch row 0; from row 5 */
                struct attn_case c = {.pc = pc, .B = shapes[i].B, .H = shapes[i].H, .d = shapes[i].d,
                                      .T = shapes[i].T, .tile = shapes[i].tile, .dropout = drop ? 0.3 : 0,
                                      .shifted = shapes[i].shifted, .row0 = drop == 2 ? 5 : 0};
                ran += check_against_ref(&c);
            }
        const struct attn_case big[] = {
            {.pc = pc, .B = 1, .H = 2, .d = 4, .T = 150},
            {.pc = pc, .B = 2, .H = 1, .d = 4, .T = 130, .dropout = 0.2, .shifted = 1, .row0 = 7},
            {.pc = pc, .B = 1, .H = 2, .d = 2, .T = 129}};
        for (size_t i = 0; i < sizeof big / sizeof *big; i++) ran += check_against_ref(&big[i]);
        return ran;
    }
    const struct { int B, H, d, T, tile; } bshapes[] = {{2, 3, 4, 13, 4}, {2, 2, 16, 50, 0}, {1, 2, 4, 130, 0}};
    for (size_t i = 0; i < sizeof bshapes / sizeof *bshapes; i++)
        for (int drop = 0; drop < 2; drop++) {
            struct attn_case c = {.pc = pc, .B = bshapes[i].B, .H = bshapes[i].H, .d = bshapes[i].d,
                                  .T = bshapes[i].T, .tile = bshapes[i].tile, .dropout = drop ? 0.3 : 0};
            ran += check_against_ref(&c);
        }
    return ran;
}

/* --- a batch in two shares of rows, as MPI ranks run it ---------------------------------------- */

/* Sequences 0 .. b1−1 and b1 .. B−1 of c's batch, run apart with their first batch rows (c->row0
 * and c->row0 + b1): out, dq, dk, dv are the whole run's rows and the parameter gradients add up
 * to the whole run's. The control runs the second share as if it began at c->row0, which must
 * draw other masks. */
static int check_shares(const struct attn_case *c, int b1) {
    struct attn_setup a;
    if (!setup_init(&a, c)) return 0;
    const int D = c->H * c->d;
    const long rowq = (long)c->T * c->H * a.s.dq; /* one sequence of q or k (H,T,dq) */
    for (int tiled = 0; tiled < 2; tiled++) {
        struct result whole, lo, hi, wrong;
        run_kernel(&whole, &a, tiled);
        run_rows(&lo, &a, tiled, 0, b1, (uint64_t)c->row0);
        run_rows(&hi, &a, tiled, b1, c->B - b1, (uint64_t)(c->row0 + b1));
        run_rows(&wrong, &a, tiled, b1, c->B - b1, (uint64_t)c->row0);
        /* out, dq, dk, dv of a result, and the reals of one sequence of each */
        const char *name[] = {"out", "dq", "dk", "dv"};
        const long row[] = {(long)c->T * D, rowq, rowq, (long)c->T * 3 * D};
        const double *w[] = {whole.out, whole.dq, whole.dk, whole.dv};
        const double *share[2][4] = {{lo.out, lo.dq, lo.dk, lo.dv}, {hi.out, hi.dq, hi.dk, hi.dv}};
        double worst = 0;
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 2; k++) { /* share k's rows inside the whole run's */
                const long off = k ? b1 * row[i] : 0, n = (k ? c->B - b1 : b1) * row[i];
                double d = rel_diff(share[k][i], w[i] + off, n);
                CHECK(d <= EQ_TOL, "%s shares, %s: share %d's %s differs from the whole batch's by %.3g", describe(c),
                      tiled ? "tiled" : "ref", k, name[i], d);
                worst = fmax(worst, d);
            }
        const long np = (long)a.params.total;
        double *sum = vec(np, 0, 0);
        for (long i = 0; i < np; i++) sum[i] = lo.grad[i] + hi.grad[i];
        double dg = rel_diff(sum, whole.grad, np);
        CHECK(dg <= EQ_TOL, "%s shares, %s: the parameter gradients add up to the whole batch's within %.3g",
              describe(c), tiled ? "tiled" : "ref", dg);
        worst = fmax(worst, dg);
        double control = rel_diff(wrong.out, whole.out + b1 * (long)c->T * D, (c->B - b1) * (long)c->T * D);
        CHECK(control > 1e-3, "%s shares, %s: the second share counted from row %d drew the whole batch's "
              "masks (out differs by %.3g only)", describe(c), tiled ? "tiled" : "ref", c->row0, control);
        printf("  %s, %-5s rows %d+%d: max rel. diff %.2g; counted from row %d: %.2g\n", describe(c),
               tiled ? "tiled" : "ref", b1, c->B - b1, worst, c->row0, control);
        free(sum);
        result_free(&whole), result_free(&lo), result_free(&hi), result_free(&wrong);
    }
    setup_free(&a);
    return 1;
}

/* --- the tiled backward by central differences -------------------------------------------------- */

struct grad_ctx { struct attn_setup a; double *w, *out, *lse; };

/* Σ w ⊙ out, out from the tiled forward */
static double tiled_f(void *p) {
    struct grad_ctx *g = p;
    const struct pelab_attn_call *s = &g->a.s;
    const int D = s->H * s->dv;
    PELAB_ASSERT(pelab_attn_tiled_forward(g->out, g->lse, g->a.qo, g->a.ko, g->a.qkv + 2 * D, s) == PELAB_OK);
    double sum = 0;
    for (long i = 0; i < (long)s->B * s->T * D; i++) sum += g->w[i] * g->out[i];
    return sum;
}

static int check_gradients(const struct attn_case *c) {
    static struct grad_ctx g;
    if (!setup_init(&g.a, c)) return 0;
    struct pelab_attn_call *s = &g.a.s;
    const int D = c->H * c->d;
    const long BT = (long)c->B * c->T, nq = BT * c->H * s->dq;
    g.w = g.a.dout, g.out = vec(BT * D, 0, 0), g.lse = vec(BT * c->H, 0, 0);
    double *dq = vec(nq, 0, 0), *dk = vec(nq, 0, 0), *dv = vec(BT * 3 * D, 0, 0);
    memset(dv, 0, (size_t)BT * 3 * D * sizeof *dv);
    tiled_f(&g);
    pelab_params_zero_grad(&g.a.params);
    CHECK(pelab_attn_tiled_backward(dq, dk, dv + 2 * D, g.w, g.out, g.lse, g.a.qo, g.a.ko, g.a.qkv + 2 * D, s) == PELAB_OK,
          "tiled backward");
    pelab_posenc_backward_end(&g.a.pe);
    double *grad = vec((long)g.a.params.total, 0, 0);
    memcpy(grad, g.a.params.grad, g.a.params.total * sizeof *grad);
    char label[300], what[320];
    snprintf(label, sizeof label, "tiled, %s", describe(c));
    snprintf(what, sizeof what, "%s: q", label);
    gradcheck(what, tiled_f, &g, g.a.qo, dq, nq, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    snprintf(what, sizeof what, "%s: k", label);
    gradcheck(what, tiled_f, &g, g.a.ko, dk, nq, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    /* v sits in the qkv buffer: q's and k's columns there must get exactly zero */
    snprintf(what, sizeof what, "%s: v", label);
    gradcheck(what, tiled_f, &g, g.a.qkv, dv, BT * 3 * D, GRADCHECK_STEP, GRADCHECK_ATOL, GRADCHECK_RTOL);
    if (g.a.pe.ops->bias_tile_backward) /* the kernel's own: the BIAS parameters (QK ones are q's, k's) */
        gradcheck_params(label, tiled_f, &g, &g.a.params, grad, g.a.pe.param_first, g.a.pe.param_end);
    free(dq), free(dk), free(dv), free(grad), free(g.out), free(g.lse);
    setup_free(&g.a);
    return 1;
}

/* --- determinism ---------------------------------------------------------------------------------- */

static int check_bits(const struct pe_case *pc) {
    const struct attn_case c = {pc, 3, 2, 4, 23, 4, 0.1, 0, 0};
    const char *pe = pc->label;
    struct attn_setup a;
    if (!setup_init(&a, &c)) return 0;
    pelab_threads_set(2);
    struct result r[2];
    run_kernel(&r[0], &a, 1);
    run_kernel(&r[1], &a, 1);
    const long BT = (long)c.B * c.T, nq = BT * c.H * a.s.dq;
    int same = memcmp(r[0].out, r[1].out, (size_t)BT * c.H * c.d * sizeof(double)) == 0 &&
               memcmp(r[0].dq, r[1].dq, (size_t)nq * sizeof(double)) == 0 &&
               memcmp(r[0].dk, r[1].dk, (size_t)nq * sizeof(double)) == 0 &&
               memcmp(r[0].dv, r[1].dv, (size_t)BT * 3 * c.H * c.d * sizeof(double)) == 0 &&
               memcmp(r[0].grad, r[1].grad, a.params.total * sizeof(double)) == 0;
    CHECK(same, "%s: two runs on two threads gave different bits", pe);
    printf("  %s: two runs on two threads: %s\n", pe, same ? "same bits" : "DIFFERENT");
    result_free(&r[0]), result_free(&r[1]);
    pelab_threads_set(1);
    setup_free(&a);
    return 1;
}

/* --- whole models ----------------------------------------------------------------------------------- */

enum { MV = 13, MB = 2, MT = 70 }; /* 70: one whole tile of 64 and a partial one */

static void make_model(struct pelab_model *m, const char *attention, const char *const *kv) {
    PELAB_ASSERT(test_model(m, (const char *const[]){"attention", attention, NULL}, kv, MV, MT, NULL, 3, 0.06) == PELAB_OK);
}

/* A (MB, MT) batch: tokens, targets (-1 at every fifth position), positions shifted per row. */
static void make_batch(int32_t *tokens, int32_t *targets, int32_t *pos) {
    for (int i = 0; i < MB * MT; i++) {
        tokens[i] = (int32_t)((i * 7 + 3) % MV);
        targets[i] = i % 5 == 0 ? -1 : (int32_t)((i * 5 + 1) % MV);
        pos[i] = i % MT + 20 * (i / MT);
    }
}

static void check_model(const char *label, const char *const *kv, double dropout) {
    struct pelab_model m[2];
    make_model(&m[0], "ref", kv);
    make_model(&m[1], "tiled", kv);
    CHECK(m[0].cfg.attention == PELAB_ATTN_KERNEL_REF && m[1].cfg.attention == PELAB_ATTN_KERNEL_TILED,
          "%s: --attention not read", label);
    int32_t tokens[MB * MT], targets[MB * MT], pos[MB * MT];
    make_batch(tokens, targets, pos);
    double loss[2];
    for (int k = 0; k < 2; k++) {
        m[k].cfg.dropout = dropout;
        m[k].training = dropout > 0;
        m[k].dropout_key = 99;
        pelab_model_forward(&m[k], tokens, targets, pos, MB, MT);
        loss[k] = m[k].loss;
        pelab_params_zero_grad(&m[k].params);
        pelab_model_backward(&m[k], 1);
    }
    double dl = fabs(loss[0] - loss[1]) / fabs(loss[0]);
    double dg = rel_diff(m[1].params.grad, m[0].params.grad, (long)m[0].params.total);
    double dlogit = rel_diff(pelab_model_logits(&m[1]), pelab_model_logits(&m[0]), (long)MB * MT * MV);
    CHECK(dl <= EQ_TOL && dg <= EQ_TOL && dlogit <= EQ_TOL,
          "%s: ref and tiled differ: loss %.3g, logits %.3g, gradients %.3g", label, dl, dlogit, dg);
    printf("  model %-16s loss %.6f  rel. diff loss %.2g, logits %.2g, gradients %.2g\n", label, loss[0], dl,
           dlogit, dg);
    pelab_model_free(&m[0]);
    pelab_model_free(&m[1]);
}

/* The batch's rows run one at a time, as MPI ranks run their shares (train.c): row b's forward
 * with dropout_row0 = b gives the whole batch's losses at row b, and the backward passes, each
 * weighted by its share of the targets, add up to the whole batch's gradient. The control: row 1
 * counted as row 0 draws other masks (the residual, MLP and attention dropout alike). */
static void check_model_shares(const char *label, const char *const *kv, const char *attention) {
    struct pelab_model m;
    make_model(&m, attention, kv);
    if (!pe_extent_free(&m.pe, label, MT + 20, "rows one at a time")) { /* each row's pass its own extent */
        pelab_model_free(&m);
        return;
    }
    int32_t tokens[MB * MT], targets[MB * MT], pos[MB * MT];
    make_batch(tokens, targets, pos);
    m.cfg.dropout = 0.2;
    m.training = 1;
    m.dropout_key = 99;
    const long np = (long)m.params.total;
    double *losses = vec(MB * MT, 0, 0), *grad = vec(np, 0, 0);
    pelab_model_forward(&m, tokens, targets, pos, MB, MT);
    double loss = m.loss;
    const int n_all = m.n_targets;
    memcpy(losses, pelab_model_losses(&m), MB * MT * sizeof *losses);
    pelab_params_zero_grad(&m.params);
    pelab_model_backward(&m, 1);
    memcpy(grad, m.params.grad, (size_t)np * sizeof *grad);
    pelab_params_zero_grad(&m.params);
    double worst = 0, wsum = 0;
    for (int b = 0; b < MB; b++) {
        m.dropout_row0 = (uint64_t)b;
        pelab_model_forward(&m, tokens + b * MT, targets + b * MT, pos + b * MT, 1, MT);
        double l = m.loss;
        double d = rel_diff(pelab_model_losses(&m), losses + b * MT, MT);
        CHECK(d <= EQ_TOL, "%s, %s: row %d alone (dropout_row0 %d) gives other losses than in the batch (%.3g)",
              label, attention, b, b, d);
        worst = fmax(worst, d);
        const double w = (double)m.n_targets / n_all;
        wsum += l * w;
        pelab_model_backward(&m, (pelab_real)w);
    }
    double dl = fabs(wsum - loss) / fabs(loss), dg = rel_diff(m.params.grad, grad, np);
    CHECK(dl <= EQ_TOL && dg <= EQ_TOL, "%s, %s: the rows one at a time differ from the batch: loss %.3g, "
          "gradients %.3g", label, attention, dl, dg);
    m.dropout_row0 = 0;
    pelab_model_forward(&m, tokens + MT, targets + MT, pos + MT, 1, MT);
    double control = rel_diff(pelab_model_losses(&m), losses + MT, MT);
    CHECK(control > 1e-3, "%s, %s: row 1 counted as row 0 drew the batch's masks (losses differ by %.3g only)",
          label, attention, control);
    printf("  model %-6s %-5s rows one at a time: rel. diff losses %.2g, loss %.2g, gradients %.2g; "
           "row 1 as row 0: %.2g\n", label, attention, worst, dl, dg, control);
    free(losses), free(grad);
    pelab_model_free(&m);
}

/* The default kernel is the tiled one, and config.json (the model's settings) records it. */
static void check_settings(void) {
    struct pelab_model m;
    PELAB_ASSERT(pelab_model_init(&m, NULL, MV, MT) == PELAB_OK);
    struct pelab_opts s;
    PELAB_ASSERT(pelab_model_settings(&m, &s) == PELAB_OK);
    const char *v = pelab_opts_get(&s, "attention");
    CHECK(m.cfg.attention == PELAB_ATTN_KERNEL_TILED && v && strcmp(v, "tiled") == 0,
          "the default kernel should be tiled and recorded (got %s)", v ? v : "nothing");
    pelab_model_free(&m);
    struct pelab_opts o = {0};
    pelab_opts_set(&o, "attention", "flash");
    CHECK(pelab_model_init(&m, &o, MV, MT) == PELAB_ERR_USAGE, "--attention flash accepted");
    CHECK(strstr(pelab_last_error(), "attention") != NULL, "the error should name --attention: %s", pelab_last_error());
}

/* --- SPEC §5: long evaluations in memory linear in T --------------------------------------------- */

enum { LONG_T = 10240 };

/* Run in a child process (the cap must not outlive the check): the address space is capped at
 * what the process has plus 1 GiB, less than one layer's (H,T,T) probabilities of 2 heads (1.6 GiB
 * in double). The tiled model evaluates 10240 tokens under the cap; the reference cannot reserve. */
static int long_eval_child(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    if (!pages) {
        printf("skipped: /proc/self/statm unreadable\n");
        return 0;
    }
    struct rlimit lim = {.rlim_cur = pages * 4096ul + (1ul << 30), .rlim_max = RLIM_INFINITY};
    lim.rlim_max = lim.rlim_cur;
    CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit");
    pelab_threads_set(2);
    struct pelab_model m[2];
    const char *const kv[] = {"d-model", "8", "layers", "1", NULL}; /* the default encoding: any would do */
    struct pelab_opts o = {0};
    for (const char *const *p = kv; *p; p += 2) pelab_opts_set(&o, p[0], p[1]);
    pelab_opts_set(&o, "heads", "2");
    pelab_opts_set(&o, "attention", "tiled");
    PELAB_ASSERT(pelab_model_init(&m[0], &o, 7, 256) == PELAB_OK);
    pelab_opts_set(&o, "attention", "ref");
    PELAB_ASSERT(pelab_model_init(&m[1], &o, 7, 256) == PELAB_OK);
    pelab_model_init_weights(&m[0], 1);
    int32_t *tok = malloc(LONG_T * sizeof *tok), *tgt = malloc(LONG_T * sizeof *tgt), *pos = malloc(LONG_T * sizeof *pos);
    for (int t = 0; t < LONG_T; t++) tok[t] = t % 7, tgt[t] = (t + 1) % 7, pos[t] = t;
    CHECK(pelab_model_reserve(&m[0], 1, LONG_T) == PELAB_OK, "tiled: %s", pelab_last_error());
    pelab_model_forward(&m[0], tok, tgt, pos, 1, LONG_T);
    double loss = m[0].loss;
    CHECK(isfinite(loss) && m[0].status == PELAB_OK, "tiled: 10240-token loss %g", loss);
    int rc = pelab_model_reserve(&m[1], 1, LONG_T);
    CHECK(rc == PELAB_ERR_RUNTIME, "the reference kernel reserved (1,2,%d,%d) under the cap: the cap proves nothing",
          LONG_T, LONG_T);
    printf("  %d tokens under a cap of %.2f GiB: tiled loss %.4f; reference: %s\n", LONG_T,
           (double)lim.rlim_cur / (1ul << 30), loss, rc ? pelab_last_error() : "reserved");
    free(tok), free(tgt), free(pos);
    pelab_model_free(&m[0]);
    pelab_model_free(&m[1]);
    return check_report("test_attn (long evaluation)");
}

/* How many cases each group of checks ran. */
struct counts {
    int kernels, gradients, shares, bits, models;
};

/* The kernel-level checks of one case, at its contract's smaller sizes (each passes over a case that does not reach the kernels
 * through q, k and the bias alone): against the reference; the tiled backward by central
 * differences, with and without dropout (its masks from batch row 3, a share of a batch), at odd
 * widths, tiles of 2 to 4, positions from 0 and shifted, and T past FIRE's L = 8·|ℓ|; a batch in
 * two shares of rows; two runs on two threads. */
static void check_kernels(struct pe_case *pc, void *counts) {
    struct counts *n = counts;
    pe_case_small(pc);
    n->kernels += check_cases(pc) > 0;
    const struct { int B, H, d, T, tile, shifted; } causal[] = {
        {2, 2, 3, 7, 3, 0}, {2, 2, 2, 7, 2, 0}, {1, 2, 2, 8, 3, 1}, {2, 2, 2, 11, 4, 0}},
      bidirectional[] = {{2, 2, 2, 10, 4, 0}};
    const int nb = pc->layout.bidirectional ? 1 : 4;
    int ran = 0;
    for (int drop = 0; drop < 2; drop++)
        for (int i = 0; i < nb; i++) {
            const struct attn_case c = {.pc = pc, .B = (pc->layout.bidirectional ? bidirectional : causal)[i].B,
                                        .H = (pc->layout.bidirectional ? bidirectional : causal)[i].H,
                                        .d = (pc->layout.bidirectional ? bidirectional : causal)[i].d,
                                        .T = (pc->layout.bidirectional ? bidirectional : causal)[i].T,
                                        .tile = (pc->layout.bidirectional ? bidirectional : causal)[i].tile,
                                        .shifted = (pc->layout.bidirectional ? bidirectional : causal)[i].shifted,
                                        .dropout = drop ? 0.3 : 0, .row0 = drop ? 3 : 0};
            ran += check_gradients(&c);
        }
    n->gradients += ran > 0;
    if (pc->layout.bidirectional) return;
    ran = check_shares(&(struct attn_case){.pc = pc, .B = 3, .H = 2, .d = 4, .T = 13, .tile = 4, .dropout = 0.3}, 1);
    ran += check_shares(&(struct attn_case){.pc = pc, .B = 3, .H = 2, .d = 2, .T = 12, .tile = 3, .dropout = 0.3,
                                            .shifted = 1, .row0 = 5}, 2);
    ran += check_shares(&(struct attn_case){.pc = pc, .B = 2, .H = 2, .d = 2, .T = 11, .tile = 4, .dropout = 0.3}, 1);
    n->shares += ran > 0;
    n->bits += check_bits(pc);
}

/* The whole-model checks of one case: ref against tiled without dropout and with it, and the rows
 * of a batch one at a time in either kernel. Positions reach 89 past a training length of 70 (a
 * table that ends is given 100, contract.reach). */
static void check_models(struct pe_case *pc, void *counts) {
    pe_case_fit(pc, MT, 100);
    pe_case_small(pc);
    check_model(pc->label, pc->opts, 0);
    check_model(pc->label, pc->opts, 0.2);
    for (int ref = 0; ref < 2; ref++) check_model_shares(pc->label, pc->opts, ref ? "ref" : "tiled");
    ((struct counts *)counts)->models++;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--long-eval") == 0) return long_eval_child();
    struct counts n = {0};
    printf("the kernels: tiled against the reference, the tiled backward, shares, determinism\n");
    const char *only = argc > 1 ? argv[1] : NULL; /* one encoding's cases */
    for_each_pe_case(&(struct pe_walk){PE_TEXT | PE_IMAGE | PE_RASTER, 0, 4, only}, check_kernels, &n);
    printf("whole models, --attention ref and tiled\n");
    check_settings();
    for_each_pe_case(&(struct pe_walk){PE_TEXT, 0, 0, only}, check_models, &n);
    printf("cases: kernels %d, tiled backward %d, shares %d, determinism %d, whole models %d\n", n.kernels,
           n.gradients, n.shares, n.bits, n.models);
    CHECK(n.kernels > 0 && n.gradients > 0 && n.shares > 0 && n.bits > 0 && n.models > 0,
          "a group of checks ran on no case");
    printf("a %d-token evaluation\n", LONG_T);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --long-eval", argv[0]);
    fflush(stdout);
    int rc = system(cmd);
    CHECK(rc == 0, "the long evaluation failed (status %d)", rc);
    return check_report("test_attn");
}
