/* compare's tuning grid (lab/compare_tune.h): its parsing, its runs, the choice of each entry's
 * point and what compare.json keeps of it. Nothing here trains: lab/compare_run.c trains the runs
 * planned here as it trains its own. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compare_tune.h"
#include "pelab/posenc.h"
#include "pelab/status.h"
#include "pelab/task.h"
#include "pelab/train.h"

#define SEED_MAX 9007199254740991.0 /* --seed's largest (src/train/options.c): a JSON number's */

/* The options a grid may tune: the optimiser's, which change what a run learns and nothing of how
 * it is placed, scheduled, evaluated or built. Their definitions (ranges) are the training
 * table's. Anything else is refused: evaluation-time options (no run trains on them), options
 * that place or schedule a run (--seed, --threads, --out, --jobs ...), the model's, the task's and
 * the encodings'. */
static const char *const TUNABLE[] = {"lr", "min-lr", "warmup", "decay-steps", "weight-decay",
                                      "beta1", "beta2", "eps", "clip", NULL};
#define TUNABLE_TEXT "lr, min-lr, warmup, decay-steps, weight-decay, beta1, beta2, eps, clip"

static int tunable(const char *key) {
    for (const char *const *k = TUNABLE; *k; k++)
        if (strcmp(*k, key) == 0) return 1;
    return 0;
}

/* The index of option k's value at point g. */
static int digit(const struct compare_tune *t, int g, int k) {
    for (int j = t->n_keys - 1; j > k; j--) g /= t->n_values[j];
    return g % t->n_values[k];
}

/* Option key=`item`'s values (after '=') into option k of t. */
static int parse_values(struct compare_tune *t, int k, const char *key, char *list) {
    const struct pelab_optdef *d = pelab_optdef_find(pelab_train_options, key);
    char *save;
    t->n_values[k] = 0;
    for (char *v = strtok_r(list, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
        if (t->n_values[k] == COMPARE_TUNE_VALUES)
            return pelab_fail(PELAB_ERR_USAGE, "--tune %s: at most %d values", key, COMPARE_TUNE_VALUES);
        if (strlen(v) >= COMPARE_TUNE_VALUE_MAX)
            return pelab_fail(PELAB_ERR_USAGE, "--tune %s: '%.40s...' is over %d characters", key, v,
                              COMPARE_TUNE_VALUE_MAX - 1);
        int rc = pelab_optdef_check(d, v);
        if (rc) return pelab_fail_context(rc, "--tune");
        const double x = strtod(v, NULL);
        for (int i = 0; i < t->n_values[k]; i++)
            if (t->numbers[k][i] == x)
                return pelab_fail(PELAB_ERR_USAGE, "--tune %s: %s and %s are one value", key, t->values[k][i], v);
        snprintf(t->values[k][t->n_values[k]], COMPARE_TUNE_VALUE_MAX, "%s", v);
        t->numbers[k][t->n_values[k]++] = x;
    }
    if (!t->n_values[k])
        return pelab_fail(PELAB_ERR_USAGE, "--tune %s: no values (give %s=V1,V2,...)", key, key);
    return PELAB_OK;
}

int compare_tune_parse(const char *spec, int seeds, uint64_t seed, const struct pelab_opts *shared,
                       struct compare_tune *t) {
    memset(t, 0, sizeof *t);
    char buf[PELAB_OPT_VAL_MAX];
    snprintf(buf, sizeof buf, "%s", spec);
    if (!buf[0] || buf[0] == ':' || buf[strlen(buf) - 1] == ':' || strstr(buf, "::") || strstr(buf, ",,") ||
        strstr(buf, "=,") || strstr(buf, ",:") || buf[strlen(buf) - 1] == ',')
        return pelab_fail(PELAB_ERR_USAGE, "--tune '%s': an empty entry (give OPTION=V1,V2,...[:OPTION=...], "
                          "e.g. lr=3e-4,1e-3,3e-3)", spec);
    char *save;
    long points = 1;
    for (char *item = strtok_r(buf, ":", &save); item; item = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(item, '=');
        if (!eq || eq == item)
            return pelab_fail(PELAB_ERR_USAGE, "--tune: '%s' is not OPTION=V1,V2,... (e.g. lr=3e-4,1e-3,3e-3)", item);
        *eq = '\0';
        const char *key = item;
        if (pelab_posenc_eval_option_owner(key) || pelab_task_eval_option_owner(key))
            return pelab_fail(PELAB_ERR_USAGE, "--tune: --%s is an evaluation-time option, which no run "
                              "trains on (tunable: " TUNABLE_TEXT ")", key);
        if (!tunable(key))
            return pelab_fail(PELAB_ERR_USAGE, "--tune: --%s cannot be tuned: a grid tunes the optimiser's "
                              "settings (" TUNABLE_TEXT "), not how a run is placed, scheduled or built", key);
        for (int k = 0; k < t->n_keys; k++)
            if (strcmp(t->keys[k], key) == 0)
                return pelab_fail(PELAB_ERR_USAGE, "--tune: %s is given twice", key);
        if (pelab_opts_get(shared, key))
            return pelab_fail(PELAB_ERR_USAGE, "--tune %s: --%s is given too (the grid gives its values)", key, key);
        if (t->n_keys == COMPARE_TUNE_KEYS)
            return pelab_fail(PELAB_ERR_USAGE, "--tune: at most %d options", COMPARE_TUNE_KEYS);
        const int k = t->n_keys++;
        snprintf(t->keys[k], sizeof t->keys[k], "%s", key);
        int rc = parse_values(t, k, key, eq + 1);
        if (rc) return rc;
        points *= t->n_values[k];
    }
    t->n_points = (int)points;
    t->seeds = seeds;
    t->seed0 = seed + COMPARE_TUNE_SEED_OFFSET;
    if ((double)t->seed0 + seeds - 1 > SEED_MAX)
        return pelab_fail(PELAB_ERR_USAGE, "--tune-seeds: the tuning seeds, from --seed + %d, pass %.0f",
                          COMPARE_TUNE_SEED_OFFSET, SEED_MAX);
    for (int p = 0; p < COMPARE_MAX_PES; p++) t->chosen[p] = -1;
    return PELAB_OK;
}

int compare_tune_point(const struct compare_tune *t, const struct compare_variant *v, int g,
                       struct compare_variant *out) {
    if (out != v) *out = *v;
    int rc = PELAB_OK;
    for (int k = 0; !rc && k < t->n_keys; k++) rc = compare_variant_add(out, t->keys[k], t->values[k][digit(t, g, k)]);
    return rc;
}

const char *compare_tune_value(const struct compare_tune *t, int g, int k) {
    return t->values[k][digit(t, g, k)];
}

void compare_tune_point_text(const struct compare_tune *t, int g, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < t->n_keys && n < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s=%s", k ? " " : "", t->keys[k], t->values[k][digit(t, g, k)]);
}

int compare_tune_runs(struct compare_tune *t, const struct compare_variant *variants, const char *const *pes,
                      int n_pes, const char *out, struct compare_result *runs, int max) {
    const long total = (long)n_pes * t->n_points * t->seeds;
    if (total > max)
        return pelab_fail(PELAB_ERR_USAGE, "--tune: %d entries x %d points x %d tuning seeds are %ld runs, at "
                          "most %d", n_pes, t->n_points, t->seeds, total, max);
    static struct compare_variant v;
    int n = 0;
    for (int p = 0; p < n_pes; p++)
        for (int g = 0; g < t->n_points; g++) {
            int rc = compare_tune_point(t, &variants[p], g, &v);
            if (rc) return rc;
            for (int s = 0; s < t->seeds; s++, n++) {
                struct compare_result *r = &runs[n];
                memset(r, 0, sizeof *r);
                snprintf(r->pe, sizeof r->pe, "%s", pes[p]);
                r->variant = p;
                r->point = g;
                r->seed = t->seed0 + (uint64_t)s;
                snprintf(r->dir, sizeof r->dir, "%s/tune/%s-s%" PRIu64, out, v.run_name, r->seed);
                r->shares = -1;
                for (int j = 0; j < n && r->shares < 0; j++)
                    if (strcmp(runs[j].dir, r->dir) == 0) r->shares = j;
            }
        }
    t->runs = runs;
    t->n_runs = n;
    return PELAB_OK;
}

/* Whether point g's values are below h's: the first option that differs decides. */
static int point_below(const struct compare_tune *t, int g, int h) {
    for (int k = 0; k < t->n_keys; k++) {
        const double a = t->numbers[k][digit(t, g, k)], b = t->numbers[k][digit(t, h, k)];
        if (a != b) return a < b;
    }
    return 0;
}

/* The mean validation loss of entry p's runs at point g (NaN when one diverged or has none). */
static double point_mean(const struct compare_tune *t, int p, int g) {
    double sum = 0;
    int m = 0;
    for (int i = 0; i < t->n_runs; i++) {
        const struct compare_result *r = &t->runs[i];
        if (r->variant != p || r->point != g) continue;
        if (r->diverged || !isfinite(r->val_loss)) return NAN;
        sum += r->val_loss;
        m++;
    }
    return m ? sum / m : NAN;
}

int compare_tune_choose(struct compare_tune *t, const char *const *pes, int n_pes) {
    for (int p = 0; p < n_pes; p++) {
        int best = -1;
        double best_mean = 0;
        for (int g = 0; g < t->n_points; g++) {
            const double m = point_mean(t, p, g);
            if (isnan(m)) continue;
            if (best < 0 || m < best_mean || (m == best_mean && point_below(t, g, best))) {
                best = g;
                best_mean = m;
            }
        }
        if (best < 0)
            return pelab_fail(PELAB_ERR_RUNTIME, "--tune: no point of the grid trained --pe %s to a finite "
                              "validation loss", pes[p]);
        t->chosen[p] = best;
    }
    return PELAB_OK;
}

int compare_tune_diverged(const char *error) {
    /* pelab_nan_handle (src/train/numerics.c) names the step and what "is not finite" when the
     * --on-nan policy stops a run */
    return strstr(error, " is not finite (") != NULL;
}

void compare_tune_json_head(struct pelab_sb *sb, const struct compare_tune *t) {
    pelab_sb_printf(sb, "\"tune\": {\"options\": [");
    for (int k = 0; k < t->n_keys; k++) {
        pelab_sb_printf(sb, "%s", k ? ", " : "");
        pelab_sb_json_string(sb, t->keys[k]);
    }
    pelab_sb_printf(sb, "], \"values\": {");
    for (int k = 0; k < t->n_keys; k++) {
        pelab_sb_printf(sb, "%s", k ? ", " : "");
        pelab_sb_json_string(sb, t->keys[k]);
        pelab_sb_printf(sb, ": [");
        for (int i = 0; i < t->n_values[k]; i++) {
            pelab_sb_printf(sb, "%s", i ? ", " : "");
            pelab_sb_json_number(sb, t->numbers[k][i]);
        }
        pelab_sb_printf(sb, "]");
    }
    pelab_sb_printf(sb, "}, \"seeds\": [");
    for (int s = 0; s < t->seeds; s++) pelab_sb_printf(sb, "%s%" PRIu64, s ? ", " : "", t->seed0 + (uint64_t)s);
    pelab_sb_printf(sb, "], \"metric\": \"val_loss\"}");
}

/* {"lr": 0.001, ...} of point g. */
static void json_point(struct pelab_sb *sb, const struct compare_tune *t, int g) {
    for (int k = 0; k < t->n_keys; k++) {
        pelab_sb_printf(sb, "%s", k ? ", " : "");
        pelab_sb_json_string(sb, t->keys[k]);
        pelab_sb_printf(sb, ": ");
        pelab_sb_json_number(sb, t->numbers[k][digit(t, g, k)]);
    }
}

void compare_tune_json_entry(struct pelab_sb *sb, const struct compare_tune *t, int p) {
    pelab_sb_printf(sb, "\"tune\": {\"grid\": [");
    for (int g = 0; g < t->n_points; g++) {
        pelab_sb_printf(sb, "%s\n      {", g ? "," : "");
        json_point(sb, t, g);
        const char *keys[2] = {"dirs", "val_loss"};
        int diverged = 0;
        for (int part = 0; part < 2; part++) {
            pelab_sb_printf(sb, ", \"%s\": [", keys[part]);
            int m = 0;
            for (int i = 0; i < t->n_runs; i++) {
                const struct compare_result *r = &t->runs[i];
                if (r->variant != p || r->point != g) continue;
                pelab_sb_printf(sb, "%s", m++ ? ", " : "");
                if (part == 0) pelab_sb_json_string(sb, r->dir);
                else pelab_sb_json_number(sb, r->diverged ? NAN : r->val_loss);
                diverged |= r->diverged;
            }
            pelab_sb_printf(sb, "]");
        }
        if (diverged) pelab_sb_printf(sb, ", \"diverged\": true");
        pelab_sb_printf(sb, ", \"val_loss_mean\": ");
        pelab_sb_json_number(sb, point_mean(t, p, g));
        pelab_sb_printf(sb, "}");
    }
    pelab_sb_printf(sb, "],\n     \"chosen\": {");
    json_point(sb, t, t->chosen[p]);
    pelab_sb_printf(sb, "}}");
}
