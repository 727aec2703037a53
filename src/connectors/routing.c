/* Connector "routing": sends each resource (ResourceProfiles, ResourceSpans, ...) to the
 * pipelines of the first route of its table that matches, as the Collector's routing connector
 * (contrib) since v0.120 (match once, in table order); what no route matches goes to
 * default_pipelines. The Collector's has no profiles; profcol's routes every signal.
 *
 *   connectors:
 *     routing:
 *       default_pipelines: [profiles/other]
 *       table:
 *         - context: request                       # the batch's request metadata: the tenant
 *           condition: request["X-Scope-OrgID"] == "acme"   # (X-Scope-OrgID) every receiver keeps
 *           pipelines: [profiles/acme]
 *         - condition: attributes["service.name"] == "checkout"   # context resource (default)
 *           pipelines: [profiles/checkout]
 *
 * Conditions are the two OTTL forms the Collector's README shows: `request["<name>"] == | !=
 * "<value>"` (context request) and `attributes["<key>"] == | != "<value>"` (context resource;
 * also `resource.attributes[...]`); `statement: route() where <condition>` is the older spelling.
 * Of a request's metadata profcol keeps the tenant only: request["X-Scope-OrgID"] (any case).
 * Other OTTL is refused with the forms that work. A request route decides for the whole batch; a
 * batch whose resources go different ways is split (the parts share nothing). Unrouted data with
 * no default_pipelines is dropped, counted and logged, never silently. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/component.h"
#include "sdk/processor.h"
#include "sdk/telemetry.h"

typedef struct routing_cfg {
    const pc_node *table;
    pc_strlist default_pipelines;
    int error_mode;
} routing_cfg;

static const char *const error_modes[] = {"propagate", "ignore", "silent", NULL};

/* clang-format off */
static const pc_cfg_key routing_keys[] = {
    {"table", PC_CFG_NODE, "", offsetof(routing_cfg, table), "routes, tried in order, the first match wins: {context (resource or request), condition or statement, pipelines}", NULL},
    {"default_pipelines", PC_CFG_LIST, "", offsetof(routing_cfg, default_pipelines), "where what no route matches goes (without: dropped and counted)", NULL},
    {"error_mode", PC_CFG_ENUM, "propagate", offsetof(routing_cfg, error_mode), "accepted for Collector configs; profcol's conditions cannot fail at run time", error_modes},
    {0},
};
/* clang-format on */

typedef struct route {
    bool request; /* context request: key is a metadata name (lower case) */
    bool negate;  /* != */
    char *key, *value;
    pc_strlist pipelines;
    pc_consumer **targets; /* pipelines resolved by connect */
} route;

typedef struct routing {
    route *routes;
    size_t n_routes;
    pc_consumer **defaults;
    size_t n_defaults;
    uint64_t routed, unrouted, dropped; /* items; self-metrics */
    pc_log_limiter warn;
    pc_proc_core core; /* splits in flight on the pool */
} routing;

static const char *const route_keys[] = {"context", "condition", "statement", "pipelines"};

/* s after the literal lit (and spaces), or NULL. */
static const char *eat(const char *s, const char *lit)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(lit);
    if (strncmp(s, lit, n) != 0) return NULL;
    s += n;
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

/* A double-quoted string (no escapes) into a new string; s after it, or NULL. */
static const char *quoted(const char *s, char **out)
{
    if (*s != '"') return NULL;
    const char *end = strchr(s + 1, '"');
    if (!end) return NULL;
    size_t n = (size_t)(end - s - 1);
    *out = pc_xmalloc(n + 1);
    memcpy(*out, s + 1, n);
    (*out)[n] = 0;
    return end + 1;
}

/* `<base>["key"] ==|!= "value"` into r; false when cond has another shape. */
static bool parse_condition(const char *cond, route *r)
{
    const char *bases[] = {"request[", "attributes[", "resource.attributes["};
    const char *p = NULL;
    for (size_t i = r->request ? 0 : 1; !p && i < (r->request ? 1u : 3u); i++)
        p = eat(cond, bases[i]);
    char *key = NULL, *value = NULL;
    if (p) p = quoted(p, &key);
    if (p) p = eat(p, "]");
    const char *q = p ? eat(p, "==") : NULL;
    r->negate = !q && p && (q = eat(p, "!="));
    if (q) q = quoted(q, &value);
    if (q) q = eat(q, "");
    if (!q || *q) {
        free(key);
        free(value);
        return false;
    }
    if (r->request)
        for (char *c = key; *c; c++)
            *c = (char)tolower((unsigned char)*c);
    r->key = key;
    r->value = value;
    return true;
}

static void route_free(route *r)
{
    free(r->key);
    free(r->value);
    for (size_t i = 0; i < r->pipelines.n; i++)
        free(r->pipelines.v[i]);
    free(r->pipelines.v);
    free(r->targets);
}

/* The context, and the condition (or statement's) text, of route node m. */
static int route_condition(const pc_node *m, route *r, const char **cond, const char *path,
                           pc_error *err)
{
    const pc_node *ctx = pc_node_get(m, "context"), *c = pc_node_get(m, "condition"),
                  *st = pc_node_get(m, "statement");
    const char *name = ctx && ctx->kind == PC_NODE_SCALAR ? ctx->scalar : "resource";
    if (!strcmp(name, "request")) {
        r->request = true;
    } else if (!strcmp(name, "span") || !strcmp(name, "metric") || !strcmp(name, "datapoint") ||
               !strcmp(name, "log")) {
        return pc_cfg_errorf(err, ctx, path,
                             "context \"%s\" is not supported by profcol (resource and request "
                             "are)",
                             name);
    } else if (strcmp(name, "resource") != 0) {
        return pc_cfg_errorf(err, ctx ? ctx : m, path, "invalid context: %s", name);
    }
    if (c && st)
        return pc_cfg_errorf(err, m, path, "invalid route: both condition and statement provided");
    if (!c && !st)
        return pc_cfg_errorf(err, m, path, "invalid route: no condition or statement provided");
    if ((c ? c : st)->kind != PC_NODE_SCALAR)
        return pc_cfg_errorf(err, c ? c : st, path, "must be a string");
    if (st && r->request)
        return pc_cfg_errorf(err, st, path,
                             "invalid route: the request context requires a condition");
    *cond = c ? c->scalar : eat(st->scalar, "route() where");
    if (!*cond)
        return pc_cfg_errorf(err, st, path,
                             "unsupported statement \"%s\" (profcol's routing takes route() "
                             "where <condition>)",
                             st->scalar);
    return 0;
}

/* One table entry into r. */
static int parse_route(const pc_node *m, route *r, const char *path, pc_error *err)
{
    if (!m || m->kind != PC_NODE_MAP) return pc_cfg_errorf(err, m, path, "must be a mapping");
    for (size_t i = 0; i < m->n; i++) {
        bool known = false;
        for (size_t k = 0; k < sizeof route_keys / sizeof route_keys[0]; k++)
            known |= !strcmp(m->keys[i], route_keys[k]);
        if (!known) return pc_cfg_errorf(err, m->vals[i], path, "unknown key \"%s\"", m->keys[i]);
    }
    const char *cond = NULL;
    if (route_condition(m, r, &cond, path, err)) return PC_EINVAL;
    if (!parse_condition(cond, r))
        return pc_cfg_errorf(err, m, path,
                             "unsupported condition \"%s\": profcol's routing takes %s[\"<%s>\"] "
                             "== \"<value>\" (or !=)",
                             cond, r->request ? "request" : "attributes",
                             r->request ? "name" : "key");
    if (r->request && strcmp(r->key, PC_META_TENANT) != 0) /* it would never match */
        return pc_cfg_errorf(err, m, path,
                             "request[\"%s\"]: profcol keeps only the tenant of a request's "
                             "metadata (request[\"X-Scope-OrgID\"])",
                             r->key);
    const pc_node *pl = pc_node_get(m, "pipelines");
    if (!pl || pl->kind != PC_NODE_SEQ || pl->n == 0)
        return pc_cfg_errorf(err, pl ? pl : m, path, "invalid route: no pipelines defined");
    r->pipelines.v = pc_xcalloc(pl->n, sizeof(char *));
    for (size_t i = 0; i < pl->n; i++) {
        if (pl->vals[i]->kind != PC_NODE_SCALAR)
            return pc_cfg_errorf(err, pl->vals[i], path,
                                 "pipelines must be a list of pipeline ids");
        r->pipelines.v[r->pipelines.n++] = pc_xstrdup(pl->vals[i]->scalar);
    }
    return 0;
}

/* The table into routes (*n of them); PC_EINVAL with the Collector's texts. */
static int parse_table(const routing_cfg *cfg, const char *path, route **out, size_t *n,
                       pc_error *err)
{
    const pc_node *t = cfg->table;
    char sub[256];
    snprintf(sub, sizeof sub, "%s::table", path);
    *out = NULL;
    *n = 0;
    if (!t || t->kind == PC_NODE_NULL || (t->kind == PC_NODE_SEQ && t->n == 0))
        return pc_cfg_errorf(err, t, sub, "invalid routing table: the routing table is empty");
    if (t->kind != PC_NODE_SEQ) return pc_cfg_errorf(err, t, sub, "must be a list of routes");
    *out = pc_xcalloc(t->n, sizeof(route));
    int rc = 0;
    for (size_t i = 0; i < t->n; i++) {
        char rpath[300];
        snprintf(rpath, sizeof rpath, "%s::%zu", sub, i);
        if (parse_route(t->vals[i], &(*out)[(*n)++], rpath, err)) rc = PC_EINVAL;
    }
    return rc;
}

static void free_routes(route *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        route_free(&r[i]);
    free(r);
}

static int routing_validate(void *cfg, const pc_node *node, const char *path, pc_error *err)
{
    (void)node;
    route *r;
    size_t n;
    int rc = parse_table(cfg, path, &r, &n, err);
    free_routes(r, n);
    return rc;
}

static int routing_create(pc_component *c, pc_error *err)
{
    routing *st = pc_xcalloc(1, sizeof *st);
    c->priv = st;
    char path[256];
    snprintf(path, sizeof path, "connectors::%s", c->name ? c->name : c->id);
    return parse_table(c->cfg, path, &st->routes, &st->n_routes, err);
}

/* Each pipeline id named must be one that receives from this connector (the Collector's
 * router: 'missing consumer'). */
static int resolve(pc_component *c, const pc_strlist *ids, pc_consumer ***out, const char *path,
                   pc_error *err)
{
    *out = pc_xcalloc(ids->n + 1, sizeof(pc_consumer *));
    for (size_t i = 0; i < ids->n; i++)
        if (!((*out)[i] = pc_router_consumer(c->router, ids->v[i])))
            return pc_cfg_errorf(err, NULL, path, "missing consumer: \"%s\"", ids->v[i]);
    return 0;
}

static int routing_connect(pc_component *c, const char *path, pc_error *err)
{
    routing *st = c->priv;
    const routing_cfg *cfg = c->cfg;
    for (size_t i = 0; i < st->n_routes; i++)
        if (resolve(c, &st->routes[i].pipelines, &st->routes[i].targets, path, err))
            return PC_EINVAL;
    if (resolve(c, &cfg->default_pipelines, &st->defaults, path, err)) return PC_EINVAL;
    st->n_defaults = cfg->default_pipelines.n;
    char labels[300];
    snprintf(labels, sizeof labels, "connector=\"%s\",signal=\"%s\"", c->name ? c->name : c->id,
             pc_signal_infos[c->router->to].name);
    pc_metric_u64(c, "profcol_connector_routed_items_total",
                  "Items (profile samples, spans, metric points, log records) a route matched",
                  PC_METRIC_COUNTER, labels, &st->routed);
    pc_metric_u64(c, "profcol_connector_unrouted_items_total",
                  "Items no route matched (sent to default_pipelines, or dropped without)",
                  PC_METRIC_COUNTER, labels, &st->unrouted);
    pc_metric_u64(c, "profcol_connector_dropped_items_total",
                  "Unrouted items dropped: the connector has no default_pipelines",
                  PC_METRIC_COUNTER, labels, &st->dropped);
    return 0;
}

static void routing_destroy(pc_component *c)
{
    routing *st = c->priv;
    if (!st) return;
    free_routes(st->routes, st->n_routes);
    free(st->defaults);
    free(st);
}

/* ---- routing data ---- */

/* Whether route r matches resource i of b (request routes: the batch's metadata). */
static bool matches(const route *r, pc_batch *b, size_t i)
{
    const char *v;
    if (r->request) {
        v = pc_batch_get_meta(b, r->key);
    } else {
        const pc_resource *res = i < pc_batch_n_resources(b) ? *pc_batch_resource_slot(b, i) : NULL;
        v = pc_resource_attr_str(pc_batch_req(b) ? pc_batch_req(b)->dictionary : NULL, res, r->key);
    }
    bool eq = v && !strcmp(v, r->value);
    return r->negate ? !eq : eq;
}

/* The part of b made of the resources whose dest is d (b itself when all are), or NULL. */
static pc_batch *part(pc_batch *b, const size_t *dest, size_t n, size_t d)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += dest[i] == d;
    if (k == 0) return NULL;
    pc_batch *p = pc_batch_ref(b);
    if (k == n) return p;
    pc_batch_make_writable(&p); /* a copy of its own: the parts share nothing */
    bool *keep = pc_xcalloc(n, sizeof(bool));
    for (size_t i = 0; i < n; i++)
        keep[i] = dest[i] == d;
    pc_batch_keep_resources(p, keep);
    free(keep);
    return p;
}

/* Send part p (one reference) to targets; counted by dest (route index, or n_routes: none). */
static void send_part(pc_component *c, pc_batch *p, size_t d, pc_join *j)
{
    routing *st = c->priv;
    pc_consumer **targets = d < st->n_routes ? st->routes[d].targets : st->defaults;
    size_t n = d < st->n_routes ? st->routes[d].pipelines.n : st->n_defaults;
    size_t items = pc_batch_items(p);
    if (d < st->n_routes)
        st->routed += items;
    else
        st->unrouted += items;
    if (n == 0) {
        st->dropped += items;
        PC_WARN_RATELIMITED(&st->warn, c->id,
                            "%zu %s matched no route and there are no default_pipelines: dropped",
                            items, pc_signal_infos[p->signal].items);
    }
    for (size_t i = 0; i < n; i++) {
        pc_join_add(j);
        pc_consume(targets[i], pc_batch_ref(p), pc_join_done, j);
    }
    pc_batch_unref(p);
}

/* A batch whose resources go different ways: the parts are copies (pc_batch_make_writable), made
 * on the pool, since a copy is as large as the batch (ARCHITECTURE.md §4). */
typedef struct split_work {
    pc_proc_work w; /* first */
    pc_batch *b;
    size_t *dest, n;
    pc_batch **parts; /* by dest: route index, or n_routes for none */
    pc_done_fn done;
    void *arg;
} split_work;

static void split_run(pc_proc_work *w)
{
    split_work *x = (split_work *)w;
    routing *st = w->c->priv;
    for (size_t d = 0; d <= st->n_routes; d++)
        x->parts[d] = part(x->b, x->dest, x->n, d);
}

static void split_after(pc_proc_work *w)
{
    split_work *x = (split_work *)w;
    routing *st = w->c->priv;
    pc_join *j = pc_join_new(x->done, x->arg);
    for (size_t d = 0; d <= st->n_routes; d++)
        if (x->parts[d]) send_part(w->c, x->parts[d], d, j);
    pc_batch_unref(x->b);
    free(x->parts);
    free(x->dest);
    free(x);
    pc_join_done(j, PC_OK, NULL);
}

static void routing_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    routing *st = c->priv;
    size_t n = pc_batch_n_resources(b), nd = n ? n : 1;
    size_t *dest = pc_xcalloc(nd, sizeof(size_t));
    bool one_way = true;
    for (size_t i = 0; i < nd; i++) { /* the first route that matches, else none (n_routes) */
        dest[i] = st->n_routes;
        for (size_t r = 0; r < st->n_routes && dest[i] == st->n_routes; r++)
            if ((n || st->routes[r].request) && matches(&st->routes[r], b, i)) dest[i] = r;
        one_way &= dest[i] == dest[0];
    }
    if (!one_way) {
        split_work *x = pc_xcalloc(1, sizeof *x);
        *x = (split_work){.w = {.c = c, .core = &st->core, .run = split_run, .after = split_after},
                          .b = b,
                          .dest = dest,
                          .n = n,
                          .parts = pc_xcalloc(st->n_routes + 1, sizeof(pc_batch *)),
                          .done = done,
                          .arg = arg};
        pc_proc_work_submit(&x->w);
        return;
    }
    pc_join *j = pc_join_new(done, arg);
    send_part(c, b, dest[0], j); /* the whole batch one way: no copy */
    free(dest);
    pc_join_done(j, PC_OK, NULL);
}

static void routing_shutdown(pc_component *c, pc_shutdown_done done)
{
    routing *st = c->priv;
    pc_proc_core_shutdown(&st->core, c, done);
}

const pc_component_type pc_connector_routing = {
    .name = "routing",
    .kind = PC_KIND_CONNECTOR,
    .stability = "alpha",
    .cfg_size = sizeof(routing_cfg),
    .cfg = routing_keys,
    .validate = routing_validate,
    .create = routing_create,
    .connect = routing_connect,
    .consume = routing_consume,
    .shutdown = routing_shutdown,
    .destroy = routing_destroy,
    .signals = PC_SIGNALS_ALL,
    .connects = {[PC_SIGNAL_PROFILES] = PC_SIGNAL_BIT(PC_SIGNAL_PROFILES),
                 [PC_SIGNAL_TRACES] = PC_SIGNAL_BIT(PC_SIGNAL_TRACES),
                 [PC_SIGNAL_METRICS] = PC_SIGNAL_BIT(PC_SIGNAL_METRICS),
                 [PC_SIGNAL_LOGS] = PC_SIGNAL_BIT(PC_SIGNAL_LOGS)},
    .doc = "sends each resource to the pipelines of the first route whose condition matches (by "
           "resource attribute, or by request metadata such as the tenant X-Scope-OrgID), the "
           "rest to default_pipelines; every signal (the Collector's has no profiles)",
};
