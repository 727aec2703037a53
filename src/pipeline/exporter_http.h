/* The HTTP side every HTTP exporter opens the same way: a keep-alive client to the endpoint,
 * TLS for https:// (unless tls::insecure), and the auth extension named by auth::authenticator. */
#ifndef PC_EXPORTER_HTTP_H
#define PC_EXPORTER_HTTP_H

#include "pipeline/auth.h"
#include "net/http_client.h"
#include "net/tls.h"
#include "net/url.h"
#include "pipeline/component.h"

/* In start(): fills *client, *tls (NULL for plain text; the caller frees it with
 * pc_tls_ctx_free in destroy) and *auth (NULL without an authenticator). -1 with err when the
 * authenticator or the TLS files cannot be used. */
int pc_exporter_http_open(pc_component *c, const pc_url *u, int64_t max_connections,
                          const pc_tls_client_cfg *tls_cfg, const char *authenticator,
                          pc_http_client **client, pc_tls_ctx **tls, pc_auth **auth, char *err,
                          size_t errlen);

#endif
