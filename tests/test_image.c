/* Images (pelab/image.h): which resolutions suit a patch size (and the usage error for the others),
 * and resolution sweeps parsed ("28,56" or "1x,2x"), each item checked;
 * bilinear resizing on cases worked by hand (2x2 to 4x4, identity, constants), its exactness on
 * affine images (the clamped source coordinates of the documented formula), and its commuting with
 * the normalisation; patches and their grid positions on known images, and the token counts of
 * the resolution sweep; the training augmentation's crop box on fixed draws (torchvision's
 * RandomResizedCrop.get_params, worked by hand) and its crop, resize and mirror against an
 * independent bilinear formula. (Against PyTorch's F.interpolate: test_image_torch.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lib/check.h"
#include "pelab/image.h"
#include "pelab/status.h"

static void test_check_side(void) {
    const int good[] = {4, 28, 36, 44, 56, 84, 4096};
    for (int i = 0; i < 7; i++) CHECK(pelab_image_check_side(good[i], 4) == PELAB_OK, "side %d, patch 4: %s", good[i], pelab_last_error());
    CHECK(pelab_image_check_side(30, 4) == PELAB_ERR_USAGE &&
          strcmp(pelab_last_error(), "resolution 30 is not a multiple of the patch size 4 (28 and 32 are)") == 0,
          "30: %s", pelab_last_error());
    CHECK(pelab_image_check_side(37, 7) == PELAB_ERR_USAGE && strstr(pelab_last_error(), "(35 and 42 are)"), "37/7: %s", pelab_last_error());
    CHECK(pelab_image_check_side(2, 4) == PELAB_ERR_USAGE && strstr(pelab_last_error(), "resolution 2: expected 4 (the patch size) to 4096"),
          "2: %s", pelab_last_error());
    CHECK(pelab_image_check_side(0, 4) == PELAB_ERR_USAGE, "0 accepted");
    CHECK(pelab_image_check_side(-28, 4) == PELAB_ERR_USAGE, "-28 accepted");
    CHECK(pelab_image_check_side(4100, 4) == PELAB_ERR_USAGE, "4100 accepted");
    CHECK(pelab_image_check_side(28, 0) == PELAB_ERR_USAGE && strstr(pelab_last_error(), "patch size 0"), "patch 0: %s", pelab_last_error());
    CHECK(pelab_image_check_side(28, 7) == PELAB_OK && pelab_image_check_side(28, 28) == PELAB_OK && pelab_image_check_side(28, 1) == PELAB_OK,
          "28 with patches 7, 28, 1");
}

/* parse SPEC with a training side of 28 and patch 4: its sides, or the error that must contain want */
static void parse(const char *spec, int n_want, const int *want, const char *err) {
    int sides[PELAB_IMAGE_MAX_SIDES], n = -1;
    int rc = pelab_image_parse_sides(spec, 28, 4, sides, &n);
    if (err) {
        CHECK(rc == PELAB_ERR_USAGE && strstr(pelab_last_error(), err), "'%s': rc %d, '%s' not in: %s", spec, rc, err, pelab_last_error());
        return;
    }
    CHECK(rc == PELAB_OK && n == n_want, "'%s': rc %d, %d sides: %s", spec, rc, n, pelab_last_error());
    for (int i = 0; i < n && i < n_want; i++) CHECK(sides[i] == want[i], "'%s': side %d is %d, expected %d", spec, i, sides[i], want[i]);
}

static void test_parse_sides(void) {
    parse("28,36,44,56,84", 5, (const int[]){28, 36, 44, 56, 84}, NULL);
    parse("1x, 2x ,3x", 3, (const int[]){28, 56, 84}, NULL);
    parse("1.2857x,40,1.7143x", 3, (const int[]){36, 40, 48}, NULL); /* 35.9996 and 48.0004 round to 36 and 48 */
    parse("1.5x", 0, NULL, "--resolutions: '1.5x': resolution 42 is not a multiple of the patch size 4 (40 and 44 are)");
    parse("30", 0, NULL, "--resolutions: '30': resolution 30 is not a multiple of the patch size 4 (28 and 32 are)");
    parse("28,2", 0, NULL, "'2': resolution 2: expected 4 (the patch size) to 4096");
    parse("224", 1, (const int[]){224}, NULL); /* 8x the training side */
    parse("8x", 1, (const int[]){224}, NULL);
    parse("228", 0, NULL, "--resolutions: '228': at most 8x the training side, 224 pixels here (an image of side 228 has 3250 tokens, 65 times the trained images' 50, and its attention costs the square of that)");
    parse("8.2x", 0, NULL, "'8.2x': at most 8x the training side");
    parse("0x", 0, NULL, "'0x' is neither a multiple of the training resolution (2x, 1.5x) nor a side in pixels (56)");
    parse("28,,56", 0, NULL, "is not a list like 28,56,84 or 1x,2x,3x");
    parse("28x3", 0, NULL, "'28x3' is neither");
    parse("-4", 0, NULL, "--resolutions: '-4': a side is 4 (the patch size) to 4096 pixels");
    parse("4100", 0, NULL, "--resolutions: '4100': a side is 4 (the patch size) to 4096 pixels");
    parse("4294967324", 0, NULL, "--resolutions: '4294967324': a side is 4 (the patch size) to 4096 pixels");
    parse("99999999999", 0, NULL, "'99999999999': a side is 4 (the patch size) to 4096 pixels");
    parse("4,8,12,16,20,24,28,32,36,40,44,48,52,56,60,64,68", 0, NULL, "more than 16 resolutions");
}

static void test_resize_by_hand(void) {
    /* 2x2 -> 4x4: per axis s = 1/2, u = (i + 0.5)/2 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25
     * (i0 = 1, i1 = 1), so a row [a, b] becomes [a, 0.75a + 0.25b, 0.25a + 0.75b, b]; for
     * in = [[0, 1], [2, 3]] = 2r + c: out[i][j] = 2y_i + y_j with y = 0, 0.25, 0.75, 1. */
    const pelab_real in[4] = {0, 1, 2, 3};
    const double y[4] = {0, 0.25, 0.75, 1};
    pelab_real out[16];
    pelab_image_resize(out, 4, 4, in, 2, 2);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) CHECK(out[i * 4 + j] == 2 * y[i] + y[j], "2x2->4x4 [%d][%d] = %g, expected %g", i, j, (double)out[i * 4 + j], 2 * y[i] + y[j]);
    /* 4 -> 2 along each axis: u = 2(i + 0.5) - 0.5 = 0.5, 2.5: the mean of pixel pairs 0,1 and 2,3 */
    const pelab_real row[4] = {1, 3, 10, 20};
    pelab_real half[2];
    pelab_image_resize(half, 1, 2, row, 1, 4);
    CHECK(half[0] == 2 && half[1] == 15, "4->2: %g %g", (double)half[0], (double)half[1]);
    /* the same size: the identity; a constant: unchanged at every size */
    pelab_real img[28 * 28], big[84 * 84];
    for (int i = 0; i < 28 * 28; i++) img[i] = (pelab_real)((i * 37) % 101) / 7;
    pelab_image_resize(big, 28, 28, img, 28, 28);
    CHECK(memcmp(big, img, sizeof img) == 0, "28 -> 28 is not the identity");
    for (int i = 0; i < 28 * 28; i++) img[i] = (pelab_real)0.375;
    const int sides[] = {13, 36, 44, 56, 84};
    for (int k = 0; k < 5; k++) {
        pelab_image_resize(big, sides[k], sides[k], img, 28, 28);
        int ok = 1;
        for (int i = 0; i < sides[k] * sides[k]; i++) ok &= fabs((double)big[i] - 0.375) < 1e-15;
        CHECK(ok, "a constant image resized to %d is not constant", sides[k]);
    }
}

/* The clamped source coordinate of the documented formula. */
static double source(int i, int in, int out) {
    double u = ((double)in / out) * (i + 0.5) - 0.5;
    return u < 0 ? 0 : u > in - 1 ? in - 1 : u;
}

static void test_resize_affine(void) {
    /* bilinear interpolation reproduces an affine image exactly at the (clamped) source point */
    const int rows = 28, cols = 20;
    pelab_real img[28 * 20], out[84 * 50];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) img[r * cols + c] = (pelab_real)(0.5 * r - 1.25 * c + 3);
    const int shapes[][2] = {{84, 50}, {36, 36}, {44, 20}, {14, 9}, {56, 7}};
    for (int k = 0; k < 5; k++) {
        int oh = shapes[k][0], ow = shapes[k][1];
        pelab_image_resize(out, oh, ow, img, rows, cols);
        double worst = 0;
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                double want = 0.5 * source(i, rows, oh) - 1.25 * source(j, cols, ow) + 3;
                worst = fmax(worst, fabs((double)out[i * ow + j] - want));
            }
        CHECK(worst < 1e-12, "affine image 28x20 -> %dx%d: off by %g", oh, ow, worst);
    }
}

static void test_normalize_commutes(void) {
    uint8_t px[28 * 28];
    for (int i = 0; i < 28 * 28; i++) px[i] = (uint8_t)((i * 97 + 13) % 256);
    const double mean = 0.2858, std = 0.3529;
    pelab_real norm[28 * 28], unit[28 * 28], a[56 * 56], b[56 * 56];
    pelab_image_normalize(norm, px, 28 * 28, mean, std);
    CHECK(fabs((double)norm[0] - (13 / 255.0 - mean) / std) < 1e-15 && fabs((double)norm[1] - (110 / 255.0 - mean) / std) < 1e-15,
          "normalize: %g %g", (double)norm[0], (double)norm[1]);
    pelab_image_normalize(unit, px, 28 * 28, 0, 1);
    pelab_image_resize(a, 56, 56, norm, 28, 28);
    pelab_image_resize(b, 56, 56, unit, 28, 28);
    double worst = 0;
    for (int i = 0; i < 56 * 56; i++) worst = fmax(worst, fabs((double)a[i] - ((double)b[i] - mean) / std));
    CHECK(worst < 1e-12, "normalise-then-resize and resize-then-normalise differ by %g", worst);
}

static void test_patches(void) {
    /* 4x4 image 0..15, p = 2: four patches, row-major over the grid, row-major inside */
    pelab_real img[16], out[16];
    for (int i = 0; i < 16; i++) img[i] = (pelab_real)i;
    int32_t pos[8];
    pelab_image_patches(out, pos, img, 4, 4, 2);
    const pelab_real want[16] = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
    const int32_t want_pos[8] = {0, 0, 0, 1, 1, 0, 1, 1};
    CHECK(memcmp(out, want, sizeof want) == 0, "4x4, p 2: patches");
    CHECK(memcmp(pos, want_pos, sizeof want_pos) == 0, "4x4, p 2: positions");
    /* 2x6, p = 2: a grid of 1 row and 3 columns */
    pelab_real wide[12], wout[12];
    for (int i = 0; i < 12; i++) wide[i] = (pelab_real)(10 * (i / 6) + i % 6); /* 10·row + col */
    int32_t wpos[6];
    pelab_image_patches(wout, wpos, wide, 2, 6, 2);
    const pelab_real wwant[12] = {0, 1, 10, 11, 2, 3, 12, 13, 4, 5, 14, 15};
    const int32_t wwant_pos[6] = {0, 0, 0, 1, 0, 2};
    CHECK(memcmp(wout, wwant, sizeof wwant) == 0 && memcmp(wpos, wwant_pos, sizeof wwant_pos) == 0, "2x6, p 2");
    /* the sweep's sides with p = 4: T = (R/4)^2 tokens, the last at grid (R/4 - 1, R/4 - 1), and
     * every pixel in exactly one patch; pos may be NULL */
    const int sides[] = {28, 36, 44, 56, 84}, tokens[] = {49, 81, 121, 196, 441};
    for (int k = 0; k < 5; k++) {
        int R = sides[k], T = (R / 4) * (R / 4);
        CHECK(T == tokens[k], "%d: %d tokens", R, T);
        pelab_real *im = malloc(sizeof *im * R * R), *p = malloc(sizeof *p * T * 16);
        int32_t *ps = malloc(sizeof *ps * 2 * T);
        for (int i = 0; i < R * R; i++) im[i] = (pelab_real)i;
        pelab_image_patches(p, ps, im, R, R, 4);
        int *seen = calloc((size_t)R * R, sizeof *seen), ok = 1;
        for (int i = 0; i < T * 16; i++) seen[(int)p[i]]++;
        for (int i = 0; i < R * R; i++) ok &= seen[i] == 1;
        CHECK(ok, "%d: a pixel in no patch or in two", R);
        CHECK(ps[2 * (T - 1)] == R / 4 - 1 && ps[2 * (T - 1) + 1] == R / 4 - 1 && ps[2 * 1] == 0 && ps[2 * 1 + 1] == 1 &&
              ps[2 * (R / 4)] == 1 && ps[2 * (R / 4) + 1] == 0, "%d: grid positions", R);
        /* patch t's top-left pixel is at (4·row, 4·col) */
        ok = 1;
        for (int t = 0; t < T; t++) ok &= (int)p[t * 16] == 4 * ps[2 * t] * R + 4 * ps[2 * t + 1];
        CHECK(ok, "%d: patch origins", R);
        pelab_real *q = malloc(sizeof *q * T * 16);
        pelab_image_patches(q, NULL, im, R, R, 4);
        CHECK(memcmp(p, q, sizeof *q * T * 16) == 0, "%d: without positions", R);
        free(q);
        free(seen);
        free(im);
        free(p);
        free(ps);
    }
}

/* pelab_image_tokens: the three steps in order, at the image's own side and at a larger one */
static void test_tokens(void) {
    uint8_t px[28 * 28];
    for (int i = 0; i < 28 * 28; i++) px[i] = (uint8_t)((i * 53 + 7) % 256);
    static pelab_real scratch[28 * 28 + 56 * 56], x[28 * 28], big[56 * 56], want[196 * 16], got[196 * 16];
    int32_t want_pos[196 * 2], got_pos[196 * 2];
    pelab_image_normalize(x, px, 28 * 28, 0.3, 0.4);
    pelab_image_patches(want, want_pos, x, 28, 28, 4);
    pelab_image_tokens(got, got_pos, px, 28, 28, 28, 4, 0.3, 0.4, scratch);
    CHECK(memcmp(got, want, 49 * 16 * sizeof *got) == 0 && memcmp(got_pos, want_pos, 49 * 2 * sizeof *got_pos) == 0, "tokens at 28");
    CHECK(got[0] == (pelab_real)((7 / 255.0 - 0.3) / 0.4), "tokens at 28: the first pixel, normalised");
    pelab_image_resize(big, 56, 56, x, 28, 28);
    pelab_image_patches(want, want_pos, big, 56, 56, 4);
    pelab_image_tokens(got, got_pos, px, 28, 28, 56, 4, 0.3, 0.4, scratch);
    CHECK(memcmp(got, want, sizeof want) == 0 && memcmp(got_pos, want_pos, sizeof want_pos) == 0, "tokens at 56");
}

/* The draws a crop box reads, given in advance (the crop on fixed draws). */
struct draws {
    const double *u;
    int n, used;
};
static double next_draw(void *ctx) {
    struct draws *d = ctx;
    return d->used < d->n ? d->u[d->used++] : 0.5;
}

/* RandomResizedCrop's box on fixed draws, worked by hand from torchvision's get_params. */
static void test_crop_box(void) {
    const double scale[2] = {0.08, 1}, ratio[2] = {0.75, 4.0 / 3};
    /* area 784 · (0.08 + 0.92·0.5) = 423.36, aspect e^0 = 1: w = h = round(20.58) = 21, top
     * ⌊0.25·8⌋ = 2, left ⌊0.75·8⌋ = 6 */
    struct draws d = {(const double[]){0.5, 0.5, 0.25, 0.75}, 4, 0};
    struct pelab_crop box;
    pelab_image_crop_box(&box, 28, 28, scale, ratio, next_draw, &d);
    CHECK(box.h == 21 && box.w == 21 && box.top == 2 && box.left == 6 && d.used == 4, "crop box %d x %d at %d,%d",
          box.h, box.w, box.top, box.left);
    /* the widest ratio at the smallest area: aspect 4/3, area 62.72: w = round(9.14) = 9, h = round(6.86) = 7;
     * draws just below 1 put it at the far corner, 28 - 7 and 28 - 9 */
    d = (struct draws){(const double[]){0, 0.9999999999, 0.9999999999, 0.9999999999}, 4, 0};
    pelab_image_crop_box(&box, 28, 28, scale, ratio, next_draw, &d);
    CHECK(box.h == 7 && box.w == 9 && box.top == 21 && box.left == 19, "corner box %d x %d at %d,%d", box.h, box.w,
          box.top, box.left);
    /* a box that never fits (the whole area at ratio 2..3): ten tries, then the centred box of
     * ratio 2, w = 28, h = round(28 / 2) = 14 */
    const double whole[2] = {1, 1}, wide[2] = {2, 3};
    d = (struct draws){NULL, 0, 0};
    pelab_image_crop_box(&box, 28, 28, whole, wide, next_draw, &d);
    CHECK(box.h == 14 && box.w == 28 && box.top == 7 && box.left == 0 && d.used == 0, "fallback %d x %d at %d,%d",
          box.h, box.w, box.top, box.left);
}

/* A crop resized and mirrored against an independent bilinear formula in double. */
static void test_crop_resize(void) {
    enum { R = 20, C = 24, S = 16 };
    static pelab_real x[R * C], out[S * S], scratch[R * C];
    for (int i = 0; i < R * C; i++) x[i] = (pelab_real)sin(0.37 * i) + (pelab_real)(i % 7) * 0.1f;
    const struct pelab_crop box = {3, 5, 11, 17};
    for (int flip = 0; flip < 2; flip++) {
        pelab_image_crop_resize(out, S, x, C, &box, flip, scratch);
        double worst = 0;
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                /* the source point of output (i, j) in the box, PyTorch's align_corners=False */
                double u = fmax(0, (i + 0.5) * box.h / S - 0.5), v = fmax(0, (j + 0.5) * box.w / S - 0.5);
                int r0 = (int)u, c0 = (int)v, r1 = r0 + (r0 < box.h - 1), c1 = c0 + (c0 < box.w - 1);
                double a = u - r0, b = v - c0;
                const pelab_real *p = x + (size_t)box.top * C + box.left;
                double want = (1 - a) * ((1 - b) * p[r0 * C + c0] + b * p[r0 * C + c1]) +
                              a * ((1 - b) * p[r1 * C + c0] + b * p[r1 * C + c1]);
                worst = fmax(worst, fabs(out[i * S + (flip ? S - 1 - j : j)] - want));
            }
        CHECK(worst < 1e-5, "crop resize%s: off by %g", flip ? " and flip" : "", worst);
    }
}

int main(void) {
    test_crop_box();
    test_crop_resize();
    test_check_side();
    test_parse_sides();
    test_resize_by_hand();
    test_resize_affine();
    test_normalize_commutes();
    test_patches();
    test_tokens();
    return check_report("test_image");
}
