/* The HTTP/2 client (see h2_client.h).
 *
 * nghttp2 must never be re-entered from its own callbacks, and a completion callback may do
 * anything (send again, close the client). So every submission, every flush after one, and every
 * teardown runs from one "kick" timer at the top of the loop; nghttp2 callbacks only record
 * state and complete calls.
 *
 * A connection (kconn) is a pc_conn of the connection core (net/conn.h), which does the socket,
 * TLS and writes; the client owns its connections (the env) and speaks HTTP/2 on them.
 *
 * Lifetimes: a call (creq) is freed once its callback ran, nghttp2 no longer knows its stream,
 * and its timer is closed. A connection is freed when the core lets it go (handles closed, no
 * connect or write pending) and its name resolution is done. The client is freed after close,
 * once no handle is open. */
#include "net/h2_client.h"

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/log.h"
#include "net/conn.h"
#include "net/tls.h"

enum {
    WRITE_CHUNK = 256 * 1024,
    MAX_HEADER_BYTES = 64 * 1024,
    STREAM_WINDOW = 1 << 20,
    MAX_REFUSED_RETRIES = 2,
};

typedef struct kconn kconn;
typedef struct creq creq;

typedef struct hlist {
    pc_h2_header *v;
    size_t n, cap;
} hlist;

struct creq {
    pc_h2_client *cl;
    creq *prev, *next;
    kconn *k; /* while its stream is open on k */
    int32_t stream_id;
    nghttp2_nv *nva;
    size_t n_nv;
    uint8_t *body;
    size_t len, off;
    uv_timer_t timer;
    pc_h2_response_cb cb;
    void *arg;
    /* response */
    int status;
    hlist hdrs, trl;
    size_t hdr_bytes;
    pc_buf rbody;
    int error;
    uint32_t rst_code;
    char errmsg[256];
    int refused; /* times the server refused the stream unprocessed */
    bool done, stream_live, timer_closing, queued;
};

struct kconn {
    pc_conn base; /* first: the core's connection (in the client's env.conns) */
    pc_h2_client *cl;
    uv_getaddrinfo_t gai;
    nghttp2_session *ng;
    bool connected, writing, closing, tls_logged;
};

struct pc_h2_client {
    pc_conn_env env; /* what its connections share (the read buffer among it) */
    uv_loop_t *loop;
    char *host, *authority, *log_id, *where;
    int port;
    size_t max_resp;
    pc_tls_ctx *tls;
    uv_timer_t kick;
    kconn *cur; /* takes new streams */
    creq *reqs; /* every call not yet freed */
    size_t pending;
    unsigned live; /* open handles (the kick timer once closing) and kconns */
    bool closing, kick_closed;
    void (*done)(void *arg);
    void *done_arg;
    nghttp2_session_callbacks *cbs;
};

static void kick(pc_h2_client *c);

/* ---- calls ---- */

static void hlist_add(hlist *l, const uint8_t *name, size_t nl, const uint8_t *value, size_t vl)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->v = pc_xrealloc(l->v, l->cap * sizeof *l->v);
    }
    char *n = strndup((const char *)name, nl), *v = strndup((const char *)value, vl);
    if (!n || !v) abort();
    l->v[l->n++] = (pc_h2_header){n, v};
}

static void hlist_free(hlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free((char *)l->v[i].name);
        free((char *)l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void client_maybe_free(pc_h2_client *c)
{
    if (!c->closing || c->live || c->reqs) return;
    void (*done)(void *) = c->done;
    void *arg = c->done_arg;
    nghttp2_session_callbacks_del(c->cbs);
    free(c->host);
    free(c->authority);
    free(c->log_id);
    free(c->where);
    free(c);
    if (done) done(arg);
}

static void req_free(creq *r)
{
    pc_h2_client *c = r->cl;
    if (r->prev)
        r->prev->next = r->next;
    else
        c->reqs = r->next;
    if (r->next) r->next->prev = r->prev;
    for (size_t i = 0; i < r->n_nv; i++) {
        free(r->nva[i].name);
        free(r->nva[i].value);
    }
    free(r->nva);
    free(r->body);
    hlist_free(&r->hdrs);
    hlist_free(&r->trl);
    pc_buf_free(&r->rbody);
    free(r);
    client_maybe_free(c);
}

static void on_req_timer_closed(uv_handle_t *h)
{
    req_free(h->data);
}

/* Free once both the callback ran and nghttp2 forgot the stream. */
static void req_maybe_release(creq *r)
{
    if (!r->done || r->stream_live || r->timer_closing) return;
    r->timer_closing = true;
    uv_close((uv_handle_t *)&r->timer, on_req_timer_closed);
}

static void req_finish(creq *r, int error, const char *msg)
{
    if (r->done) return;
    r->done = true;
    r->queued = false;
    r->cl->pending--;
    uv_timer_stop(&r->timer);
    if (error && !r->error) {
        r->error = error;
        snprintf(r->errmsg, sizeof r->errmsg, "%s", msg ? msg : uv_strerror(error));
    }
    pc_h2_response resp = {
        .error = r->error,
        .error_msg = r->error ? r->errmsg : NULL,
        .rst_code = r->rst_code,
        .status = r->status,
        .headers = r->hdrs.v,
        .n_headers = r->hdrs.n,
        .trailers = r->trl.v,
        .n_trailers = r->trl.n,
        .body = r->rbody.data,
        .body_len = r->rbody.len,
    };
    r->cb(&resp, r->arg);
    if (r->cl->closing) kick(r->cl); /* the last call in flight lets the client close */
}

static void on_req_timeout(uv_timer_t *t)
{
    creq *r = t->data;
    pc_h2_client *c = r->cl;
    char msg[300];
    snprintf(msg, sizeof msg, "%s: timed out", c->where);
    if (r->k && r->stream_live && r->k->ng)
        nghttp2_submit_rst_stream(r->k->ng, NGHTTP2_FLAG_NONE, r->stream_id, NGHTTP2_CANCEL);
    req_finish(r, UV_ETIMEDOUT, msg);
    req_maybe_release(r);
    kick(c); /* sends the RST_STREAM */
}

/* ---- connections ---- */

static void on_conn_free(pc_conn_env *env)
{
    pc_h2_client *c = env->user;
    c->live--;
    client_maybe_free(c);
}

/* Fail the calls on k (and, if k never connected, the calls that waited for it: retrying them on
 * yet another connection at once would spin), then drop the session and close. Never called
 * from inside nghttp2. */
static void conn_close(kconn *k, int error, const char *msg)
{
    if (k->closing) return;
    k->closing = true;
    pc_h2_client *c = k->cl;
    bool was_connecting = !k->connected;
    if (c->cur == k) c->cur = NULL;
    for (creq *r = c->reqs, *next; r; r = next) {
        next = r->next; /* a callback may add calls (at the head) but frees none synchronously */
        if (r->k == k) {
            r->k = NULL;
            r->stream_live = false;
        } else if (!(r->queued && was_connecting)) {
            continue;
        }
        req_finish(r, error, msg);
        req_maybe_release(r);
    }
    if (k->ng) nghttp2_session_del(k->ng);
    k->ng = NULL;
    pc_conn_close(&k->base);
}

static void conn_fail(kconn *k, int error, const char *msg)
{
    PC_DEBUG(k->cl->log_id, "%s", msg);
    conn_close(k, error, msg);
    kick(k->cl); /* queued calls get a new connection */
}

/* Write what nghttp2 has to send (once TLS is established: the core sends the handshake), one
 * write at a time; after a GOAWAY (either way) with no stream left, done with this connection. */
static void conn_flush(kconn *k)
{
    if (k->closing || k->writing || !k->ng) return;
    if (k->base.tls && !pc_tls_conn_established(k->base.tls)) return;
    pc_buf out = {0};
    while (out.len < WRITE_CHUNK) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(k->ng, &d);
        if (n < 0) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s: HTTP/2: %s", k->cl->where, nghttp2_strerror((int)n));
            pc_buf_free(&out);
            conn_fail(k, UV_EPROTO, msg);
            return;
        }
        if (n == 0) break;
        pc_buf_append(&out, d, (size_t)n);
    }
    if (out.len) {
        if (pc_conn_write(&k->base, out.data, out.len, NULL, 0, 1) == 0) k->writing = true;
    } else if (!nghttp2_session_want_read(k->ng) && !nghttp2_session_want_write(k->ng)) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s: connection closed after GOAWAY", k->cl->where);
        conn_close(k, UV_ECONNRESET, msg);
    }
    pc_buf_free(&out);
}

/* ---- nghttp2 callbacks (record state only) ---- */

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    (void)ud;
    (void)flags;
    creq *r = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (!r || r->done || f->hd.type != NGHTTP2_HEADERS) return 0;
    r->hdr_bytes += namelen + valuelen + 32;
    if (r->hdr_bytes > MAX_HEADER_BYTES) {
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_CANCEL);
        r->error = UV_E2BIG;
        snprintf(r->errmsg, sizeof r->errmsg, "%s: response headers too large", r->cl->where);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (f->headers.cat == NGHTTP2_HCAT_HEADERS) { /* trailers */
        hlist_add(&r->trl, name, namelen, value, valuelen);
        return 0;
    }
    if (namelen == 7 && !memcmp(name, ":status", 7)) {
        char s[8];
        snprintf(s, sizeof s, "%.*s", (int)(valuelen < 7 ? valuelen : 7), (const char *)value);
        r->status = atoi(s);
        return 0;
    }
    hlist_add(&r->hdrs, name, namelen, value, valuelen);
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)ud;
    (void)flags;
    creq *r = nghttp2_session_get_stream_user_data(ng, id);
    if (!r || r->done || r->error) return 0;
    if (r->rbody.len + len > r->cl->max_resp) {
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        r->error = UV_E2BIG;
        snprintf(r->errmsg, sizeof r->errmsg, "%s: response larger than %zu bytes", r->cl->where,
                 r->cl->max_resp);
        return 0;
    }
    pc_buf_append(&r->rbody, data, len);
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    kconn *k = ud;
    (void)ng;
    if (f->hd.type == NGHTTP2_GOAWAY) {
        /* no new streams here; those above last_stream_id are closed as refused */
        if (k->cl->cur == k) k->cl->cur = NULL;
        PC_DEBUG(k->cl->log_id, "%s: GOAWAY (%s)", k->cl->where,
                 nghttp2_http2_strerror(f->goaway.error_code));
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    kconn *k = ud;
    creq *r = nghttp2_session_get_stream_user_data(ng, id);
    if (!r) return 0;
    r->stream_live = false;
    r->k = NULL;
    if (!r->done && code == NGHTTP2_REFUSED_STREAM && !r->status &&
        r->refused < MAX_REFUSED_RETRIES && !k->cl->closing) {
        /* the server did not process it (RFC 9113 §8.7): send it again on a new stream */
        r->refused++;
        r->off = 0;
        r->stream_id = 0;
        hlist_free(&r->hdrs);
        hlist_free(&r->trl);
        r->hdr_bytes = 0;
        r->rbody.len = 0;
        r->queued = true;
        kick(k->cl);
        return 0;
    }
    if (!r->done) {
        if (code != NGHTTP2_NO_ERROR) {
            r->rst_code = code;
            char msg[300];
            snprintf(msg, sizeof msg, "%s: stream reset by peer: %s", k->cl->where,
                     nghttp2_http2_strerror(code));
            req_finish(r, r->error ? r->error : UV_ECONNRESET, r->error ? NULL : msg);
        } else {
            req_finish(r, 0, NULL);
        }
    }
    req_maybe_release(r);
    return 0;
}

static ssize_t body_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)ng;
    (void)id;
    (void)ud;
    creq *r = src->ptr;
    size_t n = r->len - r->off;
    if (n > length) n = length;
    if (n) memcpy(buf, r->body + r->off, n);
    r->off += n;
    if (r->off == r->len) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---- the core's callbacks ---- */

/* Connected: an HTTP/2 session, our SETTINGS (sent by the kick, after the TLS handshake). */
static int conn_opened(pc_conn *pc)
{
    kconn *k = (kconn *)pc;
    pc_h2_client *c = k->cl;
    if (nghttp2_session_client_new(&k->ng, c->cbs, k) != 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s: cannot create an HTTP/2 session", c->where);
        conn_fail(k, UV_ENOMEM, msg);
        return PC_EIO;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_BYTES},
    };
    nghttp2_submit_settings(k->ng, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    k->connected = true;
    PC_DEBUG(c->log_id, "connected to %s", c->where);
    kick(c);
    return 0;
}

static void conn_data(pc_conn *pc, const uint8_t *p, size_t n)
{
    kconn *k = (kconn *)pc;
    if (k->closing) return;
    if (k->base.tls && !k->tls_logged) {
        const char *alpn = pc_tls_conn_alpn(k->base.tls);
        PC_DEBUG(k->cl->log_id, "TLS established with %s (ALPN %s)", k->cl->where,
                 *alpn ? alpn : "none");
        k->tls_logged = true;
    }
    ssize_t rv = n ? nghttp2_session_mem_recv(k->ng, p, n) : 0;
    if (rv < 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s: HTTP/2: %s", k->cl->where, nghttp2_strerror((int)rv));
        conn_fail(k, UV_EPROTO, msg);
        return;
    }
    kick(k->cl);
}

static void conn_peer_done(pc_conn *pc)
{
    kconn *k = (kconn *)pc;
    char msg[300];
    snprintf(msg, sizeof msg, "%s: connection closed by peer (close_notify)", k->cl->where);
    conn_fail(k, UV_ECONNRESET, msg);
}

/* The connection failed (or the server closed it): its calls fail, queued ones reconnect. */
static void conn_error(pc_conn *pc, int err, const char *why)
{
    kconn *k = (kconn *)pc;
    char msg[300];
    if (k->base.tls && !pc_tls_conn_established(k->base.tls) && err == UV_EPROTO)
        PC_WARN(k->cl->log_id, "%s", why); /* a failed handshake deserves a line */
    if (err == UV_EOF) {
        snprintf(msg, sizeof msg, "%s: connection closed by peer", k->cl->where);
        why = msg;
    }
    conn_fail(k, err == UV_EOF || err == UV_ECANCELED ? UV_ECONNRESET : err, why);
}

static void conn_written(pc_conn *pc, int tag)
{
    kconn *k = (kconn *)pc;
    (void)tag;
    k->writing = false;
    if (!k->closing) kick(k->cl);
}

static const pc_conn_proto h2_client_proto = {
    .conn_size = sizeof(kconn),
    .open = conn_opened,
    .data = conn_data,
    .peer_done = conn_peer_done,
    .error = conn_error,
    .written = conn_written,
};

/* ---- connecting ---- */

static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
    kconn *k = g->data;
    pc_h2_client *c = k->cl;
    if (!k->closing) {
        if (status < 0 || !res) {
            char msg[300];
            snprintf(msg, sizeof msg, "resolve %s: %s", c->host,
                     uv_strerror(status ? status : UV_EAI_NONAME));
            conn_fail(k, status ? status : UV_EAI_NONAME, msg);
        } else {
            struct sockaddr_storage ss;
            memcpy(&ss, res->ai_addr, res->ai_addrlen);
            pc_conn_connect(&k->base, (struct sockaddr *)&ss, c->tls, c->host);
        }
    }
    if (res) uv_freeaddrinfo(res);
    pc_conn_unref(&k->base);
}

static void conn_open(pc_h2_client *c)
{
    kconn *k = (kconn *)pc_conn_new(&c->env);
    k->cl = c;
    k->base.name = c->where;
    c->live++;
    c->cur = k;
    char port[16];
    snprintf(port, sizeof port, "%d", c->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    k->gai.data = k;
    int rc = uv_getaddrinfo(c->loop, &k->gai, on_resolved, c->host, port, &hints);
    if (rc < 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "resolve %s: %s", c->host, uv_strerror(rc));
        conn_fail(k, rc, msg);
        return;
    }
    pc_conn_ref(&k->base); /* until resolved */
}

/* ---- the kick: submissions, flushes and teardown, at the top of the loop ---- */

static void submit(kconn *k, creq *r)
{
    nghttp2_data_provider prd = {.source.ptr = r, .read_callback = body_read};
    int32_t id = nghttp2_submit_request(k->ng, NULL, r->nva, r->n_nv, &prd, r);
    r->queued = false;
    if (id < 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s: HTTP/2: %s", k->cl->where, nghttp2_strerror(id));
        req_finish(r, UV_EPROTO, msg);
        req_maybe_release(r);
        return;
    }
    r->stream_id = id;
    r->k = k;
    r->stream_live = true;
}

static void on_kick_closed(uv_handle_t *h)
{
    pc_h2_client *c = h->data;
    c->live--;
    client_maybe_free(c);
}

static void on_kick(uv_timer_t *t)
{
    pc_h2_client *c = t->data;
    bool want_conn = false;
    for (creq *r = c->reqs, *next; r; r = next) {
        next = r->next;
        if (!r->queued || r->done) continue;
        if (c->closing) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s: client closed", c->where);
            req_finish(r, UV_ECANCELED, msg);
            req_maybe_release(r);
        } else if (c->cur && c->cur->connected && !c->cur->closing) {
            submit(c->cur, r);
        } else {
            want_conn = true;
        }
    }
    if (want_conn && !c->cur) conn_open(c);
    for (pc_conn *pc = c->env.conns, *next; pc; pc = next) {
        next = pc->next;
        kconn *k = (kconn *)pc;
        if (k->closing) continue;
        if (c->closing && !c->pending)
            conn_close(k, UV_ECANCELED, "client closed");
        else if (k->connected)
            conn_flush(k);
    }
    if (c->closing && !c->pending && !c->kick_closed) {
        c->kick_closed = true;
        uv_close((uv_handle_t *)&c->kick, on_kick_closed);
    }
}

static void kick(pc_h2_client *c)
{
    if (!c->kick_closed) uv_timer_start(&c->kick, on_kick, 0, 0);
}

/* ---- public API ---- */

pc_h2_client *pc_h2_client_new(uv_loop_t *loop, const pc_h2_client_opts *opts)
{
    pc_h2_client *c = pc_xcalloc(1, sizeof *c);
    c->loop = loop;
    c->host = pc_xstrdup(opts->host);
    c->port = opts->port;
    c->log_id = pc_xstrdup(opts->log_id ? opts->log_id : "h2");
    c->max_resp = opts->max_response_bytes ? opts->max_response_bytes : 4u << 20;
    c->tls = opts->tls;
    pc_buf b = {0};
    bool v6 = strchr(opts->host, ':') != NULL;
    pc_buf_printf(&b, "%s%s%s:%d", v6 ? "[" : "", opts->host, v6 ? "]" : "", opts->port);
    c->authority = pc_xstrdup((char *)b.data);
    b.len = 0;
    pc_buf_printf(&b, "%s://%s", c->tls ? "https" : "http", c->authority);
    c->where = pc_xstrdup((char *)b.data);
    pc_buf_free(&b);
    uv_timer_init(loop, &c->kick);
    c->kick.data = c;
    c->env = (pc_conn_env){.loop = loop,
                           .proto = &h2_client_proto,
                           .user = c,
                           .log_id = c->log_id,
                           .on_free = on_conn_free};
    nghttp2_session_callbacks_new(&c->cbs);
    nghttp2_session_callbacks_set_on_header_callback(c->cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c->cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(c->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(c->cbs, on_stream_close);
    return c;
}

static nghttp2_nv dupnv(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)pc_xstrdup(name), (uint8_t *)pc_xstrdup(value), strlen(name),
                        strlen(value), NGHTTP2_NV_FLAG_NONE};
}

void pc_h2_client_request(pc_h2_client *c, const char *method, const char *path,
                          const pc_h2_header *headers, size_t n_headers, const void *body,
                          size_t len, unsigned timeout_ms, pc_h2_response_cb cb, void *arg)
{
    creq *r = pc_xcalloc(1, sizeof *r);
    r->cl = c;
    r->cb = cb;
    r->arg = arg;
    r->nva = pc_xcalloc(4 + n_headers, sizeof *r->nva);
    r->nva[r->n_nv++] = dupnv(":method", method);
    r->nva[r->n_nv++] = dupnv(":scheme", c->tls ? "https" : "http");
    r->nva[r->n_nv++] = dupnv(":authority", c->authority);
    r->nva[r->n_nv++] = dupnv(":path", path);
    for (size_t i = 0; i < n_headers; i++)
        r->nva[r->n_nv++] = dupnv(headers[i].name, headers[i].value);
    if (len) {
        r->body = pc_xmalloc(len);
        memcpy(r->body, body, len);
    }
    r->len = len;
    r->queued = true;
    uv_timer_init(c->loop, &r->timer);
    r->timer.data = r;
    r->next = c->reqs;
    if (c->reqs) c->reqs->prev = r;
    c->reqs = r;
    c->pending++;
    uv_timer_start(&r->timer, on_req_timeout, timeout_ms ? timeout_ms : 30000, 0);
    kick(c); /* a closed client fails it from the kick, too (never synchronously) */
}

size_t pc_h2_client_pending(const pc_h2_client *c)
{
    return c->pending;
}

void pc_h2_client_close(pc_h2_client *c, void (*done)(void *arg), void *arg)
{
    if (c->closing) return;
    c->closing = true;
    c->done = done;
    c->done_arg = arg;
    c->live++; /* the kick timer, until it is closed */
    kick(c);
}
