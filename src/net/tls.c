/* TLS contexts, their registry and reload, and the memory-BIO pump (see tls.h).
 *
 * Each SSL reads ciphertext from an in-memory BIO we fill from libuv reads, and writes ciphertext
 * to another we drain into uv_write buffers, so OpenSSL never sees a socket and never blocks.
 * An SSL holds its own reference to the SSL_CTX it was made from: a reload swaps the context
 * for new connections while existing ones finish on the old one. */
#include "net/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/alloc.h"
#include "base/log.h"

const char *const pc_tls_versions[] = {"1.2", "1.3", NULL};

struct pc_tls_ctx {
    SSL_CTX *ssl_ctx;
    bool server;
    char *log_id;
    char *cert_file, *key_file, *ca_file; /* server: ca_file is client_ca_file */
    char *server_name;                    /* client: server_name_override */
    bool skip_verify;
    int min_version;
    unsigned char alpn[32]; /* wire format: length-prefixed protocol names */
    size_t alpn_len;
    pc_tls_ctx *prev, *next; /* registry */
};

struct pc_tls_conn {
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    bool established;
};

static pc_tls_ctx *g_ctxs;

typedef struct hook {
    void (*fn)(void *);
    void *arg;
} hook;
static hook *g_hooks;
static size_t g_n_hooks;

/* ---- errors ---- */

/* The most specific reason in OpenSSL's error queue (the earliest), and clear the queue. */
static void ssl_reason(char *out, size_t n, const char *fallback)
{
    unsigned long e, first = 0;
    while ((e = ERR_get_error()) != 0)
        if (!first) first = e;
    const char *r = first ? ERR_reason_error_string(first) : NULL;
    if (r)
        snprintf(out, n, "%s", r);
    else if (first)
        ERR_error_string_n(first, out, n);
    else
        snprintf(out, n, "%s", fallback);
}

/* ---- building contexts ---- */

enum { BAD_NONE, BAD_CERT, BAD_KEY, BAD_CA };

static int readable(const char *what, const char *file, pc_error *e)
{
    if (access(file, R_OK) == 0) return PC_OK;
    return pc_error_set(e, errno == ENOENT ? PC_ENOENT : PC_EIO, "%s \"%s\": %s", what, file,
                        strerror(errno));
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    (void)ssl;
    pc_tls_ctx *t = arg;
    unsigned char *sel = NULL;
    if (t->alpn_len && SSL_select_next_proto(&sel, outlen, t->alpn, (unsigned)t->alpn_len, in,
                                             inlen) == OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK; /* proceed without ALPN rather than refuse */
}

static void set_alpn(pc_tls_ctx *t, const char *alpn)
{
    size_t n = alpn ? strlen(alpn) : 0;
    if (n == 0 || n + 1 > sizeof t->alpn) return;
    t->alpn[0] = (unsigned char)n;
    memcpy(t->alpn + 1, alpn, n);
    t->alpn_len = n + 1;
}

/* t's certificate chain and its private key into ctx. 0, or PC_EINVAL with why (*bad: which
 * file). */
static int load_cert_key(SSL_CTX *ctx, const pc_tls_ctx *t, int *bad, pc_error *e)
{
    char r[200];
    if (SSL_CTX_use_certificate_chain_file(ctx, t->cert_file) != 1) {
        ssl_reason(r, sizeof r, "cannot load");
        pc_error_set(e, PC_EINVAL, "cert_file \"%s\": not a usable PEM certificate: %s",
                     t->cert_file, r);
        *bad = BAD_CERT;
        return PC_EINVAL;
    }
    int loaded = SSL_CTX_use_PrivateKey_file(ctx, t->key_file, SSL_FILETYPE_PEM) == 1;
    if (!loaded) ssl_reason(r, sizeof r, "cannot load");
    if (!loaded && !strstr(r, "mismatch")) {
        pc_error_set(e, PC_EINVAL, "key_file \"%s\": not a usable PEM private key: %s", t->key_file,
                     r);
        *bad = BAD_KEY;
        return PC_EINVAL;
    }
    if (!loaded || SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        pc_error_set(e, PC_EINVAL, "key_file \"%s\" does not match the certificate in \"%s\"",
                     t->key_file, t->cert_file);
        *bad = BAD_KEY;
        return PC_EINVAL;
    }
    return 0;
}

/* A fresh SSL_CTX from t's settings and files. NULL with a reason; *bad says which file. */
static SSL_CTX *build(const pc_tls_ctx *t, int *bad, pc_error *e)
{
    *bad = BAD_NONE;
    ERR_clear_error();
    if (t->cert_file && readable("cert_file", t->cert_file, e)) {
        *bad = BAD_CERT;
        return NULL;
    }
    if (t->key_file && readable("key_file", t->key_file, e)) {
        *bad = BAD_KEY;
        return NULL;
    }
    const char *ca_what = t->server ? "client_ca_file" : "ca_file";
    if (t->ca_file && readable(ca_what, t->ca_file, e)) {
        *bad = BAD_CA;
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(t->server ? TLS_server_method() : TLS_client_method());
    if (!ctx) {
        char r[200];
        ssl_reason(r, sizeof r, "out of memory");
        pc_error_set(e, PC_EIO, "cannot create TLS context: %s", r);
        return NULL;
    }
    char r[200];
    SSL_CTX_set_min_proto_version(ctx, t->min_version == 1 ? TLS1_3_VERSION : TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    /* idle keep-alive connections give their record buffers back */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (t->cert_file && load_cert_key(ctx, t, bad, e) < 0) goto fail;
    if (t->ca_file) {
        if (SSL_CTX_load_verify_locations(ctx, t->ca_file, NULL) != 1) {
            ssl_reason(r, sizeof r, "no certificates in it");
            pc_error_set(e, PC_EINVAL, "%s \"%s\": not usable PEM CA certificates: %s", ca_what,
                         t->ca_file, r);
            *bad = BAD_CA;
            goto fail;
        }
    }
    if (t->server) {
        static const unsigned char sid[] = "profcol";
        SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
        if (t->ca_file) {
            STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(t->ca_file);
            if (names) SSL_CTX_set_client_CA_list(ctx, names);
            ERR_clear_error();
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        }
        SSL_CTX_set_alpn_select_cb(ctx, alpn_select, (void *)t);
    } else {
        if (!t->ca_file && SSL_CTX_set_default_verify_paths(ctx) != 1) ERR_clear_error();
        SSL_CTX_set_verify(ctx, t->skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
        if (t->alpn_len) SSL_CTX_set_alpn_protos(ctx, t->alpn, (unsigned)t->alpn_len);
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

static char *dup_or_null(const char *s)
{
    return s ? pc_xstrdup(s) : NULL;
}

static void ctx_destroy(pc_tls_ctx *t)
{
    if (t->ssl_ctx) SSL_CTX_free(t->ssl_ctx);
    free(t->log_id);
    free(t->cert_file);
    free(t->key_file);
    free(t->ca_file);
    free(t->server_name);
    free(t);
}

static pc_tls_ctx *ctx_finish(pc_tls_ctx *t, pc_error *e)
{
    int bad;
    t->ssl_ctx = build(t, &bad, e);
    if (!t->ssl_ctx) {
        ctx_destroy(t);
        return NULL;
    }
    t->next = g_ctxs;
    if (g_ctxs) g_ctxs->prev = t;
    g_ctxs = t;
    return t;
}

static pc_tls_ctx *server_ctx_alloc(const pc_tls_server_cfg *cfg, const char *alpn,
                                    const char *log_id)
{
    pc_tls_ctx *t = pc_xcalloc(1, sizeof *t);
    t->server = true;
    t->log_id = pc_xstrdup(log_id ? log_id : "tls");
    t->cert_file = dup_or_null(cfg->cert_file);
    t->key_file = dup_or_null(cfg->key_file);
    t->ca_file = dup_or_null(cfg->client_ca_file);
    t->min_version = cfg->min_version;
    set_alpn(t, alpn);
    return t;
}

static pc_tls_ctx *client_ctx_alloc(const pc_tls_client_cfg *cfg, const char *alpn,
                                    const char *log_id)
{
    pc_tls_ctx *t = pc_xcalloc(1, sizeof *t);
    t->log_id = pc_xstrdup(log_id ? log_id : "tls");
    t->cert_file = dup_or_null(cfg->cert_file);
    t->key_file = dup_or_null(cfg->key_file);
    t->ca_file = dup_or_null(cfg->ca_file);
    t->server_name = dup_or_null(cfg->server_name_override);
    t->skip_verify = cfg->insecure_skip_verify;
    t->min_version = cfg->min_version;
    set_alpn(t, alpn);
    return t;
}

pc_tls_ctx *pc_tls_server_ctx_new(const pc_tls_server_cfg *cfg, const char *alpn,
                                  const char *log_id, pc_error *e)
{
    if (!cfg->cert_file || !cfg->key_file) {
        pc_error_set(e, PC_EINVAL, "TLS needs both cert_file and key_file");
        return NULL;
    }
    return ctx_finish(server_ctx_alloc(cfg, alpn, log_id), e);
}

pc_tls_ctx *pc_tls_client_ctx_new(const pc_tls_client_cfg *cfg, const char *alpn,
                                  const char *log_id, pc_error *e)
{
    if (!cfg->cert_file != !cfg->key_file) {
        pc_error_set(e, PC_EINVAL, "a client certificate needs both cert_file and key_file");
        return NULL;
    }
    return ctx_finish(client_ctx_alloc(cfg, alpn, log_id), e);
}

void pc_tls_ctx_free(pc_tls_ctx *t)
{
    if (!t) return;
    if (t->prev)
        t->prev->next = t->next;
    else if (g_ctxs == t)
        g_ctxs = t->next;
    if (t->next) t->next->prev = t->prev;
    ctx_destroy(t);
}

int pc_tls_ctx_reload(pc_tls_ctx *t, pc_error *e)
{
    int bad;
    pc_error own = {0}; /* build's code, also when the caller passed no e */
    if (!e) e = &own;
    SSL_CTX *fresh = build(t, &bad, e);
    if (!fresh) return e->code;
    SSL_CTX_free(t->ssl_ctx); /* live connections keep their own reference */
    t->ssl_ctx = fresh;
    return PC_OK;
}

int pc_tls_reload_all(void)
{
    int failed = 0;
    for (pc_tls_ctx *t = g_ctxs; t; t = t->next) {
        pc_error e = {0};
        if (pc_tls_ctx_reload(t, &e) < 0) {
            failed++;
            PC_ERROR(t->log_id, "TLS reload failed, keeping the previous certificates: %s", e.msg);
        } else {
            PC_INFO(t->log_id, "TLS certificates reloaded%s%s", t->cert_file ? " from " : "",
                    t->cert_file ? t->cert_file : "");
        }
    }
    for (size_t i = 0; i < g_n_hooks; i++)
        g_hooks[i].fn(g_hooks[i].arg);
    return failed;
}

void pc_tls_reload_hook_add(void (*fn)(void *arg), void *arg)
{
    g_hooks = pc_xrealloc(g_hooks, (g_n_hooks + 1) * sizeof *g_hooks);
    g_hooks[g_n_hooks++] = (hook){fn, arg};
}

void pc_tls_reload_hook_remove(void *arg)
{
    size_t j = 0;
    for (size_t i = 0; i < g_n_hooks; i++)
        if (g_hooks[i].arg != arg) g_hooks[j++] = g_hooks[i];
    g_n_hooks = j;
    if (j == 0) {
        free(g_hooks);
        g_hooks = NULL;
    }
}

/* ---- validation (config time) ---- */

static int check_built(pc_tls_ctx *t, const char **bad_key, pc_error *e)
{
    int which;
    pc_error own = {0}; /* build's code, also when the caller passed no e */
    if (!e) e = &own;
    SSL_CTX *ctx = build(t, &which, e);
    *bad_key = which == BAD_CERT  ? "cert_file"
               : which == BAD_KEY ? "key_file"
               : which == BAD_CA  ? (t->server ? "client_ca_file" : "ca_file")
                                  : "cert_file";
    ctx_destroy(t);
    if (ctx) {
        SSL_CTX_free(ctx);
        return PC_OK;
    }
    return e->code;
}

static int bad_key_is(const char **bad_key, const char *key, pc_error *e, const char *msg)
{
    *bad_key = key;
    return pc_error_set(e, PC_EINVAL, "%s", msg);
}

int pc_tls_server_check(const pc_tls_server_cfg *cfg, const char **bad_key, pc_error *e)
{
    if (!cfg->cert_file) {
        if (cfg->key_file || cfg->client_ca_file)
            return bad_key_is(bad_key, "cert_file", e,
                              "required when key_file or client_ca_file is set");
        return PC_OK;
    }
    if (!cfg->key_file) return bad_key_is(bad_key, "key_file", e, "required with cert_file");
    return check_built(server_ctx_alloc(cfg, NULL, NULL), bad_key, e);
}

int pc_tls_client_check(const pc_tls_client_cfg *cfg, const char **bad_key, pc_error *e)
{
    if (cfg->cert_file && !cfg->key_file)
        return bad_key_is(bad_key, "key_file", e, "required with cert_file");
    if (cfg->key_file && !cfg->cert_file)
        return bad_key_is(bad_key, "cert_file", e, "required with key_file");
    if (cfg->server_name_override && !*cfg->server_name_override)
        return bad_key_is(bad_key, "server_name_override", e, "must not be empty");
    if (cfg->insecure) return PC_OK; /* plain text: the files are not used */
    /* no file to check: nothing a context built now could refuse, and building one at start
     * maps 4 MB of libcrypto that an http:// endpoint never uses (idle RSS, bench/README.md) */
    if (!cfg->cert_file && !cfg->ca_file) return PC_OK;
    return check_built(client_ctx_alloc(cfg, NULL, NULL), bad_key, e);
}

/* ---- connections ---- */

static bool is_ip(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

pc_tls_conn *pc_tls_conn_new(pc_tls_ctx *ctx, const char *host)
{
    pc_tls_conn *t = pc_xcalloc(1, sizeof *t);
    t->ssl = SSL_new(ctx->ssl_ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) abort(); /* out of memory, as pc_xmalloc does */
    BIO_set_mem_eof_return(t->rbio, -1);          /* empty means "want more", not EOF */
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    if (ctx->server) {
        SSL_set_accept_state(t->ssl);
        return t;
    }
    SSL_set_connect_state(t->ssl);
    const char *name = ctx->server_name ? ctx->server_name : host;
    if (name && *name) {
        bool ip = is_ip(name);
        if (!ip) SSL_set_tlsext_host_name(t->ssl, name);
        if (!ctx->skip_verify) {
            X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
            X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            if (ip)
                X509_VERIFY_PARAM_set1_ip_asc(vp, name);
            else
                X509_VERIFY_PARAM_set1_host(vp, name, 0);
        }
    }
    return t;
}

void pc_tls_conn_free(pc_tls_conn *t)
{
    if (!t) return;
    SSL_free(t->ssl); /* frees both BIOs */
    free(t);
}

void pc_tls_conn_feed(pc_tls_conn *t, const void *data, size_t n)
{
    if (n) BIO_write(t->rbio, data, (int)n); /* reads are at most 64 KiB */
}

/* Why an SSL call failed: the queue's reason, with the verification result when a certificate
 * was refused. Returns PC_EPROTO. */
static int conn_error(pc_tls_conn *t, int ssl_err, pc_error *e)
{
    char r[200];
    if (ssl_err == SSL_ERROR_SYSCALL || ssl_err == SSL_ERROR_ZERO_RETURN)
        ssl_reason(r, sizeof r, "connection closed during the TLS exchange");
    else
        ssl_reason(r, sizeof r, "TLS protocol error");
    long v = SSL_get_verify_result(t->ssl);
    if (v != X509_V_OK && strstr(r, "certificate verify failed"))
        return pc_error_set(e, PC_EPROTO, "%s (%s)", r, X509_verify_cert_error_string(v));
    return pc_error_set(e, PC_EPROTO, "%s", r);
}

int pc_tls_conn_handshake(pc_tls_conn *t, pc_error *e)
{
    if (t->established) return PC_OK;
    ERR_clear_error();
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1) {
        t->established = true;
        return PC_OK;
    }
    int se = SSL_get_error(t->ssl, rc);
    if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE) return PC_EAGAIN;
    return conn_error(t, se, e);
}

bool pc_tls_conn_established(const pc_tls_conn *t)
{
    return t->established;
}

int pc_tls_conn_read(pc_tls_conn *t, pc_buf *out, pc_error *e)
{
    for (;;) {
        pc_buf_reserve(out, 16384 + 1);
        ERR_clear_error();
        size_t room = out->cap - out->len - 1;
        int n = SSL_read(t->ssl, out->data + out->len, room > INT32_MAX ? INT32_MAX : (int)room);
        if (n > 0) {
            out->len += (size_t)n;
            out->data[out->len] = 0;
            continue;
        }
        int se = SSL_get_error(t->ssl, n);
        if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE) return PC_OK;
        if (se == SSL_ERROR_ZERO_RETURN) return PC_ECLOSED;
        return conn_error(t, se, e);
    }
}

int pc_tls_conn_write(pc_tls_conn *t, const void *data, size_t n, pc_error *e)
{
    const char *p = data;
    while (n > 0) {
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        ERR_clear_error();
        int w = SSL_write(t->ssl, p, chunk); /* a memory BIO takes it all */
        if (w <= 0) return conn_error(t, SSL_get_error(t->ssl, w), e);
        p += w;
        n -= (size_t)w;
    }
    return PC_OK;
}

void pc_tls_conn_shutdown(pc_tls_conn *t)
{
    ERR_clear_error();
    if (t->established) SSL_shutdown(t->ssl);
    ERR_clear_error();
}

size_t pc_tls_conn_pending(const pc_tls_conn *t)
{
    return BIO_ctrl_pending(t->wbio);
}

size_t pc_tls_conn_take(pc_tls_conn *t, void *dst, size_t cap)
{
    if (!cap) return 0;
    int got = BIO_read(t->wbio, dst, cap > INT32_MAX ? INT32_MAX : (int)cap);
    return got > 0 ? (size_t)got : 0;
}

const char *pc_tls_conn_alpn(const pc_tls_conn *t)
{
    static char buf[32];
    const unsigned char *p = NULL;
    unsigned n = 0;
    SSL_get0_alpn_selected(t->ssl, &p, &n);
    if (!p || n >= sizeof buf) return "";
    memcpy(buf, p, n);
    buf[n] = 0;
    return buf;
}
