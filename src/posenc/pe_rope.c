/* rope — Rotary Position Embedding (Su et al. 2021, "RoFormer").
 *
 * Each head's d dimensions form d/2 pairs; pair c rotates by angle p·θ_c, θ_c = base^(−2c/d),
 * at the token's position p, for queries and keys alike, so q_t·k_s depends on positions only
 * through t − s. Pair layout `interleaved` is (x_{2c}, x_{2c+1}); `half` is (x_c, x_{c+d/2}).
 *
 *   forward  (x, y) → (x cos − y sin, x sin + y cos)
 *   backward (dx, dy) → (dx cos + dy sin, −dx sin + dy cos)    (the inverse rotation)
 *
 * Options of training: --rope-resonance rounds every wavelength to a whole number of positions
 * (Resonance RoPE); --rope-fraction rotates only the first pairs (partial RoPE) and --rope-p only
 * the fastest of those (p-RoPE), the others at θ = 0. Options of evaluation (eval, sample): the
 * length-extension methods pi, ntk, dynamic-ntk, yarn, llama3 and longrope; their formulas are
 * in rope_scaling.c.
 *
 * Site QK; no parameters. prepare() fills cos/sin of every (token, pair) once per forward pass;
 * angles are formed in double so that large positions keep their precision.
 */
#include <math.h>
#include <stdlib.h>
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "posenc/rotary.h"

static const struct pelab_optdef rope_options[] = {
    {"rope-base", PELAB_OPT_REAL, "10000", 1.0000001, 1e15, NULL, "base of the frequencies θ_c = base^(−2c/d)"},
    {"rope-layout", PELAB_OPT_CHOICE, "interleaved", 0, 0, "interleaved|half",
     "which dimensions pair up: (2c, 2c+1) or (c, c+d/2)"},
    {"rope-resonance", PELAB_OPT_SWITCH, "off", 0, 0, NULL,
     "Resonance RoPE: θ_c → 2π/round(2π/θ_c), whole-number wavelengths (training and evaluation)"},
    {"rope-fraction", PELAB_OPT_REAL, "1", 1e-9, 1, NULL,
     "partial RoPE: rotate the first 2⌊f·d/2⌋ = r dimensions' pairs at θ_c = base^(−2c/r), the rest "
     "unrotated (GPT-J's rotary_dim, GPT-NeoX's rotary_pct)"},
    {"rope-p", PELAB_OPT_REAL, "1", 0, 1, NULL,
     "p-RoPE: only the fastest fraction p of the rotated pairs turn, the slower ones unrotated "
     "(0: NoPE, 1: RoPE)"},
    {0},
};

struct rope {
    struct pelab_rotary rot;      /* layout and the tables of the current pass */
    struct pelab_rope_freqs freqs;
    double *theta;                /* (d/2,) the frequencies of the current pass */
};

static int rope_init(struct pelab_posenc *pe, const struct pelab_opts *opts, struct pelab_params *params) {
    if (pe->d % 2)
        return pelab_fail(PELAB_ERR_USAGE, "--pe rope needs an even head width (d-model/heads = %d)", pe->d);
    struct rope *r = calloc(1, sizeof *r);
    if (!r) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pe->state = r;
    r->rot.half = pelab_opt_choice(opts, rope_options, "rope-layout") == 1;
    r->freqs.base = pelab_opt_real(opts, rope_options, "rope-base");
    r->freqs.d = pe->d;
    const double fraction = pelab_opt_real(opts, rope_options, "rope-fraction");
    r->freqs.rot_d = 2 * (int)floor(fraction * (pe->d / 2) + 1e-9);
    if (r->freqs.rot_d < 2)
        return pelab_fail(PELAB_ERR_USAGE, "--rope-fraction %g rotates no pair of a head of %d "
                          "dimensions (at least %g)", fraction, pe->d, 2.0 / pe->d);
    r->freqs.kept = (int)floor(pelab_opt_real(opts, rope_options, "rope-p") * (r->freqs.rot_d / 2) + 1e-9);
    r->freqs.resonance = pelab_opt_switch(opts, rope_options, "rope-resonance");
    int rc = pelab_rope_freqs_read(&r->freqs, opts, pe->max_seq);
    if (rc) return rc;
    r->theta = malloc((size_t)(pe->d / 2) * sizeof *r->theta);
    if (!r->theta) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    pelab_rope_frequencies(&r->freqs, 0, r->theta);
    return PELAB_OK;
}

static void rope_free(struct pelab_posenc *pe) {
    struct rope *r = pe->state;
    if (!r) return;
    free(r->theta);
    pelab_rope_freqs_free(&r->freqs);
    pelab_rotary_free(&r->rot);
    free(r);
}

/* Dynamic NTK and LongRoPE change every frequency once the pass runs past L_train: keys rotated
 * by earlier passes would no longer be what one pass computes. */
static int rope_cache_check(const struct pelab_posenc *pe, long len) {
    const struct rope *r = pe->state;
    if (pelab_rope_freqs_dynamic(&r->freqs) && len > r->freqs.original_len)
        return pelab_fail(PELAB_ERR_USAGE, "--rope-scaling %s changes every key's frequencies once "
                          "the context passes %d positions (%ld here): cached keys would be stale",
                          r->freqs.method == PELAB_ROPE_LONGROPE ? "longrope" : "dynamic-ntk",
                          r->freqs.original_len, len);
    return PELAB_OK;
}

static int rope_prepare(struct pelab_posenc *pe, const int32_t *pos, int B, int T) {
    struct rope *r = pe->state;
    const long ntok = (long)B * T;
    if (pelab_rope_freqs_dynamic(&r->freqs)) { /* the frequencies follow the pass's length */
        long L = 0;
        for (long i = 0; i < ntok; i++)
            if (pos[i] + 1L > L) L = pos[i] + 1L;
        pelab_rope_frequencies(&r->freqs, L, r->theta);
    }
    return pelab_rotary_tables(&r->rot, pos, ntok, r->theta, pe->d / 2, pelab_rope_pos_div(&r->freqs),
                               pelab_rope_amplitude(&r->freqs), r->freqs.kept);
}

static void rope_qk_forward(struct pelab_posenc *pe, int layer, pelab_real *qo, pelab_real *ko,
                            const pelab_real *q, const pelab_real *k, int ld, const int32_t *pos,
                            int B, int T) {
    const struct rope *r = pe->state;
    pelab_rotary_apply(&r->rot, qo, ko, q, k, ld, B, T, pe->H, pe->d, 0);
}

static void rope_qk_backward(struct pelab_posenc *pe, int layer, pelab_real *dq, pelab_real *dk,
                             const pelab_real *dqo, const pelab_real *dko, const pelab_real *q,
                             const pelab_real *k, int ld, const int32_t *pos, int B, int T) {
    const struct rope *r = pe->state;
    pelab_rotary_apply(&r->rot, dq, dk, dqo, dko, ld, B, T, pe->H, pe->d, 1);
}

/* Frequency usage: d/2 pairs at θ_c of the last pass, magnitude ‖pair c‖ in the layout. */
static int rope_freqs(const struct pelab_posenc *pe, double *theta) {
    const struct rope *r = pe->state;
    for (int c = 0; theta && c < pe->d / 2; c++) theta[c] = r->theta[c];
    return pe->d / 2;
}

static void rope_freq_norms(const struct pelab_posenc *pe, double *out, const pelab_real *x) {
    const struct rope *r = pe->state;
    pelab_rotary_pair_norms(r->rot.half, out, x, pe->d);
}

const struct pelab_posenc_ops pelab_pe_rope = {
    .name = "rope",
    .display = "RoPE",
    .summary = "rotary embedding: pair c of q and k rotated by p·base^(-2c/d) (Su et al. 2021)",
    .sites = PELAB_SITE_QK,
    /* longrope's L_train 35: the KV-cache test's passes (at most 35 positions) stay on the short
     * factors, whose cache is allowed; the twin's last passes (to 37) and the contract's 70-token
     * kernels take the long ones */
    .contract = {PELAB_PE_RELATIVE | PELAB_PE_BIDIRECTIONAL,
                 {"rope-layout=half", "rope-resonance=on", "rope-scaling=pi rope-scale=4",
                  "rope-scaling=yarn rope-scale=4 rope-original-len=10",
                  "rope-scaling=dynamic-ntk rope-scale=3", "rope-fraction=0.5 rope-layout=half",
                  "rope-p=0.5 rope-scaling=llama3 rope-scale=8 rope-original-len=64 "
                  "llama3-high-freq-factor=8",
                  "rope-scaling=longrope rope-scale=4 rope-original-len=35 longrope-factors=geometric:1.5,4",
                  "rope-scaling=ntk rope-scale=4",
                  /* at width 8, YaRN's three ranges: pairs kept, blended and interpolated */
                  "rope-scaling=yarn rope-scale=4 rope-original-len=2048",
                  "rope-layout=half rope-resonance=on rope-scaling=yarn rope-scale=8 rope-original-len=512",
                  "rope-fraction=0.75 rope-p=0.67 rope-layout=half",
                  /* at width 8, Llama 3.1's three ranges (with rope-p 0.5 above, the slowest pairs do not turn) */
                  "rope-scaling=llama3 rope-scale=8 rope-original-len=64 llama3-high-freq-factor=8",
                  /* YaRN's amplitude on the rotated pairs alone */
                  "rope-fraction=0.5 rope-scaling=yarn rope-scale=4 rope-original-len=16", NULL}},
    .options = rope_options,
    .eval_options = pelab_rope_scaling_options,
    .eval_check = pelab_rope_scaling_check,
    .fine_tune = &pelab_rope_fine_tune,
    .init = rope_init,
    .free = rope_free,
    .prepare = rope_prepare,
    .cache_check = rope_cache_check,
    .qk_forward = rope_qk_forward,
    .qk_backward = rope_qk_backward,
    .freqs = rope_freqs,
    .freq_norms = rope_freq_norms,
    .freq_label = "pair norm",
};
