/* Fuzz target: the checkpoint reader. The bytes, their checksums made to match
 * (fuzz_fix_checksums: the safetensors target fuzzes the checksums themselves), are read as a
 * safetensors file and, when that passes, as a state of the tiny run FUZZ_TINY_RUN
 * (pelab_state_from_file): format and version, step, counters, the run's settings, every
 * tensor's name, shape, dtype and values. */
#include "fuzz.h"
#include "pelab/safetensors.h"
#include "train/run.h"

#define NAME "fuzz/checkpoints/state-0000000002.safetensors"

/* The trainer of the tiny run (model, task, settings), built once. */
static struct pelab_trainer *tiny(void) {
    static struct pelab_trainer *tr;
    if (tr) return tr;
    tr = calloc(1, sizeof *tr);
    char opts[] = FUZZ_TINY_RUN;
    for (char *k = strtok(opts, " "); k; k = strtok(NULL, " ")) {
        char *v = strtok(NULL, " ");
        if (!v || pelab_opts_set(&tr->opts, k + 2, v)) abort();
    }
    if (pelab_train_config_read(&tr->opts, &tr->c) ||
        pelab_task_init(&tr->task, "indirect", &tr->opts) ||
        pelab_model_init(&tr->model, &tr->opts, tr->task.vocab, tr->task.seq_len)) {
        fprintf(stderr, "fuzz_state: %s\n", pelab_last_error());
        abort();
    }
    pelab_settings_build(&tr->settings, &tr->opts, &tr->model, &tr->task);
    tr->lock_fd = -1;
    return tr;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct pelab_trainer *tr = tiny();
    uint8_t *fixed = malloc(size ? size : 1);
    if (!fixed) return 0;
    memcpy(fixed, data, size);
    fuzz_fix_checksums(fixed, size);
    struct pelab_st_file f;
    int rc = pelab_safetensors_parse(NAME, fixed, size, &f);
    free(fixed);
    if (rc) {
        fuzz_check_refusal(rc, NAME ": ");
        return 0;
    }
    rc = pelab_state_from_file(tr, &f, NAME, 2);
    if (rc) fuzz_check_refusal(rc, NAME ": ");
    pelab_st_file_free(&f);
    return 0;
}
