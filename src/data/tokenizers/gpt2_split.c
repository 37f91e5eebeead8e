/* GPT-2's pre-tokenizer regex as a hand-written matcher: each alternative of the pattern in
 * gpt2_split.h is tried in order at the start position, as a backtracking regex engine would. */
#include <string.h>
#include "data/tokenizers/gpt2_split.h"
#include "data/tokenizers/unicode.h"

/* Class and length of the code point at s[i]. */
static enum pelab_uclass class_at(const char *s, size_t n, size_t i, int *len) {
    uint32_t cp;
    *len = pelab_utf8_decode((const unsigned char *)s + i, n - i, &cp);
    return pelab_uclass(cp);
}

/* End of the run of code points of class `c` starting at i. */
static size_t run_of(const char *s, size_t n, size_t i, enum pelab_uclass c) {
    while (i < n) {
        int len;
        if (class_at(s, n, i, &len) != c) break;
        i += (size_t)len;
    }
    return i;
}

/* End of the run of [^\s\p{L}\p{N}] starting at i. */
static size_t run_of_other(const char *s, size_t n, size_t i) { return run_of(s, n, i, PELAB_UC_OTHER); }

/* 's 't 're 've 'm 'll 'd: the length of the contraction at s[i] == '\'', or 0. */
static size_t contraction(const char *s, size_t n, size_t i) {
    static const char *const suffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
        size_t len = strlen(suffixes[k]);
        if (i + 1 + len <= n && memcmp(s + i + 1, suffixes[k], len) == 0) return 1 + len;
    }
    return 0;
}

size_t pelab_gpt2_split(const char *s, size_t n, size_t i) {
    int len;
    enum pelab_uclass c = class_at(s, n, i, &len);
    if (s[i] == '\'') {
        size_t k = contraction(s, n, i);
        if (k) return i + k;
    }
    /* ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the optional space is tried first. */
    if (s[i] == ' ' && i + 1 < n) {
        int len2;
        enum pelab_uclass next = class_at(s, n, i + 1, &len2);
        if (next != PELAB_UC_SPACE) return next == PELAB_UC_OTHER ? run_of_other(s, n, i + 1)
                                                                  : run_of(s, n, i + 1, next);
    }
    if (c != PELAB_UC_SPACE) return c == PELAB_UC_OTHER ? run_of_other(s, n, i) : run_of(s, n, i, c);
    /* `\s+(?!\S)`: the whole run if it ends the text, else the run less its last code point
     * (which then starts the next match), if that leaves any; otherwise `\s+`, the whole run. */
    size_t end = i, last = i;
    while (end < n) {
        int l;
        if (class_at(s, n, end, &l) != PELAB_UC_SPACE) break;
        last = end;
        end += (size_t)l;
    }
    if (end == n || last == i) return end;
    return last;
}
