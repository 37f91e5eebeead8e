/* Progress on stderr: one line rewritten in place on a terminal (at most ~10 times a second),
 * plain lines at logged steps otherwise, so logs of batch jobs stay readable. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "pelab/clock.h"
#include "pelab/train.h"

void pelab_progress_printer_init(struct pelab_progress_printer *pp, const char *label) {
    pp->label = label;
    pp->tty = isatty(fileno(stderr));
    pp->last_draw = 0;
    pp->open_line = 0;
    pp->has_val = 0;
}

void pelab_progress_printer_end(struct pelab_progress_printer *pp) {
    if (pp->open_line) fputc('\n', stderr);
    pp->open_line = 0;
}

void pelab_format_duration(char *buf, size_t size, double seconds) {
    long t = seconds > 0 ? (long)(seconds + 0.5) : 0;
    if (t >= 3600)
        snprintf(buf, size, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60)
        snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, size, "%lds", t);
}

/* 12345 → "12,345". */
static void fmt_thousands(char *buf, size_t size, double x) {
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", x > 0 ? x : 0);
    size_t n = 0, len = 0;
    while (digits[len]) len++;
    for (size_t i = 0; i < len && n + 2 < size; i++) {
        if (i && (len - i) % 3 == 0) buf[n++] = ',';
        buf[n++] = digits[i];
    }
    buf[n] = '\0';
}

/* The state of pelab_eval_progress_print's line. */
static struct {
    int tty, open_line;
    double last, after, every; /* seconds: first line, then at most one line per `every` */
} eval_line = {-1, 0, 0, 3, 15};

void pelab_eval_progress_print(void *ctx, const struct pelab_eval_progress *p) {
    const char *label = ctx; /* a prefix, or NULL */
    if (eval_line.tty < 0) {
        eval_line.tty = isatty(fileno(stderr));
        if (eval_line.tty) eval_line.every = 0.25;
        /* PELAB_PROGRESS_EVERY=S: first line after S seconds, then one per S (tests: 0) */
        const char *env = getenv("PELAB_PROGRESS_EVERY");
        char *end;
        double s = env ? strtod(env, &end) : -1;
        if (env && *env && !*end && s >= 0 && s <= 86400) eval_line.after = eval_line.every = s;
    }
    if (p->finished) {
        if (eval_line.open_line) fputs("\r\033[K", stderr);
        eval_line.open_line = 0;
        eval_line.last = 0;
        fflush(stderr);
        return;
    }
    if (p->elapsed_s < eval_line.after) return;
    if (eval_line.last > 0 && p->elapsed_s - eval_line.last < eval_line.every) return;
    eval_line.last = p->elapsed_s;
    char elapsed[32], left[32];
    pelab_format_duration(elapsed, sizeof elapsed, p->elapsed_s);
    if (p->eta_s >= 0) pelab_format_duration(left, sizeof left, p->eta_s);
    else snprintf(left, sizeof left, "?");
    fprintf(stderr, "%s%s%s%s%s%s: %.0f%% (%" PRIu64 "/%" PRIu64 " %s), %s, about %s left%s",
            eval_line.tty ? "\r" : "", label ? label : "", label ? "  " : "", p->what, p->part[0] ? " at " : "", p->part,
            100 * p->fraction, p->done, p->total, p->unit, elapsed, left, eval_line.tty ? "\033[K" : "\n");
    eval_line.open_line = eval_line.tty;
    fflush(stderr);
}

void pelab_progress_print(void *ctx, const struct pelab_train_progress *p) {
    struct pelab_progress_printer *pp = ctx;
    const char *label = pp->label ? pp->label : "";
    const char *sep = pp->label ? "  " : "";
    char eta[32], elapsed[32], tps[32];
    pelab_format_duration(eta, sizeof eta, p->eta_s);
    pelab_format_duration(elapsed, sizeof elapsed, p->elapsed_s);
    fmt_thousands(tps, sizeof tps, p->tokens_per_s);
    switch (p->event) {
    case PELAB_TRAIN_START:
        pelab_progress_printer_end(pp);
        if (p->step > 0)
            fprintf(stderr, "%s%sresuming %s at step %" PRId64 "/%" PRId64 "\n", label, sep,
                    p->dir, p->step, p->steps);
        else
            fprintf(stderr, "%s%straining %s: %" PRId64 " steps\n", label, sep, p->dir, p->steps);
        return;
    case PELAB_TRAIN_STEP: {
        if (p->has_val) {
            pp->has_val = 1;
            pp->val_loss = p->val_loss;
            pp->val_acc = p->val_acc;
        }
        double t = pelab_clock_s();
        int draw = pp->tty ? (t - pp->last_draw >= 0.1 || p->step == p->steps) : p->logged;
        if (!draw) return;
        pp->last_draw = t;
        fprintf(stderr, "%s%s%sstep %" PRId64 "/%" PRId64 "  loss %.3f  acc %.1f%%", pp->tty ? "\r" : "",
                label, sep, p->step, p->steps, p->loss, 100 * p->acc);
        /* A terminal line keeps the last validation; a plain line shows its own step's only. */
        if (p->has_val || (pp->tty && pp->has_val))
            fprintf(stderr, "  val %.3f %.1f%%", pp->val_loss, 100 * pp->val_acc);
        fprintf(stderr, "  %s tok/s  eta %s%s", tps, eta, pp->tty ? "\033[K" : "\n");
        pp->open_line = pp->tty;
        if (pp->tty && p->step == p->steps) pelab_progress_printer_end(pp);
        fflush(stderr);
        return;
    }
    case PELAB_TRAIN_EVAL:
    case PELAB_TRAIN_SAVE:
        return;
    case PELAB_TRAIN_NOTICE:
        pelab_progress_printer_end(pp);
        fprintf(stderr, "%s%swarning: %s\n", label, sep, p->message);
        fflush(stderr);
        return;
    case PELAB_TRAIN_DONE:
        pelab_progress_printer_end(pp);
        fprintf(stderr, "%s%sdone %s: %" PRId64 " steps in %s, test acc %.2f%%, test loss %.4f\n",
                label, sep, p->dir, p->step, elapsed, 100 * p->test_acc, p->test_loss);
        return;
    }
}
