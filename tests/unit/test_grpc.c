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
#include "testhttp.h"
#include "testloop.h"
#include "testpeer.h"

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
    pc_error err = {0};
    CHECK_EQ_INT(pc_grpc_unframe(b.data, b.len, 100, &m, &n, &comp, &err), 0);
    CHECK_EQ_INT(n, 5);
    CHECK(!comp);
    CHECK(memcmp(m, "hello", 5) == 0);
    /* limits and malformed bodies */
    CHECK_EQ_INT(pc_grpc_unframe(b.data, b.len, 4, &m, &n, &comp, &err), PC_E2BIG);
    CHECK_CONTAINS(err.msg, "exceeds");
    CHECK_EQ_INT(pc_grpc_unframe(b.data, 3, 100, &m, &n, &comp, &err), PC_EINVAL);
    CHECK_EQ_INT(pc_grpc_unframe(b.data, 0, 100, &m, &n, &comp, &err), PC_EINVAL);
    CHECK_CONTAINS(err.msg, "no request message");
    CHECK_EQ_INT(pc_grpc_unframe(b.data, 8, 100, &m, &n, &comp, &err), PC_EINVAL);
    CHECK_CONTAINS(err.msg, "truncated");
    pc_grpc_frame("x", 1, true, &b); /* two messages in a unary body */
    CHECK_EQ_INT(pc_grpc_unframe(b.data, b.len, 100, &m, &n, &comp, &err), PC_EINVAL);
    CHECK_CONTAINS(err.msg, "more than one");
    b.data[0] = 2; /* reserved flag bits */
    CHECK_EQ_INT(pc_grpc_unframe(b.data, 10, 100, &m, &n, &comp, &err), PC_EINVAL);
    /* a 4 GiB - 1 length is read as unsigned, not sign-extended */
    uint8_t big[5] = {0, 0xff, 0xff, 0xff, 0xff};
    CHECK_EQ_INT(pc_grpc_unframe(big, 5, 1 << 20, &m, &n, &comp, &err), PC_E2BIG);
    b.len = 0;
    pc_grpc_frame(NULL, 0, false, &b); /* an empty message is a valid message */
    CHECK_EQ_INT(pc_grpc_unframe(b.data, b.len, 100, &m, &n, &comp, &err), 0);
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
    pc_error err = {0};
    CHECK_EQ_INT(pc_grpc_decompress(z.data, z.len, true, "gzip", 1 << 20, &out, &err), PC_OK);
    CHECK_EQ_INT(out.len, sizeof plain);
    CHECK(memcmp(out.data, plain, sizeof plain) == 0);
    /* the cap applies to the inflated size (a small bomb) */
    CHECK_EQ_INT(pc_grpc_decompress(z.data, z.len, true, "gzip", 1000, &out, &err), PC_E2BIG);
    CHECK_EQ_INT(pc_grpc_decompress(z.data, z.len, true, "snappy", 1 << 20, &out, &err),
                 PC_ENOTSUP);
    CHECK_CONTAINS(err.msg, "snappy");
    CHECK_EQ_INT(pc_grpc_decompress(z.data, z.len, true, NULL, 1 << 20, &out, &err), PC_EINVAL);
    CHECK_EQ_INT(
        pc_grpc_decompress((const uint8_t *)"notgzip", 7, true, "gzip", 1 << 20, &out, &err),
        PC_EINVAL);
    CHECK_EQ_INT(pc_grpc_decompress((const uint8_t *)plain, 10, false, NULL, 100, &out, &err),
                 PC_OK);
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
    CHECK_EQ_INT(pc_grpc_timeout_parse("123456789S", &ms), PC_EINVAL); /* at most 8 digits */
    CHECK_EQ_INT(pc_grpc_timeout_parse("10", &ms), PC_EINVAL);
    CHECK_EQ_INT(pc_grpc_timeout_parse("S", &ms), PC_EINVAL);
    CHECK_EQ_INT(pc_grpc_timeout_parse("10s", &ms), PC_EINVAL);
    CHECK_EQ_INT(pc_grpc_timeout_parse("-1S", &ms), PC_EINVAL);
    CHECK_EQ_INT(pc_grpc_timeout_parse("1SS", &ms), PC_EINVAL);
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
        char *e = pc_grpc_bin_encode((const uint8_t *)cases[i][0], strlen(cases[i][0]));
        CHECK_STR(e, cases[i][1]);
        free(e);
        CHECK_EQ_INT(pc_grpc_bin_decode(cases[i][1], &out), 0);
        CHECK_EQ_INT(out.len, strlen(cases[i][0]));
        CHECK(memcmp(out.data ? (char *)out.data : "", cases[i][0], out.len) == 0);
    }
    CHECK_EQ_INT(pc_grpc_bin_decode("Zm9vYg==", &out), 0); /* padded is accepted too */
    CHECK_EQ_INT(out.len, 4);
    CHECK_EQ_INT(pc_grpc_bin_decode("Zm9v!", &out), PC_EINVAL);
    CHECK_EQ_INT(pc_grpc_bin_decode("Z", &out), PC_EINVAL);

    /* Status{code 8, message, details [Any{RetryInfo{retry_delay 1.5s}}]} round trip */
    char *d = pc_grpc_status_details(PC_GRPC_RESOURCE_EXHAUSTED, "slow down", 1500);
    CHECK_EQ_INT(pc_grpc_status_details_retry_delay(d), 1500);
    CHECK_EQ_INT(pc_grpc_bin_decode(d, &out), 0);
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

/* What the server's handler saw. */
typedef struct outcome {
    int calls;
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
    pc_error err = {0};
    if (pc_grpc_unframe(call->body, call->body_len, 1 << 20, &m, &n, &comp, &err)) {
        pc_grpc_respond(call, PC_GRPC_INVALID_ARGUMENT, err.msg, NULL, 0, NULL);
        return;
    }
    pc_grpc_respond(call, 0, NULL, m, n, NULL);
}

/* Run the loop until *count reaches want (10 s at most). */
static void run_until(int *count, int want)
{
    CHECK(wait_count(loop, count, want, 10000));
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
    outcome so = {0};
    th2_result co = {0};
    pc_h2_server_opts o = {
        .max_body_bytes = 64 * 1024, .max_concurrent_streams = 4, .log_id = "h2test"};
    pc_h2_server *s = th2_server_start(loop, o, echo_handler, &so);
    pc_h2_client_opts co_opts = {.host = "127.0.0.1", .port = pc_h2_server_port(s)};
    pc_h2_client *c = pc_h2_client_new(loop, &co_opts);

    pc_buf body = {0};
    pc_grpc_frame("ping", 4, false, &body);
    pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, body.data, body.len, 5000,
                         th2_on_resp, &co);
    run_until(&co.done, 1);
    CHECK_EQ_INT(co.error, 0);
    CHECK_EQ_INT(co.grpc_code, 0);
    CHECK_EQ_INT(co.body_len, 9);

    /* trailers-only error with a percent-encoded message */
    pc_h2_client_request(c, "POST", "/x.S/Nope", grpc_hdrs, 2, body.data, body.len, 5000,
                         th2_on_resp, &co);
    run_until(&co.done, 2);
    CHECK_EQ_INT(co.grpc_code, PC_GRPC_UNIMPLEMENTED);
    CHECK_STR(co.grpc_msg, "no such method");

    /* over the body limit: answered early, the rest of the upload is dropped */
    pc_buf big = {0};
    pc_buf_reserve(&big, 300 * 1024);
    memset(big.data, 'z', 300 * 1024);
    big.len = 300 * 1024;
    pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, big.data, big.len, 5000, th2_on_resp,
                         &co);
    run_until(&co.done, 3);
    CHECK_EQ_INT(co.error, 0);
    CHECK_EQ_INT(co.grpc_code, PC_GRPC_RESOURCE_EXHAUSTED);

    /* 40 calls over a connection that allows 4 concurrent streams */
    int before = co.done;
    for (int i = 0; i < 40; i++)
        pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, body.data, body.len, 5000,
                             th2_on_resp, &co);
    run_until(&co.done, before + 40);
    CHECK_EQ_INT(co.grpc_code, 0);

    /* a call that times out on the client; the server's late answer is dropped safely */
    pc_h2_client_request(c, "POST", "/x.S/Slow", grpc_hdrs, 2, body.data, body.len, 100,
                         th2_on_resp, &co);
    run_until(&co.done, before + 41);
    CHECK_EQ_INT(co.error, UV_ETIMEDOUT);
    run_until(&answered_late, 1);

    /* the connection still works after all that */
    pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, body.data, body.len, 5000,
                         th2_on_resp, &co);
    run_until(&co.done, before + 42);
    CHECK_EQ_INT(co.grpc_code, 0);

    /* closing the server (GOAWAY) fails nothing in flight; the next call reconnects and is
     * refused because nothing listens any more */
    th2_server_stop(loop, s);
    pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, body.data, body.len, 5000,
                         th2_on_resp, &co);
    run_until(&co.done, before + 43);
    CHECK(co.error == UV_ECONNREFUSED || co.error == UV_ECONNRESET);

    /* close with a call queued: it is cancelled */
    pc_h2_client_request(c, "POST", "/x.S/Echo", grpc_hdrs, 2, body.data, body.len, 5000,
                         th2_on_resp, &co);
    th2_client_close(loop, c);
    CHECK_EQ_INT(co.done, before + 44);
    CHECK(co.error == UV_ECANCELED || co.error == UV_ECONNREFUSED);
    pc_buf_free(&body);
    pc_buf_free(&big);
}

/* A server shut down with a call in the handler answers it before closing. */
static void test_h2_shutdown_waits(void)
{
    outcome so = {0};
    th2_result co = {0};
    pc_h2_server *s =
        th2_server_start(loop, (pc_h2_server_opts){.log_id = "h2test"}, echo_handler, &so);
    pc_h2_client_opts co_opts = {.host = "127.0.0.1", .port = pc_h2_server_port(s)};
    pc_h2_client *c = pc_h2_client_new(loop, &co_opts);
    pc_buf body = {0};
    pc_grpc_frame("ping", 4, false, &body);
    answered_late = 0;
    pc_h2_client_request(c, "POST", "/x.S/Slow", grpc_hdrs, 2, body.data, body.len, 5000,
                         th2_on_resp, &co);
    run_until(&so.calls, 1);
    closed = 0;
    pc_h2_server_shutdown(s, on_closed, NULL);
    run_until(&co.done, 1);
    CHECK_EQ_INT(co.error, 0);
    CHECK_EQ_INT(co.grpc_code, 0);
    CHECK_EQ_INT(co.body_len, 9);
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

static void hostile_stream_closed(h2peer *p, int32_t id, uint32_t code)
{
    hostile *h = p->user;
    (void)id;
    if (code == NGHTTP2_REFUSED_STREAM) {
        h->refused_streams++;
    } else if (code != NGHTTP2_NO_ERROR) {
        h->stalled_rst = code;
        h->stalled_rst_seen++;
    }
}

static int got_rst(h2peer *p)
{
    return ((hostile *)p->user)->stalled_rst_seen > 0;
}

static void *hostile_thread(void *arg)
{
    hostile *h = arg;
    static const char http1[] = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    int fd = th_connect_loopback(h->port);
    if (fd >= 0) {
        if (write(fd, http1, sizeof http1 - 1) > 0) h->http1_closed = th_wait_closed(fd, 5000);
        close(fd);
    }
    fd = th_connect_loopback(h->port); /* silent: dropped after read_timeout, not idle_timeout */
    if (fd >= 0) {
        h->silent_closed = th_wait_closed(fd, 5000);
        close(fd);
    }
    h2peer p;
    h2peer_connect(&p, h->port, (h2peer_cbs){.on_stream_close = hostile_stream_closed}, true, h);
    if (p.fd >= 0) {
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
            nghttp2_submit_headers(p.ng, NGHTTP2_FLAG_NONE, -1, NULL, nva, 5, NULL);
        h2peer_flush(&p);
        h2peer_pump(&p, 5000, 50, 0, got_rst);
    }
    h2peer_close(&p);
    atomic_store(&h->done, 1);
    return NULL;
}

static void test_h2_hostile_peers(void)
{
    outcome so = {0};
    pc_h2_server_opts o = {.max_concurrent_streams = 4,
                           .read_timeout_ms = 300,
                           .idle_timeout_ms = 60000,
                           .log_id = "h2test"};
    pc_h2_server *s = th2_server_start(loop, o, echo_handler, &so);
    hostile h = {.port = pc_h2_server_port(s)};
    CHECK(th_serve_while(loop, hostile_thread, &h, &h.done, 10000));
    CHECK(h.http1_closed);
    CHECK(h.silent_closed);
    CHECK_EQ_INT(h.refused_streams, 2);
    CHECK(h.stalled_rst_seen >= 1);
    CHECK_EQ_INT(h.stalled_rst, NGHTTP2_CANCEL);
    CHECK_EQ_INT(so.calls, 0); /* nothing incomplete reached the handler */
    th2_server_stop(loop, s);
}

/* ---- keepalive: server PINGs, a peer that never answers, a peer that pings too often ---- */

typedef struct ka_peer {
    h2peer p;
    int pings; /* PINGs (not acks) received */
    int goaways;
    uint32_t goaway_code;
    char goaway_debug[32];
} ka_peer;

typedef struct ka_result {
    int port;
    ka_peer silent, acking, flooding;
    atomic_int done;
} ka_result;

static void ka_on_frame(h2peer *hp, const nghttp2_frame *f)
{
    ka_peer *p = hp->user;
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
}

/* Connect, then read and answer what nghttp2 answers for up to ms (or until closed), sending a
 * PING every every_ms when > 0. */
static void ka_run(ka_peer *p, int port, bool auto_ack, int ms, int every_ms)
{
    h2peer_connect(&p->p, port, (h2peer_cbs){.on_frame = ka_on_frame}, auto_ack, p);
    if (p->p.fd >= 0) h2peer_pump(&p->p, ms, 10, every_ms, NULL);
    h2peer_close(&p->p);
}

static void *ka_thread(void *arg)
{
    ka_result *r = arg;
    /* never acks: PINGed after 200 ms of quiet, GOAWAY and closed 300 ms later */
    ka_run(&r->silent, r->port, false, 3000, 0);
    /* acks (nghttp2 does by default): PINGed again and again, never closed */
    ka_run(&r->acking, r->port, true, 1500, 0);
    /* pings every 20 ms without a call open: the third strike is told to calm down */
    ka_run(&r->flooding, r->port, true, 3000, 20);
    atomic_store(&r->done, 1);
    return NULL;
}

static void test_h2_keepalive(void)
{
    outcome so = {0};
    pc_h2_server_opts o = {.keepalive_time_ms = 200,
                           .keepalive_timeout_ms = 300,
                           .ping_min_time_ms = 10000,
                           .log_id = "h2test"};
    pc_h2_server *s = th2_server_start(loop, o, echo_handler, &so);
    ka_result r = {.port = pc_h2_server_port(s)};
    CHECK(th_serve_while(loop, ka_thread, &r, &r.done, 10000));
    CHECK_EQ_INT(r.silent.pings, 1);
    CHECK_EQ_INT(r.silent.goaways, 1);
    CHECK_EQ_INT(r.silent.goaway_code, NGHTTP2_NO_ERROR);
    CHECK(r.silent.p.closed);
    CHECK(r.acking.pings >= 3); /* about one per 200 ms of quiet over 1.5 s */
    CHECK_EQ_INT(r.acking.goaways, 0);
    CHECK(!r.acking.p.closed);
    CHECK_EQ_INT(r.flooding.goaways, 1);
    CHECK_EQ_INT(r.flooding.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
    CHECK_STR(r.flooding.goaway_debug, "too_many_pings");
    CHECK(r.flooding.p.closed);
    th2_server_stop(loop, s);
}

int main(void)
{
    uv_loop_t l;
    loop = test_loop_open(&l);
    RUN(test_framing);
    RUN(test_decompress);
    RUN(test_message_and_timeout);
    RUN(test_base64_and_details);
    RUN(test_h2_roundtrip);
    RUN(test_h2_shutdown_waits);
    RUN(test_h2_hostile_peers);
    RUN(test_h2_keepalive);
    return test_loop_close(loop);
}
