/* Opening an HTTP exporter's client and reading its answers (see exporter_http.h). */
#include "sdk/exporter_http.h"

#include <string.h>

int pc_exporter_http_open(pc_component *c, const pc_url *u, int64_t max_connections,
                          const pc_tls_client_cfg *tls_cfg, const char *authenticator,
                          pc_http_client **client, pc_tls_ctx **tls, pc_auth **auth, pc_error *e)
{
    pc_http_client_opts o = {.host = u->host,
                             .port = u->port,
                             .max_connections = (unsigned)max_connections,
                             .log_id = c->id};
    if (authenticator && !(*auth = pc_host_authenticator(c, authenticator, false, e)))
        return PC_EINVAL;
    bool https = !strcmp(u->scheme, "https");
    if (https && tls_cfg->insecure)
        PC_WARN(c->id, "tls::insecure is set: sending plain text to an https:// endpoint");
    if (https && !tls_cfg->insecure) {
        *tls = pc_tls_client_ctx_new(tls_cfg, "http/1.1", c->id, e);
        if (!*tls) return e ? e->code : PC_EINVAL;
        o.tls = *tls;
    }
    *client = pc_http_client_new(c->loop, &o);
    return 0;
}

void pc_exporter_http_outcome(const pc_http_response *r, const pc_url *u, pc_export_outcome *o)
{
    if (r->error) {
        pc_export_outcome_set(o, PC_EAGAIN, "sending to %s:%d failed: %s", u->host, u->port,
                              r->error_msg ? r->error_msg : uv_strerror(r->error));
        return;
    }
    if (r->status >= 200 && r->status < 300) {
        *o = PC_EXPORT_OK;
        return;
    }
    int retryable = r->status == 429 || r->status == 502 || r->status == 503 || r->status == 504;
    pc_export_outcome_set(o, PC_EINVAL, "backend answered HTTP %d%s%.*s", r->status,
                          r->body_len ? ": " : "", (int)(r->body_len > 200 ? 200 : r->body_len),
                          r->body ? (const char *)r->body : "");
    for (char *p = o->msg; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' ';
    if (retryable) {
        o->st = r->status == 429 ? PC_EBUSY : PC_EAGAIN;
        o->retry_after_s = r->retry_after_s;
    }
}
