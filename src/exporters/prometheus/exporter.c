/* Exporter "prometheus": keeps the metrics that reach it as Prometheus series and serves them on
 * GET /metrics for Prometheus to scrape (the Collector's prometheus exporter,
 * /work/shared/spec/metrics.md §2, §3).
 *
 * It is a pull exporter on the exporter core all the same: as a sink (no sending queue, nothing a
 * resend would mend), the core's encode step folds each batch into the accumulator on the thread
 * pool and send only reports the outcome; the core keeps the counting and the lifecycle, and its
 * start and close hooks open and shut the scrape server (the HTTP server settings every receiver
 * has, sdk/receiver_http.h). A scrape renders on the thread pool too; the accumulator's mutex
 * keeps the two apart. State is bounded: series expire after metric_expiration and at most
 * max_series are kept (new ones beyond are counted and dropped). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/gzip.h"
#include "base/log.h"
#include "exporters/prometheus/model.h"
#include "sdk/component.h"
#include "sdk/exporter.h"
#include "sdk/telemetry.h"

/* clang-format off */
static const pc_cfg_key prom_keys[] = {
    {"endpoint", PC_CFG_STRING, "localhost:8889", offsetof(prom_cfg, server.endpoint), "host:port to serve /metrics on (0.0.0.0 for all interfaces)", NULL},
    {"", PC_CFG_GROUP, "", offsetof(prom_cfg, server), "the HTTP server", pc_http_server_keys},
    {"namespace", PC_CFG_STRING, "", offsetof(prom_cfg, namespace_), "prefix of every metric name (<namespace>_)", NULL},
    {"const_labels", PC_CFG_MAP, "", offsetof(prom_cfg, const_labels), "labels added to every series", NULL},
    {"send_timestamps", PC_CFG_BOOL, "false", offsetof(prom_cfg, send_timestamps), "expose each sample with the time of its data point", NULL},
    {"metric_expiration", PC_CFG_DURATION, "5m", offsetof(prom_cfg, expiration_ms), "a series not updated for this long is no longer exposed", NULL},
    {"resource_to_telemetry_conversion.enabled", PC_CFG_BOOL, "false", offsetof(prom_cfg, resource_to_labels), "every resource attribute becomes a label of the resource's series", NULL},
    {"enable_open_metrics", PC_CFG_BOOL, "false", offsetof(prom_cfg, open_metrics), "answer in OpenMetrics 1.0 when the scraper accepts it (else text 0.0.4)", NULL},
    {"add_metric_suffixes", PC_CFG_BOOL, "true", offsetof(prom_cfg, suffixes), "append the unit, _total to monotonic sums and _ratio to gauges of unit 1", NULL},
    {"max_series", PC_CFG_INT, "100000", offsetof(prom_cfg, max_series), "most series kept; new series beyond are dropped and counted", NULL},
    {0},
};
/* clang-format on */

typedef struct prom {
    pc_exporter *e;
    prom_accum acc;
    pc_receiver_http http;
    pc_refused_requests refused;
    uint64_t series, dropped_series, dropped_points, scrapes;
} prom;

typedef struct prom_req {
    pc_export_req base;
    prom_tally t;
} prom_req;

static int prom_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    prom_cfg *cfg = cfgp;
    int rc = pc_http_server_cfg_validate(&cfg->server, node, path, "", err);
    if (rc < 0) return rc;
    if (cfg->expiration_ms == 0)
        return pc_cfg_key_errorf(err, node, path, "metric_expiration", "must be > 0");
    if (cfg->max_series <= 0)
        return pc_cfg_key_errorf(err, node, path, "max_series", "must be > 0");
    if (cfg->namespace_ && *cfg->namespace_ && !pc_prom_label_name_ok(cfg->namespace_))
        return pc_cfg_key_errorf(err, node, path, "namespace",
                                 "must be letters, digits and '_', not starting with a digit");
    for (size_t i = 0; i < cfg->const_labels.n; i++)
        if (!pc_prom_label_name_ok(cfg->const_labels.keys[i]))
            return pc_cfg_key_errorf(err, node, path, "const_labels", "invalid label name \"%s\"",
                                     cfg->const_labels.keys[i]);
    return 0;
}

/* ---- a scrape ---- */

typedef struct scrape {
    uv_work_t work;
    prom *p;
    pc_http_req *req;
    bool om, gzip;
    pc_buf out;
    prom_tally t;
} scrape;

static void scrape_run(uv_work_t *w)
{
    scrape *s = w->data;
    prom_accum_render(&s->p->acc, s->om, &s->out, &s->t);
    if (s->gzip && s->out.len) { /* Prometheus asks for it: text shrinks several times */
        pc_buf z = {0};
        pc_gzip_deflate(s->out.data, s->out.len, 1, &z);
        pc_buf_free(&s->out);
        s->out = z;
    }
}

static void scrape_done(uv_work_t *w, int status)
{
    (void)status;
    scrape *s = w->data;
    const char *ct = s->om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                           : "text/plain; version=0.0.4; charset=utf-8";
    s->p->series = s->t.series;
    s->p->scrapes++;
    bool z = s->gzip && s->out.len;
    pc_http_respond(s->req, 200, ct, s->out.data, s->out.len,
                    z ? "Content-Encoding: gzip\r\n" : NULL);
    pc_buf_free(&s->out);
    free(s);
}

/* OpenMetrics when enabled and the scraper lists it in Accept (Prometheus does by default). */
static bool wants_om(const prom_cfg *cfg, const pc_http_req *req)
{
    const char *accept = pc_http_req_header(req, "accept");
    return cfg->open_metrics && accept && strstr(accept, "application/openmetrics-text");
}

static void on_request(pc_http_req *req, void *arg)
{
    prom *p = arg;
    if (strcmp(req->path, "/metrics") != 0) {
        pc_http_respond(req, 404, "text/plain", "404 page not found\n", 19, NULL);
        return;
    }
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
        pc_http_respond(req, 405, "text/plain", "405 method not allowed\n", 23, "Allow: GET\r\n");
        return;
    }
    if (pc_receiver_http_authorize(&p->http, req) < 0) return;
    scrape *s = pc_xcalloc(1, sizeof *s);
    s->p = p;
    s->req = req;
    s->om = wants_om(p->e->c->cfg, req);
    const char *ae = pc_http_req_header(req, "accept-encoding");
    s->gzip = ae && strstr(ae, "gzip");
    s->work.data = s;
    uv_queue_work(p->e->c->loop, &s->work, scrape_run, scrape_done);
}

/* ---- the exporter core's hooks ---- */

static int prom_create(pc_exporter *e, pc_error *err)
{
    (void)err;
    prom *p = pc_xcalloc(1, sizeof *p);
    p->e = e;
    prom_accum_init(&p->acc, e->c->cfg);
    e->priv = p;
    char l[256];
    pc_exporter_labels(e->c, NULL, l, sizeof l);
    pc_metric_u64(e->c, "profcol_exporter_prometheus_series", "Series the exporter holds",
                  PC_METRIC_GAUGE, l, &p->series);
    pc_metric_u64(e->c, "profcol_exporter_prometheus_dropped_series",
                  "New series dropped because max_series were held", PC_METRIC_COUNTER, l,
                  &p->dropped_series);
    pc_metric_u64(e->c, "profcol_exporter_prometheus_dropped_points",
                  "Data points not kept: exponential histograms, delta up-down or unspecified "
                  "sums, out of order, a name of another type",
                  PC_METRIC_COUNTER, l, &p->dropped_points);
    pc_metric_u64(e->c, "profcol_exporter_prometheus_scrapes", "Scrapes answered",
                  PC_METRIC_COUNTER, l, &p->scrapes);
    return 0;
}

static int prom_start(pc_exporter *e, pc_error *err)
{
    prom *p = e->priv;
    const prom_cfg *cfg = e->c->cfg;
    p->http.refused = &p->refused;
    int rc = pc_receiver_http_start(&p->http, e->c, &cfg->server, on_request, p, err);
    if (rc < 0) return rc;
    PC_INFO(e->c->id, "serving metrics on %s://%s:%d/metrics", p->http.tls ? "https" : "http",
            p->http.host, p->http.port);
    return 0;
}

static void prom_encode(pc_export_req *r)
{
    prom *p = r->e->priv;
    prom_accum_add(&p->acc, r->batch, &((prom_req *)r)->t);
}

static void prom_send(pc_export_req *r)
{
    prom *p = r->e->priv;
    const prom_tally *t = &((prom_req *)r)->t;
    p->series = t->series;
    p->dropped_series += t->dropped_series;
    p->dropped_points += t->dropped_points;
    pc_export_done(r, &PC_EXPORT_OK);
}

static void server_closed(void *arg)
{
    pc_exporter_closed(arg);
}

static void prom_close(pc_exporter *e)
{
    prom *p = e->priv;
    if (!p) {
        pc_exporter_closed(e);
        return;
    }
    pc_receiver_http_shutdown(&p->http, server_closed, e);
}

static void prom_destroy(pc_exporter *e)
{
    prom *p = e->priv;
    if (!p) return;
    prom_accum_free(&p->acc);
    free(p);
}

static const pc_exporter_def prom_def = {
    .req_size = sizeof(prom_req),
    .sink = true,
    .create = prom_create,
    .start = prom_start,
    .encode = prom_encode,
    .send = prom_send,
    .close = prom_close,
    .destroy = prom_destroy,
};

const pc_component_type pc_exporter_prometheus = {
    .name = "prometheus",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .cfg_size = sizeof(prom_cfg),
    .cfg = prom_keys,
    .validate = prom_validate,
    PC_EXPORTER_CORE(&prom_def),
    .listens = true, /* a reload stops the old server before the new one binds */
    .signals = PC_SIGNAL_BIT(PC_SIGNAL_METRICS),
    .doc = "keeps the metrics that reach it as Prometheus series (cumulative; deltas added up) and "
           "serves them on GET /metrics, text 0.0.4 or OpenMetrics",
};
