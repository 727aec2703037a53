/* Drives one processor directly, without a service: config from a YAML snippet, a recording
 * consumer as c->next, batches from OTLP JSON. Used by the resource, redaction and tracelink
 * tests. */
#ifndef PC_PROC_DRIVER_H
#define PC_PROC_DRIVER_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pdata/pdata.h"
#include "pipeline/component.h"

typedef struct rec_consumer {
    pc_consumer base;
    pc_batch *got[16];
    size_t n;
} rec_consumer;

static void rec_consume(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg)
{
    rec_consumer *r = (rec_consumer *)self;
    if (r->n < 16)
        r->got[r->n++] = b;
    else
        pc_batch_unref(b);
    done(arg, PC_OK, NULL);
}

typedef struct driver {
    pc_component c;
    pc_node *root;
    rec_consumer rec;
    int done_calls;
    pc_status last;
    int down;
} driver;

static void driver_done(void *arg, pc_status st, const char *msg)
{
    driver *d = arg;
    (void)msg;
    d->done_calls++;
    d->last = st;
}

/* A configured and created processor, or NULL with the error message in err. */
static driver *driver_new(const pc_component_type *t, const char *yaml, pc_cfg_err *err)
{
    driver *d = calloc(1, sizeof *d);
    char path[128];
    snprintf(path, sizeof path, "processors::%s", t->name);
    d->c.type = t;
    d->c.id = strdup(t->name);
    d->c.loop = uv_default_loop();
    d->c.cfg = calloc(1, t->cfg_size ? t->cfg_size : 1);
    d->rec.base.consume = rec_consume;
    d->c.next = &d->rec.base;
    memset(err, 0, sizeof *err);
    if (yaml && *yaml) {
        d->root = pc_config_parse(yaml, strlen(yaml), "test.yaml", err);
        if (!d->root) goto fail;
    }
    if (pc_cfgtable_apply(t->cfg, d->c.cfg, d->root, path, err)) goto fail;
    if (t->validate && t->validate(d->c.cfg, d->root, path, err)) goto fail;
    if (t->create && t->create(&d->c, err)) goto fail;
    return d;
fail:
    pc_cfgtable_free(t->cfg, d->c.cfg);
    free(d->c.cfg);
    free(d->c.id);
    pc_node_free(d->root);
    free(d);
    return NULL;
}

static void driver_down(pc_component *c)
{
    ((driver *)c)->down++;
}

static void driver_free(driver *d)
{
    if (!d) return;
    if (d->c.type->shutdown) {
        d->c.type->shutdown(&d->c, driver_down);
        uv_run(d->c.loop, UV_RUN_DEFAULT);
        CHECK_EQ_INT(d->down, 1);
    }
    if (d->c.type->destroy) d->c.type->destroy(&d->c);
    for (size_t i = 0; i < d->rec.n; i++)
        pc_batch_unref(d->rec.got[i]);
    pc_cfgtable_free(d->c.type->cfg, d->c.cfg);
    free(d->c.cfg);
    free(d->c.id);
    pc_node_free(d->root);
    free(d);
}

/* Consume b (one reference) and run the loop; the batch the processor passed on (owned by d). */
static pc_batch *driver_run(driver *d, pc_batch *b)
{
    size_t before = d->rec.n;
    int calls = d->done_calls;
    d->c.type->consume(&d->c, b, driver_done, d);
    uv_run(d->c.loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(d->done_calls, calls + 1);
    CHECK_EQ_INT(d->rec.n, before + 1);
    return d->rec.n > before ? d->rec.got[before] : NULL;
}

static inline pc_batch *batch_from_json(const char *json)
{
    pc_batch *b = NULL;
    char err[256] = "";
    if (pc_batch_decode_json(json, strlen(json), &b, err, sizeof err)) {
        fprintf(stderr, "decode_json: %s\n%s\n", err, json);
        exit(1);
    }
    int64_t rejected = 0;
    if (pc_batch_validate(b, &rejected, err, sizeof err) || rejected) {
        fprintf(stderr, "test batch invalid: %s\n", err);
        exit(1);
    }
    return b;
}

static inline pc_profile *first_profile(pc_batch *b)
{
    return b->req->resource_profiles[0]->scope_profiles[0]->profiles[0];
}

#endif
