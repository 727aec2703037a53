/* Building the graph: every component's config checked, then extensions, pipelines (processor
 * chains and exporter fan-outs, taps included) and each receiver's routes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "sdk/auth.h"
#include "service/internal.h"

static const char *const top_keys[] = {"receivers",  "processors", "exporters",
                                       "extensions", "service",    "connectors"};
static const char *const service_keys[] = {"pipelines", "extensions", "telemetry",
                                           "shutdown_timeout"};
static const char *const pipeline_keys[] = {"receivers", "processors", "exporters"};

/* Validate every defined component's config, even unused ones (as the Collector does). Each
 * component's errors are reported; one bad component does not hide the next. */
int svc_validate_section(pc_service *s, const char *section, pc_kind kind, pc_error *err)
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
        svc_path_join(path, sizeof path, section, sec->keys[i]);
        const pc_component_type *t = svc_lookup_type(kind, sec->keys[i], sec->vals[i], path, err);
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
    const pc_node *def = svc_find_definition(s, section, id, at, path, err);
    if (!def || dry) return NULL;
    if (*n == MAX_COMPONENTS) {
        pc_cfg_errorf(err, at, path, "too many components");
        return NULL;
    }
    pc_component *c = svc_kept_instance(s, kind, id);
    char cpath[256];
    svc_path_join(cpath, sizeof cpath, section, id);
    if (c) svc_plan_reconfigure(s, c, section, def, cpath);
    if (!c) {
        c = svc_component_new(s, kind, id, def, cpath, NULL, err);
        /* a replaced exporter with a persistent queue takes it over: it starts once its
         * predecessor stopped and left the queue on disk */
        pc_component *old = c && kind == PC_KIND_EXPORTER && s->from
                                ? svc_find_in(s->from->exporters, s->from->n_exporters, id)
                                : NULL;
        if (old && svc_persistent_queue(old)) s->waiting[s->n_waiting++] = c;
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
    if (!svc_find_definition(s, section, id, NULL, NULL, NULL)) return NULL;
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
    svc_path_join(sub, sizeof sub, path, key);
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

/* Check one listed id without building: defined, and of a type that serves sig. */
static int check_ref(pc_service *s, pc_kind kind, const char *section, const pc_node *id,
                     pc_signal sig, const char *path, pc_error *err)
{
    if (id->kind != PC_NODE_SCALAR) return 0; /* id_list reported it */
    if (kind != PC_KIND_PROCESSOR && svc_is_connector(s, id->scalar)) return 0;
    const pc_component_type *t = defined_type(s, kind, section, id->scalar);
    if (!svc_find_definition(s, section, id->scalar, id, path, err) ||
        (t && check_signal(NULL, t, sig, id, path, err)))
        return PC_EINVAL;
    return 0;
}

static int check_refs(pc_service *s, pc_kind kind, const char *section, const pc_node *list,
                      pc_signal sig, const char *path, pc_error *err)
{
    int rc = 0;
    for (size_t i = 0; list && i < list->n; i++)
        if (check_ref(s, kind, section, list->vals[i], sig, path, err)) rc = PC_EINVAL;
    return rc;
}

/* An unchanged pipeline: take the running one's processors, fan-out and entry. */
static int borrow_pipeline(pc_service *s, pipeline *pl, size_t np, int rc)
{
    pipeline *op = svc_old_pipeline(s->from, pl->name);
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

/* The processors of pl, back to front so each knows its next consumer (next: the exporters;
 * NULL when their checks failed: the processors are still checked, no chain is built). */
static int build_chain(pc_service *s, pipeline *pl, const pc_node *procs, pc_consumer *next,
                       const char *path, pc_error *err)
{
    int rc = next ? 0 : PC_EINVAL;
    size_t np = procs ? procs->n : 0;
    pl->processors = pc_xcalloc(np ? np : 1, sizeof(pc_component *));
    pl->n_processors = np; /* slots fill back to front; a failed build leaves NULLs */
    for (size_t k = np; k-- > 0;) {
        const char *id = procs->vals[k]->scalar;
        const pc_node *def = svc_find_definition(s, "processors", id, procs->vals[k], path, err);
        char cpath[256], log_id[256];
        svc_path_join(cpath, sizeof cpath, "processors", id);
        snprintf(log_id, sizeof log_id, "%s in %s", id, pl->name);
        pc_component *c =
            def ? svc_component_new(s, PC_KIND_PROCESSOR, id, def, cpath, log_id, err) : NULL;
        if (!c) {
            rc = PC_EINVAL;
            continue;
        }
        c->next = next;
        c->self.wire_ok = c->type->wire_through && next && next->wire_ok;
        if (check_signal(c, c->type, pl->signal, procs->vals[k], path, err)) {
            svc_component_free(c);
            rc = PC_EINVAL;
            continue;
        }
        pl->processors[k] = c;
        next = &c->self;
    }
    if (rc) return rc;
    pl->first = next;
    pl->entry = svc_entry_new(s, next);
    pl->built = true;
    return 0;
}

static int build_pipeline(pc_service *s, pipeline *pl, const pc_node *p, const char *path, bool dry,
                          bool keep, pc_error *err)
{
    int rc = svc_check_keys(p, pipeline_keys, N_OF(pipeline_keys), path, err);
    const pc_node *recv, *procs, *exps;
    if (id_list(p, "receivers", path, &recv, err)) rc = PC_EINVAL;
    if (id_list(p, "processors", path, &procs, err)) rc = PC_EINVAL;
    if (id_list(p, "exporters", path, &exps, err)) rc = PC_EINVAL;
    dry = dry || rc;
    if (!recv || recv->n == 0)
        rc = pc_cfg_errorf(err, p, path, "pipeline must have at least one receiver");
    if (!exps || exps->n == 0)
        rc = pc_cfg_errorf(err, p, path, "pipeline must have at least one exporter");
    if (dry) { /* errors were found already: only check references, build nothing */
        if (check_refs(s, PC_KIND_PROCESSOR, "processors", procs, pl->signal, path, err) ||
            check_refs(s, PC_KIND_EXPORTER, "exporters", exps, pl->signal, path, err))
            rc = PC_EINVAL;
        return rc;
    }
    if (rc) return rc;
    pc_consumer *targets[2 * MAX_COMPONENTS];
    size_t n = 0;
    for (size_t i = 0; i < exps->n; i++) {
        const char *id = exps->vals[i]->scalar;
        if (svc_is_connector(s, id)) { /* its nodes for this signal (checked before) */
            n += svc_connector_targets(s, id, pl->signal, targets + n);
            continue;
        }
        pc_component *c = shared_instance(s, PC_KIND_EXPORTER, id, exps->vals[i], path, false, err);
        if (!c || check_signal(c, c->type, pl->signal, exps->vals[i], path, err)) {
            rc = PC_EINVAL;
            continue;
        }
        targets[n++] = &c->self;
    }
    if (keep) return borrow_pipeline(s, pl, procs ? procs->n : 0, rc);
    pc_consumer *next = NULL;
    if (!rc) {
        n += add_taps(s, pl->signal, targets + n);
        next = targets[0];
        if (n > 1) next = pl->exporters_fanout = pc_fanout_new(targets, n);
    }
    return build_chain(s, pl, procs, next, path, err);
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
                if (svc_lists(pls->vals[i], "receivers", rc->id))
                    targets[n++] = &s->pipelines[i].entry->base;
            }
            if (n == 1) {
                s->routes[r][sig] = targets[0];
            } else if (n > 1) {
                s->receiver_fanouts[r][sig] = pc_fanout_new(targets, n);
                s->routes[r][sig] = s->receiver_fanouts[r][sig];
            }
        }
        if (svc_owned(s, rc)) {
            memcpy(rc->route, s->routes[r], sizeof rc->route);
            rc->next = rc->route[PC_SIGNAL_PROFILES];
        }
    }
}

int svc_build_pipelines(pc_service *s, bool dry, pc_error *err)
{
    const pc_node *svc = pc_node_get(s->root, "service");
    int rc = svc_check_keys(svc, service_keys, N_OF(service_keys), "service", err);
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
    if (svc_check_connectors(s, pls, err)) dry = true, rc = PC_EINVAL;
    if (!dry && svc_build_connectors(s, err)) dry = true, rc = PC_EINVAL;
    if (s->from && !dry) svc_plan_pipelines(s, pls, keep);
    s->pipelines = pc_xcalloc(pls->n, sizeof(pipeline));
    for (size_t i = 0; i < pls->n; i++) {
        const char *name = pls->keys[i];
        char path[256];
        svc_path_join(path, sizeof path, "service::pipelines", name);
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
    /* receivers: one instance per id, fanning out to every pipeline that svc_lists it */
    for (size_t i = 0; i < pls->n; i++) {
        const pc_node *recv = pc_node_get(pls->vals[i], "receivers");
        char path[256];
        svc_path_join(path, sizeof path, "service::pipelines", pls->keys[i]);
        size_t sl = strcspn(pls->keys[i], "/");
        pc_signal sig;
        if (!recv || recv->kind != PC_NODE_SEQ || pc_signal_parse(pls->keys[i], sl, &sig)) continue;
        for (size_t j = 0; j < recv->n; j++) {
            if (recv->vals[j]->kind != PC_NODE_SCALAR) continue;
            const char *id = recv->vals[j]->scalar;
            if (svc_is_connector(s, id)) continue; /* svc_check_connectors */
            if (dry || rc) {
                if (check_ref(s, PC_KIND_RECEIVER, "receivers", recv->vals[j], sig, path, err))
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
    if (svc_wire_connectors(s, pls, err)) return PC_EINVAL;
    svc_order_pipelines(s, pls);
    return 0;
}

/* ---- extensions ---- */

/* service.extensions: instances of extensions defined in the top-level section. */
int svc_build_extensions(pc_service *s, bool dry, pc_error *err)
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
            svc_find_definition(s, "extensions", id->scalar, id, "service::extensions", err);
        if (!def) {
            rc = PC_EINVAL;
            continue;
        }
        if (dry || rc) continue;
        if (s->n_extensions == MAX_COMPONENTS)
            return pc_cfg_errorf(err, id, "service::extensions", "too many components");
        pc_component *c = svc_kept_extension(s, id->scalar);
        if (!c) {
            char path[256];
            svc_path_join(path, sizeof path, "extensions", id->scalar);
            c = svc_component_new(s, PC_KIND_EXTENSION, id->scalar, def, path, NULL, err);
        }
        if (!c) {
            rc = PC_EINVAL;
            continue;
        }
        s->extensions[s->n_extensions++] = c;
    }
    return rc;
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
        svc_path_join(sub, sizeof sub, path, n->keys[i]);
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

int svc_check_authenticators(pc_service *s, pc_error *err)
{
    int rc = 0;
    for (size_t i = 0; i < s->n_receivers + s->n_exporters; i++) {
        bool server = i < s->n_receivers;
        pc_component *c = server ? s->receivers[i] : s->exporters[i - s->n_receivers];
        const char *section = server ? "receivers" : "exporters";
        char path[300];
        svc_path_join(path, sizeof path, section, c->id);
        if (check_auth_refs(s, pc_node_get(pc_node_get(s->root, section), c->id), path, server,
                            err))
            rc = PC_EINVAL;
    }
    /* extensions that serve HTTP of their own (profilez) check requests as receivers do */
    for (size_t i = 0; i < s->n_extensions; i++) {
        pc_component *c = s->extensions[i];
        char path[300];
        if (!c || c->type->authenticator) continue;
        svc_path_join(path, sizeof path, "extensions", c->id);
        if (check_auth_refs(s, pc_node_get(pc_node_get(s->root, "extensions"), c->id), path, true,
                            err))
            rc = PC_EINVAL;
    }
    return rc;
}

/* Sections of the Collector profcol has nothing for, and the shape of the ones it has. */
int svc_check_sections(pc_service *s, pc_error *err)
{
    int rc = svc_check_keys(s->root, top_keys, N_OF(top_keys), "", err);
    const pc_node *svc = pc_node_get(s->root, "service");
    if (svc && svc->kind != PC_NODE_MAP && svc->kind != PC_NODE_NULL) {
        pc_cfg_errorf(err, svc, "service", "must be a mapping");
        rc = PC_EINVAL;
    }
    return rc;
}
