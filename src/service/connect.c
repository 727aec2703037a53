/* Connectors in the graph (the Collector's service/internal/graph): which ones are used, on which
 * signal pairs, whether the pipelines they join make a cycle, their instances (one per exporter
 * signal, receiver signal and id) and their routers (the pipelines each one feeds). The checks
 * give the Collector's own error texts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "service/internal.h"

bool svc_is_connector(pc_service *s, const char *id)
{
    return svc_find_definition(s, "connectors", id, NULL, NULL, NULL) != NULL;
}

/* The signal of pipeline name ("profiles/x"); false for a name the pipeline build refuses. */
static bool pipeline_signal(const char *name, pc_signal *sig)
{
    size_t sl = strcspn(name, "/");
    return !pc_signal_parse(name, sl, sig) && !(name[sl] == '/' && !name[sl + 1]);
}

static bool supports(const pc_component_type *t, pc_signal from, pc_signal to)
{
    return t && (t->connects[from] & PC_SIGNAL_BIT(to));
}

/* An id declared both as a connector and as an exporter or receiver. */
static int check_ambiguous(pc_service *s, const pc_node *sec, pc_error *err)
{
    int rc = 0;
    for (size_t i = 0; i < sec->n; i++) {
        const char *id = sec->keys[i];
        const char *kind = svc_find_definition(s, "exporters", id, NULL, NULL, NULL)   ? "exporter"
                           : svc_find_definition(s, "receivers", id, NULL, NULL, NULL) ? "receiver"
                                                                                       : NULL;
        if (!kind) continue;
        char path[256];
        svc_path_join(path, sizeof path, "connectors", id);
        rc = pc_cfg_errorf(err, sec->vals[i], path,
                           "ambiguous ID: Found both \"%s\" %s and \"%s\" connector. Change one of "
                           "the components' IDs to eliminate ambiguity (e.g. rename \"%s\" "
                           "connector to \"%s/connector\")",
                           id, kind, id, id, id);
    }
    return rc;
}

/* "[traces/in traces/b]": the pipelines of signal sig listing id under list (Go's %v of a
 * slice, as the Collector prints them). */
static void pipeline_names(const pc_node *pls, const char *list, const char *id, pc_signal sig,
                           char *out, size_t n)
{
    size_t len = (size_t)snprintf(out, n, "[");
    for (size_t i = 0; i < pls->n && len < n; i++) {
        pc_signal ps;
        if (!pipeline_signal(pls->keys[i], &ps) || ps != sig || !svc_lists(pls->vals[i], list, id))
            continue;
        len += (size_t)snprintf(out + len, n - len, "%s%s", len > 1 ? " " : "", pls->keys[i]);
    }
    if (len < n) snprintf(out + len, n - len, "]");
}

/* The signals of the pipelines listing id under list (a bit set). */
static unsigned used_signals(const pc_node *pls, const char *list, const char *id)
{
    unsigned set = 0;
    for (size_t i = 0; i < pls->n; i++) {
        pc_signal sig;
        if (pipeline_signal(pls->keys[i], &sig) && svc_lists(pls->vals[i], list, id))
            set |= PC_SIGNAL_BIT(sig);
    }
    return set;
}

/* One connector id: each signal it is exported with needs a supported receiving side and each
 * it is received with an exporting side. A connector no pipeline names is ignored. */
static int check_use(const pc_node *pls, const char *id, const pc_node *def, pc_error *err)
{
    char type[128];
    snprintf(type, sizeof type, "%.*s", (int)strcspn(id, "/"), id);
    const pc_component_type *t = pc_component_type_find(PC_KIND_CONNECTOR, type);
    if (!t) return 0; /* its definition's error says so */
    unsigned exp = used_signals(pls, "exporters", id), rec = used_signals(pls, "receivers", id);
    unsigned exp_ok = 0, rec_ok = 0;
    for (int e = 0; e < PC_SIGNAL_COUNT; e++)
        for (int r = 0; r < PC_SIGNAL_COUNT; r++)
            if ((exp & PC_SIGNAL_BIT(e)) && (rec & PC_SIGNAL_BIT(r)) &&
                supports(t, (pc_signal)e, (pc_signal)r))
                exp_ok |= PC_SIGNAL_BIT(e), rec_ok |= PC_SIGNAL_BIT(r);
    char names[256];
    for (int side = 0; side < 2; side++) {
        unsigned bad = side ? rec & ~rec_ok : exp & ~exp_ok;
        for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
            if (!(bad & PC_SIGNAL_BIT(sig))) continue;
            pipeline_names(pls, side ? "receivers" : "exporters", id, (pc_signal)sig, names,
                           sizeof names);
            return pc_cfg_errorf(err, def, "service::pipelines",
                                 "connector \"%s\" used as %s in %s pipeline but not used in any "
                                 "supported %s pipeline",
                                 id, side ? "receiver" : "exporter", names,
                                 side ? "exporter" : "receiver");
        }
    }
    return 0;
}

/* The connector nodes: one per id and supported pair of signals it is used with. */
static void add_nodes(pc_service *s, const pc_node *pls, const char *id)
{
    char type[128];
    snprintf(type, sizeof type, "%.*s", (int)strcspn(id, "/"), id);
    const pc_component_type *t = pc_component_type_find(PC_KIND_CONNECTOR, type);
    unsigned exp = used_signals(pls, "exporters", id), rec = used_signals(pls, "receivers", id);
    for (int e = 0; e < PC_SIGNAL_COUNT; e++)
        for (int r = 0; r < PC_SIGNAL_COUNT; r++) {
            if (!(exp & PC_SIGNAL_BIT(e)) || !(rec & PC_SIGNAL_BIT(r)) ||
                !supports(t, (pc_signal)e, (pc_signal)r) || s->n_connectors == MAX_COMPONENTS)
                continue;
            s->conn_ids[s->n_connectors] = id;
            s->routers[s->n_connectors].from = (pc_signal)e;
            s->routers[s->n_connectors++].to = (pc_signal)r;
        }
}

/* ---- cycles ---- */

/* The graph's nodes: pipelines 0..n_pl-1 (their processors in order), then connector nodes. The
 * Collector's graph has, per pipeline, a capabilities node, its processors and a fan-out node;
 * each node's id is a hash of its attributes, and the cycle it reports is the first Johnson's
 * algorithm finds: through the node of least id (signed), begun at the first connector from
 * there. Several cycles through that node: the Collector's pick depends on map order. */
typedef struct walk {
    pc_service *s;
    const pc_node *pls;
    size_t n_pl, n;
    bool *adj;            /* n x n edges */
    unsigned char *color; /* 0 new, 1 on the path, 2 done */
    size_t *path, depth;
} walk;

static bool edge(const walk *w, size_t a, size_t b)
{
    pc_signal sig;
    if (a < w->n_pl && b >= w->n_pl) { /* a pipeline exports into a connector node */
        size_t k = b - w->n_pl;
        return pipeline_signal(w->pls->keys[a], &sig) && sig == w->s->routers[k].from &&
               svc_lists(w->pls->vals[a], "exporters", w->s->conn_ids[k]);
    }
    if (a >= w->n_pl && b < w->n_pl) { /* a connector node feeds a pipeline */
        size_t k = a - w->n_pl;
        return pipeline_signal(w->pls->keys[b], &sig) && sig == w->s->routers[k].to &&
               svc_lists(w->pls->vals[b], "receivers", w->s->conn_ids[k]);
    }
    return false;
}

/* The Collector's node id (otelcol 0.161.0, service/internal/attribute): FNV-1a 64 over
 * "(key|value)" for each of its attributes in order, as a signed number; NULL ends the list. */
static int64_t node_id(const char *const *kv)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; kv[i]; i += 2)
        for (const char *part[] = {"(", kv[i], "|", kv[i + 1], ")"}, **p = part; p < part + 5; p++)
            for (const unsigned char *q = (const unsigned char *)*p; *q; q++)
                h = (h ^ *q) * 0x100000001b3u;
    return (int64_t)h;
}

#define KIND   "otelcol.component.kind"
#define SIG    "otelcol.signal"
#define PIPE   "otelcol.pipeline.id"
#define COMPID "otelcol.component.id"

/* The least Collector node id among the nodes node stands for. */
static int64_t least_id(const walk *w, size_t node)
{
    if (node >= w->n_pl) {
        const pc_router *r = &w->s->routers[node - w->n_pl];
        const char *kv[] = {KIND,
                            "connector",
                            SIG,
                            pc_signal_infos[r->from].name,
                            "otelcol.signal.output",
                            pc_signal_infos[r->to].name,
                            COMPID,
                            w->s->conn_ids[node - w->n_pl],
                            NULL};
        return node_id(kv);
    }
    const char *name = w->pls->keys[node];
    const char *cap[] = {KIND, "capabilities", PIPE, name, NULL};
    const char *fan[] = {KIND, "fanout", PIPE, name, NULL};
    int64_t least = node_id(cap), f = node_id(fan);
    if (f < least) least = f;
    pc_signal sig = PC_SIGNAL_PROFILES;
    pipeline_signal(name, &sig);
    const pc_node *procs = pc_node_get(w->pls->vals[node], "processors");
    for (size_t i = 0; procs && procs->kind == PC_NODE_SEQ && i < procs->n; i++) {
        if (procs->vals[i]->kind != PC_NODE_SCALAR) continue;
        const char *kv[] = {KIND, "processor", SIG,    pc_signal_infos[sig].name,
                            PIPE, name,        COMPID, procs->vals[i]->scalar,
                            NULL};
        int64_t id = node_id(kv);
        if (id < least) least = id;
    }
    return least;
}

/* "connector "x" (profiles to profiles)" or the pipeline's processors, appended to out. */
static void describe(const walk *w, size_t node, char *out, size_t n)
{
    size_t len = strlen(out);
    if (node >= w->n_pl) {
        const pc_router *r = &w->s->routers[node - w->n_pl];
        snprintf(out + len, n - len, "%sconnector \"%s\" (%s to %s)", len ? " -> " : "",
                 w->s->conn_ids[node - w->n_pl], pc_signal_infos[r->from].name,
                 pc_signal_infos[r->to].name);
        return;
    }
    const pc_node *procs = pc_node_get(w->pls->vals[node], "processors");
    for (size_t i = 0; procs && procs->kind == PC_NODE_SEQ && i < procs->n; i++) {
        if (procs->vals[i]->kind != PC_NODE_SCALAR) continue;
        len = strlen(out);
        snprintf(out + len, n - len, "%sprocessor \"%s\" in pipeline \"%s\"", len ? " -> " : "",
                 procs->vals[i]->scalar, w->pls->keys[node]);
    }
}

/* Depth first from node for a path back to goal (w->path holds it, goal first). */
static bool path_to(walk *w, size_t node, size_t goal)
{
    w->color[node] = 1;
    w->path[w->depth++] = node;
    for (size_t next = 0; next < w->n; next++) {
        if (!w->adj[node * w->n + next]) continue;
        if (next == goal) return true;
        if (!w->color[next] && path_to(w, next, goal)) return true;
    }
    w->depth--;
    return false;
}

/* Whether node is on a cycle (a path leads back to it). */
static bool on_cycle(walk *w, size_t node)
{
    memset(w->color, 0, w->n);
    w->depth = 0;
    return path_to(w, node, node);
}

/* The Collector's first cycle in out, or "" when there is none. */
static void find_cycle(walk *w, char *out, size_t n)
{
    size_t best = w->n;
    int64_t least = 0;
    for (size_t x = 0; x < w->n; x++) {
        if (!on_cycle(w, x)) continue;
        int64_t id = least_id(w, x);
        if (best == w->n || id < least) best = x, least = id;
    }
    if (best == w->n || !on_cycle(w, best)) return;
    size_t len = w->depth, c = 0;
    while (w->path[c] < w->n_pl) /* from the node of least id to the first connector */
        c++;
    for (size_t i = 0; i <= len; i++)
        describe(w, w->path[(c + i) % len], out, n);
}

static int check_cycles(pc_service *s, const pc_node *pls, pc_error *err)
{
    walk w = {s, pls, pls->n, pls->n + s->n_connectors, NULL, NULL, NULL, 0};
    w.adj = pc_xcalloc(w.n * w.n + 1, sizeof(bool));
    w.color = pc_xcalloc(w.n + 1, 1);
    w.path = pc_xcalloc(w.n + 1, sizeof(size_t));
    for (size_t a = 0; a < w.n; a++)
        for (size_t b = 0; b < w.n; b++)
            w.adj[a * w.n + b] = edge(&w, a, b);
    char msg[1024] = "";
    if (s->n_connectors) find_cycle(&w, msg, sizeof msg);
    free(w.adj);
    free(w.color);
    free(w.path);
    if (!*msg) return 0;
    return pc_cfg_errorf(err, pls, "service::pipelines", "cycle detected: %s", msg);
}

/* ---- building ---- */

/* The Collector's checks of the connectors the pipelines use (ambiguous ids, both sides used on
 * supported signals, no cycle); records the connector nodes in s. */
int svc_check_connectors(pc_service *s, const pc_node *pls, pc_error *err)
{
    const pc_node *sec = pc_node_get(s->root, "connectors");
    if (!sec || sec->kind != PC_NODE_MAP) return 0;
    int rc = check_ambiguous(s, sec, err);
    for (size_t i = 0; i < sec->n; i++)
        if (check_use(pls, sec->keys[i], sec->vals[i], err)) rc = PC_EINVAL;
    if (rc) return rc;
    for (size_t i = 0; i < sec->n; i++)
        add_nodes(s, pls, sec->keys[i]);
    return check_cycles(s, pls, err);
}

/* One instance per connector node (before the pipelines: they export into it). */
int svc_build_connectors(pc_service *s, pc_error *err)
{
    int rc = 0;
    for (size_t k = 0; k < s->n_connectors; k++) {
        const char *id = s->conn_ids[k];
        const pc_node *def = svc_find_definition(s, "connectors", id, NULL, NULL, NULL);
        char path[256], log_id[300];
        svc_path_join(path, sizeof path, "connectors", id);
        snprintf(log_id, sizeof log_id, "%s (%s to %s)", id,
                 pc_signal_infos[s->routers[k].from].name, pc_signal_infos[s->routers[k].to].name);
        pc_component *c = svc_component_new(s, PC_KIND_CONNECTOR, id, def, path, log_id, err);
        if (!c) {
            rc = PC_EINVAL;
            continue;
        }
        c->router = &s->routers[k];
        s->connectors[k] = c;
    }
    return rc;
}

/* The connector nodes a pipeline of signal sig exporting to id sends to (appended to out). */
size_t svc_connector_targets(pc_service *s, const char *id, pc_signal sig, pc_consumer **out)
{
    size_t n = 0;
    for (size_t k = 0; k < s->n_connectors; k++)
        if (s->connectors[k] && s->routers[k].from == sig && !strcmp(s->conn_ids[k], id))
            out[n++] = &s->connectors[k]->self;
    return n;
}

/* Each connector node's router: the entries of the pipelines of its receiver-side signal that
 * list it as a receiver; then the type resolves what its config names among them. */
int svc_wire_connectors(pc_service *s, const pc_node *pls, pc_error *err)
{
    int rc = 0;
    for (size_t k = 0; k < s->n_connectors; k++) {
        pc_router *r = &s->routers[k];
        r->pipelines = pc_xcalloc(s->n_pipelines + 1, sizeof(char *));
        r->consumers = pc_xcalloc(s->n_pipelines + 1, sizeof(pc_consumer *));
        for (size_t i = 0; i < s->n_pipelines; i++) {
            pipeline *pl = &s->pipelines[i];
            if (pl->signal != r->to ||
                !svc_lists(pc_node_get(pls, pl->name), "receivers", s->conn_ids[k]))
                continue;
            r->pipelines[r->n] = pl->name;
            r->consumers[r->n++] = &pl->entry->base;
        }
        r->all = r->n == 1 ? r->consumers[0] : pc_fanout_new(r->consumers, r->n);
        pc_component *c = s->connectors[k];
        char path[256];
        svc_path_join(path, sizeof path, "connectors", s->conn_ids[k]);
        if (c->type->connect && c->type->connect(c, path, err)) rc = PC_EINVAL;
    }
    return rc;
}

static pipeline *pipeline_named(pc_service *s, const char *name)
{
    for (size_t i = 0; i < s->n_pipelines; i++)
        if (!strcmp(s->pipelines[i].name, name)) return &s->pipelines[i];
    return NULL;
}

/* Longest path in the (acyclic) pipeline graph, counted in processors. */
void svc_order_pipelines(pc_service *s, const pc_node *pls)
{
    for (size_t round = 0; round <= s->n_pipelines; round++) {
        bool changed = false;
        for (size_t k = 0; k < s->n_connectors; k++)
            for (size_t u = 0; u < s->n_pipelines; u++) {
                pipeline *up = &s->pipelines[u];
                if (up->signal != s->routers[k].from ||
                    !svc_lists(pc_node_get(pls, up->name), "exporters", s->conn_ids[k]))
                    continue;
                for (size_t i = 0; i < s->routers[k].n; i++) {
                    pipeline *down = pipeline_named(s, s->routers[k].pipelines[i]);
                    if (down && down->stage < up->stage + up->n_processors)
                        down->stage = up->stage + up->n_processors, changed = true;
                }
            }
        if (!changed) return;
    }
}

void svc_free_connectors(pc_service *s)
{
    for (size_t k = 0; k < s->n_connectors; k++) {
        pc_router *r = &s->routers[k];
        svc_component_free(s->connectors[k]);
        if (r->n != 1) pc_fanout_free(r->all);
        free(r->pipelines);
        free(r->consumers);
    }
}
