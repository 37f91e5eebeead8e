/* The resolved settings of a run, grouped (training, model, encoding, task, derived), and their
 * two written forms: config.json and safetensors metadata. Reading config.json back is in
 * rundir.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/json.h"
#include "pelab/model.h"
#include "pelab/status.h"
#include "pelab/task.h"
#include "train/run.h"

const char *const pelab_group_names[PELAB_GROUPS] = {"training", "model", "encoding", "task",
                                                     "derived"};

static int is_number_type(const struct pelab_optdef *d) {
    return d && (d->type == PELAB_OPT_INT || d->type == PELAB_OPT_REAL);
}

/* A number is recorded in its canonical text (pelab/json.h), in config.json and in the weights'
 * metadata alike: "--lr 1e-3" and a resumed run's "0.001" from config.json write the same bytes. */
static void add(struct pelab_settings *s, int g, const char *key, const char *val, int number) {
    struct pelab_opts *o = &s->group[g];
    int i = o->count;
    char *end, canonical[32];
    const double x = strtod(val, &end);
    if (number && *val && *end == '\0' && isfinite(x)) {
        pelab_json_number_text(canonical, sizeof canonical, x);
        val = canonical;
    }
    PELAB_ASSERT(pelab_opts_set(o, key, val) == PELAB_OK); /* lengths were checked on input */
    if (o->count > i) s->number[g][i] = number;
}

/* Every option of `table`: the value given in opts, else the default. */
static void add_table(struct pelab_settings *s, int g, const struct pelab_optdef *table,
                      const struct pelab_opts *opts) {
    for (const struct pelab_optdef *d = table; d && d->name; d++) {
        const char *v = pelab_opts_get(opts, d->name);
        add(s, g, d->name, v ? v : d->def, is_number_type(d));
    }
}

void pelab_settings_build(struct pelab_settings *s, const struct pelab_opts *opts,
                          const struct pelab_model *m, const struct pelab_task *t) {
    memset(s, 0, sizeof *s);
    add_table(s, PELAB_GROUP_TRAINING, pelab_train_options, opts);
    /* The model reports its own and its encoding's settings, plus vocab and max-seq. */
    struct pelab_opts ms;
    memset(&ms, 0, sizeof ms);
    PELAB_ASSERT(pelab_model_settings(m, &ms) == PELAB_OK);
    const struct pelab_optdef *pe_table = m->pe.ops ? m->pe.ops->options : NULL;
    for (int i = 0; i < ms.count; i++) {
        const char *k = ms.kv[i].key, *v = ms.kv[i].val;
        const struct pelab_optdef *d;
        if ((d = pelab_optdef_find(pelab_model_options, k)))
            add(s, PELAB_GROUP_MODEL, k, v, is_number_type(d));
        else if ((d = pelab_optdef_find(pe_table, k)))
            add(s, PELAB_GROUP_ENCODING, k, v, is_number_type(d));
        else
            add(s, PELAB_GROUP_DERIVED, k, v, 1);
    }
    /* A fine-tuned run's evaluation-time options (--init-from with its encoding's fine-tune
     * options): recorded with the encoding, so that eval and sample use them unless told
     * otherwise. */
    const struct pelab_optdef *eval_table = m->pe.ops ? m->pe.ops->eval_options : NULL;
    for (const struct pelab_optdef *d = eval_table; d && d->name; d++) {
        const char *v = pelab_opts_get(opts, d->name);
        if (v) add(s, PELAB_GROUP_ENCODING, d->name, v, is_number_type(d));
    }
    add_table(s, PELAB_GROUP_TASK, t->ops->options, opts);
}

static void append_value(struct pelab_sb *sb, const char *val, int number) {
    char *end;
    double x = strtod(val, &end);
    if (number && *val && *end == '\0')
        pelab_sb_json_number(sb, x);
    else
        pelab_sb_json_string(sb, val);
}

void pelab_settings_json(const struct pelab_settings *s, struct pelab_sb *sb) {
    pelab_sb_printf(sb, "{\n  \"pelab-version\": ");
    pelab_sb_json_string(sb, PELAB_VERSION);
    for (int g = 0; g < PELAB_GROUPS; g++) {
        pelab_sb_printf(sb, ",\n  \"%s\": {", pelab_group_names[g]);
        const struct pelab_opts *o = &s->group[g];
        for (int i = 0; i < o->count; i++) {
            pelab_sb_printf(sb, "%s\n    ", i ? "," : "");
            pelab_sb_json_string(sb, o->kv[i].key);
            pelab_sb_printf(sb, ": ");
            append_value(sb, o->kv[i].val, s->number[g][i]);
        }
        pelab_sb_printf(sb, "%s}", o->count ? "\n  " : "");
    }
    pelab_sb_printf(sb, "\n}\n");
}

/* safetensors metadata values are strings; a whole config.json does not fit one metadata value
 * (PELAB_OPT_VAL_MAX), so each setting is its own entry. */
int pelab_settings_metadata(const struct pelab_settings *s, struct pelab_opts *meta) {
    for (int g = 0; g < PELAB_GROUPS; g++) {
        const struct pelab_opts *o = &s->group[g];
        for (int i = 0; i < o->count; i++) {
            char key[PELAB_OPT_KEY_MAX + 16];
            snprintf(key, sizeof key, "pelab.config.%s", o->kv[i].key);
            int rc = pelab_opts_set(meta, key, o->kv[i].val);
            if (rc) return rc;
        }
    }
    return PELAB_OK;
}

void pelab_path(char *buf, const char *dir, const char *name) {
    int n = snprintf(buf, PELAB_PATH_MAX, "%s/%s", dir, name);
    PELAB_ASSERT(n > 0 && n < PELAB_PATH_MAX);
}
