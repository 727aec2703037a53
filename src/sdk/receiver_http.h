/* What every HTTP receiver configures and starts the same way: endpoint, body limit, timeouts,
 * connection limit, a tls block and auth::authenticator (the Collector's confighttp server). */
#ifndef PC_RECEIVER_HTTP_H
#define PC_RECEIVER_HTTP_H

#include "sdk/auth.h"
#include "net/http_server.h"
#include "net/listener.h"
#include "net/tls.h"
#include "sdk/tls_config.h"
#include "sdk/component.h"
#include "sdk/receiver.h"

typedef struct pc_http_server_cfg {
    char *endpoint;
    uint64_t max_body;
    uint64_t max_decoded; /* 0: PC_DECODED_PER_BODY x max_body */
    uint64_t read_timeout_ms;
    uint64_t read_header_timeout_ms;
    uint64_t idle_timeout_ms;
    int64_t max_connections;
    pc_tls_server_cfg tls;
    char *authenticator;
} pc_http_server_cfg;

/* clang-format off */
/* Config-table entries under prefix ("" or "protocols.http.") for member f of struct T. */
#define PC_HTTP_SERVER_KEYS(T, f, prefix, default_endpoint) \
    {prefix "endpoint", PC_CFG_STRING, default_endpoint, offsetof(T, f.endpoint), "host:port to listen on (0.0.0.0 for all interfaces)", NULL}, \
    {prefix "max_request_body_size", PC_CFG_SIZE, "20MiB", offsetof(T, f.max_body), "largest request body, before and after decompression (413 above)", NULL}, \
    {prefix "max_request_decoded_size", PC_CFG_SIZE, "0", offsetof(T, f.max_decoded), "most memory one request may take decoded, counted before decoding (413 above; 0: 16 x max_request_body_size)", NULL}, \
    {prefix "read_timeout", PC_CFG_DURATION, "30s", offsetof(T, f.read_timeout_ms), "a request must arrive whole within this time (408 otherwise)", NULL}, \
    {prefix "read_header_timeout", PC_CFG_DURATION, "10s", offsetof(T, f.read_header_timeout_ms), "a request's line and headers must arrive within this time (408 otherwise; 0: read_timeout)", NULL}, \
    {prefix "idle_timeout", PC_CFG_DURATION, "60s", offsetof(T, f.idle_timeout_ms), "close keep-alive connections idle this long", NULL}, \
    {prefix "max_connections", PC_CFG_INT, "1024", offsetof(T, f.max_connections), "concurrent connections; at the limit the connection idle or incomplete longest makes room, and 503 only when every one has a request being handled", NULL}, \
    PC_TLS_SERVER_KEYS(T, f.tls, prefix), \
    PC_AUTH_SERVER_KEY(T, f.authenticator, prefix)
/* clang-format on */

/* The HTTP status a receiver answers for a pipeline outcome (ARCHITECTURE.md §7): 200 for
 * PC_OK, 413 PC_E2BIG, 429 PC_EBUSY, 503 PC_EAGAIN (the last two with Retry-After), 415
 * PC_ENOTSUP, 401 PC_EAUTH, 400 for the other, permanent, codes (PC_EINVAL, PC_EBADMSG...). */
static inline int pc_receiver_http_status(int rc)
{
    switch (rc) {
    case PC_OK: return 200;
    case PC_E2BIG: return 413;
    case PC_EBUSY: return 429;
    case PC_EAGAIN: return 503;
    case PC_ENOTSUP: return 415;
    case PC_EAUTH: return 401;
    case PC_EBADMSG: return 400; /* as PC_EINVAL: a receiver that answers 422 maps it itself */
    default: return 400;
    }
}

/* validate(): endpoint, limits and TLS files; PC_EINVAL with errors naming path::prefix::key. */
int pc_http_server_cfg_validate(const pc_http_server_cfg *cfg, const pc_node *node,
                                const char *path, const char *prefix, pc_error *err);

/* A started server for a receiver: the authenticator looked up, TLS set up, listening. */
typedef struct pc_receiver_http {
    pc_http_server *srv;
    pc_tls_ctx *tls; /* NULL: plain text */
    pc_auth *auth;   /* NULL: no authenticator */
    /* the server's connection counters, in the self-metrics */
    pc_conn_stats conns;
    char host[256];
    int port;
} pc_receiver_http;

/* In start(); 0, or PC_EINVAL (endpoint, authenticator, TLS files) or PC_EIO (e.g. the port is
 * in use) with e. */
int pc_receiver_http_start(pc_receiver_http *rh, pc_component *c, const pc_http_server_cfg *cfg,
                           pc_http_handler handler, void *arg, pc_error *e);
/* The authenticator's verdict: 0 when the request may go on, else PC_EAUTH: it was answered
 * 401. */
int pc_receiver_http_authorize(const pc_receiver_http *rh, pc_http_req *req);
/* In destroy(), after the server closed. */
void pc_receiver_http_free(pc_receiver_http *rh);

#endif
