/* A strict JSON parser (RFC 8259) to a small tree, and an appending string builder.
 *
 * The tree's root node and a NUL-terminated copy of the text are one allocation, so number nodes
 * can point at their own digits (raw, raw_len) and callers re-read 64-bit integers exactly with
 * strtoll; freeing the root frees the copy. Errors read "JSON: at byte N: expected X", N counted
 * from the start of the text. Nesting is at most JSON_MAX_DEPTH, so the recursion is bounded.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/status.h"

#define JSON_MAX_DEPTH 64

struct parser {
    char *s; /* the tree's copy of the text, NUL at s[len] */
    size_t len, pos;
    int depth;
};

/* The root node followed by the text it was parsed from. */
struct json_root {
    struct pelab_json node; /* first, so &root->node is the malloc'ed pointer */
    char text[];
};

static int fail_at(size_t pos, const char *expected) {
    return pelab_fail(PELAB_ERR_RUNTIME, "JSON: at byte %zu: expected %s", pos, expected);
}

static int fail_oom(void) { return pelab_fail(PELAB_ERR_RUNTIME, "JSON: out of memory"); }

static void skip_ws(struct parser *ps) {
    while (ps->pos < ps->len) {
        char c = ps->s[ps->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        ps->pos++;
    }
}

/* ---- the tree -------------------------------------------------------------------------------- */

/* Frees everything a node owns, not the node itself. */
static void free_contents(struct pelab_json *j) {
    free(j->string);
    for (int i = 0; i < j->count; i++) {
        if (j->keys) free(j->keys[i]);
        pelab_json_free(j->items[i]);
    }
    free(j->keys);
    free(j->items);
}

void pelab_json_free(struct pelab_json *j) {
    if (!j) return;
    free_contents(j);
    free(j); /* for the root this also frees the text copy */
}

const struct pelab_json *pelab_json_get(const struct pelab_json *j, const char *key) {
    if (!j || j->type != PELAB_JSON_OBJECT) return NULL;
    for (int i = 0; i < j->count; i++)
        if (strcmp(j->keys[i], key) == 0) return j->items[i];
    return NULL;
}

/* Appends a child (and, for objects, its key), taking ownership of both only on success.
 * Capacity is implicit: arrays grow to 4, then double whenever count reaches a power of two. */
static int push_child(struct pelab_json *parent, char *key, struct pelab_json *child) {
    int n = parent->count;
    if (n == INT32_MAX) return fail_oom();
    if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
        size_t cap = n == 0 ? 4 : 2 * (size_t)n;
        struct pelab_json **items = realloc(parent->items, cap * sizeof *items);
        if (!items) return fail_oom();
        parent->items = items;
        if (parent->type == PELAB_JSON_OBJECT) {
            char **keys = realloc(parent->keys, cap * sizeof *keys);
            if (!keys) return fail_oom();
            parent->keys = keys;
        }
    }
    parent->items[n] = child;
    if (parent->type == PELAB_JSON_OBJECT) parent->keys[n] = key;
    parent->count = n + 1;
    return PELAB_OK;
}

/* ---- strings --------------------------------------------------------------------------------- */

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 1;
}

/* Writes code point cp (< 0x110000) as UTF-8; returns the byte count. Lone surrogates come out
 * as their 3-byte form (as WTF-8 does) rather than being refused. */
static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the \uXXXX escape at ps->pos (at the backslash), joining a surrogate pair that follows
 * it; advances past it and writes UTF-8 to out. */
static int unicode_escape(struct parser *ps, char *out, size_t *n) {
    unsigned cp, lo;
    if (ps->len - ps->pos < 6 || !hex4(ps->s + ps->pos + 2, &cp))
        return fail_at(ps->pos, "4 hex digits after \\u");
    if (cp == 0)
        return fail_at(ps->pos, "a character other than \\u0000 (strings cannot hold NUL)");
    ps->pos += 6;
    const char *next = ps->s + ps->pos;
    if (cp >= 0xD800 && cp < 0xDC00 && ps->len - ps->pos >= 6 && next[0] == '\\' &&
        next[1] == 'u' && hex4(next + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        ps->pos += 6;
    }
    *n = put_utf8(out, cp);
    return PELAB_OK;
}

/* Decodes the escape at ps->pos (the backslash); appends to out[*n]. */
static int escape(struct parser *ps, char *out, size_t *n) {
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    char c = ps->pos + 1 < ps->len ? ps->s[ps->pos + 1] : '\0';
    if (c == 'u') {
        size_t k = 0;
        int rc = unicode_escape(ps, out + *n, &k);
        *n += k;
        return rc;
    }
    const char *hit = c ? strchr(from, c) : NULL;
    if (!hit) return fail_at(ps->pos, "an escape: \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX");
    out[(*n)++] = to[hit - from];
    ps->pos += 2;
    return PELAB_OK;
}

/* Length of the valid UTF-8 sequence at p (at most `avail` bytes), or 0. Overlong forms and code
 * points past U+10FFFF are refused; surrogates pass, as \u escapes let them through too. */
static size_t utf8_len(const unsigned char *p, size_t avail) {
    unsigned char c = p[0];
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
             : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0 || n > avail) return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && p[1] < 0xA0) return 0; /* overlong 3-byte */
    if (c == 0xF0 && p[1] < 0x90) return 0; /* overlong 4-byte */
    if (c == 0xF4 && p[1] > 0x8F) return 0; /* past U+10FFFF */
    return n;
}

/* Bytes from the opening quote at ps->pos to the closing one (or the end): decoding never
 * produces more bytes than it consumes, so this bounds the output. */
static size_t string_span(const struct parser *ps) {
    size_t i = ps->pos + 1;
    while (i < ps->len && ps->s[i] != '"') i += ps->s[i] == '\\' ? 2 : 1;
    return i - ps->pos;
}

/* Parses the string at ps->pos (at its opening quote) into a malloc'ed, unescaped copy. */
static int parse_string(struct parser *ps, char **out) {
    *out = NULL;
    if (ps->pos >= ps->len || ps->s[ps->pos] != '"') return fail_at(ps->pos, "'\"'");
    char *buf = malloc(string_span(ps) + 1);
    if (!buf) return fail_oom();
    size_t n = 0;
    int rc = PELAB_OK;
    ps->pos++;
    while (rc == PELAB_OK) {
        if (ps->pos >= ps->len) {
            rc = fail_at(ps->pos, "'\"' to close the string");
            break;
        }
        unsigned char c = (unsigned char)ps->s[ps->pos];
        if (c == '"') break;
        if (c == '\\') {
            rc = escape(ps, buf, &n);
        } else if (c < 0x20) {
            rc = fail_at(ps->pos, "a printable character (control characters must be escaped)");
        } else if (c < 0x80) {
            buf[n++] = (char)c;
            ps->pos++;
        } else {
            size_t k = utf8_len((const unsigned char *)ps->s + ps->pos, ps->len - ps->pos);
            if (!k) {
                rc = fail_at(ps->pos, "valid UTF-8");
                break;
            }
            memcpy(buf + n, ps->s + ps->pos, k);
            n += k;
            ps->pos += k;
        }
    }
    if (rc) {
        free(buf);
        return rc;
    }
    ps->pos++; /* the closing quote */
    buf[n] = '\0';
    *out = buf;
    return PELAB_OK;
}

/* ---- numbers and literals -------------------------------------------------------------------- */

static int is_digit(const struct parser *ps, size_t i) {
    return i < ps->len && ps->s[i] >= '0' && ps->s[i] <= '9';
}

/* Advances past one or more digits, or fails naming what they follow. */
static int digits(struct parser *ps, const char *expected) {
    if (!is_digit(ps, ps->pos)) return fail_at(ps->pos, expected);
    while (is_digit(ps, ps->pos)) ps->pos++;
    return PELAB_OK;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int parse_number(struct parser *ps, struct pelab_json *j) {
    size_t start = ps->pos;
    if (ps->s[ps->pos] == '-') ps->pos++;
    if (ps->pos < ps->len && ps->s[ps->pos] == '0') {
        ps->pos++;
        if (is_digit(ps, ps->pos)) return fail_at(start, "a number without leading zeros");
    } else if (digits(ps, "a digit")) {
        return PELAB_ERR_RUNTIME;
    }
    if (ps->pos < ps->len && ps->s[ps->pos] == '.') {
        ps->pos++;
        if (digits(ps, "a digit after the decimal point")) return PELAB_ERR_RUNTIME;
    }
    if (ps->pos < ps->len && (ps->s[ps->pos] == 'e' || ps->s[ps->pos] == 'E')) {
        ps->pos++;
        if (ps->pos < ps->len && (ps->s[ps->pos] == '+' || ps->s[ps->pos] == '-')) ps->pos++;
        if (digits(ps, "a digit in the exponent")) return PELAB_ERR_RUNTIME;
    }
    /* The grammar is checked above; strtod only converts, so it gets exactly the number's text
     * (it would otherwise read on into "0x10" or "1e5e"). It must consume all of it: a locale
     * whose decimal point is not '.' would make it stop early. */
    char *end, saved = ps->s[ps->pos];
    ps->s[ps->pos] = '\0';
    double x = strtod(ps->s + start, &end);
    ps->s[ps->pos] = saved;
    if (end != ps->s + ps->pos) return fail_at(start, "a number (strtod disagrees: locale?)");
    if (!isfinite(x)) return fail_at(start, "a finite number (this one overflows a double)");
    j->type = PELAB_JSON_NUMBER;
    j->number = x;
    j->raw = ps->s + start;
    j->raw_len = ps->pos - start;
    return PELAB_OK;
}

static int parse_literal(struct parser *ps, struct pelab_json *j) {
    static const struct { const char *word; enum pelab_json_type type; int boolean; } lits[] = {
        {"true", PELAB_JSON_BOOL, 1}, {"false", PELAB_JSON_BOOL, 0}, {"null", PELAB_JSON_NULL, 0}};
    for (size_t i = 0; i < sizeof lits / sizeof lits[0]; i++) {
        size_t n = strlen(lits[i].word);
        if (ps->len - ps->pos >= n && memcmp(ps->s + ps->pos, lits[i].word, n) == 0) {
            j->type = lits[i].type;
            j->boolean = lits[i].boolean;
            ps->pos += n;
            return PELAB_OK;
        }
    }
    return fail_at(ps->pos, "a value");
}

/* ---- containers ------------------------------------------------------------------------------ */

static int parse_value(struct parser *ps, struct pelab_json *j);

/* Parses a value into a new node and appends it (with key, for objects) to parent. */
static int parse_child(struct parser *ps, struct pelab_json *parent, char *key) {
    struct pelab_json *child = calloc(1, sizeof *child);
    int rc = child ? parse_value(ps, child) : fail_oom();
    if (rc == PELAB_OK) rc = push_child(parent, key, child);
    if (rc) {
        free(key);
        pelab_json_free(child);
    }
    return rc;
}

/* After a member: ',' (more follow) or the closing bracket. Returns 1 for more, 0 for done,
 * -1 on error. */
static int next_member(struct parser *ps, char close, const char *expected) {
    skip_ws(ps);
    char c = ps->pos < ps->len ? ps->s[ps->pos] : '\0';
    if (c == ',' || c == close) {
        ps->pos++;
        return c == ',';
    }
    fail_at(ps->pos, expected);
    return -1;
}

/* '[' ws ( ']' | value ( ',' value )* ']' ) */
static int parse_array(struct parser *ps, struct pelab_json *j) {
    j->type = PELAB_JSON_ARRAY;
    ps->pos++;
    skip_ws(ps);
    if (ps->pos < ps->len && ps->s[ps->pos] == ']') {
        ps->pos++;
        return PELAB_OK;
    }
    for (;;) {
        if (parse_child(ps, j, NULL)) return PELAB_ERR_RUNTIME;
        int more = next_member(ps, ']', "',' or ']'");
        if (more <= 0) return more < 0 ? PELAB_ERR_RUNTIME : PELAB_OK;
    }
}

/* '{' ws ( '}' | string ':' value ( ',' string ':' value )* '}' ) */
static int parse_object(struct parser *ps, struct pelab_json *j) {
    j->type = PELAB_JSON_OBJECT;
    ps->pos++;
    skip_ws(ps);
    if (ps->pos < ps->len && ps->s[ps->pos] == '}') {
        ps->pos++;
        return PELAB_OK;
    }
    for (;;) {
        char *key;
        skip_ws(ps);
        if (ps->pos >= ps->len || ps->s[ps->pos] != '"')
            return fail_at(ps->pos, "'\"' to start a key");
        if (parse_string(ps, &key)) return PELAB_ERR_RUNTIME;
        skip_ws(ps);
        if (ps->pos >= ps->len || ps->s[ps->pos] != ':') {
            free(key);
            return fail_at(ps->pos, "':' after the key");
        }
        ps->pos++;
        if (parse_child(ps, j, key)) return PELAB_ERR_RUNTIME;
        int more = next_member(ps, '}', "',' or '}'");
        if (more <= 0) return more < 0 ? PELAB_ERR_RUNTIME : PELAB_OK;
    }
}

static int parse_container(struct parser *ps, struct pelab_json *j) {
    if (ps->depth == JSON_MAX_DEPTH) return fail_at(ps->pos, "nesting depth at most 64");
    ps->depth++;
    int rc = ps->s[ps->pos] == '[' ? parse_array(ps, j) : parse_object(ps, j);
    ps->depth--;
    return rc;
}

/* Parses the value at ps->pos (after whitespace) into *j, which starts zeroed. */
static int parse_value(struct parser *ps, struct pelab_json *j) {
    skip_ws(ps);
    char c = ps->pos < ps->len ? ps->s[ps->pos] : '\0';
    if (c == '{' || c == '[') return parse_container(ps, j);
    if (c == '"') {
        j->type = PELAB_JSON_STRING;
        return parse_string(ps, &j->string);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(ps, j);
    return parse_literal(ps, j);
}

int pelab_json_parse(const char *text, size_t len, struct pelab_json **out) {
    *out = NULL;
    struct json_root *root = len > SIZE_MAX / 2 ? NULL : calloc(1, sizeof *root + len + 1);
    if (!root) return fail_oom();
    if (len) memcpy(root->text, text, len);
    root->text[len] = '\0';
    struct parser ps = {root->text, len, 0, 0};
    int rc = parse_value(&ps, &root->node);
    if (rc == PELAB_OK) {
        skip_ws(&ps);
        if (ps.pos != len) rc = fail_at(ps.pos, "the end of the input");
    }
    if (rc) {
        pelab_json_free(&root->node);
        return rc;
    }
    *out = &root->node;
    return PELAB_OK;
}

/* ---- string builder -------------------------------------------------------------------------- */

/* Room for `extra` more bytes plus the NUL. */
static void sb_reserve(struct pelab_sb *sb, size_t extra) {
    PELAB_ASSERT(extra < SIZE_MAX / 4 - sb->len);
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap) return;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < need) cap *= 2;
    char *data = realloc(sb->data, cap);
    PELAB_ASSERT(data != NULL);
    sb->data = data;
    sb->cap = cap;
}

void pelab_sb_free(struct pelab_sb *sb) {
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
}

void pelab_sb_append(struct pelab_sb *sb, const char *s, size_t n) {
    sb_reserve(sb, n);
    if (n) memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void pelab_sb_printf(struct pelab_sb *sb, const char *fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    PELAB_ASSERT(n >= 0);
    sb_reserve(sb, (size_t)n);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, again);
    va_end(again);
    sb->len += (size_t)n;
}

/* Escapes '"', '\\' and control characters; other bytes (UTF-8 included) pass through. */
void pelab_sb_json_string(struct pelab_sb *sb, const char *s) {
    static const char hex[] = "0123456789abcdef";
    pelab_sb_append(sb, "\"", 1);
    const char *run = s; /* start of the bytes not yet appended */
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        pelab_sb_append(sb, run, (size_t)(s - run));
        run = s + 1;
        const char *short_form = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                               : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                               : c == '\f' ? "\\f" : NULL;
        if (short_form) {
            pelab_sb_append(sb, short_form, 2);
        } else {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            pelab_sb_append(sb, u, 6);
        }
    }
    pelab_sb_append(sb, run, (size_t)(s - run));
    pelab_sb_append(sb, "\"", 1);
}

void pelab_sb_csv_cell(struct pelab_sb *sb, const char *s) {
    /* an empty cell quoted: a row of one is no empty line; one that begins with a UTF-8 byte
     * order mark too, which a reader skips at the start of a file (lab/csv.h) */
    if (*s && !strpbrk(s, ",\"\n\r") && strncmp(s, "\xEF\xBB\xBF", 3) != 0) {
        pelab_sb_append(sb, s, strlen(s));
        return;
    }
    pelab_sb_append(sb, "\"", 1);
    for (const char *quote; (quote = strchr(s, '"')); s = quote + 1) { /* up to and with it, then again */
        pelab_sb_append(sb, s, (size_t)(quote + 1 - s));
        pelab_sb_append(sb, "\"", 1);
    }
    pelab_sb_append(sb, s, strlen(s));
    pelab_sb_append(sb, "\"", 1);
}

/* 0.1 stays "0.1" while every value still round-trips. JSON has no inf/nan: those become null. */
void pelab_json_number_text(char *buf, size_t size, double x) {
    if (!isfinite(x)) {
        snprintf(buf, size, "null");
        return;
    }
    if (fabs(x) < 9007199254740992.0 && x == floor(x)) {
        snprintf(buf, size, "%.0f", x);
        return;
    }
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) break;
    }
}

void pelab_sb_json_number(struct pelab_sb *sb, double x) {
    char buf[32];
    pelab_json_number_text(buf, sizeof buf, x);
    pelab_sb_append(sb, buf, strlen(buf));
}

int pelab_json_load(const char *path, struct pelab_json **out) {
    *out = NULL;
    char *text;
    size_t size;
    int rc = pelab_read_small_file(path, &text, &size);
    if (rc) return rc;
    rc = pelab_json_parse(text, size, out);
    free(text);
    if (rc) return pelab_fail_context(PELAB_ERR_RUNTIME, "%s", path);
    return PELAB_OK;
}
