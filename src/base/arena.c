/* Bump allocator: blocks grow geometrically, nothing is freed until the arena is. */
#include "base/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct block {
    struct block *prev;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} block;

struct pc_arena {
    block *head;
    size_t total;
    ProtobufCAllocator pb;
    pc_budget *budget;
    size_t charged; /* what this arena charged to budget */
};

/* The head of an arena made without a first block, until its first allocation: it has no room,
 * so that allocation takes arena_grow's way. Only ever read. */
static block no_block;

static block *block_new(size_t size)
{
    block *b = pc_xmalloc(sizeof(block) + size);
    b->prev = NULL;
    b->size = size;
    b->used = 0;
    return b;
}

static inline void *arena_alloc(pc_arena *a, size_t size);

/* n bytes against the arena's budget (the caller checked there is one) */
static inline int charge(pc_arena *a, size_t n)
{
    a->charged += n;
    return pc_budget_charge(a->budget, n);
}

static void *pb_alloc(void *data, size_t size)
{
    pc_arena *a = data;
    void *p = arena_alloc(a, size);
    return pc_budget_ok(a->budget) ? p : NULL;
}

static void pb_free(void *data, void *p)
{
    (void)data;
    (void)p; /* freed with the arena */
}

pc_arena *pc_arena_new(size_t first_block)
{
    pc_mem_note_activity();
    pc_arena *a = pc_xcalloc(1, sizeof(*a));
    if (first_block) {
        a->head = block_new(first_block < 256 ? 256 : first_block);
        a->total = sizeof(block) + a->head->size;
    } else {
        a->head = &no_block;
    }
    a->pb.alloc = pb_alloc;
    a->pb.free = pb_free;
    a->pb.allocator_data = a;
    return a;
}

void pc_arena_free(pc_arena *a)
{
    if (!a) return;
    pc_arena_set_budget(a, NULL);
    for (block *b = a->head == &no_block ? NULL : a->head; b;) {
        block *prev = b->prev;
        free(b);
        b = prev;
    }
    free(a);
}

/* A new block for size bytes: out of line, so the common case below stays small enough to
 * inline into protobuf-c's allocator callback. */
static void *arena_grow(pc_arena *a, size_t size)
{
    block *b = a->head;
    if (b == &no_block) { /* the first allocation of an arena made without a block */
        size_t first = size < 256 ? 256 : size;
        a->head = block_new(first);
        a->total += sizeof(block) + first;
        a->head->used = size;
        return a->head->data;
    }
    /* Grow geometrically so a large decode needs few blocks; a huge object gets its own. */
    size_t next = b->size * 2;
    if (next > (64u << 20)) next = 64u << 20;
    if (next < size) next = size;
    block *nb = block_new(next);
    a->total += sizeof(block) + next;
    if (size > b->size * 2 && b->used < b->size / 2) {
        /* keep filling the current block: link the big one behind it */
        nb->prev = b->prev;
        b->prev = nb;
        nb->used = size;
        return nb->data;
    }
    nb->prev = b;
    a->head = nb;
    nb->used = size;
    return nb->data;
}

/* Inline in pb_alloc and pc_arena_alloc: a decode allocates about a thousand times per small
 * OTLP request (bench/README.md "Small requests (issue 27, third pass)"). */
static inline void *arena_alloc(pc_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    if (a->budget) charge(a, size);
    block *b = a->head;
    if (b->size - b->used < size) return arena_grow(a, size);
    void *p = b->data + b->used;
    b->used += size;
    return p;
}

void *pc_arena_alloc(pc_arena *a, size_t size)
{
    return arena_alloc(a, size);
}

void *pc_arena_calloc(pc_arena *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) abort();
    void *p = pc_arena_alloc(a, n * size);
    memset(p, 0, n * size);
    return p;
}

char *pc_arena_strndup(pc_arena *a, const char *s, size_t len)
{
    char *p = pc_arena_alloc(a, len + 1);
    memcpy(p, s, len);
    p[len] = 0;
    return p;
}

void *pc_arena_memdup(pc_arena *a, const void *p, size_t len)
{
    void *d = pc_arena_alloc(a, len);
    if (len) memcpy(d, p, len);
    return d;
}

size_t pc_arena_size(const pc_arena *a)
{
    return a->total;
}

void pc_arena_add_size(pc_arena *a, size_t n)
{
    a->total += n;
}

ProtobufCAllocator *pc_arena_allocator(pc_arena *a)
{
    return &a->pb;
}

void pc_arena_set_budget(pc_arena *a, pc_budget *b)
{
    if (a->budget) pc_budget_uncharge(a->budget, a->charged);
    a->charged = 0;
    a->budget = b;
}

pc_budget *pc_arena_budget(const pc_arena *a)
{
    return a->budget;
}

int pc_arena_charge(pc_arena *a, size_t n)
{
    return a->budget ? charge(a, n) : PC_OK;
}

void pc_arena_uncharge(pc_arena *a, size_t n)
{
    if (!a->budget) return;
    if (n > a->charged) n = a->charged;
    a->charged -= n;
    pc_budget_uncharge(a->budget, n);
}
