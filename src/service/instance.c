/* The service's component instances: creating one from its config (type lookup, config table,
 * validate, create), the consumers wrapping it and a pipeline's entry, freeing it, and finding
 * the enabled extensions (what components reach through pc_host). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "sdk/auth.h"
#include "service/internal.h"

static pc_component *as_component(pc_consumer *self)
{
    return (pc_component *)((char *)self - offsetof(pc_component, self));
}

bool svc_is_waiting(const pc_service *s, const pc_component *c)
{
    for (size_t i = 0; i < s->n_waiting; i++)
        if (s->waiting[i] == c) return true;
    return false;
}

static void component_consume(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg)
{
    pc_component *c = as_component(self);
    pc_service *s = (pc_service *)c->host;
    if (s && s->n_waiting && svc_is_waiting(s, c)) {
        /* its predecessor is still leaving the persistent queue to it: the client retries */
        pc_batch_unref(b);
        done(arg, PC_EAGAIN, "exporter is restarting");
        return;
    }
    c->type->consume(c, b, done, arg);
}

/* Durable: an exporter when its type says so; a processor when what follows it is. */
static bool component_durable(pc_consumer *self, size_t batch_size)
{
    pc_component *c = as_component(self);
    if (c->type->durable) return c->type->durable(c, batch_size);
    if (c->type->kind == PC_KIND_CONNECTOR) return pc_consumer_durable(c->router->all, batch_size);
    return c->type->kind == PC_KIND_PROCESSOR && pc_consumer_durable(c->next, batch_size);
}

/* Admission: the component's own verdict (a memory_limiter's, an exporter's queue), then, unless
 * that refuses, what follows it; the worse of the two. */
pc_admit svc_component_admit(pc_consumer *self, size_t *room)
{
    pc_component *c = as_component(self);
    pc_admit a = c->type->admit ? c->type->admit(c, room) : PC_ADMIT_OK;
    if (pc_admit_refused(a)) return a;
    pc_admit next = PC_ADMIT_OK;
    if (c->type->kind == PC_KIND_CONNECTOR) next = pc_consumer_admit(c->router->all, room);
    if (c->type->kind == PC_KIND_PROCESSOR) next = pc_consumer_admit(c->next, room);
    return next > a ? next : a;
}

typedef struct entry_call {
    pc_service *svc;
    pc_done_fn done;
    void *arg;
} entry_call;

static void entry_done(void *arg, int st, const char *msg)
{
    entry_call *call = arg;
    pc_done_fn done = call->done;
    void *a = call->arg;
    call->svc->in_flight--;
    free(call);
    done(a, st, msg);
}

static void entry_consume(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg)
{
    pipe_entry *e = (pipe_entry *)self;
    entry_call *call = pc_xmalloc(sizeof *call);
    *call = (entry_call){e->svc, done, arg};
    e->svc->in_flight++;
    pc_consume(e->next, b, entry_done, call);
}

static pc_admit entry_admit(pc_consumer *self, size_t *room)
{
    return pc_consumer_admit(((pipe_entry *)self)->next, room);
}

static bool entry_durable(pc_consumer *self, size_t batch_size)
{
    return pc_consumer_durable(((pipe_entry *)self)->next, batch_size);
}

pipe_entry *svc_entry_new(pc_service *s, pc_consumer *next)
{
    pipe_entry *e = pc_xcalloc(1, sizeof *e);
    e->base.consume = entry_consume;
    e->base.admit = entry_admit;
    e->base.durable = entry_durable;
    e->base.mutates = next->mutates;
    e->base.wire_ok = next->wire_ok;
    e->next = next;
    e->svc = s;
    return e;
}

bool svc_owned(const pc_service *s, const pc_component *c)
{
    return c && c->host == (const pc_host *)s;
}

void svc_component_free(pc_component *c)
{
    if (!c) return;
    /* the self-metrics a component registered under its own address (sdk/telemetry.h) go here,
     * once, before its state is freed, so no destroy has to remember it */
    pc_metric_unregister(c);
    if (c->type->destroy) c->type->destroy(c);
    pc_cfgtable_free(c->type->cfg, c->cfg);
    free(c->cfg);
    free(c->id);
    free(c->name);
    free(c);
}

/* Split "type/name" and look the type up, with a "did you mean" among types of that kind. */
const pc_component_type *svc_lookup_type(pc_kind kind, const char *id, const pc_node *at,
                                         const char *path, pc_error *err)
{
    char type[128];
    size_t tl = strcspn(id, "/");
    if (tl == 0 || tl >= sizeof type || (id[tl] == '/' && !id[tl + 1])) {
        pc_cfg_errorf(err, at, path, "invalid component id \"%s\" (want type or type/name)", id);
        return NULL;
    }
    memcpy(type, id, tl);
    type[tl] = 0;
    const pc_component_type *t = pc_component_type_find(kind, type);
    if (t) return t;
    const char *cands[64];
    size_t n = 0;
    for (size_t i = 0; pc_component_types[i] && n < 64; i++)
        if (pc_component_types[i]->kind == kind) cands[n++] = pc_component_types[i]->name;
    const char *close = pc_closest(type, cands, n);
    if (kind == PC_KIND_CONNECTOR) { /* as otelcol 0.161.0 words it, then a near name */
        char list[256] = "";
        for (size_t i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "",
                     cands[i]);
        pc_cfg_errorf(err, at, path,
                      "'connectors' unknown type: \"%s\" for id: \"%s\" (valid values: [%s])%s%s%s",
                      type, id, list, close ? "; did you mean \"" : "", close ? close : "",
                      close ? "\"?" : "");
        return NULL;
    }
    if (close) {
        pc_cfg_errorf(err, at, path, "unknown %s type \"%s\" (did you mean \"%s\"?)",
                      pc_kind_name(kind), type, close);
        return NULL;
    }
    /* no near name: every type of that kind, and where Collector users look for what they name */
    char list[512] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", cands[i]);
    const char *hint = "";
    if (kind == PC_KIND_EXTENSION && (!strcmp(type, "zpages") || !strcmp(type, "pprof")))
        hint = "; what passes through is shown by the profilez extension";
    else if (kind == PC_KIND_RECEIVER && !strcmp(type, "pprof"))
        hint =
            "; pprof endpoints are scraped by the pyroscope_scrape receiver, pprof uploads go to "
            "the pyroscope receiver (POST /ingest?format=pprof)";
    pc_cfg_errorf(err, at, path, "unknown %s type \"%s\" (profcol's %ss: %s%s)", pc_kind_name(kind),
                  type, pc_kind_name(kind), list, hint);
    return NULL;
}

/* Parse and validate one component's config; create the instance. */
pc_component *svc_component_new(pc_service *s, pc_kind kind, const char *id, const pc_node *node,
                                const char *path, const char *log_id, pc_error *err)
{
    const pc_component_type *t = svc_lookup_type(kind, id, node, path, err);
    if (!t) return NULL;
    pc_component *c = pc_xcalloc(1, sizeof(*c));
    c->type = t;
    c->id = pc_xstrdup(log_id ? log_id : id);
    c->name = pc_xstrdup(id);
    c->loop = s->loop;
    c->host = &s->host;
    c->cfg = pc_xcalloc(1, t->cfg_size ? t->cfg_size : 1);
    c->self.consume = component_consume;
    c->self.admit = svc_component_admit;
    c->self.durable = component_durable;
    c->self.mutates = t->mutates;
    if (pc_cfgtable_apply(t->cfg, c->cfg, node, path, err) ||
        (t->validate && t->validate(c->cfg, node, path, err)) || (t->create && t->create(c, err))) {
        svc_component_free(c);
        return NULL;
    }
    c->self.wire_ok = kind == PC_KIND_EXPORTER && t->wire_ok && t->wire_ok(c);
    return c;
}

pc_component *pc_service_extension(pc_service *s, const char *id)
{
    for (size_t i = 0; i < s->n_extensions; i++)
        if (s->extensions[i] && strcmp(s->extensions[i]->id, id) == 0) return s->extensions[i];
    return NULL;
}

pc_auth *pc_service_authenticator(pc_service *s, const char *id, bool server, pc_error *e)
{
    pc_component *ext = s ? pc_service_extension(s, id) : NULL;
    if (!ext) {
        pc_error_set(e, PC_EINVAL,
                     "auth::authenticator: extension \"%s\" is not enabled (list it in "
                     "service::extensions)",
                     id);
        return NULL;
    }
    if (pc_auth_usable(ext, server, e) < 0) {
        pc_error_prefix(e, "auth::authenticator: ");
        return NULL;
    }
    return ext->priv;
}
