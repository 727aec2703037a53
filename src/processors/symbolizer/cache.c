/* The LRU of cache.h: an open-addressing index of the entries (tombstones on delete, rebuilt
 * when they pile up) and a doubly linked recency list. */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"

typedef struct entry {
    struct entry *prev, *next; /* prev: more recent */
    void *value;
    uint64_t hash;
    size_t len;
    unsigned char key[];
} entry;

#define TOMB ((entry *)1)

struct sym_lru {
    entry **slots;
    size_t n_slots, n, used, cap; /* used: live + tombstones */
    entry *head, *tail;           /* head: most recent */
    void (*free_value)(void *);
};

static void index_build(sym_lru *c, size_t n_slots)
{
    free(c->slots);
    c->slots = pc_xcalloc(n_slots, sizeof *c->slots);
    c->n_slots = n_slots;
    c->used = c->n;
    for (entry *e = c->head; e; e = e->next) {
        size_t i = e->hash & (n_slots - 1);
        while (c->slots[i])
            i = (i + 1) & (n_slots - 1);
        c->slots[i] = e;
    }
}

sym_lru *sym_lru_new(size_t cap, void (*free_value)(void *))
{
    sym_lru *c = pc_xcalloc(1, sizeof *c);
    c->cap = cap ? cap : 1;
    c->free_value = free_value;
    size_t n = 16;
    while (n < c->cap * 2)
        n *= 2;
    index_build(c, n);
    return c;
}

void sym_lru_free(sym_lru *c)
{
    if (!c) return;
    for (entry *e = c->head, *next; e; e = next) {
        next = e->next;
        if (c->free_value) c->free_value(e->value);
        free(e);
    }
    free(c->slots);
    free(c);
}

/* The slot holding key, or SIZE_MAX. */
static size_t find(const sym_lru *c, const void *key, size_t len, uint64_t h)
{
    for (size_t i = h & (c->n_slots - 1);; i = (i + 1) & (c->n_slots - 1)) {
        entry *e = c->slots[i];
        if (!e) return SIZE_MAX;
        if (e != TOMB && e->hash == h && e->len == len && memcmp(e->key, key, len) == 0) return i;
    }
}

static void unlink_entry(sym_lru *c, entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(sym_lru *c, entry *e)
{
    e->next = c->head;
    e->prev = NULL;
    if (c->head) c->head->prev = e;
    c->head = e;
    if (!c->tail) c->tail = e;
}

void *sym_lru_get(sym_lru *c, const void *key, size_t len)
{
    size_t i = find(c, key, len, pc_hash_mem(key, len));
    if (i == SIZE_MAX) return NULL;
    entry *e = c->slots[i];
    unlink_entry(c, e);
    push_front(c, e);
    return e->value;
}

static void remove_slot(sym_lru *c, size_t i)
{
    entry *e = c->slots[i];
    c->slots[i] = TOMB;
    unlink_entry(c, e);
    c->n--;
    if (c->free_value) c->free_value(e->value);
    free(e);
}

void sym_lru_put(sym_lru *c, const void *key, size_t len, void *value)
{
    uint64_t h = pc_hash_mem(key, len);
    size_t i = find(c, key, len, h);
    if (i != SIZE_MAX) remove_slot(c, i);
    if (c->n >= c->cap) remove_slot(c, find(c, c->tail->key, c->tail->len, c->tail->hash));
    if ((c->used + 1) * 4 > c->n_slots * 3) index_build(c, c->n_slots);
    entry *e = pc_xmalloc(sizeof *e + len);
    *e = (entry){.value = value, .hash = h, .len = len};
    memcpy(e->key, key, len);
    push_front(c, e);
    for (i = h & (c->n_slots - 1); c->slots[i] && c->slots[i] != TOMB;
         i = (i + 1) & (c->n_slots - 1))
        ;
    if (!c->slots[i]) c->used++;
    c->slots[i] = e;
    c->n++;
}

size_t sym_lru_size(const sym_lru *c)
{
    return c->n;
}
