/* pelab sample: a few examples of a split, each with the model's prediction at every target
 * position and the truth (indirect); or, for the tasks of documents (text, dna, music), a prompt
 * from a window of the split continued by the model, greedily or at a temperature, seeded, shown
 * as text beside the document's own continuation. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
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
    {"threads", PELAB_OPT_INT, "0", 0, 4096, NULL, "threads (0: all cores)"},
    {"prompt", PELAB_OPT_INT, "64", 1, 1048576, NULL,
     "text, dna, music: prompt tokens, the beginning of each window"},
    {"tokens", PELAB_OPT_INT, "200", 1, 1000000, NULL,
     "text, dna, music: tokens the model generates after the prompt"},
    {"temperature", PELAB_OPT_REAL, "1", 0, 100, NULL,
     "text, dna, music: sampling temperature (0: greedy, the most likely token each time)"},
    {"seed", PELAB_OPT_INT, "1", 0, 9007199254740991.0, NULL,
     "text, dna, music: seed of the sampling (sample i draws from hash(seed, i))"},
    {"edited", PELAB_OPT_SWITCH, "off", 0, 0, NULL,
     "load a model.safetensors edited on purpose, its checksum keys removed (docs/FORMATS.md); "
     "every other check still applies"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* The options that only generation reads. */
static const char *const generation_options[] = {"prompt", "tokens", "temperature", "seed"};

void pelab_cmd_sample_help(FILE *f) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_eval_groups(g, "options", sample_options);
    fprintf(f, "usage: pelab sample --model DIR [--split test] [--count 5]\n"
               "       pelab sample --model DIR [--prompt 64] [--tokens 200] [--temperature 1]\n\n"
               "indirect: prints each example's input text, the model's prediction (with its\n"
               "probability) and the truth. image: each image's index in the split, the\n"
               "predicted class (with its probability) and the true one. text, dna, music:\n"
               "takes the first --prompt tokens of\n"
               "windows --first.. of the split, lets the model continue them (the context slides\n"
               "over the last T tokens) and prints prompt, continuation and the document's own\n"
               "continuation as text. The task and encoding groups below are evaluation-time\n"
               "options, as in 'pelab help eval'.\n");
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
    int T = t->seq_len;
    struct pelab_batch b;
    int rc = pelab_batch_alloc_for(&b, t, count, T);
    if (rc) return rc;
    t->ops->fill(t, split, first, &b);
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

static int print_text(const struct pelab_task *t, const char *title, const int32_t *ids, size_t n) {
    struct pelab_bytes text = {0};
    int rc = t->ops->decode(t, ids, n, &text);
    if (!rc) {
        printf("--- %s (%zu tokens)\n%s", title, n, text.len ? text.data : "");
        if (!text.len || text.data[text.len - 1] != '\n') putchar('\n');
    }
    pelab_bytes_free(&text);
    return rc;
}

/* Sample i: the prompt from window first+i of the split, `tokens` generated. */
static int generate_one(struct pelab_run *run, enum pelab_split split, uint64_t index, int prompt,
                        int tokens, double temperature, uint64_t seed, int i) {
    const struct pelab_task *t = &run->task;
    int T = t->seq_len, V = run->model.cfg.vocab, rc;
    struct pelab_batch b;
    if ((rc = pelab_batch_alloc(&b, 1, T))) return rc;
    t->ops->fill_windows(t, split, T, 0, index, &b);
    /* The window's tokens: the inputs up to the last scored position, then its target. */
    int last = 0;
    for (int p = 0; p < T; p++)
        if (b.targets[p] >= 0) last = p;
    size_t have = (size_t)last + 2, cap = (size_t)prompt + (size_t)tokens;
    int32_t *window = malloc(have * sizeof *window), *seq = malloc(cap * sizeof *seq);
    int32_t *pos = malloc((size_t)T * sizeof *pos);
    if (!window || !seq || !pos) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
        goto done;
    }
    memcpy(window, b.tokens, (have - 1) * sizeof *window);
    window[have - 1] = b.targets[last];
    size_t P = (size_t)prompt < have - 1 ? (size_t)prompt : have - 1, n = P;
    memcpy(seq, window, P * sizeof *seq);
    for (int p = 0; p < T; p++) pos[p] = p;
    struct pelab_rng rng;
    pelab_rng_seed(&rng, pelab_hash64(seed ^ pelab_hash64((uint64_t)i)));
    run->model.training = 0;
    while (n < cap) { /* the last T tokens as context, at positions 0.. */
        int len = n < (size_t)T ? (int)n : T;
        pelab_model_forward(&run->model, seq + n - (size_t)len, NULL, pos, 1, len);
        if ((rc = run->model.status)) goto done;
        const pelab_real *logits = pelab_model_logits(&run->model) + (size_t)(len - 1) * V;
        for (int v = 0; v < V; v++)
            if (!isfinite((double)logits[v])) {
                rc = not_finite("window", index, (int)n, (double)logits[v]);
                goto done;
            }
        seq[n++] = pick(logits, V, t->pad, temperature, &rng);
    }
    printf("%s window %" PRIu64 " (temperature %g, seed %" PRIu64 ")\n",
           pelab_split_name(split), index, temperature, seed);
    if (!rc) rc = print_text(t, "prompt", seq, P);
    if (!rc) rc = print_text(t, "model", seq + P, n - P);
    size_t truth = have - P < (size_t)tokens ? have - P : (size_t)tokens;
    if (!rc && truth) rc = print_text(t, "document", window + P, truth);
    putchar('\n');
done:
    free(window);
    free(seq);
    free(pos);
    pelab_batch_free(&b);
    return rc;
}

static int generate(struct pelab_run *run, enum pelab_split split, uint64_t first, int count,
                    const struct pelab_opts *opts) {
    int prompt = (int)pelab_opt_int(opts, sample_options, "prompt");
    int tokens = (int)pelab_opt_int(opts, sample_options, "tokens");
    double temperature = pelab_opt_real(opts, sample_options, "temperature");
    uint64_t seed = (uint64_t)pelab_opt_real(opts, sample_options, "seed");
    int rc = pelab_model_reserve(&run->model, 1, run->task.seq_len);
    for (int i = 0; i < count && !rc; i++)
        rc = generate_one(run, split, first + (uint64_t)i, prompt, tokens, temperature, seed, i);
    return rc;
}

int pelab_cmd_sample(int argc, char **argv) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_eval_groups(g, "options", sample_options);
    static struct pelab_opts given, opts, enc;
    int help;
    int rc = pelab_args_parse(argc, argv, g, n, &given, &help);
    if (!rc) rc = pelab_args_split_eval(&given, sample_options, "sample", &opts, &enc);
    if (rc) return rc;
    if (help) {
        pelab_cmd_sample_help(stdout);
        return PELAB_OK;
    }
    const char *dir = pelab_opt_str(&opts, sample_options, "model");
    if (!dir[0]) return pelab_fail(PELAB_ERR_USAGE, "--model DIR is required (a run directory)");
    static const enum pelab_split splits[] = {PELAB_SPLIT_VAL, PELAB_SPLIT_TEST, PELAB_SPLIT_TRAIN,
                                              PELAB_SPLIT_LONG};
    enum pelab_split split = splits[pelab_opt_choice(&opts, sample_options, "split")];
    pelab_threads_set((int)pelab_opt_int(&opts, sample_options, "threads"));
    pelab_safetensors_accept_edited(pelab_opt_switch(&opts, sample_options, "edited"));
    static struct pelab_run run;
    if ((rc = pelab_run_open_with(&run, dir, &enc))) return rc;
    uint64_t first = (uint64_t)pelab_opt_real(&opts, sample_options, "first");
    int count = (int)pelab_opt_int(&opts, sample_options, "count");
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
