/* State shared by every instance of one component id, as the Collector's sharedcomponent: a
 * processor listed in several pipelines is one instance per pipeline, yet tracelink's span index
 * (filled in a traces pipeline, read in a profiles pipeline) must be one. Keyed by the host, the
 * type and the id in the config (c->name), never by display strings. Loop thread only. */
#ifndef PC_SDK_SHARED_H
#define PC_SDK_SHARED_H

#include "sdk/component.h"

/* The object of c's id in c's host: made by make(c) for the first instance, the same pointer for
 * the others. Each acquire is paired with one release. */
void *pc_shared_acquire(const pc_component *c, void *(*make)(const pc_component *c),
                        void (*free_fn)(void *obj));
/* The last release frees the object with its free_fn. NULL is ignored. */
void pc_shared_release(void *obj);

#endif
