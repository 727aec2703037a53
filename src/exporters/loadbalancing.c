/* Exporter "loadbalancing": spreads profiles and spans over a fleet of backends (profcol gateways,
 * Collectors) so that everything of one trace, or of one service, lands on the same backend; as
 * the Collector's exporter/loadbalancingexporter, with profiles.
 *
 * - Backends come from a resolver: `static` (a list of host:port), or `dns` (a hostname whose A
 *   and AAAA records, with `port`, are the backends: resolved with uv_getaddrinfo every
 *   `interval`, a lookup given up after `timeout`, the addresses sorted; a failed lookup keeps
 *   the backends there were). A SIGHUP that changes only the resolver is applied in place
 *   (reconfigure): the exporter, its queues and its connections stay, only the membership moves.
 * - Each backend is a route of the exporter core (sdk/exporter.h): its own sender (queue,
 *   retry, persistent queue under <storage>/loadbalancing/<host_port>) and its own client, the
 *   `otlp` exporter's OTLP/gRPC client or the `otlphttp` exporter's OTLP/HTTP one
 *   (sdk/otlp_client.h), configured by `protocol: otlp:` / `protocol: otlphttp:`, whose keys
 *   are those exporters' own. Backends are names on a consistent-hash ring (sdk/ring.h:
 *   the hash is documented there), so two sidecars with the same backends route alike and a
 *   change of membership moves only the keys the ring must move; what a backend that left still
 *   had queued is routed again over the new ring.
 * - Routing keys (`routing_key`), per item:
 *     traceID     spans: the span's trace id; profile samples: the trace id of the sample's link
 *                 (a sample without a link, or whose link has no trace id, goes by service);
 *                 the default for traces pipelines
 *     service     the resource's service.name (missing: ""); the default for profiles pipelines
 *     resource    every resource attribute (key and typed value, sorted by key)
 *     attributes  the values of the `routing_attributes`, each looked up on the resource, then
 *                 the scope, then the span or sample (missing: empty)
 *   A batch whose items go to several backends is split on the thread pool (pdata/split.h): one
 *   request per backend, a profiles part with its own compact dictionary built by the merger.
 *   Sample and span totals are kept exactly. */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "pdata/split.h"
#include "sdk/component.h"
#include "sdk/exporter.h"
#include "sdk/otlp_client.h"
#include "sdk/ring.h"
#include "sdk/telemetry.h"

enum { KEY_DEFAULT, KEY_TRACE, KEY_SERVICE, KEY_RESOURCE, KEY_ATTRIBUTES };
enum { PROTO_OTLP, PROTO_OTLPHTTP };

typedef struct lb_cfg {
    char *routing_key; /* NULL: traceID for traces, service for profiles */
    pc_strlist routing_attributes;
    pc_strlist hostnames; /* resolver.static.hostnames */
    char *dns_hostname;
    int64_t dns_port;
    uint64_t dns_interval_ms, dns_timeout_ms;
    pc_otlp_grpc_cfg grpc; /* protocol.otlp */
    pc_otlp_http_cfg http; /* protocol.otlphttp */
    /* set by validate */
    int key;
    int protocol;
    bool dns;
    pc_sender_cfg sender; /* the protocol's sending_queue and retry_on_failure */
} lb_cfg;

/* clang-format off */
static const pc_cfg_key lb_keys[] = {
    {"routing_key", PC_CFG_STRING, "", offsetof(lb_cfg, routing_key), "traceID (default for traces: a span's trace id, a profile sample's link trace id, samples without one by service), service (default for profiles: resource service.name), resource (all resource attributes) or attributes (routing_attributes)", NULL},
    {"routing_attributes", PC_CFG_LIST, "", offsetof(lb_cfg, routing_attributes), "routing_key attributes: the attribute keys whose values route (resource, then scope, then span or sample attributes)", NULL},
    {"resolver.static.hostnames", PC_CFG_LIST, "", offsetof(lb_cfg, hostnames), "the backends, host:port (or http(s)://host:port); a SIGHUP that changes only the resolver moves just the ring's share of keys", NULL},
    {"resolver.dns.hostname", PC_CFG_STRING, "", offsetof(lb_cfg, dns_hostname), "name whose A and AAAA records are the backends (e.g. a Kubernetes headless Service)", NULL},
    {"resolver.dns.port", PC_CFG_INT, "4317", offsetof(lb_cfg, dns_port), "port of every resolved backend", NULL},
    {"resolver.dns.interval", PC_CFG_DURATION, "5s", offsetof(lb_cfg, dns_interval_ms), "how often the name is resolved again", NULL},
    {"resolver.dns.timeout", PC_CFG_DURATION, "1s", offsetof(lb_cfg, dns_timeout_ms), "a lookup taking longer fails (the backends stay as they were)", NULL},
    {"protocol.otlp.", PC_CFG_GROUP, "", offsetof(lb_cfg, grpc), "the OTLP/gRPC client", pc_otlp_grpc_keys},
    {"protocol.otlphttp.", PC_CFG_GROUP, "", offsetof(lb_cfg, http), "the OTLP/HTTP client", pc_otlp_http_keys},
    {0},
};
/* clang-format on */

/* ---- config ---- */

static const struct {
    const char *name;
    int key;
} routing_keys[] = {
    {"traceID", KEY_TRACE},
    {"service", KEY_SERVICE},
    {"resource", KEY_RESOURCE},
    {"attributes", KEY_ATTRIBUTES},
};

/* A backend as a client can use it: host:port, or a URL for OTLP/HTTP (and gRPC's http(s)://).
 * 0, or PC_EINVAL with e. */
static int backend_check(const lb_cfg *cfg, const char *name, pc_error *e)
{
    if (cfg->protocol == PROTO_OTLP) return pc_otlp_grpc_endpoint_check(name, e);
    pc_url u;
    if (strstr(name, "://")) return pc_url_parse(name, &u, e);
    char host[256];
    int port;
    return pc_hostport_parse(name, host, sizeof host, &port, e);
}

static int lb_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    lb_cfg *cfg = cfgp;
    const pc_node *proto = pc_node_get(node, "protocol");
    bool grpc = pc_node_get(proto, "otlp") != NULL, http = pc_node_get(proto, "otlphttp") != NULL;
    if (grpc && http)
        return pc_cfg_key_errorf(err, node, path, "protocol",
                                 "set one of otlp (gRPC) and otlphttp, not both");
    cfg->protocol = http ? PROTO_OTLPHTTP : PROTO_OTLP;
    int rc = cfg->protocol == PROTO_OTLP
                 ? pc_otlp_grpc_validate(&cfg->grpc, node, path, "protocol.otlp.", false, err)
                 : pc_otlp_http_validate(&cfg->http, node, path, "protocol.otlphttp.", false, err);
    if (rc < 0) return rc;
    cfg->sender = cfg->protocol == PROTO_OTLP ? cfg->grpc.sender : cfg->http.sender;

    cfg->key = KEY_DEFAULT;
    if (cfg->routing_key) {
        for (size_t i = 0; i < sizeof routing_keys / sizeof routing_keys[0]; i++)
            if (!strcmp(cfg->routing_key, routing_keys[i].name)) cfg->key = routing_keys[i].key;
        if (!strcmp(cfg->routing_key, "metric") || !strcmp(cfg->routing_key, "streamID"))
            return pc_cfg_key_errorf(err, node, path, "routing_key",
                                     "%s routes metrics, which this exporter does not take "
                                     "(traces and profiles: traceID, service, resource, "
                                     "attributes)",
                                     cfg->routing_key);
        if (cfg->key == KEY_DEFAULT)
            return pc_cfg_key_errorf(err, node, path, "routing_key",
                                     "\"%s\": want traceID, service, resource or attributes",
                                     cfg->routing_key);
    }
    if (cfg->key == KEY_ATTRIBUTES && !cfg->routing_attributes.n)
        return pc_cfg_key_errorf(err, node, path, "routing_attributes",
                                 "routing_key attributes needs the attribute keys to route by");

    const pc_node *res = pc_node_get(node, "resolver");
    bool st = pc_node_get(res, "static") != NULL, dns = pc_node_get(res, "dns") != NULL;
    if (st == dns)
        return pc_cfg_key_errorf(err, node, path, "resolver",
                                 st ? "set one of static and dns, not both"
                                    : "required: static (hostnames) or dns (hostname)");
    cfg->dns = dns;
    pc_error e = {0};
    if (st) {
        if (!cfg->hostnames.n)
            return pc_cfg_key_errorf(err, node, path, "resolver.static.hostnames",
                                     "required: the backends, host:port");
        for (size_t i = 0; i < cfg->hostnames.n; i++)
            if (backend_check(cfg, cfg->hostnames.v[i], &e) < 0)
                return pc_cfg_key_errorf(err, node, path, "resolver.static.hostnames", "%s: %s",
                                         cfg->hostnames.v[i], e.msg);
        return 0;
    }
    if (!cfg->dns_hostname || !*cfg->dns_hostname)
        return pc_cfg_key_errorf(err, node, path, "resolver.dns.hostname",
                                 "required: the name to resolve");
    if (cfg->dns_port < 1 || cfg->dns_port > 65535)
        return pc_cfg_key_errorf(err, node, path, "resolver.dns.port", "must be 1..65535");
    if (!cfg->dns_interval_ms)
        return pc_cfg_key_errorf(err, node, path, "resolver.dns.interval", "must be > 0");
    if (!cfg->dns_timeout_ms)
        return pc_cfg_key_errorf(err, node, path, "resolver.dns.timeout", "must be > 0");
    return 0;
}

/* ---- state ---- */

typedef struct lb lb;

typedef struct dns_query {
    uv_getaddrinfo_t req;
    lb *x;          /* NULL once given up (timeout, shutdown): the answer is dropped */
    uint64_t start; /* uv_now */
} dns_query;

struct lb {
    pc_exporter *e;
    char *http_headers; /* otlphttp: pc_otlp_http_headers */
    /* resolver */
    uv_timer_t interval, timeout;
    int timers_open, closing;
    dns_query *query;
    char **last; /* the last resolved names, sorted */
    size_t n_last;
    bool stopped;
    pc_log_limiter dns_log;
    /* self-metrics */
    uint64_t resolutions_ok, resolutions_failed, updates;
};

/* One OTLP/HTTP backend: the client of its origin and the base path. */
typedef struct http_backend {
    pc_otlp_http h;
    char base[512]; /* the backend URL's path without a trailing '/' */
} http_backend;

/* ---- routing keys (thread pool) ---- */

typedef struct route_ctx {
    const lb_cfg *cfg;
    const pc_ring *ring;
    int key;
    const pc_dictionary *dict; /* profiles */
    /* caches: a resource's part (by service, resource or its service for traceID fallback) */
    size_t r;
    uint32_t r_part;
    bool r_valid;
    uint32_t *link_part; /* profiles, traceID: per link index, UINT32_MAX unknown */
    size_t n_links;
    pc_buf kb; /* key bytes */
} route_ctx;

static uint32_t part_of_hash(const route_ctx *rc, uint64_t h)
{
    return (uint32_t)pc_ring_owner(rc->ring, h);
}

/* An AnyValue as canonical key bytes: a type letter, then the value (strings resolved through
 * the dictionary, so both string forms route alike). */
static void key_value(pc_buf *k, const pc_dictionary *d, const pc_anyvalue *v)
{
    if (!v) {
        pc_buf_printf(k, "-");
        return;
    }
    const char *s = pc_anyvalue_str(d, v);
    if (s) {
        pc_buf_printf(k, "s");
        pc_buf_append(k, s, strlen(s));
        return;
    }
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
        pc_buf_printf(k, "b%d", v->bool_value ? 1 : 0);
        return;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
        pc_buf_printf(k, "i%lld", (long long)v->int_value);
        return;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
        pc_buf_printf(k, "d%.17g", v->double_value);
        return;
    default: { /* bytes, arrays, maps: their encoding */
        size_t n = protobuf_c_message_get_packed_size(&v->base);
        pc_buf_printf(k, "o");
        pc_buf_reserve(k, n + 1);
        k->len += protobuf_c_message_pack(&v->base, k->data + k->len);
        return;
    }
    }
}

static int cmp_kv(const void *a, const void *b, void *d)
{
    const pc_keyvalue *x = *(pc_keyvalue *const *)a, *y = *(pc_keyvalue *const *)b;
    return strcmp(pc_keyvalue_key(d, x), pc_keyvalue_key(d, y));
}

/* Every attribute, sorted by key: "key\0<value>\0" each. */
static void key_attrs(pc_buf *k, const pc_dictionary *d, pc_keyvalue *const *kv, size_t n)
{
    pc_keyvalue **v = pc_xmalloc((n ? n : 1) * sizeof *v);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (kv[i]) v[m++] = kv[i];
    qsort_r(v, m, sizeof *v, cmp_kv, (void *)d);
    for (size_t i = 0; i < m; i++) {
        const char *key = pc_keyvalue_key(d, v[i]);
        pc_buf_append(k, key, strlen(key) + 1);
        key_value(k, d, v[i]->value);
        pc_buf_append(k, "", 1);
    }
    free(v);
}

static const pc_keyvalue *find_kv(const pc_dictionary *d, pc_keyvalue *const *kv, size_t n,
                                  const char *key)
{
    for (size_t i = 0; kv && i < n; i++)
        if (kv[i] && !strcmp(pc_keyvalue_key(d, kv[i]), key)) return kv[i];
    return NULL;
}

static uint32_t service_part(route_ctx *rc, const pc_resource *res)
{
    const char *svc = pc_resource_attr_str(rc->dict, res, "service.name");
    return part_of_hash(rc, pc_ring_hash(svc ? svc : "", svc ? strlen(svc) : 0));
}

static uint32_t resource_part(route_ctx *rc, const pc_resource *res)
{
    rc->kb.len = 0;
    if (res) key_attrs(&rc->kb, rc->dict, res->attributes, res->attributes ? res->n_attributes : 0);
    return part_of_hash(rc, pc_ring_hash(rc->kb.data ? rc->kb.data : (uint8_t *)"", rc->kb.len));
}

/* The part of a whole resource (service or resource key), cached per resource index. */
static uint32_t by_resource(route_ctx *rc, size_t r, const pc_resource *res, int key)
{
    if (rc->r_valid && rc->r == r) return rc->r_part;
    rc->r = r;
    rc->r_valid = true;
    rc->r_part = key == KEY_RESOURCE ? resource_part(rc, res) : service_part(rc, res);
    return rc->r_part;
}

/* routing_attributes: each key's value from the first of the three lists that has it. */
static uint32_t attributes_part(route_ctx *rc, const pc_resource *res, const pc_scope *scope,
                                pc_keyvalue *const *item_kv, size_t n_item, const int32_t *idx,
                                size_t n_idx)
{
    const pc_dictionary *d = rc->dict;
    rc->kb.len = 0;
    for (size_t a = 0; a < rc->cfg->routing_attributes.n; a++) {
        const char *key = rc->cfg->routing_attributes.v[a];
        const pc_keyvalue *kv =
            res ? find_kv(d, res->attributes, res->attributes ? res->n_attributes : 0, key) : NULL;
        if (!kv && scope)
            kv = find_kv(d, scope->attributes, scope->attributes ? scope->n_attributes : 0, key);
        if (!kv) kv = find_kv(d, item_kv, n_item, key);
        const pc_anyvalue *v = kv ? kv->value : NULL;
        for (size_t i = 0; !kv && idx && i < n_idx; i++) { /* profile sample attributes */
            int32_t ai = idx[i];
            if (ai <= 0 || !d || (size_t)ai >= d->n_attribute_table || !d->attribute_table[ai])
                continue;
            const pc_kvu *u = d->attribute_table[ai];
            if (!strcmp(pc_dict_str(d, u->key_strindex), key)) {
                v = u->value;
                break;
            }
        }
        key_value(&rc->kb, d, v);
        pc_buf_append(&rc->kb, "", 1);
    }
    return part_of_hash(rc, pc_ring_hash(rc->kb.data, rc->kb.len));
}

static bool nonzero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return true;
    return false;
}

static uint32_t profile_part(void *arg, const pc_batch *b, size_t r, size_t s, size_t p, size_t i)
{
    route_ctx *rc = arg;
    const pc_resource_profiles *rp = pc_batch_req(b)->resource_profiles[r];
    const pc_resource *res = rp->resource;
    const pc_profile *prof = rp->scope_profiles[s]->profiles[p];
    const pc_sample *smp = i == PC_SPLIT_WHOLE ? NULL : prof->samples[i];
    switch (rc->key) {
    case KEY_TRACE: {
        int32_t li = smp ? smp->link_index : 0;
        if (li > 0 && (size_t)li < rc->n_links) {
            if (rc->link_part[li] != UINT32_MAX) return rc->link_part[li];
            const pc_link *l = rc->dict->link_table[li];
            if (l && l->trace_id.len == 16 && nonzero(l->trace_id.data, 16)) {
                rc->link_part[li] = part_of_hash(rc, pc_ring_hash(l->trace_id.data, 16));
                return rc->link_part[li];
            }
        }
        return by_resource(rc, r, res, KEY_SERVICE); /* no trace: by service */
    }
    case KEY_RESOURCE: return by_resource(rc, r, res, KEY_RESOURCE);
    case KEY_ATTRIBUTES: {
        const pc_scope_profiles *sp = rp->scope_profiles[s];
        return attributes_part(rc, res, sp->scope, NULL, 0, smp ? smp->attribute_indices : NULL,
                               smp ? smp->n_attribute_indices : 0);
    }
    default: return by_resource(rc, r, res, KEY_SERVICE);
    }
}

static uint32_t span_part(void *arg, const pc_batch *b, size_t r, size_t s, size_t p, size_t i)
{
    route_ctx *rc = arg;
    (void)p;
    const pc_traces_request *req = (const pc_traces_request *)b->msg;
    const pc_resource_spans *rs = req->resource_spans[r];
    const pc_resource *res = rs->resource;
    const pc_span *sp = rs->scope_spans[s]->spans[i];
    switch (rc->key) {
    case KEY_SERVICE: return by_resource(rc, r, res, KEY_SERVICE);
    case KEY_RESOURCE: return by_resource(rc, r, res, KEY_RESOURCE);
    case KEY_ATTRIBUTES:
        return attributes_part(rc, res, rs->scope_spans[s]->scope, sp ? sp->attributes : NULL,
                               sp && sp->attributes ? sp->n_attributes : 0, NULL, 0);
    default:
        if (sp && sp->trace_id.len == 16 && nonzero(sp->trace_id.data, 16))
            return part_of_hash(rc, pc_ring_hash(sp->trace_id.data, 16));
        return by_resource(rc, r, res, KEY_SERVICE);
    }
}

static void lb_route(pc_exporter *e, const pc_ring *ring, const pc_batch *b, pc_batch **parts)
{
    const lb_cfg *cfg = e->c->cfg;
    route_ctx rc = {.cfg = cfg, .ring = ring, .key = cfg->key};
    if (rc.key == KEY_DEFAULT) rc.key = b->signal == PC_SIGNAL_TRACES ? KEY_TRACE : KEY_SERVICE;
    if (b->signal == PC_SIGNAL_PROFILES) {
        rc.dict = pc_batch_req(b)->dictionary;
        if (rc.key == KEY_TRACE && rc.dict && rc.dict->link_table) {
            rc.n_links = rc.dict->n_link_table;
            rc.link_part = pc_xmalloc(rc.n_links * sizeof *rc.link_part);
            memset(rc.link_part, 0xff, rc.n_links * sizeof *rc.link_part);
        }
    }
    pc_batch_route(b, (uint32_t)pc_ring_size(ring),
                   b->signal == PC_SIGNAL_PROFILES ? profile_part : span_part, &rc, parts);
    free(rc.link_part);
    pc_buf_free(&rc.kb);
}

/* ---- backends ---- */

static void *lb_route_open(pc_exporter *e, const char *name, pc_error *err)
{
    lb_cfg *cfg = e->c->cfg;
    lb *x = e->priv;
    if (cfg->protocol == PROTO_OTLP) return pc_otlp_grpc_open(e->c, &cfg->grpc, name, err);
    char url[600];
    if (strstr(name, "://"))
        snprintf(url, sizeof url, "%s", name);
    else /* as the otlp exporter has it: TLS unless tls::insecure */
        snprintf(url, sizeof url, "%s://%s", cfg->http.client.tls.insecure ? "http" : "https",
                 name);
    pc_url u;
    if (pc_url_parse(url, &u, err) < 0) return NULL;
    http_backend *hb = pc_xcalloc(1, sizeof *hb);
    size_t bl = strlen(u.path);
    while (bl && u.path[bl - 1] == '/')
        bl--;
    snprintf(hb->base, sizeof hb->base, "%.*s", (int)bl, u.path);
    if (pc_otlp_http_open(e->c, &cfg->http, &u, x->http_headers, &hb->h, err) < 0) {
        pc_otlp_http_close(&hb->h, free, hb);
        return NULL;
    }
    PC_INFO(e->c->id, "sending OTLP/HTTP to %s://%s:%d%s/...", hb->h.tls ? "https" : "http", u.host,
            u.port, hb->base);
    return hb;
}

/* An OTLP/HTTP backend goes once its client has closed. */
typedef struct http_closing {
    http_backend *hb;
    void (*done)(void *);
    void *arg;
} http_closing;

static void http_closed(void *arg)
{
    http_closing *cl = arg;
    free(cl->hb);
    cl->done(cl->arg);
    free(cl);
}

static void lb_route_close(pc_exporter *e, void *target, void (*done)(void *), void *arg)
{
    lb_cfg *cfg = e->c->cfg;
    if (cfg->protocol == PROTO_OTLP) {
        pc_otlp_grpc_close(target, done, arg);
        return;
    }
    http_closing *cl = pc_xmalloc(sizeof *cl);
    *cl = (http_closing){target, done, arg};
    pc_otlp_http_close(&cl->hb->h, http_closed, cl);
}

static void lb_encode(pc_export_req *r)
{
    lb_cfg *cfg = r->e->c->cfg;
    if (cfg->protocol == PROTO_OTLP)
        pc_otlp_grpc_encode(&cfg->grpc, r);
    else
        pc_otlp_http_encode(&cfg->http, r);
}

static void lb_send(pc_export_req *r)
{
    lb_cfg *cfg = r->e->c->cfg;
    if (cfg->protocol == PROTO_OTLP) {
        pc_otlp_grpc_send(r->target, r);
        return;
    }
    http_backend *hb = r->target;
    char path[700];
    snprintf(path, sizeof path, "%s%s", hb->base, pc_signal_infos[r->sig].http_path);
    pc_otlp_http_send(&hb->h, path, r);
}

/* ---- resolvers ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static double n_backends(const void *arg)
{
    const lb *x = arg;
    return (double)pc_exporter_n_routes(x->e);
}

/* The resolved names (sorted, unique) become the backends if they changed. */
static void apply_names(lb *x, char **names, size_t n)
{
    qsort(names, n, sizeof *names, cmp_str);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && !strcmp(names[k - 1], names[i])) {
            free(names[i]);
            continue;
        }
        names[k++] = names[i];
    }
    bool same = k == x->n_last;
    for (size_t i = 0; same && i < k; i++)
        same = !strcmp(names[i], x->last[i]);
    if (same) {
        free_names(names, k);
        return;
    }
    free_names(x->last, x->n_last);
    x->last = names;
    x->n_last = k;
    x->updates++;
    pc_exporter_set_routes(x->e, (const char *const *)names, k, NULL);
}

static void dns_resolve(lb *x);

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    dns_query *q = (dns_query *)req;
    lb *x = q->x;
    if (!x) { /* given up: timed out, or the exporter stopped */
        if (res) uv_freeaddrinfo(res);
        free(q);
        return;
    }
    x->query = NULL;
    uv_timer_stop(&x->timeout);
    const lb_cfg *cfg = x->e->c->cfg;
    if (status < 0) {
        x->resolutions_failed++;
        PC_WARN_RATELIMITED(&x->dns_log, x->e->c->id,
                            "resolving %s failed: %s; keeping the %zu backend(s) there were",
                            cfg->dns_hostname, uv_strerror(status), x->n_last);
        free(q);
        return;
    }
    size_t n = 0, cap = 8;
    char **names = pc_xmalloc(cap * sizeof *names);
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        char ip[INET6_ADDRSTRLEN], name[INET6_ADDRSTRLEN + 16];
        if (ai->ai_family == AF_INET)
            uv_ip4_name((const struct sockaddr_in *)ai->ai_addr, ip, sizeof ip);
        else if (ai->ai_family == AF_INET6)
            uv_ip6_name((const struct sockaddr_in6 *)ai->ai_addr, ip, sizeof ip);
        else
            continue;
        snprintf(name, sizeof name, ai->ai_family == AF_INET6 ? "[%s]:%lld" : "%s:%lld", ip,
                 (long long)cfg->dns_port);
        if (n == cap) names = pc_xrealloc(names, (cap *= 2) * sizeof *names);
        names[n++] = pc_xstrdup(name);
    }
    uv_freeaddrinfo(res);
    free(q);
    if (!n) { /* nothing to send to: keep what there was */
        free(names);
        x->resolutions_failed++;
        PC_WARN_RATELIMITED(&x->dns_log, x->e->c->id,
                            "%s has no A or AAAA record; keeping the %zu backend(s) there were",
                            cfg->dns_hostname, x->n_last);
        return;
    }
    x->resolutions_ok++;
    apply_names(x, names, n);
}

static void dns_timeout(uv_timer_t *t)
{
    lb *x = t->data;
    if (!x->query) return;
    x->query->x = NULL; /* its answer, whenever it comes, is dropped */
    x->query = NULL;
    x->resolutions_failed++;
    const lb_cfg *cfg = x->e->c->cfg;
    PC_WARN_RATELIMITED(&x->dns_log, x->e->c->id,
                        "resolving %s took longer than %llums; keeping the %zu backend(s) there "
                        "were",
                        cfg->dns_hostname, (unsigned long long)cfg->dns_timeout_ms, x->n_last);
}

static void dns_resolve(lb *x)
{
    const lb_cfg *cfg = x->e->c->cfg;
    if (x->query || x->stopped) return; /* one lookup at a time */
    dns_query *q = pc_xcalloc(1, sizeof *q);
    q->x = x;
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC; /* A and AAAA; no AI_ADDRCONFIG: loopback addresses count */
    hints.ai_socktype = SOCK_STREAM;
    int rc = uv_getaddrinfo(x->e->c->loop, &q->req, on_resolved, cfg->dns_hostname, NULL, &hints);
    if (rc < 0) {
        free(q);
        x->resolutions_failed++;
        PC_WARN_RATELIMITED(&x->dns_log, x->e->c->id, "resolving %s failed: %s", cfg->dns_hostname,
                            uv_strerror(rc));
        return;
    }
    x->query = q;
    uv_timer_start(&x->timeout, dns_timeout, cfg->dns_timeout_ms, 0);
}

static void dns_tick(uv_timer_t *t)
{
    dns_resolve(t->data);
}

/* Start the resolver of the current config: static names now, or DNS now and every interval. */
static int resolver_start(lb *x, pc_error *err)
{
    const lb_cfg *cfg = x->e->c->cfg;
    uv_timer_stop(&x->interval);
    if (!cfg->dns) {
        char **names = pc_xmalloc((cfg->hostnames.n ? cfg->hostnames.n : 1) * sizeof *names);
        for (size_t i = 0; i < cfg->hostnames.n; i++)
            names[i] = pc_xstrdup(cfg->hostnames.v[i]);
        qsort(names, cfg->hostnames.n, sizeof *names, cmp_str);
        free_names(x->last, x->n_last);
        x->last = names;
        x->n_last = cfg->hostnames.n;
        x->resolutions_ok++;
        x->updates++;
        return pc_exporter_set_routes(x->e, (const char *const *)names, cfg->hostnames.n, err);
    }
    PC_INFO(x->e->c->id, "resolving %s every %llums (port %lld)", cfg->dns_hostname,
            (unsigned long long)cfg->dns_interval_ms, (long long)cfg->dns_port);
    dns_resolve(x);
    uv_timer_start(&x->interval, dns_tick, cfg->dns_interval_ms, cfg->dns_interval_ms);
    return 0;
}

/* ---- lifecycle ---- */

/* The loadbalancer's own series (the Collector's names), labelled with the resolver in use. */
static void register_metrics(lb *x)
{
    pc_component *c = x->e->c;
    const lb_cfg *cfg = c->cfg;
    const char *res = cfg->dns ? "dns" : "static";
    char labels[300], l2[400];
    snprintf(labels, sizeof labels, "exporter=\"%s\"", c->id);
    pc_metric_fn(x, "otelcol_loadbalancer_num_backends", "Backends in use (on the ring)",
                 PC_METRIC_GAUGE, labels, n_backends, x);
    snprintf(l2, sizeof l2, "%s,resolver=\"%s\",success=\"true\"", labels, res);
    pc_metric_u64(x, "otelcol_loadbalancer_num_resolutions",
                  "Resolutions of the backends, by outcome", PC_METRIC_COUNTER, l2,
                  &x->resolutions_ok);
    snprintf(l2, sizeof l2, "%s,resolver=\"%s\",success=\"false\"", labels, res);
    pc_metric_u64(x, "otelcol_loadbalancer_num_resolutions",
                  "Resolutions of the backends, by outcome", PC_METRIC_COUNTER, l2,
                  &x->resolutions_failed);
    snprintf(l2, sizeof l2, "%s,resolver=\"%s\"", labels, res);
    pc_metric_u64(x, "otelcol_loadbalancer_num_backend_updates",
                  "Resolutions that changed the backends", PC_METRIC_COUNTER, l2, &x->updates);
}

static int lb_create(pc_exporter *e, pc_error *err)
{
    (void)err;
    lb *x = pc_xcalloc(1, sizeof *x);
    x->e = e;
    e->priv = x;
    return 0;
}

static int lb_start(pc_exporter *e, pc_error *err)
{
    pc_component *c = e->c;
    lb *x = e->priv;
    lb_cfg *cfg = c->cfg;
    if (cfg->protocol == PROTO_OTLPHTTP) x->http_headers = pc_otlp_http_headers(&cfg->http);
    uv_timer_init(c->loop, &x->interval);
    uv_timer_init(c->loop, &x->timeout);
    x->interval.data = x->timeout.data = x;
    x->timers_open = 1;
    register_metrics(x);
    PC_INFO(c->id, "routing %s over OTLP/%s",
            cfg->key == KEY_DEFAULT    ? "spans by traceID and profiles by service"
            : cfg->key == KEY_TRACE    ? "by traceID (profile samples without a trace by service)"
            : cfg->key == KEY_SERVICE  ? "by service"
            : cfg->key == KEY_RESOURCE ? "by resource"
                                       : "by routing_attributes",
            cfg->protocol == PROTO_OTLP ? "gRPC" : "HTTP");
    return resolver_start(x, err);
}

static void lb_stopping(pc_exporter *e)
{
    lb *x = e->priv;
    x->stopped = true;
    if (!x->timers_open) return;
    uv_timer_stop(&x->interval);
    uv_timer_stop(&x->timeout);
    if (x->query) { /* dropped when it answers */
        x->query->x = NULL;
        x->query = NULL;
    }
}

static void timer_closed(uv_handle_t *h)
{
    lb *x = h->data;
    if (--x->closing == 0) pc_exporter_closed(x->e);
}

static void lb_close(pc_exporter *e)
{
    lb *x = e->priv;
    if (!x->timers_open) {
        pc_exporter_closed(e);
        return;
    }
    x->timers_open = 0;
    x->closing = 2;
    uv_close((uv_handle_t *)&x->interval, timer_closed);
    uv_close((uv_handle_t *)&x->timeout, timer_closed);
}

static void lb_destroy(pc_exporter *e)
{
    lb *x = e->priv;
    if (!x) return;
    pc_metric_unregister(x);
    free_names(x->last, x->n_last);
    free(x->http_headers);
    free(x);
}

/* ---- reload ---- */

/* Only the resolver changed: the running exporter takes it. */
static bool lb_reconfigurable(const pc_node *a, const pc_node *b)
{
    if (!a || !b || a->kind != PC_NODE_MAP || b->kind != PC_NODE_MAP) return false;
    for (int pass = 0; pass < 2; pass++) {
        const pc_node *x = pass ? b : a, *y = pass ? a : b;
        for (size_t i = 0; i < x->n; i++)
            if (strcmp(x->keys[i], "resolver") != 0 &&
                !pc_node_equal(x->vals[i], pc_node_get(y, x->keys[i])))
                return false;
    }
    return true;
}

static void lb_reconfigure(pc_component *c, void *new_cfg)
{
    lb_cfg *cur = c->cfg, *nw = new_cfg;
    lb *x = pc_exporter_of(c)->priv;
#define SWAP(f)                                                                                    \
    do {                                                                                           \
        __typeof__(cur->f) t_ = cur->f;                                                            \
        cur->f = nw->f;                                                                            \
        nw->f = t_;                                                                                \
    } while (0)
    SWAP(hostnames);
    SWAP(dns_hostname);
    SWAP(dns_port);
    SWAP(dns_interval_ms);
    SWAP(dns_timeout_ms);
    bool resolver_kind_changed = cur->dns != nw->dns;
    SWAP(dns);
#undef SWAP
    if (resolver_kind_changed && x->timers_open) { /* the series carry the resolver's name */
        pc_metric_unregister(x);
        register_metrics(x);
    }
    if (x->query) { /* a lookup of the old name: its answer no longer counts */
        x->query->x = NULL;
        x->query = NULL;
        uv_timer_stop(&x->timeout);
    }
    PC_INFO(c->id, "reload: resolver changed, applied in place");
    pc_error e = {0};
    if (x->timers_open && !x->stopped && resolver_start(x, &e) < 0)
        PC_ERROR(c->id, "reload: %s", e.msg);
}

static const pc_exporter_def lb_def = {
    .sender_cfg = offsetof(lb_cfg, sender),
    .create = lb_create,
    .start = lb_start,
    .encode = lb_encode,
    .send = lb_send,
    .stopping = lb_stopping,
    .close = lb_close,
    .destroy = lb_destroy,
    .route = lb_route,
    .route_open = lb_route_open,
    .route_close = lb_route_close,
};

const pc_component_type pc_exporter_loadbalancing = {
    .name = "loadbalancing",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .cfg_size = sizeof(lb_cfg),
    .cfg = lb_keys,
    .validate = lb_validate,
    PC_EXPORTER_CORE(&lb_def),
    .signals = PC_SIGNAL_BIT(PC_SIGNAL_PROFILES) | PC_SIGNAL_BIT(PC_SIGNAL_TRACES),
    .reconfigurable = lb_reconfigurable,
    .reconfigure = lb_reconfigure,
    .doc = "spreads traces and profiles over backends by trace id, service, resource or "
           "attributes on a consistent-hash ring (static or DNS resolver), one sending queue per "
           "backend, over OTLP/gRPC or OTLP/HTTP",
};
