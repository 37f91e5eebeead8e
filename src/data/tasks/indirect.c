/* indirect — the indirect-indexing diagnostic of the PoPE paper (Gopalakrishnan et al., 2025,
 * "Decoupling the 'What' and 'Where' With Polar Coordinate Positional Embeddings", §4 "Indirect
 * Indexing" and Appendix A.1).
 *
 * An example is a string of L distinct letters, a source letter from it, and a signed shift; the
 * answer is the letter `shift` places right (+) or left (−) of the source letter:
 *
 *     TzbkWoKDyscBepYvfwxEVQtgPa, c, -8, b
 *     \______ source (L) _____/  ^   ^   ^ target
 *                      source letter  shift ("+4", "-8", "+15": sign always written)
 *
 * Sampling (per example):
 *   L ~ U{min-len..max-len}; the string is L letters drawn uniformly without replacement from
 *   [A-Za-z]; source index ~ U{0..L-1}; shift ~ U{−M..−m, m..M} (M = max-shift, m = min-shift,
 *   default 1), redrawn (the shift only) until 0 <= index + shift < L; a source index that admits
 *   no such shift is drawn again. Some index always does, since L > m (min-len > min-shift).
 *   --indirect-min-shift m > 1 leaves out the nearest offsets, which one fixed previous-letter
 *   head and a content match solve (±1), so that every answer asks for one of several offsets.
 *   --indirect-shift-zero on: shift ~ U{−M..M}, 0 (a copy of the source letter) included. The
 *   paper draws shifts "in the range [−15, +15]" without saying whether 0 is in it.
 *
 * Queries (--indirect-queries K, default 1 = the paper's format): K independent (source letter,
 * shift, target) groups follow the same string, each scored at its own answer position:
 *     QmbkWo, b, +2, W, o, -3, b
 * Each answer still needs the content lookup and the relative offset; K only multiplies the
 * training signal per string (one target per ~25 tokens is a weak signal for a small model).
 * Earlier answers are visible to later queries, as in any left-to-right sequence.
 *
 * Tokens, one per character, with fixed ids so checkpoints and printed batches stay readable:
 *     0 padding, 1..26 'A'..'Z', 27..52 'a'..'z', 53..62 '0'..'9', 63 ',', 64 ' ', 65 '+', 66 '-'
 * The input is the text without the final target letter (it ends in ", "); the loss is taken at
 * each answer position (the space before a target letter), whose target is that letter's id. Rows are right-padded
 * with 0, targets -1 there, positions 0..T-1.
 *
 * Curriculum (--indirect-curriculum N, training split only, 0 = off): training example i < N
 * draws its shifts uniformly from [-m, m], 0 included, with m = floor((M + 1) i / N). The first
 * N/(M+1) examples are all copies (shift 0, the target is the source letter: "QmbkWo, b, +0, b"),
 * which trains the answer position to fetch the source letter in a few hundred steps; each later
 * stage adds one offset while copies stay in the mix (1/(2m+1) of the queries), so what the
 * earlier stages built keeps being used. (Dropping the copies at once, measured: the loss jumps
 * above ln 52 when ±1 starts and the copy circuit is unlearnt.) From N on, and in validation and
 * test always, the full task.
 * i counts the examples the run drew before this one (the training cursor minus its origin,
 * pelab/task.h), so the curriculum happens once, whatever the seed, and a resumed run draws the
 * same examples.
 *
 * Data: example i of split s comes from its own generator, seeded with
 *     hash64(key[s] ^ hash64(i)),  key[s] = hash64(SPLIT_SEED[s] ^ hash64(data-seed)),
 * so any example is produced on the fly in O(L) and a split is a pure function of its options.
 * The three splits use distinct constants; with over 10^32 possible source strings of each length,
 * a val/test example that also appears in train is negligibly likely (the test checks a sample).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tasks/indirect.h"
#include "data/tasks/tasks.h"
#include "pelab/rng.h"
#include "pelab/status.h"

#define N_LETTERS 52
#define VOCAB 67
#define PAD 0

static const struct pelab_optdef options[] = {
    {"indirect-min-len", PELAB_OPT_INT, "20", 2, N_LETTERS, NULL, "shortest source string"},
    {"indirect-max-len", PELAB_OPT_INT, "40", 2, N_LETTERS, NULL, "longest source string"},
    {"indirect-max-shift", PELAB_OPT_INT, "15", 1, N_LETTERS - 1, NULL,
     "shifts are drawn from [-max, max] without 0 (must be < --indirect-max-len)"},
    {"indirect-min-shift", PELAB_OPT_INT, "1", 1, N_LETTERS - 1, NULL,
     "the smallest shift: shifts are drawn from [-max, -min] and [min, max] (must be < "
     "--indirect-min-len; above 1 not with --indirect-shift-zero or --indirect-curriculum)"},
    {"indirect-shift-zero", PELAB_OPT_SWITCH, "off", 0, 0, NULL,
     "shift 0 (the answer is the source letter) is drawn too, 1 in 2·max+1"},
    {"indirect-queries", PELAB_OPT_INT, "1", 1, PELAB_INDIRECT_MAX_QUERIES, NULL,
     "queries (source letter, shift, target) per string, each scored; 1 is the paper's format"},
    {"indirect-curriculum", PELAB_OPT_INT, "0", 0, 1e15, NULL,
     "training examples over which the shifts grow from 0 (copy) to ±max-shift, 0 kept in the mix; 0: off"},
    {"indirect-train-size", PELAB_OPT_INT, "1000000", 1, 1e15, NULL, "training examples"},
    {"indirect-val-size", PELAB_OPT_INT, "10000", 1, 1e15, NULL, "validation examples"},
    {"indirect-test-size", PELAB_OPT_INT, "10000", 1, 1e15, NULL, "test examples"},
    {"data-seed", PELAB_OPT_INT, "0", 0, 9007199254740991.0, NULL,
     "mixed into every split's seed: another draw of the same task"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* Fixed, distinct per-split constants (train, val, test). Changing them changes every dataset. */
static const uint64_t SPLIT_SEED[3] = {
    0x5A17C0DE1D1EC701ull, 0xB3A5E7E4A1D00002ull, 0x7E57DA7A0F00A003ull};

struct indirect {
    int min_len, max_len, min_shift, max_shift, queries;
    int shift_zero;      /* --indirect-shift-zero: 0 among the full task's shifts */
    uint64_t curriculum; /* training examples in the curriculum, 0 = none */
    uint64_t size[3]; /* examples per split */
    uint64_t key[3];  /* per-split seed key, data-seed mixed in */
};

static const char LETTERS[N_LETTERS + 1] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/* Text of each token id, indexed by id (the table in the header comment). */
static const char *const TOKEN_TEXT[VOCAB] = {
    "",  "A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L", "M", "N", "O", "P",
    "Q", "R", "S", "T", "U", "V", "W", "X", "Y", "Z", "a", "b", "c", "d", "e", "f", "g",
    "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x",
    "y", "z", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", ",", " ", "+", "-"};

int32_t pelab_indirect_token(char c) {
    if (c >= 'A' && c <= 'Z') return 1 + (c - 'A');
    if (c >= 'a' && c <= 'z') return 27 + (c - 'a');
    if (c >= '0' && c <= '9') return 53 + (c - '0');
    switch (c) {
    case ',': return 63;
    case ' ': return 64;
    case '+': return 65;
    case '-': return 66;
    default: return -1;
    }
}

static int digits(int n) {
    int d = 1;
    while (n >= 10) n /= 10, d++;
    return d;
}

/* Longest input: source, then per query ", ", letter, ", ", sign and digits of the shift, ", ",
 * target; less the final target. */
static int longest_input(int max_len, int max_shift, int queries) {
    return max_len + queries * (2 + 1 + 2 + (1 + digits(max_shift)) + 2 + 1) - 1;
}

/* Cross-option rules the per-option ranges cannot express. */
static int check_relations(int min_len, int max_len, int min_shift, int max_shift, int shift_zero,
                           uint64_t curriculum) {
    if (min_len > max_len)
        return pelab_fail(PELAB_ERR_USAGE,
                          "--indirect-min-len %d is greater than --indirect-max-len %d", min_len,
                          max_len);
    if (max_shift >= max_len)
        return pelab_fail(PELAB_ERR_USAGE,
                          "--indirect-max-shift %d must be less than --indirect-max-len %d "
                          "(a larger shift never fits in the string)",
                          max_shift, max_len);
    if (min_shift > max_shift)
        return pelab_fail(PELAB_ERR_USAGE, "--indirect-min-shift %d is greater than --indirect-max-shift %d",
                          min_shift, max_shift);
    if (min_shift >= min_len)
        return pelab_fail(PELAB_ERR_USAGE, "--indirect-min-shift %d must be less than --indirect-min-len %d "
                          "(a string of min-len letters must hold a shift)", min_shift, min_len);
    if (min_shift > 1 && (shift_zero || curriculum))
        return pelab_fail(PELAB_ERR_USAGE, "--indirect-min-shift %d leaves out the near shifts, which "
                          "--indirect-%s draws: give one or the other", min_shift,
                          shift_zero ? "shift-zero" : "curriculum");
    return PELAB_OK;
}

static int indirect_init(struct pelab_task *t, const struct pelab_opts *opts) {
    if (opts) {
        int rc = pelab_opts_check(opts, options); /* also when called without the registry */
        if (rc) return rc;
    }
    int min_len = (int)pelab_opt_int(opts, options, "indirect-min-len");
    int max_len = (int)pelab_opt_int(opts, options, "indirect-max-len");
    int min_shift = (int)pelab_opt_int(opts, options, "indirect-min-shift");
    int max_shift = (int)pelab_opt_int(opts, options, "indirect-max-shift");
    int queries = (int)pelab_opt_int(opts, options, "indirect-queries");
    int shift_zero = pelab_opt_switch(opts, options, "indirect-shift-zero");
    uint64_t curriculum = (uint64_t)pelab_opt_int(opts, options, "indirect-curriculum");
    int rc = check_relations(min_len, max_len, min_shift, max_shift, shift_zero, curriculum);
    if (rc) return rc;

    struct indirect *s = malloc(sizeof *s);
    if (!s) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the indirect task");
    s->min_len = min_len;
    s->max_len = max_len;
    s->min_shift = min_shift;
    s->max_shift = max_shift;
    s->queries = queries;
    s->shift_zero = shift_zero;
    s->curriculum = curriculum;
    s->size[PELAB_SPLIT_TRAIN] = (uint64_t)pelab_opt_int(opts, options, "indirect-train-size");
    s->size[PELAB_SPLIT_VAL] = (uint64_t)pelab_opt_int(opts, options, "indirect-val-size");
    s->size[PELAB_SPLIT_TEST] = (uint64_t)pelab_opt_int(opts, options, "indirect-test-size");
    uint64_t data_seed = (uint64_t)pelab_opt_int(opts, options, "data-seed");
    for (int i = 0; i < 3; i++) s->key[i] = pelab_hash64(SPLIT_SEED[i] ^ pelab_hash64(data_seed));

    t->state = s;
    t->vocab = VOCAB;
    t->pad = PAD;
    t->seq_len = longest_input(max_len, max_shift, queries);
    return PELAB_OK;
}

static void indirect_free(struct pelab_task *t) {
    free(t->state);
    t->state = NULL;
}

static uint64_t indirect_split_size(const struct pelab_task *t, enum pelab_split split) {
    const struct indirect *s = t->state;
    PELAB_ASSERT(split >= PELAB_SPLIT_TRAIN && split <= PELAB_SPLIT_TEST);
    return s->size[split];
}

/* Uniform in [lo, hi]. */
static int uniform_int(struct pelab_rng *rng, int lo, int hi) {
    return lo + (int)pelab_rng_below(rng, (uint64_t)(hi - lo + 1));
}

/* Writes L distinct letters to src (not terminated): the first L of a partial Fisher–Yates
 * shuffle, so both the subset and its order are uniform. */
static void draw_source(struct pelab_rng *rng, int L, char *src) {
    char pool[N_LETTERS];
    memcpy(pool, LETTERS, N_LETTERS);
    for (int i = 0; i < L; i++) {
        int j = uniform_int(rng, i, N_LETTERS - 1);
        char c = pool[j];
        pool[j] = pool[i];
        pool[i] = c;
        src[i] = c;
    }
}

/* A shift in [-M, -m] ∪ [m, M] (with_zero: in [-M, M]) with source + shift inside [0, L), or 0
 * when none exists. */
static int draw_shift(struct pelab_rng *rng, int L, int source, int m, int M, int with_zero) {
    int lo = -source, hi = L - 1 - source; /* the shifts that land in the string; lo <= 0 <= hi */
    if (with_zero) {
        for (;;) {
            int shift = (int)pelab_rng_below(rng, (uint64_t)(2 * M + 1)) - M;
            if (shift >= lo && shift <= hi) return shift;
        }
    }
    if (-lo < m && hi < m) return 0; /* every shift that fits is nearer than m (L == 1: only 0) */
    const int n = M - m + 1; /* shifts on each side */
    for (;;) {
        int k = (int)pelab_rng_below(rng, (uint64_t)(2 * n)); /* 0..2n-1 -> -M..-m, m..M */
        int shift = k < n ? k - M : k - n + m;
        if (shift >= lo && shift <= hi) return shift;
    }
}

/* The shifts of an example: from `min` to `max` either way, and 0 among them during the
 * curriculum. */
struct shifts {
    int min, max, with_zero;
};

/* The shifts of the example at `cursor` (unreduced) of `split`: the full task (0 among them with
 * --indirect-shift-zero) but for training examples inside the curriculum. */
static struct shifts shifts_at(const struct pelab_task *t, enum pelab_split split,
                               uint64_t cursor) {
    const struct indirect *s = t->state;
    uint64_t i = cursor - t->train_origin; /* examples the run drew before this one */
    if (split != PELAB_SPLIT_TRAIN || cursor < t->train_origin || i >= s->curriculum)
        return (struct shifts){s->min_shift, s->max_shift, s->shift_zero};
    return (struct shifts){1, (int)((double)(s->max_shift + 1) * (double)i / (double)s->curriculum), 1};
}

/* Example i (already reduced mod the split size) of a split, with the given shifts: its own
 * generator, see the top. */
static void generate(const struct indirect *s, enum pelab_split split, uint64_t i,
                     struct shifts shifts, struct pelab_indirect_example *ex) {
    struct pelab_rng rng;
    pelab_rng_seed(&rng, pelab_hash64(s->key[split] ^ pelab_hash64(i)));
    char src[N_LETTERS + 1];
    int L = uniform_int(&rng, s->min_len, s->max_len);
    PELAB_ASSERT(L >= 2); /* so that a shift of +1 or -1 always fits */
    draw_source(&rng, L, src);
    src[L] = '\0';
    memset(ex, 0, sizeof *ex);
    ex->source_len = L;
    ex->n_queries = s->queries;
    int n = snprintf(ex->text, sizeof ex->text, "%s", src);
    for (int k = 0; k < s->queries; k++) {
        struct pelab_indirect_query *q = &ex->q[k];
        do { /* redraw the letter only if it admits no shift (impossible for L >= 2) */
            q->source_index = uniform_int(&rng, 0, L - 1);
            q->shift = draw_shift(&rng, L, q->source_index, shifts.min, shifts.max, shifts.with_zero);
        } while (q->shift == 0 && !shifts.with_zero);
        q->target_index = q->source_index + q->shift;
        q->target = src[q->target_index];
        n += snprintf(ex->text + n, sizeof ex->text - (size_t)n, ", %c, %+d, %c",
                      src[q->source_index], q->shift, q->target);
        PELAB_ASSERT(n > 0 && n < (int)sizeof ex->text);
    }
}

void pelab_indirect_generate(const struct pelab_task *t, enum pelab_split split, uint64_t index,
                             struct pelab_indirect_example *ex) {
    PELAB_ASSERT(t->ops == &pelab_task_indirect && t->state);
    const struct indirect *s = t->state;
    PELAB_ASSERT(split >= PELAB_SPLIT_TRAIN && split <= PELAB_SPLIT_TEST);
    generate(s, split, index % s->size[split], shifts_at(t, split, index), ex);
}

/* One row of a batch: tokens (T), targets (T), pos (T). Every ", " followed by a letter that
 * ends a query is an answer position: its target is that letter. */
static void encode_row(const struct pelab_indirect_example *ex, int T, int32_t *tokens,
                       int32_t *targets, int32_t *pos) {
    int n = (int)strlen(ex->text) - 1; /* input length: all but the final target letter */
    PELAB_ASSERT(n <= T);
    for (int t = 0; t < T; t++) {
        tokens[t] = t < n ? pelab_indirect_token(ex->text[t]) : PAD;
        targets[t] = -1;
        pos[t] = t;
    }
    /* Query k's target sits at the end of its group; walk the groups from the back. */
    int end = n; /* index of query k's target letter in the text */
    for (int k = ex->n_queries - 1; k >= 0; k--) {
        targets[end - 1] = pelab_indirect_token(ex->q[k].target);
        end -= 2 + 1 + 2 + snprintf(NULL, 0, "%+d", ex->q[k].shift) + 2 + 1;
    }
}

static void indirect_fill(const struct pelab_task *t, enum pelab_split split, uint64_t first,
                          struct pelab_batch *b) {
    PELAB_ASSERT(b->T >= t->seq_len);
    const struct indirect *s = t->state;
    uint64_t size = indirect_split_size(t, split);
    for (int r = 0; r < b->B; r++) {
        struct pelab_indirect_example ex;
        uint64_t cursor = first + (uint64_t)r, i = cursor % size;
        generate(s, split, i, shifts_at(t, split, cursor), &ex);
        size_t off = (size_t)r * (size_t)b->T;
        encode_row(&ex, b->T, b->tokens + off, b->targets + off, b->pos + off);
    }
}

static const char *indirect_token_text(const struct pelab_task *t, int32_t token) {
    return token >= 0 && token < VOCAB ? TOKEN_TEXT[token] : "<unk>";
}

const struct pelab_task_ops pelab_task_indirect = {
    .name = "indirect",
    .summary = "PoPE's indirect indexing: find the letter a signed shift away from a source "
               "letter in a string of distinct letters",
    .options = options,
    .init = indirect_init,
    .free = indirect_free,
    .split_size = indirect_split_size,
    .fill = indirect_fill,
    .token_text = indirect_token_text,
};
