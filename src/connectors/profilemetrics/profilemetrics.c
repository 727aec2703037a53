/* Connector "profilemetrics": profiles -> metrics (docs/profilemetrics.md). Per (resource labels,
 * profile type) the samples' value as a cumulative monotonic sum, per function (top N, the rest
 * as function="other") self and total, per leaf frame type, and optionally by span link, emitted
 * every metrics_flush_interval to the metrics pipelines it feeds. Keys shaped like the
 * Collector's spanmetrics connector (namespace, metrics_flush_interval, metrics_expiration);
 * what profiles add up to is Elastic's profilingmetrics and Pyroscope's recording rules
 * (spec metrics.md §1). A batch is added up on the pool (sdk/processor.h's jobs); the state is
 * the loop's. The connector ends its profiles pipeline: a batch is answered once added up. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "connectors/profilemetrics/pm.h"
#include "sdk/component.h"
#include "sdk/processor.h"
#include "sdk/telemetry.h"

/* clang-format off */
static const pc_cfg_key pm_keys[] = {
    {"namespace", PC_CFG_STRING, "profile", offsetof(pm_cfg, ns), "metric name prefix: <namespace>.<sample type>, e.g. profile.cpu (\"\": none)", NULL},
    {"resource_attributes", PC_CFG_LIST, "service.name,service.namespace,service.instance.id", offsetof(pm_cfg, resource_attributes), "resource attributes that tell series apart, copied to the metrics' resource (a missing service.name reads unknown_service, as elsewhere)", NULL},
    {"metrics_flush_interval", PC_CFG_DURATION, "15s", offsetof(pm_cfg, flush_ms), "how often the cumulative points of every series are emitted (and the top-N window closes)", NULL},
    {"metrics_expiration", PC_CFG_DURATION, "5m", offsetof(pm_cfg, expiration_ms), "a series not added to for this long is dropped; seen again, it starts anew with a new start time (0: never)", NULL},
    {"max_series", PC_CFG_INT, "10000", offsetof(pm_cfg, max_series), "bound on the series held; new series beyond it are dropped and counted (a function's value then goes to function=\"other\")", NULL},
    {"functions.enabled", PC_CFG_BOOL, "true", offsetof(pm_cfg, functions), "<ns>.<type>.function.self and .function.total per function (attribute function)", NULL},
    {"functions.top_n", PC_CFG_INT, "20", offsetof(pm_cfg, top_n), "functions tracked per (resource, type): a window's top N by self value join while fewer are tracked; the rest add to function=\"other\"", NULL},
    {"frame_types.enabled", PC_CFG_BOOL, "true", offsetof(pm_cfg, frame_types), "<ns>.<type>.frame_type by the leaf frame's profile.frame.type (attribute frame.type; none: unknown)", NULL},
    {"spans.enabled", PC_CFG_BOOL, "false", offsetof(pm_cfg, spans), "<ns>.<type>.span: the value of samples with a span link (span.linked=true) and without", NULL},
    {0},
};
/* clang-format on */

typedef struct pm {
    pc_component *c;
    pm_state st;
    pc_proc_core core;
    uv_timer_t timer;
    bool timer_on, closing;
    pc_shutdown_done down;
    uint64_t batches, samples, flush_failures;
} pm;

typedef struct pm_job {
    pc_proc_job j; /* first */
    pm_part part;
} pm_job;

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int pm_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    (void)node;
    const pm_cfg *cfg = cfgp;
    if (cfg->max_series < 1) return pc_cfg_errorf(err, NULL, path, "max_series must be at least 1");
    if (cfg->top_n < 1 || cfg->top_n > 10000)
        return pc_cfg_errorf(err, NULL, path, "functions::top_n must be 1 to 10000");
    if (cfg->flush_ms < 100)
        return pc_cfg_errorf(err, NULL, path, "metrics_flush_interval must be at least 100ms");
    if (cfg->resource_attributes.n > 64)
        return pc_cfg_errorf(err, NULL, path, "resource_attributes: at most 64");
    return 0;
}

static void metric(pc_component *c, const char *name, const char *help, pc_metric_kind kind,
                   const uint64_t *v)
{
    char labels[300];
    snprintf(labels, sizeof labels, "connector=\"%s\"", c->name ? c->name : c->id);
    pc_metric_u64(c, name, help, kind, labels, v);
}

static int pm_create(pc_component *c, pc_error *err)
{
    (void)err;
    pm *p = pc_xcalloc(1, sizeof *p);
    c->priv = p;
    p->c = c;
    p->st.cfg = c->cfg;
    p->st.log_id = c->id;
    metric(c, "profcol_connector_profilemetrics_series",
           "Series the profilemetrics connector holds", PC_METRIC_GAUGE, &p->st.series);
    metric(c, "profcol_connector_profilemetrics_series_dropped_total",
           "New series refused by max_series", PC_METRIC_COUNTER, &p->st.dropped);
    metric(c, "profcol_connector_profilemetrics_series_expired_total",
           "Series dropped after metrics_expiration without data", PC_METRIC_COUNTER,
           &p->st.expired);
    metric(c, "profcol_connector_profilemetrics_points_total", "Metric data points emitted",
           PC_METRIC_COUNTER, &p->st.points);
    metric(c, "profcol_connector_profilemetrics_samples_total", "Profile samples added up",
           PC_METRIC_COUNTER, &p->samples);
    metric(c, "profcol_connector_profilemetrics_flush_failures_total",
           "Metric batches the metrics pipelines refused", PC_METRIC_COUNTER, &p->flush_failures);
    return 0;
}

static void flushed(void *arg, int rc, const char *why)
{
    pm *p = arg;
    if (rc) {
        p->flush_failures++;
        PC_WARN(p->c->id, "metrics pipelines refused a flush: %s", why ? why : pc_strerror(rc));
    }
}

static void tick(uv_timer_t *t)
{
    pm *p = t->data;
    pc_batch *b = pm_state_flush(&p->st, uv_now(p->c->loop), wall_ns());
    if (b) pc_consume(p->c->router->all, b, flushed, p);
}

static int pm_start(pc_component *c, pc_error *e)
{
    pm *p = c->priv;
    const pm_cfg *cfg = c->cfg;
    int rc = uv_timer_init(c->loop, &p->timer);
    if (rc) return pc_error_set(e, PC_EIO, "timer: %s", uv_strerror(rc));
    p->timer.data = p;
    p->timer_on = true;
    p->st.window_ns = wall_ns();
    uv_timer_start(&p->timer, tick, cfg->flush_ms, cfg->flush_ms);
    return 0;
}

static void job_run(pc_proc_job *j)
{
    pm_job *pj = (pm_job *)j;
    pm *p = j->c->priv;
    pm_part_fill(&pj->part, p->st.cfg, j->b);
    j->drop = true; /* the end of the profiles pipeline: answered PC_OK */
}

static void job_after(pc_proc_job *j)
{
    pm_job *pj = (pm_job *)j;
    pm *p = j->c->priv;
    p->batches++;
    p->samples += pj->part.samples;
    pm_state_add(&p->st, &pj->part, uv_now(j->c->loop), wall_ns());
    pm_part_free(&pj->part);
}

static void pm_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    pm *p = c->priv;
    pm_job *pj = pc_xcalloc(1, sizeof *pj);
    pj->j.c = c;
    pj->j.core = &p->core;
    pj->j.b = b;
    pj->j.done = done;
    pj->j.arg = arg;
    pj->j.run = job_run;
    pj->j.after = job_after;
    pc_proc_job_submit(&pj->j);
}

static void closed(uv_handle_t *h)
{
    pm *p = h->data;
    p->timer_on = false;
    pc_proc_core_shutdown(&p->core, p->c, p->down);
}

/* No last flush: the metrics pipelines stop with this one, and a restart begins new series
 * (new start times) anyway. */
static void pm_shutdown(pc_component *c, pc_shutdown_done done)
{
    pm *p = c->priv;
    p->down = done;
    if (p->timer_on && !p->closing) {
        p->closing = true;
        uv_timer_stop(&p->timer);
        uv_close((uv_handle_t *)&p->timer, closed);
        return;
    }
    pc_proc_core_shutdown(&p->core, c, done);
}

static void pm_destroy(pc_component *c)
{
    pm *p = c->priv;
    if (!p) return;
    pm_state_free(&p->st);
    free(p);
}

const pc_component_type pc_connector_profilemetrics = {
    .name = "profilemetrics",
    .kind = PC_KIND_CONNECTOR,
    .stability = "alpha",
    .cfg_size = sizeof(pm_cfg),
    .cfg = pm_keys,
    .validate = pm_validate,
    .create = pm_create,
    .start = pm_start,
    .consume = pm_consume,
    .shutdown = pm_shutdown,
    .destroy = pm_destroy,
    .signals = PC_SIGNAL_BIT(PC_SIGNAL_PROFILES) | PC_SIGNAL_BIT(PC_SIGNAL_METRICS),
    .connects = {[PC_SIGNAL_PROFILES] = PC_SIGNAL_BIT(PC_SIGNAL_METRICS)},
    .doc = "profiles -> metrics: per resource and sample type the samples' value as a cumulative "
           "monotonic sum in base units (<namespace>.<type>: nanoseconds as s, bytes as By, "
           "counts as 1; OpenTelemetry unit conventions), per function self and total for the "
           "top N (rest: function=\"other\"), per leaf frame type, optionally by span link; "
           "series bounded by max_series and metrics_expiration (docs/profilemetrics.md)",
};
