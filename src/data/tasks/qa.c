/* qa — long-context retrieval, RULER-style (Hsieh et al. 2024, "RULER: What's the Real Context
 * Size of Your Long-Context Language Models?"), built from the installed text corpora: a fact
 * planted at a random depth of a haystack of real text, a question at the end, and the loss on
 * the answer's tokens only. Variant `passkey` (Mohtashami & Jaggi 2023, "Landmark Attention"):
 *
 *   hay[0..a) ␣The pass key is K. Remember it. K is the pass key.␣ hay[a..h) ␣What is the pass
 *   key? The pass key is␣ K .
 *
 * Variant `kv` (RULER's multi-key needles): --qa-facts facts " The value of key W is V. ", W six
 * random lower-case letters (distinct within an example), V --qa-digits digits, each at its own
 * depth (in the order drawn), then " What is the value of key W? The value is " V "." for one of
 * them.
 * Variant `multi` (RULER's multi-value needles): the facts share one key W, and the question
 * " What are all the values of key W? The values are " is answered by every V in the order they
 * appear, ", " between them, then "." (all scored). Every answer ends with the scored ".", so a
 * fine-tuned model learns where its answer stops (greedy generation: pelab/qa_sweep.h).
 *
 * K: --qa-digits random digits (the first not 0). The haystack is a window of the text task's
 * documents of the same split (training: a random training window; val and test: their windows
 * of T tokens in order, from the documents of at least T+1 tokens where the split has any), cut
 * to h tokens so that the whole example is T+1 tokens (T = --seq-len); the needle goes in at
 * token a = floor(u·(h+1)), u uniform in [0,1): example i keeps its keys, values, question and
 * relative depths at every T, only its haystack grows. Each piece is tokenized apart (the number
 * too), so the answer's tokens are those of K alone (and the end's), with the same tokenizer as
 * the base run (byte or gpt2). Example i of a split is a function of (data-seed, split, i) alone.
 *
 * The model reads tokens 0..T-1 at positions 0..T-1 and is scored on predicting each answer token
 * (targets -1 elsewhere); the evaluation reports the loss over answer tokens (answer-span NLL),
 * the fraction of answer tokens predicted right (teacher-forced) and the exact match: examples
 * whose every answer token is the argmax, i.e. whose greedy continuation of the question is the
 * answer token for token. A --seq-len too short for the needle, the question and the answer with
 * an empty haystack is a usage error naming the length needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tasks/seqdocs.h"
#include "data/tasks/qa.h"
#include "data/tasks/tasks.h"
#include "pelab/dataset.h"
#include "pelab/rng.h"
#include "pelab/status.h"

#define SALT 0x9A55CE7A5CAFE17Dull
#define MAX_DIGITS 9
#define MAX_FACTS 16
#define KEY_LETTERS 6 /* kv: a key is this many random lower-case letters */
#define IDS_MAX 32    /* ids of one key or value: at most one per character */

static const struct pelab_optdef options[] = {
    {"qa-variant", PELAB_OPT_CHOICE, "passkey", 0, 0, "passkey|kv|multi",
     "what is planted and asked: passkey (one number in a long haystack), kv (--qa-facts "
     "key-value facts, the value of one key asked) or multi (--qa-facts values of one key, all "
     "asked)"},
    {"qa-digits", PELAB_OPT_INT, "5", 1, MAX_DIGITS, NULL, "digits of the pass key, or of each value"},
    {"qa-facts", PELAB_OPT_INT, "4", 1, MAX_FACTS, NULL,
     "kv, multi: facts planted, each at its own depth (passkey plants one)"},
    {"qa-val-size", PELAB_OPT_INT, "256", 1, 1e7, NULL, "validation examples"},
    {"qa-test-size", PELAB_OPT_INT, "256", 1, 1e7, NULL, "test examples"},
    {"dataset", PELAB_OPT_CHOICE, "sotu", 0, 0, "sotu|moby-dick|brown|bible",
     "corpus of the haystacks (install it first: pelab data install NAME)"},
    {"tokenizer", PELAB_OPT_CHOICE, "gpt2", 0, 0, "byte|gpt2",
     "tokens: bytes (vocabulary 258) or GPT-2's BPE (50257), as the run it fine-tunes"},
    {"seq-len", PELAB_OPT_INT, "1024", 1, 1048576, NULL,
     "context T: haystack, needle, question and answer in T+1 tokens"},
    PELAB_OPT_ROW_DATA_DIR,
    {"data-seed", PELAB_OPT_INT, "0", 0, 9007199254740991.0, NULL,
     "mixed into the draw of haystacks, depths and keys: other examples of the same data"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

enum { VARIANT_PASSKEY, VARIANT_KV, VARIANT_MULTI };

/* The template's pieces (tokenized once at init). */
enum { NEEDLE_A, NEEDLE_B, NEEDLE_C, QUESTION, KV_A, KV_B, KV_C, KV_Q1, KV_Q2, MULTI_Q1, MULTI_Q2,
       MULTI_SEP, END, PIECES };
static const char *const piece_text[PIECES] = {
    " The pass key is ", ". Remember it. ", " is the pass key. ",
    " What is the pass key? The pass key is ",
    " The value of key ", " is ", ". ", " What is the value of key ", "? The value is ",
    " What are all the values of key ", "? The values are ", ", ", "."};

struct qa {
    struct pelab_task text;        /* the haystacks: the text task at the same length */
    struct pelab_tokenizer tk;     /* for the template's pieces, keys and values */
    struct pelab_tokens piece[PIECES];
    int variant, digits, facts;
    uint64_t size[3];              /* train, val, test examples */
    uint64_t key;
    /* fill's scratch, allocated once: the haystack window, the example, one key's and one
     * value's ids per fact */
    struct pelab_batch hay;
    int32_t *seq;                  /* (T+1,) */
    struct pelab_tokens word[MAX_FACTS], value[MAX_FACTS];
    char shown[4][64];             /* token_text's results, the last four (a caller may print two
                                    * tokens in one call) */
    int next_text;
    int full[3];                   /* val, test: haystacks from windows of T tokens (documents of
                                    * at least T+1 tokens), when the split has any */
};

static void qa_free(struct pelab_task *t) {
    struct qa *q = t->state;
    if (!q) return;
    if (q->text.ops) pelab_task_free(&q->text);
    for (int i = 0; i < PIECES; i++) pelab_tokens_free(&q->piece[i]);
    for (int i = 0; i < MAX_FACTS; i++) {
        pelab_tokens_free(&q->word[i]);
        pelab_tokens_free(&q->value[i]);
    }
    if (q->hay.tokens) pelab_batch_free(&q->hay);
    free(q->seq);
    pelab_tokenizer_free(&q->tk);
    free(q);
    t->state = NULL;
}

/* The longest the ids of n characters (digits, letters) can be: one per character (byte; GPT-2
 * merges characters, never splits one). */
static size_t ids_max(int n) { return (size_t)n; }

/* Room for IDS_MAX ids, so that encoding a key or value in fill never allocates. */
static int reserve_ids(struct pelab_tokens *t) {
    for (int i = 0; i < IDS_MAX; i++)
        if (pelab_tokens_push(t, 0)) return PELAB_ERR_RUNTIME;
    t->len = 0;
    return PELAB_OK;
}

static int qa_init(struct pelab_task *t, const struct pelab_opts *opts) {
    int rc = pelab_opts_check(opts, options);
    if (rc) return rc;
    struct qa *q = calloc(1, sizeof *q);
    if (!q) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    t->state = q;
    q->variant = pelab_opt_choice(opts, options, "qa-variant");
    q->digits = (int)pelab_opt_int(opts, options, "qa-digits");
    q->facts = q->variant != VARIANT_PASSKEY ? (int)pelab_opt_int(opts, options, "qa-facts") : 1;
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
    for (int i = 0; i < PIECES && !rc; i++)
        rc = q->tk.ops->encode(&q->tk, piece_text[i], strlen(piece_text[i]), "the qa template",
                               &q->piece[i]);
    for (int i = 0; i < MAX_FACTS && !rc; i++)
        if (reserve_ids(&q->word[i]) || reserve_ids(&q->value[i]))
            rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    if (rc) return rc;
    /* the longest an example's template can be: what the haystack must leave room for */
    const struct pelab_tokens *P = q->piece;
    const size_t val = ids_max(q->digits), word = ids_max(KEY_LETTERS);
    const size_t facts = (size_t)q->facts * (P[KV_A].len + word + P[KV_B].len + val + P[KV_C].len);
    size_t fixed = P[END].len + (q->variant == VARIANT_PASSKEY
                       ? P[NEEDLE_A].len + P[NEEDLE_B].len + P[NEEDLE_C].len + P[QUESTION].len + 3 * val
                   : q->variant == VARIANT_KV
                       ? facts + P[KV_Q1].len + word + P[KV_Q2].len + val
                       : facts + P[MULTI_Q1].len + word + P[MULTI_Q2].len + (size_t)q->facts * val +
                             (size_t)(q->facts - 1) * P[MULTI_SEP].len);
    t->vocab = q->text.vocab;
    t->seq_len = q->text.seq_len;
    t->pad = q->text.pad;
    if ((size_t)t->seq_len + 1 < fixed) {
        if (q->variant == VARIANT_PASSKEY)
            return pelab_fail(PELAB_ERR_USAGE, "--seq-len %d: a passkey example of %d digits needs "
                              "%zu tokens for the needle, the question and the answer before any "
                              "haystack (--seq-len %zu at least)", t->seq_len, q->digits, fixed,
                              fixed - 1);
        return pelab_fail(PELAB_ERR_USAGE, "--seq-len %d: a %s example of %d facts (values of %d "
                          "digits) needs %zu tokens for the facts, the question and the answer "
                          "before any haystack (--seq-len %zu at least)", t->seq_len,
                          q->variant == VARIANT_KV ? "kv" : "multi", q->facts, q->digits, fixed,
                          fixed - 1);
    }
    /* val and test haystacks: whole windows of T tokens where the split's documents reach T+1,
     * so that an evaluation at a longer T has a haystack of that length */
    for (int s = PELAB_SPLIT_VAL; s <= PELAB_SPLIT_TEST; s++) {
        struct pelab_window_count c;
        q->full[s] = q->text.ops->windows(&q->text, (enum pelab_split)s, t->seq_len, 1, &c) > 0;
    }
    if (pelab_batch_alloc(&q->hay, 1, t->seq_len) ||
        !(q->seq = malloc(((size_t)t->seq_len + 1) * sizeof *q->seq)))
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
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

/* n characters drawn from h: digits (the first not 0) or lower-case letters; their ids into out
 * (which has room: reserve_ids). */
static void draw(const struct qa *q, uint64_t h, int n, int letters, struct pelab_tokens *out) {
    char text[16];
    for (int k = 0; k < n; k++) {
        h = pelab_hash64(h ^ (uint64_t)k);
        text[k] = letters ? (char)('a' + h % 26) : (char)('0' + (k == 0 ? 1 + h % 9 : h % 10));
    }
    out->len = 0;
    PELAB_ASSERT(q->tk.ops->encode(&q->tk, text, (size_t)n, "a qa key", out) == PELAB_OK);
}

static int same_ids(const struct pelab_tokens *a, const struct pelab_tokens *b) {
    return a->len == b->len && memcmp(a->ids, b->ids, a->len * sizeof *a->ids) == 0;
}

static void put_tokens(int32_t *row, size_t *len, const struct pelab_tokens *t) {
    put(row, len, t->ids, t->len);
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static void qa_fill(const struct pelab_task *t, enum pelab_split split, uint64_t first,
                    struct pelab_batch *b) {
    struct qa *q = t->state; /* fill's scratch is the task's own */
    const int T = t->seq_len, F = q->facts, kv = q->variant == VARIANT_KV;
    const int multi = q->variant == VARIANT_MULTI, facts = kv || multi;
    const struct pelab_tokens *P = q->piece;
    PELAB_ASSERT(b->T >= T && split <= PELAB_SPLIT_TEST);
    int32_t *seq = q->seq;
    for (int r = 0; r < b->B; r++) {
        const uint64_t i = (first + (uint64_t)r) % q->size[split];
        const uint64_t h = pelab_hash64(q->key ^ pelab_hash64(((uint64_t)split << 56) ^ i));
        if (split != PELAB_SPLIT_TRAIN && q->full[split])
            q->text.ops->fill_windows(&q->text, split, T, 1, i, &q->hay);
        else
            q->text.ops->fill(&q->text, split, split == PELAB_SPLIT_TRAIN ? h : i, &q->hay);
        size_t n_hay = 0; /* the window's real input tokens */
        while (n_hay < (size_t)T && q->hay.tokens[n_hay] != t->pad) n_hay++;
        /* the facts' values and keys: kv's distinct, multi's one key for all; the one asked */
        size_t fixed = 0;
        for (int f = 0; f < F; f++) {
            draw(q, pelab_hash64(h ^ (0x100u + (uint64_t)f)), q->digits, 0, &q->value[f]);
            if (!facts) break;
            uint64_t salt = 0;
            int again;
            do { /* kv: another key when it repeats an earlier one */
                draw(q, pelab_hash64(h ^ (multi ? 0x200u : 0x200u + (uint64_t)f) ^ (salt++ << 32)),
                     KEY_LETTERS, 1, &q->word[f]);
                again = 0;
                for (int g = 0; kv && g < f; g++) again |= same_ids(&q->word[g], &q->word[f]);
            } while (again);
            fixed += P[KV_A].len + q->word[f].len + P[KV_B].len + q->value[f].len + P[KV_C].len;
        }
        const int asked = kv ? (int)(pelab_hash64(h ^ 3) % (uint64_t)F) : 0;
        const struct pelab_tokens *answer_ids = &q->value[asked];
        if (kv) {
            fixed += P[KV_Q1].len + q->word[asked].len + P[KV_Q2].len + answer_ids->len;
        } else if (multi) {
            fixed += P[MULTI_Q1].len + q->word[0].len + P[MULTI_Q2].len + (size_t)(F - 1) * P[MULTI_SEP].len;
            for (int f = 0; f < F; f++) fixed += q->value[f].len;
        } else {
            fixed = P[NEEDLE_A].len + P[NEEDLE_B].len + P[NEEDLE_C].len + P[QUESTION].len +
                    3 * answer_ids->len;
        }
        fixed += P[END].len;
        const size_t room = (size_t)T + 1 - fixed; /* qa_init checked that it fits */
        if (n_hay > room) n_hay = room;
        /* where each fact goes in, in order: depth u·(n_hay+1), u uniform in [0,1) from h, so that
         * an example keeps its relative depths at every length */
        size_t depth[MAX_FACTS];
        for (int f = 0; f < F; f++) {
            const double u = (double)(pelab_hash64(h ^ (0x300u + (uint64_t)f)) >> 11) * 0x1p-53;
            depth[f] = (size_t)(u * (double)(n_hay + 1));
            if (depth[f] > n_hay) depth[f] = n_hay;
        }
        qsort(depth, (size_t)F, sizeof *depth, cmp_size);
        size_t len = 0, from = 0;
        for (int f = 0; f < F; f++) {
            put(seq, &len, q->hay.tokens + from, depth[f] - from);
            from = depth[f];
            if (facts) {
                put_tokens(seq, &len, &P[KV_A]);
                put_tokens(seq, &len, &q->word[f]);
                put_tokens(seq, &len, &P[KV_B]);
                put_tokens(seq, &len, &q->value[f]);
                put_tokens(seq, &len, &P[KV_C]);
            } else {
                put_tokens(seq, &len, &P[NEEDLE_A]);
                put_tokens(seq, &len, answer_ids);
                put_tokens(seq, &len, &P[NEEDLE_B]);
                put_tokens(seq, &len, answer_ids);
                put_tokens(seq, &len, &P[NEEDLE_C]);
            }
        }
        put(seq, &len, q->hay.tokens + from, n_hay - from);
        if (kv) {
            put_tokens(seq, &len, &P[KV_Q1]);
            put_tokens(seq, &len, &q->word[asked]);
            put_tokens(seq, &len, &P[KV_Q2]);
        } else if (multi) {
            put_tokens(seq, &len, &P[MULTI_Q1]);
            put_tokens(seq, &len, &q->word[0]);
            put_tokens(seq, &len, &P[MULTI_Q2]);
        } else {
            put_tokens(seq, &len, &P[QUESTION]);
        }
        const size_t answer = len;
        if (multi) /* every value, in the order they appear, ", " between */
            for (int f = 0; f < F; f++) {
                if (f) put_tokens(seq, &len, &P[MULTI_SEP]);
                put_tokens(seq, &len, &q->value[f]);
            }
        else
            put_tokens(seq, &len, answer_ids);
        put_tokens(seq, &len, &P[END]); /* scored: where the answer ends */
        PELAB_ASSERT(len <= (size_t)T + 1);
        int32_t *tok = b->tokens + (size_t)r * b->T, *tgt = b->targets + (size_t)r * b->T;
        int32_t *pos = b->pos + (size_t)r * b->T;
        for (int p = 0; p < b->T; p++) {
            tok[p] = (size_t)p + 1 < len ? seq[p] : t->pad;
            tgt[p] = (size_t)p + 1 < len && (size_t)p + 1 >= answer ? seq[p + 1] : -1;
            pos[p] = p;
        }
    }
}

static const char *qa_token_text(const struct pelab_task *t, int32_t token) {
    struct qa *q = t->state;
    char *out = q->shown[q->next_text];
    q->next_text = (q->next_text + 1) % 4;
    snprintf(out, sizeof q->shown[0], "%s", q->text.ops->token_text(&q->text, token));
    return out;
}

int pelab_qa_decode(const struct pelab_task *t, const int32_t *ids, size_t n,
                    struct pelab_bytes *out) {
    PELAB_ASSERT(t->ops == &pelab_task_qa);
    const struct qa *q = t->state;
    return q->tk.ops->decode(&q->tk, ids, n, out);
}

const char *pelab_qa_answer_chars(const struct pelab_task *t) {
    if (t->ops != &pelab_task_qa) return NULL;
    const struct qa *q = t->state;
    return q->variant == VARIANT_MULTI ? "0123456789, " : "0123456789";
}

const char *pelab_qa_variant(const struct pelab_task *t) {
    if (t->ops != &pelab_task_qa) return NULL;
    static const char *const names[] = {"passkey", "kv", "multi"};
    return names[((const struct qa *)t->state)->variant];
}

const struct pelab_task_ops pelab_task_qa = {
    .name = "qa",
    .summary = "long-context retrieval from text haystacks (RULER-style): passkey, kv, multi; loss, "
               "accuracy and exact match of the answer",
    .options = options,
    .init = qa_init,
    .free = qa_free,
    .split_size = qa_split_size,
    .fill = qa_fill,
    .token_text = qa_token_text,
    .eval_options = seqdocs_eval_options,
    .sweep = PELAB_TASK_SWEEP_QA,
};
