/* bible — the King James Bible from Debian's bible-kjv, one document per book (66), so the long
 * books stay whole. The fetch script exports the text with the package's own program,
 * `bible -f Gen1:1-Rev22:21` (one verse per line, "Ge1:1 In the beginning ..."), into
 * sources/bible/kjv.txt. A book's document is its verses in order, each line "chapter:verse text";
 * its id is the program's book abbreviation (Ge, Exo, ..., Psa, ..., Rev).
 */
#include <stdlib.h>
#include <string.h>
#include "data/datasets/datasets.h"
#include "pelab/status.h"

/* Splits "Ge1:1 text" into the book (letters after an optional leading digit) and the rest. */
static int parse_verse(const char *s, size_t n, size_t *book_len) {
    size_t i = 0;
    if (i < n && s[i] >= '1' && s[i] <= '3') i++;
    size_t letters = i;
    while (i < n && ((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z'))) i++;
    if (i == letters || i >= n || s[i] < '0' || s[i] > '9') return 0;
    *book_len = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i >= n || s[i] != ':') return 0;
    i++;
    size_t d = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    return i > d && i < n && s[i] == ' ';
}

static int bible_build(const char *src, struct pelab_docs *docs) {
    char *raw;
    size_t len;
    int rc = pelab_read_source(src, "kjv.txt", &raw, &len);
    if (rc) return rc;
    char book[16] = "", *text = NULL;
    size_t tlen = 0, books = 0;
    long lineno = 0;
    for (size_t i = 0; i < len && !rc;) {
        const char *nl = memchr(raw + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - raw) : len, bl;
        lineno++;
        const char *s = raw + i;
        size_t n = end - i;
        i = end + 1;
        if (n == 0) continue;
        if (!parse_verse(s, n, &bl) || bl >= sizeof book) {
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/kjv.txt: line %ld is not a verse "
                            "('Book1:1 text')", src, lineno);
            break;
        }
        if (strlen(book) != bl || memcmp(book, s, bl) != 0) { /* a new book */
            if (text) rc = pelab_docs_add(docs, book, text, tlen, -1), text = NULL;
            if (rc) break;
            memcpy(book, s, bl);
            book[bl] = '\0';
            text = malloc(len - (size_t)(s - raw) + 1); /* at most the rest of the file */
            tlen = 0;
            books++;
            if (!text) rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the book %s", book);
        }
        if (!rc) {
            memcpy(text + tlen, s + bl, n - bl);
            tlen += n - bl;
            text[tlen++] = '\n';
        }
    }
    if (!rc && text) rc = pelab_docs_add(docs, book, text, tlen, -1), text = NULL;
    free(text);
    free(raw);
    if (!rc && books == 0) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/kjv.txt: no verses", src);
    return rc;
}

static const char *const text_tokenizers[] = {"byte", "gpt2", NULL};

const struct pelab_dataset_ops pelab_dataset_bible = {
    .name = "bible",
    .kind = "text",
    .summary = "the King James Bible, one document per book (66)",
    .source = "deb bible-kjv (exported with its `bible` program)",
    .license = "public domain (outside the UK)",
    .tokenizers = text_tokenizers,
    .long_docs = 6,
    .heldout_pct = 15, /* 66 books: 5 % would leave val and test a book or two */
    .text_crc = 0xb45ba639, /* measured on the pinned package (Debian 12) */
    .build = bible_build,
};
