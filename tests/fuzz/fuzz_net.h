/* The client side of the server targets (fuzz_http, fuzz_grpc): the real server runs on the
 * target's uv loop in-process, and each input goes to it through a loopback socket while the
 * loop runs, until the server closes the connection. */
#ifndef PC_FUZZ_NET_H
#define PC_FUZZ_NET_H

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "fuzz_common.h"

static inline double fuzz_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A non-blocking socket connected to 127.0.0.1:port. */
static inline int fuzz_connect_loopback(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    FUZZ_ASSERT(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* loopback connect completes in the kernel's accept queue, before the server accepts; it may
     * still report EINPROGRESS or EINTR (libFuzzer's timeout timer signals every second) */
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        FUZZ_ASSERT(errno == EINPROGRESS || errno == EINTR, "connect: %s", strerror(errno));
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        while (poll(&pfd, 1, 1000) < 0)
            FUZZ_ASSERT(errno == EINTR, "poll: %s", strerror(errno));
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        FUZZ_ASSERT(soerr == 0, "connect: %s", strerror(soerr));
    }
    return fd;
}

/* One client connection's worth of input and what came back. */
typedef struct fuzz_exchange {
    const void *prefix; /* sent before data (NULL: nothing) */
    size_t prefix_len;
    const uint8_t *data;
    size_t size;
    size_t chunk;       /* at most this many bytes per send, a loop iteration between them */
    int quiet_rounds;   /* half-close once all is sent and this many rounds moved nothing */
    const size_t *owed; /* NULL, or answers the handler still owes (not quiet while > 0) */
    char first[9];      /* the first bytes received, first_len of them */
    size_t first_len;
    size_t got; /* bytes received in all */
} fuzz_exchange;

/* Send x's bytes on fd while running loop, half-close, read until the server closes (it must
 * within 5 s), then close fd. */
static inline void fuzz_exchange_run(uv_loop_t *loop, int fd, fuzz_exchange *x)
{
    const size_t total = x->prefix_len + x->size;
    size_t off = 0;
    bool shut = false, eof = false;
    int quiet = 0;
    char buf[65536];
    double deadline = fuzz_now_s() + 5;
    while (!eof) {
        uv_run(loop, UV_RUN_NOWAIT);
        bool progress = false;
        if (off < total) {
            const uint8_t *pre = x->prefix;
            const void *p = off < x->prefix_len ? (const void *)(pre + off)
                                                : (const void *)(x->data + off - x->prefix_len);
            size_t n_want = off < x->prefix_len ? x->prefix_len - off : total - off;
            if (n_want > x->chunk) n_want = x->chunk;
            ssize_t n = send(fd, p, n_want, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                off += (size_t)n;
                progress = true;
            } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                off = total; /* the server closed early (413, GOAWAY): stop sending */
            }
        }
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            progress = true;
            x->got += (size_t)n;
            for (ssize_t i = 0; i < n && x->first_len < sizeof x->first; i++)
                x->first[x->first_len++] = buf[i];
        } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            eof = true;
        }
        /* all written and nothing moving, nothing owed: half-close, the server must close */
        quiet = progress || (x->owed && *x->owed) ? 0 : quiet + 1;
        if (off == total && !shut && quiet >= x->quiet_rounds) {
            shutdown(fd, SHUT_WR);
            shut = true;
        }
        FUZZ_ASSERT(fuzz_now_s() < deadline, "server neither went quiet nor closed within 5 s");
    }
    close(fd);
}

#endif
