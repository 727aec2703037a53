/* The profilemetrics connector's aggregate (src/connectors/profilemetrics/pm.h): batches built
 * here from plain arrays of stacks and values; what each series must read is worked out here from
 * those arrays (sums over the samples, a function once per sample for total), never from the
 * code under test. Checked: value sums, self/total per tracked function, sum of function.self
 * (tracked + other) == the value, at most top_n tracked and they are the window's top, points
 * only go up across windows, expiry (a series seen again starts anew), the max_series bound, leaf
 * frame types and the span share. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "connectors/profilemetrics/pm.h"
#include "pdata/dict.h"
#include "testcomp.h"
#include "testloop.h"

extern const pc_component_type pc_connector_profilemetrics;

#define NFN   24
#define DEPTH 6
#define NS    100

typedef struct sample_in {
    int fns[DEPTH]; /* leaf first */
    int depth;
    int64_t value;
    bool linked;
} sample_in;

static const char *fn_name(int i)
{
    static char names[NFN][16];
    snprintf(names[i], sizeof names[i], "fn%02d", i);
    return names[i];
}

static const char *const frame_kinds[] = {"go", "native", "kernel"};

/* A batch of one resource (service svc) with one cpu:nanoseconds profile of the samples; frame i
 * at the leaf is of kind frame_kinds[fn % 3]. */
static pc_batch *make_batch(const char *svc, const sample_in *in, size_t n)
{
    pc_batch *b = pc_batch_new();
    const char *k[] = {"service.name"};
    pc_scope_profiles *sp = pc_batch_add_resource(b, k, &svc, 1, "t", "1");
    pc_profile *p = pc_scope_add_profile(b, sp);
    pc_dict_builder *db = pc_dict_builder_from(b->arena, b->req->dictionary);
    p->sample_type = pc_arena_calloc(b->arena, 1, sizeof *p->sample_type);
    opentelemetry__proto__profiles__v1development__value_type__init(p->sample_type);
    p->sample_type->type_strindex = pc_dict_cstring(db, "cpu");
    p->sample_type->unit_strindex = pc_dict_cstring(db, "nanoseconds");
    p->samples = pc_arena_calloc(b->arena, n, sizeof(pc_sample *));
    uint8_t tid[16] = {1}, sid[8] = {2};
    int32_t link = pc_dict_link(db, tid, sid);
    for (size_t i = 0; i < n; i++) {
        int32_t locs[DEPTH];
        for (int d = 0; d < in[i].depth; d++) {
            int f = in[i].fns[d];
            pc_line line = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINE__INIT;
            pc_line *lp = &line;
            line.function_index = pc_dict_function(db, pc_dict_cstring(db, fn_name(f)), 0, 0, 0);
            int32_t attr = pc_dict_attr_str(db, "profile.frame.type", frame_kinds[f % 3],
                                            strlen(frame_kinds[f % 3]));
            pc_location loc = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
            loc.n_lines = 1;
            loc.lines = &lp;
            loc.address = 0x1000 + (uint64_t)f;
            loc.n_attribute_indices = 1;
            loc.attribute_indices = &attr;
            locs[d] = pc_dict_location(db, &loc);
        }
        pc_sample *s = pc_arena_calloc(b->arena, 1, sizeof *s);
        opentelemetry__proto__profiles__v1development__sample__init(s);
        s->stack_index = pc_dict_stack(db, locs, (size_t)in[i].depth);
        s->values = pc_arena_calloc(b->arena, 1, sizeof(int64_t));
        s->values[0] = in[i].value;
        s->n_values = 1;
        s->link_index = in[i].linked ? link : 0;
        p->samples[p->n_samples++] = s;
    }
    b->req->dictionary = pc_dict_builder_finish(db);
    pc_dict_builder_free(db);
    return b;
}

/* Samples skewed toward low function numbers (so a top N exists), with recursion (a function
 * twice in a stack). */
static void random_samples(sample_in *out, size_t n, unsigned *seed, int hot)
{
    for (size_t i = 0; i < n; i++) {
        out[i].depth = 1 + (int)(rand_r(seed) % DEPTH);
        for (int d = 0; d < out[i].depth; d++) {
            int r = (int)(rand_r(seed) % NFN);
            out[i].fns[d] = d == 0 && rand_r(seed) % 2 ? hot : r % (1 + (int)(rand_r(seed) % NFN));
        }
        if (out[i].depth > 2) out[i].fns[2] = out[i].fns[0]; /* recursion */
        out[i].value = 10000000 * (1 + (int64_t)(rand_r(seed) % 7));
        out[i].linked = rand_r(seed) % 3 == 0;
    }
}

/* What the samples add up to, worked out here. */
typedef struct expect {
    int64_t value, self[NFN], total[NFN], frames[3], linked[2];
} expect;

static void expect_add(expect *e, const sample_in *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        e->value += in[i].value;
        e->linked[in[i].linked] += in[i].value;
        if (in[i].depth == 0) continue; /* no function: its self is other's */
        e->self[in[i].fns[0]] += in[i].value;
        e->frames[in[i].fns[0] % 3] += in[i].value;
        bool seen[NFN] = {0};
        for (int d = 0; d < in[i].depth; d++)
            if (!seen[in[i].fns[d]]) {
                seen[in[i].fns[d]] = true;
                e->total[in[i].fns[d]] += in[i].value;
            }
    }
}

/* ---- reading the emitted metrics ---- */

typedef Opentelemetry__Proto__Metrics__V1__Metric metric_t;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint point_t;

static const metric_t *find_metric(const pc_batch *b, const char *svc, const char *name)
{
    const pc_metrics_request *r = (const pc_metrics_request *)b->msg;
    for (size_t i = 0; i < r->n_resource_metrics; i++) {
        const Opentelemetry__Proto__Metrics__V1__ResourceMetrics *rm = r->resource_metrics[i];
        const char *s = NULL;
        for (size_t a = 0; a < rm->resource->n_attributes; a++)
            if (!strcmp(rm->resource->attributes[a]->key, "service.name"))
                s = rm->resource->attributes[a]->value->string_value;
        if (!s || strcmp(s, svc)) continue;
        for (size_t m = 0; m < rm->scope_metrics[0]->n_metrics; m++)
            if (!strcmp(rm->scope_metrics[0]->metrics[m]->name, name))
                return rm->scope_metrics[0]->metrics[m];
    }
    return NULL;
}

/* Seconds back to nanoseconds (the test's values are multiples of 10 ms). */
static int64_t ns(const point_t *p)
{
    return (int64_t)(p->as_double * 1e9 + (p->as_double >= 0 ? 0.5 : -0.5));
}

static const point_t *point_with(const metric_t *m, const char *k, const char *v)
{
    for (size_t i = 0; m && i < m->sum->n_data_points; i++) {
        const point_t *p = m->sum->data_points[i];
        if (p->n_attributes == 1 && !strcmp(p->attributes[0]->key, k) &&
            !strcmp(p->attributes[0]->value->string_value, v))
            return p;
    }
    return NULL;
}

static pm_cfg base_cfg(void)
{
    static char *attrs[] = {"service.name"};
    pm_cfg c = {.ns = "profile",
                .flush_ms = 1000,
                .expiration_ms = 0,
                .max_series = 1000,
                .functions = true,
                .frame_types = true,
                .spans = true,
                .top_n = 5};
    c.resource_attributes.v = attrs;
    c.resource_attributes.n = 1;
    return c;
}

static void feed(pm_state *s, const char *svc, const sample_in *in, size_t n, uint64_t now)
{
    pc_batch *b = make_batch(svc, in, n);
    pm_part p = {0};
    pm_part_fill(&p, s->cfg, b);
    CHECK_EQ_INT(p.samples, n);
    pm_state_add(s, &p, now, now * 1000000);
    pm_part_free(&p);
    pc_batch_unref(b);
}

/* The series of svc read what e says; returns the number of tracked functions. */
static size_t check_group(const pc_batch *b, const char *svc, const expect *e, size_t top_n,
                          bool whole)
{
    const metric_t *v = find_metric(b, svc, "profile.cpu");
    CHECK(v && v->sum->is_monotonic && !strcmp(v->unit, "s"));
    if (!v) return 0;
    CHECK_EQ_INT(ns(v->sum->data_points[0]), e->value);
    const metric_t *self = find_metric(b, svc, "profile.cpu.function.self");
    const metric_t *total = find_metric(b, svc, "profile.cpu.function.total");
    CHECK(self && total);
    if (!self || !total) return 0;
    int64_t sum = 0;
    size_t tracked = 0;
    for (size_t i = 0; i < self->sum->n_data_points; i++)
        sum += ns(self->sum->data_points[i]);
    CHECK_EQ_INT(sum, e->value); /* tracked + other == the value */
    for (int f = 0; f < NFN; f++) {
        const point_t *ps = point_with(self, "function", fn_name(f));
        const point_t *pt = point_with(total, "function", fn_name(f));
        CHECK((ps == NULL) == (pt == NULL));
        if (!ps || !pt) continue;
        tracked++;
        if (!whole) continue;
        CHECK_EQ_INT(ns(ps), e->self[f]);
        CHECK_EQ_INT(ns(pt), e->total[f]);
    }
    CHECK(tracked <= top_n);
    CHECK(point_with(self, "function", "other") != NULL);
    const metric_t *ft = find_metric(b, svc, "profile.cpu.frame_type");
    for (int k = 0; ft && k < 3; k++) {
        const point_t *p = point_with(ft, "frame.type", frame_kinds[k]);
        CHECK_EQ_INT(p ? ns(p) : 0, e->frames[k]);
    }
    const metric_t *sp = find_metric(b, svc, "profile.cpu.span");
    if (!sp) return tracked;
    CHECK_EQ_INT(ns(point_with(sp, "span.linked", "true")), e->linked[1]);
    CHECK_EQ_INT(ns(point_with(sp, "span.linked", "false")), e->linked[0]);
    return tracked;
}

/* One window: the tracked functions are the window's top N by self. */
static void test_one_window(void)
{
    pm_cfg cfg = base_cfg();
    pm_state s = {.cfg = &cfg, .log_id = "t"};
    unsigned seed = 7;
    sample_in in[NS];
    expect ea = {0}, eb = {0};
    int64_t in_nostack = 0;
    for (int k = 0; k < 3; k++) {
        random_samples(in, NS, &seed, 3);
        feed(&s, "a", in, NS, 10);
        expect_add(&ea, in, NS);
    }
    random_samples(in, NS, &seed, 3);
    in[0].depth = in[1].depth = 0; /* samples without a stack */
    in_nostack = in[0].value + in[1].value;
    feed(&s, "a", in, NS, 10);
    expect_add(&ea, in, NS);
    random_samples(in, NS, &seed, 11);
    feed(&s, "b", in, NS, 10);
    expect_add(&eb, in, NS);
    pc_batch *b = pm_state_flush(&s, 20, 20000000);
    CHECK(b != NULL);
    CHECK_EQ_INT(check_group(b, "a", &ea, 5, true), 5);
    CHECK_EQ_INT(check_group(b, "b", &eb, 5, true), 5);
    /* the hot leaf is tracked; no untracked function has more self than a tracked one */
    const metric_t *self = find_metric(b, "a", "profile.cpu.function.self");
    CHECK(point_with(self, "function", fn_name(3)) != NULL);
    const point_t *unk =
        point_with(find_metric(b, "a", "profile.cpu.frame_type"), "frame.type", "unknown");
    CHECK(unk && ns(unk) == in_nostack);
    CHECK(find_metric(b, "a", "profile.cpu.span") != NULL);
    int64_t min_tracked = INT64_MAX, max_untracked = 0;
    for (int f = 0; f < NFN; f++) {
        if (point_with(self, "function", fn_name(f)))
            min_tracked = ea.self[f] < min_tracked ? ea.self[f] : min_tracked;
        else
            max_untracked = ea.self[f] > max_untracked ? ea.self[f] : max_untracked;
    }
    CHECK(min_tracked >= max_untracked);
    CHECK_EQ_INT(s.series, 2 * (1 + 1 + 2 + 2 * 5 + 3) + 1); /* + a's frame type unknown */
    pc_batch_unref(b);
    pm_state_free(&s);
}

/* Windows after the first: a function tracked from window w on reads its self and total since
 * w; other reads the rest; cumulative points only go up. */
static void test_windows_cumulative(void)
{
    pm_cfg cfg = base_cfg();
    pm_state s = {.cfg = &cfg, .log_id = "t"};
    unsigned seed = 11;
    sample_in in[NS];
    expect e = {0};
    int64_t acc_self[NFN] = {0}, acc_total[NFN] = {0};
    bool was[NFN] = {0};
    double last_other = 0, last_value = 0;
    for (int w = 0; w < 4; w++) {
        random_samples(in, NS, &seed, w * 5 % NFN); /* the hot function moves */
        uint64_t t = 100 * (uint64_t)w;
        feed(&s, "a", in, NS, t + 1);
        expect win = {0};
        expect_add(&e, in, NS);
        expect_add(&win, in, NS);
        pc_batch *b = pm_state_flush(&s, t + 50, (t + 50) * 1000000);
        check_group(b, "a", &e, 5, false);
        const metric_t *self = find_metric(b, "a", "profile.cpu.function.self");
        const metric_t *total = find_metric(b, "a", "profile.cpu.function.total");
        int64_t tracked_self = 0;
        for (int f = 0; f < NFN; f++) {
            const point_t *ps = point_with(self, "function", fn_name(f));
            CHECK(!was[f] || ps); /* no expiry here: once tracked, kept */
            if (!ps) continue;
            acc_self[f] = (was[f] ? acc_self[f] : 0) + win.self[f];
            acc_total[f] = (was[f] ? acc_total[f] : 0) + win.total[f];
            was[f] = true;
            CHECK_EQ_INT(ns(ps), acc_self[f]);
            CHECK_EQ_INT(ns(point_with(total, "function", fn_name(f))), acc_total[f]);
            tracked_self += acc_self[f];
        }
        const metric_t *v = find_metric(b, "a", "profile.cpu");
        const point_t *o = point_with(self, "function", "other");
        CHECK_EQ_INT(o ? ns(o) : -1, e.value - tracked_self);
        CHECK(v->sum->data_points[0]->as_double >= last_value);
        CHECK(o && o->as_double >= last_other);
        last_value = v->sum->data_points[0]->as_double;
        last_other = o ? o->as_double : 0;
        pc_batch_unref(b);
    }
    pm_state_free(&s);
}

/* A series not added to for metrics_expiration is dropped; seen again it starts anew. */
static void test_expiry(void)
{
    pm_cfg cfg = base_cfg();
    cfg.expiration_ms = 1000;
    pm_state s = {.cfg = &cfg, .log_id = "t"};
    unsigned seed = 3;
    sample_in in[NS];
    random_samples(in, NS, &seed, 1);
    feed(&s, "a", in, NS, 100);
    pc_batch *b = pm_state_flush(&s, 500, 500000000);
    uint64_t start = find_metric(b, "a", "profile.cpu")->sum->data_points[0]->start_time_unix_nano;
    pc_batch_unref(b);
    CHECK(s.series > 0);
    CHECK(pm_state_flush(&s, 1200, 1200000000) == NULL); /* 1100 ms without data */
    CHECK_EQ_INT(s.series, 0);
    CHECK(s.expired > 0);
    expect e = {0};
    random_samples(in, NS, &seed, 2);
    feed(&s, "a", in, NS, 1300);
    expect_add(&e, in, NS);
    b = pm_state_flush(&s, 1400, 1400000000);
    check_group(b, "a", &e, 5, true); /* only what came after */
    CHECK(find_metric(b, "a", "profile.cpu")->sum->data_points[0]->start_time_unix_nano > start);
    pc_batch_unref(b);
    pm_state_free(&s);
}

/* max_series: never more held; what has no room is counted; a function without room adds to
 * other, so the invariant holds. */
static void test_max_series(void)
{
    pm_cfg cfg = base_cfg();
    cfg.spans = cfg.frame_types = false;
    cfg.max_series = 2 + 2 + 2 * 3; /* group a (value + other), group b, 3 functions */
    pm_state s = {.cfg = &cfg, .log_id = "t"};
    unsigned seed = 5;
    sample_in in[NS];
    expect ea = {0}, eb = {0};
    random_samples(in, NS, &seed, 1);
    feed(&s, "a", in, NS, 1);
    expect_add(&ea, in, NS);
    random_samples(in, NS, &seed, 2);
    feed(&s, "b", in, NS, 1);
    expect_add(&eb, in, NS);
    pc_batch *b = pm_state_flush(&s, 10, 10000000);
    CHECK_EQ_INT(s.series, cfg.max_series);
    size_t tracked = check_group(b, "a", &ea, 5, true) + check_group(b, "b", &eb, 5, true);
    CHECK_EQ_INT(tracked, 3);
    CHECK(find_metric(b, "a", "profile.cpu.frame_type") == NULL); /* disabled */
    pc_batch_unref(b);
    CHECK_EQ_INT(s.dropped, 2 * 7); /* the 7 functions beyond the 3 */
    feed(&s, "c", in, NS, 20);      /* no room for a third group */
    b = pm_state_flush(&s, 30, 30000000);
    CHECK(s.series <= (uint64_t)cfg.max_series);
    CHECK_EQ_INT(s.dropped, 2 * 7 + 2);
    CHECK(find_metric(b, "c", "profile.cpu") == NULL);
    pc_batch_unref(b);
    pm_state_free(&s);
}

static int got_metrics(void *arg)
{
    return ((tc_rec *)arg)->n > 0;
}

/* The type as the service runs it: a batch is answered OK once added up (the connector ends its
 * profiles pipeline), and the timer sends the metrics to the router's pipelines. */
static void test_component(void)
{
    CHECK(tc_config_error(&pc_connector_profilemetrics, "connectors", "max_series: 0\n"));
    CHECK(tc_config_error(&pc_connector_profilemetrics, "connectors", "functions: {top_n: 0}\n"));
    CHECK(tc_config_error(&pc_connector_profilemetrics, "connectors", "nope: 1\n"));
    tc_rec rec;
    tc_rec_init(&rec);
    char *ids[] = {"metrics/a"};
    pc_consumer *cons[] = {&rec.base};
    pc_router router = {1, ids, cons, &rec.base, PC_SIGNAL_PROFILES, PC_SIGNAL_METRICS};
    pc_error err = {0};
    pc_component *c = tc_new(&pc_connector_profilemetrics, "connectors",
                             "metrics_flush_interval: 100ms\nfunctions: {top_n: 3}\n",
                             uv_default_loop(), NULL, &err);
    CHECK(c != NULL);
    if (!c) return;
    c->router = &router;
    CHECK_EQ_INT(pc_connector_profilemetrics.start(c, &err), 0);
    unsigned seed = 9;
    sample_in in[NS];
    expect e = {0};
    random_samples(in, NS, &seed, 4);
    expect_add(&e, in, NS);
    tc_up up = {0};
    pc_connector_profilemetrics.consume(c, make_batch("svc", in, NS), tc_up_done, &up);
    CHECK(wait_until(c->loop, got_metrics, &rec, 10000));
    CHECK_EQ_INT(up.calls, 1);
    CHECK_EQ_INT(up.st, PC_OK);
    CHECK(rec.n > 0 && rec.got[rec.n - 1]->signal == PC_SIGNAL_METRICS);
    if (rec.n) CHECK_EQ_INT(check_group(rec.got[rec.n - 1], "svc", &e, 3, true), 3);
    tc_shutdown(c);
    tc_free(c);
    tc_rec_clear(&rec);
}

int main(void)
{
    test_one_window();
    test_windows_cumulative();
    test_expiry();
    test_max_series();
    test_component();
    return check_report();
}
