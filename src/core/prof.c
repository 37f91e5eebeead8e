/* Phase timers (prof.h): a table of wall time, calls and floating-point operations per phase. */
#include "core/prof.h"

#ifdef PELAB_PROFILE
#include "pelab/clock.h"

static struct {
    double seconds, flops;
    long calls;
} table[PELAB_PROF_N];

static const char *const names[PELAB_PROF_N] = {
    "matmul forward", "matmul backward", "attention forward", "attention backward",
    "posenc prepare", "posenc qk forward", "posenc qk backward", "rmsnorm forward",
    "rmsnorm backward", "gelu forward", "gelu backward", "loss forward", "loss backward",
    "embedding", "optimizer",
};

void pelab_prof_add(enum pelab_prof_phase phase, double t0, double flops) {
    table[phase].seconds += pelab_clock_s() - t0;
    table[phase].flops += flops;
    table[phase].calls++;
}

void pelab_prof_reset(void) {
    for (int i = 0; i < PELAB_PROF_N; i++) table[i].seconds = table[i].flops = 0, table[i].calls = 0;
}

int pelab_prof_report(FILE *f, int steps, double step_s) {
    double sum = 0;
    fprintf(f, "%-20s %10s %7s %8s %10s\n", "phase", "ms/step", "share", "calls", "GFLOP/s");
    for (int i = 0; i < PELAB_PROF_N; i++) {
        const double s = table[i].seconds / steps;
        sum += s;
        fprintf(f, "%-20s %10.2f %6.1f%% %8.1f", names[i], 1e3 * s, 100 * s / step_s,
                (double)table[i].calls / steps);
        if (table[i].flops > 0) fprintf(f, " %10.1f", table[i].flops / table[i].seconds / 1e9);
        fputc('\n', f);
    }
    fprintf(f, "%-20s %10.2f %6.1f%%\n", "other", 1e3 * (step_s - sum), 100 * (step_s - sum) / step_s);
    return 1;
}

#else

void pelab_prof_reset(void) {}
int pelab_prof_report(FILE *f, int steps, double step_s) {
    (void)f, (void)steps, (void)step_s;
    return 0;
}

#endif
