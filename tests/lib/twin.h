/* Writing the fixtures tests/ref/twin_check.py compares with the PyTorch twin (the format is
 * described at the top of tests/test_twin.c). */
#ifndef PELAB_TEST_TWIN_H
#define PELAB_TEST_TWIN_H

#include <stdint.h>
#include "pelab/posenc.h"

/* The fixtures' model: vocabulary, batch, length, training steps (D 32, 4 heads, 2 layers). */
#define TWIN_V 23
#define TWIN_B 3
#define TWIN_T 11
#define TWIN_STEPS 5
#define TWIN_GRID 4 /* 2-D cases: the training grid's side (their sequences reach G' = 5) */

/* Builds the case's model (options: key, value, ..., NULL, on top of the base shape; positions
 * laid out as `layout`, a 2-D one in a patch model on the grid TWIN_GRID; max_seq the training
 * length its encoding is told, at least TWIN_T), runs one forward and backward and 5 training
 * steps (with the encoding's own loss terms where its options turn them on, as training adds
 * them), and writes DIR/NAME/model.safetensors and DIR/NAME/fixture.safetensors. CHECKs what
 * pelab can see by itself; 0, or 1 when the model could not be built or the directory made. */
int twin_write_case(const char *dir, const char *name, const char *const *opts,
                    const struct pelab_pe_layout *layout, int max_seq, uint64_t seed);

#endif
