/* IDX files and the fashion-mnist dataset built on them, on files made here: valid files of each
 * element type read back (dimensions, values, byte order); every kind of damage is refused with
 * one line naming the file and the fault (bad magic, unknown type, wrong type, wrong rank, a
 * header cut short, data cut short, bytes past the data, dimensions whose product overflows);
 * an install of synthetic sources gives the documented splits (train = the training file but its
 * last 5000 images, val = those 5000, test = the test file), the same images on every load, the
 * pixel mean and std of the training split, and refuses sources that disagree or changed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "lib/tmpdir.h"
#include "pelab/dataset.h"
#include "pelab/idx.h"
#include "pelab/image.h"
#include "pelab/io.h"
#include "pelab/status.h"

static const char *dir;

/* An IDX file in a malloc'ed buffer: header for (type, dims[0..rank-1]), then `data` (already
 * big-endian, n bytes). */
static char *make_idx(size_t *size, int type, int rank, const uint32_t *dims, const void *data, size_t n) {
    *size = 4 + 4 * (size_t)rank + n;
    unsigned char *b = malloc(*size + 1);
    b[0] = 0, b[1] = 0, b[2] = (unsigned char)type, b[3] = (unsigned char)rank;
    for (int i = 0; i < rank; i++)
        for (int k = 0; k < 4; k++) b[4 + 4 * i + k] = (unsigned char)(dims[i] >> (24 - 8 * k));
    if (n) memcpy(b + 4 + 4 * rank, data, n);
    return (char *)b;
}

static void write_file(const char *path, const void *data, size_t n) {
    CHECK(pelab_write_file_atomic(path, data, n) == PELAB_OK, "write %s: %s", path, pelab_last_error());
}

static void test_valid(void) {
    /* u8, rank 3: (2, 2, 3) */
    uint32_t d3[3] = {2, 2, 3};
    unsigned char px[12];
    for (int i = 0; i < 12; i++) px[i] = (unsigned char)(i * 20);
    size_t size;
    char *buf = make_idx(&size, PELAB_IDX_U8, 3, d3, px, 12);
    struct pelab_idx x;
    CHECK(pelab_idx_parse(&x, buf, size, "u8", PELAB_IDX_U8, 3) == PELAB_OK, "u8: %s", pelab_last_error());
    CHECK(x.rank == 3 && x.dims[0] == 2 && x.dims[1] == 2 && x.dims[2] == 3 && x.count == 12 && x.elem_size == 1,
          "u8 header: rank %d count %llu", x.rank, (unsigned long long)x.count);
    CHECK(x.data && memcmp(x.data, px, 12) == 0, "u8 data");
    pelab_idx_free(&x);
    /* i16 -2 and 258, i32 -70000, f32 1.5, f64 -0.25: stored big-endian, read in host order */
    uint32_t d1[1] = {2};
    unsigned char i16[4] = {0xFF, 0xFE, 0x01, 0x02};
    buf = make_idx(&size, PELAB_IDX_I16, 1, d1, i16, 4);
    CHECK(pelab_idx_parse(&x, buf, size, "i16", 0, 0) == PELAB_OK, "i16: %s", pelab_last_error());
    CHECK(x.type == PELAB_IDX_I16 && x.data && ((int16_t *)x.data)[0] == -2 && ((int16_t *)x.data)[1] == 258, "i16 values");
    pelab_idx_free(&x);
    uint32_t one[1] = {1};
    unsigned char i32[4] = {0xFF, 0xFE, 0xEE, 0x90}, f32[4] = {0x3F, 0xC0, 0, 0}, f64[8] = {0xBF, 0xD0, 0, 0, 0, 0, 0, 0};
    buf = make_idx(&size, PELAB_IDX_I32, 1, one, i32, 4);
    CHECK(pelab_idx_parse(&x, buf, size, "i32", PELAB_IDX_I32, 1) == PELAB_OK && ((int32_t *)x.data)[0] == -70000, "i32");
    pelab_idx_free(&x);
    buf = make_idx(&size, PELAB_IDX_F32, 1, one, f32, 4);
    CHECK(pelab_idx_parse(&x, buf, size, "f32", PELAB_IDX_F32, 1) == PELAB_OK && ((float *)x.data)[0] == 1.5f, "f32");
    pelab_idx_free(&x);
    uint32_t d2[2] = {1, 1}; /* rank 2: the data starts at byte 12, not 8-aligned in the file */
    buf = make_idx(&size, PELAB_IDX_F64, 2, d2, f64, 8);
    CHECK(pelab_idx_parse(&x, buf, size, "f64", PELAB_IDX_F64, 2) == PELAB_OK && ((double *)x.data)[0] == -0.25, "f64");
    pelab_idx_free(&x);
    /* an empty dimension: no elements, a valid file */
    uint32_t d0[2] = {0, 28};
    buf = make_idx(&size, PELAB_IDX_U8, 2, d0, NULL, 0);
    CHECK(pelab_idx_parse(&x, buf, size, "empty", PELAB_IDX_U8, 2) == PELAB_OK && x.count == 0, "empty: %s", pelab_last_error());
    pelab_idx_free(&x);
    /* from a file */
    buf = make_idx(&size, PELAB_IDX_U8, 3, d3, px, 12);
    write_file(tmpdir_path("ok.idx"), buf, size);
    free(buf);
    CHECK(pelab_idx_read(&x, tmpdir_path("ok.idx"), PELAB_IDX_U8, 3) == PELAB_OK && x.count == 12 &&
          memcmp(x.data, px, 12) == 0, "read: %s", pelab_last_error());
    pelab_idx_free(&x);
}

/* The file made by make_idx(type, rank, dims, data of n bytes), cut to `keep` bytes (or with
 * `extra` bytes appended), must be refused with a message containing `want`. */
static void refused(const char *what, char *buf, size_t size, int type, int rank, const char *want) {
    char name[64];
    snprintf(name, sizeof name, "dir/%s.idx", what);
    struct pelab_idx x;
    int rc = pelab_idx_parse(&x, buf, size, name, type, rank);
    const char *msg = pelab_last_error();
    CHECK(rc == PELAB_ERR_RUNTIME, "%s: accepted (rc %d)", what, rc);
    CHECK(strncmp(msg, name, strlen(name)) == 0 && msg[strlen(name)] == ':', "%s: the message does not start with the file: %s", what, msg);
    CHECK(strstr(msg, want) != NULL, "%s: '%s' not in: %s", what, want, msg);
    CHECK(strchr(msg, '\n') == NULL, "%s: more than one line: %s", what, msg);
    CHECK(x.data == NULL, "%s: data left", what);
}

static void test_damage(void) {
    uint32_t d3[3] = {3, 2, 2};
    unsigned char px[12] = {0};
    size_t size;
    char *b;
    b = make_idx(&size, PELAB_IDX_U8, 3, d3, px, 12), b[0] = 0x1F;
    refused("gzip", b, size, PELAB_IDX_U8, 3, "not an IDX file (magic 1f 00 08 03");
    b = make_idx(&size, PELAB_IDX_U8, 3, d3, px, 12), b[1] = 0x08;
    refused("magic1", b, size, PELAB_IDX_U8, 3, "not an IDX file");
    b = make_idx(&size, 0x07, 3, d3, px, 12);
    refused("type", b, size, 0, 0, "not an IDX file (magic 00 00 07 03");
    b = make_idx(&size, PELAB_IDX_I16, 3, d3, px, 12);
    refused("wrongtype", b, size, PELAB_IDX_U8, 3, "elements of type i16, expected u8");
    b = make_idx(&size, PELAB_IDX_U8, 3, d3, px, 12);
    refused("rank", b, size, PELAB_IDX_U8, 1, "rank 3, expected 1");
    b = make_idx(&size, PELAB_IDX_U8, 0, d3, NULL, 0);
    refused("rank0", b, size, 0, 0, "rank 0, expected 1 to 8");
    b = make_idx(&size, PELAB_IDX_U8, 3, d3, px, 12);
    refused("header", b, 2, PELAB_IDX_U8, 3, "truncated: 2 bytes, not even an IDX header");
    b = make_idx(&size, PELAB_IDX_U8, 3, d3, px, 12);
    refused("dims", b, 10, PELAB_IDX_U8, 3, "truncated: 10 bytes, the header of rank 3 needs 16");
    b = make_idx(&size, PELAB_IDX_U8, 3, d3, px, 12);
    refused("data", b, size - 1, PELAB_IDX_U8, 3, "truncated: the header says 3x2x2 u8 (28 bytes with the header), the file has 27");
    /* dimensions that disagree with the file: a count larger than the data */
    uint32_t big[3] = {4, 2, 2};
    b = make_idx(&size, PELAB_IDX_U8, 3, big, px, 12);
    refused("count", b, size, PELAB_IDX_U8, 3, "truncated: the header says 4x2x2 u8 (32 bytes with the header), the file has 28");
    /* ... smaller: bytes past the data */
    uint32_t small[3] = {2, 2, 2};
    b = make_idx(&size, PELAB_IDX_U8, 3, small, px, 12);
    refused("extra", b, size, PELAB_IDX_U8, 3, "4 bytes after the data: the header says 2x2x2 u8 (24 bytes with the header), the file has 28");
    uint32_t huge[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
    b = make_idx(&size, PELAB_IDX_F64, 3, huge, px, 12);
    refused("overflow", b, size, 0, 0, "truncated: the header says 4294967295x4294967295x4294967295 f64, more than 2^64 bytes; the file has");
    struct pelab_idx x;
    CHECK(pelab_idx_read(&x, tmpdir_path("missing.idx"), 0, 0) == PELAB_ERR_RUNTIME &&
          strstr(pelab_last_error(), "missing.idx: cannot open") != NULL, "missing file: %s", pelab_last_error());
}

/* ---- the dataset on synthetic sources ---------------------------------------------------------- */

enum { ROWS = 3, COLS = 5, N_TRAIN_FILE = PELAB_IMAGE_VAL + 12, N_TEST = 7 };

/* The pixel of image i of file f (0 train, 1 test) at (r, c), and its label. */
static uint8_t pixel(int f, int i, int r, int c) { return (uint8_t)((i * 7 + r * 31 + c * 3 + f * 100) % 256); }
static uint8_t label(int f, int i) { return (uint8_t)((i * 3 + f) % 10); }

static void write_sources(const char *src, int n_train, int n_test, int test_cols) {
    CHECK(pelab_mkdir_p(src) == PELAB_OK, "mkdir %s", src);
    const char *names[2][2] = {{"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
                               {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}};
    for (int f = 0; f < 2; f++) {
        int n = f ? n_test : n_train, cols = f ? test_cols : COLS;
        uint8_t *px = malloc((size_t)n * ROWS * cols), *lab = malloc((size_t)n);
        for (int i = 0; i < n; i++) {
            lab[i] = label(f, i);
            for (int r = 0; r < ROWS; r++)
                for (int c = 0; c < cols; c++) px[((size_t)i * ROWS + r) * cols + c] = pixel(f, i, r, c);
        }
        uint32_t d3[3] = {(uint32_t)n, ROWS, (uint32_t)cols}, d1[1] = {(uint32_t)n};
        size_t size;
        char path[600], *b = make_idx(&size, PELAB_IDX_U8, 3, d3, px, (size_t)n * ROWS * cols);
        snprintf(path, sizeof path, "%s/%s", src, names[f][0]);
        write_file(path, b, size);
        free(b);
        b = make_idx(&size, PELAB_IDX_U8, 1, d1, lab, (size_t)n);
        snprintf(path, sizeof path, "%s/%s", src, names[f][1]);
        write_file(path, b, size);
        free(b);
        free(px);
        free(lab);
    }
}

static int same_set(const struct pelab_images *a, const struct pelab_images *b) {
    return a->n == b->n && a->rows == b->rows && a->cols == b->cols && a->first == b->first &&
           memcmp(a->pixels, b->pixels, (size_t)a->n * a->rows * a->cols) == 0 &&
           memcmp(a->labels, b->labels, (size_t)a->n) == 0 && a->mean == b->mean && a->std == b->std;
}

static void test_dataset(void) {
    char data[512], src[600];
    snprintf(data, sizeof data, "%s", tmpdir_path("data"));
    snprintf(src, sizeof src, "%s/sources/fashion-mnist", data);
    write_sources(src, N_TRAIN_FILE, N_TEST, COLS);
    struct pelab_images set;
    CHECK(pelab_images_load(data, "fashion-mnist", PELAB_DOC_TRAIN, &set) == PELAB_ERR_RUNTIME &&
          strstr(pelab_last_error(), "is not installed") != NULL, "load before install: %s", pelab_last_error());
    struct pelab_install_opts o = {0, NULL, "/bin/false"}; /* the sources are here: no fetch */
    CHECK(pelab_dataset_install(data, "fashion-mnist", &o, NULL) == PELAB_OK, "install: %s", pelab_last_error());

    /* the splits: sizes, where they start, their images and labels */
    const int n[3] = {N_TRAIN_FILE - PELAB_IMAGE_VAL, PELAB_IMAGE_VAL, N_TEST}, first[3] = {0, N_TRAIN_FILE - PELAB_IMAGE_VAL, 0};
    const int splits[3] = {PELAB_DOC_TRAIN, PELAB_DOC_VAL, PELAB_DOC_TEST};
    /* the training split's pixel statistics, of v/255 */
    double s1 = 0, s2 = 0, cnt = 0;
    for (int i = 0; i < n[0]; i++)
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++) {
                double v = pixel(0, i, r, c) / 255.0;
                s1 += v, s2 += v * v, cnt++;
            }
    double mean = s1 / cnt, std = sqrt(s2 / cnt - mean * mean);
    for (int s = 0; s < 3; s++) {
        int rc = pelab_images_load(data, "fashion-mnist", splits[s], &set);
        CHECK(rc == PELAB_OK, "load %s: %s", pelab_doc_split_name(splits[s]), pelab_last_error());
        if (rc) continue;
        CHECK(set.n == n[s] && set.first == first[s] && set.rows == ROWS && set.cols == COLS && set.classes == 10,
              "%s: %d images from %d of %dx%d", pelab_doc_split_name(splits[s]), set.n, set.first, set.rows, set.cols);
        int ok = 1, f = splits[s] == PELAB_DOC_TEST;
        for (int i = 0; i < set.n && ok; i++) {
            ok &= set.labels[i] == label(f, first[s] + i);
            for (int r = 0; r < ROWS; r++)
                for (int c = 0; c < COLS; c++)
                    ok &= set.pixels[((size_t)i * ROWS + r) * COLS + c] == pixel(f, first[s] + i, r, c);
        }
        CHECK(ok, "%s: images or labels other than the file's", pelab_doc_split_name(splits[s]));
        CHECK_CLOSE(set.mean, mean, 1e-12, 0, "pixel mean");
        CHECK_CLOSE(set.std, std, 1e-12, 0, "pixel std");
        /* deterministic: a second load is the same */
        struct pelab_images again;
        CHECK(pelab_images_load(data, "fashion-mnist", splits[s], &again) == PELAB_OK && same_set(&set, &again),
              "%s: a second load differs", pelab_doc_split_name(splits[s]));
        pelab_images_free(&again);
        pelab_images_free(&set);
    }
    CHECK(pelab_images_load(data, "fashion-mnist", PELAB_DOC_LONG, &set) == PELAB_ERR_USAGE &&
          strstr(pelab_last_error(), "no split 'long'"), "long split: %s", pelab_last_error());
    CHECK(pelab_images_load(data, "sotu", PELAB_DOC_TRAIN, &set) == PELAB_ERR_USAGE &&
          strstr(pelab_last_error(), "'sotu' is not a dataset of images"), "sotu: %s", pelab_last_error());
    struct pelab_tokcache c;
    CHECK(pelab_dataset_open(data, "fashion-mnist", "text", &c) == PELAB_ERR_USAGE &&
          strstr(pelab_last_error(), "is a dataset of images, not a dataset of documents"), "open: %s", pelab_last_error());

    /* a second install leaves it alone: info.json unchanged */
    char info[700], *before, *after;
    size_t nb, na;
    snprintf(info, sizeof info, "%s/fashion-mnist/info.json", data);
    CHECK(pelab_read_file(info, &before, &nb) == PELAB_OK, "info.json");
    CHECK(strstr(before, "\"val\": {\"file\": \"train\", \"first\": 12, \"images\": 5000}") != NULL, "info.json splits: %s", before);
    CHECK(pelab_dataset_install(data, "fashion-mnist", &o, NULL) == PELAB_OK, "second install: %s", pelab_last_error());
    CHECK(pelab_read_file(info, &after, &na) == PELAB_OK && na == nb && memcmp(before, after, nb) == 0, "a second install changed info.json");
    free(after);

    /* a source that changed after install (one pixel): refused with the file and both CRC-32s */
    char path[700];
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte", src);
    char *b;
    size_t size;
    CHECK(pelab_read_file(path, &b, &size) == PELAB_OK, "read test images");
    b[size - 1] ^= 1;
    write_file(path, b, size);
    free(b);
    CHECK(pelab_images_load(data, "fashion-mnist", PELAB_DOC_TEST, &set) == PELAB_ERR_RUNTIME &&
          strstr(pelab_last_error(), "t10k-images-idx3-ubyte: CRC-32 ") &&
          strstr(pelab_last_error(), "not the ") && strstr(pelab_last_error(), "install recorded"),
          "changed file: %s", pelab_last_error());
    CHECK(pelab_images_load(data, "fashion-mnist", PELAB_DOC_VAL, &set) == PELAB_OK, "the training file is intact: %s", pelab_last_error());
    pelab_images_free(&set);
    /* install notices, records the new files, and the load agrees again */
    CHECK(pelab_dataset_install(data, "fashion-mnist", &o, NULL) == PELAB_OK, "reinstall: %s", pelab_last_error());
    CHECK(pelab_read_file(info, &after, &na) == PELAB_OK && !(na == nb && memcmp(before, after, nb) == 0), "reinstall kept info.json");
    free(after);
    free(before);
    CHECK(pelab_images_load(data, "fashion-mnist", PELAB_DOC_TEST, &set) == PELAB_OK, "after reinstall: %s", pelab_last_error());
    pelab_images_free(&set);
    CHECK(tmpdir_count_temps(data) == 0, "temporary files left");
}

/* Sources that are valid IDX files but disagree: one line naming the file, and no info.json. */
static void bad_sources(const char *what, int n_train, int n_test, int test_cols, int bad_label, const char *want) {
    char data[512], src[600], info[700];
    snprintf(data, sizeof data, "%s", tmpdir_path(what));
    snprintf(src, sizeof src, "%s/sources/fashion-mnist", data);
    snprintf(info, sizeof info, "%s/fashion-mnist/info.json", data);
    write_sources(src, n_train, n_test, test_cols);
    if (bad_label) {
        char path[700], *b;
        size_t size;
        snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", src);
        CHECK(pelab_read_file(path, &b, &size) == PELAB_OK, "read labels");
        b[8 + 3] = 10; /* image 3 */
        write_file(path, b, size);
        free(b);
    }
    struct pelab_install_opts o = {0, NULL, "/bin/false"};
    int rc = pelab_dataset_install(data, "fashion-mnist", &o, NULL);
    CHECK(rc == PELAB_ERR_RUNTIME && strstr(pelab_last_error(), want) && !strchr(pelab_last_error(), '\n'),
          "%s: rc %d: '%s' not in: %s", what, rc, want, pelab_last_error());
    CHECK(!pelab_file_exists(info), "%s: info.json written", what);
}

static void test_bad_sources(void) {
    bad_sources("few", PELAB_IMAGE_VAL, 3, COLS, 0, "train-images-idx3-ubyte: 5000 images: the validation split alone takes the last 5000");
    bad_sources("size", N_TRAIN_FILE, 3, COLS + 1, 0, "t10k-images-idx3-ubyte: images of 3x6, but the training images are 3x5");
    bad_sources("label", N_TRAIN_FILE, 3, COLS, 1, "train-labels-idx1-ubyte: label 10 of image 3 is not a class 0..9");
    /* labels for another number of images */
    char data[512], path[700];
    snprintf(data, sizeof data, "%s", tmpdir_path("count"));
    snprintf(path, sizeof path, "%s/sources/fashion-mnist", data);
    write_sources(path, N_TRAIN_FILE, 3, COLS);
    uint32_t d1[1] = {2};
    size_t size;
    char *b = make_idx(&size, PELAB_IDX_U8, 1, d1, "\1\2", 2);
    snprintf(path, sizeof path, "%s/sources/fashion-mnist/t10k-labels-idx1-ubyte", data);
    write_file(path, b, size);
    free(b);
    struct pelab_install_opts o = {0, NULL, "/bin/false"};
    CHECK(pelab_dataset_install(data, "fashion-mnist", &o, NULL) == PELAB_ERR_RUNTIME &&
          strstr(pelab_last_error(), "t10k-labels-idx1-ubyte: 2 labels for the 3 images of t10k-images-idx3-ubyte"),
          "label count: %s", pelab_last_error());
    /* a truncated source */
    snprintf(data, sizeof data, "%s", tmpdir_path("cut"));
    snprintf(path, sizeof path, "%s/sources/fashion-mnist", data);
    write_sources(path, N_TRAIN_FILE, 3, COLS);
    snprintf(path, sizeof path, "%s/sources/fashion-mnist/train-images-idx3-ubyte", data);
    CHECK(pelab_read_file(path, &b, &size) == PELAB_OK, "read");
    write_file(path, b, size / 2);
    free(b);
    CHECK(pelab_dataset_install(data, "fashion-mnist", &o, NULL) == PELAB_ERR_RUNTIME &&
          strstr(pelab_last_error(), "train-images-idx3-ubyte: truncated: the header says 5012x3x5 u8"),
          "truncated: %s", pelab_last_error());
}

int main(void) {
    dir = tmpdir_create("pelab-idx");
    if (!dir) return 1;
    test_valid();
    test_damage();
    test_dataset();
    test_bad_sources();
    tmpdir_remove();
    return check_report("test_idx");
}
