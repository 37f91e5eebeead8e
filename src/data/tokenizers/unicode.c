/* UTF-8 decoding and Unicode classes: binary search in the generated range tables, with ASCII
 * answered from a table. */
#include "data/tokenizers/unicode.h"

int pelab_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? (c < 0xF0 ? 3 : 0) : c >= 0xC2 ? 2 : 0;
    if (len == 0 || (size_t)len > n) goto invalid;
    uint32_t v = c & (0xFFu >> (len + 1));
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) goto invalid;
        v = v << 6 | (s[i] & 0x3Fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) goto invalid;
    *cp = v;
    return len;
invalid:
    *cp = PELAB_UTF8_INVALID;
    return 1;
}

static int in_ranges(const struct pelab_ucd_range *r, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}

enum pelab_uclass pelab_uclass(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return PELAB_UC_LETTER;
        if (cp >= '0' && cp <= '9') return PELAB_UC_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return PELAB_UC_SPACE;
        return PELAB_UC_OTHER;
    }
    if (cp == PELAB_UTF8_INVALID) return PELAB_UC_OTHER;
    if (cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF ||
        in_ranges(pelab_ucd_space_sep, pelab_ucd_space_sep_count, cp))
        return PELAB_UC_SPACE;
    if (in_ranges(pelab_ucd_letter, pelab_ucd_letter_count, cp)) return PELAB_UC_LETTER;
    if (in_ranges(pelab_ucd_number, pelab_ucd_number_count, cp)) return PELAB_UC_NUMBER;
    return PELAB_UC_OTHER;
}
