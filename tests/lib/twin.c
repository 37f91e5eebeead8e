/* The PyTorch-twin fixtures (twin.h): one case's model and fixture files. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"
#include "twin.h"
#include "pelab/model.h"
#include "pelab/optim.h"
#include "pelab/options.h"
#include "pelab/params.h"
#include "pelab/rng.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "posenc/seqpe.h"

#ifndef PELAB_DOUBLE
#error "the twin fixtures hold pelab_real as F64: built with -DPELAB_DOUBLE"
#endif

#define V TWIN_V
#define B TWIN_B
#define T TWIN_T
#define STEPS TWIN_STEPS

/* The tensors of one file, in order; names are copied, data is borrowed. */
struct tensor_list {
    struct pelab_tensor t[512];
    int n;
};

static void add(struct tensor_list *l, const char *name, enum pelab_dtype dt, const void *data,
                size_t elem, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    PELAB_ASSERT(l->n < (int)(sizeof l->t / sizeof l->t[0]));
    PELAB_ASSERT(strlen(name) < sizeof l->t[0].name);
    struct pelab_tensor *x = &l->t[l->n++];
    memset(x, 0, sizeof *x);
    strcpy(x->name, name);
    x->dtype = dt;
    x->ndim = ndim;
    int64_t dims[4] = {d0, d1, d2, d3};
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        x->shape[i] = dims[i];
        count *= (size_t)dims[i];
    }
    x->data = data;
    x->nbytes = count * elem;
}

static void add_param(struct tensor_list *l, const char *prefix, const struct pelab_param *p,
                      const double *data) {
    char name[128];
    snprintf(name, sizeof name, "%s%s", prefix, p->name);
    PELAB_ASSERT(l->n < (int)(sizeof l->t / sizeof l->t[0]));
    struct pelab_tensor *x = &l->t[l->n++];
    memset(x, 0, sizeof *x);
    strcpy(x->name, name);
    x->dtype = PELAB_DT_F64;
    x->ndim = p->ndim;
    for (int i = 0; i < p->ndim; i++) x->shape[i] = p->shape[i];
    x->data = data;
    x->nbytes = p->size * sizeof(double);
}

/* One draw of the regularisers, copied out of the encoding. */
#define DRAW_MAX 4096
struct draw {
    int n, pivots, cands, sets, m;
    int32_t delta_pos[DRAW_MAX], target[DRAW_MAX], ood_pos[DRAW_MAX];
};

/* The encoding's own loss terms after a backward, as the trainer adds them: aux_forward with the
 * key, aux_backward into the gradients; the draw and the terms are kept for the fixture. 0 when
 * its options switch every term off (each NaN: nothing added), else 1. */
static int aux_step(struct pelab_model *m, uint64_t key, struct draw *d, double *terms,
                    const char *name) {
    double t[PELAB_PE_AUX_MAX], total;
    CHECK(m->pe.ops->aux_forward(&m->pe, key, t, &total) == PELAB_OK, "%s: aux_forward: %s", name,
          pelab_last_error());
    if (isnan(t[0]) && isnan(t[1]) && total == 0) return 0;
    CHECK(isfinite(t[0]) && isfinite(t[1]) && isfinite(total) && t[0] > 0 && t[1] > 0,
          "%s: regulariser losses %g, %g", name, t[0], t[1]);
    m->pe.ops->aux_backward(&m->pe, 1.0);
    terms[0] = t[0], terms[1] = t[1];
    const struct pelab_seqpe_reg *r = pelab_seqpe_last_draw(&m->pe);
    d->n = r->dims, d->pivots = r->pivots, d->cands = r->cands, d->sets = r->sets, d->m = r->ood_m;
    const long nd = (long)r->pivots * (1 + r->cands) * r->dims, no = (long)r->sets * 2 * r->ood_m * r->dims;
    PELAB_ASSERT(nd <= DRAW_MAX && no <= DRAW_MAX && r->pivots <= DRAW_MAX);
    memcpy(d->delta_pos, r->delta_pos, (size_t)nd * sizeof *d->delta_pos);
    memcpy(d->target, r->target, (size_t)r->pivots * sizeof *d->target);
    memcpy(d->ood_pos, r->ood_pos, (size_t)no * sizeof *d->ood_pos);
    return 1;
}

/* A 2-D case: a patch model as the image task builds it, input vectors of width TWIN_P, a class
 * token, (row, column) positions, bidirectional, training grid TWIN_GRID (twin.h). */
#define TWIN_P 4

/* Random tokens; about a quarter of the targets are -1; pos[b][t] = t + 7b + shift.
 * in != NULL (a patch model): the class token's target only, position (0, 0), and every other
 * token random (row, column) in 1 .. TWIN_GRID + 1 (some sequences on a grid larger than the
 * training one), input vectors normal. */
static void random_batch(struct pelab_rng *rng, int32_t *tokens, int32_t *targets, int32_t *pos,
                         int shift, double *in) {
    for (int b = 0; in && b < B; b++)
        for (int t = 0; t < T; t++) {
            const int i = b * T + t;
            tokens[i] = V;
            targets[i] = t ? -1 : (int32_t)pelab_rng_below(rng, V);
            pos[2 * i] = t ? 1 + (int32_t)pelab_rng_below(rng, TWIN_GRID + 1) : 0;
            pos[2 * i + 1] = t ? 1 + (int32_t)pelab_rng_below(rng, TWIN_GRID + 1) : 0;
            for (int j = 0; j < TWIN_P; j++) in[i * TWIN_P + j] = pelab_rng_normal(rng);
        }
    if (in) return;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            tokens[b * T + t] = (int32_t)pelab_rng_below(rng, V);
            targets[b * T + t] = pelab_rng_uniform(rng) < 0.25 ? -1 : (int32_t)pelab_rng_below(rng, V);
            pos[b * T + t] = t + 7 * b + shift;
        }
    targets[0] = 1; /* at least one target */
}

static int all_finite(const double *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* Forward (and checks of what pelab can see by itself). */
static double forward_checked(struct pelab_model *m, const int32_t *tokens, const int32_t *targets,
                              const int32_t *pos, const char *what) {
    pelab_model_forward(m, tokens, targets, pos, B, T);
    double loss = m->loss;
    CHECK(isfinite(loss) && loss > 0, "%s: loss %g", what, loss);
    const double *losses = pelab_model_losses(m);
    double sum = 0;
    int n = 0;
    for (int i = 0; i < B * T; i++)
        if (targets[i] != -1) sum += losses[i], n++;
    CHECK(m->n_targets == n, "%s: n_targets %d, expected %d", what, m->n_targets, n);
    CHECK_CLOSE(loss, sum / n, 1e-12, 1e-12, "loss = mean of per-position losses");
    return loss;
}

int twin_write_case(const char *dir, const char *case_name, const char *const *case_opts,
                    const struct pelab_pe_layout *layout, int max_seq, uint64_t seed) {
    const struct { const char *name; const char *const *opts; } case_ = {case_name, case_opts}, *c = &case_;
    char path[4096];
    struct pelab_opts opts = {0};
    const char *base[] = {"d-model", "32", "heads", "4", "layers", "2", "mlp-mult", "4",
                          "dropout", "0", NULL};
    for (int i = 0; base[i]; i += 2) pelab_opts_set(&opts, base[i], base[i + 1]);
    for (int i = 0; c->opts[i]; i += 2) pelab_opts_set(&opts, c->opts[i], c->opts[i + 1]);

    struct pelab_model m;
    memset(&m, 0, sizeof m);
    const int patches = layout->dims == 2;
    PELAB_ASSERT(!patches || layout->grid == TWIN_GRID);
    const struct pelab_model_io io = {patches ? TWIN_P : 0, *layout};
    const int n_pos = io.positions.dims;
    if (pelab_model_init_io(&m, &opts, V, max_seq, &io) != PELAB_OK) {
        CHECK(0, "%s: pelab_model_init: %s", c->name, pelab_last_error());
        return 1;
    }
    /* the saved config names what the encoding resolved (a profile's choices), as training's */
    if (pelab_posenc_resolve(&m.pe, &m.opts) != PELAB_OK) {
        CHECK(0, "%s: resolve: %s", c->name, pelab_last_error());
        return 1;
    }
    pelab_model_init_weights(&m, seed);
    m.training = 0;

    /* Gains 1 + 0.1·noise, so that their gradients are tested away from the trivial value. */
    struct pelab_rng rng;
    pelab_rng_seed(&rng, seed ^ 0x7477696eu);
    for (int i = 0; i < m.params.count; i++) {
        const struct pelab_param *p = &m.params.list[i];
        size_t len = strlen(p->name);
        if (len >= 11 && strcmp(p->name + len - 11, "norm.weight") == 0)
            for (size_t j = 0; j < p->size; j++)
                pelab_params_data(&m.params, i)[j] = 1 + 0.1 * pelab_rng_normal(&rng);
    }

    /* Bias encodings away from their init too: a non-zero T5 table, so the first forward already
     * reads the buckets; FIRE's c and ℓ off 0.1 and 1, so L = |ℓ|·T falls between positions
     * (rows of these batches lie on both sides of it). */
    for (int i = 0; i < m.params.count; i++) {
        const struct pelab_param *p = &m.params.list[i];
        pelab_real *w = pelab_params_data(&m.params, i);
        size_t len = strlen(p->name);
        if (strstr(p->name, ".t5."))
            for (size_t j = 0; j < p->size; j++) w[j] = 0.5 * pelab_rng_normal(&rng);
        if (strstr(p->name, ".fire.") && (p->name[len - 2] == '.' || strcmp(p->name + len - 4, ".ell") == 0))
            w[0] *= 1 + 0.2 * pelab_rng_normal(&rng);
    }

    /* An encoding with loss terms of its own (SeqPE's regularisers): position embeddings of order 1
     * (the encoder's input embeddings × 10, W_out (D, w) × 30·√(D/w): its outputs' size whatever the
     * encoder's width w), so that both losses are far from their values for equal embeddings and
     * their gradients weigh in the comparison. */
    for (int i = 0; m.pe.ops->aux_forward && i < m.params.count; i++) {
        const struct pelab_param *p = &m.params.list[i];
        const char *name = p->name;
        double f = strcmp(name, "pe.seqpe.out.weight") == 0 ? 30 * sqrt((double)p->shape[0] / p->shape[1])
                   : strstr(name, "_emb.weight") ? 10 : 1;
        for (size_t j = 0; strncmp(name, "pe.seqpe.", 9) == 0 && j < m.params.list[i].size; j++)
            pelab_params_data(&m.params, i)[j] *= f;
    }

    snprintf(path, sizeof path, "%s/%s", dir, c->name);
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        CHECK(0, "mkdir %s: %s", path, strerror(errno));
        pelab_model_free(&m);
        return 1;
    }

    struct pelab_opts settings = {0}, meta = {0};
    CHECK(pelab_model_settings(&m, &settings) == PELAB_OK, "%s: settings: %s", c->name,
          pelab_last_error());
    /* Which attention kernel computed it is not the twin's business (both compute the same
     * function; this model uses the default, tiled). */
    pelab_opts_unset(&settings, "attention");
    /* Evaluation-time options are not settings of the model: the twin reads them beside them. */
    for (int i = 0; c->opts[i]; i += 2)
        if (pelab_optdef_find(m.pe.ops->eval_options, c->opts[i]))
            pelab_opts_set(&settings, c->opts[i], c->opts[i + 1]);
    /* The metadata must describe this model: every option given comes back as given. */
    for (int i = 0; c->opts[i]; i += 2) {
        const char *got = pelab_opts_get(&settings, c->opts[i]);
        CHECK(got && strcmp(got, c->opts[i + 1]) == 0,
              "%s: pelab_model_settings reports %s = '%s', the model was built with '%s'", c->name,
              c->opts[i], got ? got : "(missing)", c->opts[i + 1]);
    }
    for (int i = 0; i < settings.count; i++) {
        char key[PELAB_OPT_KEY_MAX + 16];
        snprintf(key, sizeof key, "pelab.config.%s", settings.kv[i].key);
        CHECK(pelab_opts_set(&meta, key, settings.kv[i].val) == PELAB_OK, "%s: metadata: %s",
              c->name, pelab_last_error());
    }
    if (patches) { /* what the task feeds the model, for the twin to build the same one */
        pelab_opts_set(&meta, "pelab.config.input-dim", "4");
        pelab_opts_set(&meta, "pelab.config.pos-dims", "2");
        pelab_opts_set(&meta, "pelab.config.bidirectional", "on");
        char grid[16];
        snprintf(grid, sizeof grid, "%d", layout->grid);
        pelab_opts_set(&meta, "pelab.config.grid", grid);
    }
    pelab_opts_set(&meta, "format", "pelab-model");
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, c->name);
    CHECK(pelab_params_save(path, &m.params, &meta) == PELAB_OK, "%s: %s", path, pelab_last_error());

    /* One forward and backward. */
    static int32_t tokens[STEPS + 1][B * T], targets[STEPS + 1][B * T], pos[STEPS + 1][B * T * 2];
    static double inputs[STEPS + 1][B * T * TWIN_P];
    static struct draw draws[STEPS + 1];
    double aux_terms[STEPS + 1][2];
    random_batch(&rng, tokens[0], targets[0], pos[0], 0, patches ? inputs[0] : NULL);
    pelab_model_set_inputs(&m, patches ? inputs[0] : NULL);
    CHECK(pelab_model_reserve(&m, B, T) == PELAB_OK, "%s: reserve: %s", c->name, pelab_last_error());
    double loss = forward_checked(&m, tokens[0], targets[0], pos[0], c->name);
    if (m.status) { /* refused (reported above): nothing to compare */
        pelab_model_free(&m);
        return 1;
    }
    double *logits = malloc(sizeof(double) * B * T * V);
    double *grads = malloc(sizeof(double) * m.params.total);
    PELAB_ASSERT(logits && grads);
    memcpy(logits, pelab_model_logits(&m), sizeof(double) * B * T * V);
    pelab_params_zero_grad(&m.params);
    pelab_model_backward(&m, 1.0);
    const int aux = m.pe.ops->aux_forward && aux_step(&m, 1000, &draws[0], aux_terms[0], c->name);
    memcpy(grads, m.params.grad, sizeof(double) * m.params.total);
    CHECK(all_finite(grads, m.params.total), "%s: gradients not finite", c->name);

    /* Five training steps on fresh batches, as the trainer does them. */
    struct pelab_adamw opt = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    struct pelab_schedule sched = {.lr = 1e-2, .min_lr = 1e-3, .warmup = 2, .decay_steps = STEPS};
    double lrs[STEPS], losses[STEPS], norms[STEPS];
    for (int i = 0; i < STEPS; i++) {
        int32_t *tk = tokens[i + 1], *tg = targets[i + 1], *ps = pos[i + 1];
        random_batch(&rng, tk, tg, ps, 3 * i, patches ? inputs[i + 1] : NULL);
        pelab_model_set_inputs(&m, patches ? inputs[i + 1] : NULL);
        pelab_params_zero_grad(&m.params);
        losses[i] = forward_checked(&m, tk, tg, ps, c->name);
        pelab_model_backward(&m, 1.0);
        if (aux) aux_step(&m, 2000 + (uint64_t)i, &draws[i + 1], aux_terms[i + 1], c->name);
        norms[i] = pelab_grad_norm(&m.params);
        lrs[i] = pelab_schedule_lr(&sched, i);
        pelab_adamw_step(&opt, &m.params, lrs[i], pelab_clip_scale(norms[i], 1.0));
    }
    CHECK(all_finite(m.params.data, m.params.total), "%s: parameters not finite after training",
          c->name);

    static struct tensor_list l;
    l.n = 0;
    add(&l, "tokens", PELAB_DT_I32, tokens[0], 4, 2, B, T, 0, 0);
    add(&l, "targets", PELAB_DT_I32, targets[0], 4, 2, B, T, 0, 0);
    add(&l, "pos", PELAB_DT_I32, pos[0], 4, n_pos == 1 ? 2 : 3, B, T, n_pos, 0);
    if (patches) add(&l, "inputs", PELAB_DT_F64, inputs[0], 8, 3, B, T, TWIN_P, 0);
    add(&l, "logits", PELAB_DT_F64, logits, 8, 3, B, T, V, 0);
    add(&l, "loss", PELAB_DT_F64, &loss, 8, 1, 1, 0, 0, 0);
    for (int i = 0; i < m.params.count; i++)
        add_param(&l, "grad.", &m.params.list[i], grads + m.params.list[i].offset);
    char name[64];
    for (int i = 0; i < STEPS; i++) {
        snprintf(name, sizeof name, "step%d.tokens", i);
        add(&l, name, PELAB_DT_I32, tokens[i + 1], 4, 2, B, T, 0, 0);
        snprintf(name, sizeof name, "step%d.targets", i);
        add(&l, name, PELAB_DT_I32, targets[i + 1], 4, 2, B, T, 0, 0);
        snprintf(name, sizeof name, "step%d.pos", i);
        add(&l, name, PELAB_DT_I32, pos[i + 1], 4, n_pos == 1 ? 2 : 3, B, T, n_pos, 0);
        if (patches) {
            snprintf(name, sizeof name, "step%d.inputs", i);
            add(&l, name, PELAB_DT_F64, inputs[i + 1], 8, 3, B, T, TWIN_P, 0);
        }
    }
    add(&l, "lrs", PELAB_DT_F64, lrs, 8, 1, STEPS, 0, 0, 0);
    add(&l, "losses", PELAB_DT_F64, losses, 8, 1, STEPS, 0, 0, 0);
    add(&l, "grad_norms", PELAB_DT_F64, norms, 8, 1, STEPS, 0, 0, 0);
    for (int i = 0; i < m.params.count; i++)
        add_param(&l, "after5.", &m.params.list[i], m.params.data + m.params.list[i].offset);
    static double aux_steps[2][STEPS];
    for (int k = 0; aux && k <= STEPS; k++) { /* the draws; "reg." for the first, "step{i}.reg." */
        const struct draw *d = &draws[k];
        char pre[32];
        if (k == 0) snprintf(pre, sizeof pre, "reg.");
        else snprintf(pre, sizeof pre, "step%d.reg.", k - 1);
        snprintf(name, sizeof name, "%sdelta_pos", pre);
        add(&l, name, PELAB_DT_I32, d->delta_pos, 4, 3, d->pivots, 1 + d->cands, d->n, 0);
        snprintf(name, sizeof name, "%starget", pre);
        add(&l, name, PELAB_DT_I32, d->target, 4, 1, d->pivots, 0, 0, 0);
        snprintf(name, sizeof name, "%sood_pos", pre);
        add(&l, name, PELAB_DT_I32, d->ood_pos, 4, 3, d->sets, 2 * d->m, d->n, 0);
        if (k > 0) aux_steps[0][k - 1] = aux_terms[k][0], aux_steps[1][k - 1] = aux_terms[k][1];
    }
    if (aux) {
        add(&l, "loss_delta", PELAB_DT_F64, &aux_terms[0][0], 8, 1, 1, 0, 0, 0);
        add(&l, "loss_ood", PELAB_DT_F64, &aux_terms[0][1], 8, 1, 1, 0, 0, 0);
        add(&l, "losses_delta", PELAB_DT_F64, aux_steps[0], 8, 1, STEPS, 0, 0, 0);
        add(&l, "losses_ood", PELAB_DT_F64, aux_steps[1], 8, 1, STEPS, 0, 0, 0);
    }

    struct pelab_opts fmeta = {0};
    pelab_opts_set(&fmeta, "format", "pelab-twin-fixture");
    pelab_opts_set(&fmeta, "case", c->name);
    snprintf(path, sizeof path, "%s/%s/fixture.safetensors", dir, c->name);
    CHECK(pelab_safetensors_write(path, l.t, l.n, &fmeta) == PELAB_OK, "%s: %s", path,
          pelab_last_error());
    printf("%-20s loss %.6f  after 5 steps %.6f  (%d parameters, %zu values)\n", c->name, loss,
           losses[STEPS - 1], m.params.count, m.params.total);

    free(logits);
    free(grads);
    pelab_model_free(&m);
    return 0;
}

