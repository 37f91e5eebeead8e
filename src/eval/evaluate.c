/* Evaluation: loss and accuracy over target positions of a span of one split, forward only, and
 * the examples whose every target is right (exact match); for tasks of documents also perplexity
 * and (text) bits per byte, at the training length or any other. */
#include <math.h>
#include <stdio.h>
#include "pelab/clock.h"
#include "pelab/dist.h"
#include "pelab/image.h"
#include "pelab/json.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/train.h"

/* ---- progress ------------------------------------------------------------------------------- */

/* The process's, as its API says (pelab/train.h): what it reports to is the one terminal line of
 * the process's stderr, whichever evaluation runs. */
static struct {
    void (*hook)(void *ctx, const struct pelab_eval_progress *p);
    void *ctx;
    int open;             /* a span is running */
    char what[64], part[32];
    const char *unit;
    double t0, work, work_done;
    uint64_t windows, windows_done;
} meter;

void pelab_eval_set_progress(void (*hook)(void *ctx, const struct pelab_eval_progress *p),
                             void *ctx) {
    meter.hook = hook;
    meter.ctx = ctx;
}

double pelab_eval_cost(const struct pelab_model *m, int L) {
    return (double)L * ((double)L + 12.0 * m->cfg.d_model);
}

static void span_open(const char *what, double work, uint64_t windows) {
    meter.open = 1;
    snprintf(meter.what, sizeof meter.what, "%s", what);
    meter.part[0] = '\0';
    meter.unit = "windows";
    meter.t0 = pelab_clock_s();
    meter.work = work;
    meter.windows = windows;
    meter.work_done = 0;
    meter.windows_done = 0;
}

static void report(int final) {
    if (!meter.hook) return;
    struct pelab_eval_progress p;
    p.what = meter.what;
    p.part = meter.part;
    p.done = meter.windows_done;
    p.unit = meter.unit ? meter.unit : "windows";
    p.total = meter.windows;
    p.fraction = final ? 1 : meter.work > 0 ? meter.work_done / meter.work : 0;
    if (p.fraction > 1) p.fraction = 1;
    p.elapsed_s = pelab_clock_s() - meter.t0;
    p.eta_s = p.fraction > 0 ? p.elapsed_s * (1 - p.fraction) / p.fraction : -1;
    p.finished = final;
    meter.hook(meter.ctx, &p);
}

static void span_close(void) {
    if (meter.open) report(1);
    meter.open = 0;
}

void pelab_eval_span_begin(const char *what, double work, uint64_t windows) {
    span_open(what, work, windows);
}

void pelab_eval_span_part(const char *part) {
    snprintf(meter.part, sizeof meter.part, "%s", part);
}

void pelab_eval_span_end(void) { span_close(); }

int pelab_argmax(const pelab_real *row, int V) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (row[v] > row[best]) best = v;
    return best;
}

/* Where the examples come from: the task's examples of a split, or its cut at length L. */
struct source {
    const struct pelab_task *t;
    enum pelab_split split;
    int L, full, windows; /* windows: fill_windows at L, else fill */
};

static void source_fill(const struct source *s, uint64_t first, struct pelab_batch *b) {
    if (s->windows) s->t->ops->fill_windows(s->t, s->split, s->L, s->full, first, b);
    else s->t->ops->fill(s->t, s->split, first, b);
}

/* Examples first .. first+count-1 of the source, `batch` per forward pass of length s->L.
 * Collective across MPI ranks (pelab/dist.h): each rank scores a contiguous share of the
 * examples, then the sums are added up, so every rank gets the result of the whole span. */
static int run(struct pelab_model *m, const struct source *s, uint64_t first, uint64_t count,
               int batch, struct pelab_eval_result *r) {
    struct pelab_dist *d = &m->ctx->dist;
    if (batch <= 0)
        return pelab_dist_agree(d, pelab_fail(PELAB_ERR_USAGE, "evaluation batch must be positive"));
    int T = s->L, rc;
    const uint64_t all = count;
    if ((uint64_t)batch > count) batch = count > 0 ? (int)count : 1; /* no larger than needed */
    uint64_t s0, s1; /* whole passes of `batch` examples: alike on any number of ranks */
    pelab_dist_share_blocks(d, count, (uint64_t)batch, &s0, &s1);
    first += s0;
    count = s1 - s0;
    struct pelab_batch b;
    if ((rc = pelab_batch_alloc_for(&b, s->t, batch, T))) return rc;
    const int own_span = !meter.open;
    const double cost = pelab_eval_cost(m, T);
    if (own_span) {
        char what[64];
        snprintf(what, sizeof what, "evaluating the %s split", pelab_split_name(s->split));
        span_open(what, cost * (double)count, count);
        if (!s->windows) meter.unit = "examples";
    }
    int was_training = m->training;
    m->training = 0;
    const uint16_t *nbytes = s->t->token_bytes;
    /* Sum per-position losses in double: the ranks' shares differ from one process's sum only
     * by double rounding. */
    double loss_sum = 0;
    for (uint64_t done = 0; done < count;) {
        int n = count - done < (uint64_t)batch ? (int)(count - done) : batch;
        b.B = n;
        source_fill(s, first + done, &b);
        if ((rc = pelab_eval_positions(m, s->t, &b, first + done))) break; /* alike on any rank */
        /* forward only: memory for one layer, not the activations a backward pass would read */
        pelab_model_set_inputs(m, b.inputs);
        pelab_model_forward_eval(m, b.tokens, b.targets, b.pos, n, T);
        if ((rc = m->status)) break;
        const pelab_real *losses = pelab_model_eval_losses(m);  /* (n,T) */
        const int32_t *pred = pelab_model_eval_pred(m);         /* (n,T) argmax of the logits */
        for (int row = 0; row < n; row++) {
            int any = 0, every = 1; /* the row has scored targets; all of them predicted */
            for (size_t i = (size_t)row * (size_t)T; i < (size_t)(row + 1) * (size_t)T; i++) {
                if (b.targets[i] < 0) continue;
                loss_sum += losses[i];
                r->targets++;
                if (nbytes) r->bytes += nbytes[b.targets[i]];
                if (pred[i] == b.targets[i]) r->correct++;
                else every = 0;
                any = 1;
            }
            r->answered += (uint64_t)any;
            r->exact += (uint64_t)(any && every);
        }
        done += (uint64_t)n;
        meter.work_done += cost * n;
        meter.windows_done += (uint64_t)n;
        report(0);
    }
    if (own_span) span_close();
    b.B = batch;
    pelab_batch_free(&b);
    m->training = was_training;
    if ((rc = pelab_dist_agree(d, rc))) return rc;
    if (d->size > 1) { /* counts below 2^53: exact in double */
        double sums[6] = {loss_sum, (double)r->targets, (double)r->bytes, (double)r->correct,
                          (double)r->answered, (double)r->exact};
        pelab_dist_sum_double(d, sums, 6);
        loss_sum = sums[0];
        r->targets = (uint64_t)sums[1];
        r->bytes = (uint64_t)sums[2];
        r->correct = (uint64_t)sums[3];
        r->answered = (uint64_t)sums[4];
        r->exact = (uint64_t)sums[5];
    }
    r->examples = all;
    if (r->targets) {
        r->loss = loss_sum / (double)r->targets;
        r->acc = (double)r->correct / (double)r->targets;
        r->ppl = exp(r->loss);
        if (r->bytes) r->bpb = loss_sum / (log(2.0) * (double)r->bytes);
        r->exact_match = (double)r->exact / (double)r->answered;
    }
    if (!isfinite(r->loss)) /* alike on every rank: rank 0 says it */
        return pelab_dist_agree(d, pelab_fail(PELAB_ERR_RUNTIME, "the %s loss is not finite (%g): "
                                           "the model's weights or activations overflow, so there "
                                           "is no result to report", pelab_split_name(s->split),
                                           pelab_printable(r->loss)));
    return PELAB_OK;
}

static void clear(struct pelab_eval_result *r) {
    r->loss = r->acc = r->ppl = r->bpb = 0;
    r->examples = r->targets = r->correct = r->bytes = 0;
    r->exact = r->answered = 0;
    r->exact_match = 0;
}

int pelab_evaluate(struct pelab_model *m, const struct pelab_task *t, enum pelab_split split,
                   uint64_t first, uint64_t count, int batch, struct pelab_eval_result *r) {
    clear(r);
    /* a collective, as the evaluation is: every rank reads the split, and stops if one cannot */
    int rc = pelab_dist_agree(&m->ctx->dist, pelab_task_open_split(t, split));
    if (rc) return rc;
    struct source s = {t, split, pelab_task_split_len(t, split), 0, t->ops->fill_windows != NULL};
    uint64_t size;
    if (s.windows) {
        struct pelab_window_count c;
        size = t->ops->windows(t, split, t->seq_len, 0, &c);
    } else {
        PELAB_ASSERT(split != PELAB_SPLIT_LONG); /* only tasks of documents have it */
        size = t->ops->split_size(t, split);
    }
    if (count == 0 || count > size) count = size;
    return run(m, &s, first, count, batch, r);
}

int pelab_evaluate_windows(struct pelab_model *m, const struct pelab_task *t,
                           enum pelab_split split, int L, int full, int batch,
                           struct pelab_eval_result *r) {
    clear(r);
    PELAB_ASSERT(t->ops->windows && t->ops->fill_windows && L >= 1);
    struct pelab_window_count c;
    uint64_t count = t->ops->windows(t, split, L, full, &c);
    if (count == 0)
        return pelab_fail(PELAB_ERR_USAGE, "no %s document of task %s has the %d tokens a window "
                          "of length %d needs (the longest has %llu)", pelab_split_name(split),
                          t->ops->name, L + 1, L, (unsigned long long)c.longest);
    struct source s = {t, split, L, full, 1};
    return run(m, &s, 0, count, batch, r);
}

int pelab_evaluate_sizes(struct pelab_model *m, const struct pelab_task *t, int batch,
                         struct pelab_eval_result *r) {
    PELAB_ASSERT(t->ops->sizes && t->ops->size_len);
    int train_max, test_max, per_size;
    t->ops->sizes(t, &train_max, &test_max, &per_size);
    double work = 0;
    for (int n = 1; n <= test_max; n++) work += pelab_eval_cost(m, t->ops->size_len(t, n)) * per_size;
    span_open("evaluating the test split by size", work, (uint64_t)test_max * (uint64_t)per_size);
    meter.unit = "examples";
    int rc = PELAB_OK;
    for (int n = 1; n <= test_max && !rc; n++) {
        clear(&r[n - 1]);
        struct source s = {t, PELAB_SPLIT_TEST, t->ops->size_len(t, n), 0, 0};
        rc = run(m, &s, (uint64_t)(n - 1) * (uint64_t)per_size, (uint64_t)per_size, batch, &r[n - 1]);
    }
    span_close();
    return rc;
}

void pelab_sizes_json(struct pelab_sb *sb, const struct pelab_eval_result *r, int n, int train_max) {
    pelab_sb_printf(sb, "[");
    for (int i = 0; i < n; i++) {
        pelab_sb_printf(sb, "%s{\"size\": %d, \"trained\": %s, \"examples\": %llu, \"exact_match\": ",
                        i ? ", " : "", i + 1, i < train_max ? "true" : "false",
                        (unsigned long long)r[i].examples);
        pelab_sb_json_number(sb, r[i].exact_match);
        pelab_sb_printf(sb, ", \"accuracy\": ");
        pelab_sb_json_number(sb, r[i].acc);
        pelab_sb_printf(sb, ", \"loss\": ");
        pelab_sb_json_number(sb, r[i].loss);
        pelab_sb_printf(sb, "}");
    }
    pelab_sb_printf(sb, "]");
}

int pelab_eval_positions(const struct pelab_model *m, const struct pelab_task *t, struct pelab_batch *b,
                         uint64_t first) {
    const int N = m->cfg.random_positions;
    return N ? pelab_random_positions(b->pos, b->tokens, b->B, b->T, t->pad, N, PELAB_EVAL_POSITIONS_KEY, first)
             : PELAB_OK;
}

int pelab_check_positions(struct pelab_model *m, const int32_t *pos, int B, int T) {
    const int N = m->cfg.random_positions;
    if (N && T > N)
        return pelab_fail(PELAB_ERR_USAGE, "--random-positions %d holds no %d distinct positions (N "
                          "must be at least the longest sequence read)", N, T);
    return pelab_posenc_prepare(&m->pe, pos, B, T);
}

int pelab_check_split_positions(struct pelab_model *m, const struct pelab_task *t, enum pelab_split split) {
    const int T = pelab_task_split_len(t, split);
    struct pelab_batch b;
    int rc = pelab_batch_alloc_for(&b, t, 1, T);
    if (rc) return rc;
    t->ops->fill(t, split, 0, &b); /* any example: positions run 0..T-1 (an image's: its side's) */
    rc = pelab_check_positions(m, b.pos, 1, T);
    pelab_batch_free(&b);
    return rc;
}

/* Whether m's encoding takes the positions of one image of task t at its current side. */
static int check_side_positions(struct pelab_model *m, const struct pelab_task *t, int side) {
    int rc = pelab_check_split_positions(m, t, PELAB_SPLIT_VAL);
    return rc ? pelab_fail_context(PELAB_ERR_USAGE, "--resolutions: side %d", side) : PELAB_OK;
}

int pelab_task_sides(struct pelab_task *t, struct pelab_model *m, const char *spec, int *sides,
                     int *n, int *train_side, int *patch) {
    if (!t->ops->set_side)
        return pelab_fail(PELAB_ERR_USAGE, "--resolutions: task %s has no images (image task only)",
                          t->ops->name);
    int rc = t->ops->set_side(t, 0, train_side, patch);
    if (!rc) rc = pelab_image_parse_sides(spec, *train_side, *patch, sides, n);
    for (int i = 0; !rc && m && i < *n; i++) {
        int ignored[2];
        if (!(rc = t->ops->set_side(t, sides[i], &ignored[0], &ignored[1])))
            rc = check_side_positions(m, t, sides[i]);
    }
    if (m) {
        int ignored[2], rc0 = t->ops->set_side(t, 0, &ignored[0], &ignored[1]);
        if (!rc) rc = rc0;
    }
    return rc;
}

int pelab_evaluate_sides(struct pelab_model *m, struct pelab_task *t, enum pelab_split split,
                         const int *sides, int n, uint64_t count, int batch,
                         struct pelab_eval_result *r) {
    int train_side, patch, rc = PELAB_OK;
    for (int i = 0; !rc && i < n; i++) {
        rc = t->ops->set_side(t, sides[i], &train_side, &patch);
        if (!rc) rc = pelab_evaluate(m, t, split, 0, count, batch, &r[i]);
    }
    t->ops->set_side(t, 0, &train_side, &patch);
    return rc;
}
