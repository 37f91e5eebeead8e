/* qa — long-context retrieval, RULER-style (Hsieh et al. 2024, "RULER: What's the Real Context
 * Size of Your Long-Context Language Models?"), built from the installed text corpora: a fact
 * planted at a random depth of a haystack of real text, a question at the end, and the loss on
 * the answer's tokens only. Variant `passkey` (Mohtashami & Jaggi 2023, "Landmark Attention"):
 *
 *   hay[0..a) ␣The pass key is K. Remember it. K is the pass key.␣ hay[a..h) ␣What is the pass
 *   key? The pass key is␣ K
 *
 * K: --qa-digits random digits (the first not 0). The haystack is a window of the text task's
 * documents of the same split (training: a random training window; val and test: their evaluation
 * windows in order), cut to h tokens so that the whole example is T+1 tokens (T = --seq-len); the
 * needle goes in at token a, uniform in 0..h. Each piece is tokenized apart (the number too), so
 * the answer's tokens are those of K alone, with the same tokenizer as the base run (byte or
 * gpt2). Example i of a split is a function of (data-seed, split, i) alone.
 *
 * The model reads tokens 0..T-1 at positions 0..T-1 and is scored on predicting each answer token
 * (targets -1 elsewhere); the evaluation reports the loss over answer tokens (answer-span NLL),
 * the fraction of answer tokens predicted right (teacher-forced) and the exact match: examples
 * whose every answer token is the argmax, i.e. whose greedy continuation of the question is the
 * answer token for token. A --seq-len too short for the
 * needle, the question and the answer with an empty haystack is a usage error naming the length
 * needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tasks/seqdocs.h"
#include "data/tasks/tasks.h"
#include "pelab/dataset.h"
#include "pelab/rng.h"
#include "pelab/status.h"

#define SALT 0x9A55CE7A5CAFE17Dull
#define MAX_DIGITS 9

static const struct pelab_optdef options[] = {
    {"qa-variant", PELAB_OPT_CHOICE, "passkey", 0, 0, "passkey",
     "what is planted and asked: passkey (one number in a long haystack)"},
    {"qa-digits", PELAB_OPT_INT, "5", 1, MAX_DIGITS, NULL, "digits of the pass key"},
    {"qa-val-size", PELAB_OPT_INT, "256", 1, 1e7, NULL, "validation examples"},
    {"qa-test-size", PELAB_OPT_INT, "256", 1, 1e7, NULL, "test examples"},
    {"dataset", PELAB_OPT_CHOICE, "sotu", 0, 0, "sotu|moby-dick|brown|bible",
     "corpus of the haystacks (install it first: pelab data install NAME)"},
    {"tokenizer", PELAB_OPT_CHOICE, "gpt2", 0, 0, "byte|gpt2",
     "tokens: bytes (vocabulary 258) or GPT-2's BPE (50257), as the run it fine-tunes"},
    {"seq-len", PELAB_OPT_INT, "1024", 1, 1048576, NULL,
     "context T: haystack, needle, question and answer in T+1 tokens"},
    {"data-dir", PELAB_OPT_STR, "", 0, 0, NULL,
     "where the datasets are installed (empty: $PELAB_DATA, else data/)"},
    {"data-seed", PELAB_OPT_INT, "0", 0, 9007199254740991.0, NULL,
     "mixed into the draw of haystacks, depths and keys: other examples of the same data"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

struct qa {
    struct pelab_task text;        /* the haystacks: the text task at the same length */
    struct pelab_tokenizer tk;     /* for the template's pieces and the keys */
    struct pelab_tokens piece[4];  /* " The pass key is ", ". Remember it. ", " is the pass key. ",
                                    * " What is the pass key? The pass key is " */
    int digits;
    uint64_t size[3];              /* train, val, test examples */
    uint64_t key;
    char shown[4][64];             /* token_text's results, the last four (a caller may print two
                                    * tokens in one call) */
    int next_text;
};

enum { NEEDLE_A, NEEDLE_B, NEEDLE_C, QUESTION };
static const char *const piece_text[4] = {" The pass key is ", ". Remember it. ",
                                          " is the pass key. ",
                                          " What is the pass key? The pass key is "};

static void qa_free(struct pelab_task *t) {
    struct qa *q = t->state;
    if (!q) return;
    if (q->text.ops) pelab_task_free(&q->text);
    for (int i = 0; i < 4; i++) pelab_tokens_free(&q->piece[i]);
    pelab_tokenizer_free(&q->tk);
    free(q);
    t->state = NULL;
}

/* The longest the ids of a key of n digits can be: one id per digit (byte; GPT-2 merges digits,
 * never splits one). */
static size_t key_ids_max(int n) { return (size_t)n; }

static int qa_init(struct pelab_task *t, const struct pelab_opts *opts) {
    int rc = pelab_opts_check(opts, options);
    if (rc) return rc;
    struct qa *q = calloc(1, sizeof *q);
    if (!q) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    t->state = q;
    q->digits = (int)pelab_opt_int(opts, options, "qa-digits");
    q->size[PELAB_SPLIT_TRAIN] = SEQDOCS_TRAIN_SIZE;
    q->size[PELAB_SPLIT_VAL] = (uint64_t)pelab_opt_int(opts, options, "qa-val-size");
    q->size[PELAB_SPLIT_TEST] = (uint64_t)pelab_opt_int(opts, options, "qa-test-size");
    const uint64_t data_seed = (uint64_t)pelab_opt_real(opts, options, "data-seed");
    q->key = pelab_hash64(SALT ^ pelab_hash64(data_seed));
    /* the haystacks: the text task with the same dataset, tokens, length and data */
    static const char *const shared[] = {"dataset", "tokenizer", "seq-len", "data-dir", "data-seed"};
    struct pelab_opts *to = calloc(1, sizeof *to);
    if (!to) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    for (size_t i = 0; i < sizeof shared / sizeof *shared && !rc; i++)
        rc = pelab_opts_set(to, shared[i], pelab_opt_str(opts, options, shared[i]));
    if (!rc) rc = pelab_task_init(&q->text, "text", to);
    free(to);
    if (rc) {
        memset(&q->text, 0, sizeof q->text);
        return rc;
    }
    char vocab_dir[4096];
    const char *dir = pelab_data_dir(pelab_opt_str(opts, options, "data-dir"));
    if (snprintf(vocab_dir, sizeof vocab_dir, "%s/sources/gpt2", dir) >= (int)sizeof vocab_dir)
        return pelab_fail(PELAB_ERR_USAGE, "data directory '%.60s...' is too long", dir);
    if ((rc = pelab_tokenizer_load(&q->tk, pelab_opt_str(opts, options, "tokenizer"), vocab_dir)))
        return rc;
    size_t fixed = 3 * key_ids_max(q->digits); /* the key twice in the needle, once answered */
    for (int i = 0; i < 4 && !rc; i++) {
        rc = q->tk.ops->encode(&q->tk, piece_text[i], strlen(piece_text[i]), "the qa template",
                               &q->piece[i]);
        fixed += q->piece[i].len;
    }
    if (rc) return rc;
    t->vocab = q->text.vocab;
    t->seq_len = q->text.seq_len;
    t->pad = q->text.pad;
    if ((size_t)t->seq_len + 1 < fixed)
        return pelab_fail(PELAB_ERR_USAGE, "--seq-len %d: a passkey example of %d digits needs "
                          "%zu tokens for the needle, the question and the answer before any "
                          "haystack (--seq-len %zu at least)", t->seq_len, q->digits, fixed,
                          fixed - 1);
    return PELAB_OK;
}

static uint64_t qa_split_size(const struct pelab_task *t, enum pelab_split split) {
    const struct qa *q = t->state;
    return split <= PELAB_SPLIT_TEST ? q->size[split] : 0;
}

/* Appends n ids to row at *len. */
static void put(int32_t *row, size_t *len, const int32_t *ids, size_t n) {
    memcpy(row + *len, ids, n * sizeof *ids);
    *len += n;
}

static void qa_fill(const struct pelab_task *t, enum pelab_split split, uint64_t first,
                    struct pelab_batch *b) {
    const struct qa *q = t->state;
    const int T = t->seq_len;
    PELAB_ASSERT(b->T >= T && split <= PELAB_SPLIT_TEST);
    struct pelab_batch hay;
    PELAB_ASSERT(pelab_batch_alloc(&hay, 1, T) == PELAB_OK);
    int32_t *seq = malloc(((size_t)T + 1) * sizeof *seq);
    PELAB_ASSERT(seq != NULL);
    for (int r = 0; r < b->B; r++) {
        const uint64_t i = (first + (uint64_t)r) % q->size[split];
        uint64_t h = pelab_hash64(q->key ^ pelab_hash64(((uint64_t)split << 56) ^ i));
        q->text.ops->fill(&q->text, split, split == PELAB_SPLIT_TRAIN ? h : i, &hay);
        size_t n_hay = 0; /* the window's real input tokens */
        while (n_hay < (size_t)T && hay.tokens[n_hay] != t->pad) n_hay++;
        /* the key: digits, the first not 0, its ids */
        char key[MAX_DIGITS + 1];
        h = pelab_hash64(h ^ 1);
        for (int k = 0; k < q->digits; k++) {
            key[k] = (char)('0' + (k == 0 ? 1 + h % 9 : h % 10));
            h /= k == 0 ? 9 : 10;
        }
        key[q->digits] = '\0';
        struct pelab_tokens kid = {0};
        PELAB_ASSERT(q->tk.ops->encode(&q->tk, key, (size_t)q->digits, "the pass key", &kid) == PELAB_OK);
        const size_t fixed = q->piece[NEEDLE_A].len + q->piece[NEEDLE_B].len + q->piece[NEEDLE_C].len +
                             q->piece[QUESTION].len + 3 * kid.len;
        size_t room = (size_t)T + 1 - fixed; /* qa_init checked that it fits */
        if (n_hay > room) n_hay = room;
        const size_t a = (size_t)(pelab_hash64(h ^ 2) % (n_hay + 1));
        size_t len = 0;
        put(seq, &len, hay.tokens, a);
        put(seq, &len, q->piece[NEEDLE_A].ids, q->piece[NEEDLE_A].len);
        put(seq, &len, kid.ids, kid.len);
        put(seq, &len, q->piece[NEEDLE_B].ids, q->piece[NEEDLE_B].len);
        put(seq, &len, kid.ids, kid.len);
        put(seq, &len, q->piece[NEEDLE_C].ids, q->piece[NEEDLE_C].len);
        put(seq, &len, hay.tokens + a, n_hay - a);
        put(seq, &len, q->piece[QUESTION].ids, q->piece[QUESTION].len);
        const size_t answer = len;
        put(seq, &len, kid.ids, kid.len);
        pelab_tokens_free(&kid);
        int32_t *tok = b->tokens + (size_t)r * b->T, *tgt = b->targets + (size_t)r * b->T;
        int32_t *pos = b->pos + (size_t)r * b->T;
        for (int p = 0; p < b->T; p++) {
            tok[p] = (size_t)p + 1 < len ? seq[p] : t->pad;
            tgt[p] = (size_t)p + 1 < len && (size_t)p + 1 >= answer ? seq[p + 1] : -1;
            pos[p] = p;
        }
    }
    free(seq);
    pelab_batch_free(&hay);
}

static const char *qa_token_text(const struct pelab_task *t, int32_t token) {
    struct qa *q = t->state;
    char *out = q->shown[q->next_text];
    q->next_text = (q->next_text + 1) % 4;
    snprintf(out, sizeof q->shown[0], "%s", q->text.ops->token_text(&q->text, token));
    return out;
}

const struct pelab_task_ops pelab_task_qa = {
    .name = "qa",
    .summary = "long-context retrieval from text haystacks (RULER-style): passkey; loss, "
               "accuracy and exact match of the answer",
    .options = options,
    .init = qa_init,
    .free = qa_free,
    .split_size = qa_split_size,
    .fill = qa_fill,
    .token_text = qa_token_text,
    .eval_options = seqdocs_eval_options,
};
