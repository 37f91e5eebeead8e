/* pelab/kv_cache.h — generation with a key/value cache: the model's forward pass over new tokens
 * of one sequence, attending to the keys and values that earlier passes kept.
 *
 * Each layer keeps its keys after the positional transform (RoPE, PoPE and xPos rotate or scale
 * them once) and its values, per head; a BIAS encoding (ALiBi, T5, FIRE) computes the new
 * queries' rows of bias against the cached positions; an EMBED encoding (SeqPE, the learned and
 * sinusoidal tables) embeds the new positions alone. The logits of each new token equal those of
 * the model's forward pass over the whole sequence up to it (to rounding: tests/test_kv_cache.c),
 * at a cost per token linear in the context instead of quadratic.
 *
 * An encoding whose evaluation-time option makes every position depend on the pass's length
 * (dynamic NTK past L_train, the learned table's interpolation past its end) cannot be cached:
 * pelab_kv_cache_check says why, and callers recompute the whole context instead.
 */
#ifndef PELAB_KV_CACHE_H
#define PELAB_KV_CACHE_H

#include <stdint.h>
#include "pelab/model.h"
#include "pelab/real.h"

struct pelab_kv_cache;

/* PELAB_OK when model m can generate with a cache up to `len` positions; else PELAB_ERR_USAGE
 * with the reason (pelab_last_error). */
int pelab_kv_cache_check(const struct pelab_model *m, long len);

/* A cache of `capacity` positions of one sequence for model m (which must outlive it). Memory:
 * N·H·capacity·(qk_dim + d) reals, plus scratch. PELAB_ERR_USAGE when pelab_kv_cache_check
 * refuses the capacity, PELAB_ERR_RUNTIME when out of memory. */
int pelab_kv_cache_new(struct pelab_kv_cache **out, struct pelab_model *m, int capacity);
/* The same with the keys and values kept in bf16 (rounded to nearest even; scores, softmax and
 * sums stay float32): half the memory, and half the bytes a generated token reads from the
 * cache, for logits that differ from a float32 cache's by the rounding of k and v. */
int pelab_kv_cache_new_bf16(struct pelab_kv_cache **out, struct pelab_model *m, int capacity);
void pelab_kv_cache_free(struct pelab_kv_cache *c);
/* Forgets the sequence (length 0); the buffers stay. */
void pelab_kv_cache_clear(struct pelab_kv_cache *c);
/* Tokens cached so far. */
int pelab_kv_cache_length(const struct pelab_kv_cache *c);

/* Appends n tokens (n,) at positions pos (n,), each attending to every cached token and to the
 * new ones before it (causal by order, as the model's forward). logits (n,V): every new token's
 * logits, or NULL for only the last one's (pelab_kv_cache_logits). PELAB_ERR_USAGE when the
 * cache would overflow or the encoding refuses a position (the cache is then unchanged),
 * PELAB_ERR_RUNTIME when out of memory. */
int pelab_kv_cache_append(struct pelab_kv_cache *c, const int32_t *tokens, const int32_t *pos,
                          int n, pelab_real *logits);
/* The last appended token's logits (V,). */
const pelab_real *pelab_kv_cache_logits(const struct pelab_kv_cache *c);

/* `count` sequences of model m generated together: each its own cache of `capacity` positions
 * (bf16 keys and values when bf16 is set), stepped one token each through one pass over the
 * weights, so that the weights' bytes, the bound of decoding, are read once for all of them.
 * PELAB_ERR_USAGE as pelab_kv_cache_new, PELAB_ERR_RUNTIME when out of memory. */
struct pelab_kv_batch;
/* The sequences pelab's callers (pelab sample, the QA sweep) decode at once, at most: enough to
 * share a step's read of the weights, few enough that the bf16 weights' products (fewer than 16
 * rows) still serve them. */
enum { PELAB_KV_BATCH_MAX = 8 };
/* How many caches of `capacity` positions for model m (bf16 keys and values when bf16 is set)
 * fit in PELAB_KV_BATCH_BYTES together: between 1 and `most`. Callers that decode many sequences
 * size their batches by it, so that batching never needs much more memory than one cache. */
#define PELAB_KV_BATCH_BYTES (1L << 30)
int pelab_kv_batch_fit(const struct pelab_model *m, int capacity, int bf16, int most);
int pelab_kv_batch_new(struct pelab_kv_batch **out, struct pelab_model *m, int count, int capacity,
                       int bf16);
void pelab_kv_batch_free(struct pelab_kv_batch *b);
/* Sequence i's cache (0 ≤ i < count), owned by the batch: append its prompt, clear it, read its
 * length and logits as any cache's. */
struct pelab_kv_cache *pelab_kv_batch_sequence(struct pelab_kv_batch *b, int i);
/* Appends tokens[i] at position pos[i] to sequence i, for every i with tokens[i] >= 0 (the others
 * sit the step out, unchanged), in one pass: each sequence's logits (pelab_kv_cache_logits) are
 * then those of pelab_kv_cache_append with its token alone, to rounding (the products sum rows
 * together). PELAB_ERR_USAGE when a sequence's cache is full or the encoding refuses a position
 * (every cache then unchanged). */
int pelab_kv_batch_step(struct pelab_kv_batch *b, const int32_t *tokens, const int32_t *pos);

#endif
