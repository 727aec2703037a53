/* Receiver "otlp": OTLP over HTTP (POST /v1development/profiles, /v1/traces, /v1/metrics,
 * /v1/logs; protobuf or JSON, gzip or zstd) and over gRPC (ProfilesService/Export,
 * TraceService/Export, ...; h2c or TLS, grpc-encoding gzip or zstd), each started only when its
 * protocols:: entry is present, as in the Collector. A signal is served when a pipeline of that
 * signal lists this receiver (404 / UNIMPLEMENTED otherwise). Both transports share one path:
 * unframe, inflate, decode and validate on the thread pool, consume, and answer the client only
 * once the pipeline has accepted or refused the data (ARCHITECTURE.md §2); only the mapping of
 * outcomes to HTTP statuses or gRPC codes differs. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/grpc.h"
#include "base/compress.h"
#include "net/h2_server.h"
#include "net/http_server.h"
#include "net/url.h"
#include "pdata/json.h"
#include "pdata/proto_pack.h"
#include "sdk/auth.h"
#include "net/tls.h"
#include "sdk/tls_config.h"
#include "sdk/component.h"
#include "sdk/receiver_http.h"
#include "sdk/telemetry.h"
#include "rpc_status.pb-c.h"

#define RETRY_AFTER_S 1

typedef struct otlp_cfg {
    pc_http_server_cfg http;
    char *url_path[PC_SIGNAL_COUNT]; /* protocols::http::<signal>_url_path, normalised */
    char *grpc_endpoint;
    int64_t grpc_max_recv_mib;
    int64_t grpc_max_decoded_mib; /* 0: PC_DECODED_PER_BODY x grpc_max_recv_mib */
    int64_t grpc_max_streams;
    int64_t grpc_max_connections;
    uint64_t grpc_idle_ms;
    uint64_t grpc_ka_time_ms, grpc_ka_timeout_ms, grpc_ping_min_ms;
    bool grpc_ping_without_stream;
    char *grpc_auth; /* protocols::grpc::auth::authenticator */
    pc_tls_server_cfg grpc_tls;
    bool http_on, grpc_on; /* which protocols:: entries are present (set by validate) */
} otlp_cfg;

/* clang-format off */
#define URL_PATH_KEY(sig, name, path, topic) {"protocols.http." name "_url_path", PC_CFG_STRING, path, offsetof(otlp_cfg, url_path[sig]), "URL path " name " are posted to", NULL},
static const pc_cfg_key otlp_keys[] = {
    {"protocols.http.endpoint", PC_CFG_STRING, "localhost:4318", offsetof(otlp_cfg, http.endpoint), "host:port to listen on (0.0.0.0 for all interfaces)", NULL},
    {"protocols.http.", PC_CFG_GROUP, "", offsetof(otlp_cfg, http), "the HTTP server", pc_http_server_keys},
    PC_SIGNALS_EACH(URL_PATH_KEY)
    {"protocols.grpc.endpoint", PC_CFG_STRING, "localhost:4317", offsetof(otlp_cfg, grpc_endpoint), "host:port for OTLP/gRPC (HTTP/2 cleartext, or TLS with protocols::grpc::tls; 0.0.0.0 for all interfaces)", NULL},
    {"protocols.grpc.max_recv_msg_size_mib", PC_CFG_INT, "4", offsetof(otlp_cfg, grpc_max_recv_mib), "largest request message in MiB, before and after decompression (RESOURCE_EXHAUSTED above)", NULL},
    {"protocols.grpc.max_recv_msg_decoded_size_mib", PC_CFG_INT, "0", offsetof(otlp_cfg, grpc_max_decoded_mib), "most memory in MiB one request message may take decoded, counted before decoding (RESOURCE_EXHAUSTED above; 0: 16 x max_recv_msg_size_mib)", NULL},
    {"protocols.grpc.max_concurrent_streams", PC_CFG_INT, "100", offsetof(otlp_cfg, grpc_max_streams), "concurrent calls per connection", NULL},
    {"protocols.grpc.max_connections", PC_CFG_INT, "1024", offsetof(otlp_cfg, grpc_max_connections), "concurrent connections; at the limit the one idle longest (no call being handled) makes room, and a newcomer is closed only when every one has a call being handled", NULL},
    {"protocols.grpc.keepalive.server_parameters.max_connection_idle", PC_CFG_DURATION, "300s", offsetof(otlp_cfg, grpc_idle_ms), "close connections without calls this long (GOAWAY)", NULL},
    {"protocols.grpc.keepalive.server_parameters.time", PC_CFG_DURATION, "2h", offsetof(otlp_cfg, grpc_ka_time_ms), "PING a connection nothing arrived from for this long (0: the default)", NULL},
    {"protocols.grpc.keepalive.server_parameters.timeout", PC_CFG_DURATION, "20s", offsetof(otlp_cfg, grpc_ka_timeout_ms), "close the connection (GOAWAY) when nothing answers the PING within this (0: the default)", NULL},
    {"protocols.grpc.keepalive.enforcement_policy.min_time", PC_CFG_DURATION, "5m", offsetof(otlp_cfg, grpc_ping_min_ms), "clients pinging more often get GOAWAY ENHANCE_YOUR_CALM (too_many_pings) and are disconnected (0: the default)", NULL},
    {"protocols.grpc.keepalive.enforcement_policy.permit_without_stream", PC_CFG_BOOL, "false", offsetof(otlp_cfg, grpc_ping_without_stream), "allow client pings while no call is open (else at most one per 2h then)", NULL},
    {"protocols.grpc.", PC_CFG_GROUP, "", offsetof(otlp_cfg, grpc_tls), "TLS of a server", pc_tls_server_keys},
    {"protocols.grpc.auth.authenticator", PC_CFG_STRING, "", offsetof(otlp_cfg, grpc_auth), "id of an authenticator extension (bearertokenauth, basicauth with htpasswd): calls without valid credentials get UNAUTHENTICATED", NULL},
    {0},
};
/* clang-format on */

enum { T_HTTP, T_GRPC };

typedef struct otlp_recv {
    pc_component *c;
    pc_receiver_http http; /* server, TLS and authenticator of protocols::http */
    pc_h2_server *h2;
    pc_tls_ctx *grpc_tls; /* protocols::grpc::tls, NULL: h2c */
    pc_auth *grpc_auth;   /* protocols::grpc::auth, NULL: none */
    /* the gRPC server's connection counters (self-metrics) */
    pc_conn_stats grpc_conns;
    char grpc_host[256];
    int grpc_port;
    pc_receiver_core core;
    pc_receiver_stats stats[2]; /* per transport */
    int closing;                /* servers still shutting down */
    pc_shutdown_done shutdown_done;
} otlp_recv;

/* One request on its way through decode and the pipeline, whichever the transport. */
typedef struct job {
    pc_receive rq; /* first: the recipe's part */
    otlp_recv *r;
    int transport;
    pc_http_req *req; /* T_HTTP */
    pc_h2_call *call; /* T_GRPC */
    const uint8_t *body;
    size_t body_len;
    size_t max_size; /* after decompression */
    int json;        /* T_HTTP */
    int enc;         /* T_HTTP: Content-Encoding, a pc_enc */
    char *encoding;  /* T_GRPC: grpc-encoding */
    pc_buf inflated;
    /* the compressed bytes as received and their pc_enc, for pass-through */
    const uint8_t *wire;
    size_t wire_len;
    int wire_enc;
    size_t decoded_len; /* the protobuf's length, uncompressed */
    const uint8_t *decoded_data;
} job;

/* As the Collector cleans them: a leading '/', no trailing one; two signals on one path are
 * an error. */
static int normalise_url_paths(otlp_cfg *cfg, const pc_node *node, const char *path, pc_error *err)
{
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        char key[64];
        snprintf(key, sizeof key, "protocols.http.%s_url_path", pc_signal_infos[sig].name);
        char *p = cfg->url_path[sig] ? cfg->url_path[sig] : "";
        size_t n = strlen(p);
        while (n > 1 && p[n - 1] == '/')
            n--;
        if (n == 0 || strpbrk(p, "?# "))
            return pc_cfg_key_errorf(err, node, path, key, "must be a URL path such as %s",
                                     pc_signal_infos[sig].http_path);
        char *clean = pc_xmalloc(n + 2);
        snprintf(clean, n + 2, "%s%.*s", p[0] == '/' ? "" : "/", (int)n, p);
        free(cfg->url_path[sig]);
        cfg->url_path[sig] = clean;
        for (int o = 0; o < sig; o++)
            if (!strcmp(cfg->url_path[o], clean))
                return pc_cfg_key_errorf(err, node, path, key, "\"%s\" is already %s_url_path",
                                         clean, pc_signal_infos[o].name);
    }
    return 0;
}

static int otlp_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    otlp_cfg *cfg = cfgp;
    char host[256];
    pc_error e = {0};
    int port;
    const pc_node *protocols = pc_node_get(node, "protocols");
    cfg->http_on = pc_node_get(protocols, "http") != NULL;
    cfg->grpc_on = pc_node_get(protocols, "grpc") != NULL;
    if (!cfg->http_on && !cfg->grpc_on) {
        pc_cfg_key_errorf(err, node, path, "protocols",
                          "must specify at least one protocol when using the OTLP receiver "
                          "(protocols::grpc and/or protocols::http)");
        return PC_EINVAL;
    }
    if (pc_http_server_cfg_validate(&cfg->http, node, path, "protocols.http.", err) < 0 ||
        normalise_url_paths(cfg, node, path, err) < 0)
        return PC_EINVAL;
    if (pc_hostport_parse(cfg->grpc_endpoint, host, sizeof host, &port, &e) < 0) {
        pc_cfg_key_errorf(err, node, path, "protocols.grpc.endpoint", "%s", e.msg);
        return PC_EINVAL;
    }
    if (cfg->grpc_max_recv_mib <= 0 || cfg->grpc_max_recv_mib > 2047) {
        pc_cfg_key_errorf(err, node, path, "protocols.grpc.max_recv_msg_size_mib",
                          "must be between 1 and 2047");
        return PC_EINVAL;
    }
    if (cfg->grpc_max_decoded_mib < 0 || cfg->grpc_max_decoded_mib > 1 << 20) {
        pc_cfg_key_errorf(err, node, path, "protocols.grpc.max_recv_msg_decoded_size_mib",
                          "must be between 0 (16 x max_recv_msg_size_mib) and 1048576");
        return PC_EINVAL;
    }
    if (cfg->grpc_max_streams <= 0 || cfg->grpc_max_streams > 100000) {
        pc_cfg_key_errorf(err, node, path, "protocols.grpc.max_concurrent_streams",
                          "must be between 1 and 100000");
        return PC_EINVAL;
    }
    if (cfg->grpc_max_connections <= 0) {
        pc_cfg_key_errorf(err, node, path, "protocols.grpc.max_connections", "must be > 0");
        return PC_EINVAL;
    }
    if (cfg->grpc_idle_ms == 0) {
        pc_cfg_key_errorf(err, node, path,
                          "protocols.grpc.keepalive.server_parameters.max_connection_idle",
                          "must be > 0");
        return PC_EINVAL;
    }
    /* 0 means grpc-go's default, as in the Collector; the h2 server counts in 32-bit ms */
    struct {
        uint64_t *ms, def;
        const char *key;
    } ka[] = {
        {&cfg->grpc_ka_time_ms, 2 * 3600 * 1000, "protocols.grpc.keepalive.server_parameters.time"},
        {&cfg->grpc_ka_timeout_ms, 20000, "protocols.grpc.keepalive.server_parameters.timeout"},
        {&cfg->grpc_ping_min_ms, 300000, "protocols.grpc.keepalive.enforcement_policy.min_time"},
    };
    for (size_t i = 0; i < sizeof ka / sizeof ka[0]; i++) {
        if (!*ka[i].ms) *ka[i].ms = ka[i].def;
        if (*ka[i].ms > 24 * 3600 * 1000) {
            pc_cfg_key_errorf(err, node, path, ka[i].key, "must be at most 24h");
            return PC_EINVAL;
        }
    }
    return pc_tls_server_validate(&cfg->grpc_tls, node, path, "protocols.grpc.", err);
}

static int otlp_create(pc_component *c, pc_error *err)
{
    otlp_recv *r = pc_xcalloc(1, sizeof(*r));
    otlp_cfg *cfg = c->cfg;
    (void)err;
    pc_hostport_parse(cfg->grpc_endpoint, r->grpc_host, sizeof r->grpc_host, &r->grpc_port, NULL);
    r->c = c;
    pc_receiver_core_init(&r->core, c);
    c->priv = r;
    return 0;
}

/* ---- answering over HTTP ---- */

/* gRPC code for a status body, as the OTLP spec pairs them. */
static int grpc_code_for_http(int http)
{
    switch (http) {
    case 400: return PC_GRPC_INVALID_ARGUMENT;
    case 413:
    case 429: return PC_GRPC_RESOURCE_EXHAUSTED;
    case 503: return PC_GRPC_UNAVAILABLE;
    default: return PC_GRPC_UNKNOWN;
    }
}

/* A response or status message in the request's encoding. */
static void encode_message(const ProtobufCMessage *m, int json, pc_buf *out)
{
    if (json) {
        pc_json_encode(m, out);
    } else {
        out->len = 0;
        pc_proto_pack(m, out);
    }
}

/* Failures carry a google.rpc.Status in the request's content type. */
static void http_respond_status(pc_http_req *req, int json, int http, const char *msg)
{
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    st.code = grpc_code_for_http(http);
    st.message = (char *)msg;
    pc_buf body = {0};
    encode_message(&st.base, json, &body);
    char extra[64] = "";
    if (http == 429 || http == 503)
        snprintf(extra, sizeof extra, "Retry-After: %d\r\n", RETRY_AFTER_S);
    pc_http_respond(req, http, json ? "application/json" : "application/x-protobuf", body.data,
                    body.len, extra);
    pc_buf_free(&body);
}

/* ---- one outcome, two transports ---- */

static void job_free(job *j)
{
    pc_buf_free(&j->inflated);
    free(j->encoding);
    free(j);
}

/* A refusal, by the decode or by the pipeline (ARCHITECTURE.md §7): permanent -> 400 /
 * INVALID_ARGUMENT; too large -> 413 / RESOURCE_EXHAUSTED; unsupported -> 415 / UNIMPLEMENTED;
 * overload -> 429 / RESOURCE_EXHAUSTED with RetryInfo; retryable (no memory now too) -> 503 /
 * UNAVAILABLE. */
static void respond_error(job *j, int st, const char *msg)
{
    if (j->transport == T_HTTP) {
        http_respond_status(j->req, j->json, pc_receiver_http_status(st), msg);
        return;
    }
    if (st == PC_EBUSY) {
        char *details =
            pc_grpc_status_details(PC_GRPC_RESOURCE_EXHAUSTED, msg, RETRY_AFTER_S * 1000);
        pc_grpc_respond(j->call, PC_GRPC_RESOURCE_EXHAUSTED, msg, NULL, 0, details);
        free(details);
        return;
    }
    pc_grpc_respond(j->call, pc_grpc_code_from_err(st), msg, NULL, 0, NULL);
}

/* 200 / OK with an Export*ServiceResponse's bytes (respond_message encodes one). */
static void respond_bytes(job *j, const void *body, size_t len)
{
    if (j->transport == T_HTTP)
        pc_http_respond(j->req, 200, j->json ? "application/json" : "application/x-protobuf", body,
                        len, NULL);
    else
        pc_grpc_respond(j->call, PC_GRPC_OK, NULL, body, len, NULL);
}

static void respond_message(job *j, const ProtobufCMessage *m)
{
    pc_buf body = {0};
    encode_message(m, j->json, &body);
    respond_bytes(j, body.data, body.len);
    pc_buf_free(&body);
}

static void respond_ok(job *j, int64_t rejected, const char *msg)
{
    if (!rejected && !j->json) { /* an empty response: in protobuf, no bytes */
        respond_bytes(j, NULL, 0);
        return;
    }
    if (j->rq.sig != PC_SIGNAL_PROFILES) {
        /* traces, metrics and logs are never partially rejected: an empty response (here in
         * JSON, "{}") */
        const ProtobufCMessageDescriptor *d = pc_signal_infos[j->rq.sig].response;
        ProtobufCMessage *m = pc_xcalloc(1, d->sizeof_message);
        protobuf_c_message_init(d, m);
        respond_message(j, m);
        free(m);
        return;
    }
    pc_response resp =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
    pc_partial_success ps =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_PARTIAL_SUCCESS__INIT;
    if (rejected) {
        ps.rejected_profiles = rejected;
        ps.error_message = (char *)msg;
        resp.partial_success = &ps;
    }
    respond_message(j, &resp.base);
}

static void answer(pc_receive *rq, int st, const char *msg)
{
    job *j = (job *)rq;
    if (st == PC_OK)
        respond_ok(j, rq->rejected, msg);
    else
        respond_error(j, st, msg);
    job_free(j);
}

/* ---- the decode step (thread pool) ---- */

/* gRPC: the message out of its length-prefixed frame, inflated when its flag says so. */
static int grpc_body(job *j, const uint8_t **data, size_t *len, pc_error *e)
{
    const uint8_t *msg;
    size_t mlen;
    bool compressed;
    int rc = pc_grpc_unframe(j->body, j->body_len, j->max_size, &msg, &mlen, &compressed, e);
    if (rc < 0) return rc == PC_E2BIG ? PC_E2BIG : PC_EINVAL;
    *data = msg;
    *len = mlen;
    if (!compressed) return 0;
    rc = pc_grpc_decompress(msg, mlen, true, j->encoding, j->max_size, &j->inflated, e);
    if (rc < 0) return rc == PC_E2BIG || rc == PC_ENOTSUP ? rc : PC_EINVAL;
    j->wire = msg;
    j->wire_len = mlen;
    j->wire_enc = pc_enc_parse(j->encoding);
    *data = j->inflated.data;
    *len = j->inflated.len;
    return 0;
}

/* HTTP: the body, inflated as Content-Encoding says. */
static int http_body(job *j, const uint8_t **data, size_t *len, pc_error *e)
{
    *data = j->body;
    *len = j->body_len;
    if (j->enc == PC_ENC_NONE) return 0;
    int rc = pc_decompress(j->enc, j->body, j->body_len, j->max_size, &j->inflated);
    if (rc == PC_E2BIG)
        return pc_error_set(e, PC_E2BIG,
                            "decompressed body exceeds max_request_body_size (%zu bytes)",
                            j->max_size);
    if (rc < 0) return pc_error_set(e, PC_EINVAL, "invalid %s body", pc_enc_name(j->enc));
    j->wire = j->body;
    j->wire_len = j->body_len;
    j->wire_enc = j->enc;
    *data = j->inflated.data;
    *len = j->inflated.len;
    return 0;
}

static int decode(pc_receive *rq, pc_budget *budget, pc_error *e)
{
    job *j = (job *)rq;
    const uint8_t *data;
    size_t len;
    int rc = j->transport == T_GRPC ? grpc_body(j, &data, &len, e) : http_body(j, &data, &len, e);
    if (rc < 0) return rc;
    j->decoded_data = data;
    j->decoded_len = len;
    /* every consumer passes the bytes through: check them on the wire, decode nothing
     * (ARCHITECTURE.md §2); whatever the check would refuse or reject is decoded after all, so
     * the answer is the decode's */
    if (!j->json && (data == j->inflated.data && len == j->inflated.len
                         ? pc_receive_wire_check_buf(rq, &j->inflated, budget)
                         : pc_receive_wire_check(rq, data, len, budget))) {
        /* the batch holds the bytes now: the block it took may have moved (trimmed) */
        j->decoded_data = pc_batch_wire_bytes(rq->batch, &j->decoded_len);
        return 0;
    }
    return pc_batch_decode(rq->sig, data, len, j->json, budget, &rq->batch, e);
}

/* Nothing taken out: the bytes received are the data, forwarded as they are where the pipeline
 * changes nothing and the exporter speaks their encoding (pass-through). Protobuf only: JSON is
 * read leniently (64-bit numbers unquoted, both field name forms) and re-encoded as the spec
 * writes it, for strict backends. */
static void decoded(pc_receive *rq)
{
    job *j = (job *)rq;
    if (!rq->rejected && !j->json) {
        if (j->wire && pc_enc_forwardable(j->wire_enc, j->wire, j->wire_len, j->decoded_len))
            pc_batch_set_raw(rq->batch, j->wire, j->wire_len, j->wire_enc, false);
        else
            pc_batch_set_raw(rq->batch, j->decoded_data, j->decoded_len, PC_ENC_NONE, false);
    }
    pc_buf_free(&j->inflated); /* set_raw copied what it keeps (or the batch took it) */
}

static const pc_receive_ops otlp_ops = {.decode = decode, .decoded = decoded, .answer = answer};

/* A new request of sig: the recipe's part filled in. */
static job *job_new(otlp_recv *r, int transport, pc_signal sig, const char *who,
                    uint64_t max_decoded, const char *decoded_key, const char *tenant)
{
    job *j = pc_xcalloc(1, sizeof(*j));
    j->r = r;
    j->transport = transport;
    j->rq.ops = &otlp_ops;
    j->rq.core = &r->core;
    j->rq.stats = &r->stats[transport];
    j->rq.route = &r->c->route[sig];
    j->rq.sig = sig;
    j->rq.who = who;
    j->rq.max_decoded = max_decoded;
    j->rq.decoded_key = decoded_key;
    j->rq.invalid_code = PC_EINVAL;
    pc_receive_set_tenant(&j->rq, tenant);
    return j;
}

/* ---- OTLP/HTTP ---- */

static int media_type_is(const char *ct, const char *want)
{
    size_t n = strlen(want);
    while (*ct == ' ')
        ct++;
    return strncasecmp(ct, want, n) == 0 && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' ');
}

static void on_request(pc_http_req *req, void *arg)
{
    otlp_recv *r = arg;
    if (pc_receiver_http_authorize(&r->http, req)) return;
    otlp_cfg *cfg = r->c->cfg;
    const char *ct = pc_http_req_header(req, "content-type");
    int json = ct && media_type_is(ct, "application/json");
    int sig = 0;
    while (sig < PC_SIGNAL_COUNT && !(r->c->route[sig] && !strcmp(req->path, cfg->url_path[sig])))
        sig++;
    if (sig == PC_SIGNAL_COUNT) {
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
        r->stats[T_HTTP].refused_requests.n[PC_REFUSED_UNSUPPORTED]++;
        pc_http_respond(req, 415, "text/plain", m, sizeof m - 1, NULL);
        return;
    }
    int enc = pc_enc_parse(pc_http_req_header(req, "content-encoding"));
    if (enc < 0) {
        r->stats[T_HTTP].refused_requests.n[PC_REFUSED_UNSUPPORTED]++;
        http_respond_status(req, json, 415,
                            "unsupported Content-Encoding (supported: gzip, deflate, zstd)");
        return;
    }
    job *j = job_new(r, T_HTTP, (pc_signal)sig, req->peer,
                     pc_decoded_limit(cfg->http.max_decoded, cfg->http.max_body),
                     "max_request_decoded_size", pc_http_req_header(req, PC_META_TENANT));
    j->req = req;
    j->body = req->body;
    j->body_len = req->body_len;
    j->max_size = cfg->http.max_body;
    j->json = json;
    j->enc = enc;
    pc_receive_start(&j->rq);
}

/* ---- OTLP/gRPC ---- */

static void on_call(pc_h2_call *call, void *arg)
{
    otlp_recv *r = arg;
    if (r->grpc_auth && pc_auth_check_call(r->grpc_auth, call)) {
        PC_DEBUG(r->c->id, "%s: gRPC call without valid credentials", call->peer);
        r->stats[T_GRPC].refused_requests.n[PC_REFUSED_UNAUTHORIZED]++;
        pc_grpc_respond(call, PC_GRPC_UNAUTHENTICATED, "missing or invalid credentials", NULL, 0,
                        NULL);
        return;
    }
    otlp_cfg *cfg = r->c->cfg;
    const char *ct = pc_h2_call_header(call, "content-type");
    if (!ct ||
        !(media_type_is(ct, "application/grpc") || media_type_is(ct, "application/grpc+proto"))) {
        pc_h2_header h[] = {{"content-type", "text/plain"}};
        static const char m[] = "415 unsupported media type: gRPC only (application/grpc)\n";
        r->stats[T_GRPC].refused_requests.n[PC_REFUSED_UNSUPPORTED]++;
        pc_h2_respond(call, 415, h, 1, m, sizeof m - 1, NULL, 0);
        return;
    }
    int sig = 0;
    while (sig < PC_SIGNAL_COUNT &&
           !(r->c->route[sig] && !strcmp(call->path, pc_signal_infos[sig].grpc_path)))
        sig++;
    if (strcmp(call->method, "POST") != 0 || sig == PC_SIGNAL_COUNT) {
        char m[400];
        snprintf(m, sizeof m, "unknown method %.200s for this receiver's pipelines", call->path);
        pc_grpc_respond(call, PC_GRPC_UNIMPLEMENTED, m, NULL, 0, NULL);
        return;
    }
    size_t max = (size_t)cfg->grpc_max_recv_mib << 20;
    if (call->too_large) {
        char m[160];
        snprintf(m, sizeof m, "request message larger than max_recv_msg_size_mib (%zu bytes)", max);
        PC_INFO_RATELIMITED(&r->core.refused_log, r->c->id, "%s: refused (too large): %s",
                            call->peer, m);
        pc_grpc_respond(call, PC_GRPC_RESOURCE_EXHAUSTED, m, NULL, 0, NULL);
        return;
    }
    const char *enc = pc_h2_call_header(call, "grpc-encoding");
    job *j = job_new(r, T_GRPC, (pc_signal)sig, call->peer,
                     pc_decoded_limit((uint64_t)cfg->grpc_max_decoded_mib << 20, max),
                     "max_recv_msg_decoded_size_mib", pc_h2_call_header(call, PC_META_TENANT));
    j->call = call;
    j->body = call->body;
    j->body_len = call->body_len;
    j->max_size = max;
    j->encoding = enc ? pc_xstrdup(enc) : NULL;
    pc_receive_start(&j->rq);
}

/* ---- lifecycle ---- */

/* The counters of every signal this receiver serves, per transport. */
static void register_metrics(pc_component *c, int t)
{
    otlp_recv *r = c->priv;
    pc_receiver_stats_register(c, &r->stats[t], t == T_HTTP ? "http" : "grpc");
}

/* The paths (HTTP) or services (gRPC, "TraceService/Export") served, for the start-up log. */
static const char *signal_list(const pc_component *c, int t)
{
    static char out[512];
    out[0] = 0;
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
        if (!c->route[sig]) continue;
        const char *p = ((const otlp_cfg *)c->cfg)->url_path[sig];
        if (t == T_GRPC) { /* drop the package: "/a.b.TraceService/Export" */
            const char *g = pc_signal_infos[sig].grpc_path, *slash = strrchr(g, '/');
            p = g;
            for (const char *q = g; q < slash; q++)
                if (*q == '.') p = q + 1;
        }
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", out[0] ? ", " : "", p);
    }
    return out;
}

static int start_grpc(pc_component *c, pc_error *e)
{
    otlp_recv *r = c->priv;
    otlp_cfg *cfg = c->cfg;
    size_t max = (size_t)cfg->grpc_max_recv_mib << 20;
    pc_h2_server_opts o = {
        .host = r->grpc_host,
        .port = r->grpc_port,
        .max_body_bytes = max + PC_GRPC_PREFIX,
        .max_conn_body_bytes = 4 * (max + PC_GRPC_PREFIX),
        .max_header_bytes = 64 * 1024,
        .max_concurrent_streams = (unsigned)cfg->grpc_max_streams,
        .idle_timeout_ms = (unsigned)cfg->grpc_idle_ms,
        .read_timeout_ms = 30000,
        .max_connections = (unsigned)cfg->grpc_max_connections,
        .keepalive_time_ms = (unsigned)cfg->grpc_ka_time_ms,
        .keepalive_timeout_ms = (unsigned)cfg->grpc_ka_timeout_ms,
        .ping_min_time_ms = (unsigned)cfg->grpc_ping_min_ms,
        .ping_without_stream = cfg->grpc_ping_without_stream,
        .log_id = c->id,
        .stats = &r->grpc_conns,
    };
    if (cfg->grpc_auth && !(r->grpc_auth = pc_host_authenticator(c, cfg->grpc_auth, true, e)))
        return PC_EINVAL;
    if (pc_tls_server_enabled(&cfg->grpc_tls)) {
        r->grpc_tls = pc_tls_server_ctx_new(&cfg->grpc_tls, "h2", c->id, e);
        if (!r->grpc_tls) return e ? e->code : PC_EINVAL;
        o.tls = r->grpc_tls;
    }
    r->h2 = pc_h2_server_new(c->loop, &o, on_call, r);
    int rc = pc_h2_server_start(r->h2, e);
    if (rc < 0) return rc;
    register_metrics(c, T_GRPC);
    pc_receiver_register_conn_metrics(c, "grpc", &r->grpc_conns);
    PC_INFO(c->id, "OTLP/gRPC on %s:%d (%s, %s%s%s)", r->grpc_host, pc_h2_server_port(r->h2),
            r->grpc_tls ? "TLS" : "h2c", signal_list(c, T_GRPC), cfg->grpc_auth ? ", auth: " : "",
            cfg->grpc_auth ? cfg->grpc_auth : "");
    return 0;
}

static int otlp_start(pc_component *c, pc_error *e)
{
    otlp_recv *r = c->priv;
    otlp_cfg *cfg = c->cfg;
    pc_receiver_register_in_flight(c, &r->core.in_flight);
    int rc = cfg->grpc_on ? start_grpc(c, e) : 0;
    if (rc < 0) return rc;
    if (!cfg->http_on) return 0;
    r->http.refused = &r->stats[T_HTTP].refused_requests;
    rc = pc_receiver_http_start(&r->http, c, &cfg->http, on_request, r, e);
    if (rc < 0) return rc;
    register_metrics(c, T_HTTP);
    PC_INFO(c->id, "OTLP/HTTP on %s://%s:%d: %s", r->http.tls ? "https" : "http", r->http.host,
            r->http.port, signal_list(c, T_HTTP));
    return 0;
}

static void server_closed(void *arg)
{
    pc_component *c = arg;
    otlp_recv *r = c->priv;
    if (--r->closing) return;
    r->h2 = NULL;
    char totals[400] = "";
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) /* "12 samples (0 refused), 5 spans ..." */
        if (c->route[sig])
            snprintf(totals + strlen(totals), sizeof totals - strlen(totals),
                     "%s%llu %s (%llu refused)", totals[0] ? ", " : "",
                     (unsigned long long)(r->stats[T_HTTP].accepted[sig] +
                                          r->stats[T_GRPC].accepted[sig]),
                     pc_signal_infos[sig].items,
                     (unsigned long long)(r->stats[T_HTTP].refused[sig] +
                                          r->stats[T_GRPC].refused[sig]));
    pc_receiver_core_flush(&r->core);
    PC_INFO(c->id, "stopped (accepted %s)", totals);
    r->shutdown_done(c);
}

static void otlp_shutdown(pc_component *c, pc_shutdown_done done)
{
    otlp_recv *r = c->priv;
    if (!r->http.srv && !r->h2) {
        done(c);
        return;
    }
    r->shutdown_done = done;
    r->closing = (r->http.srv != NULL) + (r->h2 != NULL);
    /* both counted before either starts: a server may finish synchronously */
    if (r->http.srv) pc_receiver_http_shutdown(&r->http, server_closed, c);
    if (r->h2) pc_h2_server_shutdown(r->h2, server_closed, c);
}

static void otlp_destroy(pc_component *c)
{
    otlp_recv *r = c->priv;
    if (r) pc_tls_ctx_free(r->grpc_tls); /* the h2 server borrowed it until it closed */
    free(c->priv);
}

const pc_component_type pc_receiver_otlp = {
    .name = "otlp",
    .kind = PC_KIND_RECEIVER,
    .stability = "alpha",
    .cfg_size = sizeof(otlp_cfg),
    .cfg = otlp_keys,
    .validate = otlp_validate,
    .create = otlp_create,
    .start = otlp_start,
    .shutdown = otlp_shutdown,
    .destroy = otlp_destroy,
    .signals = PC_SIGNALS_ALL,
    .doc = "OTLP over HTTP (POST /v1development/profiles, /v1/traces, /v1/metrics, /v1/logs; "
           "protobuf or JSON, gzip or zstd) and gRPC (ProfilesService/Export, TraceService/Export, "
           "...; h2c or TLS, gzip or zstd)",
};
