/* The HTTP side of the exporters on the exporter core (exporter.h) that speak HTTP/1.1: a
 * keep-alive client to the endpoint, TLS for https:// (unless tls::insecure), the auth extension
 * named by auth::authenticator, and the one reading of an HTTP answer as a send outcome. */
#ifndef PC_EXPORTER_HTTP_H
#define PC_EXPORTER_HTTP_H

#include "net/http_client.h"
#include "net/tls.h"
#include "net/url.h"
#include "sdk/auth.h"
#include "sdk/cfgtable.h"
#include "sdk/component.h"
#include "sdk/exporter.h"
#include "sdk/sender.h"
#include "sdk/tls_config.h"

/* The client settings every HTTP exporter takes, under the same keys (the Collector's confighttp
 * client): extra headers, the time for one request, keep-alive connections, TLS and the auth
 * extension. */
typedef struct pc_http_client_cfg {
    pc_strmap headers;
    uint64_t timeout_ms;
    int64_t max_connections;
    pc_tls_client_cfg tls;
    char *authenticator;
} pc_http_client_cfg;

/* Their config-table group (sdk/cfgtable.h), relative to a pc_http_client_cfg. */
extern const pc_cfg_key pc_http_client_keys[];

/* Check them: headers without line breaks, timeout above 0, max_connections not negative, the TLS
 * files.
 * PC_EINVAL with err at the key. */
int pc_http_client_validate(const pc_http_client_cfg *cfg, const pc_node *node, const char *path,
                            const char *prefix, pc_error *err);

/* In start(): fills *client, *tls (NULL for plain text; the caller frees it with
 * pc_tls_ctx_free in destroy) and *auth (NULL without an authenticator) from cfg; with
 * max_connections 0, the client keeps one connection for each of the sender's consumers.
 * PC_EINVAL with e when the authenticator or the TLS files cannot be used. */
int pc_exporter_http_open(pc_component *c, const pc_url *u, const pc_http_client_cfg *cfg,
                          const pc_sender_cfg *sender, pc_http_client **client, pc_tls_ctx **tls,
                          pc_auth **auth, pc_error *e);

/* The outcome of one request to u, as the OTLP/HTTP spec classifies it: 2xx OK; 429 (overload),
 * 502, 503, 504 and network errors retryable, with the server's Retry-After; any other status
 * permanent. The message names the status and the start of the body, or the network error. */
void pc_exporter_http_outcome(const pc_http_response *r, const pc_url *u, pc_export_outcome *o);

#endif
