/* The malloc family that aborts on exhaustion: callers never see NULL. A server that cannot get
 * memory for its own bookkeeping cannot answer anyone correctly; what a request may cost is
 * bounded before it is allocated (base/budget.h), so exhaustion here means the machine is gone. */
#ifndef PC_BASE_ALLOC_H
#define PC_BASE_ALLOC_H

#include <stddef.h>

void *pc_xmalloc(size_t n);
void *pc_xcalloc(size_t n, size_t size);
void *pc_xrealloc(void *p, size_t n);
char *pc_xstrdup(const char *s);

/* No fresh pages per request (bench/README.md, "Memory"): glibc would serve every block above
 * 128 KiB-32 MiB (a request's arena, an inflated body) with a fresh mmap and unmap it when freed,
 * so each request page-faulted its memory in anew (20 % of a pass-through relay's CPU). After
 * pc_mem_tune, blocks up to PC_MEM_REUSE_MAX come from malloc's one heap and, freed, stay there
 * for the next request, up to PC_MEM_KEEP_MAX free at its top; pc_mem_idle, called
 * once a second, gives every free page back to the system once nothing was allocated for a
 * whole interval, so an idle profcol stays small. */
#define PC_MEM_REUSE_MAX (32u << 20)
#define PC_MEM_KEEP_MAX  (64u << 20)
void pc_mem_tune(void);
/* Counts arenas made (base/arena.c): activity, for pc_mem_idle. */
void pc_mem_note_activity(void);
/* 1 when it gave memory back (idle since the last call, and not already trimmed), else 0. */
int pc_mem_idle(void);

#endif
