/* Configuring and starting a receiver's HTTP server (see receiver_http.h). */
#include "sdk/receiver_http.h"

#include <stdio.h>
#include <stdlib.h>

#include "net/url.h"
#include "sdk/telemetry.h"
#include "sdk/tls_config.h"

int pc_http_server_cfg_validate(const pc_http_server_cfg *cfg, const pc_node *node,
                                const char *path, const char *prefix, pc_error *err)
{
    char host[256], key[128];
    pc_error e = {0};
    int port;
    if (pc_hostport_parse(cfg->endpoint, host, sizeof host, &port, &e) < 0) {
        snprintf(key, sizeof key, "%sendpoint", prefix);
        return pc_cfg_key_errorf(err, node, path, key, "%s", e.msg);
    }
    if (cfg->max_body == 0) {
        snprintf(key, sizeof key, "%smax_request_body_size", prefix);
        return pc_cfg_key_errorf(err, node, path, key, "must be > 0");
    }
    if (cfg->max_connections <= 0) {
        snprintf(key, sizeof key, "%smax_connections", prefix);
        return pc_cfg_key_errorf(err, node, path, key, "must be > 0");
    }
    return pc_tls_server_validate(&cfg->tls, node, path, prefix, err);
}

int pc_receiver_http_start(pc_receiver_http *rh, pc_component *c, const pc_http_server_cfg *cfg,
                           pc_http_handler handler, void *arg, pc_error *e)
{
    int rc = pc_hostport_parse(cfg->endpoint, rh->host, sizeof rh->host, &rh->port, e);
    if (rc < 0) return rc;
    pc_http_server_opts o = {
        .host = rh->host,
        .port = rh->port,
        .max_body_bytes = cfg->max_body,
        .max_header_bytes = 64 * 1024,
        .read_timeout_ms = (unsigned)cfg->read_timeout_ms,
        /* 0 means read_timeout, as Go's http.Server (the Collector's) has it */
        .read_header_timeout_ms =
            (unsigned)(cfg->read_header_timeout_ms ? cfg->read_header_timeout_ms
                                                   : cfg->read_timeout_ms),
        .idle_timeout_ms = (unsigned)cfg->idle_timeout_ms,
        .max_connections = (unsigned)cfg->max_connections,
        .log_id = c->id,
        .stats = &rh->conns,
        /* refused before the handler sees them (Content-Length, header size): counted too */
        .too_large = rh->refused ? &rh->refused->n[PC_REFUSED_TOO_LARGE] : NULL,
    };
    if (cfg->authenticator && !(rh->auth = pc_host_authenticator(c, cfg->authenticator, true, e)))
        return PC_EINVAL;
    if (pc_tls_server_enabled(&cfg->tls)) {
        rh->tls = pc_tls_server_ctx_new(&cfg->tls, "http/1.1", c->id, e);
        if (!rh->tls) return e ? e->code : PC_EINVAL;
        o.tls = rh->tls;
    }
    rh->srv = pc_http_server_new(c->loop, &o, handler, arg);
    rc = pc_http_server_start(rh->srv, e);
    if (rc < 0) return rc;
    rh->port = pc_http_server_port(rh->srv);
    pc_receiver_register_conn_metrics(c, "http", &rh->conns);
    return 0;
}

int pc_receiver_http_authorize(const pc_receiver_http *rh, pc_http_req *req)
{
    if (!rh->auth || !pc_auth_check(rh->auth, req)) return 0;
    if (rh->refused) rh->refused->n[PC_REFUSED_UNAUTHORIZED]++;
    static const char m[] = "401 unauthorized: missing or invalid credentials\n";
    pc_http_respond(req, 401, "text/plain", m, sizeof m - 1, pc_auth_challenge(rh->auth));
    return PC_EAUTH;
}

static void server_closed(void *arg)
{
    pc_receiver_http *rh = arg;
    rh->srv = NULL;
    pc_tls_ctx_free(rh->tls); /* the server borrowed it until now */
    rh->tls = NULL;
    rh->closed(rh->closed_arg);
}

void pc_receiver_http_shutdown(pc_receiver_http *rh, void (*closed)(void *arg), void *arg)
{
    rh->closed = closed;
    rh->closed_arg = arg;
    if (rh->srv)
        pc_http_server_shutdown(rh->srv, server_closed, rh);
    else
        server_closed(rh);
}

/* Config-table groups (sdk/cfgtable.h): keys and offsets relative to their struct. */
/* clang-format off */
const pc_cfg_key pc_http_server_keys[] = {
    {"max_request_body_size", PC_CFG_SIZE, "20MiB", offsetof(pc_http_server_cfg, max_body), "largest request body, before and after decompression (413 above)", NULL},
    {"max_request_decoded_size", PC_CFG_SIZE, "0", offsetof(pc_http_server_cfg, max_decoded), "most memory one request may take decoded, counted before decoding (413 above; 0: 16 x max_request_body_size)", NULL},
    {"read_timeout", PC_CFG_DURATION, "30s", offsetof(pc_http_server_cfg, read_timeout_ms), "a request must arrive whole within this time (408 otherwise)", NULL},
    {"read_header_timeout", PC_CFG_DURATION, "10s", offsetof(pc_http_server_cfg, read_header_timeout_ms), "a request's line and headers must arrive within this time (408 otherwise; 0: read_timeout)", NULL},
    {"idle_timeout", PC_CFG_DURATION, "60s", offsetof(pc_http_server_cfg, idle_timeout_ms), "close keep-alive connections idle this long", NULL},
    {"max_connections", PC_CFG_INT, "1024", offsetof(pc_http_server_cfg, max_connections), "concurrent connections; at the limit the connection idle or incomplete longest makes room, and 503 only when every one has a request being handled", NULL},
    {"", PC_CFG_GROUP, "", offsetof(pc_http_server_cfg, tls), "TLS of a server", pc_tls_server_keys},
    {"auth.authenticator", PC_CFG_STRING, "", offsetof(pc_http_server_cfg, authenticator), "id of an authenticator extension (bearertokenauth, basicauth with htpasswd): requests without valid credentials get 401", NULL},
    {0},
};
/* clang-format on */
