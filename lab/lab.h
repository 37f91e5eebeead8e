/* lab/lab.h — the lab's commands, the research harness above the library and its commands:
 * compare (lab/cmd_compare.c), analyze (lab/cmd_analyze.c) and plot (lab/cmd_plot.c). Each run
 * returns an exit status, each help prints the usage. */
#ifndef PELAB_LAB_H
#define PELAB_LAB_H

#include <stdio.h>

int pelab_cmd_compare(int argc, char **argv);
void pelab_cmd_compare_help(FILE *f);
int pelab_cmd_analyze(int argc, char **argv);
void pelab_cmd_analyze_help(FILE *f);
int pelab_cmd_plot(int argc, char **argv);
void pelab_cmd_plot_help(FILE *f);

#endif
