/* pelab/dist.h — data-parallel training across processes (MPI ranks).
 *
 * Every MPI call of pelab goes through these functions. Built with MPI (make finds OpenMPI through
 * pkg-config ompi and defines PELAB_MPI) and started by an MPI launcher (mpirun sets
 * OMPI_COMM_WORLD_SIZE, or PMI_SIZE / PMIX_RANK), a process is one rank of the job; otherwise it
 * is the only rank (rank 0 of 1) and every function here is a no-op. A process that was not
 * started by a launcher never initialises MPI, so single-process use costs nothing.
 *
 * The job is a handle, struct pelab_dist, which pelab_dist_init fills and a context holds
 * (pelab/ctx.h: the model's and the trainer's work reach it there). MPI itself starts once per
 * process, so a process has one job: every context whose work crosses ranks holds the handle
 * that pelab_dist_init filled, or a copy of it.
 *
 * Collective functions (marked so) must be called by every rank in the same order. */
#ifndef PELAB_DIST_H
#define PELAB_DIST_H

#include <stddef.h>
#include <stdint.h>
#include "pelab/real.h"

struct pelab_dist {
    int rank, size; /* this process's rank in the job, and the job's ranks (0 of 1: alone) */
    int started;    /* MPI_Init ran (pelab_dist_finalize ends it) */
    /* The last error came from pelab_dist_agree (or pelab_dist_same_words): agreed, every rank
     * knows it and stops by itself, so the job need not be aborted; follower, it is another
     * rank's, which says why, so this rank need not. */
    int agreed, follower;
};

/* 1 when this build has MPI support. */
int pelab_dist_built(void);
/* *d := this process's part in the job: joins the MPI job when launched by mpirun, else rank 0 of
 * 1. PELAB_ERR_RUNTIME (d alone) if MPI cannot start, or the job has several ranks but this build
 * has no MPI. */
int pelab_dist_init(struct pelab_dist *d, int *argc, char ***argv);
/* Leaves the job (after the last collective call); d is then rank 0 of 1. */
void pelab_dist_finalize(struct pelab_dist *d);
/* Ends every rank of the job at once with exit status `code` (MPI_Abort); with one rank, returns.
 * For the command line, after an error that the other ranks do not know of. */
void pelab_dist_abort(const struct pelab_dist *d, int code);
/* The thread count a --threads request runs on, the one place the option becomes a count: 0, the
 * cores this process may use (pelab_threads_available), or under several ranks this machine's
 * cores divided among its ranks (the launcher's OMPI_COMM_WORLD_LOCAL_SIZE), so that ranks sharing
 * a machine do not oversubscribe it; more than the cores this process may use, those cores, said
 * in one notice line on stderr (once per process, by the launcher's rank 0); else as given. It
 * reads the launcher's environment, not the job, so a command that runs in one process asks it
 * alike. */
int pelab_dist_threads(int threads);
/* Rows [*r0, *r1) of a batch of B rows that this rank takes: contiguous shares whose sizes differ
 * by at most one, rank 0 first. */
void pelab_dist_share(const struct pelab_dist *d, uint64_t B, uint64_t *r0, uint64_t *r1);
/* Items [*i0, *i1) of n that this rank takes in whole blocks of `block` >= 1 (the last block of
 * the n may be short): the blocks shared as pelab_dist_share shares rows. An evaluation shares its
 * examples so, a block being one forward pass: a row's float32 results can depend on the shapes
 * of the products it is part of (OpenBLAS takes other paths for other sizes), so each pass must
 * hold on every rank the examples it holds in one process. */
void pelab_dist_share_blocks(const struct pelab_dist *d, uint64_t n, uint64_t block, uint64_t *i0,
                             uint64_t *i1);

/* Collective: agrees on success or failure. Returns rc when this rank failed; PELAB_OK when every
 * rank succeeded; when another rank failed, that rank's code with the message "rank R failed"
 * and d->follower set (the failing rank reports why). Sets d->agreed when some rank failed. */
int pelab_dist_agree(struct pelab_dist *d, int rc);

/* Collective: whether every rank holds the n words (a command line, or a run's settings as
 * key=value) that rank 0 holds, `what` naming them ("command line", "settings"). PELAB_OK when all
 * do; otherwise PELAB_ERR_USAGE on every rank with one message, the same everywhere (so rank 0
 * prints it and no rank waits), naming the lowest rank that differs and its first differing word
 * beside rank 0's. Call it before any collective whose sizes the words decide. */
int pelab_dist_same_words(struct pelab_dist *d, int n, char *const *words, const char *what);

/* Collective: x (n,) := Σ over ranks of x, in place. */
void pelab_dist_sum_real(const struct pelab_dist *d, pelab_real *x, size_t n);
void pelab_dist_sum_double(const struct pelab_dist *d, double *x, size_t n);
/* Collective: rank 0's `bytes` bytes at buf to every rank; _from: rank `root`'s. */
void pelab_dist_bcast(const struct pelab_dist *d, void *buf, size_t bytes);
void pelab_dist_bcast_from(const struct pelab_dist *d, void *buf, size_t bytes, int root);
/* Collective: the lowest rank whose flag is set, or -1 when no rank's is. */
int pelab_dist_first(const struct pelab_dist *d, int flag);
/* Collective: returns once every rank has called it (for measurements: the time a rank waits
 * here is the other ranks' lag, not communication). */
void pelab_dist_barrier(const struct pelab_dist *d);
/* Collective: all[r] := rank r's x, for r < d->size. */
void pelab_dist_gather_u64(const struct pelab_dist *d, uint64_t x, uint64_t *all);

/* Test-only fault injection, PELAB_TEST_RANK_FAULT=STEP:RANK:WHAT (docs/FORMATS.md): in update
 * STEP, rank RANK "kill"s itself (SIGKILL, as a crashed node would) or "diverge"s (changes one of
 * its weights, which the checksum at the next checkpoint must catch). Returns the action due now
 * on this rank: 0 or PELAB_DIST_FAULT_DIVERGE (a kill does not return). */
#define PELAB_DIST_FAULT_DIVERGE 2
int pelab_dist_test_fault(const struct pelab_dist *d, int64_t step);

#endif
