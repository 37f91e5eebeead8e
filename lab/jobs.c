/* Forked children, a few at a time. The parent only starts, forwards signals and waits; every
 * piece of work runs in a child, so a crash or an exit() there stays there. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "jobs.h"
#include "pelab/clock.h"
#include "pelab/status.h"

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};
#define N_FORWARDED (int)(sizeof forwarded / sizeof forwarded[0])

/* The running children, by slot (0: free). Changed only with the forwarded signals blocked; a
 * child leaves its slot before it is reaped, so the handler never signals a recycled pid. */
static volatile pid_t live[PELAB_JOBS_MAX];
static volatile sig_atomic_t caught;

static void forward(int sig) {
    int saved_errno = errno;
    caught = sig;
    for (int k = 0; k < PELAB_JOBS_MAX; k++)
        if (live[k] > 0) kill(live[k], sig);
    errno = saved_errno;
}

struct pool {
    int job_of[PELAB_JOBS_MAX]; /* slot → job */
    int fd_of[PELAB_JOBS_MAX];  /* slot → read end of the child's error pipe */
    sigset_t forwarded_set;
    struct sigaction saved[N_FORWARDED]; /* the dispositions before, and the children's */
};

static _Noreturn void child(struct pool *pl, int fd, const sigset_t *old, int (*work)(void *, int),
                            void *ctx, int i) {
    for (int s = 0; s < N_FORWARDED; s++) sigaction(forwarded[s], &pl->saved[s], NULL);
    sigprocmask(SIG_SETMASK, old, NULL);
    for (int k = 0; k < PELAB_JOBS_MAX; k++)
        if (live[k] > 0) close(pl->fd_of[k]);
    /* One write() per line: lines up to the buffer's size never mix with other children's. */
    static char line[4096];
    setvbuf(stderr, line, _IOLBF, sizeof line);
    int rc = work(ctx, i);
    if (rc) {
        const char *msg = pelab_last_error();
        ssize_t w = write(fd, msg, strlen(msg)); /* at most 1 KiB: the pipe never fills */
        (void)w;
    }
    fflush(NULL);
    _exit(rc == 0 ? 0 : rc > 0 && rc < 126 ? rc : 1);
}

/* Starts job i in slot k; 0 when it could not start (the job says why). */
static int start(struct pool *pl, struct pelab_job *job, int i, int k, int (*work)(void *, int),
                 void *ctx) {
    int fd[2];
    if (pipe(fd) != 0) {
        job->status = 1;
        snprintf(job->error, sizeof job->error, "not started: pipe: %s", strerror(errno));
        return 0;
    }
    fflush(NULL); /* nothing buffered here is written again by the child */
    sigset_t old;
    sigprocmask(SIG_BLOCK, &pl->forwarded_set, &old);
    pid_t pid = fork();
    if (pid == 0) child(pl, fd[1], &old, work, ctx, i);
    int fork_errno = errno;
    close(fd[1]);
    if (pid > 0) {
        live[k] = pid;
        pl->job_of[k] = i;
        pl->fd_of[k] = fd[0];
        job->started = 1;
        job->start_s = pelab_clock_s();
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid > 0) return 1;
    close(fd[0]);
    job->status = 1;
    snprintf(job->error, sizeof job->error, "not started: fork: %s", strerror(fork_errno));
    return 0;
}

/* The exit status and message of a reaped child. */
static void finish(struct pelab_job *job, int wstatus, int fd) {
    size_t len = 0;
    for (;;) {
        ssize_t got = read(fd, job->error + len, sizeof job->error - 1 - len);
        if (got > 0 && (len += (size_t)got) < sizeof job->error - 1) continue;
        if (got < 0 && errno == EINTR) continue;
        break;
    }
    close(fd);
    job->error[len] = '\0';
    for (char *c = job->error; *c; c++)
        if (*c == '\n') *c = ' ';
    if (WIFSIGNALED(wstatus)) {
        job->status = 128 + WTERMSIG(wstatus);
        if (!len)
            snprintf(job->error, sizeof job->error, "killed by signal %d (%s)", WTERMSIG(wstatus),
                     strsignal(WTERMSIG(wstatus)));
    } else {
        job->status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 1;
        if (job->status && !len)
            snprintf(job->error, sizeof job->error, "exited with status %d", job->status);
    }
}

int pelab_jobs_run(struct pelab_job *jobs, int n, int parallel, int (*work)(void *ctx, int i),
                   void (*ended)(void *ctx, int i, int done), void *ctx) {
    PELAB_ASSERT(parallel >= 1 && parallel <= PELAB_JOBS_MAX);
    static struct pool pl;
    memset(&pl, 0, sizeof pl);
    for (int k = 0; k < PELAB_JOBS_MAX; k++) live[k] = 0;
    caught = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&pl.forwarded_set);
    for (int s = 0; s < N_FORWARDED; s++) sigaddset(&pl.forwarded_set, forwarded[s]);
    sa.sa_handler = forward;
    sa.sa_mask = pl.forwarded_set;
    for (int s = 0; s < N_FORWARDED; s++) {
        sigaction(forwarded[s], NULL, &pl.saved[s]);
        if (pl.saved[s].sa_handler != SIG_IGN) /* an ignored hangup (nohup) stays ignored */
            sigaction(forwarded[s], &sa, NULL);
    }
    for (int i = 0; i < n; i++) {
        jobs[i].started = jobs[i].status = 0;
        jobs[i].start_s = jobs[i].end_s = 0;
        jobs[i].error[0] = '\0';
    }

    int next = 0, running = 0, failed = 0, reaped = 0; /* reaped: failed ones too */
    for (;;) {
        while (!caught && running < parallel && next < n) {
            int k = 0;
            while (live[k]) k++;
            if (start(&pl, &jobs[next], next, k, work, ctx))
                running++;
            else
                failed++;
            next++;
        }
        if (!running) break;
        siginfo_t info;
        memset(&info, 0, sizeof info);
        if (waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) != 0) {
            PELAB_ASSERT(errno == EINTR);
            continue;
        }
        int k = 0;
        while (k < PELAB_JOBS_MAX && live[k] != info.si_pid) k++;
        sigset_t old;
        sigprocmask(SIG_BLOCK, &pl.forwarded_set, &old);
        if (k < PELAB_JOBS_MAX) live[k] = 0;
        sigprocmask(SIG_SETMASK, &old, NULL);
        int wstatus;
        while (waitpid(info.si_pid, &wstatus, 0) < 0 && errno == EINTR) {}
        if (k == PELAB_JOBS_MAX) continue; /* not one of ours */
        running--;
        struct pelab_job *job = &jobs[pl.job_of[k]];
        job->end_s = pelab_clock_s();
        finish(job, wstatus, pl.fd_of[k]);
        if (job->status) failed++;
        if (ended) ended(ctx, pl.job_of[k], ++reaped);
    }

    for (int s = 0; s < N_FORWARDED; s++) sigaction(forwarded[s], &pl.saved[s], NULL);
    if (caught) {
        int sig = caught;
        for (int i = next; i < n; i++) {
            jobs[i].status = 128 + sig;
            snprintf(jobs[i].error, sizeof jobs[i].error, "not started (%s)", strsignal(sig));
            failed++;
        }
        fprintf(stderr, "pelab: %s: the running children were stopped\n", strsignal(sig));
        raise(sig); /* dies of it, as it would have without children */
    }
    return failed;
}
