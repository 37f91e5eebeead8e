/* test_twin — writes the fixtures that tests/ref/twin_check.py compares with the PyTorch twin.
 *
 *   build/tests/test_twin [DIR [NAME]]
 *
 * Its cases are the one list of encoding cases (lib/models.h): every registered encoding with its
 * defaults and each setting of its contract, on 1-D positions (causal) and, for an encoding that
 * serves them, (row, column) positions of a patch model (bidirectional); each encoding's defaults
 * once more at 6 heads of width 6 with an untied output layer (a head count no power of two:
 * ALiBi's second slope rule). NAME: one encoding's cases alone. For each case it builds a small
 * model through the public API and writes DIR/CASE/model.safetensors (initial weights, each
 * setting in metadata "pelab.config.<name>", as a run's model file has them) and
 * DIR/CASE/fixture.safetensors:
 *   tokens, targets, pos          (B,T) I32   one batch; positions shifted per row (t + 7b)
 *   logits (B,T,V), loss (1,)     F64         forward on that batch
 *   grad.<param>                  F64         gradients of that loss
 *   step{i}.tokens/targets/pos    (B,T) I32   the batches of 5 training steps, i = 0..4
 *   lrs, losses, grad_norms       (5,) F64    per step: schedule lr, loss, norm before clipping
 *   after5.<param>                F64         parameters after the 5 AdamW steps
 * (a patch model's: pos (B,T,2) and inputs (B,T,4) too), and, for a case whose encoding adds loss
 * terms of its own (SeqPE's regularisers, on unless its options switch them off), the terms
 * joining the loss and its gradients, with the positions each step drew:
 *   reg.delta_pos (P,1+C,n), reg.target (P,), reg.ood_pos (S,2m,n)   I32   the first draw
 *   step{i}.reg.*                                                          each step's draw
 *   loss_delta, loss_ood (1,), losses_delta, losses_ood (5,)         F64   L_delta and L_OOD
 * The training length is T = 11 and the positions reach 36 (t + 7b + 3i over the steps): an
 * encoding with a table of positions that would refuse them gets the reach its contract names
 * (40); each case takes its contract's smaller sizes (contract.small: SeqPE's encoder blocks and
 * draws, FIRE's width). Without DIR it writes into a temporary directory and removes it. It asserts
 * only what it can see on its own (the settings recorded in the metadata are the ones the model
 * was built with, finite losses and gradients, the loss is the mean of the per-position losses);
 * agreement with the twin is twin_check.py's verdict. Built in double (PELAB_DOUBLE).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "lib/check.h"
#include "lib/models.h"
#include "lib/tmpdir.h"
#include "lib/twin.h"

#ifndef PELAB_DOUBLE
#error "test_twin is built with -DPELAB_DOUBLE: the fixtures hold pelab_real as F64"
#endif

/* The fixtures' directory and the number of cases written. */
struct twin_run {
    const char *dir;
    int n;
};

/* DIR/NAME of a case: its label with spaces as commas, no brackets, no slashes. */
static void write_case(struct pe_case *c, void *p) {
    struct twin_run *r = p;
    char name[200];
    int k = 0;
    for (const char *s = c->label; *s && k < (int)sizeof name - 1; s++)
        if (*s != '[' && *s != ']') name[k++] = *s == ' ' ? ',' : *s == '/' ? '_' : *s;
    name[k] = 0;
    pe_case_fit(c, TWIN_T, 40);
    pe_case_small(c);
    twin_write_case(r->dir, name, c->opts, &c->layout, TWIN_T, 1000 + (uint64_t)r->n++);
    if (c->layout.dims == 1 && !c->settings[0]) {
        pe_case_set(c, "heads", "6");
        pe_case_set(c, "d-model", "36");
        pe_case_set(c, "tied", "off");
        snprintf(name + k, sizeof name - k, ",6-heads,untied");
        twin_write_case(r->dir, name, c->opts, &c->layout, TWIN_T, 1000 + (uint64_t)r->n++);
    }
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : tmpdir_create("pelab-twin");
    if (!dir) return 1;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "test_twin: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    struct twin_run run = {dir, 0};
    const struct pe_walk all = {PE_TEXT | PE_IMAGE, 0, TWIN_GRID, argc > 2 ? argv[2] : NULL};
    CHECK(for_each_pe_case(&all, write_case, &run) > 0, "no case: %s is not a registered encoding",
          argc > 2 ? argv[2] : "the registry is empty");
    if (argc <= 1) tmpdir_remove();
    return check_report("test_twin_fixtures");
}
