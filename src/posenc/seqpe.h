/* src/posenc/seqpe.h — private to src/posenc: the parts of SeqPE (Li et al. 2025, "SeqPE:
 * Transformer with Sequential Position Encoding") that pe_seqpe.c puts together.
 *
 *   seqpe_encoder.c  the sequential position encoder: a position p ∈ Z^n becomes a digit sequence
 *                    and a small causal Transformer turns it into e_p ∈ R^D (paper §3.2);
 *   seqpe_reg.c      its two regularisers: distance alignment L_δ (§3.3, App. A.2) and
 *                    distillation to shifted positions L_OOD (§3.4, App. A.3).
 *
 * Positions here are n-dimensional: coords (U, n) int32, coordinate c of position u at
 * coords[u·n + c]: the model's (B,T,n) positions, n = 1 for sequences and 2 for an image's
 * (row, column); the encoder and its losses take any n.
 */
#ifndef PELAB_POSENC_SEQPE_H
#define PELAB_POSENC_SEQPE_H

#include <stdint.h>
#include "pelab/ctx.h"
#include "pelab/params.h"
#include "pelab/real.h"
#include "pelab/rng.h"

/* --- the encoder (seqpe_encoder.c) ---------------------------------------------------------
 *
 * Position p = (p_0, …, p_{n−1}) becomes S = n·k + 1 tokens: each coordinate's k digits in base b,
 * most significant first, left-padded with 0, coordinates one after another, then [CLS]:
 *
 *   tok_j = ⌊p_c / b^(k−1−i)⌋ mod b     j = c·k + i  (c < n, i < k);     tok_{nk} = b ([CLS])
 *   x0_j  = E_digit[tok_j] + E_place[j] + E_dim[c]                      (no E_dim on [CLS])
 *
 * E_dim exists only for n ≥ 2: with one coordinate it would add the same vector to every digit,
 * which E_place already can (the paper fixes it to 0 for text). The tokens pass through L pre-norm
 * blocks of width W with causal attention (Hh heads) and a GELU MLP (4W), as the main model's
 * blocks but without positional encoding (E_place carries the order), then
 *
 *   e_p = W_out · h_L[CLS]                  W_out (D, W)
 *   e_p = W_out · RMSNorm(h_L[CLS])         with the final norm (--seqpe-final-norm on)
 *
 * Without the norm the [CLS] state keeps the small scale of the embeddings, and e_p moves under
 * AdamW about as fast as a learned table's rows do. With it, every W_out element's step of ~lr
 * meets unit-size inputs, so e_p moves ~W times faster, in the same direction for every position
 * (the encoder starts out giving all positions nearly the same state): in `input` mode that
 * common vector swamps the token embeddings and the model stays at chance (measured: indirect
 * task, cpu preset, loss 3.96 = ln 52 after 200 steps with the norm, 3.38 without, 3.36 for the
 * learned table). The attn modes train alike either way.
 *
 * Parameters, under `prefix` (pe.seqpe): digit_emb.weight (b+1, W), place_emb.weight (S, W),
 * dim_emb.weight (n, W) when n ≥ 2, enc.{i}.{attn_norm,attn.qkv,attn.proj,mlp_norm,mlp.fc,
 * mlp.proj}.weight, final_norm.weight (W,) with the final norm, out.weight (D, W); no weight
 * decay.
 */
struct pelab_seqpe_block { int ln1, qkv, proj, ln2, fc, fcproj; }; /* parameter indices */

struct pelab_seqpe_encoder {
    struct pelab_params *params;
    int base, digits, dims;   /* b, k, n */
    int seq;                  /* S = n·k + 1 */
    int layers, width, heads; /* L, W, Hh */
    int out_dim;              /* D */
    int64_t capacity;         /* b^k: each coordinate must lie in [0, capacity) */
    int digit_emb, place_emb, dim_emb; /* dim_emb −1 when n = 1 */
    struct pelab_seqpe_block *block;   /* (L,) */
    int lnf, out;             /* lnf −1 without the final norm */
};

/* Activations of one forward over U positions (kept for its backward) and backward scratch.
 * NT = U·S token rows. */
struct pelab_seqpe_acts {
    int U, cap;               /* positions of the last forward; room for cap */
    int32_t *tok;             /* (U,S) */
    pelab_real *x;            /* (L+1, NT,W) residual stream into each block, and out of the last */
    pelab_real *ln1, *rstd1;  /* (L, NT,W), (L, NT) */
    pelab_real *qkv;          /* (L, NT,3W) */
    pelab_real *qh, *kh;      /* (L, U,Hh,S,dh) queries and keys, head-major for the kernel */
    pelab_real *att;          /* (L, U,Hh,S,S) attention probabilities */
    pelab_real *atty, *xmid;  /* (L, NT,W) heads' output; residual after attention */
    pelab_real *ln2, *rstd2;  /* (L, NT,W), (L, NT) */
    pelab_real *fch, *fchg;   /* (L, NT,4W) */
    pelab_real *cls, *lnf, *rstdf; /* (U,W) [CLS] rows of the last block, normalised; (U,) */
    pelab_real *out;          /* (U,D) e_p */
    /* backward scratch */
    pelab_real *dres, *dln, *datty; /* (NT,W) */
    pelab_real *dqkv;         /* (NT,3W) */
    pelab_real *dqh, *dkh;    /* (U,Hh,S,dh) */
    pelab_real *datt;         /* (U,Hh,S,S) */
    pelab_real *dfch, *dfchg; /* (NT,4W) */
    pelab_real *dcls, *dlnf;  /* (U,W) */
};

/* Declares the encoder's parameters under `prefix`; final_norm: RMSNorm before W_out.
 * PELAB_ERR_USAGE naming the option (--seqpe-heads) when the heads do not divide the width. */
int pelab_seqpe_encoder_init(struct pelab_seqpe_encoder *e, struct pelab_params *params,
                             const char *prefix, int base, int digits, int dims, int layers,
                             int width, int heads, int final_norm, int out_dim);
void pelab_seqpe_encoder_free(struct pelab_seqpe_encoder *e);
/* GPT-2's: embeddings and matrices N(0, 0.02), the blocks' output projections
 * N(0, 0.02/√(2L)), gains 1. */
void pelab_seqpe_encoder_init_params(const struct pelab_seqpe_encoder *e, struct pelab_rng *rng);

/* Every coordinate of coords (U, n) must lie in [0, b^k): PELAB_ERR_USAGE naming the first that
 * does not and the options (--seqpe-digits, --seqpe-base) that would allow it. */
int pelab_seqpe_check(const struct pelab_seqpe_encoder *e, const int32_t *coords, long U);
/* The digit tokens of one position: tok (S,). */
void pelab_seqpe_digits(const struct pelab_seqpe_encoder *e, const int32_t *coord, int32_t *tok);

/* Room for U positions (reuses what is there when large enough). PELAB_ERR_RUNTIME when out of
 * memory. */
int pelab_seqpe_acts_reserve(struct pelab_seqpe_acts *a, const struct pelab_seqpe_encoder *e, int U);
void pelab_seqpe_acts_free(struct pelab_seqpe_acts *a);

/* a->out (U,D) = e_p of each position of coords (U, n), already checked; a has room for U. Its
 * matrix products run in ctx (pelab/ctx.h), as the model's. */
void pelab_seqpe_encoder_forward(struct pelab_ctx *ctx, const struct pelab_seqpe_encoder *e,
                                 struct pelab_seqpe_acts *a, const int32_t *coords, int U);
/* The encoder's parameter gradients += from dout (U,D), the gradient of a->out of the last
 * forward on a (whose activations it leaves intact: a second backward adds the same again). */
void pelab_seqpe_encoder_backward(struct pelab_ctx *ctx, const struct pelab_seqpe_encoder *e,
                                  struct pelab_seqpe_acts *a, const pelab_real *dout);

/* The distinct positions of coords (N, n): writes them to uniq (≤ N, n) in lexicographic order and
 * the row of each input in uniq to row (N,); returns their count. scratch (2N,) ints. */
int pelab_seqpe_unique(int32_t *uniq, int32_t *row, const int32_t *coords, int N, int n,
                       int32_t *scratch);

/* --- the regularisers (seqpe_reg.c) ----------------------------------------------------------
 *
 * Formulas in seqpe_reg.c. A draw fills, from a key alone (so a resumed run repeats it):
 *   delta_pos (pivots, 1+C, n)   each row a pivot, then its C candidates; target (pivots,) the index
 *                                in 0..C−1 of p⁺, the candidate nearest the pivot
 *   ood_pos   (sets, 2m, n)      each set m teachers in [0, L)^n, then the same shifted by one z
 * The losses take the embeddings E (U,D) and each position's row in E, in the same layout. */
#define PELAB_SEQPE_DIMS_MAX 8

/* Where the paper and its authors' code differ (--seqpe-reg-profile and one option per
 * difference; docs/POSENC.md, "SeqPE's two regulariser profiles"). {0.5, 0, 0, 0, 0} is the
 * paper's, as SPEC §2.3 has it; the authors' code does the other of each. */
struct pelab_seqpe_reg_style {
    double global_frac;  /* a candidate set is global with this probability (authors: 0.4) */
    int window_anywhere; /* local sets from a window placed anywhere below Lmax, not around p */
    int hard_edits;      /* global sets: ⌊|C|/4⌋ chains of 1–3 edits, each kept only when farther
                            from p than the nearest random candidate; not |C|/8 single edits */
    int far_shifts;      /* L_OOD's shift from [⌊L/4⌋, Lmax − L) (n = 1), or [0, Lmax − L)² with
                            a coordinate ≥ L (n = 2); not [0, Lmax − L)^n */
    int symmetric_ood;   /* L_OOD = Σ (KL(P‖S) + KL(S‖P)) / (sets·H·m·m); not Σ KL(P‖S) /
                            (sets·H·m) */
};

struct pelab_seqpe_reg {
    int dims, base, digits;
    int64_t max_pos;      /* Lmax per coordinate */
    int train_len;        /* L per coordinate: the training context */
    int pivots, cands;    /* L_δ: pivots per step, |C| (pivots 0: no L_δ) */
    int sets, ood_m;      /* L_OOD: teacher sets per step, m (sets 0: no L_OOD) */
    struct pelab_seqpe_reg_style style;
    int32_t *delta_pos, *target, *ood_pos;
    /* how each pivot's set was made (for tests and the sampling statistics): local or global,
     * and how many of its first candidates are its window's or its edits (the rest random) */
    uint8_t *local;       /* (pivots,) */
    int32_t *lead;        /* (pivots,) */
    int32_t *perm;        /* (L^n,) scratch */
    int32_t *extra;       /* (2|C| + 1, n) scratch: the authors' sets before they merge */
};

/* PELAB_ERR_USAGE naming the option when the ranges cannot supply the draws (fewer than C + 1
 * positions below Lmax, no room for a shift, fewer than m training positions). digits: k, which
 * the authors' edits keep to. */
int pelab_seqpe_reg_init(struct pelab_seqpe_reg *r, int dims, int base, int digits, int64_t max_pos,
                         int train_len, int pivots, int cands, int sets, int m,
                         const struct pelab_seqpe_reg_style *style);
void pelab_seqpe_reg_free(struct pelab_seqpe_reg *r);
void pelab_seqpe_reg_draw(struct pelab_seqpe_reg *r, uint64_t key);
/* The index of the position in cand (C, n) nearest p in Euclidean distance, the first of ties. */
int pelab_seqpe_nearest(const int32_t *p, const int32_t *cand, int C, int n);

/* L_δ of E (U,D); row (pivots, 1+C). With dE: dE (U,D) += scale·∂L_δ/∂E. Both losses return NaN
 * with the error set (pelab_last_error) when out of memory. */
double pelab_seqpe_delta_loss(const pelab_real *E, int D, const int32_t *row,
                              const int32_t *target, int pivots, int C, pelab_real *dE,
                              double scale);
/* L_OOD of E (U,D) over H heads; row (sets, 2m); symmetric: the authors' form (struct
 * pelab_seqpe_reg_style). With dE: dE (U,D) += scale·∂L_OOD/∂E (students only: the teachers'
 * distribution is held constant). */
double pelab_seqpe_ood_loss(const pelab_real *E, int D, int H, const int32_t *row, int sets, int m,
                            int symmetric, pelab_real *dE, double scale);

/* --- the encoding (pe_seqpe.c) ------------------------------------------------------------- */

struct pelab_posenc;
/* Rows of the position table the last prepare() left: the distinct positions it encoded, or more
 * when it reused a table computed earlier with the same parameters. For tests. */
int pelab_seqpe_table_rows(const struct pelab_posenc *pe);
/* The encoding's encoder (for analyses and tests: e_p of any positions through one's own acts). */
const struct pelab_seqpe_encoder *pelab_seqpe_encoder_of(const struct pelab_posenc *pe);
/* The regularisers' draw of the last aux_forward (for tests and the twin's fixtures). */
const struct pelab_seqpe_reg *pelab_seqpe_last_draw(const struct pelab_posenc *pe);

#endif
