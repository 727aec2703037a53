/* TLS for the one HTTP server and client (ARCHITECTURE.md §6), with OpenSSL on memory BIOs: the
 * sockets stay libuv's; ciphertext read from the socket is fed in, plaintext comes out, and
 * ciphertext to send is taken out and written with uv_write. Nothing here blocks or touches a
 * socket.
 *
 * Contexts (pc_tls_ctx) are built from a Collector-style `tls:` config block, kept in a
 * registry, and rebuilt from their files by pc_tls_reload_all() (SIGHUP): new connections use
 * the new certificates; a reload that fails keeps the old context and logs why. Loop thread only.
 */
#ifndef PC_TLS_H
#define PC_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

/* `tls:` of a server (receivers, extensions). TLS is on when cert_file is set. */
typedef struct pc_tls_server_cfg {
    char *cert_file;
    char *key_file;
    char *client_ca_file; /* mutual TLS: clients must present a certificate signed by these */
    int min_version;      /* index into pc_tls_versions */
} pc_tls_server_cfg;

/* `tls:` of a client (exporters). TLS is on for https:// endpoints unless insecure. */
typedef struct pc_tls_client_cfg {
    bool insecure; /* plain text even for https:// (as the Collector's `insecure: true`) */
    bool insecure_skip_verify;
    char *ca_file;              /* NULL: the system trust store */
    char *cert_file, *key_file; /* client certificate for mutual TLS */
    char *server_name_override;
    int min_version;
} pc_tls_client_cfg;

extern const char *const pc_tls_versions[]; /* "1.2", "1.3" */

static inline bool pc_tls_server_enabled(const pc_tls_server_cfg *cfg)
{
    return cfg->cert_file != NULL;
}

/* Check that a block's files load and match, as a context would be built from them: 0, or a
 * PC_E* code (PC_ENOENT or PC_EIO for a file that cannot be read, PC_EINVAL for one that is not
 * usable or a missing key) with a reason in e and the key at fault ("cert_file", "key_file",
 * "client_ca_file", "ca_file", "server_name_override") in *bad_key. Used when the config is
 * validated. */
int pc_tls_server_check(const pc_tls_server_cfg *cfg, const char **bad_key, pc_error *e);
int pc_tls_client_check(const pc_tls_client_cfg *cfg, const char **bad_key, pc_error *e);

typedef struct pc_tls_ctx pc_tls_ctx;

/* A server context for cfg (which must be enabled). alpn: the protocol to select when the client
 * offers ALPN ("http/1.1"; "h2" for an HTTP/2 server); a client offering only others proceeds
 * without ALPN. NULL with the code and a reason in e. */
pc_tls_ctx *pc_tls_server_ctx_new(const pc_tls_server_cfg *cfg, const char *alpn,
                                  const char *log_id, pc_error *e);
/* A client context; alpn: the protocol offered ("http/1.1", "h2"), or NULL. */
pc_tls_ctx *pc_tls_client_ctx_new(const pc_tls_client_cfg *cfg, const char *alpn,
                                  const char *log_id, pc_error *e);
void pc_tls_ctx_free(pc_tls_ctx *ctx);
/* Re-read this context's files; on failure keep the old one. 0, or a PC_E* code with a reason
 * in e. */
int pc_tls_ctx_reload(pc_tls_ctx *ctx, pc_error *e);
/* Reload every live context and run the reload hooks; logs each outcome. Returns the number of
 * failures. */
int pc_tls_reload_all(void);
/* Other file-backed credentials (bearer token files, htpasswd) reload with the certificates:
 * fn(arg) runs on every pc_tls_reload_all(). remove drops every hook with that arg. */
void pc_tls_reload_hook_add(void (*fn)(void *arg), void *arg);
void pc_tls_reload_hook_remove(void *arg);

/* ---- one connection: the BIO pump ---- */

typedef struct pc_tls_conn pc_tls_conn;

/* A connection on ctx. Client side: host is the endpoint host, used for SNI (names only) and
 * for verifying the certificate (names and IP addresses) unless the context overrides it. */
pc_tls_conn *pc_tls_conn_new(pc_tls_ctx *ctx, const char *host);
void pc_tls_conn_free(pc_tls_conn *t);

/* Failures are PC_EPROTO with why in e: "certificate verify failed (unable to get local issuer
 * certificate)". */

/* Ciphertext received from the socket. */
void pc_tls_conn_feed(pc_tls_conn *t, const void *data, size_t n);
/* Advance the handshake: 0 when complete, PC_EAGAIN when it needs more input (send the output
 * first), PC_EPROTO when it failed. */
int pc_tls_conn_handshake(pc_tls_conn *t, pc_error *e);
bool pc_tls_conn_established(const pc_tls_conn *t);
/* Decrypt everything available, appending plaintext to out: 0 (maybe nothing new), PC_ECLOSED
 * when the peer sent close_notify, PC_EPROTO. */
int pc_tls_conn_read(pc_tls_conn *t, pc_buf *out, pc_error *e);
/* Encrypt plaintext (after the handshake); the ciphertext waits in the output. 0 or PC_EPROTO. */
int pc_tls_conn_write(pc_tls_conn *t, const void *data, size_t n, pc_error *e);
/* Queue a close_notify alert in the output. */
void pc_tls_conn_shutdown(pc_tls_conn *t);
/* Bytes waiting to be sent. */
size_t pc_tls_conn_pending(const pc_tls_conn *t);
/* Move up to cap bytes of the ciphertext waiting to be sent to dst; returns how many. */
size_t pc_tls_conn_take(pc_tls_conn *t, void *dst, size_t cap);
/* The negotiated ALPN protocol, "" if none. */
const char *pc_tls_conn_alpn(const pc_tls_conn *t);

#endif
