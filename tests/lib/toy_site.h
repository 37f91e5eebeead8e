/* tests/lib/toy_site.h — a site that src/ does not declare, and an encoding that acts there,
 * registered from a test: what adding a site costs (docs/POSENC.md, "Adding a site").
 *
 * SALIENCE: each key s has a salience c_s and each query t an appetite a_t for salient keys, both
 * read from the tokens (the block's normed input x), per head; the logits get their product:
 *
 *   S[t,s] += a_t · c_s          a (B,H,T) per query, c (B,H,T) per key (a KV cache keeps it)
 *   da_t = Σ_s dS[t,s] c_s;      dc_s = Σ_t dS[t,s] a_t
 *
 * The encoding `salience` forms them as a_t = w_a,h · x_t and c_s = w_c,h · x_s, w_a and w_c
 * (H, D) per layer. A rank-one content term: it reads no position (relative), and is a toy. */
#ifndef PELAB_TEST_TOY_SITE_H
#define PELAB_TEST_TOY_SITE_H

#include "posenc/site.h"

#define TOY_SITE_BIT (1u << 8) /* above the built-in sites' bits */

enum { TOY_A, TOY_C }; /* the site's buffers, as declared */

extern const struct pelab_pe_site_decl toy_site_salience;
extern const struct pelab_posenc_ops toy_pe_salience;

/* Registers `salience` (once; later calls do nothing): PELAB_OK or the registry's error. */
int toy_site_register(void);

#endif
