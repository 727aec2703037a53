/* Driving one component directly, without a service, for unit tests: configured from a YAML
 * snippet as the service would (cfgtable, validate, create), a recording consumer as its next,
 * an upstream done callback that counts, and shutdown and teardown. proc_driver.h builds a
 * processor driver on these. */
#ifndef PC_TESTCOMP_H
#define PC_TESTCOMP_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "check.h"
#include "pdata/pdata.h"
#include "sdk/component.h"
#include "sdk/telemetry.h"

/* ---- a component configured from YAML ---- */

/* Configure and create c (the caller's storage, zeroed here) of type t from yaml (NULL or "":
 * defaults) at "<kind>::<name>" (kind "processors", "exporters"), id the type's name, on loop
 * with next as its consumer. 0, or -1 with the error in err (nothing left to free). The parsed
 * tree is kept in *root (a config may point into it) until tc_fini. */
static inline int tc_init(pc_component *c, pc_node **root, const pc_component_type *t,
                          const char *kind, const char *yaml, uv_loop_t *loop, pc_consumer *next,
                          pc_error *err)
{
    char path[128];
    snprintf(path, sizeof path, "%s::%s", kind, t->name);
    memset(c, 0, sizeof *c);
    memset(err, 0, sizeof *err);
    *root = NULL;
    c->type = t;
    c->id = strdup(t->name);
    c->loop = loop;
    c->next = next;
    c->cfg = calloc(1, t->cfg_size ? t->cfg_size : 1);
    if (yaml && *yaml) {
        *root = pc_config_parse(yaml, strlen(yaml), "test.yaml", err);
        if (!*root) goto fail;
    }
    if (pc_cfgtable_apply(t->cfg, c->cfg, *root, path, err)) goto fail;
    if (t->validate && t->validate(c->cfg, *root, path, err)) goto fail;
    if (t->create && t->create(c, err)) goto fail;
    return 0;
fail:
    pc_cfgtable_free(t->cfg, c->cfg);
    free(c->cfg);
    free(c->id);
    pc_node_free(*root);
    *root = NULL;
    return -1;
}

/* Destroy what tc_init created (after a shutdown, when the type has one) and free its config. */
static inline void tc_fini(pc_component *c, pc_node *root)
{
    pc_metric_unregister(c); /* as the service does before a destroy */
    if (c->type->destroy) c->type->destroy(c);
    pc_cfgtable_free(c->type->cfg, c->cfg);
    free(c->cfg);
    free(c->id);
    free(c->name);
    pc_node_free(root);
}

/* The same on the heap: NULL with the error in err. */
typedef struct tc_heap {
    pc_component c; /* first: the pc_component * handed out is the tc_heap */
    pc_node *root;
} tc_heap;

static inline pc_component *tc_new(const pc_component_type *t, const char *kind, const char *yaml,
                                   uv_loop_t *loop, pc_consumer *next, pc_error *err)
{
    tc_heap *h = calloc(1, sizeof *h);
    if (tc_init(&h->c, &h->root, t, kind, yaml, loop, next, err)) {
        free(h);
        return NULL;
    }
    return &h->c;
}

static inline void tc_free(pc_component *c)
{
    tc_heap *h = (tc_heap *)c;
    tc_fini(&h->c, h->root);
    free(h);
}

/* What a config is refused for (apply and validate only, nothing created); NULL if accepted.
 * The text lives until the next call. */
static inline const char *tc_config_error(const pc_component_type *t, const char *kind,
                                          const char *yaml)
{
    static pc_error err;
    char path[128];
    snprintf(path, sizeof path, "%s::%s", kind, t->name);
    memset(&err, 0, sizeof err);
    pc_node *root = pc_config_parse(yaml, strlen(yaml), "test.yaml", &err);
    void *cfg = calloc(1, t->cfg_size);
    int rc = pc_cfgtable_apply(t->cfg, cfg, root, path, &err);
    if (!rc) rc = t->validate(cfg, root, path, &err);
    pc_node_free(root);
    pc_cfgtable_free(t->cfg, cfg);
    free(cfg);
    return rc ? err.msg : NULL;
}

static int tc_downs_;
static inline void tc_down_(pc_component *c)
{
    (void)c;
    tc_downs_++;
}

/* Shut c down and run its loop until nothing is left on it; done must come exactly once. */
static inline void tc_shutdown(pc_component *c)
{
    if (!c->type->shutdown) return;
    tc_downs_ = 0;
    c->type->shutdown(c, tc_down_);
    uv_run(c->loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(tc_downs_, 1);
}

/* ---- downstream: a consumer that records what it gets ---- */

#define TC_REC_MAX 256

/* Keeps each batch it gets (owned; the first TC_REC_MAX, the rest are released). Answers at
 * once with `answer` (which then resets to PC_OK), or, with defer set, keeps the done callbacks
 * for the test to call. */
typedef struct tc_rec {
    pc_consumer base;
    pc_batch *got[TC_REC_MAX];
    size_t n;
    int answer;
    bool defer;
    pc_done_fn dones[TC_REC_MAX];
    void *args[TC_REC_MAX];
    size_t n_deferred;
} tc_rec;

static inline void tc_rec_consume(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg)
{
    tc_rec *r = (tc_rec *)self;
    if (r->n < TC_REC_MAX)
        r->got[r->n++] = b;
    else
        pc_batch_unref(b);
    if (r->defer && r->n_deferred < TC_REC_MAX) {
        r->dones[r->n_deferred] = done;
        r->args[r->n_deferred++] = arg;
        return;
    }
    int st = r->answer;
    r->answer = PC_OK;
    done(arg, st, st == PC_OK ? NULL : "recorded failure");
}

static inline void tc_rec_init(tc_rec *r)
{
    memset(r, 0, sizeof *r);
    r->base.consume = tc_rec_consume;
}

/* Release what was recorded. */
static inline void tc_rec_clear(tc_rec *r)
{
    for (size_t i = 0; i < r->n; i++)
        pc_batch_unref(r->got[i]);
    r->n = 0;
}

/* The last batch recorded (now the caller's; NULL if none); the others are released. */
static inline pc_batch *tc_rec_take_last(tc_rec *r)
{
    pc_batch *last = r->n ? r->got[--r->n] : NULL;
    tc_rec_clear(r);
    return last;
}

/* ---- upstream: the done callback a consume call gets ---- */

typedef struct tc_up {
    int calls;
    int st;
    int order; /* when it was answered, counted over every tc_up since tc_up_order was reset */
    char msg[256];
} tc_up;

static int tc_up_order;

static inline void tc_up_done(void *arg, int st, const char *msg)
{
    tc_up *u = arg;
    u->calls++;
    u->st = st;
    u->order = ++tc_up_order;
    snprintf(u->msg, sizeof u->msg, "%s", msg ? msg : "");
}

/* ---- one batch through one component ---- */

/* Pass b (one reference) through a fresh instance of t configured by yaml (it must be
 * accepted), on a loop of its own run until idle: upstream is answered once, PC_OK. What the
 * component passed on is returned (the caller's; NULL if nothing). */
static inline pc_batch *tc_pass(const pc_component_type *t, const char *kind, const char *yaml,
                                pc_batch *b)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    tc_rec r;
    tc_rec_init(&r);
    pc_error err = {0};
    pc_component *c = tc_new(t, kind, yaml, &loop, &r.base, &err);
    if (!c) {
        fprintf(stderr, "config: %s\n", err.msg);
        exit(1);
    }
    tc_up up = {0};
    c->type->consume(c, b, tc_up_done, &up);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(up.calls, 1);
    CHECK_EQ_INT(up.st, PC_OK);
    tc_free(c);
    uv_loop_close(&loop);
    return tc_rec_take_last(&r);
}

#endif
