/* pelab sample: a few examples of a split, each with the model's prediction at every target
 * position and the truth (indirect); or, for the tasks of documents (text, dna, music), a prompt
 * from a window of the split continued by the model, greedily or at a temperature, seeded, shown
 * as text beside the document's own continuation. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "args.h"
#include "pelab/kv_cache.h"
#include "pelab/precision.h"
#include "pelab/rng.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "pelab/train.h"

static const struct pelab_optdef sample_options[] = {
    {"model", PELAB_OPT_STR, "", 0, 0, NULL, "run directory (required)"},
    {"split", PELAB_OPT_CHOICE, "test", 0, 0, "val|test|train|long",
     "split to draw examples from (long: text, dna, music)"},
    {"count", PELAB_OPT_INT, "5", 1, 1000, NULL, "examples to show"},
    {"first", PELAB_OPT_INT, "0", 0, 1e15, NULL, "index of the first example"},
    PELAB_OPT_ROW_THREADS,
    PELAB_OPT_ROW_PRECISION,
    {"prompt", PELAB_OPT_INT, "64", 1, 1048576, NULL,
     "text, dna, music: prompt tokens, the beginning of each window"},
    {"tokens", PELAB_OPT_INT, "200", 1, 1000000, NULL,
     "text, dna, music: tokens the model generates after the prompt"},
    {"temperature", PELAB_OPT_REAL, "1", 0, 100, NULL,
     "text, dna, music: sampling temperature (0: greedy, the most likely token each time)"},
    {"seed", PELAB_OPT_INT, "1", 0, 9007199254740991.0, NULL,
     "text, dna, music: seed of the sampling (sample i draws from hash(seed, i))"},
    {"context", PELAB_OPT_INT, "0", 0, 1048576, NULL,
     "text, dna, music: the model sees at most the last N tokens, at positions 0..N-1 (0: the "
     "run's training length)"},
    {"cache", PELAB_OPT_CHOICE, "on", 0, 0, "on|off|bf16",
     "text, dna, music: generate with a KV cache (each token attends to kept keys and values); "
     "bf16: the cache keeps them in bf16 (half the bytes; logits to bf16's rounding of k and v); "
     "off: recompute the whole context for every token (the same tokens, slower)"},
    {"weights", PELAB_OPT_CHOICE, "fp32", 0, 0, "fp32|bf16",
     "text, dna, music: the weight matrices generation reads; bf16 rounds them to bf16 and, with "
     "the cache, reads half their bytes per token (float32 activations and sums, on any CPU)"},
    PELAB_OPT_ROW_EDITED,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* The options that only generation reads. */
static const char *const generation_options[] = {"prompt", "tokens", "temperature", "seed",
                                                 "context", "cache", "weights"};

void pelab_cmd_sample_help(FILE *f) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_eval_groups(g, "options", sample_options);
    fprintf(f, "usage: pelab sample --model DIR [--split test] [--count 5]\n"
               "       pelab sample --model DIR [--prompt 64] [--tokens 200] [--temperature 1]\n\n"
               "indirect: prints each example's input text, the model's prediction (with its\n"
               "probability) and the truth. image: each image's index in the split, the\n"
               "predicted class (with its probability) and the true one. text, dna, music: takes\n"
               "the first --prompt tokens of windows --first.. of the split, lets the model\n"
               "continue them (the context slides over the last --context tokens, the training\n"
               "length T by default) and prints prompt, continuation and the document's own\n"
               "continuation as text. Generation keeps a KV cache: each new token attends to the\n"
               "keys and values kept from the tokens before it; once the context is full and\n"
               "slides, each token recomputes the window. With the cache up to 8 samples decode\n"
               "together: each step reads the weights once for all of them, and gives each the\n"
               "logits it would have alone, to rounding. An encoding setting that rescales every\n"
               "position with the context's length (dynamic NTK past T, --ape-extend\n"
               "interpolate) cannot be cached: then every token recomputes the context, with one\n"
               "notice. The task and encoding groups below are evaluation-time options, as in\n"
               "'pelab help eval'.\n");
    pelab_args_help(f, g, n, NULL);
}

/* The model's output at example (or window) `index`, position p, is `x`, not a finite number. */
static int not_finite(const char *what, uint64_t index, int p, double x) {
    return pelab_fail(PELAB_ERR_RUNTIME, "%s %" PRIu64 ", position %d: the model's output is "
                      "not finite (%g): its weights or activations overflow, so there is nothing "
                      "to sample ('pelab eval' refuses it too)", what, index, p, pelab_printable(x));
}

static int show(struct pelab_run *run, enum pelab_split split, uint64_t first, int count) {
    const struct pelab_task *t = &run->task;
    int T = pelab_task_split_len(t, split);
    struct pelab_batch b;
    int rc = pelab_batch_alloc_for(&b, t, count, T);
    if (rc) return rc;
    t->ops->fill(t, split, first, &b);
    if ((rc = pelab_eval_positions(&run->model, t, &b, first))) { /* as the evaluation reads them */
        pelab_batch_free(&b);
        return rc;
    }
    run->model.training = 0;
    pelab_model_set_inputs(&run->model, b.inputs);
    pelab_model_forward_eval(&run->model, b.tokens, b.targets, b.pos, count, T);
    if (run->model.status) {
        pelab_batch_free(&b);
        return run->model.status;
    }
    const int32_t *preds = pelab_model_eval_pred(&run->model);          /* (count,T) */
    const pelab_real *probs = pelab_model_eval_pred_prob(&run->model);  /* (count,T) */
    /* Checked before anything is printed: a prediction from non-finite outputs is noise. */
    for (int i = 0; i < count; i++)
        for (int p = 0; p < T; p++) {
            size_t at = (size_t)i * T + (size_t)p;
            if (b.targets[at] >= 0 && !isfinite((double)probs[at])) {
                pelab_batch_free(&b);
                return not_finite("example", first + (uint64_t)i, p, (double)probs[at]);
            }
        }
    int right = 0, shown = 0;
    for (int i = 0; i < count; i++) {
        const int32_t *tok = b.tokens + (size_t)i * T, *tgt = b.targets + (size_t)i * T;
        int last = -1;
        for (int p = 0; p < T; p++)
            if (tgt[p] >= 0) last = p;
        if (last < 0) continue;
        printf("#%-6" PRIu64 " ", first + (uint64_t)i);
        for (int p = 0; p <= last; p++) fputs(t->ops->token_text(t, tok[p]), stdout);
        putchar('\n');
        for (int p = 0; p <= last; p++) { /* every answer position of the row */
            if (tgt[p] < 0) continue;
            const size_t at = (size_t)i * T + (size_t)p;
            int pred = preds[at];
            printf("        at %-3d predicted '%s' (p %.3f)  truth '%s'  %s\n", p,
                   t->ops->token_text(t, pred), (double)probs[at], t->ops->token_text(t, tgt[p]),
                   pred == tgt[p] ? "right" : "WRONG");
            right += pred == tgt[p];
            shown++;
        }
    }
    printf("%d of %d right\n", right, shown);
    pelab_batch_free(&b);
    return PELAB_OK;
}

/* Next token from a logits row (V,): the argmax at temperature 0, else a draw from
 * softmax(row / temperature) by inverse CDF in double; the padding id is never chosen. */
static int32_t pick(const pelab_real *row, int V, int32_t pad, double temperature,
                    struct pelab_rng *rng) {
    int best = pad == 0 ? 1 : 0;
    for (int v = 0; v < V; v++)
        if (v != pad && row[v] > row[best]) best = v;
    if (temperature <= 0) return best;
    double sum = 0, mx = row[best];
    for (int v = 0; v < V; v++)
        if (v != pad) sum += exp(((double)row[v] - mx) / temperature);
    double u = pelab_rng_uniform(rng) * sum, acc = 0;
    for (int v = 0; v < V; v++) {
        if (v == pad) continue;
        acc += exp(((double)row[v] - mx) / temperature);
        if (u < acc) return v;
    }
    return best; /* u within rounding of the total */
}

/* The text as it is into a file or pipe; on a terminal, control bytes (ESC, CR, ...; a model's
 * bytes may be any) as \xHH, so that they cannot move the cursor or change the terminal. */
static void put_text(const char *s, size_t n) {
    static int tty = -1;
    if (tty < 0) tty = isatty(STDOUT_FILENO);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (tty && ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)) printf("\\x%02x", c);
        else putchar(c);
    }
}

static int print_text(const struct pelab_task *t, const char *title, const int32_t *ids, size_t n) {
    struct pelab_bytes text = {0};
    int rc = t->ops->decode(t, ids, n, &text);
    if (!rc) {
        printf("--- %s (%zu tokens)\n", title, n);
        put_text(text.data, text.len);
        if (!text.len || text.data[text.len - 1] != '\n') putchar('\n');
    }
    pelab_bytes_free(&text);
    return rc;
}

/* How the next token's logits are formed: the last W tokens of the sequence as context, at
 * positions 0..W-1, by the KV cache (when not NULL) or by a forward pass over the context. */
struct context {
    int W;                       /* context length */
    struct pelab_kv_cache *cache;
    size_t start;                /* cache: the sequence's first token in the cache */
    int32_t *pos;                /* (W,) 0..W-1 */
};

/* The logits (V,) of the token after seq[0..n), n >= 1. */
static int next_logits(struct pelab_run *run, struct context *cx, const int32_t *seq, size_t n,
                       const pelab_real **logits) {
    const size_t W = (size_t)cx->W;
    if (!cx->cache) {
        int len = n < W ? (int)n : (int)W;
        pelab_model_forward(&run->model, seq + n - (size_t)len, NULL, cx->pos, 1, len);
        *logits = pelab_model_logits(&run->model) + (size_t)(len - 1) * run->model.cfg.vocab;
        return run->model.status;
    }
    size_t have = (size_t)pelab_kv_cache_length(cx->cache);
    if (n - cx->start > W) { /* the window slides: its tokens move to positions 0..W-1 */
        pelab_kv_cache_clear(cx->cache);
        cx->start = n - W;
        have = 0;
    }
    int rc = pelab_kv_cache_append(cx->cache, seq + cx->start + have, cx->pos + have,
                                   (int)(n - cx->start - have), NULL);
    *logits = pelab_kv_cache_logits(cx->cache);
    return rc;
}

/* One generated sample: the prompt from a window of the split and what follows it. */
struct sample {
    uint64_t index;         /* the window's */
    int32_t *window, *seq;  /* (have,) the window's tokens; (P + tokens,) prompt, then generated */
    size_t have, P, n;      /* the window's length, the prompt's, the sequence's so far */
    struct context cx;
    struct pelab_rng rng;   /* seeded hash(seed, i) for sample i */
};

/* Sample i's prompt: the first `prompt` tokens of window `index` (at most its inputs). */
static int sample_open(struct sample *sm, const struct pelab_task *t, enum pelab_split split,
                       uint64_t index, int prompt, int tokens, uint64_t seed, int i) {
    const int T = t->seq_len;
    struct pelab_batch b;
    int rc = pelab_batch_alloc(&b, 1, T);
    if (rc) return rc;
    t->ops->fill_windows(t, split, T, 0, index, &b);
    /* The window's tokens: the inputs up to the last scored position, then its target. */
    int last = 0;
    for (int p = 0; p < T; p++)
        if (b.targets[p] >= 0) last = p;
    /* the prompt is at most the window's inputs; `tokens` follow it, however long it is */
    sm->index = index;
    sm->have = (size_t)last + 2;
    sm->P = sm->n = (size_t)prompt < sm->have - 1 ? (size_t)prompt : sm->have - 1;
    sm->window = malloc(sm->have * sizeof *sm->window);
    sm->seq = malloc((sm->P + (size_t)tokens) * sizeof *sm->seq);
    if (sm->window && sm->seq) {
        memcpy(sm->window, b.tokens, (sm->have - 1) * sizeof *sm->window);
        sm->window[sm->have - 1] = b.targets[last];
        memcpy(sm->seq, sm->window, sm->P * sizeof *sm->seq);
        pelab_rng_seed(&sm->rng, pelab_hash64(seed ^ pelab_hash64((uint64_t)i)));
    } else {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    }
    pelab_batch_free(&b);
    return rc;
}

static int sample_print(const struct pelab_task *t, const struct sample *sm, enum pelab_split split,
                        int tokens, double temperature, uint64_t seed) {
    printf("%s window %" PRIu64 " (temperature %g, seed %" PRIu64 ")\n",
           pelab_split_name(split), sm->index, temperature, seed);
    int rc = print_text(t, "prompt", sm->seq, sm->P);
    if (!rc) rc = print_text(t, "model", sm->seq + sm->P, sm->n - sm->P);
    size_t truth = sm->have - sm->P < (size_t)tokens ? sm->have - sm->P : (size_t)tokens;
    if (!rc && truth) rc = print_text(t, "document", sm->window + sm->P, truth);
    putchar('\n');
    return rc;
}

/* Samples decoded together, at most: with the cache, one pass over the weights per step serves
 * them all (the bytes of the weights, generation's cost, shared); a group's caches live at once,
 * as many as pelab_kv_batch_fit allows. */
enum { GROUP = PELAB_KV_BATCH_MAX };

/* `tokens` new tokens for each of the k samples, in step: each step draws every sample's next
 * token from its logits, then forms the next logits — by the batch's one pass for every sample
 * whose window has room for the token, alone (the window slides and is recomputed) for the
 * others, and alone for each without a cache. */
static int decode(struct pelab_run *run, struct pelab_kv_batch *batch, struct sample *sm, int k,
                  int tokens, double temperature) {
    const struct pelab_task *t = &run->task;
    const int V = run->model.cfg.vocab;
    int32_t step[GROUP], pos[GROUP];
    int rc = PELAB_OK;
    run->model.training = 0;
    for (int i = 0; i < GROUP; i++) step[i] = -1; /* the first logits: each prompt alone */
    for (int i = 0; i < k; i++) {
        struct context *cx = &sm[i].cx;
        if (cx->cache) pelab_kv_cache_clear(cx->cache);
        cx->start = sm[i].P > (size_t)cx->W ? sm[i].P - (size_t)cx->W : 0;
    }
    for (int g = 0; g < tokens && !rc; g++) {
        if (g > 0 && batch) {
            for (int i = 0; i < k; i++) {
                const struct sample *s = &sm[i];
                const int slides = s->n - s->cx.start > (size_t)s->cx.W;
                step[i] = slides ? -1 : s->seq[s->n - 1];
                pos[i] = slides ? 0 : s->cx.pos[s->n - 1 - s->cx.start];
            }
            if ((rc = pelab_kv_batch_step(batch, step, pos))) break;
        }
        for (int i = 0; i < k && !rc; i++) {
            struct sample *s = &sm[i];
            const pelab_real *logits;
            if (batch && step[i] >= 0) logits = pelab_kv_cache_logits(s->cx.cache);
            else if ((rc = next_logits(run, &s->cx, s->seq, s->n, &logits))) break;
            for (int v = 0; v < V; v++)
                if (!isfinite((double)logits[v])) {
                    rc = not_finite("window", s->index, (int)s->n, (double)logits[v]);
                    break;
                }
            if (!rc) s->seq[s->n++] = pick(logits, V, t->pad, temperature, &s->rng);
        }
    }
    return rc;
}

static int generate(struct pelab_run *run, enum pelab_split split, uint64_t first, int count,
                    const struct pelab_opts *opts) {
    int prompt = (int)pelab_opt_int(opts, sample_options, "prompt");
    int tokens = (int)pelab_opt_int(opts, sample_options, "tokens");
    double temperature = pelab_opt_real(opts, sample_options, "temperature");
    uint64_t seed = (uint64_t)pelab_opt_real(opts, sample_options, "seed");
    if (run->model.cfg.random_positions)
        return pelab_fail(PELAB_ERR_USAGE, "generation is not supported for a model trained with "
                          "--random-positions (its positions depend on the whole sequence); 'pelab "
                          "sample' without --prompt shows its predictions on the split");
    int W = (int)pelab_opt_int(opts, sample_options, "context");
    if (!W) W = run->task.seq_len;
    /* the context never holds more than the prompt and what is generated */
    if ((long)W > (long)prompt + tokens) W = prompt + tokens;
    int32_t *pos = malloc((size_t)W * sizeof *pos);
    if (!pos) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (int p = 0; p < W; p++) pos[p] = p;
    int rc = PELAB_OK;
    if (strcmp(pelab_opt_str(opts, sample_options, "weights"), "bf16") == 0)
        rc = pelab_model_use_bf16_weights(&run->model);
    const char *cache = pelab_opt_str(opts, sample_options, "cache");
    const int kv16 = strcmp(cache, "bf16") == 0;
    const int group = pelab_kv_batch_fit(&run->model, W, kv16, count < GROUP ? count : GROUP);
    struct pelab_kv_batch *batch = NULL;
    if (!rc && strcmp(cache, "off") != 0) {
        rc = pelab_kv_batch_new(&batch, &run->model, group, W, kv16);
        if (rc == PELAB_ERR_USAGE) { /* this encoding's setting cannot be cached */
            fprintf(stderr, "notice: generating without the KV cache (every token recomputes the "
                    "context): %s\n", pelab_last_error());
            rc = PELAB_OK;
        }
    }
    if (!rc && !batch) rc = pelab_model_reserve(&run->model, 1, W);
    struct sample sm[GROUP];
    for (int i0 = 0; i0 < count && !rc; i0 += group) { /* samples i0 .. i0 + k − 1 */
        const int k = count - i0 < group ? count - i0 : group;
        memset(sm, 0, sizeof sm);
        for (int i = 0; i < k && !rc; i++) {
            rc = sample_open(&sm[i], &run->task, split, first + (uint64_t)(i0 + i), prompt, tokens, seed, i0 + i);
            sm[i].cx = (struct context){W, batch ? pelab_kv_batch_sequence(batch, i) : NULL, 0, pos};
        }
        if (!rc) rc = decode(run, batch, sm, k, tokens, temperature);
        for (int i = 0; i < k && !rc; i++) rc = sample_print(&run->task, &sm[i], split, tokens, temperature, seed);
        for (int i = 0; i < k; i++) {
            free(sm[i].window);
            free(sm[i].seq);
        }
    }
    pelab_kv_batch_free(batch);
    free(pos);
    return rc;
}

int pelab_cmd_sample(struct pelab_ctx *ctx, int argc, char **argv) {
    static struct pelab_opts opts, enc;
    int help = 0;
    int rc = pelab_args_run_command(ctx, argc, argv, sample_options, "sample", pelab_cmd_sample_help, &opts,
                                    &enc, &help);
    if (rc || help) return rc;
    const char *dir = pelab_opt_str(&opts, sample_options, "model");
    enum pelab_split split = pelab_args_split(&opts, sample_options);
    static struct pelab_run run;
    if ((rc = pelab_run_open_with(&run, dir, &enc))) return rc;
    pelab_model_set_ctx(&run.model, ctx);
    uint64_t first = (uint64_t)pelab_opt_real(&opts, sample_options, "first");
    int count = (int)pelab_opt_int(&opts, sample_options, "count");
    if ((rc = pelab_task_open_split(&run.task, split))) {
        pelab_run_close(&run);
        return rc;
    }
    if (split != PELAB_SPLIT_LONG || run.task.ops->decode) {
        /* Examples (windows of the training length) past the end would wrap to the beginning. */
        struct pelab_window_count c;
        uint64_t size = run.task.ops->decode
                            ? run.task.ops->windows(&run.task, split, run.task.seq_len, 0, &c)
                            : run.task.ops->split_size(&run.task, split);
        const char *unit = run.task.ops->decode ? "windows" : "examples";
        if (first >= size) {
            rc = pelab_fail(PELAB_ERR_USAGE, "--first %" PRIu64 ": the %s split has %" PRIu64
                            " %s (0 to %" PRIu64 ")", first, pelab_split_name(split), size,
                            unit, size ? size - 1 : 0);
            pelab_run_close(&run);
            return rc;
        }
        if ((uint64_t)count > size - first) count = (int)(size - first);
    }
    if (run.task.ops->decode) {
        rc = generate(&run, split, first, count, &opts);
    } else if (split == PELAB_SPLIT_LONG) {
        rc = pelab_fail(PELAB_ERR_USAGE, "--split long: task %s has no long documents (tasks of "
                        "documents: text, dna, music)", run.task.ops->name);
    } else {
        for (size_t i = 0; i < sizeof generation_options / sizeof *generation_options; i++)
            if (pelab_opts_get(&opts, generation_options[i])) {
                rc = pelab_fail(PELAB_ERR_USAGE, "--%s applies to the tasks of documents (text, "
                                "dna, music), not to task %s", generation_options[i],
                                run.task.ops->name);
                break;
            }
        if (!rc) rc = show(&run, split, first, count);
    }
    pelab_run_close(&run);
    return rc;
}
