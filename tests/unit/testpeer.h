/* Peers that run on helper threads with blocking loopback sockets, so the test's uv loop stays
 * free to serve (testloop.h runs it meanwhile):
 *
 * - loopback sockets: connect, listen on an ephemeral port, a port nobody listens on, wait for
 *   the other side to close;
 * - th_raw: a client thread that sends parts (with delays, or dribbling a byte per period) and
 *   reads until the server closes, timing it: garbage, slow, pipelining and silent clients;
 * - h2peer: a raw HTTP/2 client (nghttp2 on a blocking socket) that sends what the test submits
 *   and reports frames and stream closes, for peers no real client would be. */
#ifndef PC_TESTPEER_H
#define PC_TESTPEER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testloop.h"

/* ---- loopback sockets ---- */

static inline struct sockaddr_in th_loopback(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* A blocking TCP connection to 127.0.0.1:port, or -1. */
static inline int th_connect_loopback(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = th_loopback(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A listening socket on 127.0.0.1:<ephemeral>; its port in *port. */
static inline int th_listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = th_loopback(0);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t al = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &al);
    listen(fd, 8);
    *port = ntohs(a.sin_port);
    return fd;
}

/* A port nobody listens on: bound, read, closed. */
static inline int th_unused_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = th_loopback(0);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t al = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &al);
    close(fd);
    return ntohs(a.sin_port);
}

/* Read and discard until the peer closes (1) or ms pass without a byte (0). */
static inline int th_wait_closed(int fd, int ms)
{
    char buf[4096];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0) return 0;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return 1;
    }
}

/* ---- a peer thread ---- */

/* Run fn(arg) on a thread while loop serves, until it sets *done (ms at most); then join it.
 * Whether it finished in time. */
static inline int th_serve_while(uv_loop_t *loop, void *(*fn)(void *), void *arg, atomic_int *done,
                                 unsigned ms)
{
    pthread_t th;
    pthread_create(&th, NULL, fn, arg);
    int ok = wait_until(loop, flag_set, done, ms);
    pthread_join(th, NULL);
    return ok;
}

/* ---- a raw blocking client on a thread ---- */

typedef struct th_raw {
    int port;
    int start_delay_ms;
    const char *parts[4];
    int delays[4];   /* before each part */
    int dribble_ms;  /* then send one byte per period until the server closes */
    bool half_close; /* after the parts, shut down the sending side (the server sees EOF) */
    char resp[16384];
    size_t resp_len;
    double elapsed_ms; /* from connect until the server closed (or 5 s) */
    atomic_int done;
    pthread_t th;
} th_raw;

static inline void *th_raw_main(void *arg)
{
    th_raw *r = arg;
    usleep((useconds_t)r->start_delay_ms * 1000);
    double t0 = now_ms();
    int fd = th_connect_loopback(r->port);
    if (fd >= 0) {
        for (int i = 0; i < 4 && r->parts[i]; i++) {
            usleep((useconds_t)r->delays[i] * 1000);
            send(fd, r->parts[i], strlen(r->parts[i]), MSG_NOSIGNAL);
        }
        if (r->half_close) shutdown(fd, SHUT_WR);
        while (now_ms() - t0 < 5000) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            int pr = poll(&p, 1, r->dribble_ms ? r->dribble_ms : 100);
            if (pr == 0) {
                if (r->dribble_ms) send(fd, "x", 1, MSG_NOSIGNAL);
                continue;
            }
            ssize_t n = recv(fd, r->resp + r->resp_len, sizeof r->resp - 1 - r->resp_len, 0);
            if (n <= 0) break;
            r->resp_len += (size_t)n;
        }
    }
    r->elapsed_ms = now_ms() - t0;
    r->resp[r->resp_len] = 0;
    if (fd >= 0) close(fd);
    atomic_store(&r->done, 1);
    return NULL;
}

static inline void th_raw_start(th_raw *r, int port)
{
    r->port = port;
    pthread_create(&r->th, NULL, th_raw_main, r);
}

/* Serve on loop until the client is done (8 s at most), then join it. */
static inline void th_raw_wait(uv_loop_t *loop, th_raw *r)
{
    CHECK(wait_until(loop, flag_set, &r->done, 8000));
    pthread_join(r->th, NULL);
}

/* ---- a raw HTTP/2 peer ---- */

typedef struct h2peer h2peer;

typedef struct h2peer_cbs {
    void (*on_frame)(h2peer *p, const nghttp2_frame *f);                        /* NULL: none */
    void (*on_stream_close)(h2peer *p, int32_t stream_id, uint32_t error_code); /* NULL: none */
} h2peer_cbs;

struct h2peer {
    int fd;
    nghttp2_session *ng;
    h2peer_cbs cbs;
    int closed; /* the server closed the connection */
    void *user;
};

static inline int h2peer_on_frame_(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2peer *p = ud;
    (void)ng;
    if (p->cbs.on_frame) p->cbs.on_frame(p, f);
    return 0;
}

static inline int h2peer_on_close_(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    h2peer *p = ud;
    (void)ng;
    if (p->cbs.on_stream_close) p->cbs.on_stream_close(p, id, code);
    return 0;
}

/* Connect to 127.0.0.1:port and queue our SETTINGS (sent by the next flush or pump). auto_ack
 * false: PINGs are not answered. p->fd is -1 when the connection failed. */
static inline void h2peer_connect(h2peer *p, int port, h2peer_cbs cbs, bool auto_ack, void *user)
{
    memset(p, 0, sizeof *p);
    p->cbs = cbs;
    p->user = user;
    p->fd = th_connect_loopback(port);
    if (p->fd < 0) return;
    nghttp2_session_callbacks *c;
    nghttp2_session_callbacks_new(&c);
    nghttp2_session_callbacks_set_on_frame_recv_callback(c, h2peer_on_frame_);
    nghttp2_session_callbacks_set_on_stream_close_callback(c, h2peer_on_close_);
    nghttp2_option *opt;
    nghttp2_option_new(&opt);
    if (!auto_ack) nghttp2_option_set_no_auto_ping_ack(opt, 1);
    nghttp2_session_client_new2(&p->ng, c, p, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(c);
    nghttp2_submit_settings(p->ng, NGHTTP2_FLAG_NONE, NULL, 0);
}

/* Write everything nghttp2 has queued. */
static inline void h2peer_flush(h2peer *p)
{
    const uint8_t *d;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(p->ng, &d)) > 0)
        if (write(p->fd, d, (size_t)n) != n) return;
}

/* For up to ms, in steps of step_ms: send what is queued (and a PING every every_ms when > 0),
 * read and feed nghttp2; stops early when the server closes or done(p) holds. */
static inline void h2peer_pump(h2peer *p, int ms, int step_ms, int every_ms, int (*done)(h2peer *))
{
    uint8_t buf[16384];
    for (int waited = 0; waited < ms && !p->closed && !(done && done(p)); waited += step_ms) {
        if (every_ms && waited % every_ms == 0) nghttp2_submit_ping(p->ng, NGHTTP2_FLAG_NONE, NULL);
        h2peer_flush(p);
        struct pollfd pf = {.fd = p->fd, .events = POLLIN};
        if (poll(&pf, 1, step_ms) <= 0) continue;
        ssize_t n = read(p->fd, buf, sizeof buf);
        if (n <= 0) {
            p->closed = 1;
            break;
        }
        nghttp2_session_mem_recv(p->ng, buf, (size_t)n);
    }
    h2peer_flush(p);
}

static inline void h2peer_close(h2peer *p)
{
    if (p->ng) nghttp2_session_del(p->ng);
    if (p->fd >= 0) close(p->fd);
}

#endif
