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
    static const char m[] = "401 unauthorized: missing or invalid credentials\n";
    pc_http_respond(req, 401, "text/plain", m, sizeof m - 1, pc_auth_challenge(rh->auth));
    return PC_EAUTH;
}

void pc_receiver_http_free(pc_receiver_http *rh)
{
    pc_tls_ctx_free(rh->tls);
    rh->tls = NULL;
}

/* ---- the decode gate ---- */

typedef struct gate_item {
    uv_work_t *req;
    uv_work_cb work;
    uv_after_work_cb after;
    void *data; /* the caller's req->data; req->data points at the item while it runs */
} gate_item;

static struct { /* loop thread only */
    size_t running, limit;
    gate_item *q; /* a ring of waiting work */
    size_t head, n, cap;
} gate;

static void gate_next(uv_loop_t *loop);

static void gate_work(uv_work_t *req)
{
    gate_item *it = req->data;
    req->data = it->data;
    it->work(req);
    req->data = it;
}

static void gate_after(uv_work_t *req, int status)
{
    gate_item *it = req->data;
    uv_after_work_cb after = it->after;
    uv_loop_t *loop = req->loop;
    req->data = it->data;
    free(it);
    gate.running--;
    after(req, status); /* may free req */
    gate_next(loop);
}

static void gate_start(uv_loop_t *loop, gate_item g)
{
    gate_item *it = pc_xmalloc(sizeof *it);
    *it = g;
    it->data = g.req->data;
    g.req->data = it;
    gate.running++;
    uv_queue_work(loop, g.req, gate_work, gate_after);
}

static void gate_next(uv_loop_t *loop)
{
    while (gate.n && gate.running < gate.limit) {
        gate_item g = gate.q[gate.head];
        gate.head = (gate.head + 1) % gate.cap;
        gate.n--;
        gate_start(loop, g);
    }
}

void pc_decode_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work, uv_after_work_cb after)
{
    if (!gate.limit) { /* main.c sizes the pool through UV_THREADPOOL_SIZE before the loop runs */
        const char *env = getenv("UV_THREADPOOL_SIZE");
        long n = env ? strtol(env, NULL, 10) : 0;
        gate.limit = n > 0 && n < 1024 ? (size_t)n : 4; /* libuv's default */
    }
    gate_item g = {req, work, after, NULL};
    if (gate.running < gate.limit && !gate.n) {
        gate_start(loop, g);
        return;
    }
    if (gate.n == gate.cap) { /* grow the ring, keeping the order */
        size_t cap = gate.cap ? gate.cap * 2 : 64;
        gate_item *q = pc_xmalloc(cap * sizeof *q);
        for (size_t i = 0; i < gate.n; i++)
            q[i] = gate.q[(gate.head + i) % gate.cap];
        free(gate.q);
        gate.q = q;
        gate.head = 0;
        gate.cap = cap;
    }
    gate.q[(gate.head + gate.n++) % gate.cap] = g;
}
