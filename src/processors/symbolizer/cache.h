/* A bounded LRU map from a byte key to an owned value, for the symbolizer's two caches: resolved
 * (build id, address) pairs and open debug files. Not thread-safe: the symbolizer holds its lock
 * around every call. */
#ifndef PC_SYMBOLIZER_CACHE_H
#define PC_SYMBOLIZER_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sym_lru sym_lru;

/* cap entries at most (>= 1); free_value releases an evicted or replaced value (may be NULL). */
sym_lru *sym_lru_new(size_t cap, void (*free_value)(void *));
void sym_lru_free(sym_lru *c);
/* The value under key (now the most recent), or NULL. */
void *sym_lru_get(sym_lru *c, const void *key, size_t len);
/* Insert or replace; evicts the least recently used entry when full. */
void sym_lru_put(sym_lru *c, const void *key, size_t len, void *value);
size_t sym_lru_size(const sym_lru *c);

#endif
