/* pelab compare: train every encoding × seed with otherwise identical settings, each in
 * OUT/<pe>-s<seed>/, and print the paper-style table (test accuracy and loss, mean ± std over
 * seeds; on tasks of documents test NLL and perplexity and perplexity at each --lengths entry; on
 * images accuracy at each --resolutions side; on the algorithmic tasks exact match over each
 * --buckets range of sizes: the sweeps of lab/compare_sweep.c). An entry of --pe may be a variant
 * of an encoding with settings of its own, NAME:option=value:... (lab/compare_variant.c), so one
 * command runs an ablation (seqpe:seqpe-alpha=0,seqpe). Finished runs (summary.json present) are
 * reused, unfinished ones resumed, so an interrupted comparison continues where it stopped: either
 * only when the run's config.json records the settings asked (pelab_train_check_run_settings).
 * With --tune, each entry first trains at every point of a grid of optimiser settings on seeds of
 * its own and then trains its seeds at the point of least validation loss (lab/compare_tune.c).
 *
 * Three steps (lab/compare_plan.h): the plan (lab/compare_plan.c: the runs the options ask for,
 * checked), the run (lab/compare_run.c: what is missing trained, --jobs at a time, and the
 * sweeps), the report (lab/compare_report.c: the table and compare.json). */
#include <stdio.h>
#include <stdlib.h>
#include "args.h"
#include "lab.h"
#include "compare_plan.h"
#include "pelab/status.h"
#include "pelab/train.h"

void pelab_cmd_compare_help(FILE *f) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_train_groups(g, "compare", compare_options);
    fprintf(f, "usage: pelab compare --task T --pe a,b,c [--seeds N] [--jobs N] [--preset P]\n"
               "                     [--tune OPTION=V1,V2,... [--tune-seeds N]]\n"
               "                     [--out DIR] [training, model, task and encoding options]\n\n"
               "Trains each encoding x seed in DIR/<pe>-s<seed>/ (default DIR runs/compare-<task>),\n"
               "evaluates test accuracy and loss, prints a Markdown table and writes\n"
               "DIR/compare.json. On tasks of documents (text, dna, music) the table has test\n"
               "NLL and perplexity, and perplexity at each --lengths entry on the long documents\n"
               "(each run's sweep is kept in its DIR/<pe>-s<seed>/sweep.json and reused; the\n"
               "means go to DIR/sweep.csv for 'pelab plot lines'). On task qa the columns are the\n"
               "answer-span perplexity and the exact match of a greedy generation at each length\n"
               "(RUN/qa_sweep.json; the SeqPE paper's Table II); --pe rope:init-from=R1,alibi:init-from=R2\n"
               "fine-tunes each encoding's own pre-trained run. On the algorithmic tasks (copy,\n"
               "reverse, ...) the columns are the test exact match over --buckets of instance\n"
               "sizes, inside and beyond the trained ones, first one row per run, then the\n"
               "mean and std over seeds (RUN/sizes.json; DIR/sizes.csv for 'pelab plot lines').\n"
               "A run DIR holds already is reused (finished) or continued (interrupted) only\n"
               "if its config.json records the settings asked (all but --out, --threads,\n"
               "--keep); otherwise compare stops before training, naming the settings that\n"
               "differ. A run another process is training (a second compare on the same --out)\n"
               "is waited for, with a line naming that process, then read if it finished the run\n"
               "or continued if it stopped. An encoding option applies to the runs of its\n"
               "encoding only; so does an encoding's evaluation-time option ('pelab help eval',\n"
               "e.g. --ape-extend interpolate), which applies to the sweeps of its runs (a\n"
               "variant may give one: learned:ape-extend=interpolate; entries that differ only in\n"
               "such options share their runs, each with its own sweep). With --jobs N > 1 the runs\n"
               "print a line when they start and end and one about every 30 s; the results equal\n"
               "--jobs 1 at the same threads per run.\n\n"
               "Over several seeds a cell whose runs split between solved (exact match or accuracy\n"
               ">= 90 %%) and not says \"k of n solved\"; on the algorithmic tasks an entry that fits\n"
               "its trained sizes (>= 90 %% exact match over them) in fewer than all its seeds is\n"
               "marked with a dagger and a line under the table. Then one line per two entries: the\n"
               "mean difference over the same seeds of the main metric (exact match over the trained\n"
               "sizes; test loss for documents and qa; else test accuracy) and its 95 %% confidence\n"
               "interval (Student t, n - 1 degrees of freedom), \"ahead\" only when the interval\n"
               "excludes 0, else \"level\". compare.json adds each mean's interval (*_ci95).\n\n"
               "--tune lr=3e-4,1e-3,3e-3 first trains each entry at every value (every point of\n"
               "the grid: lr=...:warmup=... tunes both) on --tune-seeds seeds from --seed + 1000,\n"
               "in DIR/tune/<pe>+lr-<v>-s<seed>/, and takes the point of least mean validation loss\n"
               "(the runs' summary.json val_loss, never the test split or a sweep; a tie goes to the\n"
               "smaller value; a point whose run stopped on a non-finite loss is never taken); its\n"
               "--seeds runs then train there, in DIR/<pe>+lr-<v>-s<seed>/. The table gains a column\n"
               "per tuned option, compare.json the grid and each choice. Options that place,\n"
               "schedule or evaluate a run, and the model's, are refused.\n");
    pelab_args_help(f, g, n, "pe,out");
}

int pelab_cmd_compare(struct pelab_ctx *ctx, int argc, char **argv) {
    static struct pelab_group g[PELAB_GROUPS_MAX];
    static struct pelab_opts opts;
    static struct compare_plan pl;
    const int ng = pelab_args_train_groups(g, "compare", compare_options);
    int help;
    int rc = pelab_args_parse(argc, argv, g, ng, &opts, &help);
    if (rc) return rc;
    if (help) {
        pelab_cmd_compare_help(stdout);
        return PELAB_OK;
    }
    if ((rc = pelab_opts_check(&opts, compare_options))) return rc;
    if ((rc = compare_plan_make(&opts, &pl))) return rc;
    rc = compare_run(&pl);
    if (!rc)
        rc = compare_report(pl.out, pl.task, pl.preset, pl.rs, pl.n, pl.pes, pl.n_pes, pl.tops && pl.tops->windows,
                            &pl.sweep, pl.tuning ? &pl.tune : NULL);
    for (int i = 0; i < pl.n; i++) free(pl.rs[i].size_em);
    if (rc) return rc;
    int runs = 0, tuned = 0;
    for (int i = 0; i < pl.n; i++) runs += pl.rs[i].shares < 0;
    for (int i = 0; i < pl.n_tuning; i++) tuned += pl.tuning_runs[i].shares < 0;
    if (tuned)
        printf("\n%d runs in %s and %d tuning runs in %s/tune; results in %s/compare.json\n", runs, pl.out, tuned,
               pl.out, pl.out);
    else
        printf("\n%d runs in %s; results in %s/compare.json\n", runs, pl.out, pl.out);
    return PELAB_OK;
}
