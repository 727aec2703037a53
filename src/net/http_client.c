/* The one HTTP/1.1 client (ARCHITECTURE.md §6): a keep-alive pool to one endpoint, on the loop
 * thread.
 *
 * A request waits in a FIFO queue until a pooled connection is idle or a new one may be opened,
 * then owns that connection until its response is complete. Each request has its own timer,
 * started when it is submitted, so the timeout covers queueing, connect, send and response.
 *
 * A connection is a pc_conn of the connection core (net/conn.h), which does the socket, TLS and
 * writes; the client owns its connections (the env) and speaks HTTP/1.1 on them.
 *
 * Lifetimes: everything is freed from libuv close callbacks, never synchronously, so a response
 * callback may submit requests or close the client. The client itself is freed once every
 * connection, request and the resolver have finished ("live" counts them). */
#include "net/http_client.h"

#include <ctype.h>
#include <limits.h>
#include <llhttp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/log.h"
#include "net/conn.h"
#include "net/http_field.h"
#include "net/tls.h"

enum {
    BODY_CAP = 64 << 20, /* a response bigger than this is an error, not an allocation */
    DEFAULT_TIMEOUT_MS = 30000
};

typedef enum { ADDR_NONE, ADDR_RESOLVING, ADDR_OK } addr_state;

typedef struct creq creq;
typedef struct cconn cconn;

struct creq {
    creq *next; /* queue link */
    pc_http_client *c;
    cconn *conn; /* while assigned to a connection */
    uv_timer_t timer;
    int refs; /* the timer handle */
    pc_buf wire;
    char what[96]; /* "POST /v1/..." for messages */
    bool head, retried;
    unsigned timeout_ms;
    pc_http_response_cb cb;
    void *arg;
};

struct cconn {
    pc_conn base; /* first: the core's connection (in the client's env.conns) */
    pc_http_client *c;
    creq *req;
    llhttp_t parser;
    bool tcp_up;    /* connected (TLS may still be shaking hands) */
    bool connected; /* usable: connected, and with TLS the handshake done */
    bool reused, got_bytes, msg_done, keep_alive, too_large;
    pc_http_field field;
    pc_buf ctype, retry_after, body;
};

struct pc_http_client {
    pc_conn_env env; /* what its connections share (the read buffer among it) */
    uv_loop_t *loop;
    char *host, *log_id;
    int port;
    char where[300]; /* "host:port" for Host and messages */
    unsigned max_conns;
    size_t max_body; /* opts->max_body, or BODY_CAP */
    pc_tls_ctx *tls;
    struct sockaddr_storage addr;
    addr_state astate;
    bool host_is_name;
    uv_getaddrinfo_t gai;
    creq *qhead, *qtail;
    unsigned n_conns;
    size_t pending;
    int live;
    bool closing;
    uv_timer_t anchor; /* closed last, so done always runs from a callback */
    void (*done)(void *arg);
    void *done_arg;
};

static void pump(pc_http_client *c);

/* ---- client lifetime ---- */

static void maybe_done(pc_http_client *c)
{
    if (!c->closing || c->live > 0) return;
    void (*done)(void *) = c->done;
    void *arg = c->done_arg;
    free(c->host);
    free(c->log_id);
    free(c);
    if (done) done(arg);
}

static void live_dec(pc_http_client *c)
{
    c->live--;
    maybe_done(c);
}

/* ---- requests ---- */

static void creq_unref(creq *r)
{
    if (--r->refs > 0) return;
    pc_http_client *c = r->c;
    pc_buf_free(&r->wire);
    free(r);
    live_dec(c);
}

static void on_req_timer_closed(uv_handle_t *h)
{
    creq_unref(h->data);
}

/* Deliver the one callback of a request and release it. */
static void finish_req(creq *r, const pc_http_response *resp)
{
    pc_http_client *c = r->c;
    uv_timer_stop(&r->timer);
    c->pending--;
    r->cb(resp, r->arg);
    uv_close((uv_handle_t *)&r->timer, on_req_timer_closed);
}

static void fail_req(creq *r, int err, const char *msg)
{
    pc_http_response resp = {
        .error = err, .error_msg = msg, .retry_after_s = -1, .body = (const uint8_t *)""};
    if (err != UV_ECANCELED) PC_DEBUG(r->c->log_id, "%s", msg);
    finish_req(r, &resp);
}

static void queue_push(pc_http_client *c, creq *r, bool front)
{
    r->next = NULL;
    if (!c->qhead) {
        c->qhead = c->qtail = r;
    } else if (front) {
        r->next = c->qhead;
        c->qhead = r;
    } else {
        c->qtail->next = r;
        c->qtail = r;
    }
}

static bool queue_remove(pc_http_client *c, creq *r)
{
    creq *prev = NULL;
    for (creq *q = c->qhead; q; prev = q, q = q->next) {
        if (q != r) continue;
        if (prev)
            prev->next = q->next;
        else
            c->qhead = q->next;
        if (c->qtail == q) c->qtail = prev;
        return true;
    }
    return false;
}

static creq *queue_pop(pc_http_client *c)
{
    creq *r = c->qhead;
    if (r) queue_remove(c, r);
    return r;
}

static void fail_queue(pc_http_client *c, int err, const char *msg)
{
    creq *r;
    while ((r = queue_pop(c)))
        fail_req(r, err, msg);
}

/* ---- connections ---- */

static void conn_free(pc_conn *pc)
{
    cconn *k = (cconn *)pc;
    pc_http_field_free(&k->field);
    pc_buf_free(&k->ctype);
    pc_buf_free(&k->retry_after);
    pc_buf_free(&k->body);
}

static void on_conn_free(pc_conn_env *env)
{
    live_dec(env->user);
}

static void on_conn_close(pc_conn *pc)
{
    ((cconn *)pc)->c->n_conns--; /* the slot is free for a new connection right away */
}

static void conn_close(cconn *k)
{
    pc_conn_close(&k->base);
}

static const llhttp_settings_t parser_settings; /* defined after its callbacks */

static void reset_response(cconn *k)
{
    pc_http_field_clear(&k->field);
    k->ctype.len = k->retry_after.len = k->body.len = 0;
    k->msg_done = k->too_large = false;
}

static bool is_conn_reset(int err)
{
    return err == UV_EOF || err == UV_ECONNRESET || err == UV_EPIPE;
}

/* The connection failed while serving its request. A pooled connection the server closed while
 * idle fails before any response byte; such a request is retried once on a fresh connection. */
static void conn_fail(cconn *k, int err, const char *msg)
{
    pc_http_client *c = k->c;
    creq *r = k->req;
    k->req = NULL;
    conn_close(k);
    if (c->astate == ADDR_OK && c->host_is_name && !k->connected) c->astate = ADDR_NONE;
    if (r) {
        r->conn = NULL;
        if (k->reused && !k->got_bytes && !r->retried && is_conn_reset(err) && !c->closing) {
            PC_DEBUG(c->log_id, "%s: pooled connection closed by server, retrying", r->what);
            r->retried = true;
            queue_push(c, r, true);
        } else {
            fail_req(r, err, msg);
        }
    }
    pump(c);
}

static void conn_send(cconn *k)
{
    creq *r = k->req;
    k->got_bytes = false;
    reset_response(k);
    llhttp_init(&k->parser, HTTP_RESPONSE, &parser_settings);
    k->parser.data = k;
    pc_conn_write(&k->base, r->wire.data, r->wire.len, NULL, 0, 0); /* a failure: conn_error */
}

static void complete(cconn *k)
{
    pc_http_client *c = k->c;
    creq *r = k->req;
    k->req = NULL;
    r->conn = NULL;
    k->reused = true;
    /* move what resp points to out of k: the callback may start a new request on k */
    pc_buf body = k->body, ctype = k->ctype;
    k->body = k->ctype = (pc_buf){0};
    pc_http_response resp = {.status = llhttp_get_status_code(&k->parser),
                             .content_type = ctype.len ? (const char *)ctype.data : NULL,
                             .retry_after_s = -1,
                             .body = body.data ? body.data : (const uint8_t *)"",
                             .body_len = body.len};
    if (k->retry_after.len)
        resp.retry_after_s = pc_http_parse_retry_after((const char *)k->retry_after.data);
    if (!k->keep_alive || c->closing) conn_close(k);
    finish_req(r, &resp);
    pc_buf_free(&body);
    pc_buf_free(&ctype);
    pump(c);
}

static void parse_response(cconn *k, const char *data, size_t n);

/* ---- the core's callbacks ---- */

/* The connection failed, or the server closed it (UV_EOF): that may end a read-until-close
 * response; else the request fails (or is retried, see conn_fail). */
static void conn_error(pc_conn *pc, int err, const char *why)
{
    cconn *k = (cconn *)pc;
    if (!k->req) { /* idle: the server closed it */
        conn_close(k);
        return;
    }
    bool handshake = k->tcp_up && k->base.tls && !pc_tls_conn_established(k->base.tls);
    if (err == UV_EOF && !handshake) {
        llhttp_finish(&k->parser); /* completes a read-until-close body */
        if (k->msg_done) {
            k->keep_alive = false;
            complete(k);
            return;
        }
    }
    char msg[512];
    if (handshake && err != UV_EPROTO)
        snprintf(msg, sizeof msg, "TLS handshake with %s failed: %s", k->c->where,
                 err == UV_EOF ? "connection closed by the server" : uv_strerror(err));
    else if (err == UV_EOF)
        snprintf(msg, sizeof msg, "%s to %s: connection closed before a complete response",
                 k->req->what, k->c->where);
    else
        snprintf(msg, sizeof msg, "%s", why);
    conn_fail(k, err, msg);
}

/* TLS close_notify: as EOF. */
static void conn_peer_done(pc_conn *pc)
{
    conn_error(pc, UV_EOF, "");
}

/* Usable (with TLS: once the handshake is done): send its request, or serve the queue (its
 * request timed out meanwhile). */
static void conn_ready(cconn *k)
{
    k->connected = true;
    if (k->req)
        conn_send(k);
    else
        pump(k->c);
}

static int conn_opened(pc_conn *pc)
{
    cconn *k = (cconn *)pc;
    k->tcp_up = true;
    if (!k->base.tls) conn_ready(k);
    return 0;
}

static void conn_data(pc_conn *pc, const uint8_t *p, size_t n)
{
    cconn *k = (cconn *)pc;
    if (!k->connected) conn_ready(k); /* the first plaintext call: the handshake is done */
    if (!n || k->base.closing) return;
    if (!k->req) { /* bytes nobody asked for */
        conn_close(k);
        return;
    }
    k->got_bytes = true;
    parse_response(k, (const char *)p, n);
}

static const pc_conn_proto http_client_proto = {
    .conn_size = sizeof(cconn),
    .open = conn_opened,
    .data = conn_data,
    .peer_done = conn_peer_done,
    .error = conn_error,
    .free = conn_free,
};

static void parse_response(cconn *k, const char *data, size_t n)
{
    llhttp_errno_t e = llhttp_execute(&k->parser, data, n);
    if (e == HPE_PAUSED && k->msg_done) {
        /* bytes after the response were not asked for: do not trust this connection again */
        if (llhttp_get_error_pos(&k->parser) != data + n) k->keep_alive = false;
        complete(k);
    } else if (e != HPE_OK) {
        char msg[512];
        if (k->too_large)
            snprintf(msg, sizeof msg, "%s to %s: response body larger than %zu bytes", k->req->what,
                     k->c->where, k->c->max_body);
        else
            snprintf(msg, sizeof msg, "%s to %s: invalid HTTP response: %s", k->req->what,
                     k->c->where, llhttp_get_error_reason(&k->parser));
        conn_fail(k, k->too_large ? UV_EMSGSIZE : UV_EPROTO, msg);
    }
}

static void conn_open(pc_http_client *c, creq *r)
{
    cconn *k = (cconn *)pc_conn_new(&c->env);
    k->c = c;
    k->base.name = c->where;
    c->n_conns++;
    c->live++;
    k->req = r;
    r->conn = k;
    pc_conn_connect(&k->base, (struct sockaddr *)&c->addr, c->tls, c->host);
}

/* ---- name resolution (once, cached; redone after a failed connect) ---- */

static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
    pc_http_client *c = g->data;
    c->astate = ADDR_NONE;
    if (status == 0 && res) {
        memcpy(&c->addr, res->ai_addr, res->ai_addrlen);
        if (c->addr.ss_family == AF_INET)
            ((struct sockaddr_in *)&c->addr)->sin_port = htons((uint16_t)c->port);
        else
            ((struct sockaddr_in6 *)&c->addr)->sin6_port = htons((uint16_t)c->port);
        c->astate = ADDR_OK;
    }
    if (res) uv_freeaddrinfo(res);
    if (!c->closing) {
        if (c->astate != ADDR_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "resolve %s: %s", c->host, uv_strerror(status));
            fail_queue(c, status ? status : UV_EAI_NONAME, msg);
        }
        pump(c);
    }
    live_dec(c);
}

static void resolve(pc_http_client *c)
{
    if (c->astate == ADDR_RESOLVING) return;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    c->gai.data = c;
    int rc = uv_getaddrinfo(c->loop, &c->gai, on_resolved, c->host, NULL, &hints);
    if (rc < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "resolve %s: %s", c->host, uv_strerror(rc));
        fail_queue(c, rc, msg);
        return;
    }
    c->astate = ADDR_RESOLVING;
    c->live++;
}

/* ---- scheduling ---- */

static cconn *idle_conn(pc_http_client *c)
{
    for (pc_conn *pc = c->env.conns; pc; pc = pc->next) {
        cconn *k = (cconn *)pc;
        if (k->connected && !k->req && !pc->closing) return k;
    }
    return NULL;
}

static void pump(pc_http_client *c)
{
    while (c->qhead && !c->closing) {
        cconn *k = idle_conn(c);
        if (k) {
            creq *r = queue_pop(c);
            k->req = r;
            r->conn = k;
            conn_send(k);
            continue;
        }
        if (c->n_conns >= c->max_conns) return;
        if (c->astate != ADDR_OK) {
            resolve(c);
            return;
        }
        conn_open(c, queue_pop(c));
    }
}

static void on_req_timeout(uv_timer_t *t)
{
    creq *r = t->data;
    pc_http_client *c = r->c;
    if (r->conn) { /* the connection's state is unknown now: drop it */
        cconn *k = r->conn;
        k->req = NULL;
        r->conn = NULL;
        conn_close(k);
    } else {
        queue_remove(c, r);
    }
    char msg[512];
    snprintf(msg, sizeof msg, "%s to %s: timed out after %u ms", r->what, c->where, r->timeout_ms);
    fail_req(r, UV_ETIMEDOUT, msg);
    pump(c);
}

/* ---- llhttp callbacks (response mode) ---- */

static int on_message_begin(llhttp_t *p)
{
    reset_response(p->data);
    return HPE_OK;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    cconn *k = p->data;
    return pc_http_field_name(&k->field, at, n) > 1024 ? HPE_USER : HPE_OK;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    cconn *k = p->data;
    return pc_http_field_value(&k->field, at, n) > 65536 ? HPE_USER : HPE_OK;
}

static int on_header_value_complete(llhttp_t *p)
{
    cconn *k = p->data;
    size_t vl;
    const char *name = pc_http_field_name_str(&k->field, NULL);
    const char *val = pc_http_field_value_str(&k->field, &vl);
    pc_buf *dst = NULL;
    if (strcasecmp(name, "content-type") == 0)
        dst = &k->ctype;
    else if (strcasecmp(name, "retry-after") == 0)
        dst = &k->retry_after;
    if (dst) {
        dst->len = 0;
        pc_buf_append(dst, val, vl);
    }
    pc_http_field_clear(&k->field);
    return HPE_OK;
}

static int on_headers_complete(llhttp_t *p)
{
    cconn *k = p->data;
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > k->c->max_body) {
        k->too_large = true;
        return -1;
    }
    return k->req && k->req->head ? 1 : 0; /* 1: a HEAD response has no body */
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    cconn *k = p->data;
    if (k->body.len + n > k->c->max_body) {
        k->too_large = true;
        return HPE_USER;
    }
    pc_buf_append(&k->body, at, n);
    return HPE_OK;
}

static int on_message_complete(llhttp_t *p)
{
    cconn *k = p->data;
    int st = llhttp_get_status_code(p);
    if (st >= 100 && st < 200 && st != 101) return HPE_OK; /* interim: the real one follows */
    k->msg_done = true;
    k->keep_alive = llhttp_should_keep_alive(p);
    return HPE_PAUSED;
}

/* the parser's callbacks: one table for every client */
static const llhttp_settings_t parser_settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- public API ---- */

pc_http_client *pc_http_client_new(uv_loop_t *loop, const pc_http_client_opts *opts)
{
    pc_http_client *c = pc_xcalloc(1, sizeof *c);
    c->loop = loop;
    const char *h = opts->host && opts->host[0] ? opts->host : "localhost";
    size_t hl = strlen(h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        c->host = strndup(h + 1, hl - 2);
        if (!c->host) abort();
    } else {
        c->host = pc_xstrdup(h);
    }
    c->log_id = pc_xstrdup(opts->log_id ? opts->log_id : "http-client");
    c->port = opts->port;
    c->max_conns = opts->max_connections ? opts->max_connections : 8;
    c->max_body = opts->max_body && opts->max_body < BODY_CAP ? opts->max_body : BODY_CAP;
    c->tls = opts->tls;
    bool v6 = strchr(c->host, ':') != NULL;
    snprintf(c->where, sizeof c->where, "%s%s%s:%d", v6 ? "[" : "", c->host, v6 ? "]" : "",
             c->port);
    /* literals need no resolver; "localhost" is the IPv4 loopback, matching the server */
    const char *lit = strcmp(c->host, "localhost") == 0 ? "127.0.0.1" : c->host;
    if (uv_ip4_addr(lit, c->port, (struct sockaddr_in *)&c->addr) == 0 ||
        uv_ip6_addr(lit, c->port, (struct sockaddr_in6 *)&c->addr) == 0)
        c->astate = ADDR_OK;
    else
        c->host_is_name = true;
    uv_timer_init(loop, &c->anchor);
    c->anchor.data = c;
    c->live = 1;
    c->env = (pc_conn_env){.loop = loop,
                           .proto = &http_client_proto,
                           .user = c,
                           .log_id = c->log_id,
                           .on_close = on_conn_close,
                           .on_free = on_conn_free};
    return c;
}

void pc_http_client_request(pc_http_client *c, const char *method, const char *path,
                            const char *headers, const void *body, size_t len, unsigned timeout_ms,
                            pc_http_response_cb cb, void *arg)
{
    if (!path || !path[0]) path = "/";
    if (c->closing) {
        pc_http_response resp = {.error = UV_ECANCELED,
                                 .error_msg = "client closed",
                                 .retry_after_s = -1,
                                 .body = (const uint8_t *)""};
        cb(&resp, arg);
        return;
    }
    creq *r = pc_xcalloc(1, sizeof *r);
    r->c = c;
    r->cb = cb;
    r->arg = arg;
    r->refs = 1;
    r->head = strcmp(method, "HEAD") == 0;
    r->timeout_ms = timeout_ms ? timeout_ms : DEFAULT_TIMEOUT_MS;
    size_t wn = pc_str_copy(r->what, sizeof r->what, method); /* "POST /v1/..." */
    if (wn + 1 < sizeof r->what) {
        r->what[wn] = ' ';
        pc_str_copy(r->what + wn + 1, sizeof r->what - wn - 1, path);
    }
    /* appends, not printf: every export builds one (bench/README.md "Small requests") */
    pc_buf *w = &r->wire;
    pc_buf_reserve(w, 256 + len);
    pc_buf_puts(w, method);
    pc_buf_puts(w, " ");
    pc_buf_puts(w, path);
    pc_buf_puts(w, " HTTP/1.1\r\nHost: ");
    pc_buf_puts(w, c->where);
    pc_buf_puts(w, "\r\n");
    if (headers) pc_buf_puts(w, headers);
    pc_buf_puts(w, "Content-Length: ");
    pc_buf_put_u64(w, len);
    pc_buf_puts(w, "\r\nConnection: keep-alive\r\n\r\n");
    if (len) pc_buf_append(&r->wire, body, len);
    uv_timer_init(c->loop, &r->timer);
    r->timer.data = r;
    /* the loop's cached clock may be stale (we may not be inside a callback): the timeout
     * counts from now, not from the loop's last wakeup */
    uv_update_time(c->loop);
    uv_timer_start(&r->timer, on_req_timeout, r->timeout_ms, 0);
    c->live++;
    c->pending++;
    queue_push(c, r, false);
    pump(c);
}

size_t pc_http_client_pending(const pc_http_client *c)
{
    return c->pending;
}

static void on_anchor_closed(uv_handle_t *h)
{
    live_dec(h->data);
}

void pc_http_client_close(pc_http_client *c, void (*done)(void *arg), void *arg)
{
    if (c->closing) return;
    c->closing = true;
    c->done = done;
    c->done_arg = arg;
    fail_queue(c, UV_ECANCELED, "client closed");
    if (c->astate == ADDR_RESOLVING) uv_cancel((uv_req_t *)&c->gai);
    for (pc_conn *pc = c->env.conns, *next; pc; pc = next) {
        next = pc->next;
        cconn *k = (cconn *)pc;
        if (!k->req) conn_close(k); /* in-flight ones close when their response is done */
    }
    uv_close((uv_handle_t *)&c->anchor, on_anchor_closed);
}

void pc_http_client_close_now(pc_http_client *c, void (*done)(void *arg), void *arg)
{
    if (c->closing) return;
    pc_http_client_close(c, done, arg);
    for (pc_conn *pc = c->env.conns, *next; pc; pc = next) {
        next = pc->next;
        cconn *k = (cconn *)pc;
        if (k->req) conn_fail(k, UV_ECANCELED, "client closed");
    }
}

/* ---- Retry-After ---- */

int pc_http_parse_retry_after(const char *v)
{
    if (!v) return -1;
    while (isspace((unsigned char)*v))
        v++;
    char buf[64];
    size_t n = strlen(v);
    while (n > 0 && isspace((unsigned char)v[n - 1]))
        n--;
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, v, n);
    buf[n] = 0;
    if (strspn(buf, "0123456789") == n) {
        long long s = 0;
        for (size_t i = 0; i < n && s <= INT_MAX; i++)
            s = s * 10 + (buf[i] - '0');
        return s > INT_MAX ? INT_MAX : (int)s;
    }
    /* IMF-fixdate, plus the two obsolete forms RFC 9110 still asks recipients to accept */
    static const char *const fmts[] = {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                                       "%a %b %e %H:%M:%S %Y"};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *end = strptime(buf, fmts[i], &tm);
        if (!end || *end) continue;
        long long d = (long long)timegm(&tm) - (long long)time(NULL);
        if (d < 0) return 0;
        return d > INT_MAX ? INT_MAX : (int)d;
    }
    return -1;
}
