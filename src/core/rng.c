/* xoshiro256** seeded by splitmix64; a stateless counter hash for dropout. */
#include <math.h>
#include "pelab/rng.h"

#define PELAB_PI 3.14159265358979323846

uint64_t pelab_hash64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void pelab_rng_seed(struct pelab_rng *rng, uint64_t seed) {
    for (int i = 0; i < 4; i++) {
        seed = pelab_hash64(seed);
        rng->s[i] = seed;
    }
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t pelab_rng_u64(struct pelab_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double pelab_rng_uniform(struct pelab_rng *rng) {
    return (double)(pelab_rng_u64(rng) >> 11) * 0x1.0p-53;
}

uint64_t pelab_rng_below(struct pelab_rng *rng, uint64_t n) {
    /* Rejection sampling: draws in the incomplete last block of 2^64 mod n are redrawn. */
    uint64_t limit = -n % n; /* 2^64 mod n */
    uint64_t x;
    do x = pelab_rng_u64(rng);
    while (x < limit);
    return x % n;
}

double pelab_rng_normal(struct pelab_rng *rng) {
    double u1 = 1.0 - pelab_rng_uniform(rng); /* (0, 1] so log is finite */
    double u2 = pelab_rng_uniform(rng);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * PELAB_PI * u2);
}

double pelab_hash_uniform(uint64_t key, uint64_t index) {
    return (double)(pelab_hash64(key ^ pelab_hash64(index)) >> 11) * 0x1.0p-53;
}
