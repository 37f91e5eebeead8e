/* pelab/train.h — training runs: options, presets, the training loop, run directories,
 * evaluation.
 *
 * A run is described entirely by a pelab_opts list (training options below, the model's, the
 * task's and the chosen encoding's). pelab_train() resolves it, trains, and keeps a run directory
 * (formats in docs/FORMATS.md):
 *
 *   config.json        every setting, resolved (the only settings source of a resume)
 *   model.safetensors  weights, config in the metadata
 *   checkpoints/       state-<step>.safetensors, the newest --keep: weights + AdamW moments +
 *                      step, data cursor: exact resume
 *   log.jsonl          one JSON object per logged step
 *   summary.json       final metrics
 *
 * Nothing here prints or exits: progress goes to an optional callback, failures return a status
 * with pelab_last_error() set. A run's work runs in a context (pelab/ctx.h): the caller's, whose
 * MPI job shares it across ranks and whose precision it sets from --precision for the run and
 * restores on return (pelab_train_in, pelab_train_resume_in); or, for pelab_train and
 * pelab_train_resume, one of its own (one process).
 */
#ifndef PELAB_TRAIN_H
#define PELAB_TRAIN_H

#include <stdint.h>
#include "pelab/ctx.h"
#include "pelab/model.h"
#include "pelab/options.h"
#include "pelab/precision.h"
#include "pelab/task.h"

#ifndef PELAB_VERSION
#define PELAB_VERSION "0.1.0"
#endif

/* steps, batch, accum, lr, min-lr, warmup, decay-steps, weight-decay, beta1, beta2, eps, clip,
 * seed, threads, precision, eval-every, eval-batches, log-every, save-every, keep, on-nan, nan-lr-factor,
 * nan-retries, check-finite, out, task, preset. */
extern const struct pelab_optdef pelab_train_options[];

/* What a non-finite training loss or gradient does (--on-nan), in the option's choice order. */
enum pelab_on_nan { PELAB_ON_NAN_STOP, PELAB_ON_NAN_SKIP, PELAB_ON_NAN_ROLLBACK };

/* The training options, read and cross-checked. */
struct pelab_train_config {
    int64_t steps;
    int batch, accum;
    double lr, min_lr;
    int64_t warmup, decay_steps; /* decay_steps resolved: 0 in the options means `steps` */
    double weight_decay, beta1, beta2, eps, clip;
    uint64_t seed;
    int threads;
    enum pelab_precision precision; /* of the matrix products, set in the run's context */
    int64_t eval_every, eval_batches, log_every, save_every;
    int64_t keep;                /* checkpoints kept */
    enum pelab_on_nan on_nan;
    double nan_lr_factor;        /* rollback: lr scale factor per rollback */
    int64_t nan_retries;         /* skip: skipped updates in a row; rollback: rollbacks */
    int check_finite;            /* scan activations after every training forward */
    char out[PELAB_OPT_VAL_MAX];
    char task[PELAB_OPT_VAL_MAX];
    char preset[PELAB_OPT_VAL_MAX];
};
/* Checks the training options of `o` and reads them (defaults where not given). `out` may stay
 * empty: pelab_train() then picks runs/<task>-<pe>-s<seed>. */
int pelab_train_config_read(const struct pelab_opts *o, struct pelab_train_config *c);

/* Whether option `name` may be given with a resume (steps, threads, keep and the NaN policy:
 * none of them changes the bits of a run that stays finite). */
int pelab_train_resume_option(const char *name);

/* Every key of `o` must be an option of the training table, the model table, the task `task`, or
 * one of the encodings `pes` (n_pes names); its value must pass its definition's check. Messages:
 * "unknown option --foo<hint>", "--rope-base does not apply to --pe pope",
 * "--indirect-max-len does not apply to --task text". `hint` (may be NULL) is appended to the
 * unknown-option message, e.g. " (see 'pelab help train')". */
int pelab_train_check_opts(const struct pelab_opts *o, const char *task, const char *const *pes,
                           int n_pes, const char *hint);

/* Presets: named defaults for one task. Their table lives in src/train/presets.c. */
struct pelab_preset {
    const char *task;
    const char *name;
    const char *summary;
    const char *settings; /* "key=value key=value ...": any training, model, task or encoding option */
};
/* All presets, terminated by an entry whose name is NULL. */
const struct pelab_preset *pelab_presets(void);
/* Fills every setting of the preset `name` for `task` that `o` does not give. A setting of an
 * encoding other than `pe` (e.g. pope-delta-init when pe is rope) is skipped. PELAB_ERR_USAGE for
 * an unknown preset (the message lists the task's presets). */
int pelab_preset_apply(struct pelab_opts *o, const char *task, const char *name, const char *pe);

/* Progress, reported to an optional callback. */
enum pelab_train_event {
    PELAB_TRAIN_START, /* before the first step (step = the step resumed from, 0 for a new run) */
    PELAB_TRAIN_STEP,  /* after every optimizer update */
    PELAB_TRAIN_EVAL,  /* after a validation pass (has_val set) */
    PELAB_TRAIN_SAVE,  /* after a checkpoint */
    PELAB_TRAIN_DONE,  /* after the final test evaluation and summary.json */
    PELAB_TRAIN_NOTICE /* something the user should know (message): a damaged checkpoint passed
                          over, a file repaired, a skipped update, a rollback */
};
struct pelab_train_progress {
    enum pelab_train_event event;
    const char *dir;        /* run directory */
    int64_t step, steps;    /* updates done, updates in the run */
    double lr;
    double loss, acc;       /* training loss and accuracy: mean over the log interval so far */
    int n_aux;              /* the encoding's own loss terms (SeqPE's regularisers), not in loss */
    const char *const *aux_names;
    double aux[PELAB_PE_AUX_MAX]; /* their means over the log interval; NaN: switched off */
    int has_val;
    double val_loss, val_acc;
    double test_loss, test_acc; /* DONE only */
    double tokens_per_s;    /* in this process: B·T·accum per update over wall time */
    double elapsed_s;       /* wall time of the whole run, resumed segments included */
    double eta_s;           /* time left at the current speed */
    int logged;             /* STEP: this step wrote a log line */
    int64_t skipped;        /* updates skipped (--on-nan skip) in the log interval so far */
    const char *message;    /* NOTICE: one line, naming the file or step it is about */
};
struct pelab_train_hooks {
    void (*progress)(void *ctx, const struct pelab_train_progress *p);
    void *ctx;
};

/* A new run from options (already checked with pelab_train_check_opts; a preset, if named, is
 * applied here). Usage errors (bad or incompatible settings, an existing run in `out`) are found
 * before any file is written. A non-finite loss or gradient is handled as --on-nan says: stop
 * the run with PELAB_ERR_RUNTIME naming the step (the last checkpoint is kept), skip the update,
 * or roll back to the last checkpoint with a lower learning rate. hooks may be NULL. The run's
 * work runs in ctx: across the ranks of its MPI job (rank 0 alone writes and reports), in the
 * precision of --precision. */
int pelab_train_in(struct pelab_ctx *ctx, const struct pelab_opts *opts, const struct pelab_train_hooks *hooks);
/* The same in a context of its own, in one process. */
int pelab_train(const struct pelab_opts *opts, const struct pelab_train_hooks *hooks);

/* Everything pelab_train() checks before it writes anything (preset, options, task and model
 * construction), without training: compare validates all its runs up front with it. */
int pelab_train_validate(const struct pelab_opts *opts);
/* The same, then check(model, task, ctx) on the model and task the run would train (fresh
 * weights): lets a caller refuse what it would do with the trained run before training it. */
int pelab_train_validate_with(const struct pelab_opts *opts,
                              int (*check)(struct pelab_model *m, const struct pelab_task *t, void *ctx),
                              void *ctx);

/* Whether `dir` may be reused as the run `opts` asks for: PELAB_OK when it holds no run
 * (no config.json) or one whose recorded settings (config.json: presets applied, automatic
 * settings resolved) are the ones `opts` resolve to, apart from --out, --threads and --keep;
 * else PELAB_ERR_USAGE naming the settings that differ, "--steps 3 (asked: 300)". compare
 * reuses a finished run, and resumes an interrupted one, only after this check. */
int pelab_train_check_run_settings(const struct pelab_opts *opts, const char *dir);

/* Continues the run in `dir` from its newest valid checkpoint (from step 0 when it saved none
 * yet) with the settings of dir/config.json; a damaged checkpoint is passed over for the one
 * before it, with a NOTICE. `overrides` may give only the options pelab_train_resume_option
 * accepts (NULL: none). The continued run's losses equal an uninterrupted run's bit for bit,
 * thread count alike. */
int pelab_train_resume_in(struct pelab_ctx *ctx, const char *dir, const struct pelab_opts *overrides,
                          const struct pelab_train_hooks *hooks);
/* The same in a context of its own, in one process. */
int pelab_train_resume(const char *dir, const struct pelab_opts *overrides,
                       const struct pelab_train_hooks *hooks);

/* Progress printer for the callback: on a terminal one line updated in place, otherwise one
 * plain line per logged step. `label` prefixes each line (may be NULL). */
struct pelab_progress_printer {
    const char *label;
    int tty;
    double last_draw; /* private */
    int open_line;    /* private: a terminal line awaits its newline */
    int has_val;      /* private: the last validation, kept on the terminal line */
    double val_loss, val_acc;
};
void pelab_progress_printer_init(struct pelab_progress_printer *pp, const char *label);
void pelab_progress_print(void *pp, const struct pelab_train_progress *p);
/* Ends a terminal line left open by a run that stopped early, so an error prints below it. */
void pelab_progress_printer_end(struct pelab_progress_printer *pp);
/* Wall time as "1h02m", "1m40s" or "12s" (rounded to the second; a negative time is "0s"). */
void pelab_format_duration(char *buf, size_t size, double seconds);

/* A run directory opened for evaluation: settings from config.json, task, and the model with the
 * weights of model.safetensors. */
struct pelab_run {
    struct pelab_opts settings; /* config.json: training, model, task and encoding options, and
                                 * the evaluation-time options it was opened with */
    struct pelab_task task;
    struct pelab_model model;
    int64_t step;               /* the step model.safetensors was saved at */
};
/* PELAB_ERR_RUNTIME, with one line naming the file, for a missing or foreign directory or a
 * damaged file. */
int pelab_run_open(struct pelab_run *r, const char *dir);
/* The same, with evaluation-time options of the run's task and encoding (their `eval_options`:
 * where the data is, dna's test genome, RoPE's length extension, the learned table's
 * interpolation), added to `settings` before the task and the model are built. PELAB_ERR_USAGE
 * naming the option when one belongs to another task or encoding or has a value it refuses.
 * eval_opts may be NULL. A task that cannot read its data fails with its own message (which
 * names the file, or the command that installs the dataset). */
int pelab_run_open_with(struct pelab_run *r, const char *dir, const struct pelab_opts *eval_opts);
/* The settings and the model with its weights, without the task: nothing of the task's data is
 * read, so a run of text, dna or music opens where its dataset is not installed. The model's
 * vocabulary and context come from config.json's "derived" group (r->task stays empty, its ops
 * NULL); a config.json without that group opens the task as pelab_run_open does. For what reads
 * only the weights: analyze bias and seqpe. */
int pelab_run_open_model(struct pelab_run *r, const char *dir);
void pelab_run_close(struct pelab_run *r);

/* Reads dir/config.json into `settings` (the options of every table, as text). An option of the
 * run's encoding that the file lacks and for which the encoding's table gives the value runs
 * without it were made with (pelab_posenc_ops.unrecorded) is set to that value. */
int pelab_run_read_config(const char *dir, struct pelab_opts *settings);
/* The same from the text of a config.json in memory; `path` names it in messages. */
int pelab_config_parse(const char *path, const char *text, size_t size,
                       struct pelab_opts *settings);

/* Evaluation: forward only, training off. Examples first .. first+count-1 of `split`, `batch`
 * at a time; count 0 means the whole split. loss: mean cross-entropy over target positions;
 * acc: fraction of target positions where the argmax over the vocabulary is the target. */
struct pelab_eval_result {
    double loss, acc;
    uint64_t examples, targets, correct;
    double ppl;     /* exp(loss): perplexity per token */
    uint64_t bytes; /* text tasks: bytes of text of the scored targets (0 otherwise) */
    double bpb;     /* bits per byte, loss·targets / (ln 2 · bytes); 0 without bytes */
    /* Examples with a target whose every target is the argmax (qa: the answer span, which greedy
     * generation then reproduces token for token), and their fraction of those examples. */
    uint64_t exact, answered;
    double exact_match;
};
/* For a task of documents (one with `windows`) the examples are the windows of its evaluation
 * cut at the training length (pelab/task.h), on every split, train included. */
int pelab_evaluate(struct pelab_model *m, const struct pelab_task *t, enum pelab_split split,
                   uint64_t first, uint64_t count, int batch, struct pelab_eval_result *r);
/* The same over the whole evaluation cut of a task of documents at length L (`full`: only the
 * documents of at least L+1 tokens), `batch` windows per forward pass. The model's training
 * context is unchanged: positions run 0..L-1. */
int pelab_evaluate_windows(struct pelab_model *m, const struct pelab_task *t,
                           enum pelab_split split, int L, int full, int batch,
                           struct pelab_eval_result *r);
/* The sides of `spec` ("28,56,84" or "1x,2x,3x", pelab_image_parse_sides) for task t's images:
 * sides[i], i < *n (room for PELAB_IMAGE_MAX_SIDES), and the task's *train_side and *patch.
 * PELAB_ERR_USAGE for a task without images, a side the patch does not divide, or one whose grid
 * positions model m's encoding cannot take (SeqPE's digits: checked here, before any work; m may
 * be NULL to skip that). */
int pelab_task_sides(struct pelab_task *t, struct pelab_model *m, const char *spec, int *sides,
                     int *n, int *train_side, int *patch);
/* The image task at each of sides[0..n) (pelab_task_sides): the split's images resized to the
 * side, examples [0, count) (0: all) in batches of `batch`, into r[i]. The task is at its trained
 * side again on return. */
int pelab_evaluate_sides(struct pelab_model *m, struct pelab_task *t, enum pelab_split split,
                         const int *sides, int n, uint64_t count, int batch,
                         struct pelab_eval_result *r);
/* The positions model m reads for the filled batch b, examples first .. first + b->B - 1 of task
 * t: with --random-positions, each row's drawn as every evaluation draws them (from its example
 * index, pelab/posenc.h), in place of b->pos; otherwise b's own, untouched. PELAB_ERR_USAGE for a
 * row longer than N. Evaluation, sample and the analyses all read their batches through it. */
int pelab_eval_positions(const struct pelab_model *m, const struct pelab_task *t, struct pelab_batch *b,
                         uint64_t first);
/* Whether model m takes positions pos (B,T): its encoding's prepare step refuses what it cannot
 * represent, naming the option that would allow it; with --random-positions N, T must be <= N.
 * PELAB_ERR_USAGE otherwise. */
int pelab_check_positions(struct pelab_model *m, const int32_t *pos, int B, int T);
/* Whether m's encoding takes the positions of split's batches (pelab_task_split_len long; an
 * image's at the task's current side): its prepare step refuses what it cannot represent, naming
 * the option that would allow it (PELAB_ERR_USAGE). */
int pelab_check_split_positions(struct pelab_model *m, const struct pelab_task *t, enum pelab_split split);
/* An algorithmic task's test split size by size (pelab/task.h, `sizes`): r[n-1] of the
 * per_size examples of size n, for n = 1..test_max (room for test_max results), each size in
 * batches of `batch` at its own length (size_len), one progress span in all. */
int pelab_evaluate_sizes(struct pelab_model *m, const struct pelab_task *t, int batch,
                         struct pelab_eval_result *r);
/* Their rows as a JSON array, [{"size", "trained", "examples", "exact_match", "accuracy",
 * "loss"}, ...] for sizes 1..n, those up to train_max trained (docs/FORMATS.md). */
struct pelab_sb;
void pelab_sizes_json(struct pelab_sb *sb, const struct pelab_eval_result *r, int n, int train_max);

/* Progress of evaluations, for work that can run for minutes (a whole split, a length sweep):
 * after each forward pass the hook gets the span's label, its windows (examples) done and in all,
 * the fraction of its work done (windows weighted by their cost, L·(L + 12·D) for length L) and
 * the seconds since the span began. A span is one pelab_evaluate or pelab_evaluate_windows call,
 * or all of those between pelab_eval_span_begin and pelab_eval_span_end. Process-wide; NULL
 * (the default) reports nothing. */
struct pelab_eval_progress {
    const char *what;        /* "test split", "length sweep" */
    const char *part;        /* the part running now ("2x"), or "" */
    uint64_t done, total;    /* windows (examples) */
    const char *unit;        /* "windows" or "examples" */
    double fraction, elapsed_s, eta_s; /* eta_s < 0: not known yet */
    int finished;            /* the span ended (done, or stopped by an error) */
};
void pelab_eval_set_progress(void (*hook)(void *ctx, const struct pelab_eval_progress *p),
                             void *ctx);
/* A span over several evaluations, of `work` units in all (the sum of their windows' costs,
 * pelab_eval_cost) and `windows` windows; `part` names the evaluation now running. */
void pelab_eval_span_begin(const char *what, double work, uint64_t windows);
void pelab_eval_span_part(const char *part);
void pelab_eval_span_end(void);
/* The cost of one window of length L of model m, in the units of a span's `work`. */
double pelab_eval_cost(const struct pelab_model *m, int L);
/* A hook for pelab_eval_set_progress that writes to stderr, each line prefixed by the string ctx
 * (NULL: none): nothing for the first
 * 3 s of a span; then on a terminal one line rewritten in place, otherwise a line every 15 s,
 * each with the time left; the terminal line is cleared when the span ends. */
void pelab_eval_progress_print(void *ctx, const struct pelab_eval_progress *p);

/* Argmax over the vocabulary of logits row (V,): first maximum. */
int pelab_argmax(const pelab_real *row, int V);

#endif
