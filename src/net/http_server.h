/* The one HTTP/1.1 server (libuv + llhttp) every receiver uses (ARCHITECTURE.md §6).
 *
 * The server reads a whole request (head and body) under limits, then calls the handler on the
 * loop thread. The handler answers later (possibly after thread-pool work) with pc_http_respond;
 * until then the connection reads no further request (pipelined requests wait, in order).
 * Errors the server answers itself: 400 malformed, 408 read (or header read) timeout, 413 body
 * too large, 431 header too large, 503 connection limit reached with every connection busy
 * (with TLS: the connection is closed). Per-connection log lines are rate-limited.
 * With a TLS context (net/tls.h) every connection is HTTPS: the handshake runs on the loop over
 * memory BIOs, a failed one is logged and closed, and the rest is as above. */
#ifndef PC_HTTP_SERVER_H
#define PC_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/err.h"

typedef struct pc_http_server pc_http_server;

typedef struct pc_http_header {
    char *name;  /* lower-cased */
    char *value; /* both in the request's block */
} pc_http_header;

typedef struct pc_http_req {
    char method[16];
    char *path;  /* without the query string, percent-decoding not applied */
    char *query; /* after '?', "" if none */
    pc_http_header *headers;
    size_t n_headers;
    uint8_t *body; /* de-chunked, NOT decompressed; NUL-terminated; valid until answered */
    size_t body_len;
    char peer[64]; /* "127.0.0.1:53211" for logs */
    void *user;    /* free for the handler's use */
    /* private */
    void *conn_;
} pc_http_req;

typedef void (*pc_http_handler)(pc_http_req *req, void *arg);

typedef struct pc_http_server_opts {
    const char *host;         /* "localhost", "127.0.0.1", "0.0.0.0", "::" */
    int port;                 /* 0 = ephemeral (see pc_http_server_port) */
    size_t max_body_bytes;    /* default 20 MiB */
    size_t max_header_bytes;  /* default 64 KiB, whole head */
    unsigned read_timeout_ms; /* a request must be fully read within this; default 30000 */
    /* the request line and headers must arrive within this (from the request's first byte, or
     * from accept for a connection that sends nothing); default 10000 */
    unsigned read_header_timeout_ms;
    unsigned idle_timeout_ms; /* keep-alive idle close; default 60000 */
    /* default 1024. A newcomer beyond it takes the place of the connection idle or incomplete
     * longest; only when every connection holds a request being handled is it refused (503,
     * with TLS closed). The same happens when accept runs out of file descriptors. */
    unsigned max_connections;
    const char *log_id;          /* component id for log lines */
    struct pc_tls_ctx *tls;      /* NULL: plain text; else HTTPS (borrowed: outlives the server) */
    struct pc_conn_stats *stats; /* NULL, or counters to keep (net/listener.h; outlive server) */
    uint64_t *too_large; /* NULL, or counts the requests the server refuses itself: 413, 431 */
} pc_http_server_opts;

/* The options of a small endpoint that answers GETs (self-metrics, health, the profilez page):
 * 4 KiB bodies, 16 KiB heads, 10 s to read a request, 64 connections. */
pc_http_server_opts pc_http_server_small_opts(const char *host, int port, const char *log_id);

pc_http_server *pc_http_server_new(uv_loop_t *loop, const pc_http_server_opts *opts,
                                   pc_http_handler handler, void *arg);
/* Bind and listen. 0, or PC_EIO with a reason in e (e.g. "listen 127.0.0.1:4318: address
 * already in use"). */
int pc_http_server_start(pc_http_server *s, pc_error *e);
int pc_http_server_port(const pc_http_server *s);
/* Stop accepting, close idle connections, let in-flight requests be answered, then call done and
 * free the server. Requests answered after this get "Connection: close". */
void pc_http_server_shutdown(pc_http_server *s, void (*done)(void *arg), void *arg);

/* Case-insensitive header lookup; NULL if absent. */
const char *pc_http_req_header(const pc_http_req *req, const char *name);
/* Query parameter value, percent- and '+'-decoded into a malloc'd string; NULL if absent. */
char *pc_http_req_query(const pc_http_req *req, const char *name);

/* Answer a request, exactly once; frees req. extra_headers: NULL or "Name: value\r\n..." lines.
 * Safe to call when the client has gone away (the answer is then discarded). */
void pc_http_respond(pc_http_req *req, int status, const char *content_type, const void *body,
                     size_t len, const char *extra_headers);

#endif
