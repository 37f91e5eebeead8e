/* The model's layers as forward/backward pairs on plain arrays (llm.c style): arguments are
 * outputs, saved activations, inputs, weights, dimensions. Parameter gradients accumulate (+=);
 * activation gradients are assigned unless a comment says +=. */
#ifndef PELAB_KERNELS_LAYERS_H
#define PELAB_KERNELS_LAYERS_H

#include <stdint.h>
#include "pelab/real.h"

/* out (N,C) = wte[tokens[i]] */
void pelab_embed_forward(pelab_real *out, const int32_t *tokens, const pelab_real *wte, int N, int C);
/* dwte[tokens[i]] += dout[i] */
void pelab_embed_backward(pelab_real *dwte, const pelab_real *dout, const int32_t *tokens, int N, int C);

/* RMSNorm: out = g ⊙ x · rstd, rstd = 1/sqrt(mean(x²) + 1e-5).  x, out (N,C); rstd (N,) saved. */
void pelab_rmsnorm_forward(pelab_real *out, pelab_real *rstd, const pelab_real *x,
                           const pelab_real *g, int N, int C);
/* dx (N,C) += rstd·(dx̂ − x̂·mean(dx̂ ⊙ x̂)), dx̂ = dout ⊙ g, x̂ = x·rstd;  dg (C,) += Σ dout ⊙ x̂ */
void pelab_rmsnorm_backward(pelab_real *dx, pelab_real *dg, const pelab_real *dout,
                            const pelab_real *x, const pelab_real *g, const pelab_real *rstd,
                            int N, int C);

/* GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). n elements. */
void pelab_gelu_forward(pelab_real *out, const pelab_real *x, long n);
/* dx = dout · GELU'(x) */
void pelab_gelu_backward(pelab_real *dx, const pelab_real *dout, const pelab_real *x, long n);

/* Inverted dropout with a stateless mask: element i of x is kept when hash(key, site, first + i)
 * >= p and then scaled by 1/(1−p); first is x[0]'s index in the whole array the mask covers.
 * x (n,) is updated in place; the backward applies the same. */
void pelab_dropout(pelab_real *x, long n, double p, uint64_t key, uint64_t site, uint64_t first);
/* Keep-scale of element i: 0 or 1/(1−p). */
pelab_real pelab_dropout_scale(double p, uint64_t key, uint64_t site, uint64_t i);

/* Softmax cross-entropy per row, without storing probabilities. logits (N,V); losses (N,) =
 * −log p[target] for rows with target >= 0, else 0; stats (N,2) saved for the backward: each
 * row's maximum and 1/Σ e^(z − max). Returns the number of rows with a target; *sum = Σ losses
 * in row order. */
int pelab_crossentropy_forward(pelab_real *stats, pelab_real *losses, double *sum,
                               const pelab_real *logits, const int32_t *targets, int N, int V);
/* Evaluation: losses and *sum as the forward; pred (N,) each row's argmax (the first of equal
 * maxima, as pelab_argmax) and pred_prob (N,) its probability. */
int pelab_crossentropy_eval(pelab_real *losses, int32_t *pred, pelab_real *pred_prob, double *sum,
                            const pelab_real *logits, const int32_t *targets, int N, int V);
/* dlogits (N,V) = scale·(softmax(logits) − onehot(target)) for rows with a target, 0 otherwise,
 * from the logits and the forward's stats; may alias logits (the model writes it over them). */
void pelab_crossentropy_backward(pelab_real *dlogits, const pelab_real *logits, const pelab_real *stats,
                                 const int32_t *targets, pelab_real scale, int N, int V);

#endif
