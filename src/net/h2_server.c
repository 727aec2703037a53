/* The HTTP/2 server (see h2_server.h): libuv sockets and timers, nghttp2 for the protocol.
 *
 * Bytes from uv_read go to nghttp2_session_mem_recv; its callbacks build one h2stream per
 * request stream. A stream whose request is complete (END_STREAM) is marked ready and handed to
 * the handler after mem_recv returns, never from inside nghttp2. Output is pulled with
 * nghttp2_session_mem_send into one uv_write at a time (a peer that stops reading stops costing
 * us more than what nghttp2 queues, which it bounds itself).
 *
 * Lifetimes: a connection is freed when its refcount drops to zero; the two handles and every
 * dispatched, unanswered call hold a reference. A stream is freed when nghttp2 closes it, except
 * that a dispatched call lives on until pc_h2_respond. */
#include "net/h2_server.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/buf.h"
#include "net/listener.h"
#include "net/tls.h"
#include "base/alloc.h"
#include "base/log.h"

enum {
    READ_CHUNK = 64 * 1024,
    WRITE_CHUNK = 256 * 1024, /* gathered from mem_send per uv_write */
    LOG_TICK_MS = 10000,      /* summaries of suppressed log lines, at most this often */
    STREAM_WINDOW = 1 << 20,  /* SETTINGS_INITIAL_WINDOW_SIZE */
};

typedef struct h2conn h2conn;
typedef struct h2stream h2stream;

struct h2stream {
    pc_h2_call call; /* first: a call pointer is a stream pointer */
    h2conn *c;
    h2stream *prev, *next;
    int32_t id;
    uint64_t start_ms;
    char *method, *path;
    size_t cap_hdrs, hdr_bytes;
    pc_buf body;
    bool ready;      /* request complete (or too large): hand to the handler */
    bool dispatched; /* the handler owns it until pc_h2_respond */
    bool responded;
    bool ng_closed;   /* nghttp2 closed the stream */
    bool remote_done; /* the peer sent END_STREAM */
    bool cancelled;   /* we reset it for taking too long */
    /* the response body and trailers, read by nghttp2 while it sends */
    uint8_t *resp;
    size_t resp_len, resp_off;
    nghttp2_nv *trl;
    size_t n_trl;
};

struct h2conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    pc_h2_server *s;
    h2conn *prev, *next;
    /* the server's eviction order: counted connections without a call being handled, oldest
     * first (since accept or their last answer) */
    h2conn *lru_prev, *lru_next;
    bool in_lru;
    unsigned n_busy; /* calls dispatched and not yet answered */
    int refs;
    nghttp2_session *ng;
    pc_tls_conn *tls; /* NULL: cleartext */
    pc_buf plain;     /* TLS: decrypted bytes for nghttp2 */
    char peer[64];
    h2stream *streams;
    size_t buffered; /* body bytes held by this connection's streams */
    uint64_t idle_since, write_since;
    bool counted, writing, closing, dispatching, terminating;
    bool seen_frame; /* until the peer's first frame, read_timeout bounds an idle connection */
    bool close_after_write; /* TLS: a failed handshake's alert is on its way out */
    /* keepalive: our PING and the peer's */
    uint64_t last_read;    /* when bytes last arrived: a live peer needs no PING */
    uint64_t ping_sent;    /* our PING awaits an answer since then (0: none) */
    uint64_t ka_close_at;  /* GOAWAY is on its way; close by then even if it never leaves */
    uint64_t peer_ping_at; /* the peer's last PING (0: none yet) */
    int ping_strikes;
    bool ping_forgiven;   /* we sent HEADERS or DATA since the peer's last PING */
    bool close_on_goaway; /* close as soon as our GOAWAY is written */
};

struct pc_h2_server {
    uv_loop_t *loop;
    pc_listener *listener;
    uv_timer_t tick; /* writes the rate-limited log lines' summaries */
    pc_h2_server_opts o;
    char *host, *log_id;
    pc_h2_handler handler;
    void *arg;
    int port;
    h2conn *conns;
    h2conn *lru_head, *lru_tail;
    unsigned n_active;
    bool started, shutting_down;
    int closing_handles; /* listener and tick, during shutdown */
    void (*done)(void *arg);
    void *done_arg;
    pc_conn_stats own_stats, *st;
    /* per-connection lines a peer can trigger at will */
    pc_log_limiter refuse_log, evict_log, proto_log, tls_log, ping_log;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *opt;
    char rbuf[READ_CHUNK]; /* shared: the loop thread consumes each read before the next */
};

static void conn_close(h2conn *c);
static void conn_flush(h2conn *c);
static void conn_timer_update(h2conn *c);

/* ---- helpers (the HTTP/1.1 server has the same two; both are small) ---- */

/* "localhost" means the IPv4 loopback, as for the HTTP server. */
static nghttp2_nv mknv(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                        NGHTTP2_NV_FLAG_NONE};
}

/* ---- streams ---- */

static h2stream *stream_new(h2conn *c, int32_t id)
{
    h2stream *st = pc_xcalloc(1, sizeof *st);
    st->c = c;
    st->id = id;
    st->start_ms = uv_now(c->s->loop);
    snprintf(st->call.peer, sizeof st->call.peer, "%s", c->peer);
    st->next = c->streams;
    if (c->streams) c->streams->prev = st;
    c->streams = st;
    return st;
}

static void stream_drop_body(h2stream *st)
{
    st->c->buffered -= st->body.len;
    pc_buf_free(&st->body);
}

static void stream_free(h2stream *st)
{
    h2conn *c = st->c;
    if (st->prev)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next) st->next->prev = st->prev;
    stream_drop_body(st);
    for (size_t i = 0; i < st->call.n_headers; i++) {
        free((char *)st->call.headers[i].name);
        free((char *)st->call.headers[i].value);
    }
    free(st->call.headers);
    for (size_t i = 0; i < st->n_trl; i++) {
        free(st->trl[i].name);
        free(st->trl[i].value);
    }
    free(st->trl);
    free(st->resp);
    free(st->method);
    free(st->path);
    free(st);
}

/* ---- connection teardown ---- */

static void server_maybe_done(pc_h2_server *s)
{
    if (!s->shutting_down || s->conns || s->closing_handles) return;
    void (*done)(void *) = s->done;
    void *arg = s->done_arg;
    PC_INFO(s->log_id, "gRPC server stopped");
    nghttp2_session_callbacks_del(s->cbs);
    nghttp2_option_del(s->opt);
    free(s->host);
    free(s->log_id);
    free(s);
    if (done) done(arg);
}

static void conn_free(h2conn *c)
{
    pc_h2_server *s = c->s;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    nghttp2_session_del(c->ng);
    c->ng = NULL;
    pc_tls_conn_free(c->tls);
    pc_buf_free(&c->plain);
    while (c->streams)
        stream_free(c->streams); /* none is dispatched: those hold references */
    free(c);
    server_maybe_done(s);
}

static void conn_unref(h2conn *c)
{
    if (--c->refs == 0) conn_free(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    conn_unref(h->data);
}

/* ---- the eviction order (O(1) per change) ---- */

static void lru_remove(h2conn *c)
{
    if (!c->in_lru) return;
    pc_h2_server *s = c->s;
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

/* At the back: the newest connection without a call being handled. */
static void lru_append(h2conn *c)
{
    if (!c->counted || c->closing || c->in_lru) return;
    pc_h2_server *s = c->s;
    c->in_lru = true;
    c->lru_prev = s->lru_tail;
    if (s->lru_tail)
        s->lru_tail->lru_next = c;
    else
        s->lru_head = c;
    s->lru_tail = c;
}

static void conn_close(h2conn *c)
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

/* ---- nghttp2 callbacks ---- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2conn *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    h2stream *st = stream_new(c, f->hd.stream_id);
    nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, st);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    h2conn *c = ud;
    (void)flags;
    h2stream *st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (!st || st->dispatched) return 0;
    st->hdr_bytes += namelen + valuelen + 32; /* RFC 9113's accounting for header list size */
    if (st->hdr_bytes > c->s->o.max_header_bytes) {
        PC_DEBUG(c->s->log_id, "%s: stream %d: headers exceed %zu bytes", c->peer, st->id,
                 c->s->o.max_header_bytes);
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                  NGHTTP2_ENHANCE_YOUR_CALM);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* request trailers: not used */
    if (namelen && name[0] == ':') {
        char **slot = NULL;
        if (namelen == 7 && !memcmp(name, ":method", 7))
            slot = &st->method;
        else if (namelen == 5 && !memcmp(name, ":path", 5))
            slot = &st->path;
        if (slot && !*slot) *slot = strndup((const char *)value, valuelen);
        return 0;
    }
    if (st->call.n_headers == st->cap_hdrs) {
        st->cap_hdrs = st->cap_hdrs ? st->cap_hdrs * 2 : 8;
        st->call.headers = pc_xrealloc(st->call.headers, st->cap_hdrs * sizeof(pc_h2_header));
    }
    pc_h2_header *h = &st->call.headers[st->call.n_headers++];
    h->name = strndup((const char *)name, namelen); /* nghttp2 checked: lower-case, no NUL */
    h->value = strndup((const char *)value, valuelen);
    if (!h->name || !h->value) abort();
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    h2conn *c = ud;
    (void)flags;
    h2stream *st = nghttp2_session_get_stream_user_data(ng, id);
    if (!st || st->dispatched || st->call.too_large) return 0; /* discarded */
    const pc_h2_server_opts *o = &c->s->o;
    if (st->body.len + len > o->max_body_bytes || c->buffered + len > o->max_conn_body_bytes) {
        PC_DEBUG(c->s->log_id, "%s: stream %d: body over the %s limit", c->peer, id,
                 st->body.len + len > o->max_body_bytes ? "call" : "connection");
        stream_drop_body(st);
        st->call.too_large = true;
        st->ready = true; /* answered now; the rest of the body is dropped as it comes */
        return 0;
    }
    pc_buf_append(&st->body, data, len);
    c->buffered += len;
    return 0;
}

/* GOAWAY, then close once it is written (and at the latest a second later, for a peer that
 * does not read). */
static void conn_goaway_close(h2conn *c, uint32_t code, const char *debug)
{
    if (c->close_on_goaway) return; /* already on its way */
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->ng),
                          code, (const uint8_t *)debug, strlen(debug));
    c->terminating = true;
    c->close_on_goaway = true;
    c->ka_close_at = uv_now(c->s->loop) + 1000;
}

/* gRPC's keepalive enforcement policy, as grpc-go applies it: pings closer together than
 * ping_min_time_ms (2 h without an open call, unless ping_without_stream) are strikes; the
 * third gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings", which gRPC clients understand as "ping
 * less". A response sent since the last ping forgives the strikes (clients ping while data
 * flows, e.g. for BDP estimation). */
static void on_peer_ping(h2conn *c)
{
    const pc_h2_server_opts *o = &c->s->o;
    if (!o->ping_min_time_ms || c->terminating) return;
    uint64_t now = uv_now(c->s->loop), last = c->peer_ping_at;
    c->peer_ping_at = now;
    if (c->ping_forgiven) {
        c->ping_forgiven = false;
        c->ping_strikes = 0;
        return;
    }
    uint64_t min = c->streams || o->ping_without_stream ? o->ping_min_time_ms : 2 * 3600 * 1000;
    if (!last || now - last >= min || ++c->ping_strikes <= 2) return;
    PC_WARN_RATELIMITED(
        &c->s->ping_log, c->s->log_id,
        "%s: pings more often than keepalive::enforcement_policy allows (min_time %u ms%s), "
        "closing with GOAWAY ENHANCE_YOUR_CALM",
        c->peer, o->ping_min_time_ms, o->ping_without_stream ? "" : ", none without an open call");
    conn_goaway_close(c, NGHTTP2_ENHANCE_YOUR_CALM, "too_many_pings");
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2conn *c = ud;
    c->seen_frame = true;
    if (f->hd.type == NGHTTP2_PING && !(f->hd.flags & NGHTTP2_FLAG_ACK)) on_peer_ping(c);
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    h2stream *st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (!st) return 0;
    st->remote_done = true;
    if (!st->dispatched) st->ready = true;
    return 0;
}

/* A response that ended before the request did: tell the peer to stop sending (RFC 9113
 * §8.1: RST_STREAM with NO_ERROR after a complete response). */
static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2conn *c = ud;
    if (f->hd.type == NGHTTP2_GOAWAY && c->close_on_goaway) c->close_after_write = true;
    if (f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) c->ping_forgiven = true;
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    h2stream *st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (st && !st->remote_done)
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    h2conn *c = ud;
    h2stream *st = nghttp2_session_get_stream_user_data(ng, id);
    if (!st) return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    st->ng_closed = true;
    if (code != NGHTTP2_NO_ERROR && !st->responded)
        PC_DEBUG(c->s->log_id, "%s: stream %d reset: %s", c->peer, id,
                 nghttp2_http2_strerror(code));
    if (!st->dispatched || st->responded) stream_free(st);
    return 0;
}

static ssize_t resp_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    h2stream *st = src->ptr;
    (void)ud;
    size_t n = st->resp_len - st->resp_off;
    if (n > length) n = length;
    if (n) memcpy(buf, st->resp + st->resp_off, n);
    st->resp_off += n;
    if (st->resp_off == st->resp_len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (st->n_trl) {
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            if (nghttp2_submit_trailer(ng, id, st->trl, st->n_trl) != 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
    }
    return (ssize_t)n;
}

/* ---- dispatching ---- */

static void dispatch_ready(h2conn *c)
{
    /* A handler may answer synchronously; c->dispatching keeps that answer from running
     * nghttp2 (whose callbacks free streams) until we are done walking the list. Rescanning from
     * the head is O(streams^2) with streams <= max_concurrent_streams: cheap. */
    c->dispatching = true;
    for (;;) {
        h2stream *st = c->streams;
        while (st && (!st->ready || st->dispatched))
            st = st->next;
        if (!st || c->closing) break;
        st->dispatched = true;
        if (c->n_busy++ == 0) lru_remove(c); /* a call being handled: never evicted */
        c->refs++;                           /* held by the call until pc_h2_respond */
        st->call.method = st->method ? st->method : "";
        st->call.path = st->path ? st->path : "";
        if (!st->body.data) pc_buf_reserve(&st->body, 1);
        st->call.body = st->body.data;
        st->call.body_len = st->body.len;
        c->s->handler(&st->call, c->s->arg);
    }
    c->dispatching = false;
}

const char *pc_h2_call_header(const pc_h2_call *call, const char *name)
{
    for (size_t i = 0; i < call->n_headers; i++)
        if (strcasecmp(call->headers[i].name, name) == 0) return call->headers[i].value;
    return NULL;
}

void pc_h2_respond(pc_h2_call *call, int status, const pc_h2_header *headers, size_t n_headers,
                   const void *body, size_t len, const pc_h2_header *trailers, size_t n_trailers)
{
    h2stream *st = (h2stream *)call;
    h2conn *c = st->c;
    st->responded = true;
    if (--c->n_busy == 0) lru_append(c);
    stream_drop_body(st);                   /* the request body is no longer needed */
    if (st->ng_closed || c->closing) {      /* the peer went away: drop the answer */
        if (st->ng_closed) stream_free(st); /* else conn_free frees it */
        conn_unref(c);
        return;
    }
    char sbuf[8];
    snprintf(sbuf, sizeof sbuf, "%d", status);
    bool trailers_only = !body && n_trailers;
    size_t n = 1 + n_headers + (trailers_only ? n_trailers : 0);
    nghttp2_nv *nva = pc_xmalloc(n * sizeof *nva);
    size_t k = 0;
    nva[k++] = mknv(":status", sbuf);
    for (size_t i = 0; i < n_headers; i++)
        nva[k++] = mknv(headers[i].name, headers[i].value);
    int rc;
    if (trailers_only) {
        for (size_t i = 0; i < n_trailers; i++)
            nva[k++] = mknv(trailers[i].name, trailers[i].value);
        rc = nghttp2_submit_response(c->ng, st->id, nva, k, NULL);
    } else {
        if (len) {
            st->resp = pc_xmalloc(len);
            memcpy(st->resp, body, len);
        }
        st->resp_len = len;
        st->n_trl = n_trailers;
        st->trl = n_trailers ? pc_xcalloc(n_trailers, sizeof *st->trl) : NULL;
        for (size_t i = 0; i < n_trailers; i++) {
            st->trl[i] = mknv(trailers[i].name, trailers[i].value);
            st->trl[i].name = (uint8_t *)pc_xstrdup(trailers[i].name);
            st->trl[i].value = (uint8_t *)pc_xstrdup(trailers[i].value);
        }
        nghttp2_data_provider prd = {.source.ptr = st, .read_callback = resp_read};
        rc = nghttp2_submit_response(c->ng, st->id, nva, k, &prd);
    }
    free(nva);
    if (rc != 0) {
        PC_DEBUG(c->s->log_id, "%s: stream %d: cannot respond: %s", c->peer, st->id,
                 nghttp2_strerror(rc));
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    }
    if (!c->dispatching) { /* else on_read flushes once every call is handed over */
        conn_flush(c);
        conn_timer_update(c);
    }
    conn_unref(c);
}

/* ---- writing ---- */

typedef struct wreq {
    uv_write_t w;
    h2conn *c;
    size_t len;
    uint8_t data[];
} wreq;

static void on_written(uv_write_t *w, int status)
{
    wreq *wr = (wreq *)w;
    h2conn *c = wr->c;
    free(wr);
    c->writing = false;
    if (status < 0) {
        PC_DEBUG(c->s->log_id, "write to %s: %s", c->peer, uv_strerror(status));
        conn_close(c);
    } else if (c->close_after_write) {
        conn_close(c);
    } else {
        conn_flush(c);
        conn_timer_update(c);
    }
    conn_unref(c);
}

static void conn_write(h2conn *c, const uint8_t *data, size_t len);

/* TLS: encrypt what nghttp2 has to send (once the handshake is done) and write the ciphertext
 * waiting in the connection (handshake flights, records, alerts). */
static void tls_flush(h2conn *c)
{
    if (c->closing || c->writing) return;
    bool idle = false;
    if (c->ng && pc_tls_conn_established(c->tls) && !c->close_after_write) {
        pc_buf out = {0};
        while (out.len < WRITE_CHUNK) {
            const uint8_t *d;
            ssize_t n = nghttp2_session_mem_send(c->ng, &d);
            if (n < 0) {
                PC_DEBUG(c->s->log_id, "%s: %s", c->peer, nghttp2_strerror((int)n));
                pc_buf_free(&out);
                conn_close(c);
                return;
            }
            if (n == 0) break;
            pc_buf_append(&out, d, (size_t)n);
        }
        if (out.len && pc_tls_conn_write(c->tls, out.data, out.len)) {
            PC_WARN_RATELIMITED(&c->s->tls_log, c->s->log_id, "TLS write to %s: %s", c->peer,
                                pc_tls_conn_error(c->tls));
            pc_buf_free(&out);
            conn_close(c);
            return;
        }
        idle = !out.len && !nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng);
        pc_buf_free(&out);
    }
    size_t n = pc_tls_conn_pending(c->tls);
    if (!n) {
        if (idle || c->close_after_write) conn_close(c);
        return;
    }
    uint8_t *buf = pc_xmalloc(n);
    n = pc_tls_conn_take(c->tls, buf, n);
    conn_write(c, buf, n);
    free(buf);
}

static void conn_flush(h2conn *c)
{
    if (c->tls) {
        tls_flush(c);
        return;
    }
    if (c->closing || c->writing || !c->ng) return;
    pc_buf out = {0};
    while (out.len < WRITE_CHUNK) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(c->ng, &d);
        if (n < 0) {
            PC_DEBUG(c->s->log_id, "%s: %s", c->peer, nghttp2_strerror((int)n));
            pc_buf_free(&out);
            conn_close(c);
            return;
        }
        if (n == 0) break;
        pc_buf_append(&out, d, (size_t)n);
    }
    if (!out.len) {
        /* nothing to send, nothing more to read: after a GOAWAY, every stream done */
        if (!nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng)) conn_close(c);
        return;
    }
    conn_write(c, out.data, out.len);
    pc_buf_free(&out);
}

/* One uv_write of a copy of data; c->writing until it completes. */
static void conn_write(h2conn *c, const uint8_t *data, size_t len)
{
    wreq *wr = pc_xmalloc(sizeof *wr + len);
    wr->c = c;
    wr->len = len;
    memcpy(wr->data, data, len);
    uv_buf_t b = uv_buf_init((char *)wr->data, (unsigned)wr->len);
    int rc = uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc < 0) {
        PC_DEBUG(c->s->log_id, "write to %s: %s", c->peer, uv_strerror(rc));
        free(wr);
        conn_close(c);
        return;
    }
    c->refs++;
    c->writing = true;
    c->write_since = uv_now(c->s->loop);
}

/* ---- timers: stalled requests, idle connections, peers that do not read ---- */

/* A connection that never sent a frame (not even the preface) is dropped like an idle one, but
 * sooner. */
static uint64_t idle_ms(const h2conn *c)
{
    const pc_h2_server_opts *o = &c->s->o;
    if (c->seen_frame || o->read_timeout_ms >= o->idle_timeout_ms) return o->idle_timeout_ms;
    return o->read_timeout_ms;
}

/* Keepalive: PING a connection nothing arrived from for keepalive_time_ms; anything arriving
 * (the ack or other frames, as grpc-go counts it: an ack can queue behind a large upload)
 * answers it; nothing within keepalive_timeout_ms: GOAWAY and close. */
static void keepalive_check(h2conn *c, uint64_t now)
{
    const pc_h2_server_opts *o = &c->s->o;
    if (!o->keepalive_time_ms || c->ka_close_at) return;
    if (c->ping_sent && now - c->ping_sent >= o->keepalive_timeout_ms) {
        PC_INFO_RATELIMITED(&c->s->ping_log, c->s->log_id,
                            "%s: keepalive ping not answered within %u ms, closing", c->peer,
                            o->keepalive_timeout_ms);
        conn_goaway_close(c, NGHTTP2_NO_ERROR, "keepalive ping timeout");
    } else if (!c->ping_sent && now - c->last_read >= o->keepalive_time_ms) {
        static const uint8_t opaque[8] = "profcol";
        PC_DEBUG(c->s->log_id, "%s: quiet for %u ms, keepalive ping", c->peer,
                 o->keepalive_time_ms);
        nghttp2_submit_ping(c->ng, NGHTTP2_FLAG_NONE, opaque);
        c->ping_sent = now;
    }
}

static void on_timer(uv_timer_t *t)
{
    h2conn *c = t->data;
    if (c->closing) return;
    const pc_h2_server_opts *o = &c->s->o;
    uint64_t now = uv_now(c->s->loop);
    if ((c->writing && now - c->write_since >= o->idle_timeout_ms) ||
        (c->ka_close_at && now >= c->ka_close_at)) {
        PC_DEBUG(c->s->log_id, "%s: not reading our writes%s, closing", c->peer,
                 c->ka_close_at ? " (GOAWAY)" : "");
        conn_close(c);
        return;
    }
    keepalive_check(c, now);
    if (!c->streams && !c->terminating && now - c->idle_since >= idle_ms(c)) {
        PC_DEBUG(c->s->log_id, "%s: idle, closing", c->peer);
        c->terminating = true;
        nghttp2_session_terminate_session(c->ng, NGHTTP2_NO_ERROR); /* GOAWAY, then close */
    }
    for (h2stream *st = c->streams; st; st = st->next)
        if (!st->dispatched && !st->ng_closed && !st->cancelled &&
            now - st->start_ms >= o->read_timeout_ms) {
            PC_DEBUG(c->s->log_id, "%s: stream %d not received in time", c->peer, st->id);
            st->cancelled = true;
            nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
        }
    conn_flush(c);
    conn_timer_update(c);
}

static void conn_timer_update(h2conn *c)
{
    if (c->closing) return;
    const pc_h2_server_opts *o = &c->s->o;
    uint64_t now = uv_now(c->s->loop), due = UINT64_MAX;
    if (!c->streams) {
        if (!c->idle_since) c->idle_since = now;
        if (!c->terminating) due = c->idle_since + idle_ms(c);
    } else {
        c->idle_since = 0;
    }
    for (h2stream *st = c->streams; st; st = st->next)
        if (!st->dispatched && !st->ng_closed && !st->cancelled &&
            st->start_ms + o->read_timeout_ms < due)
            due = st->start_ms + o->read_timeout_ms;
    if (c->writing && c->write_since + o->idle_timeout_ms < due)
        due = c->write_since + o->idle_timeout_ms;
    uint64_t ka = UINT64_MAX;
    if (c->ka_close_at)
        ka = c->ka_close_at;
    else if (o->keepalive_time_ms)
        ka = c->ping_sent ? c->ping_sent + o->keepalive_timeout_ms
                          : c->last_read + o->keepalive_time_ms;
    if (ka < due) due = ka;
    if (due == UINT64_MAX) {
        uv_timer_stop(&c->timer);
        return;
    }
    /* at least 1 ms: a 0 ms timer restarted from its own callback would run again before the
     * loop reads or writes anything */
    uv_timer_start(&c->timer, on_timer, due > now ? due - now : 1, 0);
}

/* ---- reading ---- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    h2conn *c = h->data;
    *buf = uv_buf_init(c->s->rbuf, sizeof c->s->rbuf);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    h2conn *c = stream->data;
    if (nread < 0) {
        if (nread != UV_EOF)
            PC_DEBUG(c->s->log_id, "read from %s: %s", c->peer, uv_strerror((int)nread));
        conn_close(c);
        return;
    }
    if (nread == 0 || c->closing || c->close_after_write) return;
    c->last_read = uv_now(c->s->loop);
    c->ping_sent = 0; /* the peer is alive: that answers a keepalive ping */
    c->refs++;        /* a synchronous answer must not free c under us */
    const uint8_t *data = (const uint8_t *)buf->base;
    size_t len = (size_t)nread;
    bool tls_closed = false;
    if (c->tls) {
        pc_tls_conn_feed(c->tls, data, len);
        if (!pc_tls_conn_established(c->tls)) {
            int hs = pc_tls_conn_handshake(c->tls);
            if (hs == PC_TLS_ERROR) {
                PC_WARN_RATELIMITED(&c->s->tls_log, c->s->log_id,
                                    "TLS handshake with %s failed: %s", c->peer,
                                    pc_tls_conn_error(c->tls));
                c->close_after_write = true; /* send the alert OpenSSL prepared, then close */
                uv_read_stop((uv_stream_t *)&c->tcp);
                conn_flush(c);
                conn_unref(c);
                return;
            }
            if (hs == PC_TLS_WANT) {
                conn_flush(c);
                conn_unref(c);
                return;
            }
            const char *alpn = pc_tls_conn_alpn(c->tls);
            if (strcmp(alpn, "h2") != 0)
                PC_DEBUG(c->s->log_id, "%s: TLS without ALPN h2 (%s), speaking HTTP/2 anyway",
                         c->peer, *alpn ? alpn : "none");
        }
        c->plain.len = 0;
        int rc = pc_tls_conn_read(c->tls, &c->plain);
        if (rc == PC_TLS_ERROR) {
            PC_DEBUG(c->s->log_id, "TLS read from %s: %s", c->peer, pc_tls_conn_error(c->tls));
            conn_close(c);
            conn_unref(c);
            return;
        }
        tls_closed = rc == PC_TLS_CLOSED;
        data = c->plain.data;
        len = c->plain.len;
    }
    ssize_t rv = len ? nghttp2_session_mem_recv(c->ng, data, len) : 0;
    if (c->plain.cap > 2 * READ_CHUNK) pc_buf_free(&c->plain);
    if (rv < 0) {
        PC_DEBUG(c->s->log_id, "%s: %s", c->peer, nghttp2_strerror((int)rv));
        if (rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC)
            PC_INFO_RATELIMITED(&c->s->proto_log, c->s->log_id,
                                "%s: not an HTTP/2 (h2c prior knowledge) client, closing", c->peer);
        conn_close(c);
    } else {
        dispatch_ready(c);
        conn_flush(c);
        conn_timer_update(c);
        /* close_notify: the peer sends nothing more */
        if (tls_closed && !c->streams && !c->closing) conn_close(c);
    }
    conn_unref(c);
}

/* ---- accepting ---- */

/* Close the connection idle or incomplete longest (no call of it being handled): GOAWAY first,
 * so a client that was merely idle knows to reconnect rather than fail a call. */
static bool evict_one(pc_h2_server *s, const char *why, const char *for_peer)
{
    h2conn *v = s->lru_head;
    if (!v) return false;
    s->st->evicted++;
    PC_WARN_RATELIMITED(&s->evict_log, s->log_id,
                        "%s: closed %s (%s, the longest) to make room for %s", why, v->peer,
                        v->streams      ? "call incomplete"
                        : v->seen_frame ? "idle"
                                        : "no preface",
                        for_peer);
    if (v->ng && v->seen_frame && !v->terminating) {
        nghttp2_submit_goaway(v->ng, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(v->ng), NGHTTP2_NO_ERROR,
                              (const uint8_t *)"evicted", 7);
        conn_flush(v); /* a socket write is tried at once; what does not fit is dropped */
    }
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
    pc_h2_server *s = arg;
    h2conn *c = pc_xcalloc(1, sizeof *c);
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
    if (s->shutting_down) {
        conn_close(c);
        return;
    }
    if (s->n_active >= s->o.max_connections) {
        char why[64];
        snprintf(why, sizeof why, "connection limit %u reached", s->o.max_connections);
        if (!evict_one(s, why, c->peer)) {
            s->st->refused++;
            PC_WARN_RATELIMITED(&s->refuse_log, s->log_id,
                                "connection limit %u reached, every connection busy with a "
                                "call: closing %s",
                                s->o.max_connections, c->peer);
            conn_close(c);
            return;
        }
    }
    s->st->open = ++s->n_active;
    c->counted = true;
    lru_append(c);
    c->last_read = uv_now(s->loop);
    uv_tcp_nodelay(&c->tcp, 1);
    if (s->o.tls) c->tls = pc_tls_conn_new(s->o.tls, NULL);
    if (nghttp2_session_server_new2(&c->ng, s->cbs, c, s->opt) != 0) {
        conn_close(c);
        return;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->o.max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)s->o.max_header_bytes},
    };
    nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    size_t win = s->o.max_conn_body_bytes < (1u << 30) ? s->o.max_conn_body_bytes : (1u << 30);
    if (win > 65535)
        nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0, (int32_t)win);
    rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0) {
        conn_close(c);
        return;
    }
    conn_flush(c);
    conn_timer_update(c);
}

static void flush_logs(pc_h2_server *s)
{
    pc_log_limiter_flush(&s->refuse_log, PC_LOG_WARN, s->log_id,
                         "connections refused (limit reached, every connection busy)");
    pc_log_limiter_flush(&s->evict_log, PC_LOG_WARN, s->log_id, "connections closed to make room");
    pc_log_limiter_flush(&s->proto_log, PC_LOG_INFO, s->log_id, "non-HTTP/2 clients closed");
    pc_log_limiter_flush(&s->tls_log, PC_LOG_WARN, s->log_id, "TLS failures");
    pc_log_limiter_flush(&s->ping_log, PC_LOG_WARN, s->log_id, "keepalive closes");
}

static void on_tick(uv_timer_t *t)
{
    flush_logs(t->data);
}

/* ---- public API ---- */

pc_h2_server *pc_h2_server_new(uv_loop_t *loop, const pc_h2_server_opts *opts,
                               pc_h2_handler handler, void *arg)
{
    pc_h2_server *s = pc_xcalloc(1, sizeof *s);
    s->loop = loop;
    s->o = *opts;
    s->host = pc_xstrdup(opts->host && opts->host[0] ? opts->host : "localhost");
    s->log_id = pc_xstrdup(opts->log_id ? opts->log_id : "h2");
    s->o.host = s->host;
    s->o.log_id = s->log_id;
    if (!s->o.max_body_bytes) s->o.max_body_bytes = (4u << 20) + 5;
    if (!s->o.max_conn_body_bytes) s->o.max_conn_body_bytes = 4 * s->o.max_body_bytes;
    if (!s->o.max_header_bytes) s->o.max_header_bytes = 64u << 10;
    if (!s->o.max_concurrent_streams) s->o.max_concurrent_streams = 100;
    if (!s->o.idle_timeout_ms) s->o.idle_timeout_ms = 300000;
    if (!s->o.read_timeout_ms) s->o.read_timeout_ms = 30000;
    if (!s->o.max_connections) s->o.max_connections = 1024;
    if (!s->o.keepalive_timeout_ms) s->o.keepalive_timeout_ms = 20000;
    s->st = s->o.stats ? s->o.stats : &s->own_stats;
    s->handler = handler;
    s->arg = arg;
    uv_timer_init(loop, &s->tick);
    s->tick.data = s;
    nghttp2_session_callbacks_new(&s->cbs);
    nghttp2_session_callbacks_set_on_begin_headers_callback(s->cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(s->cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(s->cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(s->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(s->cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(s->cbs, on_stream_close);
    nghttp2_option_new(&s->opt);
    return s;
}

int pc_h2_server_start(pc_h2_server *s, char *err, size_t errlen)
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
    return 0;
}

int pc_h2_server_port(const pc_h2_server *s)
{
    return s->port;
}

static void on_listener_closed(void *arg)
{
    pc_h2_server *s = arg;
    s->closing_handles--;
    server_maybe_done(s);
}

static void on_tick_closed(uv_handle_t *h)
{
    on_listener_closed(h->data);
}

void pc_h2_server_shutdown(pc_h2_server *s, void (*done)(void *arg), void *arg)
{
    if (s->shutting_down) return;
    s->shutting_down = true;
    s->done = done;
    s->done_arg = arg;
    /* GOAWAY: streams already started finish; the connection closes when none is left */
    for (h2conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->closing || !c->ng) continue;
        nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->ng), NGHTTP2_NO_ERROR,
                              NULL, 0);
        conn_flush(c);
    }
    flush_logs(s);
    /* both counted before either closes */
    s->closing_handles = 1 + (s->listener != NULL);
    uv_close((uv_handle_t *)&s->tick, on_tick_closed);
    if (s->listener) pc_listener_close(s->listener, on_listener_closed, s);
}
