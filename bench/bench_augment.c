/* bench_augment — what the image task's training augmentation costs per image, against the
 * plain path (float build, one thread):
 *
 *   build/bench/bench_augment [--images N]
 *
 * Times, over N synthetic 28 × 28 images (the cpu image preset's side and 4 × 4 patches), the
 * plain preparation of an image (pelab_image_tokens: normalise, cut into patches) and the
 * augmented one (normalise, a RandomResizedCrop box at scale 0.08..1, the crop resized back to
 * 28 × 28, a mirror for half of them, cut into patches: pelab_image_tokens_crop, as the task).
 * Prints one JSON line, {"images":N,"plain_us":...,"augmented_us":...,"extra_us":...}; a
 * training step of bench_train --config I takes 1e6 / images_per_s microseconds per image,
 * against which extra_us is the augmentation's share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pelab/clock.h"
#include "pelab/image.h"
#include "pelab/rng.h"

enum { SIDE = 28, PATCH = 4, G = SIDE / PATCH };

static double uniform(void *rng) { return pelab_rng_uniform(rng); }

int main(int argc, char **argv) {
    long images = 200000;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--images")) images = atol(argv[i + 1]);
    static uint8_t pixels[16][SIDE * SIDE];
    struct pelab_rng rng;
    pelab_rng_seed(&rng, 1);
    for (int k = 0; k < 16; k++)
        for (int i = 0; i < SIDE * SIDE; i++) pixels[k][i] = (uint8_t)pelab_rng_below(&rng, 256);
    static pelab_real scratch[3 * SIDE * SIDE], patches[G * G * PATCH * PATCH];
    static int32_t pos[G * G * 2];
    const double scale[2] = {0.08, 1}, ratio[2] = {0.75, 4.0 / 3};
    double sink = 0;
    double t0 = pelab_clock_s();
    for (long n = 0; n < images; n++) {
        pelab_image_tokens(patches, pos, pixels[n & 15], SIDE, SIDE, SIDE, PATCH, 0.286, 0.353, scratch);
        sink += patches[n % (G * G * PATCH * PATCH)];
    }
    const double plain = (pelab_clock_s() - t0) / images * 1e6;
    t0 = pelab_clock_s();
    for (long n = 0; n < images; n++) {
        struct pelab_crop box;
        pelab_image_crop_box(&box, SIDE, SIDE, scale, ratio, uniform, &rng);
        pelab_image_tokens_crop(patches, pos, pixels[n & 15], SIDE, SIDE, SIDE, PATCH, 0.286, 0.353, &box,
                                uniform(&rng) < 0.5, scratch);
        sink += patches[n % (G * G * PATCH * PATCH)];
    }
    const double augmented = (pelab_clock_s() - t0) / images * 1e6;
    printf("{\"images\":%ld,\"plain_us\":%.3f,\"augmented_us\":%.3f,\"extra_us\":%.3f,\"sink\":%g}\n", images,
           plain, augmented, augmented - plain, sink);
    return 0;
}
