/* gRPC over HTTP/2: the h2c server (h2_server.c, nghttp2) and the gRPC helpers (grpc.c). The
 * first input byte chooses the mode.
 *
 * Even: the rest is what a client sends after the HTTP/2 connection preface (prepended here so
 * the fuzzer starts at frame parsing). The real pc_h2_server runs in-process on
 * 127.0.0.1:<ephemeral>; the bytes go through a client socket, all at once when the first byte is
 * 0, else in chunks of (first byte / 2) * 16 bytes with a loop iteration between them (at most
 * ~64 chunks), so frames arrive split across reads and a reset can follow a dispatched call. Once
 * they are written and the server has gone quiet (deferred answers sent), the client half-closes
 * and the server must close within 5 s. The handler reads every field of each call, decodes a gRPC
 * body like the OTLP receiver (unframe, then grpc-encoding gzip under a cap) and answers at once
 * or, for paths starting with "/d", a loop iteration later ("x-defer: N": N iterations later).
 * Invariants: no hang, every call answered exactly once, decode results within their contracts,
 * nothing leaks.
 *
 * Odd: the rest goes through grpc.h's pure functions: unframe (re-framing must give the same
 * bytes) and decompress with each grpc-encoding, a raw gzip message, grpc-timeout parse (exactly
 * the 1..8 digits + unit grammar) and format/parse round trips, grpc-message percent-encoding
 * round trip, base64 round trip, status details encode/decode round trip, and retry-delay
 * decoding of arbitrary grpc-status-details-bin values. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "fuzz_common.h"
#include "fuzz_net.h"
#include "net/grpc.h"
#include "base/gzip.h"
#include "net/h2_server.h"

#define MAX_MSG (64u << 10) /* gRPC message cap (framed or inflated) */
/* the server's body limits: small, so a fuzzer's short inputs reach them (per call, 2 calls per
 * connection) */
#define SRV_MAX_BODY (4096u + PC_GRPC_PREFIX)
#define MAX_INFLATE  (256u << 10) /* odd mode: inflate cap */
#define MAX_DEFERRED 128
#define QUIET_ROUNDS 8

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static uv_loop_t *loop;
static pc_h2_server *server;
static int port;
static uv_idle_t idle;
static pc_h2_call *deferred[MAX_DEFERRED];
static unsigned defer_left[MAX_DEFERRED]; /* loop iterations until the answer */
static size_t n_deferred;
static long outstanding; /* calls handed to the handler and not answered yet */
static volatile unsigned sink;
static bool verbose; /* PC_FUZZ_VERBOSE: trace calls and what the client received */

/* ---- even mode: the server ---- */

static unsigned str_hash(const char *s)
{
    unsigned h = 0;
    for (; *s; s++)
        h = h * 31 + (unsigned char)*s;
    return h;
}

static void answer(pc_h2_call *call)
{
    unsigned h = str_hash(call->method) + str_hash(call->path) + str_hash(call->peer);
    for (size_t i = 0; i < call->n_headers; i++) {
        const char *n = call->headers[i].name;
        FUZZ_ASSERT(n[0] != ':', "pseudo-header %s among the regular headers", n);
        for (const char *p = n; *p; p++)
            FUZZ_ASSERT(!(*p >= 'A' && *p <= 'Z'), "header name %s not lower-case", n);
        h += str_hash(n) + str_hash(call->headers[i].value);
    }
    FUZZ_ASSERT(call->body != NULL, "call without a body buffer");
    for (size_t i = 0; i < call->body_len; i++)
        h = h * 31 + call->body[i];
    FUZZ_ASSERT(!call->too_large || call->body_len == 0, "too_large call with %zu body bytes",
                call->body_len);
    FUZZ_ASSERT(call->body_len <= SRV_MAX_BODY, "body of %zu bytes past the limit", call->body_len);
    sink = h;
    outstanding--;
    if (verbose)
        fprintf(stderr, "fuzz_grpc: call %s %s, %zu headers, %zu body bytes%s\n", call->method,
                call->path, call->n_headers, call->body_len, call->too_large ? " (too large)" : "");

    const char *ct = pc_h2_call_header(call, "content-type");
    if (!ct || strncmp(ct, "application/grpc", 16) != 0) {
        pc_h2_header hd[] = {{"content-type", "text/plain"}};
        static const char m[] = "415 gRPC only\n";
        pc_h2_respond(call, 415, hd, 1, m, sizeof m - 1, NULL, 0);
        return;
    }
    const char *to = pc_h2_call_header(call, "grpc-timeout");
    uint64_t ms = 0;
    if (to && pc_grpc_timeout_parse(to, &ms) == 0) sink += (unsigned)ms;
    const char *det = pc_h2_call_header(call, "grpc-status-details-bin");
    if (det) sink += (unsigned)pc_grpc_status_details_retry_delay(det);
    size_t plen = strlen(call->path);
    if (plen < 7 || strcmp(call->path + plen - 7, "/Export") != 0) {
        char m[300];
        snprintf(m, sizeof m, "unknown method %.200s", call->path);
        char *d = pc_grpc_status_details(PC_GRPC_UNIMPLEMENTED, m, (int64_t)(h % 3) - 1);
        pc_grpc_respond(call, PC_GRPC_UNIMPLEMENTED, m, NULL, 0, h & 4 ? d : NULL);
        free(d);
        return;
    }
    if (call->too_large) {
        pc_grpc_respond(call, PC_GRPC_RESOURCE_EXHAUSTED, "too large", NULL, 0, NULL);
        return;
    }
    const uint8_t *msg = NULL;
    size_t mlen = 0;
    bool compressed = false;
    pc_error err = {0};
    int rc = pc_grpc_unframe(call->body, call->body_len, MAX_MSG, &msg, &mlen, &compressed, &err);
    FUZZ_ASSERT(rc == PC_OK || rc == PC_EINVAL || rc == PC_E2BIG, "unframe rc %d", rc);
    if (rc != PC_OK) {
        FUZZ_ASSERT(err.msg[0], "unframe failed without a reason");
        pc_grpc_respond(call, pc_grpc_code_from_err(rc), err.msg, NULL, 0, NULL);
        return;
    }
    FUZZ_ASSERT(msg == call->body + PC_GRPC_PREFIX && mlen == call->body_len - PC_GRPC_PREFIX,
                "unframed message outside the body");
    pc_buf out = {0};
    rc = pc_grpc_decompress(msg, mlen, compressed, pc_h2_call_header(call, "grpc-encoding"),
                            MAX_MSG, &out, &err);
    FUZZ_ASSERT(rc == PC_OK || rc == PC_E2BIG || rc == PC_EINVAL || rc == PC_ENOTSUP,
                "decompress rc %d", rc);
    FUZZ_ASSERT(out.len <= MAX_MSG, "inflated %zu bytes past the cap", out.len);
    if (rc != PC_OK) {
        pc_grpc_respond(call, pc_grpc_code_from_err(rc), err.msg, NULL, 0,
                        rc == PC_E2BIG ? "CAgSAA" : NULL);
    } else {
        /* echo at most 1 KiB: the client never opens its flow-control window */
        pc_grpc_respond(call, PC_GRPC_OK, NULL, out.data, out.len < 1024 ? out.len : 1024, NULL);
    }
    pc_buf_free(&out);
}

/* Answers are due after their count of loop iterations (pc_h2_respond never calls the handler,
 * so the list is not touched while we walk it). */
static void on_idle(uv_idle_t *hd)
{
    size_t keep = 0;
    for (size_t i = 0; i < n_deferred; i++) {
        if (--defer_left[i] == 0) {
            answer(deferred[i]);
        } else {
            defer_left[keep] = defer_left[i];
            deferred[keep++] = deferred[i];
        }
    }
    n_deferred = keep;
    if (!n_deferred) uv_idle_stop(hd);
}

static void handler(pc_h2_call *call, void *arg)
{
    (void)arg;
    FUZZ_ASSERT(call->method && call->path, "call without method or path");
    outstanding++;
    if (verbose) fprintf(stderr, "fuzz_grpc: dispatched %s\n", call->path);
    /* "/d..." paths: one loop iteration later; "x-defer: N": N iterations later (1..8), so a
     * reset or a closed connection can come in between */
    unsigned iters = call->path[0] == '/' && call->path[1] == 'd' ? 1 : 0;
    const char *xd = pc_h2_call_header(call, "x-defer");
    if (xd) iters = xd[0] >= '1' && xd[0] <= '8' ? (unsigned)(xd[0] - '0') : 1;
    if (iters && n_deferred < MAX_DEFERRED) {
        deferred[n_deferred] = call;
        defer_left[n_deferred++] = iters;
        uv_idle_start(&idle, on_idle);
        return;
    }
    answer(call);
}

static void run_server(uint8_t mode, const uint8_t *data, size_t size)
{
    int fd = fuzz_connect_loopback(port);
    int one = 1; /* chunks must leave now, not wait for the server's delayed ACK (Nagle) */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const size_t plen = sizeof preface - 1, total = plen + size;
    size_t chunk = mode >> 1 ? (size_t)(mode >> 1) * 16 : total;
    if (chunk <= total / 64) chunk = total / 64 + 1;
    fuzz_exchange x = {.prefix = preface,
                       .prefix_len = plen,
                       .data = data,
                       .size = size,
                       .chunk = chunk,
                       .quiet_rounds = QUIET_ROUNDS,
                       .owed = &n_deferred};
    fuzz_exchange_run(loop, fd, &x);
    if (verbose) fprintf(stderr, "fuzz_grpc: client received %zu bytes\n", x.got);
    /* let the server free the connection; answer what is still deferred */
    for (int i = 0; i < 8 || n_deferred; i++)
        uv_run(loop, UV_RUN_NOWAIT);
    FUZZ_ASSERT(outstanding == 0, "%ld calls never answered", outstanding);
}

/* ---- odd mode: the pure functions ---- */

static bool timeout_grammar(const char *s)
{
    size_t nd = 0;
    while (s[nd] >= '0' && s[nd] <= '9')
        nd++;
    return nd >= 1 && nd <= 8 && s[nd] && strchr("HMSmun", s[nd]) && !s[nd + 1];
}

static void check_timeout(const char *s, uint64_t extra)
{
    uint64_t ms = 0;
    int rc = pc_grpc_timeout_parse(s, &ms);
    FUZZ_ASSERT((rc == 0) == timeout_grammar(s), "grpc-timeout \"%s\": parse rc %d", s, rc);
    if (rc == 0)
        FUZZ_ASSERT(ms <= 99999999ull * 3600000, "grpc-timeout %s: %llu ms", s,
                    (unsigned long long)ms);
    uint64_t vals[] = {ms, extra, extra % 100000000, extra >> 20};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        uint64_t v = vals[i], back = 0;
        char t[16];
        pc_grpc_timeout_format(v, t, sizeof t);
        FUZZ_ASSERT(pc_grpc_timeout_parse(t, &back) == 0, "formatted timeout %s does not parse", t);
        if (v <= 99999999) {
            FUZZ_ASSERT(back == v, "timeout %llu -> %s -> %llu", (unsigned long long)v, t,
                        (unsigned long long)back);
        } else if (v <= 99999999ull * 3600000) {
            FUZZ_ASSERT(back <= v && v - back < 3600000, "timeout %llu -> %s -> %llu",
                        (unsigned long long)v, t, (unsigned long long)back);
        }
    }
}

static void check_message(const char *s)
{
    char *e = pc_grpc_message_encode(s);
    for (const char *p = e; *p; p++)
        FUZZ_ASSERT(*p >= 0x20 && *p <= 0x7e, "grpc-message encoding left byte 0x%02x",
                    (unsigned char)*p);
    char *d = pc_grpc_message_decode(e);
    FUZZ_ASSERT(strcmp(d, s) == 0, "grpc-message round trip changed \"%s\" into \"%s\"", s, d);
    free(e);
    free(d);
    d = pc_grpc_message_decode(s); /* arbitrary input: malformed escapes kept */
    FUZZ_ASSERT(strlen(d) <= strlen(s), "decoding grew the message");
    free(d);
}

static void check_base64(const uint8_t *p, size_t n)
{
    char *e = pc_grpc_bin_encode(p, n);
    FUZZ_ASSERT(strlen(e) == (n * 4 + 2) / 3, "base64 of %zu bytes has %zu chars", n, strlen(e));
    pc_buf back = {0};
    FUZZ_ASSERT(pc_grpc_bin_decode(e, &back) == 0, "base64 output does not decode");
    FUZZ_ASSERT(back.len == n && (n == 0 || memcmp(back.data, p, n) == 0),
                "base64 round trip changed %zu bytes into %zu", n, back.len);
    pc_buf_free(&back);
    free(e);
}

static void check_details(int code, const char *msg, int64_t delay)
{
    char *d = pc_grpc_status_details(code, msg, delay);
    int64_t back = pc_grpc_status_details_retry_delay(d);
    if (delay < 0)
        FUZZ_ASSERT(back == -1, "no retry delay encoded, %lld decoded", (long long)back);
    else if (delay < 86400ll * 365 * 1000)
        FUZZ_ASSERT(back == delay, "retry delay %lld decoded as %lld", (long long)delay,
                    (long long)back);
    pc_buf raw = {0};
    FUZZ_ASSERT(pc_grpc_bin_decode(d, &raw) == 0, "status details are not base64");
    pc_buf_free(&raw);
    free(d);
}

static void check_frame(const uint8_t *p, size_t n, const char *encoding)
{
    const uint8_t *msg = NULL;
    size_t mlen = 0;
    bool compressed = false;
    pc_error err = {0};
    int rc = pc_grpc_unframe(p, n, MAX_MSG, &msg, &mlen, &compressed, &err);
    if (rc != PC_OK) {
        FUZZ_ASSERT(rc == PC_EINVAL || rc == PC_E2BIG, "unframe rc %d", rc);
        FUZZ_ASSERT(err.msg[0], "unframe failed without a reason");
        return;
    }
    FUZZ_ASSERT(n >= PC_GRPC_PREFIX && msg == p + PC_GRPC_PREFIX && mlen == n - PC_GRPC_PREFIX &&
                    mlen <= MAX_MSG && compressed == (p[0] == 1),
                "unframe accepted a bad frame");
    pc_buf re = {0};
    pc_grpc_frame(msg, mlen, compressed, &re);
    FUZZ_ASSERT(re.len == n && memcmp(re.data, p, n) == 0, "re-framing changed the bytes");
    pc_buf_free(&re);

    pc_buf out = {0};
    rc = pc_grpc_decompress(msg, mlen, compressed, encoding, MAX_INFLATE, &out, &err);
    FUZZ_ASSERT(rc == PC_OK || rc == PC_E2BIG || rc == PC_EINVAL || rc == PC_ENOTSUP,
                "decompress rc %d", rc);
    FUZZ_ASSERT(out.len <= MAX_INFLATE, "inflated %zu bytes past the cap", out.len);
    if (rc == PC_OK && !compressed)
        FUZZ_ASSERT(out.len == mlen && (mlen == 0 || memcmp(out.data, msg, mlen) == 0),
                    "identity message changed");
    if (rc == PC_OK && compressed) { /* compress what came out again: same bytes back */
        pc_buf z = {0}, back = {0};
        pc_gzip_deflate(out.data, out.len, 1, &z);
        FUZZ_ASSERT(pc_grpc_decompress(z.data, z.len, true, encoding, MAX_INFLATE, &back, &err) ==
                        PC_OK,
                    "re-compressed message does not decompress: %s", err.msg);
        FUZZ_ASSERT(back.len == out.len && (out.len == 0 || !memcmp(back.data, out.data, out.len)),
                    "gzip round trip changed the message");
        pc_buf_free(&z);
        pc_buf_free(&back);
    }
    if (rc != PC_OK) FUZZ_ASSERT(err.msg[0], "decompress failed without a reason");
    pc_buf_free(&out);
}

static void run_pure(const uint8_t *p, size_t n)
{
    static const char *const encodings[] = {NULL,   "",        "identity", "gzip",
                                            "GZip", "deflate", "snappy",   "gzip, deflate"};
    uint8_t sel = n ? p[0] : 0;
    int code = n > 1 ? (int)(int8_t)p[1] : 0;
    uint64_t x = 0;
    for (size_t i = 0; i < 8; i++)
        x = x << 8 | (n > 2 + i ? p[2 + i] : 0);
    const char *encoding = encodings[sel & 7];
    /* the whole rest as a framed message, then after the 10 parameter bytes */
    check_frame(p, n, encoding);
    const uint8_t *r = n > 10 ? p + 10 : p + n;
    size_t rn = n > 10 ? n - 10 : 0;
    check_frame(r, rn, encoding);

    /* the rest as a compressed message body (no prefix to match) */
    pc_buf out = {0};
    int rc = pc_grpc_decompress(r, rn, true, "gzip", MAX_INFLATE, &out, NULL);
    FUZZ_ASSERT(rc == PC_OK || rc == PC_E2BIG || rc == PC_EINVAL, "decompress rc %d", rc);
    FUZZ_ASSERT(out.len <= MAX_INFLATE, "inflated %zu bytes past the cap", out.len);
    pc_buf_free(&out);

    char *s = fuzz_cstr(r, rn);
    check_timeout(s, x);
    check_message(s);
    check_base64(r, rn);
    check_details(code, s, (int64_t)x);
    check_details(code, s, (int64_t)(x % 100000000) - (sel & 8 ? 1 : 0));
    /* arbitrary details: as given (base64 text), and the raw bytes base64-encoded here so the
     * fuzzer reaches the protobuf decoding */
    int64_t d = pc_grpc_status_details_retry_delay(s);
    FUZZ_ASSERT(d >= -1 && d <= 86400ll * 365 * 1000, "retry delay %lld", (long long)d);
    char *e = pc_grpc_bin_encode(r, rn);
    d = pc_grpc_status_details_retry_delay(e);
    FUZZ_ASSERT(d >= -1 && d <= 86400ll * 365 * 1000, "retry delay %lld", (long long)d);
    free(e);
    sink +=
        (unsigned)pc_grpc_code_from_http(code + 400) + (unsigned)strlen(pc_grpc_code_name(code));
    free(s);
}

/* ---- entry points ---- */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet_logs();
    const char *v = getenv("PC_FUZZ_VERBOSE");
    verbose = v && *v && *v != '0';
    loop = uv_default_loop();
    uv_idle_init(loop, &idle);
    pc_h2_server_opts o = {
        .host = "127.0.0.1",
        .port = 0,
        .max_body_bytes = SRV_MAX_BODY,
        .max_conn_body_bytes = 2 * SRV_MAX_BODY,
        .max_header_bytes = 8u << 10,
        .max_concurrent_streams = 16,
        .idle_timeout_ms = 2000,
        .read_timeout_ms = 2000,
        .max_connections = 16,
        /* keepalive and ping enforcement on: a few PING frames in one input reach the
         * strikes and ENHANCE_YOUR_CALM path */
        .keepalive_time_ms = 1000,
        .keepalive_timeout_ms = 500,
        .ping_min_time_ms = 60000,
        .log_id = "fuzz",
    };
    server = pc_h2_server_new(loop, &o, handler, NULL);
    pc_error err = {0};
    if (pc_h2_server_start(server, &err) < 0) {
        fprintf(stderr, "fuzz_grpc: %s\n", err.msg);
        abort();
    }
    port = pc_h2_server_port(server);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    if (data[0] & 1)
        run_pure(data + 1, size - 1);
    else
        run_server(data[0], data + 1, size - 1);
    return 0;
}
