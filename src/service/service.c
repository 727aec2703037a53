/* Graph building (ARCHITECTURE.md §2): receivers and exporters are one instance per id shared by
 * every pipeline that lists them; processors are instantiated per pipeline. Validation looks at the
 * whole config and reports every error it finds. A reload builds a second service that borrows
 * the running one's unchanged components, then switches over (pc_service_reload). */
#include "service/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/auth.h"
#include "net/url.h"
#include "sdk/component.h"
#include "base/alloc.h"
#include "base/log.h"
#include "sdk/exporter.h"
#include "sdk/sender.h"
#include "sdk/telemetry.h"

#define MAX_COMPONENTS 256

/* Where receivers hand data to a pipeline: counts the requests the pipeline has not answered
 * yet, so a service being replaced is freed only once nothing of it is in use. */
typedef struct pipe_entry {
    pc_consumer base;
    pc_consumer *next;
    pc_service *svc;
} pipe_entry;

typedef struct pipeline {
    char *name; /* "profiles" or "profiles/x", "traces", ... */
    pc_signal signal;
    pc_component **processors; /* own instances */
    size_t n_processors;
    pc_consumer *exporters_fanout; /* NULL when a single exporter */
    pc_consumer *first;            /* the first processor (or the exporters) */
    pipe_entry *entry;             /* what receivers call: counts, then first */
    bool borrowed;                 /* processors, fan-out and entry belong to `from` until the
                                      switch (an unchanged pipeline of a reload) */
    bool built;
} pipeline;

struct pc_service {
    pc_host host; /* first: what components see of the service (sdk/component.h) */
    uv_loop_t *loop;
    pc_node *root;
    pc_component *receivers[MAX_COMPONENTS], *exporters[MAX_COMPONENTS];
    pc_component *extensions[MAX_COMPONENTS];
    size_t n_receivers, n_exporters, n_extensions;
    enum { SVC_STARTING, SVC_READY, SVC_STOPPING, SVC_FAILED } state;
    pipeline *pipelines;
    size_t n_pipelines;
    pc_consumer *receiver_fanouts[MAX_COMPONENTS][PC_SIGNAL_COUNT];
    pc_consumer *routes[MAX_COMPONENTS][PC_SIGNAL_COUNT]; /* per receiver, applied at start */
    char *metrics_address;                                /* NULL: metrics not served */
    uint64_t shutdown_timeout_ms;
    pc_log_level log_level;
    bool log_level_set, log_json;
    pc_metrics_server *metrics;
    /* reload */
    pc_service *from;                      /* the running service this one borrows from */
    pc_component *retired[MAX_COMPONENTS]; /* stopped early by a reload, freed with the service */
    size_t n_retired;
    pc_component *waiting[MAX_COMPONENTS]; /* exporters that start once their predecessor left
                                              its persistent queue; they refuse data until then */
    size_t n_waiting;
    bool quick_handover[MAX_COMPONENTS]; /* per exporter: leave the persistent queue on disk */
    size_t in_flight;                    /* requests inside this service's pipelines */
    pc_component **kept;                 /* taken over at the switch: running already */
    size_t n_kept;
    /* kept instances whose new definition they apply in place at the switch (reconfigure) */
    pc_component *reconf[MAX_COMPONENTS];
    void *reconf_cfg[MAX_COMPONENTS];
    size_t n_reconf;
    /* shutdown state */
    size_t pending;
    int phase;
    void (*cont)(pc_service *s); /* what runs once pending reaches 0 */
    void (*done)(void *);
    void *done_arg;
};

static pc_component *as_component(pc_consumer *self)
{
    return (pc_component *)((char *)self - offsetof(pc_component, self));
}

static bool is_waiting(const pc_service *s, const pc_component *c)
{
    for (size_t i = 0; i < s->n_waiting; i++)
        if (s->waiting[i] == c) return true;
    return false;
}

static void component_consume(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg)
{
    pc_component *c = as_component(self);
    pc_service *s = (pc_service *)c->host;
    if (s && s->n_waiting && is_waiting(s, c)) {
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

static pipe_entry *entry_new(pc_service *s, pc_consumer *next)
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

static bool owned(const pc_service *s, const pc_component *c)
{
    return c && c->host == (const pc_host *)s;
}

static void component_free(pc_component *c)
{
    if (!c) return;
    if (c->type->destroy) c->type->destroy(c);
    pc_cfgtable_free(c->type->cfg, c->cfg);
    free(c->cfg);
    free(c->id);
    free(c);
}

/* Split "type/name" and look the type up, with a "did you mean" among types of that kind. */
static const pc_component_type *lookup_type(pc_kind kind, const char *id, const pc_node *at,
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
static pc_component *component_new(pc_service *s, pc_kind kind, const char *id, const pc_node *node,
                                   const char *path, const char *log_id, pc_error *err)
{
    const pc_component_type *t = lookup_type(kind, id, node, path, err);
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
        component_free(c);
        return NULL;
    }
    return c;
}

static const char *const top_keys[] = {"receivers",  "processors", "exporters",
                                       "extensions", "service",    "connectors"};
static const char *const service_keys[] = {"pipelines", "extensions", "telemetry",
                                           "shutdown_timeout"};
static const char *const pipeline_keys[] = {"receivers", "processors", "exporters"};
#define N_OF(a) (sizeof(a) / sizeof(a)[0])

static void path_join(char *out, size_t n, const char *path, const char *key)
{
    if (snprintf(out, n, "%s%s%s", path, *path ? "::" : "", key) >= (int)n)
        out[n - 1] = 0; /* a truncated path still locates the key */
}

/* Every key of map must be in allowed; each one that is not is an error (with a "did you mean").
 * PC_EINVAL if map is not a mapping or has unknown keys. */
static int check_keys(const pc_node *map, const char *const *allowed, size_t n, const char *path,
                      pc_error *err)
{
    if (!map) return 0;
    if (map->kind == PC_NODE_NULL) return 0;
    if (map->kind != PC_NODE_MAP) {
        pc_cfg_errorf(err, map, path, "must be a mapping");
        return PC_EINVAL;
    }
    int rc = 0;
    for (size_t i = 0; i < map->n; i++) {
        size_t j = 0;
        while (j < n && strcmp(map->keys[i], allowed[j]) != 0)
            j++;
        if (j < n) continue;
        const char *close = pc_closest(map->keys[i], allowed, n);
        char sub[256];
        path_join(sub, sizeof sub, path, map->keys[i]);
        pc_cfg_errorf(err, map->vals[i], sub, "unknown key \"%s\"%s%s%s", map->keys[i],
                      close ? " (did you mean \"" : "", close ? close : "", close ? "\"?)" : "");
        rc = PC_EINVAL;
    }
    return rc;
}

static bool is_empty(const pc_node *n)
{
    return !n || n->kind == PC_NODE_NULL ||
           ((n->kind == PC_NODE_MAP || n->kind == PC_NODE_SEQ) && n->n == 0);
}

/* A Collector setting profcol does not implement: refused, never ignored. */
static int unsupported(const pc_node *n, const char *path, const char *why, pc_error *err)
{
    if (is_empty(n)) return 0;
    pc_cfg_errorf(err, n, path, "not supported by profcol: %s", why);
    return PC_EINVAL;
}

/* Validate every defined component's config, even unused ones (as the Collector does). Each
 * component's errors are reported; one bad component does not hide the next. */
static int validate_section(pc_service *s, const char *section, pc_kind kind, pc_error *err)
{
    const pc_node *sec = pc_node_get(s->root, section);
    if (!sec || sec->kind == PC_NODE_NULL) return 0;
    if (sec->kind != PC_NODE_MAP) {
        pc_cfg_errorf(err, sec, section, "must be a mapping of component ids");
        return PC_EINVAL;
    }
    int rc = 0;
    for (size_t i = 0; i < sec->n; i++) {
        char path[256];
        path_join(path, sizeof path, section, sec->keys[i]);
        const pc_component_type *t = lookup_type(kind, sec->keys[i], sec->vals[i], path, err);
        if (!t) {
            rc = PC_EINVAL;
            continue;
        }
        void *cfg = pc_xcalloc(1, t->cfg_size ? t->cfg_size : 1);
        int r = pc_cfgtable_apply(t->cfg, cfg, sec->vals[i], path, err);
        if (!r && t->validate) r = t->validate(cfg, sec->vals[i], path, err);
        pc_cfgtable_free(t->cfg, cfg);
        free(cfg);
        if (r) rc = PC_EINVAL;
    }
    return rc;
}

static const pc_node *find_definition(pc_service *s, const char *section, const char *id,
                                      const pc_node *at, const char *path, pc_error *err)
{
    const pc_node *sec = pc_node_get(s->root, section);
    if (sec && sec->kind == PC_NODE_MAP)
        for (size_t i = 0; i < sec->n; i++)
            if (strcmp(sec->keys[i], id) == 0) return sec->vals[i];
    if (err)
        pc_cfg_errorf(err, at, path, "%s \"%s\" is not defined in the top-level \"%s\" section",
                      section, id, section);
    return NULL;
}

/* ---- what a reload keeps ---- */

static const pc_node *pipelines_of(const pc_node *root)
{
    const pc_node *p = pc_node_get(pc_node_get(root, "service"), "pipelines");
    return p && p->kind == PC_NODE_MAP ? p : NULL;
}

static bool lists(const pc_node *pipeline, const char *list, const char *id)
{
    const pc_node *l = pc_node_get(pipeline, list);
    for (size_t i = 0; l && l->kind == PC_NODE_SEQ && i < l->n; i++)
        if (l->vals[i]->kind == PC_NODE_SCALAR && !strcmp(l->vals[i]->scalar, id)) return true;
    return false;
}

/* The same pipelines (by name) list id under `list` in both configs. */
static bool same_membership(const pc_node *ra, const pc_node *rb, const char *list, const char *id)
{
    const pc_node *pa = pipelines_of(ra), *pb = pipelines_of(rb);
    for (int pass = 0; pass < 2; pass++) {
        const pc_node *x = pass ? pb : pa, *y = pass ? pa : pb;
        for (size_t i = 0; x && i < x->n; i++)
            if (lists(x->vals[i], list, id) && !lists(pc_node_get(y, x->keys[i]), list, id))
                return false;
    }
    return true;
}

static bool enabled_extension(const pc_node *root, const char *id)
{
    const pc_node *l = pc_node_get(pc_node_get(root, "service"), "extensions");
    for (size_t i = 0; l && l->kind == PC_NODE_SEQ && i < l->n; i++)
        if (l->vals[i]->kind == PC_NODE_SCALAR && !strcmp(l->vals[i]->scalar, id)) return true;
    return false;
}

static pc_component *find_in(pc_component *const *list, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && !strcmp(list[i]->id, id)) return list[i];
    return NULL;
}

static bool same_definition(const pc_service *s, const char *section, const char *id)
{
    const pc_node *a = pc_node_get(pc_node_get(s->from->root, section), id);
    const pc_node *b = pc_node_get(pc_node_get(s->root, section), id);
    return a && b && pc_node_equal(a, b);
}

/* An exporter on the core whose sending queue is on disk (wherever its config keeps the
 * setting: the loadbalancing exporter's is under protocol::otlp). */
static bool persistent_queue(const pc_component *c)
{
    const pc_exporter_def *d = c->type->exporter;
    if (!d || d->sink || !c->cfg) return false;
    const pc_sender_cfg *sc = (const pc_sender_cfg *)((const char *)c->cfg + d->sender_cfg);
    return sc->storage != NULL;
}

/* The running instance c may take its new definition in place (its type's reconfigurable). */
static bool reconfigurable(const pc_service *s, const char *section, const pc_component *c)
{
    const pc_node *a = pc_node_get(pc_node_get(s->from->root, section), c->id);
    const pc_node *b = pc_node_get(pc_node_get(s->root, section), c->id);
    return a && b && c->type->reconfigurable && c->type->reconfigure &&
           c->type->reconfigurable(a, b);
}

static pc_component *kept_extension(pc_service *s, const char *id)
{
    if (!s->from || !enabled_extension(s->from->root, id) || !enabled_extension(s->root, id) ||
        !same_definition(s, "extensions", id))
        return NULL;
    return find_in(s->from->extensions, s->from->n_extensions, id);
}

/* Every `auth: authenticator: <id>` below n names an extension the reload keeps. */
static bool auth_refs_kept(pc_service *s, const pc_node *n)
{
    if (!n || n->kind != PC_NODE_MAP) return true;
    for (size_t i = 0; i < n->n; i++) {
        const pc_node *id = pc_node_get(n->vals[i], "authenticator");
        if (!strcmp(n->keys[i], "auth") && id && id->kind == PC_NODE_SCALAR) {
            if (!kept_extension(s, id->scalar)) return false;
        } else if (!auth_refs_kept(s, n->vals[i])) {
            return false;
        }
    }
    return true;
}

/* The running instance of a receiver or exporter a reload keeps, or NULL: its definition is
 * unchanged, or changed only in what it can apply in place (see reconfigure in shared_instance). */
static pc_component *kept_instance(pc_service *s, pc_kind kind, const char *id)
{
    const char *section = kind == PC_KIND_RECEIVER ? "receivers" : "exporters";
    if (!s->from || !same_membership(s->from->root, s->root, section, id) ||
        !auth_refs_kept(s, pc_node_get(pc_node_get(s->root, section), id)))
        return NULL;
    pc_component *c = kind == PC_KIND_RECEIVER
                          ? find_in(s->from->receivers, s->from->n_receivers, id)
                          : find_in(s->from->exporters, s->from->n_exporters, id);
    if (!c || same_definition(s, section, id) || reconfigurable(s, section, c)) return c;
    return NULL;
}

/* c (kept) changed in what it applies in place: parse its new definition now (the whole config
 * was validated: this cannot fail), apply it at the switch. */
static void plan_reconfigure(pc_service *s, pc_component *c, const char *section,
                             const pc_node *def, const char *path)
{
    if (same_definition(s, section, c->id) || s->n_reconf == MAX_COMPONENTS) return;
    const pc_component_type *t = c->type;
    void *cfg = pc_xcalloc(1, t->cfg_size ? t->cfg_size : 1);
    pc_error e = {0};
    if (pc_cfgtable_apply(t->cfg, cfg, def, path, &e) ||
        (t->validate && t->validate(cfg, def, path, &e))) {
        PC_ERROR(NULL, "reload: %s: %s", path, e.msg); /* validated before: not reached */
        pc_cfgtable_free(t->cfg, cfg);
        free(cfg);
        return;
    }
    s->reconf[s->n_reconf] = c;
    s->reconf_cfg[s->n_reconf++] = cfg;
}

static bool seq_equal(const pc_node *a, const pc_node *b)
{
    if (is_empty(a) || is_empty(b)) return is_empty(a) && is_empty(b);
    return pc_node_equal(a, b);
}

static pipeline *old_pipeline(const pc_service *old, const char *name)
{
    for (size_t i = 0; i < old->n_pipelines; i++)
        if (old->pipelines[i].built && !strcmp(old->pipelines[i].name, name))
            return &old->pipelines[i];
    return NULL;
}

/* A pipeline is kept when its processors (ids, order and configs) and exporters are unchanged
 * and every exporter is kept. Processors of one id share state (tracelink's span index), so
 * they are kept or restarted together: one restarted instance restarts them all. */
/* NULL, null, or a list of scalars (anything else is an error reported by the build). */
static bool scalar_items(const pc_node *l)
{
    if (!l || l->kind == PC_NODE_NULL) return true;
    if (l->kind != PC_NODE_SEQ) return false;
    for (size_t i = 0; i < l->n; i++)
        if (l->vals[i]->kind != PC_NODE_SCALAR) return false;
    return true;
}

/* The running service's taps are this one's: every tap extension enabled in either config is
 * enabled in both and kept (a kept profiles pipeline keeps its fan-out, taps included). */
static bool same_taps(pc_service *s)
{
    for (size_t i = 0; i < s->n_extensions; i++)
        if (s->extensions[i]->type->tap && s->extensions[i]->host != (pc_host *)s->from)
            return false;
    for (size_t i = 0; i < s->from->n_extensions; i++) {
        pc_component *c = s->from->extensions[i];
        if (c && c->type->tap && find_in(s->extensions, s->n_extensions, c->id) != c) return false;
    }
    return true;
}

static void plan_pipelines(pc_service *s, const pc_node *pls, bool *keep)
{
    const pc_node *opls = pipelines_of(s->from->root);
    bool taps = same_taps(s);
    for (size_t i = 0; i < pls->n; i++) {
        const pc_node *p = pls->vals[i], *op = pc_node_get(opls, pls->keys[i]);
        pc_signal sig;
        bool profiles = !pc_signal_parse(pls->keys[i], strcspn(pls->keys[i], "/"), &sig) &&
                        sig == PC_SIGNAL_PROFILES;
        keep[i] = op && old_pipeline(s->from, pls->keys[i]) && (taps || !profiles) &&
                  scalar_items(pc_node_get(p, "processors")) &&
                  scalar_items(pc_node_get(p, "exporters")) &&
                  scalar_items(pc_node_get(p, "receivers")) &&
                  seq_equal(pc_node_get(p, "processors"), pc_node_get(op, "processors")) &&
                  seq_equal(pc_node_get(p, "exporters"), pc_node_get(op, "exporters"));
        const pc_node *procs = pc_node_get(p, "processors"), *exps = pc_node_get(p, "exporters");
        for (size_t k = 0; keep[i] && procs && k < procs->n; k++)
            keep[i] = same_definition(s, "processors", procs->vals[k]->scalar);
        for (size_t k = 0; keep[i] && exps && k < exps->n; k++)
            keep[i] = kept_instance(s, PC_KIND_EXPORTER, exps->vals[k]->scalar) != NULL;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < pls->n; i++) {
            const pc_node *procs = pc_node_get(pls->vals[i], "processors");
            for (size_t k = 0; keep[i] && procs && procs->kind == PC_NODE_SEQ && k < procs->n;
                 k++) {
                const char *id = procs->vals[k]->scalar;
                for (int pass = 0; keep[i] && pass < 2; pass++) {
                    const pc_node *x = pass ? opls : pls;
                    for (size_t j = 0; keep[i] && x && j < x->n; j++) {
                        if (!lists(x->vals[j], "processors", id)) continue;
                        size_t q = 0;
                        while (q < pls->n && strcmp(pls->keys[q], x->keys[j]) != 0)
                            q++;
                        if (q == pls->n || !keep[q]) keep[i] = false, changed = true;
                    }
                }
            }
        }
    }
}

/* ---- building ---- */

/* The shared instance of a receiver or exporter id, created on first use (or borrowed from the
 * running service on a reload). dry: only check that it is defined (errors were found before). */
static pc_component *shared_instance(pc_service *s, pc_kind kind, const char *id, const pc_node *at,
                                     const char *path, bool dry, pc_error *err)
{
    pc_component **list = kind == PC_KIND_RECEIVER ? s->receivers : s->exporters;
    size_t *n = kind == PC_KIND_RECEIVER ? &s->n_receivers : &s->n_exporters;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(list[i]->id, id) == 0) return list[i];
    const char *section = kind == PC_KIND_RECEIVER ? "receivers" : "exporters";
    const pc_node *def = find_definition(s, section, id, at, path, err);
    if (!def || dry) return NULL;
    if (*n == MAX_COMPONENTS) {
        pc_cfg_errorf(err, at, path, "too many components");
        return NULL;
    }
    pc_component *c = kept_instance(s, kind, id);
    char cpath[256];
    path_join(cpath, sizeof cpath, section, id);
    if (c) plan_reconfigure(s, c, section, def, cpath);
    if (!c) {
        c = component_new(s, kind, id, def, cpath, NULL, err);
        /* a replaced exporter with a persistent queue takes it over: it starts once its
         * predecessor stopped and left the queue on disk */
        pc_component *old = c && kind == PC_KIND_EXPORTER && s->from
                                ? find_in(s->from->exporters, s->from->n_exporters, id)
                                : NULL;
        if (old && persistent_queue(old)) s->waiting[s->n_waiting++] = c;
    }
    if (c) list[(*n)++] = c;
    return c;
}

/* A pipeline of a signal the component does not handle is refused, naming what it handles. */
static int check_signal(const pc_component *c, const pc_component_type *t, pc_signal sig,
                        const pc_node *at, const char *path, pc_error *err)
{
    if (pc_component_type_supports(t, sig)) {
        pc_error e = {0};
        if (!c || !t->check_signal || t->check_signal(c, sig, &e) == 0) return 0;
        return pc_cfg_errorf(err, at, path, "%s \"%s\" cannot serve %s pipelines: %s",
                             pc_kind_name(t->kind), c->id, pc_signal_infos[sig].name, e.msg);
    }
    char list[64] = "";
    for (int s = 0; s < PC_SIGNAL_COUNT; s++)
        if (pc_component_type_supports(t, (pc_signal)s))
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "",
                     pc_signal_infos[s].name);
    pc_cfg_errorf(err, at, path, "%s \"%s\" does not support %s pipelines (only: %s)",
                  pc_kind_name(t->kind), t->name, pc_signal_infos[sig].name, list);
    return PC_EINVAL;
}

/* The type of a defined component id (for signal checks without an instance), or NULL. */
static const pc_component_type *defined_type(pc_service *s, pc_kind kind, const char *section,
                                             const char *id)
{
    if (!find_definition(s, section, id, NULL, NULL, NULL)) return NULL;
    char type[128];
    size_t tl = strcspn(id, "/");
    if (tl >= sizeof type) return NULL;
    memcpy(type, id, tl);
    type[tl] = 0;
    return pc_component_type_find(kind, type);
}

/* A list of component ids: PC_EINVAL when it is not a list of scalars or names one twice (as the
 * Collector: 'references exporter "x" multiple times'). */
static int id_list(const pc_node *p, const char *key, const char *path, const pc_node **out,
                   pc_error *err)
{
    const pc_node *l = pc_node_get(p, key);
    *out = NULL;
    if (!l || l->kind == PC_NODE_NULL) return 0;
    char sub[256];
    path_join(sub, sizeof sub, path, key);
    if (l->kind != PC_NODE_SEQ) {
        pc_cfg_errorf(err, l, path, "%s must be a list of component ids", key);
        return PC_EINVAL;
    }
    int rc = 0;
    *out = l; /* the checks after look at its scalar items even when this one fails */
    for (size_t i = 0; i < l->n; i++) {
        if (l->vals[i]->kind != PC_NODE_SCALAR) {
            pc_cfg_errorf(err, l->vals[i], path, "%s must be a list of component ids", key);
            rc = PC_EINVAL;
            continue;
        }
        for (size_t j = 0; j < i; j++)
            if (l->vals[j]->kind == PC_NODE_SCALAR &&
                !strcmp(l->vals[i]->scalar, l->vals[j]->scalar)) {
                /* "exporter" for "exporters" */
                pc_cfg_errorf(err, l->vals[i], path, "%.*s \"%s\" listed twice",
                              (int)strlen(key) - 1, key, l->vals[i]->scalar);
                rc = PC_EINVAL;
                break;
            }
    }
    return rc;
}

/* The tap (ARCHITECTURE.md §2): every enabled extension that watches profiles (type->tap) is one
 * more target of each profiles pipeline's exporter fan-out. Its consumer never refuses, never
 * changes the batch and answers at once, so the pipeline's outcome is its exporters' alone.
 * Appends the taps to out; returns how many. */
static size_t add_taps(pc_service *s, pc_signal sig, pc_consumer **out)
{
    size_t n = 0;
    if (sig != PC_SIGNAL_PROFILES) return 0;
    for (size_t i = 0; i < s->n_extensions; i++)
        if (s->extensions[i] && s->extensions[i]->type->tap)
            out[n++] = s->extensions[i]->type->tap(s->extensions[i]);
    return n;
}

static int build_pipeline(pc_service *s, pipeline *pl, const pc_node *p, const char *path, bool dry,
                          bool keep, pc_error *err)
{
    int rc = check_keys(p, pipeline_keys, N_OF(pipeline_keys), path, err);
    const pc_node *recv, *procs, *exps;
    if (id_list(p, "receivers", path, &recv, err)) rc = PC_EINVAL;
    if (id_list(p, "processors", path, &procs, err)) rc = PC_EINVAL;
    if (id_list(p, "exporters", path, &exps, err)) rc = PC_EINVAL;
    dry = dry || rc;
    if (!recv || recv->n == 0) {
        pc_cfg_errorf(err, p, path, "pipeline must have at least one receiver");
        rc = PC_EINVAL;
    }
    if (!exps || exps->n == 0) {
        pc_cfg_errorf(err, p, path, "pipeline must have at least one exporter");
        rc = PC_EINVAL;
    }
    if (dry) { /* errors were found already: only check references, build nothing */
        for (size_t i = 0; procs && i < procs->n; i++) {
            if (procs->vals[i]->kind != PC_NODE_SCALAR) continue;
            const char *id = procs->vals[i]->scalar;
            const pc_component_type *t = defined_type(s, PC_KIND_PROCESSOR, "processors", id);
            if (!find_definition(s, "processors", id, procs->vals[i], path, err) ||
                (t && check_signal(NULL, t, pl->signal, procs->vals[i], path, err)))
                rc = PC_EINVAL;
        }
        for (size_t i = 0; exps && i < exps->n; i++) {
            if (exps->vals[i]->kind != PC_NODE_SCALAR) continue;
            const char *id = exps->vals[i]->scalar;
            const pc_component_type *t = defined_type(s, PC_KIND_EXPORTER, "exporters", id);
            if (!find_definition(s, "exporters", id, exps->vals[i], path, err) ||
                (t && check_signal(NULL, t, pl->signal, exps->vals[i], path, err)))
                rc = PC_EINVAL;
        }
        return rc;
    }
    if (rc) return rc;
    pc_consumer *targets[2 * MAX_COMPONENTS];
    for (size_t i = 0; i < exps->n; i++) {
        pc_component *c = shared_instance(s, PC_KIND_EXPORTER, exps->vals[i]->scalar, exps->vals[i],
                                          path, false, err);
        if (!c || check_signal(c, c->type, pl->signal, exps->vals[i], path, err)) {
            rc = PC_EINVAL;
            continue;
        }
        targets[i] = &c->self;
    }
    size_t np = procs ? procs->n : 0;
    if (keep) {
        /* an unchanged pipeline: take the running one's processors, fan-out and entry */
        pipeline *op = old_pipeline(s->from, pl->name);
        pl->processors = pc_xcalloc(np ? np : 1, sizeof(pc_component *));
        memcpy(pl->processors, op->processors, np * sizeof(pc_component *));
        pl->n_processors = np;
        pl->exporters_fanout = op->exporters_fanout;
        pl->first = op->first;
        pl->entry = op->entry;
        pl->borrowed = true;
        pl->built = rc == 0;
        return rc;
    }
    /* the exporters' checks failed: still check the processors, build no chain */
    pc_consumer *next = NULL;
    if (!rc) {
        size_t n = exps->n + add_taps(s, pl->signal, targets + exps->n);
        next = targets[0];
        if (n > 1) next = pl->exporters_fanout = pc_fanout_new(targets, n);
    }
    pl->processors = pc_xcalloc(np ? np : 1, sizeof(pc_component *));
    pl->n_processors = np; /* slots fill back to front; a failed build leaves NULLs */
    /* build back to front so each processor knows its next consumer */
    for (size_t k = np; k-- > 0;) {
        const char *id = procs->vals[k]->scalar;
        const pc_node *def = find_definition(s, "processors", id, procs->vals[k], path, err);
        if (!def) {
            rc = PC_EINVAL;
            continue;
        }
        char cpath[256], log_id[256];
        path_join(cpath, sizeof cpath, "processors", id);
        snprintf(log_id, sizeof log_id, "%s in %s", id, pl->name);
        pc_component *c = component_new(s, PC_KIND_PROCESSOR, id, def, cpath, log_id, err);
        if (!c) {
            rc = PC_EINVAL;
            continue;
        }
        c->next = next;
        if (check_signal(c, c->type, pl->signal, procs->vals[k], path, err)) {
            component_free(c);
            rc = PC_EINVAL;
            continue;
        }
        pl->processors[k] = c;
        next = &c->self;
    }
    if (rc) return rc;
    pl->first = next;
    pl->entry = entry_new(s, next);
    pl->built = true;
    return 0;
}

/* Each receiver hands each signal to every pipeline of that signal listing it: s->routes. A
 * receiver of this service gets them now; a borrowed one at the switch. */
static void build_routes(pc_service *s, const pc_node *pls)
{
    for (size_t r = 0; r < s->n_receivers; r++) {
        pc_component *rc = s->receivers[r];
        for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
            pc_consumer *targets[MAX_COMPONENTS];
            size_t n = 0;
            for (size_t i = 0; i < pls->n; i++) {
                if (s->pipelines[i].signal != (pc_signal)sig) continue;
                if (lists(pls->vals[i], "receivers", rc->id))
                    targets[n++] = &s->pipelines[i].entry->base;
            }
            if (n == 1) {
                s->routes[r][sig] = targets[0];
            } else if (n > 1) {
                s->receiver_fanouts[r][sig] = pc_fanout_new(targets, n);
                s->routes[r][sig] = s->receiver_fanouts[r][sig];
            }
        }
        if (owned(s, rc)) {
            memcpy(rc->route, s->routes[r], sizeof rc->route);
            rc->next = rc->route[PC_SIGNAL_PROFILES];
        }
    }
}

static int build_pipelines(pc_service *s, bool dry, pc_error *err)
{
    const pc_node *svc = pc_node_get(s->root, "service");
    int rc = check_keys(svc, service_keys, N_OF(service_keys), "service", err);
    const pc_node *st = pc_node_get(svc, "shutdown_timeout");
    if (st &&
        (st->kind != PC_NODE_SCALAR || pc_parse_duration_ms(st->scalar, &s->shutdown_timeout_ms))) {
        pc_cfg_errorf(err, st, "service::shutdown_timeout", "not a duration (e.g. 30s)");
        rc = PC_EINVAL;
    }
    const pc_node *pls = pc_node_get(svc, "pipelines");
    if (!pls || pls->kind != PC_NODE_MAP || pls->n == 0) {
        pc_cfg_errorf(err,
                      pls   ? pls
                      : svc ? svc
                            : s->root,
                      "service::pipelines",
                      "at least one pipeline is required (service: pipelines: profiles: ...)");
        return PC_EINVAL;
    }
    dry = dry || rc;
    bool keep[MAX_COMPONENTS] = {false};
    if (pls->n > MAX_COMPONENTS) {
        pc_cfg_errorf(err, pls, "service::pipelines", "too many pipelines");
        return PC_EINVAL;
    }
    if (s->from && !dry) plan_pipelines(s, pls, keep);
    s->pipelines = pc_xcalloc(pls->n, sizeof(pipeline));
    for (size_t i = 0; i < pls->n; i++) {
        const char *name = pls->keys[i];
        char path[256];
        path_join(path, sizeof path, "service::pipelines", name);
        size_t sl = strcspn(name, "/");
        pc_signal sig;
        if (pc_signal_parse(name, sl, &sig) || (name[sl] == '/' && !name[sl + 1])) {
            pc_cfg_errorf(err, pls->vals[i], path,
                          "unknown pipeline \"%s\" (want profiles, traces, metrics or logs, "
                          "optionally followed by /<name>)",
                          name);
            rc = PC_EINVAL;
            continue;
        }
        pipeline *pl = &s->pipelines[s->n_pipelines++];
        pl->name = pc_xstrdup(name);
        pl->signal = sig;
        if (build_pipeline(s, pl, pls->vals[i], path, dry, keep[i], err)) rc = PC_EINVAL;
    }
    /* receivers: one instance per id, fanning out to every pipeline that lists it */
    for (size_t i = 0; i < pls->n; i++) {
        const pc_node *recv = pc_node_get(pls->vals[i], "receivers");
        char path[256];
        path_join(path, sizeof path, "service::pipelines", pls->keys[i]);
        size_t sl = strcspn(pls->keys[i], "/");
        pc_signal sig;
        if (!recv || recv->kind != PC_NODE_SEQ || pc_signal_parse(pls->keys[i], sl, &sig)) continue;
        for (size_t j = 0; j < recv->n; j++) {
            if (recv->vals[j]->kind != PC_NODE_SCALAR) continue;
            const char *id = recv->vals[j]->scalar;
            if (dry || rc) {
                const pc_component_type *t = defined_type(s, PC_KIND_RECEIVER, "receivers", id);
                if (!find_definition(s, "receivers", id, recv->vals[j], path, err) ||
                    (t && check_signal(NULL, t, sig, recv->vals[j], path, err)))
                    rc = PC_EINVAL;
                continue;
            }
            pc_component *c =
                shared_instance(s, PC_KIND_RECEIVER, id, recv->vals[j], path, false, err);
            if (!c || check_signal(c, c->type, sig, recv->vals[j], path, err)) rc = PC_EINVAL;
        }
    }
    if (rc || dry) return PC_EINVAL;
    build_routes(s, pls);
    return 0;
}

/* ---- service::telemetry ---- */

static const char *const telemetry_keys[] = {"logs", "metrics", "traces", "resource"};
static const char *const logs_keys[] = {
    "level",    "encoding",     "development",        "disable_caller", "disable_stacktrace",
    "sampling", "output_paths", "error_output_paths", "initial_fields", "processors"};
static const char *const sampling_keys[] = {"enabled", "tick", "initial", "thereafter"};
static const char *const metrics_keys[] = {"level", "address", "readers", "views"};
static const char *const traces_keys[] = {"level", "processors", "propagators"};
static const char *const reader_keys[] = {"pull", "periodic"};
static const char *const prometheus_keys[] = {"host", "port"};

static int scalar_in(const pc_node *n, const char *path, const char *const *choices, size_t nc,
                     int *out, pc_error *err)
{
    if (!n || n->kind == PC_NODE_NULL) return 0;
    for (size_t i = 0; n->kind == PC_NODE_SCALAR && i < nc; i++)
        if (!strcasecmp(n->scalar, choices[i])) {
            *out = (int)i;
            return 0;
        }
    char list[200] = "";
    for (size_t i = 0; i < nc; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 choices[i]);
    pc_cfg_errorf(err, n, path, "\"%s\" is not one of: %s",
                  n->kind == PC_NODE_SCALAR ? n->scalar : "(not a scalar)", list);
    return PC_EINVAL;
}

static int bool_key(const pc_node *map, const char *key, const char *path, bool *out, pc_error *err)
{
    const pc_node *n = pc_node_get(map, key);
    if (!n || n->kind == PC_NODE_NULL) return 0;
    char sub[256];
    path_join(sub, sizeof sub, path, key);
    if (n->kind != PC_NODE_SCALAR || pc_parse_bool(n->scalar, out)) {
        pc_cfg_errorf(err, n, sub, "must be true or false");
        return PC_EINVAL;
    }
    return 0;
}

/* output_paths: profcol writes its log to stderr only. */
static int stderr_only(const pc_node *l, const char *path, pc_error *err)
{
    if (!l || l->kind == PC_NODE_NULL) return 0;
    if (l->kind != PC_NODE_SEQ) {
        pc_cfg_errorf(err, l, path, "must be a list");
        return PC_EINVAL;
    }
    for (size_t i = 0; i < l->n; i++)
        if (l->vals[i]->kind != PC_NODE_SCALAR || strcmp(l->vals[i]->scalar, "stderr") != 0) {
            pc_cfg_errorf(err, l->vals[i], path,
                          "not supported by profcol: it logs to stderr only (want [stderr])");
            return PC_EINVAL;
        }
    return 0;
}

static int telemetry_logs(pc_service *s, const pc_node *logs, pc_error *err)
{
    static const char *const encodings[] = {"console", "json"};
    const char *P = "service::telemetry::logs";
    int rc = check_keys(logs, logs_keys, N_OF(logs_keys), P, err);
    const pc_node *lvl = pc_node_get(logs, "level");
    if (lvl && lvl->kind != PC_NODE_NULL) {
        if (lvl->kind != PC_NODE_SCALAR || pc_log_parse_level(lvl->scalar, &s->log_level)) {
            pc_cfg_errorf(err, lvl, "service::telemetry::logs::level",
                          "\"%s\" is not one of: debug, info, warn, error",
                          lvl->kind == PC_NODE_SCALAR ? lvl->scalar : "(not a scalar)");
            rc = PC_EINVAL;
        } else {
            s->log_level_set = true;
        }
    }
    int enc = 0;
    if (scalar_in(pc_node_get(logs, "encoding"), "service::telemetry::logs::encoding", encodings, 2,
                  &enc, err))
        rc = PC_EINVAL;
    s->log_json = enc == 1;
    bool dev = false, ignored;
    if (bool_key(logs, "development", P, &dev, err)) rc = PC_EINVAL;
    if (dev) {
        pc_cfg_errorf(err, pc_node_get(logs, "development"),
                      "service::telemetry::logs::development",
                      "not supported by profcol: it has no development logging mode (set false)");
        rc = PC_EINVAL;
    }
    /* profcol's lines carry no caller and no stack trace: either value is what it does */
    if (bool_key(logs, "disable_caller", P, &ignored, err)) rc = PC_EINVAL;
    if (bool_key(logs, "disable_stacktrace", P, &ignored, err)) rc = PC_EINVAL;
    const pc_node *smp = pc_node_get(logs, "sampling");
    if (check_keys(smp, sampling_keys, N_OF(sampling_keys), "service::telemetry::logs::sampling",
                   err))
        rc = PC_EINVAL;
    bool sampling = false;
    if (bool_key(smp, "enabled", "service::telemetry::logs::sampling", &sampling, err))
        rc = PC_EINVAL;
    if (sampling) {
        pc_cfg_errorf(err, pc_node_get(smp, "enabled"),
                      "service::telemetry::logs::sampling::enabled",
                      "not supported by profcol: it does not sample its log lines (set false)");
        rc = PC_EINVAL;
    }
    if (stderr_only(pc_node_get(logs, "output_paths"), "service::telemetry::logs::output_paths",
                    err) ||
        stderr_only(pc_node_get(logs, "error_output_paths"),
                    "service::telemetry::logs::error_output_paths", err))
        rc = PC_EINVAL;
    if (unsupported(pc_node_get(logs, "initial_fields"), "service::telemetry::logs::initial_fields",
                    "its lines have no extra fields", err) ||
        unsupported(pc_node_get(logs, "processors"), "service::telemetry::logs::processors",
                    "it does not export its own logs", err))
        rc = PC_EINVAL;
    return rc;
}

/* metrics: address (host:port), or one pull reader with a prometheus exporter (host, port) as
 * the Collector now writes it; level none turns the endpoint off. */
static int telemetry_metrics(pc_service *s, const pc_node *met, pc_error *err)
{
    static const char *const levels[] = {"none", "basic", "normal", "detailed"};
    const char *P = "service::telemetry::metrics";
    int rc = check_keys(met, metrics_keys, N_OF(metrics_keys), P, err);
    int level = 2;
    if (scalar_in(pc_node_get(met, "level"), "service::telemetry::metrics::level", levels, 4,
                  &level, err))
        rc = PC_EINVAL;
    const pc_node *addr = pc_node_get(met, "address");
    const pc_node *readers = pc_node_get(met, "readers");
    char address[300] = "localhost:8888";
    if (addr && addr->kind != PC_NODE_NULL) {
        char host[256];
        pc_error e = {0};
        int port;
        if (addr->kind != PC_NODE_SCALAR ||
            pc_hostport_parse(addr->scalar, host, sizeof host, &port, &e) < 0) {
            pc_cfg_errorf(err, addr, "service::telemetry::metrics::address", "%s",
                          addr->kind == PC_NODE_SCALAR ? e.msg : "must be host:port");
            rc = PC_EINVAL;
        } else {
            snprintf(address, sizeof address, "%s", addr->scalar);
        }
    }
    if (!is_empty(readers)) {
        const char *RP = "service::telemetry::metrics::readers";
        const pc_node *pull = NULL;
        if (readers->kind != PC_NODE_SEQ) {
            pc_cfg_errorf(err, readers, RP, "must be a list of readers");
            rc = PC_EINVAL;
        } else if (addr && addr->kind != PC_NODE_NULL) {
            pc_cfg_errorf(err, readers, RP, "set address or readers, not both");
            rc = PC_EINVAL;
        } else if (readers->n > 1) {
            pc_cfg_errorf(err, readers, RP,
                          "not supported by profcol: one reader only (pull, prometheus)");
            rc = PC_EINVAL;
        } else if (check_keys(readers->vals[0], reader_keys, N_OF(reader_keys), RP, err)) {
            rc = PC_EINVAL;
        } else if (pc_node_get(readers->vals[0], "periodic")) {
            pc_cfg_errorf(err, pc_node_get(readers->vals[0], "periodic"), RP,
                          "not supported by profcol: periodic readers (it serves Prometheus text "
                          "to be scraped: use pull)");
            rc = PC_EINVAL;
        } else {
            pull = pc_node_get(readers->vals[0], "pull");
        }
        const pc_node *exp = pc_node_get(pull, "exporter");
        const pc_node *prom = pc_node_get(exp, "prometheus");
        if (pull) {
            char pp[200];
            snprintf(pp, sizeof pp, "%s::pull", RP);
            if (check_keys(pull, (const char *const[]){"exporter"}, 1, pp, err) ||
                check_keys(exp, (const char *const[]){"prometheus"}, 1,
                           "service::telemetry::metrics::readers::pull::exporter", err))
                rc = PC_EINVAL;
            else if (!prom ||
                     check_keys(prom, prometheus_keys, N_OF(prometheus_keys),
                                "service::telemetry::metrics::readers::pull::exporter::prometheus",
                                err)) {
                if (!prom) pc_cfg_errorf(err, pull, pp, "want exporter: prometheus: {host, port}");
                rc = PC_EINVAL;
            } else {
                const pc_node *h = pc_node_get(prom, "host"), *p = pc_node_get(prom, "port");
                char host[256];
                pc_error e = {0};
                int port;
                snprintf(address, sizeof address, "%s:%s",
                         h && h->kind == PC_NODE_SCALAR ? h->scalar : "localhost",
                         p && p->kind == PC_NODE_SCALAR ? p->scalar : "8888");
                if (pc_hostport_parse(address, host, sizeof host, &port, &e) < 0) {
                    pc_cfg_errorf(
                        err, prom,
                        "service::telemetry::metrics::readers::pull::exporter::prometheus", "%s",
                        e.msg);
                    rc = PC_EINVAL;
                }
            }
        }
    }
    if (unsupported(pc_node_get(met, "views"), "service::telemetry::metrics::views",
                    "its metrics have no views", err))
        rc = PC_EINVAL;
    free(s->metrics_address);
    s->metrics_address = level == 0 ? NULL : pc_xstrdup(address);
    return rc;
}

static int apply_telemetry(pc_service *s, pc_error *err)
{
    const pc_node *tel = pc_node_get(pc_node_get(s->root, "service"), "telemetry");
    int rc = check_keys(tel, telemetry_keys, N_OF(telemetry_keys), "service::telemetry", err);
    if (telemetry_logs(s, pc_node_get(tel, "logs"), err)) rc = PC_EINVAL;
    if (telemetry_metrics(s, pc_node_get(tel, "metrics"), err)) rc = PC_EINVAL;
    const pc_node *tr = pc_node_get(tel, "traces");
    if (check_keys(tr, traces_keys, N_OF(traces_keys), "service::telemetry::traces", err))
        rc = PC_EINVAL;
    const pc_node *tl = pc_node_get(tr, "level");
    if (tl && tl->kind != PC_NODE_NULL &&
        (tl->kind != PC_NODE_SCALAR || strcmp(tl->scalar, "none") != 0)) {
        pc_cfg_errorf(err, tl, "service::telemetry::traces::level",
                      "not supported by profcol: it does not trace itself (want none)");
        rc = PC_EINVAL;
    }
    if (unsupported(pc_node_get(tr, "processors"), "service::telemetry::traces::processors",
                    "it does not trace itself", err) ||
        unsupported(pc_node_get(tr, "propagators"), "service::telemetry::traces::propagators",
                    "it does not trace itself", err) ||
        unsupported(pc_node_get(tel, "resource"), "service::telemetry::resource",
                    "its self-metrics carry no resource attributes", err))
        rc = PC_EINVAL;
    return rc;
}

static void telemetry_use(const pc_service *s)
{
    pc_log_set_json(s->log_json);
    pc_log_set_level(s->log_level_set ? s->log_level : PC_LOG_INFO);
}

/* ---- extensions ---- */

/* service.extensions: instances of extensions defined in the top-level section. */
static int build_extensions(pc_service *s, bool dry, pc_error *err)
{
    const pc_node *list = pc_node_get(pc_node_get(s->root, "service"), "extensions");
    if (!list || list->kind == PC_NODE_NULL) return 0;
    if (list->kind != PC_NODE_SEQ) {
        pc_cfg_errorf(err, list, "service::extensions", "must be a list of extension ids");
        return PC_EINVAL;
    }
    int rc = 0;
    for (size_t i = 0; i < list->n; i++) {
        const pc_node *id = list->vals[i];
        if (id->kind != PC_NODE_SCALAR) {
            pc_cfg_errorf(err, id, "service::extensions", "must be a list of extension ids");
            rc = PC_EINVAL;
            continue;
        }
        bool twice = false;
        for (size_t j = 0; j < i; j++)
            twice |=
                list->vals[j]->kind == PC_NODE_SCALAR && !strcmp(list->vals[j]->scalar, id->scalar);
        if (twice) {
            pc_cfg_errorf(err, id, "service::extensions", "extension \"%s\" listed twice",
                          id->scalar);
            rc = PC_EINVAL;
            continue;
        }
        const pc_node *def =
            find_definition(s, "extensions", id->scalar, id, "service::extensions", err);
        if (!def) {
            rc = PC_EINVAL;
            continue;
        }
        if (dry || rc) continue;
        if (s->n_extensions == MAX_COMPONENTS)
            return pc_cfg_errorf(err, id, "service::extensions", "too many components");
        pc_component *c = kept_extension(s, id->scalar);
        if (!c) {
            char path[256];
            path_join(path, sizeof path, "extensions", id->scalar);
            c = component_new(s, PC_KIND_EXTENSION, id->scalar, def, path, NULL, err);
        }
        if (!c) {
            rc = PC_EINVAL;
            continue;
        }
        s->extensions[s->n_extensions++] = c;
    }
    return rc;
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

/* Every `auth: authenticator: <id>` below a component (at any depth, e.g. the otlp receiver's
 * protocols::http::auth) must name an enabled authenticator extension that fits the side. */
static int check_auth_refs(pc_service *s, const pc_node *n, const char *path, bool server,
                           pc_error *err)
{
    if (!n || n->kind != PC_NODE_MAP) return 0;
    int rc = 0;
    for (size_t i = 0; i < n->n; i++) {
        char sub[512];
        path_join(sub, sizeof sub, path, n->keys[i]);
        const pc_node *id = pc_node_get(n->vals[i], "authenticator");
        if (strcmp(n->keys[i], "auth") == 0 && id && id->kind == PC_NODE_SCALAR) {
            pc_error e = {0};
            pc_component *ext = pc_service_extension(s, id->scalar);
            const pc_node *def = pc_node_get(pc_node_get(s->root, "extensions"), id->scalar);
            if (!ext)
                pc_error_set(&e, PC_EINVAL, "extension \"%s\" %s", id->scalar,
                             def ? "is defined but not enabled: list it in service::extensions"
                                 : "is not defined in the top-level \"extensions\" section");
            if (!ext || pc_auth_usable(ext, server, &e) < 0) {
                strncat(sub, "::authenticator", sizeof sub - strlen(sub) - 1);
                pc_cfg_errorf(err, id, sub, "%s", e.msg);
                rc = PC_EINVAL;
            }
        } else if (check_auth_refs(s, n->vals[i], sub, server, err)) {
            rc = PC_EINVAL;
        }
    }
    return rc;
}

static int check_authenticators(pc_service *s, pc_error *err)
{
    int rc = 0;
    for (size_t i = 0; i < s->n_receivers + s->n_exporters; i++) {
        bool server = i < s->n_receivers;
        pc_component *c = server ? s->receivers[i] : s->exporters[i - s->n_receivers];
        const char *section = server ? "receivers" : "exporters";
        char path[300];
        path_join(path, sizeof path, section, c->id);
        if (check_auth_refs(s, pc_node_get(pc_node_get(s->root, section), c->id), path, server,
                            err))
            rc = PC_EINVAL;
    }
    return rc;
}

/* Sections of the Collector profcol has nothing for, and the shape of the ones it has. */
static int check_sections(pc_service *s, pc_error *err)
{
    int rc = check_keys(s->root, top_keys, N_OF(top_keys), "", err);
    if (unsupported(pc_node_get(s->root, "connectors"), "connectors",
                    "it has no connector types (a pipeline ends in exporters)", err))
        rc = PC_EINVAL;
    const pc_node *svc = pc_node_get(s->root, "service");
    if (svc && svc->kind != PC_NODE_MAP && svc->kind != PC_NODE_NULL) {
        pc_cfg_errorf(err, svc, "service", "must be a mapping");
        rc = PC_EINVAL;
    }
    return rc;
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
    check_sections(s, err);
    apply_telemetry(s, err);
    validate_section(s, "receivers", PC_KIND_RECEIVER, err);
    validate_section(s, "processors", PC_KIND_PROCESSOR, err);
    validate_section(s, "exporters", PC_KIND_EXPORTER, err);
    validate_section(s, "extensions", PC_KIND_EXTENSION, err);
    /* extensions first: a profiles pipeline's fan-out takes the taps of the enabled ones */
    bool dry = pc_error_count(err) != before;
    build_extensions(s, dry, err);
    dry = pc_error_count(err) != before;
    build_pipelines(s, dry, err);
    if (pc_error_count(err) == before) check_authenticators(s, err);
    if (pc_error_count(err) != before) {
        pc_service_free(s);
        return NULL;
    }
    return s;
}

pc_service *pc_service_new(uv_loop_t *loop, pc_node *root, pc_error *err)
{
    pc_service *s = service_build(loop, root, NULL, err);
    if (s) telemetry_use(s); /* at once: start-up lines already follow the configured level */
    return s;
}

pc_service *pc_service_new_reload(pc_service *running, pc_node *root, pc_error *err)
{
    return service_build(running->loop, root, running, err);
}

/* ---- start ---- */

static bool is_kept(const pc_service *s, const pc_component *c)
{
    for (size_t i = 0; i < s->n_kept; i++)
        if (s->kept[i] == c) return true;
    return false;
}

static int start_one(pc_service *s, pc_component *c, const char *section, pc_error *e)
{
    if (!c || !owned(s, c) || is_kept(s, c) || is_waiting(s, c) || !c->type->start) return 0;
    int rc = c->type->start(c, e);
    if (rc < 0) {
        pc_error_prefix(e, "%s::%s: ", section, c->id);
        s->state = SVC_FAILED;
    }
    return rc;
}

static int start_inner(pc_service *s, pc_error *e)
{
    int rc;
    for (size_t i = 0; i < s->n_extensions; i++)
        if ((rc = start_one(s, s->extensions[i], "extensions", e)) < 0) return rc;
    for (size_t i = 0; i < s->n_exporters; i++)
        if ((rc = start_one(s, s->exporters[i], "exporters", e)) < 0) return rc;
    for (size_t p = 0; p < s->n_pipelines; p++)
        for (size_t i = 0; i < s->pipelines[p].n_processors; i++)
            if ((rc = start_one(s, s->pipelines[p].processors[i], "processors", e)) < 0) return rc;
    return 0;
}

static int start_receivers(pc_service *s, pc_error *e)
{
    int rc;
    for (size_t i = 0; i < s->n_receivers; i++)
        if ((rc = start_one(s, s->receivers[i], "receivers", e)) < 0) return rc;
    return 0;
}

static void start_metrics(pc_service *s)
{
    pc_error e = {0};
    if (s->metrics_address && !s->metrics) {
        /* a busy metrics port must not take the data path down with it */
        s->metrics = pc_metrics_server_start(s->loop, s->metrics_address, &e);
        if (!s->metrics) PC_WARN(NULL, "self-metrics not served: %s", e.msg);
    }
}

int pc_service_start(pc_service *s, pc_error *e)
{
    telemetry_use(s);
    start_metrics(s);
    int rc = start_inner(s, e);
    if (rc < 0 || (rc = start_receivers(s, e)) < 0) return rc;
    s->state = SVC_READY;
    PC_INFO(NULL, "everything is ready: %zu pipeline(s), %zu receiver(s), %zu exporter(s)",
            s->n_pipelines, s->n_receivers, s->n_exporters);
    return 0;
}

/* ---- shutdown ---- */

/* Shutdown phases: receivers, then processors pipeline by pipeline in chain order, then
 * exporters. Each phase waits for every component's done callback. */
static void shutdown_phase(pc_service *s);

static void component_down(pc_component *c)
{
    pc_service *s =
        (pc_service *)c->host; /* the service stopping it: components report back by pointer */
    if (--s->pending == 0) s->cont(s);
}

static void metrics_stopped(void *arg)
{
    pc_service *s = arg;
    if (--s->pending == 0) s->cont(s);
}

static void shutdown_one(pc_service *s, pc_component *c)
{
    if (!c) return;
    s->pending++;
    if (c->type->shutdown)
        c->type->shutdown(c, component_down);
    else
        component_down(c);
}

static void shutdown_phase(pc_service *s)
{
    /* phase 0: receivers; 1..: processor stage k of every pipeline; last: exporters */
    size_t max_procs = 0;
    for (size_t p = 0; p < s->n_pipelines; p++)
        if (s->pipelines[p].n_processors > max_procs) max_procs = s->pipelines[p].n_processors;
    for (;;) {
        int phase = s->phase++;
        s->pending = 1; /* guard against synchronous completions */
        if (phase == 0) {
            for (size_t i = 0; i < s->n_receivers; i++)
                shutdown_one(s, s->receivers[i]);
        } else if ((size_t)phase <= max_procs) {
            for (size_t p = 0; p < s->n_pipelines; p++)
                if ((size_t)phase - 1 < s->pipelines[p].n_processors)
                    shutdown_one(s, s->pipelines[p].processors[phase - 1]);
        } else if ((size_t)phase == max_procs + 1) {
            uint64_t now = uv_now(s->loop);
            for (size_t i = 0; i < s->n_exporters; i++) {
                /* a persistent queue handed to a successor is left on disk at once, any other
                 * one drains */
                if (s->exporters[i])
                    s->exporters[i]->drain_deadline_ms =
                        s->quick_handover[i] ? now : now + s->shutdown_timeout_ms;
                shutdown_one(s, s->exporters[i]);
            }
        } else if ((size_t)phase == max_procs + 2) {
            for (size_t i = 0; i < s->n_extensions; i++)
                shutdown_one(s, s->extensions[i]);
        } else if ((size_t)phase == max_procs + 3) {
            if (s->metrics) {
                s->pending++;
                pc_metrics_server_stop(s->metrics, metrics_stopped, s);
                s->metrics = NULL;
            }
        } else {
            s->done(s->done_arg);
            return;
        }
        if (--s->pending) return; /* wait for component_down */
    }
}

static void drain_processors(pc_service *s)
{
    for (size_t p = 0; p < s->n_pipelines; p++)
        for (size_t i = 0; i < s->pipelines[p].n_processors; i++) {
            pc_component *c = s->pipelines[p].processors[i];
            if (c && c->type->drain) c->type->drain(c);
        }
}

void pc_service_shutdown(pc_service *s, void (*done)(void *arg), void *arg)
{
    s->done = done;
    s->done_arg = arg;
    s->phase = 0;
    s->cont = shutdown_phase;
    if (s->state != SVC_FAILED) s->state = SVC_STOPPING;
    drain_processors(s);
    uv_update_time(s->loop);
    PC_INFO(NULL, "shutting down");
    shutdown_phase(s);
}

void pc_service_free(pc_service *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_receivers; i++) {
        if (owned(s, s->receivers[i])) component_free(s->receivers[i]);
        for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++)
            pc_fanout_free(s->receiver_fanouts[i][sig]);
    }
    for (size_t p = 0; p < s->n_pipelines; p++) {
        pipeline *pl = &s->pipelines[p];
        if (!pl->borrowed) {
            for (size_t i = 0; i < pl->n_processors; i++)
                if (owned(s, pl->processors[i])) component_free(pl->processors[i]);
            pc_fanout_free(pl->exporters_fanout);
            free(pl->entry);
        }
        free(pl->processors);
        free(pl->name);
    }
    free(s->pipelines);
    for (size_t i = 0; i < s->n_exporters; i++)
        if (owned(s, s->exporters[i])) component_free(s->exporters[i]);
    for (size_t i = 0; i < s->n_extensions; i++)
        if (owned(s, s->extensions[i])) component_free(s->extensions[i]);
    for (size_t i = 0; i < s->n_retired; i++)
        component_free(s->retired[i]);
    for (size_t i = 0; i < s->n_reconf; i++) { /* a reload that never switched */
        pc_cfgtable_free(s->reconf[i]->type->cfg, s->reconf_cfg[i]);
        free(s->reconf_cfg[i]);
    }
    pc_node_free(s->root);
    free(s->metrics_address);
    free(s->kept);
    free(s);
}

/* ---- reload ---- */

bool pc_service_reload_changes(const pc_service *running, const pc_service *next)
{
    return !pc_node_equal(running->root, next->root);
}

typedef struct reload_job {
    pc_service *old, *next;
    uv_timer_t timer;
    uint64_t deadline;
    pc_reload_cb cb;
    void *arg;
} reload_job;

static void append_name(char *out, size_t n, const char *fmt, const char *a, const char *b)
{
    size_t len = strlen(out);
    if (len + 4 >= n) return;
    snprintf(out + len, n - len, "%s", len ? ", " : "");
    len = strlen(out);
    snprintf(out + len, n - len, fmt, a, b);
}

/* One line each for what restarts, what starts new and what stops. */
static void log_plan(pc_service *old, pc_service *next)
{
    char restart[1024] = "", stop[1024] = "", add[1024] = "";
    struct {
        const char *section;
        pc_component *const *a, *const *b;
        size_t na, nb;
    } kinds[] = {
        {"receivers", old->receivers, next->receivers, old->n_receivers, next->n_receivers},
        {"exporters", old->exporters, next->exporters, old->n_exporters, next->n_exporters},
        {"extensions", old->extensions, next->extensions, old->n_extensions, next->n_extensions},
    };
    for (size_t k = 0; k < N_OF(kinds); k++) {
        for (size_t i = 0; i < kinds[k].nb; i++) {
            pc_component *c = kinds[k].b[i];
            if (!owned(next, c)) continue;
            append_name(find_in(kinds[k].a, kinds[k].na, c->id) ? restart : add, sizeof restart,
                        "%s::%s", kinds[k].section, c->id);
        }
        for (size_t i = 0; i < kinds[k].na; i++) {
            pc_component *c = kinds[k].a[i];
            if (c && !find_in(kinds[k].b, kinds[k].nb, c->id))
                append_name(stop, sizeof stop, "%s::%s", kinds[k].section, c->id);
        }
    }
    for (size_t p = 0; p < next->n_pipelines; p++)
        if (!next->pipelines[p].borrowed && next->pipelines[p].n_processors)
            append_name(old_pipeline(old, next->pipelines[p].name) ? restart : add, sizeof restart,
                        "%s%s", "the processors of pipeline ", next->pipelines[p].name);
    char reconf[1024] = "";
    for (size_t i = 0; i < next->n_reconf; i++)
        append_name(reconf, sizeof reconf, "%s::%s",
                    next->reconf[i]->type->kind == PC_KIND_RECEIVER ? "receivers" : "exporters",
                    next->reconf[i]->id);
    if (*reconf) PC_INFO(NULL, "reload: reconfiguring %s in place", reconf);
    if (*restart) PC_INFO(NULL, "reload: restarting %s", restart);
    if (*add) PC_INFO(NULL, "reload: starting %s", add);
    if (*stop) PC_INFO(NULL, "reload: stopping %s", stop);
    if (!*restart && !*add && !*stop && !*reconf) PC_INFO(NULL, "reload: no component changed");
}

static void keep(pc_service *next, pc_component *c)
{
    next->kept = pc_xrealloc(next->kept, (next->n_kept + 1) * sizeof(pc_component *));
    next->kept[next->n_kept++] = c;
    c->host = &next->host;
}

/* The running service's pieces next borrowed become next's: next's from now on. */
static void take_over(pc_service *old, pc_service *next)
{
    pc_component **lists[] = {next->receivers, next->exporters, next->extensions};
    size_t ns[] = {next->n_receivers, next->n_exporters, next->n_extensions};
    pc_component **olists[] = {old->receivers, old->exporters, old->extensions};
    size_t ons[] = {old->n_receivers, old->n_exporters, old->n_extensions};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < ns[k]; i++) {
            pc_component *c = lists[k][i];
            if (!owned(old, c)) continue;
            for (size_t j = 0; j < ons[k]; j++)
                if (olists[k][j] == c) olists[k][j] = NULL;
            keep(next, c);
        }
    for (size_t p = 0; p < next->n_pipelines; p++) {
        pipeline *pl = &next->pipelines[p];
        if (!pl->borrowed) continue;
        pipeline *op = old_pipeline(old, pl->name);
        for (size_t i = 0; i < op->n_processors; i++) {
            if (op->processors[i]) keep(next, op->processors[i]);
            op->processors[i] = NULL;
        }
        op->exporters_fanout = NULL;
        op->entry = NULL;
        op->built = false;
        pl->entry->svc = next;
        pl->borrowed = false;
    }
    if (old->metrics && next->metrics_address && old->metrics_address &&
        !strcmp(old->metrics_address, next->metrics_address)) {
        next->metrics = old->metrics;
        old->metrics = NULL;
    }
    for (size_t i = 0; i < next->n_reconf; i++) { /* kept, with settings applied in place */
        pc_component *c = next->reconf[i];
        c->type->reconfigure(c, next->reconf_cfg[i]);
        pc_cfgtable_free(c->type->cfg, next->reconf_cfg[i]);
        free(next->reconf_cfg[i]);
    }
    next->n_reconf = 0;
    next->from = NULL;
}

static void timer_closed(uv_handle_t *h)
{
    free(h->data);
}

static void reload_free_old(uv_timer_t *t)
{
    reload_job *j = t->data;
    if (j->old->in_flight) return; /* a late answer still refers to it */
    uv_timer_stop(t);
    pc_service_free(j->old);
    PC_INFO(NULL, "reload: complete");
    j->cb(j->arg, PC_RELOAD_COMPLETE, NULL);
    uv_close((uv_handle_t *)t, timer_closed);
}

static void old_stopped(void *arg)
{
    reload_job *j = arg;
    pc_service *next = j->next;
    pc_error e = {0};
    /* exporters that waited for their predecessor's persistent queue start now */
    while (next->state == SVC_READY && next->n_waiting) {
        pc_component *c = next->waiting[0];
        if (c->type->start && c->type->start(c, &e) < 0) {
            pc_error_prefix(&e, "exporters::%s: ", c->id);
            next->state = SVC_FAILED;
            j->cb(j->arg, PC_RELOAD_FAILED, e.msg);
            break;
        }
        memmove(next->waiting, next->waiting + 1, --next->n_waiting * sizeof(pc_component *));
    }
    /* free the old service once nothing refers to it */
    uv_timer_start(&j->timer, reload_free_old, 0, 20);
}

/* The old service's remaining processors and exporters stop once the requests that entered
 * them were answered (or shutdown_timeout passed). */
static void wait_old_quiet(uv_timer_t *t)
{
    reload_job *j = t->data;
    pc_service *old = j->old;
    if (old->in_flight && uv_now(old->loop) < j->deadline) return;
    uv_timer_stop(t);
    old->done = old_stopped;
    old->done_arg = j;
    old->phase = 1; /* its receivers stopped (or moved) already */
    old->cont = shutdown_phase;
    old->state = SVC_STOPPING;
    shutdown_phase(old);
}

static void old_front_stopped(pc_service *old)
{
    reload_job *j = old->done_arg;
    pc_service *next = j->next;
    pc_error e = {0};
    take_over(old, next);
    telemetry_use(next);
    start_metrics(next);
    int rc = start_inner(next, &e);
    if (!rc) {
        /* the receivers kept switch to next's pipelines: their sockets stay open */
        for (size_t r = 0; r < next->n_receivers; r++) {
            pc_component *c = next->receivers[r];
            memcpy(c->route, next->routes[r], sizeof c->route);
            c->next = c->route[PC_SIGNAL_PROFILES];
        }
        rc = start_receivers(next, &e);
    }
    if (rc < 0) {
        next->state = SVC_FAILED;
        j->cb(j->arg, PC_RELOAD_FAILED, e.msg);
    } else {
        next->state = SVC_READY;
        PC_INFO(NULL,
                "reload: running the new config: %zu pipeline(s), %zu receiver(s), %zu "
                "exporter(s)",
                next->n_pipelines, next->n_receivers, next->n_exporters);
        j->cb(j->arg, PC_RELOAD_RUNNING, NULL);
    }
    /* what only the old service still has: flush its processors, then drain its exporters */
    drain_processors(old);
    j->deadline = uv_now(old->loop) + next->shutdown_timeout_ms;
    uv_timer_start(&j->timer, wait_old_quiet, 0, 20);
}

void pc_service_reload(pc_service *old, pc_service *next, pc_reload_cb cb, void *arg)
{
    reload_job *j = pc_xcalloc(1, sizeof *j);
    j->old = old;
    j->next = next;
    j->cb = cb;
    j->arg = arg;
    uv_timer_init(old->loop, &j->timer);
    j->timer.data = j;
    log_plan(old, next);
    for (size_t i = 0; i < old->n_exporters; i++)
        old->quick_handover[i] =
            old->exporters[i] && find_in(next->waiting, next->n_waiting, old->exporters[i]->id);
    /* first stop what holds a socket next may want: receivers and extensions not kept, and the
     * metrics endpoint when it moves */
    old->done_arg = j;
    old->cont = old_front_stopped;
    old->pending = 1;
    for (size_t i = 0; i < old->n_receivers + old->n_extensions; i++) {
        bool recv = i < old->n_receivers;
        pc_component **slot = recv ? &old->receivers[i] : &old->extensions[i - old->n_receivers];
        pc_component *c = *slot;
        if (!c || (recv ? find_in(next->receivers, next->n_receivers, c->id) == c
                        : find_in(next->extensions, next->n_extensions, c->id) == c))
            continue;
        *slot = NULL;
        old->retired[old->n_retired++] = c;
        shutdown_one(old, c);
    }
    if (old->metrics && (!next->metrics_address || !old->metrics_address ||
                         strcmp(old->metrics_address, next->metrics_address) != 0)) {
        old->pending++;
        pc_metrics_server_stop(old->metrics, metrics_stopped, old);
        old->metrics = NULL;
    }
    if (--old->pending == 0) old_front_stopped(old);
}

/* ---- status ---- */

static void status_list(pc_buf *out, const char *kind, pc_component *const *list, size_t n,
                        const char *status, int *first)
{
    for (size_t i = 0; i < n; i++) {
        if (!list[i]) continue;
        pc_buf_printf(out, "%s\"%s:%s\":{\"status\":\"%s\"}", *first ? "" : ",", kind, list[i]->id,
                      status);
        *first = 0;
    }
}

int pc_service_status_json(const pc_service *s, pc_buf *out)
{
    static const char *const names[] = {"StatusStarting", "StatusOK", "StatusStopping",
                                        "StatusPermanentError"};
    const char *st = names[s->state];
    pc_buf_printf(out, "{\"status\":\"%s\",\"healthy\":%s,\"components\":{", st,
                  s->state == SVC_READY ? "true" : "false");
    int first = 1;
    status_list(out, "receiver", s->receivers, s->n_receivers, st, &first);
    for (size_t p = 0; p < s->n_pipelines; p++)
        status_list(out, "processor", s->pipelines[p].processors, s->pipelines[p].n_processors, st,
                    &first);
    status_list(out, "exporter", s->exporters, s->n_exporters, st, &first);
    status_list(out, "extension", s->extensions, s->n_extensions, st, &first);
    pc_buf_printf(out, "}}");
    return s->state == SVC_READY;
}
