/* The memory limiter's global pause: while paused, servers read nothing (a request waits in the
 * socket); on resume it is served. */
#include <uv.h>

#include "check.h"
#include "net/http_client.h"
#include "net/http_pause.h"
#include "net/http_server.h"
#include "testhttp.h"

static int answered, status;
static uint64_t answered_at;
static uv_loop_t *loop;

static void on_response(const pc_http_response *r, void *arg)
{
    (void)arg;
    answered = 1;
    status = r->status;
    answered_at = uv_now(loop);
}

static void resume(uv_timer_t *t)
{
    CHECK_EQ_INT(answered, 0); /* nothing was read while paused */
    pc_http_servers_pause(0);
    uv_close((uv_handle_t *)t, NULL);
}

int main(void)
{
    loop = uv_default_loop();
    pc_http_server_opts o = {.max_body_bytes = 1024,
                             .max_header_bytes = 8192,
                             .read_timeout_ms = 5000,
                             .idle_timeout_ms = 5000,
                             .max_connections = 8,
                             .log_id = "test"};
    th_server ts; /* answers 200 "ok" */
    th_start(&ts, loop, o, NULL);
    ts.ok_ctype = "text/plain";
    ts.ok_body = "ok";
    pc_http_client_opts co = {
        .host = "127.0.0.1", .port = ts.port, .max_connections = 1, .log_id = "client"};
    pc_http_client *c = pc_http_client_new(loop, &co);
    pc_http_servers_pause(1);
    CHECK_EQ_INT(pc_http_servers_paused(), 1);
    uint64_t start = uv_now(loop);
    pc_http_client_request(c, "POST", "/x", NULL, "hi", 2, 5000, on_response, NULL);
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, resume, 300, 0);
    while (!answered && uv_run(loop, UV_RUN_ONCE)) {
    }
    CHECK_EQ_INT(status, 200);
    CHECK(answered_at - start >= 300);
    th_client_close(loop, c);
    th_stop(&ts);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    return check_report();
}
