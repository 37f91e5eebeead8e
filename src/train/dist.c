/* Data parallelism across MPI ranks (pelab/dist.h): every MPI call of pelab is in this file.
 * Without PELAB_MPI, or in a process no launcher started, there is one rank and the collectives
 * are identities. The job's state is the caller's handle (struct pelab_dist); MPI's own
 * (MPI_COMM_WORLD) is the process's, as MPI makes it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pelab/dist.h"
#include "pelab/status.h"
#include "pelab/threads.h"
#ifdef PELAB_MPI
#include <limits.h>
#include <mpi.h>
#endif

int pelab_dist_built(void) {
#ifdef PELAB_MPI
    return 1;
#else
    return 0;
#endif
}

/* The job size an MPI launcher announced in the environment: 1 when none did, 0 when one did
 * but not the size. OpenMPI's mpirun sets OMPI_COMM_WORLD_SIZE; PMI launchers (srun, hydra) set
 * PMI_SIZE; PMIx ones PMIX_RANK. */
static int launched_size(void) {
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    if (v) return atoi(v) > 0 ? atoi(v) : 1;
    return getenv("PMIX_RANK") ? 0 : 1;
}

/* The rank a launcher announced in the environment, 0 when none did. */
static int launched_rank(void) {
    const char *v = getenv("OMPI_COMM_WORLD_RANK");
    if (!v) v = getenv("PMI_RANK");
    if (!v) v = getenv("PMIX_RANK");
    return v ? atoi(v) : 0;
}

int pelab_dist_init(struct pelab_dist *d, int *argc, char ***argv) {
    *d = (struct pelab_dist){.rank = 0, .size = 1};
    int n = launched_size();
    if (n == 1) return PELAB_OK;
#ifdef PELAB_MPI
    if (MPI_Init(argc, argv) != MPI_SUCCESS)
        return pelab_fail(PELAB_ERR_RUNTIME, "MPI_Init failed: cannot join the MPI job");
    d->started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    return PELAB_OK;
#else
    (void)argc;
    (void)argv;
    if (n == 0) return PELAB_OK; /* cannot tell: one process, as built */
    return pelab_fail(PELAB_ERR_RUNTIME, "started by an MPI launcher with %d ranks, but this pelab "
                      "was built without MPI (install libopenmpi-dev and rebuild: 'make deps "
                      "&& make')", n);
#endif
}

void pelab_dist_finalize(struct pelab_dist *d) {
#ifdef PELAB_MPI
    if (d->started) MPI_Finalize();
#endif
    *d = (struct pelab_dist){.rank = 0, .size = 1};
}

void pelab_dist_abort(const struct pelab_dist *d, int code) {
#ifdef PELAB_MPI
    if (d->started && d->size > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
#endif
    (void)code;
}

int pelab_dist_threads(int threads) {
    const int cores = pelab_threads_available();
    if (threads > cores) {
        /* Threads beyond the cores only take turns on them, and every parallel loop waits at its
         * end for the last one's turn (4096 threads on 2 cores: 1.2 s for an evaluation of a
         * tenth of a second). Said once per process (compare trains its runs in one: the notice
         * is the process's, so its flag is too), by rank 0. */
        static int said;
        if (!said++ && launched_rank() == 0)
            fprintf(stderr, "notice: --threads %d is more than the %d core%s this process can use; "
                    "running on %d\n", threads, cores, cores == 1 ? "" : "s", cores);
        return cores;
    }
    if (threads > 0) return threads;
    /* this machine's cores shared among the ranks on it (one, without a launcher: the cores), and
     * no more than the cores this rank is bound to */
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long local = v ? atol(v) : 1, machine = sysconf(_SC_NPROCESSORS_ONLN);
    if (local < 1) local = 1;
    const int share = machine / local > 1 ? (int)(machine / local) : 1;
    return share < cores ? share : cores;
}

void pelab_dist_share(const struct pelab_dist *d, uint64_t B, uint64_t *r0, uint64_t *r1) {
    uint64_t q = B / (uint64_t)d->size, rem = B % (uint64_t)d->size, r = (uint64_t)d->rank;
    *r0 = r * q + (r < rem ? r : rem);
    *r1 = *r0 + q + (r < rem);
}

void pelab_dist_share_blocks(const struct pelab_dist *d, uint64_t n, uint64_t block, uint64_t *i0,
                             uint64_t *i1) {
    uint64_t b0, b1;
    pelab_dist_share(d, (n + block - 1) / block, &b0, &b1);
    *i0 = b0 * block < n ? b0 * block : n;
    *i1 = b1 * block < n ? b1 * block : n;
}

int pelab_dist_agree(struct pelab_dist *d, int rc) {
    d->follower = d->agreed = 0;
    if (d->size == 1) return rc;
#ifdef PELAB_MPI
    /* (lowest failing rank, −largest code), both by MIN in one collective */
    int mine[2] = {rc ? d->rank : d->size, -rc}, all[2];
    MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all[0] == d->size) return PELAB_OK;
    d->agreed = 1;
    if (rc) {
        /* several ranks may fail alike (a bad option): the lowest one says so */
        d->follower = d->rank != all[0];
        return rc;
    }
    d->follower = 1;
    return pelab_fail(-all[1], "rank %d failed (its message says why)", all[0]);
#else
    return rc;
#endif
}

/* "'--d-model 64'": word i with the option it is the value of, or the value it takes; "nothing"
 * past the end. */
static void describe(char *out, size_t size, int n, char *const *w, int i) {
    if (i >= n) snprintf(out, size, "nothing more");
    else if (strncmp(w[i], "--", 2) == 0 && i + 1 < n && strncmp(w[i + 1], "--", 2) != 0)
        snprintf(out, size, "'%s %s'", w[i], w[i + 1]);
    else if (i > 0 && strncmp(w[i - 1], "--", 2) == 0 && strncmp(w[i], "--", 2) != 0)
        snprintf(out, size, "'%s %s'", w[i - 1], w[i]);
    else snprintf(out, size, "'%s'", w[i]);
}

int pelab_dist_same_words(struct pelab_dist *d, int n, char *const *words, const char *what) {
    if (d->size == 1) return PELAB_OK;
    /* rank 0's words, NUL-separated: their count and bytes first, then the bytes */
    uint64_t head[2] = {(uint64_t)n, 0};
    for (int i = 0; i < n; i++) head[1] += strlen(words[i]) + 1;
    pelab_dist_bcast(d, head, sizeof head);
    char *text = malloc(head[1] + 1);
    char **root = malloc((head[0] + 1) * sizeof *root);
    if (!text || !root) {
        free(text);
        free(root);
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for the ranks' %s", what);
    }
    if (d->rank == 0)
        for (int i = 0, at = 0; i < n; i++) at += sprintf(text + at, "%s", words[i]) + 1;
    pelab_dist_bcast(d, text, head[1]);
    const int n0 = (int)head[0];
    for (int i = 0, at = 0; i < n0; i++) root[i] = text + at, at += (int)strlen(text + at) + 1;
    int differ = -1; /* the first word that is not rank 0's */
    for (int i = 0; differ < 0 && i < (n > n0 ? n : n0); i++)
        if (i >= n || i >= n0 || strcmp(words[i], root[i]) != 0) differ = i;
    const int first = pelab_dist_first(d, differ >= 0);
    char msg[1024] = "";
    if (first == d->rank) {
        char mine[400], theirs[400];
        describe(mine, sizeof mine, n, words, differ);
        describe(theirs, sizeof theirs, n0, root, differ);
        snprintf(msg, sizeof msg, "rank %d's %s differs from rank 0's: it has %s where rank 0 has %s "
                 "(every rank of one job must run the same %s)", d->rank, what, mine, theirs, what);
    }
    free(text);
    free(root);
    if (first < 0) return PELAB_OK;
    pelab_dist_bcast_from(d, msg, sizeof msg, first);
    d->agreed = 1;
    d->follower = d->rank != 0;
    return pelab_fail(PELAB_ERR_USAGE, "%s", msg);
}

#ifdef PELAB_MPI
/* MPI counts are ints: large buffers go in pieces. */
static void sum(void *x, size_t n, size_t elem, MPI_Datatype type) {
    const size_t piece = (size_t)INT_MAX / 2;
    for (size_t i = 0; i < n; i += piece) {
        size_t k = n - i < piece ? n - i : piece;
        MPI_Allreduce(MPI_IN_PLACE, (char *)x + i * elem, (int)k, type, MPI_SUM, MPI_COMM_WORLD);
    }
}
#endif

void pelab_dist_sum_real(const struct pelab_dist *d, pelab_real *x, size_t n) {
#ifdef PELAB_MPI
    if (d->size > 1) sum(x, n, sizeof *x, sizeof *x == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT);
#else
    (void)x;
    (void)n;
#endif
}

void pelab_dist_sum_double(const struct pelab_dist *d, double *x, size_t n) {
#ifdef PELAB_MPI
    if (d->size > 1) sum(x, n, sizeof *x, MPI_DOUBLE);
#else
    (void)x;
    (void)n;
#endif
}

void pelab_dist_bcast(const struct pelab_dist *d, void *buf, size_t bytes) {
    pelab_dist_bcast_from(d, buf, bytes, 0);
}

int pelab_dist_first(const struct pelab_dist *d, int flag) {
#ifdef PELAB_MPI
    if (d->size > 1) {
        int mine = flag ? d->rank : d->size, first;
        MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        return first == d->size ? -1 : first;
    }
#endif
    return flag ? 0 : -1;
}

void pelab_dist_bcast_from(const struct pelab_dist *d, void *buf, size_t bytes, int root) {
#ifdef PELAB_MPI
    if (d->size == 1) return;
    const size_t piece = (size_t)INT_MAX / 2;
    for (size_t i = 0; i < bytes; i += piece) {
        size_t k = bytes - i < piece ? bytes - i : piece;
        MPI_Bcast((char *)buf + i, (int)k, MPI_BYTE, root, MPI_COMM_WORLD);
    }
#else
    (void)buf;
    (void)bytes;
    (void)root;
#endif
}

void pelab_dist_barrier(const struct pelab_dist *d) {
#ifdef PELAB_MPI
    if (d->size > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void pelab_dist_gather_u64(const struct pelab_dist *d, uint64_t x, uint64_t *all) {
#ifdef PELAB_MPI
    if (d->size > 1) {
        MPI_Allgather(&x, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
        return;
    }
#endif
    all[0] = x;
}

int pelab_dist_test_fault(const struct pelab_dist *d, int64_t step) {
    const char *v = getenv("PELAB_TEST_RANK_FAULT");
    long long s;
    int r, n = 0;
    char what[16];
    if (!v || sscanf(v, "%lld:%d:%15[a-z]%n", &s, &r, what, &n) != 3 || v[n] || s != step ||
        r != d->rank)
        return 0;
    if (strcmp(what, "kill") == 0) {
        fflush(stdout);
        fflush(stderr);
        raise(SIGKILL);
    }
    return strcmp(what, "diverge") == 0 ? PELAB_DIST_FAULT_DIVERGE : 0;
}
