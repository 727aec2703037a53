/* An HTTP/2 client (libuv + nghttp2; cleartext with prior knowledge, or TLS offering ALPN h2
 * through net/tls.h's memory BIOs) for unary calls such as
 * gRPC's: one connection to one endpoint carries many concurrent streams (as many as the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS allow; nghttp2 queues the rest). A failed connection fails its
 * calls and the next call reconnects; a GOAWAY drains the old connection while new calls go to a
 * new one; a stream the server refused unprocessed (REFUSED_STREAM) is sent again once. Every
 * call has its own timeout. Loop thread only. */
#ifndef PC_H2_CLIENT_H
#define PC_H2_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "net/h2_server.h" /* pc_h2_header */

typedef struct pc_h2_client pc_h2_client;

typedef struct pc_h2_client_opts {
    const char *host;
    int port;
    size_t max_response_bytes; /* body; default 4 MiB (more fails the call) */
    const char *log_id;
    /* NULL: cleartext (h2c, prior knowledge); else TLS, the context offering ALPN "h2"
     * (borrowed: outlives the client); the host is used for SNI and verification */
    struct pc_tls_ctx *tls;
} pc_h2_client_opts;

typedef struct pc_h2_response {
    int error;                   /* 0, or a negative libuv error: UV_ETIMEDOUT, UV_ECONNREFUSED,
                                    UV_ECONNRESET (connection lost or stream reset), UV_ECANCELED,
                                    UV_EPROTO (HTTP/2 protocol error), UV_E2BIG (response too big) */
    const char *error_msg;       /* human reason when error != 0 */
    uint32_t rst_code;           /* the HTTP/2 error code when the peer reset the stream, else 0 */
    int status;                  /* :status, 0 if none arrived */
    const pc_h2_header *headers; /* response headers (with the trailers of a trailers-only reply) */
    size_t n_headers;
    const pc_h2_header *trailers;
    size_t n_trailers;
    const uint8_t *body;
    size_t body_len;
} pc_h2_response;

typedef void (*pc_h2_response_cb)(const pc_h2_response *resp, void *arg);

pc_h2_client *pc_h2_client_new(uv_loop_t *loop, const pc_h2_client_opts *opts);
/* POST-style call: method, path and headers (lower-case names) are copied, and so is the body.
 * cb runs exactly once, on the loop thread, never from inside this function; resp is valid only
 * during cb. timeout_ms covers connecting, sending and the whole response. */
void pc_h2_client_request(pc_h2_client *c, const char *method, const char *path,
                          const pc_h2_header *headers, size_t n_headers, const void *body,
                          size_t len, unsigned timeout_ms, pc_h2_response_cb cb, void *arg);
/* Calls queued or in flight. */
size_t pc_h2_client_pending(const pc_h2_client *c);
/* Fail queued calls with UV_ECANCELED, wait for those in flight, close, call done, free. */
void pc_h2_client_close(pc_h2_client *c, void (*done)(void *arg), void *arg);

#endif
