/* Drives one processor directly, without a service (testcomp.h): config from a YAML snippet, a
 * recording consumer as c->next, an upstream that counts its done calls, batches from OTLP JSON
 * (payload.h). Used by the resource, redaction and tracelink tests. */
#ifndef PC_PROC_DRIVER_H
#define PC_PROC_DRIVER_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "payload.h"
#include "pdata/pdata.h"
#include "sdk/component.h"
#include "testcomp.h"

typedef struct driver {
    pc_component c;
    pc_node *root;
    tc_rec rec; /* what the processor passed on */
    tc_up up;   /* the done calls of what was consumed */
    int down;
} driver;

/* A configured and created processor on the default loop, or NULL with the error in err. */
static inline driver *driver_new(const pc_component_type *t, const char *yaml, pc_error *err)
{
    driver *d = calloc(1, sizeof *d);
    tc_rec_init(&d->rec);
    if (tc_init(&d->c, &d->root, t, "processors", yaml, uv_default_loop(), &d->rec.base, err)) {
        free(d);
        return NULL;
    }
    return d;
}

/* The same for a config the test knows is good: a refused one ends the test. */
static inline driver *driver_make(const pc_component_type *t, const char *yaml)
{
    pc_error err = {0};
    driver *d = driver_new(t, yaml, &err);
    if (!d) {
        fprintf(stderr, "config: %s\n", err.msg);
        exit(1);
    }
    return d;
}

static inline void driver_down(pc_component *c)
{
    ((driver *)c)->down++;
}

static inline void driver_free(driver *d)
{
    if (!d) return;
    tc_shutdown(&d->c);
    tc_fini(&d->c, d->root);
    tc_rec_clear(&d->rec);
    free(d);
}

/* Consume b (one reference) and run the loop; the batch the processor passed on (owned by d). */
static inline pc_batch *driver_run(driver *d, pc_batch *b)
{
    size_t before = d->rec.n;
    int calls = d->up.calls;
    d->c.type->consume(&d->c, b, tc_up_done, &d->up);
    uv_run(d->c.loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(d->up.calls, calls + 1);
    CHECK_EQ_INT(d->rec.n, before + 1);
    return d->rec.n > before ? d->rec.got[before] : NULL;
}

#endif
