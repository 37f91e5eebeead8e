/* fashion-mnist — Zalando's Fashion-MNIST (Xiao et al. 2017) from Debian's dataset-fashion-mnist:
 * 70,000 grey 28×28 images of clothes in 10 classes, as four IDX files the fetch script
 * decompresses into sources/fashion-mnist/:
 *
 *   train-images-idx3-ubyte  (60000, 28, 28) u8     train-labels-idx1-ubyte  (60000) u8
 *   t10k-images-idx3-ubyte   (10000, 28, 28) u8     t10k-labels-idx1-ubyte   (10000) u8
 *
 * Images are no documents: install checks the four files (pelab/idx.h; labels 0..9, as many as
 * images, the same image size in both), measures the training split's pixel mean and standard
 * deviation, and writes info.json with each pair's CRC-32; the image task reads the IDX files
 * themselves (pelab_images_load), checked against those CRC-32s. Splits (pelab/image.h): train the
 * training file's first n − 5000 images, val its last 5000, test the test file.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "data/datasets/datasets.h"
#include "pelab/idx.h"
#include "pelab/image.h"
#include "pelab/io.h"
#include "pelab/json.h"
#include "pelab/status.h"

#define CLASSES 10

enum { TRAIN_FILE, TEST_FILE };
static const char *const files[2][2] = {
    {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
    {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
};

/* The images and labels of one file pair, checked: (n, rows, cols) u8 and (n) u8 below CLASSES.
 * *crc = the CRC-32 of the images file's bytes, then the labels file's; *chain (may be NULL)
 * continues a CRC-32 over the same bytes. */
static int read_pair(const char *src, int which, uint32_t *crc, uint32_t *chain, struct pelab_idx *img,
                     struct pelab_idx *lab) {
    char path[2][PATH_MAX];
    *crc = 0;
    memset(img, 0, sizeof *img);
    memset(lab, 0, sizeof *lab);
    int rc = PELAB_OK;
    for (int k = 0; k < 2 && !rc; k++) {
        if (snprintf(path[k], PATH_MAX, "%s/%s", src, files[which][k]) >= PATH_MAX)
            return pelab_fail(PELAB_ERR_USAGE, "%.60s...: path too long", src);
        char *buf;
        size_t size;
        rc = pelab_read_regular_file(path[k], &buf, &size);
        if (rc) break;
        *crc = pelab_crc32(*crc, buf, size);
        if (chain) *chain = pelab_crc32(*chain, buf, size);
        rc = pelab_idx_parse(k ? lab : img, buf, size, path[k], PELAB_IDX_U8, k ? 1 : 3);
    }
    if (!rc && lab->dims[0] != img->dims[0])
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: %u labels for the %u images of %s", path[1], (unsigned)lab->dims[0],
                        (unsigned)img->dims[0], files[which][0]);
    if (!rc && (img->dims[0] == 0 || img->dims[0] > INT_MAX || img->dims[1] < 1 || img->dims[2] < 1 ||
                img->dims[1] > PELAB_IMAGE_MAX_SIDE || img->dims[2] > PELAB_IMAGE_MAX_SIDE))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: %u images of %ux%u: expected 1 or more of 1x1 to %dx%d", path[0],
                        (unsigned)img->dims[0], (unsigned)img->dims[1], (unsigned)img->dims[2],
                        PELAB_IMAGE_MAX_SIDE, PELAB_IMAGE_MAX_SIDE);
    const uint8_t *l = lab->data;
    for (uint32_t i = 0; !rc && i < lab->dims[0]; i++)
        if (l[i] >= CLASSES)
            rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: label %u of image %u is not a class 0..%d", path[1], l[i],
                            (unsigned)i, CLASSES - 1);
    if (rc) {
        pelab_idx_free(img);
        pelab_idx_free(lab);
    }
    return rc;
}

static int path_in(char *buf, const char *data_dir, const char *a, const char *b) {
    if (snprintf(buf, PATH_MAX, "%s/%s/%s", data_dir, a, b) >= PATH_MAX)
        return pelab_fail(PELAB_ERR_USAGE, "data directory '%.60s...' is too long", data_dir);
    return PELAB_OK;
}

/* Both pairs, with the checks that join them: the same image size; more training images than
 * the validation split takes. */
static int read_all(const char *src, uint32_t crc[2], uint32_t *chain, struct pelab_idx img[2],
                    struct pelab_idx lab[2]) {
    memset(img, 0, 2 * sizeof *img);
    memset(lab, 0, 2 * sizeof *lab);
    int rc = read_pair(src, TRAIN_FILE, &crc[0], chain, &img[0], &lab[0]);
    if (!rc) rc = read_pair(src, TEST_FILE, &crc[1], chain, &img[1], &lab[1]);
    if (!rc && (img[1].dims[1] != img[0].dims[1] || img[1].dims[2] != img[0].dims[2]))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/%s: images of %ux%u, but the training images are %ux%u", src,
                        files[TEST_FILE][0], (unsigned)img[1].dims[1], (unsigned)img[1].dims[2],
                        (unsigned)img[0].dims[1], (unsigned)img[0].dims[2]);
    if (!rc && img[0].dims[0] <= PELAB_IMAGE_VAL)
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/%s: %u images: the validation split alone takes the last %d",
                        src, files[TRAIN_FILE][0], (unsigned)img[0].dims[0], PELAB_IMAGE_VAL);
    if (rc)
        for (int k = 0; k < 2; k++) {
            pelab_idx_free(&img[k]);
            pelab_idx_free(&lab[k]);
        }
    return rc;
}

static int fashion_install(const struct pelab_dataset_ops *ops, const char *src, const char *dir, FILE *progress) {
    struct pelab_idx img[2], lab[2];
    uint32_t crc[2], all = 0;
    int rc = read_all(src, crc, &all, img, lab);
    if (rc) return rc;
    uint32_t n = img[0].dims[0], rows = img[0].dims[1], cols = img[0].dims[2], train = n - PELAB_IMAGE_VAL;
    /* mean and standard deviation of v/255 over the training split's pixels (exact integer sums) */
    uint64_t s1 = 0, s2 = 0, npix = (uint64_t)train * rows * cols;
    const uint8_t *px = img[0].data;
    for (uint64_t i = 0; i < npix; i++) {
        s1 += px[i];
        s2 += (uint64_t)px[i] * px[i];
    }
    double mean = (double)s1 / (double)npix, var = (double)s2 / (double)npix - mean * mean;
    mean /= 255;
    double std = sqrt(var > 0 ? var : 0) / 255;
    if (!(std > 0)) rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/%s: every training pixel is %.0f", src, files[0][0], mean * 255);
    uint32_t counts[3] = {train, PELAB_IMAGE_VAL, img[1].dims[0]};
    struct pelab_sb sb = {0};
    pelab_sb_printf(&sb, "{\n  \"dataset\": ");
    pelab_sb_json_string(&sb, ops->name);
    pelab_sb_printf(&sb, ",\n  \"kind\": \"image\",\n  \"source\": ");
    pelab_sb_json_string(&sb, ops->source);
    pelab_sb_printf(&sb, ",\n  \"license\": ");
    pelab_sb_json_string(&sb, ops->license);
    pelab_sb_printf(&sb, ",\n  \"images\": %u,\n  \"rows\": %u,\n  \"cols\": %u,\n  \"classes\": %d,\n"
                    "  \"bytes\": %llu,\n  \"data_crc32\": \"%08x\",\n  \"expected_data_crc32\": ",
                    (unsigned)(n + counts[2]), (unsigned)rows, (unsigned)cols, CLASSES,
                    (unsigned long long)(n + counts[2]) * rows * cols, (unsigned)all);
    if (ops->text_crc) pelab_sb_printf(&sb, "\"%08x\"", (unsigned)ops->text_crc);
    else pelab_sb_printf(&sb, "null");
    pelab_sb_printf(&sb, ",\n  \"files\": {\"train\": {\"images\": \"%s\", \"labels\": \"%s\", \"count\": %u, "
                    "\"crc32\": \"%08x\"},\n            \"test\": {\"images\": \"%s\", \"labels\": \"%s\", "
                    "\"count\": %u, \"crc32\": \"%08x\"}},\n", files[0][0], files[0][1], (unsigned)n,
                    (unsigned)crc[0], files[1][0], files[1][1], (unsigned)counts[2], (unsigned)crc[1]);
    pelab_sb_printf(&sb, "  \"splits\": {\"train\": {\"file\": \"train\", \"first\": 0, \"images\": %u}, "
                    "\"val\": {\"file\": \"train\", \"first\": %u, \"images\": %u}, \"test\": {\"file\": \"test\", "
                    "\"first\": 0, \"images\": %u}},\n", (unsigned)train, (unsigned)train,
                    (unsigned)PELAB_IMAGE_VAL, (unsigned)counts[2]);
    pelab_sb_printf(&sb, "  \"pixel_mean\": %.17g,\n  \"pixel_std\": %.17g\n}\n", mean, std);
    char path[PATH_MAX];
    if (!rc) rc = pelab_mkdir_p(dir);
    if (!rc && snprintf(path, sizeof path, "%s/info.json", dir) >= (int)sizeof path)
        rc = pelab_fail(PELAB_ERR_USAGE, "%.60s...: path too long", dir);
    if (!rc) rc = pelab_write_file_atomic(path, sb.data, sb.len);
    if (!rc && ops->text_crc && all != ops->text_crc && progress)
        fprintf(progress, "  notice: %s's files have CRC-32 %08x, not the %08x measured with %s: "
                "another version of the package?\n", ops->name, (unsigned)all, (unsigned)ops->text_crc, ops->source);
    if (!rc && progress)
        fprintf(progress, "%s: installed: %u images of %ux%u (train %u, val %u, test %u), pixel mean %.4f, "
                "std %.4f (CRC-32 %08x)\n", ops->name, (unsigned)(n + counts[2]), (unsigned)rows, (unsigned)cols,
                (unsigned)counts[0], (unsigned)counts[1], (unsigned)counts[2], mean, std, (unsigned)all);
    pelab_sb_free(&sb);
    for (int k = 0; k < 2; k++) {
        pelab_idx_free(&img[k]);
        pelab_idx_free(&lab[k]);
    }
    return rc;
}

/* info.json's pair CRC-32s and pixel statistics. */
struct info {
    uint32_t crc[2];
    double mean, std;
};

#define PIXEL_STD_MIN 1e-4 /* a standard deviation below 1/40 of a grey level: no image set */

static int read_info(const char *data_dir, const char *name, struct info *in) {
    char path[PATH_MAX], *raw;
    size_t len;
    int rc = path_in(path, data_dir, name, "info.json");
    if (!rc && !pelab_file_exists(path))
        return pelab_fail(PELAB_ERR_RUNTIME, "dataset '%s' is not installed in %s (run: pelab data install %s "
                          "--data-dir %s)", name, data_dir, name, data_dir);
    if (!rc) rc = pelab_read_regular_file(path, &raw, &len);
    if (rc) return rc;
    struct pelab_json *j;
    rc = pelab_json_parse(raw, len, &j);
    free(raw);
    if (rc) {
        char why[512];
        snprintf(why, sizeof why, "%s", pelab_last_error());
        return pelab_fail(PELAB_ERR_RUNTIME, "%s: damaged: %s (run: pelab data install %s --force)", path, why, name);
    }
    const struct pelab_json *f = pelab_json_get(j, "files"), *m = pelab_json_get(j, "pixel_mean"),
                            *s = pelab_json_get(j, "pixel_std");
    int ok = m && m->type == PELAB_JSON_NUMBER && s && s->type == PELAB_JSON_NUMBER;
    /* pixels are v/255 in [0, 1]: their mean is in [0, 1], their standard deviation at most 1/2,
     * and one that is not positive (or tiny, from a damaged file) would blow up the normalised
     * inputs (x - mean) / std */
    if (ok && !(m->number >= 0 && m->number <= 1 && s->number >= PIXEL_STD_MIN && s->number <= 0.5)) {
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s: damaged: pixel_mean %g and pixel_std %g are not the statistics of "
                        "pixels in [0, 1] (mean 0 to 1, std %g to 0.5; run: pelab data install %s --force)",
                        path, m->number, s->number, PIXEL_STD_MIN, name);
        pelab_json_free(j);
        return rc;
    }
    for (int k = 0; k < 2 && ok; k++) {
        const struct pelab_json *c = pelab_json_get(pelab_json_get(f, k ? "test" : "train"), "crc32");
        char *end;
        ok = c && c->type == PELAB_JSON_STRING && strlen(c->string) == 8;
        if (ok) in->crc[k] = (uint32_t)strtoul(c->string, &end, 16), ok = *end == '\0';
    }
    if (ok) in->mean = m->number, in->std = s->number;
    pelab_json_free(j);
    return ok ? PELAB_OK : pelab_fail(PELAB_ERR_RUNTIME, "%s: damaged: no pixel_mean, pixel_std or files' crc32 "
                                      "(run: pelab data install %s --force)", path, name);
}

static int crc_check(const char *src, int which, uint32_t got, uint32_t want, const char *name) {
    if (got == want) return PELAB_OK;
    return pelab_fail(PELAB_ERR_RUNTIME, "%s/%s: CRC-32 %08x, not the %08x install recorded: the file changed "
                      "(run: pelab data install %s --force)", src, files[which][0], (unsigned)got,
                      (unsigned)want, name);
}

static int fashion_verify(const char *data_dir, const char *name) {
    struct info in;
    char src[PATH_MAX];
    int rc = read_info(data_dir, name, &in);
    if (!rc) rc = path_in(src, data_dir, "sources", name);
    struct pelab_idx img[2], lab[2];
    uint32_t crc[2];
    if (!rc) rc = read_all(src, crc, NULL, img, lab);
    if (rc) return rc;
    for (int k = 0; k < 2; k++) {
        if (!rc) rc = crc_check(src, k, crc[k], in.crc[k], name);
        pelab_idx_free(&img[k]);
        pelab_idx_free(&lab[k]);
    }
    return rc;
}

int pelab_images_load(const char *data_dir, const char *name, int split, struct pelab_images *set) {
    memset(set, 0, sizeof *set);
    const struct pelab_dataset_ops *ops = pelab_dataset_find(name);
    if (!ops || !ops->install)
        return pelab_fail(PELAB_ERR_USAGE, "'%s' is not a dataset of images (known: fashion-mnist)", name);
    if (split != PELAB_DOC_TRAIN && split != PELAB_DOC_VAL && split != PELAB_DOC_TEST)
        return pelab_fail(PELAB_ERR_USAGE, "%s: no split '%s' (train, val, test)", name, pelab_doc_split_name(split));
    struct info in;
    char src[PATH_MAX];
    int rc = read_info(data_dir, name, &in);
    if (!rc) rc = path_in(src, data_dir, "sources", name);
    if (rc) return rc;
    int which = split == PELAB_DOC_TEST ? TEST_FILE : TRAIN_FILE;
    struct pelab_idx img, lab;
    uint32_t crc;
    rc = read_pair(src, which, &crc, NULL, &img, &lab);
    if (!rc) rc = crc_check(src, which, crc, in.crc[which], name);
    if (!rc && which == TRAIN_FILE && img.dims[0] <= PELAB_IMAGE_VAL) /* a CRC collision */
        rc = pelab_fail(PELAB_ERR_RUNTIME, "%s/%s: too few images", src, files[which][0]);
    if (!rc) {
        uint32_t n = img.dims[0];
        set->rows = (int)img.dims[1];
        set->cols = (int)img.dims[2];
        set->classes = CLASSES;
        set->first = split == PELAB_DOC_VAL ? (int)(n - PELAB_IMAGE_VAL) : 0;
        set->n = split == PELAB_DOC_TRAIN ? (int)(n - PELAB_IMAGE_VAL) : split == PELAB_DOC_VAL ? PELAB_IMAGE_VAL : (int)n;
        set->mean = in.mean;
        set->std = in.std;
        size_t pixels = (size_t)set->rows * set->cols;
        set->pixels = malloc((size_t)set->n * pixels);
        set->labels = malloc((size_t)set->n);
        if (!set->pixels || !set->labels) rc = pelab_fail(PELAB_ERR_RUNTIME, "out of memory for %d images", set->n);
        else {
            memcpy(set->pixels, (const uint8_t *)img.data + (size_t)set->first * pixels, (size_t)set->n * pixels);
            memcpy(set->labels, (const uint8_t *)lab.data + set->first, (size_t)set->n);
        }
    }
    pelab_idx_free(&img);
    pelab_idx_free(&lab);
    if (rc) pelab_images_free(set);
    return rc;
}

void pelab_images_free(struct pelab_images *set) {
    free(set->pixels);
    free(set->labels);
    memset(set, 0, sizeof *set);
}

const struct pelab_dataset_ops pelab_dataset_fashion_mnist = {
    .name = "fashion-mnist",
    .kind = "image",
    .summary = "Zalando's Fashion-MNIST: 70,000 grey 28x28 images of clothes, 10 classes",
    .source = "deb dataset-fashion-mnist (IDX files)",
    .license = "MIT (Expat), Zalando SE 2017",
    .text_crc = 0xcaeb0704, /* CRC-32 of the four IDX files in files[] order, measured on the pinned package */
    .install = fashion_install,
    .verify = fashion_verify,
};
