/* src/data/tokenizers/strmap.h — a map from byte strings to int32 values: open addressing with
 * linear probing, keys copied into one arena. Enough for vocabularies and BPE ranks. */
#ifndef PELAB_DATA_STRMAP_H
#define PELAB_DATA_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct pelab_strmap {
    struct pelab_strmap_slot {
        uint64_t hash;
        size_t off;   /* key in arena */
        uint32_t len;
        int32_t value;
        int used;
    } *slots;
    size_t cap, count; /* cap a power of two */
    char *arena;
    size_t arena_len, arena_cap;
};

/* Sets key = value (replacing). PELAB_ERR_RUNTIME when out of memory. */
int pelab_strmap_put(struct pelab_strmap *m, const char *key, size_t len, int32_t value);
/* The value of key, or -1 when absent. */
int32_t pelab_strmap_get(const struct pelab_strmap *m, const char *key, size_t len);
void pelab_strmap_clear(struct pelab_strmap *m);
void pelab_strmap_free(struct pelab_strmap *m);

#endif
