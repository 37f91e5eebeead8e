/* lab/lab.h — the lab's commands, the research harness above the library and its commands:
 * compare (lab/cmd_compare.c), analyze (lab/cmd_analyze.c) and plot (lab/cmd_plot.c). Each run
 * is given the process's context (cli/command.h) and returns an exit status; each help prints the
 * usage. They run in one process, and compare trains its runs in contexts of their own. */
#ifndef PELAB_LAB_H
#define PELAB_LAB_H

#include <stdio.h>

struct pelab_ctx;

int pelab_cmd_compare(struct pelab_ctx *ctx, int argc, char **argv);
void pelab_cmd_compare_help(FILE *f);
int pelab_cmd_analyze(struct pelab_ctx *ctx, int argc, char **argv);
void pelab_cmd_analyze_help(FILE *f);
int pelab_cmd_plot(struct pelab_ctx *ctx, int argc, char **argv);
void pelab_cmd_plot_help(FILE *f);

#endif
