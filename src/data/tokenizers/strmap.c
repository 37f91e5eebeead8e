/* String map: FNV-1a hashes, linear probing, grown at half full. */
#include <stdlib.h>
#include <string.h>
#include "data/tokenizers/strmap.h"
#include "pelab/status.h"
#include "pelab/tokenizer.h"

static uint64_t hash_of(const char *key, size_t len) { return pelab_fnv64(PELAB_FNV64_INIT, key, len); }

static int grow(struct pelab_strmap *m) {
    size_t cap = m->cap ? 2 * m->cap : 1024;
    struct pelab_strmap_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for a map of %zu strings", cap);
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].used) continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (slots[j].used) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return PELAB_OK;
}

static struct pelab_strmap_slot *find(const struct pelab_strmap *m, const char *key, size_t len,
                                      uint64_t h) {
    if (!m->cap) return NULL;
    for (size_t j = h & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
        struct pelab_strmap_slot *s = &m->slots[j];
        if (!s->used) return s;
        if (s->hash == h && s->len == len && memcmp(m->arena + s->off, key, len) == 0) return s;
    }
}

int pelab_strmap_put(struct pelab_strmap *m, const char *key, size_t len, int32_t value) {
    if (len > UINT32_MAX) return pelab_fail(PELAB_ERR_RUNTIME, "map key of %zu bytes is too long", len);
    if (2 * (m->count + 1) > m->cap) {
        int rc = grow(m);
        if (rc) return rc;
    }
    uint64_t h = hash_of(key, len);
    struct pelab_strmap_slot *s = find(m, key, len, h);
    if (s->used) {
        s->value = value;
        return PELAB_OK;
    }
    if (m->arena_len + len > m->arena_cap) {
        size_t cap = m->arena_cap ? m->arena_cap : 1 << 16;
        while (cap < m->arena_len + len) cap *= 2;
        char *a = realloc(m->arena, cap);
        if (!a) return pelab_fail(PELAB_ERR_RUNTIME, "out of memory for map keys (%zu bytes)", cap);
        m->arena = a;
        m->arena_cap = cap;
    }
    if (len) memcpy(m->arena + m->arena_len, key, len);
    *s = (struct pelab_strmap_slot){h, m->arena_len, (uint32_t)len, value, 1};
    m->arena_len += len;
    m->count++;
    return PELAB_OK;
}

int32_t pelab_strmap_get(const struct pelab_strmap *m, const char *key, size_t len) {
    const struct pelab_strmap_slot *s = find(m, key, len, hash_of(key, len));
    return s && s->used ? s->value : -1;
}

void pelab_strmap_clear(struct pelab_strmap *m) {
    if (m->slots) memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->count = 0;
    m->arena_len = 0;
}

void pelab_strmap_free(struct pelab_strmap *m) {
    free(m->slots);
    free(m->arena);
    memset(m, 0, sizeof *m);
}
