/* Exporter "otlp": OTLP over gRPC (ProfilesService/Export, TraceService/Export, ... for each
 * signal's pipelines, on HTTP/2, cleartext or TLS).
 * TLS by default, as the Collector's: host:port and https://host:port are TLS unless
 * `tls: {insecure: true}`; only http://host:port (or insecure) is plain text (h2c).
 * On the exporter core (pipeline/exporter.h: queue, retries, counting, lifecycle); this file
 * encodes, compresses and frames a batch on the thread pool, calls with the shared HTTP/2
 * client, and classifies the gRPC status as the OTLP spec says: UNAVAILABLE, CANCELLED,
 * DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, DATA_LOSS and connection errors are retryable, and
 * RESOURCE_EXHAUSTED when the server sends RetryInfo (whose delay is honoured); everything else is
 * permanent. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pipeline/auth.h"
#include "net/grpc.h"
#include "base/compress.h"
#include "net/h2_client.h"
#include "net/tls.h"
#include "pipeline/tls_config.h"
#include "net/url.h"
#include "pipeline/component.h"
#include "pipeline/exporter.h"
#include "pipeline/service.h"
#include "pipeline/sender.h"

#define MAX_RESPONSE (4u << 20)

typedef struct otlp_exp_cfg {
    char *endpoint;
    pc_strmap headers;
    int compression; /* 0 gzip, 1 none, 2 zstd */
    bool passthrough;
    uint64_t timeout_ms;
    pc_tls_client_cfg tls;
    bool use_tls; /* set by validate */
    char *authenticator;
    pc_sender_cfg sender;
} otlp_exp_cfg;

static const char *const compressions[] = {"gzip", "none", "zstd", NULL};
static const pc_enc compression_enc[] = {PC_ENC_GZIP, PC_ENC_NONE, PC_ENC_ZSTD};

static const pc_cfg_key otlp_exp_keys[] = {
    {"endpoint", PC_CFG_STRING, NULL, offsetof(otlp_exp_cfg, endpoint),
     "host:port or https://host:port (TLS, unless tls::insecure is true) or http://host:port "
     "(plain text, h2c) of the OTLP/gRPC server; a URL path is dropped with a warning",
     NULL},
    {"headers", PC_CFG_MAP, NULL, offsetof(otlp_exp_cfg, headers),
     "gRPC metadata sent with every call", NULL},
    {"compression", PC_CFG_ENUM, "gzip", offsetof(otlp_exp_cfg, compression),
     "grpc-encoding of request messages", compressions},
    {"passthrough", PC_CFG_BOOL, "true", offsetof(otlp_exp_cfg, passthrough),
     "send a request's protobuf bytes as received (compressed, if the compression matches) when "
     "nothing in the pipeline changed its data",
     NULL},
    {"timeout", PC_CFG_DURATION, "30s", offsetof(otlp_exp_cfg, timeout_ms),
     "time allowed for one call (also sent as grpc-timeout)", NULL},
    PC_TLS_CLIENT_KEYS(otlp_exp_cfg, tls, ""),
    PC_AUTH_CLIENT_KEY(otlp_exp_cfg, authenticator, ""),
    PC_SENDER_KEYS(otlp_exp_cfg, sender),
    {NULL, 0, NULL, 0, NULL, NULL},
};

typedef struct otlp_exp {
    char host[256];
    int port;
    char dropped_path[1024]; /* the endpoint's URL path, which gRPC has no use for */
    pc_h2_header *hdrs;      /* metadata, names lower-cased, owned */
    size_t n_hdrs;
    pc_h2_client *client;
    pc_tls_ctx *tls_ctx;
    pc_auth *auth; /* NULL: no authenticator */
} otlp_exp;

/* ---- config ---- */

/* scheme: 0 none (host:port), 1 http://, 2 https://. gRPC has no URL path: a path in an
 * http(s):// endpoint (e.g. "https://example.com/otlp", copied from an OTLP/HTTP config) is
 * dropped and returned in dropped (start logs it). The Collector refuses such an endpoint
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
    int rc = pc_hostport_parse(ep, host, hostlen, port, e);
    if (rc < 0) return rc;
    return 0;
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

static int otlp_exp_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    otlp_exp_cfg *cfg = cfgp;
    char host[256];
    pc_error e = {0};
    int port, scheme;
    if (!cfg->endpoint || !*cfg->endpoint)
        return pc_cfg_key_errorf(err, node, path, "endpoint", "required (host:port)");
    if (parse_endpoint(cfg->endpoint, host, sizeof host, &port, &scheme, NULL, 0, &e) < 0)
        return pc_cfg_key_errorf(err, node, path, "endpoint", "%s", e.msg);
    if (pc_tls_client_validate(&cfg->tls, node, path, "", err)) return PC_EINVAL;
    /* TLS unless asked not to, as the Collector's configgrpc: http:// or tls::insecure */
    cfg->use_tls = !cfg->tls.insecure && scheme != 1;
    for (size_t i = 0; i < cfg->headers.n; i++)
        if (metadata_ok(cfg->headers.keys[i], cfg->headers.vals[i], &e) < 0)
            return pc_cfg_key_errorf(err, node, path, "headers", "%s", e.msg);
    if (cfg->timeout_ms == 0) return pc_cfg_key_errorf(err, node, path, "timeout", "must be > 0");
    return pc_sender_validate(&cfg->sender, node, path, err);
}

static void add_hdr(otlp_exp *x, const char *name, const char *value)
{
    x->hdrs = pc_xrealloc(x->hdrs, (x->n_hdrs + 1) * sizeof *x->hdrs);
    char *n = pc_xstrdup(name);
    for (char *p = n; *p; p++)
        *p = (char)tolower((unsigned char)*p); /* HTTP/2 wants lower case */
    x->hdrs[x->n_hdrs++] = (pc_h2_header){n, pc_xstrdup(value)};
}

static int otlp_exp_create(pc_exporter *ex, pc_error *err)
{
    otlp_exp_cfg *cfg = ex->c->cfg;
    otlp_exp *x = pc_xcalloc(1, sizeof(*x));
    char ua[64], timeout[16];
    int scheme;
    (void)err;
    ex->priv = x;
    parse_endpoint(cfg->endpoint, x->host, sizeof x->host, &x->port, &scheme, x->dropped_path,
                   sizeof x->dropped_path, NULL); /* validated: cannot fail */
    snprintf(ua, sizeof ua, "profcol/%s", PROFCOL_VERSION);
    pc_grpc_timeout_format(cfg->timeout_ms, timeout, sizeof timeout);
    add_hdr(x, "content-type", "application/grpc");
    add_hdr(x, "te", "trailers");
    add_hdr(x, "user-agent", ua);
    add_hdr(x, "grpc-accept-encoding", "identity,gzip,zstd");
    add_hdr(x, "grpc-timeout", timeout);
    if (compression_enc[cfg->compression] != PC_ENC_NONE)
        add_hdr(x, "grpc-encoding", pc_enc_name(compression_enc[cfg->compression]));
    for (size_t i = 0; i < cfg->headers.n; i++)
        add_hdr(x, cfg->headers.keys[i], cfg->headers.vals[i]);
    return 0;
}

/* ---- sending ---- */

static int otlp_exp_start(pc_exporter *e, pc_error *err)
{
    pc_component *c = e->c;
    otlp_exp *x = e->priv;
    otlp_exp_cfg *cfg = c->cfg;
    pc_h2_client_opts o = {.host = x->host,
                           .port = x->port,
                           .max_response_bytes = MAX_RESPONSE + PC_GRPC_PREFIX,
                           .log_id = c->id};
    if (cfg->use_tls) {
        x->tls_ctx = pc_tls_client_ctx_new(&cfg->tls, "h2", c->id, err);
        if (!x->tls_ctx) return err ? err->code : PC_EINVAL;
        o.tls = x->tls_ctx;
    } else if (!strncmp(cfg->endpoint, "https://", 8)) {
        PC_WARN(c->id, "tls::insecure is set: sending plain text to an https:// endpoint");
    } else if (!cfg->tls.insecure && (cfg->tls.ca_file || cfg->tls.cert_file)) {
        PC_WARN(c->id, "an http:// endpoint is plain text: the tls settings are not used");
    }
    if (x->dropped_path[0])
        PC_WARN(c->id,
                "endpoint \"%s\": gRPC has no URL path, so \"%s\" is dropped: calls go to "
                "%s:%d as /<package>.<Service>/Export (the Collector refuses this endpoint, and "
                "grpc-go would look up \"%s%s\" as a host name)",
                cfg->endpoint, x->dropped_path, x->host, x->port, x->host, x->dropped_path);
    x->client = pc_h2_client_new(c->loop, &o);
    if (cfg->authenticator &&
        !(x->auth = pc_service_authenticator(c->host, cfg->authenticator, false, err)))
        return PC_EINVAL;
    PC_INFO(c->id, "sending OTLP/gRPC to %s:%d (%s%s)", x->host, x->port,
            x->tls_ctx          ? "TLS"
            : cfg->tls.insecure ? "h2c: tls::insecure"
                                : "h2c: http:// endpoint",
            compression_enc[cfg->compression] == PC_ENC_GZIP   ? ", gzip"
            : compression_enc[cfg->compression] == PC_ENC_ZSTD ? ", zstd"
                                                               : "");
    return 0;
}

/* One framed gRPC message in r->body. */
static void otlp_exp_encode(pc_export_req *r)
{
    otlp_exp_cfg *cfg = r->e->c->cfg;
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

/* The gRPC status of an answer as a send outcome. */
static void grpc_outcome(const otlp_exp *x, pc_signal sig, const pc_h2_response *r,
                         pc_export_outcome *o)
{
    if (r->error) {
        /* an oversized response must not be retried (OTLP spec); every other failure may be */
        pc_export_outcome_set(o, r->error == UV_E2BIG ? PC_E2BIG : PC_EAGAIN,
                              "gRPC call to %s:%d failed: %s", x->host, x->port,
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

static void on_response(const pc_h2_response *resp, void *arg)
{
    pc_export_req *r = arg;
    pc_export_outcome o;
    grpc_outcome(r->e->priv, r->sig, resp, &o);
    pc_export_done(r, &o);
}

/* The exporter's metadata plus the authenticator's "Name: value\r\n" lines (parsed in place in
 * lines, names lower-cased for HTTP/2); the caller frees the array, the client copies it. */
static pc_h2_header *auth_metadata(const otlp_exp *x, pc_buf *lines, size_t *n)
{
    size_t cap = x->n_hdrs + 4, k = x->n_hdrs;
    pc_h2_header *h = pc_xmalloc(cap * sizeof *h);
    memcpy(h, x->hdrs, x->n_hdrs * sizeof *h);
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

static void otlp_exp_send(pc_export_req *r)
{
    otlp_exp *x = r->e->priv;
    otlp_exp_cfg *cfg = r->e->c->cfg;
    pc_buf lines = {0};
    pc_h2_header *hdrs = x->hdrs;
    size_t n = x->n_hdrs;
    if (x->auth) { /* per request, as metadata: a token file may have been reloaded */
        pc_auth_headers(x->auth, &lines);
        hdrs = auth_metadata(x, &lines, &n);
    }
    pc_h2_client_request(x->client, "POST", pc_signal_infos[r->sig].grpc_path, hdrs, n,
                         r->body.data, r->body.len, (unsigned)cfg->timeout_ms, on_response, r);
    if (hdrs != x->hdrs) free(hdrs);
    pc_buf_free(&lines);
    pc_buf_free(&r->body); /* the client copied it */
}

/* ---- shutdown ---- */

static void otlp_exp_close(pc_exporter *e)
{
    otlp_exp *x = e->priv;
    pc_h2_client *cl = x->client;
    x->client = NULL;
    if (cl)
        pc_h2_client_close(cl, pc_exporter_closed, e);
    else
        pc_exporter_closed(e);
}

static void otlp_exp_destroy(pc_exporter *e)
{
    otlp_exp *x = e->priv;
    if (!x) return;
    pc_tls_ctx_free(x->tls_ctx);
    for (size_t i = 0; i < x->n_hdrs; i++) {
        free((char *)x->hdrs[i].name);
        free((char *)x->hdrs[i].value);
    }
    free(x->hdrs);
    free(x);
}

static const pc_exporter_def otlp_exp_def = {
    .sender_cfg = offsetof(otlp_exp_cfg, sender),
    .create = otlp_exp_create,
    .start = otlp_exp_start,
    .encode = otlp_exp_encode,
    .send = otlp_exp_send,
    .close = otlp_exp_close,
    .destroy = otlp_exp_destroy,
};

const pc_component_type pc_exporter_otlp = {
    .name = "otlp",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .doc = "OTLP/gRPC exporter for every signal (ProfilesService/Export, TraceService/Export, ... "
           "over h2c or TLS, gzip or zstd)",
    .cfg_size = sizeof(otlp_exp_cfg),
    .cfg = otlp_exp_keys,
    .validate = otlp_exp_validate,
    PC_EXPORTER_CORE(&otlp_exp_def),
    .signals = PC_SIGNALS_ALL,
};
