/* pelab eval: loss and accuracy of a run's model on a split (the whole split by default). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "pelab/json.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#include "pelab/train.h"

static const struct pelab_optdef eval_options[] = {
    {"model", PELAB_OPT_STR, "", 0, 0, NULL, "run directory to evaluate (required)"},
    {"split", PELAB_OPT_CHOICE, "test", 0, 0, "val|test|train", "split to evaluate"},
    {"examples", PELAB_OPT_INT, "0", 0, 1e15, NULL,
     "evaluate the first N examples of the split (0: all)"},
    {"batch", PELAB_OPT_INT, "64", 1, 65536, NULL, "examples per forward pass"},
    {"json", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "print one JSON object instead of a line"},
    {"threads", PELAB_OPT_INT, "0", 0, 4096, NULL, "threads (0: all cores)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

void pelab_cmd_eval_help(FILE *f) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_eval_groups(g, "options", eval_options);
    fprintf(f, "usage: pelab eval --model DIR [--split val|test] [--json] [--batch N]\n\n"
               "Loads DIR/config.json and DIR/model.safetensors and reports mean loss and\n"
               "accuracy over the target positions of the split. The encoding groups below are\n"
               "evaluation-time options: they apply to runs of that encoding (e.g. RoPE's length\n"
               "extension, --rope-scaling yarn --rope-scale 4) and change only this evaluation.\n");
    pelab_args_help(f, g, n, NULL);
}

static const char *const split_names[] = {"train", "val", "test"};

int pelab_cmd_eval(int argc, char **argv) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_eval_groups(g, "options", eval_options);
    static struct pelab_opts given, opts, enc;
    int help;
    int rc = pelab_args_parse(argc, argv, g, n, &given, &help);
    if (!rc) rc = pelab_args_split_eval(&given, eval_options, "eval", &opts, &enc);
    if (rc) return rc;
    if (help) {
        pelab_cmd_eval_help(stdout);
        return PELAB_OK;
    }
    const char *dir = pelab_opt_str(&opts, eval_options, "model");
    if (!dir[0]) return pelab_fail(PELAB_ERR_USAGE, "--model DIR is required (a run directory)");
    /* Choice index follows "val|test|train"; the task's split ids are train 0, val 1, test 2. */
    static const enum pelab_split splits[] = {PELAB_SPLIT_VAL, PELAB_SPLIT_TEST, PELAB_SPLIT_TRAIN};
    enum pelab_split split = splits[pelab_opt_choice(&opts, eval_options, "split")];
    int batch = (int)pelab_opt_int(&opts, eval_options, "batch");
    uint64_t examples = (uint64_t)pelab_opt_real(&opts, eval_options, "examples");
    pelab_threads_set((int)pelab_opt_int(&opts, eval_options, "threads"));

    static struct pelab_run run;
    if ((rc = pelab_run_open_with(&run, dir, &enc))) return rc;
    struct pelab_eval_result r;
    rc = pelab_evaluate(&run.model, &run.task, split, 0, examples, batch, &r);
    if (!rc) {
        if (pelab_opt_switch(&opts, eval_options, "json")) {
            struct pelab_sb sb = {0};
            pelab_sb_printf(&sb, "{\"model\": ");
            pelab_sb_json_string(&sb, dir);
            pelab_sb_printf(&sb, ", \"split\": \"%s\", \"step\": %" PRId64
                            ", \"examples\": %" PRIu64 ", \"targets\": %" PRIu64 ", \"loss\": ",
                            split_names[split], run.step, r.examples, r.targets);
            pelab_sb_json_number(&sb, r.loss);
            pelab_sb_printf(&sb, ", \"accuracy\": ");
            pelab_sb_json_number(&sb, r.acc);
            pelab_sb_printf(&sb, "}\n");
            fputs(sb.data, stdout);
            pelab_sb_free(&sb);
        } else {
            printf("%s: accuracy %.2f%% (%" PRIu64 "/%" PRIu64 ")  loss %.4f  [%s, step %" PRId64
                   ", %" PRIu64 " examples]\n",
                   split_names[split], 100 * r.acc, r.correct, r.targets, r.loss, dir, run.step,
                   r.examples);
        }
    }
    pelab_run_close(&run);
    return rc;
}
