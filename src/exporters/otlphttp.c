/* Exporter "otlphttp": OTLP/HTTP profiles to endpoint + /v1development/profiles.
 * Queueing and retries are the shared sender's (pipeline/sender.c); this file sends one batch
 * once: encode and compress on the thread pool, POST with the shared HTTP client, and classify
 * the answer as the OTLP/HTTP spec says (429/502/503/504 and network errors are retryable). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "extensions/auth.h"
#include "net/gzip.h"
#include "net/http_client.h"
#include "net/tls.h"
#include "net/url.h"
#include "pdata/json.h"
#include "pipeline/component.h"
#include "pipeline/exporter_http.h"
#include "pipeline/sender.h"
#include "pipeline/telemetry.h"

typedef struct otlphttp_cfg {
    char *endpoint;
    char *profiles_endpoint;
    pc_strmap headers;
    int compression; /* 0 gzip, 1 none */
    int64_t compression_level;
    int encoding; /* 0 proto, 1 json */
    uint64_t timeout_ms;
    int64_t max_connections;
    pc_tls_client_cfg tls;
    char *authenticator;
    pc_sender_cfg sender;
} otlphttp_cfg;

static const char *const compressions[] = {"gzip", "none", NULL};
static const char *const encodings[] = {"proto", "json", NULL};

static const pc_cfg_key otlphttp_keys[] = {
    {"endpoint", PC_CFG_STRING, NULL, offsetof(otlphttp_cfg, endpoint),
     "base URL; /v1development/profiles is appended", NULL},
    {"profiles_endpoint", PC_CFG_STRING, NULL, offsetof(otlphttp_cfg, profiles_endpoint),
     "full URL for profiles, used as is (overrides endpoint)", NULL},
    {"headers", PC_CFG_MAP, NULL, offsetof(otlphttp_cfg, headers), "extra request headers", NULL},
    {"compression", PC_CFG_ENUM, "gzip", offsetof(otlphttp_cfg, compression),
     "request body compression", compressions},
    {"compression_params.level", PC_CFG_INT, "1", offsetof(otlphttp_cfg, compression_level),
     "gzip level 1 (fastest) to 9 (smallest); 1 is ~3x cheaper than 6 for ~4% more bytes", NULL},
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

typedef struct otlphttp {
    pc_component *c;
    pc_url url;
    char *headers;   /* preformatted "Name: value\r\n" lines */
    pc_tls_ctx *tls; /* NULL: plain text */
    pc_auth *auth;   /* NULL: no authenticator */
    pc_http_client *client;
    pc_sender *sender;
    pc_shutdown_done shutdown_done;
} otlphttp;

typedef struct send_job {
    uv_work_t work;
    otlphttp *x;
    const pc_batch *batch; /* borrowed from the sender until result is called */
    pc_buf body;
    pc_send_result result;
    void *ctx;
} send_job;

static int header_ok(const char *s)
{
    for (; *s; s++)
        if (*s == '\r' || *s == '\n') return 0;
    return 1;
}

static int otlphttp_validate(void *cfgp, const pc_node *node, const char *path, pc_cfg_err *err)
{
    otlphttp_cfg *cfg = cfgp;
    const char *ep = cfg->profiles_endpoint ? cfg->profiles_endpoint : cfg->endpoint;
    pc_url u;
    char e[256];
    const char *key = cfg->profiles_endpoint ? "profiles_endpoint" : "endpoint";
    if (!ep || !*ep) {
        pc_cfg_key_errorf(err, node, path, "endpoint", "required (or profiles_endpoint)");
        return -1;
    }
    if (pc_url_parse(ep, &u, e, sizeof e)) {
        pc_cfg_key_errorf(err, node, path, key, "%s", e);
        return -1;
    }
    if (pc_tls_client_validate(&cfg->tls, node, path, "", err)) return -1;
    for (size_t i = 0; i < cfg->headers.n; i++)
        if (!header_ok(cfg->headers.keys[i]) || !header_ok(cfg->headers.vals[i])) {
            pc_cfg_key_errorf(err, node, path, "headers", "%s: line breaks are not allowed",
                              cfg->headers.keys[i]);
            return -1;
        }
    if (cfg->compression_level < 1 || cfg->compression_level > 9) {
        pc_cfg_key_errorf(err, node, path, "compression_params.level", "must be 1..9");
        return -1;
    }
    if (cfg->timeout_ms == 0) {
        pc_cfg_key_errorf(err, node, path, "timeout", "must be > 0");
        return -1;
    }
    if (cfg->max_connections <= 0) {
        pc_cfg_key_errorf(err, node, path, "max_connections", "must be > 0");
        return -1;
    }
    return pc_sender_validate(&cfg->sender, node, path, err);
}

static int otlphttp_create(pc_component *c, pc_cfg_err *err)
{
    otlphttp_cfg *cfg = c->cfg;
    otlphttp *x = pc_xcalloc(1, sizeof(*x));
    char e[256];
    (void)err;
    x->c = c;
    c->priv = x;
    if (cfg->profiles_endpoint) {
        pc_url_parse(cfg->profiles_endpoint, &x->url, e, sizeof e);
        if (!x->url.path[0]) strcpy(x->url.path, "/");
    } else {
        pc_url_parse(cfg->endpoint, &x->url, e, sizeof e);
        strncat(x->url.path, "/v1development/profiles",
                sizeof x->url.path - strlen(x->url.path) - 1);
    }
    pc_buf h = {0};
    pc_buf_printf(&h, "Content-Type: %s\r\nUser-Agent: profcol/%s\r\n",
                  cfg->encoding ? "application/json" : "application/x-protobuf", PROFCOL_VERSION);
    if (cfg->compression == 0) pc_buf_printf(&h, "Content-Encoding: gzip\r\n");
    for (size_t i = 0; i < cfg->headers.n; i++)
        pc_buf_printf(&h, "%s: %s\r\n", cfg->headers.keys[i], cfg->headers.vals[i]);
    x->headers = pc_xstrdup((char *)h.data);
    pc_buf_free(&h);
    return 0;
}

static void otlphttp_send(pc_component *c, pc_batch *b, pc_send_result result, void *ctx);

static int otlphttp_start(pc_component *c, char *err, size_t errlen)
{
    otlphttp *x = c->priv;
    otlphttp_cfg *cfg = c->cfg;
    if (pc_exporter_http_open(c, &x->url, cfg->max_connections, &cfg->tls, cfg->authenticator,
                              &x->client, &x->tls, &x->auth, err, errlen))
        return -1;
    x->sender = pc_sender_new(c, &cfg->sender, otlphttp_send, err, errlen);
    if (!x->sender) return -1;
    PC_INFO(c->id, "sending to %s://%s:%d%s", x->tls ? "https" : "http", x->url.host, x->url.port,
            x->url.path);
    return 0;
}

static void encode_work(uv_work_t *w)
{
    send_job *j = w->data;
    otlphttp_cfg *cfg = j->x->c->cfg;
    pc_buf raw = {0};
    if (cfg->encoding)
        pc_batch_encode_json(j->batch, &raw);
    else
        pc_batch_encode_proto(j->batch, &raw);
    if (cfg->compression == 0) {
        pc_gzip_deflate(raw.data, raw.len, (int)cfg->compression_level, &j->body);
        pc_buf_free(&raw);
    } else {
        j->body = raw;
    }
}

static void finish(send_job *j, pc_status st, int retry_after_s, const char *msg)
{
    j->result(j->ctx, st, retry_after_s, msg);
    pc_buf_free(&j->body);
    free(j);
}

/* 2xx may carry a partial success: log it, the data was still delivered as far as it goes. */
static void log_partial_success(otlphttp *x, const pc_http_response *r)
{
    if (!r->body_len) return;
    pc_arena *a = pc_arena_new(1024);
    ProtobufCMessage *m = NULL;
    char e[128];
    int json = r->content_type && strstr(r->content_type, "json");
    if (json)
        pc_json_decode(PC_RESPONSE_DESC, (const char *)r->body, r->body_len, a, &m, e, sizeof e);
    else
        m = protobuf_c_message_unpack(PC_RESPONSE_DESC, pc_arena_allocator(a), r->body_len,
                                      r->body);
    const pc_response *resp = (const pc_response *)m;
    if (resp && resp->partial_success &&
        (resp->partial_success->rejected_profiles || resp->partial_success->error_message[0]))
        PC_WARN(x->c->id, "partial success: backend rejected %lld profile(s): %s",
                (long long)resp->partial_success->rejected_profiles,
                resp->partial_success->error_message);
    pc_arena_free(a);
}

static void on_response(const pc_http_response *r, void *arg)
{
    send_job *j = arg;
    otlphttp *x = j->x;
    char msg[512];
    if (r->error) {
        snprintf(msg, sizeof msg, "sending to %s:%d failed: %s", x->url.host, x->url.port,
                 r->error_msg ? r->error_msg : uv_strerror(r->error));
        finish(j, PC_ERR_RETRYABLE, -1, msg);
        return;
    }
    if (r->status >= 200 && r->status < 300) {
        log_partial_success(x, r);
        finish(j, PC_OK, -1, NULL);
        return;
    }
    int retryable = r->status == 429 || r->status == 502 || r->status == 503 || r->status == 504;
    snprintf(msg, sizeof msg, "backend answered HTTP %d%s%.*s", r->status, r->body_len ? ": " : "",
             (int)(r->body_len > 200 ? 200 : r->body_len), r->body ? (const char *)r->body : "");
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' ';
    if (retryable)
        finish(j, r->status == 429 ? PC_ERR_OVERLOAD : PC_ERR_RETRYABLE, r->retry_after_s, msg);
    else
        finish(j, PC_ERR_PERMANENT, -1, msg);
}

static void encode_done(uv_work_t *w, int status)
{
    send_job *j = w->data;
    otlphttp *x = j->x;
    otlphttp_cfg *cfg = x->c->cfg;
    (void)status;
    j->batch = NULL;
    pc_buf h = {0};
    if (x->auth) { /* per request: a token file may have been reloaded */
        pc_buf_printf(&h, "%s", x->headers);
        pc_auth_headers(x->auth, &h);
    }
    pc_http_client_request(x->client, "POST", x->url.path, x->auth ? (char *)h.data : x->headers,
                           j->body.data, j->body.len, (unsigned)cfg->timeout_ms, on_response, j);
    pc_buf_free(&h);
}

/* The sender's send function: one attempt. */
static void otlphttp_send(pc_component *c, pc_batch *b, pc_send_result result, void *ctx)
{
    send_job *j = pc_xcalloc(1, sizeof(*j));
    j->x = c->priv;
    j->batch = b;
    j->result = result;
    j->ctx = ctx;
    j->work.data = j;
    uv_queue_work(c->loop, &j->work, encode_work, encode_done);
}

static void otlphttp_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    otlphttp *x = c->priv;
    pc_sender_consume(x->sender, b, done, arg);
}

static void client_closed(void *arg)
{
    pc_component *c = arg;
    otlphttp *x = c->priv;
    x->shutdown_done(c);
}

static void sender_drained(void *arg)
{
    pc_component *c = arg;
    otlphttp *x = c->priv;
    pc_http_client *cl = x->client;
    x->client = NULL;
    pc_http_client_close(cl, client_closed, c);
}

static void otlphttp_shutdown(pc_component *c, pc_shutdown_done done)
{
    otlphttp *x = c->priv;
    x->shutdown_done = done;
    if (!x->client) {
        done(c);
        return;
    }
    if (x->sender)
        pc_sender_shutdown(x->sender, sender_drained, c);
    else
        sender_drained(c);
}

static void otlphttp_destroy(pc_component *c)
{
    otlphttp *x = c->priv;
    if (!x) return;
    pc_sender_free(x->sender);
    pc_tls_ctx_free(x->tls);
    free(x->headers);
    free(x);
}

const pc_component_type pc_exporter_otlphttp = {
    .name = "otlphttp",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .doc = "OTLP/HTTP profiles exporter (protobuf or JSON, gzip)",
    .cfg_size = sizeof(otlphttp_cfg),
    .cfg = otlphttp_keys,
    .validate = otlphttp_validate,
    .create = otlphttp_create,
    .start = otlphttp_start,
    .consume = otlphttp_consume,
    .shutdown = otlphttp_shutdown,
    .destroy = otlphttp_destroy,
};
