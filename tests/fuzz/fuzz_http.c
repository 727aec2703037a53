/* HTTP/1.1 server request parsing. http_server.c has no parse-only entry point, so the real
 * server runs in-process on 127.0.0.1:<ephemeral> and each input is written by a client socket
 * (then half-closed); the loop runs until the server has closed the connection. The handler
 * answers at once, or for paths starting with "/d" a loop iteration later, and reads every field
 * of the request (so ASan checks lengths and terminators). Invariants: every answer starts with
 * "HTTP/1.1 "; the server always ends the connection (no hang); nothing leaks. */
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "fuzz_common.h"
#include "net/http_server.h"

#define MAX_BODY (256u << 10)

static uv_loop_t *loop;
static pc_http_server *server;
static int port;
static uv_idle_t idle;
static pc_http_req *deferred[64];
static size_t n_deferred;
static volatile unsigned sink;

static void answer(pc_http_req *r)
{
    unsigned h = 0;
    for (size_t i = 0; i < r->body_len; i++)
        h = h * 31 + r->body[i];
    FUZZ_ASSERT(r->body[r->body_len] == 0, "body not NUL-terminated");
    for (size_t i = 0; i < r->n_headers; i++)
        h += (unsigned)strlen(r->headers[i].name) + (unsigned)strlen(r->headers[i].value);
    h += (unsigned)strlen(r->path) + (unsigned)strlen(r->query) + (unsigned)strlen(r->method) +
         (unsigned)strlen(r->peer);
    const char *ct = pc_http_req_header(r, "Content-Type");
    if (ct) h += (unsigned)strlen(ct);
    char *q = pc_http_req_query(r, "a");
    if (q) h += (unsigned)strlen(q);
    free(q);
    sink = h;
    int status = r->body_len ? 200 : (r->path[1] == 'n' ? 404 : 204);
    const char *extra = r->query[0] == 'r' ? "Retry-After: 1\r\n" : NULL;
    pc_http_respond(r, status, "text/plain", r->path, strlen(r->path), extra);
}

static void on_idle(uv_idle_t *h)
{
    size_t n = n_deferred;
    pc_http_req *todo[64];
    memcpy(todo, deferred, n * sizeof *todo);
    n_deferred = 0;
    for (size_t i = 0; i < n; i++)
        answer(todo[i]);
    if (!n_deferred) uv_idle_stop(h);
}

static void handler(pc_http_req *r, void *arg)
{
    (void)arg;
    if (r->path[0] == '/' && r->path[1] == 'd' && n_deferred < 64) {
        deferred[n_deferred++] = r;
        uv_idle_start(&idle, on_idle);
        return;
    }
    answer(r);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet_logs();
    loop = uv_default_loop();
    uv_idle_init(loop, &idle);
    pc_http_server_opts o = {
        .host = "127.0.0.1",
        .port = 0,
        .max_body_bytes = MAX_BODY,
        .max_header_bytes = 8u << 10,
        .read_timeout_ms = 2000,
        .idle_timeout_ms = 2000,
        .max_connections = 16,
        .log_id = "fuzz",
    };
    server = pc_http_server_new(loop, &o, handler, NULL);
    char err[256];
    if (pc_http_server_start(server, err, sizeof err)) {
        fprintf(stderr, "fuzz_http: %s\n", err);
        abort();
    }
    port = pc_http_server_port(server);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
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
    size_t off = 0, got = 0;
    bool shut = false, eof = false;
    char first[9] = "", buf[65536];
    double deadline = now_s() + 5;
    while (!eof) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (off < size) {
            ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0)
                off += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                off = size; /* the server closed early (e.g. 413): stop sending */
        }
        if (off == size && !shut) {
            shutdown(fd, SHUT_WR);
            shut = true;
        }
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            for (ssize_t i = 0; i < n && got < 9; i++)
                first[got++] = buf[i];
        } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            eof = true;
        }
        FUZZ_ASSERT(now_s() < deadline, "server neither answered nor closed within 5 s");
    }
    close(fd);
    FUZZ_ASSERT(memcmp(first, "HTTP/1.1 ", got) == 0, "answer does not start with a status line");
    /* let the server see our close and free the connection; answer what is still deferred */
    for (int i = 0; i < 8 || n_deferred; i++)
        uv_run(loop, UV_RUN_NOWAIT);
    return 0;
}
