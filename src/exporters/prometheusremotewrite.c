/* Exporter "prometheusremotewrite": metrics pushed with Prometheus remote write 1.0
 * (/work/shared/spec/metrics.md §4, §5): each batch becomes one WriteRequest (protobuf, written
 * here field by field: four small messages) compressed with snappy's block format (Debian's
 * libsnappy-dev), POSTed with Content-Encoding: snappy, Content-Type: application/x-protobuf and
 * X-Prometheus-Remote-Write-Version: 0.1.0. On the exporter core: the sending queue, retries
 * (5xx, 429 with Retry-After; other statuses are permanent), counting.
 *
 * As the Collector's exporter: gauges, cumulative sums (monotonic ones as counters with _total,
 * the others as gauges), cumulative histograms (_bucket{le}, _sum, _count) and summaries are
 * sent; delta sums and histograms and exponential histograms are dropped (and counted): remote
 * write carries cumulative series only. Names and labels are formats/prom.h's (as the prometheus
 * exporter's); a point flagged NoRecordedValue is sent as the stale marker. */
#include <inttypes.h>
#include <math.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/alloc.h"
#include "base/dynlib.h"
#include "base/log.h"
#include "formats/prom.h"
#include "net/url.h"
#include "pdata/proto_pack.h"
#include "sdk/component.h"
#include "sdk/exporter.h"
#include "sdk/exporter_http.h"
#include "sdk/telemetry.h"

typedef struct prw_cfg {
    char *endpoint;
    pc_http_client_cfg client;
    pc_sender_cfg sender;
    char *namespace_;
    pc_strmap external_labels;
    bool suffixes;
    bool resource_to_labels;
    bool target_info;
    uint64_t max_bytes;
} prw_cfg;

/* clang-format off */
static const pc_cfg_key prw_keys[] = {
    {"endpoint", PC_CFG_STRING, "", offsetof(prw_cfg, endpoint), "remote write URL, e.g. http://prometheus:9090/api/v1/write", NULL},
    {"", PC_CFG_GROUP, "", offsetof(prw_cfg, client), "the HTTP client", pc_http_client_keys},
    {"", PC_CFG_GROUP, "", offsetof(prw_cfg, sender), "the sending queue and retries (num_consumers: 1 unless set, so that a series' samples arrive in order)", pc_sender_keys},
    {"namespace", PC_CFG_STRING, "", offsetof(prw_cfg, namespace_), "prefix of every metric name (<namespace>_)", NULL},
    {"external_labels", PC_CFG_MAP, "", offsetof(prw_cfg, external_labels), "labels added to every series", NULL},
    {"add_metric_suffixes", PC_CFG_BOOL, "true", offsetof(prw_cfg, suffixes), "append the unit, _total to monotonic sums and _ratio to gauges of unit 1", NULL},
    {"resource_to_telemetry_conversion.enabled", PC_CFG_BOOL, "false", offsetof(prw_cfg, resource_to_labels), "every resource attribute becomes a label of the resource's series", NULL},
    {"max_batch_size_bytes", PC_CFG_SIZE, "3000000", offsetof(prw_cfg, max_bytes), "largest WriteRequest before compression: a batch above it goes as several requests, one after another", NULL},
    {"target_info.enabled", PC_CFG_BOOL, "true", offsetof(prw_cfg, target_info), "send target_info{job, instance, resource attributes} 1 per resource", NULL},
    {0},
};
/* clang-format on */

/* The stale marker (spec §5): a NaN reserved for it. */
#define STALE_NAN_BITS 0x7ff0000000000002ULL
#define NO_RECORD      1u

typedef Opentelemetry__Proto__Metrics__V1__Metric metric_t;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint number_t;
typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint histo_t;
typedef Opentelemetry__Proto__Metrics__V1__SummaryDataPoint summary_t;

#define CUMUL                                                                                      \
    OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE

/* snappy's C API, loaded at create (base/dynlib.h: libsnappy brings the C++ runtime) */
typedef struct snappy_api {
    size_t (*max_compressed_length)(size_t source_length);
    snappy_status (*compress)(const char *input, size_t input_length, char *compressed,
                              size_t *compressed_length);
} snappy_api;

typedef struct prw {
    snappy_api snappy;
    pc_url url;
    char *headers; /* fixed "Name: value\r\n" lines */
    pc_http_client *client;
    pc_tls_ctx *tls;
    pc_auth *auth;
    uint64_t dropped_points;
} prw;

typedef struct prw_req {
    pc_export_req base;
    uint64_t dropped_points;
    pc_buf *parts; /* the compressed WriteRequests, sent one after another */
    size_t n_parts, next;
    pc_export_outcome acc;
} prw_req;

static int prw_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    prw_cfg *cfg = cfgp;
    pc_url u;
    pc_error e = {0};
    if (!cfg->endpoint || !*cfg->endpoint)
        return pc_cfg_key_errorf(err, node, path, "endpoint", "is required");
    if (pc_url_parse(cfg->endpoint, &u, &e) < 0)
        return pc_cfg_key_errorf(err, node, path, "endpoint", "%s", e.msg);
    if (pc_http_client_validate(&cfg->client, node, path, "", err)) return PC_EINVAL;
    static const char *const fixed[] = {"content-encoding", "content-type",
                                        "x-prometheus-remote-write-version", "user-agent"};
    for (size_t i = 0; i < cfg->client.headers.n; i++)
        for (size_t k = 0; k < sizeof fixed / sizeof *fixed; k++)
            if (strcasecmp(cfg->client.headers.keys[i], fixed[k]) == 0)
                return pc_cfg_key_errorf(err, node, path, "headers",
                                         "%s is set by the exporter (remote write 1.0)",
                                         cfg->client.headers.keys[i]);
    for (size_t i = 0; i < cfg->external_labels.n; i++)
        if (!pc_prom_label_name_ok(cfg->external_labels.keys[i]) || !*cfg->external_labels.vals[i])
            return pc_cfg_key_errorf(err, node, path, "external_labels",
                                     "\"%s\": a label name ([A-Za-z_][A-Za-z0-9_]*, not __) with "
                                     "a value that is not empty",
                                     cfg->external_labels.keys[i]);
    if (cfg->namespace_ && *cfg->namespace_ && !pc_prom_label_name_ok(cfg->namespace_))
        return pc_cfg_key_errorf(err, node, path, "namespace",
                                 "must be letters, digits and '_', not starting with a digit");
    /* samples of one series must arrive in time order (Prometheus refuses the rest with 400):
     * one request at a time unless the config asks otherwise */
    if (!pc_node_get(pc_node_get(node, "sending_queue"), "num_consumers"))
        cfg->sender.num_consumers = 1;
    return pc_sender_validate(&cfg->sender, node, path, err);
}

/* ---- protobuf, by hand (spec §5) ---- */

static void put_bytes(pc_buf *b, unsigned field, const void *p, size_t n)
{
    pc_proto_buf_varint(b, (uint64_t)field << 3 | 2);
    pc_proto_buf_varint(b, n);
    pc_buf_append(b, p, n);
}

/* Label{name = 1, value = 2} */
static void put_label(pc_buf *ts, const char *name, const char *value)
{
    pc_buf l = {0};
    put_bytes(&l, 1, name, strlen(name));
    put_bytes(&l, 2, value, strlen(value));
    put_bytes(ts, 1, l.data, l.len);
    pc_buf_free(&l);
}

typedef struct enc {
    const prw_cfg *cfg;
    const snappy_api *snappy;
    prw_req *r;
    pc_buf wr;
    const pc_prom_labels *base;
    int64_t now_ms;
} enc;

/* The WriteRequest so far as one more part (snappy block), and a new one begun. */
static void flush(enc *e)
{
    if (!e->wr.len) return;
    prw_req *r = e->r;
    r->parts = pc_xrealloc(r->parts, (r->n_parts + 1) * sizeof *r->parts);
    pc_buf *b = &r->parts[r->n_parts];
    *b = (pc_buf){0};
    size_t n = e->snappy->max_compressed_length(e->wr.len);
    pc_buf_reserve(b, n);
    if (e->snappy->compress((const char *)e->wr.data, e->wr.len, (char *)b->data, &n) ==
        SNAPPY_OK) {
        b->len = n;
        r->n_parts++;
    } else {
        pc_buf_free(b);
    }
    e->wr.len = 0;
}

/* One TimeSeries{labels = 1, samples = 2} of one Sample{value = 1 (double), timestamp = 2 (ms)}
 * into the WriteRequest (timeseries = 1). l: sorted; name goes in as __name__ at its place. */
static void put_series(enc *e, const pc_prom_labels *l, const char *name, const char *extra_k,
                       const char *extra_v, double v, int64_t ts_ms)
{
    pc_prom_labels all;
    pc_prom_labels_copy(&all, l, 2);
    all.names[all.n] = pc_xstrdup("__name__"); /* not sanitised: Prometheus' own */
    all.vals[all.n++] = pc_xstrdup(name);
    if (extra_k) {
        all.names[all.n] = pc_xstrdup(extra_k);
        all.vals[all.n++] = pc_xstrdup(extra_v);
    }
    pc_prom_labels_sort(&all);
    pc_buf ts = {0}, val = {0};
    for (size_t i = 0; i < all.n; i++) {
        if (i + 1 < all.n && strcmp(all.names[i], all.names[i + 1]) == 0) { /* join, as text */
            size_t a = strlen(all.vals[i]), b = strlen(all.vals[i + 1]);
            char *j = pc_xmalloc(a + b + 2);
            memcpy(j, all.vals[i], a);
            j[a] = ';';
            memcpy(j + a + 1, all.vals[i + 1], b + 1);
            free(all.vals[i + 1]);
            all.vals[i + 1] = j;
            continue;
        }
        put_label(&ts, all.names[i], all.vals[i]);
    }
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint8_t le[9] = {1 << 3 | 1};
    for (int k = 0; k < 8; k++)
        le[1 + k] = (uint8_t)(bits >> (8 * k));
    pc_buf_append(&val, le, sizeof le);
    pc_proto_buf_varint(&val, 2 << 3 | 0);
    pc_proto_buf_varint(&val, (uint64_t)ts_ms);
    put_bytes(&ts, 2, val.data, val.len);
    if (e->wr.len + ts.len + 16 > e->cfg->max_bytes) flush(e);
    put_bytes(&e->wr, 1, ts.data, ts.len);
    pc_buf_free(&ts);
    pc_buf_free(&val);
    pc_prom_labels_free(&all);
}

/* ---- a batch to a WriteRequest (thread pool) ---- */

static int64_t ms_of(const enc *e, uint64_t ns)
{
    return ns ? (int64_t)(ns / 1000000) : e->now_ms;
}

static double value_of(double v, uint32_t flags)
{
    if (flags & NO_RECORD) {
        uint64_t bits = STALE_NAN_BITS;
        memcpy(&v, &bits, sizeof v);
    }
    return v;
}

static void point_labels(const enc *e, pc_keyvalue *const *kv, size_t n, pc_prom_labels *l)
{
    pc_prom_labels_copy(l, e->base, n);
    pc_prom_labels_add_attrs(l, kv, n);
    pc_prom_labels_sort(l);
}

static void put_numbers(enc *e, const char *name, number_t *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!p[i]) continue;
        pc_prom_labels l;
        point_labels(e, p[i]->attributes, p[i]->n_attributes, &l);
        double v =
            p[i]->value_case == OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT
                ? (double)p[i]->as_int
                : p[i]->as_double;
        put_series(e, &l, name, NULL, NULL, value_of(v, p[i]->flags),
                   ms_of(e, p[i]->time_unix_nano));
        pc_prom_labels_free(&l);
    }
}

/* <name>_sum and <name>_count of a histogram or summary point; frees l. */
static void put_sum_count(enc *e, pc_prom_labels *l, const char *name, double sum, uint64_t count,
                          uint32_t flags, int64_t ts)
{
    size_t len = strlen(name);
    char *n = pc_xmalloc(len + 8);
    snprintf(n, len + 8, "%s_sum", name);
    put_series(e, l, n, NULL, NULL, value_of(sum, flags), ts);
    snprintf(n, len + 8, "%s_count", name);
    put_series(e, l, n, NULL, NULL, value_of((double)count, flags), ts);
    free(n);
    pc_prom_labels_free(l);
}

static void put_histogram(enc *e, const char *name, const histo_t *p)
{
    if (p->n_bucket_counts && p->n_bucket_counts != p->n_explicit_bounds + 1) {
        e->r->dropped_points++;
        return;
    }
    pc_prom_labels l;
    point_labels(e, p->attributes, p->n_attributes, &l);
    int64_t ts = ms_of(e, p->time_unix_nano);
    size_t len = strlen(name);
    char *n = pc_xmalloc(len + 8), le[64];
    uint64_t cum = 0;
    snprintf(n, len + 8, "%s_bucket", name);
    for (size_t i = 0; i < p->n_explicit_bounds; i++) {
        cum += i < p->n_bucket_counts ? p->bucket_counts[i] : 0;
        pc_prom_fmt_double(le, sizeof le, p->explicit_bounds[i]);
        put_series(e, &l, n, "le", le, value_of((double)cum, p->flags), ts);
    }
    put_series(e, &l, n, "le", "+Inf", value_of((double)p->count, p->flags), ts);
    free(n);
    put_sum_count(e, &l, name, p->sum, p->count, p->flags, ts);
}

static void put_summary(enc *e, const char *name, const summary_t *p)
{
    pc_prom_labels l;
    point_labels(e, p->attributes, p->n_attributes, &l);
    int64_t ts = ms_of(e, p->time_unix_nano);
    char q[64];
    for (size_t i = 0; i < p->n_quantile_values; i++) {
        if (!p->quantile_values[i]) continue;
        pc_prom_fmt_double(q, sizeof q, p->quantile_values[i]->quantile);
        put_series(e, &l, name, "quantile", q, value_of(p->quantile_values[i]->value, p->flags),
                   ts);
    }
    put_sum_count(e, &l, name, p->sum, p->count, p->flags, ts);
}

/* The exposed type, or false: the metric is not sent (delta, exponential histogram). */
static bool metric_type(const metric_t *m, pc_prom_type *type, size_t *points)
{
    switch (m->data_case) {
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE: *type = PC_PROM_GAUGE; return true;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM:
        *type = m->sum->is_monotonic ? PC_PROM_COUNTER : PC_PROM_GAUGE;
        *points = m->sum->n_data_points;
        return m->sum->aggregation_temporality == CUMUL;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM:
        *type = PC_PROM_HISTOGRAM;
        *points = m->histogram->n_data_points;
        return m->histogram->aggregation_temporality == CUMUL;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY:
        *type = PC_PROM_SUMMARY;
        return true;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_EXPONENTIAL_HISTOGRAM:
        *points = m->exponential_histogram->n_data_points;
        return false;
    default: return false;
    }
}

static void put_metric(enc *e, const metric_t *m)
{
    pc_prom_type type;
    size_t points = 0;
    if (!metric_type(m, &type, &points)) {
        e->r->dropped_points += points;
        return;
    }
    bool gauge = m->data_case == OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE;
    char *name = pc_prom_metric_name(e->cfg->namespace_, e->cfg->suffixes, pc_nz(m->name),
                                     pc_nz(m->unit), type, gauge);
    if (!*name) {
        e->r->dropped_points++;
    } else if (gauge) {
        put_numbers(e, name, m->gauge->data_points, m->gauge->n_data_points);
    } else if (m->data_case == OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM) {
        put_numbers(e, name, m->sum->data_points, m->sum->n_data_points);
    } else if (type == PC_PROM_HISTOGRAM) {
        for (size_t i = 0; i < m->histogram->n_data_points; i++)
            if (m->histogram->data_points[i]) put_histogram(e, name, m->histogram->data_points[i]);
    } else {
        for (size_t i = 0; i < m->summary->n_data_points; i++)
            if (m->summary->data_points[i]) put_summary(e, name, m->summary->data_points[i]);
    }
    free(name);
}

static void put_target_info(enc *e, const pc_resource *r)
{
    pc_prom_labels l = {0};
    size_t others = 0;
    for (size_t i = 0; r && i < r->n_attributes; i++)
        if (r->attributes[i] && r->attributes[i]->key &&
            !pc_prom_is_service_key(r->attributes[i]->key)) {
            pc_prom_labels_add_attrs(&l, &r->attributes[i], 1);
            others++;
        }
    if (others) {
        pc_prom_job_instance(r, &l);
        for (size_t i = 0; i < e->cfg->external_labels.n; i++)
            pc_prom_labels_add(&l, e->cfg->external_labels.keys[i],
                               e->cfg->external_labels.vals[i]);
        pc_prom_labels_sort(&l);
        put_series(e, &l, "target_info", NULL, NULL, 1, e->now_ms);
    }
    pc_prom_labels_free(&l);
}

static void put_scope_metric(const metric_t *m, pc_prom_labels *l, void *arg)
{
    enc *e = arg;
    e->base = l;
    put_metric(e, m);
}

static void put_resource(enc *e, const Opentelemetry__Proto__Metrics__V1__ResourceMetrics *rm)
{
    const pc_strmap *xl = &e->cfg->external_labels;
    if (e->cfg->target_info) put_target_info(e, rm->resource);
    pc_prom_each_metric(rm, xl->keys, xl->vals, xl->n, e->cfg->resource_to_labels, put_scope_metric,
                        e);
}

/* The batch as snappy-compressed WriteRequests of at most max_batch_size_bytes (none: nothing
 * to send). */
static void prw_encode(pc_export_req *r)
{
    const pc_metrics_request *req = (const pc_metrics_request *)r->batch->msg;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    const prw *x = r->e->priv;
    enc e = {.cfg = r->e->c->cfg, .snappy = &x->snappy, .r = (prw_req *)r};
    e.now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    for (size_t i = 0; req && i < req->n_resource_metrics; i++)
        if (req->resource_metrics[i]) put_resource(&e, req->resource_metrics[i]);
    flush(&e);
    pc_buf_free(&e.wr);
}

static void prw_release(pc_export_req *r)
{
    prw_req *q = (prw_req *)r;
    for (size_t i = 0; i < q->n_parts; i++)
        pc_buf_free(&q->parts[i]);
    free(q->parts);
    q->parts = NULL;
    q->n_parts = 0;
}

/* ---- sending (loop) ---- */

static void post_part(prw_req *q);

/* The attempt's outcome. What encode dropped is counted once: by the attempt that is not retried
 * (each attempt encodes the batch anew). */
static void finish(prw_req *q)
{
    prw *x = q->base.e->priv;
    if (q->acc.st != PC_EAGAIN && q->acc.st != PC_EBUSY) x->dropped_points += q->dropped_points;
    pc_export_done(&q->base, &q->acc);
}

/* A part's answer: the next part, or the request's outcome (the first failure ends it). */
static void on_response(const pc_http_response *resp, void *arg)
{
    prw_req *q = arg;
    prw *x = q->base.e->priv;
    pc_export_outcome o;
    pc_exporter_http_outcome(resp, &x->url, &o);
    if (resp->status >= 500 && o.st == PC_EINVAL) o.st = PC_EAGAIN; /* spec §5: retry 5xx */
    pc_export_outcome_merge(&q->acc, &o);
    if (q->acc.st == PC_OK && ++q->next < q->n_parts)
        post_part(q);
    else
        finish(q);
}

static void post_part(prw_req *q)
{
    prw *x = q->base.e->priv;
    const prw_cfg *cfg = q->base.e->c->cfg;
    pc_buf h = {0};
    pc_buf_printf(&h, "%s", x->headers);
    if (x->auth) pc_auth_headers(x->auth, &h);
    pc_buf_append(&h, "", 1);
    const pc_buf *b = &q->parts[q->next];
    pc_http_client_request(x->client, "POST", x->url.path[0] ? x->url.path : "/",
                           (const char *)h.data, b->data, b->len, (unsigned)cfg->client.timeout_ms,
                           on_response, q);
    pc_buf_free(&h);
}

/* One attempt: every part in order (a retry sends them all again: samples Prometheus already
 * has are the same samples, which it takes again without complaint). */
static void prw_send(pc_export_req *r)
{
    prw_req *q = (prw_req *)r;
    q->acc = PC_EXPORT_OK;
    q->next = 0;
    if (!q->n_parts)
        finish(q);
    else
        post_part(q);
}

/* ---- lifecycle ---- */

static int prw_create(pc_exporter *e, pc_error *err)
{
    const prw_cfg *cfg = e->c->cfg;
    static const char *const names[] = {"snappy_max_compressed_length", "snappy_compress"};
    snappy_api api;
    void *fns[2];
    int rc = pc_dynlib_load("libsnappy.so.1", "libsnappy1v5", names, fns, 2, err);
    if (rc) return rc;
    /* a function pointer travels through void * here as dlsym(3) documents */
    memcpy(&api.max_compressed_length, &fns[0], sizeof fns[0]);
    memcpy(&api.compress, &fns[1], sizeof fns[1]);
    prw *x = pc_xcalloc(1, sizeof *x);
    x->snappy = api;
    e->priv = x;
    pc_url_parse(cfg->endpoint, &x->url, NULL);
    pc_buf h = {0};
    pc_buf_printf(&h,
                  "Content-Encoding: snappy\r\nContent-Type: application/x-protobuf\r\n"
                  "X-Prometheus-Remote-Write-Version: 0.1.0\r\nUser-Agent: profcol/%s\r\n",
                  PROFCOL_VERSION);
    for (size_t i = 0; i < cfg->client.headers.n; i++)
        pc_buf_printf(&h, "%s: %s\r\n", cfg->client.headers.keys[i], cfg->client.headers.vals[i]);
    pc_buf_append(&h, "", 1);
    x->headers = (char *)h.data;
    char l[256];
    pc_exporter_labels(e->c, NULL, l, sizeof l);
    pc_metric_u64(e->c, "profcol_exporter_prometheusremotewrite_dropped_points",
                  "Data points not sent: delta sums and histograms, exponential histograms, "
                  "histograms whose buckets do not match their bounds, nameless metrics",
                  PC_METRIC_COUNTER, l, &x->dropped_points);
    return 0;
}

static int prw_start(pc_exporter *e, pc_error *err)
{
    prw *x = e->priv;
    const prw_cfg *cfg = e->c->cfg;
    int rc = pc_exporter_http_open(e->c, &x->url, &cfg->client, &cfg->sender, &x->client, &x->tls,
                                   &x->auth, err);
    if (rc < 0) return rc;
    PC_INFO(e->c->id, "remote write to %s://%s:%d%s", x->tls ? "https" : "http", x->url.host,
            x->url.port, x->url.path);
    return 0;
}

static void prw_close(pc_exporter *e)
{
    prw *x = e->priv;
    pc_http_client *cl = x ? x->client : NULL;
    if (x) x->client = NULL;
    if (cl)
        pc_http_client_close(cl, pc_exporter_closed, e);
    else
        pc_exporter_closed(e);
}

static void prw_destroy(pc_exporter *e)
{
    prw *x = e->priv;
    if (!x) return;
    pc_tls_ctx_free(x->tls);
    free(x->headers);
    free(x);
}

static const pc_exporter_def prw_def = {
    .req_size = sizeof(prw_req),
    .sender_cfg = offsetof(prw_cfg, sender),
    .create = prw_create,
    .start = prw_start,
    .encode = prw_encode,
    .send = prw_send,
    .release = prw_release,
    .close = prw_close,
    .destroy = prw_destroy,
};

const pc_component_type pc_exporter_prometheusremotewrite = {
    .name = "prometheusremotewrite",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .cfg_size = sizeof(prw_cfg),
    .cfg = prw_keys,
    .validate = prw_validate,
    PC_EXPORTER_CORE(&prw_def),
    .signals = PC_SIGNAL_BIT(PC_SIGNAL_METRICS),
    .doc = "sends metrics with Prometheus remote write 1.0 (protobuf, snappy): cumulative series; "
           "deltas and exponential histograms dropped; one request at a time (series in order) "
           "unless sending_queue::num_consumers is set",
};
