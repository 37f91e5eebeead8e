/* pelab/rng.h — deterministic random numbers.
 *
 * A stream generator (xoshiro256**, seeded by splitmix64) for initialisation and data, and a
 * stateless counter hash for dropout masks: mask bits are a pure function of (seed, step, site,
 * index), so the backward pass recomputes them instead of storing them, and threads need no
 * shared state.
 */
#ifndef PELAB_RNG_H
#define PELAB_RNG_H

#include <stdint.h>

struct pelab_rng {
    uint64_t s[4];
};

void pelab_rng_seed(struct pelab_rng *rng, uint64_t seed);
uint64_t pelab_rng_u64(struct pelab_rng *rng);
/* Uniform in [0, 1) with 53 random bits. */
double pelab_rng_uniform(struct pelab_rng *rng);
/* Uniform integer in [0, n), unbiased. */
uint64_t pelab_rng_below(struct pelab_rng *rng, uint64_t n);
/* Standard normal (Box–Muller, no cached second value so the stream stays simple). */
double pelab_rng_normal(struct pelab_rng *rng);

/* splitmix64 finaliser: a good 64-bit mix, used to derive independent seeds. */
uint64_t pelab_hash64(uint64_t x);
/* Uniform in [0, 1) from a (key, index) pair: the dropout counter hash. */
double pelab_hash_uniform(uint64_t key, uint64_t index);

#endif
