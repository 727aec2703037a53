/* Self-metrics (ARCHITECTURE.md §8): a registry of counters and gauges that components own,
 * rendered as Prometheus text on service.telemetry.metrics.address (/metrics). Loop thread only. */
#ifndef PC_TELEMETRY_H
#define PC_TELEMETRY_H

#include <stdint.h>
#include <uv.h>

#include "base/err.h"
#include "pdata/pdata.h"

typedef enum { PC_METRIC_COUNTER, PC_METRIC_GAUGE, PC_METRIC_HISTOGRAM } pc_metric_kind;

/* A histogram its owner observes into (loop thread): per-bucket counts for the ascending upper
 * bounds (+Inf implied), their count and sum; rendered as Prometheus' _bucket (cumulative),
 * _sum and _count. */
#define PC_HISTOGRAM_MAX_BOUNDS 40
typedef struct pc_histogram {
    const double *bounds;
    size_t n_bounds;
    uint64_t counts[PC_HISTOGRAM_MAX_BOUNDS + 1];
    uint64_t count;
    double sum;
} pc_histogram;
void pc_histogram_observe(pc_histogram *h, double v);

/* Register a value the owner keeps up to date. labels: `receiver="otlp"` style, may be "".
 * Names follow the Collector's (otelcol_receiver_accepted_profile_samples, ...). */
void pc_metric_u64(const void *owner, const char *name, const char *help, pc_metric_kind kind,
                   const char *labels, const uint64_t *value);
/* A value computed when scraped. */
void pc_metric_fn(const void *owner, const char *name, const char *help, pc_metric_kind kind,
                  const char *labels, double (*fn)(const void *arg), const void *arg);
/* A histogram (kind PC_METRIC_HISTOGRAM); its bounds must outlive the registration. */
void pc_metric_histogram(const void *owner, const char *name, const char *help, const char *labels,
                         const pc_histogram *h);
/* Drop every metric registered by owner (call before freeing what the pointers point into). */
void pc_metric_unregister(const void *owner);
/* Prometheus text exposition format 0.0.4. */
void pc_metrics_render(pc_buf *out);

/* The standard per-component metrics, owned by c. What a component registers under its own
 * address the service unregisters before its destroy; a destroy unregisters only other owners. */
struct pc_component;
/* otelcol_receiver_{accepted,refused}_<profile_samples|spans|metric_points|log_records> */
void pc_receiver_register_metrics(struct pc_component *c, pc_signal sig, const char *transport,
                                  const uint64_t *accepted, const uint64_t *refused);
/* Why a receiver refused a request (docs/limits.md): undecodable or invalid data (400/422),
 * over a size or decode budget (413), an unsupported media type or encoding (415), no memory now
 * (memory limiter, decodes in flight: 503), or the pipeline's refusal (429/503/400). */
typedef enum {
    PC_REFUSED_INVALID,
    PC_REFUSED_TOO_LARGE,
    PC_REFUSED_UNSUPPORTED,
    PC_REFUSED_MEMORY,
    PC_REFUSED_PIPELINE,
    PC_REFUSED_UNAUTHORIZED, /* no valid credentials (401, UNAUTHENTICATED) */
    PC_REFUSED_COUNT
} pc_refused_reason;
typedef struct pc_refused_requests {
    uint64_t n[PC_REFUSED_COUNT];
} pc_refused_requests;
/* profcol_receiver_refused_requests{receiver,transport,reason}: every request a receiver
 * refused, whether or not its items could be counted. */
void pc_receiver_register_refused_requests(struct pc_component *c, const char *transport,
                                           const pc_refused_requests *r);
/* Requests a receiver is decoding or waiting on the pipeline for (gauge). */
void pc_receiver_register_in_flight(struct pc_component *c, const uint64_t *in_flight);
/* profcol_receiver_wire_checked_requests{receiver, transport}: profiles requests passed
 * on after a check of their wire format alone (sdk/receiver.h, pc_receive_wire_check). */
void pc_receiver_register_wire_checked(struct pc_component *c, const char *transport,
                                       const uint64_t *n);
/* profcol_<server>_server_{open_connections, connections_refused_total,
 * connections_evicted_total, accept_errors_total}{receiver="id"}, server "http" or "grpc". */
struct pc_conn_stats;
void pc_receiver_register_conn_metrics(struct pc_component *c, const char *server,
                                       const struct pc_conn_stats *st);
/* otelcol_exporter_{sent,send_failed}_<profile_samples|spans|metric_points|log_records>;
 * labels: NULL for exporter="<id>", else the whole label set. */
void pc_exporter_register_metrics(struct pc_component *c, const char *labels, pc_signal sig,
                                  const uint64_t *sent, const uint64_t *failed);
/* exporter="<id>" or, with backend set, exporter="<id>",backend="<backend>" (escaped). */
void pc_exporter_labels(const struct pc_component *c, const char *backend, char *out, size_t n);

/* Current resident set size of this process, in bytes (from /proc/self/statm). */
uint64_t pc_process_rss(void);

/* The /metrics HTTP endpoint. */
typedef struct pc_metrics_server pc_metrics_server;
/* NULL with the reason in e: PC_EINVAL (the address) or PC_EIO (e.g. the port is in use). */
pc_metrics_server *pc_metrics_server_start(uv_loop_t *loop, const char *endpoint, pc_error *e);
void pc_metrics_server_stop(pc_metrics_server *s, void (*done)(void *), void *arg);

#endif
