/* The OTLP clients of the exporters on the exporter core (exporter.h): OTLP/gRPC (the `otlp`
 * exporter) and OTLP/HTTP (the `otlphttp` exporter), each written once and shared with the
 * `loadbalancing` exporter, whose `protocol: otlp:` and `protocol: otlphttp:` blocks are exactly
 * those exporters' settings (the same config-table entries at another prefix) and which opens one
 * client per backend.
 *
 * For each protocol: the settings struct and its config-table entries, their validation, the
 * encode step (thread pool) and one endpoint's client: open (in start), send (on the loop; calls
 * pc_export_done with the outcome the OTLP spec gives the answer), close. */
#ifndef PC_OTLP_CLIENT_H
#define PC_OTLP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "net/http_client.h"
#include "net/tls.h"
#include "net/url.h"
#include "sdk/auth.h"
#include "sdk/exporter.h"
#include "sdk/exporter_http.h"
#include "sdk/sender.h"
#include "sdk/tls_config.h"

extern const char *const pc_otlp_compressions[]; /* "gzip", "none", "zstd" */
extern const char *const pc_otlp_encodings[];    /* "proto", "json" */

/* ---- OTLP/gRPC ---- */

typedef struct pc_otlp_grpc_cfg {
    char *endpoint;
    pc_strmap headers;
    int compression; /* pc_otlp_compressions: 0 gzip, 1 none, 2 zstd */
    bool passthrough;
    uint64_t timeout_ms;
    pc_tls_client_cfg tls;
    char *authenticator;
    pc_sender_cfg sender;
} pc_otlp_grpc_cfg;

/* The otlp exporter's config-table group (sdk/cfgtable.h), relative to a pc_otlp_grpc_cfg. */
extern const pc_cfg_key pc_otlp_grpc_keys[];

/* Check the settings at prefix. with_endpoint: endpoint is required; otherwise it must not be
 * set (the loadbalancing exporter's resolver names the endpoints). PC_EINVAL with err. */
int pc_otlp_grpc_validate(const pc_otlp_grpc_cfg *cfg, const pc_node *node, const char *path,
                          const char *prefix, bool with_endpoint, pc_error *err);
/* An endpoint the client can call: host:port, http://host:port or https://host:port.
 * 0, or PC_EINVAL with e. */
int pc_otlp_grpc_endpoint_check(const char *endpoint, pc_error *e);

/* Thread pool: r->batch as one framed (and compressed, unless compression is none) gRPC message
 * in r->body; with passthrough, the bytes it was received as when they fit. */
void pc_otlp_grpc_encode(const pc_otlp_grpc_cfg *cfg, pc_export_req *r);

/* The calls to one endpoint. */
typedef struct pc_otlp_grpc pc_otlp_grpc;
/* In start: a client of endpoint (checked) with cfg's settings (which must outlive it): TLS
 * unless tls::insecure or an http:// endpoint, as the Collector's configgrpc; the authenticator's
 * metadata with every call. Logs where it sends. NULL with err (TLS files, authenticator). */
pc_otlp_grpc *pc_otlp_grpc_open(pc_component *c, const pc_otlp_grpc_cfg *cfg, const char *endpoint,
                                pc_error *err);
/* Loop: call Export with r->body; pc_export_done(r, outcome) once answered. */
void pc_otlp_grpc_send(pc_otlp_grpc *g, pc_export_req *r);
/* Fail queued calls, wait for those in flight, free g, then call done (NULL g: done at once). */
void pc_otlp_grpc_close(pc_otlp_grpc *g, void (*done)(void *arg), void *arg);

/* ---- OTLP/HTTP ---- */

typedef struct pc_otlp_http_cfg {
    char *endpoint;
    char *signal_endpoint[PC_SIGNAL_COUNT]; /* profiles_endpoint, traces_endpoint, ... */
    int compression;                        /* pc_otlp_compressions: 0 gzip, 1 none, 2 zstd */
    int64_t compression_level;
    bool passthrough;
    int encoding;              /* 0 proto, 1 json */
    pc_http_client_cfg client; /* headers, timeout, max_connections, tls, auth */
    pc_sender_cfg sender;
} pc_otlp_http_cfg;

/* clang-format off */

/* The otlphttp exporter's config-table group (sdk/cfgtable.h), relative to a pc_otlp_http_cfg. */
extern const pc_cfg_key pc_otlp_http_keys[];

/* Check the settings at prefix. with_endpoint: endpoint or a <signal>_endpoint is required;
 * otherwise none may be set (the loadbalancing exporter's resolver names the endpoints).
 * PC_EINVAL with err. */
int pc_otlp_http_validate(const pc_otlp_http_cfg *cfg, const pc_node *node, const char *path,
                          const char *prefix, bool with_endpoint, pc_error *err);
/* The "Name: value\r\n" lines every request carries (content type and encoding, user agent,
 * the configured headers); malloc'd. */
char *pc_otlp_http_headers(const pc_otlp_http_cfg *cfg);
/* Thread pool: r->batch encoded (protobuf or JSON) and compressed into r->body; with
 * passthrough, the bytes it was received as when they fit. */
void pc_otlp_http_encode(const pc_otlp_http_cfg *cfg, pc_export_req *r);
/* Loop: whether pc_otlp_http_encode would only copy the bytes as received, and they are few
 * enough for the loop (encode_is_copy). */
bool pc_otlp_http_encode_is_copy(const pc_otlp_http_cfg *cfg, const pc_export_req *r);

/* One origin (scheme, host, port) and its keep-alive client. */
typedef struct pc_otlp_http {
    pc_url url; /* the origin; path unused */
    pc_http_client *client;
    pc_tls_ctx *tls;  /* NULL: plain text */
    pc_auth *auth;    /* NULL: no authenticator */
    const char *hdrs; /* pc_otlp_http_headers, borrowed */
    const pc_otlp_http_cfg *cfg;
    void (*closed)(void *arg); /* pc_otlp_http_close's */
    void *closed_arg;
} pc_otlp_http;

/* In start: a client of u's origin with cfg's settings (TLS for https:// unless tls::insecure).
 * hdrs (borrowed) are pc_otlp_http_headers(cfg). 0, or PC_EINVAL with err. */
int pc_otlp_http_open(pc_component *c, const pc_otlp_http_cfg *cfg, const pc_url *u,
                      const char *hdrs, pc_otlp_http *h, pc_error *err);
/* Loop: POST r->body to path; pc_export_done(r, outcome) once answered (a partial success in a
 * 2xx answer is read). */
void pc_otlp_http_send(pc_otlp_http *h, const char *path, pc_export_req *r);
/* Fail queued requests, wait for those in flight, close, then call done (no client: at once);
 * frees the TLS context. h itself is the caller's. */
void pc_otlp_http_close(pc_otlp_http *h, void (*done)(void *arg), void *arg);

#endif
