/* A TCP server of connections under one protocol (net/conn.h), for the HTTP/1.1 and HTTP/2
 * servers: the listener (net/listener.h), the set of connections, the connection limit with
 * eviction, the memory limiter's pause (net/http_pause.h), the self-metrics (pc_conn_stats) and
 * the rate-limited per-connection log lines, and shutdown.
 *
 * The connection limit: a newcomer beyond max_connections takes the place of the connection
 * idle or incomplete longest (one not busy: see pc_conn_busy; those done with a final answer
 * first), which gets proto->evict's last word and is closed; only when every connection is
 * busy is the newcomer refused (proto->refuse, then closed). The same happens when accept runs
 * out of file descriptors. Loop thread only. */
#ifndef PC_CONN_SERVER_H
#define PC_CONN_SERVER_H

#include <stdbool.h>

#include "net/conn.h"
#include "net/listener.h"

typedef struct pc_conn_server pc_conn_server;

typedef struct pc_conn_server_opts {
    const char *host; /* as net/listener.h takes it */
    int port;         /* 0: ephemeral */
    const char *log_id;
    unsigned max_connections; /* default 1024 */
    /* the connections' deadlines (pc_conn_env): silent since accept, idle, writes not read,
     * draining after a final answer; 0: none */
    unsigned quiet_timeout_ms, idle_timeout_ms, write_timeout_ms, linger_ms;
    struct pc_tls_ctx *tls; /* NULL: plain text; else TLS on every connection (borrowed) */
    const char *alpn;       /* TLS: the protocol a client should select (logged if not) */
    pc_conn_stats *stats;   /* NULL, or counters to keep (outlive the server) */
    bool pausable;          /* reads stop while the memory limiter pauses the servers */
    const char *busy_with;  /* "request", "call": what busy connections hold, for log lines */
} pc_conn_server_opts;

/* user: the protocol's server, found again as c->env->user. */
pc_conn_server *pc_conn_server_new(uv_loop_t *loop, const pc_conn_server_opts *o,
                                   const pc_conn_proto *proto, void *user);
/* A rate-limited log line of the protocol's own kind (at most 4 per server): its suppressed
 * count is written as "<what>: N more in the last Ts" every 10 s and at shutdown. */
pc_log_limiter *pc_conn_server_limiter(pc_conn_server *s, pc_log_level lvl, const char *what);
/* Bind, listen and accept. bound: the address ("127.0.0.1:4318"). 0, or PC_EIO (PC_EINVAL when
 * started before) with a reason in e. */
int pc_conn_server_start(pc_conn_server *s, char *bound, size_t boundlen, pc_error *e);
int pc_conn_server_port(const pc_conn_server *s);
/* The log id given to _new (copied); valid until the proto's stopped() returns. */
const char *pc_conn_server_log_id(const pc_conn_server *s);
/* Stop accepting; connections lingering close, finishing ones close once written, the others
 * get proto->shutdown. When the last is freed: proto->stopped, done(arg), and the server is
 * gone. A second call does nothing. */
void pc_conn_server_shutdown(pc_conn_server *s, void (*done)(void *arg), void *arg);

/* The protocol's word on a connection: busy (a request or call being handled) ones are never
 * evicted; one that stops being busy counts as the newest. */
void pc_conn_busy(pc_conn *c, bool busy);

#endif
