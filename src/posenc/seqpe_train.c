/* SeqPE in training (pe_seqpe.h): shifted starts and the regularisers' loss terms, each drawn
 * from its key alone, so a resumed run repeats them.
 *
 * train_positions() starts --seqpe-shift-prob of the sequences at a random z ∈ [0, Lmax − T)
 * (App. A.5); aux_forward() draws the regularisers' positions from its key, encodes the draw's
 * distinct positions once (activations of their own, apart from the table) and returns
 * α·L_δ + β·L_OOD with each term (seqpe_reg.c), keeping their gradient with respect to those
 * embeddings; aux_backward() takes it through the encoder.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/status.h"
#include "posenc/pe_seqpe.h"

#define SEQPE_LMAX 20000 /* the paper's Lmax for text */

/* The fixed offsets of the shifted starts: pool_size distinct ones in [0, room)^n (all of them
 * when there are no more), from a key of their own, the same for every run (the authors draw
 * theirs with the run's seed); kept distinct through an open-addressing set of pool indices. */
static int pool_init(struct pelab_seqpe *s, int64_t room) {
    const int n = s->enc.dims;
    const double all = pow((double)room, n);
    if (s->pool_size > all) s->pool_size = (int)all;
    if (!s->pool_size) return PELAB_OK;
    const long cap = 4L * s->pool_size;
    int32_t *slot = malloc((size_t)cap * sizeof *slot);
    s->pool = malloc((size_t)s->pool_size * n * sizeof *s->pool);
    if (!slot || !s->pool) {
        free(slot);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for --seqpe-shift-pool");
    }
    for (long j = 0; j < cap; j++) slot[j] = -1;
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 0x5E9E90015EEDull);
    for (int i = 0; i < s->pool_size;) {
        int32_t *z = s->pool + (long)i * n;
        uint64_t h = 0;
        for (int c = 0; c < n; c++) {
            z[c] = (int32_t)pelab_rng_below(&rng, (uint64_t)room);
            h = pelab_hash64(h ^ (uint64_t)z[c]);
        }
        long j = (long)(h % (uint64_t)cap);
        while (slot[j] >= 0 && memcmp(s->pool + (long)slot[j] * n, z, (size_t)n * sizeof *z) != 0)
            j = (j + 1) % cap;
        if (slot[j] < 0) slot[j] = i++;
    }
    free(slot);
    return PELAB_OK;
}

/* Nothing to allocate when neither regulariser nor the shifted starts is on. */
int pelab_seqpe_train_init(struct pelab_seqpe *s, const struct pelab_opts *opts, int extent, int D) {
    s->alpha = pelab_opt_real(opts, pelab_seqpe_options, "seqpe-alpha");
    s->beta = pelab_opt_real(opts, pelab_seqpe_options, "seqpe-beta");
    s->shift_prob = pelab_opt_real(opts, pelab_seqpe_options, "seqpe-shift-prob");
    long max_pos = pelab_opt_int(opts, pelab_seqpe_options, "seqpe-max-pos");
    if (s->alpha == 0 && s->beta == 0 && s->shift_prob == 0) return PELAB_OK;
    if (max_pos == 0) max_pos = s->enc.capacity < SEQPE_LMAX ? (long)s->enc.capacity : SEQPE_LMAX;
    if (max_pos > s->enc.capacity)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-max-pos %ld is beyond what --seqpe-digits %d "
                          "in base %d hold (positions below %lld)", max_pos, s->enc.digits,
                          s->enc.base, (long long)s->enc.capacity);
    if (s->shift_prob > 0 && max_pos <= extent)
        return pelab_fail(PELAB_ERR_USAGE, "--seqpe-max-pos %ld leaves no room to shift the "
                          "training context (%d) for --seqpe-shift-prob", max_pos, extent);
    const int pivots = s->alpha > 0 ? (int)pelab_opt_int(opts, pelab_seqpe_options, "seqpe-delta-batch") : 0;
    const int C = (int)pelab_opt_int(opts, pelab_seqpe_options, "seqpe-candidates");
    const int sets = s->beta > 0 ? (int)pelab_opt_int(opts, pelab_seqpe_options, "seqpe-ood-batch") : 0;
    int m = (int)pelab_opt_int(opts, pelab_seqpe_options, "seqpe-ood-positions");
    long in_context = 1; /* the training range has no more positions: extent^n */
    for (int c = 0; c < s->enc.dims; c++) in_context *= extent;
    if (m > in_context) m = (int)in_context;
    int rc = pelab_seqpe_reg_init(&s->reg, s->enc.dims, s->enc.base, s->enc.digits, max_pos, extent,
                                  pivots, C, sets, m, &s->style);
    if (!rc && s->shift_prob > 0) rc = pool_init(s, max_pos - extent);
    if (rc) return rc;
    const long N = (long)pivots * (1 + C) + (long)sets * 2 * m, n = s->enc.dims;
    s->reg_all = malloc((size_t)(N * n + 1) * sizeof *s->reg_all);
    s->reg_uniq = malloc((size_t)(N * n + 1) * sizeof *s->reg_uniq);
    s->reg_row = malloc((size_t)(N + 1) * sizeof *s->reg_row);
    s->reg_scratch = malloc((size_t)(2 * N + 1) * sizeof *s->reg_scratch);
    s->reg_dE = malloc((size_t)(N * D + 1) * sizeof *s->reg_dE);
    s->reg_dout = malloc((size_t)(N * D + 1) * sizeof *s->reg_dout);
    if (!s->reg_all || !s->reg_uniq || !s->reg_row || !s->reg_scratch || !s->reg_dE || !s->reg_dout)
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the SeqPE regularisers");
    return PELAB_OK;
}

void pelab_seqpe_train_free(struct pelab_seqpe *s) {
    pelab_seqpe_reg_free(&s->reg);
    free(s->pool);
    pelab_seqpe_acts_free(&s->reg_acts);
    free(s->reg_all);
    free(s->reg_uniq);
    free(s->reg_row);
    free(s->reg_scratch);
    free(s->reg_dE);
    free(s->reg_dout);
}

/* Each sequence, with probability --seqpe-shift-prob, moves to start at z ∈ [0, Lmax − L) (L
 * the training context's extent per coordinate); with n coordinates each moves by its own z_c,
 * drawn from a key of its own (coordinate 0 keeps the 1-D draw). With --seqpe-shift-pool z is
 * one of the pool's, drawn by the same key. With --seqpe-shift-unit step the micro-batch draws
 * once (index B·2, past every sequence's) and then shifts every sequence, by consecutive
 * entries of the pool from a start drawn by the same key (distinct when B ≤ the pool; the
 * authors' walk their shuffled pool in order across steps, each entry shared by two sequences). */
void pelab_seqpe_train_positions(struct pelab_posenc *pe, int32_t *pos, int B, int T, uint64_t key) {
    struct pelab_seqpe *s = pe->state;
    s->main_shifted = 0;
    if (s->shift_prob == 0) return;
    const int n = s->enc.dims;
    const int64_t room = s->reg.max_pos - s->reg.train_len;
    if (s->shift_by_step && pelab_hash_uniform(key, 2 * (uint64_t)B) >= s->shift_prob) return;
    s->main_shifted = s->shift_by_step;
    for (int b = 0; b < B; b++) {
        if (!s->shift_by_step && pelab_hash_uniform(key, 2 * (uint64_t)b) >= s->shift_prob) continue;
        const int32_t *pooled = NULL;
        if (s->pool_size) { /* a step's start once, then consecutive entries; a sequence's its own */
            const uint64_t i = 2 * (uint64_t)(s->shift_by_step ? B : b) + 1;
            const long start = (long)(pelab_hash_uniform(key, i) * s->pool_size);
            pooled = s->pool + (s->shift_by_step ? (start + b) % s->pool_size : start) * n;
        }
        for (int c = 0; c < n; c++) {
            const uint64_t kc = c == 0 ? key : pelab_hash64(key + (uint64_t)c);
            const int32_t z = pooled ? pooled[c] : (int32_t)(pelab_hash_uniform(kc, 2 * (uint64_t)b + 1) * (double)room);
            for (int t = 0; t < T; t++) pos[((long)b * T + t) * n + c] += z;
        }
    }
}

const char *const pelab_seqpe_aux_names[] = {"loss_delta", "loss_ood", NULL};

/* One draw; its distinct positions through the encoder; α·L_δ + β·L_OOD and their gradient with
 * respect to the embeddings (reg_dE), which aux_backward takes through the encoder. A
 * micro-batch that --seqpe-shift-unit step shifted has no L_OOD (the authors' teachers are the
 * main pass's positions, then shifted): it adds 0, and logs 0. */
int pelab_seqpe_aux_forward(struct pelab_posenc *pe, uint64_t key, double *terms, double *total) {
    struct pelab_seqpe *s = pe->state;
    struct pelab_seqpe_reg *r = &s->reg;
    const int n = r->dims, D = pe->D;
    terms[0] = terms[1] = NAN;
    *total = 0;
    s->reg_acts.U = 0;
    const int sets = s->main_shifted ? 0 : r->sets;
    if (r->sets && !sets) terms[1] = 0;
    if (!r->pivots && !sets) return PELAB_OK;
    pelab_seqpe_reg_draw(r, key);
    const long nd = (long)r->pivots * (1 + r->cands), N = nd + (long)sets * 2 * r->ood_m;
    memcpy(s->reg_all, r->delta_pos, (size_t)(nd * n) * sizeof *s->reg_all);
    memcpy(s->reg_all + nd * n, r->ood_pos, (size_t)((N - nd) * n) * sizeof *s->reg_all);
    const int U = pelab_seqpe_unique(s->reg_uniq, s->reg_row, s->reg_all, (int)N, n, s->reg_scratch);
    int rc = pelab_seqpe_check(&s->enc, s->reg_uniq, U);
    if (!rc) rc = pelab_seqpe_acts_reserve(&s->reg_acts, &s->enc, U);
    if (rc) return rc;
    pelab_seqpe_encoder_forward(pe->ctx, &s->enc, &s->reg_acts, s->reg_uniq, U);
    memset(s->reg_dE, 0, (size_t)U * D * sizeof *s->reg_dE);
    pelab_clear_error(); /* a NaN term with an error set is out of memory, not a diverged model */
    if (r->pivots) {
        terms[0] = pelab_seqpe_delta_loss(s->reg_acts.out, D, s->reg_row, r->target, r->pivots,
                                          r->cands, s->reg_dE, s->alpha);
        *total += s->alpha * terms[0];
    }
    if (sets) {
        terms[1] = pelab_seqpe_ood_loss(s->reg_acts.out, D, pe->H, s->reg_row + nd, sets, r->ood_m,
                                        s->style.symmetric_ood, s->reg_dE, s->beta);
        *total += s->beta * terms[1];
    }
    if ((isnan(terms[0]) || isnan(terms[1])) && *pelab_last_error()) return PELAB_ERR_RUNTIME;
    return PELAB_OK;
}

void pelab_seqpe_aux_backward(struct pelab_posenc *pe, pelab_real scale) {
    struct pelab_seqpe *s = pe->state;
    const long n = (long)s->reg_acts.U * pe->D;
    if (!n) return;
    for (long i = 0; i < n; i++) s->reg_dout[i] = scale * s->reg_dE[i];
    pelab_seqpe_encoder_backward(pe->ctx, &s->enc, &s->reg_acts, s->reg_dout);
}

const struct pelab_seqpe_reg *pelab_seqpe_last_draw(const struct pelab_posenc *pe) {
    const struct pelab_seqpe *s = pe->state;
    return &s->reg;
}
