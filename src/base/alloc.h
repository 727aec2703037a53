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

#endif
