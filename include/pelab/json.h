/* pelab/json.h — enough JSON for config.json, log.jsonl, summary.json and safetensors headers:
 * a strict parser to a small tree, and an appending string builder for writing.
 */
#ifndef PELAB_JSON_H
#define PELAB_JSON_H

#include <stddef.h>

enum pelab_json_type {
    PELAB_JSON_NULL, PELAB_JSON_BOOL, PELAB_JSON_NUMBER, PELAB_JSON_STRING,
    PELAB_JSON_ARRAY, PELAB_JSON_OBJECT
};

struct pelab_json {
    enum pelab_json_type type;
    int boolean;
    double number;
    char *string;               /* STRING: NUL-terminated, unescaped (may not contain NUL) */
    const char *raw;            /* NUMBER: pointer to its text inside the parsed buffer copy */
    size_t raw_len;
    int count;                  /* ARRAY / OBJECT: number of children */
    char **keys;                /* OBJECT: keys, in file order */
    struct pelab_json **items;  /* ARRAY / OBJECT: children, in file order */
};

/* Parses exactly one JSON value (whitespace around it allowed, nothing else). Strict: no trailing
 * commas, no comments, valid escapes and UTF-8 passed through, nesting depth at most 64, numbers
 * finite. On failure returns PELAB_ERR_RUNTIME with a message giving the byte offset and what was
 * expected; *out is NULL. */
int pelab_json_parse(const char *text, size_t len, struct pelab_json **out);
/* Reads the file at path (a regular file of at most PELAB_SMALL_FILE_MAX bytes: pelab/io.h) and
 * parses it whole; a fault of the text is reported as "PATH: <what pelab_json_parse says>". *out
 * is NULL on failure. */
int pelab_json_load(const char *path, struct pelab_json **out);
void pelab_json_free(struct pelab_json *j);
/* Member of an object by key (first match), or NULL (also when j is not an object). */
const struct pelab_json *pelab_json_get(const struct pelab_json *j, const char *key);

/* Growable string. All appends keep data NUL-terminated; an allocation failure aborts via
 * PELAB_ASSERT (out of memory while formatting text is not recoverable in any useful way). */
struct pelab_sb {
    char *data;
    size_t len, cap;
};
void pelab_sb_free(struct pelab_sb *sb);
void pelab_sb_printf(struct pelab_sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pelab_sb_append(struct pelab_sb *sb, const char *s, size_t n);
/* Appends s as a quoted, escaped JSON string. */
void pelab_sb_json_string(struct pelab_sb *sb, const char *s);
/* Appends s as one CSV cell (RFC 4180): as it is, or, when it is empty, holds a comma, a quote or
 * a line break, or begins with a UTF-8 byte order mark, quoted with its quotes doubled. */
void pelab_sb_csv_cell(struct pelab_sb *sb, const char *s);
/* Appends a number in its canonical text (pelab_json_number_text). */
void pelab_sb_json_number(struct pelab_sb *sb, double x);
/* The canonical text of a number, at most 32 bytes: integers below 2^53 exactly ("50257", "-0"),
 * others with the fewest of 15, 16 or 17 significant digits that read back to the same double
 * ("1e-3" and "0.001" both give "0.001"); non-finite values as "null". One number, one text: what a
 * run records of an option is the same whether it came from the command line or from config.json. */
void pelab_json_number_text(char *buf, size_t size, double x);

#endif
