/* Long-context QA at several lengths (pelab/qa_sweep.h): per length, task qa rebuilt at that
 * --seq-len, the teacher-forced evaluation of the answer span (pelab_evaluate), then a greedy
 * generation per question with the KV cache (GROUP questions decoding together), matched
 * against the answer's text. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tasks/qa.h"
#include "pelab/clock.h"
#include "pelab/dist.h"
#include "pelab/kv_cache.h"
#include "pelab/posenc.h"
#include "pelab/qa_sweep.h"
#include "pelab/status.h"
#include "pelab/train.h"

#define GEN_MAX 1024

/* Whether the encoding accepts positions 0..L-1: PELAB_OK, else its usage error. */
static int accepts(struct pelab_model *m, int L) {
    int32_t *pos = malloc((size_t)L * sizeof *pos);
    if (!pos) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d positions", L);
    for (int p = 0; p < L; p++) pos[p] = p;
    int rc = pelab_posenc_prepare(&m->pe, pos, 1, L);
    free(pos);
    return rc;
}

/* Task qa of the run's settings at --seq-len L. */
static int task_at(struct pelab_task *t, const struct pelab_opts *settings, int L) {
    struct pelab_opts *o = malloc(sizeof *o);
    if (!o) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    *o = *settings;
    char len[32];
    snprintf(len, sizeof len, "%d", L);
    int rc = pelab_opts_set(o, "seq-len", len);
    if (!rc) rc = pelab_task_init(t, "qa", o);
    free(o);
    if (rc && t->ops) pelab_task_free(t);
    return rc;
}

/* [s, s+n) without the white space at either end. */
static void trim(const char **s, size_t *n) {
    while (*n && isspace((unsigned char)**s)) (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1])) (*n)--;
}

/* [s, s+n) cut at its first character (after leading white space) outside chars, then trimmed. */
static void cut(const char **s, size_t *n, const char *chars) {
    while (*n && isspace((unsigned char)**s)) (*s)++, (*n)--;
    size_t k = 0;
    while (k < *n && (*s)[k] && strchr(chars, (*s)[k])) k++;
    *n = k;
    trim(s, n);
}

int pelab_qa_match(const char *g, size_t gn, const char *answer, size_t an, const char *chars) {
    cut(&g, &gn, chars);
    cut(&answer, &an, chars);
    if (gn != an) return 0;
    for (size_t i = 0; i < an; i++)
        if (tolower((unsigned char)g[i]) != tolower((unsigned char)answer[i])) return 0;
    return 1;
}

/* Questions answered together, at most: with the cache, one pass over the weights per generated
 * token serves them all (generation's cost is the weights' bytes); their caches live at once,
 * as many as pelab_kv_batch_fit allows. */
enum { GROUP = PELAB_KV_BATCH_MAX };

/* What one length's generations share: the caches (or, when the encoding's setting cannot be
 * cached, the sequences recomputed per token) and the buffers. */
struct gen {
    struct pelab_model *m;
    struct pelab_kv_batch *batch; /* `group` sequences' caches; NULL: recompute */
    int group;
    int32_t *seq, *pos;           /* (GROUP,cap) the prompts and what is generated; (cap,) 0..cap-1 */
    int cap;
};

/* The greedy continuations of k ≤ GROUP prompts, seq_i[0..a_i) (seq_i = g->seq + i·cap), by at
 * most want_i tokens each into seq_i[a_i..), each stopping early at the padding id; made_i the
 * tokens generated. With the cache the k decode in step, each step one pass for all; without,
 * each recomputes its context per token. */
static int generate(struct gen *g, int k, const int *a, const int *want, int32_t pad, int *made) {
    struct pelab_model *m = g->m;
    const int V = m->cfg.vocab;
    int32_t step[GROUP], pos[GROUP];
    int n[GROUP], done[GROUP], rc = PELAB_OK, left = k;
    for (int i = 0; i < GROUP; i++) step[i] = -1; /* sequences past k take no step */
    for (int i = 0; i < k && !rc; i++) {
        made[i] = done[i] = 0;
        n[i] = a[i];
        if (g->batch) {
            struct pelab_kv_cache *c = pelab_kv_batch_sequence(g->batch, i);
            pelab_kv_cache_clear(c);
            rc = pelab_kv_cache_append(c, g->seq + (long)i * g->cap, g->pos, a[i], NULL);
        }
    }
    while (left && !rc) {
        for (int i = 0; i < k && !rc; i++) {
            int32_t *seq = g->seq + (long)i * g->cap, next;
            step[i] = -1;
            if (done[i]) continue;
            if (g->batch) {
                next = pelab_argmax(pelab_kv_cache_logits(pelab_kv_batch_sequence(g->batch, i)), V);
            } else {
                pelab_model_forward_eval(m, seq, NULL, g->pos, 1, n[i]);
                if ((rc = m->status)) break;
                next = pelab_model_eval_pred(m)[n[i] - 1];
            }
            if (next != pad) seq[n[i]++] = next, made[i]++;
            if (next == pad || made[i] == want[i]) {
                done[i] = 1;
                left--;
            } else {
                step[i] = next, pos[i] = n[i] - 1; /* the next step appends it */
            }
        }
        if (!rc && left && g->batch) rc = pelab_kv_batch_step(g->batch, step, pos);
    }
    return rc;
}

/* Generation EM of examples [0, count) of t at length L (this rank's share); adds to *exact,
 * *tokens_right (generations whose first tokens are the answer's, token for token) and
 * *generated. */
static int generate_all(struct pelab_model *m, const struct pelab_task *t, enum pelab_split split,
                        uint64_t count, int gen_tokens, int *cached, uint64_t *exact,
                        uint64_t *tokens_right, uint64_t *generated) {
    const int L = t->seq_len;
    const char *chars = pelab_qa_answer_chars(t);
    PELAB_ASSERT(chars);
    /* Positions 0..L+G-1 where the encoding takes them: then every example generates
     * max(G, k) tokens (its prompt a and answer k end by L: a + k - 1 <= L); else (a learned
     * table's end) generation stops at position L-1, after the answer's own k tokens. */
    const int G = gen_tokens;
    const int limit = accepts(m, L + G) == PELAB_OK ? L + G : L;
    pelab_clear_error();
    struct gen g = {m, NULL, pelab_kv_batch_fit(m, limit, 0, GROUP), NULL, NULL, limit};
    struct pelab_batch b = {0};
    struct pelab_bytes text = {0}, truth = {0};
    int rc = pelab_kv_batch_new(&g.batch, m, g.group, limit, 0);
    *cached = rc == PELAB_OK;
    if (rc == PELAB_ERR_USAGE) { /* this encoding's setting cannot be cached: recompute */
        pelab_clear_error();
        rc = PELAB_OK;
    }
    if (!rc && (!(g.seq = malloc((size_t)GROUP * limit * sizeof *g.seq)) ||
                !(g.pos = malloc((size_t)limit * sizeof *g.pos))))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    if (!rc) rc = pelab_batch_alloc(&b, GROUP, L);
    if (rc) goto done;
    for (int p = 0; p < limit; p++) g.pos[p] = p;
    uint64_t s0, s1;
    /* the groups one process makes */
    pelab_dist_share_blocks(&m->ctx->dist, count, (uint64_t)g.group, &s0, &s1);
    for (uint64_t i0 = s0; i0 < s1 && !rc; i0 += (uint64_t)g.group) { /* examples i0 .. i0 + k − 1 */
        const int k = s1 - i0 < (uint64_t)g.group ? (int)(s1 - i0) : g.group;
        int p0[GROUP], ans[GROUP], a[GROUP], want[GROUP], made[GROUP];
        b.B = k;
        t->ops->fill(t, split, i0, &b);
        for (int i = 0; i < k; i++) {
            const int32_t *tg = b.targets + (long)i * L;
            int p1 = p0[i] = -1; /* the first and last scored positions: the answer's */
            for (int p = 0; p < L; p++)
                if (tg[p] >= 0) {
                    if (p0[i] < 0) p0[i] = p;
                    p1 = p;
                }
            PELAB_ASSERT(p0[i] >= 0);
            a[i] = p0[i] + 1, ans[i] = p1 - p0[i] + 1; /* prompt tokens 0..p0; answer targets p0..p1 */
            const int w = ans[i] > G ? ans[i] : G;
            want[i] = w < limit - a[i] + 1 ? w : limit - a[i] + 1; /* >= the answer's: p1+1 <= L */
            memcpy(g.seq + (long)i * limit, b.tokens + (long)i * L, (size_t)a[i] * sizeof *g.seq);
        }
        if ((rc = generate(&g, k, a, want, t->pad, made))) break;
        for (int i = 0; i < k && !rc; i++) {
            const int32_t *gen = g.seq + (long)i * limit + a[i], *answer = b.targets + (long)i * L + p0[i];
            *generated += (uint64_t)made[i];
            int same = made[i] >= ans[i]; /* the first generated tokens are the answer's */
            for (int j = 0; same && j < ans[i]; j++) same = gen[j] == answer[j];
            *tokens_right += (uint64_t)same;
            text.len = truth.len = 0;
            if ((rc = pelab_qa_decode(t, gen, (size_t)made[i], &text)) ||
                (rc = pelab_qa_decode(t, answer, (size_t)ans[i], &truth)))
                break;
            *exact += (uint64_t)pelab_qa_match(text.data ? text.data : "", text.len,
                                               truth.data ? truth.data : "", truth.len, chars);
        }
    }
done:
    pelab_kv_batch_free(g.batch);
    free(g.seq);
    free(g.pos);
    if (b.tokens) pelab_batch_free(&b);
    pelab_bytes_free(&text);
    pelab_bytes_free(&truth);
    return rc;
}

int pelab_qa_sweep(struct pelab_model *m, const struct pelab_opts *settings,
                   enum pelab_split split, const struct pelab_sweep_length *lengths, int n,
                   uint64_t examples, long batch_tokens, int gen_tokens, struct pelab_qa_row *rows,
                   void (*progress)(void *ctx, const struct pelab_qa_row *row), void *ctx) {
    if (split != PELAB_SPLIT_VAL && split != PELAB_SPLIT_TEST)
        return pelab_fail(PELAB_ERR_USAGE, "--split %s: task qa asks its questions on the val and "
                          "test splits", pelab_split_name(split));
    if (gen_tokens < 1 || gen_tokens > GEN_MAX)
        return pelab_fail(PELAB_ERR_USAGE, "generated tokens %d: from 1 to %d", gen_tokens, GEN_MAX);
    if (m->cfg.random_positions)
        return pelab_fail(PELAB_ERR_USAGE, "the qa sweep generates answers, which a model trained with "
                          "--random-positions does not support (its positions depend on the whole sequence)");
    /* every length first: the task builds there (the question fits), the encoding accepts it */
    int rc, T = 0;
    for (int i = 0; i < n; i++) {
        struct pelab_task t = {0};
        if ((rc = task_at(&t, settings, lengths[i].tokens)))
            return pelab_fail_context(rc, "--lengths %s (%d tokens)", lengths[i].label, lengths[i].tokens);
        pelab_task_free(&t);
        if ((rc = accepts(m, lengths[i].tokens)))
            return pelab_fail_context(rc, "--lengths %s (%d tokens)", lengths[i].label, lengths[i].tokens);
    }
    const char *seq_len = pelab_opts_get(settings, "seq-len");
    T = seq_len ? atoi(seq_len) : 0;
    PELAB_ASSERT(T > 0);
    pelab_model_set_attention(m, PELAB_ATTN_KERNEL_TILED);
    for (int i = 0; i < n; i++) {
        const int L = lengths[i].tokens;
        const double t0 = pelab_clock_s();
        struct pelab_task t = {0};
        if ((rc = task_at(&t, settings, L))) return rc;
        uint64_t count = t.ops->split_size(&t, split);
        if (examples && examples < count) count = examples;
        struct pelab_eval_result r;
        const long per = batch_tokens / L;
        const int batch = per < 1 ? 1 : per > 65536 ? 65536 : (int)per;
        rc = pelab_evaluate(m, &t, split, 0, count, batch, &r);
        uint64_t exact = 0, tokens_right = 0, generated = 0;
        int cached = 0;
        if (!rc)
            rc = generate_all(m, &t, split, count, gen_tokens, &cached, &exact, &tokens_right,
                              &generated);
        pelab_task_free(&t);
        if ((rc = pelab_dist_agree(&m->ctx->dist, rc))) return rc;
        if (m->ctx->dist.size > 1) { /* counts below 2^53: exact in double */
            double sums[3] = {(double)exact, (double)tokens_right, (double)generated};
            pelab_dist_sum_double(&m->ctx->dist, sums, 3);
            exact = (uint64_t)sums[0];
            tokens_right = (uint64_t)sums[1];
            generated = (uint64_t)sums[2];
        }
        struct pelab_qa_row *row = &rows[i];
        memset(row, 0, sizeof *row);
        row->length = L;
        snprintf(row->label, sizeof row->label, "%s", lengths[i].label);
        row->multiple = (double)L / T;
        row->examples = count;
        row->tokens = r.targets;
        row->loss = r.loss;
        row->ppl = r.ppl;
        row->forced = r.exact;
        row->forced_match = r.exact_match;
        row->exact = exact;
        row->exact_match = count ? (double)exact / (double)count : 0;
        row->tokens_right = tokens_right;
        row->generated = generated;
        row->cached = cached;
        row->seconds = pelab_clock_s() - t0;
        if (progress) progress(ctx, row);
    }
    return PELAB_OK;
}

void pelab_qa_sweep_json(struct pelab_sb *sb, const struct pelab_qa_row *rows, int n) {
    pelab_sb_printf(sb, "[");
    for (int i = 0; i < n; i++) {
        const struct pelab_qa_row *r = &rows[i];
        pelab_sweep_json_row_start(sb, i, r->label, r->length, r->multiple);
        pelab_sb_printf(sb, ", \"examples\": %llu, \"answer_tokens\": %llu, \"span_nll\": ",
                        (unsigned long long)r->examples, (unsigned long long)r->tokens);
        pelab_sb_json_number(sb, r->loss);
        pelab_sb_printf(sb, ", \"span_perplexity\": ");
        pelab_sb_json_number(sb, r->ppl);
        pelab_sb_printf(sb, ", \"exact_match\": ");
        pelab_sb_json_number(sb, r->exact_match);
        pelab_sb_printf(sb, ", \"exact\": %llu, \"forced_exact_match\": ",
                        (unsigned long long)r->exact);
        pelab_sb_json_number(sb, r->forced_match);
        pelab_sb_printf(sb, ", \"forced_exact\": %llu, \"generated_answer_tokens\": %llu, "
                        "\"generated_tokens\": %llu, \"kv_cache\": %s, \"seconds\": ",
                        (unsigned long long)r->forced, (unsigned long long)r->tokens_right,
                        (unsigned long long)r->generated, r->cached ? "true" : "false");
        pelab_sb_json_number(sb, r->seconds);
        pelab_sb_printf(sb, "}");
    }
    pelab_sb_printf(sb, "]");
}

void pelab_qa_sweep_csv(struct pelab_sb *sb, const char *pe, const struct pelab_qa_row *rows,
                        int n) {
    pelab_sb_printf(sb, "pe,label,length,multiple,examples,tokens,nll,ppl,em,forced_em\n");
    for (int i = 0; i < n; i++) {
        const struct pelab_qa_row *r = &rows[i];
        pelab_sb_csv_cell(sb, pe);
        pelab_sb_printf(sb, ",%s,%d,%.9g,%llu,%llu,%.9g,%.9g,%.9g,%.9g\n", r->label,
                        r->length, r->multiple, (unsigned long long)r->examples,
                        (unsigned long long)r->tokens, r->loss, r->ppl, r->exact_match,
                        r->forced_match);
    }
}
