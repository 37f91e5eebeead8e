/* pelab's dispatch (cli/command.h): the help topics, --version, and the command argv[1] names,
 * among the program's commands (lab/main.c lists them). On failure it prints the library's last
 * error as one line, "pelab: <message>". */
#include <stdio.h>
#include <string.h>
#include "command.h"
#include "pelab/dist.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/posenc.h"
#include "pelab/precision.h"
#include "pelab/status.h"
#include "pelab/task.h"
#include "pelab/threads.h"
#include "pelab/train.h"

static const struct pelab_command *find(const struct pelab_program *program, const char *name) {
    for (const struct pelab_command *c = program->commands; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

static void usage(FILE *f, const struct pelab_program *program) {
    fprintf(f, "pelab %s — decoder-only Transformers with pluggable positional encodings\n\n"
               "usage: pelab <command> [--option value ...]\n\ncommands:\n",
            PELAB_VERSION);
    for (const struct pelab_command *c = program->commands; c->name; c++)
        fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fprintf(f, "  %-10s %s\n", "help",
            "'pelab help <command>' lists every option with its default;\n"
            "             'pelab help encodings|tasks|presets' lists what can be plugged in");
    const int bf16 = pelab_precision_check(PELAB_PRECISION_BF16) == PELAB_OK;
    pelab_clear_error();
    fprintf(f, "\nbuild: %s (%s), %s, %s, %s\n", pelab_build_info(), pelab_blas_kernels(),
            !bf16                  ? "no bf16 (--precision bf16 needs oneDNN and AVX512-BF16)"
            : pelab_bf16_emulated() ? "bf16 (--precision bf16: oneDNN's emulation, PELAB_BF16_EMULATION=1)"
                                    : "bf16 (--precision bf16: oneDNN, AVX512-BF16)",
            program->figures() ? "cairo (PNG figures)" : "no cairo (no PNG figures)",
            pelab_dist_built() ? "MPI (mpirun -np N pelab train|eval)" : "no MPI (one process)");
}

/* Help topics beside the commands: what can be plugged in. */
static void help_encodings(FILE *f) {
    fprintf(f, "positional encodings (--pe NAME; their options: 'pelab help train'):\n");
    for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p; p++) {
        char sites[64];
        pelab_posenc_site_names((*p)->sites, sites, sizeof sites);
        char dims[16] = ""; /* the positions it serves: 1-D (sequences), 2-D (images) */
        for (int n = 1; n <= 2; n++)
            if (pelab_posenc_serves(*p, n))
                snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%d-D", dims[0] ? "," : "", n);
        fprintf(f, "  %-12s %-10s %-8s %s\n", (*p)->name, sites[0] ? sites : "-", dims, (*p)->summary);
    }
}

/* `help encodings --json`: each encoding's name and the name tables and figures print, in
 * registry order. lab/scripts/encodings.json is this output, committed, which lab/scripts/tables.py reads
 * (lab/tests/cli_tables.sh checks that the two agree). */
static void help_encodings_json(FILE *f) {
    struct pelab_sb sb = {0};
    pelab_sb_printf(&sb, "{\"encodings\": [");
    for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p; p++) {
        pelab_sb_printf(&sb, "%s\n  {\"name\": ", p == pelab_posenc_all() ? "" : ",");
        pelab_sb_json_string(&sb, (*p)->name);
        pelab_sb_printf(&sb, ", \"display\": ");
        pelab_sb_json_string(&sb, pelab_posenc_display(*p));
        pelab_sb_printf(&sb, "}");
    }
    pelab_sb_printf(&sb, "\n]}\n");
    fputs(sb.data, f);
    pelab_sb_free(&sb);
}

static void help_tasks(FILE *f) {
    fprintf(f, "tasks (--task NAME):\n");
    int width = 0; /* the longest name's, so that the summaries line up */
    for (const struct pelab_task_ops *const *t = pelab_task_all(); *t; t++)
        width = (int)strlen((*t)->name) > width ? (int)strlen((*t)->name) : width;
    for (const struct pelab_task_ops *const *t = pelab_task_all(); *t; t++)
        fprintf(f, "  %-*s %s\n", width, (*t)->name, (*t)->summary);
}

static void help_presets(FILE *f) {
    fprintf(f, "presets (--preset NAME; explicit options override):\n");
    int width = 0; /* the longest name: the summaries in one column */
    for (const struct pelab_preset *p = pelab_presets(); p->name; p++)
        if ((int)strlen(p->name) > width) width = (int)strlen(p->name);
    for (const struct pelab_preset *p = pelab_presets(); p->name; p++)
        fprintf(f, "  %-10s %-*s %s\n      %s\n", p->task, width, p->name, p->summary, p->settings);
}

static const struct {
    const char *name;
    void (*help)(FILE *f);
    void (*json)(FILE *f); /* with --json, or NULL */
} topics[] = {{"encodings", help_encodings, help_encodings_json}, {"tasks", help_tasks, NULL},
              {"presets", help_presets, NULL}};

static int fail(const struct pelab_ctx *ctx, int rc) {
    const char *msg = pelab_last_error();
    const struct pelab_dist *d = &ctx->dist;
    if (d->follower) return rc; /* another MPI rank says why */
    /* a usage error comes from the options, the same on every rank: rank 0 says it */
    if (d->rank > 0 && rc == PELAB_ERR_USAGE) return rc;
    if (d->rank > 0)
        fprintf(stderr, "pelab: rank %d: %s\n", d->rank, msg[0] ? msg : "failed");
    else
        fprintf(stderr, "pelab: %s\n", msg[0] ? msg : "failed");
    return rc;
}

static int run(struct pelab_ctx *ctx, int argc, char **argv, const struct pelab_program *program) {
    if (argc < 2) {
        usage(stderr, program);
        return PELAB_ERR_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        if (argc < 3) {
            usage(stdout, program);
            return PELAB_OK;
        }
        for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++)
            if (strcmp(argv[2], topics[i].name) == 0) {
                const int json = argc > 3 && strcmp(argv[3], "--json") == 0 && topics[i].json;
                if (argc > 3 + json)
                    return fail(ctx, pelab_fail(PELAB_ERR_USAGE, "help %s: unknown argument '%s'%s", argv[2],
                                           argv[3 + json], topics[i].json ? " (--json lists them as JSON)" : ""));
                (json ? topics[i].json : topics[i].help)(stdout);
                return PELAB_OK;
            }
        const struct pelab_command *c = find(program, argv[2]);
        if (!c)
            return fail(ctx, pelab_fail(PELAB_ERR_USAGE, "unknown command '%s' (see 'pelab help')",
                                        argv[2]));
        c->help(stdout);
        return PELAB_OK;
    }
    /* the kernels' settings, which they read only once they run */
    if (pelab_kernels_check_env()) return fail(ctx, PELAB_ERR_USAGE);
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        const int bf16 = pelab_precision_check(PELAB_PRECISION_BF16) == PELAB_OK; /* oneDNN and the CPU */
        pelab_clear_error();
        printf("pelab %s (commit %s, %s, %s, %s, %s)\n", PELAB_VERSION, pelab_commit(), pelab_build_info(),
               !bf16 ? "no bf16" : pelab_bf16_emulated() ? "bf16 emulated" : "bf16",
               pelab_dist_built() ? "MPI" : "no MPI", program->figures() ? "cairo" : "no cairo");
        printf("BLAS: %s\n", pelab_blas_kernels());
        printf("float32 products: %s\n", pelab_sgemm_kernels());
        if (bf16) printf("bf16 products: %s\n", pelab_bf16_kernels());
        return PELAB_OK;
    }
    const struct pelab_command *c = find(program, name);
    if (!c)
        return fail(ctx, pelab_fail(PELAB_ERR_USAGE, "unknown command '%s' (see 'pelab help')", name));
    /* every rank runs one command line: options that size the collectives must agree (a rank
     * with another --d-model would overrun the others' buffers in the first sum) */
    if (pelab_dist_same_words(&ctx->dist, argc - 1, argv + 1, "command line"))
        return fail(ctx, PELAB_ERR_USAGE);
    if (ctx->dist.size > 1 && strcmp(name, "train") != 0 && strcmp(name, "eval") != 0) {
        /* alike on every rank: rank 0 says it */
        int rc = pelab_dist_agree(&ctx->dist, pelab_fail(PELAB_ERR_USAGE, "pelab %s runs in one process: "
                                                         "under mpirun only train and eval share their "
                                                         "work across ranks", name));
        return fail(ctx, rc);
    }
    pelab_clear_error();
    pelab_eval_set_progress(pelab_eval_progress_print, NULL);
    int rc = c->run(ctx, argc - 2, argv + 2);
    return rc ? fail(ctx, rc) : PELAB_OK;
}

/* Under mpirun every rank runs the command (pelab/dist.h); rank 0 alone prints results. An error
 * that the ranks agreed on, or a usage error (the same options on every rank), ends each rank by
 * itself; any other error of one rank ends the whole job, so that no rank waits for it forever. */
int pelab_program_main(int argc, char **argv, const struct pelab_program *program) {
    pelab_blas_mend(argv); /* before MPI or any thread starts: it may run pelab again */
    struct pelab_ctx ctx; /* the process's: its MPI job, and the precision train, eval and sample set */
    pelab_ctx_init(&ctx);
    if (pelab_dist_init(&ctx.dist, &argc, &argv)) return fail(&ctx, PELAB_ERR_RUNTIME);
    pelab_atomic_remove_on_signals(); /* a killed command leaves no NAME.tmp.XXXXXX behind */
    if (ctx.dist.rank > 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "pelab: rank %d: cannot silence standard output\n", ctx.dist.rank);
        pelab_dist_abort(&ctx.dist, PELAB_ERR_RUNTIME);
    }
    int rc = run(&ctx, argc, argv, program);
    if (rc && ctx.dist.size > 1 && !ctx.dist.agreed && rc != PELAB_ERR_USAGE)
        pelab_dist_abort(&ctx.dist, rc);
    pelab_dist_finalize(&ctx.dist);
    return rc;
}
