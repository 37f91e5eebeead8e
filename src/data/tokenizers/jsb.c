/* jsb — JSB chorales in raster order (Huang et al., 2019, Music Transformer; the PoPE paper's
 * "JSB" task): each 16th-note step holds four MIDI pitches, soprano, alto, tenor, bass, and the
 * sequence is step 0's four voices, then step 1's, and so on. Vocabulary 90:
 *
 *     id = pitch − 21   for MIDI pitches 21..108 (the piano's 88 keys; the data use 36..81)
 *     88                silence (−1 in the data: the voice rests)
 *     89                padding
 *
 * Text form, what `pelab tokenize --tokenizer jsb` reads and `--decode` writes: one step per line,
 * its four pitches as decimal integers separated by spaces ("65 60 57 53"). Any white space
 * separates numbers on input; the count must be a whole number of 4-voice steps. There is no
 * end-of-document id: a chorale is one sequence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tokenizers/tokenizers.h"
#include "pelab/status.h"

#define LOW 21
#define HIGH 108
#define SILENCE 88
#define PAD 89
#define VOCAB 90
#define VOICES 4

static int jsb_load(struct pelab_tokenizer *tk, const char *vocab_dir) {
    static const char layout[] = "jsb: pitch-21 for 21..108, 88 silence, 89 pad";
    tk->vocab = VOCAB;
    tk->pad = PAD;
    tk->eod = -1;
    tk->vocab_hash = pelab_fnv64(PELAB_FNV64_INIT, layout, sizeof layout - 1);
    return PELAB_OK;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static int jsb_encode(const struct pelab_tokenizer *tk, const char *text, size_t n,
                      const char *what, struct pelab_tokens *out) {
    size_t count = 0, i = 0;
    while (i < n) {
        if (is_space(text[i])) {
            i++;
            continue;
        }
        size_t start = i;
        int neg = text[i] == '-';
        if (neg) i++;
        long v = 0;
        size_t digits = 0;
        while (i < n && text[i] >= '0' && text[i] <= '9' && digits < 4) v = 10 * v + (text[i++] - '0'), digits++;
        int ok = digits > 0 && (i == n || is_space(text[i])) && (neg ? v == 1 : v >= LOW && v <= HIGH);
        if (!ok) {
            size_t end = start;
            while (end < n && !is_space(text[end]) && end - start < 20) end++;
            char shown[4 * 20 + 1]; /* the word, bytes outside printable ASCII as \xNN */
            size_t k = 0;
            for (size_t j = start; j < end; j++) {
                unsigned char c = (unsigned char)text[j];
                if (c >= 0x20 && c < 0x7f) shown[k++] = (char)c;
                else k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", c);
            }
            shown[k] = '\0';
            return pelab_fail(PELAB_ERR_RUNTIME, "%s: byte %zu: '%s' is not a MIDI pitch in "
                              "%d..%d or -1 (silence)", what, start, shown, LOW, HIGH);
        }
        int rc = pelab_tokens_push(out, neg ? SILENCE : (int32_t)(v - LOW));
        if (rc) return rc;
        count++;
    }
    if (count % VOICES)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: %zu pitches is not a whole number of %d-voice "
                          "steps", what, count, VOICES);
    return PELAB_OK;
}

static int jsb_decode(const struct pelab_tokenizer *tk, const int32_t *ids, size_t n,
                      struct pelab_bytes *out) {
    for (size_t i = 0; i < n; i++) {
        char buf[16];
        int32_t id = ids[i];
        if (id < 0 || id >= VOCAB)
            return pelab_fail(PELAB_ERR_RUNTIME, "token %zu: id %d is outside the jsb vocabulary "
                              "(0..%d)", i, (int)id, VOCAB - 1);
        const char *sep = (i + 1) % VOICES == 0 || i + 1 == n ? "\n" : " ";
        int len = id == PAD ? snprintf(buf, sizeof buf, "<pad>%s", sep)
                            : snprintf(buf, sizeof buf, "%d%s", id == SILENCE ? -1 : id + LOW, sep);
        int rc = pelab_bytes_append(out, buf, (size_t)len);
        if (rc) return rc;
    }
    return PELAB_OK;
}

const struct pelab_tokenizer_ops pelab_tokenizer_jsb = {
    .name = "jsb",
    .summary = "JSB chorales, raster order: MIDI pitch-21, silence 88, padding 89 (vocab 90)",
    .files = NULL,
    .load = jsb_load,
    .encode = jsb_encode,
    .decode = jsb_decode,
};
