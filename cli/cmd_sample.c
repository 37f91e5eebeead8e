/* pelab sample: a few examples of a split, each with the model's prediction at every target
 * position and the truth. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "pelab/train.h"

static const struct pelab_optdef sample_options[] = {
    {"model", PELAB_OPT_STR, "", 0, 0, NULL, "run directory (required)"},
    {"split", PELAB_OPT_CHOICE, "test", 0, 0, "val|test|train", "split to draw examples from"},
    {"count", PELAB_OPT_INT, "5", 1, 1000, NULL, "examples to show"},
    {"first", PELAB_OPT_INT, "0", 0, 1e15, NULL, "index of the first example"},
    {"threads", PELAB_OPT_INT, "0", 0, 4096, NULL, "threads (0: all cores)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

void pelab_cmd_sample_help(FILE *f) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_eval_groups(g, "options", sample_options);
    fprintf(f, "usage: pelab sample --model DIR [--split test] [--count 5]\n\n"
               "Prints each example's input text, the model's prediction (with its probability)\n"
               "and the truth. The encoding groups below are evaluation-time options, as in\n"
               "'pelab help eval'.\n");
    pelab_args_help(f, g, n, NULL);
}

static int show(struct pelab_run *run, enum pelab_split split, uint64_t first, int count) {
    const struct pelab_task *t = &run->task;
    int T = t->seq_len;
    struct pelab_batch b;
    int rc = pelab_batch_alloc(&b, count, T);
    if (rc) return rc;
    t->ops->fill(t, split, first, &b);
    run->model.training = 0;
    pelab_model_forward_eval(&run->model, b.tokens, b.targets, b.pos, count, T);
    if (run->model.status) {
        pelab_batch_free(&b);
        return run->model.status;
    }
    const int32_t *preds = pelab_model_eval_pred(&run->model);          /* (count,T) */
    const pelab_real *probs = pelab_model_eval_pred_prob(&run->model);  /* (count,T) */
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
    static const enum pelab_split splits[] = {PELAB_SPLIT_VAL, PELAB_SPLIT_TEST, PELAB_SPLIT_TRAIN};
    enum pelab_split split = splits[pelab_opt_choice(&opts, sample_options, "split")];
    pelab_threads_set((int)pelab_opt_int(&opts, sample_options, "threads"));
    static struct pelab_run run;
    if ((rc = pelab_run_open_with(&run, dir, &enc))) return rc;
    rc = show(&run, split, (uint64_t)pelab_opt_real(&opts, sample_options, "first"),
              (int)pelab_opt_int(&opts, sample_options, "count"));
    pelab_run_close(&run);
    return rc;
}
