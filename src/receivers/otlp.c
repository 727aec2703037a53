/* Receiver "otlp": OTLP/HTTP profiles on POST /v1development/profiles (protobuf or JSON, gzip).
 * Inflate, decode and validate run on the thread pool; the client is answered only once the
 * pipeline has accepted or refused the data (DESIGN §1). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/gzip.h"
#include "net/http_server.h"
#include "net/url.h"
#include "pdata/json.h"
#include "pipeline/component.h"
#include "pipeline/telemetry.h"
#include "rpc_status.pb-c.h"

#define PROFILES_PATH "/v1development/profiles"
#define RETRY_AFTER_S 1

typedef struct otlp_cfg {
    char *endpoint;
    uint64_t max_body;
    uint64_t read_timeout_ms;
    uint64_t idle_timeout_ms;
    int64_t max_connections;
    const pc_node *grpc;
} otlp_cfg;

static const pc_cfg_key otlp_keys[] = {
    {"protocols.http.endpoint", PC_CFG_STRING, "localhost:4318", offsetof(otlp_cfg, endpoint),
     "host:port to listen on (0.0.0.0 for all interfaces)", NULL},
    {"protocols.http.max_request_body_size", PC_CFG_SIZE, "20MiB", offsetof(otlp_cfg, max_body),
     "largest request body, before and after decompression (413 above)", NULL},
    {"protocols.http.read_timeout", PC_CFG_DURATION, "30s", offsetof(otlp_cfg, read_timeout_ms),
     "a request must arrive whole within this time (408 otherwise)", NULL},
    {"protocols.http.idle_timeout", PC_CFG_DURATION, "60s", offsetof(otlp_cfg, idle_timeout_ms),
     "close keep-alive connections idle this long", NULL},
    {"protocols.http.max_connections", PC_CFG_INT, "1024", offsetof(otlp_cfg, max_connections),
     "concurrent connections; more are answered 503", NULL},
    {"protocols.grpc", PC_CFG_NODE, NULL, offsetof(otlp_cfg, grpc),
     "OTLP/gRPC (not supported yet)", NULL},
    {NULL, 0, NULL, 0, NULL, NULL},
};

typedef struct otlp_recv {
    pc_component *c;
    pc_http_server *srv;
    char host[256];
    int port;
    uint64_t accepted_samples, refused_samples; /* self-metrics */
    pc_shutdown_done shutdown_done;
} otlp_recv;

typedef struct job {
    uv_work_t work;
    otlp_recv *r;
    pc_http_req *req;
    int json, gzip;
    pc_batch *batch;
    int status; /* 0 = decoded; else the HTTP error status */
    int64_t rejected;
    size_t samples;
    char err[512];
} job;

static int otlp_validate(void *cfgp, const pc_node *node, const char *path, pc_cfg_err *err)
{
    otlp_cfg *cfg = cfgp;
    char host[256], e[256];
    int port;
    (void)node;
    if (cfg->grpc) {
        pc_cfg_key_errorf(err, node, path, "protocols.grpc",
                          "OTLP/gRPC is not supported yet; use protocols::http");
        return -1;
    }
    if (pc_hostport_parse(cfg->endpoint, host, sizeof host, &port, e, sizeof e)) {
        pc_cfg_key_errorf(err, node, path, "protocols.http.endpoint", "%s", e);
        return -1;
    }
    if (cfg->max_body == 0) {
        pc_cfg_key_errorf(err, node, path, "protocols.http.max_request_body_size", "must be > 0");
        return -1;
    }
    if (cfg->max_connections <= 0) {
        pc_cfg_key_errorf(err, node, path, "protocols.http.max_connections", "must be > 0");
        return -1;
    }
    return 0;
}

static int otlp_create(pc_component *c, pc_cfg_err *err)
{
    otlp_recv *r = pc_xcalloc(1, sizeof(*r));
    otlp_cfg *cfg = c->cfg;
    char e[256];
    (void)err;
    pc_hostport_parse(cfg->endpoint, r->host, sizeof r->host, &r->port, e, sizeof e);
    r->c = c;
    c->priv = r;
    return 0;
}

/* gRPC code for a status body, as the OTLP spec pairs them. */
static int grpc_code(int http)
{
    switch (http) {
    case 400: return 3;  /* INVALID_ARGUMENT */
    case 413: return 8;  /* RESOURCE_EXHAUSTED */
    case 429: return 8;  /* RESOURCE_EXHAUSTED */
    case 503: return 14; /* UNAVAILABLE */
    default: return 2;   /* UNKNOWN */
    }
}

/* Failures carry a google.rpc.Status in the request's content type. */
static void respond_status(pc_http_req *req, int json, int http, const char *msg)
{
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    st.code = grpc_code(http);
    st.message = (char *)msg;
    pc_buf body = {0};
    if (json) {
        pc_json_encode(&st.base, &body);
    } else {
        pc_buf_reserve(&body, protobuf_c_message_get_packed_size(&st.base) + 1);
        body.len = protobuf_c_message_pack(&st.base, body.data);
    }
    char extra[64] = "";
    if (http == 429 || http == 503) snprintf(extra, sizeof extra, "Retry-After: %d\r\n", RETRY_AFTER_S);
    pc_http_respond(req, http, json ? "application/json" : "application/x-protobuf", body.data,
                    body.len, extra);
    pc_buf_free(&body);
}

static void respond_ok(pc_http_req *req, int json, int64_t rejected, const char *msg)
{
    pc_response resp = OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
    pc_partial_success ps = OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_PARTIAL_SUCCESS__INIT;
    if (rejected) {
        ps.rejected_profiles = rejected;
        ps.error_message = (char *)msg;
        resp.partial_success = &ps;
    }
    pc_buf body = {0};
    if (json) {
        pc_json_encode(&resp.base, &body);
    } else {
        pc_buf_reserve(&body, protobuf_c_message_get_packed_size(&resp.base) + 1);
        body.len = protobuf_c_message_pack(&resp.base, body.data);
    }
    pc_http_respond(req, 200, json ? "application/json" : "application/x-protobuf", body.data,
                    body.len, NULL);
    pc_buf_free(&body);
}

static void decode_work(uv_work_t *w)
{
    job *j = w->data;
    otlp_cfg *cfg = j->r->c->cfg;
    const uint8_t *data = j->req->body;
    size_t len = j->req->body_len;
    pc_buf inflated = {0};
    if (j->gzip) {
        int rc = pc_gzip_inflate(data, len, cfg->max_body, &inflated);
        if (rc == PC_GZ_TOO_LARGE) {
            j->status = 413;
            snprintf(j->err, sizeof j->err, "decompressed body exceeds max_request_body_size (%llu bytes)",
                     (unsigned long long)cfg->max_body);
        } else if (rc != PC_GZ_OK) {
            j->status = 400;
            snprintf(j->err, sizeof j->err, "invalid gzip body");
        }
        if (j->status) goto out;
        data = inflated.data;
        len = inflated.len;
    }
    int rc = j->json ? pc_batch_decode_json((const char *)data, len, &j->batch, j->err, sizeof j->err)
                     : pc_batch_decode_proto(data, len, &j->batch, j->err, sizeof j->err);
    if (rc) {
        j->status = 400;
        goto out;
    }
    if (pc_batch_validate(j->batch, &j->rejected, j->err, sizeof j->err)) {
        j->status = 400;
        goto out;
    }
    j->samples = pc_batch_counts(j->batch).samples;
out:
    pc_buf_free(&inflated);
}

static void job_free(job *j)
{
    pc_batch_unref(j->batch);
    free(j);
}

static void pipeline_done(void *arg, pc_status st, const char *msg)
{
    job *j = arg;
    otlp_recv *r = j->r;
    switch (st) {
    case PC_OK:
        r->accepted_samples += j->samples;
        respond_ok(j->req, j->json, j->rejected, j->err);
        break;
    case PC_ERR_PERMANENT:
        r->refused_samples += j->samples;
        PC_WARN(r->c->id, "pipeline refused %zu samples permanently: %s", j->samples, msg ? msg : "");
        respond_status(j->req, j->json, 400, msg ? msg : "refused by the pipeline");
        break;
    case PC_ERR_OVERLOAD:
    case PC_ERR_RETRYABLE:
        r->refused_samples += j->samples;
        PC_WARN(r->c->id, "pipeline refused %zu samples (retryable, client told to retry): %s",
                j->samples, msg ? msg : "");
        respond_status(j->req, j->json, st == PC_ERR_OVERLOAD ? 429 : 503,
                       msg ? msg : "pipeline unavailable, retry later");
        break;
    }
    free(j);
}

static void decode_done(uv_work_t *w, int status)
{
    job *j = w->data;
    (void)status;
    if (j->status) {
        PC_INFO(j->r->c->id, "%s: %d: %s", j->req->peer, j->status, j->err);
        respond_status(j->req, j->json, j->status, j->err);
        job_free(j);
        return;
    }
    if (j->rejected)
        PC_WARN(j->r->c->id, "%s: rejected %lld invalid profile(s): %s", j->req->peer,
                (long long)j->rejected, j->err);
    pc_batch *b = j->batch;
    j->batch = NULL;
    pc_consume(j->r->c->next, b, pipeline_done, j);
}

static int media_type_is(const char *ct, const char *want)
{
    size_t n = strlen(want);
    while (*ct == ' ') ct++;
    return strncasecmp(ct, want, n) == 0 && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ');
}

static void on_request(pc_http_req *req, void *arg)
{
    otlp_recv *r = arg;
    const char *ct = pc_http_req_header(req, "content-type");
    int json = ct && media_type_is(ct, "application/json");
    if (strcmp(req->path, PROFILES_PATH) != 0) {
        pc_http_respond(req, 404, "text/plain", "404 page not found\n", 19, NULL);
        return;
    }
    if (strcmp(req->method, "POST") != 0) {
        static const char m[] = "405 method not allowed, supported: [POST]\n";
        pc_http_respond(req, 405, "text/plain", m, sizeof m - 1, "Allow: POST\r\n");
        return;
    }
    if (!json && !(ct && (media_type_is(ct, "application/x-protobuf") ||
                          media_type_is(ct, "application/protobuf")))) {
        static const char m[] = "415 unsupported media type, supported: [application/json, "
                                "application/x-protobuf]\n";
        pc_http_respond(req, 415, "text/plain", m, sizeof m - 1, NULL);
        return;
    }
    const char *ce = pc_http_req_header(req, "content-encoding");
    int gz = 0;
    if (ce && *ce && strcasecmp(ce, "identity") != 0) {
        if (strcasecmp(ce, "gzip") != 0 && strcasecmp(ce, "deflate") != 0 &&
            strcasecmp(ce, "x-gzip") != 0) {
            respond_status(req, json, 415, "unsupported Content-Encoding (supported: gzip, deflate)");
            return;
        }
        gz = 1;
    }
    job *j = pc_xcalloc(1, sizeof(*j));
    j->r = r;
    j->req = req;
    j->json = json;
    j->gzip = gz;
    j->work.data = j;
    uv_queue_work(r->c->loop, &j->work, decode_work, decode_done);
}

static int otlp_start(pc_component *c, char *err, size_t errlen)
{
    otlp_recv *r = c->priv;
    otlp_cfg *cfg = c->cfg;
    pc_http_server_opts o = {
        .host = r->host,
        .port = r->port,
        .max_body_bytes = cfg->max_body,
        .max_header_bytes = 64 * 1024,
        .read_timeout_ms = (unsigned)cfg->read_timeout_ms,
        .idle_timeout_ms = (unsigned)cfg->idle_timeout_ms,
        .max_connections = (unsigned)cfg->max_connections,
        .log_id = c->id,
    };
    r->srv = pc_http_server_new(c->loop, &o, on_request, r);
    if (pc_http_server_start(r->srv, err, errlen)) return -1;
    pc_receiver_register_metrics(c, "http", &r->accepted_samples, &r->refused_samples);
    PC_INFO(c->id, "OTLP/HTTP profiles on http://%s:%d%s", r->host, pc_http_server_port(r->srv),
            PROFILES_PATH);
    return 0;
}

static void server_closed(void *arg)
{
    pc_component *c = arg;
    otlp_recv *r = c->priv;
    r->srv = NULL;
    PC_INFO(c->id, "stopped (accepted %llu samples, refused %llu)",
            (unsigned long long)r->accepted_samples, (unsigned long long)r->refused_samples);
    r->shutdown_done(c);
}

static void otlp_shutdown(pc_component *c, pc_shutdown_done done)
{
    otlp_recv *r = c->priv;
    if (!r->srv) {
        done(c);
        return;
    }
    r->shutdown_done = done;
    pc_http_server_shutdown(r->srv, server_closed, c);
}

static void otlp_destroy(pc_component *c)
{
    pc_metric_unregister(c);
    free(c->priv);
}

const pc_component_type pc_receiver_otlp = {
    .name = "otlp",
    .kind = PC_KIND_RECEIVER,
    .stability = "alpha",
    .doc = "OTLP/HTTP profiles on POST /v1development/profiles (protobuf or JSON, gzip)",
    .cfg_size = sizeof(otlp_cfg),
    .cfg = otlp_keys,
    .validate = otlp_validate,
    .create = otlp_create,
    .start = otlp_start,
    .shutdown = otlp_shutdown,
    .destroy = otlp_destroy,
};
