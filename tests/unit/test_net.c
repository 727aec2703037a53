/* Network layer: url parsing, gzip, and the HTTP server and client over real loopback sockets.
 * Server and client share one uv loop; misbehaving peers (garbage, slow, pipelining) are blocking
 * sockets on helper threads so the loop stays free to serve. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>
#include <zlib.h>
#include <zstd.h>

#include "check.h"
#include "base/compress.h"
#include "base/gzip.h"
#include "base/zstd.h"
#include "net/h2_client.h"
#include "net/h2_server.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/listener.h"
#include "net/url.h"
#include "base/log.h"
#include "testhttp.h"
#include "testio.h"
#include "testloop.h"
#include "testpeer.h"

static uv_loop_t *loop;

/* ---- the test server: th_server answering as handler says ---- */

typedef struct tsrv {
    th_server h; /* first: handler gets it */
    int inflight, max_inflight;
    pc_http_req *held;
    pc_http_req *many[8]; /* "/holdmany" requests, answered later by the test */
    int n_many;
    char order[64]; /* query "n" values in the order the handler saw them */
    char xtest[64], qa[64], qb[64];
} tsrv;

typedef struct deferred {
    uv_timer_t t;
    pc_http_req *req;
    tsrv *ts;
} deferred;

static void echo(tsrv *ts, pc_http_req *req)
{
    char *n = pc_http_req_query(req, "n");
    char head[512];
    snprintf(head, sizeof head, "%s %s n=%s len=%zu\n", req->method, req->path, n ? n : "-",
             req->body_len);
    free(n);
    size_t hl = strlen(head);
    char *out = malloc(hl + req->body_len);
    memcpy(out, head, hl);
    memcpy(out + hl, req->body, req->body_len);
    ts->inflight--;
    pc_http_respond(req, 200, "text/plain", out, hl + req->body_len, "X-Echo: 1\r\n");
    free(out);
}

static void deferred_closed(uv_handle_t *h)
{
    free(h->data);
}

static void deferred_fire(uv_timer_t *t)
{
    deferred *d = t->data;
    echo(d->ts, d->req);
    uv_close((uv_handle_t *)&d->t, deferred_closed);
}

static void handler(th_server *hs, pc_http_req *req)
{
    tsrv *ts = (tsrv *)hs;
    if (++ts->inflight > ts->max_inflight) ts->max_inflight = ts->inflight;
    char *n = pc_http_req_query(req, "n");
    if (n && strlen(ts->order) + strlen(n) + 1 < sizeof ts->order) {
        strcat(ts->order, n);
        strcat(ts->order, ",");
    }
    free(n);
    const char *x = pc_http_req_header(req, "X-Test");
    snprintf(ts->xtest, sizeof ts->xtest, "%s", x ? x : "(none)");
    char *a = pc_http_req_query(req, "a"), *b = pc_http_req_query(req, "b");
    snprintf(ts->qa, sizeof ts->qa, "%s", a ? a : "(none)");
    snprintf(ts->qb, sizeof ts->qb, "%s", b ? b : "(none)");
    free(a);
    free(b);
    if (strcmp(req->path, "/hold") == 0) { /* answered later by the test */
        ts->held = req;
        return;
    }
    if (strcmp(req->path, "/holdmany") == 0 && ts->n_many < 8) {
        ts->many[ts->n_many++] = req;
        return;
    }
    if (strcmp(req->path, "/429") == 0) {
        ts->inflight--;
        pc_http_respond(req, 429, "text/plain", "slow down", 9, "Retry-After: 7\r\n");
        return;
    }
    if (strcmp(req->path, "/slow") == 0) { /* answer after 60 ms, from a timer */
        deferred *d = calloc(1, sizeof *d);
        d->req = req;
        d->ts = ts;
        uv_timer_init(loop, &d->t);
        d->t.data = d;
        uv_timer_start(&d->t, deferred_fire, 60, 0);
        return;
    }
    echo(ts, req);
}

static void srv_start(tsrv *ts, pc_http_server_opts o)
{
    memset(ts, 0, sizeof *ts);
    th_start(&ts->h, loop, o, handler);
}

/* ================================ tests ================================ */

static void test_url(void)
{
    pc_url u;
    pc_error err = {0};
    CHECK_EQ_INT(pc_url_parse("http://collector:4318/v1/", &u, &err), 0);
    CHECK_STR(u.scheme, "http");
    CHECK_STR(u.host, "collector");
    CHECK_EQ_INT(u.port, 4318);
    CHECK_STR(u.path, "/v1");
    CHECK_EQ_INT(pc_url_parse("https://example.com", &u, &err), 0);
    CHECK_EQ_INT(u.port, 443);
    CHECK_STR(u.path, "");
    CHECK_EQ_INT(pc_url_parse("http://example.com/", &u, &err), 0);
    CHECK_EQ_INT(u.port, 80);
    CHECK_STR(u.path, "");
    CHECK_EQ_INT(pc_url_parse("http://[::1]:9000/a/b", &u, &err), 0);
    CHECK_STR(u.host, "::1");
    CHECK_EQ_INT(u.port, 9000);
    CHECK_STR(u.path, "/a/b");
    CHECK_EQ_INT(pc_url_parse("localhost:4318", &u, &err), PC_EINVAL);
    CHECK_STR(err.msg, "endpoint \"localhost:4318\": missing scheme (want http://host:port)");
    CHECK_EQ_INT(pc_url_parse("ftp://h:1", &u, &err), PC_EINVAL);
    CHECK_CONTAINS(err.msg, "unsupported scheme \"ftp\"");
    CHECK_EQ_INT(pc_url_parse("http://h:70000", &u, &err), PC_EINVAL);
    CHECK_CONTAINS(err.msg, "port");
    CHECK_EQ_INT(pc_url_parse("http://h:12a", &u, &err), PC_EINVAL);
    CHECK_EQ_INT(pc_url_parse("http://h:", &u, &err), PC_EINVAL);
    CHECK_EQ_INT(pc_url_parse("http://:80/x", &u, &err), PC_EINVAL);
    CHECK_CONTAINS(err.msg, "missing host");
    CHECK_EQ_INT(pc_url_parse("http://::1:80", &u, &err), PC_EINVAL);
    CHECK_EQ_INT(pc_url_parse("http://[::1:80", &u, &err), PC_EINVAL);

    char host[64];
    int port = -1;
    CHECK_EQ_INT(pc_hostport_parse("0.0.0.0:4318", host, sizeof host, &port, &err), 0);
    CHECK_STR(host, "0.0.0.0");
    CHECK_EQ_INT(port, 4318);
    CHECK_EQ_INT(pc_hostport_parse("[::1]:0", host, sizeof host, &port, &err), 0);
    CHECK_STR(host, "::1");
    CHECK_EQ_INT(port, 0);
    CHECK_EQ_INT(pc_hostport_parse(":65535", host, sizeof host, &port, &err), 0);
    CHECK_STR(host, "localhost");
    CHECK_EQ_INT(port, 65535);
    CHECK_EQ_INT(pc_hostport_parse("localhost", host, sizeof host, &port, &err), PC_EINVAL);
    CHECK_CONTAINS(err.msg, "missing port");
    CHECK_EQ_INT(pc_hostport_parse("h:65536", host, sizeof host, &port, &err), PC_EINVAL);
    CHECK_EQ_INT(pc_hostport_parse("h:-1", host, sizeof host, &port, &err), PC_EINVAL);
    CHECK_EQ_INT(pc_hostport_parse("h: 80", host, sizeof host, &port, &err), PC_EINVAL);
    CHECK_EQ_INT(pc_hostport_parse("::1:80", host, sizeof host, &port, &err), PC_EINVAL);
}

static void test_gzip(void)
{
    const char *text = "hello hello hello profiles profiles profiles";
    pc_buf z = {0}, out = {0};
    pc_gzip_deflate((const uint8_t *)text, strlen(text), -1, &z);
    CHECK(pc_is_gzip(z.data, z.len));
    CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, 1 << 20, &out), PC_OK);
    CHECK_EQ_INT(out.len, strlen(text));
    CHECK_STR((char *)out.data, text);

    /* an exact fit is fine, one byte less is too large */
    CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, strlen(text), &out), PC_OK);
    CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, strlen(text) - 1, &out), PC_E2BIG);

    /* two concatenated members inflate to both texts */
    pc_buf two = {0};
    pc_buf_append(&two, z.data, z.len);
    pc_buf_append(&two, z.data, z.len);
    CHECK_EQ_INT(pc_gzip_inflate(two.data, two.len, 1 << 20, &out), PC_OK);
    CHECK_EQ_INT(out.len, 2 * strlen(text));

    /* truncated, flipped payload byte, and not gzip at all */
    CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len - 5, 1 << 20, &out), PC_EINVAL);
    z.data[z.len / 2] ^= 0x55;
    CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, 1 << 20, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_gzip_inflate((const uint8_t *)"plain text", 10, 1 << 20, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_gzip_inflate(two.data, 0, 1 << 20, &out), PC_EINVAL);
    /* a valid member followed by garbage */
    two.data[z.len] = 'X';
    z.data[z.len / 2] ^= 0x55;
    memcpy(two.data, z.data, z.len);
    CHECK_EQ_INT(pc_gzip_inflate(two.data, two.len, 1 << 20, &out), PC_EINVAL);

    /* a bomb: 50 MB of zeros stops at the 1 MB cap, quickly and without a big buffer */
    size_t big = 50u << 20;
    uint8_t *zeros = calloc(1, big);
    pc_gzip_deflate(zeros, big, 9, &z);
    free(zeros);
    CHECK(z.len < (1u << 20));
    double t0 = now_ms();
    CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, 1u << 20, &out), PC_E2BIG);
    CHECK(now_ms() - t0 < 500);
    CHECK(out.cap <= (2u << 20));
    CHECK_EQ_INT(out.len, 1u << 20); /* never more than max_out, not even the proving byte */
    CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, 64u << 20, &out), PC_OK);
    CHECK_EQ_INT(out.len, big);
    pc_buf_free(&z);
    pc_buf_free(&out);
    pc_buf_free(&two);
}

static int same(const pc_buf *a, const void *p, size_t n)
{
    return a->len == n && (n == 0 || memcmp(a->data, p, n) == 0);
}

/* Where a gzip stream gives its size (the last member's ISIZE), the output gets a block of that
 * size (plus the byte that proves a stream too large, and the NUL), from either library: a small
 * body's bytes do not sit in a step's 512 KiB block (bench/README.md, "Memory"). Where ISIZE is
 * not the whole output (two members, zero padding, a bomb whose trailer lies), the output is still
 * whole, or refused within max_out. */
static void test_gzip_sized(void)
{
    size_t n = 5000;
    uint8_t *text = malloc(n);
    for (size_t i = 0; i < n; i++)
        text[i] = (uint8_t)("profile "[i % 8] + (i % 7 == 0));
    pc_buf z = {0};
    pc_gzip_deflate(text, n, 1, &z);
    uint32_t isize = 0;
    CHECK(pc_gzip_isize(z.data, z.len, &isize));
    CHECK_EQ_INT(isize, n);
    CHECK(!pc_gzip_isize(z.data, 17, &isize));
    for (int zlib = 0; zlib <= 1; zlib++) {
        pc_buf out = {0};
        int rc = zlib ? pc_gzip_inflate_zlib(z.data, z.len, 1 << 20, &out)
                      : pc_gzip_inflate(z.data, z.len, 1 << 20, &out);
        CHECK_EQ_INT(rc, PC_OK);
        CHECK(same(&out, text, n));
        CHECK_EQ_INT(out.cap, n + 2);
        /* a size over max_out is not reserved: refused after at most one step */
        rc = zlib ? pc_gzip_inflate_zlib(z.data, z.len, n - 1, &out)
                  : pc_gzip_inflate(z.data, z.len, n - 1, &out);
        CHECK_EQ_INT(rc, PC_E2BIG);
        pc_buf_free(&out);
    }
    /* two members: ISIZE is the second's; the first step is that much, the rest follows */
    pc_buf two = {0}, out = {0};
    pc_buf_append(&two, z.data, z.len);
    pc_buf_append(&two, z.data, z.len);
    CHECK_EQ_INT(pc_gzip_inflate(two.data, two.len, 1 << 20, &out), PC_OK);
    CHECK_EQ_INT(out.len, 2 * n);
    CHECK(!memcmp(out.data, text, n) && !memcmp(out.data + n, text, n));
    pc_buf_free(&out);
    /* zero padding: ISIZE reads 0 */
    pc_buf_append(&z, "\0\0\0\0", 4);
    CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, 1 << 20, &out), PC_OK);
    CHECK(same(&out, text, n));
    pc_buf_free(&out);
    /* a bomb whose trailer says 1000 bytes: refused at the cap, not trusted */
    size_t big = 20u << 20;
    uint8_t *zeros = calloc(1, big);
    pc_gzip_deflate(zeros, big, 9, &z);
    free(zeros);
    memcpy(z.data + z.len - 4, "\xe8\x03\0\0", 4);
    CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, 1u << 20, &out), PC_E2BIG);
    CHECK(out.cap <= (2u << 20));
    CHECK(pc_gzip_inflate(z.data, z.len, 64u << 20, &out) < 0); /* the trailer does not match */
    pc_buf_free(&out);
    pc_buf_free(&two);
    pc_buf_free(&z);
    free(text);
}

/* Both paths of base/gzip.c: igzip for levels 1-3 and gzip input, zlib for levels 4-9, zlib-
 * wrapped input and whatever follows a gzip member that is not gzip; each library reads the
 * other's output, and both accept the same streams. */
static void test_gzip_paths(void)
{
    CHECK_EQ_INT(pc_gzip_isal_level(1), 1);
    CHECK_EQ_INT(pc_gzip_isal_level(3), 3);
    CHECK_EQ_INT(pc_gzip_isal_level(4), -1);
    CHECK_EQ_INT(pc_gzip_isal_level(9), -1);
    CHECK_EQ_INT(pc_gzip_isal_level(0), -1);
    size_t n = 300000;
    uint8_t *text = malloc(n);
    uint64_t x = 42;
    for (size_t i = 0; i < n; i++) { /* compressible, not trivial */
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        text[i] = (uint8_t)("abcdefgh"[(x >> 60) & 7]);
    }
    pc_buf z = {0}, zl = {0}, out = {0}, ref = {0};
    size_t sizes[10] = {0};
    for (int level = 1; level <= 9; level++) {
        pc_gzip_deflate(text, n, level, &z);
        sizes[level] = z.len;
        CHECK(pc_is_gzip(z.data, z.len));
        CHECK_EQ_INT(pc_gzip_inflate_zlib(z.data, z.len, n, &ref), PC_OK); /* zlib reads igzip */
        CHECK(same(&ref, text, n));
        CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, n, &out), PC_OK); /* igzip reads zlib */
        CHECK(same(&out, text, n));
        CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, n - 1, &out), PC_E2BIG);
    }
    /* levels 4-9 are zlib's own: the same bytes as zlib at that level */
    pc_gzip_deflate_zlib(text, n, 6, &zl);
    pc_gzip_deflate(text, n, 6, &z);
    CHECK(same(&z, zl.data, zl.len));
    /* the knob still runs from fastest to smallest: igzip 1-3 larger than any zlib level */
    CHECK(sizes[1] >= sizes[3] && sizes[3] >= sizes[4] && sizes[4] >= sizes[9]);

    /* a gzip member (igzip) then a zlib-wrapped one and then trailing zero padding: both paths
     * take the first member, hand the rest to zlib, tolerate the zeros */
    pc_buf cat = {0};
    pc_gzip_deflate(text, 1000, 1, &z);
    pc_buf_append(&cat, z.data, z.len);
    uLongf zn = compressBound(1000);
    uint8_t *zw = malloc(zn);
    CHECK_EQ_INT(compress2(zw, &zn, text, 1000, 6), Z_OK);
    pc_buf_append(&cat, zw, zn);
    CHECK_EQ_INT(pc_gzip_inflate(cat.data, cat.len, n, &out), PC_OK);
    CHECK_EQ_INT(pc_gzip_inflate_zlib(cat.data, cat.len, n, &ref), PC_OK);
    CHECK_EQ_INT(out.len, 2000);
    CHECK(same(&out, ref.data, ref.len));
    pc_buf_append(&cat, "\0\0\0\0", 4);
    CHECK_EQ_INT(pc_gzip_inflate(cat.data, cat.len, n, &out), PC_OK);
    CHECK_EQ_INT(out.len, 2000);
    /* a zlib-wrapped body alone (Content-Encoding: deflate) */
    CHECK_EQ_INT(pc_gzip_inflate(zw, zn, n, &out), PC_OK);
    CHECK(same(&out, text, 1000));
    /* a bad CRC is refused by both */
    pc_gzip_deflate(text, 1000, 1, &z);
    z.data[z.len - 6] ^= 1;
    CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, n, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_gzip_inflate_zlib(z.data, z.len, n, &ref), PC_EINVAL);
    /* a reserved FLG bit (RFC 1952 §2.3.1.2) is refused by both, first member or a later one */
    pc_gzip_deflate(text, 1000, 1, &z);
    for (int bit = 5; bit <= 7; bit++) {
        z.data[3] |= (uint8_t)(1 << bit);
        CHECK_EQ_INT(pc_gzip_inflate(z.data, z.len, n, &out), PC_EINVAL);
        CHECK_EQ_INT(pc_gzip_inflate_zlib(z.data, z.len, n, &ref), PC_EINVAL);
        z.data[3] &= (uint8_t) ~(1 << bit);
    }
    cat.len = 0;
    pc_buf_append(&cat, z.data, z.len);
    pc_buf_append(&cat, z.data, z.len);
    cat.data[z.len + 3] |= 0x80;
    CHECK_EQ_INT(pc_gzip_inflate(cat.data, cat.len, n, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_gzip_inflate_zlib(cat.data, cat.len, n, &ref), PC_EINVAL);
    free(zw);
    free(text);
    pc_buf_free(&cat);
    pc_buf_free(&z);
    pc_buf_free(&zl);
    pc_buf_free(&out);
    pc_buf_free(&ref);
}

/* zstd: round trip, the cap (exact fit, one byte less, a bomb), corrupt and truncated input, a
 * frame asking for a window beyond PC_ZSTD_WINDOW_LOG_MAX; the encoding names and what may be
 * forwarded as received. */
static void test_zstd(void)
{
    const char *text = "hello hello hello profiles profiles profiles";
    size_t tl = strlen(text);
    pc_buf z = {0}, out = {0};
    pc_zstd_compress((const uint8_t *)text, tl, 3, &z);
    CHECK(pc_is_zstd(z.data, z.len));
    CHECK_EQ_INT(pc_zstd_decompress(z.data, z.len, tl, &out), PC_OK);
    CHECK(same(&out, text, tl));
    CHECK_EQ_INT(pc_zstd_decompress(z.data, z.len, tl - 1, &out), PC_E2BIG);
    /* the frame gives its size: the output gets a block of that size (test_gzip_sized) */
    pc_buf fresh = {0};
    CHECK_EQ_INT(pc_zstd_decompress(z.data, z.len, 1 << 20, &fresh), PC_OK);
    CHECK_EQ_INT(fresh.cap, tl + 2);
    pc_buf_free(&fresh);
    /* two frames (the first one's size is reserved first) */
    pc_buf two = {0};
    pc_buf_append(&two, z.data, z.len);
    pc_buf_append(&two, z.data, z.len);
    CHECK_EQ_INT(pc_zstd_decompress(two.data, two.len, 1 << 20, &fresh), PC_OK);
    CHECK(fresh.len == 2 * tl && !memcmp(fresh.data, text, tl) &&
          !memcmp(fresh.data + tl, text, tl));
    pc_buf_free(&fresh);
    CHECK_EQ_INT(pc_zstd_decompress(two.data, two.len, 1 << 20, &out), PC_OK);
    CHECK_EQ_INT(out.len, 2 * tl);
    /* truncated, corrupted (the checksum catches it), garbage after, empty, not zstd */
    CHECK_EQ_INT(pc_zstd_decompress(z.data, z.len - 3, 1 << 20, &out), PC_EINVAL);
    two.data[z.len] = 'X';
    CHECK_EQ_INT(pc_zstd_decompress(two.data, two.len, 1 << 20, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_zstd_decompress(z.data, 0, 1 << 20, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_zstd_decompress((const uint8_t *)"plain text", 10, 1 << 20, &out), PC_EINVAL);
    z.data[z.len - 2] ^= 0x55;
    CHECK_EQ_INT(pc_zstd_decompress(z.data, z.len, 1 << 20, &out), PC_EINVAL);

    /* a bomb: 50 MB of zeros stops at the 1 MB cap without a big buffer */
    size_t big = 50u << 20;
    uint8_t *zeros = calloc(1, big);
    pc_zstd_compress(zeros, big, 19, &z);
    CHECK(z.len < (64u << 10));
    CHECK_EQ_INT(pc_zstd_decompress(z.data, z.len, 1u << 20, &out), PC_E2BIG);
    CHECK(out.cap <= (2u << 20));
    CHECK_EQ_INT(out.len, 1u << 20); /* never more than max_out, not even the proving byte */
    CHECK_EQ_INT(pc_zstd_decompress(z.data, z.len, 64u << 20, &out), PC_OK);
    CHECK_EQ_INT(out.len, big);

    /* a window of 2^27 bytes is more than a decoder must hold: refused before allocating it */
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, 27);
    ZSTD_CCtx_setParameter(c, ZSTD_c_enableLongDistanceMatching, 1);
    pc_buf_reserve(&z, ZSTD_compressBound(big));
    size_t zn = ZSTD_compress2(c, z.data, z.cap, zeros, big);
    CHECK(!ZSTD_isError(zn));
    ZSTD_freeCCtx(c);
    CHECK_EQ_INT(pc_zstd_decompress(z.data, zn, 64u << 20, &out), PC_EINVAL);
    free(zeros);

    CHECK_EQ_INT(pc_enc_parse(NULL), PC_ENC_NONE);
    CHECK_EQ_INT(pc_enc_parse("identity"), PC_ENC_NONE);
    CHECK_EQ_INT(pc_enc_parse("GZIP"), PC_ENC_GZIP);
    CHECK_EQ_INT(pc_enc_parse("deflate"), PC_ENC_GZIP);
    CHECK_EQ_INT(pc_enc_parse("zstd"), PC_ENC_ZSTD);
    CHECK_EQ_INT(pc_enc_parse("br"), -1);
    /* forwardable: one clean gzip member; not with padding, not zlib-wrapped */
    pc_gzip_deflate((const uint8_t *)text, tl, 1, &z);
    CHECK(pc_enc_forwardable(PC_ENC_GZIP, z.data, z.len, tl));
    pc_buf_append(&z, "\0\0\0\0", 4);
    CHECK(!pc_enc_forwardable(PC_ENC_GZIP, z.data, z.len, tl));
    uint8_t zw[256];
    uLongf wn = sizeof zw;
    CHECK_EQ_INT(compress2(zw, &wn, (const uint8_t *)text, tl, 6), Z_OK);
    CHECK(!pc_enc_forwardable(PC_ENC_GZIP, zw, wn, tl));
    pc_buf_free(&z);
    pc_buf_free(&out);
    pc_buf_free(&two);
}

static void test_retry_after(void)
{
    CHECK_EQ_INT(pc_http_parse_retry_after("120"), 120);
    CHECK_EQ_INT(pc_http_parse_retry_after(" 0 "), 0);
    CHECK_EQ_INT(pc_http_parse_retry_after("99999999999"), 2147483647);
    CHECK_EQ_INT(pc_http_parse_retry_after("-5"), -1);
    CHECK_EQ_INT(pc_http_parse_retry_after("soon"), -1);
    CHECK_EQ_INT(pc_http_parse_retry_after(""), -1);
    CHECK_EQ_INT(pc_http_parse_retry_after(NULL), -1);
    char date[64];
    time_t t = time(NULL) + 90;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    int d = pc_http_parse_retry_after(date);
    CHECK(d >= 88 && d <= 90);
    CHECK_EQ_INT(pc_http_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"), 0); /* past */
    CHECK_EQ_INT(pc_http_parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT"), 0);
    CHECK_EQ_INT(pc_http_parse_retry_after("Sun Nov  6 08:49:37 1994"), 0);
    CHECK_EQ_INT(pc_http_parse_retry_after("Sun, 06 Nov 1994 08:49:37"), -1);
}

static void test_roundtrip_and_reuse(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){0});
    pc_http_client *c = th_client_new(loop, ts.h.port, 4);
    th_result r1 = {0}, r2 = {0}, r3 = {0};
    pc_http_client_request(c, "POST", "/v1/echo?a=x%20y+z&b=%2F&n=1",
                           "X-Test: hello\r\nContent-Type: text/plain\r\n", "payload", 7, 2000,
                           th_on_resp, &r1);
    CHECK_EQ_INT(pc_http_client_pending(c), 1);
    CHECK(wait_until(loop, flag_set, &r1.done, 3000));
    CHECK_EQ_INT(r1.error, 0);
    CHECK_EQ_INT(r1.status, 200);
    CHECK_STR(r1.ctype, "text/plain");
    CHECK_STR(r1.body, "POST /v1/echo n=1 len=7\npayload");
    CHECK_EQ_INT(r1.retry_after, -1);
    CHECK_STR(ts.xtest, "hello");
    CHECK_STR(ts.qa, "x y z");
    CHECK_STR(ts.qb, "/");
    CHECK_EQ_INT(pc_http_client_pending(c), 0);

    /* the second request reuses the pooled connection: same client port */
    pc_http_client_request(c, "GET", "/again?n=2", NULL, NULL, 0, 2000, th_on_resp, &r2);
    CHECK(wait_until(loop, flag_set, &r2.done, 3000));
    CHECK_EQ_INT(r2.status, 200);
    CHECK_STR(r2.body, "GET /again n=2 len=0\n");
    CHECK_EQ_INT(ts.h.n, 2);
    CHECK_STR(ts.h.recs[0].peer, ts.h.recs[1].peer);

    /* 429 with Retry-After reaches the caller as a status, not an error */
    pc_http_client_request(c, "POST", "/429", NULL, "x", 1, 2000, th_on_resp, &r3);
    CHECK(wait_until(loop, flag_set, &r3.done, 3000));
    CHECK_EQ_INT(r3.error, 0);
    CHECK_EQ_INT(r3.status, 429);
    CHECK_EQ_INT(r3.retry_after, 7);
    CHECK_STR(r3.body, "slow down");
    th_client_close(loop, c);
    th_stop(&ts.h);
}

static void test_client_queue_fifo(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){0});
    pc_http_client *c = th_client_new(loop, ts.h.port, 1);
    th_result r[3];
    memset(r, 0, sizeof r);
    pc_http_client_request(c, "GET", "/slow?n=1", NULL, NULL, 0, 3000, th_on_resp, &r[0]);
    pc_http_client_request(c, "GET", "/?n=2", NULL, NULL, 0, 3000, th_on_resp, &r[1]);
    pc_http_client_request(c, "GET", "/?n=3", NULL, NULL, 0, 3000, th_on_resp, &r[2]);
    CHECK_EQ_INT(pc_http_client_pending(c), 3);
    CHECK(wait_until(loop, flag_set, &r[2].done, 3000));
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(r[i].status, 200);
    CHECK_STR(ts.order, "1,2,3,");
    CHECK(r[0].t_ms <= r[1].t_ms && r[1].t_ms <= r[2].t_ms);
    CHECK_STR(ts.h.recs[0].peer, ts.h.recs[2].peer); /* one connection served all */
    th_client_close(loop, c);
    th_stop(&ts.h);
}

static void test_pipelining(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){0});
    th_raw r = {0};
    /* the first is answered 60 ms later from a timer; the second must still come second */
    r.parts[0] = "GET /slow?n=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                 "POST /fast?n=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                 "Connection: close\r\n\r\nabc";
    th_raw_start(&r, ts.h.port);
    th_raw_wait(loop, &r);
    char *a = strstr(r.resp, "GET /slow n=1"), *b = strstr(r.resp, "POST /fast n=2 len=3\nabc");
    CHECK(a != NULL);
    CHECK(b != NULL);
    CHECK(a && b && a < b);
    CHECK_EQ_INT(ts.max_inflight, 1);
    CHECK_STR(ts.order, "1,2,");
    CHECK_CONTAINS(r.resp, "X-Echo: 1\r\n");
    CHECK_CONTAINS(r.resp, "Connection: close\r\n");
    th_stop(&ts.h);
}

/* A request and an answer larger than a socket takes at once: the part the connection core
 * writes at once and the rest it queues arrive whole and in order, both ways. */
static void test_large_both_ways(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){0});
    pc_http_client *c = th_client_new(loop, ts.h.port, 1);
    size_t n = 16u << 20;
    char *body = malloc(n);
    for (size_t i = 0; i < n; i++)
        body[i] = (char)('a' + (i * 7 + i / 4093) % 26);
    th_result r = {0};
    pc_http_client_request(c, "POST", "/big?n=1", NULL, body, n, 8000, th_on_resp, &r);
    CHECK(wait_until(loop, flag_set, &r.done, 8000));
    CHECK_EQ_INT(r.status, 200);
    const char *head = "POST /big n=1 len=16777216\n";
    size_t hl = strlen(head);
    CHECK_EQ_INT(r.body_len, hl + n);
    CHECK(r.big && !memcmp(r.big, head, hl) && !memcmp(r.big + hl, body, n));
    free(r.big);
    free(body);
    th_client_close(loop, c);
    th_stop(&ts.h);
}

/* A client that half-closes after its request still gets the answer: the server reads on while
 * the request is handled (http_server.c), and that EOF must not close the connection. */
static void test_half_close_answered(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){0});
    th_raw r = {.half_close = true};
    r.parts[0] = "GET /slow?n=1 HTTP/1.1\r\nHost: x\r\n\r\n"; /* answered 60 ms later */
    th_raw_start(&r, ts.h.port);
    th_raw_wait(loop, &r);
    CHECK_CONTAINS(r.resp, "HTTP/1.1 200 OK\r\n");
    CHECK_CONTAINS(r.resp, "GET /slow n=1");
    CHECK(r.elapsed_ms < 2000); /* then closed at the EOF, not by a timeout */
    CHECK_EQ_INT(ts.h.n, 1);
    th_stop(&ts.h);
}

static void test_chunked_and_http10(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){.max_body_bytes = 64});
    th_raw r = {0};
    r.parts[0] =
        "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
        "\r\n5\r\nhello\r\n";
    r.parts[1] = "6\r\n world\r\n0\r\n\r\n";
    r.delays[1] = 30;
    th_raw_start(&r, ts.h.port);
    th_raw_wait(loop, &r);
    CHECK_CONTAINS(r.resp, "HTTP/1.1 200 OK\r\n");
    CHECK_CONTAINS(r.resp, "Content-Length: 30\r\n");
    CHECK_CONTAINS(r.resp, "POST /c n=- len=11\nhello world");

    /* HTTP/1.0 without keep-alive: answered, then closed by the server */
    th_raw r2 = {0};
    r2.parts[0] = "GET /old HTTP/1.0\r\n\r\n";
    th_raw_start(&r2, ts.h.port);
    th_raw_wait(loop, &r2);
    CHECK_CONTAINS(r2.resp, "HTTP/1.1 200 OK\r\n");
    CHECK_CONTAINS(r2.resp, "Connection: close\r\n");
    CHECK(r2.elapsed_ms < 1000); /* closed promptly, not by a timeout */

    /* a chunked body over the limit is refused while streaming */
    th_raw r3 = {0};
    r3.parts[0] = "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n"
                  "1\r\nX\r\n0\r\n\r\n";
    th_raw_start(&r3, ts.h.port);
    th_raw_wait(loop, &r3);
    CHECK_CONTAINS(r3.resp, "HTTP/1.1 413 ");
    CHECK_EQ_INT(ts.h.n, 2);
    th_stop(&ts.h);
}

static void test_limits(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){.max_body_bytes = 1024, .max_header_bytes = 2048});
    /* Content-Length over the limit: 413 before any body byte is sent */
    th_raw r1 = {0};
    r1.parts[0] = "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n";
    th_raw_start(&r1, ts.h.port);
    th_raw_wait(loop, &r1);
    CHECK_CONTAINS(r1.resp, "HTTP/1.1 413 Content Too Large\r\n");
    CHECK_CONTAINS(r1.resp, "Connection: close\r\n");
    CHECK(r1.elapsed_ms < 2500);

    /* a head over max_header_bytes */
    static char huge[6000];
    snprintf(huge, sizeof huge, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
    size_t n = strlen(huge);
    memset(huge + n, 'a', 5000);
    snprintf(huge + n + 5000, sizeof huge - n - 5000, "\r\n\r\n");
    th_raw r2 = {0};
    r2.parts[0] = huge;
    th_raw_start(&r2, ts.h.port);
    th_raw_wait(loop, &r2);
    CHECK_CONTAINS(r2.resp, "HTTP/1.1 431 ");

    /* garbage */
    th_raw r3 = {0};
    r3.parts[0] = "HELLO THERE\r\n\r\n";
    th_raw_start(&r3, ts.h.port);
    th_raw_wait(loop, &r3);
    CHECK_CONTAINS(r3.resp, "HTTP/1.1 400 Bad Request\r\n");

    /* conflicting framing (request smuggling shape) is malformed too */
    th_raw r4 = {0};
    r4.parts[0] = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    th_raw_start(&r4, ts.h.port);
    th_raw_wait(loop, &r4);
    CHECK_CONTAINS(r4.resp, "HTTP/1.1 400 ");
    CHECK_EQ_INT(ts.h.n, 0);
    th_stop(&ts.h);
}

static void test_slow_client_408(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){.read_timeout_ms = 300});
    th_raw slow = {0};
    slow.parts[0] = "POST /x HTTP/1.1\r\nHost: x\r\nX-Drip: ";
    slow.dribble_ms = 50;
    th_raw_start(&slow, ts.h.port);
    usleep(50 * 1000);
    /* while the slow one dribbles, a normal client is served */
    pc_http_client *c = th_client_new(loop, ts.h.port, 2);
    th_result r = {0};
    pc_http_client_request(c, "GET", "/ok", NULL, NULL, 0, 2000, th_on_resp, &r);
    CHECK(wait_until(loop, flag_set, &r.done, 3000));
    CHECK_EQ_INT(r.status, 200);
    CHECK(!atomic_load(&slow.done));
    th_raw_wait(loop, &slow);
    CHECK_CONTAINS(slow.resp, "HTTP/1.1 408 Request Timeout\r\n");
    CHECK(slow.elapsed_ms >= 250 && slow.elapsed_ms < 3000);
    th_client_close(loop, c);
    th_stop(&ts.h);
}

/* ---- rate-limited log lines ---- */

typedef struct limiter_run {
    pc_log_limiter *l;
    int n;
    const char *what; /* flush with this, when set */
} limiter_run;

static void limiter_lines(void *arg)
{
    limiter_run *r = arg;
    for (int i = 0; i < r->n; i++)
        PC_ERROR_RATELIMITED(r->l, "test", "refusing peer %d", i);
    PC_INFO_RATELIMITED(r->l, "test", "below the level: neither written nor counted");
    if (r->what) pc_log_limiter_flush(r->l, PC_LOG_ERROR, "test", r->what);
}

static void test_log_limiter(void)
{
    pc_log_limiter l = {.interval_ms = 300};
    /* a burst: the first line only */
    limiter_run r = {&l, 1000, NULL};
    char *out = capture_stderr(limiter_lines, &r);
    CHECK_EQ_INT(count_lines(out), 1);
    CHECK_CONTAINS(out, " error test: refusing peer 0\n");
    free(out);
    /* after the interval: the next line, with the count of those suppressed meanwhile */
    usleep(350 * 1000);
    r.n = 3;
    out = capture_stderr(limiter_lines, &r);
    CHECK_EQ_INT(count_lines(out), 1);
    CHECK_CONTAINS(out, "refusing peer 0 (999 more in the last ");
    free(out);
    /* the two suppressed since then come out on a flush, once */
    r.n = 0;
    r.what = "peers refused";
    out = capture_stderr(limiter_lines, &r);
    CHECK_EQ_INT(count_lines(out), 1);
    CHECK_CONTAINS(out, " error test: peers refused: 2 more in the last ");
    free(out);
    out = capture_stderr(limiter_lines, &r);
    CHECK_STR(out, "");
    free(out);
    /* a long interval is written in whole seconds */
    pc_log_limiter l2 = {.interval_ms = 300, .last_ms = 1, .suppressed = 5};
    r = (limiter_run){&l2, 1, NULL};
    out = capture_stderr(limiter_lines, &r);
    const char *note = strstr(out, "refusing peer 0 (5 more in the last ");
    CHECK(note != NULL);
    if (note) { /* the monotonic clock's age: "(5 more in the last 12345s)" */
        note += strlen("refusing peer 0 (5 more in the last ");
        size_t digits = strspn(note, "0123456789");
        CHECK(digits > 0);
        CHECK_STR(note + digits, "s)\n");
    }
    free(out);
}

/* At the limit with the only connection busy (the handler holds its request), a newcomer gets
 * 503; once that connection is merely idle, the next newcomer takes its place. */
static void test_conn_limit(void)
{
    pc_conn_stats st = {0};
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){.max_connections = 1, .stats = &st});
    th_raw a = {0}, b = {0}, c = {0};
    a.parts[0] = "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n";
    b.start_delay_ms = 150;
    b.parts[0] = "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
    th_raw_start(&a, ts.h.port);
    th_raw_start(&b, ts.h.port);
    th_raw_wait(loop, &b);
    CHECK_CONTAINS(b.resp, "HTTP/1.1 503 Service Unavailable\r\n");
    CHECK(b.elapsed_ms < 3000); /* answered, not left hanging */
    CHECK_EQ_INT(st.refused, 1);
    CHECK_EQ_INT(st.evicted, 0);
    CHECK_EQ_INT(st.open, 1);
    CHECK(ts.held != NULL);
    if (ts.held) pc_http_respond(ts.held, 200, "text/plain", "held", 4, NULL);
    ts.held = NULL;
    /* a is idle now (keep-alive): the next newcomer is served in its place */
    c.parts[0] = "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    th_raw_start(&c, ts.h.port);
    th_raw_wait(loop, &c);
    th_raw_wait(loop, &a);
    CHECK_CONTAINS(c.resp, "HTTP/1.1 200 OK\r\n");
    CHECK_CONTAINS(a.resp, "HTTP/1.1 200 OK\r\n");
    CHECK(a.elapsed_ms < 4500); /* closed by the server, not by the helper's own deadline */
    CHECK_EQ_INT(ts.h.n, 2);
    CHECK_EQ_INT(st.refused, 1);
    CHECK_EQ_INT(st.evicted, 1);
    th_stop(&ts.h);
    CHECK_EQ_INT(st.open, 0);
}

/* At the limit, newcomers take the place of the connection idle or incomplete longest: a silent
 * one, then one whose headers are incomplete, never the older connection that was answered more
 * recently (the order is since accept or the last response, not since accept). */
static void test_conn_limit_evicts_longest_idle(void)
{
    pc_conn_stats st = {0};
    tsrv ts;
    srv_start(&ts,
              (pc_http_server_opts){.max_connections = 3, .idle_timeout_ms = 3000, .stats = &st});
    th_raw a = {0}, silent = {0}, partial = {0}, c = {0}, d = {0};
    a.parts[0] = "GET /a?n=1 HTTP/1.1\r\nHost: x\r\n\r\n";
    a.parts[1] = "GET /a?n=2 HTTP/1.1\r\nHost: x\r\n\r\n";
    a.delays[1] = 450;
    silent.start_delay_ms = 150;
    partial.start_delay_ms = 250;
    partial.parts[0] = "POST /p HTTP/1.1\r\nHost: x\r\n"; /* headers never finished */
    c.start_delay_ms = 750;
    c.parts[0] = "GET /c HTTP/1.1\r\nHost: x\r\n\r\n";
    d.start_delay_ms = 1050;
    d.parts[0] = "GET /d HTTP/1.1\r\nHost: x\r\n\r\n";
    th_raw *all[] = {&a, &silent, &partial, &c, &d};
    for (int i = 0; i < 5; i++)
        th_raw_start(all[i], ts.h.port);
    for (int i = 0; i < 5; i++)
        th_raw_wait(loop, all[i]);
    CHECK_CONTAINS(a.resp, "GET /a n=2");
    CHECK_CONTAINS(c.resp, "HTTP/1.1 200 OK\r\n");
    CHECK_CONTAINS(d.resp, "HTTP/1.1 200 OK\r\n");
    /* left alone, silent would be closed by idle_timeout (3 s) and partial by
     * read_header_timeout (10 s, after the helper gave up at 5 s) */
    CHECK_EQ_INT(silent.resp_len, 0);
    CHECK_EQ_INT(partial.resp_len, 0);
    CHECK(silent.elapsed_ms < 2500);
    CHECK(partial.elapsed_ms < 2500);
    CHECK(a.elapsed_ms >= 2500); /* a was kept: its idle_timeout closed it */
    CHECK_EQ_INT(st.evicted, 2);
    CHECK_EQ_INT(st.refused, 0);
    th_stop(&ts.h);
}

/* read_header_timeout bounds the request head; the body has the rest of read_timeout. */
static void test_header_timeout(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){.read_timeout_ms = 4000, .read_header_timeout_ms = 300});
    th_raw loris = {0}, body = {0}, silent = {0};
    loris.parts[0] = "POST /x HTTP/1.1\r\nHost: x\r\nX-Drip: ";
    loris.dribble_ms = 50; /* a header byte every 50 ms, forever */
    body.parts[0] = "POST /slowbody HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                    "Connection: close\r\n\r\na";
    body.parts[1] = "b";
    body.parts[2] = "c";
    body.delays[1] = body.delays[2] = 400; /* the body takes 800 ms: more than the head may */
    th_raw_start(&loris, ts.h.port);
    th_raw_start(&body, ts.h.port);
    th_raw_start(&silent, ts.h.port);
    th_raw_wait(loop, &loris);
    th_raw_wait(loop, &body);
    th_raw_wait(loop, &silent);
    CHECK_CONTAINS(loris.resp, "HTTP/1.1 408 Request Timeout\r\n");
    CHECK_CONTAINS(loris.resp, "request header not received in time");
    CHECK(loris.elapsed_ms >= 250 && loris.elapsed_ms < 3000);
    CHECK_CONTAINS(body.resp, "HTTP/1.1 200 OK\r\n");
    CHECK_CONTAINS(body.resp, "POST /slowbody n=- len=3\nabc");
    CHECK_EQ_INT(silent.resp_len, 0); /* never sent a byte: closed without an answer */
    CHECK(silent.elapsed_ms >= 250 && silent.elapsed_ms < 3000);
    th_stop(&ts.h);
}

/* ---- the HTTP/2 server's connection limit ---- */

typedef struct h2srv {
    int calls;
    pc_h2_call *held;
} h2srv;

static void h2_handler(pc_h2_call *call, void *arg)
{
    h2srv *hs = arg;
    hs->calls++;
    if (strcmp(call->path, "/hold") == 0) {
        hs->held = call;
        return;
    }
    pc_h2_respond(call, 200, NULL, 0, "ok", 2, NULL, 0);
}

/* A connection that never sent the preface gives its place to a real client; a connection with
 * a call being handled does not, and the newcomer is closed. */
static void test_h2_conn_limit(void)
{
    pc_conn_stats st = {0};
    h2srv hs = {0};
    pc_h2_server_opts o = {.max_connections = 1, .log_id = "h2-srv", .stats = &st};
    pc_h2_server *s = th2_server_start(loop, o, h2_handler, &hs);
    int port = pc_h2_server_port(s);
    th_raw silent = {0};
    th_raw_start(&silent, port);
    CHECK(
        wait_until(loop, int_set, (int *)&st.open, 2000)); /* the silent one holds the only slot */
    pc_h2_client_opts co = {.host = "127.0.0.1", .port = port, .log_id = "h2-cli"};
    pc_h2_client *c1 = pc_h2_client_new(loop, &co);
    th2_result r1 = {0}, r2 = {0}, r3 = {0};
    pc_h2_client_request(c1, "POST", "/ok", NULL, 0, "x", 1, 3000, th2_on_resp, &r1);
    CHECK(wait_until(loop, int_set, &r1.done, 4000));
    CHECK_EQ_INT(r1.error, 0);
    CHECK_EQ_INT(r1.status, 200);
    th_raw_wait(loop, &silent);
    CHECK(silent.elapsed_ms < 3000); /* evicted, not timed out (30 s) */
    CHECK_EQ_INT(st.evicted, 1);
    /* c1's connection now holds a call: a second client is turned away */
    pc_h2_client_request(c1, "POST", "/hold", NULL, 0, "x", 1, 5000, th2_on_resp, &r2);
    CHECK(wait_until(loop, int_set, &hs.calls, 2000) && hs.held);
    CHECK(wait_until(loop, int_set, &r2.done, 200) == 0);
    pc_h2_client *c2 = pc_h2_client_new(loop, &co);
    pc_h2_client_request(c2, "POST", "/ok", NULL, 0, "x", 1, 3000, th2_on_resp, &r3);
    CHECK(wait_until(loop, int_set, &r3.done, 4000));
    CHECK(r3.error != 0);
    CHECK_EQ_INT(r3.status, 0);
    CHECK_EQ_INT(st.refused, 1);
    CHECK_EQ_INT(st.evicted, 1);
    CHECK_EQ_INT(hs.calls, 2);
    if (hs.held) pc_h2_respond(hs.held, 200, NULL, 0, "late", 4, NULL, 0);
    CHECK(wait_until(loop, int_set, &r2.done, 3000));
    CHECK_EQ_INT(r2.status, 200);
    th2_client_close(loop, c1);
    th2_client_close(loop, c2);
    th2_server_stop(loop, s);
    CHECK_EQ_INT(st.open, 0);
}

static void test_client_timeout_and_late_answer(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){0});
    pc_http_client *c = th_client_new(loop, ts.h.port, 1);
    th_result r = {0};
    double t0 = now_ms();
    pc_http_client_request(c, "POST", "/hold", NULL, "x", 1, 200, th_on_resp, &r);
    CHECK(wait_until(loop, flag_set, &r.done, 3000));
    CHECK_EQ_INT(r.error, UV_ETIMEDOUT);
    CHECK_EQ_INT(r.status, 0);
    char want[128];
    snprintf(want, sizeof want, "POST /hold to 127.0.0.1:%d: timed out after 200 ms", ts.h.port);
    CHECK_STR(r.msg, want);
    CHECK(r.t_ms - t0 >= 190 && r.t_ms - t0 < 1500);
    CHECK(ts.held != NULL);
    /* let the server notice the client went away, then answer: must be harmless */
    usleep(20 * 1000);
    uv_run(loop, UV_RUN_NOWAIT);
    if (ts.held) pc_http_respond(ts.held, 200, "text/plain", "late", 4, NULL);
    ts.held = NULL;
    th_client_close(loop, c);
    th_stop(&ts.h);
}

static void test_shutdown_waits_for_inflight(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){0});
    pc_http_client *c = th_client_new(loop, ts.h.port, 1);
    th_result r = {0};
    pc_http_client_request(c, "POST", "/hold", NULL, "x", 1, 3000, th_on_resp, &r);
    CHECK(wait_until(loop, int_set, &ts.h.n, 2000));
    atomic_int done = 0;
    pc_http_server_shutdown(ts.h.s, set_flag, &done);
    CHECK(!wait_until(loop, flag_set, &done, 100)); /* still waiting for the answer */
    pc_http_respond(ts.held, 200, "text/plain", "bye", 3, NULL);
    CHECK(wait_until(loop, flag_set, &done, 3000));
    CHECK(wait_until(loop, flag_set, &r.done, 3000));
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(r.body, "bye");
    th_client_close(loop, c);
    th_clear(&ts.h);
}

static void test_client_refused(void)
{
    int port = th_unused_port();
    pc_http_client *c = th_client_new(loop, port, 2);
    th_result r = {0};
    pc_http_client_request(c, "POST", "/x", NULL, "x", 1, 2000, th_on_resp, &r);
    CHECK(wait_until(loop, flag_set, &r.done, 3000));
    CHECK_EQ_INT(r.error, UV_ECONNREFUSED);
    char want[128];
    snprintf(want, sizeof want, "connect 127.0.0.1:%d: connection refused", port);
    CHECK_STR(r.msg, want);
    th_client_close(loop, c);
}

static void test_client_close_cancels(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){0});
    pc_http_client *c = th_client_new(loop, ts.h.port, 1);
    th_result r1 = {0}, r2 = {0};
    pc_http_client_request(c, "POST", "/hold", NULL, NULL, 0, 300, th_on_resp, &r1);
    pc_http_client_request(c, "POST", "/queued", NULL, NULL, 0, 3000, th_on_resp, &r2);
    CHECK(wait_until(loop, int_set, &ts.h.n, 2000));
    atomic_int done = 0;
    pc_http_client_close(c, set_flag, &done);
    CHECK(atomic_load(&r2.done));
    CHECK_EQ_INT(r2.error, UV_ECANCELED);
    CHECK(!atomic_load(&r1.done));
    CHECK(wait_until(loop, flag_set, &done, 3000)); /* after the in-flight one timed out */
    CHECK_EQ_INT(r1.error, UV_ETIMEDOUT);
    pc_http_respond(ts.held, 200, NULL, NULL, 0, NULL);
    th_stop(&ts.h);
}

/* A blocking server thread: answers one request keep-alive, then closes the connection on the
 * next request without answering (as a server closing an idle connection races with it), then
 * answers on a new connection. The client must retry the request once, transparently. */
typedef struct rsrv {
    int lfd, port, accepts;
    atomic_int done;
    pthread_t th;
} rsrv;

static int read_head(int fd)
{
    char buf[4096];
    size_t n = 0;
    while (n < sizeof buf - 1) {
        ssize_t k = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        if (k <= 0) return -1;
        n += (size_t)k;
        buf[n] = 0;
        if (strstr(buf, "\r\n\r\n")) return 0;
    }
    return -1;
}

static void *rsrv_main(void *arg)
{
    rsrv *s = arg;
    int fd = accept(s->lfd, NULL, NULL);
    s->accepts++;
    const char *ok1 = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none";
    if (read_head(fd) == 0) send(fd, ok1, strlen(ok1), MSG_NOSIGNAL);
    read_head(fd);
    close(fd);
    fd = accept(s->lfd, NULL, NULL);
    s->accepts++;
    /* chunked, to exercise the client's de-chunking */
    const char *ok2 = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                      "Content-Type: text/x\r\n\r\n3\r\ntwo\r\n0\r\n\r\n";
    if (read_head(fd) == 0) send(fd, ok2, strlen(ok2), MSG_NOSIGNAL);
    read_head(fd); /* third request: answer read-until-close */
    const char *ok3 = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthree-until-eof";
    send(fd, ok3, strlen(ok3), MSG_NOSIGNAL);
    close(fd);
    atomic_store(&s->done, 1);
    return NULL;
}

static void test_client_retry_and_framing(void)
{
    rsrv s = {0};
    s.lfd = th_listen_loopback(&s.port);
    pthread_create(&s.th, NULL, rsrv_main, &s);
    pc_http_client *c = th_client_new(loop, s.port, 1);
    th_result r1 = {0}, r2 = {0}, r3 = {0};
    pc_http_client_request(c, "GET", "/1", NULL, NULL, 0, 3000, th_on_resp, &r1);
    CHECK(wait_until(loop, flag_set, &r1.done, 3000));
    CHECK_STR(r1.body, "one");
    pc_http_client_request(c, "GET", "/2", NULL, NULL, 0, 3000, th_on_resp, &r2);
    CHECK(wait_until(loop, flag_set, &r2.done, 3000));
    CHECK_EQ_INT(r2.error, 0);
    CHECK_EQ_INT(r2.status, 200);
    CHECK_STR(r2.body, "two");
    CHECK_STR(r2.ctype, "text/x");
    CHECK_EQ_INT(s.accepts, 2);
    pc_http_client_request(c, "GET", "/3", NULL, NULL, 0, 3000, th_on_resp, &r3);
    CHECK(wait_until(loop, flag_set, &r3.done, 3000));
    CHECK_EQ_INT(r3.status, 200);
    CHECK_STR(r3.body, "three-until-eof");
    CHECK(wait_until(loop, flag_set, &s.done, 3000));
    pthread_join(s.th, NULL);
    close(s.lfd);
    th_client_close(loop, c);
}

static void test_idle_close_then_reconnect(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){.idle_timeout_ms = 100});
    pc_http_client *c = th_client_new(loop, ts.h.port, 1);
    th_result r1 = {0}, r2 = {0};
    pc_http_client_request(c, "GET", "/1", NULL, NULL, 0, 2000, th_on_resp, &r1);
    CHECK(wait_until(loop, flag_set, &r1.done, 3000));
    atomic_int never = 0;
    wait_until(loop, flag_set, &never, 300); /* the server drops the idle connection */
    pc_http_client_request(c, "GET", "/2", NULL, NULL, 0, 2000, th_on_resp, &r2);
    CHECK(wait_until(loop, flag_set, &r2.done, 3000));
    CHECK_EQ_INT(r2.status, 200);
    CHECK(strcmp(ts.h.recs[0].peer, ts.h.recs[1].peer) != 0); /* a new connection */
    th_client_close(loop, c);
    th_stop(&ts.h);
}

static void test_listen_errors(void)
{
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){0});
    pc_http_server_opts o = {.host = "127.0.0.1", .port = ts.h.port};
    pc_http_server *s2 = pc_http_server_new(loop, &o, th_handler, &ts.h);
    pc_error err = {0};
    CHECK_EQ_INT(pc_http_server_start(s2, &err), PC_EIO);
    char want[128];
    snprintf(want, sizeof want, "listen 127.0.0.1:%d: address already in use", ts.h.port);
    CHECK_STR(err.msg, want);
    atomic_int done = 0;
    pc_http_server_shutdown(s2, set_flag, &done);
    CHECK(wait_until(loop, flag_set, &done, 2000));
    th_stop(&ts.h);

    /* IPv6 loopback, where available */
    memset(&ts, 0, sizeof ts);
    ts.h.answer = handler;
    pc_http_server_opts o6 = {.host = "::1", .port = 0};
    pc_http_server *s6 = pc_http_server_new(loop, &o6, th_handler, &ts.h);
    if (pc_http_server_start(s6, &err) == 0) {
        pc_http_client_opts co = {.host = "::1", .port = pc_http_server_port(s6)};
        pc_http_client *c = pc_http_client_new(loop, &co);
        th_result r = {0};
        pc_http_client_request(c, "GET", "/v6", NULL, NULL, 0, 2000, th_on_resp, &r);
        CHECK(wait_until(loop, flag_set, &r.done, 3000));
        CHECK_EQ_INT(r.status, 200);
        CHECK_CONTAINS(ts.h.recs[0].peer, "[::1]:");
        th_client_close(loop, c);
    } else {
        fprintf(stderr, "skipping IPv6: %s\n", err.msg);
    }
    done = 0;
    pc_http_server_shutdown(s6, set_flag, &done);
    CHECK(wait_until(loop, flag_set, &done, 2000));
    th_clear(&ts.h);
}

/* New descriptors take the lowest free number, so a limit just above it leaves room for a few. */
static int lowest_free_fd(void)
{
    int fd = dup(0);
    close(fd);
    return fd;
}

/* An RLIMIT_NOFILE that leaves exactly n descriptors free (there may be holes below the last
 * one in use). */
static int limit_for_room(int n)
{
    int fd = 0;
    for (int free_ = 0;; fd++) {
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF && ++free_ == n) break;
    }
    return fd + 1;
}

/* Child: open n connections, then count how many the server dropped (EOF or reset). */
static int flood_child(int port, int n)
{
    int fds[64], dropped = 0;
    for (int i = 0; i < n; i++)
        if ((fds[i] = th_connect_loopback(port)) < 0) return 255;
    for (int i = 0; i < n; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        char b;
        if (poll(&p, 1, i == 0 ? 800 : 50) == 1 && recv(fds[i], &b, 1, 0) <= 0) dropped++;
    }
    return dropped;
}

/* Out of file descriptors: the listener must keep working once descriptors are available. */
static void test_accept_survives_emfile(void)
{
    pc_conn_stats st = {0};
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){.stats = &st});
    struct rlimit old, low;
    getrlimit(RLIMIT_NOFILE, &old);
    pid_t pid = fork();
    if (pid == 0) _exit(flood_child(ts.h.port, 30));
    low = old;
    low.rlim_cur = (rlim_t)lowest_free_fd() + 3; /* room for about three connections */
    CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &low), 0);
    atomic_int never = 0;
    wait_until(loop, flag_set, &never, 500);
    setrlimit(RLIMIT_NOFILE, &old);
    int ws = 0;
    while (waitpid(pid, &ws, WNOHANG) == 0)
        wait_until(loop, flag_set, &never, 20);
    CHECK(WIFEXITED(ws));
    int dropped = WEXITSTATUS(ws);
    fprintf(stderr, "emfile: child saw %d of 30 connections dropped\n", dropped);
    CHECK(dropped >= 20 && dropped <= 30);
    /* counted: the failed accepts, and each dropped connection as evicted (idle ones made room
     * for newer ones) or refused (closed at once for lack of a descriptor) */
    fprintf(stderr, "emfile: %llu accept errors, %llu evicted, %llu refused\n",
            (unsigned long long)st.accept_errors, (unsigned long long)st.evicted,
            (unsigned long long)st.refused);
    CHECK(st.accept_errors >= 1);
    CHECK(st.evicted + st.refused >= (uint64_t)dropped);
    CHECK(st.evicted + st.refused <= 30);
    pc_http_client *c = th_client_new(loop, ts.h.port, 1);
    th_result r = {0};
    pc_http_client_request(c, "GET", "/after", NULL, NULL, 0, 2000, th_on_resp, &r);
    CHECK(wait_until(loop, flag_set, &r.done, 3000));
    CHECK_EQ_INT(r.status, 200);
    th_client_close(loop, c);
    th_stop(&ts.h);
}

/* Child: 3 connections with a request each, which the server holds; then 10 more while the
 * server has no descriptor left and nothing idle to close. Returns how many of the 10 were
 * dropped + 16 * how many of the 3 were answered 200. */
static int busy_flood_child(int port)
{
    int fds[13], dropped = 0, ok = 0;
    static const char req[] = "GET /holdmany HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    for (int i = 0; i < 13; i++) {
        if (i == 3) usleep(600 * 1000); /* the server has taken the three requests by now */
        if ((fds[i] = th_connect_loopback(port)) < 0) return 255;
        if (i < 3) send(fds[i], req, sizeof req - 1, MSG_NOSIGNAL);
    }
    for (int i = 3; i < 13; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        char b;
        if (poll(&p, 1, i == 3 ? 2000 : 200) == 1 && recv(fds[i], &b, 1, 0) <= 0) dropped++;
    }
    for (int i = 0; i < 3; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        char b[64] = "";
        if (poll(&p, 1, 5000) == 1 && recv(fds[i], b, sizeof b - 1, 0) > 0 &&
            strncmp(b, "HTTP/1.1 200 ", 13) == 0)
            ok++;
    }
    return dropped + 16 * ok;
}

/* Out of descriptors with every connection busy: the pending connections are closed at once
 * (counted as refused), nothing busy is touched, and the held requests are answered later. */
static void test_emfile_all_busy(void)
{
    pc_conn_stats st = {0};
    tsrv ts;
    srv_start(&ts, (pc_http_server_opts){.stats = &st});
    struct rlimit old, low;
    getrlimit(RLIMIT_NOFILE, &old);
    pid_t pid = fork();
    if (pid == 0) _exit(busy_flood_child(ts.h.port));
    low = old;
    low.rlim_cur = (rlim_t)limit_for_room(3); /* room for the three */
    CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &low), 0);
    CHECK(wait_until(loop, int_set, &st.refused, 5000) || st.refused);
    atomic_int never = 0;
    wait_until(loop, flag_set, &never,
               1500); /* the child counts its closed connections meanwhile */
    setrlimit(RLIMIT_NOFILE, &old);
    CHECK_EQ_INT(ts.n_many, 3);
    for (int i = 0; i < ts.n_many; i++)
        pc_http_respond(ts.many[i], 200, "text/plain", "ok", 2, NULL);
    int ws = 0;
    while (waitpid(pid, &ws, WNOHANG) == 0)
        wait_until(loop, flag_set, &never, 20);
    CHECK(WIFEXITED(ws));
    int code = WEXITSTATUS(ws), dropped = code % 16, answered = code / 16;
    fprintf(stderr,
            "emfile, all busy: %d of 10 dropped, %d of 3 answered; %llu accept errors, "
            "%llu refused, %llu evicted\n",
            dropped, answered, (unsigned long long)st.accept_errors, (unsigned long long)st.refused,
            (unsigned long long)st.evicted);
    CHECK_EQ_INT(answered, 3);
    CHECK(dropped >= 8);
    CHECK_EQ_INT(st.evicted, 0);
    CHECK(st.refused >= (uint64_t)dropped && st.refused <= 10);
    CHECK(st.accept_errors >= 1);
    th_stop(&ts.h);
}

int main(void)
{
    uv_loop_t l;
    loop = test_loop_open(&l);
    RUN(test_url);
    RUN(test_gzip);
    RUN(test_gzip_paths);
    RUN(test_gzip_sized);
    RUN(test_zstd);
    RUN(test_retry_after);
    RUN(test_roundtrip_and_reuse);
    RUN(test_client_queue_fifo);
    RUN(test_pipelining);
    RUN(test_half_close_answered);
    RUN(test_large_both_ways);
    RUN(test_chunked_and_http10);
    RUN(test_limits);
    RUN(test_slow_client_408);
    RUN(test_log_limiter);
    RUN(test_conn_limit);
    RUN(test_conn_limit_evicts_longest_idle);
    RUN(test_header_timeout);
    RUN(test_h2_conn_limit);
    RUN(test_client_timeout_and_late_answer);
    RUN(test_shutdown_waits_for_inflight);
    RUN(test_client_refused);
    RUN(test_client_close_cancels);
    RUN(test_client_retry_and_framing);
    RUN(test_idle_close_then_reconnect);
    RUN(test_listen_errors);
    RUN(test_accept_survives_emfile);
    RUN(test_emfile_all_busy);
    return test_loop_close(loop);
}
