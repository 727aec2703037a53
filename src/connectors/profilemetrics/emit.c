/* profilemetrics: the series held, as one OTLP metrics request of cumulative monotonic sums
 * (spec metrics.md §7.1: what Collector-style Prometheus exporters carry), in base units
 * (docs/profilemetrics.md, "Metrics"). */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "connectors/profilemetrics/pm.h"

typedef Opentelemetry__Proto__Metrics__V1__ResourceMetrics pm_rm;
typedef Opentelemetry__Proto__Metrics__V1__ScopeMetrics pm_sm;
typedef Opentelemetry__Proto__Metrics__V1__Metric pm_metric;
typedef Opentelemetry__Proto__Metrics__V1__Sum pm_sum;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint pm_point;

#define SCOPE_NAME "profcol/connector/profilemetrics"

/* How a profile unit reads in OTel units: nanoseconds etc. as seconds (a double), bytes as By,
 * counts as 1 (OTel semantic conventions' UCUM units); another as an annotation {unit}. */
typedef struct unit_conv {
    const char *unit;
    double scale; /* 0: an integer, kept as is */
} unit_conv;

static unit_conv convert(pc_arena *a, const char *u)
{
    static const struct {
        const char *from;
        unit_conv to;
    } t[] = {{"nanoseconds", {"s", 1e-9}},  {"ns", {"s", 1e-9}},
             {"microseconds", {"s", 1e-6}}, {"us", {"s", 1e-6}},
             {"milliseconds", {"s", 1e-3}}, {"ms", {"s", 1e-3}},
             {"seconds", {"s", 1}},         {"s", {"s", 1}},
             {"bytes", {"By", 0}},          {"count", {"1", 0}},
             {"samples", {"1", 0}},         {"", {"1", 0}}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(u, t[i].from)) return t[i].to;
    size_t n = strlen(u) + 3;
    char *s = pc_arena_alloc(a, n);
    snprintf(s, n, "{%s}", u);
    return (unit_conv){s, 0};
}

typedef struct emitter {
    pc_arena *a;
    const pm_state *s;
    uint64_t now_ns;
    uint64_t points;
} emitter;

static char *astr(pc_arena *a, const char *s)
{
    return pc_arena_strndup(a, s, strlen(s));
}

static pc_keyvalue *kv(pc_arena *a, const char *k, const char *v)
{
    pc_keyvalue *x = pc_arena_alloc(a, sizeof *x);
    opentelemetry__proto__common__v1__key_value__init(x);
    x->key = astr(a, k);
    x->value = pc_arena_alloc(a, sizeof *x->value);
    opentelemetry__proto__common__v1__any_value__init(x->value);
    x->value->value_case = PC_AV(STRING_VALUE);
    x->value->string_value = astr(a, v);
    return x;
}

/* A metric named <ns>.<type><suffix> with room for n points. */
static pm_metric *metric(emitter *em, const pm_group *g, const char *suffix, const char *desc,
                         unit_conv uc, size_t n)
{
    pc_arena *a = em->a;
    pm_metric *m = pc_arena_alloc(a, sizeof *m);
    opentelemetry__proto__metrics__v1__metric__init(m);
    const char *ns = em->s->cfg->ns;
    size_t len = strlen(ns) + strlen(g->type) + strlen(suffix) + 2;
    m->name = pc_arena_alloc(a, len);
    snprintf(m->name, len, "%s%s%s%s", ns, *ns ? "." : "", g->type, suffix);
    m->description = (char *)desc;
    m->unit = (char *)uc.unit;
    m->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM;
    m->sum = pc_arena_alloc(a, sizeof *m->sum);
    opentelemetry__proto__metrics__v1__sum__init(m->sum);
    m->sum->aggregation_temporality =
        OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE;
    m->sum->is_monotonic = 1;
    m->sum->data_points = pc_arena_calloc(a, n ? n : 1, sizeof(pm_point *));
    return m;
}

/* A point of m: value (profile units) since start_ns, with attribute k = v (k NULL: none). */
static void point(emitter *em, pm_metric *m, unit_conv uc, int64_t value, uint64_t start_ns,
                  const char *k, const char *v)
{
    pm_point *p = pc_arena_alloc(em->a, sizeof *p);
    opentelemetry__proto__metrics__v1__number_data_point__init(p);
    p->start_time_unix_nano = start_ns;
    p->time_unix_nano = em->now_ns;
    if (uc.scale) {
        p->value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE;
        p->as_double = (double)value * uc.scale;
    } else {
        p->value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT;
        p->as_int = value;
    }
    if (k) {
        p->attributes = pc_arena_alloc(em->a, sizeof(pc_keyvalue *));
        p->attributes[0] = kv(em->a, k, v);
        p->n_attributes = 1;
    }
    m->sum->data_points[m->sum->n_data_points++] = p;
    em->points++;
}

static void function_metrics(emitter *em, const pm_group *g, unit_conv uc, pm_metric **out)
{
    pm_metric *self = metric(em, g, ".function.self",
                             "value of the samples whose leaf frame is the function (the top N "
                             "functions; the rest as function=\"other\")",
                             uc, g->fns.n + 1);
    pm_metric *total = metric(em, g, ".function.total",
                              "value of the samples whose stack holds the function (once per "
                              "sample; the top N functions)",
                              uc, g->fns.n);
    for (size_t i = 0; i < g->fns.cap; i++) {
        const pm_ent *e = g->fns.slots[i];
        if (!e) continue;
        point(em, self, uc, e->self, e->start_ns, "function", e->name);
        point(em, total, uc, e->cum, e->start_ns, "function", e->name);
    }
    point(em, self, uc, g->other.self, g->other.start_ns, "function", "other");
    out[0] = self;
    out[1] = total;
}

/* The metrics of group g into one ScopeMetrics. */
static void group_metrics(emitter *em, const pm_group *g, pm_sm *sm)
{
    const pm_cfg *cfg = em->s->cfg;
    unit_conv uc = convert(em->a, g->unit);
    sm->metrics = pc_arena_calloc(em->a, 5, sizeof(pm_metric *));
    pm_metric *m = metric(em, g, "", "value of the profiles' samples (cumulative)", uc, 1);
    point(em, m, uc, g->value, g->start_ns, NULL, NULL);
    sm->metrics[sm->n_metrics++] = m;
    if (cfg->functions) {
        function_metrics(em, g, uc, sm->metrics + sm->n_metrics);
        sm->n_metrics += 2;
    }
    if (cfg->frame_types && g->frames.n) {
        m = metric(em, g, ".frame_type", "value of the samples by their leaf frame's type", uc,
                   g->frames.n);
        for (size_t i = 0; i < g->frames.cap; i++) {
            const pm_ent *e = g->frames.slots[i];
            if (e) point(em, m, uc, e->self, e->start_ns, "frame.type", e->name);
        }
        sm->metrics[sm->n_metrics++] = m;
    }
    if (cfg->spans) {
        m = metric(em, g, ".span", "value of the samples with (true) and without a span link", uc,
                   2);
        point(em, m, uc, g->linked[0], g->start_ns, "span.linked", "false");
        point(em, m, uc, g->linked[1], g->start_ns, "span.linked", "true");
        sm->metrics[sm->n_metrics++] = m;
    }
}

static pm_rm *resource_metrics(emitter *em, const pm_group *g)
{
    pc_arena *a = em->a;
    pm_rm *rm = pc_arena_alloc(a, sizeof *rm);
    opentelemetry__proto__metrics__v1__resource_metrics__init(rm);
    rm->resource = pc_arena_alloc(a, sizeof *rm->resource);
    opentelemetry__proto__resource__v1__resource__init(rm->resource);
    rm->resource->attributes = pc_arena_calloc(a, g->nres + 1, sizeof(pc_keyvalue *));
    for (size_t i = 0; i < g->nres; i++)
        if (g->res[i])
            rm->resource->attributes[rm->resource->n_attributes++] =
                kv(a, em->s->cfg->resource_attributes.v[i], g->res[i]);
    pm_sm *sm = pc_arena_alloc(a, sizeof *sm);
    opentelemetry__proto__metrics__v1__scope_metrics__init(sm);
    sm->scope = pc_arena_alloc(a, sizeof *sm->scope);
    opentelemetry__proto__common__v1__instrumentation_scope__init(sm->scope);
    sm->scope->name = SCOPE_NAME;
    rm->scope_metrics = pc_arena_alloc(a, sizeof(pm_sm *));
    rm->scope_metrics[0] = sm;
    rm->n_scope_metrics = 1;
    group_metrics(em, g, sm);
    return rm;
}

pc_batch *pm_state_flush(pm_state *s, uint64_t now, uint64_t now_ns)
{
    pm_state_fold(s, now, now_ns);
    if (!s->groups.n) return NULL;
    pc_arena *a = pc_arena_new(1 << 16);
    pc_metrics_request *req = pc_arena_alloc(a, sizeof *req);
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__init(req);
    req->resource_metrics = pc_arena_calloc(a, s->groups.n, sizeof(pm_rm *));
    emitter em = {a, s, now_ns, 0};
    for (size_t i = 0; i < s->groups.cap; i++)
        if (s->groups.slots[i])
            req->resource_metrics[req->n_resource_metrics++] =
                resource_metrics(&em, s->groups.slots[i]);
    s->points += em.points;
    pc_batch *b = pc_batch_wrap(a, PC_SIGNAL_METRICS);
    b->msg = &req->base;
    return b;
}
