/* Tokenizers: the registry; byte, dna and jsb ids against their documented layouts and round trips;
 * GPT-2's pre-tokenizer against pieces worked out by hand from the regex's JavaScript semantics;
 * the Unicode classes and UTF-8 decoding it rests on; BPE on a small hand-made vocabulary, including
 * the package's "a,b" rank lookup (checked once against gpt-3-encoder under node); the merge loop
 * against a transcription of the package's on random vocabularies (shuffled ranks, "a,b" text
 * collisions); and vocabulary
 * files that do not parse, refused with one line naming the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/tmpdir.h"
#include "data/tokenizers/gpt2_split.h"
#include "data/tokenizers/unicode.h"
#include "pelab/io.h"
#include "pelab/status.h"
#include "pelab/tokenizer.h"

/* Encodes s; returns the ids as "1 2 3" (or "error: ..."). */
static const char *ids_of(const struct pelab_tokenizer *tk, const char *s, size_t n) {
    static char buf[4096];
    struct pelab_tokens t = {0};
    if (tk->ops->encode(tk, s, n, "input", &t)) {
        snprintf(buf, sizeof buf, "error: %s", pelab_last_error());
    } else {
        size_t o = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < t.len && o < sizeof buf - 16; i++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%d", i ? " " : "", (int)t.ids[i]);
    }
    pelab_tokens_free(&t);
    return buf;
}

/* encode then decode gives s back. */
static int round_trips(const struct pelab_tokenizer *tk, const char *s, size_t n) {
    struct pelab_tokens t = {0};
    struct pelab_bytes b = {0};
    int ok = tk->ops->encode(tk, s, n, "input", &t) == PELAB_OK &&
             tk->ops->decode(tk, t.ids, t.len, &b) == PELAB_OK && b.len == n && (n == 0 || memcmp(b.data, s, n) == 0);
    pelab_tokens_free(&t);
    pelab_bytes_free(&b);
    return ok;
}

static void test_registry(void) {
    struct pelab_tokenizer tk;
    CHECK(pelab_tokenizer_load(&tk, "wordpiece", NULL) == PELAB_ERR_USAGE, "unknown tokenizer refused");
    CHECK(strstr(pelab_last_error(), "byte, gpt2, dna, jsb") != NULL, "lists the known ones: %s", pelab_last_error());
    const char *names[] = {"byte", "dna", "jsb"};
    const int vocab[] = {258, 4107, 90};
    for (int i = 0; i < 3; i++) {
        CHECK(pelab_tokenizer_load(&tk, names[i], NULL) == PELAB_OK, "load %s", names[i]);
        CHECK(tk.vocab == vocab[i], "%s: vocab %d", names[i], tk.vocab);
        CHECK(tk.vocab_hash != 0, "%s: has a vocabulary hash", names[i]);
        pelab_tokenizer_free(&tk);
    }
}

static void test_byte(void) {
    struct pelab_tokenizer tk;
    pelab_tokenizer_load(&tk, "byte", NULL);
    CHECK(strcmp(ids_of(&tk, "Az\xff\x00", 4), "65 122 255 0") == 0, "byte ids: %s", ids_of(&tk, "Az\xff\x00", 4));
    CHECK(tk.pad == 256 && tk.eod == 257, "specials");
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)i;
    CHECK(round_trips(&tk, all, 256), "every byte round-trips");
    struct pelab_bytes b = {0};
    int32_t bad = 258;
    CHECK(tk.ops->decode(&tk, &bad, 1, &b) == PELAB_ERR_RUNTIME, "id 258 refused");
    pelab_bytes_free(&b);
    pelab_tokenizer_free(&tk);
}

static void test_dna(void) {
    struct pelab_tokenizer tk;
    pelab_tokenizer_load(&tk, "dna", NULL);
    /* ids: 0 <unk> 1 <pad> 2 <mask> 3 <cls>, 4 + 6-mer over A=0 T=1 C=2 G=3, 4100.. A T C G N,
     * 4105 <eos> 4106 <bos>. */
    CHECK(strcmp(ids_of(&tk, "AAAAAA", 6), "4") == 0, "AAAAAA is 4");
    CHECK(strcmp(ids_of(&tk, "AAAAAT", 6), "5") == 0, "AAAAAT is 5");
    CHECK(strcmp(ids_of(&tk, "GGGGGG", 6), "4099") == 0, "GGGGGG is 4099");
    CHECK(strcmp(ids_of(&tk, "TAAAAA", 6), "1028") == 0, "TAAAAA is 4 + 1024");
    /* The Nucleotide Transformer's own example at k = 6: ATCGAA TGGCGA TGCAC -> 2 six-mers, then
     * single nucleotides; with an N, the pieces on either side are read separately. */
    int k1 = 4 + (0 * 1024 + 1 * 256 + 2 * 64 + 3 * 16 + 0 * 4 + 0);   /* ATCGAA */
    int k2 = 4 + (1 * 1024 + 3 * 256 + 3 * 64 + 2 * 16 + 3 * 4 + 0);   /* TGGCGA */
    char want[128];
    snprintf(want, sizeof want, "%d %d 4101 4103 4102 4100 4102", k1, k2);
    CHECK(strcmp(ids_of(&tk, "ATCGAATGGCGATGCAC", 17), want) == 0, "17 bases: %s", ids_of(&tk, "ATCGAATGGCGATGCAC", 17));
    snprintf(want, sizeof want, "4100 4101 4102 4103 4100 4104 %d 4101", k1);
    CHECK(strcmp(ids_of(&tk, "ATCGANATCGAAT", 13), want) == 0, "N splits pieces: %s", ids_of(&tk, "ATCGANATCGAAT", 13));
    CHECK(strcmp(ids_of(&tk, "NN", 2), "4104 4104") == 0, "NN");
    CHECK(strcmp(ids_of(&tk, "atcgaa\nTGGCGA\n", 14), ids_of(&tk, "ATCGAATGGCGA", 12)) == 0 &&
          strcmp(ids_of(&tk, "atcgaa\nTGGCGA\n", 14), "") != 0, "lower case and line breaks");
    CHECK(strcmp(ids_of(&tk, "ACGTR", 5), "4100 4102 4103 4101 4104") == 0, "IUPAC R reads as N");
    CHECK(strncmp(ids_of(&tk, "ACGU", 4), "error: input: byte 3", 20) == 0, "U refused: %s", ids_of(&tk, "ACGU", 4));
    const char *seq = "ATCGATTTGCCNNNAGCTAGCTAGGGATCCANTTTACG";
    CHECK(round_trips(&tk, seq, strlen(seq)), "round trip");
    CHECK(tk.pad == 1 && tk.eod == 4105, "specials");
    pelab_tokenizer_free(&tk);
}

static void test_jsb(void) {
    struct pelab_tokenizer tk;
    pelab_tokenizer_load(&tk, "jsb", NULL);
    const char *steps = "65 60 57 53\n72 -1 55 36\n108 21 -1 -1\n";
    CHECK(strcmp(ids_of(&tk, steps, strlen(steps)), "44 39 36 32 51 88 34 15 87 0 88 88") == 0,
          "pitch - 21, silence 88: %s", ids_of(&tk, steps, strlen(steps)));
    CHECK(round_trips(&tk, steps, strlen(steps)), "round trip");
    CHECK(strstr(ids_of(&tk, "65 60 57\n", 9), "3 pitches is not a whole number of 4-voice steps") != NULL, "3 voices");
    CHECK(strstr(ids_of(&tk, "65 60 57 20\n", 12), "byte 9: '20' is not a MIDI pitch") != NULL, "pitch 20: %s", ids_of(&tk, "65 60 57 20\n", 12));
    CHECK(strstr(ids_of(&tk, "65 60 x 1\n", 10), "byte 6: 'x'") != NULL, "a word");
    CHECK(tk.pad == 89 && tk.vocab == 90, "padding 89");
    pelab_tokenizer_free(&tk);
}

/* The pieces of s, joined by '|'. */
static const char *pieces(const char *s) {
    static char buf[1024];
    size_t n = strlen(s), o = 0;
    for (size_t i = 0; i < n;) {
        size_t j = pelab_gpt2_split(s, n, i);
        if (j <= i || j > n) return "split did not advance";
        if (i) buf[o++] = '|';
        memcpy(buf + o, s + i, j - i);
        o += j - i;
        i = j;
    }
    buf[o] = '\0';
    return buf;
}

static void test_split(void) {
    static const char *const cases[][2] = {
        {"I'm  hello world", "I|'m| | hello| world"},
        {"they'll've 'x 'S", "they|'ll|'ve| '|x| '|S"},
        {"a  \n b", "a|  \n| b"},
        {"x\t\ty", "x|\t|\t|y"},
        {"end  ", "end|  "},
        {" ", " "},
        {"12ab 12 $100 ...!? ...", "12|ab| 12| $|100| ...!?| ..."},
        {"caf\xc3\xa9 na\xc3\xafve", "caf\xc3\xa9| na\xc3\xafve"},
        {"\xd9\xa3\xd9\xa4x", "\xd9\xa3\xd9\xa4|x"},                    /* Arabic-Indic digits: \p{N} */
        {"a\xc2\xa0" "b", "a|\xc2\xa0|b"},                              /* NBSP: \s */
        {"x\xc2\x85y", "x|\xc2\x85|y"},                                 /* NEL: not \s in JavaScript */
        {"x\xef\xbb\xbfy", "x|\xef\xbb\xbf|y"},                         /* BOM: \s in JavaScript */
        {"a\xff\xfe b", "a|\xff\xfe| b"},                               /* invalid UTF-8: other */
        {"\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd!", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd!"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(strcmp(pieces(cases[i][0]), cases[i][1]) == 0, "pieces of case %zu: '%s'", i, pieces(cases[i][0]));
}

static void test_unicode(void) {
    CHECK(pelab_uclass(0xE9) == PELAB_UC_LETTER && pelab_uclass(0x4E2D) == PELAB_UC_LETTER, "é, 中 are letters");
    CHECK(pelab_uclass(0x0663) == PELAB_UC_NUMBER && pelab_uclass(0x216B) == PELAB_UC_NUMBER &&
          pelab_uclass(0xBD) == PELAB_UC_NUMBER, "٣, Ⅻ, ½ are numbers");
    CHECK(pelab_uclass(0x3000) == PELAB_UC_SPACE && pelab_uclass(0x2028) == PELAB_UC_SPACE &&
          pelab_uclass(0x0B) == PELAB_UC_SPACE, "ideographic space, LS, VT are \\s");
    CHECK(pelab_uclass(0x85) == PELAB_UC_OTHER && pelab_uclass(0x200B) == PELAB_UC_OTHER &&
          pelab_uclass(0x1F44D) == PELAB_UC_OTHER, "NEL, ZWSP, emoji are other");
    uint32_t cp;
    CHECK(pelab_utf8_decode((const unsigned char *)"\xe2\x82\xac", 3, &cp) == 3 && cp == 0x20AC, "€");
    CHECK(pelab_utf8_decode((const unsigned char *)"\xc0\xaf", 2, &cp) == 1 && cp == PELAB_UTF8_INVALID, "overlong refused");
    CHECK(pelab_utf8_decode((const unsigned char *)"\xed\xa0\x80", 3, &cp) == 1 && cp == PELAB_UTF8_INVALID, "surrogate refused");
    CHECK(pelab_utf8_decode((const unsigned char *)"\xe2\x82", 2, &cp) == 1 && cp == PELAB_UTF8_INVALID, "truncated refused");
}

/* Writes a vocabulary directory with the given files' contents. */
static const char *vocab_dir(const char *name, const char *encoder, const char *merges) {
    static char dir[512];
    snprintf(dir, sizeof dir, "%s", tmpdir_path(name));
    char path[600];
    pelab_mkdir_p(dir);
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    if (encoder) pelab_write_file_atomic(path, encoder, strlen(encoder));
    snprintf(path, sizeof path, "%s/vocab.bpe", dir);
    if (merges) pelab_write_file_atomic(path, merges, strlen(merges));
    return dir;
}

static const char ENCODER[] = "{\"!\": 0, \",\": 1, \"a\": 2, \"b\": 3, \"c\": 4, \"\\u0120\": 5, \"ab\": 6, "
                              "\"abc\": 7, \"\\u0120a\": 8, \"!,\": 9, \"!,!\": 10, \"<|endoftext|>\": 11}";
static const char MERGES[] = "#version: 0.2\na b\nab c\n\xc4\xa0 a\n! ,!\n! ,\n";

static void test_bpe(void) {
    struct pelab_tokenizer tk;
    const char *dir = vocab_dir("tiny", ENCODER, MERGES);
    CHECK(pelab_tokenizer_load(&tk, "gpt2", dir) == PELAB_OK, "tiny vocabulary: %s", pelab_last_error());
    if (!tk.ops) return;
    CHECK(tk.vocab == 12 && tk.eod == 11 && tk.pad == 11, "vocab %d, <|endoftext|> %d", tk.vocab, tk.eod);
    /* gpt-3-encoder under node gives: "abc abc ab a" -> [7,5,7,5,6,8]; "!,!" -> [10] (the pair
     * ("!,", "!") takes the rank of the merge "! ,!" through the text "!,,!"). */
    CHECK(strcmp(ids_of(&tk, "abc abc ab a", 12), "7 5 7 5 6 8") == 0, "merges: %s", ids_of(&tk, "abc abc ab a", 12));
    CHECK(strcmp(ids_of(&tk, "!,!", 3), "10") == 0, "the 'a,b' rank lookup: %s", ids_of(&tk, "!,!", 3));
    CHECK(strcmp(ids_of(&tk, "ba", 2), "3 2") == 0, "no merge");
    CHECK(strstr(ids_of(&tk, "abz", 3), "input: byte 0: the byte 0x7a has no token in encoder.json") != NULL,
          "a byte outside the vocabulary: %s", ids_of(&tk, "abz", 3));
    CHECK(round_trips(&tk, "abc abc ab a !,!", 16), "round trip");
    /* the piece cache gives the same ids the second time */
    CHECK(strcmp(ids_of(&tk, "abc abc ab a", 12), "7 5 7 5 6 8") == 0, "cached");
    pelab_tokenizer_free(&tk);

    /* Files that do not parse: one line naming the file. */
    static const struct { const char *enc, *bpe, *fault, *file; } bad[] = {
        {NULL, MERGES, "not found", "encoder.json"},
        {"{\"a\": 0,}", MERGES, "not GPT-2's encoder.json", "encoder.json"},
        {"[1, 2]", MERGES, "expected an object", "encoder.json"},
        {"{\"a\": 0, \"b\": 0}", MERGES, "id 0 is given to two tokens", "encoder.json"},
        {"{\"a\": 0, \"b\": 5}", MERGES, "not an integer in 0..1", "encoder.json"},
        {"{\"a\": 0, \"\\u4e2d\": 1}", MERGES, "outside GPT-2's byte alphabet", "encoder.json"},
        {ENCODER, "#version: 0.2\na b\nab c d\n", "line 3: expected a merge of two symbols", "vocab.bpe"},
        {ENCODER, "#version: 0.2\na \xe4\xb8\xad\n", "line 2: a symbol has a character outside", "vocab.bpe"},
        {ENCODER, "#version: 0.2", "no merge lines", "vocab.bpe"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu", i);
        dir = vocab_dir(name, bad[i].enc, bad[i].bpe);
        int rc = pelab_tokenizer_load(&tk, "gpt2", dir);
        CHECK(rc == PELAB_ERR_RUNTIME, "bad vocabulary %zu loaded (rc %d)", i, rc);
        const char *msg = pelab_last_error();
        CHECK(strstr(msg, bad[i].fault) && strstr(msg, bad[i].file) && strstr(msg, dir) && !strchr(msg, '\n'),
              "bad vocabulary %zu: '%s' not in: %s", i, bad[i].fault, msg);
        CHECK(tk.ops == NULL && tk.state == NULL, "nothing left loaded");
    }
}

/* ---- BPE against the package's loop on random vocabularies ------------------------------------ */

/* A random vocabulary over letters "abc" and punctuation "!," (pieces: runs of one class): merges
 * of tokens of one class with distinct "x,y" texts, then shuffled, so ranks need not grow along
 * the merges (a merge can rank below the merges that make its parts), and commas make pairs whose
 * "x,y" text is another merge's. */
#define RV_TOKENS 96
#define RV_LEN 16
struct rvocab {
    char tok[RV_TOKENS][RV_LEN];       /* id order: the 5 characters, then merge results */
    int ntok;
    char merge[RV_TOKENS][2][RV_LEN];  /* rank order */
    int nmerge;
};

static uint64_t rv_state;
static uint32_t rv_next(void) {
    rv_state = rv_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rv_state >> 33);
}

static int rv_letter(char c) { return c >= 'a' && c <= 'c'; }

static int rv_find_tok(const struct rvocab *v, const char *t, size_t n) {
    for (int i = 0; i < v->ntok; i++)
        if (strlen(v->tok[i]) == n && memcmp(v->tok[i], t, n) == 0) return i;
    return -1;
}

static void rv_build(struct rvocab *v) {
    memset(v, 0, sizeof *v);
    const char *chars = "abc!,";
    for (int i = 0; i < 5; i++) v->tok[v->ntok++][0] = chars[i];
    for (int tries = 0; tries < 2000 && v->nmerge < 60 && v->ntok < RV_TOKENS; tries++) {
        const char *x = v->tok[rv_next() % v->ntok], *y = v->tok[rv_next() % v->ntok];
        size_t lx = strlen(x), ly = strlen(y);
        if (rv_letter(x[0]) != rv_letter(y[0]) || lx + ly >= RV_LEN) continue;
        char text[2 * RV_LEN + 2];
        snprintf(text, sizeof text, "%s,%s", x, y);
        int dup = 0;
        for (int m = 0; m < v->nmerge && !dup; m++) {
            char other[2 * RV_LEN + 2];
            snprintf(other, sizeof other, "%s,%s", v->merge[m][0], v->merge[m][1]);
            dup = strcmp(text, other) == 0;
        }
        if (dup) continue;
        strcpy(v->merge[v->nmerge][0], x);
        strcpy(v->merge[v->nmerge][1], y);
        v->nmerge++;
        char xy[2 * RV_LEN];
        snprintf(xy, sizeof xy, "%s%s", x, y);
        if (rv_find_tok(v, xy, strlen(xy)) < 0) strcpy(v->tok[v->ntok++], xy);
    }
    for (int m = v->nmerge - 1; m > 0; m--) { /* Fisher-Yates */
        int k = (int)(rv_next() % (uint32_t)(m + 1));
        char t[2][RV_LEN];
        memcpy(t, v->merge[m], sizeof t);
        memcpy(v->merge[m], v->merge[k], sizeof t);
        memcpy(v->merge[k], t, sizeof t);
    }
}

/* The rank of the text "x,y" (as the package keys its merges), or -1. */
static int rv_rank(const struct rvocab *v, const char *x, size_t lx, const char *y, size_t ly) {
    for (int m = 0; m < v->nmerge; m++) {
        size_t a = strlen(v->merge[m][0]), b = strlen(v->merge[m][1]);
        char text[2 * RV_LEN + 2], want[2 * RV_LEN + 2];
        if (lx + ly != a + b) continue;
        snprintf(text, sizeof text, "%.*s,%.*s", (int)lx, x, (int)ly, y);
        snprintf(want, sizeof want, "%s,%s", v->merge[m][0], v->merge[m][1]);
        if (strcmp(text, want) == 0) return m;
    }
    return -1;
}

/* gpt-3-encoder's bpe() on one piece, transcribed: of the pairs of lowest rank the last one is the
 * bigram, and each of its occurrences, left to right, is merged; until no pair ranks. Appends
 * the ids to buf as " id". */
static void rv_reference(const struct rvocab *v, const char *p, size_t n, char *buf, size_t size) {
    size_t off[512], len[512], ns = n;
    for (size_t i = 0; i < n; i++) off[i] = i, len[i] = 1;
    while (ns > 1) {
        int best = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < ns; i++) {
            int r = rv_rank(v, p + off[i], len[i], p + off[i + 1], len[i + 1]);
            if (r >= 0 && (best < 0 || r <= best)) best = r, at = i;
        }
        if (best < 0) break;
        size_t f0 = off[at], fl = len[at], s0 = off[at + 1], sl = len[at + 1], w = 0;
        for (size_t i = 0; i < ns;) {
            if (i + 1 < ns && len[i] == fl && len[i + 1] == sl && !memcmp(p + off[i], p + f0, fl) &&
                !memcmp(p + off[i + 1], p + s0, sl)) {
                off[w] = off[i], len[w++] = fl + sl;
                i += 2;
            } else {
                off[w] = off[i], len[w++] = len[i];
                i++;
            }
        }
        ns = w;
    }
    for (size_t i = 0; i < ns; i++) {
        int id = rv_find_tok(v, p + off[i], len[i]);
        if (id >= 0) {
            snprintf(buf + strlen(buf), size - strlen(buf), " %d", id);
        } else { /* a symbol no merge result spells: its bytes */
            for (size_t k = 0; k < len[i]; k++)
                snprintf(buf + strlen(buf), size - strlen(buf), " %d", rv_find_tok(v, p + off[i] + k, 1));
        }
    }
}

static void test_bpe_random(void) {
    int compared = 0, differ = 0;
    for (int vocab = 0; vocab < 40; vocab++) {
        rv_state = 0x5EED0000u + (uint64_t)vocab;
        static struct rvocab v;
        rv_build(&v);
        char enc[8192] = "{", bpe[4096] = "#version: 0.2\n", name[32];
        for (int i = 0; i < v.ntok; i++)
            snprintf(enc + strlen(enc), sizeof enc - strlen(enc), "\"%s\": %d, ", v.tok[i], i);
        snprintf(enc + strlen(enc), sizeof enc - strlen(enc), "\"<|endoftext|>\": %d}", v.ntok);
        for (int m = 0; m < v.nmerge; m++)
            snprintf(bpe + strlen(bpe), sizeof bpe - strlen(bpe), "%s %s\n", v.merge[m][0], v.merge[m][1]);
        snprintf(name, sizeof name, "rv%d", vocab);
        struct pelab_tokenizer tk;
        if (pelab_tokenizer_load(&tk, "gpt2", vocab_dir(name, enc, bpe)) != PELAB_OK) {
            CHECK(0, "random vocabulary %d: %s", vocab, pelab_last_error());
            continue;
        }
        for (int t = 0; t < 50; t++) {
            /* one piece of letters or of punctuation, 1..300 bytes, from a skewed alphabet so that
             * long merges happen */
            char s[301];
            size_t n = 1 + rv_next() % 300;
            int letters = rv_next() % 2;
            for (size_t i = 0; i < n; i++) {
                uint32_t r = rv_next() % 8;
                s[i] = letters ? "aaaabbbc"[r] : "!!!!,,,!"[r];
            }
            static char want[8192];
            want[0] = '\0';
            rv_reference(&v, s, n, want, sizeof want);
            const char *got = ids_of(&tk, s, n);
            compared++;
            if (strcmp(got, want + 1) != 0 && differ++ < 3)
                CHECK(0, "vocabulary %d, '%.*s': ids %s, the package's loop gives %s", vocab, (int)n,
                      s, got, want + 1);
        }
        pelab_tokenizer_free(&tk);
    }
    CHECK(compared == 2000 && differ == 0, "%d of %d pieces differ from the package's loop", differ,
          compared);
}

int main(void) {
    if (!tmpdir_create("pelab-tokenizers")) return 1;
    test_registry();
    test_byte();
    test_dna();
    test_jsb();
    test_split();
    test_unicode();
    test_bpe();
    test_bpe_random();
    tmpdir_remove();
    return check_report("test_tokenizers");
}
