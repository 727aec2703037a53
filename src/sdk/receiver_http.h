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

/* The config-table group (sdk/cfgtable.h) of an HTTP server's keys but its endpoint (each
 * receiver's table has the endpoint row, with its own default port), relative to a
 * pc_http_server_cfg. */
extern const pc_cfg_key pc_http_server_keys[];

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
    pc_tls_ctx *tls;              /* NULL: plain text */
    pc_auth *auth;                /* NULL: no authenticator */
    pc_refused_requests *refused; /* where a 401 is counted (the receiver's, set before start) */
    /* the server's connection counters, in the self-metrics */
    pc_conn_stats conns;
    char host[256];
    int port;
    void (*closed)(void *arg); /* set by pc_receiver_http_shutdown */
    void *closed_arg;
} pc_receiver_http;

/* In start(); 0, or PC_EINVAL (endpoint, authenticator, TLS files) or PC_EIO (e.g. the port is
 * in use) with e. */
int pc_receiver_http_start(pc_receiver_http *rh, pc_component *c, const pc_http_server_cfg *cfg,
                           pc_http_handler handler, void *arg, pc_error *e);
/* The authenticator's verdict: 0 when the request may go on, else PC_EAUTH: it was answered
 * 401. */
int pc_receiver_http_authorize(const pc_receiver_http *rh, pc_http_req *req);
/* Stop the server (in-flight requests are answered) and release what start() set up; then
 * closed(arg), at once when no server runs. */
void pc_receiver_http_shutdown(pc_receiver_http *rh, void (*closed)(void *arg), void *arg);

#endif
