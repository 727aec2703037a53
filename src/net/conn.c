/* One connection under a protocol (see conn.h): socket, TLS pump, reads, writes, deadlines and
 * closing. It knows nothing of its owner but the pc_conn_env they share; the owner's side of a
 * change (closing, lingering, freed) goes through the env's hooks. */
#include "net/conn.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "net/listener.h"
#include "net/tls.h"

typedef struct wreq {
    uv_write_t w;
    pc_conn *c;
    int tag;
    char data[];
} wreq;

enum { QUIET = -1 }; /* a failure not worth a line (the peer left while we lingered) */

static void rearm(pc_conn *c);
static void read_update(pc_conn *c);
static void tls_failed(pc_conn *c, const char *why);

/* ---- references and closing ---- */

static void conn_free(pc_conn *c)
{
    pc_conn_env *env = c->env;
    if (env->proto->free) env->proto->free(c);
    pc_tls_conn_free(c->tls);
    pc_buf_free(&c->plain);
    if (c->prev)
        c->prev->next = c->next;
    else
        env->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c);
    env->on_free(env); /* the owner may end right there */
}

void pc_conn_ref(pc_conn *c)
{
    c->refs++;
}

void pc_conn_unref(pc_conn *c)
{
    if (--c->refs == 0) conn_free(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    pc_conn_unref(h->data);
}

void pc_conn_close(pc_conn *c)
{
    if (c->closing) return;
    c->closing = true;
    if (c->env->on_close) c->env->on_close(c);
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    if (uv_is_active((uv_handle_t *)&c->wrote)) { /* a completion that will not run now */
        c->writes--;
        c->refs--; /* never the last: the handles' own are held until they are closed */
    }
    uv_close((uv_handle_t *)&c->wrote, on_handle_closed);
}

/* c failed: the protocol hears why (or the line is logged at lvl, rate-limited with l), then c
 * closes. */
static void conn_fail(pc_conn *c, int err, int lvl, pc_log_limiter *l, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void conn_fail(pc_conn *c, int err, int lvl, pc_log_limiter *l, const char *fmt, ...)
{
    if (c->closing) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->env->proto->error)
        c->env->proto->error(c, err, msg);
    else if (l)
        pc_log_limited(l, (pc_log_level)lvl, c->env->log_id, "%s", msg);
    else if (lvl != QUIET)
        pc_log((pc_log_level)lvl, c->env->log_id, "%s", msg);
    pc_conn_close(c);
}

/* ---- writing ---- */

static void on_shutdown(uv_shutdown_t *r, int status)
{
    (void)status;
    pc_conn_unref(r->data);
}

/* The last writes are out. Half-close and drain for a while rather than close: closing with
 * unread input makes the kernel send RST, and the client could lose the answer just written (a
 * 413 while it is still uploading). */
static void finished(pc_conn *c)
{
    pc_conn_env *env = c->env;
    if (!env->linger_ms || env->stopping) {
        pc_conn_close(c);
        return;
    }
    c->lingering = true;
    if (env->on_linger) env->on_linger(c);
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shutdown) == 0) c->refs++;
    c->want_read = true;
    read_update(c);
    c->linger_at = uv_now(env->loop) + env->linger_ms;
    rearm(c);
}

/* One write is out (status 0) or failed. */
static void write_done(pc_conn *c, int tag, int status)
{
    if (--c->writes == 0) c->write_at = 0;
    if (status < 0) {
        conn_fail(c, status, PC_LOG_DEBUG, NULL, "write to %s: %s", c->name, uv_strerror(status));
    } else if (!c->closing) {
        if (tag && c->env->proto->written) c->env->proto->written(c, tag);
        if (c->finishing && !c->writes && !c->closing && !c->lingering)
            finished(c);
        else
            rearm(c);
    }
    pc_conn_unref(c);
}

static void on_written(uv_write_t *w, int status)
{
    wreq *wr = (wreq *)w;
    pc_conn *c = wr->c;
    int tag = wr->tag;
    free(wr);
    write_done(c, tag, status);
}

static void on_wrote(uv_idle_t *h)
{
    pc_conn *c = h->data;
    uv_idle_stop(h);
    write_done(c, c->wrote_tag, 0);
}

/* With no write in flight, write bufs at once (uv_try_write): a small answer usually fits the
 * socket whole, and then needs no uv_write, no copy, no write deadline and no epoll_ctl (libuv
 * re-arms the socket after each uv_write). Its completion runs from an idle handle at the loop's
 * next turn, before it polls: where a uv_write's completion runs, after the caller returned
 * (bench/README.md "Small requests, fifth pass"). How many bytes went (the caller uv_writes the
 * rest; order holds, as nothing else is in flight); all of them: done. */
static size_t write_now(pc_conn *c, const uv_buf_t *bufs, unsigned n, size_t total, int tag)
{
    if (c->writes || !total) return 0;
    int k = uv_try_write((uv_stream_t *)&c->tcp, bufs, n);
    if (k <= 0) return 0; /* EAGAIN; an error shows again in the uv_write */
    if ((size_t)k < total) return (size_t)k;
    c->refs++;
    c->writes++;
    c->wrote_tag = tag;
    uv_idle_start(&c->wrote, on_wrote);
    return total;
}

/* One uv_write of wr's n bytes from k on (those before went at once); PC_EIO when it failed (c
 * is closing). */
static int submit(pc_conn *c, wreq *wr, size_t k, size_t n, int tag)
{
    wr->c = c;
    wr->tag = tag;
    uv_buf_t b = uv_buf_init(wr->data + k, (unsigned)(n - k));
    int rc = uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc < 0) {
        free(wr);
        conn_fail(c, rc, PC_LOG_DEBUG, NULL, "write to %s: %s", c->name, uv_strerror(rc));
        return PC_EIO;
    }
    c->refs++;
    c->writes++;
    /* a peer that stops reading must not pin the connection forever */
    if (c->env->write_ms) {
        c->write_at = uv_now(c->env->loop) + c->env->write_ms;
        rearm(c);
    }
    return PC_OK;
}

/* Send whatever ciphertext waits (handshake flights, records, alerts) as one write. */
static int flush_tls(pc_conn *c, int tag)
{
    size_t n = pc_tls_conn_pending(c->tls);
    if (!n) return PC_OK;
    if (c->closing) return PC_ECLOSED;
    wreq *wr = pc_xmalloc(sizeof *wr + n);
    n = pc_tls_conn_take(c->tls, wr->data, n);
    uv_buf_t b = uv_buf_init(wr->data, (unsigned)n);
    size_t k = write_now(c, &b, 1, n, tag);
    if (k == n) {
        free(wr);
        return PC_OK;
    }
    return submit(c, wr, k, n, tag);
}

int pc_conn_write(pc_conn *c, const void *a, size_t na, const void *b, size_t nb, int tag)
{
    if (c->closing) return PC_ECLOSED;
    if (c->tls) {
        pc_error e = {0};
        if ((na && pc_tls_conn_write(c->tls, a, na, &e) < 0) ||
            (nb && pc_tls_conn_write(c->tls, b, nb, &e) < 0)) {
            conn_fail(c, UV_EPROTO, PC_LOG_WARN, &c->env->tls_log, "TLS write to %s: %s", c->name,
                      e.msg);
            return e.code;
        }
        return flush_tls(c, tag);
    }
    uv_buf_t bufs[2] = {uv_buf_init((char *)a, (unsigned)na), uv_buf_init((char *)b, (unsigned)nb)};
    size_t k = write_now(c, bufs, 2, na + nb, tag);
    if (k == na + nb) return PC_OK;
    /* the rest, copied: the caller's buffers are its own again when we return */
    size_t ka = k < na ? k : na, kb = k - ka;
    wreq *wr = pc_xmalloc(sizeof *wr + (na - ka) + (nb - kb));
    if (na > ka) memcpy(wr->data, (const char *)a + ka, na - ka);
    if (nb > kb) memcpy(wr->data + (na - ka), (const char *)b + kb, nb - kb);
    return submit(c, wr, 0, (na - ka) + (nb - kb), tag);
}

void pc_conn_finish(pc_conn *c, bool close_notify)
{
    if (c->closing || c->finishing) return;
    c->finishing = true;
    c->want_read = false;
    read_update(c);
    pc_conn_idle(c, false);
    if (close_notify && c->tls && pc_tls_conn_established(c->tls)) {
        pc_tls_conn_shutdown(c->tls);
        if (flush_tls(c, 0)) return;
    }
    if (!c->writes) pc_conn_close(c); /* nothing said: nothing to linger for */
}

/* ---- deadlines: one timer for all ---- */

static uint64_t idle_deadline(const pc_conn *c)
{
    if (!c->idle_since) return 0;
    unsigned ms = c->spoke ? c->env->idle_ms : c->env->quiet_ms;
    return ms ? c->idle_since + ms : 0;
}

static void on_timer(uv_timer_t *t)
{
    pc_conn *c = t->data;
    c->due = 0;
    if (c->closing) return;
    const pc_conn_proto *p = c->env->proto;
    uint64_t now = uv_now(c->env->loop);
    if (c->write_at && now >= c->write_at) {
        conn_fail(c, UV_ETIMEDOUT, PC_LOG_DEBUG, NULL, "%s: not reading our writes, closing",
                  c->name);
        return;
    }
    if (c->linger_at && now >= c->linger_at) {
        pc_conn_close(c);
        return;
    }
    c->refs++; /* the protocol's callbacks may close c */
    uint64_t idle_at = idle_deadline(c);
    if (idle_at && now >= idle_at) {
        c->idle_since = 0;
        if (p->idle)
            p->idle(c);
        else
            pc_conn_close(c);
    }
    if (!c->closing && c->timer_at && now >= c->timer_at) {
        c->timer_at = 0;
        p->timeout(c);
    }
    rearm(c);
    pc_conn_unref(c);
}

static void rearm(pc_conn *c)
{
    if (c->closing) return;
    uint64_t d[] = {c->write_at, c->linger_at, c->timer_at, idle_deadline(c)}, due = UINT64_MAX;
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (d[i] && d[i] < due) due = d[i];
    if (due == UINT64_MAX) {
        if (c->due) uv_timer_stop(&c->timer);
        c->due = 0;
        return;
    }
    if (due == c->due) return;
    c->due = due;
    uint64_t now = uv_now(c->env->loop);
    /* at least 1 ms: a 0 ms timer restarted from its own callback would run again before the
     * loop reads or writes anything */
    uv_timer_start(&c->timer, on_timer, due > now ? due - now : 1, 0);
}

void pc_conn_idle(pc_conn *c, bool idle)
{
    if (idle == (c->idle_since != 0) || (idle && c->finishing)) return;
    c->idle_since = idle ? uv_now(c->env->loop) : 0;
    rearm(c);
}

void pc_conn_spoke(pc_conn *c)
{
    if (c->spoke) return;
    c->spoke = true;
    rearm(c);
}

void pc_conn_timer(pc_conn *c, uint64_t due)
{
    c->timer_at = due;
    rearm(c);
}

/* ---- reading ---- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    pc_conn *c = h->data;
    *buf = uv_buf_init(c->env->rbuf, sizeof c->env->rbuf);
}

/* The handshake failed (why: TLS's reason): send the alert OpenSSL prepared, then finish (or
 * fail, for a protocol that wants to know). */
static void tls_failed(pc_conn *c, const char *why)
{
    if (c->env->proto->error) {
        if (flush_tls(c, 0) == 0)
            conn_fail(c, UV_EPROTO, PC_LOG_WARN, NULL, "TLS handshake with %s failed: %s", c->name,
                      why);
        return;
    }
    PC_WARN_RATELIMITED(&c->env->tls_log, c->env->log_id, "TLS handshake with %s failed: %s",
                        c->name, why);
    c->want_read = false;
    read_update(c);
    if (flush_tls(c, 0) == 0) pc_conn_finish(c, false);
}

static void tls_read(pc_conn *c, const char *data, size_t n)
{
    pc_conn_env *env = c->env;
    pc_tls_conn_feed(c->tls, data, n);
    pc_error e = {0};
    if (!pc_tls_conn_established(c->tls)) {
        int rc = pc_tls_conn_handshake(c->tls, &e);
        if (rc == PC_EPROTO) {
            tls_failed(c, e.msg);
            return;
        }
        if (flush_tls(c, 0) || rc == PC_EAGAIN) return;
        const char *alpn = pc_tls_conn_alpn(c->tls);
        if (env->alpn && strcmp(alpn, env->alpn) != 0)
            PC_DEBUG(env->log_id, "%s: TLS without ALPN %s (%s), speaking it anyway", c->name,
                     env->alpn, *alpn ? alpn : "none");
    }
    c->plain.len = 0;
    int rc = pc_tls_conn_read(c->tls, &c->plain, &e);
    if (flush_tls(c, 0)) return; /* e.g. TLS 1.3 session tickets */
    if (rc == PC_EPROTO) {
        conn_fail(c, UV_EPROTO, PC_LOG_DEBUG, NULL, "TLS read from %s: %s", c->name, e.msg);
        return;
    }
    env->proto->data(c, c->plain.data, c->plain.len);
    if (c->plain.cap > 2 * PC_CONN_READ_CHUNK) pc_buf_free(&c->plain);
    /* close_notify: the peer sends nothing more; an answer in progress still goes out */
    if (rc == PC_ECLOSED && !c->closing) {
        if (env->proto->peer_done)
            env->proto->peer_done(c);
        else
            pc_conn_close(c);
    }
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    pc_conn *c = st->data;
    if (nread < 0) {
        int err = (int)nread;
        if (err == UV_EOF && c->busy && c->env->proto->eof_while_busy && !c->closing) {
            c->reading = false; /* libuv stops reading at EOF */
            c->env->proto->peer_done(c);
            return;
        }
        /* EOF mid-request: the client gave up; nothing sensible to answer */
        bool handshake = c->tls && !pc_tls_conn_established(c->tls);
        if (err != UV_EOF)
            conn_fail(c, err, c->lingering ? QUIET : PC_LOG_DEBUG, NULL, "read from %s: %s",
                      c->name, uv_strerror(err));
        else
            conn_fail(c, err, c->lingering || !handshake ? QUIET : PC_LOG_DEBUG, NULL,
                      "%s closed the connection%s", c->name,
                      handshake ? " during the TLS handshake" : "");
        return;
    }
    if (nread == 0 || c->finishing || c->closing) return; /* lingering: drained */
    c->last_read = uv_now(c->env->loop);
    c->refs++; /* the protocol may answer synchronously: keep c valid until we return */
    if (c->tls)
        tls_read(c, buf->base, (size_t)nread);
    else
        c->env->proto->data(c, (const uint8_t *)buf->base, (size_t)nread);
    pc_conn_unref(c);
}

static void read_update(pc_conn *c)
{
    if (c->closing) return;
    bool on = c->want_read && !c->paused;
    if (on == c->reading) return;
    if (!on) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
        return;
    }
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0) {
        conn_fail(c, rc, PC_LOG_DEBUG, NULL, "read from %s: %s", c->name, uv_strerror(rc));
        return;
    }
    c->reading = true;
}

void pc_conn_read(pc_conn *c, bool on)
{
    if (c->finishing) return; /* reads nothing more (a lingering one drains by itself) */
    c->want_read = on;
    read_update(c);
}

void pc_conn_pause(pc_conn *c, bool paused)
{
    c->paused = paused;
    read_update(c);
}

/* ---- making one ---- */

pc_conn *pc_conn_new(pc_conn_env *env)
{
    pc_conn *c = pc_xcalloc(1, env->proto->conn_size);
    c->env = env;
    c->name = c->peer;
    c->refs = 3; /* tcp, timer and wrote handles */
    uv_tcp_init(env->loop, &c->tcp);
    uv_timer_init(env->loop, &c->timer);
    uv_idle_init(env->loop, &c->wrote);
    c->tcp.data = c->timer.data = c->wrote.data = c;
    c->next = env->conns;
    if (env->conns) env->conns->prev = c;
    env->conns = c;
    return c;
}

int pc_conn_open(pc_conn *c, uv_os_sock_t fd, pc_error *e)
{
    int rc = uv_tcp_open(&c->tcp, fd);
    if (rc < 0) {
        close(fd);
        pc_conn_close(c);
        return pc_error_set(e, PC_EIO, "%s", uv_strerror(rc));
    }
    pc_tcp_peer_name(&c->tcp, c->peer, sizeof c->peer);
    uv_tcp_nodelay(&c->tcp, 1);
    c->last_read = uv_now(c->env->loop);
    return PC_OK;
}

/* Serve a connected c: the protocol, reading, the idle clock, a client's TLS handshake. */
static int serve(pc_conn *c)
{
    if (c->env->proto->open && c->env->proto->open(c) < 0) pc_conn_close(c);
    if (c->closing) return PC_ECLOSED;
    c->want_read = true;
    read_update(c);
    /* a connection that never sends a byte (or never finishes its TLS handshake) is dropped
     * like an idle one, but after quiet_ms */
    pc_conn_idle(c, true);
    if (c->outbound && c->tls && !c->closing) { /* the ClientHello */
        pc_error e = {0};
        if (pc_tls_conn_handshake(c->tls, &e) == PC_EPROTO)
            tls_failed(c, e.msg);
        else
            flush_tls(c, 0);
    }
    return c->closing ? PC_ECLOSED : PC_OK;
}

int pc_conn_start(pc_conn *c, struct pc_tls_ctx *ctx)
{
    if (ctx) c->tls = pc_tls_conn_new(ctx, NULL);
    return serve(c);
}

static void on_connect(uv_connect_t *req, int status)
{
    pc_conn *c = req->data;
    if (c->closing) {
    } else if (status < 0) {
        conn_fail(c, status, PC_LOG_DEBUG, NULL, "connect %s: %s", c->name, uv_strerror(status));
    } else {
        uv_tcp_nodelay(&c->tcp, 1);
        serve(c);
    }
    pc_conn_unref(c);
}

void pc_conn_connect(pc_conn *c, const struct sockaddr *addr, struct pc_tls_ctx *ctx,
                     const char *host)
{
    c->outbound = true;
    if (ctx) c->tls = pc_tls_conn_new(ctx, host);
    c->connect.data = c;
    int rc = uv_tcp_connect(&c->connect, &c->tcp, addr, on_connect);
    if (rc < 0) {
        conn_fail(c, rc, PC_LOG_DEBUG, NULL, "connect %s: %s", c->name, uv_strerror(rc));
        return;
    }
    c->refs++;
}
