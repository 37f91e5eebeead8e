/* pelab/image.h — grey images for the image task: an installed image dataset's splits, pixel
 * normalisation, bilinear resizing, and p×p patches with their (row, col) grid positions.
 *
 * An image goes from its bytes to the model's input in three steps:
 *     x  = (v/255 − mean) / std      pelab_image_normalize; mean and std are those of the
 *                                    training split's pixels (v/255), measured by install
 *     x' = resize(x) to R×R          pelab_image_resize, bilinear (PyTorch's align_corners=False);
 *                                    its weights sum to 1, so it commutes with the affine
 *                                    normalisation: normalising before or after gives the same x'
 *     patches (T, p²), pos (T, 2)    pelab_image_patches, T = (R/p)²
 * pelab_image_tokens does the three; pelab_image_check_side says whether R suits the patch size
 * p (a multiple of it), pelab_image_parse_sides reads a sweep of resolutions.
 */
#ifndef PELAB_IMAGE_H
#define PELAB_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include "pelab/real.h"

/* Images in the training file's tail that form the validation split (Fashion-MNIST: 60,000
 * training images = 55,000 train + 5,000 val). */
#define PELAB_IMAGE_VAL 5000
/* The largest side pelab_image_check_side accepts. */
#define PELAB_IMAGE_MAX_SIDE 4096

/* One split of an installed image dataset, in memory. */
struct pelab_images {
    int n, rows, cols;  /* n images of rows × cols pixels */
    int classes;        /* labels are 0 .. classes-1 */
    uint8_t *pixels;    /* (n, rows, cols), row-major, 0 .. 255 */
    uint8_t *labels;    /* (n) */
    int first;          /* index in its IDX file of image 0 (val: the training file's count − 5000) */
    double mean, std;   /* of v/255 over every pixel of the training split (not this split's) */
};

/* Loads split `split` (PELAB_DOC_TRAIN, _VAL or _TEST of pelab/tokcache.h) of image dataset
 * `name` installed in data_dir: train is the training file but its last PELAB_IMAGE_VAL images,
 * val those last images, test the test file — deterministic, in file order. The files are
 * checked against the CRC-32s install recorded. PELAB_ERR_USAGE for a dataset that is not one of
 * images or another split; PELAB_ERR_RUNTIME when it is not installed or a file is damaged. */
int pelab_images_load(const char *data_dir, const char *name, int split, struct pelab_images *set);
void pelab_images_free(struct pelab_images *set);

/* PELAB_OK when an image of side `side` cuts into whole patch × patch patches (side a multiple
 * of patch, 1 <= side <= PELAB_IMAGE_MAX_SIDE); else PELAB_ERR_USAGE with a message naming the
 * side, the patch size and the nearest sides that work. */
int pelab_image_check_side(int side, int patch);

#define PELAB_IMAGE_MAX_SIDES 16 /* resolutions per sweep */
#define PELAB_IMAGE_MAX_MULTIPLE 8 /* a side of a sweep: at most this times the training side */

/* Parses a resolution sweep, "28,36,44,56,84" or "1x,2x,3x" (the forms may mix): a number
 * followed by x is a multiple of train_side, rounded to the nearest pixel; a plain integer is a
 * side in pixels. Each side must pass pelab_image_check_side for `patch`; sides[0..*n-1] in the
 * order given. PELAB_ERR_USAGE naming the item ("--resolutions: ...") for anything else or more
 * than PELAB_IMAGE_MAX_SIDES items. */
int pelab_image_parse_sides(const char *spec, int train_side, int patch, int sides[PELAB_IMAGE_MAX_SIDES], int *n);

/* out[i] = (in[i]/255 − mean) / std for i < n. */
void pelab_image_normalize(pelab_real *out, const uint8_t *in, size_t n, double mean, double std);

/* Bilinear resize of in (rows, cols) to out (out_rows, out_cols), the formula of PyTorch's
 * F.interpolate(mode='bilinear', align_corners=False, antialias=False), per axis:
 *     s  = in_size / out_size
 *     u  = max(0, (i + 0.5)·s − 0.5)         the source coordinate of output pixel i (pixel
 *                                            centres at +0.5; clamped at the first pixel)
 *     i0 = floor(u), i1 = min(i0 + 1, in_size − 1), λ = u − i0
 *     out[i][j] = (1−λr)·((1−λc)·in[r0][c0] + λc·in[r0][c1]) + λr·((1−λc)·in[r1][c0] + λc·in[r1][c1])
 * No antialiasing: a downscale samples, it does not average. in and out must not overlap. */
void pelab_image_resize(pelab_real *out, int out_rows, int out_cols, const pelab_real *in, int rows, int cols);

/* Cuts img (rows, cols) into T = (rows/p)·(cols/p) patches of p×p, rows and cols multiples of p:
 *     out (T, p·p): patch t = gr·(cols/p) + gc (row-major over the grid), its element a·p + b is
 *                   img[gr·p + a][gc·p + b] (row-major inside the patch)
 *     pos (T, 2):   (gr, gc), the patch's grid row and column (may be NULL)
 * pos is the explicit 2-D position array the encodings read. */
void pelab_image_patches(pelab_real *out, int32_t *pos, const pelab_real *img, int rows, int cols, int p);

/* Training augmentation (the image task's --aug-scale, --aug-ratio, --aug-flip), torchvision's
 * RandomResizedCrop and RandomHorizontalFlip: a box of the image whose area is a fraction in
 * [scale_lo, scale_hi] of the image's and whose width/height ratio is in [ratio_lo, ratio_hi]
 * (uniform on a log scale), at a uniform place, resized to side × side (pelab_image_resize),
 * then mirrored left to right when `flip`. */
struct pelab_crop {
    int top, left, h, w;
};

/* RandomResizedCrop.get_params: up to 10 draws of u (area fraction, uniform in [scale_lo,
 * scale_hi]) and v (log ratio, uniform in [log ratio_lo, log ratio_hi]), w = round(√(A·u·e^v)),
 * h = round(√(A·u/e^v)), A = rows·cols, the first box that fits at top uniform in 0..rows−h and
 * left in 0..cols−w; when none fits, the largest centred box of the ratio clamped to the range.
 * uniform() returns numbers in [0, 1) (from the caller's generator). */
void pelab_image_crop_box(struct pelab_crop *box, int rows, int cols, const double scale[2], const double ratio[2],
                          double (*uniform)(void *ctx), void *ctx);
/* out (side, side): the box of x (rows, cols) resized bilinearly to side × side, then mirrored
 * left to right when flip. scratch holds box.h·box.w reals. */
void pelab_image_crop_resize(pelab_real *out, int side, const pelab_real *x, int cols, const struct pelab_crop *box,
                             int flip, pelab_real *scratch);

/* The three steps for one image of a dataset: pixels (rows, cols) normalised with mean and std,
 * resized to side × side (skipped at the image's own size), cut into patches (T, patch²) with
 * pos (T, 2), T = (side/patch)². side must pass pelab_image_check_side. scratch holds
 * rows·cols + side² reals. */
void pelab_image_tokens(pelab_real *patches, int32_t *pos, const uint8_t *pixels, int rows, int cols, int side,
                        int patch, double mean, double std, pelab_real *scratch);
/* The same for the box of the image (pelab_image_crop_resize: resized to side × side, mirrored when
 * flip): an augmented training image. scratch holds 2·rows·cols + side² reals. */
void pelab_image_tokens_crop(pelab_real *patches, int32_t *pos, const uint8_t *pixels, int rows, int cols, int side,
                             int patch, double mean, double std, const struct pelab_crop *box, int flip,
                             pelab_real *scratch);

#endif
