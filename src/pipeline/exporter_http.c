/* Opening an HTTP exporter's client (see exporter_http.h). */
#include "pipeline/exporter_http.h"

#include "pipeline/service.h"

#include <string.h>

int pc_exporter_http_open(pc_component *c, const pc_url *u, int64_t max_connections,
                          const pc_tls_client_cfg *tls_cfg, const char *authenticator,
                          pc_http_client **client, pc_tls_ctx **tls, pc_auth **auth, char *err,
                          size_t errlen)
{
    pc_http_client_opts o = {.host = u->host,
                             .port = u->port,
                             .max_connections = (unsigned)max_connections,
                             .log_id = c->id};
    if (authenticator &&
        !(*auth = pc_service_authenticator(c->host, authenticator, false, err, errlen)))
        return -1;
    bool https = !strcmp(u->scheme, "https");
    if (https && tls_cfg->insecure)
        PC_WARN(c->id, "tls::insecure is set: sending plain text to an https:// endpoint");
    if (https && !tls_cfg->insecure) {
        *tls = pc_tls_client_ctx_new(tls_cfg, "http/1.1", c->id, err, errlen);
        if (!*tls) return -1;
        o.tls = *tls;
    }
    *client = pc_http_client_new(c->loop, &o);
    return 0;
}
