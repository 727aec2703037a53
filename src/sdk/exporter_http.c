/* Opening an HTTP exporter's client and reading its answers (see exporter_http.h). */
#include "sdk/exporter_http.h"

#include <stdio.h>
#include <string.h>

/* prefix + key into buf (the key path of a setting at prefix). */
static const char *pkey(char *buf, size_t n, const char *prefix, const char *key)
{
    snprintf(buf, n, "%s%s", prefix, key);
    return buf;
}

int pc_http_client_validate(const pc_http_client_cfg *cfg, const pc_node *node, const char *path,
                            const char *prefix, pc_error *err)
{
    char k[160];
    if (pc_tls_client_validate(&cfg->tls, node, path, prefix, err)) return PC_EINVAL;
    for (size_t i = 0; i < cfg->headers.n; i++)
        if (!pc_http_header_safe(cfg->headers.keys[i]) ||
            !pc_http_header_safe(cfg->headers.vals[i]))
            return pc_cfg_key_errorf(err, node, path, pkey(k, sizeof k, prefix, "headers"),
                                     "%s: line breaks are not allowed", cfg->headers.keys[i]);
    if (cfg->timeout_ms == 0)
        return pc_cfg_key_errorf(err, node, path, pkey(k, sizeof k, prefix, "timeout"),
                                 "must be > 0");
    if (cfg->max_connections < 0)
        return pc_cfg_key_errorf(err, node, path, pkey(k, sizeof k, prefix, "max_connections"),
                                 "must be >= 0");
    return 0;
}

int pc_exporter_http_open(pc_component *c, const pc_url *u, const pc_http_client_cfg *cfg,
                          const pc_sender_cfg *sender, pc_http_client **client, pc_tls_ctx **tls,
                          pc_auth **auth, pc_error *e)
{
    const pc_tls_client_cfg *tls_cfg = &cfg->tls;
    /* 0: a connection for each request the sender may have in flight, so that no consumer waits
     * for a connection (a lower cap left 2 of the 10 default consumers idle, bench/README.md
     * "Small requests, fourth pass") */
    int64_t conns = cfg->max_connections ? cfg->max_connections : sender->num_consumers;
    pc_http_client_opts o = {
        .host = u->host, .port = u->port, .max_connections = (unsigned)conns, .log_id = c->id};
    if (cfg->authenticator && !(*auth = pc_host_authenticator(c, cfg->authenticator, false, e)))
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

/* Config-table groups (sdk/cfgtable.h): keys and offsets relative to their struct. */
/* clang-format off */
const pc_cfg_key pc_http_client_keys[] = {
    {"headers", PC_CFG_MAP, "", offsetof(pc_http_client_cfg, headers), "extra request headers", NULL},
    {"timeout", PC_CFG_DURATION, "30s", offsetof(pc_http_client_cfg, timeout_ms), "time allowed for one request (connect, send, response)", NULL},
    {"max_connections", PC_CFG_INT, "0", offsetof(pc_http_client_cfg, max_connections), "keep-alive connections to the endpoint, at most (0: one for each of sending_queue::num_consumers, the most requests in flight)", NULL},
    {"", PC_CFG_GROUP, "", offsetof(pc_http_client_cfg, tls), "TLS of a client", pc_tls_client_keys},
    {"auth.authenticator", PC_CFG_STRING, "", offsetof(pc_http_client_cfg, authenticator), "id of an authenticator extension (bearertokenauth, basicauth with client_auth) whose credentials are added to every request", NULL},
    {0},
};
/* clang-format on */
