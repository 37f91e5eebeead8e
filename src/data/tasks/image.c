/* image — classification of Fashion-MNIST by a vision Transformer (the SeqPE paper's §4.3, scaled
 * down): each image is cut into p × p patches (pelab/image.h: normalised, resized bilinearly to
 * --image-side, patches row-major over the grid), which the model embeds linearly; a learned
 * class token leads each sequence and the classifier reads it.
 *
 * A sequence is T = 1 + G² tokens, G = side / p (default 28 / 4: a 7 × 7 grid, T 50):
 *   token 0      the class token: input row unused, target the label, position (0, 0)
 *   token 1 + i  patch i = (r, c) of the grid, row-major: input its p² pixels, no target,
 *                position (r + 1, c + 1)
 * So the class token sits at a reserved position, (0, 0), outside the grid of patches (which
 * starts at 1 on both axes): an encoding sees it like any position, and learned2d keeps a
 * separate entry for it (DeiT's cls position). --positions raster gives 1-D positions instead,
 * for 1-D encodings: 0 for the class token, 1 + r·G + c for patch (r, c).
 * Attention is bidirectional. Tokens are not read (the model reads the patches); each is
 * the class count, whose text is empty. The score is top-1 accuracy on the class token.
 *
 * Splits (pelab/image.h): train the first 55,000 images of the training file, val its last 5,000,
 * test the test file. Training visits the training split epoch by epoch, each epoch in its own
 * order: example j is image (a_e · (j mod n) + c_e) mod n of epoch e = j / n, a_e coprime to n —
 * a permutation that needs no table and depends on j alone, so a resumed run repeats it.
 *
 * Augmentation (training only; --aug-scale, --aug-ratio, --aug-flip, off by default): example j is
 * a random resized crop of its image and/or its mirror image (pelab/image.h), drawn from
 * hash(data-seed, j), so that every epoch sees each image another way and a resumed run, another
 * batch size or another MPI share sees the same images.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/tasks/tasks.h"
#include "pelab/dataset.h"
#include "pelab/image.h"
#include "pelab/rng.h"
#include "pelab/status.h"
#include "pelab/tokcache.h"

#define AUG_SALT 0xA06A117E5CA1ED01ull /* the augmentation draws of a training example */

static const struct pelab_optdef options[] = {
    {"patch", PELAB_OPT_INT, "4", 1, 64, NULL, "patch side p in pixels: the image becomes (side/p)² patches"},
    {"image-side", PELAB_OPT_INT, "28", 1, PELAB_IMAGE_MAX_SIDE, NULL,
     "training resolution: images are resized (bilinear) to side × side, a multiple of --patch"},
    {"positions", PELAB_OPT_CHOICE, "grid", 0, 0, "grid|raster",
     "grid: (row, column) positions for 2-D encodings; raster: 1-D positions in raster order"},
    PELAB_OPT_ROW_DATA_DIR,
    {"data-seed", PELAB_OPT_INT, "0", 0, 9007199254740991.0, NULL,
     "mixed into the order of training images: another order of the same data"},
    {"aug-scale", PELAB_OPT_STR, "off", 0, 0, NULL,
     "LO,HI: train on random resized crops whose area is a fraction in [LO, HI] of the image's "
     "(torchvision's RandomResizedCrop; its default 0.08,1); off: whole images"},
    {"aug-ratio", PELAB_OPT_STR, "0.75,1.3333333333333333", 0, 0, NULL,
     "LO,HI: the crops' width/height ratios (uniform on a log scale), with --aug-scale"},
    {"aug-flip", PELAB_OPT_SWITCH, "off", 0, 0, NULL, "mirror half the training images left to right"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

static const char *const class_names[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                          "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

struct image_state {
    struct pelab_images split[3]; /* train, val, test (read on first use) */
    char data_dir[PATH_MAX];
    int train_side;               /* --image-side */
    int side, patch, grid, raster;/* side and grid: of the current batches (set_side) */
    uint64_t data_seed;
    int crop, flip;               /* training augmentation: --aug-scale not off, --aug-flip */
    double scale[2], ratio[2];
    pelab_real *scratch;          /* 2·rows·cols + side² (pelab_image_tokens; augmentation) */
    pelab_real *patches;          /* (G², p²) one image's */
    int32_t *pos;                 /* (G², 2) */
};

static int image_io(const struct pelab_opts *opts, struct pelab_model_io *io) {
    int rc = pelab_opts_check(opts, options);
    if (rc) return rc;
    const int p = (int)pelab_opt_int(opts, options, "patch"), side = (int)pelab_opt_int(opts, options, "image-side");
    if ((rc = pelab_image_check_side(side, p))) return rc;
    const int raster = pelab_opt_choice(opts, options, "positions") == 1;
    io->input_dim = p * p;
    io->positions = (struct pelab_pe_layout){raster ? 1 : 2, 1, side / p};
    return PELAB_OK;
}

static void image_free(struct pelab_task *t) {
    struct image_state *s = t->state;
    if (!s) return;
    for (int i = 0; i < 3; i++) pelab_images_free(&s->split[i]);
    free(s->scratch);
    free(s->patches);
    free(s->pos);
    free(s);
    t->state = NULL;
}

/* One image's buffers at s->side: scratch 2·rows·cols + side² (pelab_image_tokens, augmented), patches, pos. */
static int buffers(struct image_state *s) {
    const struct pelab_images *im = &s->split[0];
    const long g2 = (long)s->grid * s->grid;
    free(s->scratch), free(s->patches), free(s->pos);
    s->scratch = malloc(sizeof(pelab_real) * (size_t)((long)s->side * s->side + 2L * im->rows * im->cols));
    s->patches = malloc(sizeof(pelab_real) * (size_t)(g2 * s->patch * s->patch));
    s->pos = malloc(sizeof(int32_t) * (size_t)(g2 * 2));
    if (!s->scratch || !s->patches || !s->pos)
        return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for images of side %d", s->side);
    return PELAB_OK;
}

static int image_set_side(struct pelab_task *t, int side, int *train_side, int *patch) {
    struct image_state *s = t->state;
    *train_side = s->train_side, *patch = s->patch;
    if (!side) side = s->train_side;
    int rc = pelab_image_check_side(side, s->patch);
    if (rc) return rc;
    s->side = side;
    s->grid = side / s->patch;
    if ((rc = buffers(s))) return rc;
    t->seq_len = 1 + s->grid * s->grid;
    return PELAB_OK;
}

/* "LO,HI" of option `name` into r: 0 < LO <= HI (<= 1 for fractions). */
static int read_range(const struct pelab_opts *opts, const char *name, int fraction, double r[2]) {
    const char *v = pelab_opt_str(opts, options, name);
    int used = 0;
    if (sscanf(v, "%lf,%lf%n", &r[0], &r[1], &used) != 2 || v[used] || !(r[0] > 0) || !(r[1] >= r[0]) ||
        !isfinite(r[1]) || (fraction && r[1] > 1))
        return pelab_fail(PELAB_ERR_USAGE, "--%s '%s': give LO,HI with 0 < LO <= HI%s (e.g. %s)", name, v,
                          fraction ? " <= 1" : "", fraction ? "0.08,1" : "0.75,1.333");
    return PELAB_OK;
}

static int image_init(struct pelab_task *t, const struct pelab_opts *opts) {
    int rc = image_io(opts, &t->io);
    if (rc) return rc;
    struct image_state *s = calloc(1, sizeof *s);
    if (!s) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory");
    t->state = s;
    s->patch = (int)pelab_opt_int(opts, options, "patch");
    s->side = s->train_side = (int)pelab_opt_int(opts, options, "image-side");
    s->grid = s->side / s->patch;
    s->raster = t->io.positions.dims == 1;
    s->data_seed = (uint64_t)pelab_opt_real(opts, options, "data-seed");
    s->crop = strcmp(pelab_opt_str(opts, options, "aug-scale"), "off") != 0;
    s->flip = pelab_opt_switch(opts, options, "aug-flip");
    if ((s->crop && (rc = read_range(opts, "aug-scale", 1, s->scale))) || (rc = read_range(opts, "aug-ratio", 0, s->ratio)) ||
        (!s->crop && strcmp(pelab_opt_str(opts, options, "aug-ratio"), pelab_optdef_find(options, "aug-ratio")->def) != 0 &&
         (rc = pelab_fail(PELAB_ERR_USAGE, "--aug-ratio shapes the crops of --aug-scale, which is off")))) {
        image_free(t);
        return rc;
    }
    snprintf(s->data_dir, sizeof s->data_dir, "%s", pelab_data_dir(pelab_opt_str(opts, options, "data-dir")));
    /* train and val (one file); the test file on its first use (image_open_split) */
    static const int splits[2] = {PELAB_DOC_TRAIN, PELAB_DOC_VAL};
    for (int i = 0; i < 2 && !rc; i++) rc = pelab_images_load(s->data_dir, "fashion-mnist", splits[i], &s->split[i]);
    if (!rc && s->split[0].classes > (int)(sizeof class_names / sizeof *class_names))
        rc = pelab_fail(PELAB_ERR_RUNTIME, "fashion-mnist: %d classes, not 10", s->split[0].classes);
    if (!rc) rc = buffers(s);
    if (rc) {
        image_free(t);
        return rc;
    }
    t->vocab = s->split[0].classes;
    t->seq_len = 1 + s->grid * s->grid;
    t->pad = t->vocab; /* never a target: the tokens' placeholder */
    t->lm = 0;
    return PELAB_OK;
}

static int image_open_split(const struct pelab_task *t, enum pelab_split split) {
    struct image_state *s = t->state;
    if (split != PELAB_SPLIT_TEST || s->split[PELAB_SPLIT_TEST].pixels) return PELAB_OK;
    return pelab_images_load(s->data_dir, "fashion-mnist", PELAB_DOC_TEST, &s->split[PELAB_SPLIT_TEST]);
}

static uint64_t image_split_size(const struct pelab_task *t, enum pelab_split split) {
    const struct image_state *s = t->state;
    return split <= PELAB_SPLIT_TEST ? (uint64_t)s->split[split].n : 0;
}

static uint64_t gcd(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t r = a % b;
        a = b, b = r;
    }
    return a;
}

/* Index in the split of training example j (the epoch's permutation, see the top). */
static uint64_t train_index(const struct image_state *s, uint64_t j, uint64_t n) {
    const uint64_t e = j / n, h = pelab_hash64(s->data_seed * 0x9e3779b97f4a7c15ULL + e + 1);
    uint64_t a = 1 + h % (n - 1 ? n - 1 : 1);
    while (gcd(a, n) != 1) a++;
    return (a * (j % n) + (h >> 32) % n) % n;
}

static double uniform(void *rng) { return pelab_rng_uniform(rng); }

/* Training example j's image, augmented (the crop and the flip drawn from j alone: alike in any
 * batch, thread, MPI share or resumed run), as patches into s->patches. */
static void augmented(struct image_state *s, const struct pelab_images *im, uint64_t idx, uint64_t j) {
    struct pelab_rng rng;
    pelab_rng_seed(&rng, pelab_hash64(AUG_SALT ^ pelab_hash64(s->data_seed ^ pelab_hash64(j))));
    const int rows = im->rows, cols = im->cols;
    struct pelab_crop box = {0, 0, rows, cols};
    if (s->crop) pelab_image_crop_box(&box, rows, cols, s->scale, s->ratio, uniform, &rng);
    const int flip = s->flip && uniform(&rng) < 0.5;
    pelab_image_tokens_crop(s->patches, s->pos, im->pixels + idx * (uint64_t)rows * cols, rows, cols, s->side,
                            s->patch, im->mean, im->std, &box, flip, s->scratch);
}

static void image_fill(const struct pelab_task *t, enum pelab_split split, uint64_t first, struct pelab_batch *b) {
    struct image_state *s = t->state;
    const struct pelab_images *im = &s->split[split];
    PELAB_ASSERT(im->n > 0); /* opened: pelab_task_open_split */
    const int T = b->T, G = s->grid, P = s->patch * s->patch, n_pos = t->io.positions.dims;
    PELAB_ASSERT(T == t->seq_len && b->inputs != NULL); /* no padding: attention sees every token */
    const uint64_t n = (uint64_t)im->n;
    for (int i = 0; i < b->B; i++) {
        const uint64_t j = first + (uint64_t)i;
        const uint64_t idx = split == PELAB_SPLIT_TRAIN ? train_index(s, j, n) : j % n;
        if (split == PELAB_SPLIT_TRAIN && t->augment && (s->crop || s->flip))
            augmented(s, im, idx, j);
        else
            pelab_image_tokens(s->patches, s->pos, im->pixels + idx * (uint64_t)im->rows * im->cols, im->rows,
                               im->cols, s->side, s->patch, im->mean, im->std, s->scratch);
        int32_t *tok = b->tokens + (long)i * T, *tgt = b->targets + (long)i * T, *pos = b->pos + (long)i * T * n_pos;
        pelab_real *in = b->inputs + (long)i * T * P;
        for (int k = 0; k < T; k++) tok[k] = t->pad, tgt[k] = -1;
        tgt[0] = im->labels[idx];
        memset(in, 0, sizeof *in * (size_t)P); /* the class token's row, never read */
        memset(pos, 0, sizeof *pos * (size_t)n_pos);
        for (int k = 0; k < G * G; k++) {
            memcpy(in + (long)(k + 1) * P, s->patches + (long)k * P, sizeof *in * (size_t)P);
            const int r = s->pos[2 * k], c = s->pos[2 * k + 1];
            if (s->raster) pos[k + 1] = 1 + r * G + c;
            else pos[2 * (k + 1)] = r + 1, pos[2 * (k + 1) + 1] = c + 1;
        }
    }
}

/* A class's name; "image" for the tokens' placeholder (t->pad), which sample prints after the
 * image's index. */
static const char *image_token_text(const struct pelab_task *t, int32_t token) {
    if (token == t->pad) return "image";
    return token >= 0 && token < 10 ? class_names[token] : "";
}

/* A run's images may move: eval and sample take --data-dir anew. */
static const struct pelab_optdef eval_options[] = {
    PELAB_OPT_ROW_DATA_DIR_EVAL,
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

const struct pelab_task_ops pelab_task_image = {
    .name = "image",
    .summary = "Fashion-MNIST classification by a vision Transformer: p×p patches with 2-D "
               "positions, a class token, bidirectional attention; top-1 accuracy",
    .options = options,
    .eval_options = eval_options,
    .init = image_init,
    .free = image_free,
    .split_size = image_split_size,
    .fill = image_fill,
    .token_text = image_token_text,
    .model_io = image_io,
    .set_side = image_set_side,
    .open_split = image_open_split,
    .sweep = PELAB_TASK_SWEEP_RESOLUTIONS,
};
