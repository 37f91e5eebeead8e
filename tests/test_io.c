/* io: whole reads, atomic writes (no torn or leftover files), mkdir -p, CRC-32. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/check.h"
#include "pelab/io.h"
#include "pelab/status.h"

static char dir[64];

/* DIR/name in a rotating set of buffers, so a few can be live at once. */
static const char *in_dir(const char *name) {
    static char bufs[4][256];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

static void rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char sub[512];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rm_rf(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* Entries of `path` whose name contains ".tmp.". */
static int count_temps(const char *path) {
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

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
    const char *p = in_dir("a.txt");
    CHECK(pelab_write_file_atomic(p, "hello", 5) == PELAB_OK, "write: %s", pelab_last_error());
    CHECK(file_is(p, "hello"), "read back");
    CHECK(pelab_write_file_atomic(p, "bye", 3) == PELAB_OK, "overwrite: %s", pelab_last_error());
    CHECK(file_is(p, "bye"), "overwritten");
    CHECK(count_temps(dir) == 0, "no temporary files left after commits");
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0644, "mode 0644, not mkstemp's 0600");

    const char *e = in_dir("empty");
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
    const char *b = in_dir("big.bin");
    CHECK(pelab_write_file_atomic(b, big, n) == PELAB_OK, "big write");
    CHECK(pelab_read_file(b, &data, &size) == PELAB_OK && size == n && memcmp(data, big, n) == 0,
          "big read back");
    free(data);
    free(big);

    const char *missing = in_dir("no-such-file");
    CHECK(pelab_read_file(missing, &data, &size) == PELAB_ERR_RUNTIME && data == NULL,
          "missing file refused");
    CHECK(strstr(pelab_last_error(), missing) != NULL, "message names the path: %s",
          pelab_last_error());
    CHECK(pelab_read_file(dir, &data, &size) == PELAB_ERR_RUNTIME, "a directory is refused");
    CHECK(strstr(pelab_last_error(), dir) != NULL, "message names the path: %s", pelab_last_error());
}

static void test_atomic_abort(void) {
    const char *p = in_dir("keep.txt");
    CHECK(pelab_write_file_atomic(p, "original", 8) == PELAB_OK, "write");
    struct pelab_atomic_file af;
    CHECK(pelab_atomic_open(&af, p) == PELAB_OK, "open: %s", pelab_last_error());
    fputs("half-written replacement", af.f);
    fflush(af.f);
    CHECK(count_temps(dir) == 1, "the temporary file exists beside the destination");
    CHECK(file_is(p, "original"), "destination untouched while writing");
    pelab_atomic_abort(&af);
    CHECK(af.f == NULL && af.tmp == NULL && af.path == NULL, "abort resets the handle");
    CHECK(file_is(p, "original"), "destination intact after abort");
    CHECK(count_temps(dir) == 0, "abort removes the temporary file");

    /* Commit that cannot rename: the destination is a non-empty directory. */
    const char *d = in_dir("occupied");
    CHECK(pelab_mkdir_p(in_dir("occupied/inner")) == PELAB_OK, "mkdir");
    CHECK(pelab_atomic_open(&af, d) == PELAB_OK, "open");
    fputs("x", af.f);
    CHECK(pelab_atomic_commit(&af) == PELAB_ERR_RUNTIME, "rename over a directory fails");
    CHECK(strstr(pelab_last_error(), d) != NULL, "message names the path: %s", pelab_last_error());
    CHECK(count_temps(dir) == 0, "failed commit removes the temporary file");
    CHECK(pelab_file_exists(in_dir("occupied/inner")), "the directory is untouched");

    const char *nodir = in_dir("no/such/dir/f.txt");
    CHECK(pelab_atomic_open(&af, nodir) == PELAB_ERR_RUNTIME, "open in a missing directory fails");
    CHECK(strstr(pelab_last_error(), nodir) != NULL, "message names the path: %s",
          pelab_last_error());
    CHECK(pelab_write_file_atomic(nodir, "x", 1) == PELAB_ERR_RUNTIME, "write in a missing dir");
}

static void test_mkdir(void) {
    const char *deep = in_dir("m/a/b/c");
    CHECK(pelab_mkdir_p(deep) == PELAB_OK, "mkdir -p: %s", pelab_last_error());
    struct stat st;
    CHECK(stat(deep, &st) == 0 && S_ISDIR(st.st_mode), "created");
    CHECK(pelab_mkdir_p(deep) == PELAB_OK, "existing is fine");
    CHECK(pelab_mkdir_p(in_dir("m//x/y/")) == PELAB_OK, "doubled and trailing slashes");
    CHECK(pelab_file_exists(in_dir("m/x/y")), "created through doubled slashes");
    CHECK(pelab_file_exists(deep) && !pelab_file_exists(in_dir("m/nope")), "file_exists");

    const char *f = in_dir("m/file");
    CHECK(pelab_write_file_atomic(f, "x", 1) == PELAB_OK, "write");
    const char *blocked = in_dir("m/file/sub");
    CHECK(pelab_mkdir_p(blocked) == PELAB_ERR_RUNTIME, "a file in the way is refused");
    CHECK(strstr(pelab_last_error(), blocked) != NULL, "message names the path: %s",
          pelab_last_error());
    CHECK(pelab_mkdir_p(f) == PELAB_ERR_RUNTIME, "an existing file is not a directory");
    CHECK(pelab_mkdir_p("") == PELAB_ERR_RUNTIME, "empty path refused");
}

int main(void) {
    strcpy(dir, "/tmp/pelab-test-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_crc();
    test_read_write();
    test_atomic_abort();
    test_mkdir();
    rm_rf(dir);
    return check_report("test_io");
}
