/* pelab train: a new run from options, or --resume DIR. */
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "pelab/model.h"
#include "pelab/status.h"
#include "pelab/train.h"

static const struct pelab_optdef train_cmd_options[] = {
    {"resume", PELAB_OPT_STR, "", 0, 0, NULL,
     "continue the run in this directory from its newest valid checkpoint, with its "
     "config.json (only --steps, --decay-steps, --threads, --keep, the --on-nan options and "
     "--precision may be given too; with --steps beyond the run's, the updates past the cosine "
     "schedule's end run at --min-lr unless --decay-steps re-plans it; --precision fp32 goes on "
     "in float32 with a bf16 run, on a machine without bf16 products)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

void pelab_cmd_train_help(FILE *f) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_train_groups(g, "command", train_cmd_options);
    fprintf(f, "usage: pelab train [--task T] [--pe P] [--preset NAME] [options]\n"
               "       pelab train --init-from RUN [--task T] [--seq-len N] [--rope-scaling pi|ntk|yarn\n"
               "                   --rope-scale S] [options]\n"
               "       pelab train --resume DIR [--steps N [--decay-steps M]] [--threads N] [--on-nan ...]\n\n"
               "Trains a model and keeps a run directory (--out): config.json, model.safetensors,\n"
               "checkpoints/, log.jsonl, summary.json (see docs/FORMATS.md). Options take\n"
               "'--name value' or '--name=value'; encoding and task options apply only to the\n"
               "chosen --pe and --task. A --preset fills the options not given. Options that\n"
               "change only how a model is evaluated (RoPE's --rope-scaling, --ape-extend) belong\n"
               "to eval and sample: see 'pelab help eval'. --init-from RUN fine-tunes a trained\n"
               "run: its weights, model and encoding settings, a fresh optimizer and schedule;\n"
               "there RoPE's --rope-scaling is accepted and recorded, so eval and sample use it.\n"
               "Under 'mpirun -np N' (a build with MPI) the ranks share every batch and train\n"
               "the model one process would; rank 0 writes the run (docs/DISTRIBUTED.md).\n");
    pelab_args_help(f, g, n, NULL);
}

int pelab_cmd_train(struct pelab_ctx *ctx, int argc, char **argv) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_train_groups(g, "command", train_cmd_options);
    static struct pelab_opts opts;
    int help;
    int rc = pelab_args_parse(argc, argv, g, n, &opts, &help);
    if (rc) return rc;
    if (help) {
        pelab_cmd_train_help(stdout);
        return PELAB_OK;
    }
    struct pelab_progress_printer pp;
    pelab_progress_printer_init(&pp, NULL);
    struct pelab_train_hooks hooks = {pelab_progress_print, &pp};

    const char *resume = pelab_opts_get(&opts, "resume");
    if (resume) {
        char dir[PELAB_OPT_VAL_MAX];
        snprintf(dir, sizeof dir, "%s", resume);
        if (!dir[0]) return pelab_fail(PELAB_ERR_USAGE, "--resume needs a run directory");
        pelab_opts_unset(&opts, "resume");
        rc = pelab_train_resume_in(ctx, dir, &opts, &hooks); /* checks which options may come along */
        pelab_progress_printer_end(&pp);
        return rc;
    }
    /* an empty path would silently mean "none": a fresh model, or the default directory */
    static const char *const paths[] = {"init-from", "out"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const char *v = pelab_opts_get(&opts, paths[i]);
        if (v && !v[0])
            return pelab_fail(PELAB_ERR_USAGE, "--%s '': an empty path (give a run directory, or "
                              "leave --%s out)", paths[i], paths[i]);
    }
    const char *task = pelab_opt_str(&opts, pelab_train_options, "task");
    const char *pe = pelab_opt_str(&opts, pelab_model_options, "pe");
    const char *init_from = pelab_opts_get(&opts, "init-from");
    /* With --init-from the task and encoding are the source's: pelab_train checks the options
     * once it has read them. */
    rc = init_from && init_from[0] ? PELAB_OK
                                   : pelab_train_check_opts(&opts, task, &pe, 1, " (see 'pelab help train')");
    if (rc) return rc;
    rc = pelab_train_in(ctx, &opts, &hooks);
    pelab_progress_printer_end(&pp);
    return rc;
}
