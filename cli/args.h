/* cli/args.h — command-line flags into a pelab_opts list, option help, and the commands. */
#ifndef PELAB_CLI_ARGS_H
#define PELAB_CLI_ARGS_H

#include <stdio.h>
#include "pelab/ctx.h"
#include "pelab/options.h"
#include "pelab/precision.h"
#include "pelab/threads.h"

/* A titled option table, as `pelab help <command>` shows it. */
struct pelab_group {
    char title[64];
    const struct pelab_optdef *table;
};
#define PELAB_GROUPS_MAX 64

/* Option rows that several commands' tables share (each table is a static array, so a shared row
 * is an initialiser; --threads and --precision: pelab/threads.h, pelab/precision.h). */
#define PELAB_OPT_ROW_EDITED                                                                      \
    {"edited", PELAB_OPT_SWITCH, "off", 0, 0, NULL,                                               \
     "load a model.safetensors edited on purpose, its checksum keys removed (docs/FORMATS.md); "  \
     "every other check still applies"}

/* Every group of the training options: training, model, one per task, one per encoding, after
 * `extra` (a command's own table, may be NULL, titled `extra_title`). Returns the count. */
int pelab_args_train_groups(struct pelab_group *g, const char *extra_title,
                            const struct pelab_optdef *extra);

/* eval and sample: the command's own table, then one group per task and per encoding with
 * evaluation-time options ("task dna (evaluation)", "encoding rope (evaluation)"). Returns the
 * count. */
int pelab_args_eval_groups(struct pelab_group *g, const char *title,
                           const struct pelab_optdef *table);

/* The start of eval and sample: argv parsed against the command's table and the evaluation-time
 * groups into opts (its own) and enc (the tasks' and encodings'); with --help, help(stdout) and
 * *help = 1; else --model required, and the threads (a machine's cores shared among its MPI
 * ranks), ctx's precision and --edited set from opts. */
int pelab_args_run_command(struct pelab_ctx *ctx, int argc, char **argv, const struct pelab_optdef *table,
                           const char *command, void (*help)(FILE *), struct pelab_opts *opts,
                           struct pelab_opts *enc, int *asked_help);
/* The --split choice "val|test|train|long" of table as the task's split. */
enum pelab_split pelab_args_split(const struct pelab_opts *opts, const struct pelab_optdef *table);

/* eval and sample: splits parsed options into the command's own (`own`, checked against
 * `table`) and the tasks' and encodings' evaluation-time options (`enc`, checked when the run is
 * opened, against the run's task and encoding). Anything else is an unknown option. */
int pelab_args_split_eval(const struct pelab_opts *opts, const struct pelab_optdef *table,
                          const char *command, struct pelab_opts *own, struct pelab_opts *enc);

/* Parses argv[0..argc-1]: "--name value", "--name=value", and a bare "--name" for an on|off
 * switch of `groups` (meaning on). Names are not checked here; values are kept as text.
 * PELAB_ERR_USAGE for a stray argument or a missing value. "-h"/"--help" sets *help. */
int pelab_args_parse(int argc, char **argv, const struct pelab_group *groups, int n_groups,
                     struct pelab_opts *opts, int *help);

/* Checks every key of opts against one table (a command that takes only its own options). */
int pelab_args_check_only(const struct pelab_opts *opts, const struct pelab_optdef *table,
                          const char *command);

/* Prints the groups: one line per option with its type, help, default and range or choices.
 * Options named in `skip` ("pe,seed"-style list, may be NULL) are left out of every group but
 * the first (the command's own, whose options of those names replace them). */
void pelab_args_help(FILE *f, const struct pelab_group *groups, int n_groups, const char *skip);

/* The library's commands (cli/cmd_<name>.c; the lab's: lab/lab.h): run returns an exit status,
 * help prints the usage. Each is given the process's context: train, eval and sample compute in
 * it (its MPI job; --precision sets its precision); data and tokenize need none. */
int pelab_cmd_train(struct pelab_ctx *ctx, int argc, char **argv);
void pelab_cmd_train_help(FILE *f);
int pelab_cmd_eval(struct pelab_ctx *ctx, int argc, char **argv);
void pelab_cmd_eval_help(FILE *f);
int pelab_cmd_sample(struct pelab_ctx *ctx, int argc, char **argv);
void pelab_cmd_sample_help(FILE *f);
int pelab_cmd_data(struct pelab_ctx *ctx, int argc, char **argv);
void pelab_cmd_data_help(FILE *f);
int pelab_cmd_tokenize(struct pelab_ctx *ctx, int argc, char **argv);
void pelab_cmd_tokenize_help(FILE *f);

#endif
