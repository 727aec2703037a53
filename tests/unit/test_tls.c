/* TLS: contexts from files (and their errors), the HTTP server and client over TLS on one uv
 * loop (trust, host names, mutual TLS, keep-alive, big bodies), reload, and the auth helpers.
 * Certificates are made at test time with OpenSSL's API into a temporary directory. */
#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "check.h"
#include "base/base64.h"
#include "extensions/auth_common.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "sdk/tls_config.h"
#include "base/log.h"
#include "testhttp.h"
#include "testloop.h"

static uv_loop_t *loop;
static char dir[64];

/* ---- certificates ---- */

typedef struct cert {
    EVP_PKEY *key;
    X509 *x;
} cert;

static void add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    if (!e) abort();
    X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
}

/* kind: 'c' CA, 's' server, 'l' client. issuer NULL: self-signed. */
static cert mkcert(const char *cn, long serial, const cert *issuer, char kind, const char *san)
{
    cert c = {.key = EVP_EC_gen("P-256"), .x = X509_new()};
    X509 *x = c.x;
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, c.key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer->x) : n);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer ? issuer->x : x, x, NULL, NULL, 0);
    if (kind == 'c') {
        add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        add_ext(x, &ctx, NID_basic_constraints, "CA:FALSE");
        add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature");
        add_ext(x, &ctx, NID_ext_key_usage, kind == 's' ? "serverAuth" : "clientAuth");
    }
    if (san) add_ext(x, &ctx, NID_subject_alt_name, san);
    X509_sign(x, issuer ? issuer->key : c.key, EVP_sha256());
    return c;
}

static void cert_free(cert *c)
{
    EVP_PKEY_free(c->key);
    X509_free(c->x);
}

static const char *path_of(const char *name)
{
    static char bufs[8][400];
    static int i;
    char *b = bufs[i++ % 8];
    snprintf(b, sizeof bufs[0], "%.255s/%.100s", dir, name);
    return b;
}

/* name.crt and name.key */
static void write_cert(const cert *c, const char *name)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s.crt", dir, name);
    FILE *f = fopen(p, "w");
    PEM_write_X509(f, c->x);
    fclose(f);
    snprintf(p, sizeof p, "%s/%s.key", dir, name);
    f = fopen(p, "w");
    PEM_write_PrivateKey(f, c->key, NULL, NULL, 0, NULL, NULL);
    fclose(f);
}

static void write_text(const char *name, const char *text)
{
    FILE *f = fopen(path_of(name), "w");
    fputs(text, f);
    fclose(f);
}

static void make_certs(void)
{
    cert ca = mkcert("test CA", 1, NULL, 'c', NULL);
    cert ca2 = mkcert("other CA", 2, NULL, 'c', NULL);
    cert srv = mkcert("server", 10, &ca, 's', "DNS:localhost,IP:127.0.0.1");
    cert srv2 = mkcert("server", 11, &ca2, 's', "DNS:localhost,IP:127.0.0.1");
    cert cli = mkcert("client", 20, &ca, 'l', NULL);
    write_cert(&ca, "ca");
    write_cert(&ca2, "ca2");
    write_cert(&srv, "srv");
    write_cert(&srv2, "srv2");
    write_cert(&cli, "cli");
    cert *all[] = {&ca, &ca2, &srv, &srv2, &cli};
    for (size_t i = 0; i < 5; i++)
        cert_free(all[i]);
    write_text("garbage.pem", "this is not a certificate\n");
}

static void copy_file(const char *from, const char *to)
{
    char buf[8192];
    FILE *in = fopen(path_of(from), "rb"), *out = fopen(path_of(to), "wb");
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') unlink(path_of(e->d_name));
    if (d) closedir(d);
    rmdir(dir);
}

/* ---- server and client ---- */

typedef struct tsrv {
    th_server h; /* first: handler gets it */
    pc_tls_ctx *ctx;
} tsrv;

static void handler(th_server *ts, pc_http_req *req)
{
    (void)ts;
    if (!strcmp(req->path, "/big")) { /* answer with the body */
        pc_http_respond(req, 200, "application/octet-stream", req->body, req->body_len, NULL);
        return;
    }
    char out[256];
    int n = snprintf(out, sizeof out, "%s %s len=%zu", req->method, req->path, req->body_len);
    pc_http_respond(req, 200, "text/plain", out, (size_t)n, NULL);
}

static int srv_start(tsrv *ts, const pc_tls_server_cfg *cfg)
{
    memset(ts, 0, sizeof *ts);
    pc_error err = {0};
    ts->ctx = pc_tls_server_ctx_new(cfg, "http/1.1", "test-srv", &err);
    CHECK(ts->ctx != NULL);
    if (!ts->ctx) {
        fprintf(stderr, "ctx: %s\n", err.msg);
        return -1;
    }
    return th_start(&ts->h, loop, (pc_http_server_opts){.tls = ts->ctx}, handler);
}

static void srv_stop(tsrv *ts)
{
    th_stop(&ts->h);
    pc_tls_ctx_free(ts->ctx);
}

typedef struct tcli {
    pc_tls_ctx *ctx;
    pc_http_client *c;
} tcli;

static int cli_new(tcli *t, const char *host, int port, const pc_tls_client_cfg *cfg)
{
    pc_error err = {0};
    t->ctx = pc_tls_client_ctx_new(cfg, "http/1.1", "test-cli", &err);
    CHECK(t->ctx != NULL);
    if (!t->ctx) {
        fprintf(stderr, "client ctx: %s\n", err.msg);
        return -1;
    }
    pc_http_client_opts o = {.host = host, .port = port, .log_id = "test-cli", .tls = t->ctx};
    t->c = pc_http_client_new(loop, &o);
    return 0;
}

static void cli_close(tcli *t)
{
    th_client_close(loop, t->c);
    pc_tls_ctx_free(t->ctx);
}

/* One GET; returns the th_result (status 0 and error set on failure). */
static th_result get(tcli *t, const char *path)
{
    th_result r = {0};
    pc_http_client_request(t->c, "GET", path, NULL, NULL, 0, 3000, th_on_resp, &r);
    CHECK(wait_until(loop, flag_set, &r.done, 5000));
    return r;
}

static pc_tls_server_cfg server_cfg(const char *name)
{
    static char cert[128], key[128];
    snprintf(cert, sizeof cert, "%s/%s.crt", dir, name);
    snprintf(key, sizeof key, "%s/%s.key", dir, name);
    return (pc_tls_server_cfg){.cert_file = cert, .key_file = key};
}

/* ================================ tests ================================ */

static void test_server_ctx_errors(void)
{
    pc_error err = {0};
    pc_tls_server_cfg cfg = server_cfg("srv");
    pc_tls_ctx *ctx = pc_tls_server_ctx_new(&cfg, NULL, "t", &err);
    CHECK(ctx != NULL);
    pc_tls_ctx_free(ctx);

    cfg.cert_file = (char *)path_of("missing.crt");
    CHECK(pc_tls_server_ctx_new(&cfg, NULL, "t", &err) == NULL);
    CHECK_CONTAINS(err.msg, "No such file or directory");
    CHECK_CONTAINS(err.msg, "missing.crt");

    cfg.cert_file = (char *)path_of("garbage.pem");
    CHECK(pc_tls_server_ctx_new(&cfg, NULL, "t", &err) == NULL);
    CHECK_CONTAINS(err.msg, "not a usable PEM certificate");

    cfg = server_cfg("srv");
    cfg.key_file = (char *)path_of("cli.key"); /* another certificate's key */
    CHECK(pc_tls_server_ctx_new(&cfg, NULL, "t", &err) == NULL);
    CHECK_CONTAINS(err.msg, "does not match the certificate");

    cfg = server_cfg("srv");
    cfg.client_ca_file = (char *)path_of("garbage.pem");
    CHECK(pc_tls_server_ctx_new(&cfg, NULL, "t", &err) == NULL);
    CHECK_CONTAINS(err.msg, "client_ca_file");
}

static void test_validate_paths(void)
{
    pc_error e = {0};
    pc_tls_server_cfg s = server_cfg("srv");
    CHECK_EQ_INT(pc_tls_server_validate(&s, NULL, "receivers::pyroscope", "", &e), 0);
    s.key_file = NULL;
    CHECK_EQ_INT(pc_tls_server_validate(&s, NULL, "receivers::pyroscope", "", &e), PC_EINVAL);
    CHECK_CONTAINS(e.msg, "receivers::pyroscope::tls::key_file");
    s = server_cfg("srv");
    s.cert_file = (char *)path_of("garbage.pem");
    CHECK_EQ_INT(pc_tls_server_validate(&s, NULL, "receivers::otlp", "protocols.http.", &e),
                 PC_EINVAL);
    CHECK_CONTAINS(e.msg, "receivers::otlp::protocols::http::tls::cert_file");
    s = (pc_tls_server_cfg){.client_ca_file = (char *)path_of("ca.crt")};
    CHECK_EQ_INT(pc_tls_server_validate(&s, NULL, "r", "", &e), PC_EINVAL);
    CHECK_CONTAINS(e.msg, "tls::cert_file: required");
    s = (pc_tls_server_cfg){0}; /* no TLS at all */
    CHECK_EQ_INT(pc_tls_server_validate(&s, NULL, "r", "", &e), 0);

    pc_tls_client_cfg c = {.ca_file = (char *)path_of("ca.crt")};
    CHECK_EQ_INT(pc_tls_client_validate(&c, NULL, "exporters::otlphttp", "", &e), 0);
    c.ca_file = (char *)path_of("nope.crt");
    CHECK_EQ_INT(pc_tls_client_validate(&c, NULL, "exporters::otlphttp", "", &e), PC_EINVAL);
    CHECK_CONTAINS(e.msg, "exporters::otlphttp::tls::ca_file");
    CHECK_CONTAINS(e.msg, "No such file");
    c.insecure = true; /* plain text: files unused */
    CHECK_EQ_INT(pc_tls_client_validate(&c, NULL, "x", "", &e), 0);
    c = (pc_tls_client_cfg){.cert_file = (char *)path_of("cli.crt")};
    CHECK_EQ_INT(pc_tls_client_validate(&c, NULL, "x", "", &e), PC_EINVAL);
    CHECK_CONTAINS(e.msg, "tls::key_file: required with cert_file");
    c = (pc_tls_client_cfg){0}; /* system trust store */
    CHECK_EQ_INT(pc_tls_client_validate(&c, NULL, "x", "", &e), 0);
}

static void test_roundtrip_keepalive_big(void)
{
    tsrv ts;
    pc_tls_server_cfg scfg = server_cfg("srv");
    if (srv_start(&ts, &scfg)) return;
    tcli t;
    pc_tls_client_cfg ccfg = {.ca_file = (char *)path_of("ca.crt")};
    if (cli_new(&t, "127.0.0.1", ts.h.port, &ccfg)) return;
    th_result r1 = get(&t, "/one");
    CHECK_EQ_INT(r1.error, 0);
    CHECK_EQ_INT(r1.status, 200);
    CHECK_STR(r1.body, "GET /one len=0");
    th_result r2 = get(&t, "/two");
    CHECK_EQ_INT(r2.status, 200);
    CHECK_EQ_INT(ts.h.n, 2);
    CHECK_STR(ts.h.recs[0].peer, ts.h.recs[1].peer); /* the TLS connection was reused */

    /* a 3 MiB body each way crosses many records and reads */
    size_t n = 3u << 20;
    uint8_t *body = malloc(n);
    for (size_t i = 0; i < n; i++)
        body[i] = (uint8_t)(i * 7 + i / 1000);
    th_result r3 = {0};
    pc_http_client_request(t.c, "POST", "/big", NULL, body, n, 10000, th_on_resp, &r3);
    CHECK(wait_until(loop, flag_set, &r3.done, 12000));
    CHECK_EQ_INT(r3.status, 200);
    CHECK_EQ_INT(r3.body_len, n);
    CHECK(r3.big && memcmp(r3.big, body, n) == 0);
    free(r3.big);
    free(body);
    cli_close(&t);

    /* "localhost" is in the certificate too; a name it does not have is refused */
    pc_tls_client_cfg named = {.ca_file = (char *)path_of("ca.crt")};
    if (cli_new(&t, "localhost", ts.h.port, &named)) return;
    CHECK_EQ_INT(get(&t, "/name").status, 200);
    cli_close(&t);
    named.server_name_override = "other.example";
    if (cli_new(&t, "127.0.0.1", ts.h.port, &named)) return;
    th_result r4 = get(&t, "/wrong-name");
    CHECK_EQ_INT(r4.status, 0);
    CHECK_EQ_INT(r4.error, UV_EPROTO);
    CHECK_CONTAINS(r4.msg, "certificate verify failed");
    CHECK_CONTAINS(r4.msg, "hostname mismatch");
    cli_close(&t);
    srv_stop(&ts);
}

static void test_untrusted_and_skip_verify(void)
{
    tsrv ts;
    pc_tls_server_cfg scfg = server_cfg("srv");
    if (srv_start(&ts, &scfg)) return;
    tcli t;
    pc_tls_client_cfg other = {.ca_file = (char *)path_of("ca2.crt")};
    if (cli_new(&t, "127.0.0.1", ts.h.port, &other)) return;
    th_result r = get(&t, "/x");
    CHECK_EQ_INT(r.status, 0);
    CHECK_EQ_INT(r.error, UV_EPROTO);
    char want[128];
    snprintf(want, sizeof want,
             "TLS handshake with 127.0.0.1:%d failed: certificate verify "
             "failed (unable to get local issuer certificate)",
             ts.h.port);
    CHECK_CONTAINS(r.msg, want);
    cli_close(&t);

    pc_tls_client_cfg sys = {0}; /* the system store does not know our test CA */
    if (cli_new(&t, "127.0.0.1", ts.h.port, &sys)) return;
    CHECK_CONTAINS(get(&t, "/x").msg, "certificate verify failed");
    cli_close(&t);

    pc_tls_client_cfg skip = {.insecure_skip_verify = true};
    if (cli_new(&t, "127.0.0.1", ts.h.port, &skip)) return;
    CHECK_EQ_INT(get(&t, "/x").status, 200);
    cli_close(&t);

    /* a plain-text client gets an error quickly, not a hang */
    pc_http_client_opts o = {.host = "127.0.0.1", .port = ts.h.port, .log_id = "plain"};
    pc_http_client *plain = pc_http_client_new(loop, &o);
    th_result rp = {0};
    pc_http_client_request(plain, "GET", "/", NULL, NULL, 0, 3000, th_on_resp, &rp);
    CHECK(wait_until(loop, flag_set, &rp.done, 5000));
    CHECK(rp.status == 0 || rp.status >= 400);
    CHECK(rp.error != UV_ETIMEDOUT);
    th_client_close(loop, plain);
    srv_stop(&ts);
}

static void test_mutual_tls(void)
{
    tsrv ts;
    pc_tls_server_cfg scfg = server_cfg("srv");
    scfg.client_ca_file = (char *)path_of("ca.crt");
    if (srv_start(&ts, &scfg)) return;
    tcli t;
    pc_tls_client_cfg nocert = {.ca_file = (char *)path_of("ca.crt")};
    if (cli_new(&t, "127.0.0.1", ts.h.port, &nocert)) return;
    th_result r = get(&t, "/x");
    CHECK_EQ_INT(r.status, 0);
    CHECK(r.error != 0);
    CHECK_EQ_INT(ts.h.n, 0);
    cli_close(&t);

    pc_tls_client_cfg withcert = {.ca_file = (char *)path_of("ca.crt"),
                                  .cert_file = (char *)path_of("cli.crt"),
                                  .key_file = (char *)path_of("cli.key")};
    if (cli_new(&t, "127.0.0.1", ts.h.port, &withcert)) return;
    th_result ok = get(&t, "/x");
    CHECK_EQ_INT(ok.error, 0);
    CHECK_EQ_INT(ok.status, 200);
    cli_close(&t);
    srv_stop(&ts);
}

static int hook_runs;
static void count_hook(void *arg)
{
    (void)arg;
    hook_runs++;
}

static void test_reload(void)
{
    /* the server serves live.crt: first signed by ca, then by ca2 */
    copy_file("srv.crt", "live.crt");
    copy_file("srv.key", "live.key");
    tsrv ts;
    pc_tls_server_cfg scfg = server_cfg("live");
    if (srv_start(&ts, &scfg)) return;
    pc_tls_reload_hook_add(count_hook, &hook_runs);
    tcli a, b;
    pc_tls_client_cfg trust1 = {.ca_file = (char *)path_of("ca.crt")};
    pc_tls_client_cfg trust2 = {.ca_file = (char *)path_of("ca2.crt")};
    if (cli_new(&a, "127.0.0.1", ts.h.port, &trust1) ||
        cli_new(&b, "127.0.0.1", ts.h.port, &trust2))
        return;
    CHECK_EQ_INT(get(&a, "/before").status, 200);
    CHECK_EQ_INT(get(&b, "/before").status, 0);

    copy_file("srv2.crt", "live.crt");
    copy_file("srv2.key", "live.key");
    CHECK_EQ_INT(pc_tls_reload_all(), 0);
    CHECK_EQ_INT(hook_runs, 1);
    CHECK_EQ_INT(get(&b, "/after").status, 200); /* a new connection sees the new cert */
    CHECK_EQ_INT(get(&a, "/after").status, 200); /* the old keep-alive connection lives on */

    /* a broken file keeps the previous certificates */
    write_text("live.crt", "garbage\n");
    CHECK_EQ_INT(pc_tls_reload_all(), 1);
    CHECK_EQ_INT(hook_runs, 2);
    cli_close(&b);
    if (cli_new(&b, "127.0.0.1", ts.h.port, &trust2)) return;
    CHECK_EQ_INT(get(&b, "/still").status, 200);
    pc_tls_reload_hook_remove(&hook_runs);
    CHECK_EQ_INT(pc_tls_reload_all(), 1);
    CHECK_EQ_INT(hook_runs, 2);
    cli_close(&a);
    cli_close(&b);
    srv_stop(&ts);
}

static void test_min_version(void)
{
    tsrv ts;
    pc_tls_server_cfg scfg = server_cfg("srv");
    scfg.min_version = 1; /* 1.3 */
    if (srv_start(&ts, &scfg)) return;
    tcli t;
    pc_tls_client_cfg c = {.ca_file = (char *)path_of("ca.crt"), .min_version = 1};
    if (cli_new(&t, "127.0.0.1", ts.h.port, &c)) return;
    CHECK_EQ_INT(get(&t, "/v13").status, 200);
    cli_close(&t);
    srv_stop(&ts);
}

static void test_auth_helpers(void)
{
    CHECK(pc_auth_equal("abc", 3, "abc", 3));
    CHECK(!pc_auth_equal("abc", 3, "abd", 3));
    CHECK(!pc_auth_equal("abc", 3, "abcd", 4));
    char *b = pc_base64_encode("user:pass", 9, true);
    CHECK_STR(b, "dXNlcjpwYXNz");
    size_t n = 0;
    unsigned char *d = pc_auth_unbase64(b, &n);
    CHECK_EQ_INT(n, 9);
    CHECK_STR((char *)d, "user:pass");
    free(d);
    free(b);
    d = pc_auth_unbase64("YQ==", &n);
    CHECK_EQ_INT(n, 1);
    free(d);
    CHECK(pc_auth_unbase64("!!!!", &n) == NULL);
    CHECK(pc_auth_unbase64("abc", &n) == NULL);
    write_text("token", "s3cret\n\n");
    pc_error e = {0};
    char *t = pc_auth_read_file(path_of("token"), 100, &e);
    CHECK_STR(t, "s3cret");
    free(t);
    CHECK(pc_auth_read_file(path_of("none"), 100, &e) == NULL);
    CHECK_CONTAINS(e.msg, "No such file");
}

int main(void)
{
    uv_loop_t l;
    loop = test_loop_open(&l);
    snprintf(dir, sizeof dir, "/tmp/profcol-tls-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    make_certs();
    RUN(test_server_ctx_errors);
    RUN(test_validate_paths);
    RUN(test_roundtrip_keepalive_big);
    RUN(test_untrusted_and_skip_verify);
    RUN(test_mutual_tls);
    RUN(test_reload);
    RUN(test_min_version);
    RUN(test_auth_helpers);
    int rc = test_loop_close(loop);
    remove_dir();
    return rc;
}
