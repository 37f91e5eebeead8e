/* Algorithmic tasks for length generalisation, in the sequence-to-sequence form of the NoPE paper
 * (Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization in
 * Transformers"): an example is a prompt, a separator, the target and an end token,
 *
 *     copy      a k q b | a k q b .          size: symbols
 *     reverse   a k q b | b q k a .          size: symbols
 *     sort      d b c b | b b c d .          size: symbols (sorted by id)
 *     parity    1 0 1 1 | 1 .                size: bits; the answer is their sum mod 2
 *     sum       7 + 5 + 9 | 1 .              size: terms, each 1..9; the answer is the sum mod 10
 *     addition  5 2 7 + 3 8 1 | 9 0 8 .      size: digits of each operand (the first not 0 when
 *                                            size > 1); --addition-reversed: answer least
 *                                            significant digit first
 *     poly      x = - 1 , 2 * x ^ 3 + - 3 * x ^ 0 | 5 .   size: terms; the value mod 10
 *     lego      c = + 1 , a = - c , f = + a ? f | - 1 .   size: variables; --lego-shuffle
 *
 * With --scratchpad (parity, sum, addition) the target works the answer out first: parity
 * `1 0 1 1 | 1 1 0 1 .` (the parity of each prefix), sum `7 + 5 + 9 | 7 2 1 .` (each prefix's sum
 * mod 10), addition `5 2 7 + 3 8 1 | 8 0 0 1 9 0 = 9 0 8 .` (from the right, each column's digit and
 * carry, then = and the answer). Exact match then asks for the whole scratchpad too.
 *
 * and three of the Chomsky-hierarchy tasks of Ruoss et al. 2023, whose parity check is `parity`
 * and whose reverse string is `reverse --algo-symbols 2`:
 *
 *     duplicate-string    a b b | a b b a b b .        size: symbols (--algo-symbols 2)
 *     stack-manipulation  0 1 1 push0 pop pop | 1 0 .  size: tokens (a stack, bottom first, then
 *                                                      actions; the answer top first)
 *     binary-addition     1 1 + 1 0 1 | 0 0 0 1 .      size: bits of both operands less one (3 + 5,
 *                                                      least significant bit first)
 *
 * and the selective copy of Gu & Dao 2023 ("Mamba"), one of the tasks on which the CoPE paper
 * (Golovneva et al. 2024) reports that counting positions by content helps:
 *
 *     selective-copy      _ a _ _ k _ q | a k q .      size: blanks '_'; --selective-copy-items K
 *                                                      symbols (3 here) at random places among them,
 *                                                      copied in order
 *
 * and the loss and the accuracy are taken on the target and the end token only: the model reads
 * the prompt and the separator, and an example is right when every target token is (greedy
 * decoding reproduces a target exactly when each of its tokens is the argmax given the right
 * prefix, so this exact match is the papers' metric). The prompts are bare symbols, not the NoPE
 * paper's English templates ("Copy: ... [SEP]", "Compute ... ?"), so that a size n instance is
 * about 2n tokens whatever the task.
 *
 * Sizes: training and validation examples draw their size uniformly from 1..--algo-train-max L;
 * the test split holds --algo-test-per-size examples of every size 1..M (--algo-test-max, 2L
 * when 0), in order of size, so one evaluation gives the accuracy curve inside and beyond the
 * trained sizes (the NoPE paper tests sizes L+1..2L only). The model's context T holds the
 * longest training example; the test split runs beyond it (each size at its own length in 'pelab
 * eval', at the longest test example's in a whole-split evaluation), as a length sweep does on
 * documents. Shorter examples are padded (no loss there; causal attention keeps padding unseen).
 *
 * Data: example i of split s comes from its own generator seeded with
 * hash64(key[s] ^ hash64(i)), key[s] = hash64(SALT[s] ^ hash64(data-seed)): any example is made
 * on the fly, a split is a pure function of its options.
 *
 * Tokens, one vocabulary for every task: 0 padding, 1 '|' separator, 2 '.' end, 3 '+',
 * 4..13 '0'..'9', 14..65 the symbols 'a'..'z', 'A'..'Z' (--algo-symbols of them), 66..68 the
 * stack's 'pop', 'push0', 'push1', 69..74 '-', '*', '^', '=', ',', '?' (poly, lego, scratchpads),
 * 75 '_' (selective copy's blank); a task's vocabulary ends after the last token it uses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tasks/algo.h"
#include "data/tasks/tasks.h"
#include "pelab/rng.h"
#include "pelab/status.h"

enum { PAD = 0, SEP = 1, END = 2, PLUS = 3, DIGIT0 = 4, SYMBOL0 = 14, SYMBOLS_MAX = 52,
       POP = SYMBOL0 + SYMBOLS_MAX, PUSH0, PUSH1, MINUS, TIMES, POWER, EQUALS, COMMA, QUERY, BLANK };
#define VOCAB (SYMBOL0 + SYMBOLS_MAX) /* the first tasks' vocabulary; each later one added tokens */
#define STACK_VOCAB (PUSH1 + 1)       /* with stack-manipulation's three actions */
#define FULL_VOCAB (QUERY + 1)        /* with poly's, lego's and the scratchpads' signs */
#define BLANK_VOCAB (BLANK + 1)       /* with selective copy's blank */

static const char *const TOKEN_TEXT[BLANK_VOCAB] = {
    "",  "|", ".", "+", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r",
    "s", "t", "u", "v", "w", "x", "y", "z", "A", "B", "C", "D", "E", "F", "G", "H", "I", "J",
    "K", "L", "M", "N", "O", "P", "Q", "R", "S", "T", "U", "V", "W", "X", "Y", "Z",
    "pop", "push0", "push1", "-", "*", "^", "=", ",", "?", "_"};

/* Fixed per-split salts (train, val, test): changing them changes every dataset. */
static const uint64_t SALT[3] = {0xA160C0B7D1A00001ull, 0xA160C0B7D1A00002ull, 0xA160C0B7D1A00003ull};

struct algo;
/* A task: its generator of size-n instances (prompt, *np tokens; target, *nt tokens), the
 * longest prompt plus target of size n, prompt_per_size·n + target_per_size·n + extra +
 * per_item·items, and its vocabulary; with --scratchpad, the target's per size and extra instead. */
struct kind {
    void (*make)(const struct algo *a, struct pelab_rng *rng, int n, int32_t *prompt, int *np,
                 int32_t *target, int *nt);
    int prompt_per_size, target_per_size, extra;
    int vocab;
    int scratch_per_size, scratch_extra;
    int per_item;
};

struct algo {
    const struct kind *kind;
    int train_max, test_max, per_size, symbols, reversed, scratchpad, shuffle, items;
    uint64_t size[2]; /* training and validation examples */
    uint64_t key[3];
};

/* ---- the generators: prompt (*np tokens) and target (*nt tokens) of an instance of size n ---- */

static int32_t symbol(const struct algo *a, struct pelab_rng *rng) {
    return SYMBOL0 + (int32_t)pelab_rng_below(rng, (uint64_t)a->symbols);
}
static int32_t digit(int d) { return DIGIT0 + d; }

static void gen_copy(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t, int *nt) {
    for (int i = 0; i < n; i++) p[i] = t[i] = symbol(a, rng);
    *np = *nt = n;
}

static void gen_reverse(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t, int *nt) {
    for (int i = 0; i < n; i++) p[i] = t[n - 1 - i] = symbol(a, rng);
    *np = *nt = n;
}

static void gen_sort(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t, int *nt) {
    int count[SYMBOLS_MAX] = {0};
    for (int i = 0; i < n; i++) count[(p[i] = symbol(a, rng)) - SYMBOL0]++;
    int k = 0; /* counting sort: the target is the multiset in increasing order */
    for (int s = 0; s < a->symbols; s++)
        while (count[s]--) t[k++] = SYMBOL0 + s;
    *np = *nt = n;
}

static void gen_parity(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t, int *nt) {
    int ones = 0;
    for (int i = 0; i < n; i++) {
        const int b = (int)pelab_rng_below(rng, 2);
        ones += b;
        p[i] = digit(b);
        if (a->scratchpad) t[i] = digit(ones % 2); /* the parity of the bits so far */
    }
    if (!a->scratchpad) t[0] = digit(ones % 2);
    *np = n, *nt = a->scratchpad ? n : 1;
}

static void gen_sum(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t, int *nt) {
    int sum = 0, k = 0;
    for (int i = 0; i < n; i++) {
        const int d = 1 + (int)pelab_rng_below(rng, 9);
        sum += d;
        if (i) p[k++] = PLUS;
        p[k++] = digit(d);
        if (a->scratchpad) t[i] = digit(sum % 10); /* the sum so far, mod 10 */
    }
    if (!a->scratchpad) t[0] = digit(sum % 10);
    *np = k, *nt = a->scratchpad ? n : 1;
}

/* Two n-digit operands, most significant digit first; their sum by the school method from the
 * right (the test checks it against an independent sum). */
static void gen_addition(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t, int *nt) {
    int x[PELAB_SIZES_MAX], y[PELAB_SIZES_MAX], s[PELAB_SIZES_MAX + 1];
    for (int i = 0; i < n; i++) { /* x[0], y[0] the most significant */
        x[i] = i == 0 && n > 1 ? 1 + (int)pelab_rng_below(rng, 9) : (int)pelab_rng_below(rng, 10);
        y[i] = i == 0 && n > 1 ? 1 + (int)pelab_rng_below(rng, 9) : (int)pelab_rng_below(rng, 10);
    }
    int carry = 0, k = 0;
    for (int i = n - 1; i >= 0; i--) { /* the scratchpad: each column's digit and carry, from the right */
        const int d = x[i] + y[i] + carry;
        s[i + 1] = d % 10, carry = d / 10;
        if (a->scratchpad) t[k++] = digit(s[i + 1]), t[k++] = digit(carry);
    }
    s[0] = carry;
    if (a->scratchpad) t[k++] = EQUALS;
    int m = 0;
    for (int i = 0; i < n; i++) p[m++] = digit(x[i]);
    p[m++] = PLUS;
    for (int i = 0; i < n; i++) p[m++] = digit(y[i]);
    *np = m;
    const int first = s[0] ? 0 : 1, len = n + 1 - first; /* no leading zero */
    for (int i = 0; i < len; i++) t[k + (a->reversed ? len - 1 - i : i)] = digit(s[first + i]);
    *nt = k + len;
}

/* ---- the Chomsky-hierarchy tasks of Ruoss et al. 2023 ("Randomized Positional Encodings Boost
 * Length Generalization of Transformers"), in this sequence-to-sequence form: their parity check
 * (regular) is `parity`, their reverse string (context-free) `reverse --algo-symbols 2`. ---- */

/* duplicate-string (context-sensitive): a string of n symbols, then it twice. */
static void gen_duplicate(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t, int *nt) {
    for (int i = 0; i < n; i++) p[i] = t[i] = t[n + i] = symbol(a, rng);
    *np = n, *nt = 2 * n;
}

/* stack-manipulation (deterministic context-free): n tokens, a stack of s bits written bottom to
 * top (s uniform in 1..n-1; 1 when n = 1), then n - s actions, each pop, push0 or push1 (a pop of
 * the empty stack does nothing); the target is the final stack top to bottom (the end token is
 * Ruoss et al.'s terminator). */
static void gen_stack(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t, int *nt) {
    const int s = n == 1 ? 1 : 1 + (int)pelab_rng_below(rng, (uint64_t)(n - 1));
    int32_t stack[PELAB_SIZES_MAX];
    int depth = 0;
    for (int i = 0; i < s; i++) p[i] = stack[depth++] = digit((int)pelab_rng_below(rng, 2));
    for (int i = s; i < n; i++) {
        p[i] = POP + (int32_t)pelab_rng_below(rng, 3);
        if (p[i] == POP) depth -= depth > 0;
        else stack[depth++] = digit(p[i] == PUSH1);
    }
    for (int i = 0; i < depth; i++) t[i] = stack[depth - 1 - i];
    *np = n, *nt = depth;
}

/* binary-addition (context-sensitive): x + y with a and b bits, a + b = n + 1 (a uniform in
 * 1..n), each uniform in 1..2^bits - 1 and written least significant bit first, zero-padded to its
 * bits; the target is x + y least significant bit first, unpadded. Ruoss et al.'s length counts
 * the '+' and both operands: n + 2. */
static void gen_binary_addition(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t,
                                int *nt) {
    const int a_bits = 1 + (int)pelab_rng_below(rng, (uint64_t)n), len[2] = {a_bits, n + 1 - a_bits};
    int x[2][PELAB_SIZES_MAX + 1] = {{0}}, k = 0;
    for (int o = 0; o < 2; o++) {
        int any;
        do { /* uniform in 1..2^len - 1: uniform bits, drawn again when all are 0 */
            any = 0;
            for (int i = 0; i < len[o]; i++) any |= (x[o][i] = (int)pelab_rng_below(rng, 2));
        } while (!any);
        for (int i = 0; i < len[o]; i++) p[k++] = digit(x[o][i]);
        if (o == 0) p[k++] = PLUS;
    }
    int carry = 0, top = 0;
    for (int i = 0; i <= n; i++) { /* the sum's bits, least significant first; top: past its last 1 */
        const int d = x[0][i] + x[1][i] + carry;
        t[i] = digit(d & 1), carry = d >> 1;
        if (d & 1) top = i + 1;
    }
    *np = k, *nt = top;
}

/* selective-copy: K = --selective-copy-items symbols at K places drawn uniformly among the n + K
 * (the rest blanks); the target is the symbols in their order. */
static void gen_selective_copy(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t,
                               int *nt) {
    const int places = n + a->items;
    int left = a->items, k = 0;
    for (int i = 0; i < places; i++) { /* selection sampling: a symbol with probability left / (places − i) */
        const int take = pelab_rng_below(rng, (uint64_t)(places - i)) < (uint64_t)left;
        p[i] = take ? (t[k++] = symbol(a, rng)) : BLANK;
        left -= take;
    }
    *np = n + a->items, *nt = a->items;
}

/* poly: x = v , then n terms c * x ^ e joined by +, c in -3..3, e in 0..3, v in -2..2 (a minus
 * sign is its own token); the answer is the polynomial's value mod 10, in 0..9. */
static void gen_poly(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t, int *nt) {
    const int x = (int)pelab_rng_below(rng, 5) - 2;
    int k = 0, value = 0;
    p[k++] = SYMBOL0 + ('x' - 'a'), p[k++] = EQUALS;
    if (x < 0) p[k++] = MINUS;
    p[k++] = digit(abs(x)), p[k++] = COMMA;
    for (int i = 0; i < n; i++) {
        const int c = (int)pelab_rng_below(rng, 7) - 3, e = (int)pelab_rng_below(rng, 4);
        int power = 1;
        for (int j = 0; j < e; j++) power *= x;
        value += c * power;
        if (i) p[k++] = PLUS;
        if (c < 0) p[k++] = MINUS;
        p[k++] = digit(abs(c)), p[k++] = TIMES, p[k++] = SYMBOL0 + ('x' - 'a'), p[k++] = POWER, p[k++] = digit(e);
    }
    t[0] = digit(((value % 10) + 10) % 10);
    *np = k, *nt = 1;
}

/* lego (Zhang et al. 2022, "Unveiling Transformers with LEGO", as the NoPE paper uses it): a chain
 * of n distinct variables, the first + 1 or - 1, each next + or - the one before, written as
 * clauses `v = + u ,` (--lego-shuffle: in a random order), then `? q` for a variable q from the
 * chain's second half (0-based place uniform in ceil(n/2)..n-1); the answer is q's sign and 1. */
static void gen_lego(const struct algo *a, struct pelab_rng *rng, int n, int32_t *p, int *np, int32_t *t, int *nt) {
    int32_t var[SYMBOLS_MAX];
    int sign[SYMBOLS_MAX], order[SYMBOLS_MAX];
    for (int i = 0; i < SYMBOLS_MAX; i++) var[i] = SYMBOL0 + i;
    for (int i = 0; i < n; i++) { /* n distinct letters: a partial Fisher-Yates shuffle */
        const int j = i + (int)pelab_rng_below(rng, (uint64_t)(SYMBOLS_MAX - i));
        const int32_t v = var[i];
        var[i] = var[j], var[j] = v;
    }
    for (int i = 0; i < n; i++) {
        sign[i] = (int)pelab_rng_below(rng, 2) ? 1 : -1;
        order[i] = i;
    }
    for (int i = n - 1; a->shuffle && i > 0; i--) {
        const int j = (int)pelab_rng_below(rng, (uint64_t)(i + 1)), o = order[i];
        order[i] = order[j], order[j] = o;
    }
    int k = 0;
    for (int c = 0; c < n; c++) {
        const int i = order[c];
        if (c) p[k++] = COMMA;
        p[k++] = var[i], p[k++] = EQUALS, p[k++] = sign[i] > 0 ? PLUS : MINUS;
        p[k++] = i ? var[i - 1] : digit(1);
    }
    const int q = n == 1 ? 0 : (n + 1) / 2 + (int)pelab_rng_below(rng, (uint64_t)(n - (n + 1) / 2));
    int value = 1;
    for (int i = 0; i <= q; i++) value *= sign[i];
    p[k++] = QUERY, p[k++] = var[q];
    t[0] = value > 0 ? PLUS : MINUS, t[1] = digit(1);
    *np = k, *nt = 2;
}

static const struct kind copy_kind = {gen_copy, 1, 1, 0, VOCAB, 0, 0, 0};
static const struct kind reverse_kind = {gen_reverse, 1, 1, 0, VOCAB, 0, 0, 0};
static const struct kind sort_kind = {gen_sort, 1, 1, 0, VOCAB, 0, 0, 0};
/* with --scratchpad: parity and sum n targets (a running value each), addition 2n + 1 + (n + 1),
 * so that prompt and target are at most 2n, 3n - 1 and 5n + 3 */
static const struct kind parity_kind = {gen_parity, 1, 0, 1, VOCAB, 2, 0, 0};
static const struct kind sum_kind = {gen_sum, 2, 0, 1, VOCAB, 3, 0, 0};           /* 2n − 1, 1 */
static const struct kind addition_kind = {gen_addition, 2, 1, 2, VOCAB, 5, 3, 0}; /* 2n + 1, up to n + 1 */
static const struct kind poly_kind = {gen_poly, 7, 0, 5, FULL_VOCAB, 0, 0, 0};  /* up to 7n + 4, 1 */
static const struct kind lego_kind = {gen_lego, 5, 0, 3, FULL_VOCAB, 0, 0, 0};  /* 5n + 1, 2 */
static const struct kind duplicate_string_kind = {gen_duplicate, 1, 2, 0, VOCAB, 0, 0, 0};
static const struct kind stack_manipulation_kind = {gen_stack, 1, 1, 0, STACK_VOCAB, 0, 0, 0};
static const struct kind binary_addition_kind = {gen_binary_addition, 1, 1, 3, VOCAB, 0, 0, 0}; /* n + 2, up to n + 1 */
static const struct kind selective_copy_kind = {gen_selective_copy, 1, 0, 0, BLANK_VOCAB, 0, 0, 2}; /* n + K, K */

static int longest(const struct algo *a, int n) {
    const struct kind *k = a->kind;
    return a->scratchpad ? k->scratch_per_size * n + k->scratch_extra /* prompt and scratchpad target */
                         : k->prompt_per_size * n + k->target_per_size * n + k->extra + k->per_item * a->items;
}

/* ---- the engine --------------------------------------------------------------------------- */

static int algo_init(struct pelab_task *t, const struct pelab_opts *opts, const struct pelab_optdef *table,
                     const struct kind *kind) {
    if (opts) {
        int rc = pelab_opts_check(opts, table);
        if (rc) return rc;
    }
    const int train_max = (int)pelab_opt_int(opts, table, "algo-train-max");
    int test_max = (int)pelab_opt_int(opts, table, "algo-test-max");
    if (!test_max) test_max = 2 * train_max > PELAB_SIZES_MAX ? PELAB_SIZES_MAX : 2 * train_max;
    if (test_max < train_max)
        return pelab_fail(PELAB_ERR_USAGE, "--algo-test-max %d is below --algo-train-max %d: the test "
                          "split holds every trained size and those beyond", test_max, train_max);
    struct algo *a = calloc(1, sizeof *a);
    if (!a) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the %s task", t->ops->name);
    a->kind = kind;
    a->train_max = train_max;
    a->test_max = test_max;
    a->per_size = (int)pelab_opt_int(opts, table, "algo-test-per-size");
    a->size[PELAB_SPLIT_TRAIN] = (uint64_t)pelab_opt_int(opts, table, "algo-train-size");
    a->size[PELAB_SPLIT_VAL] = (uint64_t)pelab_opt_int(opts, table, "algo-val-size");
    a->symbols = pelab_optdef_find(table, "algo-symbols") ? (int)pelab_opt_int(opts, table, "algo-symbols") : 0;
    a->reversed = pelab_optdef_find(table, "addition-reversed") ? pelab_opt_switch(opts, table, "addition-reversed") : 0;
    a->scratchpad = pelab_optdef_find(table, "scratchpad") ? pelab_opt_switch(opts, table, "scratchpad") : 0;
    a->shuffle = pelab_optdef_find(table, "lego-shuffle") ? pelab_opt_switch(opts, table, "lego-shuffle") : 0;
    a->items = pelab_optdef_find(table, "selective-copy-items") ? (int)pelab_opt_int(opts, table, "selective-copy-items") : 0;
    if (kind == &lego_kind && test_max > SYMBOLS_MAX) {
        free(a);
        return pelab_fail(PELAB_ERR_USAGE, "test sizes up to %d (--algo-test-max, or twice --algo-train-max): "
                          "task lego names each variable by one of %d letters, so its sizes end at %d",
                          test_max, SYMBOLS_MAX, SYMBOLS_MAX);
    }
    const uint64_t data_seed = (uint64_t)pelab_opt_real(opts, table, "data-seed");
    for (int s = 0; s < 3; s++) a->key[s] = pelab_hash64(SALT[s] ^ pelab_hash64(data_seed));
    t->state = a;
    t->vocab = a->scratchpad ? FULL_VOCAB : kind->vocab;
    t->pad = PAD;
    /* prompt, separator, target (the end token is a target only): the training context holds the
     * longest training example, the test split's batches the longest test one */
    t->seq_len = longest(a, train_max) + 1;
    t->test_len = longest(a, test_max) + 1;
    PELAB_ASSERT(t->test_len + 1 <= PELAB_ALGO_SEQ_MAX); /* an example and its end token fit seq[] */
    return PELAB_OK;
}

static void algo_free(struct pelab_task *t) {
    free(t->state);
    t->state = NULL;
}

static uint64_t algo_split_size(const struct pelab_task *t, enum pelab_split split) {
    const struct algo *a = t->state;
    PELAB_ASSERT(split >= PELAB_SPLIT_TRAIN && split <= PELAB_SPLIT_TEST);
    return split == PELAB_SPLIT_TEST ? (uint64_t)a->per_size * (uint64_t)a->test_max : a->size[split];
}

int pelab_algo_example(const struct pelab_task *t, enum pelab_split split, uint64_t i, int32_t *seq, int *n_prompt) {
    const struct algo *a = t->state;
    struct pelab_rng rng;
    pelab_rng_seed(&rng, pelab_hash64(a->key[split] ^ pelab_hash64(i)));
    const int n = split == PELAB_SPLIT_TEST ? 1 + (int)(i / (uint64_t)a->per_size)
                                            : 1 + (int)pelab_rng_below(&rng, (uint64_t)a->train_max);
    int np, nt;
    int32_t target[PELAB_ALGO_SEQ_MAX];
    a->kind->make(a, &rng, n, seq, &np, target, &nt);
    seq[np] = SEP;
    memcpy(seq + np + 1, target, (size_t)nt * sizeof *seq);
    seq[np + 1 + nt] = END;
    *n_prompt = np;
    return np + nt + 2;
}

static void algo_fill(const struct pelab_task *t, enum pelab_split split, uint64_t first, struct pelab_batch *b) {
    const uint64_t size = algo_split_size(t, split);
    int32_t seq[PELAB_ALGO_SEQ_MAX];
    for (int r = 0; r < b->B; r++) {
        int np;
        const int len = pelab_algo_example(t, split, (first + (uint64_t)r) % size, seq, &np);
        int32_t *tok = b->tokens + (size_t)r * b->T, *tgt = b->targets + (size_t)r * b->T;
        int32_t *pos = b->pos + (size_t)r * b->T;
        PELAB_ASSERT(len - 1 <= b->T);
        for (int p = 0; p < b->T; p++) {
            tok[p] = p < len - 1 ? seq[p] : PAD;
            tgt[p] = p >= np && p < len - 1 ? seq[p + 1] : -1; /* from the separator on */
            pos[p] = p;
        }
    }
}

static const char *algo_token_text(const struct pelab_task *t, int32_t token) {
    return token >= 0 && token < t->vocab ? TOKEN_TEXT[token] : "?";
}

static void algo_sizes(const struct pelab_task *t, int *train_max, int *test_max, int *per_size) {
    const struct algo *a = t->state;
    *train_max = a->train_max, *test_max = a->test_max, *per_size = a->per_size;
}

static int algo_size_len(const struct pelab_task *t, int n) {
    const struct algo *a = t->state;
    return longest(a, n) + 1;
}

/* ---- the tasks' tables ---------------------------------------------------------------------- */

#define ROWS(train_max)                                                                              \
    {"algo-train-max", PELAB_OPT_INT, train_max, 1, PELAB_SIZES_MAX / 2, NULL,                   \
     "training and validation sizes 1..N, uniform (what a size counts: pelab help tasks)"},         \
    {"algo-test-max", PELAB_OPT_INT, "0", 0, PELAB_SIZES_MAX, NULL,                              \
     "test sizes 1..M, --algo-test-per-size of each, in order (0: twice --algo-train-max)"},        \
    {"algo-test-per-size", PELAB_OPT_INT, "100", 1, 1e6, NULL, "test examples of each size"},       \
    {"algo-train-size", PELAB_OPT_INT, "1000000", 1, 1e15, NULL, "training examples"},              \
    {"algo-val-size", PELAB_OPT_INT, "2000", 1, 1e15, NULL, "validation examples"},                 \
    {"data-seed", PELAB_OPT_INT, "0", 0, 9007199254740991.0, NULL,                                   \
     "mixed into every split's seed: another draw of the same task"}
#define SYMBOLS_ROW {"algo-symbols", PELAB_OPT_INT, "26", 2, SYMBOLS_MAX, NULL, "symbols of the alphabet (a..z, A..Z)"}

static const struct pelab_optdef copy_options[] = {ROWS("20"), SYMBOLS_ROW, {0}};
static const struct pelab_optdef reverse_options[] = {ROWS("20"), SYMBOLS_ROW, {0}};
static const struct pelab_optdef sort_options[] = {ROWS("20"), SYMBOLS_ROW, {0}};
#define SCRATCHPAD_ROW(WHAT) {"scratchpad", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "the target " WHAT}
static const struct pelab_optdef parity_options[] = {
    ROWS("20"), SCRATCHPAD_ROW("is the parity of every prefix of the bits (the last the answer)"), {0}};
static const struct pelab_optdef sum_options[] = {
    ROWS("20"), SCRATCHPAD_ROW("is the sum mod 10 of every prefix of the terms (the last the answer)"), {0}};
static const struct pelab_optdef addition_options[] = {
    ROWS("8"),
    {"addition-reversed", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "the answer's least significant digit first"},
    SCRATCHPAD_ROW("first holds each column's digit and carry from the right, then = and the answer"),
    {0}};
static const struct pelab_optdef poly_options[] = {ROWS("8"), {0}};
static const struct pelab_optdef lego_options[] = {
    ROWS("8"),
    {"lego-shuffle", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "the clauses in a random order, not the chain's"},
    {0}};

static const struct pelab_optdef duplicate_string_options[] = {
    ROWS("20"), {"algo-symbols", PELAB_OPT_INT, "2", 2, SYMBOLS_MAX, NULL, "symbols of the alphabet (a..z, A..Z)"}, {0}};
static const struct pelab_optdef stack_manipulation_options[] = {ROWS("20"), {0}};
static const struct pelab_optdef selective_copy_options[] = {
    ROWS("20"), SYMBOLS_ROW,
    {"selective-copy-items", PELAB_OPT_INT, "8", 1, 64, NULL, "symbols to copy, at random places among the blanks"},
    {0}};
static const struct pelab_optdef binary_addition_options[] = {ROWS("20"), {0}};

#define TASK(NAME, TEXT, SUMMARY)                                                                   \
    static int NAME##_init(struct pelab_task *t, const struct pelab_opts *opts) {                  \
        return algo_init(t, opts, NAME##_options, &NAME##_kind);                                    \
    }                                                                                              \
    const struct pelab_task_ops pelab_task_##NAME = {                                              \
        .name = TEXT, .summary = SUMMARY, .options = NAME##_options, .init = NAME##_init,          \
        .free = algo_free, .split_size = algo_split_size, .fill = algo_fill,                       \
        .token_text = algo_token_text, .sizes = algo_sizes, .size_len = algo_size_len,             \
        .sweep = PELAB_TASK_SWEEP_SIZES}

TASK(copy, "copy", "length generalisation: copy a string of symbols (NoPE paper; size = symbols)");
TASK(reverse, "reverse", "length generalisation: reverse a string of symbols (size = symbols)");
TASK(sort, "sort", "length generalisation: sort a string of symbols (size = symbols)");
TASK(parity, "parity", "length generalisation: parity of a string of bits (size = bits)");
TASK(sum, "sum", "length generalisation: sum of digits 1-9 mod 10 (size = terms)");
TASK(addition, "addition", "length generalisation: add two integers of n digits each (size = digits)");
TASK(poly, "poly", "length generalisation: a polynomial's value mod 10 (NoPE paper; size = terms)");
TASK(lego, "lego", "length generalisation: the sign of a variable down a chain of them (NoPE paper; size = variables)");
TASK(duplicate_string, "duplicate-string",
     "length generalisation: a string of symbols twice (Ruoss et al., context-sensitive; size = symbols)");
TASK(stack_manipulation, "stack-manipulation",
     "length generalisation: a bit stack after pops and pushes (Ruoss et al., context-free; size = tokens)");
TASK(binary_addition, "binary-addition",
     "length generalisation: binary sum, least significant bit first (Ruoss et al., context-sensitive; size = both operands' bits less one)");
TASK(selective_copy, "selective-copy",
     "length generalisation: copy the symbols scattered among blanks (Gu & Dao; CoPE paper; size = blanks)");
