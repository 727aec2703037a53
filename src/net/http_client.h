/* The one HTTP/1.1 client (libuv + llhttp) every exporter uses (ARCHITECTURE.md §6): a keep-alive
 * connection pool per endpoint, timeouts, Retry-After parsing. Loop thread only. */
#ifndef PC_HTTP_CLIENT_H
#define PC_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <uv.h>

typedef struct pc_http_client pc_http_client;

typedef struct pc_http_client_opts {
    const char *host;
    int port;
    unsigned max_connections; /* default 8; requests beyond wait in FIFO order */
    const char *log_id;
    /* a response body larger than this fails the request (error UV_EMSGSIZE); 0: 64 MiB, the most
     */
    size_t max_body;
    /* NULL: plain text; else HTTPS with this context (net/tls.h; borrowed: outlives the client).
     * host is the name sent as SNI and verified in the certificate (unless the context overrides
     * it). A failed handshake is a connection error (error UV_EPROTO, error_msg "TLS handshake
     * with host:port failed: <reason>"), which exporters log and retry. */
    struct pc_tls_ctx *tls;
} pc_http_client_opts;

typedef struct pc_http_response {
    int status; /* 0 when the request failed before a status arrived */
    int error;  /* 0, or a negative libuv error (UV_ETIMEDOUT on timeout, UV_ECONNREFUSED..) */
    const char *error_msg;    /* human reason when error != 0 */
    const char *content_type; /* may be NULL */
    int retry_after_s;        /* parsed Retry-After (seconds or HTTP-date), -1 if absent */
    const uint8_t *body;
    size_t body_len;
} pc_http_response;

typedef void (*pc_http_response_cb)(const pc_http_response *resp, void *arg);

pc_http_client *pc_http_client_new(uv_loop_t *loop, const pc_http_client_opts *opts);
/* headers: NULL or "Name: value\r\n..." lines (Host, Content-Length, Connection are added).
 * The body is copied. cb is called exactly once, on the loop thread; resp is valid only during cb.
 * timeout_ms covers connect, send and the whole response. */
void pc_http_client_request(pc_http_client *c, const char *method, const char *path,
                            const char *headers, const void *body, size_t len, unsigned timeout_ms,
                            pc_http_response_cb cb, void *arg);
/* Number of requests queued or in flight. */
size_t pc_http_client_pending(const pc_http_client *c);
/* Fail queued requests with UV_ECANCELED, wait for in-flight ones, close, call done, free. */
void pc_http_client_close(pc_http_client *c, void (*done)(void *arg), void *arg);
/* The same, failing the requests in flight too (UV_ECANCELED) instead of waiting for them: a
 * scraper's request may wait for a 14 s CPU profile. */
void pc_http_client_close_now(pc_http_client *c, void (*done)(void *arg), void *arg);

/* Parse a Retry-After value: delay-seconds or an HTTP-date (relative to now). -1 if invalid. */
int pc_http_parse_retry_after(const char *v);

/* s can go in a header line as a name or value: not NULL, no CR or LF (header injection). */
static inline bool pc_http_header_safe(const char *s)
{
    return s && !strpbrk(s, "\r\n");
}

#endif
