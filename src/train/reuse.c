/* Whether a run directory may be reused as the run some options ask for
 * (pelab_train_check_run_settings, pelab/train.h): the settings they resolve to against the
 * run's config.json, both ways, apart from where the run lives and how it is carried out. */
#include <stdlib.h>
#include <string.h>
#include "pelab/io.h"
#include "pelab/status.h"
#include "train/run.h"

/* Settings that say where a run lives and how it is carried out, not what it trains: a run
 * made with others is still the run asked for. (--threads as in a resume, which takes it.) */
static int placement_setting(const char *key) {
    return strcmp(key, "out") == 0 || strcmp(key, "threads") == 0 || strcmp(key, "keep") == 0;
}

/* Whether a recorded value (config.json's) is the value asked: numbers by value ("1e-3" is
 * "0.001"), strings as text; another type never is. */
static int same_value(const struct pelab_json *recorded, const char *asked, int number) {
    if (recorded->type == PELAB_JSON_STRING) return !number && strcmp(recorded->string, asked) == 0;
    char *end;
    const double x = strtod(asked, &end);
    return recorded->type == PELAB_JSON_NUMBER && number && *asked && !*end && recorded->number == x;
}

/* Appends "--key recorded (asked: asked)" ("key recorded (now: value)" for a derived one) to the list of differences in sb, the first
 * MAX_SAID of them; n counts them all. unrecorded: what a run without the key was made with, or NULL. */
#define MAX_SAID 4
static void say_difference(struct pelab_sb *sb, int *n, int group, const char *key,
                           const struct pelab_json *recorded, const char *unrecorded, const char *asked) {
    if ((*n)++ >= MAX_SAID) return;
    const int derived = group == PELAB_GROUP_DERIVED; /* not an option: what the settings made */
    pelab_sb_printf(sb, "%s%s%s ", *n > 1 ? ", " : "", derived ? "" : "--", key);
    if (!recorded && unrecorded) {
        pelab_sb_printf(sb, "%s (a run from before the option; asked: %s)", unrecorded, asked);
        return;
    }
    if (!recorded)
        pelab_sb_printf(sb, "not recorded");
    else if (recorded->type == PELAB_JSON_NUMBER)
        pelab_sb_append(sb, recorded->raw, recorded->raw_len);
    else
        pelab_sb_printf(sb, "%s", recorded->type == PELAB_JSON_STRING ? recorded->string : "(not a value)");
    pelab_sb_printf(sb, " (%s: %s)", derived ? "now" : "asked", asked ? asked : "not given");
}

/* The settings s against the run's config.json j, group by group and both ways (the "derived"
 * group too: a fine-tune's source checkpoint, a vocabulary the data made), into diff; the
 * number of differences. */
static int count_differences(const struct pelab_settings *s, const struct pelab_json *j, struct pelab_sb *diff) {
    int n = 0;
    const char *pe = pelab_opts_get(&s->group[PELAB_GROUP_MODEL], "pe");
    const struct pelab_posenc_ops *pe_ops = pe ? pelab_posenc_find(pe) : NULL;
    for (int g = 0; g < PELAB_GROUPS; g++) {
        const struct pelab_json *o = pelab_json_get(j, pelab_group_names[g]);
        const struct pelab_opts *asked = &s->group[g];
        for (int i = 0; i < asked->count; i++) {
            const char *key = asked->kv[i].key;
            const struct pelab_json *v = o ? pelab_json_get(o, key) : NULL;
            if (placement_setting(key) || (v && same_value(v, asked->kv[i].val, s->number[g][i])))
                continue;
            /* an option of the encoding the run predates: made with the value its table gives */
            const char *unrecorded = v || g != PELAB_GROUP_ENCODING ? NULL : pelab_posenc_unrecorded(pe_ops, key);
            if (unrecorded && (strcmp(unrecorded, asked->kv[i].val) == 0 ||
                               (s->number[g][i] && strtod(unrecorded, NULL) == strtod(asked->kv[i].val, NULL))))
                continue;
            say_difference(diff, &n, g, key, v, unrecorded, asked->kv[i].val);
        }
        for (int i = 0; o && o->type == PELAB_JSON_OBJECT && i < o->count; i++)
            if (!pelab_opts_get(asked, o->keys[i]) && !placement_setting(o->keys[i]))
                say_difference(diff, &n, g, o->keys[i], o->items[i], NULL, NULL);
    }
    return n;
}

int pelab_train_check_run_settings(const struct pelab_opts *opts, const char *dir) {
    char path[PELAB_PATH_MAX];
    pelab_path(path, dir, "config.json");
    if (!pelab_file_exists(path)) return PELAB_OK; /* nothing there to reuse */
    struct pelab_ctx own; /* the settings a run would record, in one process */
    pelab_ctx_init(&own);
    struct pelab_trainer *tr = pelab_trainer_new(&own, NULL);
    struct pelab_json *j = NULL;
    struct pelab_sb diff = {0};
    int rc = tr ? pelab_json_load(path, &j) : pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    if (!rc && !pelab_json_get(j, "pelab-version"))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s is not a pelab config (no \"pelab-version\")", path);
    /* the settings this run would record, as it would record them */
    if (!rc) rc = pelab_trainer_prepare(tr, opts);
    if (!rc) rc = pelab_trainer_set_dir(tr, dir);
    if (!rc) rc = pelab_trainer_resolve_settings(tr);
    int n = rc ? 0 : count_differences(&tr->settings, j, &diff);
    if (n)
        rc = pelab_fail(PELAB_ERR_USAGE, "%s holds a run of other settings: %s%s; give another --out, "
                        "or remove the run to train it anew", dir, diff.data,
                        n > MAX_SAID ? " and more" : "");
    pelab_sb_free(&diff);
    pelab_json_free(j);
    if (tr) pelab_trainer_free(tr);
    return rc;
}
