/* The KEY site: a value kb(h, s) that the encoding computes from the block's normed input x, one
 * per (token, head), added to every logit of key s (FoX's forget gate, posenc/pe_fox.c):
 *
 *   S[t,s] += kb[s]                  after the q·k product, in pelab_real (bf16 rounds none of it)
 *   dkb[s] = Σ_t dS[t,s]             the column sums of dS, rows in order
 *
 * Any bias a(t) + b(s) of such values is one: a query's own term a(t) cancels in its softmax. The
 * KV cache keeps kb beside the keys (PER_KEY), and in generation the encoding's forward gets each
 * sequence's kb at its last cached position (io->prev), which a running sum continues. */
#include "attn/sites.h"

enum { KB }; /* its buffer */

/* S (nq, nk) += kb of the block's keys, every row */
static void key_forward(const struct pelab_site_block *c) {
    const pelab_real *restrict kb = c->keys[KB] + c->j0;
    for (int r = 0; r < c->nq; r++) {
        pelab_real *restrict row = c->S + r * c->ld;
        for (int j = 0; j < c->nk; j++) row[j] += kb[j];
    }
}

/* dkb of the block's keys += the column sums of dS */
static void key_backward(const struct pelab_site_block *c) {
    pelab_real *restrict dkb = c->grad[KB] + ((long)c->b * c->s->H + c->h) * c->s->T + c->j0;
    for (int r = 0; r < c->nq; r++) {
        const pelab_real *restrict ds = c->S + r * c->ld;
        for (int j = 0; j < c->nk; j++) dkb[j] += ds[j];
    }
}

const struct pelab_pe_site_decl pelab_site_key = {
    .name = "KEY",
    .bit = PELAB_SITE_KEY,
    .summary = "adds kb(h, s), computed from the block's input, to every logit of key s",
    .reads = PELAB_PE_READS_X,
    .bufs = {{"kb", "the encoding's key values", "BHT", PELAB_PE_OUT | PELAB_PE_PER_KEY}},
    .forward = key_forward,
    .backward = key_backward,
};
