/* fire, fire-shared — Functional Interpolation for Relative Positions (Li et al. 2024,
 * "Functional Interpolation for Relative Positions Improves Long Context Transformers").
 *
 *   bias_h(t, s) = f_θ(u)_h,   u = ψ(t − s) / (ψ(max(t, L)) + 1e-6),   ψ(x) = ln(|c·x| + 1)
 *   L = |ℓ| · L_train          (L_train: the training context, pe->max_seq)
 *   f_θ: MLP 1 → W → … → W → H, ReLU on the hidden layers, none (and no bias) on the output
 *
 * The log transform and the normalisation by the query position make u ≤ 1 for every key, so a
 * model trained at L_train meets no new inputs of f at longer contexts (the paper's progressive
 * interpolation); below L the normaliser is the constant ψ(L) and the bias depends on t − s only.
 * c (init 0.1) and ℓ (init 1) are learned; at t = L exactly, max picks t and ℓ gets no gradient.
 * `fire` keeps one FIRE per layer (`blocks.{l}.attn.fire.*`), `fire-shared` one for all layers
 * (`pe.fire.*`). Parameters: layers.{i}.weight (out, in) for i = 0..depth, layers.{i}.bias (out,)
 * for the hidden layers i < depth, and c, ell (1,). The output layer has no bias: a constant per
 * head is added to every score of a row and the softmax removes it, so its gradient is exactly
 * zero and only rounding noise would reach it, which AdamW's normalisation turns into full-size
 * random steps.
 *
 * MLP init: PyTorch's nn.Linear default, weights and biases uniform in ±1/√fan_in. With a scalar
 * input the first layer's ReLU kinks (−b/w) then spread over u's range, so the initial bias is a
 * small (~0.1) non-linear function of distance whose gradient reaches every layer; N(0, 0.02)
 * weights would start it near 1e-4 with vanishing gradients to the inner layers.
 *
 * Tiles. Rows with t < L share the normaliser ψ(L), so their biases depend only on n = |t − s|,
 * and read a table of f by distance: the pass's (prepare evaluates f once per FIRE, head and
 * distance 0..the pass's largest position, up to FIRE_PASS_DIST_MAX, while the weights are those
 * it was made with), else the tile's own over its range of distances (when that range is no
 * larger than nq + nk, as for contiguous or shifted positions, or than FIRE_TAB_STACK, as for the
 * randomised positions of a short sequence); rows with t ≥ L, and ranges too wide to tabulate,
 * evaluate f per entry. Every table holds the values the entries would compute (the same inputs
 * through the same lanes). The tile's table lives on the stack up to FIRE_TAB_STACK distances (any
 * tile of the tiled kernel), so a training step allocates nothing once the pass's table has grown
 * to its length; the reference kernel's whole-sequence tiles past that length allocate theirs. The
 * MLP runs on FIRE_LANES inputs at once (a table's distances, a row's keys, the backward's pending
 * entries): its W² multiply–adds per input dominate a short sequence's step, and lane-wise they
 * vectorise without horizontal sums. bias_tile only reads the encoding's state, so it is safe to
 * call from parallel threads; bias_tile_backward accumulates into the gradient array it is given,
 * which attention kernels keep private to a thread or use serially (posenc.h). The backward sums
 * the upstream gradient of the rows t < L per distance and runs the MLP's backward once per
 * distance of the sum: over the whole pass when the pass's table covers the tile's distances (a sum
 * per thread, finished by backward_end: with randomised positions every tile of a batch meets
 * hundreds of distances, mostly the same ones, and a backward per tile and distance dominated the
 * step), else over the tile when its range is tabulable; other entries run
 * it per entry. Both are a different order of the same sum than per entry.
 *
 * backward, for one input u with upstream g (the sum of dout over the entries that share u):
 *   the MLP's parameter grads += as for any MLP (only output row h receives gradient);
 *   du = Σ_o W0[o]·dz0[o];   A = ψ(x), P = ψ(m) + 1e-6, u = A / P
 *   dc += du (sgn(c)|x| / (|c x| + 1) / P − A/P² · sgn(c)|m| / (|c m| + 1))
 *   dℓ += du (−A/P²) |c| / (|c m| + 1) · L_train sgn(ℓ)         only where m = L > t
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/vmath.h"

#define FIRE_DEPTH_MAX 8
#define FIRE_WIDTH_MAX 256
#define FIRE_EPS 1e-6

static const struct pelab_optdef fire_options[] = {
    {"fire-width", PELAB_OPT_INT, "32", 1, FIRE_WIDTH_MAX, NULL, "FIRE MLP hidden width W"},
    {"fire-depth", PELAB_OPT_INT, "2", 0, FIRE_DEPTH_MAX, NULL,
     "FIRE MLP hidden layers (2: 1 → W → W → heads; 0: linear in u)"},
    {0},
};

struct fire_net { /* parameter indices of one FIRE */
    int w[FIRE_DEPTH_MAX + 1], b[FIRE_DEPTH_MAX + 1];
    int c, ell;
};

struct fire {
    int width, depth;
    struct fire_net *net; /* (N,) per layer, or (1,) shared */
    int shared;
    /* The pass's table (prepare): f at every distance 0..n_dist−1 with the normaliser L, per
     * FIRE and head, (nets, H, n_dist), and the weights each FIRE had when it was made, (nets,
     * net_size), against which bias_tile checks that it still holds (n_dist 0: no table). */
    pelab_real *pass_tab, *pass_weights;
    long n_dist, net_size, cap_dist;
    /* The pass's waiting backward: the upstream gradient of the rows t < L summed per distance,
     * (slots, nets, H, n_dist), a slot per thread of the team that runs the tile backwards
     * (slot_used: written since the last backward_end), which backward_end sums in slot order. */
    pelab_real *wait_g;
    unsigned char *slot_used;
    int slots;
};

/* One FIRE's parameters (and gradients) for a call. */
struct view {
    const pelab_real *w[FIRE_DEPTH_MAX + 1], *b[FIRE_DEPTH_MAX + 1];
    pelab_real *dw[FIRE_DEPTH_MAX + 1], *db[FIRE_DEPTH_MAX + 1];
    double c, L;        /* c, and L = |ℓ| · L_train */
    double dL_dell;     /* L_train · sgn(ℓ) */
    double dc, dell;    /* backward: a call's sums, added to the gradients at its end */
    int W, depth;
};

static int fire_init_common(struct pelab_posenc *pe, const struct pelab_opts *opts,
                            struct pelab_params *params, int shared) {
    struct fire *f = calloc(1, sizeof *f);
    if (!f) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = f;
    f->width = (int)pelab_opt_int(opts, fire_options, "fire-width");
    f->depth = (int)pelab_opt_int(opts, fire_options, "fire-depth");
    f->shared = shared;
    int n = f->shared ? 1 : pe->n_layers;
    f->net = calloc((size_t)n, sizeof *f->net);
    if (!f->net) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int l = 0; l < n; l++) {
        char prefix[PELAB_PARAM_NAME_MAX], name[PELAB_PARAM_NAME_MAX + 32];
        if (f->shared) snprintf(prefix, sizeof prefix, "pe.fire");
        else snprintf(prefix, sizeof prefix, "blocks.%d.attn.fire", l);
        struct fire_net *net = &f->net[l];
        for (int i = 0; i <= f->depth; i++) {
            int64_t out = i == f->depth ? pe->H : f->width, in = i == 0 ? 1 : f->width;
            int64_t shape[2] = {out, in};
            snprintf(name, sizeof name, "%s.layers.%d.weight", prefix, i);
            net->w[i] = pelab_params_declare(params, name, 2, shape, 0);
            if (i == f->depth) break;
            snprintf(name, sizeof name, "%s.layers.%d.bias", prefix, i);
            net->b[i] = pelab_params_declare(params, name, 1, shape, 0);
        }
        int64_t one = 1;
        snprintf(name, sizeof name, "%s.c", prefix);
        net->c = pelab_params_declare(params, name, 1, &one, 0);
        snprintf(name, sizeof name, "%s.ell", prefix);
        net->ell = pelab_params_declare(params, name, 1, &one, 0);
    }
    return PELAB_OK;
}

static int fire_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    return fire_init_common(pe, opts, params, 0);
}

static int fire_shared_init(struct pelab_posenc *pe, const struct pelab_opts *opts,
                            struct pelab_params *params) {
    return fire_init_common(pe, opts, params, 1);
}

static void fire_free(struct pelab_posenc *pe) {
    struct fire *f = pe->state;
    if (!f) return;
    free(f->net);
    free(f->pass_tab);
    free(f->pass_weights);
    free(f->wait_g);
    free(f->slot_used);
    free(f);
}

static void fire_init_params(struct pelab_posenc *pe, struct pelab_rng *rng) {
    const struct fire *f = pe->state;
    for (int l = 0; l < (f->shared ? 1 : pe->n_layers); l++) {
        const struct fire_net *net = &f->net[l];
        for (int i = 0; i <= f->depth; i++) {
            const struct pelab_param *w = &pe->params->list[net->w[i]];
            const double bound = 1 / sqrt((double)w->shape[1]);
            pelab_real *wd = pelab_params_data(pe->params, net->w[i]);
            for (size_t j = 0; j < w->size; j++) wd[j] = (pelab_real)(bound * (2 * pelab_rng_uniform(rng) - 1));
            if (i == f->depth) break;
            pelab_real *bd = pelab_params_data(pe->params, net->b[i]);
            for (int64_t j = 0; j < w->shape[0]; j++) bd[j] = (pelab_real)(bound * (2 * pelab_rng_uniform(rng) - 1));
        }
        pelab_params_data(pe->params, net->c)[0] = (pelab_real)0.1;
        pelab_params_data(pe->params, net->ell)[0] = 1;
    }
}

/* grad: the encoding's gradient range the backward adds into (posenc.h), or NULL (forward). */
static void load_view(const struct pelab_posenc *pe, int layer, pelab_real *grad, struct view *v) {
    const struct fire *f = pe->state;
    const struct fire_net *net = &f->net[f->shared ? 0 : layer];
    for (int i = 0; i <= f->depth; i++) {
        v->w[i] = pelab_params_data(pe->params, net->w[i]);
        v->dw[i] = grad ? pelab_posenc_grad(pe, grad, net->w[i]) : NULL;
    }
    for (int i = 0; i < f->depth; i++) {
        v->b[i] = pelab_params_data(pe->params, net->b[i]);
        v->db[i] = grad ? pelab_posenc_grad(pe, grad, net->b[i]) : NULL;
    }
    const double ell = pelab_params_data(pe->params, net->ell)[0];
    v->c = pelab_params_data(pe->params, net->c)[0];
    v->L = fabs(ell) * pe->max_seq;
    v->dL_dell = (double)pe->max_seq * ((ell > 0) - (ell < 0));
    v->dc = v->dell = 0;
    v->W = f->width;
    v->depth = f->depth;
}

/* |a − b| without overflow. */
static inline int64_t dist(int32_t a, int32_t b) {
    int64_t n = (int64_t)a - b;
    return n < 0 ? -n : n;
}

static inline double psi(double c, double x) { return log1p(fabs(c * x)); }

/* u for distance n (|t − s|) and normaliser position m = max(t, L). */
static inline double input_of(const struct view *v, double n, double m) {
    return psi(v->c, n) / (psi(v->c, m) + FIRE_EPS);
}

static inline pelab_real relu(pelab_real x) { return x > 0 ? x : 0; }

/* Inputs the MLP evaluates together, one per lane: every hidden activation is stored (W, LANES),
 * so each layer is a loop over inputs of a weight broadcast — vectorised, with no horizontal sums. */
#define FIRE_LANES 16
/* The hidden activations of FIRE_LANES inputs (depth, W, LANES), on the stack, sized to the model:
 * 4 KiB at the default depth 2, width 32 in float (at least one depth's worth, so never empty). */
#define FIRE_ACT(v) ((v).depth > 0 ? (v).depth * (v).W * FIRE_LANES : (v).W * FIRE_LANES)
#define FIRE_ROWS 4 /* outputs of a layer summed together */

/* acc[r][k] = Σ_i w[r·W + i] · in[i][k] for the R rows of w, summed in order of i. */
static PELAB_ALWAYS_INLINE void layer_rows(const pelab_real *w, int W, const pelab_real *in,
                                           pelab_real acc[][FIRE_LANES], const int R) {
    for (int r = 0; r < R; r++)
        for (int k = 0; k < FIRE_LANES; k++) acc[r][k] = 0;
    for (int i = 0; i < W; i++) {
        const pelab_real *x = in + (long)i * FIRE_LANES;
        for (int r = 0; r < R; r++) {
            const pelab_real wi = w[(long)r * W + i];
#pragma omp simd
            for (int k = 0; k < FIRE_LANES; k++) acc[r][k] += wi * x[k];
        }
    }
}

/* f(u_k)_h for the LANES inputs u (a lane not in use holds any finite value). act (depth, W, LANES)
 * keeps the hidden activations after ReLU for a backward (a > 0 exactly where the pre-activation
 * is, so they double as the ReLU masks).
 *   a_0 = relu(w_0 u + b_0),   a_l = relu(W_l a_{l−1} + b_l),   f = W_D[h] · a_{D−1} */
static PELAB_ALWAYS_INLINE void mlp_forward_body(const struct view *v, int h, const pelab_real *u,
                                                pelab_real *f, pelab_real *act) {
    const int W = v->W, D = v->depth;
    if (D == 0) {
        for (int k = 0; k < FIRE_LANES; k++) f[k] = v->w[0][h] * u[k];
        return;
    }
    for (int o = 0; o < W; o++) {
        const pelab_real w = v->w[0][o], b = v->b[0][o];
#pragma omp simd
        for (int k = 0; k < FIRE_LANES; k++) act[o * FIRE_LANES + k] = relu(w * u[k] + b);
    }
    for (int l = 1; l <= D; l++) {
        const pelab_real *in = act + (long)(l - 1) * W * FIRE_LANES;
        pelab_real *out = act + (long)l * W * FIRE_LANES;
        const int first = l == D ? h : 0, last = l == D ? h + 1 : W; /* the output layer: row h */
        /* FIRE_ROWS outputs at a time: independent sums hide the adds' latency, and each input
         * vector is loaded once for all of them; then one at a time */
        for (int o = first; o < last;) {
            const int R = last - o >= FIRE_ROWS ? FIRE_ROWS : 1;
            pelab_real acc[FIRE_ROWS][FIRE_LANES];
            if (R == FIRE_ROWS) layer_rows(v->w[l] + (long)o * W, W, in, acc, FIRE_ROWS);
            else layer_rows(v->w[l] + (long)o * W, W, in, acc, 1);
            for (int r = 0; r < R; r++, o++)
                for (int k = 0; k < FIRE_LANES; k++) {
                    if (l == D) f[k] = acc[r][k];
                    else out[(long)o * FIRE_LANES + k] = relu(acc[r][k] + v->b[l][o]);
                }
        }
    }
}

/* compiled for AVX-512, AVX2 and the portable target (kernels/cpu/simd.h); the sums run in the
 * same order at every level */
PELAB_SIMD_KERNEL(mlp_forward, (const struct view *v, int h, const pelab_real *u, pelab_real *f, pelab_real *act),
                  (v, h, u, f, act))

/* Parameter grads += for upstream g at input u, whose hidden activations a (depth, W) one lane
 * of mlp_forward's holds; returns ∂/∂u. dz (2, W) scratch. */
static pelab_real mlp_backward(const struct view *v, int h, pelab_real u, const pelab_real *a,
                               pelab_real g, pelab_real *dz) {
    const int W = v->W, D = v->depth;
    if (D == 0) {
        v->dw[0][h] += g * u;
        return g * v->w[0][h];
    }
    pelab_real *cur = dz, *next = dz + W;
    const pelab_real *last = a + (long)(D - 1) * W, *row = v->w[D] + (long)h * W;
    pelab_real *drow = v->dw[D] + (long)h * W;
#pragma omp simd
    for (int i = 0; i < W; i++) {
        drow[i] += g * last[i];
        cur[i] = last[i] > 0 ? g * row[i] : 0;
    }
    for (int l = D - 1; l >= 1; l--) { /* cur = ∂/∂z_l; layer l maps a_{l−1} to z_l */
        const pelab_real *in = a + (long)(l - 1) * W;
        for (int i = 0; i < W; i++) next[i] = 0;
        for (int o = 0; o < W; o++) {
            const pelab_real c = cur[o];
            if (c == 0) continue; /* a ReLU that was off: nothing flows */
            const pelab_real *wr = v->w[l] + (long)o * W;
            pelab_real *dwr = v->dw[l] + (long)o * W;
            v->db[l][o] += c;
#pragma omp simd
            for (int i = 0; i < W; i++) {
                dwr[i] += c * in[i];
                next[i] += wr[i] * c;
            }
        }
        for (int i = 0; i < W; i++) next[i] = in[i] > 0 ? next[i] : 0;
        pelab_real *t = cur;
        cur = next, next = t;
    }
    pelab_real du = 0;
    for (int o = 0; o < W; o++) {
        v->db[0][o] += cur[o];
        v->dw[0][o] += cur[o] * u;
        du += v->w[0][o] * cur[o];
    }
    return du;
}

/* Distances a tile's table holds on the stack: 2·PELAB_PE_TILE at least, so every tile of the
 * tiled kernel (nq + nk ≤ 2 tiles) is tabulated without an allocation. */
#define FIRE_TAB_STACK 512
_Static_assert(FIRE_TAB_STACK >= 2 * PELAB_PE_TILE, "a tiled kernel's tile must fit the stack table");

/* Inputs waiting for their backward: distance n, normaliser position m (m = L or not), upstream g. */
struct pending {
    double n[FIRE_LANES], m[FIRE_LANES];
    pelab_real g[FIRE_LANES];
    int m_is_L[FIRE_LANES], count;
};

/* The pending inputs' whole backward, in the order they came: MLP grads, then u's dependence on c
 * (and on ℓ when m = L) into v->dc, v->dell. act (depth, W, LANES), lane (depth, W), dz (2, W)
 * scratch. */
static void flush_backward(struct view *v, int h, struct pending *p, pelab_real *act, pelab_real *lane,
                           pelab_real *dz) {
    pelab_real u[FIRE_LANES] = {0}, f[FIRE_LANES];
    double A[FIRE_LANES], P[FIRE_LANES];
    for (int k = 0; k < p->count; k++) {
        A[k] = psi(v->c, p->n[k]), P[k] = psi(v->c, p->m[k]) + FIRE_EPS;
        u[k] = (pelab_real)(A[k] / P[k]);
    }
    pelab_simd_fn(mlp_forward)(v, h, u, f, act);
    const double ac = fabs(v->c), sc = (v->c > 0) - (v->c < 0);
    for (int k = 0; k < p->count; k++) {
        const double n = p->n[k], m = p->m[k];
        for (long e = 0; e < (long)v->depth * v->W; e++) lane[e] = act[e * FIRE_LANES + k]; /* contiguous */
        const double du = mlp_backward(v, h, u[k], lane, p->g[k], dz);
        const double dP = -A[k] / (P[k] * P[k]); /* ∂u/∂ψ(m) */
        v->dc += du * (sc * fabs(n) / (ac * fabs(n) + 1) / P[k] + dP * sc * fabs(m) / (ac * fabs(m) + 1));
        if (p->m_is_L[k]) v->dell += du * dP * ac * ((m > 0) - (m < 0)) / (ac * fabs(m) + 1) * v->dL_dell;
    }
    p->count = 0;
}

static void push_backward(struct view *v, int h, struct pending *p, double n, double m, int m_is_L,
                          pelab_real g, pelab_real *act, pelab_real *lane, pelab_real *dz) {
    p->n[p->count] = n, p->m[p->count] = m, p->g[p->count] = g, p->m_is_L[p->count] = m_is_L;
    if (++p->count == FIRE_LANES) flush_backward(v, h, p, act, lane, dz);
}

/* The distances [*lo, *hi] between the tile's rows with t < L and its keys; *lo = −1 when it has
 * no such row. */
static void short_distances(const struct view *v, const int32_t *pos_q, int nq, const int32_t *pos_k,
                            int nk, int64_t *lo, int64_t *hi) {
    int64_t mn = -1, mx = -1;
    for (int i = 0; i < nq; i++) {
        if (!(pos_q[i] < v->L)) continue;
        for (int j = 0; j < nk; j++) {
            int64_t n = dist(pos_q[i], pos_k[j]);
            if (mn < 0 || n < mn) mn = n;
            if (n > mx) mx = n;
        }
    }
    *lo = mn, *hi = mx;
}

/* How many distances from lo to hi a tile tabulates: all of them when the range is no larger
 * than nq + nk (contiguous or shifted positions) or than FIRE_TAB_STACK (randomised positions of
 * a short sequence, whose distances spread over a range wider than the tile but still fewer than
 * its entries); 0 otherwise, or when lo < 0 (no row with t < L). */
static int64_t table_size(int64_t lo, int64_t hi, int nq, int nk) {
    const int64_t range = hi - lo + 1;
    return lo >= 0 && (range <= (int64_t)nq + nk || range <= FIRE_TAB_STACK) ? range : 0;
}

/* f at distances lo..lo+R−1 with the normaliser L (the rows t < L), into tab (R). */
static void tabulate(const struct view *v, int h, int64_t lo, int64_t R, pelab_real *tab, pelab_real *act) {
    pelab_real u[FIRE_LANES] = {0}, f[FIRE_LANES];
    for (int64_t n0 = 0; n0 < R; n0 += FIRE_LANES) {
        const int K = R - n0 < FIRE_LANES ? (int)(R - n0) : FIRE_LANES;
        for (int k = 0; k < K; k++) u[k] = (pelab_real)input_of(v, (double)(lo + n0 + k), v->L);
        pelab_simd_fn(mlp_forward)(v, h, u, f, act);
        for (int k = 0; k < K; k++) tab[n0 + k] = f[k];
    }
}

/* One FIRE's weights (w, b, c, ℓ: consecutive parameters, so one range of values). */
static const pelab_real *net_weights(const struct pelab_posenc *pe, const struct fire_net *net) {
    return pelab_params_data(pe->params, net->w[0]);
}

/* Distances the pass's table holds at most: (layers, heads, distances) reals, 4 MiB for the
 * 3-layer, 4-head cpu models; a longer pass (an evaluation far beyond training) tabulates per tile. */
#define FIRE_PASS_DIST_MAX 8192

/* Each pass evaluates f once per FIRE, head and distance its short rows can meet (0..max
 * position), instead of once per tile: with randomised positions every tile meets hundreds of
 * distances, and the tiles of a batch (B rows × heads × layers) evaluated them again each time. The
 * table holds the values the tiles would compute (the same inputs through the same lanes), so a
 * run is the same with it or without. */
static void fire_backward_end(struct pelab_posenc *pe);

static int fire_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct fire *f = pe->state;
    const int nets = f->shared ? 1 : pe->n_layers, slots = pelab_threads_get();
    int32_t top = 0;
    for (long i = 0; i < (long)B * T; i++) top = pos[i] > top ? pos[i] : top;
    fire_backward_end(pe); /* a backward left waiting (a caller that never ended it) loses nothing */
    f->n_dist = 0;
    if ((long)top + 1 > FIRE_PASS_DIST_MAX) return PELAB_OK; /* per tile */
    const long n_dist = (long)top + 1;
    if (!f->net_size) f->net_size = pelab_params_data(pe->params, f->net[0].ell) + 1 - net_weights(pe, &f->net[0]);
    if (n_dist > f->cap_dist || slots > f->slots) {
        const long cap = n_dist > f->cap_dist ? n_dist : f->cap_dist;
        const size_t per_net = (size_t)nets * pe->H * cap;
        pelab_real *tab = realloc(f->pass_tab, per_net * sizeof *tab);
        if (tab) f->pass_tab = tab;
        free(f->wait_g), free(f->slot_used);
        f->wait_g = calloc((size_t)slots * per_net, sizeof *f->wait_g);
        f->slot_used = calloc((size_t)slots, 1);
        f->slots = f->wait_g && f->slot_used ? slots : 0;
        if (!f->pass_weights) f->pass_weights = malloc((size_t)nets * f->net_size * sizeof *f->pass_weights);
        if (!tab || !f->pass_weights || !f->slots)
            return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for FIRE's table of distances");
        f->cap_dist = cap;
    }
    for (int l = 0; l < nets; l++) {
        struct view v;
        load_view(pe, l, NULL, &v);
        pelab_real act[FIRE_ACT(v)];
        for (int h = 0; h < pe->H; h++) tabulate(&v, h, 0, n_dist, f->pass_tab + ((long)l * pe->H + h) * n_dist, act);
        memcpy(f->pass_weights + (long)l * f->net_size, net_weights(pe, &f->net[l]), (size_t)f->net_size * sizeof *f->pass_weights);
    }
    f->n_dist = n_dist;
    return PELAB_OK;
}

/* The pass's table of FIRE `net`, head h, if it covers distances lo..lo+R−1 and the weights are
 * still those it was made with (a caller may change them between passes: a gradient check, an
 * optimiser step before a tile outside any pass); NULL otherwise. */
static const pelab_real *pass_table(const struct pelab_posenc *pe, int net, int h, int64_t lo, int64_t R) {
    const struct fire *f = pe->state;
    if (!f->n_dist || lo + R > f->n_dist ||
        memcmp(f->pass_weights + (long)net * f->net_size, net_weights(pe, &f->net[net]),
               (size_t)f->net_size * sizeof *f->pass_weights) != 0)
        return NULL;
    return f->pass_tab + ((long)net * pe->H + h) * f->n_dist + lo;
}

static void fire_bias_tile(struct pelab_posenc *pe, int layer, int h, pelab_real *out,
                           const int32_t *pos_q, int nq, const int32_t *pos_k, int nk) {
    const struct fire *fs = pe->state;
    struct view v;
    load_view(pe, layer, NULL, &v);
    pelab_real act[FIRE_ACT(v)], stack_tab[FIRE_TAB_STACK];
    pelab_real u[FIRE_LANES] = {0}, f[FIRE_LANES];
    /* the rows t < L read a table: the pass's, else the tile's own, else (none fits in memory)
     * they evaluate f per entry as the rows t ≥ L do */
    int64_t lo, hi, R;
    short_distances(&v, pos_q, nq, pos_k, nk, &lo, &hi);
    const pelab_real *pass = lo >= 0 ? pass_table(pe, fs->shared ? 0 : layer, h, lo, hi - lo + 1) : NULL;
    pelab_real *own = NULL;
    if (!pass) {
        R = table_size(lo, hi, nq, nk);
        own = !R ? NULL : R <= FIRE_TAB_STACK ? stack_tab : malloc((size_t)R * sizeof *own);
        if (own) tabulate(&v, h, lo, R, own, act);
    }
    const pelab_real *tab = pass ? pass : own;
    for (int i = 0; i < nq; i++) {
        const int is_short = pos_q[i] < v.L;
        const double m = is_short ? v.L : pos_q[i];
        pelab_real *row = out + (long)i * nk;
        if (is_short && tab) {
            for (int j = 0; j < nk; j++) row[j] = tab[dist(pos_q[i], pos_k[j]) - lo];
            continue;
        }
        for (int j0 = 0; j0 < nk; j0 += FIRE_LANES) {
            const int K = nk - j0 < FIRE_LANES ? nk - j0 : FIRE_LANES;
            for (int k = 0; k < K; k++) u[k] = (pelab_real)input_of(&v, (double)dist(pos_q[i], pos_k[j0 + k]), m);
            pelab_simd_fn(mlp_forward)(&v, h, u, f, act);
            for (int k = 0; k < K; k++) row[j0 + k] = f[k];
        }
    }
    if (own != stack_tab) free(own);
}

/* This thread's sums of the pass for FIRE `layer`'s head h, indexed by distance, when they cover
 * the distances lo..hi of a tile's rows t < L (marked written); NULL otherwise (no pass, a longer
 * distance, or a thread beyond the slots prepare made). */
static pelab_real *waiting_sums(struct pelab_posenc *pe, int layer, int h, int64_t lo, int64_t hi) {
    struct fire *f = pe->state;
    const int t = pelab_thread_index(), nets = f->shared ? 1 : pe->n_layers;
    if (lo < 0 || hi >= f->n_dist || t >= f->slots) return NULL;
    f->slot_used[t] = 1;
    return f->wait_g + (((long)t * nets + (f->shared ? 0 : layer)) * pe->H + h) * f->n_dist;
}

static void fire_bias_tile_backward(struct pelab_posenc *pe, int layer, int h, pelab_real *grad,
                                    const pelab_real *dout, const int32_t *pos_q, int nq,
                                    const int32_t *pos_k, int nk) {
    const struct fire *f = pe->state;
    const struct fire_net *net = &f->net[f->shared ? 0 : layer];
    struct view v;
    load_view(pe, layer, grad, &v);
    pelab_real act[FIRE_ACT(v)], lane[FIRE_ACT(v) / FIRE_LANES], dz[2 * v.W], stack_g[FIRE_TAB_STACK];
    struct pending p = {.count = 0};
    int64_t lo, hi;
    short_distances(&v, pos_q, nq, pos_k, nk, &lo, &hi);
    /* dout summed per distance, g[n − lo]: into this thread's sums of the pass when they cover the
     * tile's distances (backward_end runs the MLP), else the tile's own (R distances, run below) */
    pelab_real *wait = waiting_sums(pe, layer, h, lo, hi);
    const int64_t R = wait ? 0 : table_size(lo, hi, nq, nk);
    pelab_real *own = R > FIRE_TAB_STACK ? malloc((size_t)R * sizeof *own) : stack_g;
    pelab_real *g = wait ? wait + lo : R && own ? own : NULL;
    for (int64_t n = 0; g && n < R; n++) g[n] = 0;
    for (int i = 0; i < nq; i++) {
        const int is_short = pos_q[i] < v.L;
        const double m = is_short ? v.L : pos_q[i];
        for (int j = 0; j < nk; j++) {
            if (pos_k[j] > pos_q[i]) continue; /* masked */
            int64_t n = dist(pos_q[i], pos_k[j]);
            pelab_real d = dout[(long)i * nk + j];
            if (is_short && g) g[n - lo] += d;
            else if (d != 0) push_backward(&v, h, &p, (double)n, m, is_short, d, act, lane, dz);
        }
    }
    for (int64_t n = 0; g && n < R; n++)
        if (g[n] != 0) push_backward(&v, h, &p, (double)(lo + n), v.L, 1, g[n], act, lane, dz);
    if (p.count) flush_backward(&v, h, &p, act, lane, dz);
    if (own != stack_g) free(own);
    pelab_posenc_grad(pe, grad, net->c)[0] += (pelab_real)v.dc;
    pelab_posenc_grad(pe, grad, net->ell)[0] += (pelab_real)v.dell;
}

/* The pass's waiting sums (struct fire), into the table's gradients: per FIRE and head, each
 * distance's sum over the slots in slot order through one MLP backward; the slots are left zero. */
static void fire_backward_end(struct pelab_posenc *pe) {
    struct fire *f = pe->state;
    int used = 0;
    for (int t = 0; t < f->slots; t++) used |= f->slot_used[t];
    if (!used) return;
    const int nets = f->shared ? 1 : pe->n_layers;
    const long per_slot = (long)nets * pe->H * f->n_dist;
    pelab_real *grad = pelab_posenc_table_grad(pe);
    for (int l = 0; l < nets; l++) {
        struct view v;
        load_view(pe, l, grad, &v);
        pelab_real act[FIRE_ACT(v)], lane[FIRE_ACT(v) / FIRE_LANES], dz[2 * v.W];
        struct pending p = {.count = 0};
        for (int h = 0; h < pe->H; h++) {
            const pelab_real *sums = f->wait_g + ((long)l * pe->H + h) * f->n_dist;
            for (long n = 0; n < f->n_dist; n++) {
                pelab_real g = 0;
                for (int t = 0; t < f->slots; t++)
                    if (f->slot_used[t]) g += sums[t * per_slot + n];
                if (g != 0) push_backward(&v, h, &p, (double)n, v.L, 1, g, act, lane, dz);
            }
            if (p.count) flush_backward(&v, h, &p, act, lane, dz);
        }
        pelab_posenc_grad(pe, grad, f->net[l].c)[0] += (pelab_real)v.dc;
        pelab_posenc_grad(pe, grad, f->net[l].ell)[0] += (pelab_real)v.dell;
    }
    for (int t = 0; t < f->slots; t++)
        if (f->slot_used[t]) memset(f->wait_g + t * per_slot, 0, (size_t)per_slot * sizeof *f->wait_g);
    memset(f->slot_used, 0, (size_t)f->slots);
}

const struct pelab_posenc_ops pelab_pe_fire = {
    .name = "fire",
    .display = "FIRE",
    .summary = "learned MLP of log-normalised distance, one per layer (Li et al. 2024)",
    .sites = PELAB_SITE_BIAS,
    /* absolute: rows past L = |ℓ|·T_train are normalised by their own position */
    .contract = {0, {"fire-depth=1", "fire-depth=0", NULL}, .small = "fire-width=8"},
    .options = fire_options,
    .init = fire_init,
    .free = fire_free,
    .init_params = fire_init_params,
    .prepare = fire_prepare,
    .bias_tile = fire_bias_tile,
    .bias_tile_backward = fire_bias_tile_backward,
    .backward_end = fire_backward_end,
};

const struct pelab_posenc_ops pelab_pe_fire_shared = {
    .name = "fire-shared",
    .summary = "FIRE with one MLP shared by all layers (FIRE-S, Li et al. 2024)",
    .sites = PELAB_SITE_BIAS,
    .contract = {0, {"fire-width=4 fire-depth=3", NULL}, .small = "fire-width=8"},
    .options = fire_options,
    .init = fire_shared_init,
    .free = fire_free,
    .init_params = fire_init_params,
    .prepare = fire_prepare,
    .bias_tile = fire_bias_tile,
    .bias_tile_backward = fire_bias_tile_backward,
    .backward_end = fire_backward_end,
};
