/* cli/command.h — a command of the pelab binary, and the dispatch every binary's main hands its
 * commands to (cli/program.c). The library's commands are declared in cli/args.h; the binary's
 * table of every command, the lab's too, is lab/main.c's. */
#ifndef PELAB_CLI_COMMAND_H
#define PELAB_CLI_COMMAND_H

#include <stdio.h>

/* One command: `pelab NAME ...` runs run(argc, argv) on the words after NAME and returns an exit
 * status (0 ok, 1 runtime error, 2 usage error); `pelab help NAME` prints help. */
struct pelab_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
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
