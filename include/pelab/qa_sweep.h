/* pelab/qa_sweep.h — long-context QA at several lengths, as the SeqPE paper's Table II: a model
 * fine-tuned on task qa at context T evaluated, unchanged, at L = T, 2T, 4T, 8T.
 *
 * At each length the qa task is built again from the run's settings with --seq-len L, so the
 * haystack grows with L while example i keeps its key, values, question and relative depths (a
 * function of the data seed, the split and i: docs/DATA.md, "Task qa"). Per length:
 *
 *   answer-span NLL  = mean over answer tokens of -log p(answer token | context, question)
 *   span perplexity  = exp(answer-span NLL)
 *   forced EM        = examples whose every answer token is the argmax (teacher-forced)
 *   EM               = examples whose greedy generation, with the KV cache, writes the answer:
 *                      G = max(gen_tokens, answer tokens) tokens after the question (fewer
 *                      if the padding id comes; where the encoding refuses positions past
 *                      L-1, a learned table's end, only the answer's own tokens); the text
 *                      is cut where it leaves the answer's characters (digits; multi:
 *                      digits, ", "), trimmed, and compared lower-cased with the answer's
 *                      text cut alike (without its final ".").
 *
 * An encoding setting that cannot be cached (dynamic NTK past L_train, the learned table's
 * interpolation) generates by a forward pass over the whole context per token instead.
 */
#ifndef PELAB_QA_SWEEP_H
#define PELAB_QA_SWEEP_H

#include <stdint.h>
#include "pelab/json.h"
#include "pelab/model.h"
#include "pelab/options.h"
#include "pelab/sweep.h"
#include "pelab/task.h"

#define PELAB_QA_GEN_TOKENS 16 /* the SeqPE paper's greedy generation */

struct pelab_qa_row {
    int length;            /* L */
    char label[24];
    double multiple;       /* L / T */
    uint64_t examples;     /* questions asked */
    uint64_t tokens;       /* answer tokens scored */
    double loss;           /* answer-span NLL per token, nats */
    double ppl;            /* exp(loss) */
    double exact_match;    /* fraction of examples whose generation is the answer */
    double forced_match;   /* fraction of examples whose every answer token is the argmax */
    uint64_t exact, forced;
    uint64_t tokens_right; /* examples whose generation begins with the answer's tokens, token for
                            * token: `forced` when generation and the teacher-forced pass agree */
    uint64_t generated;    /* tokens generated over all examples */
    int cached;            /* generation used the KV cache */
    double seconds;
};

/* Evaluates m on `split` (val or test) of task qa with the run's `settings` (config.json's
 * options, with the evaluation-time ones) at each length, rows[i] for lengths[i]; `examples` per
 * length (0: the whole split), teacher-forced passes of about batch_tokens positions (at least
 * one example), at most `gen_tokens` generated
 * (1..1024). Every length is checked first: the task at that length (a --seq-len too short for
 * the question is its usage error, naming the lengths) and the encoding's positions 0..L-1
 * (refused as for text, e.g. a learned table without --ape-extend). progress may be NULL.
 * Collective across MPI ranks (each generates a share of the examples). */
int pelab_qa_sweep(struct pelab_model *m, const struct pelab_opts *settings,
                   enum pelab_split split, const struct pelab_sweep_length *lengths, int n,
                   uint64_t examples, long batch_tokens, int gen_tokens, struct pelab_qa_row *rows,
                   void (*progress)(void *ctx, const struct pelab_qa_row *row), void *ctx);

/* Whether a generated text is the answer: each cut at its first character (after leading white
 * space) outside `chars` (the answer's "." end goes), trimmed of white space, and compared
 * lower-cased. */
int pelab_qa_match(const char *g, size_t gn, const char *answer, size_t an, const char *chars);

/* The rows as a JSON array (docs/FORMATS.md, "QA sweep"). */
void pelab_qa_sweep_json(struct pelab_sb *sb, const struct pelab_qa_row *rows, int n);
/* CSV for `pelab plot lines`: pe,label,length,multiple,examples,tokens,nll,ppl,em,forced_em. */
void pelab_qa_sweep_csv(struct pelab_sb *sb, const char *pe, const struct pelab_qa_row *rows,
                        int n);

#endif
