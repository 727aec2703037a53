/* Shared component state (sdk/shared.h). */
#include "sdk/shared.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct entry {
    struct entry *next;
    const pc_host *host;
    const pc_component_type *type;
    char *name;
    void *obj;
    void (*free_fn)(void *obj);
    int refs;
} entry;

/* The few shared objects alive (one per shared component id): a list is enough. */
static entry *entries;

void *pc_shared_acquire(const pc_component *c, void *(*make)(const pc_component *c),
                        void (*free_fn)(void *obj))
{
    const char *name = c->name ? c->name : c->id;
    entry *e = entries;
    while (e && !(e->host == c->host && e->type == c->type && !strcmp(e->name, name)))
        e = e->next;
    if (!e) {
        e = pc_xcalloc(1, sizeof *e);
        e->host = c->host;
        e->type = c->type;
        e->name = pc_xstrdup(name);
        e->obj = make(c);
        e->free_fn = free_fn;
        e->next = entries;
        entries = e;
    }
    e->refs++;
    return e->obj;
}

void pc_shared_release(void *obj)
{
    if (!obj) return;
    for (entry **p = &entries; *p; p = &(*p)->next) {
        entry *e = *p;
        if (e->obj != obj) continue;
        if (--e->refs) return;
        *p = e->next;
        e->free_fn(e->obj);
        free(e->name);
        free(e);
        return;
    }
}
