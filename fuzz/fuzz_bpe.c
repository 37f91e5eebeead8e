/* Fuzz target: the gpt2 tokenizer's loader on any vocabulary. The input is encoder.json, a NUL
 * byte, then vocab.bpe (no NUL: all of it is encoder.json and vocab.bpe is empty). A vocabulary
 * that loads encodes a few fixed texts; each either is refused (a byte with no token) or decodes
 * back to itself, and an id outside the vocabulary is refused. */
#include "fuzz.h"
#include "data/tokenizers/tokenizers.h"

#define ENC "fuzz/encoder.json"
#define BPE "fuzz/vocab.bpe"
#define TEXT "fuzz.txt"

static const char *const texts[] = {
    "", "a", "abc ab", " the the  the\n\n", "Hello, world! It's 2024.\n",
    "caf\xc3\xa9 \xe2\x82\xac 10", "\xff\xfe bad \xc3 utf-8", "<|endoftext|>",
};

/* A malloc'ed copy of data[0..n-1] with a NUL after it, as pelab_read_file gives a file. */
static char *text_of(const uint8_t *data, size_t n) {
    char *t = malloc(n + 1);
    if (!t) abort();
    if (n) memcpy(t, data, n);
    t[n] = '\0';
    return t;
}

static void round_trip(const struct pelab_tokenizer *tk, const char *text, size_t n) {
    struct pelab_tokens ids = {0};
    struct pelab_bytes back = {0};
    int rc = tk->ops->encode(tk, text, n, TEXT, &ids);
    if (rc) {
        fuzz_check_refusal(rc, TEXT ": ");
    } else {
        if (tk->ops->decode(tk, ids.ids, ids.len, &back) || back.len != n ||
            (n && memcmp(back.data, text, n) != 0)) {
            fprintf(stderr, "fuzz_bpe: '%s' does not decode back to itself\n", text);
            abort();
        }
    }
    pelab_tokens_free(&ids);
    pelab_bytes_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t enc_size = nul ? (size_t)(nul - data) : size;
    size_t bpe_size = nul ? size - enc_size - 1 : 0;
    char *enc = text_of(data, enc_size), *bpe = text_of(data + size - bpe_size, bpe_size);
    struct pelab_tokenizer tk;
    int rc = pelab_gpt2_load_texts(&tk, ENC, enc, enc_size, BPE, bpe, bpe_size);
    if (rc) {
        fuzz_check_refusal(rc, NULL);
        const char *msg = pelab_last_error();
        if (strncmp(msg, ENC ": ", strlen(ENC) + 2) && strncmp(msg, BPE ": ", strlen(BPE) + 2)) {
            fprintf(stderr, "fuzz_bpe: a refusal names neither file: '%s'\n", msg);
            abort();
        }
    } else {
        if (tk.vocab <= 0 || tk.pad < 0 || tk.pad >= tk.vocab || tk.eod >= tk.vocab) abort();
        for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
            round_trip(&tk, texts[i], strlen(texts[i]));
        round_trip(&tk, "a\0b", 3);
        int32_t bad[] = {0, tk.vocab};
        struct pelab_bytes out = {0};
        fuzz_check_refusal(tk.ops->decode(&tk, bad, 2, &out), "token 1: ");
        pelab_bytes_free(&out);
        pelab_tokenizer_free(&tk);
    }
    free(enc);
    free(bpe);
    return 0;
}
