/* pelab/freq.h — frequency usage (the PoPE paper's Figures 3–6): per layer and per frequency, the
 * mean magnitude of the query and key components that frequency turns, over tokens and heads.
 *
 *   rope, xpos  F = d/2 frequencies θ_c = base^(−2c/d): ‖(x_i, x_j)‖ of pair c in the run's
 *               layout (interleaved (2c, 2c+1), half (c, c+d/2)); a rotation keeps it, so it is
 *               the same before and after the encoding (xPos: before its decay ζ_c^(±p/γ_s))
 *   pope        F = d frequencies θ_c = base^(−c/d): μ_c = softplus(x_c) (|x_c| with
 *               --pope-softplus off)
 *
 * x is a head's query or key as the layer projects it (before the encoding), read from the
 * model's last forward, so collecting costs one forward per batch and nothing in training.
 */
#ifndef PELAB_FREQ_H
#define PELAB_FREQ_H

#include <stdint.h>
#include "pelab/model.h"
#include "pelab/task.h"

struct pelab_freq {
    int n_layers, n_freqs, n_heads; /* N, F, H */
    double *theta;                  /* (F,) radians per position */
    double *q_sum, *k_sum;          /* (N, F) sums over the counted tokens and every head */
    uint64_t tokens;                /* tokens counted (each adds H terms to every sum) */
    uint64_t examples;              /* the last pelab_freq_collect: examples counted, in */
    int batches, batch;             /* `batches` forward passes of `batch` examples */
    double *mag;                    /* (F,) scratch: one head vector's magnitudes */
};

/* Sizes the sums for the model's encoding. PELAB_ERR_USAGE when the encoding has no
 * frequencies (the message names the ones that do). */
int pelab_freq_init(struct pelab_freq *f, const struct pelab_model *m);
void pelab_freq_free(struct pelab_freq *f);

/* Adds the last forward's queries and keys of the positions where keep (B,T) is non-zero (NULL:
 * every position). */
void pelab_freq_add(struct pelab_freq *f, const struct pelab_model *m, const unsigned char *keep);

/* Forward passes (training off) over `batches` batches of `batch` examples of `split` from
 * example `first`, adding every position that is not the task's padding. No example counts
 * twice: the batches stop at the split's end (a batch larger than the examples left shrinks to
 * them, no batch starts past the end, the last one's rows beyond it are left out), and
 * f->examples, f->batches and f->batch say what ran. PELAB_ERR_USAGE when `first` is past the
 * split; PELAB_ERR_RUNTIME when a forward fails. */
int pelab_freq_collect(struct pelab_freq *f, struct pelab_model *m, const struct pelab_task *t,
                       enum pelab_split split, uint64_t first, int batches, int batch);

/* Means over the counted tokens and heads of layer l, frequency c (0 before any token). */
double pelab_freq_query(const struct pelab_freq *f, int layer, int c);
double pelab_freq_key(const struct pelab_freq *f, int layer, int c);

#endif
