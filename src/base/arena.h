/* Bump allocator that owns everything of one batch: freed in one call. */
#ifndef PC_BASE_ARENA_H
#define PC_BASE_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

#include "base/budget.h"

typedef struct pc_arena pc_arena;

/* first_block 0: no block until the first allocation (a batch that may never allocate, as a
 * pass-through request's, holds none). */
pc_arena *pc_arena_new(size_t first_block);
void pc_arena_free(pc_arena *a);
/* 16-byte aligned; aborts on out-of-memory like the rest of profcol's allocators. */
void *pc_arena_alloc(pc_arena *a, size_t size);
void *pc_arena_calloc(pc_arena *a, size_t n, size_t size);
char *pc_arena_strndup(pc_arena *a, const char *s, size_t len);
void *pc_arena_memdup(pc_arena *a, const void *p, size_t len);
/* Bytes handed out plus block overhead, for memory accounting. */
size_t pc_arena_size(const pc_arena *a);
/* n bytes its owner keeps beside the arena for as long (a malloc'd block it frees with it),
 * counted in pc_arena_size as if allocated here. */
void pc_arena_add_size(pc_arena *a, size_t n);
/* A protobuf-c allocator whose free() is a no-op: unpack allocates from the arena. With a
 * budget attached it answers NULL once the budget is refused, which makes unpack fail. */
ProtobufCAllocator *pc_arena_allocator(pc_arena *a);

/* Charge every later allocation to b (a decode's budget); NULL detaches, giving back what this
 * arena charged. Allocations through pc_arena_alloc still succeed past the limit: the decoder
 * checks pc_budget_ok() once per element. */
void pc_arena_set_budget(pc_arena *a, pc_budget *b);
pc_budget *pc_arena_budget(const pc_arena *a);
/* Memory that lives as long as the arena's decode but is malloc'd elsewhere (hash tables,
 * scratch arrays) is charged to the same budget: PC_OK, or the budget's refusal (PC_E2BIG,
 * PC_EAGAIN) once it is refused. */
int pc_arena_charge(pc_arena *a, size_t n);
void pc_arena_uncharge(pc_arena *a, size_t n);

#endif
