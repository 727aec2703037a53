/* Extension "health_check": GET <path> answers 200 with the JSON status of every component while
 * the service runs, 503 while it starts, stops or failed (load balancers and Kubernetes probes). */
#include <stdlib.h>
#include <string.h>

#include "net/http_server.h"
#include "net/tls.h"
#include "sdk/tls_config.h"
#include "net/url.h"
#include "sdk/component.h"

typedef struct health_cfg {
    char *endpoint;
    char *path;
    pc_tls_server_cfg tls;
} health_cfg;

/* clang-format off */
static const pc_cfg_key health_keys[] = {
    {"endpoint", PC_CFG_STRING, "localhost:13133", offsetof(health_cfg, endpoint), "host:port to listen on", NULL},
    {"path", PC_CFG_STRING, "/", offsetof(health_cfg, path), "path of the status", NULL},
    {"", PC_CFG_GROUP, "", offsetof(health_cfg, tls), "TLS of a server", pc_tls_server_keys},
    {0},
};
/* clang-format on */

typedef struct health {
    pc_component *c;
    pc_http_server *srv;
    pc_tls_ctx *tls;
    pc_shutdown_done done;
} health;

static int health_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    health_cfg *cfg = cfgp;
    char host[256];
    pc_error e = {0};
    int port;
    if (pc_hostport_parse(cfg->endpoint, host, sizeof host, &port, &e) < 0)
        return pc_cfg_key_errorf(err, node, path, "endpoint", "%s", e.msg);
    if (!cfg->path || cfg->path[0] != '/')
        return pc_cfg_key_errorf(err, node, path, "path", "must start with '/'");
    return pc_tls_server_validate(&cfg->tls, node, path, "", err);
}

static void on_request(pc_http_req *req, void *arg)
{
    health *h = arg;
    health_cfg *cfg = h->c->cfg;
    if (strcmp(req->path, cfg->path) != 0) {
        pc_http_respond(req, 404, "text/plain", "404 page not found\n", 19, NULL);
        return;
    }
    pc_buf b = {0};
    int ok = pc_host_status_json(h->c, &b);
    pc_http_respond(req, ok ? 200 : 503, "application/json", b.data, b.len, NULL);
    pc_buf_free(&b);
}

static int health_start(pc_component *c, pc_error *err)
{
    health_cfg *cfg = c->cfg;
    health *h = pc_xcalloc(1, sizeof(*h));
    char host[256];
    int port;
    c->priv = h;
    h->c = c;
    pc_hostport_parse(cfg->endpoint, host, sizeof host, &port, NULL);
    pc_http_server_opts o = pc_http_server_small_opts(host, port, c->id);
    if (pc_tls_server_enabled(&cfg->tls)) {
        h->tls = pc_tls_server_ctx_new(&cfg->tls, "http/1.1", c->id, err);
        if (!h->tls) return err ? err->code : PC_EINVAL;
        o.tls = h->tls;
    }
    h->srv = pc_http_server_new(c->loop, &o, on_request, h);
    int rc = pc_http_server_start(h->srv, err);
    if (rc < 0) return rc;
    PC_INFO(c->id, "health on %s://%s:%d%s", h->tls ? "https" : "http", host,
            pc_http_server_port(h->srv), cfg->path);
    return 0;
}

static void closed(void *arg)
{
    pc_component *c = arg;
    health *h = c->priv;
    h->srv = NULL;
    h->done(c);
}

static void health_shutdown(pc_component *c, pc_shutdown_done done)
{
    health *h = c->priv;
    if (!h || !h->srv) {
        done(c);
        return;
    }
    h->done = done;
    pc_http_server_shutdown(h->srv, closed, c);
}

static void health_destroy(pc_component *c)
{
    health *h = c->priv;
    if (h) pc_tls_ctx_free(h->tls);
    free(c->priv);
}

const pc_component_type pc_extension_health_check = {
    .name = "health_check",
    .kind = PC_KIND_EXTENSION,
    .stability = "alpha",
    .cfg_size = sizeof(health_cfg),
    .cfg = health_keys,
    .validate = health_validate,
    .start = health_start,
    .shutdown = health_shutdown,
    .destroy = health_destroy,
    .doc = "HTTP health endpoint: 200 with every component's status while running, else 503",
};
