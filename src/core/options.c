/* Options: text values checked and read through their declarations. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/options.h"
#include "pelab/status.h"

int pelab_opts_set(struct pelab_opts *o, const char *key, const char *val) {
    if (strlen(key) >= PELAB_OPT_KEY_MAX)
        return pelab_fail(PELAB_ERR_USAGE, "option name '%.60s…' is too long", key);
    if (strlen(val) >= PELAB_OPT_VAL_MAX)
        return pelab_fail(PELAB_ERR_USAGE, "--%s: value is longer than %d characters", key,
                          PELAB_OPT_VAL_MAX - 1);
    int i = 0;
    while (i < o->count && strcmp(o->kv[i].key, key) != 0) i++;
    if (i == o->count) {
        if (o->count == PELAB_OPTS_MAX)
            return pelab_fail(PELAB_ERR_USAGE, "too many options (at most %d)", PELAB_OPTS_MAX);
        o->count++;
        strcpy(o->kv[i].key, key);
    }
    strcpy(o->kv[i].val, val);
    return PELAB_OK;
}

const char *pelab_opts_get(const struct pelab_opts *o, const char *key) {
    if (!o) return NULL;
    for (int i = 0; i < o->count; i++)
        if (strcmp(o->kv[i].key, key) == 0) return o->kv[i].val;
    return NULL;
}

void pelab_opts_unset(struct pelab_opts *o, const char *key) {
    for (int i = 0; i < o->count; i++)
        if (strcmp(o->kv[i].key, key) == 0) {
            o->kv[i] = o->kv[--o->count];
            return;
        }
}

const struct pelab_optdef *pelab_optdef_find(const struct pelab_optdef *table, const char *name) {
    for (; table && table->name; table++)
        if (strcmp(table->name, name) == 0) return table;
    return NULL;
}

/* Index of `val` in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *val) {
    size_t n = strlen(val);
    int i = 0;
    for (const char *c = choices; *c; i++) {
        const char *end = strchr(c, '|');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        if (len == n && strncmp(c, val, n) == 0) return i;
        if (!end) break;
        c = end + 1;
    }
    return -1;
}

/* A decimal number as JSON and people write it: [+-] digits [. digits] [e [+-] digits]. strtod
 * alone would also take leading spaces, hexadecimal ("0x10") and "infinity". */
static int decimal_syntax(const char *s) {
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) digits++;
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (*p < '0' || *p > '9') return 0;
        while (*p >= '0' && *p <= '9') p++;
    }
    return *p == '\0';
}

static int parse_number(const char *s, double *x) {
    if (!decimal_syntax(s)) return 0;
    char *end;
    *x = strtod(s, &end); /* an overflow is infinite; an underflow, tiny or 0, is its value */
    return *end == '\0' && isfinite(*x);
}

int pelab_optdef_check(const struct pelab_optdef *d, const char *val) {
    double x;
    switch (d->type) {
    case PELAB_OPT_INT:
        if (!parse_number(val, &x) || x != floor(x))
            return pelab_fail(PELAB_ERR_USAGE, "--%s: '%s' is not an integer", d->name, val);
        if (x < d->lo || x > d->hi)
            return pelab_fail(PELAB_ERR_USAGE, "--%s: %s is out of range [%.16g, %.16g]", d->name,
                              val, d->lo, d->hi);
        return PELAB_OK;
    case PELAB_OPT_REAL:
        if (!parse_number(val, &x))
            return pelab_fail(PELAB_ERR_USAGE, "--%s: '%s' is not a number", d->name, val);
        if (x < d->lo || x > d->hi)
            return pelab_fail(PELAB_ERR_USAGE, "--%s: %s is out of range [%.16g, %.16g]", d->name,
                              val, d->lo, d->hi);
        return PELAB_OK;
    case PELAB_OPT_CHOICE:
        if (choice_index(d->choices, val) < 0)
            return pelab_fail(PELAB_ERR_USAGE, "--%s: '%s' is not one of %s", d->name, val,
                              d->choices);
        return PELAB_OK;
    case PELAB_OPT_SWITCH:
        if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0)
            return pelab_fail(PELAB_ERR_USAGE, "--%s: '%s' is not on|off", d->name, val);
        return PELAB_OK;
    case PELAB_OPT_STR:
        return PELAB_OK;
    }
    return pelab_fail(PELAB_ERR_USAGE, "--%s: unknown option type", d->name);
}

int pelab_opts_check(const struct pelab_opts *o, const struct pelab_optdef *table) {
    if (!o) return PELAB_OK;
    for (int i = 0; i < o->count; i++) {
        const struct pelab_optdef *d = pelab_optdef_find(table, o->kv[i].key);
        if (d) {
            int rc = pelab_optdef_check(d, o->kv[i].val);
            if (rc) return rc;
        }
    }
    return PELAB_OK;
}

static const char *value_of(const struct pelab_opts *o, const struct pelab_optdef *table,
                            const char *name, const struct pelab_optdef **def) {
    *def = pelab_optdef_find(table, name);
    PELAB_ASSERT(*def != NULL);
    const char *v = pelab_opts_get(o, name);
    return v ? v : (*def)->def;
}

long pelab_opt_int(const struct pelab_opts *o, const struct pelab_optdef *table, const char *name) {
    const struct pelab_optdef *d;
    const char *v = value_of(o, table, name, &d);
    PELAB_ASSERT(d->type == PELAB_OPT_INT);
    return (long)strtod(v, NULL);
}

double pelab_opt_real(const struct pelab_opts *o, const struct pelab_optdef *table, const char *name) {
    const struct pelab_optdef *d;
    const char *v = value_of(o, table, name, &d);
    PELAB_ASSERT(d->type == PELAB_OPT_REAL || d->type == PELAB_OPT_INT);
    return strtod(v, NULL);
}

const char *pelab_opt_str(const struct pelab_opts *o, const struct pelab_optdef *table, const char *name) {
    const struct pelab_optdef *d;
    return value_of(o, table, name, &d);
}

int pelab_opt_switch(const struct pelab_opts *o, const struct pelab_optdef *table, const char *name) {
    const struct pelab_optdef *d;
    const char *v = value_of(o, table, name, &d);
    PELAB_ASSERT(d->type == PELAB_OPT_SWITCH);
    return strcmp(v, "on") == 0;
}

int pelab_opt_choice(const struct pelab_opts *o, const struct pelab_optdef *table, const char *name) {
    const struct pelab_optdef *d;
    const char *v = value_of(o, table, name, &d);
    PELAB_ASSERT(d->type == PELAB_OPT_CHOICE);
    int i = choice_index(d->choices, v);
    PELAB_ASSERT(i >= 0);
    return i;
}

/* One item: a multiple of base ("2x", "1.5x", rounded) or an integer. 0, or -1 when neither. */
static int size_item(const char *item, int base, double *v) {
    const size_t len = strlen(item);
    char *end;
    errno = 0;
    if (len > 1 && (item[len - 1] == 'x' || item[len - 1] == 'X')) {
        const double k = strtod(item, &end);
        if (end != item + len - 1 || errno || !isfinite(k) || k <= 0) return -1;
        *v = floor(k * base + 0.5);
        return 0;
    }
    const long n = strtol(item, &end, 10);
    if (end == item || *end || errno) return -1;
    *v = (double)n;
    return 0;
}

int pelab_parse_sizes(const char *option, const char *spec, int base, int max, double *values,
                      char (*items)[PELAB_SIZE_ITEM_MAX], int *n, const char *bad_item,
                      const char *example) {
    *n = 0;
    for (const char *s = spec;;) {
        while (*s == ' ') s++;
        size_t len = strcspn(s, ",");
        while (len > 0 && s[len - 1] == ' ') len--;
        if (len == 0 || len >= PELAB_SIZE_ITEM_MAX)
            return pelab_fail(PELAB_ERR_USAGE, "--%s: '%.40s' is not a list like %s", option, spec, example);
        if (*n == max) return pelab_fail(PELAB_ERR_USAGE, "--%s: more than %d %s", option, max, option);
        memcpy(items[*n], s, len);
        items[*n][len] = '\0';
        if (size_item(items[*n], base, &values[*n]))
            return pelab_fail(PELAB_ERR_USAGE, "--%s: '%.40s' %s", option, items[*n], bad_item);
        (*n)++;
        s += strcspn(s, ",");
        if (!*s) return PELAB_OK;
        s++;
    }
}
