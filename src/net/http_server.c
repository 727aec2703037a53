/* The one HTTP/1.1 server (DESIGN §6): libuv for sockets and timers, llhttp for parsing.
 *
 * A connection parses one request at a time. When a request is complete the parser pauses, the
 * connection stops reading and the handler owns the request until pc_http_respond; only after
 * that response is written does parsing continue with any bytes already buffered. That keeps
 * pipelined requests in order and bounds what one connection can make us buffer.
 *
 * Lifetimes: a connection is freed when its refcount drops to zero. References are held by its
 * two handles (until their close callbacks), by each pending write or shutdown, and by the
 * request the handler owns, so pc_http_respond is safe after the peer went away. */
#include "net/http_server.h"
#include "net/http_pause.h"
#include "net/tls.h"

#include <ctype.h>
#include <llhttp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/buf.h"
#include "net/listener.h"
#include "base/alloc.h"
#include "base/log.h"

enum {
    READ_CHUNK = 64 * 1024,
    LINGER_MS = 2000,    /* how long we drain input after a final response */
    LOG_TICK_MS = 10000, /* summaries of suppressed log lines, at most this often */
};

typedef enum { T_IDLE, T_HEADER, T_READ, T_WRITE, T_LINGER } timer_mode;
typedef enum { W_INTERIM, W_RESPONSE, W_FINAL } write_kind;

typedef struct conn conn;
struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shut;
    pc_http_server *s;
    conn *prev, *next;
    /* the server's eviction order: counted connections the handler does not hold, oldest first
     * (since accept or their last response; lingering ones at the front) */
    conn *lru_prev, *lru_next;
    bool in_lru;
    int refs;
    llhttp_t parser;
    char peer[64];
    timer_mode tmode;
    pc_buf in; /* received, not yet parsed (only non-empty while a request is handled) */
    size_t in_off;
    /* the request being parsed */
    bool in_request;
    pc_buf url, field, value, body;
    pc_http_header *hdrs;
    size_t n_hdrs, cap_hdrs;
    size_t head_bytes;
    uint64_t req_start; /* when the request's first byte was parsed (read_timeout runs from it) */
    int err_status;     /* set by a callback that rejects the request (413, 431) */
    bool keep_alive;
    pc_http_req *ready; /* complete, waiting to be dispatched after llhttp_execute returns */
    /* state */
    bool busy;    /* the handler owns a request, or its response is being written */
    bool counted; /* counts toward max_connections */
    bool reading;
    bool read_paused; /* reading was stopped by the global pause (memory limiter) */
    bool lingering;   /* final response written; draining input until close */
    bool closing;

    pc_tls_conn *tls; /* NULL: plain text */
};

struct pc_http_server {
    uv_loop_t *loop;
    pc_listener *listener;
    uv_timer_t tick; /* writes the rate-limited log lines' summaries */
    pc_http_server_opts o;
    char *host, *log_id;
    pc_http_handler handler;
    void *arg;
    int port;
    conn *conns;
    conn *lru_head, *lru_tail;
    unsigned n_active;
    bool started, shutting_down;
    int closing_handles; /* listener and tick, during shutdown */
    void (*done)(void *arg);
    void *done_arg;
    pc_conn_stats own_stats, *st;
    /* per-connection lines a peer can trigger at will */
    pc_log_limiter refuse_log, evict_log, reject_log, tls_log;
    llhttp_settings_t settings;
    char rbuf[READ_CHUNK]; /* shared: the loop thread consumes each read before the next */
};

static void conn_process(conn *c);
static void conn_close(conn *c);

/* ---- small helpers ---- */

static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
    }
}

static void free_headers(pc_http_header *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(h[i].name);
        free(h[i].value);
    }
    free(h);
}

static void free_req(pc_http_req *r)
{
    if (!r) return;
    free(r->path);
    free(r->query);
    free_headers(r->headers, r->n_headers);
    free(r->body);
    free(r);
}

static void reset_parse_state(conn *c)
{
    c->url.len = c->field.len = c->value.len = 0;
    pc_buf_free(&c->body);
    free_headers(c->hdrs, c->n_hdrs);
    c->hdrs = NULL;
    c->n_hdrs = c->cap_hdrs = 0;
    c->head_bytes = 0;
    c->err_status = 0;
}

static void timer_arm(conn *c, timer_mode m, unsigned ms);

/* ---- refcounting and teardown ---- */

static void server_maybe_done(pc_http_server *s)
{
    if (!s->shutting_down || s->conns || s->closing_handles) return;
    void (*done)(void *) = s->done;
    void *arg = s->done_arg;
    PC_INFO(s->log_id, "server stopped");
    free(s->host);
    free(s->log_id);
    free(s);
    if (done) done(arg);
}

static void conn_free(conn *c)
{
    pc_http_server *s = c->s;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    reset_parse_state(c);
    pc_buf_free(&c->url);
    pc_buf_free(&c->field);
    pc_buf_free(&c->value);
    pc_buf_free(&c->in);
    free_req(c->ready);
    pc_tls_conn_free(c->tls);
    free(c);
    server_maybe_done(s);
}

static void conn_unref(conn *c)
{
    if (--c->refs == 0) conn_free(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    conn_unref(h->data);
}

/* ---- the eviction order (O(1) per change) ---- */

static void lru_remove(conn *c)
{
    if (!c->in_lru) return;
    pc_http_server *s = c->s;
    if (c->lru_prev)
        c->lru_prev->lru_next = c->lru_next;
    else
        s->lru_head = c->lru_next;
    if (c->lru_next)
        c->lru_next->lru_prev = c->lru_prev;
    else
        s->lru_tail = c->lru_prev;
    c->lru_prev = c->lru_next = NULL;
    c->in_lru = false;
}

/* (Re)insert a counted connection the handler does not hold: at the back (the newest), or at
 * the front for one that is done anyway (lingering after its last response). */
static void lru_insert(conn *c, bool front)
{
    if (!c->counted || c->closing) return;
    lru_remove(c);
    pc_http_server *s = c->s;
    c->in_lru = true;
    if (front) {
        c->lru_next = s->lru_head;
        if (s->lru_head)
            s->lru_head->lru_prev = c;
        else
            s->lru_tail = c;
        s->lru_head = c;
    } else {
        c->lru_prev = s->lru_tail;
        if (s->lru_tail)
            s->lru_tail->lru_next = c;
        else
            s->lru_head = c;
        s->lru_tail = c;
    }
}

static void conn_close(conn *c)
{
    if (c->closing) return;
    c->closing = true;
    lru_remove(c);
    if (c->counted) {
        c->counted = false;
        c->s->st->open = --c->s->n_active;
    }
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

/* ---- writing ---- */

typedef struct wreq {
    uv_write_t w;
    conn *c;
    write_kind kind;
    char data[];
} wreq;

static void start_linger(conn *c);
static void read_start(conn *c);

static void on_written(uv_write_t *w, int status)
{
    wreq *wr = (wreq *)w;
    conn *c = wr->c;
    write_kind kind = wr->kind;
    free(wr);
    if (status < 0 || c->closing) {
        conn_close(c);
    } else if (kind == W_FINAL) {
        if (c->s->shutting_down)
            conn_close(c);
        else
            start_linger(c);
    } else if (kind == W_RESPONSE) {
        if (c->s->shutting_down) {
            conn_close(c);
        } else {
            c->busy = false; /* the next pipelined request may be parsed now */
            lru_insert(c, false);
            read_start(c);
            conn_process(c);
        }
    }
    conn_unref(c);
}

static void tls_write(conn *c, pc_buf *head, const void *body, size_t len, write_kind kind);

static void conn_write(conn *c, pc_buf *head, const void *body, size_t len, write_kind kind)
{
    if (c->tls) {
        tls_write(c, head, body, len, kind);
        return;
    }
    wreq *wr = pc_xmalloc(sizeof *wr + head->len + len);
    wr->c = c;
    wr->kind = kind;
    memcpy(wr->data, head->data, head->len);
    if (len) memcpy(wr->data + head->len, body, len);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)(head->len + len));
    c->refs++;
    int rc = uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc < 0) {
        PC_DEBUG(c->s->log_id, "write to %s: %s", c->peer, uv_strerror(rc));
        free(wr);
        conn_close(c);
        c->refs--; /* handles still hold references: never the last one */
        return;
    }
    /* a peer that stops reading must not pin the connection forever */
    if (kind != W_INTERIM) timer_arm(c, T_WRITE, c->s->o.idle_timeout_ms);
}

static void write_response(conn *c, const char *method, int status, const char *ctype,
                           const void *body, size_t len, const char *extra, bool close)
{
    pc_buf h = {0};
    pc_buf_printf(&h, "HTTP/1.1 %d %s\r\n", status, reason(status));
    bool no_body = status == 204 || status == 304 || (status >= 100 && status < 200);
    if (ctype && !no_body) pc_buf_printf(&h, "Content-Type: %s\r\n", ctype);
    if (!no_body) pc_buf_printf(&h, "Content-Length: %zu\r\n", len);
    if (close) pc_buf_append(&h, "Connection: close\r\n", 19);
    if (extra) pc_buf_append(&h, extra, strlen(extra));
    pc_buf_append(&h, "\r\n", 2);
    if (no_body || (method && strcmp(method, "HEAD") == 0)) len = 0;
    conn_write(c, &h, body, len, close ? W_FINAL : W_RESPONSE);
    pc_buf_free(&h);
}

/* Answer an error the server detects itself and close the connection afterwards. */
static void fail(conn *c, int status, const char *msg)
{
    if (status == 408 || status == 503)
        PC_DEBUG(c->s->log_id, "%s: %d %s", c->peer, status, msg);
    else
        PC_WARN_RATELIMITED(&c->s->reject_log, c->s->log_id, "rejecting request from %s: %d %s",
                            c->peer, status, msg);
    char body[160];
    int n = snprintf(body, sizeof body, "%s\n", msg);
    c->in_request = false;
    c->keep_alive = false;
    c->busy = true; /* parse nothing more */
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    write_response(c, NULL, status, "text/plain; charset=utf-8", body, (size_t)n, NULL, true);
}

/* ---- timers ---- */

static void on_timer(uv_timer_t *t)
{
    conn *c = t->data;
    if (c->closing) return;
    switch (c->tmode) {
    case T_HEADER:
        if (!c->busy)
            fail(c, 408,
                 c->s->o.read_header_timeout_ms < c->s->o.read_timeout_ms
                     ? "request header not received in time"
                     : "request not received in time");
        break;
    case T_READ:
        if (!c->busy) fail(c, 408, "request not received in time");
        break;
    case T_IDLE:
    case T_WRITE:
    case T_LINGER: conn_close(c); break;
    }
}

static void timer_arm(conn *c, timer_mode m, unsigned ms)
{
    if (c->closing) return;
    c->tmode = m;
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* ---- reading ---- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    conn *c = h->data;
    *buf = uv_buf_init(c->s->rbuf, sizeof c->s->rbuf);
}

static void tls_read(conn *c, const char *data, size_t n);

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = st->data;
    if (nread < 0) {
        if (nread != UV_EOF && !c->lingering)
            PC_DEBUG(c->s->log_id, "read from %s: %s", c->peer, uv_strerror((int)nread));
        else if (c->tls && !pc_tls_conn_established(c->tls) && !c->lingering)
            PC_DEBUG(c->s->log_id, "%s closed the connection during the TLS handshake", c->peer);
        /* EOF mid-request: the client gave up; nothing sensible to answer */
        conn_close(c);
        return;
    }
    if (nread == 0 || c->lingering) return; /* draining after a final response */
    if (c->tls) {
        tls_read(c, buf->base, (size_t)nread);
        return;
    }
    pc_buf_append(&c->in, buf->base, (size_t)nread);
    c->refs++; /* the handler may answer synchronously; keep c valid until we return */
    conn_process(c);
    conn_unref(c);
}

static void read_start(conn *c)
{
    if (c->reading || c->closing) return;
    if (pc_http_servers_paused()) { /* resumed by on_pause when memory falls */
        c->read_paused = true;
        return;
    }
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0) {
        conn_close(c);
        return;
    }
    c->reading = true;
}

static void on_shutdown(uv_shutdown_t *r, int status)
{
    (void)status;
    conn_unref(r->data);
}

/* Half-close and drain: closing with unread input would make the kernel send RST, and the
 * client could lose the error response we just wrote (a 413 while it is still uploading). */
static void start_linger(conn *c)
{
    c->lingering = true;
    lru_insert(c, true); /* done: the first to go when room is needed */
    c->in.len = c->in_off = 0;
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shutdown) == 0) c->refs++;
    read_start(c);
    unsigned ms = c->s->o.read_timeout_ms < LINGER_MS ? c->s->o.read_timeout_ms : LINGER_MS;
    timer_arm(c, T_LINGER, ms);
}

/* ---- llhttp callbacks ---- */

static int head_add(conn *c, size_t n)
{
    c->head_bytes += n;
    if (c->head_bytes <= c->s->o.max_header_bytes) return HPE_OK;
    c->err_status = 431;
    return HPE_USER;
}

static int on_message_begin(llhttp_t *p)
{
    conn *c = p->data;
    reset_parse_state(c);
    c->in_request = true;
    /* both from the request's first byte: the head within read_header_timeout, the whole
     * request within read_timeout */
    c->req_start = uv_now(c->s->loop);
    const pc_http_server_opts *o = &c->s->o;
    timer_arm(c, T_HEADER,
              o->read_header_timeout_ms < o->read_timeout_ms ? o->read_header_timeout_ms
                                                             : o->read_timeout_ms);
    return HPE_OK;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    conn *c = p->data;
    if (head_add(c, n)) return HPE_USER;
    pc_buf_append(&c->url, at, n);
    return HPE_OK;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    conn *c = p->data;
    if (head_add(c, n)) return HPE_USER;
    pc_buf_append(&c->field, at, n);
    return HPE_OK;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    conn *c = p->data;
    if (head_add(c, n)) return HPE_USER;
    pc_buf_append(&c->value, at, n);
    return HPE_OK;
}

static int on_header_value_complete(llhttp_t *p)
{
    conn *c = p->data;
    if (head_add(c, 4)) return HPE_USER; /* ": " and CRLF, so many empty headers count too */
    if (c->n_hdrs == c->cap_hdrs) {
        c->cap_hdrs = c->cap_hdrs ? c->cap_hdrs * 2 : 16;
        c->hdrs = pc_xrealloc(c->hdrs, c->cap_hdrs * sizeof *c->hdrs);
    }
    pc_http_header *h = &c->hdrs[c->n_hdrs++];
    h->name = pc_xstrdup(c->field.len ? (char *)c->field.data : "");
    for (char *q = h->name; *q; q++)
        *q = (char)tolower((unsigned char)*q);
    h->value = pc_xstrdup(c->value.len ? (char *)c->value.data : "");
    c->field.len = c->value.len = 0;
    return HPE_OK;
}

static const char *find_header(pc_http_header *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(h[i].name, name) == 0) return h[i].value;
    return NULL;
}

static int on_headers_complete(llhttp_t *p)
{
    conn *c = p->data;
    c->keep_alive = llhttp_should_keep_alive(p) && !p->upgrade;
    /* refuse an oversized body before reading it */
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->s->o.max_body_bytes) {
        c->err_status = 413;
        return -1;
    }
    /* preallocate, but not so much that idle slow uploads pin max_body_bytes each */
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0)
        pc_buf_reserve(
            &c->body,
            (p->content_length < (1u << 20) ? (size_t)p->content_length : (size_t)1 << 20) + 1);
    uint64_t spent = uv_now(c->s->loop) - c->req_start;
    unsigned left =
        spent < c->s->o.read_timeout_ms ? (unsigned)(c->s->o.read_timeout_ms - spent) : 1;
    timer_arm(c, T_READ, left); /* the head is in; the body has what is left of read_timeout */
    const char *expect = find_header(c->hdrs, c->n_hdrs, "expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 && p->http_minor >= 1) {
        pc_buf h = {0};
        pc_buf_append(&h, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        conn_write(c, &h, NULL, 0, W_INTERIM);
        pc_buf_free(&h);
    }
    return HPE_OK;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    conn *c = p->data;
    if (c->body.len + n > c->s->o.max_body_bytes) { /* chunked bodies have no length up front */
        c->err_status = 413;
        return HPE_USER;
    }
    pc_buf_append(&c->body, at, n);
    return HPE_OK;
}

static pc_http_req *build_req(conn *c)
{
    pc_http_req *r = pc_xcalloc(1, sizeof *r);
    snprintf(r->method, sizeof r->method, "%s",
             llhttp_method_name((llhttp_method_t)llhttp_get_method(&c->parser)));
    const char *url = c->url.len ? (const char *)c->url.data : "/";
    const char *q = strchr(url, '?');
    r->path = q ? strndup(url, (size_t)(q - url)) : pc_xstrdup(url);
    if (!r->path) abort();
    r->query = pc_xstrdup(q ? q + 1 : "");
    r->headers = c->hdrs;
    r->n_headers = c->n_hdrs;
    c->hdrs = NULL;
    c->n_hdrs = c->cap_hdrs = 0;
    if (!c->body.data) pc_buf_reserve(&c->body, 1);
    c->body.data[c->body.len] = 0;
    r->body = c->body.data;
    r->body_len = c->body.len;
    c->body = (pc_buf){0};
    snprintf(r->peer, sizeof r->peer, "%s", c->peer);
    r->conn_ = c;
    return r;
}

static int on_message_complete(llhttp_t *p)
{
    conn *c = p->data;
    c->ready = build_req(c);
    return HPE_PAUSED; /* stop here: the next pipelined request waits for this response */
}

/* ---- the request loop ---- */

static void dispatch(conn *c)
{
    pc_http_req *r = c->ready;
    c->ready = NULL;
    c->in_request = false;
    c->busy = true;
    lru_remove(c); /* busy with a complete request: never evicted */
    c->refs++;     /* held by r until pc_http_respond */
    uv_timer_stop(&c->timer);
    if (c->reading) { /* backpressure: a pipelining client waits in its socket buffer */
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    c->s->handler(r, c->s->arg);
}

static const char *parse_error_msg(int status)
{
    switch (status) {
    case 413: return "request body too large";
    case 431: return "request header too large";
    default: return "malformed request";
    }
}

static void conn_process(conn *c)
{
    while (!c->busy && !c->closing && !c->lingering && c->in_off < c->in.len) {
        const char *data = (const char *)c->in.data + c->in_off;
        size_t n = c->in.len - c->in_off;
        llhttp_errno_t e = llhttp_execute(&c->parser, data, n);
        if (e == HPE_OK) {
            c->in_off = c->in.len;
        } else if ((e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) && c->ready) {
            c->in_off += (size_t)(llhttp_get_error_pos(&c->parser) - data);
            if (e == HPE_PAUSED)
                llhttp_resume(&c->parser);
            else
                c->keep_alive = false; /* we do not speak upgraded protocols */
            dispatch(c);
        } else {
            int st = c->err_status ? c->err_status : 400;
            if (st == 400)
                PC_DEBUG(c->s->log_id, "parse error from %s: %s (%s)", c->peer,
                         llhttp_errno_name(e), llhttp_get_error_reason(&c->parser));
            fail(c, st, parse_error_msg(st));
            return;
        }
    }
    if (c->closing || c->lingering) return;
    if (c->in_off == c->in.len) { /* all parsed: drop big buffers of idle connections */
        c->in.len = c->in_off = 0;
        if (c->in.cap > READ_CHUNK) pc_buf_free(&c->in);
    }
    if (!c->busy && !c->in_request) timer_arm(c, T_IDLE, c->s->o.idle_timeout_ms);
}

/* ---- TLS (only when the server has a context; the plain path above never comes here) ---- */

/* Send whatever ciphertext waits (handshake flights, records, alerts) as one write. */
static void tls_flush(conn *c, write_kind kind)
{
    size_t n = pc_tls_conn_pending(c->tls);
    if (!n || c->closing) return;
    wreq *wr = pc_xmalloc(sizeof *wr + n);
    wr->c = c;
    wr->kind = kind;
    n = pc_tls_conn_take(c->tls, wr->data, n);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)n);
    c->refs++;
    int rc = uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc < 0) {
        PC_DEBUG(c->s->log_id, "write to %s: %s", c->peer, uv_strerror(rc));
        free(wr);
        conn_close(c);
        c->refs--; /* handles still hold references: never the last one */
        return;
    }
    if (kind != W_INTERIM) timer_arm(c, T_WRITE, c->s->o.idle_timeout_ms);
}

static void tls_write(conn *c, pc_buf *head, const void *body, size_t len, write_kind kind)
{
    if (pc_tls_conn_write(c->tls, head->data, head->len) ||
        (len && pc_tls_conn_write(c->tls, body, len))) {
        PC_WARN_RATELIMITED(&c->s->tls_log, c->s->log_id, "TLS write to %s: %s", c->peer,
                            pc_tls_conn_error(c->tls));
        conn_close(c);
        return;
    }
    if (kind == W_FINAL) pc_tls_conn_shutdown(c->tls); /* close_notify after the last response */
    tls_flush(c, kind);
}

/* The handshake failed: send the alert OpenSSL prepared, then close. */
static void tls_fail(conn *c)
{
    PC_WARN_RATELIMITED(&c->s->tls_log, c->s->log_id, "TLS handshake with %s failed: %s", c->peer,
                        pc_tls_conn_error(c->tls));
    c->in_request = false;
    c->keep_alive = false;
    c->busy = true;
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    if (pc_tls_conn_pending(c->tls))
        tls_flush(c, W_FINAL);
    else
        conn_close(c);
}

static void tls_read(conn *c, const char *data, size_t n)
{
    pc_tls_conn_feed(c->tls, data, n);
    c->refs++; /* the handler may answer synchronously; keep c valid until we return */
    if (!pc_tls_conn_established(c->tls)) {
        int rc = pc_tls_conn_handshake(c->tls);
        if (rc == PC_TLS_ERROR) {
            tls_fail(c);
            goto out;
        }
        tls_flush(c, W_INTERIM);
        if (rc == PC_TLS_WANT) goto out;
    }
    int rc = pc_tls_conn_read(c->tls, &c->in);
    tls_flush(c, W_INTERIM); /* e.g. TLS 1.3 session tickets */
    if (rc == PC_TLS_ERROR) {
        PC_DEBUG(c->s->log_id, "TLS read from %s: %s", c->peer, pc_tls_conn_error(c->tls));
        conn_close(c);
        goto out;
    }
    conn_process(c);
    /* close_notify: the client sends nothing more; an answer in progress still goes out */
    if (rc == PC_TLS_CLOSED && !c->busy && !c->closing && !c->lingering) conn_close(c);
out:
    conn_unref(c);
}

/* ---- accepting ---- */

static const char *conn_state(const conn *c)
{
    if (c->lingering) return "closing";
    if (c->in_request) return "request incomplete";
    return "idle";
}

/* Close the connection idle or incomplete longest (never one whose request the handler holds):
 * a client that opens connections and sends nothing, or too little, cannot lock others out. */
static bool evict_one(pc_http_server *s, const char *why, const char *for_peer)
{
    conn *v = s->lru_head;
    if (!v) return false;
    s->st->evicted++;
    PC_WARN_RATELIMITED(&s->evict_log, s->log_id,
                        "%s: closed %s (%s, the longest) to make room for %s", why, v->peer,
                        conn_state(v), for_peer);
    conn_close(v);
    return true;
}

/* The listener is out of descriptors. */
static int make_room(void *arg)
{
    return evict_one(arg, "out of file descriptors", "a new connection");
}

static void on_accept(void *arg, uv_os_sock_t fd)
{
    pc_http_server *s = arg;
    conn *c = pc_xcalloc(1, sizeof *c);
    c->s = s;
    c->refs = 2; /* tcp and timer handles */
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    int rc = uv_tcp_open(&c->tcp, fd);
    if (rc < 0) {
        close(fd);
        s->st->accept_errors++;
        PC_ERROR_RATELIMITED(&s->refuse_log, s->log_id, "accept: %s", uv_strerror(rc));
        conn_close(c);
        return;
    }
    pc_tcp_peer_name(&c->tcp, c->peer, sizeof c->peer);
    uv_tcp_nodelay(&c->tcp, 1);
    if (s->n_active >= s->o.max_connections) {
        char why[64];
        snprintf(why, sizeof why, "connection limit %u reached", s->o.max_connections);
        if (!evict_one(s, why, c->peer)) {
            s->st->refused++;
            PC_WARN_RATELIMITED(&s->refuse_log, s->log_id,
                                "connection limit %u reached, every connection busy with a "
                                "request: refusing %s",
                                s->o.max_connections, c->peer);
            if (s->o.tls) /* a 503 in plain text means nothing to a TLS client */
                conn_close(c);
            else
                fail(c, 503, "too many connections");
            return;
        }
    }
    s->st->open = ++s->n_active;
    c->counted = true;
    lru_insert(c, false);
    if (s->o.tls) c->tls = pc_tls_conn_new(s->o.tls, NULL);
    llhttp_init(&c->parser, HTTP_REQUEST, &s->settings);
    c->parser.data = c;
    read_start(c);
    /* a connection that never sends a byte (or never finishes its TLS handshake) is dropped
     * like an idle one, but as soon as a slow request head would be */
    unsigned ms =
        s->o.read_timeout_ms < s->o.idle_timeout_ms ? s->o.read_timeout_ms : s->o.idle_timeout_ms;
    if (s->o.read_header_timeout_ms < ms) ms = s->o.read_header_timeout_ms;
    timer_arm(c, T_IDLE, ms);
}

static void flush_logs(pc_http_server *s)
{
    pc_log_limiter_flush(&s->refuse_log, PC_LOG_WARN, s->log_id,
                         "connections refused (limit reached, every connection busy)");
    pc_log_limiter_flush(&s->evict_log, PC_LOG_WARN, s->log_id, "connections closed to make room");
    pc_log_limiter_flush(&s->reject_log, PC_LOG_WARN, s->log_id, "requests rejected");
    pc_log_limiter_flush(&s->tls_log, PC_LOG_WARN, s->log_id, "TLS failures");
}

static void on_tick(uv_timer_t *t)
{
    flush_logs(t->data);
}

/* ---- public API ---- */

pc_http_server *pc_http_server_new(uv_loop_t *loop, const pc_http_server_opts *opts,
                                   pc_http_handler handler, void *arg)
{
    pc_http_server *s = pc_xcalloc(1, sizeof *s);
    s->loop = loop;
    s->o = *opts;
    s->host = pc_xstrdup(opts->host && opts->host[0] ? opts->host : "localhost");
    s->log_id = pc_xstrdup(opts->log_id ? opts->log_id : "http");
    s->o.host = s->host;
    s->o.log_id = s->log_id;
    if (!s->o.max_body_bytes) s->o.max_body_bytes = 20u << 20;
    if (!s->o.max_header_bytes) s->o.max_header_bytes = 64u << 10;
    if (!s->o.read_timeout_ms) s->o.read_timeout_ms = 30000;
    if (!s->o.idle_timeout_ms) s->o.idle_timeout_ms = 60000;
    if (!s->o.read_header_timeout_ms) s->o.read_header_timeout_ms = 10000;
    if (!s->o.max_connections) s->o.max_connections = 1024;
    s->st = s->o.stats ? s->o.stats : &s->own_stats;
    s->handler = handler;
    s->arg = arg;
    uv_timer_init(loop, &s->tick);
    s->tick.data = s;
    llhttp_settings_init(&s->settings);
    s->settings.on_message_begin = on_message_begin;
    s->settings.on_url = on_url;
    s->settings.on_header_field = on_header_field;
    s->settings.on_header_value = on_header_value;
    s->settings.on_header_value_complete = on_header_value_complete;
    s->settings.on_headers_complete = on_headers_complete;
    s->settings.on_body = on_body;
    s->settings.on_message_complete = on_message_complete;
    return s;
}

/* "localhost" means the IPv4 loopback: predictable, and what clients reach first in practice. */
/* The memory limiter's global pause: stop reading every connection, or resume them. */
static void on_pause(void *arg, int paused)
{
    pc_http_server *s = arg;
    for (conn *c = s->conns; c; c = c->next) {
        if (paused && c->reading) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = false;
            c->read_paused = true;
        } else if (!paused && c->read_paused) {
            c->read_paused = false;
            read_start(c);
        }
    }
}

int pc_http_server_start(pc_http_server *s, char *err, size_t errlen)
{
    if (s->started || s->shutting_down) {
        snprintf(err, errlen, "listen %s:%d: server already started", s->host, s->o.port);
        return -1;
    }
    char bound[80];
    pc_listener_opts lo = {.host = s->host,
                           .port = s->o.port,
                           .log_id = s->log_id,
                           .on_accept = on_accept,
                           .make_room = make_room,
                           .arg = s,
                           .stats = s->st};
    s->listener = pc_listener_start(s->loop, &lo, &s->port, bound, sizeof bound, err, errlen);
    if (!s->listener) return -1;
    s->started = true;
    uv_timer_start(&s->tick, on_tick, LOG_TICK_MS, LOG_TICK_MS);
    uv_unref((uv_handle_t *)&s->tick);
    pc_http_pause_register(on_pause, s);
    PC_INFO(s->log_id, "listening on %s://%s", s->o.tls ? "https" : "http", bound);
    return 0;
}

int pc_http_server_port(const pc_http_server *s)
{
    return s->port;
}

static void on_listener_closed(void *arg)
{
    pc_http_server *s = arg;
    s->closing_handles--;
    server_maybe_done(s);
}

static void on_tick_closed(uv_handle_t *h)
{
    on_listener_closed(h->data);
}

void pc_http_server_shutdown(pc_http_server *s, void (*done)(void *arg), void *arg)
{
    if (s->shutting_down) return;
    s->shutting_down = true;
    pc_http_pause_unregister(s);
    s->done = done;
    s->done_arg = arg;
    /* busy connections close once their response is written (with Connection: close) */
    flush_logs(s);
    for (conn *c = s->conns; c; c = c->next)
        if (!c->busy || c->lingering) conn_close(c);
    /* both counted before either closes */
    s->closing_handles = 1 + (s->listener != NULL);
    uv_close((uv_handle_t *)&s->tick, on_tick_closed);
    if (s->listener) pc_listener_close(s->listener, on_listener_closed, s);
}

/* ---- request helpers and responding ---- */

const char *pc_http_req_header(const pc_http_req *req, const char *name)
{
    return find_header(req->headers, req->n_headers, name);
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* application/x-www-form-urlencoded decoding; a malformed escape is kept literally */
static char *url_decode(const char *s, size_t n)
{
    char *out = pc_xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '+') {
            *o++ = ' ';
        } else if (s[i] == '%' && i + 2 < n && (hi = hexval((unsigned char)s[i + 1])) >= 0 &&
                   (lo = hexval((unsigned char)s[i + 2])) >= 0) {
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = 0;
    return out;
}

char *pc_http_req_query(const pc_http_req *req, const char *name)
{
    const char *p = req->query ? req->query : "";
    while (*p) {
        size_t n = strcspn(p, "&");
        const char *eq = memchr(p, '=', n);
        size_t kn = eq ? (size_t)(eq - p) : n;
        char *key = url_decode(p, kn);
        int match = strcmp(key, name) == 0;
        free(key);
        if (match) return eq ? url_decode(eq + 1, n - kn - 1) : pc_xstrdup("");
        p += n;
        if (*p == '&') p++;
    }
    return NULL;
}

void pc_http_respond(pc_http_req *req, int status, const char *content_type, const void *body,
                     size_t len, const char *extra_headers)
{
    conn *c = req->conn_;
    if (!c->closing) { /* else the client went away: drop the answer */
        bool close = !c->keep_alive || c->s->shutting_down;
        write_response(c, req->method, status, content_type, body, len, extra_headers, close);
    }
    free_req(req);
    conn_unref(c);
}
