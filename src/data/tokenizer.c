/* Tokenizer registry, token and byte buffers, FNV-1a. Each tokenizer is one table of function
 * pointers (see pelab/tokenizer.h) in src/data/tokenizers/<name>.c, listed once below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tokenizers/tokenizers.h"
#include "pelab/status.h"
#include "pelab/tokenizer.h"

static const struct pelab_tokenizer_ops *const tokenizers[] = {
    &pelab_tokenizer_byte,
    &pelab_tokenizer_gpt2,
    &pelab_tokenizer_dna,
    &pelab_tokenizer_jsb,
    NULL,
};

const struct pelab_tokenizer_ops *const *pelab_tokenizer_all(void) { return tokenizers; }

const struct pelab_tokenizer_ops *pelab_tokenizer_find(const char *name) {
    for (int i = 0; tokenizers[i]; i++)
        if (strcmp(tokenizers[i]->name, name) == 0) return tokenizers[i];
    return NULL;
}

int pelab_tokenizer_load(struct pelab_tokenizer *tk, const char *name, const char *vocab_dir) {
    memset(tk, 0, sizeof *tk);
    const struct pelab_tokenizer_ops *ops = pelab_tokenizer_find(name);
    if (!ops) {
        char known[128] = "";
        for (int i = 0; tokenizers[i]; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                     tokenizers[i]->name);
        return pelab_fail(PELAB_ERR_USAGE, "unknown tokenizer '%s' (known: %s)", name, known);
    }
    tk->ops = ops;
    int rc = ops->load(tk, vocab_dir);
    if (rc) memset(tk, 0, sizeof *tk); /* a failing load frees what it allocated */
    return rc;
}

void pelab_tokenizer_free(struct pelab_tokenizer *tk) {
    if (tk->ops && tk->ops->free) tk->ops->free(tk);
    memset(tk, 0, sizeof *tk);
}

uint64_t pelab_fnv64(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- buffers --------------------------------------------------------------------------------- */

int pelab_tokens_push(struct pelab_tokens *t, int32_t id) {
    if (t->len == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        int32_t *ids = cap > SIZE_MAX / sizeof *ids ? NULL : realloc(t->ids, cap * sizeof *ids);
        if (!ids) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %zu token ids", cap);
        t->ids = ids;
        t->cap = cap;
    }
    t->ids[t->len++] = id;
    return PELAB_OK;
}

void pelab_tokens_free(struct pelab_tokens *t) {
    free(t->ids);
    memset(t, 0, sizeof *t);
}

int pelab_bytes_append(struct pelab_bytes *b, const void *data, size_t n) {
    if (n > SIZE_MAX / 2 - b->len)
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %zu bytes of text", b->len + n);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %zu bytes of text", cap);
        b->data = d;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return PELAB_OK;
}

void pelab_bytes_free(struct pelab_bytes *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}
