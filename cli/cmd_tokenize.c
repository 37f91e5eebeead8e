/* pelab tokenize: text to token ids, one per line, or (--decode) ids back to text.
 *
 *   pelab tokenize --tokenizer byte|gpt2|dna|jsb [FILE]        FILE or standard input
 *   pelab tokenize --tokenizer T --decode [FILE]                ids separated by white space
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "pelab/dataset.h"
#include "pelab/io.h"
#include "pelab/status.h"
#include "pelab/tokenizer.h"

static const struct pelab_optdef tokenize_options[] = {
    {"tokenizer", PELAB_OPT_CHOICE, "byte", 0, 0, "byte|gpt2|dna|jsb", "the tokenizer (docs/DATA.md gives each id layout)"},
    {"decode", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "read token ids and write the text they stand for"},
    {"vocab-dir", PELAB_OPT_STR, "", 0, 0, NULL,
     "gpt2: the directory with encoder.json and vocab.bpe; when not given, DATA_DIR/sources/gpt2, "
     "installed by 'pelab data install gpt2'"},
    PELAB_OPT_ROW_DATA_DIR,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

void pelab_cmd_tokenize_help(FILE *f) {
    struct pelab_group g = {"options", tokenize_options};
    fprintf(f, "usage: pelab tokenize [--tokenizer NAME] [--decode] [FILE]\n\n"
               "Prints the token ids of FILE (standard input if absent or '-'), one per line; with\n"
               "--decode, reads ids separated by white space and writes the text.\n\ntokenizers:\n");
    for (const struct pelab_tokenizer_ops *const *t = pelab_tokenizer_all(); *t; t++)
        fprintf(f, "  %-6s %s\n", (*t)->name, (*t)->summary);
    pelab_args_help(f, &g, 1, NULL);
}

/* Parses the ids of a --decode input. */
static int parse_ids(const char *what, const char *s, size_t n, struct pelab_tokens *out) {
    for (size_t i = 0; i < n;) {
        if (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
            i++;
            continue;
        }
        size_t start = i;
        long v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && v < 100000000) v = 10 * v + (s[i++] - '0');
        if (i == start || (i < n && s[i] != ' ' && s[i] != '\n' && s[i] != '\t' && s[i] != '\r')) {
            size_t end = start;
            while (end < n && end - start < 20 && s[end] != ' ' && s[end] != '\n') end++;
            return pelab_fail(PELAB_ERR_RUNTIME, "%s: byte %zu: '%.*s' is not a token id", what,
                              start, (int)(end - start), s + start);
        }
        int rc = pelab_tokens_push(out, (int32_t)v);
        if (rc) return rc;
    }
    return PELAB_OK;
}

static int run(const struct pelab_opts *opts, const char *file) {
    const char *name = pelab_opt_str(opts, tokenize_options, "tokenizer");
    const char *vocab_dir = pelab_opt_str(opts, tokenize_options, "vocab-dir");
    char def[PATH_MAX];
    if (!vocab_dir[0]) {
        snprintf(def, sizeof def, "%.4000s/sources/gpt2", pelab_data_dir(pelab_opt_str(opts, tokenize_options, "data-dir")));
        vocab_dir = def;
    }
    const char *what = file && strcmp(file, "-") != 0 ? file : "standard input";
    char *text;
    size_t size;
    int rc = pelab_read_file(file && strcmp(file, "-") != 0 ? file : "/dev/stdin", &text, &size);
    if (rc) return rc;
    struct pelab_tokenizer tk;
    if ((rc = pelab_tokenizer_load(&tk, name, vocab_dir))) {
        free(text);
        return rc;
    }
    struct pelab_tokens ids = {0};
    struct pelab_bytes out = {0};
    if (pelab_opt_switch(opts, tokenize_options, "decode")) {
        rc = parse_ids(what, text, size, &ids);
        if (!rc && (rc = tk.ops->decode(&tk, ids.ids, ids.len, &out)))
            rc = pelab_fail_context(rc, "%s", what);
        if (!rc && out.len) fwrite(out.data, 1, out.len, stdout);
    } else {
        rc = tk.ops->encode(&tk, text, size, what, &ids);
        for (size_t i = 0; !rc && i < ids.len; i++) printf("%d\n", (int)ids.ids[i]);
    }
    if (!rc && fflush(stdout) != 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "writing standard output failed");
    pelab_tokens_free(&ids);
    pelab_bytes_free(&out);
    pelab_tokenizer_free(&tk);
    free(text);
    return rc;
}

int pelab_cmd_tokenize(struct pelab_ctx *ctx, int argc, char **argv) {
    /* The one argument that is not an option (nor an option's value) is the file. */
    const char *file = NULL;
    char **opt_argv = malloc(((size_t)argc + 1) * sizeof *opt_argv);
    if (!opt_argv) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int n = 0, rc = PELAB_OK;
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) == 0 && a[2]) {
            opt_argv[n++] = argv[i];
            const struct pelab_optdef *d = pelab_optdef_find(tokenize_options, a + 2);
            int is_switch = d && d->type == PELAB_OPT_SWITCH;
            if (!strchr(a, '=') && strcmp(a, "--help") != 0 && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 &&
                (!is_switch || strcmp(argv[i + 1], "on") == 0 || strcmp(argv[i + 1], "off") == 0))
                opt_argv[n++] = argv[++i];
        } else if (strcmp(a, "-h") == 0) {
            opt_argv[n++] = argv[i];
        } else if (file) {
            rc = pelab_fail(PELAB_ERR_USAGE, "tokenize takes one file, not '%s' and '%s'", file, a);
        } else {
            file = a;
        }
    }
    struct pelab_group g = {"options", tokenize_options};
    static struct pelab_opts opts;
    int help = 0;
    if (!rc) rc = pelab_args_parse(n, opt_argv, &g, 1, &opts, &help);
    if (!rc) rc = pelab_args_check_only(&opts, tokenize_options, "tokenize");
    free(opt_argv);
    if (rc) return rc;
    if (help) {
        pelab_cmd_tokenize_help(stdout);
        return PELAB_OK;
    }
    return run(&opts, file);
}
