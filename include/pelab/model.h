/* pelab/model.h — the Transformer (pre-norm, RMSNorm, GELU MLP): a causal decoder over tokens,
 * or, for the image task, a bidirectional encoder over patch vectors (struct pelab_model_io).
 *
 *   h0 = E[token] (+ e(pos) for EMBED encodings)
 *        patches: h0[0] = c (the class token), h0[t] = Wp·x_t + bp for t ≥ 1 (+ e(pos))
 *   per layer:  h += Wo · Attn(RMSNorm(h));   h += W2 · GELU(W1 · RMSNorm(h))
 *   logits = RMSNorm(h) · E^T        (tied; a separate lm_head when untied)
 *
 * Forward and backward are written by hand per layer; the model owns the parameter table
 * (names in docs/FORMATS.md), the positional encoding, and the activations of one (B, T).
 */
#ifndef PELAB_MODEL_H
#define PELAB_MODEL_H

#include <stdint.h>
#include "pelab/ctx.h"
#include "pelab/options.h"
#include "pelab/params.h"
#include "pelab/posenc.h"
#include "pelab/real.h"

struct pelab_model_config {
    int vocab;     /* V */
    int d_model;   /* D */
    int n_heads;   /* H; head width d = D / H */
    int n_layers;  /* N */
    int max_seq;   /* T of training (learned tables and FIRE read it) */
    int random_positions; /* N of --random-positions: positions are sorted random subsets of
                           * [0, N), the encoding's training context then (0: off) */
    int mlp_mult;  /* MLP hidden width = mlp_mult · D */
    int tied;      /* output projection is the token embedding */
    double dropout;/* attention-probability and residual dropout, training only */
    char pe[32];   /* encoding name */
    int attention; /* PELAB_ATTN_KERNEL_*: which kernel computes attention (same function) */
    int input_dim; /* patch model: width of an input vector (0: token ids) */
    struct pelab_pe_layout positions; /* their coordinates per token, causality, grid */
};

/* What a task feeds the model, beyond its vocabulary and length (pelab_model_init_io).
 * input_dim > 0 makes a patch model: the inputs (pelab_model_set_inputs) are vectors of that
 * width, embedded by a linear layer `patch_emb` (weight (D, input_dim), bias (D)); token 0 of each
 * sequence is the learned class token `cls_token` (D), whose input row is never read; the output
 * layer is an untied `classifier.weight` (V, D) (V: the classes), and the task puts the label as
 * the target of token 0 only. positions: (dims, bidirectional, grid) of the encoding's layout. */
struct pelab_model_io {
    int input_dim;
    struct pelab_pe_layout positions;
};

/* --attention: tiled (online softmax, memory linear in T; the default) or ref (materialises the
 * (B,H,T,T) probabilities; the oracle the tiled kernel is tested against). Order of its choices. */
enum pelab_attn_kernel { PELAB_ATTN_KERNEL_REF, PELAB_ATTN_KERNEL_TILED };

/* The model's options (d-model, heads, layers, mlp-mult, tied, dropout, pe, attention). vocab and
 * max_seq come from the task, not from options. */
extern const struct pelab_optdef pelab_model_options[];

struct pelab_layer_params { /* indices into the parameter table */
    int ln1, qkv, proj, ln2, fc, fcproj;
};

struct pelab_acts; /* activations, private to the model */
struct pelab_bf16_weights; /* generation's bf16 weights (pelab_model_use_bf16_weights) */
struct pelab_eval_acts; /* the evaluation-only forward's buffers, private too */

struct pelab_model {
    struct pelab_model_config cfg;
    /* The context its passes run in (pelab/ctx.h): its matrix products' precision and failures,
     * its encoding's and kernels' too, and the MPI job its evaluations share their work across;
     * own_ctx until pelab_model_set_ctx gives it another. */
    struct pelab_ctx *ctx;
    struct pelab_ctx *own_ctx;        /* fp32, one process (pelab_ctx_init) */
    struct pelab_opts opts;           /* the options it was built from (read by settings) */
    struct pelab_params params;
    struct pelab_posenc pe;
    int wte, lnf, lm_head;            /* parameter indices; lm_head -1 when tied; wte -1 for patches */
    int patch_w, patch_b, cls;        /* patch model: patch_emb.weight, .bias, cls_token (else -1) */
    const pelab_real *inputs;         /* patch model: (B,T,input_dim) of the next forward */
    struct pelab_layer_params *layer; /* (N,) */

    struct pelab_acts *acts;
    struct pelab_eval_acts *eval;     /* of pelab_model_forward_eval, allocated by it */
    struct pelab_bf16_weights *bf16w; /* NULL, or generation reads its weight matrices in bf16 */
    int B, T;                         /* shape the activations were reserved for */
    int cur_B, cur_T;                 /* shape of the last forward */

    int training;                     /* dropout on when set */
    /* Dropout masks are a function of the key and of each element's place in a batch of which
     * the next forward's sequences are rows dropout_row0, dropout_row0 + 1, ... (a share of an
     * update's rows, under sharding and accumulation; 0 for a forward of a whole batch). */
    uint64_t dropout_key;             /* set per update */
    uint64_t dropout_row0;

    int status;                       /* of the last forward: PELAB_OK, or why it was refused */
    pelab_real loss;                  /* mean loss of the last forward (-1 without targets) */
    int n_targets;                    /* positions that carried a target */
};

/* Builds the model from options; vocab and max_seq are the task's. PELAB_ERR_USAGE with a
 * message naming the option for any invalid or incompatible setting. */
int pelab_model_init(struct pelab_model *m, const struct pelab_opts *opts, int vocab, int max_seq);
/* The same for a task's inputs and positions (io NULL: token ids, 1-D positions, causal). An
 * encoding that does not serve the positions is PELAB_ERR_USAGE (pelab_posenc_init_nd). */
int pelab_model_init_io(struct pelab_model *m, const struct pelab_opts *opts, int vocab, int max_seq,
                        const struct pelab_model_io *io);
/* The context the model's passes run in from now on (the caller keeps it while the model may use
 * it); NULL: its own again. */
void pelab_model_set_ctx(struct pelab_model *m, struct pelab_ctx *ctx);
/* Patch model: the input vectors (B,T,input_dim) the next forward reads (row 0 of each sequence,
 * the class token's, is not read). The caller keeps them until that forward returns. */
void pelab_model_set_inputs(struct pelab_model *m, const pelab_real *inputs);
void pelab_model_free(struct pelab_model *m);

/* The resolved settings of the model and its encoding as text: every option of
 * pelab_model_options and of the encoding's table (given or default), plus "vocab" and
 * "max-seq". This is what config.json and the safetensors metadata record. */
int pelab_model_settings(const struct pelab_model *m, struct pelab_opts *out);

/* GPT-2 initialisation: N(0, 0.02), residual projections N(0, 0.02/sqrt(2N)), gains 1, and each
 * encoding's own. */
void pelab_model_init_weights(struct pelab_model *m, uint64_t seed);

/* For generation: rounds the weight matrices of a model of tokens (the token embedding, each
 * block's attention and MLP matrices, the output head; patch models do not generate) to bf16 in
 * place, once its weights are final (a later load would leave the copy stale), and keeps a bf16
 * copy of them that generation's
 * short steps (fewer than 16 new tokens: decoding) read — half the bytes a token reads — with
 * float32 activations and sums on any CPU; longer appends (a prompt) take the float32 products
 * on the same rounded values. Gains, biases and the encodings' parameters stay as they are. The
 * model then computes as one whose matrices are bf16, in every pass; it is meant to generate, not
 * to train (pelab_model_backward asserts: an update would leave the copy stale). PELAB_ERR_RUNTIME
 * when out of memory (nothing changed). */
int pelab_model_use_bf16_weights(struct pelab_model *m);

/* Switches the attention kernel (the function is the same; what is saved differs): long
 * evaluations take the tiled one, whose memory is linear in T. Frees the activations. */
void pelab_model_set_attention(struct pelab_model *m, enum pelab_attn_kernel kernel);

/* Allocates activations for up to B×T (reuses them when large enough). */
int pelab_model_reserve(struct pelab_model *m, int B, int T);

/* tokens (B,T) (a patch model reads its inputs instead), pos (B,T,n) (n = cfg.positions.dims).
 * targets (B,T) with -1 where no loss is taken, or NULL. Sets m->loss, the mean cross-entropy
 * over positions with a target (-1 without targets), and m->n_targets; returns PELAB_OK (also
 * in m->status). When the encoding refuses the positions (beyond a learned table), nothing is
 * computed: it returns PELAB_ERR_USAGE, m->loss is NaN and pelab_last_error() holds the message;
 * likewise PELAB_ERR_RUNTIME when out of memory (the activations, or the attention kernel's few
 * tiles of scratch). */
int pelab_model_forward(struct pelab_model *m, const int32_t *tokens, const int32_t *targets,
                        const int32_t *pos, int B, int T);
/* Backpropagates the last forward's loss, scaled by `loss_scale` (1/accumulation steps);
 * parameter gradients accumulate (+=). */
void pelab_model_backward(struct pelab_model *m, pelab_real loss_scale);

/* The first non-finite value among the last forward's activations, in the order the forward
 * pass computes them (embedding, then per block: norm, qkv, encoded q and k, attention
 * probabilities, heads' output, residual, norm, MLP, GELU, block output; final norm, logits):
 * 1 and a description such as "blocks.1.mlp.fc output (B,T,M) at [0, 3, 17] = nan" in buf,
 * or 0 when all are finite. */
int pelab_model_find_nonfinite(const struct pelab_model *m, char *buf, size_t size);

/* Views into the last forward: logits (B,T,V), until a backward pass writes their gradient over
 * them, and per-position losses (B,T) (0 without target). */
const pelab_real *pelab_model_logits(const struct pelab_model *m);
const pelab_real *pelab_model_losses(const struct pelab_model *m);
/* Layer l's projections of the last forward, (B,T,3D): per token the query (D), key (D) and
 * value (D), each H heads of width d, before the positional encoding. Read-only: the backward
 * pass uses it. */
const pelab_real *pelab_model_qkv(const struct pelab_model *m, int layer);
/* Layer l's attention probabilities of the last forward, (B,H,T,T) (row t: query t, entries above
 * the diagonal 0), before dropout; NULL unless the model runs the reference kernel
 * (--attention ref, or pelab_model_set_attention), the only one that keeps them. */
const pelab_real *pelab_model_attention(const struct pelab_model *m, int layer);

/* Evaluation-only forward (eval, sample, long-context sweeps): the loss of pelab_model_forward
 * with dropout off, without keeping what a backward pass reads. The layers share one set of
 * buffers and the MLP, output layer and loss run over chunks of positions, so memory per
 * position is about 6D + 2·H·qk_dim reals (no (B,T,V) logits): configuration C evaluates 16384
 * tokens in a few hundred MiB. Same status, m->loss, m->n_targets and m->status as
 * pelab_model_forward; it leaves the training activations (and pelab_model_logits) alone, and no
 * backward pass may follow it. It allocates its own buffers, kept while large enough. */
int pelab_model_forward_eval(struct pelab_model *m, const int32_t *tokens, const int32_t *targets,
                             const int32_t *pos, int B, int T);
/* Views into the last evaluation-only forward, (B,T) each: the loss at each position (0 without
 * target), the predicted token (argmax of the logits, the first of equal maxima, as pelab_argmax)
 * and its probability. */
const pelab_real *pelab_model_eval_losses(const struct pelab_model *m);
const int32_t *pelab_model_eval_pred(const struct pelab_model *m);
const pelab_real *pelab_model_eval_pred_prob(const struct pelab_model *m);
/* Frees the evaluation-only forward's buffers (pelab_model_free does too). */
void pelab_model_eval_release(struct pelab_model *m);

#endif
