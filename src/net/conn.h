/* One TCP connection under a protocol (the HTTP/1.1 and HTTP/2 servers' framing, and the
 * clients'): the socket, TLS on memory BIOs (net/tls.h), reading, writing, timeouts and
 * closing, so that a protocol only turns plaintext in into plaintext out.
 *
 * Reading: every byte the peer sends reaches proto->data as plaintext (TLS removed); the handshake
 * runs here (a client's starts once connected), and a failed one is logged (rate-limited), its
 * alert sent, and the connection finished, or it goes to proto->error. Writing: pc_conn_write takes
 * plaintext, applies TLS and hands one uv_write to libuv; ciphertext of the connection's own
 * (handshake flights, session tickets) goes out on its own. Time: one libuv timer per connection
 * serves four deadlines: writes the peer does not read (write_ms), the idle clock (quiet_ms until
 * the peer spoke, then idle_ms), the linger after a final answer (linger_ms), and the protocol's
 * own (pc_conn_timer). Closing: pc_conn_finish stops reading and closes once the writes are out
 * (after draining input for linger_ms when set: closing with unread input makes the kernel send
 * RST, which can destroy the answer just written); pc_conn_close closes at once.
 *
 * Lifetimes: a connection is freed when its last reference goes: the two handles hold one each
 * until their close callbacks, every write and the half-close one each, and the protocol takes
 * more (a request the handler holds) with pc_conn_ref. Connections are made by their owner (a
 * server, net/conn_server.h, or a client), which shares one pc_conn_env among them and keeps
 * it until the last is freed. Loop thread only. */
#ifndef PC_CONN_H
#define PC_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"

struct pc_tls_ctx;
struct pc_tls_conn;
typedef struct pc_conn pc_conn;
typedef struct pc_conn_env pc_conn_env;

enum { PC_CONN_READ_CHUNK = 64 * 1024 };

/* The protocol on top. Callbacks run on the loop thread, never while another of the same
 * connection runs; c stays valid during each. NULL ones do what is said. */
typedef struct pc_conn_proto {
    /* the protocol's connection struct, which starts with its pc_conn (zeroed when made) */
    size_t conn_size;
    /* accepted and counted: set up the parser, maybe write (HTTP/2 SETTINGS); a PC_E* code
     * closes */
    int (*open)(pc_conn *c);
    /* over the connection limit with nothing to evict: answer, or not (NULL), and the core
     * closes it unless it was finished */
    void (*refuse)(pc_conn *c);
    /* plaintext from the peer; n may be 0 right after the TLS handshake completed */
    void (*data)(pc_conn *c, const uint8_t *p, size_t n);
    /* the peer sent TLS close_notify: nothing more will come (NULL: close); with
     * eof_while_busy, also the peer's EOF while c is busy */
    void (*peer_done)(pc_conn *c);
    /* the protocol reads on while busy (pc_conn_busy): an EOF then is a peer that may only have
     * half-closed, so reads stop and peer_done is called; the answer still goes out, and the
     * next read start finds the EOF again */
    bool eof_while_busy;
    /* c failed: err is a libuv error, as libuv gave it (UV_EOF: the peer closed it; UV_EPROTO:
     * TLS and UV_ETIMEDOUT: writes not read are the core's own), msg says it
     * for a log line ("write to 127.0.0.1:4317: broken pipe"); c closes right after. NULL: the
     * core logs it (at debug; TLS failures as rate-limited warnings) and a failed TLS handshake
     * ends gracefully (its alert sent, lingering) */
    void (*error)(pc_conn *c, int err, const char *msg);
    /* a write of the protocol's went out (tag as given to pc_conn_write) */
    void (*written)(pc_conn *c, int tag);
    /* the protocol's deadline (pc_conn_timer) passed */
    void (*timeout)(pc_conn *c);
    /* idle for idle_ms (quiet_ms before it spoke): NULL closes */
    void (*idle)(pc_conn *c);
    /* chosen to make room for a newcomer: a last word before the core closes it (NULL: none) */
    void (*evict)(pc_conn *c);
    /* what it is doing, for the eviction line: "idle", "request incomplete" */
    const char *(*state)(const pc_conn *c);
    /* the server shuts down and c is neither finishing nor lingering (NULL: close) */
    void (*shutdown)(pc_conn *c);
    /* the last reference went: free what the protocol holds (c itself is freed after) */
    void (*free)(pc_conn *c);
    /* the server stopped, every connection gone: free the protocol's server (env->user) */
    void (*stopped)(void *user);
} pc_conn_proto;

/* What the connections of one owner share; the owner outlives them. */
struct pc_conn_env {
    uv_loop_t *loop;
    const pc_conn_proto *proto;
    void *user; /* the protocol's server or client, for its callbacks */
    const char *log_id;
    const char *alpn; /* TLS: the protocol a peer should select; one that does not is logged */
    unsigned quiet_ms, idle_ms, write_ms, linger_ms; /* 0: no such deadline */
    bool stopping; /* the owner shuts down: finished connections close without lingering */
    pc_log_limiter tls_log;
    pc_conn *conns; /* every connection (linked through prev/next), newest first */
    /* the owner's side: c closes (no longer counts), starts lingering (both may be NULL); one
     * was freed (the owner may end in it) */
    void (*on_close)(pc_conn *c);
    void (*on_linger)(pc_conn *c);
    void (*on_free)(pc_conn_env *env);
    char rbuf[PC_CONN_READ_CHUNK]; /* shared: the loop consumes each read before the next */
};

struct pc_conn {
    /* readable by the protocol */
    pc_conn_env *env;
    struct pc_tls_conn *tls; /* NULL: plain text */
    char peer[64];           /* "127.0.0.1:53211" for logs */
    const char *name;        /* how the core's lines name it: peer, unless the owner says */
    uint64_t last_read;      /* loop time bytes last arrived */
    bool finishing;          /* pc_conn_finish was called: reads nothing more */
    bool lingering;          /* finished and written: draining input until closed */
    bool closing;
    pc_conn *prev, *next; /* env->conns */
    /* the owner's */
    pc_conn *lru_prev, *lru_next; /* the owner's eviction order */
    bool in_lru, counted, busy;
    /* private */
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_idle_t wrote; /* runs the completion of a write that went out at once */
    uv_shutdown_t shut;
    uv_connect_t connect;
    pc_buf plain; /* TLS: the plaintext of one read */
    int refs;
    unsigned writes;     /* uv_writes in flight, and a write that went out at once */
    int wrote_tag;       /* that write's tag, while wrote is active */
    uint64_t write_at;   /* close if the writes are not out by then (0: none) */
    uint64_t idle_since; /* the idle clock runs since (0: not idle) */
    uint64_t linger_at, timer_at, due;
    bool want_read, reading, paused, spoke, outbound;
};

/* ---- for the protocol ---- */

/* Write plaintext a then b (either may be empty) as one write; TLS is applied. tag is handed to
 * proto->written (tag 0 is the core's own). 0, or PC_ECLOSED when c is closing, PC_EIO or
 * PC_EPROTO (TLS) when it failed now (and closes). */
int pc_conn_write(pc_conn *c, const void *a, size_t na, const void *b, size_t nb, int tag);
/* Read nothing more; once the writes are out, linger (env->linger_ms) or close. close_notify:
 * with TLS, end the stream with a close_notify alert. */
void pc_conn_finish(pc_conn *c, bool close_notify);
void pc_conn_close(pc_conn *c);
/* Whether the protocol wants input now (a request being handled: no, the peer waits). */
void pc_conn_read(pc_conn *c, bool on);
/* Start (unless running) or stop the idle clock. */
void pc_conn_idle(pc_conn *c, bool idle);
/* The peer has spoken the protocol: the idle clock runs for idle_ms from now on, not quiet_ms. */
void pc_conn_spoke(pc_conn *c);
/* The protocol's deadline, in loop time (uv_now); 0: none. */
void pc_conn_timer(pc_conn *c, uint64_t due);
void pc_conn_ref(pc_conn *c);
void pc_conn_unref(pc_conn *c);

/* ---- for the owner ---- */

/* A new connection, first in env->conns (env->on_free runs when it is freed, also if
 * pc_conn_open fails). */
pc_conn *pc_conn_new(pc_conn_env *env);
/* Take the accepted socket fd (owned from now on, also on failure): 0, or PC_EIO with libuv's
 * reason in e, fd closed and c closing. */
int pc_conn_open(pc_conn *c, uv_os_sock_t fd, pc_error *e);
/* Serve it: TLS with ctx (or plain: NULL), proto->open, reading, the idle clock. PC_ECLOSED:
 * closed. */
int pc_conn_start(pc_conn *c, struct pc_tls_ctx *ctx);
/* Connect to addr (a client's connection: name it first), then serve it as pc_conn_start does
 * (proto->open once connected), TLS with ctx (NULL: plain) for host (SNI and verification).
 * A failure goes to proto->error ("connect 127.0.0.1:4317: connection refused"). */
void pc_conn_connect(pc_conn *c, const struct sockaddr *addr, struct pc_tls_ctx *ctx,
                     const char *host);
/* The memory limiter's pause (net/http_pause.h): read nothing while paused. */
void pc_conn_pause(pc_conn *c, bool paused);

#endif
