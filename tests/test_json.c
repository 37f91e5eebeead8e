/* json: the tree, exact integers through raw text, every strictness rule with its byte offset,
 * string and number round trips through the builder, and never crashing on damaged input. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "pelab/json.h"
#include "pelab/status.h"

static struct pelab_json *parse(const char *s) {
    struct pelab_json *j = NULL;
    int rc = pelab_json_parse(s, strlen(s), &j);
    CHECK(rc == PELAB_OK && j, "parse '%s': %s", s, pelab_last_error());
    return j;
}

static void test_tree(void) {
    const char *doc = " {\"vocab\": 50257, \"lr\": -2.5e-4, \"on\": true, \"off\": false, \"none\": null,\n"
                      "  \"name\": \"rope\", \"dims\": [1, [2, 3], {}], \"empty\": [], \"vocab\": 1,\n"
                      "  \"steps\": 9007199254740993 }\r\n\t";
    struct pelab_json *j = parse(doc);
    if (!j) return;
    CHECK(j->type == PELAB_JSON_OBJECT && j->count == 10, "object of 10 members");
    CHECK(strcmp(j->keys[0], "vocab") == 0 && strcmp(j->keys[9], "steps") == 0, "keys in file order");
    const struct pelab_json *v = pelab_json_get(j, "vocab");
    CHECK(v && v->type == PELAB_JSON_NUMBER && v->number == 50257, "first match wins");
    CHECK(v && v->raw_len == 5 && strncmp(v->raw, "50257", 5) == 0, "raw text of a number");
    const struct pelab_json *steps = pelab_json_get(j, "steps");
    CHECK(steps && strtoll(steps->raw, NULL, 10) == 9007199254740993LL,
          "64-bit integers re-read exactly from raw");
    const struct pelab_json *lr = pelab_json_get(j, "lr");
    CHECK(lr && lr->number == -2.5e-4 && lr->raw_len == 7, "negative exponent number");
    CHECK(pelab_json_get(j, "on")->boolean == 1 && pelab_json_get(j, "on")->type == PELAB_JSON_BOOL, "true");
    CHECK(pelab_json_get(j, "off")->boolean == 0, "false");
    CHECK(pelab_json_get(j, "none")->type == PELAB_JSON_NULL, "null");
    CHECK(strcmp(pelab_json_get(j, "name")->string, "rope") == 0, "string");
    const struct pelab_json *dims = pelab_json_get(j, "dims");
    CHECK(dims && dims->type == PELAB_JSON_ARRAY && dims->count == 3, "array");
    CHECK(dims && dims->items[1]->count == 2 && dims->items[1]->items[1]->number == 3, "nested");
    CHECK(dims && dims->items[2]->type == PELAB_JSON_OBJECT && dims->items[2]->count == 0, "{}");
    CHECK(pelab_json_get(j, "empty")->count == 0, "[]");
    CHECK(pelab_json_get(j, "missing") == NULL, "missing key");
    CHECK(pelab_json_get(dims, "x") == NULL && pelab_json_get(NULL, "x") == NULL, "get on non-objects");
    pelab_json_free(j);

    /* A big array exercises the children's growth. */
    struct pelab_sb sb = {0};
    pelab_sb_append(&sb, "[", 1);
    for (int i = 0; i < 1000; i++) pelab_sb_printf(&sb, "%s%d", i ? "," : "", i);
    pelab_sb_append(&sb, "]", 1);
    j = parse(sb.data);
    int ok = j && j->count == 1000;
    for (int i = 0; ok && i < 1000; i++) ok = j->items[i]->number == i;
    CHECK(ok, "1000-element array");
    pelab_json_free(j);
    pelab_sb_free(&sb);

    j = parse("  \"solo\"  ");
    CHECK(j && j->type == PELAB_JSON_STRING && strcmp(j->string, "solo") == 0, "scalar root");
    pelab_json_free(j);
    j = parse("-0");
    CHECK(j && j->number == 0 && signbit(j->number), "-0 keeps its sign");
    pelab_json_free(j);
    j = parse("1e-400");
    CHECK(j && j->number == 0, "underflow to zero is finite, accepted");
    pelab_json_free(j);
}

static void test_strings(void) {
    struct pelab_json *j = parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u00e9 \\u20AC \\ud83d\\ude00 caf\xc3\xa9\"");
    CHECK(j && strcmp(j->string, "q\" b\\ s/ \b\f\n\r\t \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 caf\xc3\xa9") == 0,
          "escapes, \\u to UTF-8, surrogate pair, raw UTF-8");
    pelab_json_free(j);
    j = parse("\"\\ud800x\\udc00\"");
    CHECK(j && strcmp(j->string, "\xed\xa0\x80x\xed\xb0\x80") == 0, "lone surrogates pass through");
    pelab_json_free(j);
    j = parse("\"\\ud800\\u0041\"");
    CHECK(j && strcmp(j->string, "\xed\xa0\x80" "A") == 0, "high surrogate then a non-surrogate");
    pelab_json_free(j);
    j = parse("\"\xf4\x8f\xbf\xbf \x7f\"");
    CHECK(j && strcmp(j->string, "\xf4\x8f\xbf\xbf \x7f") == 0, "U+10FFFF and DEL pass");
    pelab_json_free(j);
}

/* Must be refused with "JSON: at byte <at>: expected ...". */
static void refused(const char *text, size_t len, size_t at) {
    struct pelab_json *j = (struct pelab_json *)1;
    int rc = pelab_json_parse(text, len, &j);
    char want[64];
    snprintf(want, sizeof want, "JSON: at byte %zu: expected ", at);
    CHECK(rc == PELAB_ERR_RUNTIME && j == NULL, "'%.*s' accepted", (int)len, text);
    CHECK(strstr(pelab_last_error(), want) == pelab_last_error(), "'%.*s': wanted '%s...', got '%s'",
          (int)len, text, want, pelab_last_error());
    if (rc == PELAB_OK) pelab_json_free(j);
}
#define REFUSED(text, at) refused(text, sizeof text - 1, at)

static void test_rejections(void) {
    REFUSED("", 0);
    REFUSED("   ", 3);
    REFUSED("[1,2,]", 5);                 /* trailing comma */
    REFUSED("{\"a\":1,}", 7);
    REFUSED("// c\n1", 0);                /* comments */
    REFUSED("[1 /* c */]", 3);
    REFUSED("\"a\x01z\"", 2);              /* control characters */
    REFUSED("\"a\tz\"", 2);
    REFUSED("\"a\nz\"", 2);
    REFUSED("\"\\x\"", 1);                 /* bad escapes */
    REFUSED("\"ab\\'\"", 3);
    REFUSED("\"\\u12G4\"", 1);
    REFUSED("\"\\u12\"", 1);
    REFUSED("\"\\", 1);
    REFUSED("\"\\u0000\"", 1);             /* NUL cannot live in a C string */
    REFUSED("\"abc", 4);                   /* unterminated */
    REFUSED("\"\xff\"", 1);                /* invalid UTF-8 */
    REFUSED("\"\xc0\xaf\"", 1);            /* overlong */
    REFUSED("\"\xe0\x80\xaf\"", 1);
    REFUSED("\"\xe2\x82\"", 1);            /* cut short */
    REFUSED("\"\xf4\x90\x80\x80\"", 1);    /* past U+10FFFF */
    REFUSED("\"\x80\"", 1);                /* lone continuation byte */
    REFUSED("01", 0);                      /* leading zeros */
    REFUSED("-012", 0);
    REFUSED("[00]", 1);
    REFUSED("1e999", 0);                   /* non-finite */
    REFUSED("[-1e400]", 1);
    REFUSED("NaN", 0);
    REFUSED("Infinity", 0);
    REFUSED("-Infinity", 1);
    REFUSED("+1", 0);
    REFUSED(".5", 0);
    REFUSED("1.", 2);
    REFUSED("1.e5", 2);
    REFUSED("1e", 2);
    REFUSED("1e+", 3);
    REFUSED("-", 1);
    REFUSED("0x10", 1);                    /* trailing garbage */
    REFUSED("1 2", 2);
    REFUSED("{} x", 3);
    REFUSED("[1]]", 3);
    REFUSED("tru", 0);
    REFUSED("nul", 0);
    REFUSED("True", 0);
    REFUSED("'a'", 0);
    REFUSED("[1,2", 4);
    REFUSED("[1 2]", 3);
    REFUSED("{\"a\" 1}", 5);
    REFUSED("{\"a\":}", 5);
    REFUSED("{1:2}", 1);
    REFUSED("{\"a\":1 \"b\":2}", 7);
    REFUSED("{,}", 1);
    REFUSED("[,]", 1);
    REFUSED("\"a\"\"b\"", 3);
    refused("[1,\0]", 5, 3);               /* NUL byte inside the text */

    /* Depth: 64 nested containers are fine, 65 are not. */
    char deep[512];
    for (int depth = 64; depth <= 65; depth++) {
        size_t n = 0;
        for (int i = 0; i < depth; i++) deep[n++] = '[';
        for (int i = 0; i < depth; i++) deep[n++] = ']';
        deep[n] = '\0';
        struct pelab_json *j = NULL;
        int rc = pelab_json_parse(deep, n, &j);
        if (depth == 64) CHECK(rc == PELAB_OK, "depth 64 accepted: %s", pelab_last_error());
        else refused(deep, n, 64);
        pelab_json_free(j);
    }
    size_t n = 0;
    for (int i = 0; i < 40; i++) n += (size_t)snprintf(deep + n, sizeof deep - n, "{\"k\":[");
    deep[n] = '\0';
    refused(deep, n, 6 * 32); /* the 65th container is the 33rd {"k":[ pair's '{' */
}

static void test_builder(void) {
    struct pelab_sb sb = {0};
    pelab_sb_printf(&sb, "%s", "");
    CHECK(sb.data && sb.len == 0 && sb.data[0] == '\0', "empty printf leaves an empty string");
    for (int i = 0; i < 100; i++) pelab_sb_printf(&sb, "%05d,", i);
    CHECK(sb.len == 600 && strncmp(sb.data + 594, "00099,", 6) == 0 && sb.data[600] == '\0',
          "printf grows the buffer");
    pelab_sb_free(&sb);
    CHECK(sb.data == NULL && sb.len == 0, "free resets");

    static const struct { double x; const char *text; } cases[] = {
        {50257, "50257"}, {0.5, "0.5"}, {0.1, "0.1"}, {-3, "-3"}, {3e-4, "0.0003"},
        {1e21, "1e+21"}, {9007199254740992.0, "9007199254740992"}, {1.0 / 3, "0.3333333333333333"},
        {-0.0, "-0"}, {0, "0"}, {1e300, "1e+300"}, {0.1 + 0.2, "0.30000000000000004"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pelab_sb_json_number(&sb, cases[i].x);
        CHECK(strcmp(sb.data, cases[i].text) == 0, "number %.17g printed '%s', wanted '%s'",
              cases[i].x, sb.data, cases[i].text);
        sb.len = 0;
    }
    pelab_sb_json_number(&sb, NAN);
    pelab_sb_append(&sb, " ", 1);
    pelab_sb_json_number(&sb, -INFINITY);
    CHECK(strcmp(sb.data, "null null") == 0, "non-finite as null: %s", sb.data);
    pelab_sb_free(&sb);
}

/* Prints values with the builder and parses them back: bit-identical numbers, equal strings. */
static void test_round_trips(void) {
    double xs[] = {0.1, 1.0 / 3, 1e300, -1e-300, 5e-324, DBL_MAX, -DBL_MIN, 2.5e-8, 123456789012.0,
                   9007199254740993.0, 18446744073709551616.0, -0.0, 1e22, 3.14159265358979,
                   6.02214076e23, 0.30000000000000004};
    struct pelab_sb sb = {0};
    pelab_sb_append(&sb, "[", 1);
    size_t nx = sizeof xs / sizeof xs[0];
    for (size_t i = 0; i < nx; i++) {
        if (i) pelab_sb_append(&sb, ",", 1);
        pelab_sb_json_number(&sb, xs[i]);
    }
    /* Every ASCII character 1..127 and multi-byte UTF-8. */
    char s[200];
    size_t n = 0;
    for (int c = 1; c < 128; c++) s[n++] = (char)c;
    strcpy(s + n, " \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    pelab_sb_append(&sb, ",", 1);
    pelab_sb_json_string(&sb, s);
    pelab_sb_append(&sb, "]", 1);
    struct pelab_json *j = parse(sb.data);
    CHECK(j && j->count == (int)nx + 1, "round-trip array size");
    for (size_t i = 0; j && i < nx; i++)
        CHECK(memcmp(&j->items[i]->number, &xs[i], sizeof xs[i]) == 0, "number %.17g came back as %.17g",
              xs[i], j->items[i]->number);
    CHECK(j && strcmp(j->items[nx]->string, s) == 0, "string round trip");
    pelab_json_free(j);
    pelab_sb_free(&sb);

    pelab_sb_json_string(&sb, "a\"b\\c\n\x01");
    CHECK(strcmp(sb.data, "\"a\\\"b\\\\c\\n\\u0001\"") == 0, "escaping: %s", sb.data);
    pelab_sb_free(&sb);
}

/* Damaged documents: every prefix, and byte flips; parse must fail cleanly or succeed. */
static void test_damage(void) {
    const char *doc = "{\"a\": [1, -2.5e3, true, null, \"x\\u00e9\\ud83d\\ude00\"], \"b\": {\"c\": \"\xc3\xa9\"}}";
    size_t len = strlen(doc);
    int prefixes_refused = 1;
    for (size_t n = 0; n < len; n++) {
        struct pelab_json *j = NULL;
        char *copy = malloc(n ? n : 1); /* exact size, so a read past the end shows under ASan */
        memcpy(copy, doc, n);
        if (pelab_json_parse(copy, n, &j) == PELAB_OK) prefixes_refused = 0;
        pelab_json_free(j);
        free(copy);
    }
    CHECK(prefixes_refused, "every proper prefix of an object is refused");
    static const unsigned char flips[] = {0x01, 0x20, 0x80, 0xff};
    int clean = 1;
    for (size_t i = 0; i < len; i++)
        for (size_t k = 0; k < sizeof flips; k++) {
            char *copy = malloc(len);
            memcpy(copy, doc, len);
            copy[i] ^= (char)flips[k];
            struct pelab_json *j = NULL;
            int rc = pelab_json_parse(copy, len, &j);
            if (rc != PELAB_OK && (j != NULL || !strstr(pelab_last_error(), "JSON: at byte"))) clean = 0;
            pelab_json_free(j);
            free(copy);
        }
    CHECK(clean, "byte flips fail cleanly with an offset, or parse");
}

int main(void) {
    test_tree();
    test_strings();
    test_rejections();
    test_builder();
    test_round_trips();
    test_damage();
    return check_report("test_json");
}
