/* gRPC pieces: framing, compression, grpc-message and grpc-timeout, status details (RetryInfo),
 * and the HTTP/2 server and client talking to each other over loopback on one uv loop (round
 * trip, trailers-only errors, size limits, many streams over few, timeouts, refused connects). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "net/grpc.h"
#include "base/gzip.h"
#include "net/h2_client.h"
#include "net/h2_server.h"
#include "base/alloc.h"
#include "base/log.h"
#include "rpc_status.pb-c.h"

static uv_loop_t *loop;

/* ---- pure functions ---- */

static void test_framing(void)
{
    pc_buf b = {0};
    pc_grpc_frame("hello", 5, false, &b);
    CHECK_EQ_INT(b.len, 10);
    CHECK(memcmp(b.data, "\0\0\0\0\5hello", 10) == 0);
    const uint8_t *m;
    size_t n;
    bool comp = true;
    char err[256];
    CHECK_EQ_INT(pc_grpc_unframe(b.data, b.len, 100, &m, &n, &comp, err, sizeof err), 0);
    CHECK_EQ_INT(n, 5);
    CHECK(!comp);
    CHECK(memcmp(m, "hello", 5) == 0);
    /* limits and malformed bodies */
    CHECK_EQ_INT(pc_grpc_unframe(b.data, b.len, 4, &m, &n, &comp, err, sizeof err),
                 PC_GRPC_FRAME_TOO_LARGE);
    CHECK_CONTAINS(err, "exceeds");
    CHECK_EQ_INT(pc_grpc_unframe(b.data, 3, 100, &m, &n, &comp, err, sizeof err),
                 PC_GRPC_FRAME_MALFORMED);
    CHECK_EQ_INT(pc_grpc_unframe(b.data, 0, 100, &m, &n, &comp, err, sizeof err),
                 PC_GRPC_FRAME_MALFORMED);
    CHECK_CONTAINS(err, "no request message");
    CHECK_EQ_INT(pc_grpc_unframe(b.data, 8, 100, &m, &n, &comp, err, sizeof err),
                 PC_GRPC_FRAME_MALFORMED);
    CHECK_CONTAINS(err, "truncated");
    pc_grpc_frame("x", 1, true, &b); /* two messages in a unary body */
    CHECK_EQ_INT(pc_grpc_unframe(b.data, b.len, 100, &m, &n, &comp, err, sizeof err),
                 PC_GRPC_FRAME_MALFORMED);
    CHECK_CONTAINS(err, "more than one");
    b.data[0] = 2; /* reserved flag bits */
    CHECK_EQ_INT(pc_grpc_unframe(b.data, 10, 100, &m, &n, &comp, err, sizeof err),
                 PC_GRPC_FRAME_MALFORMED);
    /* a 4 GiB - 1 length is read as unsigned, not sign-extended */
    uint8_t big[5] = {0, 0xff, 0xff, 0xff, 0xff};
    CHECK_EQ_INT(pc_grpc_unframe(big, 5, 1 << 20, &m, &n, &comp, err, sizeof err),
                 PC_GRPC_FRAME_TOO_LARGE);
    b.len = 0;
    pc_grpc_frame(NULL, 0, false, &b); /* an empty message is a valid message */
    CHECK_EQ_INT(pc_grpc_unframe(b.data, b.len, 100, &m, &n, &comp, err, sizeof err), 0);
    CHECK_EQ_INT(n, 0);
    pc_buf_free(&b);
}

static void test_decompress(void)
{
    char plain[4096];
    for (size_t i = 0; i < sizeof plain; i++)
        plain[i] = (char)('a' + i % 7);
    pc_buf z = {0}, out = {0};
    pc_gzip_deflate((const uint8_t *)plain, sizeof plain, 6, &z);
    char err[256];
    CHECK_EQ_INT(pc_grpc_decompress(z.data, z.len, true, "gzip", 1 << 20, &out, err, sizeof err),
                 PC_GRPC_OK);
    CHECK_EQ_INT(out.len, sizeof plain);
    CHECK(memcmp(out.data, plain, sizeof plain) == 0);
    /* the cap applies to the inflated size (a small bomb) */
    CHECK_EQ_INT(pc_grpc_decompress(z.data, z.len, true, "gzip", 1000, &out, err, sizeof err),
                 PC_GRPC_RESOURCE_EXHAUSTED);
    CHECK_EQ_INT(pc_grpc_decompress(z.data, z.len, true, "snappy", 1 << 20, &out, err, sizeof err),
                 PC_GRPC_UNIMPLEMENTED);
    CHECK_CONTAINS(err, "snappy");
    CHECK_EQ_INT(pc_grpc_decompress(z.data, z.len, true, NULL, 1 << 20, &out, err, sizeof err),
                 PC_GRPC_INTERNAL);
    CHECK_EQ_INT(pc_grpc_decompress((const uint8_t *)"notgzip", 7, true, "gzip", 1 << 20, &out, err,
                                    sizeof err),
                 PC_GRPC_INTERNAL);
    CHECK_EQ_INT(
        pc_grpc_decompress((const uint8_t *)plain, 10, false, NULL, 100, &out, err, sizeof err),
        PC_GRPC_OK);
    CHECK_EQ_INT(out.len, 10);
    pc_buf_free(&z);
    pc_buf_free(&out);
}

static void test_message_and_timeout(void)
{
    char *e = pc_grpc_message_encode("50% off\r\nna\xc3\xafve");
    CHECK_STR(e, "50%25 off%0D%0Ana%C3%AFve");
    char *d = pc_grpc_message_decode(e);
    CHECK_STR(d, "50% off\r\nna\xc3\xafve");
    free(e);
    free(d);
    d = pc_grpc_message_decode("bad %zz and %4");
    CHECK_STR(d, "bad %zz and %4");
    free(d);

    uint64_t ms = 0;
    CHECK_EQ_INT(pc_grpc_timeout_parse("1H", &ms), 0);
    CHECK_EQ_INT(ms, 3600000);
    CHECK_EQ_INT(pc_grpc_timeout_parse("2M", &ms), 0);
    CHECK_EQ_INT(ms, 120000);
    CHECK_EQ_INT(pc_grpc_timeout_parse("30S", &ms), 0);
    CHECK_EQ_INT(ms, 30000);
    CHECK_EQ_INT(pc_grpc_timeout_parse("250m", &ms), 0);
    CHECK_EQ_INT(ms, 250);
    CHECK_EQ_INT(pc_grpc_timeout_parse("1500u", &ms), 0);
    CHECK_EQ_INT(ms, 2); /* rounded up */
    CHECK_EQ_INT(pc_grpc_timeout_parse("1n", &ms), 0);
    CHECK_EQ_INT(ms, 1);
    CHECK_EQ_INT(pc_grpc_timeout_parse("99999999S", &ms), 0);
    CHECK_EQ_INT(pc_grpc_timeout_parse("123456789S", &ms), -1); /* at most 8 digits */
    CHECK_EQ_INT(pc_grpc_timeout_parse("10", &ms), -1);
    CHECK_EQ_INT(pc_grpc_timeout_parse("S", &ms), -1);
    CHECK_EQ_INT(pc_grpc_timeout_parse("10s", &ms), -1);
    CHECK_EQ_INT(pc_grpc_timeout_parse("-1S", &ms), -1);
    CHECK_EQ_INT(pc_grpc_timeout_parse("1SS", &ms), -1);
    char t[16];
    pc_grpc_timeout_format(30000, t, sizeof t);
    CHECK_STR(t, "30000m");
    pc_grpc_timeout_format(200000000, t, sizeof t);
    CHECK_STR(t, "200000S");
    CHECK_EQ_INT(pc_grpc_timeout_parse(t, &ms), 0);
    CHECK_EQ_INT(ms, 200000000);

    CHECK_STR(pc_grpc_code_name(14), "UNAVAILABLE");
    CHECK_STR(pc_grpc_code_name(99), "UNKNOWN");
    CHECK_EQ_INT(pc_grpc_code_from_http(503), PC_GRPC_UNAVAILABLE);
    CHECK_EQ_INT(pc_grpc_code_from_http(404), PC_GRPC_UNIMPLEMENTED);
    CHECK_EQ_INT(pc_grpc_code_from_http(500), PC_GRPC_UNKNOWN);
}

static void test_base64_and_details(void)
{
    const char *cases[][2] = {{"", ""},        {"f", "Zg"},        {"fo", "Zm8"},
                              {"foo", "Zm9v"}, {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}};
    pc_buf out = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *e = pc_base64_encode((const uint8_t *)cases[i][0], strlen(cases[i][0]));
        CHECK_STR(e, cases[i][1]);
        free(e);
        CHECK_EQ_INT(pc_base64_decode(cases[i][1], &out), 0);
        CHECK_EQ_INT(out.len, strlen(cases[i][0]));
        CHECK(memcmp(out.data ? (char *)out.data : "", cases[i][0], out.len) == 0);
    }
    CHECK_EQ_INT(pc_base64_decode("Zm9vYg==", &out), 0); /* padded is accepted too */
    CHECK_EQ_INT(out.len, 4);
    CHECK_EQ_INT(pc_base64_decode("Zm9v!", &out), -1);
    CHECK_EQ_INT(pc_base64_decode("Z", &out), -1);

    /* Status{code 8, message, details [Any{RetryInfo{retry_delay 1.5s}}]} round trip */
    char *d = pc_grpc_status_details(PC_GRPC_RESOURCE_EXHAUSTED, "slow down", 1500);
    CHECK_EQ_INT(pc_grpc_status_details_retry_delay(d), 1500);
    CHECK_EQ_INT(pc_base64_decode(d, &out), 0);
    Google__Rpc__Status *st = google__rpc__status__unpack(NULL, out.len, out.data);
    CHECK(st != NULL);
    if (st) {
        CHECK_EQ_INT(st->code, 8);
        CHECK_STR(st->message, "slow down");
        CHECK_EQ_INT(st->n_details, 1);
        if (st->n_details) {
            CHECK_STR(st->details[0]->type_url, "type.googleapis.com/google.rpc.RetryInfo");
            Google__Rpc__RetryInfo *ri = google__rpc__retry_info__unpack(
                NULL, st->details[0]->value.len, st->details[0]->value.data);
            CHECK(ri && ri->retry_delay);
            if (ri && ri->retry_delay) {
                CHECK_EQ_INT(ri->retry_delay->seconds, 1);
                CHECK_EQ_INT(ri->retry_delay->nanos, 500000000);
            }
            if (ri) google__rpc__retry_info__free_unpacked(ri, NULL);
        }
        google__rpc__status__free_unpacked(st, NULL);
    }
    free(d);
    d = pc_grpc_status_details(PC_GRPC_UNAVAILABLE, "no details", -1);
    CHECK_EQ_INT(pc_grpc_status_details_retry_delay(d), -1);
    free(d);
    CHECK_EQ_INT(pc_grpc_status_details_retry_delay("!!!"), -1);
    CHECK_EQ_INT(pc_grpc_status_details_retry_delay("CAgSAA"), -1); /* Status without details */
    pc_buf_free(&out);
}

/* ---- HTTP/2 server and client on one loop ---- */

typedef struct outcome {
    int calls, done;
    int last_error, last_code;
    size_t last_len;
    char last_msg[256];
} outcome;

static int answered_late;

static void late_answer(uv_timer_t *t)
{
    pc_h2_call *call = t->data;
    pc_grpc_respond(call, 0, NULL, "late", 4, NULL);
    answered_late++;
    uv_close((uv_handle_t *)t, (uv_close_cb)free);
}

/* Echoes the request message; "/x.S/Slow" answers after 300 ms; other paths are UNIMPLEMENTED;
 * oversized calls are RESOURCE_EXHAUSTED. */
static void echo_handler(pc_h2_call *call, void *arg)
{
    outcome *o = arg;
    o->calls++;
    if (call->too_large) {
        pc_grpc_respond(call, PC_GRPC_RESOURCE_EXHAUSTED, "too large", NULL, 0, NULL);
        return;
    }
    if (strcmp(call->path, "/x.S/Slow") == 0) {
        uv_timer_t *t = pc_xmalloc(sizeof *t);
        uv_timer_init(loop, t);
        t->data = call;
        uv_timer_start(t, late_answer, 300, 0);
        return;
    }
    if (strcmp(call->path, "/x.S/Echo") != 0) {
        pc_grpc_respond(call, PC_GRPC_UNIMPLEMENTED, "no such method", NULL, 0, NULL);
        return;
    }
    const uint8_t *m;
    size_t n;
    bool comp;
    char err[128];
    if (pc_grpc_unframe(call->body, call->body_len, 1 << 20, &m, &n, &comp, err, sizeof err)) {
        pc_grpc_respond(call, PC_GRPC_INVALID_ARGUMENT, err, NULL, 0, NULL);
        return;
    }
    pc_grpc_respond(call, 0, NULL, m, n, NULL);
}

static const char *hdr(const pc_h2_header *h, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(h[i].name, name)) return h[i].value;
    return NULL;
}

static void on_resp(const pc_h2_response *r, void *arg)
{
    outcome *o = arg;
    o->done++;
    o->last_error = r->error;
    const char *gs = hdr(r->trailers, r->n_trailers, "grpc-status");
    if (!gs) gs = hdr(r->headers, r->n_headers, "grpc-status");
    o->last_code = gs ? atoi(gs) : -1;
    const char *gm = hdr(r->trailers, r->n_trailers, "grpc-message");
    if (!gm) gm = hdr(r->headers, r->n_headers, "grpc-message");
    snprintf(o->last_msg, sizeof o->last_msg, "%s", gm ? gm : "");
    o->last_len = r->body_len;
}

static int deadline_hit;
static void on_deadline(uv_timer_t *t)
{
    (void)t;
    deadline_hit = 1;
}

/* Run the loop until *count reaches want (or 10 s pass). */
static void run_until(int *count, int want)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    deadline_hit = 0;
    uv_timer_start(&t, on_deadline, 10000, 0);
    while (*count < want && !deadline_hit)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    CHECK(!deadline_hit);
}

static int closed;
static void on_closed(void *arg)
{
    (void)arg;
    closed++;
}

static const pc_h2_header grpc_hdrs[] = {{"content-type", "application/grpc"}, {"te", "trailers"}};

static void test_h2_roundtrip(void)
{
    outcome so = {0}, co = {0};
    pc_h2_server_opts o = {.host = "127.0.0.1",
                           .max_body_bytes = 64 * 1024,
                           .max_concurrent_streams = 4,
                           .log_id = "h2test"};
    pc_h2_server *s = pc_h2_server_new(loop, &o, echo_handler, &so);
    char err[256];
    CHECK_EQ_INT(pc_h2_server_start(s, err, sizeof err), 0);
    pc_h2_client_opts co_opts = {.host = "127.0.0.1", .port = pc_h2_server_port(s)};
    pc_h2_client *c = pc_h2_client_new(loop, &co_opts);

    pc_buf body = {0};
    pc_grpc_frame("ping", 4, false, &body);
    pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, body.data, body.len, 5000, on_resp,
                         &co);
    run_until(&co.done, 1);
    CHECK_EQ_INT(co.last_error, 0);
    CHECK_EQ_INT(co.last_code, 0);
    CHECK_EQ_INT(co.last_len, 9);

    /* trailers-only error with a percent-encoded message */
    pc_h2_client_request(c, "POST", "/x.S/Nope", grpc_hdrs, 2, body.data, body.len, 5000, on_resp,
                         &co);
    run_until(&co.done, 2);
    CHECK_EQ_INT(co.last_code, PC_GRPC_UNIMPLEMENTED);
    CHECK_STR(co.last_msg, "no such method");

    /* over the body limit: answered early, the rest of the upload is dropped */
    pc_buf big = {0};
    pc_buf_reserve(&big, 300 * 1024);
    memset(big.data, 'z', 300 * 1024);
    big.len = 300 * 1024;
    pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, big.data, big.len, 5000, on_resp,
                         &co);
    run_until(&co.done, 3);
    CHECK_EQ_INT(co.last_error, 0);
    CHECK_EQ_INT(co.last_code, PC_GRPC_RESOURCE_EXHAUSTED);

    /* 40 calls over a connection that allows 4 concurrent streams */
    int before = co.done;
    for (int i = 0; i < 40; i++)
        pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, body.data, body.len, 5000,
                             on_resp, &co);
    run_until(&co.done, before + 40);
    CHECK_EQ_INT(co.last_code, 0);

    /* a call that times out on the client; the server's late answer is dropped safely */
    pc_h2_client_request(c, "POST", "/x.S/Slow", grpc_hdrs, 2, body.data, body.len, 100, on_resp,
                         &co);
    run_until(&co.done, before + 41);
    CHECK_EQ_INT(co.last_error, UV_ETIMEDOUT);
    run_until(&answered_late, 1);

    /* the connection still works after all that */
    pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, body.data, body.len, 5000, on_resp,
                         &co);
    run_until(&co.done, before + 42);
    CHECK_EQ_INT(co.last_code, 0);

    /* closing the server (GOAWAY) fails nothing in flight; the next call reconnects and is
     * refused because nothing listens any more */
    closed = 0;
    pc_h2_server_shutdown(s, on_closed, NULL);
    run_until(&closed, 1);
    pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, body.data, body.len, 5000, on_resp,
                         &co);
    run_until(&co.done, before + 43);
    CHECK(co.last_error == UV_ECONNREFUSED || co.last_error == UV_ECONNRESET);

    /* close with a call queued: it is cancelled */
    pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, body.data, body.len, 5000, on_resp,
                         &co);
    pc_h2_client_close(c, on_closed, NULL);
    run_until(&closed, 2);
    CHECK_EQ_INT(co.done, before + 44);
    CHECK(co.last_error == UV_ECANCELED || co.last_error == UV_ECONNREFUSED);
    pc_buf_free(&body);
    pc_buf_free(&big);
}

/* A server shut down with a call in the handler answers it before closing. */
static void test_h2_shutdown_waits(void)
{
    outcome so = {0}, co = {0};
    pc_h2_server_opts o = {.host = "127.0.0.1", .log_id = "h2test"};
    pc_h2_server *s = pc_h2_server_new(loop, &o, echo_handler, &so);
    char err[256];
    CHECK_EQ_INT(pc_h2_server_start(s, err, sizeof err), 0);
    pc_h2_client_opts co_opts = {.host = "127.0.0.1", .port = pc_h2_server_port(s)};
    pc_h2_client *c = pc_h2_client_new(loop, &co_opts);
    pc_buf body = {0};
    pc_grpc_frame("ping", 4, false, &body);
    answered_late = 0;
    pc_h2_client_request(c, "POST", "/x.S/Slow", grpc_hdrs, 2, body.data, body.len, 5000, on_resp,
                         &co);
    run_until(&so.calls, 1);
    closed = 0;
    pc_h2_server_shutdown(s, on_closed, NULL);
    run_until(&co.done, 1);
    CHECK_EQ_INT(co.last_error, 0);
    CHECK_EQ_INT(co.last_code, 0);
    CHECK_EQ_INT(co.last_len, 9);
    run_until(&closed, 1);
    pc_h2_client_close(c, on_closed, NULL);
    run_until(&closed, 2);
    pc_buf_free(&body);
}

/* ---- hostile peers, from a helper thread with blocking sockets ---- */

typedef struct hostile {
    int port;
    int http1_closed;     /* an HTTP/1.1 request on the h2c port: connection closed */
    uint32_t stalled_rst; /* RST_STREAM code for a request that never ends */
    int stalled_rst_seen;
    int silent_closed;   /* a connection that never sends a byte: closed */
    int refused_streams; /* streams beyond SETTINGS_MAX_CONCURRENT_STREAMS */
    atomic_int done;
} hostile;

static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Wait (bounded) for the peer to close: 1 if it did. */
static int wait_closed(int fd, int ms)
{
    char buf[4096];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0) return 0;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return 1;
    }
}

typedef struct raw_client {
    int fd;
    nghttp2_session *ng;
    hostile *h;
} raw_client;

static int raw_on_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    raw_client *rc = ud;
    (void)ng;
    (void)id;
    if (code == NGHTTP2_REFUSED_STREAM) {
        rc->h->refused_streams++;
    } else if (code != NGHTTP2_NO_ERROR) {
        rc->h->stalled_rst = code;
        rc->h->stalled_rst_seen++;
    }
    return 0;
}

static void raw_flush(raw_client *rc)
{
    const uint8_t *d;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(rc->ng, &d)) > 0)
        if (write(rc->fd, d, (size_t)n) != n) return;
}

/* Read and feed nghttp2 until pred or ms pass. */
static void raw_pump(raw_client *rc, int ms, int (*pred)(hostile *))
{
    uint8_t buf[16384];
    for (int waited = 0; waited < ms && !(pred && pred(rc->h)); waited += 50) {
        struct pollfd p = {.fd = rc->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        ssize_t n = read(rc->fd, buf, sizeof buf);
        if (n <= 0) return;
        nghttp2_session_mem_recv(rc->ng, buf, (size_t)n);
        raw_flush(rc);
    }
}

static int got_rst(hostile *h)
{
    return h->stalled_rst_seen > 0;
}

static void *hostile_thread(void *arg)
{
    hostile *h = arg;
    static const char http1[] = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    int fd = connect_port(h->port);
    if (fd >= 0) {
        if (write(fd, http1, sizeof http1 - 1) > 0) h->http1_closed = wait_closed(fd, 5000);
        close(fd);
    }
    fd = connect_port(h->port); /* silent: dropped after read_timeout, not idle_timeout */
    if (fd >= 0) {
        h->silent_closed = wait_closed(fd, 5000);
        close(fd);
    }
    raw_client rc = {.fd = connect_port(h->port), .h = h};
    if (rc.fd >= 0) {
        nghttp2_session_callbacks *cbs;
        nghttp2_session_callbacks_new(&cbs);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, raw_on_close);
        nghttp2_session_client_new(&rc.ng, cbs, &rc);
        nghttp2_session_callbacks_del(cbs);
        nghttp2_submit_settings(rc.ng, NGHTTP2_FLAG_NONE, NULL, 0);
        nghttp2_nv nva[] = {
            {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
            {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
            {(uint8_t *)":authority", (uint8_t *)"x", 10, 1, 0},
            {(uint8_t *)":path", (uint8_t *)"/x.S/Echo", 5, 9, 0},
            {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
        };
        /* six requests that never end, sent before the server's SETTINGS (max 4 streams) could
         * make our side hold some back: four are taken and later cancelled, two refused */
        for (int i = 0; i < 6; i++)
            nghttp2_submit_headers(rc.ng, NGHTTP2_FLAG_NONE, -1, NULL, nva, 5, NULL);
        raw_flush(&rc);
        raw_pump(&rc, 5000, got_rst);
        nghttp2_session_del(rc.ng);
        close(rc.fd);
    }
    atomic_store(&h->done, 1);
    return NULL;
}

static int hostile_done;
static void poll_done(uv_timer_t *t)
{
    hostile *h = t->data;
    if (atomic_load(&h->done)) hostile_done = 1;
}

static void test_h2_hostile_peers(void)
{
    outcome so = {0};
    pc_h2_server_opts o = {.host = "127.0.0.1",
                           .max_concurrent_streams = 4,
                           .read_timeout_ms = 300,
                           .idle_timeout_ms = 60000,
                           .log_id = "h2test"};
    pc_h2_server *s = pc_h2_server_new(loop, &o, echo_handler, &so);
    char err[256];
    CHECK_EQ_INT(pc_h2_server_start(s, err, sizeof err), 0);
    hostile h = {.port = pc_h2_server_port(s)};
    pthread_t th;
    pthread_create(&th, NULL, hostile_thread, &h);
    uv_timer_t t;
    uv_timer_init(loop, &t);
    t.data = &h;
    uv_timer_start(&t, poll_done, 20, 20);
    hostile_done = 0;
    run_until(&hostile_done, 1);
    uv_close((uv_handle_t *)&t, NULL);
    pthread_join(th, NULL);
    CHECK(h.http1_closed);
    CHECK(h.silent_closed);
    CHECK_EQ_INT(h.refused_streams, 2);
    CHECK(h.stalled_rst_seen >= 1);
    CHECK_EQ_INT(h.stalled_rst, NGHTTP2_CANCEL);
    CHECK_EQ_INT(so.calls, 0); /* nothing incomplete reached the handler */
    closed = 0;
    pc_h2_server_shutdown(s, on_closed, NULL);
    run_until(&closed, 1);
}

/* ---- keepalive: server PINGs, a peer that never answers, a peer that pings too often ---- */

typedef struct ka_peer {
    int fd;
    nghttp2_session *ng;
    int pings; /* PINGs (not acks) received */
    int goaways;
    uint32_t goaway_code;
    char goaway_debug[32];
    int closed; /* the server closed the connection */
} ka_peer;

typedef struct ka_result {
    int port;
    ka_peer silent, acking, flooding;
    atomic_int done;
} ka_result;

static int ka_on_frame(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    ka_peer *p = ud;
    (void)ng;
    if (f->hd.type == NGHTTP2_PING && !(f->hd.flags & NGHTTP2_FLAG_ACK)) p->pings++;
    if (f->hd.type == NGHTTP2_GOAWAY) {
        p->goaways++;
        p->goaway_code = f->goaway.error_code;
        size_t n = f->goaway.opaque_data_len < sizeof p->goaway_debug - 1
                       ? f->goaway.opaque_data_len
                       : sizeof p->goaway_debug - 1;
        memcpy(p->goaway_debug, f->goaway.opaque_data, n);
        p->goaway_debug[n] = 0;
    }
    return 0;
}

static void ka_connect(ka_peer *p, int port, bool auto_ack)
{
    p->fd = connect_port(port);
    nghttp2_session_callbacks *cbs;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, ka_on_frame);
    nghttp2_option *opt;
    nghttp2_option_new(&opt);
    if (!auto_ack) nghttp2_option_set_no_auto_ping_ack(opt, 1);
    nghttp2_session_client_new2(&p->ng, cbs, p, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_submit_settings(p->ng, NGHTTP2_FLAG_NONE, NULL, 0);
}

static void ka_flush(ka_peer *p)
{
    const uint8_t *d;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(p->ng, &d)) > 0)
        if (write(p->fd, d, (size_t)n) != n) return;
}

/* Read, answer what nghttp2 answers, for up to ms (or until closed); every_ms > 0: also send a
 * PING that often. */
static void ka_pump(ka_peer *p, int ms, int every_ms)
{
    uint8_t buf[16384];
    for (int waited = 0; waited < ms && !p->closed; waited += 10) {
        if (every_ms && waited % every_ms == 0) nghttp2_submit_ping(p->ng, NGHTTP2_FLAG_NONE, NULL);
        ka_flush(p);
        struct pollfd pf = {.fd = p->fd, .events = POLLIN};
        if (poll(&pf, 1, 10) <= 0) continue;
        ssize_t n = read(p->fd, buf, sizeof buf);
        if (n <= 0) {
            p->closed = 1;
            break;
        }
        nghttp2_session_mem_recv(p->ng, buf, (size_t)n);
    }
}

static void ka_close(ka_peer *p)
{
    nghttp2_session_del(p->ng);
    close(p->fd);
}

static void *ka_thread(void *arg)
{
    ka_result *r = arg;
    /* never acks: PINGed after 200 ms of quiet, GOAWAY and closed 300 ms later */
    ka_connect(&r->silent, r->port, false);
    ka_pump(&r->silent, 3000, 0);
    ka_close(&r->silent);
    /* acks (nghttp2 does by default): PINGed again and again, never closed */
    ka_connect(&r->acking, r->port, true);
    ka_pump(&r->acking, 1500, 0);
    ka_close(&r->acking);
    /* pings every 20 ms without a call open: the third strike is told to calm down */
    ka_connect(&r->flooding, r->port, true);
    ka_pump(&r->flooding, 3000, 20);
    ka_close(&r->flooding);
    atomic_store(&r->done, 1);
    return NULL;
}

static void poll_ka_done(uv_timer_t *t)
{
    ka_result *r = t->data;
    if (atomic_load(&r->done)) hostile_done = 1;
}

static void test_h2_keepalive(void)
{
    outcome so = {0};
    pc_h2_server_opts o = {.host = "127.0.0.1",
                           .keepalive_time_ms = 200,
                           .keepalive_timeout_ms = 300,
                           .ping_min_time_ms = 10000,
                           .log_id = "h2test"};
    pc_h2_server *s = pc_h2_server_new(loop, &o, echo_handler, &so);
    char err[256];
    CHECK_EQ_INT(pc_h2_server_start(s, err, sizeof err), 0);
    ka_result r = {.port = pc_h2_server_port(s)};
    pthread_t th;
    pthread_create(&th, NULL, ka_thread, &r);
    uv_timer_t t;
    uv_timer_init(loop, &t);
    t.data = &r;
    uv_timer_start(&t, poll_ka_done, 20, 20);
    hostile_done = 0;
    run_until(&hostile_done, 1);
    uv_close((uv_handle_t *)&t, NULL);
    pthread_join(th, NULL);
    CHECK_EQ_INT(r.silent.pings, 1);
    CHECK_EQ_INT(r.silent.goaways, 1);
    CHECK_EQ_INT(r.silent.goaway_code, NGHTTP2_NO_ERROR);
    CHECK(r.silent.closed);
    CHECK(r.acking.pings >= 3); /* about one per 200 ms of quiet over 1.5 s */
    CHECK_EQ_INT(r.acking.goaways, 0);
    CHECK(!r.acking.closed);
    CHECK_EQ_INT(r.flooding.goaways, 1);
    CHECK_EQ_INT(r.flooding.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
    CHECK_STR(r.flooding.goaway_debug, "too_many_pings");
    CHECK(r.flooding.closed);
    closed = 0;
    pc_h2_server_shutdown(s, on_closed, NULL);
    run_until(&closed, 1);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    pc_log_set_level(PC_LOG_ERROR);
    uv_loop_t l;
    uv_loop_init(&l);
    loop = &l;
    RUN(test_framing);
    RUN(test_decompress);
    RUN(test_message_and_timeout);
    RUN(test_base64_and_details);
    RUN(test_h2_roundtrip);
    RUN(test_h2_shutdown_waits);
    RUN(test_h2_hostile_peers);
    RUN(test_h2_keepalive);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(loop), 0); /* every handle was closed */
    return check_report();
}
