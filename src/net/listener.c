/* Shared listening and accepting for the servers (see listener.h). */
#include "net/listener.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"

enum {
    ACCEPT_BATCH = 128, /* connections per poll callback: the loop has other work too */
    RETRY_MS = 250,     /* out of descriptors with nothing to close: accept again after this */
};

void pc_sockaddr_format(const struct sockaddr *sa, char *out, size_t n)
{
    char ip[64] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        uv_ip4_name(a, ip, sizeof ip);
        snprintf(out, n, "%s:%d", ip, ntohs(a->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        uv_ip6_name(a, ip, sizeof ip);
        snprintf(out, n, "[%s]:%d", ip, ntohs(a->sin6_port));
    } else {
        snprintf(out, n, "?");
    }
}

void pc_tcp_peer_name(uv_tcp_t *tcp, char *out, size_t n)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) == 0)
        pc_sockaddr_format((struct sockaddr *)&ss, out, n);
    else
        snprintf(out, n, "?");
}

static int resolve_bind(uv_loop_t *loop, const char *host, int port, struct sockaddr_storage *ss)
{
    char h[256];
    snprintf(h, sizeof h, "%s", host);
    size_t n = strlen(h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        memmove(h, h + 1, n - 2);
        h[n - 2] = 0;
    }
    if (strcmp(h, "localhost") == 0) snprintf(h, sizeof h, "127.0.0.1");
    if (uv_ip4_addr(h, port, (struct sockaddr_in *)ss) == 0) return 0;
    if (uv_ip6_addr(h, port, (struct sockaddr_in6 *)ss) == 0) return 0;
    uv_getaddrinfo_t gr; /* a host name: resolved once at startup, synchronously */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = uv_getaddrinfo(loop, &gr, NULL, h, NULL, &hints);
    if (rc < 0) return rc;
    memcpy(ss, gr.addrinfo->ai_addr, gr.addrinfo->ai_addrlen);
    uv_freeaddrinfo(gr.addrinfo);
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    return 0;
}

struct pc_listener {
    uv_loop_t *loop;
    uv_poll_t poll;   /* readable: connections are pending */
    uv_timer_t retry; /* restarts polling after a pause for descriptors */
    int fd;
    int reserve; /* a descriptor kept open to be closed when none is left (-1: none) */
    pc_listener_opts o;
    char *log_id;
    pc_conn_stats own_stats; /* when the owner passed none */
    pc_log_limiter fd_log, err_log;
    int handles;
    bool closing;
    void (*done)(void *arg);
    void *done_arg;
};

/* Errors accept(2) returns for a connection that failed before we took it (Linux passes pending
 * network errors on): the listener is fine, the next one may do. */
static bool transient_accept_error(int e)
{
    switch (e) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
#ifdef ENONET
    case ENONET:
#endif
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH: return true;
    default: return false;
    }
}

static const char *errno_name(int e)
{
    switch (e) {
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENOBUFS: return "ENOBUFS";
    case ENOMEM: return "ENOMEM";
    default: return "error";
    }
}

static void on_poll(uv_poll_t *p, int status, int events);

static void on_retry(uv_timer_t *t)
{
    pc_listener *l = t->data;
    if (l->closing) return;
    if (l->reserve < 0) l->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
    uv_poll_start(&l->poll, UV_READABLE, on_poll);
}

/* accept() found no descriptor (or buffer) for a new connection. Make room by closing the
 * connection idle longest; with none to close, accept the pending connections on the reserve
 * descriptor and close them at once (the clients see a close, not a hang, and the poll is not
 * woken again for them); with no reserve either, stop polling for a moment rather than spin.
 * Returns whether accepting may go on. */
static bool out_of_descriptors(pc_listener *l, int e)
{
    /* accept() wants a descriptor before it looks at the queue: at the limit it fails even when
     * no connection is waiting, and then there is nothing to do until one comes */
    struct pollfd pending = {.fd = l->fd, .events = POLLIN};
    if (poll(&pending, 1, 0) != 1 || !(pending.revents & POLLIN)) return false;
    l->o.stats->accept_errors++;
    struct rlimit rl;
    char limit[64] = "";
    if (e == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        snprintf(limit, sizeof limit, ", RLIMIT_NOFILE %llu", (unsigned long long)rl.rlim_cur);
    const char *what = uv_strerror(uv_translate_sys_error(e));
    if (l->o.make_room && l->o.make_room(l->o.arg)) {
        PC_ERROR_RATELIMITED(&l->fd_log, l->log_id,
                             "accept: %s (%s%s): closed the connection idle longest to make room; "
                             "raise the descriptor limit (ulimit -n) or lower max_connections",
                             what, errno_name(e), limit);
        return true;
    }
    unsigned shed = 0;
    if (l->reserve >= 0) {
        close(l->reserve);
        l->reserve = -1;
        for (;;) {
            int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                close(fd);
                shed++;
            } else if (!transient_accept_error(errno)) {
                break;
            }
        }
        l->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    l->o.stats->refused += shed;
    if (l->reserve < 0) {
        uv_poll_stop(&l->poll);
        uv_timer_start(&l->retry, on_retry, RETRY_MS, 0);
    }
    PC_ERROR_RATELIMITED(&l->fd_log, l->log_id,
                         "accept: %s (%s%s), every connection busy: closed %u pending "
                         "connection(s)%s; raise the descriptor limit (ulimit -n) or lower "
                         "max_connections",
                         what, errno_name(e), limit, shed,
                         l->reserve < 0 ? ", pausing accept for a moment" : "");
    return false;
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    pc_listener *l = p->data;
    (void)events;
    if (status < 0) {
        l->o.stats->accept_errors++;
        PC_ERROR_RATELIMITED(&l->err_log, l->log_id, "listener: %s", uv_strerror(status));
        return;
    }
    for (int i = 0; i < ACCEPT_BATCH && !l->closing; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            l->o.on_accept(l->o.arg, fd);
            continue;
        }
        int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK) return;
        if (transient_accept_error(e)) continue;
        if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
            if (out_of_descriptors(l, e)) continue;
            return;
        }
        l->o.stats->accept_errors++;
        PC_ERROR_RATELIMITED(&l->err_log, l->log_id, "accept: %s",
                             uv_strerror(uv_translate_sys_error(e)));
        return;
    }
}

static void listen_fail(pc_error *e, const char *where, int sys_errno)
{
    pc_error_set(e, PC_EIO, "listen %s: %s", where, uv_strerror(uv_translate_sys_error(sys_errno)));
}

pc_listener *pc_listener_start(uv_loop_t *loop, const pc_listener_opts *o, int *bound_port,
                               char *bound, size_t boundlen, pc_error *e)
{
    const char *host = o->host;
    int port = o->port;
    int v6 = strchr(host, ':') && host[0] != '[';
    char where[300];
    snprintf(where, sizeof where, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    int rc = resolve_bind(loop, host, port, &ss);
    if (rc < 0) {
        pc_error_set(e, PC_EIO, "listen %s: cannot resolve host: %s", where, uv_strerror(rc));
        return NULL;
    }
    socklen_t sl =
        ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        listen_fail(e, where, errno);
        return NULL;
    }
    /* as libuv does: a restart does not wait for TIME_WAIT */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 511) != 0) {
        listen_fail(e, where, errno);
        close(fd);
        return NULL;
    }
    sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        *bound_port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                    : ((struct sockaddr_in6 *)&ss)->sin6_port);
        pc_sockaddr_format((struct sockaddr *)&ss, bound, boundlen);
    } else {
        *bound_port = port;
        snprintf(bound, boundlen, "%s", where);
    }
    pc_listener *l = pc_xcalloc(1, sizeof *l);
    l->loop = loop;
    l->fd = fd;
    l->o = *o;
    l->log_id = pc_xstrdup(o->log_id ? o->log_id : "listener");
    l->o.log_id = l->log_id;
    if (!l->o.stats) l->o.stats = &l->own_stats;
    l->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
    uv_poll_init_socket(loop, &l->poll, fd);
    uv_timer_init(loop, &l->retry);
    l->poll.data = l->retry.data = l;
    l->handles = 2;
    uv_poll_start(&l->poll, UV_READABLE, on_poll);
    return l;
}

static void on_closed(uv_handle_t *h)
{
    pc_listener *l = h->data;
    if (--l->handles) return;
    close(l->fd);
    if (l->reserve >= 0) close(l->reserve);
    void (*done)(void *) = l->done;
    void *arg = l->done_arg;
    free(l->log_id);
    free(l);
    if (done) done(arg);
}

void pc_listener_close(pc_listener *l, void (*done)(void *arg), void *arg)
{
    if (l->closing) return;
    l->closing = true;
    l->done = done;
    l->done_arg = arg;
    pc_log_limiter_flush(&l->fd_log, PC_LOG_ERROR, l->log_id, "accept: out of descriptors");
    pc_log_limiter_flush(&l->err_log, PC_LOG_ERROR, l->log_id, "accept errors");
    uv_close((uv_handle_t *)&l->poll, on_closed);
    uv_close((uv_handle_t *)&l->retry, on_closed);
}
