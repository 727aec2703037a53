/* The service object (ARCHITECTURE.md §2): receivers and exporters are one instance per id shared
 * by every pipeline that lists them; processors are instantiated per pipeline. Validation looks
 * at the whole config and reports every error it finds. A reload builds a second service that
 * borrows the running one's unchanged components, then switches over (reload.c). The other
 * concerns have their files (internal.h). */
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

/* Durable and full: an exporter when its type says so; a processor when what follows it is. */
static bool component_durable(pc_consumer *self, size_t batch_size)
{
    pc_component *c = as_component(self);
    if (c->type->durable) return c->type->durable(c, batch_size);
    return c->type->kind == PC_KIND_PROCESSOR && pc_consumer_durable(c->next, batch_size);
}

static bool component_full(pc_consumer *self)
{
    pc_component *c = as_component(self);
    if (c->type->full) return c->type->full(c);
    return c->type->kind == PC_KIND_PROCESSOR && pc_consumer_full(c->next);
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

static bool entry_full(pc_consumer *self)
{
    return pc_consumer_full(((pipe_entry *)self)->next);
}

static bool entry_durable(pc_consumer *self, size_t batch_size)
{
    return pc_consumer_durable(((pipe_entry *)self)->next, batch_size);
}

pipe_entry *svc_entry_new(pc_service *s, pc_consumer *next)
{
    pipe_entry *e = pc_xcalloc(1, sizeof *e);
    e->base.consume = entry_consume;
    e->base.full = entry_full;
    e->base.durable = entry_durable;
    e->base.mutates = next->mutates;
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
    if (c->type->destroy) c->type->destroy(c);
    pc_cfgtable_free(c->type->cfg, c->cfg);
    free(c->cfg);
    free(c->id);
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
    pc_cfg_errorf(err, at, path, "unknown %s type \"%s\"%s%s%s", pc_kind_name(kind), type,
                  close ? " (did you mean \"" : "", close ? close : "", close ? "\"?)" : "");
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
    c->loop = s->loop;
    c->host = &s->host;
    c->cfg = pc_xcalloc(1, t->cfg_size ? t->cfg_size : 1);
    c->self.consume = component_consume;
    c->self.full = component_full;
    c->self.durable = component_durable;
    c->self.mutates = t->mutates;
    if (pc_cfgtable_apply(t->cfg, c->cfg, node, path, err) ||
        (t->validate && t->validate(c->cfg, node, path, err)) || (t->create && t->create(c, err))) {
        svc_component_free(c);
        return NULL;
    }
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

static pc_component *host_extension(pc_host *h, const char *id)
{
    return pc_service_extension((pc_service *)h, id);
}

static pc_auth *host_authenticator(pc_host *h, const char *id, bool server, pc_error *e)
{
    return pc_service_authenticator((pc_service *)h, id, server, e);
}

static int host_status_json(const pc_host *h, pc_buf *out)
{
    return pc_service_status_json((const pc_service *)h, out);
}

static const pc_host_ops host_ops = {host_extension, host_authenticator, host_status_json};

static pc_service *service_build(uv_loop_t *loop, pc_node *root, pc_service *from, pc_error *err)
{
    pc_service *s = pc_xcalloc(1, sizeof(*s));
    s->host.ops = &host_ops;
    s->loop = loop;
    s->root = root;
    s->from = from;
    s->shutdown_timeout_ms = 30000;
    pc_error none = {0};
    if (!err) err = &none;
    size_t before = pc_error_count(err);
    /* every check runs; building instances only happens on a config without errors so far */
    svc_check_sections(s, err);
    svc_telemetry_apply(s, err);
    svc_validate_section(s, "receivers", PC_KIND_RECEIVER, err);
    svc_validate_section(s, "processors", PC_KIND_PROCESSOR, err);
    svc_validate_section(s, "exporters", PC_KIND_EXPORTER, err);
    svc_validate_section(s, "extensions", PC_KIND_EXTENSION, err);
    /* extensions first: a profiles pipeline's fan-out takes the taps of the enabled ones */
    bool dry = pc_error_count(err) != before;
    svc_build_extensions(s, dry, err);
    dry = pc_error_count(err) != before;
    svc_build_pipelines(s, dry, err);
    if (pc_error_count(err) == before) svc_check_authenticators(s, err);
    if (pc_error_count(err) != before) {
        pc_service_free(s);
        return NULL;
    }
    return s;
}

pc_service *pc_service_new(uv_loop_t *loop, pc_node *root, pc_error *err)
{
    pc_service *s = service_build(loop, root, NULL, err);
    if (s) svc_telemetry_use(s); /* at once: start-up lines already follow the configured level */
    return s;
}

pc_service *pc_service_new_reload(pc_service *running, pc_node *root, pc_error *err)
{
    return service_build(running->loop, root, running, err);
}

void pc_service_free(pc_service *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_receivers; i++) {
        if (svc_owned(s, s->receivers[i])) svc_component_free(s->receivers[i]);
        for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++)
            pc_fanout_free(s->receiver_fanouts[i][sig]);
    }
    for (size_t p = 0; p < s->n_pipelines; p++) {
        pipeline *pl = &s->pipelines[p];
        if (!pl->borrowed) {
            for (size_t i = 0; i < pl->n_processors; i++)
                if (svc_owned(s, pl->processors[i])) svc_component_free(pl->processors[i]);
            pc_fanout_free(pl->exporters_fanout);
            free(pl->entry);
        }
        free(pl->processors);
        free(pl->name);
    }
    free(s->pipelines);
    for (size_t i = 0; i < s->n_exporters; i++)
        if (svc_owned(s, s->exporters[i])) svc_component_free(s->exporters[i]);
    for (size_t i = 0; i < s->n_extensions; i++)
        if (svc_owned(s, s->extensions[i])) svc_component_free(s->extensions[i]);
    for (size_t i = 0; i < s->n_retired; i++)
        svc_component_free(s->retired[i]);
    for (size_t i = 0; i < s->n_reconf; i++) { /* a reload that never switched */
        pc_cfgtable_free(s->reconf[i]->type->cfg, s->reconf_cfg[i]);
        free(s->reconf_cfg[i]);
    }
    pc_node_free(s->root);
    free(s->metrics_address);
    free(s->kept);
    free(s);
}
