/* cli/command.h — a command of the pelab binary, and the dispatch every binary's main hands its
 * commands to (cli/program.c). The library's commands are declared in cli/args.h; the binary's
 * table of every command, the lab's too, is lab/main.c's. */
#ifndef PELAB_CLI_COMMAND_H
#define PELAB_CLI_COMMAND_H

#include <stdio.h>

struct pelab_ctx;

/* One command: `pelab NAME ...` runs run(ctx, argc, argv) on the words after NAME in the
 * process's context and returns an exit status (0 ok, 1 runtime error, 2 usage error); `pelab
 * help NAME` prints help. train, eval and sample compute in ctx (its MPI job, the precision they
 * set); the others run in one process and train their runs in contexts of their own. */
struct pelab_command {
    const char *name;
    const char *summary;
    int (*run)(struct pelab_ctx *ctx, int argc, char **argv);
    void (*help)(FILE *f);
};

/* What a pelab binary is made of: its commands in the order `pelab help` lists them (the last a
 * row of NULLs), and whether it draws PNG figures (cairo), which `pelab help` and `pelab --version`
 * say. */
struct pelab_program {
    const struct pelab_command *commands;
    int (*figures)(void);
};

/* The whole of a main: MPI started and ended around the command, `pelab help` and its topics,
 * `pelab --version`, then the command argv[1] names. On failure the library's last error is
 * printed as one line, "pelab: <message>". Returns the exit status. */
int pelab_program_main(int argc, char **argv, const struct pelab_program *program);

#endif
