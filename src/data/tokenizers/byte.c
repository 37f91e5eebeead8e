/* byte — every byte is a token: ids 0..255 are the byte values, 256 <pad>, 257 <eod> (end of
 * document). Vocabulary 258. Text need not be valid UTF-8: any bytes round-trip. */
#include <stdio.h>
#include <string.h>
#include "data/tokenizers/tokenizers.h"
#include "pelab/status.h"

#define PAD 256
#define EOD 257
#define VOCAB 258

static int byte_load(struct pelab_tokenizer *tk, const char *vocab_dir) {
    static const char layout[] = "byte: 0..255 bytes, 256 <pad>, 257 <eod>";
    tk->vocab = VOCAB;
    tk->pad = PAD;
    tk->eod = EOD;
    tk->vocab_hash = pelab_fnv64(PELAB_FNV64_INIT, layout, sizeof layout - 1);
    return PELAB_OK;
}

static int byte_encode(const struct pelab_tokenizer *tk, const char *text, size_t n,
                       const char *what, struct pelab_tokens *out) {
    for (size_t i = 0; i < n; i++) {
        int rc = pelab_tokens_push(out, (unsigned char)text[i]);
        if (rc) return rc;
    }
    return PELAB_OK;
}

static int byte_decode(const struct pelab_tokenizer *tk, const int32_t *ids, size_t n,
                       struct pelab_bytes *out) {
    for (size_t i = 0; i < n; i++) {
        int rc;
        if (ids[i] >= 0 && ids[i] < 256) {
            char c = (char)ids[i];
            rc = pelab_bytes_append(out, &c, 1);
        } else if (ids[i] == PAD || ids[i] == EOD) {
            const char *s = ids[i] == PAD ? "<pad>" : "<eod>";
            rc = pelab_bytes_append(out, s, strlen(s));
        } else {
            return pelab_fail(PELAB_ERR_RUNTIME, "token %zu: id %d is outside the byte vocabulary "
                              "(0..%d)", i, (int)ids[i], VOCAB - 1);
        }
        if (rc) return rc;
    }
    return PELAB_OK;
}

const struct pelab_tokenizer_ops pelab_tokenizer_byte = {
    .name = "byte",
    .summary = "bytes 0..255, <pad> 256, <eod> 257 (vocab 258)",
    .files = NULL,
    .load = byte_load,
    .encode = byte_encode,
    .decode = byte_decode,
};
