/* Wall-clock time for progress lines, estimates of time left and the times runs record. */
#ifndef PELAB_CLOCK_H
#define PELAB_CLOCK_H

/* Seconds on a monotonic clock (CLOCK_MONOTONIC): differences are elapsed wall time, unaffected
 * by changes to the system's date; the origin is arbitrary. */
double pelab_clock_s(void);

#endif
