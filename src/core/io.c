/* Files: whole reads, atomic writes (temp sibling + fsync + rename + directory fsync; the
 * temporary files under way removed by a fatal signal), mkdir -p (each new directory's entry
 * fsync'ed in its parent), who holds a lock, and CRC-32. */
#define _DEFAULT_SOURCE /* flock, major, minor */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/sysmacros.h>
#endif
#include "pelab/io.h"
#include "pelab/status.h"

/* ---- whole reads ----------------------------------------------------------------------------- */

/* Reads fd to EOF into a buffer grown from `hint` bytes; NUL after the last byte. The spare byte
 * beyond hint + NUL lets the read that sees EOF happen without doubling a buffer already right.
 * EFBIG once more than `max` bytes came (0: no limit): a file that grows while it is read. */
static int read_all(int fd, size_t hint, size_t max, char **data, size_t *size) {
    size_t cap = hint + 2, len = 0;
    char *buf = malloc(cap);
    if (!buf) return ENOMEM;
    for (;;) {
        if (max && len > max) {
            free(buf);
            return EFBIG;
        }
        if (len + 1 == cap) {
            char *grown = cap > SIZE_MAX / 2 ? NULL : realloc(buf, 2 * cap);
            if (!grown) {
                free(buf);
                return ENOMEM;
            }
            buf = grown;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + len, cap - 1 - len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int err = errno;
            free(buf);
            return err;
        }
        if (got == 0) break;
        len += (size_t)got;
    }
    buf[len] = '\0';
    *data = buf;
    *size = len;
    return 0;
}

static const char *file_kind(mode_t mode) {
    return S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device"
         : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

/* pelab_read_file, or with `regular` a regular file's (opened without blocking: a FIFO must not
 * wait for a writer; anything else refused, then read as any other) of at most `max` bytes (0: any
 * size; a larger one is refused before its first byte is read, or once it grows past max). */
static int read_whole(const char *path, int regular, size_t max, char **data, size_t *size) {
    *data = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | (regular ? O_NONBLOCK : 0));
    if (fd < 0) return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int err = fstat(fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (!err && regular && !S_ISREG(st.st_mode)) {
        close(fd);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: %s, not a regular file", path, file_kind(st.st_mode));
    }
    if (!err && max && (uint64_t)st.st_size > max) err = EFBIG;
    const int flags = err || !regular ? 0 : fcntl(fd, F_GETFL);
    if (!err && regular && (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)) err = errno;
    /* st_size is only a hint (the file may grow, or be a pipe); read_all reads to EOF. */
    if (!err) err = read_all(fd, S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size : 4096, max, data, size);
    close(fd);
    if (err == EFBIG && max)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: larger than %zu MiB, the most pelab reads of a JSON or "
                          "vocabulary file", path, max >> 20);
    if (err) return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot read: %s", path, strerror(err));
    return PELAB_OK;
}

int pelab_read_file(const char *path, char **data, size_t *size) { return read_whole(path, 0, 0, data, size); }

int pelab_read_regular_file(const char *path, char **data, size_t *size) {
    return read_whole(path, 1, 0, data, size);
}

int pelab_read_small_file(const char *path, char **data, size_t *size) {
    return read_whole(path, 1, PELAB_SMALL_FILE_MAX, data, size);
}

/* ---- temporary files a fatal signal removes ------------------------------------------------- */

/* The temporary files of the atomic writes under way: a slot holds one from pelab_atomic_open
 * until its commit has renamed it or its abort removed it. Slots are taken and given back with
 * atomic exchanges, so writers on several threads never lose one and the signal handler reads
 * whole pointers. (A handler running on another thread while a writer frees its path could read
 * a freed name; the process is ending either way.) */
#define LIVE_TEMPS 64
static _Atomic(char *) live_temps[LIVE_TEMPS];

/* With every slot taken the file goes unregistered: commit and abort still remove it, a signal
 * does not. */
static void temp_register(char *tmp) {
    for (int i = 0; i < LIVE_TEMPS; i++) {
        char *none = NULL;
        if (atomic_compare_exchange_strong(&live_temps[i], &none, tmp)) return;
    }
}

static void temp_unregister(char *tmp) {
    for (int i = 0; i < LIVE_TEMPS; i++) {
        char *mine = tmp;
        if (atomic_compare_exchange_strong(&live_temps[i], &mine, NULL)) return;
    }
}

/* Async-signal-safe: unlink and raise only. SA_RESETHAND has restored the default action, which
 * the raised signal then takes: the process ends as it would have without the handler. */
static void remove_temps_and_end(int sig) {
    const int saved_errno = errno;
    for (int i = 0; i < LIVE_TEMPS; i++) {
        char *tmp = atomic_load(&live_temps[i]);
        if (tmp) unlink(tmp);
    }
    errno = saved_errno;
    raise(sig);
}

void pelab_atomic_remove_on_signals(void) {
    static const int fatal[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = remove_temps_and_end;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t s = 0; s < sizeof fatal / sizeof fatal[0]; s++) {
        struct sigaction now;
        if (sigaction(fatal[s], NULL, &now) == 0 && now.sa_handler != SIG_IGN) /* nohup stays */
            sigaction(fatal[s], &sa, NULL);
    }
}

/* ---- atomic writes --------------------------------------------------------------------------- */

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void atomic_reset(struct pelab_atomic_file *af) {
    free(af->path);
    free(af->tmp);
    af->f = NULL;
    af->path = af->tmp = NULL;
}

int pelab_atomic_open(struct pelab_atomic_file *af, const char *path) {
    static const char suffix[] = ".tmp.XXXXXX";
    af->f = NULL;
    af->path = dup_str(path);
    af->tmp = malloc(strlen(path) + sizeof suffix);
    if (!af->path || !af->tmp) {
        atomic_reset(af);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", path);
    }
    strcpy(af->tmp, path);
    strcat(af->tmp, suffix);
    int fd = mkstemp(af->tmp);
    if (fd < 0) {
        int err = errno;
        atomic_reset(af);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot create a temporary file beside it: %s",
                          path, strerror(err));
    }
    temp_register(af->tmp);
    /* mkstemp makes the file 0600; outputs are meant to be shared like any other file. */
    (void)fchmod(fd, 0644);
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        int err = errno;
        close(fd);
        unlink(af->tmp);
        temp_unregister(af->tmp);
        atomic_reset(af);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(err));
    }
    return PELAB_OK;
}

/* Makes the rename durable. Best effort: some file systems refuse fsync on a directory, and the
 * file itself is already complete on disk either way. */
static void fsync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? malloc((size_t)(slash - path) + 2) : NULL;
    if (slash && !dir) return;
    if (dir) {
        size_t n = slash == path ? 1 : (size_t)(slash - path); /* "/x" lives in "/" */
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int fd = open(dir ? dir : ".", O_RDONLY);
    free(dir);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

int pelab_atomic_commit(struct pelab_atomic_file *af) {
    PELAB_ASSERT(af->f != NULL);
    int err = 0;
    errno = 0;
    if (fflush(af->f) != 0 || ferror(af->f)) err = errno ? errno : EIO;
    if (!err && fsync(fileno(af->f)) != 0) err = errno;
    if (fclose(af->f) != 0 && !err) err = errno ? errno : EIO;
    af->f = NULL;
    if (!err && rename(af->tmp, af->path) != 0) err = errno;
    if (err) unlink(af->tmp);
    temp_unregister(af->tmp);
    if (err) {
        int rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot write: %s", af->path, strerror(err));
        atomic_reset(af);
        return rc;
    }
    fsync_parent(af->path);
    atomic_reset(af);
    return PELAB_OK;
}

void pelab_atomic_abort(struct pelab_atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) {
        unlink(af->tmp);
        temp_unregister(af->tmp);
    }
    atomic_reset(af);
}

int pelab_write_file_atomic(const char *path, const void *data, size_t size) {
    struct pelab_atomic_file af;
    int rc = pelab_atomic_open(&af, path);
    if (rc) return rc;
    if (size && fwrite(data, 1, size, af.f) != size) {
        int err = errno;
        pelab_atomic_abort(&af);
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot write: %s", path, strerror(err));
    }
    return pelab_atomic_commit(&af);
}

/* ---- directories ----------------------------------------------------------------------------- */

/* mkdir that accepts an existing directory; a new one's entry is made durable like a rename. */
static int make_dir(const char *path) {
    if (mkdir(path, 0777) == 0) {
        fsync_parent(path);
        return 0;
    }
    int err = errno;
    struct stat st;
    if (err == EEXIST && stat(path, &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    return err;
}

/* pelab_mkdir_p(path) failing with err at `at`, path or a prefix of it. A symbolic link to
 * nothing there (mkdir's EEXIST, though nothing exists) is named as such. */
static int mkdir_error(const char *path, const char *at, int err) {
    struct stat st;
    char target[1024];
    ssize_t n;
    if (err != EEXIST || lstat(at, &st) != 0 || !S_ISLNK(st.st_mode) ||
        (n = readlink(at, target, sizeof target - 1)) < 0)
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: cannot create directory: %s", path, strerror(err));
    target[n] = '\0';
    const int prefix = strcmp(at, path) != 0;
    return pelab_fail(PELAB_ERR_RUNTIME, "%s%s%s is a symbolic link to a missing '%s', so no directory can "
                      "be made there (make its target, or remove the link)", prefix ? path : "",
                      prefix ? ": " : "", at, target);
}

int pelab_mkdir_p(const char *path) {
    char *p = dup_str(path);
    if (!p) return pelab_fail(PELAB_ERR_RUNTIME, "%s: out of memory", path);
    int err = 0;
    /* Create each prefix ending before a '/', then the whole path; p is left cut at the prefix
     * that failed. */
    for (char *s = p; *s && !err; s++) {
        if (s == p || *s != '/' || s[-1] == '/') continue;
        *s = '\0';
        if (!(err = make_dir(p))) *s = '/';
    }
    if (!err) err = make_dir(p);
    const int rc = err ? mkdir_error(path, p, err) : PELAB_OK;
    free(p);
    return rc;
}

int pelab_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int pelab_check_output(const char *what, const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return pelab_fail(PELAB_ERR_USAGE, "%s %s: is a directory; name a file", what, path);
    /* What the final write does first: a temporary file beside the target. */
    struct pelab_atomic_file af;
    if (pelab_atomic_open(&af, path)) return pelab_fail_context(PELAB_ERR_RUNTIME, "%s", what);
    pelab_atomic_abort(&af);
    return PELAB_OK;
}

/* ---- locks ----------------------------------------------------------------------------------- */

long pelab_flock_holder(const char *path) {
    long pid = 0;
#ifdef __linux__
    struct stat st;
    FILE *f;
    if (stat(path, &st) != 0 || !(f = fopen("/proc/locks", "r"))) return 0;
    char line[256];
    while (!pid && fgets(line, sizeof line, f)) {
        /* "1: FLOCK  ADVISORY  WRITE 1234 fe:00:10953289 0 EOF": device major:minor in hex, inode;
         * a process waiting for the lock has a line of its own with "->" before FLOCK */
        char kind[16];
        long p;
        unsigned maj, min;
        unsigned long ino;
        if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%lu", kind, &p, &maj, &min, &ino) == 5 &&
            strcmp(kind, "FLOCK") == 0 && p > 0 && maj == major(st.st_dev) && min == minor(st.st_dev) &&
            ino == (unsigned long)st.st_ino)
            pid = p;
    }
    fclose(f);
#else
    (void)path;
#endif
    return pid;
}

void pelab_flock_wait(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR) continue;
    close(fd); /* releases it at once: the caller only waited */
}

/* ---- CRC-32 ---------------------------------------------------------------------------------- */

/* crc_table[n] = CRC of the byte n: the reflected polynomial 0xEDB88320, as zlib and PNG use. */
static const uint32_t crc_table[256] = {
    0x00000000, 0x77073096, 0xee0e612c, 0x990951ba, 0x076dc419, 0x706af48f,
    0xe963a535, 0x9e6495a3, 0x0edb8832, 0x79dcb8a4, 0xe0d5e91e, 0x97d2d988,
    0x09b64c2b, 0x7eb17cbd, 0xe7b82d07, 0x90bf1d91, 0x1db71064, 0x6ab020f2,
    0xf3b97148, 0x84be41de, 0x1adad47d, 0x6ddde4eb, 0xf4d4b551, 0x83d385c7,
    0x136c9856, 0x646ba8c0, 0xfd62f97a, 0x8a65c9ec, 0x14015c4f, 0x63066cd9,
    0xfa0f3d63, 0x8d080df5, 0x3b6e20c8, 0x4c69105e, 0xd56041e4, 0xa2677172,
    0x3c03e4d1, 0x4b04d447, 0xd20d85fd, 0xa50ab56b, 0x35b5a8fa, 0x42b2986c,
    0xdbbbc9d6, 0xacbcf940, 0x32d86ce3, 0x45df5c75, 0xdcd60dcf, 0xabd13d59,
    0x26d930ac, 0x51de003a, 0xc8d75180, 0xbfd06116, 0x21b4f4b5, 0x56b3c423,
    0xcfba9599, 0xb8bda50f, 0x2802b89e, 0x5f058808, 0xc60cd9b2, 0xb10be924,
    0x2f6f7c87, 0x58684c11, 0xc1611dab, 0xb6662d3d, 0x76dc4190, 0x01db7106,
    0x98d220bc, 0xefd5102a, 0x71b18589, 0x06b6b51f, 0x9fbfe4a5, 0xe8b8d433,
    0x7807c9a2, 0x0f00f934, 0x9609a88e, 0xe10e9818, 0x7f6a0dbb, 0x086d3d2d,
    0x91646c97, 0xe6635c01, 0x6b6b51f4, 0x1c6c6162, 0x856530d8, 0xf262004e,
    0x6c0695ed, 0x1b01a57b, 0x8208f4c1, 0xf50fc457, 0x65b0d9c6, 0x12b7e950,
    0x8bbeb8ea, 0xfcb9887c, 0x62dd1ddf, 0x15da2d49, 0x8cd37cf3, 0xfbd44c65,
    0x4db26158, 0x3ab551ce, 0xa3bc0074, 0xd4bb30e2, 0x4adfa541, 0x3dd895d7,
    0xa4d1c46d, 0xd3d6f4fb, 0x4369e96a, 0x346ed9fc, 0xad678846, 0xda60b8d0,
    0x44042d73, 0x33031de5, 0xaa0a4c5f, 0xdd0d7cc9, 0x5005713c, 0x270241aa,
    0xbe0b1010, 0xc90c2086, 0x5768b525, 0x206f85b3, 0xb966d409, 0xce61e49f,
    0x5edef90e, 0x29d9c998, 0xb0d09822, 0xc7d7a8b4, 0x59b33d17, 0x2eb40d81,
    0xb7bd5c3b, 0xc0ba6cad, 0xedb88320, 0x9abfb3b6, 0x03b6e20c, 0x74b1d29a,
    0xead54739, 0x9dd277af, 0x04db2615, 0x73dc1683, 0xe3630b12, 0x94643b84,
    0x0d6d6a3e, 0x7a6a5aa8, 0xe40ecf0b, 0x9309ff9d, 0x0a00ae27, 0x7d079eb1,
    0xf00f9344, 0x8708a3d2, 0x1e01f268, 0x6906c2fe, 0xf762575d, 0x806567cb,
    0x196c3671, 0x6e6b06e7, 0xfed41b76, 0x89d32be0, 0x10da7a5a, 0x67dd4acc,
    0xf9b9df6f, 0x8ebeeff9, 0x17b7be43, 0x60b08ed5, 0xd6d6a3e8, 0xa1d1937e,
    0x38d8c2c4, 0x4fdff252, 0xd1bb67f1, 0xa6bc5767, 0x3fb506dd, 0x48b2364b,
    0xd80d2bda, 0xaf0a1b4c, 0x36034af6, 0x41047a60, 0xdf60efc3, 0xa867df55,
    0x316e8eef, 0x4669be79, 0xcb61b38c, 0xbc66831a, 0x256fd2a0, 0x5268e236,
    0xcc0c7795, 0xbb0b4703, 0x220216b9, 0x5505262f, 0xc5ba3bbe, 0xb2bd0b28,
    0x2bb45a92, 0x5cb36a04, 0xc2d7ffa7, 0xb5d0cf31, 0x2cd99e8b, 0x5bdeae1d,
    0x9b64c2b0, 0xec63f226, 0x756aa39c, 0x026d930a, 0x9c0906a9, 0xeb0e363f,
    0x72076785, 0x05005713, 0x95bf4a82, 0xe2b87a14, 0x7bb12bae, 0x0cb61b38,
    0x92d28e9b, 0xe5d5be0d, 0x7cdcefb7, 0x0bdbdf21, 0x86d3d2d4, 0xf1d4e242,
    0x68ddb3f8, 0x1fda836e, 0x81be16cd, 0xf6b9265b, 0x6fb077e1, 0x18b74777,
    0x88085ae6, 0xff0f6a70, 0x66063bca, 0x11010b5c, 0x8f659eff, 0xf862ae69,
    0x616bffd3, 0x166ccf45, 0xa00ae278, 0xd70dd2ee, 0x4e048354, 0x3903b3c2,
    0xa7672661, 0xd06016f7, 0x4969474d, 0x3e6e77db, 0xaed16a4a, 0xd9d65adc,
    0x40df0b66, 0x37d83bf0, 0xa9bcae53, 0xdebb9ec5, 0x47b2cf7f, 0x30b5ffe9,
    0xbdbdf21c, 0xcabac28a, 0x53b39330, 0x24b4a3a6, 0xbad03605, 0xcdd70693,
    0x54de5729, 0x23d967bf, 0xb3667a2e, 0xc4614ab8, 0x5d681b02, 0x2a6f2b94,
    0xb40bbe37, 0xc30c8ea1, 0x5a05df1b, 0x2d02ef8d,
};

uint32_t pelab_crc32(uint32_t crc, const void *data, size_t size) {
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < size; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}
