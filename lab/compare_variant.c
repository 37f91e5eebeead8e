/* The entries of compare's --pe (lab/compare.h): an encoding, or a variant of one with settings
 * of its own (NAME:option=value:...), its evaluation-time options, the name of its runs, and the
 * options of each of its runs. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "compare.h"
#include "pelab/posenc.h"
#include "pelab/rng.h"
#include "pelab/status.h"

/* src with every "{seed}" written as `seed`, into out (size bytes); PELAB_ERR_USAGE when it
 * does not fit. */
static int replace_seed(char *out, size_t size, const char *src, const char *seed) {
    size_t n = 0;
    while (*src) {
        const int at_seed = strncmp(src, "{seed}", 6) == 0;
        const size_t len = at_seed ? strlen(seed) : 1;
        if (n + len >= size)
            return pelab_fail(PELAB_ERR_USAGE, "--pe: a value with {seed} as %s is over %zu characters", seed,
                              size - 1);
        memcpy(out + n, at_seed ? seed : src, len);
        n += len;
        src += at_seed ? 6 : 1;
    }
    out[n] = '\0';
    return PELAB_OK;
}

/* Whether a value can stand in a directory name as it is: letters, digits, '.', '_' and '-'
 * (no '/', '+', ':', '=', '{', white space; so that the name is one directory that any file
 * system and shell takes, and splits back into its settings). */
static int plain_value(const char *val) {
    if (!*val) return 0;
    for (const char *c = val; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("._-", *c)) return 0;
    return 1;
}

/* The name of v's runs (their directories are NAME-s<seed>): NAME+option-value+... of the
 * settings in the order given, when every value is plain and the whole is at most
 * RUN_STEM_MAX characters. Otherwise, so that no two variants share a directory, the readable
 * stem (each character of a value that is not plain written as '_', at most RUN_STEM_MAX
 * characters) followed by '~' and 12 hexadecimal digits of a hash of the settings as given
 * (init-from=../pre/a_b and init-from=../pre/a/b: one stem, ..._pre_a_b, two hashes). A plain
 * name has no '~': it never equals a hashed one. */
#define RUN_STEM_MAX 200 /* with '~', the hash and "-s" and a seed's 16 digits: under NAME_MAX 255 */
static int run_name(struct compare_variant *v) {
    char stem[RUN_STEM_MAX * 2];
    size_t len = (size_t)snprintf(stem, sizeof stem, "%s", v->name);
    uint64_t h = 0;
    int plain = 1;
    for (int i = 0; i < v->set.count; i++) {
        const char *key = v->set.kv[i].key, *val = v->set.kv[i].val;
        plain = plain && plain_value(val);
        for (const char *c = key; *c; c++) h = pelab_hash64(h ^ (unsigned char)*c);
        h = pelab_hash64(h ^ '=');
        for (const char *c = val; *c; c++) h = pelab_hash64(h ^ (unsigned char)*c);
        h = pelab_hash64(h ^ ':');
        if (len < sizeof stem) len += (size_t)snprintf(stem + len, sizeof stem - len, "+%s-", key);
        for (const char *c = val; *c && len + 1 < sizeof stem; c++)
            stem[len++] = isalnum((unsigned char)*c) || strchr("._-", *c) ? *c : '_';
        stem[len < sizeof stem ? len : sizeof stem - 1] = '\0';
    }
    if (plain && strlen(stem) <= RUN_STEM_MAX) {
        snprintf(v->run_name, sizeof v->run_name, "%s", stem);
        return PELAB_OK;
    }
    stem[RUN_STEM_MAX] = '\0';
    snprintf(v->run_name, sizeof v->run_name, "%s~%012" PRIx64, stem, h >> 16);
    return PELAB_OK;
}

int compare_variant_add(struct compare_variant *v, const char *key, const char *val) {
    PELAB_ASSERT(!pelab_opts_get(&v->set, key));
    int rc = pelab_opts_set(&v->set, key, val);
    return rc ? rc : run_name(v);
}

int compare_variant_parse(const char *entry, struct compare_variant *v) {
    char buf[PELAB_OPT_VAL_MAX];
    snprintf(buf, sizeof buf, "%s", entry);
    memset(v, 0, sizeof *v);
    char *save, *part = strtok_r(buf, ":", &save);
    if (!part || strlen(part) >= sizeof v->name)
        return pelab_fail(PELAB_ERR_USAGE, "--pe: '%s' does not start with an encoding", entry);
    strcpy(v->name, part);
    const struct pelab_posenc_ops *ops = pelab_posenc_find(v->name);
    while ((part = strtok_r(NULL, ":", &save))) {
        char *eq = strchr(part, '=');
        if (!eq)
            return pelab_fail(PELAB_ERR_USAGE, "--pe %s: '%s' is not option=value", entry, part);
        *eq = '\0';
        if (!eq[1])
            return pelab_fail(PELAB_ERR_USAGE, "--pe %s: --%s has no value (option=value)", entry, part);
        if (pelab_opts_get(&v->set, part) || pelab_opts_get(&v->eval, part))
            return pelab_fail(PELAB_ERR_USAGE, "--pe %s: --%s is given twice", entry, part);
        /* model settings a variant may have: each encoding fine-tunes its own run; randomised
         * positions change what an encoding trains on, not the model */
        if (strcmp(part, "init-from") == 0 || strcmp(part, "random-positions") == 0) {
            int rc = pelab_opts_set(&v->set, part, eq + 1);
            if (rc) return rc;
            continue;
        }
        const struct pelab_optdef *d = ops ? pelab_optdef_find(ops->options, part) : NULL;
        const struct pelab_optdef *e = ops ? pelab_optdef_find(ops->eval_options, part) : NULL;
        if (ops && !d && !e)
            return pelab_fail(PELAB_ERR_USAGE, "--pe %s: --%s is not an option of --pe %s", entry,
                              part, v->name);
        int rc = d || e ? pelab_optdef_check(d ? d : e, eq + 1) : PELAB_OK;
        if (!rc) rc = pelab_opts_set(d || !ops ? &v->set : &v->eval, part, eq + 1);
        if (rc) return rc;
    }
    /* a fine-tune takes its encoding's fine-tune options (RoPE's length extension) as settings of
     * its training, as `pelab train --init-from` does: the run records them and evaluates with
     * them */
    if (pelab_opts_get(&v->set, "init-from")) {
        for (int i = 0; i < v->eval.count; i++) /* in the order given, for the run's name */
            if (pelab_posenc_fine_tune_option(v->eval.kv[i].key)) {
                int rc = pelab_opts_set(&v->set, v->eval.kv[i].key, v->eval.kv[i].val);
                if (rc) return rc;
            }
        for (int i = v->eval.count - 1; i >= 0; i--)
            if (pelab_posenc_fine_tune_option(v->eval.kv[i].key)) pelab_opts_unset(&v->eval, v->eval.kv[i].key);
    }
    return run_name(v);
}

int compare_variants_take_eval_opts(struct pelab_opts *opts, struct compare_variant *variants, int n_pes) {
    for (int i = opts->count - 1; i >= 0; i--) {
        char key[PELAB_OPT_KEY_MAX], val[PELAB_OPT_VAL_MAX];
        snprintf(key, sizeof key, "%s", opts->kv[i].key);
        snprintf(val, sizeof val, "%s", opts->kv[i].val);
        const struct pelab_posenc_ops *owner = pelab_posenc_eval_option_owner(key);
        if (!owner) continue;
        int rc = pelab_optdef_check(pelab_optdef_find(owner->eval_options, key), val), used = 0;
        for (int p = 0; !rc && p < n_pes; p++)
            if (strcmp(variants[p].name, owner->name) == 0) {
                used = 1;
                /* a variant's own setting stands; a fine-tune with its own method (the table's
                 * first option) takes none of the shared ones, so that two methods never mix */
                const int fine_tuned = pelab_posenc_fine_tune_option(key) &&
                                       pelab_opts_get(&variants[p].set, owner->eval_options->name);
                if (!pelab_opts_get(&variants[p].eval, key) && !pelab_opts_get(&variants[p].set, key) && !fine_tuned)
                    rc = pelab_opts_set(&variants[p].eval, key, val);
            }
        if (!rc && !used)
            rc = pelab_fail(PELAB_ERR_USAGE, "--%s applies to the runs of --pe %s, which --pe does "
                            "not list", key, owner->name);
        if (rc) return rc;
        pelab_opts_unset(opts, key);
    }
    return PELAB_OK;
}

int compare_variant_run_opts(const struct compare_variant *v, const struct pelab_opts *shared, uint64_t seed_value,
                             const char *dir, struct pelab_opts *o) {
    *o = *shared;
    const struct pelab_posenc_ops *mine = pelab_posenc_find(v->name);
    for (int i = o->count - 1; i >= 0; i--) {
        const char *k = o->kv[i].key;
        if (mine && pelab_optdef_find(mine->options, k)) continue;
        for (const struct pelab_posenc_ops *const *p = pelab_posenc_all(); *p; p++)
            if (pelab_optdef_find((*p)->options, k)) {
                pelab_opts_unset(o, k);
                break;
            }
    }
    char seed[32];
    snprintf(seed, sizeof seed, "%" PRIu64, seed_value);
    int rc = pelab_opts_set(o, "pe", v->name);
    for (int i = 0; !rc && i < v->set.count; i++) { /* {seed}: this run's seed (init-from=pre/rope-s{seed}) */
        char val[PELAB_OPT_VAL_MAX];
        rc = replace_seed(val, sizeof val, v->set.kv[i].val, seed);
        if (!rc) rc = pelab_opts_set(o, v->set.kv[i].key, val);
    }
    if (!rc) rc = pelab_opts_set(o, "seed", seed);
    if (!rc) rc = pelab_opts_set(o, "out", dir);
    return rc;
}
