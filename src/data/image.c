/* Images (pelab/image.h): normalisation, bilinear resizing, and patches with their grid
 * positions — what the image task does to each image before the patch embedding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/image.h"
#include "pelab/options.h"
#include "pelab/status.h"

int pelab_image_check_side(int side, int patch) {
    if (patch < 1 || patch > PELAB_IMAGE_MAX_SIDE)
        return pelab_fail(PELAB_ERR_USAGE, "patch size %d: expected 1 to %d", patch, PELAB_IMAGE_MAX_SIDE);
    if (side < patch || side > PELAB_IMAGE_MAX_SIDE)
        return pelab_fail(PELAB_ERR_USAGE, "resolution %d: expected %d (the patch size) to %d", side, patch,
                          PELAB_IMAGE_MAX_SIDE);
    if (side % patch) {
        int below = side - side % patch, above = below + patch;
        return pelab_fail(PELAB_ERR_USAGE, "resolution %d is not a multiple of the patch size %d "
                          "(%d and %d are)", side, patch, below, above);
    }
    return PELAB_OK;
}

/* A side of a sweep, v pixels as given by `item`: in range, not too costly, a multiple of the
 * patch. */
static int check_sweep_side(const char *item, double v, int train_side, int patch) {
    if (v < 1 || v > PELAB_IMAGE_MAX_SIDE)
        return pelab_fail(PELAB_ERR_USAGE, "--resolutions: '%s': a side is %d (the patch size) to %d "
                          "pixels", item, patch, PELAB_IMAGE_MAX_SIDE);
    /* an image's evaluation costs the square of its tokens, (side/patch)^2 + 1 */
    if (v > PELAB_IMAGE_MAX_MULTIPLE * train_side) {
        const double tokens = floor(v / patch) * floor(v / patch) + 1;
        const double trained = (double)(train_side / patch) * (train_side / patch) + 1;
        return pelab_fail(PELAB_ERR_USAGE, "--resolutions: '%s': at most %dx the training side, %d "
                          "pixels here (an image of side %.0f has %.0f tokens, %.0f times the "
                          "trained images' %.0f, and its attention costs the square of that)", item,
                          PELAB_IMAGE_MAX_MULTIPLE, PELAB_IMAGE_MAX_MULTIPLE * train_side, v, tokens,
                          tokens / trained, trained);
    }
    if (pelab_image_check_side((int)v, patch))
        return pelab_fail_context(PELAB_ERR_USAGE, "--resolutions: '%s'", item);
    return PELAB_OK;
}

int pelab_image_parse_sides(const char *spec, int train_side, int patch, int sides[PELAB_IMAGE_MAX_SIDES], int *n) {
    double v[PELAB_IMAGE_MAX_SIDES];
    char items[PELAB_IMAGE_MAX_SIDES][PELAB_SIZE_ITEM_MAX];
    int rc = pelab_parse_sizes("resolutions", spec, train_side, PELAB_IMAGE_MAX_SIDES, v, items, n,
                               "is neither a multiple of the training resolution (2x, 1.5x) nor a side in pixels (56)",
                               "28,56,84 or 1x,2x,3x");
    for (int i = 0; !rc && i < *n; i++)
        if (!(rc = check_sweep_side(items[i], v[i], train_side, patch))) sides[i] = (int)v[i];
    return rc;
}

void pelab_image_normalize(pelab_real *out, const uint8_t *in, size_t n, double mean, double std) {
    for (size_t i = 0; i < n; i++) out[i] = (pelab_real)((in[i] / 255.0 - mean) / std);
}

/* The source pixels and weights of each output index along one axis (pelab/image.h). */
static void axis(int out_size, int in_size, int i, int *i0, int *i1, pelab_real *l0, pelab_real *l1) {
    pelab_real s = (pelab_real)in_size / (pelab_real)out_size;
    pelab_real u = s * ((pelab_real)i + (pelab_real)0.5) - (pelab_real)0.5;
    if (u < 0) u = 0;
    *i0 = (int)u;
    if (*i0 > in_size - 1) *i0 = in_size - 1;
    *i1 = *i0 < in_size - 1 ? *i0 + 1 : *i0;
    *l1 = u - (pelab_real)*i0;
    if (*l1 > 1) *l1 = 1;
    *l0 = 1 - *l1;
}

void pelab_image_resize(pelab_real *out, int out_rows, int out_cols, const pelab_real *in, int rows, int cols) {
    PELAB_ASSERT(out_rows > 0 && out_cols > 0 && rows > 0 && cols > 0);
    for (int i = 0; i < out_rows; i++) {
        int r0, r1;
        pelab_real a0, a1;
        axis(out_rows, rows, i, &r0, &r1, &a0, &a1);
        const pelab_real *top = in + (size_t)r0 * cols, *bottom = in + (size_t)r1 * cols;
        for (int j = 0; j < out_cols; j++) {
            int c0, c1;
            pelab_real b0, b1;
            axis(out_cols, cols, j, &c0, &c1, &b0, &b1);
            out[(size_t)i * out_cols + j] = a0 * (b0 * top[c0] + b1 * top[c1]) + a1 * (b0 * bottom[c0] + b1 * bottom[c1]);
        }
    }
}

void pelab_image_crop_box(struct pelab_crop *box, int rows, int cols, const double scale[2], const double ratio[2],
                          double (*uniform)(void *ctx), void *ctx) {
    const double area = (double)rows * cols, lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        const double target = area * (scale[0] + (scale[1] - scale[0]) * uniform(ctx));
        const double aspect = exp(lr0 + (lr1 - lr0) * uniform(ctx));
        const int w = (int)lround(sqrt(target * aspect)), h = (int)lround(sqrt(target / aspect));
        if (w > 0 && w <= cols && h > 0 && h <= rows) {
            box->h = h, box->w = w;
            box->top = (int)(uniform(ctx) * (rows - h + 1)); /* uniform in 0..rows-h */
            box->left = (int)(uniform(ctx) * (cols - w + 1));
            return;
        }
    }
    const double in_ratio = (double)cols / rows; /* the fallback: a centred box */
    int w = cols, h = rows;
    if (in_ratio < ratio[0]) h = (int)lround(w / ratio[0]);
    else if (in_ratio > ratio[1]) w = (int)lround(h * ratio[1]);
    box->h = h, box->w = w, box->top = (rows - h) / 2, box->left = (cols - w) / 2;
}

void pelab_image_crop_resize(pelab_real *out, int side, const pelab_real *x, int cols, const struct pelab_crop *box,
                             int flip, pelab_real *scratch) {
    for (int r = 0; r < box->h; r++)
        memcpy(scratch + (size_t)r * box->w, x + (size_t)(box->top + r) * cols + box->left, sizeof *x * (size_t)box->w);
    pelab_image_resize(out, side, side, scratch, box->h, box->w);
    for (int r = 0; flip && r < side; r++)
        for (int a = 0, b = side - 1; a < b; a++, b--) {
            pelab_real *row = out + (size_t)r * side, v = row[a];
            row[a] = row[b], row[b] = v;
        }
}

void pelab_image_patches(pelab_real *out, int32_t *pos, const pelab_real *img, int rows, int cols, int p) {
    PELAB_ASSERT(p > 0 && rows % p == 0 && cols % p == 0);
    int gr = rows / p, gc = cols / p;
    for (int r = 0; r < gr; r++)
        for (int c = 0; c < gc; c++) {
            size_t t = (size_t)r * gc + c;
            pelab_real *o = out + t * p * p;
            for (int a = 0; a < p; a++)
                for (int b = 0; b < p; b++) o[a * p + b] = img[(size_t)(r * p + a) * cols + c * p + b];
            if (pos) {
                pos[2 * t] = r;
                pos[2 * t + 1] = c;
            }
        }
}

void pelab_image_tokens_crop(pelab_real *patches, int32_t *pos, const uint8_t *pixels, int rows, int cols, int side,
                             int patch, double mean, double std, const struct pelab_crop *box, int flip,
                             pelab_real *scratch) {
    pelab_real *x = scratch, *out = x + (size_t)rows * cols, *crop = out + (size_t)side * side;
    pelab_image_normalize(x, pixels, (size_t)rows * cols, mean, std);
    pelab_image_crop_resize(out, side, x, cols, box, flip, crop);
    pelab_image_patches(patches, pos, out, side, side, patch);
}

void pelab_image_tokens(pelab_real *patches, int32_t *pos, const uint8_t *pixels, int rows, int cols, int side,
                        int patch, double mean, double std, pelab_real *scratch) {
    pelab_real *x = scratch, *resized = scratch + (size_t)rows * cols;
    pelab_image_normalize(x, pixels, (size_t)rows * cols, mean, std);
    if (side == rows && side == cols) resized = x;
    else pelab_image_resize(resized, side, side, x, rows, cols);
    pelab_image_patches(patches, pos, resized, side, side, patch);
}
