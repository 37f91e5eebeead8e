/* pelab/options.h — typed, self-describing options.
 *
 * Every setting (model, training, task, and each encoding's own) is declared once as a
 * pelab_optdef: name, type, default, range or choices, and help. The values a user gave live as
 * text in a pelab_opts list; command-line flags and config.json fill it the same way, and
 * resolving a module's settings reads it through that module's table, so defaults, validation,
 * `pelab help` and the resolved config.json all come from one declaration.
 */
#ifndef PELAB_OPTIONS_H
#define PELAB_OPTIONS_H

enum pelab_opt_type {
    PELAB_OPT_INT,    /* integer in [lo, hi] */
    PELAB_OPT_REAL,   /* number in [lo, hi] */
    PELAB_OPT_CHOICE, /* one of `choices`, "a|b|c" */
    PELAB_OPT_SWITCH, /* on|off */
    PELAB_OPT_STR     /* free text (paths, lists) */
};

struct pelab_optdef {
    const char *name; /* flag without dashes: "rope-base" */
    enum pelab_opt_type type;
    const char *def;  /* default as text; "" for none */
    double lo, hi;    /* INT / REAL range, inclusive */
    const char *choices;
    const char *help;
};
/* Tables end with an entry whose name is NULL. */

/* Entries of one list: every setting of a run fits, and so does a checkpoint's metadata, which
 * holds them all plus its own counters (a SeqPE run's state file on the indirect task: 97). */
#define PELAB_OPTS_MAX 128
#define PELAB_OPT_KEY_MAX 40
/* A value holds a compare's --pe list of several variants (an ablation's is 300-odd characters). */
#define PELAB_OPT_VAL_MAX 1024

struct pelab_opts {
    int count;
    struct {
        char key[PELAB_OPT_KEY_MAX];
        char val[PELAB_OPT_VAL_MAX];
    } kv[PELAB_OPTS_MAX];
};

/* A NULL `struct pelab_opts *` wherever one is read means "nothing given": all defaults. */

/* Sets or replaces key = val. PELAB_ERR_USAGE if too long or the list is full. */
int pelab_opts_set(struct pelab_opts *o, const char *key, const char *val);
/* The text given for key, or NULL. */
const char *pelab_opts_get(const struct pelab_opts *o, const char *key);
void pelab_opts_unset(struct pelab_opts *o, const char *key);

/* The definition called `name` in a table, or NULL. */
const struct pelab_optdef *pelab_optdef_find(const struct pelab_optdef *table, const char *name);
/* Checks `val` against a definition: PELAB_OK or PELAB_ERR_USAGE with a message such as
 * "--rope-base: '-1' is out of range [1, 1e+12]". */
int pelab_optdef_check(const struct pelab_optdef *d, const char *val);
/* Checks every key of `o` that `table` defines. */
int pelab_opts_check(const struct pelab_opts *o, const struct pelab_optdef *table);

/* Typed reads: the given value, else the table's default. The option must be in the table and
 * its value already checked (both are programmer errors otherwise). */
long pelab_opt_int(const struct pelab_opts *o, const struct pelab_optdef *table, const char *name);
double pelab_opt_real(const struct pelab_opts *o, const struct pelab_optdef *table, const char *name);
const char *pelab_opt_str(const struct pelab_opts *o, const struct pelab_optdef *table, const char *name);
int pelab_opt_switch(const struct pelab_opts *o, const struct pelab_optdef *table, const char *name);
/* For CHOICE: the index of the value within `choices`. */
int pelab_opt_choice(const struct pelab_opts *o, const struct pelab_optdef *table, const char *name);

/* Lists of sizes as --lengths and --resolutions take them: "1x,2x,512". Splits `spec` at commas
 * into at most `max` items (spaces around one trimmed; the option's name is also the items' noun:
 * "--lengths: more than 64 lengths") and reads each as a multiple of `base`
 * ("2x", "1.5x": rounded to the nearest integer) or a plain integer ("512") into values[i], and
 * the item's text into items[i]. PELAB_OK, or PELAB_ERR_USAGE with the message
 * "OPTION: ..." naming the list or the item at fault, and bad_item (the words after the item,
 * e.g. "is neither a multiple of the training length (2x, 1.5x) nor a token count (512)") and
 * example (e.g. "1x,2x,4x or 512,1024"). Range checks are the caller's. */
#define PELAB_SIZE_ITEM_MAX 32
int pelab_parse_sizes(const char *option, const char *spec, int base, int max, double *values,
                      char (*items)[PELAB_SIZE_ITEM_MAX], int *n, const char *bad_item,
                      const char *example);

#endif
