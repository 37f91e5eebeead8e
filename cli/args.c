/* Flag parsing and option help, shared by every command. Values stay text until a module reads
 * them through its own table, so parsing knows nothing about types except on|off switches. */
#include <stdio.h>
#include <string.h>
#include "args.h"
#include "pelab/dist.h"
#include "pelab/precision.h"
#include "pelab/safetensors.h"
#include "pelab/model.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/task.h"
#include "pelab/threads.h"
#include "pelab/train.h"

int pelab_args_train_groups(struct pelab_group *g, const char *extra_title,
                            const struct pelab_optdef *extra) {
    int n = 0;
    if (extra) {
        snprintf(g[n].title, sizeof g[n].title, "%s", extra_title);
        g[n++].table = extra;
    }
    snprintf(g[n].title, sizeof g[n].title, "training");
    g[n++].table = pelab_train_options;
    snprintf(g[n].title, sizeof g[n].title, "model");
    g[n++].table = pelab_model_options;
    for (const struct pelab_task_ops *const *t = pelab_task_all(); *t && n < PELAB_GROUPS_MAX; t++)
        if ((*t)->options && (*t)->options->name) {
            snprintf(g[n].title, sizeof g[n].title, "task %s", (*t)->name);
            g[n++].table = (*t)->options;
        }
    for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p && n < PELAB_GROUPS_MAX;
         p++)
        if ((*p)->options && (*p)->options->name) {
            snprintf(g[n].title, sizeof g[n].title, "encoding %s", (*p)->name);
            g[n++].table = (*p)->options;
        }
    return n;
}

int pelab_args_eval_groups(struct pelab_group *g, const char *title,
                           const struct pelab_optdef *table) {
    int n = 0;
    snprintf(g[n].title, sizeof g[n].title, "%s", title);
    g[n++].table = table;
    for (const struct pelab_task_ops *const *t = pelab_task_all(); *t && n < PELAB_GROUPS_MAX; t++)
        if ((*t)->eval_options && (*t)->eval_options->name) {
            snprintf(g[n].title, sizeof g[n].title, "task %s (evaluation)", (*t)->name);
            g[n++].table = (*t)->eval_options;
        }
    for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p && n < PELAB_GROUPS_MAX;
         p++)
        if ((*p)->eval_options && (*p)->eval_options->name) {
            snprintf(g[n].title, sizeof g[n].title, "encoding %s (evaluation)", (*p)->name);
            g[n++].table = (*p)->eval_options;
        }
    return n;
}

int pelab_args_split_eval(const struct pelab_opts *opts, const struct pelab_optdef *table,
                          const char *command, struct pelab_opts *own, struct pelab_opts *enc) {
    memset(own, 0, sizeof *own);
    memset(enc, 0, sizeof *enc);
    for (int i = 0; i < opts->count; i++) {
        const char *key = opts->kv[i].key, *val = opts->kv[i].val;
        const struct pelab_posenc_ops *owner = pelab_posenc_eval_option_owner(key);
        const struct pelab_task_ops *task_owner = pelab_task_eval_option_owner(key);
        int rc;
        if (pelab_optdef_find(table, key))
            rc = pelab_opts_set(own, key, val);
        else if (owner)
            rc = pelab_optdef_check(pelab_optdef_find(owner->eval_options, key), val) ||
                 pelab_opts_set(enc, key, val) ? PELAB_ERR_USAGE : PELAB_OK;
        else if (task_owner)
            rc = pelab_optdef_check(pelab_optdef_find(task_owner->eval_options, key), val) ||
                 pelab_opts_set(enc, key, val) ? PELAB_ERR_USAGE : PELAB_OK;
        else
            rc = pelab_fail(PELAB_ERR_USAGE, "unknown option --%s (see 'pelab help %s')", key, command);
        if (rc) return rc;
    }
    return pelab_args_check_only(own, table, command);
}

static const struct pelab_optdef *find_in(const struct pelab_group *g, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        const struct pelab_optdef *d = pelab_optdef_find(g[i].table, name);
        if (d) return d;
    }
    return NULL;
}

int pelab_args_parse(int argc, char **argv, const struct pelab_group *groups, int n_groups,
                     struct pelab_opts *opts, int *help) {
    memset(opts, 0, sizeof *opts);
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            *help = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || !a[2])
            return pelab_fail(PELAB_ERR_USAGE, "unexpected argument '%s' (options are --name value)",
                              a);
        char name[PELAB_OPT_KEY_MAX];
        const char *val;
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        if (len >= sizeof name)
            return pelab_fail(PELAB_ERR_USAGE, "unknown option %.60s", a);
        memcpy(name, a + 2, len);
        name[len] = '\0';
        if (eq) {
            val = eq + 1;
        } else {
            const struct pelab_optdef *d = find_in(groups, n_groups, name);
            int is_switch = d && d->type == PELAB_OPT_SWITCH;
            /* A following "--x" is the next option, not a value ("--steps --lr 1" lacks one). */
            const char *next = i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 ? argv[i + 1]
                                                                                 : NULL;
            if (is_switch && !next) {
                val = "on"; /* a bare switch */
            } else {
                if (!next)
                    return pelab_fail(PELAB_ERR_USAGE, "--%s needs a value", name);
                val = argv[++i];
            }
        }
        int rc = pelab_opts_set(opts, name, val);
        if (rc) return rc;
    }
    return PELAB_OK;
}

int pelab_args_check_only(const struct pelab_opts *opts, const struct pelab_optdef *table,
                          const char *command) {
    for (int i = 0; i < opts->count; i++) {
        const struct pelab_optdef *d = pelab_optdef_find(table, opts->kv[i].key);
        if (!d)
            return pelab_fail(PELAB_ERR_USAGE, "unknown option --%s (see 'pelab help %s')",
                              opts->kv[i].key, command);
        int rc = pelab_optdef_check(d, opts->kv[i].val);
        if (rc) return rc;
    }
    return PELAB_OK;
}

static const char *type_word(const struct pelab_optdef *d) {
    switch (d->type) {
    case PELAB_OPT_INT: return "N";
    case PELAB_OPT_REAL: return "X";
    case PELAB_OPT_CHOICE: return d->choices;
    case PELAB_OPT_SWITCH: return "on|off";
    case PELAB_OPT_STR: return "TEXT";
    }
    return "?";
}

/* Whether `name` is an item of the comma-separated `list`. */
static int in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *s = list; s && *s;) {
        size_t len = strcspn(s, ",");
        if (len == n && strncmp(s, name, n) == 0) return 1;
        s += len;
        if (*s) s++;
    }
    return 0;
}

#define HELP_COL 32   /* where help text starts */
#define HELP_WIDTH 100 /* wrap help text before this column */

/* Prints `text` from column HELP_COL, wrapped at spaces; '\1' is a space that does not break
 * ("default: 64" stays on one line). */
static void print_wrapped(FILE *f, const char *text) {
    int col = HELP_COL;
    while (*text) {
        size_t w = strcspn(text, " ");
        if (col > HELP_COL && col + 1 + (int)w > HELP_WIDTH) {
            fprintf(f, "\n%*s", HELP_COL, "");
            col = HELP_COL;
        } else if (col > HELP_COL) {
            fputc(' ', f);
            col++;
        }
        for (size_t i = 0; i < w; i++) fputc(text[i] == '\1' ? ' ' : text[i], f);
        col += (int)w;
        text += w;
        while (*text == ' ') text++;
    }
    fputc('\n', f);
}

void pelab_args_help(FILE *f, const struct pelab_group *groups, int n_groups, const char *skip) {
    for (int g = 0; g < n_groups; g++) {
        fprintf(f, "\n%s:\n", groups[g].title);
        for (const struct pelab_optdef *d = groups[g].table; d->name; d++) {
            if (g > 0 && in_list(skip, d->name)) continue;
            char flag[128], text[1024];
            snprintf(flag, sizeof flag, "--%s %s", d->name, type_word(d));
            int n = snprintf(text, sizeof text, "%s (default:\1%s", d->help ? d->help : "",
                             d->def && d->def[0] ? d->def : "none");
            if (n > 0 && (size_t)n < sizeof text && (d->type == PELAB_OPT_INT || d->type == PELAB_OPT_REAL))
                n += snprintf(text + n, sizeof text - (size_t)n, "; range\1%.16g..%.16g", d->lo, d->hi);
            if (n > 0 && (size_t)n < sizeof text - 1) strcat(text, ")");
            if ((int)strlen(flag) + 2 >= HELP_COL)
                fprintf(f, "  %s\n%*s", flag, HELP_COL, "");
            else
                fprintf(f, "  %-*s", HELP_COL - 2, flag);
            print_wrapped(f, text);
        }
    }
}

int pelab_args_run_command(struct pelab_ctx *ctx, int argc, char **argv, const struct pelab_optdef *table,
                           const char *command, void (*help)(FILE *), struct pelab_opts *opts,
                           struct pelab_opts *enc, int *asked_help) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    const int n = pelab_args_eval_groups(g, "options", table);
    static struct pelab_opts given;
    int rc = pelab_args_parse(argc, argv, g, n, &given, asked_help);
    if (!rc) rc = pelab_args_split_eval(&given, table, command, opts, enc);
    if (rc) return rc;
    if (*asked_help) {
        help(stdout);
        return PELAB_OK;
    }
    if (!pelab_opt_str(opts, table, "model")[0])
        return pelab_fail(PELAB_ERR_USAGE, "--model DIR is required (a run directory)");
    pelab_threads_set(pelab_dist_threads((int)pelab_opt_int(opts, table, "threads")));
    if ((rc = pelab_precision_set(ctx, (enum pelab_precision)pelab_opt_choice(opts, table, "precision"))))
        return rc;
    pelab_bf16_advise(ctx);
    pelab_safetensors_accept_edited(pelab_opt_switch(opts, table, "edited"));
    return PELAB_OK;
}

enum pelab_split pelab_args_split(const struct pelab_opts *opts, const struct pelab_optdef *table) {
    /* the choice's index follows "val|test|train|long" */
    static const enum pelab_split splits[] = {PELAB_SPLIT_VAL, PELAB_SPLIT_TEST, PELAB_SPLIT_TRAIN,
                                              PELAB_SPLIT_LONG};
    return splits[pelab_opt_choice(opts, table, "split")];
}
