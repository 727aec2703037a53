/* The HTTP/2 server (see h2_server.h): nghttp2 for the protocol, on the connection core
 * (net/conn_server.h) for sockets, TLS, limits and timeouts.
 *
 * Plaintext from the core goes to nghttp2_session_mem_recv; its callbacks build one h2stream
 * per request stream. A stream whose request is complete (END_STREAM) is marked ready and
 * handed to the handler after mem_recv returns, never from inside nghttp2. Output is pulled with
 * nghttp2_session_mem_send into one write at a time (a peer that stops reading stops costing us
 * more than what nghttp2 queues, which it bounds itself).
 *
 * Lifetimes: every dispatched, unanswered call holds a reference on its connection. A stream is
 * freed when nghttp2 closes it, except that a dispatched call lives on until pc_h2_respond. */
#include "net/h2_server.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/log.h"
#include "net/conn_server.h"
#include "net/tls.h"

enum {
    WRITE_CHUNK = 256 * 1024, /* gathered from mem_send per write */
    STREAM_WINDOW = 1 << 20,  /* SETTINGS_INITIAL_WINDOW_SIZE */
    W_FRAMES = 1,             /* the tag of our writes */
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
    bool ng_closed;       /* nghttp2 closed the stream */
    bool remote_done;     /* the peer sent END_STREAM */
    bool cancelled;       /* we reset it for taking too long */
    uint64_t progress_ms; /* responded: when its response last moved (flow control lets it) */
    /* the response body and trailers, read by nghttp2 while it sends */
    uint8_t *resp;
    size_t resp_len, resp_off;
    nghttp2_nv *trl;
    size_t n_trl;
};

struct h2conn {
    pc_conn base;    /* first: the core's connection */
    unsigned n_busy; /* calls dispatched and not yet answered */
    nghttp2_session *ng;
    h2stream *streams;
    size_t buffered; /* body bytes held by this connection's streams */
    bool writing, dispatching, terminating;
    bool seen_frame; /* until the peer's first frame, read_timeout bounds an idle connection */
    /* keepalive: our PING and the peer's */
    uint64_t ping_sent;    /* our PING awaits an answer since then (0: none) */
    uint64_t ka_close_at;  /* GOAWAY is on its way; close by then even if it never leaves */
    uint64_t peer_ping_at; /* the peer's last PING (0: none yet) */
    int ping_strikes;
    bool ping_forgiven;     /* we sent HEADERS or DATA since the peer's last PING */
    bool close_on_goaway;   /* close as soon as our GOAWAY is written */
    bool close_after_write; /* that GOAWAY is in the output */
};

struct pc_h2_server {
    pc_conn_server *core;
    pc_h2_server_opts o;
    const char *log_id; /* the core's */
    pc_h2_handler handler;
    void *arg;
    /* per-connection lines a peer can trigger at will */
    pc_log_limiter *proto_log, *ping_log;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *opt;
};

static void conn_flush(h2conn *c);
static void conn_timer_update(h2conn *c);

static pc_h2_server *srv(const h2conn *c)
{
    return c->base.env->user;
}

static uint64_t now_ms(const h2conn *c)
{
    return uv_now(c->base.env->loop);
}

/* ---- streams ---- */

static nghttp2_nv mknv(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                        NGHTTP2_NV_FLAG_NONE};
}

static h2stream *stream_new(h2conn *c, int32_t id)
{
    h2stream *st = pc_xcalloc(1, sizeof *st);
    st->c = c;
    st->id = id;
    st->start_ms = now_ms(c);
    snprintf(st->call.peer, sizeof st->call.peer, "%s", c->base.peer);
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
    if (st->hdr_bytes > srv(c)->o.max_header_bytes) {
        PC_DEBUG(srv(c)->log_id, "%s: stream %d: headers exceed %zu bytes", c->base.peer, st->id,
                 srv(c)->o.max_header_bytes);
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
    const pc_h2_server_opts *o = &srv(c)->o;
    if (st->body.len + len > o->max_body_bytes || c->buffered + len > o->max_conn_body_bytes) {
        PC_DEBUG(srv(c)->log_id, "%s: stream %d: body over the %s limit", c->base.peer, id,
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
    c->ka_close_at = now_ms(c) + 1000;
}

/* gRPC's keepalive enforcement policy, as grpc-go applies it: pings closer together than
 * ping_min_time_ms (2 h without an open call, unless ping_without_stream) are strikes; the
 * third gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings", which gRPC clients understand as "ping
 * less". A response sent since the last ping forgives the strikes (clients ping while data
 * flows, e.g. for BDP estimation). */
static void on_peer_ping(h2conn *c)
{
    const pc_h2_server_opts *o = &srv(c)->o;
    if (!o->ping_min_time_ms || c->terminating) return;
    uint64_t now = now_ms(c), last = c->peer_ping_at;
    c->peer_ping_at = now;
    if (c->ping_forgiven) {
        c->ping_forgiven = false;
        c->ping_strikes = 0;
        return;
    }
    uint64_t min = c->streams || o->ping_without_stream ? o->ping_min_time_ms : 2 * 3600 * 1000;
    if (!last || now - last >= min || ++c->ping_strikes <= 2) return;
    PC_WARN_RATELIMITED(
        srv(c)->ping_log, srv(c)->log_id,
        "%s: pings more often than keepalive::enforcement_policy allows (min_time %u ms%s), "
        "closing with GOAWAY ENHANCE_YOUR_CALM",
        c->base.peer, o->ping_min_time_ms,
        o->ping_without_stream ? "" : ", none without an open call");
    conn_goaway_close(c, NGHTTP2_ENHANCE_YOUR_CALM, "too_many_pings");
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2conn *c = ud;
    if (!c->seen_frame) pc_conn_spoke(&c->base); /* the idle clock's quiet spell is over */
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
        PC_DEBUG(srv(c)->log_id, "%s: stream %d reset: %s", c->base.peer, id,
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
    if (n) {
        memcpy(buf, st->resp + st->resp_off, n);
        st->progress_ms = now_ms(st->c);
    }
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
        if (!st || c->base.closing) break;
        st->dispatched = true;
        if (c->n_busy++ == 0) pc_conn_busy(&c->base, true); /* a call handled: not evicted */
        pc_conn_ref(&c->base); /* held by the call until pc_h2_respond */
        st->call.method = st->method ? st->method : "";
        st->call.path = st->path ? st->path : "";
        if (!st->body.data) pc_buf_reserve(&st->body, 1);
        st->call.body = st->body.data;
        st->call.body_len = st->body.len;
        srv(c)->handler(&st->call, srv(c)->arg);
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
    st->progress_ms = now_ms(c);
    if (--c->n_busy == 0) pc_conn_busy(&c->base, false);
    stream_drop_body(st);                   /* the request body is no longer needed */
    if (st->ng_closed || c->base.closing) { /* the peer went away: drop the answer */
        if (st->ng_closed) stream_free(st); /* else conn_free frees it */
        pc_conn_unref(&c->base);
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
        PC_DEBUG(srv(c)->log_id, "%s: stream %d: cannot respond: %s", c->base.peer, st->id,
                 nghttp2_strerror(rc));
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    }
    if (!c->dispatching) { /* else on_read flushes once every call is handed over */
        conn_flush(c);
        conn_timer_update(c);
    }
    pc_conn_unref(&c->base);
}

/* ---- writing ---- */

/* Write what nghttp2 has to send (up to WRITE_CHUNK, one write at a time); with nothing to send
 * and nothing more to read (after a GOAWAY, every stream done), finish. The core sends the TLS
 * handshake; our frames wait for its end. */
static void conn_flush(h2conn *c)
{
    if (c->base.closing || c->base.finishing || c->writing || !c->ng) return;
    if (c->base.tls && !pc_tls_conn_established(c->base.tls)) return;
    pc_buf out = {0};
    while (out.len < WRITE_CHUNK) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(c->ng, &d);
        if (n < 0) {
            PC_DEBUG(srv(c)->log_id, "%s: %s", c->base.peer, nghttp2_strerror((int)n));
            pc_buf_free(&out);
            pc_conn_close(&c->base);
            return;
        }
        if (n == 0) break;
        pc_buf_append(&out, d, (size_t)n);
    }
    bool over = c->close_after_write;
    if (out.len) {
        if (pc_conn_write(&c->base, out.data, out.len, NULL, 0, W_FRAMES) == 0) c->writing = true;
    } else if (!nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng)) {
        over = true;
    }
    pc_buf_free(&out);
    if (over) pc_conn_finish(&c->base, false);
}

/* ---- timers: stalled requests, keepalive ---- */

/* Anything arriving since our PING answers it (as grpc-go counts it: an ack can queue behind a
 * large upload); a PING is only sent after a quiet spell, so a later read is never older. */
static void ping_check_answered(h2conn *c)
{
    if (c->ping_sent && c->base.last_read >= c->ping_sent) c->ping_sent = 0;
}

/* Keepalive: PING a connection nothing arrived from for keepalive_time_ms; nothing within
 * keepalive_timeout_ms: GOAWAY and close. */
static void keepalive_check(h2conn *c, uint64_t now)
{
    const pc_h2_server_opts *o = &srv(c)->o;
    if (!o->keepalive_time_ms || c->ka_close_at) return;
    ping_check_answered(c);
    if (c->ping_sent && now - c->ping_sent >= o->keepalive_timeout_ms) {
        PC_INFO_RATELIMITED(srv(c)->ping_log, srv(c)->log_id,
                            "%s: keepalive ping not answered within %u ms, closing", c->base.peer,
                            o->keepalive_timeout_ms);
        conn_goaway_close(c, NGHTTP2_NO_ERROR, "keepalive ping timeout");
    } else if (!c->ping_sent && now - c->base.last_read >= o->keepalive_time_ms) {
        static const uint8_t opaque[8] = "profcol";
        PC_DEBUG(srv(c)->log_id, "%s: quiet for %u ms, keepalive ping", c->base.peer,
                 o->keepalive_time_ms);
        nghttp2_submit_ping(c->ng, NGHTTP2_FLAG_NONE, opaque);
        c->ping_sent = now;
    }
}

/* A response that has not moved for idle_timeout: the peer keeps its flow-control window shut. */
static bool response_stalled(const h2stream *st, uint64_t now, const pc_h2_server_opts *o)
{
    return st->responded && !st->ng_closed && !st->cancelled &&
           now - st->progress_ms >= o->idle_timeout_ms;
}

static void conn_timeout(pc_conn *pc)
{
    h2conn *c = (h2conn *)pc;
    const pc_h2_server_opts *o = &srv(c)->o;
    uint64_t now = now_ms(c);
    if (c->ka_close_at && now >= c->ka_close_at) {
        PC_DEBUG(srv(c)->log_id, "%s: not reading our writes (GOAWAY), closing", c->base.peer);
        pc_conn_close(pc);
        return;
    }
    keepalive_check(c, now);
    for (h2stream *st = c->streams; st; st = st->next)
        if (!st->dispatched && !st->ng_closed && !st->cancelled &&
            now - st->start_ms >= o->read_timeout_ms) {
            PC_DEBUG(srv(c)->log_id, "%s: stream %d not received in time", c->base.peer, st->id);
            st->cancelled = true;
            nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
        } else if (response_stalled(st, now, o)) {
            /* the peer does not open its window: as an HTTP/1.1 response nobody reads, it is
             * given up after idle_timeout (the core's write timeout), and the connection, with
             * no stream left, is then reaped as an idle one */
            PC_DEBUG(srv(c)->log_id, "%s: stream %d: response not taken for %u ms, reset",
                     c->base.peer, st->id, o->idle_timeout_ms);
            st->cancelled = true;
            nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
        }
    conn_flush(c);
    conn_timer_update(c);
}

/* The idle clock runs while no stream is open (the core closes writes not read); our deadline
 * is the earliest of the streams' and keepalive's. */
static void conn_timer_update(h2conn *c)
{
    if (c->base.closing) return;
    const pc_h2_server_opts *o = &srv(c)->o;
    pc_conn_idle(&c->base, !c->streams && !c->terminating);
    uint64_t due = UINT64_MAX;
    for (h2stream *st = c->streams; st; st = st->next) {
        if (!st->dispatched && !st->ng_closed && !st->cancelled &&
            st->start_ms + o->read_timeout_ms < due)
            due = st->start_ms + o->read_timeout_ms;
        if (st->responded && !st->ng_closed && !st->cancelled &&
            st->progress_ms + o->idle_timeout_ms < due)
            due = st->progress_ms + o->idle_timeout_ms;
    }
    uint64_t ka = UINT64_MAX;
    if (c->ka_close_at) {
        ka = c->ka_close_at;
    } else if (o->keepalive_time_ms) {
        ping_check_answered(c);
        ka = c->ping_sent ? c->ping_sent + o->keepalive_timeout_ms
                          : c->base.last_read + o->keepalive_time_ms;
    }
    if (ka < due) due = ka;
    pc_conn_timer(&c->base, due == UINT64_MAX ? 0 : due);
}

/* ---- the core's callbacks ---- */

static int conn_open(pc_conn *pc)
{
    h2conn *c = (h2conn *)pc;
    pc_h2_server *s = srv(c);
    if (nghttp2_session_server_new2(&c->ng, s->cbs, c, s->opt) != 0) return PC_EIO;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->o.max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)s->o.max_header_bytes},
    };
    nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    size_t win = s->o.max_conn_body_bytes < (1u << 30) ? s->o.max_conn_body_bytes : (1u << 30);
    if (win > 65535)
        nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0, (int32_t)win);
    conn_flush(c);
    conn_timer_update(c);
    return 0;
}

static void conn_data(pc_conn *pc, const uint8_t *p, size_t n)
{
    h2conn *c = (h2conn *)pc;
    ssize_t rv = n ? nghttp2_session_mem_recv(c->ng, p, n) : 0;
    if (rv < 0) {
        PC_DEBUG(srv(c)->log_id, "%s: %s", c->base.peer, nghttp2_strerror((int)rv));
        if (rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC)
            PC_INFO_RATELIMITED(srv(c)->proto_log, srv(c)->log_id,
                                "%s: not an HTTP/2 (h2c prior knowledge) client, closing",
                                c->base.peer);
        pc_conn_close(pc);
        return;
    }
    dispatch_ready(c);
    conn_flush(c);
    conn_timer_update(c);
}

/* TLS close_notify: the peer sends nothing more; calls in progress are still answered. */
static void conn_peer_done(pc_conn *pc)
{
    if (!((h2conn *)pc)->streams) pc_conn_close(pc);
}

static void conn_written(pc_conn *pc, int tag)
{
    h2conn *c = (h2conn *)pc;
    (void)tag;
    c->writing = false;
    conn_flush(c);
    conn_timer_update(c);
}

static void conn_idle(pc_conn *pc)
{
    h2conn *c = (h2conn *)pc;
    PC_DEBUG(srv(c)->log_id, "%s: idle, closing", c->base.peer);
    c->terminating = true;
    nghttp2_session_terminate_session(c->ng, NGHTTP2_NO_ERROR); /* GOAWAY, then close */
    conn_flush(c);
    conn_timer_update(c);
}

/* Evicted: GOAWAY first, so a client that was merely idle knows to reconnect rather than fail a
 * call. */
static void conn_evict(pc_conn *pc)
{
    h2conn *c = (h2conn *)pc;
    if (!c->ng || !c->seen_frame || c->terminating) return;
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->ng),
                          NGHTTP2_NO_ERROR, (const uint8_t *)"evicted", 7);
    conn_flush(c); /* a socket write is tried at once; what does not fit is dropped */
}

static const char *conn_state(const pc_conn *pc)
{
    const h2conn *c = (const h2conn *)pc;
    return c->streams ? "call incomplete" : c->seen_frame ? "idle" : "no preface";
}

/* GOAWAY: streams already started finish; the connection closes when none is left. */
static void conn_shutdown(pc_conn *pc)
{
    h2conn *c = (h2conn *)pc;
    if (!c->ng) return;
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
    conn_flush(c);
}

static void conn_free(pc_conn *pc)
{
    h2conn *c = (h2conn *)pc;
    nghttp2_session_del(c->ng);
    c->ng = NULL;
    while (c->streams)
        stream_free(c->streams); /* none is dispatched: those hold references */
}

static void server_stopped(void *arg)
{
    pc_h2_server *s = arg;
    PC_INFO(s->log_id, "gRPC server stopped");
    nghttp2_session_callbacks_del(s->cbs);
    nghttp2_option_del(s->opt);
    free(s);
}

static const pc_conn_proto h2_proto = {
    .conn_size = sizeof(h2conn),
    .open = conn_open,
    .data = conn_data,
    .peer_done = conn_peer_done,
    .written = conn_written,
    .timeout = conn_timeout,
    .idle = conn_idle,
    .evict = conn_evict,
    .state = conn_state,
    .shutdown = conn_shutdown,
    .free = conn_free,
    .stopped = server_stopped,
};

/* ---- public API ---- */

pc_h2_server *pc_h2_server_new(uv_loop_t *loop, const pc_h2_server_opts *opts,
                               pc_h2_handler handler, void *arg)
{
    pc_h2_server *s = pc_xcalloc(1, sizeof *s);
    s->o = *opts;
    s->o.host = NULL; /* the core keeps its own copies of both */
    s->o.log_id = NULL;
    if (!s->o.max_body_bytes) s->o.max_body_bytes = (4u << 20) + 5;
    if (!s->o.max_conn_body_bytes) s->o.max_conn_body_bytes = 4 * s->o.max_body_bytes;
    if (!s->o.max_header_bytes) s->o.max_header_bytes = 64u << 10;
    if (!s->o.max_concurrent_streams) s->o.max_concurrent_streams = 100;
    if (!s->o.idle_timeout_ms) s->o.idle_timeout_ms = 300000;
    if (!s->o.read_timeout_ms) s->o.read_timeout_ms = 30000;
    if (!s->o.keepalive_timeout_ms) s->o.keepalive_timeout_ms = 20000;
    s->handler = handler;
    s->arg = arg;
    nghttp2_session_callbacks_new(&s->cbs);
    nghttp2_session_callbacks_set_on_begin_headers_callback(s->cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(s->cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(s->cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(s->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(s->cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(s->cbs, on_stream_close);
    nghttp2_option_new(&s->opt);
    /* a connection that never sent a frame (not even the preface) is dropped like an idle one,
     * but sooner; reads are not paused under memory pressure (keepalive would fail) */
    pc_conn_server_opts co = {
        .host = opts->host,
        .port = opts->port,
        .log_id = opts->log_id ? opts->log_id : "h2",
        .max_connections = opts->max_connections,
        .quiet_timeout_ms = s->o.read_timeout_ms < s->o.idle_timeout_ms ? s->o.read_timeout_ms
                                                                        : s->o.idle_timeout_ms,
        .idle_timeout_ms = s->o.idle_timeout_ms,
        .write_timeout_ms = s->o.idle_timeout_ms,
        .tls = opts->tls,
        .alpn = "h2",
        .stats = opts->stats,
        .busy_with = "call",
    };
    s->core = pc_conn_server_new(loop, &co, &h2_proto, s);
    s->log_id = pc_conn_server_log_id(s->core);
    s->proto_log = pc_conn_server_limiter(s->core, PC_LOG_INFO, "non-HTTP/2 clients closed");
    s->ping_log = pc_conn_server_limiter(s->core, PC_LOG_WARN, "keepalive closes");
    return s;
}

int pc_h2_server_start(pc_h2_server *s, pc_error *e)
{
    char bound[80];
    return pc_conn_server_start(s->core, bound, sizeof bound, e);
}

int pc_h2_server_port(const pc_h2_server *s)
{
    return pc_conn_server_port(s->core);
}

void pc_h2_server_shutdown(pc_h2_server *s, void (*done)(void *arg), void *arg)
{
    pc_conn_server_shutdown(s->core, done, arg);
}
