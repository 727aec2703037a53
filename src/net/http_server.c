/* The one HTTP/1.1 server (ARCHITECTURE.md §6): llhttp for parsing, on the connection core
 * (net/conn_server.h) for sockets, TLS, limits and timeouts.
 *
 * A connection parses one request at a time. When a request is complete the parser pauses and
 * the handler owns the request until pc_http_respond; only after that response is written does
 * parsing continue with any bytes already buffered. The connection reads on meanwhile (a client
 * that waits for its answer sends nothing, and stopping and restarting reads cost two epoll_ctl
 * calls a request: bench/README.md "Small requests, fifth pass") until bytes of a next request
 * arrive; then it stops reading. That keeps pipelined requests in order and bounds what one
 * connection can make us buffer to a read beyond its request.
 *
 * Lifetimes: the request the handler owns holds a reference on its connection, so
 * pc_http_respond is safe after the peer went away. */
#include "net/http_server.h"

#include <ctype.h>
#include <llhttp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/log.h"
#include "net/conn_server.h"
#include "net/http_field.h"
#include "base/hex.h"

enum {
    LINGER_MS = 2000, /* how long we drain input after a final response */
    W_RESPONSE = 1,   /* the tag of a keep-alive response's write (interim and final ones: 0) */
};

typedef struct conn {
    pc_conn base; /* first: the core's connection */
    llhttp_t parser;
    pc_buf in; /* received, not yet parsed (only non-empty while a request is handled) */
    size_t in_off;
    /* the request being parsed */
    bool in_request;
    bool in_head; /* its head is not complete: the header deadline runs, not the body's */
    /* url, the header being read, and the body: the connection's, reused from one request to
     * the next (a request's body stays valid until it is answered: its req holds c) */
    pc_buf url, body;
    pc_http_field field;
    pc_buf hbytes; /* the headers so far: lower-cased name, NUL, value, NUL; n_hdrs of them */
    size_t n_hdrs;
    size_t head_bytes;
    uint64_t req_start; /* when the request's first byte was parsed (read_timeout runs from it) */
    int err_status;     /* set by a callback that rejects the request (413, 431) */
    bool keep_alive;
    pc_http_req *ready; /* complete, waiting to be dispatched after llhttp_execute returns */
    bool busy;          /* the handler owns a request, or its response is being written */
} conn;

struct pc_http_server {
    pc_conn_server *core;
    pc_http_server_opts o;
    const char *log_id; /* the core's */
    pc_http_handler handler;
    void *arg;
    pc_log_limiter *reject_log; /* per-request lines a peer can trigger at will */
};

static pc_http_server *srv(const conn *c)
{
    return c->base.env->user;
}

static void conn_process(conn *c);

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

/* A request is one block (build_req); its body is its connection's. */
static void free_req(pc_http_req *r)
{
    free(r);
}

/* What a connection keeps between requests, at most per buffer: a small request's buffers are
 * reused (no malloc or free per request, bench/README.md "Small requests, fifth pass"), a large
 * one's given back. */
enum { KEEP_BYTES = 16384 };

static void keep_small(pc_buf *b)
{
    b->len = 0;
    if (b->cap > KEEP_BYTES) pc_buf_free(b);
}

static void reset_parse_state(conn *c)
{
    c->url.len = 0;
    pc_http_field_clear(&c->field);
    keep_small(&c->body);
    keep_small(&c->hbytes);
    c->n_hdrs = 0;
    c->head_bytes = 0;
    c->err_status = 0;
}

/* ---- writing and timers ---- */

/* s into the head at *n (write_response sized it). */
static void put(char *h, size_t *n, const char *s, size_t len)
{
    memcpy(h + *n, s, len);
    *n += len;
}

static void write_response(conn *c, const char *method, int status, const char *ctype,
                           const void *body, size_t len, const char *extra, bool close)
{
    /* on the stack unless the extra headers are long: this runs for every request, and the
     * write copies only what the socket does not take at once (bench/README.md "Small requests") */
    const char *why = reason(status);
    size_t cl = ctype ? strlen(ctype) : 0, el = extra ? strlen(extra) : 0;
    size_t cap = 9 + 24 + strlen(why) + 2 + 14 + cl + 2 + 16 + 24 + 2 + 19 + el + 2;
    char stack[512], *h = cap <= sizeof stack ? stack : pc_xmalloc(cap), num[24];
    size_t n = 0;
    put(h, &n, "HTTP/1.1 ", 9);
    put(h, &n, num, pc_fmt_u64(num, (uint64_t)(status < 0 ? 0 : status)));
    put(h, &n, " ", 1);
    put(h, &n, why, strlen(why));
    put(h, &n, "\r\n", 2);
    bool no_body = status == 204 || status == 304 || (status >= 100 && status < 200);
    if (ctype && !no_body) {
        put(h, &n, "Content-Type: ", 14);
        put(h, &n, ctype, cl);
        put(h, &n, "\r\n", 2);
    }
    if (!no_body) {
        put(h, &n, "Content-Length: ", 16);
        put(h, &n, num, pc_fmt_u64(num, len));
        put(h, &n, "\r\n", 2);
    }
    if (close) put(h, &n, "Connection: close\r\n", 19);
    if (el) put(h, &n, extra, el);
    put(h, &n, "\r\n", 2);
    if (no_body || (method && strcmp(method, "HEAD") == 0)) len = 0;
    pc_conn_write(&c->base, h, n, body, len, close ? 0 : W_RESPONSE);
    if (close) pc_conn_finish(&c->base, true); /* TLS: close_notify after the last response */
    if (h != stack) free(h);
}

/* Answer an error the server detects itself and close the connection afterwards. */
static void fail(conn *c, int status, const char *msg)
{
    pc_http_server *s = srv(c);
    if (status == 408 || status == 503)
        PC_DEBUG(s->log_id, "%s: %d %s", c->base.peer, status, msg);
    else
        PC_WARN_RATELIMITED(s->reject_log, s->log_id, "rejecting request from %s: %d %s",
                            c->base.peer, status, msg);
    char body[160];
    int n = snprintf(body, sizeof body, "%s\n", msg);
    c->in_request = false;
    c->keep_alive = false;
    c->busy = true; /* parse nothing more */
    pc_conn_timer(&c->base, 0);
    write_response(c, NULL, status, "text/plain; charset=utf-8", body, (size_t)n, NULL, true);
}

/* The request's deadline, ms from now. */
static void deadline(conn *c, unsigned ms)
{
    pc_conn_timer(&c->base, uv_now(c->base.env->loop) + ms);
}

static void on_timeout(pc_conn *pc)
{
    conn *c = (conn *)pc;
    const pc_http_server_opts *o = &srv(c)->o;
    if (c->busy) return;
    fail(c, 408,
         c->in_head && o->read_header_timeout_ms < o->read_timeout_ms
             ? "request header not received in time"
             : "request not received in time");
}

/* ---- llhttp callbacks ---- */

static int head_add(conn *c, size_t n)
{
    c->head_bytes += n;
    if (c->head_bytes <= srv(c)->o.max_header_bytes) return HPE_OK;
    c->err_status = 431;
    return HPE_USER;
}

static int on_message_begin(llhttp_t *p)
{
    conn *c = p->data;
    reset_parse_state(c);
    c->in_request = c->in_head = true;
    pc_conn_idle(&c->base, false);
    /* both from the request's first byte: the head within read_header_timeout, the whole
     * request within read_timeout */
    c->req_start = uv_now(c->base.env->loop);
    const pc_http_server_opts *o = &srv(c)->o;
    deadline(c, o->read_header_timeout_ms < o->read_timeout_ms ? o->read_header_timeout_ms
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
    pc_http_field_name(&c->field, at, n);
    return HPE_OK;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    conn *c = p->data;
    if (head_add(c, n)) return HPE_USER;
    pc_http_field_value(&c->field, at, n);
    return HPE_OK;
}

static int on_header_value_complete(llhttp_t *p)
{
    conn *c = p->data;
    if (head_add(c, 4)) return HPE_USER; /* ": " and CRLF, so many empty headers count too */
    size_t nl, vl;
    const char *name = pc_http_field_name_str(&c->field, &nl);
    const char *val = pc_http_field_value_str(&c->field, &vl);
    pc_buf_reserve(&c->hbytes, nl + vl + 2);
    char *o = (char *)c->hbytes.data + c->hbytes.len;
    for (size_t i = 0; i < nl; i++)
        o[i] = (char)tolower((unsigned char)name[i]);
    o[nl] = 0;
    if (vl) memcpy(o + nl + 1, val, vl);
    o[nl + 1 + vl] = 0;
    c->hbytes.len += nl + vl + 2;
    c->n_hdrs++;
    pc_http_field_clear(&c->field);
    return HPE_OK;
}

static const char *find_header(pc_http_header *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(h[i].name, name) == 0) return h[i].value;
    return NULL;
}

/* The value of header name in the headers read so far (hbytes), or NULL. */
static const char *head_header(const conn *c, const char *name)
{
    const char *p = (const char *)c->hbytes.data;
    for (size_t i = 0; i < c->n_hdrs; i++) {
        const char *v = p + strlen(p) + 1;
        if (strcasecmp(p, name) == 0) return v;
        p = v + strlen(v) + 1;
    }
    return NULL;
}

static int on_headers_complete(llhttp_t *p)
{
    conn *c = p->data;
    c->keep_alive = llhttp_should_keep_alive(p) && !p->upgrade;
    /* refuse an oversized body before reading it */
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > srv(c)->o.max_body_bytes) {
        c->err_status = 413;
        return -1;
    }
    /* preallocate, but not so much that idle slow uploads pin max_body_bytes each */
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0)
        pc_buf_reserve(
            &c->body,
            (p->content_length < (1u << 20) ? (size_t)p->content_length : (size_t)1 << 20) + 1);
    const pc_http_server_opts *o = &srv(c)->o;
    uint64_t spent = uv_now(c->base.env->loop) - c->req_start;
    unsigned left = spent < o->read_timeout_ms ? (unsigned)(o->read_timeout_ms - spent) : 1;
    c->in_head = false;
    deadline(c, left); /* the head is in; the body has what is left of read_timeout */
    const char *expect = head_header(c, "expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 && p->http_minor >= 1)
        pc_conn_write(&c->base, "HTTP/1.1 100 Continue\r\n\r\n", 25, NULL, 0, 0);
    return HPE_OK;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    conn *c = p->data;
    if (c->body.len + n > srv(c)->o.max_body_bytes) { /* chunked bodies have no length up front */
        c->err_status = 413;
        return HPE_USER;
    }
    pc_buf_append(&c->body, at, n);
    return HPE_OK;
}

/* The request as one block: the struct, its header array, the headers' bytes, path and query.
 * The body stays the connection's. */
static pc_http_req *build_req(conn *c)
{
    const char *url = c->url.len ? (const char *)c->url.data : "/";
    const char *q = strchr(url, '?');
    size_t pl = q ? (size_t)(q - url) : strlen(url), ql = q ? strlen(q + 1) : 0;
    size_t harr = c->n_hdrs * sizeof(pc_http_header);
    pc_http_req *r = pc_xmalloc(sizeof *r + harr + c->hbytes.len + pl + ql + 2);
    memset(r, 0, sizeof *r);
    pc_str_copy(r->method, sizeof r->method,
                llhttp_method_name((llhttp_method_t)llhttp_get_method(&c->parser)));
    r->headers = (pc_http_header *)(r + 1);
    r->n_headers = c->n_hdrs;
    char *p = (char *)(r + 1) + harr;
    if (c->hbytes.len) memcpy(p, c->hbytes.data, c->hbytes.len);
    for (size_t i = 0; i < c->n_hdrs; i++) {
        r->headers[i].name = p;
        p += strlen(p) + 1;
        r->headers[i].value = p;
        p += strlen(p) + 1;
    }
    r->path = p;
    memcpy(p, url, pl);
    p[pl] = 0;
    r->query = p + pl + 1;
    if (ql) memcpy(r->query, q + 1, ql);
    r->query[ql] = 0;
    pc_buf_reserve(&c->body, 1);
    c->body.data[c->body.len] = 0;
    r->body = c->body.data;
    r->body_len = c->body.len;
    pc_str_copy(r->peer, sizeof r->peer, c->base.peer);
    r->conn_ = c;
    return r;
}

static int on_message_complete(llhttp_t *p)
{
    conn *c = p->data;
    c->ready = build_req(c);
    return HPE_PAUSED; /* stop here: the next pipelined request waits for this response */
}

/* the parser's callbacks: one table for every connection */
static const llhttp_settings_t parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- the request loop ---- */

static void dispatch(conn *c)
{
    pc_http_server *s = srv(c);
    pc_http_req *r = c->ready;
    c->ready = NULL;
    c->in_request = false;
    c->busy = true;
    pc_conn_busy(&c->base, true); /* busy with a complete request: never evicted */
    pc_conn_ref(&c->base);        /* held by r until pc_http_respond */
    pc_conn_timer(&c->base, 0);
    s->handler(r, s->arg);
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
    while (!c->busy && !c->base.finishing && !c->base.closing && c->in_off < c->in.len) {
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
            if ((st == 413 || st == 431) && srv(c)->o.too_large) (*srv(c)->o.too_large)++;
            if (st == 400)
                PC_DEBUG(srv(c)->log_id, "parse error from %s: %s (%s)", c->base.peer,
                         llhttp_errno_name(e), llhttp_get_error_reason(&c->parser));
            fail(c, st, parse_error_msg(st));
            return;
        }
    }
    if (c->base.finishing || c->base.closing) return;
    if (c->in_off == c->in.len) { /* all parsed: drop big buffers of idle connections */
        c->in.len = c->in_off = 0;
        if (c->in.cap > PC_CONN_READ_CHUNK) pc_buf_free(&c->in);
    }
    if (!c->busy && !c->in_request) pc_conn_idle(&c->base, true);
}

/* ---- the core's callbacks ---- */

static int conn_open(pc_conn *pc)
{
    conn *c = (conn *)pc;
    llhttp_init(&c->parser, HTTP_REQUEST, &parser_settings);
    c->parser.data = c;
    return 0;
}

static void conn_data(pc_conn *pc, const uint8_t *p, size_t n)
{
    conn *c = (conn *)pc;
    pc_conn_spoke(pc);
    if (n) pc_buf_append(&c->in, p, n);
    conn_process(c);
    /* backpressure: a pipelining client's next request waits in its socket */
    if (c->busy && c->in_off < c->in.len) pc_conn_read(pc, false);
}

/* TLS close_notify: the client sends nothing more; an answer in progress still goes out. */
static void conn_peer_done(pc_conn *pc)
{
    if (!((conn *)pc)->busy) pc_conn_close(pc);
}

static void conn_written(pc_conn *pc, int tag)
{
    conn *c = (conn *)pc;
    if (tag != W_RESPONSE) return;
    if (pc->env->stopping) {
        pc_conn_close(pc);
        return;
    }
    c->busy = false; /* the next pipelined request may be parsed now */
    pc_conn_busy(pc, false);
    pc_conn_read(pc, true);
    conn_process(c);
}

/* Over the limit with every connection busy: a 503 (a TLS client would not understand it). */
static void conn_refuse(pc_conn *pc)
{
    if (!srv((conn *)pc)->o.tls) fail((conn *)pc, 503, "too many connections");
}

static const char *conn_state(const pc_conn *pc)
{
    return ((const conn *)pc)->in_request ? "request incomplete" : "idle";
}

/* Shutdown: busy connections close once their response is written (with Connection: close). */
static void conn_shutdown(pc_conn *pc)
{
    if (!((conn *)pc)->busy) pc_conn_close(pc);
}

static void conn_free(pc_conn *pc)
{
    conn *c = (conn *)pc;
    pc_buf_free(&c->url);
    pc_http_field_free(&c->field);
    pc_buf_free(&c->body);
    pc_buf_free(&c->hbytes);
    pc_buf_free(&c->in);
    free_req(c->ready);
}

static void server_stopped(void *arg)
{
    pc_http_server *s = arg;
    PC_INFO(s->log_id, "server stopped");
    free(s);
}

static const pc_conn_proto http_proto = {
    .conn_size = sizeof(conn),
    .open = conn_open,
    .refuse = conn_refuse,
    .data = conn_data,
    .peer_done = conn_peer_done,
    .eof_while_busy = true,
    .written = conn_written,
    .timeout = on_timeout,
    .state = conn_state,
    .shutdown = conn_shutdown,
    .free = conn_free,
    .stopped = server_stopped,
};

/* ---- public API ---- */

pc_http_server *pc_http_server_new(uv_loop_t *loop, const pc_http_server_opts *opts,
                                   pc_http_handler handler, void *arg)
{
    pc_http_server *s = pc_xcalloc(1, sizeof *s);
    s->o = *opts;
    s->o.host = NULL; /* the core keeps its own copies of both */
    s->o.log_id = NULL;
    if (!s->o.max_body_bytes) s->o.max_body_bytes = 20u << 20;
    if (!s->o.max_header_bytes) s->o.max_header_bytes = 64u << 10;
    if (!s->o.read_timeout_ms) s->o.read_timeout_ms = 30000;
    if (!s->o.idle_timeout_ms) s->o.idle_timeout_ms = 60000;
    if (!s->o.read_header_timeout_ms) s->o.read_header_timeout_ms = 10000;
    s->handler = handler;
    s->arg = arg;
    /* a connection that never sends a byte is dropped like an idle one, but as soon as a slow
     * request head would be */
    unsigned quiet =
        s->o.read_timeout_ms < s->o.idle_timeout_ms ? s->o.read_timeout_ms : s->o.idle_timeout_ms;
    if (s->o.read_header_timeout_ms < quiet) quiet = s->o.read_header_timeout_ms;
    pc_conn_server_opts co = {
        .host = opts->host,
        .port = opts->port,
        .log_id = opts->log_id ? opts->log_id : "http",
        .max_connections = opts->max_connections,
        .quiet_timeout_ms = quiet,
        .idle_timeout_ms = s->o.idle_timeout_ms,
        .write_timeout_ms = s->o.idle_timeout_ms,
        .linger_ms = s->o.read_timeout_ms < LINGER_MS ? s->o.read_timeout_ms : LINGER_MS,
        .tls = opts->tls,
        .stats = opts->stats,
        .pausable = true,
        .busy_with = "request",
    };
    s->core = pc_conn_server_new(loop, &co, &http_proto, s);
    s->log_id = pc_conn_server_log_id(s->core);
    s->reject_log = pc_conn_server_limiter(s->core, PC_LOG_WARN, "requests rejected");
    return s;
}

int pc_http_server_start(pc_http_server *s, pc_error *e)
{
    char bound[80];
    int rc = pc_conn_server_start(s->core, bound, sizeof bound, e);
    if (rc < 0) return rc;
    PC_INFO(s->log_id, "listening on %s://%s", s->o.tls ? "https" : "http", bound);
    return PC_OK;
}

int pc_http_server_port(const pc_http_server *s)
{
    return pc_conn_server_port(s->core);
}

void pc_http_server_shutdown(pc_http_server *s, void (*done)(void *arg), void *arg)
{
    pc_conn_server_shutdown(s->core, done, arg);
}

/* ---- request helpers and responding ---- */

const char *pc_http_req_header(const pc_http_req *req, const char *name)
{
    return find_header(req->headers, req->n_headers, name);
}

/* application/x-www-form-urlencoded decoding; a malformed escape is kept literally */
static char *url_decode(const char *s, size_t n)
{
    char *out = pc_xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '+') {
            *o++ = ' ';
        } else if (s[i] == '%' && i + 2 < n && (hi = pc_hexval((unsigned char)s[i + 1])) >= 0 &&
                   (lo = pc_hexval((unsigned char)s[i + 2])) >= 0) {
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
    if (!c->base.closing) { /* else the client went away: drop the answer */
        bool close = !c->keep_alive || c->base.env->stopping;
        write_response(c, req->method, status, content_type, body, len, extra_headers, close);
    }
    free_req(req);
    keep_small(&c->body); /* the request's body was the connection's: a large one goes now */
    pc_conn_unref(&c->base);
}

pc_http_server_opts pc_http_server_small_opts(const char *host, int port, const char *log_id)
{
    return (pc_http_server_opts){.host = host,
                                 .port = port,
                                 .max_body_bytes = 4096,
                                 .max_header_bytes = 16384,
                                 .read_timeout_ms = 10000,
                                 .idle_timeout_ms = 60000,
                                 .max_connections = 64,
                                 .log_id = log_id};
}
