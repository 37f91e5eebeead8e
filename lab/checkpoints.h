/* lab/checkpoints.h — the weights a run kept, in step order, for the analyses that follow a run
 * through its training (analyze probe, analyze seqpe --checkpoints). */
#ifndef PELAB_CLI_CHECKPOINTS_H
#define PELAB_CLI_CHECKPOINTS_H

#include "pelab/model.h"

/* The weight files of run directory `dir`: checkpoints/state-*.safetensors (their names sort by
 * step), then model.safetensors when the run finished. *files (malloc'd, free with
 * pelab_weight_files_free) and *n; PELAB_ERR_RUNTIME (message set) when there is none. */
int pelab_weight_files(const char *dir, char ***files, int *n);
void pelab_weight_files_free(char **files, int n);

/* The tensors of weight file `path` into m's parameters (float32 or float64 files), *step the
 * update they are from (its "step" metadata; −1 without). PELAB_OK, or an error naming the file
 * and the first tensor missing or of another size. */
int pelab_load_weights(struct pelab_model *m, const char *path, long *step);

#endif
