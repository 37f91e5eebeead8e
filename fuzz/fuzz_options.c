/* Fuzz target: the command-line option parser. The input is split at NUL bytes into arguments
 * (as `pelab train` would get them) and goes through what pelab train does before any work:
 * parsing against every option group, the option checks, the training options, a preset. */
#include "fuzz.h"
#include "../cli/args.h"
#include "pelab/model.h"
#include "pelab/train.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static struct pelab_group g[PELAB_GROUPS_MAX];
    static int ng;
    if (!ng) ng = pelab_args_train_groups(g, "command", NULL);
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[MAX_ARGS];
    int argc = 0;
    for (size_t i = 0; i <= size && argc < MAX_ARGS; i += strlen(buf + i) + 1) argv[argc++] = buf + i;

    static struct pelab_opts o;
    static struct pelab_train_config c;
    int help;
    int rc = pelab_args_parse(argc, argv, g, ng, &o, &help);
    const char *task = pelab_opt_str(&o, pelab_train_options, "task");
    const char *pe = pelab_opt_str(&o, pelab_model_options, "pe");
    if (!rc) rc = pelab_train_check_opts(&o, task, &pe, 1, " (see 'pelab help train')");
    if (!rc) rc = pelab_train_config_read(&o, &c);
    const char *preset = pelab_opt_str(&o, pelab_train_options, "preset");
    if (!rc && preset[0]) {
        char name[PELAB_OPT_VAL_MAX];
        snprintf(name, sizeof name, "%s", preset);
        rc = pelab_preset_apply(&o, task, name, pe);
        if (!rc) rc = pelab_train_check_opts(&o, task, &pe, 1, NULL);
        if (!rc) rc = pelab_train_config_read(&o, &c);
    }
    if (rc) fuzz_check_refusal(rc, NULL);
    free(buf);
    return 0;
}
