/* Self-metrics registry and its Prometheus endpoint. */
#include "sdk/telemetry.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "net/http_server.h"
#include "net/listener.h"
#include "net/url.h"
#include "sdk/component.h"
#include "base/alloc.h"
#include "base/log.h"

typedef struct metric {
    const void *owner;
    char *name, *help, *labels;
    pc_metric_kind kind;
    const uint64_t *value;
    double (*fn)(const void *);
    const void *arg;
    const pc_histogram *hist;
} metric;

static metric *g_metrics;
static size_t g_n, g_cap;

static void add(const void *owner, const char *name, const char *help, pc_metric_kind kind,
                const char *labels, const uint64_t *value, double (*fn)(const void *),
                const void *arg)
{
    if (g_n == g_cap) {
        g_cap = g_cap ? g_cap * 2 : 64;
        g_metrics = pc_xrealloc(g_metrics, g_cap * sizeof(metric));
    }
    g_metrics[g_n++] = (metric){
        owner, pc_xstrdup(name), pc_xstrdup(help), pc_xstrdup(labels), kind, value, fn, arg, NULL};
}

void pc_metric_u64(const void *owner, const char *name, const char *help, pc_metric_kind kind,
                   const char *labels, const uint64_t *value)
{
    add(owner, name, help, kind, labels ? labels : "", value, NULL, NULL);
}

void pc_metric_fn(const void *owner, const char *name, const char *help, pc_metric_kind kind,
                  const char *labels, double (*fn)(const void *arg), const void *arg)
{
    add(owner, name, help, kind, labels ? labels : "", NULL, fn, arg);
}

void pc_metric_histogram(const void *owner, const char *name, const char *help, const char *labels,
                         const pc_histogram *h)
{
    add(owner, name, help, PC_METRIC_HISTOGRAM, labels ? labels : "", NULL, NULL, NULL);
    g_metrics[g_n - 1].hist = h;
}

void pc_histogram_observe(pc_histogram *h, double v)
{
    size_t i = 0;
    while (i < h->n_bounds && i < PC_HISTOGRAM_MAX_BOUNDS && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->count++;
    h->sum += v;
}

void pc_metric_unregister(const void *owner)
{
    size_t keep = 0;
    for (size_t i = 0; i < g_n; i++) {
        if (g_metrics[i].owner == owner) {
            free(g_metrics[i].name);
            free(g_metrics[i].help);
            free(g_metrics[i].labels);
        } else {
            g_metrics[keep++] = g_metrics[i];
        }
    }
    g_n = keep;
    if (!g_n) {
        free(g_metrics);
        g_metrics = NULL;
        g_cap = 0;
    }
}

/* "otelcol_<kind>_<what>_<metric>" with its help text, for a signal's unit of count. */
static void signal_counter(pc_component *c, const char *kind, const char *what, pc_signal sig,
                           const char *help, const char *labels, const uint64_t *value)
{
    char name[128], h[160];
    snprintf(name, sizeof name, "otelcol_%s_%s_%s", kind, what, pc_signal_infos[sig].metric);
    snprintf(h, sizeof h, "%s%s %s", sig == PC_SIGNAL_PROFILES ? "Profile " : "",
             sig == PC_SIGNAL_PROFILES ? "samples" : pc_signal_infos[sig].items, help);
    if (sig != PC_SIGNAL_PROFILES && h[0] >= 'a' && h[0] <= 'z') h[0] = (char)(h[0] - 'a' + 'A');
    pc_metric_u64(c, name, h, PC_METRIC_COUNTER, labels, value);
}

void pc_receiver_register_metrics(pc_component *c, pc_signal sig, const char *transport,
                                  const uint64_t *accepted, const uint64_t *refused)
{
    char labels[300];
    snprintf(labels, sizeof labels, "receiver=\"%s\",transport=\"%s\"", c->id, transport);
    signal_counter(c, "receiver", "accepted", sig, "successfully pushed into the pipeline", labels,
                   accepted);
    signal_counter(c, "receiver", "refused", sig, "that could not be pushed into the pipeline",
                   labels, refused);
}

void pc_receiver_register_refused_requests(pc_component *c, const char *transport,
                                           const pc_refused_requests *r)
{
    static const char *const reasons[PC_REFUSED_COUNT] = {"invalid", "too_large", "unsupported",
                                                          "memory",  "pipeline",  "unauthorized"};
    for (int i = 0; i < PC_REFUSED_COUNT; i++) {
        char labels[300];
        snprintf(labels, sizeof labels, "receiver=\"%s\",transport=\"%s\",reason=\"%s\"", c->id,
                 transport, reasons[i]);
        pc_metric_u64(c, "profcol_receiver_refused_requests",
                      "Requests a receiver refused (invalid data, too large, unsupported, no "
                      "memory, or refused by the pipeline)",
                      PC_METRIC_COUNTER, labels, &r->n[i]);
    }
}

void pc_receiver_register_wire_checked(pc_component *c, const char *transport, const uint64_t *n)
{
    char labels[300];
    snprintf(labels, sizeof labels, "receiver=\"%s\",transport=\"%s\"", c->id, transport);
    pc_metric_u64(c, "profcol_receiver_wire_checked_requests",
                  "Profiles requests accepted on a check of their wire format alone, not decoded: "
                  "every consumer passes their bytes through",
                  PC_METRIC_COUNTER, labels, n);
}

void pc_receiver_register_in_flight(pc_component *c, const uint64_t *in_flight)
{
    char labels[300];
    snprintf(labels, sizeof labels, "receiver=\"%s\"", c->id);
    pc_metric_u64(c, "profcol_receiver_requests_in_flight",
                  "Requests being decoded or waiting for the pipeline's answer", PC_METRIC_GAUGE,
                  labels, in_flight);
}

void pc_receiver_register_conn_metrics(pc_component *c, const char *server, const pc_conn_stats *st)
{
    static const struct {
        const char *name;
        const char *help;
        pc_metric_kind kind;
        size_t off;
    } m[] = {
        {"open_connections", "Connections open, counted against max_connections", PC_METRIC_GAUGE,
         offsetof(pc_conn_stats, open)},
        {"connections_refused_total",
         "New connections turned away: at max_connections with every connection busy with a "
         "request, or no file descriptor left",
         PC_METRIC_COUNTER, offsetof(pc_conn_stats, refused)},
        {"connections_evicted_total",
         "Idle or incomplete connections closed to make room for a new one (at max_connections "
         "or out of file descriptors)",
         PC_METRIC_COUNTER, offsetof(pc_conn_stats, evicted)},
        {"accept_errors_total", "accept() failures (EMFILE, ENFILE, ...)", PC_METRIC_COUNTER,
         offsetof(pc_conn_stats, accept_errors)},
    };
    char labels[300], name[128];
    /* an exporter serves too (prometheus' scrape endpoint): labelled as what it is */
    snprintf(labels, sizeof labels, "%s=\"%s\"",
             c->type->kind == PC_KIND_EXPORTER ? "exporter" : "receiver", c->id);
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        snprintf(name, sizeof name, "profcol_%s_server_%s", server, m[i].name);
        pc_metric_u64(c, name, m[i].help, m[i].kind, labels,
                      (const uint64_t *)((const char *)st + m[i].off));
    }
}

void pc_exporter_labels(const pc_component *c, const char *backend, char *out, size_t n)
{
    size_t k = (size_t)snprintf(out, n, "exporter=\"%s\"", c->id);
    if (!backend || k >= n) return;
    k += (size_t)snprintf(out + k, n - k, ",backend=\"");
    for (const char *p = backend; *p && k + 3 < n; p++) { /* Prometheus label value escaping */
        if (*p == '"' || *p == '\\') out[k++] = '\\';
        out[k++] = *p == '\n' ? ' ' : *p;
    }
    if (k + 2 <= n) {
        out[k++] = '"';
        out[k] = 0;
    }
}

void pc_exporter_register_metrics(pc_component *c, const char *labels, pc_signal sig,
                                  const uint64_t *sent, const uint64_t *failed)
{
    char own[300];
    if (!labels) {
        pc_exporter_labels(c, NULL, own, sizeof own);
        labels = own;
    }
    signal_counter(c, "exporter", "sent", sig, "successfully sent to the destination", labels,
                   sent);
    signal_counter(c, "exporter", "send_failed", sig, "that failed to be sent to the destination",
                   labels, failed);
}

uint64_t pc_process_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &rss) != 2) rss = 0;
        fclose(f);
    }
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static double process_rss(const void *arg)
{
    (void)arg;
    return (double)pc_process_rss();
}

static double process_cpu(const void *arg)
{
    (void)arg;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static double g_start_time;
static double process_uptime(const void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9 - g_start_time;
}

/* One histogram series: the sum over every registration with these labels (a reload's two
 * instances of one component), buckets cumulative as Prometheus wants them. */
static void render_histogram(pc_buf *out, size_t from, const metric *m)
{
    pc_histogram all = {.bounds = m->hist->bounds, .n_bounds = m->hist->n_bounds};
    for (size_t k = from; k < g_n; k++) {
        const metric *o = &g_metrics[k];
        if (strcmp(o->name, m->name) != 0 || strcmp(o->labels, m->labels) != 0) continue;
        for (size_t b = 0; b <= all.n_bounds && b <= PC_HISTOGRAM_MAX_BOUNDS; b++)
            all.counts[b] += o->hist->counts[b];
        all.count += o->hist->count;
        all.sum += o->hist->sum;
    }
    const char *sep = *m->labels ? "," : "";
    uint64_t cum = 0;
    for (size_t b = 0; b < all.n_bounds && b < PC_HISTOGRAM_MAX_BOUNDS; b++) {
        cum += all.counts[b];
        pc_buf_printf(out, "%s_bucket{%s%sle=\"%.17g\"} %llu\n", m->name, m->labels, sep,
                      all.bounds[b], (unsigned long long)cum);
    }
    pc_buf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", m->name, m->labels, sep,
                  (unsigned long long)all.count);
    const char *open = *m->labels ? "{" : "", *close = *m->labels ? "}" : "";
    pc_buf_printf(out, "%s_sum%s%s%s %.17g\n", m->name, open, m->labels, close, all.sum);
    pc_buf_printf(out, "%s_count%s%s%s %llu\n", m->name, open, m->labels, close,
                  (unsigned long long)all.count);
}

/* One counter or gauge series: the sum over every registration with these labels. */
static void render_value(pc_buf *out, size_t from, const metric *m)
{
    uint64_t whole = 0;
    double sum = 0;
    int fn = 0;
    for (size_t k = from; k < g_n; k++) {
        const metric *o = &g_metrics[k];
        if (strcmp(o->name, m->name) != 0 || strcmp(o->labels, m->labels) != 0) continue;
        if (o->value) {
            whole += *o->value;
        } else {
            sum += o->fn(o->arg);
            fn = 1;
        }
    }
    pc_buf_printf(out, "%s%s%s%s ", m->name, *m->labels ? "{" : "", m->labels,
                  *m->labels ? "}" : "");
    if (fn)
        pc_buf_printf(out, "%.17g\n", sum + (double)whole);
    else
        pc_buf_printf(out, "%llu\n", (unsigned long long)whole);
}

void pc_metrics_render(pc_buf *out)
{
    static const char *const kinds[] = {"counter", "gauge", "histogram"};
    const char *last = NULL;
    /* group samples of one name under one HELP/TYPE header, in registration order per name */
    for (size_t i = 0; i < g_n; i++) {
        int seen = 0;
        for (size_t k = 0; k < i; k++)
            if (!strcmp(g_metrics[k].name, g_metrics[i].name)) seen = 1;
        if (seen) continue;
        last = g_metrics[i].name;
        pc_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", last, g_metrics[i].help, last,
                      kinds[g_metrics[i].kind]);
        for (size_t j = i; j < g_n; j++) {
            const metric *m = &g_metrics[j];
            if (strcmp(m->name, last) != 0) continue;
            /* two instances of one component id (the old and the new one while a reload
             * switches) make one series: their sum */
            int dup = 0;
            for (size_t k = i; k < j && !dup; k++)
                dup = !strcmp(g_metrics[k].name, last) && !strcmp(g_metrics[k].labels, m->labels);
            if (dup) continue;
            if (m->hist)
                render_histogram(out, j, m);
            else
                render_value(out, j, m);
        }
    }
}

struct pc_metrics_server {
    pc_http_server *srv;
    void (*done)(void *);
    void *arg;
};

static void on_metrics(pc_http_req *req, void *arg)
{
    (void)arg;
    if (strcmp(req->path, "/metrics") != 0) {
        pc_http_respond(req, 404, "text/plain", "404 page not found\n", 19, NULL);
        return;
    }
    pc_buf b = {0};
    pc_metrics_render(&b);
    pc_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len, NULL);
    pc_buf_free(&b);
}

static const char g_owner; /* process metrics belong to the server */

pc_metrics_server *pc_metrics_server_start(uv_loop_t *loop, const char *endpoint, pc_error *e)
{
    char host[256];
    int port;
    if (pc_hostport_parse(endpoint, host, sizeof host, &port, e) < 0) {
        pc_error_prefix(e, "service::telemetry::metrics::address: ");
        return NULL;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    g_start_time = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    pc_metric_fn(&g_owner, "otelcol_process_memory_rss", "Resident set size in bytes",
                 PC_METRIC_GAUGE, "", process_rss, NULL);
    pc_metric_fn(&g_owner, "otelcol_process_cpu_seconds", "CPU seconds used (user and system)",
                 PC_METRIC_COUNTER, "", process_cpu, NULL);
    pc_metric_fn(&g_owner, "otelcol_process_uptime", "Seconds since start", PC_METRIC_COUNTER, "",
                 process_uptime, NULL);
    pc_metrics_server *s = pc_xcalloc(1, sizeof(*s));
    pc_http_server_opts o = pc_http_server_small_opts(host, port, "telemetry");
    s->srv = pc_http_server_new(loop, &o, on_metrics, s);
    if (pc_http_server_start(s->srv, e) < 0) {
        pc_http_server_shutdown(s->srv, NULL, NULL);
        pc_metric_unregister(&g_owner);
        free(s);
        return NULL;
    }
    PC_INFO("telemetry", "metrics on http://%s:%d/metrics", host, pc_http_server_port(s->srv));
    return s;
}

static void server_closed(void *arg)
{
    pc_metrics_server *s = arg;
    pc_metric_unregister(&g_owner);
    if (s->done) s->done(s->arg);
    free(s);
}

void pc_metrics_server_stop(pc_metrics_server *s, void (*done)(void *), void *arg)
{
    s->done = done;
    s->arg = arg;
    pc_http_server_shutdown(s->srv, server_closed, s);
}
