/* What every TCP server (HTTP/1.1 and HTTP/2) does the same way: resolve and bind host:port,
 * listen, accept (surviving and reporting a lack of file descriptors), count connections for the
 * self-metrics, and name peers for log lines. */
#ifndef PC_LISTENER_H
#define PC_LISTENER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/err.h"

/* "1.2.3.4:80" or "[::1]:80"; "?" for anything else. */
void pc_sockaddr_format(const struct sockaddr *sa, char *out, size_t n);
/* The peer of an accepted connection, formatted as above. */
void pc_tcp_peer_name(uv_tcp_t *tcp, char *out, size_t n);

/* A server's connection counters (loop thread only), read by the self-metrics. */
typedef struct pc_conn_stats {
    uint64_t open;          /* connections counted against max_connections (a gauge) */
    uint64_t refused;       /* newcomers turned away: every connection busy, or no descriptor */
    uint64_t evicted;       /* idle or incomplete connections closed to make room */
    uint64_t accept_errors; /* accept() failures (EMFILE, ENFILE, ENOBUFS, ...) */
} pc_conn_stats;

/* A listening socket whose connections are handed over as descriptors. libuv's own accept path
 * silently sheds connections when the process runs out of descriptors; this one reports it. */
typedef struct pc_listener pc_listener;

typedef struct pc_listener_opts {
    const char *host; /* "localhost" = 127.0.0.1, "[v6]" or "v6", or a name resolved once */
    int port;         /* 0: ephemeral */
    const char *log_id;
    /* a new connection: fd is a connected, non-blocking socket the callee now owns */
    void (*on_accept)(void *arg, uv_os_sock_t fd);
    /* out of descriptors: close one idle or incomplete connection to free one; 1 if it did */
    int (*make_room)(void *arg);
    void *arg;
    pc_conn_stats *stats; /* accept_errors and refused are counted here */
} pc_listener_opts;

/* Bind, listen and start accepting. On success bound is the address ("127.0.0.1:4318") and
 * *bound_port the port (useful with 0). NULL with PC_EIO and a reason in e ("listen
 * 127.0.0.1:4318: address already in use"). */
pc_listener *pc_listener_start(uv_loop_t *loop, const pc_listener_opts *o, int *bound_port,
                               char *bound, size_t boundlen, pc_error *e);
/* Stop accepting and close; done(arg) once the socket is closed and l freed. */
void pc_listener_close(pc_listener *l, void (*done)(void *arg), void *arg);

#endif
