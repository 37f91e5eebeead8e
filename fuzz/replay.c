/* The test build of a fuzz target: feeds it every file named on the command line or, with no
 * argument, every file of fuzz/corpus/FUZZ_NAME/ and tests/fuzz/FUZZ_NAME/ (the seeds and the
 * inputs that once crashed), from the repository root. A crash or a broken promise aborts. */
#include <dirent.h>
#include "fuzz.h"
#include "pelab/io.h"

static int replay(const char *path) {
    char *data;
    size_t size;
    if (pelab_read_file(path, &data, &size)) {
        fprintf(stderr, "%s\n", pelab_last_error());
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)data, size);
    free(data);
    return 0;
}

/* Every regular file of dir; a missing directory has none. */
static int replay_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int bad = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        bad |= replay(path);
        (*count)++;
    }
    closedir(d);
    return bad;
}

int main(int argc, char **argv) {
    int count = 0, bad = 0;
    for (int i = 1; i < argc; i++, count++) bad |= replay(argv[i]);
    if (argc == 1) {
        bad |= replay_dir("fuzz/corpus/" FUZZ_NAME, &count);
        bad |= replay_dir("tests/fuzz/" FUZZ_NAME, &count);
        if (count == 0) {
            fprintf(stderr, "test_fuzz_" FUZZ_NAME ": no inputs (run from the repository root)\n");
            return 1;
        }
    }
    printf("test_fuzz_" FUZZ_NAME ": %d inputs replayed\n", count);
    return bad;
}
