/* io: whole reads, atomic writes (no torn or leftover files, killed or not), mkdir -p, who holds
 * a lock, CRC-32. */
#define _DEFAULT_SOURCE /* flock */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lib/check.h"
#include "lib/tmpdir.h"
#include "pelab/io.h"
#include "pelab/status.h"

static const char *dir;

static int file_is(const char *path, const char *want) {
    char *data;
    size_t size;
    if (pelab_read_file(path, &data, &size)) return 0;
    int same = size == strlen(want) && memcmp(data, want, size) == 0 && data[size] == '\0';
    free(data);
    return same;
}

static void test_crc(void) {
    CHECK(pelab_crc32(0, "123456789", 9) == 0xCBF43926u, "crc32 check value: %08x",
          (unsigned)pelab_crc32(0, "123456789", 9));
    CHECK(pelab_crc32(0, "", 0) == 0, "crc32 of nothing");
    CHECK(pelab_crc32(0, "The quick brown fox jumps over the lazy dog", 43) == 0x414FA339u,
          "crc32 fox");
    uint32_t a = pelab_crc32(0, "12345", 5);
    CHECK(pelab_crc32(a, "6789", 4) == 0xCBF43926u, "crc32 chains across calls");
    unsigned char zeros[32] = {0};
    CHECK(pelab_crc32(0, zeros, 32) == 0x190A55ADu, "crc32 of 32 zero bytes");
}

static void test_read_write(void) {
    const char *p = tmpdir_path("a.txt");
    CHECK(pelab_write_file_atomic(p, "hello", 5) == PELAB_OK, "write: %s", pelab_last_error());
    CHECK(file_is(p, "hello"), "read back");
    CHECK(pelab_write_file_atomic(p, "bye", 3) == PELAB_OK, "overwrite: %s", pelab_last_error());
    CHECK(file_is(p, "bye"), "overwritten");
    CHECK(tmpdir_count_temps(dir) == 0, "no temporary files left after commits");
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0644, "mode 0644, not mkstemp's 0600");

    const char *e = tmpdir_path("empty");
    CHECK(pelab_write_file_atomic(e, NULL, 0) == PELAB_OK, "empty write");
    char *data = NULL;
    size_t size = 99;
    CHECK(pelab_read_file(e, &data, &size) == PELAB_OK && size == 0 && data && data[0] == '\0',
          "empty file reads as an empty, NUL-terminated buffer");
    free(data);

    /* A large buffer, to cross the read loop's growth. */
    size_t n = 3 << 20;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++) big[i] = (char)(i * 2654435761u >> 13);
    const char *b = tmpdir_path("big.bin");
    CHECK(pelab_write_file_atomic(b, big, n) == PELAB_OK, "big write");
    CHECK(pelab_read_file(b, &data, &size) == PELAB_OK && size == n && memcmp(data, big, n) == 0,
          "big read back");
    free(data);
    free(big);

    const char *missing = tmpdir_path("no-such-file");
    CHECK(pelab_read_file(missing, &data, &size) == PELAB_ERR_RUNTIME && data == NULL,
          "missing file refused");
    CHECK(strstr(pelab_last_error(), missing) != NULL, "message names the path: %s",
          pelab_last_error());
    CHECK(pelab_read_file(dir, &data, &size) == PELAB_ERR_RUNTIME, "a directory is refused");
    CHECK(strstr(pelab_last_error(), dir) != NULL, "message names the path: %s", pelab_last_error());
}

/* A small file (JSON, a vocabulary) must be a regular file of at most PELAB_SMALL_FILE_MAX bytes:
 * a FIFO is refused without waiting for a writer, /dev/zero before memory runs out, a file past
 * the limit before it is read (sparse files: no disk is used). */
static void test_small_files(void) {
    char *data = NULL;
    size_t size = 0;
    const char *fifo = tmpdir_path("fifo");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    CHECK(pelab_read_small_file(fifo, &data, &size) == PELAB_ERR_RUNTIME && data == NULL, "a FIFO is refused");
    CHECK(strstr(pelab_last_error(), "a FIFO, not a regular file"), "%s", pelab_last_error());
    CHECK(pelab_read_small_file("/dev/zero", &data, &size) == PELAB_ERR_RUNTIME, "/dev/zero is refused");
    CHECK(strstr(pelab_last_error(), "a character device, not a regular file"), "%s", pelab_last_error());
    const char *at = tmpdir_path("at-limit"), *past = tmpdir_path("past-limit");
    CHECK(pelab_write_file_atomic(at, "", 0) == PELAB_OK && truncate(at, (off_t)PELAB_SMALL_FILE_MAX) == 0, "truncate");
    CHECK(pelab_write_file_atomic(past, "", 0) == PELAB_OK && truncate(past, (off_t)PELAB_SMALL_FILE_MAX + 1) == 0,
          "truncate");
    CHECK(pelab_read_small_file(at, &data, &size) == PELAB_OK && size == PELAB_SMALL_FILE_MAX,
          "a file of the limit is read: %s", pelab_last_error());
    free(data);
    data = NULL;
    CHECK(pelab_read_small_file(past, &data, &size) == PELAB_ERR_RUNTIME && data == NULL, "past the limit refused");
    CHECK(strstr(pelab_last_error(), past) && strstr(pelab_last_error(), "larger than 64 MiB"), "%s",
          pelab_last_error());
    CHECK(pelab_read_file(past, &data, &size) == PELAB_OK && size == PELAB_SMALL_FILE_MAX + 1,
          "pelab_read_file has no limit: %s", pelab_last_error());
    free(data);
    unlink(fifo);
    unlink(at);
    unlink(past);
}

static void test_atomic_abort(void) {
    const char *p = tmpdir_path("keep.txt");
    CHECK(pelab_write_file_atomic(p, "original", 8) == PELAB_OK, "write");
    struct pelab_atomic_file af;
    CHECK(pelab_atomic_open(&af, p) == PELAB_OK, "open: %s", pelab_last_error());
    fputs("half-written replacement", af.f);
    fflush(af.f);
    CHECK(tmpdir_count_temps(dir) == 1, "the temporary file exists beside the destination");
    CHECK(file_is(p, "original"), "destination untouched while writing");
    pelab_atomic_abort(&af);
    CHECK(af.f == NULL && af.tmp == NULL && af.path == NULL, "abort resets the handle");
    CHECK(file_is(p, "original"), "destination intact after abort");
    CHECK(tmpdir_count_temps(dir) == 0, "abort removes the temporary file");

    /* Commit that cannot rename: the destination is a non-empty directory. */
    const char *d = tmpdir_path("occupied");
    CHECK(pelab_mkdir_p(tmpdir_path("occupied/inner")) == PELAB_OK, "mkdir");
    CHECK(pelab_atomic_open(&af, d) == PELAB_OK, "open");
    fputs("x", af.f);
    CHECK(pelab_atomic_commit(&af) == PELAB_ERR_RUNTIME, "rename over a directory fails");
    CHECK(strstr(pelab_last_error(), d) != NULL, "message names the path: %s", pelab_last_error());
    CHECK(tmpdir_count_temps(dir) == 0, "failed commit removes the temporary file");
    CHECK(pelab_file_exists(tmpdir_path("occupied/inner")), "the directory is untouched");

    const char *nodir = tmpdir_path("no/such/dir/f.txt");
    CHECK(pelab_atomic_open(&af, nodir) == PELAB_ERR_RUNTIME, "open in a missing directory fails");
    CHECK(strstr(pelab_last_error(), nodir) != NULL, "message names the path: %s",
          pelab_last_error());
    CHECK(pelab_write_file_atomic(nodir, "x", 1) == PELAB_ERR_RUNTIME, "write in a missing dir");
}

/* A child with the handlers, two writes under way and one committed, ends by SIGTERM: it dies of
 * it, the two temporary files are gone, the committed file stays. */
static void test_signal_removes_temps(void) {
    char sig[512], done[600], a[600], b[600]; /* tmpdir_path's buffers are reused */
    snprintf(sig, sizeof sig, "%s", tmpdir_path("sig"));
    snprintf(done, sizeof done, "%s/done.txt", sig);
    snprintf(a, sizeof a, "%s/a.csv", sig);
    snprintf(b, sizeof b, "%s/b.csv", sig);
    CHECK(pelab_mkdir_p(sig) == PELAB_OK, "mkdir");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        pelab_atomic_remove_on_signals();
        struct pelab_atomic_file fa, fb;
        if (pelab_write_file_atomic(done, "kept", 4) || pelab_atomic_open(&fa, a) || pelab_atomic_open(&fb, b)) _exit(1);
        fputs("half-written", fa.f);
        fflush(fa.f);
        raise(SIGTERM);
        _exit(2);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork and wait");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "the child died of SIGTERM (status %d)", status);
    CHECK(tmpdir_count_temps(sig) == 0, "SIGTERM left %d temporary files", tmpdir_count_temps(sig));
    CHECK(file_is(done, "kept") && !pelab_file_exists(a) && !pelab_file_exists(b), "the committed file alone");
}

static void test_mkdir(void) {
    const char *deep = tmpdir_path("m/a/b/c");
    CHECK(pelab_mkdir_p(deep) == PELAB_OK, "mkdir -p: %s", pelab_last_error());
    struct stat st;
    CHECK(stat(deep, &st) == 0 && S_ISDIR(st.st_mode), "created");
    CHECK(pelab_mkdir_p(deep) == PELAB_OK, "existing is fine");
    CHECK(pelab_mkdir_p(tmpdir_path("m//x/y/")) == PELAB_OK, "doubled and trailing slashes");
    CHECK(pelab_file_exists(tmpdir_path("m/x/y")), "created through doubled slashes");
    CHECK(pelab_file_exists(deep) && !pelab_file_exists(tmpdir_path("m/nope")), "file_exists");

    const char *f = tmpdir_path("m/file");
    CHECK(pelab_write_file_atomic(f, "x", 1) == PELAB_OK, "write");
    const char *blocked = tmpdir_path("m/file/sub");
    CHECK(pelab_mkdir_p(blocked) == PELAB_ERR_RUNTIME, "a file in the way is refused");
    CHECK(strstr(pelab_last_error(), blocked) != NULL, "message names the path: %s",
          pelab_last_error());
    CHECK(pelab_mkdir_p(f) == PELAB_ERR_RUNTIME, "an existing file is not a directory");
    CHECK(pelab_mkdir_p("") == PELAB_ERR_RUNTIME, "empty path refused");

    /* a symbolic link to nothing, as the path or on the way, is named with its target */
    const char *link = tmpdir_path("m/dangling");
    CHECK(symlink("nowhere", link) == 0, "symlink");
    CHECK(pelab_mkdir_p(tmpdir_path("m/dangling")) == PELAB_ERR_RUNTIME &&
          strstr(pelab_last_error(), "m/dangling is a symbolic link to a missing 'nowhere'") != NULL,
          "a dangling link: %s", pelab_last_error());
    const char *below = tmpdir_path("m/dangling/x");
    CHECK(pelab_mkdir_p(below) == PELAB_ERR_RUNTIME && strncmp(pelab_last_error(), below, strlen(below)) == 0 &&
          strstr(pelab_last_error(), "m/dangling is a symbolic link to a missing 'nowhere'") != NULL,
          "a dangling link on the way: %s", pelab_last_error());
    CHECK(!pelab_file_exists(tmpdir_path("m/nowhere")), "the link's target was not made");
}

/* pelab_flock_holder: none on a free directory, this process while it holds one (Linux). */
static void test_flock_holder(void) {
    const char *d = tmpdir_path("locked");
    CHECK(pelab_mkdir_p(d) == PELAB_OK, "mkdir");
    CHECK(pelab_flock_holder(d) == 0, "a free directory has no holder");
#ifdef __linux__
    int fd = open(d, O_RDONLY);
    CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0, "flock");
    CHECK(pelab_flock_holder(d) == (long)getpid(), "the holder: %ld, not %ld", pelab_flock_holder(d),
          (long)getpid());
    close(fd);
    CHECK(pelab_flock_holder(d) == 0, "released");
#endif
}

int main(void) {
    if (!(dir = tmpdir_create("pelab-test"))) return 1;
    test_crc();
    test_read_write();
    test_small_files();
    test_atomic_abort();
    test_signal_removes_temps();
    test_mkdir();
    test_flock_holder();
    tmpdir_remove();
    return check_report("test_io");
}
