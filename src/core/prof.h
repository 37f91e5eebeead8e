/* Phase timers for finding where a training step's time goes. Compiled in only with
 * -DPELAB_PROFILE (`make profile` builds build/prof/bench/bench_train so); in every other build
 * the macros are empty and nothing is measured or stored.
 *
 *   PELAB_PROF_START();                         at the top of an instrumented kernel
 *   PELAB_PROF_STOP(PELAB_PROF_NORM_FWD, flops); before it returns
 *
 * Kernels are timed at their entry points, which the model calls from serial code (each opens
 * its own parallel region), so the wall times add up to the step's; what no kernel claims is the
 * model's own loops (residual adds, memsets, copies). */
#ifndef PELAB_CORE_PROF_H
#define PELAB_CORE_PROF_H

#include <stdio.h>

enum pelab_prof_phase {
    PELAB_PROF_MATMUL_FWD,   /* linear layers and the output projection, forward */
    PELAB_PROF_MATMUL_BWD,   /* their backward: dinput and dweight */
    PELAB_PROF_ATTN_FWD,
    PELAB_PROF_ATTN_BWD,
    PELAB_PROF_PE_PREPARE,   /* per-pass position tables */
    PELAB_PROF_PE_FWD,       /* QK transform (or the identity's layout copy) */
    PELAB_PROF_PE_BWD,
    PELAB_PROF_NORM_FWD,
    PELAB_PROF_NORM_BWD,
    PELAB_PROF_GELU_FWD,
    PELAB_PROF_GELU_BWD,
    PELAB_PROF_LOSS_FWD,
    PELAB_PROF_LOSS_BWD,
    PELAB_PROF_EMBED,        /* token embedding forward and backward */
    PELAB_PROF_OPTIM,        /* zero grad, clipping, AdamW */
    PELAB_PROF_N
};

#ifdef PELAB_PROFILE
#include "pelab/clock.h"
void pelab_prof_add(enum pelab_prof_phase phase, double t0, double flops);
#define PELAB_PROF_START() const double pelab_prof_t0_ = pelab_clock_s()
#define PELAB_PROF_STOP(phase, flops) pelab_prof_add((phase), pelab_prof_t0_, (double)(flops))
#else
#define PELAB_PROF_START() ((void)0)
#define PELAB_PROF_STOP(phase, flops) ((void)0)
#endif

/* Zeroes the table (a no-op without PELAB_PROFILE). */
void pelab_prof_reset(void);
/* Prints per phase: seconds per step, share of `step_s`, calls per step and GFLOP/s where
 * counted; the rest of step_s as "other". `steps` divides the totals. Prints nothing without
 * PELAB_PROFILE; returns whether it printed. */
int pelab_prof_report(FILE *f, int steps, double step_s);

#endif
