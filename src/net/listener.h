/* What every TCP server (HTTP/1.1 and HTTP/2) does the same way: resolve and bind host:port,
 * listen, log accept errors rate-limited, and name peers for log lines. */
#ifndef PC_LISTENER_H
#define PC_LISTENER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* "1.2.3.4:80" or "[::1]:80"; "?" for anything else. */
void pc_sockaddr_format(const struct sockaddr *sa, char *out, size_t n);
/* The peer of an accepted connection, formatted as above. */
void pc_tcp_peer_name(uv_tcp_t *tcp, char *out, size_t n);

/* Bind listener (already uv_tcp_init'ed) to host:port ("localhost" = 127.0.0.1, "[v6]" or "v6",
 * or a name resolved once) and listen. On success *bound_port is the port (useful with 0) and
 * bound the formatted address. -1 with err ("listen 127.0.0.1:4318: address already in use"). */
int pc_tcp_listen(uv_loop_t *loop, uv_tcp_t *listener, const char *host, int port,
                  uv_connection_cb cb, int *bound_port, char *bound, size_t boundlen, char *err,
                  size_t errlen);

/* Accept errors come in storms (EMFILE): log one summary line every few seconds. */
typedef struct pc_accept_log {
    uint64_t last_ms;
    unsigned errs;
} pc_accept_log;
void pc_accept_error(pc_accept_log *l, uv_loop_t *loop, const char *log_id, int status);

#endif
