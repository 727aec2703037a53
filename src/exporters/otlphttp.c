/* Exporter "otlphttp": OTLP/HTTP for every signal, to endpoint + the signal's path
 * (/v1development/profiles, /v1/traces, /v1/metrics, /v1/logs) or to <signal>_endpoint as is.
 * On the exporter core (pipeline/exporter.h: queue, retries, counting, lifecycle); this file
 * encodes and compresses a batch on the thread pool, POSTs it with the shared HTTP client, and
 * reads the answer as the OTLP/HTTP spec says (pipeline/exporter_http.h), partial success too. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pipeline/auth.h"
#include "base/compress.h"
#include "net/http_client.h"
#include "net/tls.h"
#include "pipeline/tls_config.h"
#include "net/url.h"
#include "pipeline/component.h"
#include "pipeline/exporter.h"
#include "pipeline/exporter_http.h"
#include "pipeline/sender.h"

typedef struct otlphttp_cfg {
    char *endpoint;
    char *signal_endpoint[PC_SIGNAL_COUNT]; /* profiles_endpoint, traces_endpoint, ... */
    pc_strmap headers;
    int compression; /* 0 gzip, 1 none, 2 zstd */
    int64_t compression_level;
    bool passthrough;
    int encoding; /* 0 proto, 1 json */
    uint64_t timeout_ms;
    int64_t max_connections;
    pc_tls_client_cfg tls;
    char *authenticator;
    pc_sender_cfg sender;
} otlphttp_cfg;

static const char *const compressions[] = {"gzip", "none", "zstd", NULL};
static const pc_enc compression_enc[] = {PC_ENC_GZIP, PC_ENC_NONE, PC_ENC_ZSTD};
static const char *const encodings[] = {"proto", "json", NULL};

static const pc_cfg_key otlphttp_keys[] = {
    {"endpoint", PC_CFG_STRING, NULL, offsetof(otlphttp_cfg, endpoint),
     "base URL; the signal's path is appended (/v1development/profiles, /v1/traces, /v1/metrics, "
     "/v1/logs)",
     NULL},
    {"profiles_endpoint", PC_CFG_STRING, NULL,
     offsetof(otlphttp_cfg, signal_endpoint[PC_SIGNAL_PROFILES]),
     "full URL for profiles, used as is (overrides endpoint)", NULL},
    {"traces_endpoint", PC_CFG_STRING, NULL,
     offsetof(otlphttp_cfg, signal_endpoint[PC_SIGNAL_TRACES]),
     "full URL for traces, used as is (overrides endpoint)", NULL},
    {"metrics_endpoint", PC_CFG_STRING, NULL,
     offsetof(otlphttp_cfg, signal_endpoint[PC_SIGNAL_METRICS]),
     "full URL for metrics, used as is (overrides endpoint)", NULL},
    {"logs_endpoint", PC_CFG_STRING, NULL, offsetof(otlphttp_cfg, signal_endpoint[PC_SIGNAL_LOGS]),
     "full URL for logs, used as is (overrides endpoint)", NULL},
    {"headers", PC_CFG_MAP, NULL, offsetof(otlphttp_cfg, headers), "extra request headers", NULL},
    {"compression", PC_CFG_ENUM, "gzip", offsetof(otlphttp_cfg, compression),
     "request body compression", compressions},
    {"compression_params.level", PC_CFG_INT, "1", offsetof(otlphttp_cfg, compression_level),
     "gzip level 1 (fastest) to 9 (smallest): 1-3 through ISA-L's igzip, 6-11x cheaper than zlib "
     "for 7-12% more bytes, 4-9 through zlib; zstd level 1 to 19",
     NULL},
    {"passthrough", PC_CFG_BOOL, "true", offsetof(otlphttp_cfg, passthrough),
     "send a request's bytes as received (compressed, if the compression matches) when nothing "
     "in the pipeline changed its data and its encoding is this exporter's",
     NULL},
    {"encoding", PC_CFG_ENUM, "proto", offsetof(otlphttp_cfg, encoding), "request body encoding",
     encodings},
    {"timeout", PC_CFG_DURATION, "30s", offsetof(otlphttp_cfg, timeout_ms),
     "time allowed for one request (connect, send, response)", NULL},
    {"max_connections", PC_CFG_INT, "8", offsetof(otlphttp_cfg, max_connections),
     "keep-alive connections to the endpoint", NULL},
    PC_TLS_CLIENT_KEYS(otlphttp_cfg, tls, ""),
    PC_AUTH_CLIENT_KEY(otlphttp_cfg, authenticator, ""),
    PC_SENDER_KEYS(otlphttp_cfg, sender),
    {NULL, 0, NULL, 0, NULL, NULL},
};

/* Where one signal goes. Signals whose URLs share scheme, host and port share one client. */
typedef struct target {
    bool set; /* endpoint or <signal>_endpoint configured */
    pc_url url;
    pc_http_client *client; /* owned when owner */
    pc_tls_ctx *tls;        /* NULL: plain text; owned when owner */
    bool owner;
} target;

typedef struct otlphttp {
    target t[PC_SIGNAL_COUNT];
    char *headers; /* preformatted "Name: value\r\n" lines */
    pc_auth *auth; /* NULL: no authenticator */
    int closing;   /* clients still closing at shutdown */
} otlphttp;

static int header_ok(const char *s)
{
    for (; *s; s++)
        if (*s == '\r' || *s == '\n') return 0;
    return 1;
}

static int otlphttp_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    otlphttp_cfg *cfg = cfgp;
    pc_url u;
    pc_error e = {0};
    bool any = cfg->endpoint && *cfg->endpoint;
    if (any && pc_url_parse(cfg->endpoint, &u, &e) < 0)
        return pc_cfg_key_errorf(err, node, path, "endpoint", "%s", e.msg);
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        const char *ep = cfg->signal_endpoint[sig];
        if (!ep || !*ep) continue;
        any = true;
        if (pc_url_parse(ep, &u, &e) < 0)
            return pc_cfg_key_errorf(err, node, path, pc_signal_infos[sig].endpoint_key, "%s",
                                     e.msg);
    }
    if (!any)
        return pc_cfg_key_errorf(
            err, node, path, "endpoint",
            "required (or profiles_endpoint, traces_endpoint, metrics_endpoint, "
            "logs_endpoint)");
    if (pc_tls_client_validate(&cfg->tls, node, path, "", err)) return PC_EINVAL;
    for (size_t i = 0; i < cfg->headers.n; i++)
        if (!header_ok(cfg->headers.keys[i]) || !header_ok(cfg->headers.vals[i]))
            return pc_cfg_key_errorf(err, node, path, "headers", "%s: line breaks are not allowed",
                                     cfg->headers.keys[i]);
    int max_level = compression_enc[cfg->compression] == PC_ENC_ZSTD ? 19 : 9;
    if (cfg->compression_level < 1 || cfg->compression_level > max_level)
        return pc_cfg_key_errorf(err, node, path, "compression_params.level", "must be 1..%d",
                                 max_level);
    if (cfg->timeout_ms == 0) return pc_cfg_key_errorf(err, node, path, "timeout", "must be > 0");
    if (cfg->max_connections <= 0)
        return pc_cfg_key_errorf(err, node, path, "max_connections", "must be > 0");
    return pc_sender_validate(&cfg->sender, node, path, err);
}

static int otlphttp_create(pc_exporter *ex, pc_error *err)
{
    otlphttp_cfg *cfg = ex->c->cfg;
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
    pc_buf h = {0};
    pc_buf_printf(&h, "Content-Type: %s\r\nUser-Agent: profcol/%s\r\n",
                  cfg->encoding ? "application/json" : "application/x-protobuf", PROFCOL_VERSION);
    if (compression_enc[cfg->compression] != PC_ENC_NONE)
        pc_buf_printf(&h, "Content-Encoding: %s\r\n",
                      pc_enc_name(compression_enc[cfg->compression]));
    for (size_t i = 0; i < cfg->headers.n; i++)
        pc_buf_printf(&h, "%s: %s\r\n", cfg->headers.keys[i], cfg->headers.vals[i]);
    x->headers = pc_xstrdup((char *)h.data);
    pc_buf_free(&h);
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
    otlphttp_cfg *cfg = c->cfg;
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        target *t = &x->t[sig];
        if (!t->set) continue;
        for (int o = 0; o < sig && !t->client; o++)
            if (x->t[o].set && same_origin(&x->t[o].url, &t->url)) {
                t->client = x->t[o].client;
                t->tls = x->t[o].tls;
            }
        if (t->client) continue;
        pc_auth *auth = NULL;
        int rc = pc_exporter_http_open(c, &t->url, cfg->max_connections, &cfg->tls,
                                       cfg->authenticator, &t->client, &t->tls, &auth, err);
        if (rc < 0) return rc;
        t->owner = true;
        x->auth = auth;
    }
    const target *t = x->t[PC_SIGNAL_PROFILES].set ? &x->t[PC_SIGNAL_PROFILES] : NULL;
    for (int sig = 0; sig < PC_SIGNAL_COUNT && !t; sig++)
        if (x->t[sig].set) t = &x->t[sig];
    PC_INFO(c->id, "sending to %s://%s:%d%s%s", t->tls ? "https" : "http", t->url.host, t->url.port,
            t->url.path, cfg->endpoint ? " (other signals: their paths)" : "");
    return 0;
}

static void otlphttp_encode(pc_export_req *r)
{
    otlphttp_cfg *cfg = r->e->c->cfg;
    const pc_batch *b = r->batch;
    pc_enc enc = compression_enc[cfg->compression];
    int level = (int)cfg->compression_level;
    if (cfg->passthrough && b->raw && b->raw_json == (cfg->encoding == 1)) {
        if (b->raw_enc == (int)enc) { /* as received */
            pc_buf_append(&r->body, b->raw, b->raw_len);
            return;
        }
        if (b->raw_enc == PC_ENC_NONE) { /* received uncompressed: compress, never re-encode */
            pc_compress(enc, b->raw, b->raw_len, level, &r->body);
            return;
        }
    }
    pc_buf raw = {0};
    if (cfg->encoding)
        pc_batch_encode_json(b, &raw);
    else
        pc_batch_encode_proto(b, &raw);
    if (enc != PC_ENC_NONE) {
        pc_compress(enc, raw.data, raw.len, level, &r->body);
        pc_buf_free(&raw);
    } else {
        r->body = raw;
    }
}

static void on_response(const pc_http_response *resp, void *arg)
{
    pc_export_req *r = arg;
    const otlphttp *x = r->e->priv;
    pc_export_outcome o;
    pc_exporter_http_outcome(resp, &x->t[r->sig].url, &o);
    if (o.st == PC_OK) /* 2xx may carry a partial success */
        pc_export_outcome_partial(&o, r->sig, resp->body, resp->body_len,
                                  resp->content_type && strstr(resp->content_type, "json"));
    pc_export_done(r, &o);
}

/* x->t[r->sig] is set: otlphttp_check_signal saw to it. */
static void otlphttp_send(pc_export_req *r)
{
    otlphttp *x = r->e->priv;
    otlphttp_cfg *cfg = r->e->c->cfg;
    const target *t = &x->t[r->sig];
    pc_buf h = {0};
    if (x->auth) { /* per request: a token file may have been reloaded */
        pc_buf_printf(&h, "%s", x->headers);
        pc_auth_headers(x->auth, &h);
    }
    pc_http_client_request(t->client, "POST", t->url.path, x->auth ? (char *)h.data : x->headers,
                           r->body.data, r->body.len, (unsigned)cfg->timeout_ms, on_response, r);
    pc_buf_free(&h);
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
    pc_http_client *owned[PC_SIGNAL_COUNT];
    int n = 0;
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        if (x->t[sig].owner && x->t[sig].client) owned[n++] = x->t[sig].client;
        x->t[sig].client = NULL;
    }
    if (!n) {
        pc_exporter_closed(e);
        return;
    }
    x->closing = n; /* counted before any close: one may complete synchronously */
    for (int i = 0; i < n; i++)
        pc_http_client_close(owned[i], client_closed, e);
}

static void otlphttp_destroy(pc_exporter *e)
{
    otlphttp *x = e->priv;
    if (!x) return;
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++)
        if (x->t[sig].owner) pc_tls_ctx_free(x->t[sig].tls);
    free(x->headers);
    free(x);
}

static const pc_exporter_def otlphttp_def = {
    .sender_cfg = offsetof(otlphttp_cfg, sender),
    .create = otlphttp_create,
    .start = otlphttp_start,
    .encode = otlphttp_encode,
    .send = otlphttp_send,
    .close = otlphttp_close,
    .destroy = otlphttp_destroy,
};

const pc_component_type pc_exporter_otlphttp = {
    .name = "otlphttp",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .doc = "OTLP/HTTP exporter for every signal (protobuf or JSON, gzip or zstd)",
    .cfg_size = sizeof(otlphttp_cfg),
    .cfg = otlphttp_keys,
    .validate = otlphttp_validate,
    PC_EXPORTER_CORE(&otlphttp_def),
    .signals = PC_SIGNALS_ALL,
    .check_signal = otlphttp_check_signal,
};
