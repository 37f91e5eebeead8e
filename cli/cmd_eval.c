/* pelab eval: loss and accuracy (indirect) or NLL, perplexity and bits per byte (text, dna,
 * music) of a run's model on a split (the whole split by default); with --lengths, the
 * length-extrapolation sweep (pelab/sweep.h), or on a qa run the answer-span perplexity and
 * exact match per length (pelab/qa_sweep.h), also written as CSV with --csv; with --resolutions
 * (image), the accuracy at each image side, the test images resized bilinearly. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "args.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/precision.h"
#include "pelab/qa_sweep.h"
#include "pelab/safetensors.h"
#include "pelab/status.h"
#include "pelab/dist.h"
#include "pelab/image.h"
#include "pelab/sweep.h"
#include "pelab/threads.h"
#include "pelab/train.h"

static const struct pelab_optdef eval_options[] = {
    {"model", PELAB_OPT_STR, "", 0, 0, NULL, "run directory to evaluate (required)"},
    {"split", PELAB_OPT_CHOICE, "test", 0, 0, "val|test|train|long",
     "split to evaluate (long: the documents held out for length extrapolation; text, dna and "
     "music only)"},
    {"examples", PELAB_OPT_INT, "0", 0, 1e15, NULL,
     "evaluate the first N examples (windows) of the split (0: all)"},
    {"batch", PELAB_OPT_INT, "64", 1, 65536, NULL,
     "examples per forward pass (with --lengths: batch x T tokens per pass at every length; "
     "when not given, passes of 8192 tokens, or one window where that is longer)"},
    {"lengths", PELAB_OPT_STR, "", 0, 0, NULL,
     "length-extrapolation sweep: evaluate at these lengths, multiples of the training length "
     "or token counts (1x,2x,4x,8x,10x or 512,1024), on the long documents (or --split)"},
    {"gen-tokens", PELAB_OPT_INT, "16", 1, 1024, NULL,
     "qa with --lengths: tokens of each greedy generation (at least the answer's), whose exact "
     "match is the EM column"},
    {"resolutions", PELAB_OPT_STR, "", 0, 0, NULL,
     "image: resolution sweep, the split's images resized (bilinear) to these sides, multiples "
     "of the patch (28,36,44,56,84 or 1x,2x,3x of the trained side)"},
    {"json", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "print one JSON object instead of text"},
    {"csv", PELAB_OPT_STR, "", 0, 0, NULL,
     "with --lengths: also write the sweep to this CSV file (replaced atomically), columns "
     "pe,label,length,multiple,documents,windows,tokens,nll,ppl and, for text, bpb (qa: "
     "pe,label,length,multiple,examples,tokens,nll,ppl,em,forced_em); for "
     "'pelab plot lines --x length --y ppl'. With --resolutions: columns "
     "pe,side,grid,multiple,tokens,examples,accuracy,loss ('--x side --y accuracy')"},
    PELAB_OPT_ROW_THREADS,
    PELAB_OPT_ROW_PRECISION,
    PELAB_OPT_ROW_EDITED,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

void pelab_cmd_eval_help(FILE *f) {
    struct pelab_group g[PELAB_GROUPS_MAX];
    int n = pelab_args_eval_groups(g, "options", eval_options);
    fprintf(f, "usage: pelab eval --model DIR [--split val|test|train|long] [--json] [--batch N]\n"
               "       pelab eval --model DIR --lengths 1x,2x,4x,8x,10x [--json] [--csv FILE]\n"
               "       pelab eval --model DIR --resolutions 28,36,44,56,84 [--json] [--csv FILE]\n\n"
               "Loads DIR/config.json and DIR/model.safetensors and reports, over the target\n"
               "positions of the split, mean loss and accuracy (indirect) or NLL per token,\n"
               "perplexity and, for text, bits per byte (text, dna, music). --lengths evaluates\n"
               "the unchanged model at other lengths on the long documents, one row per length\n"
               "(docs/DATA.md, 'Tasks: windows of documents'); --csv FILE also writes the rows\n"
               "as CSV for 'pelab plot lines --csv FILE --x length --y ppl --logx'. The task and\n"
               "encoding groups below are evaluation-time options: they apply to runs of that task\n"
               "or encoding (e.g. RoPE's length extension, --rope-scaling yarn --rope-scale 4) and\n"
               "change only this evaluation.\n"
               "On a run of task qa, --lengths asks the same questions of the test split (or\n"
               "--split val) with haystacks of each length: answer-span NLL and perplexity,\n"
               "and the exact match of a greedy generation of --gen-tokens tokens with the KV\n"
               "cache (EM) beside the teacher-forced one (forced EM), as the SeqPE paper's\n"
               "Table II; --examples N asks the first N questions. --resolutions (image) resizes\n"
               "the split's images (bilinear, PyTorch's align_corners=False) to each side, a\n"
               "grid of side/patch patches a side, and reports the accuracy at each.\n");
    pelab_args_help(f, g, n, NULL);
}

/* {"model": DIR, "task": ..., "pe": ... — how every JSON report of eval begins. */
static void json_head(struct pelab_sb *sb, const char *dir, const struct pelab_run *run) {
    pelab_sb_printf(sb, "{\"model\": ");
    pelab_sb_json_string(sb, dir);
    pelab_sb_printf(sb, ", \"task\": ");
    pelab_sb_json_string(sb, run->task.ops->name);
    pelab_sb_printf(sb, ", \"pe\": ");
    pelab_sb_json_string(sb, run->model.cfg.pe);
}

/* The evaluation-time options given, as a JSON object. */
static void json_options(struct pelab_sb *sb, const struct pelab_opts *enc) {
    pelab_sb_printf(sb, "{");
    for (int i = 0; i < enc->count; i++) {
        pelab_sb_printf(sb, "%s", i ? ", " : "");
        pelab_sb_json_string(sb, enc->kv[i].key);
        pelab_sb_printf(sb, ": ");
        pelab_sb_json_string(sb, enc->kv[i].val);
    }
    pelab_sb_printf(sb, "}");
}

static void print_result(const char *dir, const struct pelab_run *run, enum pelab_split split,
                         const struct pelab_eval_result *r, int json) {
    const char *name = pelab_split_name(split);
    if (json) {
        struct pelab_sb sb = {0};
        pelab_sb_printf(&sb, "{\"model\": ");
        pelab_sb_json_string(&sb, dir);
        pelab_sb_printf(&sb, ", \"task\": ");
        pelab_sb_json_string(&sb, run->task.ops->name);
        pelab_sb_printf(&sb, ", \"split\": \"%s\", \"step\": %" PRId64 ", \"examples\": %" PRIu64
                        ", \"targets\": %" PRIu64 ", \"loss\": ",
                        name, run->step, r->examples, r->targets);
        pelab_sb_json_number(&sb, r->loss);
        if (run->task.lm) {
            pelab_sb_printf(&sb, ", \"perplexity\": ");
            pelab_sb_json_number(&sb, r->ppl);
            if (r->bytes) {
                pelab_sb_printf(&sb, ", \"bytes\": %" PRIu64 ", \"bits_per_byte\": ", r->bytes);
                pelab_sb_json_number(&sb, r->bpb);
            }
        }
        pelab_sb_printf(&sb, ", \"accuracy\": ");
        pelab_sb_json_number(&sb, r->acc);
        if (!run->task.lm) {
            pelab_sb_printf(&sb, ", \"exact_match\": ");
            pelab_sb_json_number(&sb, r->exact_match);
        }
        pelab_sb_printf(&sb, "}\n");
        fputs(sb.data, stdout);
        pelab_sb_free(&sb);
    } else if (run->task.lm) {
        printf("%s: NLL %.4f per token  perplexity %.3f", name, r->loss, r->ppl);
        if (r->bytes) printf("  bits/byte %.4f", r->bpb);
        printf("  [%s, step %" PRId64 ", %" PRIu64 " tokens in %" PRIu64 " windows]\n", dir,
               run->step, r->targets, r->examples);
    } else {
        printf("%s: accuracy %.2f%% (%" PRIu64 "/%" PRIu64 ")  loss %.4f  [%s, step %" PRId64
               ", %" PRIu64 " examples]\n",
               name, 100 * r->acc, r->correct, r->targets, r->loss, dir, run->step, r->examples);
        if (r->targets > r->answered) /* answers of several tokens: whole answers right */
            printf("%s: exact match %.2f%% (%" PRIu64 "/%" PRIu64 " examples with every answer "
                   "token right)\n", name, 100 * r->exact_match, r->exact, r->answered);
    }
}

/* A finished length, on a terminal: the sweep of a big model at 10x can take a while. */
static void sweep_progress(void *ctx, const struct pelab_sweep_row *row) {
    if (!*(int *)ctx) return;
    fprintf(stderr, "\r\033[K  %s (%d tokens): NLL %.4f, %.1f s\n", row->label, row->length,
            row->loss, row->seconds);
}

/* batch: windows of T per pass as --batch gave it, 0 when not given; csv: the --csv file, or "".
 * The CSV file is written after the rows are printed, so a path that cannot be written still
 * leaves the sweep's results on standard output. */
static int sweep(const char *dir, struct pelab_run *run, enum pelab_split split,
                 const char *spec, int batch, int json, const char *csv,
                 const struct pelab_opts *enc) {
    const struct pelab_task *t = &run->task;
    if (!t->ops->windows)
        return pelab_fail(PELAB_ERR_USAGE, "--lengths: task %s has no documents to evaluate at "
                          "other lengths (tasks of documents: text, dna, music)", t->ops->name);
    static struct pelab_sweep_length lengths[PELAB_SWEEP_MAX];
    static struct pelab_sweep_row rows[PELAB_SWEEP_MAX];
    int n, T = t->seq_len;
    int rc = pelab_sweep_parse(spec, T, lengths, &n);
    if (rc) return rc;
    int tty = !json && isatty(fileno(stderr)) && run->model.ctx->dist.rank == 0;
    /* Each position of a pass holds its logits and probabilities, 2·V floats (gpt2: 400 kB): a
     * pass of 64 windows of 10T would not fit a workstation, so by default passes hold 8192
     * tokens (at least one window). */
    long tokens = batch > 0 ? (long)batch * T : 8192;
    rc = pelab_sweep(&run->model, t, split, lengths, n, tokens, rows, sweep_progress, &tty);
    if (rc) return rc;
    struct pelab_sb sb = {0};
    if (json) {
        json_head(&sb, dir, run);
        pelab_sb_printf(&sb, ", \"step\": %" PRId64 ", \"split\": \"%s\", \"train_length\": %d, "
                        "\"attention\": \"tiled\", \"eval_options\": ",
                        run->step, pelab_split_name(split), T);
        json_options(&sb, enc);
        pelab_sb_printf(&sb, ", \"rows\": ");
        pelab_sweep_json(&sb, rows, n);
        pelab_sb_printf(&sb, "}\n");
    } else {
        int bpb = rows[0].bpb > 0;
        pelab_sb_printf(&sb, "length extrapolation: %s (task %s, pe %s, step %" PRId64
                        "), trained at T = %d, %s documents\n",
                        dir, t->ops->name, run->model.cfg.pe, run->step, T,
                        pelab_split_name(split));
        pelab_sb_printf(&sb, "%-8s %8s %7s %5s %8s %10s %9s %10s%s\n", "length", "tokens", "x T",
                        "docs", "windows", "scored", "NLL", "ppl", bpb ? "  bits/byte" : "");
        for (int i = 0; i < n; i++) {
            const struct pelab_sweep_row *r = &rows[i];
            pelab_sb_printf(&sb, "%-8s %8d %7.2f %5" PRIu64 " %8" PRIu64 " %10" PRIu64
                            " %9.4f %10.3f", r->label, r->length, r->multiple, r->documents,
                            r->windows, r->tokens, r->loss, r->ppl);
            if (bpb) pelab_sb_printf(&sb, " %10.4f", r->bpb);
            pelab_sb_printf(&sb, "\n");
        }
    }
    fputs(sb.data, stdout);
    pelab_sb_free(&sb);
    if (!csv[0] || run->model.ctx->dist.rank > 0) return PELAB_OK; /* across MPI ranks, rank 0 writes */
    struct pelab_sb text = {0};
    pelab_sweep_csv(&text, run->model.cfg.pe, rows, n);
    rc = pelab_write_file_atomic(csv, text.data, text.len);
    pelab_sb_free(&text);
    return rc;
}

static void qa_progress(void *ctx, const struct pelab_qa_row *row) {
    if (!*(int *)ctx) return;
    fprintf(stderr, "\r\033[K  %s (%d tokens): span NLL %.4f, EM %.3f, %.1f s\n", row->label,
            row->length, row->loss, row->exact_match, row->seconds);
}

/* --lengths on a run of task qa (pelab/qa_sweep.h): the table, or the JSON, and the CSV. */
static int qa_sweep(const char *dir, struct pelab_run *run, enum pelab_split split,
                    const char *spec, int batch, uint64_t examples, int gen_tokens, int json,
                    const char *csv, const struct pelab_opts *enc) {
    static struct pelab_sweep_length lengths[PELAB_SWEEP_MAX];
    static struct pelab_qa_row rows[PELAB_SWEEP_MAX];
    int n, T = run->task.seq_len;
    int rc = pelab_sweep_parse(spec, T, lengths, &n);
    if (rc) return rc;
    int tty = !json && isatty(fileno(stderr)) && run->model.ctx->dist.rank == 0;
    long tokens = batch > 0 ? (long)batch * T : 8192;
    rc = pelab_qa_sweep(&run->model, &run->settings, split, lengths, n, examples, tokens,
                        gen_tokens, rows, qa_progress, &tty);
    if (rc) return rc;
    const char *variant = pelab_opts_get(&run->settings, "qa-variant");
    if (!variant) variant = "passkey";
    struct pelab_sb sb = {0};
    if (json) {
        pelab_sb_printf(&sb, "{\"model\": ");
        pelab_sb_json_string(&sb, dir);
        pelab_sb_printf(&sb, ", \"task\": \"qa\", \"variant\": ");
        pelab_sb_json_string(&sb, variant);
        pelab_sb_printf(&sb, ", \"pe\": ");
        pelab_sb_json_string(&sb, run->model.cfg.pe);
        pelab_sb_printf(&sb, ", \"step\": %" PRId64 ", \"split\": \"%s\", \"train_length\": %d, "
                        "\"gen_tokens\": %d, \"eval_options\": ", run->step,
                        pelab_split_name(split), T, gen_tokens);
        json_options(&sb, enc);
        pelab_sb_printf(&sb, ", \"rows\": ");
        pelab_qa_sweep_json(&sb, rows, n);
        pelab_sb_printf(&sb, "}\n");
    } else {
        pelab_sb_printf(&sb, "long-context QA: %s (qa %s, pe %s, step %" PRId64 "), fine-tuned at "
                        "T = %d, %s questions, greedy generation of %d tokens%s\n", dir, variant,
                        run->model.cfg.pe, run->step, T, pelab_split_name(split), gen_tokens,
                        rows[0].cached ? " with the KV cache" : " (recomputed: no KV cache)");
        pelab_sb_printf(&sb, "%-8s %8s %7s %9s %8s %9s %10s %7s %9s\n", "length", "tokens", "x T",
                        "questions", "answer", "span NLL", "span ppl", "EM", "forced EM");
        for (int i = 0; i < n; i++) {
            const struct pelab_qa_row *r = &rows[i];
            pelab_sb_printf(&sb, "%-8s %8d %7.2f %9" PRIu64 " %8" PRIu64 " %9.4f %10.3f %7.3f "
                            "%9.3f\n", r->label, r->length, r->multiple, r->examples, r->tokens,
                            r->loss, r->ppl, r->exact_match, r->forced_match);
        }
    }
    fputs(sb.data, stdout);
    pelab_sb_free(&sb);
    if (!csv[0] || run->model.ctx->dist.rank > 0) return PELAB_OK;
    struct pelab_sb text = {0};
    pelab_qa_sweep_csv(&text, run->model.cfg.pe, rows, n);
    rc = pelab_write_file_atomic(csv, text.data, text.len);
    pelab_sb_free(&text);
    return rc;
}

/* An algorithmic task's test split (pelab/task.h, `sizes`), size by size: the exact match, token
 * accuracy and loss of each size's examples, the trained sizes marked — the accuracy curve inside
 * and beyond the training range — as a table or JSON, and as CSV in `csv` when not "". */
static int by_size(const char *dir, struct pelab_run *run, int batch, int json, const char *csv) {
    struct pelab_task *t = &run->task;
    int train_max, test_max, per_size;
    t->ops->sizes(t, &train_max, &test_max, &per_size);
    struct pelab_eval_result *r = calloc((size_t)test_max, sizeof *r);
    if (!r) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    int rc = pelab_evaluate_sizes(&run->model, t, batch, r);
    struct pelab_sb sb = {0}, text = {0};
    pelab_sb_printf(&text, "pe,size,trained,examples,exact_match,accuracy,loss\n");
    if (json) {
        json_head(&sb, dir, run);
        pelab_sb_printf(&sb, ", \"step\": %" PRId64 ", \"split\": \"test\", \"train_max\": %d, \"rows\": ",
                        run->step, train_max);
        pelab_sizes_json(&sb, r, test_max, train_max);
    } else {
        pelab_sb_printf(&sb, "test split by size: %s (task %s, pe %s, step %" PRId64 "), trained on sizes 1..%d\n"
                        "size  examples  exact match  token acc     loss\n", dir, t->ops->name,
                        run->model.cfg.pe, run->step, train_max);
    }
    for (int n = 1; n <= test_max && !rc; n++) {
        const struct pelab_eval_result *e = &r[n - 1];
        if (!json)
            pelab_sb_printf(&sb, "%4d  %8" PRIu64 "  %10.1f%%  %8.1f%%  %7.4f%s\n", n, e->examples,
                            100 * e->exact_match, 100 * e->acc, e->loss, n <= train_max ? "  trained" : "");
        pelab_sb_csv_cell(&text, run->model.cfg.pe);
        pelab_sb_printf(&text, ",%d,%d,%" PRIu64 ",%.9g,%.9g,%.9g\n", n,
                        n <= train_max, e->examples, e->exact_match, e->acc, e->loss);
    }
    if (json) pelab_sb_printf(&sb, "}\n");
    free(r);
    if (!rc && run->model.ctx->dist.rank == 0) fputs(sb.data, stdout);
    if (!rc && csv[0] && run->model.ctx->dist.rank == 0) rc = pelab_write_file_atomic(csv, text.data, text.len);
    pelab_sb_free(&sb);
    pelab_sb_free(&text);
    return rc;
}

/* The image task at each side of `spec`: accuracy and loss per side, as a table or JSON, and as
 * CSV in `csv` when not "". */
static int resolutions(const char *dir, struct pelab_run *run, enum pelab_split split, const char *spec,
                       uint64_t examples, int batch, int json, const char *csv) {
    struct pelab_task *t = &run->task;
    int train_side, patch, sides[PELAB_IMAGE_MAX_SIDES], n;
    struct pelab_eval_result r[PELAB_IMAGE_MAX_SIDES];
    int rc = pelab_task_sides(t, &run->model, spec, sides, &n, &train_side, &patch);
    if (!rc) rc = pelab_evaluate_sides(&run->model, t, split, sides, n, examples, batch, r);
    if (rc) return rc;
    struct pelab_sb sb = {0}, text = {0};
    if (json) {
        json_head(&sb, dir, run);
        pelab_sb_printf(&sb, ", \"step\": %" PRId64 ", \"split\": \"%s\", \"train_side\": %d, "
                        "\"patch\": %d, \"rows\": [", run->step, pelab_split_name(split), train_side, patch);
        for (int i = 0; i < n; i++) {
            pelab_sb_printf(&sb, "%s{\"side\": %d, \"grid\": %d, \"multiple\": ", i ? ", " : "", sides[i],
                            sides[i] / patch);
            pelab_sb_json_number(&sb, (double)sides[i] / train_side);
            pelab_sb_printf(&sb, ", \"tokens\": %d, \"examples\": %" PRIu64 ", \"correct\": %" PRIu64
                            ", \"accuracy\": ", 1 + (sides[i] / patch) * (sides[i] / patch), r[i].examples,
                            r[i].correct);
            pelab_sb_json_number(&sb, r[i].acc);
            pelab_sb_printf(&sb, ", \"loss\": ");
            pelab_sb_json_number(&sb, r[i].loss);
            pelab_sb_printf(&sb, "}");
        }
        pelab_sb_printf(&sb, "]}\n");
    } else {
        pelab_sb_printf(&sb, "resolution extrapolation: %s (task %s, pe %s, step %" PRId64 "), trained at "
                        "%dx%d (grid %dx%d of %dx%d patches), %s images\n", dir, t->ops->name,
                        run->model.cfg.pe, run->step, train_side, train_side, train_side / patch,
                        train_side / patch, patch, patch, pelab_split_name(split));
        pelab_sb_printf(&sb, "%-6s %-7s %6s %7s %9s %9s %8s\n", "side", "grid", "x side", "tokens",
                        "examples", "accuracy", "loss");
        for (int i = 0; i < n; i++) {
            char grid[32];
            snprintf(grid, sizeof grid, "%dx%d", sides[i] / patch, sides[i] / patch);
            pelab_sb_printf(&sb, "%-6d %-7s %6.2f %7d %9" PRIu64 " %8.2f%% %8.4f\n", sides[i], grid,
                            (double)sides[i] / train_side, 1 + (sides[i] / patch) * (sides[i] / patch),
                            r[i].examples, 100 * r[i].acc, r[i].loss);
        }
    }
    fputs(sb.data, stdout);
    pelab_sb_free(&sb);
    if (!csv[0] || run->model.ctx->dist.rank > 0) return PELAB_OK;
    pelab_sb_printf(&text, "pe,side,grid,multiple,tokens,examples,accuracy,loss\n");
    for (int i = 0; i < n; i++) {
        pelab_sb_csv_cell(&text, run->model.cfg.pe);
        pelab_sb_printf(&text, ",%d,%d,%.6g,%d,%" PRIu64 ",%.6g,%.6g\n", sides[i], sides[i] / patch,
                        (double)sides[i] / train_side, 1 + (sides[i] / patch) * (sides[i] / patch),
                        r[i].examples, r[i].acc, r[i].loss);
    }
    rc = pelab_write_file_atomic(csv, text.data, text.len);
    pelab_sb_free(&text);
    return rc;
}

int pelab_cmd_eval(struct pelab_ctx *ctx, int argc, char **argv) {
    static struct pelab_opts opts, enc;
    int help = 0;
    int rc = pelab_args_run_command(ctx, argc, argv, eval_options, "eval", pelab_cmd_eval_help, &opts, &enc,
                                    &help);
    if (rc || help) return rc;
    const char *dir = pelab_opt_str(&opts, eval_options, "model");
    const char *lengths = pelab_opt_str(&opts, eval_options, "lengths");
    const char *csv = pelab_opt_str(&opts, eval_options, "csv");
    const char *res = pelab_opt_str(&opts, eval_options, "resolutions");
    if (pelab_opts_get(&opts, "resolutions") && !res[0])
        return pelab_fail(PELAB_ERR_USAGE, "--resolutions: an empty list (give sides like 28,56,84 or 1x,2x,3x)");
    if (res[0] && lengths[0])
        return pelab_fail(PELAB_ERR_USAGE, "--resolutions and --lengths: one sweep at a time");
    if (pelab_opts_get(&opts, "lengths") && !lengths[0])
        return pelab_fail(PELAB_ERR_USAGE, "--lengths: an empty list (give lengths like 1x,2x,4x "
                          "or 512,1024)");
    if (pelab_opts_get(&opts, "csv") && !csv[0])
        return pelab_fail(PELAB_ERR_USAGE, "--csv: an empty file name");

    if (strcmp(csv, "-") == 0)
        return pelab_fail(PELAB_ERR_USAGE, "--csv -: standard output holds the table (or the "
                          "JSON); name a file");
    /* a sweep reads the long documents unless --split says otherwise */
    enum pelab_split split = pelab_args_split(&opts, eval_options);
    if (lengths[0] && !pelab_opts_get(&opts, "split")) split = PELAB_SPLIT_LONG;
    int batch = (int)pelab_opt_int(&opts, eval_options, "batch");
    int sweep_batch = pelab_opts_get(&opts, "batch") ? batch : 0; /* 0: the sweep's default */
    uint64_t examples = (uint64_t)pelab_opt_real(&opts, eval_options, "examples");
    int json = pelab_opt_switch(&opts, eval_options, "json");

    if (csv[0] && (rc = pelab_check_output("--csv", csv))) return rc;
    static struct pelab_run run;
    /* across MPI ranks the evaluations below are shared out (pelab/dist.h) */
    if ((rc = pelab_dist_agree(&ctx->dist, pelab_run_open_with(&run, dir, &enc)))) return rc;
    pelab_model_set_ctx(&run.model, ctx);
    const enum pelab_task_sweep kind = run.task.ops->sweep;
    const int qa = kind == PELAB_TASK_SWEEP_QA;
    if (qa && lengths[0] && !pelab_opts_get(&opts, "split")) split = PELAB_SPLIT_TEST;
    if (lengths[0] && !qa && pelab_opts_get(&opts, "examples"))
        rc = pelab_fail(PELAB_ERR_USAGE, "--examples does not apply with --lengths (a sweep "
                        "evaluates every window of the documents that reach each length)");
    else if (pelab_opts_get(&opts, "gen-tokens") && !(qa && lengths[0]))
        rc = pelab_fail(PELAB_ERR_USAGE, "--gen-tokens applies to the length sweep of a qa run "
                        "(--lengths on a run of task qa)");
    else if (qa && lengths[0])
        rc = qa_sweep(dir, &run, split, lengths, sweep_batch, examples,
                      (int)pelab_opt_int(&opts, eval_options, "gen-tokens"), json, csv, &enc);
    else if (split == PELAB_SPLIT_LONG && !run.task.ops->windows && !lengths[0])
        rc = pelab_fail(PELAB_ERR_USAGE, "--split long: task %s has no long documents (tasks of "
                        "documents: text, dna, music)", run.task.ops->name);
    else if (lengths[0])
        rc = sweep(dir, &run, split, lengths, sweep_batch, json, csv, &enc);
    else if (res[0])
        rc = resolutions(dir, &run, split, res, examples, batch, json, csv);
    else if (kind == PELAB_TASK_SWEEP_SIZES && split == PELAB_SPLIT_TEST && !examples)
        rc = by_size(dir, &run, batch, json, csv);
    else if (csv[0]) /* refused once the run says it is not sized (the same line for every rank) */
        rc = pelab_fail(PELAB_ERR_USAGE, "--csv writes the rows of a length sweep: give --lengths "
                        "too (e.g. --lengths 1x,2x,4x), of a resolution sweep (--resolutions, image), "
                        "or of an algorithmic task's test split by size");
    else {
        struct pelab_eval_result r;
        rc = pelab_evaluate(&run.model, &run.task, split, 0, examples, batch, &r);
        if (!rc) print_result(dir, &run, split, &r, json);
    }
    pelab_run_close(&run);
    return rc;
}
