/* src/data/tokenizers/unicode.h — UTF-8 decoding and the few Unicode classes GPT-2's
 * pre-tokenizer needs, from the generated range tables in unicode_tables.c. */
#ifndef PELAB_DATA_UNICODE_H
#define PELAB_DATA_UNICODE_H

#include <stddef.h>
#include <stdint.h>

struct pelab_ucd_range {
    uint32_t lo, hi; /* inclusive */
};
extern const struct pelab_ucd_range pelab_ucd_letter[], pelab_ucd_number[], pelab_ucd_space_sep[];
extern const int pelab_ucd_letter_count, pelab_ucd_number_count, pelab_ucd_space_sep_count;

/* Code point returned for a byte that does not start a valid UTF-8 sequence (it is read as one
 * code point of its own, of no class: neither letter, number nor space). */
#define PELAB_UTF8_INVALID 0xFFFFFFFFu

/* Decodes the code point at s[0..n-1] (n >= 1) and returns its length in bytes (1..4). Overlong
 * forms, surrogates and values above U+10FFFF are invalid: *cp = PELAB_UTF8_INVALID, length 1. */
int pelab_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

enum pelab_uclass { PELAB_UC_OTHER, PELAB_UC_LETTER, PELAB_UC_NUMBER, PELAB_UC_SPACE };
/* \p{L}, \p{N}, JavaScript's \s (Zs, TAB, LF, VT, FF, CR, U+2028, U+2029, U+FEFF), or other. */
enum pelab_uclass pelab_uclass(uint32_t cp);

#endif
