/* Frequency usage: mean magnitude per (layer, frequency) of the projected queries and keys, over
 * tokens and heads; each encoding says what its frequencies and magnitudes are (posenc.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/freq.h"
#include "pelab/status.h"
#include "pelab/train.h"

int pelab_freq_init(struct pelab_freq *f, const struct pelab_model *m) {
    memset(f, 0, sizeof *f);
    const struct pelab_posenc_ops *ops = m->pe.ops;
    if (!ops->freqs || !ops->freq_norms) {
        char names[256] = "";
        for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p; p++)
            if ((*p)->freqs) {
                if (names[0]) strncat(names, ", ", sizeof names - strlen(names) - 1);
                strncat(names, (*p)->name, sizeof names - strlen(names) - 1);
            }
        return pelab_fail(PELAB_ERR_USAGE, "encoding '%s' has no frequencies to analyse (those with: %s)",
                          ops->name, names);
    }
    f->n_layers = m->cfg.n_layers;
    f->n_heads = m->cfg.n_heads;
    f->n_freqs = ops->freqs(&m->pe, NULL);
    const size_t nf = (size_t)f->n_freqs, nlf = (size_t)f->n_layers * nf;
    f->theta = malloc(nf * sizeof *f->theta);
    f->q_sum = calloc(nlf, sizeof *f->q_sum);
    f->k_sum = calloc(nlf, sizeof *f->k_sum);
    f->mag = malloc(nf * sizeof *f->mag);
    if (!f->theta || !f->q_sum || !f->k_sum || !f->mag) {
        pelab_freq_free(f);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    }
    ops->freqs(&m->pe, f->theta);
    return PELAB_OK;
}

void pelab_freq_free(struct pelab_freq *f) {
    free(f->theta);
    free(f->q_sum);
    free(f->k_sum);
    free(f->mag);
    memset(f, 0, sizeof *f);
}

void pelab_freq_add(struct pelab_freq *f, const struct pelab_model *m, const unsigned char *keep) {
    const struct pelab_posenc *pe = &m->pe;
    const int B = m->cur_B, T = m->cur_T, D = m->cfg.d_model, H = m->cfg.n_heads, d = D / H;
    const int F = f->n_freqs;
    PELAB_ASSERT(f->n_layers == m->cfg.n_layers && F == pe->ops->freqs(pe, NULL));
    double *mag = f->mag;
    uint64_t counted = 0;
    for (int l = 0; l < f->n_layers; l++) {
        const pelab_real *qkv = pelab_model_qkv(m, l); /* (B,T,3D): q at 0, k at D */
        double *qs = f->q_sum + (size_t)l * F, *ks = f->k_sum + (size_t)l * F;
        counted = 0;
        for (long i = 0; i < (long)B * T; i++) {
            if (keep && !keep[i]) continue;
            counted++;
            for (int h = 0; h < H; h++) {
                pe->ops->freq_norms(pe, mag, qkv + i * 3 * D + (long)h * d);
                for (int c = 0; c < F; c++) qs[c] += mag[c];
                pe->ops->freq_norms(pe, mag, qkv + i * 3 * D + D + (long)h * d);
                for (int c = 0; c < F; c++) ks[c] += mag[c];
            }
        }
    }
    f->tokens += counted;
}

/* The batches that cover examples [first, first + batches·batch) of a split of `size`, cut at its
 * end so that no example counts twice: a batch larger than the examples left shrinks to them, and
 * no batch starts past the end (the last one may reach beyond it: its rows there, which the task's
 * fill takes from the split's start again, are left out). A request within the split runs as
 * asked. */
static void plan_batches(uint64_t size, uint64_t first, int *batches, int *batch, uint64_t *examples) {
    const uint64_t left = size - first;
    if ((uint64_t)*batch > left) *batch = (int)left;
    const uint64_t covering = (left + (uint64_t)*batch - 1) / (uint64_t)*batch;
    if ((uint64_t)*batches > covering) *batches = (int)covering;
    const uint64_t asked = (uint64_t)*batches * (uint64_t)*batch;
    *examples = asked < left ? asked : left;
}

int pelab_freq_collect(struct pelab_freq *f, struct pelab_model *m, const struct pelab_task *t,
                       enum pelab_split split, uint64_t first, int batches, int batch) {
    if (batch <= 0 || batches <= 0) return pelab_fail(PELAB_ERR_USAGE, "batch and batch count must be positive");
    const int T = pelab_task_split_len(t, split);
    int rc = pelab_task_open_split(t, split);
    if (rc) return rc;
    const uint64_t size = t->ops->split_size(t, split);
    if (size == 0) return pelab_fail(PELAB_ERR_RUNTIME, "the task's split is empty");
    if (first >= size)
        return pelab_fail(PELAB_ERR_USAGE, "example %" PRIu64 " is past the split's %" PRIu64, first, size);
    plan_batches(size, first, &batches, &batch, &f->examples);
    f->batches = batches;
    f->batch = batch;
    if ((rc = pelab_model_reserve(m, batch, T))) return rc;
    struct pelab_batch b;
    if ((rc = pelab_batch_alloc_for(&b, t, batch, T))) return rc; /* images: pixels and (row, col) */
    unsigned char *keep = malloc((size_t)batch * T);
    if (!keep) {
        pelab_batch_free(&b);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    }
    const int was_training = m->training;
    m->training = 0;
    for (int n = 0; n < batches && !rc; n++) {
        const uint64_t at = first + (uint64_t)n * batch;
        const long rows = size - at < (uint64_t)batch ? (long)(size - at) : batch; /* the rest: wrapped */
        t->ops->fill(t, split, at, &b);
        if ((rc = pelab_eval_positions(m, t, &b, at))) break; /* as in an evaluation */
        pelab_model_set_inputs(m, b.inputs);
        pelab_model_forward(m, b.tokens, b.targets, b.pos, batch, T);
        if ((rc = m->status)) break;
        /* text: every token but padding; images: every patch and the class token (their token
         * ids are not read: the inputs are pixels) */
        for (long i = 0; i < (long)batch * T; i++)
            keep[i] = i / T < rows && (t->io.input_dim > 0 || b.tokens[i] != t->pad);
        pelab_freq_add(f, m, keep);
    }
    m->training = was_training;
    pelab_model_set_inputs(m, NULL);
    free(keep);
    pelab_batch_free(&b);
    return rc;
}

static double mean(const struct pelab_freq *f, const double *sum, int layer, int c) {
    PELAB_ASSERT(layer >= 0 && layer < f->n_layers && c >= 0 && c < f->n_freqs);
    return f->tokens ? sum[(size_t)layer * f->n_freqs + c] / ((double)f->tokens * f->n_heads) : 0;
}

double pelab_freq_query(const struct pelab_freq *f, int layer, int c) { return mean(f, f->q_sum, layer, c); }
double pelab_freq_key(const struct pelab_freq *f, int layer, int c) { return mean(f, f->k_sum, layer, c); }
