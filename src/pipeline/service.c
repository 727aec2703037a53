/* Graph building (DESIGN §1): receivers and exporters are one instance per id shared by every
 * pipeline that lists them; processors are instantiated per pipeline. */
#include "pipeline/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extensions/auth.h"
#include "net/url.h"
#include "pipeline/component.h"
#include "pipeline/log.h"
#include "pipeline/sender.h"
#include "pipeline/telemetry.h"

#define MAX_COMPONENTS 256

typedef struct pipeline {
    char *name; /* "profiles" or "profiles/x", "traces", ... */
    pc_signal signal;
    pc_component **processors; /* own instances */
    size_t n_processors;
    pc_consumer *exporters_fanout; /* NULL when a single exporter */
    pc_consumer *first;            /* where receivers hand data to this pipeline */
} pipeline;

struct pc_service {
    uv_loop_t *loop;
    pc_node *root;
    pc_component *receivers[MAX_COMPONENTS], *exporters[MAX_COMPONENTS];
    pc_component *extensions[MAX_COMPONENTS];
    size_t n_receivers, n_exporters, n_extensions;
    enum { SVC_STARTING, SVC_READY, SVC_STOPPING, SVC_FAILED } state;
    pipeline *pipelines;
    size_t n_pipelines;
    pc_consumer *receiver_fanouts[MAX_COMPONENTS][PC_SIGNAL_COUNT];
    char *metrics_address; /* NULL: metrics not served */
    uint64_t shutdown_timeout_ms;
    pc_metrics_server *metrics;
    /* shutdown state */
    size_t pending;
    int phase;
    void (*done)(void *);
    void *done_arg;
};

static pc_component *as_component(pc_consumer *self)
{
    return (pc_component *)((char *)self - offsetof(pc_component, self));
}

static void component_consume(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg)
{
    pc_component *c = as_component(self);
    c->type->consume(c, b, done, arg);
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
                                            const char *path, pc_cfg_err *err)
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
                                   const char *path, const char *log_id, pc_cfg_err *err)
{
    const pc_component_type *t = lookup_type(kind, id, node, path, err);
    if (!t) return NULL;
    pc_component *c = pc_xcalloc(1, sizeof(*c));
    c->type = t;
    c->id = pc_xstrdup(log_id ? log_id : id);
    c->loop = s->loop;
    c->host = s;
    c->cfg = pc_xcalloc(1, t->cfg_size ? t->cfg_size : 1);
    c->self.consume = component_consume;
    c->self.mutates = t->mutates;
    if (pc_cfgtable_apply(t->cfg, c->cfg, node, path, err) ||
        (t->validate && t->validate(c->cfg, node, path, err)) || (t->create && t->create(c, err))) {
        component_free(c);
        return NULL;
    }
    return c;
}

static const char *const top_keys[] = {"receivers", "processors", "exporters", "extensions",
                                       "service"};
static const char *const service_keys[] = {"pipelines", "extensions", "telemetry",
                                           "shutdown_timeout"};
static const char *const pipeline_keys[] = {"receivers", "processors", "exporters"};

static int check_keys(const pc_node *map, const char *const *allowed, size_t n, const char *path,
                      pc_cfg_err *err)
{
    if (!map) return 0;
    if (map->kind == PC_NODE_NULL) return 0;
    if (map->kind != PC_NODE_MAP) {
        pc_cfg_errorf(err, map, path, "must be a mapping");
        return -1;
    }
    for (size_t i = 0; i < map->n; i++) {
        size_t j = 0;
        while (j < n && strcmp(map->keys[i], allowed[j]) != 0)
            j++;
        if (j < n) continue;
        const char *close = pc_closest(map->keys[i], allowed, n);
        char sub[256];
        if (snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "::" : "", map->keys[i]) >=
            (int)sizeof sub)
            sub[sizeof sub - 1] = 0; /* a truncated path still locates the key */
        pc_cfg_errorf(err, map->vals[i], sub, "unknown key \"%s\"%s%s%s", map->keys[i],
                      close ? " (did you mean \"" : "", close ? close : "", close ? "\"?)" : "");
        return -1;
    }
    return 0;
}

/* Validate every defined component's config, even unused ones (as the Collector does). */
static int validate_section(pc_service *s, const char *section, pc_kind kind, pc_cfg_err *err)
{
    const pc_node *sec = pc_node_get(s->root, section);
    if (!sec || sec->kind == PC_NODE_NULL) return 0;
    if (sec->kind != PC_NODE_MAP) {
        pc_cfg_errorf(err, sec, section, "must be a mapping of component ids");
        return -1;
    }
    for (size_t i = 0; i < sec->n; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s::%s", section, sec->keys[i]);
        const pc_component_type *t = lookup_type(kind, sec->keys[i], sec->vals[i], path, err);
        if (!t) return -1;
        void *cfg = pc_xcalloc(1, t->cfg_size ? t->cfg_size : 1);
        int rc = pc_cfgtable_apply(t->cfg, cfg, sec->vals[i], path, err);
        if (!rc && t->validate) rc = t->validate(cfg, sec->vals[i], path, err);
        pc_cfgtable_free(t->cfg, cfg);
        free(cfg);
        if (rc) return -1;
    }
    return 0;
}

static const pc_node *find_definition(pc_service *s, const char *section, const char *id,
                                      const pc_node *at, const char *path, pc_cfg_err *err)
{
    const pc_node *sec = pc_node_get(s->root, section);
    if (sec && sec->kind == PC_NODE_MAP)
        for (size_t i = 0; i < sec->n; i++)
            if (strcmp(sec->keys[i], id) == 0) return sec->vals[i];
    pc_cfg_errorf(err, at, path, "%s \"%s\" is not defined in the top-level \"%s\" section",
                  section, id, section);
    return NULL;
}

/* The shared instance of a receiver or exporter id, created on first use. */
static pc_component *shared_instance(pc_service *s, pc_kind kind, const char *id, const pc_node *at,
                                     const char *path, pc_cfg_err *err)
{
    pc_component **list = kind == PC_KIND_RECEIVER ? s->receivers : s->exporters;
    size_t *n = kind == PC_KIND_RECEIVER ? &s->n_receivers : &s->n_exporters;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(list[i]->id, id) == 0) return list[i];
    const char *section = kind == PC_KIND_RECEIVER ? "receivers" : "exporters";
    const pc_node *def = find_definition(s, section, id, at, path, err);
    if (!def) return NULL;
    if (*n == MAX_COMPONENTS) {
        pc_cfg_errorf(err, at, path, "too many components");
        return NULL;
    }
    char cpath[256];
    snprintf(cpath, sizeof cpath, "%s::%s", section, id);
    pc_component *c = component_new(s, kind, id, def, cpath, NULL, err);
    if (c) list[(*n)++] = c;
    return c;
}

/* A pipeline of a signal the component does not handle is refused, naming what it handles. */
static int check_signal(const pc_component *c, const pipeline *pl, const pc_node *at,
                        const char *path, pc_cfg_err *err)
{
    if (pc_component_type_supports(c->type, pl->signal)) {
        char e[256];
        if (!c->type->check_signal || !c->type->check_signal(c, pl->signal, e, sizeof e)) return 0;
        pc_cfg_errorf(err, at, path, "%s \"%s\" cannot serve %s pipelines: %s",
                      pc_kind_name(c->type->kind), c->id, pc_signal_infos[pl->signal].name, e);
        return -1;
    }
    char list[64] = "";
    for (int s = 0; s < PC_SIGNAL_COUNT; s++)
        if (pc_component_type_supports(c->type, (pc_signal)s))
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "",
                     pc_signal_infos[s].name);
    pc_cfg_errorf(err, at, path, "%s \"%s\" does not support %s pipelines (only: %s)",
                  pc_kind_name(c->type->kind), c->type->name, pc_signal_infos[pl->signal].name,
                  list);
    return -1;
}

static const pc_node *id_list(const pc_node *p, const char *key, const char *path, pc_cfg_err *err)
{
    const pc_node *l = pc_node_get(p, key);
    if (!l || l->kind == PC_NODE_NULL) return NULL;
    if (l->kind != PC_NODE_SEQ) {
        pc_cfg_errorf(err, l, path, "%s must be a list of component ids", key);
        return NULL;
    }
    for (size_t i = 0; i < l->n; i++) {
        if (l->vals[i]->kind != PC_NODE_SCALAR) {
            pc_cfg_errorf(err, l->vals[i], path, "%s must be a list of component ids", key);
            return NULL;
        }
    }
    return l;
}

static int build_pipeline(pc_service *s, pipeline *pl, const pc_node *p, const char *path,
                          pc_cfg_err *err)
{
    if (check_keys(p, pipeline_keys, 3, path, err)) return -1;
    const pc_node *recv = id_list(p, "receivers", path, err);
    const pc_node *procs = id_list(p, "processors", path, err);
    const pc_node *exps = id_list(p, "exporters", path, err);
    if (err->msg[0]) return -1;
    if (!recv || recv->n == 0) {
        pc_cfg_errorf(err, p, path, "pipeline must have at least one receiver");
        return -1;
    }
    if (!exps || exps->n == 0) {
        pc_cfg_errorf(err, p, path, "pipeline must have at least one exporter");
        return -1;
    }
    pc_consumer *targets[MAX_COMPONENTS];
    for (size_t i = 0; i < exps->n; i++) {
        for (size_t j = 0; j < i; j++)
            if (!strcmp(exps->vals[i]->scalar, exps->vals[j]->scalar)) {
                pc_cfg_errorf(err, exps->vals[i], path, "exporter \"%s\" listed twice",
                              exps->vals[i]->scalar);
                return -1;
            }
        pc_component *c =
            shared_instance(s, PC_KIND_EXPORTER, exps->vals[i]->scalar, exps->vals[i], path, err);
        if (!c || check_signal(c, pl, exps->vals[i], path, err)) return -1;
        targets[i] = &c->self;
    }
    pc_consumer *next = targets[0];
    if (exps->n > 1) next = pl->exporters_fanout = pc_fanout_new(targets, exps->n);
    size_t np = procs ? procs->n : 0;
    pl->processors = pc_xcalloc(np ? np : 1, sizeof(pc_component *));
    pl->n_processors = np; /* slots fill back to front; a failed build leaves NULLs */
    /* build back to front so each processor knows its next consumer */
    for (size_t k = np; k-- > 0;) {
        const char *id = procs->vals[k]->scalar;
        const pc_node *def = find_definition(s, "processors", id, procs->vals[k], path, err);
        if (!def) return -1;
        char cpath[256], log_id[256];
        snprintf(cpath, sizeof cpath, "processors::%s", id);
        snprintf(log_id, sizeof log_id, "%s in %s", id, pl->name);
        pc_component *c = component_new(s, PC_KIND_PROCESSOR, id, def, cpath, log_id, err);
        if (!c) return -1;
        c->next = next;
        if (check_signal(c, pl, procs->vals[k], path, err)) {
            component_free(c);
            return -1;
        }
        pl->processors[k] = c;
        next = &c->self;
    }
    pl->first = next;
    return 0;
}

static int build_pipelines(pc_service *s, pc_cfg_err *err)
{
    const pc_node *svc = pc_node_get(s->root, "service");
    if (check_keys(svc, service_keys, 4, "service", err)) return -1;
    const pc_node *st = pc_node_get(svc, "shutdown_timeout");
    if (st &&
        (st->kind != PC_NODE_SCALAR || pc_parse_duration_ms(st->scalar, &s->shutdown_timeout_ms))) {
        pc_cfg_errorf(err, st, "service::shutdown_timeout", "not a duration (e.g. 30s)");
        return -1;
    }
    const pc_node *pls = pc_node_get(svc, "pipelines");
    if (!pls || pls->kind != PC_NODE_MAP || pls->n == 0) {
        pc_cfg_errorf(err,
                      pls   ? pls
                      : svc ? svc
                            : s->root,
                      "service::pipelines",
                      "at least one pipeline is required (service: pipelines: profiles: ...)");
        return -1;
    }
    s->pipelines = pc_xcalloc(pls->n, sizeof(pipeline));
    for (size_t i = 0; i < pls->n; i++) {
        const char *name = pls->keys[i];
        char path[256];
        snprintf(path, sizeof path, "service::pipelines::%s", name);
        size_t sl = strcspn(name, "/");
        pc_signal sig;
        if (pc_signal_parse(name, sl, &sig) || (name[sl] == '/' && !name[sl + 1])) {
            pc_cfg_errorf(err, pls->vals[i], path,
                          "unknown pipeline \"%s\" (want profiles, traces, metrics or logs, "
                          "optionally followed by /<name>)",
                          name);
            return -1;
        }
        pipeline *pl = &s->pipelines[s->n_pipelines++];
        pl->name = pc_xstrdup(name);
        pl->signal = sig;
        if (build_pipeline(s, pl, pls->vals[i], path, err)) return -1;
    }
    /* receivers: one instance per id, fanning out to every pipeline that lists it */
    for (size_t i = 0; i < pls->n; i++) {
        const pc_node *recv = pc_node_get(pls->vals[i], "receivers");
        char path[256];
        snprintf(path, sizeof path, "service::pipelines::%s", pls->keys[i]);
        for (size_t j = 0; j < recv->n; j++) {
            pc_component *c = shared_instance(s, PC_KIND_RECEIVER, recv->vals[j]->scalar,
                                              recv->vals[j], path, err);
            if (!c || check_signal(c, &s->pipelines[i], recv->vals[j], path, err)) return -1;
        }
    }
    /* each receiver hands each signal to every pipeline of that signal that lists it */
    for (size_t r = 0; r < s->n_receivers; r++) {
        pc_component *rc = s->receivers[r];
        for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
            pc_consumer *targets[MAX_COMPONENTS];
            size_t n = 0;
            for (size_t i = 0; i < pls->n; i++) {
                if (s->pipelines[i].signal != (pc_signal)sig) continue;
                const pc_node *recv = pc_node_get(pls->vals[i], "receivers");
                for (size_t j = 0; j < recv->n; j++)
                    if (!strcmp(recv->vals[j]->scalar, rc->id)) {
                        targets[n++] = s->pipelines[i].first;
                        break;
                    }
            }
            if (n == 1) {
                rc->route[sig] = targets[0];
            } else if (n > 1) {
                s->receiver_fanouts[r][sig] = pc_fanout_new(targets, n);
                rc->route[sig] = s->receiver_fanouts[r][sig];
            }
        }
        rc->next = rc->route[PC_SIGNAL_PROFILES];
    }
    return 0;
}

static const char *const telemetry_keys[] = {"logs", "metrics"};
static const char *const metrics_keys[] = {"address", "level"};

static int apply_telemetry(pc_service *s, pc_cfg_err *err)
{
    const pc_node *tel = pc_node_get(pc_node_get(s->root, "service"), "telemetry");
    const pc_node *lvl = pc_node_get(pc_node_get(tel, "logs"), "level");
    if (lvl && lvl->kind == PC_NODE_SCALAR) {
        pc_log_level l;
        if (pc_log_parse_level(lvl->scalar, &l)) {
            pc_cfg_errorf(err, lvl, "service::telemetry::logs::level",
                          "\"%s\" is not one of: debug, info, warn, error", lvl->scalar);
            return -1;
        }
        pc_log_set_level(l);
    }
    if (check_keys(tel, telemetry_keys, 2, "service::telemetry", err)) return -1;
    const pc_node *met = pc_node_get(tel, "metrics");
    if (check_keys(met, metrics_keys, 2, "service::telemetry::metrics", err)) return -1;
    const pc_node *addr = pc_node_get(met, "address");
    const pc_node *mlvl = pc_node_get(met, "level");
    s->metrics_address = pc_xstrdup("localhost:8888");
    if (addr && addr->kind == PC_NODE_SCALAR) {
        char host[256], e[256];
        int port;
        if (pc_hostport_parse(addr->scalar, host, sizeof host, &port, e, sizeof e)) {
            pc_cfg_errorf(err, addr, "service::telemetry::metrics::address", "%s", e);
            return -1;
        }
        free(s->metrics_address);
        s->metrics_address = pc_xstrdup(addr->scalar);
    }
    if (mlvl && mlvl->kind == PC_NODE_SCALAR && !strcmp(mlvl->scalar, "none")) {
        free(s->metrics_address);
        s->metrics_address = NULL;
    }
    return 0;
}

/* service.extensions: instances of extensions defined in the top-level section. */
static int build_extensions(pc_service *s, pc_cfg_err *err)
{
    const pc_node *list = pc_node_get(pc_node_get(s->root, "service"), "extensions");
    if (!list || list->kind == PC_NODE_NULL) return 0;
    if (list->kind != PC_NODE_SEQ) {
        pc_cfg_errorf(err, list, "service::extensions", "must be a list of extension ids");
        return -1;
    }
    for (size_t i = 0; i < list->n; i++) {
        const pc_node *id = list->vals[i];
        if (id->kind != PC_NODE_SCALAR) {
            pc_cfg_errorf(err, id, "service::extensions", "must be a list of extension ids");
            return -1;
        }
        const pc_node *def =
            find_definition(s, "extensions", id->scalar, id, "service::extensions", err);
        if (!def) return -1;
        if (s->n_extensions == MAX_COMPONENTS) return -1;
        char path[256];
        snprintf(path, sizeof path, "extensions::%s", id->scalar);
        pc_component *c = component_new(s, PC_KIND_EXTENSION, id->scalar, def, path, NULL, err);
        if (!c) return -1;
        s->extensions[s->n_extensions++] = c;
    }
    return 0;
}

pc_component *pc_service_extension(pc_service *s, const char *id)
{
    for (size_t i = 0; i < s->n_extensions; i++)
        if (strcmp(s->extensions[i]->id, id) == 0) return s->extensions[i];
    return NULL;
}

/* Every `auth: authenticator: <id>` below a component (at any depth, e.g. the otlp receiver's
 * protocols::http::auth) must name an enabled authenticator extension that fits the side. */
static int check_auth_refs(pc_service *s, const pc_node *n, const char *path, bool server,
                           pc_cfg_err *err)
{
    if (!n || n->kind != PC_NODE_MAP) return 0;
    for (size_t i = 0; i < n->n; i++) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s::%s", path, n->keys[i]);
        const pc_node *id = pc_node_get(n->vals[i], "authenticator");
        if (strcmp(n->keys[i], "auth") == 0 && id && id->kind == PC_NODE_SCALAR) {
            char e[400];
            pc_component *ext = pc_service_extension(s, id->scalar);
            const pc_node *def = pc_node_get(pc_node_get(s->root, "extensions"), id->scalar);
            if (!ext)
                snprintf(e, sizeof e, "extension \"%s\" %s", id->scalar,
                         def ? "is defined but not enabled: list it in service::extensions"
                             : "is not defined in the top-level \"extensions\" section");
            if (!ext || pc_auth_usable(ext, server, e, sizeof e)) {
                strncat(sub, "::authenticator", sizeof sub - strlen(sub) - 1);
                pc_cfg_errorf(err, id, sub, "%s", e);
                return -1;
            }
        } else if (check_auth_refs(s, n->vals[i], sub, server, err)) {
            return -1;
        }
    }
    return 0;
}

static int check_authenticators(pc_service *s, pc_cfg_err *err)
{
    for (size_t i = 0; i < s->n_receivers + s->n_exporters; i++) {
        bool server = i < s->n_receivers;
        pc_component *c = server ? s->receivers[i] : s->exporters[i - s->n_receivers];
        const char *section = server ? "receivers" : "exporters";
        char path[300];
        snprintf(path, sizeof path, "%s::%s", section, c->id);
        if (check_auth_refs(s, pc_node_get(pc_node_get(s->root, section), c->id), path, server,
                            err))
            return -1;
    }
    return 0;
}

pc_service *pc_service_new(uv_loop_t *loop, pc_node *root, pc_cfg_err *err)
{
    pc_service *s = pc_xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->root = root;
    s->shutdown_timeout_ms = 30000;
    err->msg[0] = 0;
    const pc_node *ext = pc_node_get(root, "extensions");
    if (check_keys(root, top_keys, 5, "", err) || apply_telemetry(s, err) ||
        validate_section(s, "receivers", PC_KIND_RECEIVER, err) ||
        validate_section(s, "processors", PC_KIND_PROCESSOR, err) ||
        validate_section(s, "exporters", PC_KIND_EXPORTER, err) ||
        validate_section(s, "extensions", PC_KIND_EXTENSION, err) || build_pipelines(s, err) ||
        build_extensions(s, err) || check_authenticators(s, err)) {
        pc_service_free(s);
        return NULL;
    }
    (void)ext;
    return s;
}

int pc_service_start(pc_service *s, char *err, size_t errlen)
{
    char e[512];
    if (s->metrics_address) {
        /* a busy metrics port must not take the data path down with it */
        s->metrics = pc_metrics_server_start(s->loop, s->metrics_address, e, sizeof e);
        if (!s->metrics) PC_WARN(NULL, "self-metrics not served: %s", e);
    }
    for (size_t i = 0; i < s->n_extensions; i++) {
        pc_component *c = s->extensions[i];
        if (c->type->start && c->type->start(c, e, sizeof e)) {
            snprintf(err, errlen, "extensions::%s: %s", c->id, e);
            s->state = SVC_FAILED;
            return -1;
        }
    }
    for (size_t i = 0; i < s->n_exporters; i++) {
        pc_component *c = s->exporters[i];
        if (c->type->start && c->type->start(c, e, sizeof e)) {
            snprintf(err, errlen, "exporters::%s: %s", c->id, e);
            s->state = SVC_FAILED;
            return -1;
        }
    }
    for (size_t p = 0; p < s->n_pipelines; p++)
        for (size_t i = 0; i < s->pipelines[p].n_processors; i++) {
            pc_component *c = s->pipelines[p].processors[i];
            if (c->type->start && c->type->start(c, e, sizeof e)) {
                snprintf(err, errlen, "processors::%s: %s", c->id, e);
                s->state = SVC_FAILED;
                return -1;
            }
        }
    for (size_t i = 0; i < s->n_receivers; i++) {
        pc_component *c = s->receivers[i];
        if (c->type->start && c->type->start(c, e, sizeof e)) {
            snprintf(err, errlen, "receivers::%s: %s", c->id, e);
            s->state = SVC_FAILED;
            return -1;
        }
    }
    s->state = SVC_READY;
    PC_INFO(NULL, "everything is ready: %zu pipeline(s), %zu receiver(s), %zu exporter(s)",
            s->n_pipelines, s->n_receivers, s->n_exporters);
    return 0;
}

/* Shutdown phases: receivers, then processors pipeline by pipeline in chain order, then
 * exporters. Each phase waits for every component's done callback. */
static void shutdown_phase(pc_service *s);

static pc_service *g_shutting; /* components report back through a plain callback */

static void component_down(pc_component *c)
{
    (void)c;
    pc_service *s = g_shutting;
    if (--s->pending == 0) shutdown_phase(s);
}

static void metrics_stopped(void *arg)
{
    pc_service *s = arg;
    if (--s->pending == 0) shutdown_phase(s);
}

static void shutdown_one(pc_service *s, pc_component *c)
{
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
            for (size_t i = 0; i < s->n_exporters; i++)
                shutdown_one(s, s->exporters[i]);
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
            g_shutting = NULL;
            s->done(s->done_arg);
            return;
        }
        if (--s->pending) return; /* wait for component_down */
    }
}

void pc_service_shutdown(pc_service *s, void (*done)(void *arg), void *arg)
{
    s->done = done;
    s->done_arg = arg;
    s->phase = 0;
    if (s->state != SVC_FAILED) s->state = SVC_STOPPING;
    for (size_t p = 0; p < s->n_pipelines; p++)
        for (size_t i = 0; i < s->pipelines[p].n_processors; i++) {
            pc_component *c = s->pipelines[p].processors[i];
            if (c && c->type->drain) c->type->drain(c);
        }
    uv_update_time(s->loop);
    pc_shutdown_deadline_ms = uv_now(s->loop) + s->shutdown_timeout_ms;
    g_shutting = s;
    PC_INFO(NULL, "shutting down");
    shutdown_phase(s);
}

void pc_service_free(pc_service *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_receivers; i++) {
        component_free(s->receivers[i]);
        for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++)
            pc_fanout_free(s->receiver_fanouts[i][sig]);
    }
    for (size_t p = 0; p < s->n_pipelines; p++) {
        pipeline *pl = &s->pipelines[p];
        for (size_t i = 0; i < pl->n_processors; i++)
            component_free(pl->processors[i]);
        free(pl->processors);
        pc_fanout_free(pl->exporters_fanout);
        free(pl->name);
    }
    free(s->pipelines);
    for (size_t i = 0; i < s->n_exporters; i++)
        component_free(s->exporters[i]);
    for (size_t i = 0; i < s->n_extensions; i++)
        component_free(s->extensions[i]);
    pc_node_free(s->root);
    free(s->metrics_address);
    free(s);
}

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
