/* The OTLP/gRPC and OTLP/HTTP clients of the exporters (see otlp_client.h). */
#include "sdk/otlp_client.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/compress.h"
#include "net/grpc.h"
#include "net/h2_client.h"
#include "sdk/exporter_http.h"

#define MAX_RESPONSE (4u << 20)

const char *const pc_otlp_compressions[] = {"gzip", "none", "zstd", NULL};
static const pc_enc compression_enc[] = {PC_ENC_GZIP, PC_ENC_NONE, PC_ENC_ZSTD};
const char *const pc_otlp_encodings[] = {"proto", "json", NULL};

/* "<prefix><key>" in buf. */
static const char *pkey(char *buf, size_t n, const char *prefix, const char *key)
{
    snprintf(buf, n, "%s%s", prefix, key);
    return buf;
}

/* ==== OTLP/gRPC ==== */

struct pc_otlp_grpc {
    pc_component *c;
    const pc_otlp_grpc_cfg *cfg;
    char host[256];
    int port;
    pc_h2_header *hdrs; /* metadata, names lower-cased, owned */
    size_t n_hdrs;
    pc_h2_client *client;
    pc_tls_ctx *tls_ctx;
    pc_auth *auth; /* NULL: no authenticator */
    void (*closed)(void *);
    void *closed_arg;
};

/* scheme: 0 none (host:port), 1 http://, 2 https://. gRPC has no URL path: a path in an
 * http(s):// endpoint (e.g. "https://example.com/otlp", copied from an OTLP/HTTP config) is
 * dropped and returned in dropped (open logs it). The Collector refuses such an endpoint
 * ("missing port in address") and grpc-go, given it, would take "example.com/otlp" as the host
 * name, which resolves to nothing: keeping the path can only fail, so profcol drops it.
 * 0, or PC_EINVAL with e. */
static int parse_endpoint(const char *ep, char *host, size_t hostlen, int *port, int *scheme,
                          char *dropped, size_t droppedlen, pc_error *e)
{
    *scheme = 0;
    if (dropped) dropped[0] = 0;
    if (strstr(ep, "://")) {
        pc_url u;
        int rc = pc_url_parse(ep, &u, e);
        if (rc < 0) return rc;
        if (strcmp(u.scheme, "http") != 0 && strcmp(u.scheme, "https") != 0)
            return pc_error_set(e, PC_EINVAL,
                                "use host:port, http://host:port or https://host:port");
        *scheme = strcmp(u.scheme, "https") == 0 ? 2 : 1;
        if (u.path[0] && strcmp(u.path, "/") != 0 && dropped)
            snprintf(dropped, droppedlen, "%s", u.path);
        snprintf(host, hostlen, "%s", u.host);
        *port = u.port;
        return 0;
    }
    return pc_hostport_parse(ep, host, hostlen, port, e);
}

int pc_otlp_grpc_endpoint_check(const char *endpoint, pc_error *e)
{
    char host[256];
    int port, scheme;
    return parse_endpoint(endpoint, host, sizeof host, &port, &scheme, NULL, 0, e);
}

/* 0, or PC_EINVAL with e. */
static int metadata_ok(const char *name, const char *value, pc_error *e)
{
    if (!*name || name[0] == ':' || strncasecmp(name, "grpc-", 5) == 0 ||
        !strcasecmp(name, "content-type") || !strcasecmp(name, "te"))
        return pc_error_set(e, PC_EINVAL, "%s: reserved for gRPC itself", name);
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("-_.", *p))
            return pc_error_set(e, PC_EINVAL,
                                "%s: metadata keys are letters, digits, '-', '_' and '.'", name);
    for (const char *p = value; *p; p++)
        if ((unsigned char)*p < 0x20 && *p != '\t')
            return pc_error_set(e, PC_EINVAL,
                                "%s: control characters (line breaks) are not allowed", name);
    return 0;
}

int pc_otlp_grpc_validate(const pc_otlp_grpc_cfg *cfg, const pc_node *node, const char *path,
                          const char *prefix, bool with_endpoint, pc_error *err)
{
    char k[160];
    pc_error e = {0};
    if (with_endpoint) {
        if (!cfg->endpoint || !*cfg->endpoint)
            return pc_cfg_key_errorf(err, node, path, pkey(k, sizeof k, prefix, "endpoint"),
                                     "required (host:port)");
        if (pc_otlp_grpc_endpoint_check(cfg->endpoint, &e) < 0)
            return pc_cfg_key_errorf(err, node, path, pkey(k, sizeof k, prefix, "endpoint"), "%s",
                                     e.msg);
    } else if (cfg->endpoint) {
        return pc_cfg_key_errorf(err, node, path, pkey(k, sizeof k, prefix, "endpoint"),
                                 "is set by the resolver: remove it");
    }
    if (pc_tls_client_validate(&cfg->tls, node, path, prefix, err)) return PC_EINVAL;
    for (size_t i = 0; i < cfg->headers.n; i++)
        if (metadata_ok(cfg->headers.keys[i], cfg->headers.vals[i], &e) < 0)
            return pc_cfg_key_errorf(err, node, path, pkey(k, sizeof k, prefix, "headers"), "%s",
                                     e.msg);
    if (cfg->timeout_ms == 0)
        return pc_cfg_key_errorf(err, node, path, pkey(k, sizeof k, prefix, "timeout"),
                                 "must be > 0");
    return pc_sender_validate_at(&cfg->sender, node, path, prefix, err);
}

static void add_hdr(pc_otlp_grpc *g, const char *name, const char *value)
{
    g->hdrs = pc_xrealloc(g->hdrs, (g->n_hdrs + 1) * sizeof *g->hdrs);
    char *n = pc_xstrdup(name);
    for (char *p = n; *p; p++)
        *p = (char)tolower((unsigned char)*p); /* HTTP/2 wants lower case */
    g->hdrs[g->n_hdrs++] = (pc_h2_header){n, pc_xstrdup(value)};
}

static void grpc_free(pc_otlp_grpc *g)
{
    pc_tls_ctx_free(g->tls_ctx);
    for (size_t i = 0; i < g->n_hdrs; i++) {
        free((char *)g->hdrs[i].name);
        free((char *)g->hdrs[i].value);
    }
    free(g->hdrs);
    free(g);
}

pc_otlp_grpc *pc_otlp_grpc_open(pc_component *c, const pc_otlp_grpc_cfg *cfg, const char *endpoint,
                                pc_error *err)
{
    pc_otlp_grpc *g = pc_xcalloc(1, sizeof *g);
    g->c = c;
    g->cfg = cfg;
    char dropped[1024], ua[64], timeout[16];
    int scheme;
    if (parse_endpoint(endpoint, g->host, sizeof g->host, &g->port, &scheme, dropped,
                       sizeof dropped, err) < 0) {
        grpc_free(g);
        return NULL;
    }
    snprintf(ua, sizeof ua, "profcol/%s", PROFCOL_VERSION);
    pc_grpc_timeout_format(cfg->timeout_ms, timeout, sizeof timeout);
    add_hdr(g, "content-type", "application/grpc");
    add_hdr(g, "te", "trailers");
    add_hdr(g, "user-agent", ua);
    add_hdr(g, "grpc-accept-encoding", "identity,gzip,zstd");
    add_hdr(g, "grpc-timeout", timeout);
    if (compression_enc[cfg->compression] != PC_ENC_NONE)
        add_hdr(g, "grpc-encoding", pc_enc_name(compression_enc[cfg->compression]));
    for (size_t i = 0; i < cfg->headers.n; i++)
        add_hdr(g, cfg->headers.keys[i], cfg->headers.vals[i]);

    pc_h2_client_opts o = {.host = g->host,
                           .port = g->port,
                           .max_response_bytes = MAX_RESPONSE + PC_GRPC_PREFIX,
                           .log_id = c->id};
    /* TLS unless asked not to, as the Collector's configgrpc: http:// or tls::insecure */
    if (!cfg->tls.insecure && scheme != 1) {
        g->tls_ctx = pc_tls_client_ctx_new(&cfg->tls, "h2", c->id, err);
        if (!g->tls_ctx) {
            grpc_free(g);
            return NULL;
        }
        o.tls = g->tls_ctx;
    } else if (scheme == 2) {
        PC_WARN(c->id, "tls::insecure is set: sending plain text to an https:// endpoint");
    } else if (!cfg->tls.insecure && (cfg->tls.ca_file || cfg->tls.cert_file)) {
        PC_WARN(c->id, "an http:// endpoint is plain text: the tls settings are not used");
    }
    if (dropped[0])
        PC_WARN(c->id,
                "endpoint \"%s\": gRPC has no URL path, so \"%s\" is dropped: calls go to "
                "%s:%d as /<package>.<Service>/Export (the Collector refuses this endpoint, and "
                "grpc-go would look up \"%s%s\" as a host name)",
                endpoint, dropped, g->host, g->port, g->host, dropped);
    if (cfg->authenticator &&
        !(g->auth = pc_host_authenticator(c, cfg->authenticator, false, err))) {
        grpc_free(g);
        return NULL;
    }
    g->client = pc_h2_client_new(c->loop, &o);
    PC_INFO(c->id, "sending OTLP/gRPC to %s:%d (%s%s)", g->host, g->port,
            g->tls_ctx          ? "TLS"
            : cfg->tls.insecure ? "h2c: tls::insecure"
                                : "h2c: http:// endpoint",
            compression_enc[cfg->compression] == PC_ENC_NONE
                ? ""
                : (compression_enc[cfg->compression] == PC_ENC_GZIP ? ", gzip" : ", zstd"));
    return g;
}

void pc_otlp_grpc_encode(const pc_otlp_grpc_cfg *cfg, pc_export_req *r)
{
    const pc_batch *b = r->batch;
    pc_enc enc = compression_enc[cfg->compression];
    pc_buf raw = {0}, z = {0};
    if (cfg->passthrough && b->raw && !b->raw_json && b->raw_enc == (int)enc) {
        pc_grpc_frame(b->raw, b->raw_len, enc != PC_ENC_NONE, &r->body); /* as received */
        return;
    }
    if (cfg->passthrough && b->raw && !b->raw_json && b->raw_enc == PC_ENC_NONE)
        pc_buf_append(&raw, b->raw, b->raw_len); /* received uncompressed: never re-encoded */
    else
        pc_batch_encode_proto(b, &raw);
    if (enc != PC_ENC_NONE) {
        pc_compress(enc, raw.data, raw.len, 0, &z);
        pc_grpc_frame(z.data, z.len, true, &r->body);
    } else {
        pc_grpc_frame(raw.data, raw.len, false, &r->body);
    }
    pc_buf_free(&raw);
    pc_buf_free(&z);
}

static const char *find(const pc_h2_header *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(h[i].name, name) == 0) return h[i].value;
    return NULL;
}

/* From trailers, or from the headers of a trailers-only response. */
static const char *status_field(const pc_h2_response *r, const char *name)
{
    const char *v = find(r->trailers, r->n_trailers, name);
    return v ? v : find(r->headers, r->n_headers, name);
}

/* OK may carry a partial success (the core logs it). */
static void partial_success(pc_export_outcome *o, pc_signal sig, const pc_h2_response *r)
{
    const uint8_t *msg;
    size_t len;
    bool compressed;
    pc_buf plain = {0};
    if (pc_grpc_unframe(r->body, r->body_len, MAX_RESPONSE, &msg, &len, &compressed, NULL) < 0)
        return; /* an empty or odd body on OK: nothing to report */
    if (compressed) {
        if (pc_grpc_decompress(msg, len, true, find(r->headers, r->n_headers, "grpc-encoding"),
                               MAX_RESPONSE, &plain, NULL) < 0) {
            pc_buf_free(&plain); /* a partly inflated body */
            return;
        }
        msg = plain.data;
        len = plain.len;
    }
    pc_export_outcome_partial(o, sig, msg, len, false);
    pc_buf_free(&plain);
}

/* The gRPC status of an answer as a send outcome, as the OTLP spec says: UNAVAILABLE, CANCELLED,
 * DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, DATA_LOSS and connection errors are retryable, and
 * RESOURCE_EXHAUSTED when the server sends RetryInfo (whose delay is honoured); everything else
 * is permanent. */
static void grpc_outcome(const pc_otlp_grpc *g, pc_signal sig, const pc_h2_response *r,
                         pc_export_outcome *o)
{
    if (r->error) {
        /* an oversized response must not be retried (OTLP spec); every other failure may be */
        pc_export_outcome_set(o, r->error == UV_E2BIG ? PC_E2BIG : PC_EAGAIN,
                              "gRPC call to %s:%d failed: %s", g->host, g->port,
                              r->error_msg ? r->error_msg : uv_strerror(r->error));
        return;
    }
    const char *gs = status_field(r, "grpc-status");
    int code;
    if (gs) { /* strtol saturates where atoi would overflow on a hostile backend's trailer */
        long v = strtol(gs, NULL, 10);
        code = v >= 0 && v <= 16 ? (int)v : PC_GRPC_UNKNOWN;
    } else if (r->status != 200)
        code = pc_grpc_code_from_http(r->status);
    else
        code = PC_GRPC_INTERNAL; /* a 200 without grpc-status is a broken response */
    if (code == PC_GRPC_OK) {
        *o = PC_EXPORT_OK;
        partial_success(o, sig, r);
        return;
    }
    const char *gm = status_field(r, "grpc-message");
    char *text = pc_grpc_message_decode(gm ? gm : "");
    for (char *p = text; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' ';
    pc_export_outcome_set(o, PC_EINVAL, "backend answered gRPC %s%s%s%s%.300s",
                          pc_grpc_code_name(code), gs ? "" : " (no grpc-status", gs ? "" : ")",
                          *text ? ": " : "", text);
    free(text);
    const char *details = status_field(r, "grpc-status-details-bin");
    int64_t delay_ms = details ? pc_grpc_status_details_retry_delay(details) : -1;
    int retry_after = delay_ms > 0 ? (int)((delay_ms + 999) / 1000) : -1;
    switch (code) {
    case PC_GRPC_CANCELLED:
    case PC_GRPC_DEADLINE_EXCEEDED:
    case PC_GRPC_ABORTED:
    case PC_GRPC_OUT_OF_RANGE:
    case PC_GRPC_UNAVAILABLE:
    case PC_GRPC_DATA_LOSS:
        o->st = PC_EAGAIN;
        o->retry_after_s = retry_after;
        return;
    case PC_GRPC_RESOURCE_EXHAUSTED:
        /* retryable only when the server says recovery is possible (RetryInfo), per OTLP */
        if (delay_ms >= 0) {
            o->st = PC_EBUSY;
            o->retry_after_s = retry_after;
        }
        return;
    default: return; /* permanent */
    }
}

typedef struct grpc_call {
    pc_otlp_grpc *g;
    pc_export_req *r;
} grpc_call;

static void on_grpc_response(const pc_h2_response *resp, void *arg)
{
    grpc_call *call = arg;
    pc_export_outcome o;
    grpc_outcome(call->g, call->r->sig, resp, &o);
    pc_export_req *r = call->r;
    free(call);
    pc_export_done(r, &o);
}

/* The metadata plus the authenticator's "Name: value\r\n" lines (parsed in place in lines,
 * names lower-cased for HTTP/2); the caller frees the array, the client copies it. */
static pc_h2_header *auth_metadata(const pc_otlp_grpc *g, pc_buf *lines, size_t *n)
{
    size_t cap = g->n_hdrs + 4, k = g->n_hdrs;
    pc_h2_header *h = pc_xmalloc(cap * sizeof *h);
    memcpy(h, g->hdrs, g->n_hdrs * sizeof *h);
    pc_buf_reserve(lines, 1);
    lines->data[lines->len] = 0;
    for (char *p = (char *)lines->data, *eol; p && *p && k < cap; p = eol ? eol + 2 : NULL) {
        eol = strstr(p, "\r\n");
        if (eol) *eol = 0;
        char *colon = strchr(p, ':');
        if (!colon) continue;
        *colon = 0;
        for (char *q = p; *q; q++)
            *q = (char)tolower((unsigned char)*q);
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        h[k++] = (pc_h2_header){p, v};
    }
    *n = k;
    return h;
}

void pc_otlp_grpc_send(pc_otlp_grpc *g, pc_export_req *r)
{
    pc_buf lines = {0};
    pc_h2_header *hdrs = g->hdrs;
    size_t n = g->n_hdrs;
    if (g->auth) { /* per request, as metadata: a token file may have been reloaded */
        pc_auth_headers(g->auth, &lines);
        hdrs = auth_metadata(g, &lines, &n);
    }
    grpc_call *call = pc_xmalloc(sizeof *call);
    *call = (grpc_call){g, r};
    pc_h2_client_request(g->client, "POST", pc_signal_infos[r->sig].grpc_path, hdrs, n,
                         r->body.data, r->body.len, (unsigned)g->cfg->timeout_ms, on_grpc_response,
                         call);
    if (hdrs != g->hdrs) free(hdrs);
    pc_buf_free(&lines);
    pc_buf_free(&r->body); /* the client copied it */
}

static void grpc_closed(void *arg)
{
    pc_otlp_grpc *g = arg;
    void (*done)(void *) = g->closed;
    void *done_arg = g->closed_arg;
    grpc_free(g);
    done(done_arg);
}

void pc_otlp_grpc_close(pc_otlp_grpc *g, void (*done)(void *arg), void *arg)
{
    if (!g) {
        done(arg);
        return;
    }
    g->closed = done;
    g->closed_arg = arg;
    pc_h2_client_close(g->client, grpc_closed, g);
}

/* ==== OTLP/HTTP ==== */

int pc_otlp_http_validate(const pc_otlp_http_cfg *cfg, const pc_node *node, const char *path,
                          const char *prefix, bool with_endpoint, pc_error *err)
{
    char k[160];
    pc_url u;
    pc_error e = {0};
    bool any = cfg->endpoint && *cfg->endpoint;
    if (!with_endpoint && cfg->endpoint)
        return pc_cfg_key_errorf(err, node, path, pkey(k, sizeof k, prefix, "endpoint"),
                                 "is set by the resolver: remove it");
    if (any && pc_url_parse(cfg->endpoint, &u, &e) < 0)
        return pc_cfg_key_errorf(err, node, path, pkey(k, sizeof k, prefix, "endpoint"), "%s",
                                 e.msg);
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        const char *ep = cfg->signal_endpoint[sig];
        if (!ep) continue;
        const char *key = pkey(k, sizeof k, prefix, pc_signal_infos[sig].endpoint_key);
        if (!with_endpoint)
            return pc_cfg_key_errorf(err, node, path, key, "is set by the resolver: remove it");
        if (!*ep) continue;
        any = true;
        if (pc_url_parse(ep, &u, &e) < 0)
            return pc_cfg_key_errorf(err, node, path, key, "%s", e.msg);
    }
    if (with_endpoint && !any)
        return pc_cfg_key_errorf(
            err, node, path, pkey(k, sizeof k, prefix, "endpoint"),
            "required (or profiles_endpoint, traces_endpoint, metrics_endpoint, "
            "logs_endpoint)");
    if (pc_http_client_validate(&cfg->client, node, path, prefix, err)) return PC_EINVAL;
    int max_level = compression_enc[cfg->compression] == PC_ENC_ZSTD ? 19 : 9;
    if (cfg->compression_level < 1 || cfg->compression_level > max_level)
        return pc_cfg_key_errorf(err, node, path,
                                 pkey(k, sizeof k, prefix, "compression_params.level"),
                                 "must be 1..%d", max_level);
    return pc_sender_validate_at(&cfg->sender, node, path, prefix, err);
}

char *pc_otlp_http_headers(const pc_otlp_http_cfg *cfg)
{
    pc_buf h = {0};
    pc_buf_printf(&h, "Content-Type: %s\r\nUser-Agent: profcol/%s\r\n",
                  cfg->encoding ? "application/json" : "application/x-protobuf", PROFCOL_VERSION);
    if (compression_enc[cfg->compression] != PC_ENC_NONE)
        pc_buf_printf(&h, "Content-Encoding: %s\r\n",
                      pc_enc_name(compression_enc[cfg->compression]));
    for (size_t i = 0; i < cfg->client.headers.n; i++)
        pc_buf_printf(&h, "%s: %s\r\n", cfg->client.headers.keys[i], cfg->client.headers.vals[i]);
    char *out = pc_xstrdup((char *)h.data);
    pc_buf_free(&h);
    return out;
}

/* The request's bytes as received fit this exporter: compression and encoding match. */
static bool as_received(const pc_otlp_http_cfg *cfg, const pc_batch *b)
{
    return cfg->passthrough && b->raw && b->raw_json == (cfg->encoding == 1) &&
           b->raw_enc == (int)compression_enc[cfg->compression];
}

bool pc_otlp_http_encode_is_copy(const pc_otlp_http_cfg *cfg, const pc_export_req *r)
{
    return as_received(cfg, r->batch) && r->batch->raw_len <= PC_EXPORT_LOOP_COPY_MAX;
}

void pc_otlp_http_encode(const pc_otlp_http_cfg *cfg, pc_export_req *r)
{
    const pc_batch *b = r->batch;
    pc_enc enc = compression_enc[cfg->compression];
    int level = (int)cfg->compression_level;
    if (cfg->passthrough && b->raw && b->raw_json == (cfg->encoding == 1)) {
        if (as_received(cfg, b)) {
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

int pc_otlp_http_open(pc_component *c, const pc_otlp_http_cfg *cfg, const pc_url *u,
                      const char *hdrs, pc_otlp_http *h, pc_error *err)
{
    memset(h, 0, sizeof *h);
    h->url = *u;
    h->hdrs = hdrs;
    h->cfg = cfg;
    return pc_exporter_http_open(c, u, &cfg->client, &cfg->sender, &h->client, &h->tls, &h->auth,
                                 err);
}

typedef struct http_call {
    pc_otlp_http *h;
    pc_export_req *r;
} http_call;

static void on_http_response(const pc_http_response *resp, void *arg)
{
    http_call *call = arg;
    pc_export_req *r = call->r;
    pc_export_outcome o;
    pc_exporter_http_outcome(resp, &call->h->url, &o);
    if (o.st == PC_OK) /* 2xx may carry a partial success */
        pc_export_outcome_partial(&o, r->sig, resp->body, resp->body_len,
                                  resp->content_type && strstr(resp->content_type, "json"));
    free(call);
    pc_export_done(r, &o);
}

void pc_otlp_http_send(pc_otlp_http *h, const char *path, pc_export_req *r)
{
    pc_buf hb = {0};
    if (h->auth) { /* per request: a token file may have been reloaded */
        pc_buf_printf(&hb, "%s", h->hdrs);
        pc_auth_headers(h->auth, &hb);
    }
    http_call *call = pc_xmalloc(sizeof *call);
    *call = (http_call){h, r};
    pc_http_client_request(h->client, "POST", path, h->auth ? (char *)hb.data : h->hdrs,
                           r->body.data, r->body.len, (unsigned)h->cfg->client.timeout_ms,
                           on_http_response, call);
    pc_buf_free(&hb);
}

static void http_closed(void *arg)
{
    pc_otlp_http *h = arg;
    pc_tls_ctx_free(h->tls);
    h->tls = NULL;
    h->closed(h->closed_arg);
}

void pc_otlp_http_close(pc_otlp_http *h, void (*done)(void *arg), void *arg)
{
    pc_http_client *cl = h->client;
    h->client = NULL;
    if (!cl) {
        pc_tls_ctx_free(h->tls);
        h->tls = NULL;
        done(arg);
        return;
    }
    h->closed = done;
    h->closed_arg = arg;
    pc_http_client_close(cl, http_closed, h);
}

/* Config-table groups (sdk/cfgtable.h): keys and offsets relative to their struct. */
/* clang-format off */
const pc_cfg_key pc_otlp_grpc_keys[] = {
    {"endpoint", PC_CFG_STRING, "", offsetof(pc_otlp_grpc_cfg, endpoint), "host:port or https://host:port (TLS, unless tls::insecure is true) or http://host:port (plain text, h2c) of the OTLP/gRPC server; a URL path is dropped with a warning", NULL},
    {"headers", PC_CFG_MAP, "", offsetof(pc_otlp_grpc_cfg, headers), "gRPC metadata sent with every call", NULL},
    {"compression", PC_CFG_ENUM, "gzip", offsetof(pc_otlp_grpc_cfg, compression), "grpc-encoding of request messages", pc_otlp_compressions},
    {"passthrough", PC_CFG_BOOL, "true", offsetof(pc_otlp_grpc_cfg, passthrough), "send a request's protobuf bytes as received (compressed, if the compression matches) when nothing in the pipeline changed its data", NULL},
    {"timeout", PC_CFG_DURATION, "30s", offsetof(pc_otlp_grpc_cfg, timeout_ms), "time allowed for one call (also sent as grpc-timeout)", NULL},
    {"", PC_CFG_GROUP, "", offsetof(pc_otlp_grpc_cfg, tls), "TLS of a client", pc_tls_client_keys},
    {"auth.authenticator", PC_CFG_STRING, "", offsetof(pc_otlp_grpc_cfg, authenticator), "id of an authenticator extension (bearertokenauth, basicauth with client_auth) whose credentials are added to every request", NULL},
    {"", PC_CFG_GROUP, "", offsetof(pc_otlp_grpc_cfg, sender), "the sending queue and retries", pc_sender_keys},
    {0},
};
/* clang-format on */

/* clang-format off */
#define ENDPOINT_KEY(sig, name, path, topic) {name "_endpoint", PC_CFG_STRING, "", offsetof(pc_otlp_http_cfg, signal_endpoint[sig]), "full URL for " name ", used as is (overrides endpoint)", NULL},
const pc_cfg_key pc_otlp_http_keys[] = {
    {"endpoint", PC_CFG_STRING, "", offsetof(pc_otlp_http_cfg, endpoint), "base URL; the signal's path is appended (/v1development/profiles, /v1/traces, /v1/metrics, /v1/logs)", NULL},
    PC_SIGNALS_EACH(ENDPOINT_KEY)
    {"compression", PC_CFG_ENUM, "gzip", offsetof(pc_otlp_http_cfg, compression), "request body compression", pc_otlp_compressions},
    {"compression_params.level", PC_CFG_INT, "1", offsetof(pc_otlp_http_cfg, compression_level), "gzip level 1 (fastest) to 9 (smallest): 1-3 through ISA-L's igzip, 6-11x cheaper than zlib for 7-12% more bytes, 4-9 through zlib; zstd level 1 to 19", NULL},
    {"passthrough", PC_CFG_BOOL, "true", offsetof(pc_otlp_http_cfg, passthrough), "send a request's bytes as received (compressed, if the compression matches) when nothing in the pipeline changed its data and its encoding is this exporter's", NULL},
    {"encoding", PC_CFG_ENUM, "proto", offsetof(pc_otlp_http_cfg, encoding), "request body encoding", pc_otlp_encodings},
    {"", PC_CFG_GROUP, "", offsetof(pc_otlp_http_cfg, client), "the HTTP client", pc_http_client_keys},
    {"", PC_CFG_GROUP, "", offsetof(pc_otlp_http_cfg, sender), "the sending queue and retries", pc_sender_keys},
    {0},
};
/* clang-format on */
