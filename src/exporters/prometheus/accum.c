/* The prometheus exporter's accumulator (model.h): one stored point per series, the Collector's
 * rules (/work/shared/spec/metrics.md §3): cumulative points replace older ones, delta monotonic
 * sums add up when contiguous (start = the stored point's time) and replace otherwise, delta
 * non-monotonic and unspecified-temporality sums are dropped, NoRecordedValue deletes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "exporters/prometheus/model.h"

typedef Opentelemetry__Proto__Metrics__V1__Metric metric_t;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint number_t;
typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint histo_t;
typedef Opentelemetry__Proto__Metrics__V1__SummaryDataPoint summary_t;
typedef Opentelemetry__Proto__Metrics__V1__ResourceMetrics resource_metrics_t;

#define DELTA                                                                                      \
    OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_DELTA
#define CUMUL                                                                                      \
    OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE
#define NO_RECORD 1u /* DataPointFlags.FLAG_NO_RECORDED_VALUE_MASK */

uint64_t prom_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- the hash tables ---- */

static void table_grow(prom_table *t)
{
    size_t nb = t->nb ? t->nb * 2 : 64;
    prom_node **b = pc_xcalloc(nb, sizeof *b);
    for (size_t i = 0; i < t->nb; i++) {
        for (prom_node *n = t->b[i], *next; n; n = next) {
            next = n->next;
            n->next = b[n->hash & (nb - 1)];
            b[n->hash & (nb - 1)] = n;
        }
    }
    free(t->b);
    t->b = b;
    t->nb = nb;
}

static void table_put(prom_table *t, prom_node *n)
{
    if (t->n + 1 > t->nb) table_grow(t);
    prom_node **slot = &t->b[n->hash & (t->nb - 1)];
    n->next = *slot;
    *slot = n;
    t->n++;
}

static void table_del(prom_table *t, prom_node *n)
{
    for (prom_node **p = &t->b[n->hash & (t->nb - 1)]; *p; p = &(*p)->next) {
        if (*p == n) {
            *p = n->next;
            t->n--;
            return;
        }
    }
}

uint64_t prom_series_hash(const char *fam, const char *labels)
{
    pc_hash h;
    pc_hash_begin(&h);
    pc_hash_bytes(&h, fam, strlen(fam));
    pc_hash_bytes(&h, labels, strlen(labels));
    return pc_hash_end(&h);
}

static prom_family *family_find(prom_accum *a, const char *name, uint64_t h)
{
    if (!a->fams.nb) return NULL;
    for (prom_node *n = a->fams.b[h & (a->fams.nb - 1)]; n; n = n->next) {
        prom_family *f = (prom_family *)n;
        if (n->hash == h && strcmp(f->name, name) == 0) return f;
    }
    return NULL;
}

prom_series *prom_series_find(prom_accum *a, const char *fam, const char *labels, uint64_t h)
{
    if (!a->series.nb) return NULL;
    for (prom_node *n = a->series.b[h & (a->series.nb - 1)]; n; n = n->next) {
        prom_series *s = (prom_series *)n;
        if (n->hash == h && strcmp(s->fam->name, fam) == 0 && strcmp(s->labels, labels) == 0)
            return s;
    }
    return NULL;
}

static void series_free(prom_series *s)
{
    free(s->labels);
    free(s->bounds);
    free(s->counts);
    free(s->qvals);
    free(s);
}

static void series_delete(prom_accum *a, prom_series *s)
{
    prom_family *f = s->fam;
    table_del(&a->series, &s->node);
    series_free(s);
    if (--f->n_series == 0) {
        table_del(&a->fams, &f->node);
        free(f->name);
        free(f->help);
        free(f);
    }
}

void prom_accum_init(prom_accum *a, const prom_cfg *cfg)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    a->cfg = cfg;
}

static void each_series(prom_accum *a, void (*fn)(prom_accum *a, prom_series *s, void *arg),
                        void *arg)
{
    for (size_t i = 0; i < a->series.nb; i++) {
        for (prom_node *n = a->series.b[i], *next; n; n = next) {
            next = n->next;
            fn(a, (prom_series *)n, arg);
        }
    }
}

static void delete_cb(prom_accum *a, prom_series *s, void *arg)
{
    (void)arg;
    series_delete(a, s);
}

void prom_accum_free(prom_accum *a)
{
    each_series(a, delete_cb, NULL);
    free(a->series.b);
    free(a->fams.b);
    pthread_mutex_destroy(&a->mu);
}

/* ---- one data point ---- */

/* Where a point lands: its series, made when new (NULL: refused or of another type). */
typedef struct point_ctx {
    prom_accum *a;
    prom_tally *t;
    const char *name, *help;
    pc_prom_type type;
    pc_prom_labels *base; /* resource, scope and constant labels */
} point_ctx;

static prom_family *family_get(point_ctx *pc)
{
    uint64_t h = prom_series_hash(pc->name, "");
    prom_family *f = family_find(pc->a, pc->name, h);
    if (f) return f->type == pc->type ? f : NULL; /* one name, one type: the first wins */
    f = pc_xcalloc(1, sizeof *f);
    f->node.hash = h;
    f->name = pc_xstrdup(pc->name);
    f->help = pc_xstrdup(pc_nz(pc->help));
    f->type = pc->type;
    table_put(&pc->a->fams, &f->node);
    return f;
}

/* The series of a point with attributes kv; *fresh when just made. NULL: dropped (counted). */
static prom_series *series_get(point_ctx *pc, pc_keyvalue *const *kv, size_t n, uint32_t flags,
                               bool *fresh)
{
    pc_prom_labels l;
    pc_prom_labels_copy(&l, pc->base, n);
    pc_prom_labels_add_attrs(&l, kv, n);
    char *labels = pc_prom_labels_join(&l);
    pc_prom_labels_free(&l);
    uint64_t h = prom_series_hash(pc->name, labels);
    prom_series *s = prom_series_find(pc->a, pc->name, labels, h);
    *fresh = false;
    if (flags & NO_RECORD) { /* the series ended */
        if (s) series_delete(pc->a, s);
        free(labels);
        return NULL;
    }
    if (s) {
        free(labels);
        if (s->fam->type == pc->type) return s;
        pc->t->dropped_points++;
        return NULL;
    }
    prom_family *f = NULL;
    if ((int64_t)pc->a->series.n >= pc->a->cfg->max_series) {
        pc->t->dropped_series++;
    } else if (!(f = family_get(pc))) {
        pc->t->dropped_points++;
    }
    if (!f) {
        free(labels);
        return NULL;
    }
    s = pc_xcalloc(1, sizeof *s);
    s->node.hash = h;
    s->fam = f;
    s->labels = labels;
    f->n_series++;
    table_put(&pc->a->series, &s->node);
    *fresh = true;
    return s;
}

static double number_value(const number_t *p)
{
    if (p->value_case == OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT)
        return (double)p->as_int;
    return p->as_double;
}

/* The series of a point, or NULL when there is none or the point is older than what it keeps
 * (counted as dropped). */
static prom_series *point_series(point_ctx *pc, pc_keyvalue *const *kv, size_t n, uint32_t flags,
                                 uint64_t time_ns, bool *fresh)
{
    prom_series *s = series_get(pc, kv, n, flags, fresh);
    if (s && !*fresh && time_ns < s->time_ns) {
        pc->t->dropped_points++;
        return NULL;
    }
    return s;
}

/* A point taken into its series. */
static void point_kept(point_ctx *pc, prom_series *s, uint64_t time_ns)
{
    s->time_ns = time_ns;
    s->seen_ms = prom_now_ms();
    pc->t->points++;
}

/* Gauges, cumulative sums, and delta monotonic sums (delta: add when contiguous). */
static void add_number(point_ctx *pc, const number_t *p, bool delta)
{
    bool fresh;
    prom_series *s =
        point_series(pc, p->attributes, p->n_attributes, p->flags, p->time_unix_nano, &fresh);
    if (!s) return;
    double v = number_value(p);
    if (!fresh && delta && p->start_time_unix_nano == s->time_ns) {
        s->value += v;
    } else {
        s->value = v;
        s->start_ns = p->start_time_unix_nano;
    }
    point_kept(pc, s, p->time_unix_nano);
}

static bool same_bounds(const prom_series *s, const histo_t *p)
{
    return s->n == p->n_explicit_bounds && s->counts &&
           (!s->n || memcmp(s->bounds, p->explicit_bounds, s->n * sizeof(double)) == 0);
}

static void histo_set(prom_series *s, const histo_t *p)
{
    free(s->bounds);
    free(s->counts);
    s->n = p->n_explicit_bounds;
    s->bounds = pc_xmalloc((s->n + 1) * sizeof(double));
    s->counts = pc_xcalloc(s->n + 1, sizeof(uint64_t));
    if (s->n) memcpy(s->bounds, p->explicit_bounds, s->n * sizeof(double));
    s->count = 0;
    s->sum = 0;
    s->start_ns = p->start_time_unix_nano;
}

static void add_histogram(point_ctx *pc, const histo_t *p, bool delta)
{
    /* bucket_counts has one more entry than explicit_bounds, or none */
    if (p->n_bucket_counts && p->n_bucket_counts != p->n_explicit_bounds + 1) {
        pc->t->dropped_points++;
        return;
    }
    bool fresh;
    prom_series *s =
        point_series(pc, p->attributes, p->n_attributes, p->flags, p->time_unix_nano, &fresh);
    if (!s) return;
    bool add = !fresh && delta && p->start_time_unix_nano == s->time_ns && same_bounds(s, p);
    if (!fresh && delta && !add && p->start_time_unix_nano < s->time_ns) {
        pc->t->dropped_points++; /* overlaps what was added up: neither a sequel nor a reset */
        return;
    }
    if (!add) histo_set(s, p);
    for (size_t i = 0; i < p->n_bucket_counts; i++)
        s->counts[i] += p->bucket_counts[i];
    s->count += p->count;
    if (p->_sum_case == OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___SUM_SUM)
        s->sum += p->sum;
    point_kept(pc, s, p->time_unix_nano);
}

static void add_summary(point_ctx *pc, const summary_t *p)
{
    bool fresh;
    prom_series *s =
        point_series(pc, p->attributes, p->n_attributes, p->flags, p->time_unix_nano, &fresh);
    if (!s) return;
    free(s->bounds);
    free(s->qvals);
    s->n = p->n_quantile_values;
    s->bounds = pc_xmalloc((s->n + 1) * sizeof(double));
    s->qvals = pc_xmalloc((s->n + 1) * sizeof(double));
    for (size_t i = 0; i < s->n; i++) {
        s->bounds[i] = p->quantile_values[i] ? p->quantile_values[i]->quantile : 0;
        s->qvals[i] = p->quantile_values[i] ? p->quantile_values[i]->value : 0;
    }
    s->count = p->count;
    s->sum = p->sum;
    s->start_ns = p->start_time_unix_nano;
    point_kept(pc, s, p->time_unix_nano);
}

/* The type a metric is exposed as, and whether its points are deltas to add up; false: the
 * metric is dropped (the Collector's rules). */
static bool metric_kind(const metric_t *m, pc_prom_type *type, bool *delta)
{
    *delta = false;
    switch (m->data_case) {
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE: *type = PC_PROM_GAUGE; return true;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM:
        if (m->sum->aggregation_temporality == DELTA) {
            *delta = true;
            *type = PC_PROM_COUNTER;
            return m->sum->is_monotonic; /* a delta up-down counter cannot be kept */
        }
        *type = m->sum->is_monotonic ? PC_PROM_COUNTER : PC_PROM_GAUGE;
        return m->sum->aggregation_temporality == CUMUL;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM:
        *type = PC_PROM_HISTOGRAM;
        *delta = m->histogram->aggregation_temporality == DELTA;
        return *delta || m->histogram->aggregation_temporality == CUMUL;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY:
        *type = PC_PROM_SUMMARY;
        return true;
    default: return false; /* exponential histograms: the text formats have no form for them */
    }
}

static void add_metric(prom_accum *a, const metric_t *m, pc_prom_labels *base, prom_tally *t)
{
    pc_prom_type type;
    bool delta;
    if (!m) return;
    if (!metric_kind(m, &type, &delta)) {
        t->dropped_points += pc_metric_points(m);
        return;
    }
    bool from_gauge = m->data_case == OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE;
    char *name = pc_prom_metric_name(a->cfg->namespace_, a->cfg->suffixes, pc_nz(m->name),
                                     pc_nz(m->unit), type, from_gauge);
    if (!*name) { /* no letter or digit: no name to expose it by */
        t->dropped_points += pc_metric_points(m);
        free(name);
        return;
    }
    point_ctx pc = {a, t, name, m->description, type, base};
    if (m->data_case == OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE) {
        for (size_t i = 0; i < m->gauge->n_data_points; i++)
            if (m->gauge->data_points[i]) add_number(&pc, m->gauge->data_points[i], false);
    } else if (m->data_case == OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM) {
        for (size_t i = 0; i < m->sum->n_data_points; i++)
            if (m->sum->data_points[i]) add_number(&pc, m->sum->data_points[i], delta);
    } else if (m->data_case == OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM) {
        for (size_t i = 0; i < m->histogram->n_data_points; i++)
            if (m->histogram->data_points[i])
                add_histogram(&pc, m->histogram->data_points[i], delta);
    } else {
        for (size_t i = 0; i < m->summary->n_data_points; i++)
            if (m->summary->data_points[i]) add_summary(&pc, m->summary->data_points[i]);
    }
    free(name);
}

/* ---- resources ---- */

/* target_info{job, instance, the other resource attributes} 1, when there are others. */
static void target_info(prom_accum *a, const pc_resource *r, prom_tally *t)
{
    pc_prom_labels l = {0};
    size_t others = 0;
    for (size_t i = 0; r && i < r->n_attributes; i++)
        if (r->attributes[i] && r->attributes[i]->key &&
            !pc_prom_is_service_key(r->attributes[i]->key))
            pc_prom_labels_add_attrs(&l, &r->attributes[i], 1), others++;
    if (others) {
        pc_prom_job_instance(r, &l);
        point_ctx pc = {a, t, "target_info", "Target metadata", PC_PROM_GAUGE, &l};
        bool fresh;
        prom_series *s = series_get(&pc, NULL, 0, 0, &fresh);
        if (s) {
            s->value = 1;
            s->seen_ms = prom_now_ms();
        }
    }
    pc_prom_labels_free(&l);
}

typedef struct resource_ctx {
    prom_accum *a;
    prom_tally *t;
} resource_ctx;

static void add_scope_metric(const metric_t *m, pc_prom_labels *l, void *arg)
{
    resource_ctx *rc = arg;
    add_metric(rc->a, m, l, rc->t);
}

static void add_resource(prom_accum *a, const resource_metrics_t *rm, prom_tally *t)
{
    const pc_strmap *cl = &a->cfg->const_labels;
    target_info(a, rm->resource, t);
    resource_ctx rc = {a, t};
    pc_prom_each_metric(rm, cl->keys, cl->vals, cl->n, a->cfg->resource_to_labels, add_scope_metric,
                        &rc);
}

static void expire_cb(prom_accum *a, prom_series *s, void *arg)
{
    uint64_t now = *(uint64_t *)arg;
    if (now - s->seen_ms >= a->cfg->expiration_ms) series_delete(a, s);
}

/* A walk over every series: at most once a second from the batches (a scrape always walks). */
static void expire(prom_accum *a, bool always)
{
    uint64_t now = prom_now_ms();
    if (!always && now - a->expired_ms < 1000) return;
    a->expired_ms = now;
    each_series(a, expire_cb, &now);
}

void prom_accum_add(prom_accum *a, const pc_batch *b, prom_tally *t)
{
    const pc_metrics_request *req = (const pc_metrics_request *)b->msg;
    if (b->signal != PC_SIGNAL_METRICS || !req) return;
    pthread_mutex_lock(&a->mu);
    expire(a, false);
    for (size_t i = 0; i < req->n_resource_metrics; i++)
        if (req->resource_metrics[i]) add_resource(a, req->resource_metrics[i], t);
    t->series = a->series.n;
    pthread_mutex_unlock(&a->mu);
}

static int series_cmp(const void *x, const void *y)
{
    const prom_series *a = *(prom_series *const *)x, *b = *(prom_series *const *)y;
    int c = strcmp(a->fam->name, b->fam->name);
    return c ? c : strcmp(a->labels, b->labels);
}

typedef struct collect {
    prom_series **v;
    size_t n;
} collect;

static void collect_cb(prom_accum *a, prom_series *s, void *arg)
{
    (void)a;
    collect *c = arg;
    c->v[c->n++] = s;
}

void prom_accum_render(prom_accum *a, bool om, pc_buf *out, prom_tally *t)
{
    pthread_mutex_lock(&a->mu);
    expire(a, true);
    collect c = {pc_xmalloc((a->series.n + 1) * sizeof(prom_series *)), 0};
    each_series(a, collect_cb, &c);
    qsort(c.v, c.n, sizeof *c.v, series_cmp);
    prom_render_series(out, c.v, c.n, om, a->cfg->send_timestamps);
    t->series = a->series.n;
    pthread_mutex_unlock(&a->mu);
    free(c.v);
}
