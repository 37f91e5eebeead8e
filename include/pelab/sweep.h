/* pelab/sweep.h — the length-extrapolation sweep (SPEC §5; the PoPE paper's Figure 2, the SeqPE
 * paper's Table I): a model trained at context T evaluated, unchanged, at lengths L = T, 2T, …,
 * 10T on long documents, NLL and perplexity per length.
 *
 * At each length the documents of the split (normally PELAB_SPLIT_LONG: the dataset's long
 * documents, or its test documents where it reserves none) that hold at least L+1 tokens are cut
 * as the task cuts its evaluation windows, at length L (pelab/task.h `windows` with `full`): for
 * text and dna consecutive windows of L scored positions covering each document, for music each
 * chorale's first L+1 tokens. Positions run 0..L-1; the model's training context (the learned
 * table's size, FIRE's L_train) stays what it was trained with. Attention runs on the tiled
 * kernel, so memory grows linearly in L.
 */
#ifndef PELAB_SWEEP_H
#define PELAB_SWEEP_H

#include <stdint.h>
#include "pelab/json.h"
#include "pelab/model.h"
#include "pelab/task.h"

#define PELAB_SWEEP_MAX 64 /* lengths per sweep */

struct pelab_sweep_length {
    int tokens;     /* L */
    char label[24]; /* as given: "2x" or "512" */
};

/* Parses "1x,2x,4x,8x,10x" or "512,1024" (the two forms may mix): a number followed by x is a
 * multiple of T, rounded to the nearest token; a plain integer is a token count. PELAB_ERR_USAGE
 * naming the item for anything else, a length below 1, or more than PELAB_SWEEP_MAX items. */
int pelab_sweep_parse(const char *spec, int T, struct pelab_sweep_length *out, int *n);

struct pelab_sweep_row {
    int length;          /* L */
    char label[24];
    double multiple;     /* L / T */
    uint64_t documents;  /* documents of at least L+1 tokens */
    uint64_t windows;    /* windows evaluated */
    uint64_t tokens;     /* positions scored */
    double loss;         /* mean NLL per scored token, nats */
    double ppl;          /* exp(loss) */
    double bpb;          /* text: bits per byte of the scored tokens' text; else 0 */
    double seconds;      /* wall time of this length */
};

/* Evaluates m on `split` of t at each length, rows[i] for lengths[i]. Every length is checked
 * before anything is evaluated: some document must reach it (PELAB_ERR_USAGE naming the length
 * and the longest document), and the encoding must accept positions 0..L-1 (a learned table
 * without --ape-extend interpolate refuses: PELAB_ERR_USAGE naming the option). A forward pass
 * holds about batch_tokens positions (at least one window). progress (may be NULL) is called
 * after each length. The task must be one of documents (t->ops->windows). */
int pelab_sweep(struct pelab_model *m, const struct pelab_task *t, enum pelab_split split,
                const struct pelab_sweep_length *lengths, int n, long batch_tokens,
                struct pelab_sweep_row *rows,
                void (*progress)(void *ctx, const struct pelab_sweep_row *row), void *ctx);

/* pelab_sweep's checks alone: every length fits some document of `split`, and the encoding
 * accepts positions 0..L-1 of the longest. */
int pelab_sweep_check(struct pelab_model *m, const struct pelab_task *t, enum pelab_split split,
                      const struct pelab_sweep_length *lengths, int n);

/* The rows as a JSON array of objects (docs/FORMATS.md, "Length sweep"). */
void pelab_sweep_json(struct pelab_sb *sb, const struct pelab_sweep_row *rows, int n);
/* What every sweep's row object (this one's and the QA sweep's) begins with: `, ` unless it is
 * row 0, then {"label": ..., "length": ..., "multiple": ... — the caller adds its fields and "}". */
void pelab_sweep_json_row_start(struct pelab_sb *sb, int i, const char *label, int length,
                                double multiple);
/* The rows as CSV for `pelab plot lines` (docs/FORMATS.md, "Length sweep"): the header
 * pe,label,length,multiple,documents,windows,tokens,nll,ppl (and bpb when the rows carry bits per
 * byte), then one line per row; `pe` is the encoding's name, the same on every line, so the files
 * of several runs concatenate into one table with a group column. */
void pelab_sweep_csv(struct pelab_sb *sb, const char *pe, const struct pelab_sweep_row *rows,
                     int n);

#endif
