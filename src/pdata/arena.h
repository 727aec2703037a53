/* Bump allocator that owns everything of one batch: freed in one call. */
#ifndef PC_ARENA_H
#define PC_ARENA_H

#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

typedef struct pc_arena pc_arena;

pc_arena *pc_arena_new(size_t first_block);
void pc_arena_free(pc_arena *a);
/* 16-byte aligned; aborts on out-of-memory like the rest of profcol's allocators. */
void *pc_arena_alloc(pc_arena *a, size_t size);
void *pc_arena_calloc(pc_arena *a, size_t n, size_t size);
char *pc_arena_strndup(pc_arena *a, const char *s, size_t len);
void *pc_arena_memdup(pc_arena *a, const void *p, size_t len);
/* Bytes handed out plus block overhead, for memory accounting. */
size_t pc_arena_size(const pc_arena *a);
/* A protobuf-c allocator whose free() is a no-op: unpack allocates from the arena. */
ProtobufCAllocator *pc_arena_allocator(pc_arena *a);

#endif
