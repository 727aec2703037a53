/* An HTTP/2 server (libuv + nghttp2; cleartext with prior knowledge, or TLS with ALPN h2 through
 * net/tls.h's memory BIOs) for unary calls such as
 * gRPC's: a call is a request's headers and whole body, collected under limits and handed to the
 * handler on the loop thread; the handler answers later with status, headers, a body and
 * trailers (pc_h2_respond). nghttp2 does the framing, HPACK, flow control and PING acks; this
 * file bounds what a peer can make us hold: streams per connection
 * (SETTINGS_MAX_CONCURRENT_STREAMS), header bytes and body bytes per stream, body bytes per
 * connection, connections, and time (idle connections, stalled requests, peers that answer no
 * keepalive PING, peers that PING too often). */
#ifndef PC_H2_SERVER_H
#define PC_H2_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/err.h"

typedef struct pc_h2_server pc_h2_server;

typedef struct pc_h2_header {
    const char *name; /* lower-case */
    const char *value;
} pc_h2_header;

typedef struct pc_h2_call {
    const char *method;    /* :method */
    const char *path;      /* :path */
    pc_h2_header *headers; /* regular headers (no pseudo-headers), in arrival order */
    size_t n_headers;
    uint8_t *body; /* the DATA frames' payload, concatenated */
    size_t body_len;
    /* the body exceeded max_body_bytes (or the connection's buffer limit): body holds nothing
     * useful and the call was handed over early; answer with an error */
    bool too_large;
    char peer[64]; /* "127.0.0.1:53211" for logs */
    void *user;    /* free for the handler's use */
} pc_h2_call;

typedef void (*pc_h2_handler)(pc_h2_call *call, void *arg);

typedef struct pc_h2_server_opts {
    const char *host;                /* "localhost", "127.0.0.1", "0.0.0.0", "::" */
    int port;                        /* 0 = ephemeral (see pc_h2_server_port) */
    size_t max_body_bytes;           /* per call; default 4 MiB + 5 */
    size_t max_conn_body_bytes;      /* bodies one connection may have buffered; default 4x above */
    size_t max_header_bytes;         /* per call, names + values; default 64 KiB */
    unsigned max_concurrent_streams; /* default 100 */
    unsigned idle_timeout_ms; /* close connections without streams this long; default 300000 */
    unsigned read_timeout_ms; /* a started call must arrive whole within this; default 30000 */
    /* default 1024. A newcomer beyond it takes the place of the connection idle longest (no
     * call being handled: no stream, only incomplete ones, or not even the preface), which gets
     * GOAWAY and is closed; only when every connection has a call being handled is the newcomer
     * closed. The same happens when accept runs out of file descriptors. */
    unsigned max_connections;
    /* keepalive (gRPC's server_parameters): PING a connection nothing arrived from for
     * keepalive_time_ms (0: never); when neither the ack nor anything else arrives within
     * keepalive_timeout_ms (default 20000), GOAWAY and close */
    unsigned keepalive_time_ms;
    unsigned keepalive_timeout_ms;
    /* gRPC's enforcement_policy: a client PINGing more often than ping_min_time_ms (or at all
     * within 2 h while it has no call open, unless ping_without_stream) earns a strike; a third
     * strike gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and the connection closes. A
     * response we send forgives the strikes. 0: not enforced. */
    unsigned ping_min_time_ms;
    bool ping_without_stream;
    const char *log_id;
    struct pc_conn_stats *stats; /* NULL, or counters to keep (net/listener.h; outlive server) */
    /* NULL: cleartext (h2c, prior knowledge); else TLS on every connection, the context created
     * with ALPN "h2" (borrowed: outlives the server) */
    struct pc_tls_ctx *tls;
} pc_h2_server_opts;

pc_h2_server *pc_h2_server_new(uv_loop_t *loop, const pc_h2_server_opts *opts,
                               pc_h2_handler handler, void *arg);
/* Bind and listen: 0, or PC_EIO with a reason in e. */
int pc_h2_server_start(pc_h2_server *s, pc_error *e);
int pc_h2_server_port(const pc_h2_server *s);
/* GOAWAY to every connection, stop accepting; calls in flight are answered, then done(arg) and
 * the server is freed. */
void pc_h2_server_shutdown(pc_h2_server *s, void (*done)(void *arg), void *arg);

/* Case-insensitive header lookup on a call; NULL if absent. */
const char *pc_h2_call_header(const pc_h2_call *call, const char *name);

/* Answer a call, exactly once; frees the call (and its body). headers/trailers are copied.
 * status: the HTTP :status. A NULL body with trailers sends a "trailers-only" response: one
 * HEADERS frame holding headers and trailers together. Safe after the peer went away. */
void pc_h2_respond(pc_h2_call *call, int status, const pc_h2_header *headers, size_t n_headers,
                   const void *body, size_t len, const pc_h2_header *trailers, size_t n_trailers);

#endif
