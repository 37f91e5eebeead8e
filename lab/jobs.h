/* lab/jobs.h — a few pieces of work at a time, each in its own forked child process (pelab
 * compare --jobs). */
#ifndef PELAB_CLI_JOBS_H
#define PELAB_CLI_JOBS_H

#define PELAB_JOBS_MAX 64 /* children at once */

/* One piece of work and, once run, how it ended. */
struct pelab_job {
    char name[64];     /* in messages */
    int started;       /* out: a child was started for it */
    int status;        /* out: 0 done; else the child's exit status, or 128 + the killing signal */
    char error[1024];  /* out: on failure, the child's last error (one line) or what killed it */
    double start_s, end_s; /* out: when its child started and was reaped (monotonic clock, s) */
};

/* Calls work(ctx, i) for each of the n jobs in a child process, at most `parallel` (1 ..
 * PELAB_JOBS_MAX) at once, and waits for all of them. A child exits with work's status and, when
 * that is not 0, sends pelab_last_error() back through a pipe into jobs[i].error. Children write
 * stderr a line at a time, so lines of different children do not mix.
 *
 * SIGINT, SIGTERM and SIGHUP to the parent go on to the running children, no new child starts,
 * and once the children have exited the parent dies of the same signal (after a line on stderr):
 * an interrupted pelab leaves no process behind. `ended` (may be NULL) is called in the parent
 * after each job's child has been reaped, with the job's index and how many have ended so far,
 * failed or killed ones included (jobs[i].status tells them apart): where a caller reports
 * overall progress. Returns the number of jobs that failed. */
int pelab_jobs_run(struct pelab_job *jobs, int n, int parallel, int (*work)(void *ctx, int i),
                   void (*ended)(void *ctx, int i, int reaped), void *ctx);

#endif
