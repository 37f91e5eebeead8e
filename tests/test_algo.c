/* The algorithmic tasks (src/data/tasks/algo.c): every example of every task, checked by an
 * independent reading of its tokens — copy, reverse, sort and duplicate-string against the
 * prompt, parity and the sum mod 10 recounted, addition against 128-bit integers (sizes to 18
 * digits) and, with --addition-reversed, the digits read back from the right, the stack replayed
 * as text (a stack of 1..n-1 bits, then actions only), binary addition in 128-bit integers (both
 * operands above 0), selective copy's symbols read past the blanks (the size the blanks; as many
 * symbols as asked, the first and the last place a symbol about as often as K / (n + K) says); sizes uniform in 1..L for training
 * and validation and in order 1..2L for the test split; the same example twice, another for
 * another data seed; batches padded with targets only from the separator on; bad options one line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "data/tasks/algo.h"
#include "lib/check.h"
#include "pelab/status.h"
#include "pelab/task.h"

enum { SEP = 1, END = 2, PLUS = 3, D0 = 4, S0 = 14, POP = 66, PUSH0 = 67, PUSH1 = 68, MINUS, TIMES, POWER, EQ, COMMA, QUERY, BLANK };
enum { REVERSED = 1, SCRATCHPAD = 2 }; /* the options an answer depends on */

static int init(struct pelab_task *t, const char *name, const char *const *kv) {
    struct pelab_opts o = {0};
    for (; kv && kv[0]; kv += 2) pelab_opts_set(&o, kv[0], kv[1]);
    return pelab_task_init(t, name, &o);
}

/* Digits of seq[from..to) as a number (most significant first), -1 when one is not a digit. */
static __int128 number(const int32_t *seq, int from, int to) {
    __int128 v = 0;
    for (int i = from; i < to; i++) {
        if (seq[i] < D0 || seq[i] > D0 + 9) return -1;
        v = 10 * v + (seq[i] - D0);
    }
    return v;
}

/* lego: the value (+1 or -1) of the variable v of clauses p[0..np) (`v = ± u ,` or `v = ± 1 ,`),
 * by following its references; *hops how many it took; 0 for a variable no clause defines. */
static int lego_value(const int32_t *p, int np, int32_t v, int *hops) {
    for (int c = 0; c + 3 < np; c += 5)
        if (p[c] == v && p[c + 1] == EQ) {
            const int sign = p[c + 2] == PLUS ? 1 : p[c + 2] == MINUS ? -1 : 0;
            if (p[c + 3] == D0 + 1) return *hops = 0, sign;
            const int rest = lego_value(p, np, p[c + 3], hops);
            return ++*hops, sign * rest;
        }
    return 0;
}

/* The answer to prompt p (np tokens) of task `name` with the options `flags`, written into want
 * (*nw tokens); the size. */
static int answer(const char *name, int flags, const int32_t *p, int np, int32_t *want, int *nw) {
    const int reversed = flags & REVERSED, scratch = flags & SCRATCHPAD;
    if (!strcmp(name, "copy") || !strcmp(name, "reverse") || !strcmp(name, "sort")) {
        for (int i = 0; i < np; i++) want[i] = !strcmp(name, "reverse") ? p[np - 1 - i] : p[i];
        if (!strcmp(name, "sort")) /* insertion sort: another algorithm than the generator's */
            for (int i = 1; i < np; i++)
                for (int j = i; j > 0 && want[j - 1] > want[j]; j--) {
                    int32_t x = want[j];
                    want[j] = want[j - 1], want[j - 1] = x;
                }
        *nw = np;
        return np;
    }
    if (!strcmp(name, "parity")) { /* with the scratchpad, every prefix counted again */
        *nw = 0;
        for (int k = scratch ? 1 : np; k <= np; k++) {
            int ones = 0;
            for (int i = 0; i < k; i++) ones += p[i] == D0 + 1;
            want[(*nw)++] = D0 + (ones & 1);
        }
        return np;
    }
    if (!strcmp(name, "sum")) {
        const int terms = (np + 1) / 2;
        *nw = 0;
        for (int k = scratch ? 1 : terms; k <= terms; k++) {
            int s = 0;
            for (int i = 0; i < 2 * k; i += 2) s += p[i] - D0;
            want[(*nw)++] = D0 + s % 10;
        }
        return terms;
    }
    if (!strcmp(name, "poly")) { /* x = [-] v , then terms [-] c * x ^ e joined by + */
        const int x = p[2] == MINUS ? -(p[3] - D0) : p[2] - D0;
        int i = p[2] == MINUS ? 5 : 4, terms = 0;
        long value = 0;
        while (i < np) {
            const int neg = p[i] == MINUS;
            i += neg;
            const long c = (neg ? -1 : 1) * (long)(p[i] - D0);
            if (p[i + 1] != TIMES || p[i + 2] != S0 + 'x' - 'a' || p[i + 3] != POWER) return -1;
            value += c * (long)pow(x, p[i + 4] - D0);
            terms++;
            i += 5;
            if (i < np && p[i++] != PLUS) return -1;
        }
        want[0] = D0 + (int)(((value % 10) + 10) % 10), *nw = 1;
        return terms;
    }
    if (!strcmp(name, "lego")) { /* clauses, then ? q: q's value, read by following the chain */
        const int n = (np - 2 + 1) / 5;
        int hops = 0;
        const int v = lego_value(p, np - 2, p[np - 1], &hops);
        if (p[np - 2] != QUERY || !v || (n > 1 && hops < (n + 1) / 2)) return -1;
        want[0] = v > 0 ? PLUS : MINUS, want[1] = D0 + 1, *nw = 2;
        return n;
    }
    if (!strcmp(name, "selective-copy")) { /* the symbols in order; the size is the blanks */
        int blanks = 0;
        *nw = 0;
        for (int i = 0; i < np; i++)
            if (p[i] == BLANK) blanks++;
            else if (p[i] >= S0 && p[i] < S0 + 52) want[(*nw)++] = p[i];
            else return -1;
        return blanks;
    }
    if (!strcmp(name, "duplicate-string")) {
        for (int i = 0; i < 2 * np; i++) want[i] = p[i % np];
        *nw = 2 * np;
        return np;
    }
    if (!strcmp(name, "stack-manipulation")) { /* the stack as text, its top at the end */
        char stack[2 * PELAB_SIZES_MAX + 1];
        int s = 0, depth = 0;
        while (s < np && (p[s] == D0 || p[s] == D0 + 1)) stack[depth++] = (char)('0' + p[s++] - D0);
        for (int i = s; i < np; i++) {
            if (p[i] < POP || p[i] > PUSH1) return -1; /* an action after the stack, nothing else */
            if (p[i] == POP && depth) depth--;
            else if (p[i] != POP) stack[depth++] = p[i] == PUSH1 ? '1' : '0';
        }
        if (s < 1 || (np > 1 && s > np - 1)) return -1;
        for (int i = 0; i < depth; i++) want[i] = D0 + (stack[depth - 1 - i] - '0');
        *nw = depth;
        return np;
    }
    if (!strcmp(name, "binary-addition")) { /* bits least significant first, both operands > 0 */
        int plus = 0;
        while (plus < np && p[plus] != PLUS) plus++;
        __int128 x = 0, y = 0;
        for (int i = plus - 1; i >= 0; i--) x = 2 * x + (p[i] - D0);
        for (int i = np - 1; i > plus; i--) y = 2 * y + (p[i] - D0);
        if (x <= 0 || y <= 0 || plus == np) return -1;
        __int128 z = x + y;
        *nw = 0;
        while (z > 0) want[(*nw)++] = D0 + (int)(z & 1), z >>= 1;
        return np - 2; /* the bits of both operands less one */
    }
    /* addition: x + y, each n digits */
    int plus = 0;
    while (p[plus] != PLUS) plus++;
    const __int128 x = number(p, 0, plus), y = number(p, plus + 1, np);
    __int128 z = x + y, ten = 1;
    int w = 0;
    for (int i = 0; scratch && i < plus; i++, ten *= 10) { /* column i: its digit of the sum of the
                                                            * operands cut to i + 1 digits, and
                                                            * whether that sum carries */
        const __int128 part = x % (10 * ten) + y % (10 * ten);
        want[w++] = D0 + (int)(part / ten % 10), want[w++] = D0 + (part >= 10 * ten);
    }
    if (scratch) want[w++] = EQ;
    char text[64];
    int k = 0;
    do text[k++] = (char)('0' + (int)(z % 10)), z /= 10; while (z > 0); /* least significant first */
    for (int i = 0; i < k; i++) want[w + i] = D0 + (text[reversed ? i : k - 1 - i] - '0');
    *nw = w + k;
    return plus;
}

static void check_task(const char *name, const char *const *kv, int flags) {
    struct pelab_task t;
    if (init(&t, name, kv)) {
        CHECK(0, "%s: %s", name, pelab_last_error());
        return;
    }
    int L, M, per;
    t.ops->sizes(&t, &L, &M, &per);
    CHECK(M == 2 * L && t.ops->split_size(&t, PELAB_SPLIT_TEST) == (uint64_t)M * per, "%s: sizes %d %d %d", name, L, M, per);
    int32_t seq[PELAB_ALGO_SEQ_MAX], again[PELAB_ALGO_SEQ_MAX], want[PELAB_ALGO_SEQ_MAX];
    int seen[2 * PELAB_SIZES_MAX + 1] = {0}, bad = 0, longest_train = 0, longest_test = 0;
    for (int split = 0; split < 3; split++)
        for (uint64_t i = 0; i < 1500; i++) {
            int np, np2, nw = 0;
            const int len = pelab_algo_example(&t, split, i, seq, &np);
            CHECK(pelab_algo_example(&t, split, i, again, &np2) == len && !memcmp(seq, again, (size_t)len * sizeof *seq),
                  "%s: example %llu drawn twice differs", name, (unsigned long long)i);
            const int size = answer(name, flags, seq, np, want, &nw);
            const int ok = seq[np] == SEP && len == np + nw + 2 && seq[len - 1] == END &&
                           !memcmp(seq + np + 1, want, (size_t)nw * sizeof *want);
            if (!ok && bad++ < 3) CHECK(0, "%s: split %d example %llu (size %d) has a wrong target", name, split, (unsigned long long)i, size);
            if (split == PELAB_SPLIT_TEST && i < (uint64_t)M * per)
                CHECK(size == 1 + (int)(i / per), "%s: test example %llu has size %d", name, (unsigned long long)i, size);
            if (split != PELAB_SPLIT_TEST) {
                CHECK(size >= 1 && size <= L, "%s: training size %d outside 1..%d", name, size, L);
                seen[size]++;
            }
            for (int k = 0; k < len; k++) CHECK(seq[k] > 0 && seq[k] < t.vocab, "%s: token %d", name, seq[k]);
            CHECK(len - 1 <= t.ops->size_len(&t, size), "%s: an input of %d tokens at size %d, of length %d",
                  name, len - 1, size, t.ops->size_len(&t, size));
            int *longest = split == PELAB_SPLIT_TEST ? &longest_test : &longest_train;
            *longest = len - 1 > *longest ? len - 1 : *longest;
        }
    for (int n = 1; n <= L; n++) CHECK(seen[n] > 0, "%s: training size %d never drawn", name, n);
    /* the training context holds the training sizes, the test length the test sizes, exactly */
    CHECK(longest_train <= t.seq_len && t.seq_len == t.ops->size_len(&t, L) && t.test_len == t.ops->size_len(&t, M) &&
          pelab_task_split_len(&t, PELAB_SPLIT_VAL) == t.seq_len && pelab_task_split_len(&t, PELAB_SPLIT_TEST) == t.test_len,
          "%s: training inputs of up to %d tokens in T %d, test length %d", name, longest_train, t.seq_len, t.test_len);
    CHECK(longest_test <= t.test_len, "%s: test inputs of up to %d tokens, test length %d", name, longest_test, t.test_len);
    int np_last; /* a copy of size M fills the test length */
    const int last = pelab_algo_example(&t, PELAB_SPLIT_TEST, (uint64_t)M * per - 1, seq, &np_last);
    CHECK(strcmp(name, "copy") || last - 1 == t.test_len, "copy: size %d is %d tokens, test length %d", M, last - 1, t.test_len);
    /* a batch: targets from the separator on, the next token; padding past the end */
    struct pelab_batch b;
    const int T = t.test_len;
    PELAB_ASSERT(pelab_batch_alloc(&b, 3, T) == PELAB_OK);
    t.ops->fill(&t, PELAB_SPLIT_TEST, (uint64_t)(M - 1) * per, &b);
    for (int r = 0; r < 3; r++) {
        int np;
        const int len = pelab_algo_example(&t, PELAB_SPLIT_TEST, (uint64_t)(M - 1) * per + r, seq, &np);
        for (int p = 0; p < T; p++) {
            const int32_t tok = p < len - 1 ? seq[p] : 0, tgt = p >= np && p < len - 1 ? seq[p + 1] : -1;
            CHECK(b.tokens[r * T + p] == tok && b.targets[r * T + p] == tgt && b.pos[r * T + p] == p,
                  "%s: batch row %d position %d", name, r, p);
        }
    }
    pelab_batch_free(&b);
    /* another data seed, other examples */
    struct pelab_task u;
    const char *const seed2[] = {"data-seed", "7", NULL};
    PELAB_ASSERT(init(&u, name, seed2) == PELAB_OK);
    int same = 0;
    for (uint64_t i = 0; i < 50; i++) {
        int np;
        const int len = pelab_algo_example(&t, PELAB_SPLIT_TRAIN, i, seq, &np);
        same += pelab_algo_example(&u, PELAB_SPLIT_TRAIN, i, again, &np) == len && !memcmp(seq, again, (size_t)len * sizeof *seq);
    }
    CHECK(same < 25, "%s: data seed 7 repeats %d of 50 examples", name, same);
    printf("  %-18s sizes 1..%d (test 1..%d), T %d (test %d), %d wrong\n", name, L, M, t.seq_len, t.test_len, bad);
    pelab_task_free(&u);
    pelab_task_free(&t);
}

/* selective-copy with K symbols: every example holds K, and place 0 and the last place of size-n
 * prompts hold a symbol K / (n + K) of the time (selection sampling is uniform over placements):
 * within 5 standard errors over the test split's examples of sizes 1..4. */
static void check_selective_copy(int K) {
    struct pelab_task t;
    char k[8];
    snprintf(k, sizeof k, "%d", K);
    const char *const kv[] = {"selective-copy-items", k, "algo-test-per-size", "4000", NULL};
    PELAB_ASSERT(init(&t, "selective-copy", kv) == PELAB_OK);
    int32_t seq[PELAB_ALGO_SEQ_MAX], want[PELAB_ALGO_SEQ_MAX];
    for (int n = 1; n <= 4; n++) {
        int first = 0, last = 0, count_ok = 1;
        for (int e = 0; e < 4000; e++) {
            int np, nw;
            pelab_algo_example(&t, PELAB_SPLIT_TEST, (uint64_t)(n - 1) * 4000 + (uint64_t)e, seq, &np);
            count_ok &= answer("selective-copy", 0, seq, np, want, &nw) == n && nw == K;
            first += seq[0] != BLANK, last += seq[np - 1] != BLANK;
        }
        const double p = (double)K / (n + K), se = sqrt(p * (1 - p) / 4000);
        CHECK(count_ok, "selective-copy K %d: an example of size %d without %d symbols", K, n, K);
        CHECK(fabs(first / 4000.0 - p) < 5 * se && fabs(last / 4000.0 - p) < 5 * se,
              "selective-copy K %d size %d: a symbol first %.3f, last %.3f of the time, expected %.3f", K, n,
              first / 4000.0, last / 4000.0, p);
    }
    pelab_task_free(&t);
}

static void check_refusals(void) {
    struct pelab_task t;
    const char *const below[] = {"algo-test-max", "5", "algo-train-max", "8", NULL};
    CHECK(init(&t, "copy", below) == PELAB_ERR_USAGE && strstr(pelab_last_error(), "--algo-test-max 5 is below --algo-train-max 8"),
          "test range below the training range: %s", pelab_last_error());
    const char *const big[] = {"algo-train-max", "300", NULL};
    CHECK(init(&t, "reverse", big) == PELAB_ERR_USAGE, "--algo-train-max 300 accepted");
}

int main(void) {
    const char *const tasks[] = {"copy", "reverse", "sort", "parity", "sum", "addition", "poly", "lego",
                                 "duplicate-string", "stack-manipulation", "binary-addition", "selective-copy"};
    for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++) check_task(tasks[i], NULL, 0);
    const char *const rev[] = {"addition-reversed", "on", "algo-train-max", "9", NULL};
    check_task("addition", rev, REVERSED);
    const char *const scratch[] = {"scratchpad", "on", NULL}, *const both[] = {"scratchpad", "on", "addition-reversed", "on", NULL};
    check_task("parity", scratch, SCRATCHPAD);
    check_task("sum", scratch, SCRATCHPAD);
    check_task("addition", scratch, SCRATCHPAD);
    check_task("addition", both, SCRATCHPAD | REVERSED);
    const char *const shuffled[] = {"lego-shuffle", "on", "algo-train-max", "12", NULL};
    check_task("lego", shuffled, 0);
    const char *const few[] = {"algo-symbols", "3", NULL}; /* repeats in sort */
    check_task("sort", few, 0);
    check_selective_copy(8);
    check_selective_copy(3);
    check_refusals();
    return check_report("test_algo");
}
