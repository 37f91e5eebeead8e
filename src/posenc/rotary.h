/* src/posenc/rotary.h — private to src/posenc: what the rotary encodings (rope, xpos) share.
 *
 *   rotary.c        the pair rotation of each head vector and its per-pass cos/sin tables;
 *   rope_scaling.c  RoPE's frequencies: resonance and the length-extension methods (SPEC §3).
 *
 * A rotary encoding turns pair c of q at position t into a·R(t·θ_c)·(x, y) with a per-token,
 * per-pair amplitude a; a = 1 for RoPE, the YaRN attention factor for YaRN, ζ_c^(±t/scale) for
 * xPos. The amplitude is folded into the tables (cos → a·cos, sin → a·sin), so forward and
 * backward are the same rotation: forward applies a·R, backward a·Rᵀ.
 */
#ifndef PELAB_POSENC_ROTARY_H
#define PELAB_POSENC_ROTARY_H

#include <stdint.h>
#include "pelab/options.h"
#include "pelab/posenc.h"
#include "pelab/real.h"

struct pelab_rotary {
    int half;                    /* pair layout: (x_c, x_{c+d/2}) instead of (x_2c, x_2c+1) */
    pelab_real *cos_q, *sin_q;   /* (B,T,d/2) a·cos, a·sin of each (token, pair), for queries */
    pelab_real *cos_k, *sin_k;   /* the same for keys: cos_q/sin_q unless separate (xPos) */
    long cap, cap_k;             /* elements allocated in each query / key table */
};

/* Sizes the tables for ntok tokens × n pairs; the key tables alias the query tables unless
 * `separate_keys`. PELAB_ERR_RUNTIME when out of memory. */
int pelab_rotary_reserve(struct pelab_rotary *r, long ntok, int n, int separate_keys);
/* Query tables (and key tables, which alias them) for one pass: angle (pos[i] / pos_div)·θ_c,
 * formed in double so large positions keep their precision, times amplitude `amp` on the first
 * n_amp pairs (those that rotate; the others pass through as they are). PELAB_ERR_RUNTIME when
 * out of memory. */
int pelab_rotary_tables(struct pelab_rotary *r, const int32_t *pos, long ntok, const double *theta,
                        int n, double pos_div, double amp, int n_amp);
void pelab_rotary_free(struct pelab_rotary *r);

/* forward (inverse 0): q, k (B,T,H,d) rows ld apart → qo, ko (B,H,T,d) rotated.
 * backward (inverse 1): q, k are the gradients (B,H,T,d) → qo, ko (B,T,H,d, rows ld apart). */
void pelab_rotary_apply(const struct pelab_rotary *r, pelab_real *qo, pelab_real *ko,
                        const pelab_real *q, const pelab_real *k, int ld, int B, int T, int H, int d,
                        int inverse);

/* out (d/2,): the norm of each pair of one head vector x (d,) in the layout (half or
 * interleaved), as the rotation keeps it: the frequency-usage analysis's magnitudes. */
void pelab_rotary_pair_norms(int half, double *out, const pelab_real *x, int d);

/* --- RoPE's frequencies (rope_scaling.c) ---------------------------------------------------- */

enum pelab_rope_method {
    PELAB_ROPE_NONE,
    PELAB_ROPE_PI,
    PELAB_ROPE_NTK,
    PELAB_ROPE_DYNAMIC_NTK,
    PELAB_ROPE_YARN,
    PELAB_ROPE_LLAMA3,
    PELAB_ROPE_LONGROPE
};

struct pelab_rope_freqs {
    double base;                    /* the trained base */
    int d;                          /* head width; d/2 frequencies */
    int rot_d;                      /* the width the frequencies spread over: d, or r with
                                       partial RoPE (θ_i = base^(−2i/r), i < r/2) */
    int kept;                       /* pairs that rotate, the first (fastest) ones: r/2, fewer
                                       with p-RoPE; the others keep θ = 0 */
    int resonance;                  /* θ_i → 2π / round(2π / θ_i) */
    enum pelab_rope_method method;  /* length extension at evaluation */
    double scale;                   /* s (1 with NONE) */
    int original_len;               /* L_train */
    double beta_fast, beta_slow;    /* YaRN's ramp ends */
    double low_factor, high_factor; /* Llama 3.1's wavelength bounds L_train/low, L_train/high */
    double *short_factors;          /* LongRoPE's λ_i (rot_d/2,), for passes within L_train */
    double *long_factors;           /* and beyond it; both NULL with another method */
};

/* RoPE's evaluation-time options: rope-scaling, rope-scale, rope-original-len, yarn-beta-fast,
 * yarn-beta-slow, llama3-low-freq-factor, llama3-high-freq-factor, longrope-factors. */
extern const struct pelab_optdef pelab_rope_scaling_options[];

/* How a fine-tune trains with them (ops->fine_tune): what each method reads, and
 * --rope-original-len from the source run's context. */
extern const struct pelab_pe_fine_tune pelab_rope_fine_tune;

/* ops->eval_check: PELAB_ERR_USAGE when --rope-scale is given anew and settings have no method
 * (--rope-scaling absent or none), where it would be recorded and do nothing. A run recorded so
 * before this check still opens. */
int pelab_rope_scaling_check(const struct pelab_opts *given, const struct pelab_opts *settings);

/* Reads the length-extension options of `opts` into f (base, d, rot_d, kept, resonance set by the
 * caller before); max_seq is the training context, the default of --rope-original-len. PELAB_ERR_USAGE
 * naming the option for a setting that makes no sense (a scale below 1 with a method, a YaRN
 * option without yarn). */
int pelab_rope_freqs_read(struct pelab_rope_freqs *f, const struct pelab_opts *opts, int max_seq);
/* What pelab_rope_freqs_read allocated (LongRoPE's factors). */
void pelab_rope_freqs_free(struct pelab_rope_freqs *f);

/* θ'_i, i = 0..d/2−1, of a pass whose length (largest position + 1) is L: the base's (NTK's
 * base', dynamic NTK's for L > L_train) over rot_d, resonance's rounding, YaRN's or Llama 3.1's
 * blend, then 0 from pair `kept` on. */
void pelab_rope_frequencies(const struct pelab_rope_freqs *f, long L, double *theta);
/* Whether the frequencies depend on the pass's length (dynamic NTK; LongRoPE's two sets). */
int pelab_rope_freqs_dynamic(const struct pelab_rope_freqs *f);
/* Positions are divided by this (PI: s; 1 otherwise). */
double pelab_rope_pos_div(const struct pelab_rope_freqs *f);
/* Amplitude of q and k, so logits scale by its square (YaRN: 0.1·ln s + 1; LongRoPE:
 * √(1 + ln s / ln L_train) for s > 1; 1 otherwise). */
double pelab_rope_amplitude(const struct pelab_rope_freqs *f);

#endif
