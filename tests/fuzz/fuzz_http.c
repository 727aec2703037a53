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
#include "fuzz_net.h"
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
    pc_error err = {0};
    if (pc_http_server_start(server, &err) < 0) {
        fprintf(stderr, "fuzz_http: %s\n", err.msg);
        abort();
    }
    port = pc_http_server_port(server);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_exchange x = {.data = data, .size = size, .chunk = size};
    fuzz_exchange_run(loop, fuzz_connect_loopback(port), &x);
    FUZZ_ASSERT(memcmp(x.first, "HTTP/1.1 ", x.first_len) == 0,
                "answer does not start with a status line");
    /* let the server see our close and free the connection; answer what is still deferred */
    for (int i = 0; i < 8 || n_deferred; i++)
        uv_run(loop, UV_RUN_NOWAIT);
    return 0;
}
