/* Exporter "otlphttp": OTLP/HTTP for every signal, to endpoint + the signal's path
 * (/v1development/profiles, /v1/traces, /v1/metrics, /v1/logs) or to <signal>_endpoint as is.
 * On the exporter core (sdk/exporter.h: queue, retries, counting, lifecycle) and the shared
 * OTLP/HTTP client (sdk/otlp_client.h: settings, encode and compress on the thread pool,
 * POST with the HTTP client, the answer read as the OTLP/HTTP spec says, partial success too),
 * which the loadbalancing exporter uses for each of its backends. */
#include <stdlib.h>
#include <string.h>

#include "net/url.h"
#include "sdk/component.h"
#include "sdk/exporter.h"
#include "sdk/otlp_client.h"

typedef struct otlphttp_cfg {
    pc_otlp_http_cfg http;
} otlphttp_cfg;

/* clang-format off */
static const pc_cfg_key otlphttp_keys[] = {
    {"", PC_CFG_GROUP, "", offsetof(otlphttp_cfg, http), "the OTLP/HTTP client", pc_otlp_http_keys},
    {0},
};
/* clang-format on */

/* Where one signal goes: a URL whose origin is one of the clients. Signals whose URLs share
 * scheme, host and port share one client. */
typedef struct target {
    bool set; /* endpoint or <signal>_endpoint configured */
    pc_url url;
    int origin; /* index in otlphttp.origins once started */
} target;

typedef struct otlphttp {
    target t[PC_SIGNAL_COUNT];
    pc_otlp_http origins[PC_SIGNAL_COUNT];
    int n_origins;
    char *headers; /* preformatted "Name: value\r\n" lines */
    int closing;   /* clients still closing at shutdown */
} otlphttp;

static int otlphttp_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    otlphttp_cfg *cfg = cfgp;
    return pc_otlp_http_validate(&cfg->http, node, path, "", true, err);
}

static int otlphttp_create(pc_exporter *ex, pc_error *err)
{
    const pc_otlp_http_cfg *cfg = &((otlphttp_cfg *)ex->c->cfg)->http;
    otlphttp *x = pc_xcalloc(1, sizeof(*x));
    (void)err;
    ex->priv = x;
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        target *t = &x->t[sig];
        if (cfg->signal_endpoint[sig] && *cfg->signal_endpoint[sig]) {
            pc_url_parse(cfg->signal_endpoint[sig], &t->url, NULL);
            if (!t->url.path[0]) strcpy(t->url.path, "/");
            t->set = true;
        } else if (cfg->endpoint && *cfg->endpoint) {
            pc_url_parse(cfg->endpoint, &t->url, NULL);
            strncat(t->url.path, pc_signal_infos[sig].http_path,
                    sizeof t->url.path - strlen(t->url.path) - 1);
            t->set = true;
        }
    }
    x->headers = pc_otlp_http_headers(cfg);
    return 0;
}

static int otlphttp_check_signal(const pc_component *c, pc_signal sig, pc_error *e)
{
    const otlphttp *x = pc_exporter_of(c)->priv;
    if (x->t[sig].set) return 0;
    return pc_error_set(e, PC_ENOTSUP, "no endpoint for %s (set endpoint or %s)",
                        pc_signal_infos[sig].name, pc_signal_infos[sig].endpoint_key);
}

static bool same_origin(const pc_url *a, const pc_url *b)
{
    return !strcmp(a->scheme, b->scheme) && !strcmp(a->host, b->host) && a->port == b->port;
}

static int otlphttp_start(pc_exporter *e, pc_error *err)
{
    pc_component *c = e->c;
    otlphttp *x = e->priv;
    const pc_otlp_http_cfg *cfg = &((otlphttp_cfg *)c->cfg)->http;
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        target *t = &x->t[sig];
        if (!t->set) continue;
        t->origin = -1;
        for (int o = 0; o < x->n_origins && t->origin < 0; o++)
            if (same_origin(&x->origins[o].url, &t->url)) t->origin = o;
        if (t->origin >= 0) continue;
        int rc = pc_otlp_http_open(c, cfg, &t->url, x->headers, &x->origins[x->n_origins], err);
        x->n_origins++; /* closed at shutdown even when half open */
        if (rc < 0) return rc;
        t->origin = x->n_origins - 1;
    }
    const target *t = x->t[PC_SIGNAL_PROFILES].set ? &x->t[PC_SIGNAL_PROFILES] : NULL;
    for (int sig = 0; sig < PC_SIGNAL_COUNT && !t; sig++)
        if (x->t[sig].set) t = &x->t[sig];
    PC_INFO(c->id, "sending to %s://%s:%d%s%s", x->origins[t->origin].tls ? "https" : "http",
            t->url.host, t->url.port, t->url.path,
            cfg->endpoint ? " (other signals: their paths)" : "");
    return 0;
}

static void otlphttp_encode(pc_export_req *r)
{
    pc_otlp_http_encode(&((otlphttp_cfg *)r->e->c->cfg)->http, r);
}

static bool otlphttp_encode_is_copy(const pc_export_req *r)
{
    return pc_otlp_http_encode_is_copy(&((otlphttp_cfg *)r->e->c->cfg)->http, r);
}

/* x->t[r->sig] is set: otlphttp_check_signal saw to it. */
static void otlphttp_send(pc_export_req *r)
{
    otlphttp *x = r->e->priv;
    const target *t = &x->t[r->sig];
    pc_otlp_http_send(&x->origins[t->origin], t->url.path, r);
}

static void client_closed(void *arg)
{
    pc_exporter *e = arg;
    otlphttp *x = e->priv;
    if (--x->closing == 0) pc_exporter_closed(e);
}

static void otlphttp_close(pc_exporter *e)
{
    otlphttp *x = e->priv;
    int n = x->n_origins;
    x->n_origins = 0;
    if (!n) {
        pc_exporter_closed(e);
        return;
    }
    x->closing = n; /* counted before any close: one may complete synchronously */
    for (int i = 0; i < n; i++)
        pc_otlp_http_close(&x->origins[i], client_closed, e);
}

static void otlphttp_destroy(pc_exporter *e)
{
    otlphttp *x = e->priv;
    if (!x) return;
    free(x->headers);
    free(x);
}

/* Pass-through sends protobuf bytes as received (compressed again at most) when this exporter
 * speaks protobuf (sdk/otlp_client.c). */
static bool otlphttp_wire_ok(const pc_component *c)
{
    const pc_otlp_http_cfg *cfg = &((const otlphttp_cfg *)c->cfg)->http;
    return cfg->passthrough && cfg->encoding == 0;
}

static const pc_exporter_def otlphttp_def = {
    .sender_cfg = offsetof(otlphttp_cfg, http.sender),
    .create = otlphttp_create,
    .start = otlphttp_start,
    .encode = otlphttp_encode,
    .encode_is_copy = otlphttp_encode_is_copy,
    .send = otlphttp_send,
    .close = otlphttp_close,
    .destroy = otlphttp_destroy,
};

const pc_component_type pc_exporter_otlphttp = {
    .name = "otlphttp",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .cfg_size = sizeof(otlphttp_cfg),
    .cfg = otlphttp_keys,
    .validate = otlphttp_validate,
    PC_EXPORTER_CORE(&otlphttp_def),
    .wire_ok = otlphttp_wire_ok,
    .signals = PC_SIGNALS_ALL,
    .check_signal = otlphttp_check_signal,
    .doc = "OTLP/HTTP exporter for every signal (protobuf or JSON, gzip or zstd)",
};
