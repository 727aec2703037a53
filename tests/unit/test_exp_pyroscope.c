/* Exporter "pyroscope" driven directly against an in-process recording HTTP server: ingest
 * query and name syntax, push body (PushRequest -> gzip pprof), label rules and limits, tenant
 * and auth headers, status mapping, config errors. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "payload.h"
#include "testcomp.h"
#include "testdata.h"
#include "testhttp.h"
#include "testloop.h"
#include "base/gzip.h"
#include "net/http_server.h"
#include "pdata/pdata.h"
#include "formats/pprof.h"
#include "sdk/component.h"
#include "pprof.pb-c.h"
#include "pyroscope_push.pb-c.h"

extern const pc_component_type pc_exporter_pyroscope;

static uv_loop_t *loop;

/* The backend: records every request; answers 200 without a body, or ts->status with a
 * Connect-style JSON error. */
static void backend_start(th_server *ts)
{
    th_start(ts, loop, (pc_http_server_opts){0}, NULL);
    ts->err_ctype = "application/json";
    ts->err_body = "{\"code\":\"x\",\"message\":\"no\"}";
}

/* Query parameter from a raw query string, percent-decoded (malloc'd); NULL if absent. */
static char *query_param(const char *q, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = q; p && *p;) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        if (len > nl && !strncmp(p, name, nl) && p[nl] == '=') {
            char *out = malloc(len), *o = out;
            for (const char *s = p + nl + 1; s < p + len; s++) {
                if (*s == '%' && s + 2 < p + len + 1) {
                    char hx[3] = {s[1], s[2], 0};
                    *o++ = (char)strtol(hx, NULL, 16);
                    s += 2;
                } else {
                    *o++ = *s == '+' ? ' ' : *s;
                }
            }
            *o = 0;
            return out;
        }
        p = amp ? amp + 1 : NULL;
    }
    return NULL;
}

/* ---- the exporter under test ---- */

static pc_component *exporter_new(const char *yaml_in, char *errout, size_t errlen)
{
    /* status mapping is observed directly: no queue, no retries (sdk/sender.c has those) */
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "%s%s", yaml_in,
             strstr(yaml_in, "sending_queue") ? ""
                                              : "sending_queue:\n  enabled: false\n"
                                                "retry_on_failure:\n  enabled: false\n");
    pc_error err = {0};
    pc_component *c = tc_new(&pc_exporter_pyroscope, "exporters", yaml, loop, NULL, &err);
    if (!c) {
        snprintf(errout, errlen, "%s", err.msg);
        return NULL;
    }
    pc_error e = {0};
    CHECK_EQ_INT(c->type->start(c, &e), 0);
    return c;
}

/* The exporter for a test against ts: NULL (a failed check, ts stopped) if yaml is refused. */
static pc_component *exporter_for(th_server *ts, const char *yaml)
{
    char err[512] = "";
    pc_component *c = exporter_new(yaml, err, sizeof err);
    CHECK(c != NULL);
    if (!c) {
        fprintf(stderr, "%s\n", err);
        th_stop(ts);
    }
    return c;
}

static int shutdown_flag;
static void on_shut(pc_component *c)
{
    (void)c;
    shutdown_flag = 1;
}

static void exporter_free(pc_component *c)
{
    shutdown_flag = 0;
    c->type->shutdown(c, on_shut);
    CHECK(wait_until(loop, int_set, &shutdown_flag, 10000));
    tc_free(c);
}

typedef struct outcome {
    int done;
    int st;
    char msg[512];
} outcome;

static void on_done(void *arg, int st, const char *msg)
{
    outcome *o = arg;
    o->done = 1;
    o->st = st;
    snprintf(o->msg, sizeof o->msg, "%s", msg ? msg : "");
}

static int send_batch(pc_component *c, pc_batch *b, outcome *o)
{
    memset(o, 0, sizeof *o);
    c->type->consume(c, b, on_done, o);
    CHECK(wait_until(loop, int_set, &o->done, 15000));
    return o->st;
}

/* ---- input batches ---- */

/* Resource attributes of every form (plain, strindex, int, bool, double, array), one CPU
 * profile (cpu/nanoseconds, period cpu) with a time, and a second resource without
 * service.name holding an alloc_space profile without time. */
static const char *const batch_json =
    "{\"resourceProfiles\":["
    "{\"resource\":{\"attributes\":["
    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"my app\"}},"
    "{\"key\":\"k8s.pod.name\",\"value\":{\"stringValue\":\"pod-1\"}},"
    "{\"keyStrindex\":5,\"value\":{\"stringValueStrindex\":6}},"
    "{\"key\":\"process.pid\",\"value\":{\"intValue\":\"42\"}},"
    "{\"key\":\"is.debug\",\"value\":{\"boolValue\":true}},"
    "{\"key\":\"__hidden\",\"value\":{\"stringValue\":\"x\"}},"
    "{\"key\":\"odd-key/x\",\"value\":{\"stringValue\":\"a,b}c\"}},"
    "{\"key\":\"list\",\"value\":{\"arrayValue\":{\"values\":[{\"stringValue\":\"one\"}]}}},"
    "{\"key\":\"empty\",\"value\":{\"stringValue\":\"\"}},"
    "{\"key\":\"9lives\",\"value\":{\"stringValue\":\"cat\"}}]},"
    "\"scopeProfiles\":[{\"scope\":{\"name\":\"sc\",\"version\":\"1\"},"
    "\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"periodType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"period\":\"10000000\","
    "\"timeUnixNano\":\"1700000000500000000\",\"durationNano\":\"10000000000\","
    "\"samples\":[{\"stackIndex\":1,\"values\":[\"30\"]},{\"stackIndex\":2,\"values\":[20]}]}]}]},"
    "{\"resource\":{\"attributes\":[{\"key\":\"host.name\",\"value\":{\"stringValue\":\"b2\"}}]},"
    "\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":7,\"unitStrindex\":8},"
    "\"samples\":[{\"stackIndex\":1,\"values\":[\"64\"]}]}]}]}],"
    "\"dictionary\":{"
    "\"mappingTable\":[{}],"
    "\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1,\"line\":\"12\"}]},"
    "{\"lines\":[{\"functionIndex\":2,\"line\":3}]}],"
    "\"functionTable\":[{},{\"nameStrindex\":3},{\"nameStrindex\":4}],"
    "\"linkTable\":[{}],"
    "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"main\",\"work\",\"host.name\",\"box1\","
    "\"alloc_space\",\"bytes\"],"
    "\"attributeTable\":[{}],"
    "\"stackTable\":[{},{\"locationIndices\":[1]},{\"locationIndices\":[2,1]}]}}";

/* go-cpu (service go-cpu-app) and go-heap (service go-heap-app) in one batch. */
static pc_batch *go_batch(void)
{
    pc_batch *b = NULL;
    const char *files[] = {"go-cpu.pb.gz", "go-heap.pb.gz"};
    const char *svcs[] = {"go-cpu-app", "go-heap-app"};
    for (int i = 0; i < 2; i++) {
        pc_format_attr attrs[] = {{"service.name", svcs[i]}, {"deployment.environment", "test"}};
        pc_format_opts opts = {.attrs = attrs, .n_attrs = 2};
        int rc = read_pprof_batch(files[i], &opts, &b);
        CHECK_EQ_INT(rc, 0);
        if (rc && !b) exit(1);
    }
    return b;
}

/* The pprof the exporter sends: gzip, decoded independently. */
static pp_profile *sent_pprof(const uint8_t *data, size_t len)
{
    CHECK(pc_is_gzip(data, len));
    return decode_pprof(data, len);
}

static const char *series_label(const Push__V1__RawProfileSeries *s, const char *name)
{
    for (size_t i = 0; i < s->n_labels; i++)
        if (!strcmp(s->labels[i]->name, name)) return s->labels[i]->value;
    return NULL;
}

static int uuid_v4_ok(const char *s)
{
    if (!s || strlen(s) != 36) return 0;
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return 0;
        } else if (!strchr("0123456789abcdef", s[i])) {
            return 0;
        }
    }
    return s[14] == '4' && strchr("89ab", s[19]) != NULL;
}

/* ---- tests ---- */

static void test_config_errors(void)
{
    char err[512];
    const struct {
        const char *yaml, *want;
    } cases[] = {
        {"endpoint: https://pyroscope:4040\ntls:\n  ca_file: /nonexistent/ca.pem\n",
         "tls::ca_file"},
        {"protocol: push\n", "endpoint is required"},
        {"endpoint: http://h:1\nprotocol: grpc\n", "not one of"},
        {"endpoint: http://h:1\nexternal_labels:\n  bad-name: x\n", "external_labels::bad-name"},
        {"endpoint: http://h:1\nexternal_labels:\n  __x: x\n", "external_labels::__x"},
        {"endpoint: http://h:1\nmax_label_names: 1\n", "max_label_names must be at least 2"},
        {"endpoint: http://h:1\nbasic_auth:\n  password: p\n", "username is required"},
        {"endpoint: http://h:1\nbasic_auth:\n  usernme: p\n", "did you mean \"username\""},
        {"endpoint: http://h:1\ntenant_id: t\nheaders:\n  X-Scope-OrgID: a\n", "conflicts"},
        {"endpoint: http://h:1\ncompression: gzip\n", "unknown key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = 0;
        pc_component *c = exporter_new(cases[i].yaml, err, sizeof err);
        CHECK(c == NULL);
        if (c) exporter_free(c);
        CHECK_CONTAINS(err, cases[i].want);
    }
}

static void test_ingest(void)
{
    th_server ts;
    backend_start(&ts);
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "endpoint: http://127.0.0.1:%d/base\nprotocol: ingest\ntenant_id: acme\n"
             "basic_auth:\n  username: user\n  password: pass\n"
             "headers:\n  X-Extra: yes\n"
             "external_labels:\n  env: prod\n  host_name: override\n",
             ts.port);
    pc_component *c = exporter_for(&ts, yaml);
    if (!c) return;
    outcome o;
    CHECK_EQ_INT(send_batch(c, decode_json_or_die(batch_json), &o), PC_OK);
    CHECK_EQ_INT(ts.n, 2);
    for (int i = 0; i < 2 && i < ts.n; i++) {
        th_rec *r = &ts.recs[i];
        CHECK_STR(r->method, "POST");
        CHECK_STR(r->path, "/base/ingest");
        CHECK_STR(th_header(r, "content-type"), "application/octet-stream");
        CHECK_STR(th_header(r, "x-scope-orgid"), "acme");
        CHECK_STR(th_header(r, "authorization"), "Basic dXNlcjpwYXNz"); /* user:pass */
        char *fmt = query_param(r->query, "format"), *spy = query_param(r->query, "spyName");
        CHECK_STR(fmt, "pprof");
        CHECK_STR(spy, "profcol");
        free(fmt);
        free(spy);
        pp_profile *p = sent_pprof(r->body, r->body_len);
        CHECK(p != NULL);
        if (p) {
            CHECK_EQ_INT(p->n_sample_type, 1);
            CHECK_STR(pstr(p, p->sample_type[0]->type), i == 0 ? "cpu" : "alloc_space");
            perftools__profiles__profile__free_unpacked(p, NULL);
        }
    }
    /* requests may complete in any order: find them by name */
    int cpu = -1, alloc = -1;
    for (int i = 0; i < ts.n && i < 2; i++) {
        char *name = query_param(ts.recs[i].query, "name");
        if (name && !strncmp(name, "my_app{", 7)) cpu = i;
        if (name && !strncmp(name, "unknown_service{", 16)) alloc = i;
        free(name);
    }
    CHECK(cpu >= 0 && alloc >= 0);
    if (cpu >= 0) {
        char *name = query_param(ts.recs[cpu].query, "name");
        /* sorted; dots and other characters -> '_'; __hidden and the empty value dropped; the
         * array's one element kept; ',' and '}' in a value -> '_'; external labels override */
        CHECK_STR(name, "my_app{_9lives=cat,env=prod,host_name=override,is_debug=true,"
                        "k8s_pod_name=pod-1,list=one,odd_key_x=a_b_c,process_pid=42}");
        free(name);
        char *from = query_param(ts.recs[cpu].query, "from");
        char *until = query_param(ts.recs[cpu].query, "until");
        CHECK_STR(from, "1700000000");
        CHECK_STR(until, "1700000010");
        free(from);
        free(until);
        /* the raw query: name is percent-encoded ({ } , = are not sent bare) */
        CHECK(strchr(ts.recs[cpu].query, '{') == NULL);
        CHECK(strchr(ts.recs[cpu].query, ',') == NULL);
    }
    if (alloc >= 0) {
        char *name = query_param(ts.recs[alloc].query, "name");
        CHECK_STR(name, "unknown_service{env=prod,host_name=override}");
        free(name);
        char *from = query_param(ts.recs[alloc].query, "from");
        char *until = query_param(ts.recs[alloc].query, "until");
        long long f = from ? atoll(from) : 0, u = until ? atoll(until) : 0;
        long long now = (long long)time(NULL);
        CHECK(u - f == 10);
        CHECK(u >= now - 60 && u <= now + 60);
        free(from);
        free(until);
    }
    exporter_free(c);
    th_stop(&ts);
}

static void test_push_go(void)
{
    th_server ts;
    backend_start(&ts);
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "endpoint: http://127.0.0.1:%d\ntenant_id: fallback\ntenant_from_request: true\n",
             ts.port);
    pc_component *c = exporter_for(&ts, yaml);
    if (!c) return;
    pc_batch *b = go_batch();
    pc_batch_set_meta(b, "x-scope-orgid", "team-a");
    outcome o;
    CHECK_EQ_INT(send_batch(c, b, &o), PC_OK);
    CHECK_EQ_INT(ts.n, 1);
    if (ts.n >= 1) {
        th_rec *r = &ts.recs[0];
        CHECK_STR(r->method, "POST");
        CHECK_STR(r->path, "/push.v1.PusherService/Push");
        CHECK_STR(th_header(r, "content-type"), "application/proto");
        CHECK_STR(th_header(r, "connect-protocol-version"), "1");
        CHECK_STR(th_header(r, "x-scope-orgid"), "team-a");
        CHECK(th_header(r, "authorization") == NULL);
        Push__V1__PushRequest *pr = push__v1__push_request__unpack(NULL, r->body_len, r->body);
        CHECK(pr != NULL);
        if (pr) {
            CHECK_EQ_INT(pr->n_series, 2);
            for (size_t i = 0; i < pr->n_series; i++) {
                const Push__V1__RawProfileSeries *s = pr->series[i];
                for (size_t k = 1; k < s->n_labels; k++)
                    CHECK(strcmp(s->labels[k - 1]->name, s->labels[k]->name) < 0);
                CHECK_STR(series_label(s, "__name__"), i == 0 ? "process_cpu" : "memory");
                CHECK_STR(series_label(s, "service_name"), i == 0 ? "go-cpu-app" : "go-heap-app");
                CHECK_STR(series_label(s, "deployment_environment"), "test");
                CHECK_EQ_INT(s->n_samples, 1);
                if (s->n_samples != 1) continue;
                CHECK(uuid_v4_ok(s->samples[0]->id));
                pp_profile *p =
                    sent_pprof(s->samples[0]->raw_profile.data, s->samples[0]->raw_profile.len);
                CHECK(p != NULL);
                if (!p) continue;
                if (i == 0) {
                    CHECK_EQ_INT(p->n_sample_type, 2);
                    if (p->n_sample_type == 2) {
                        CHECK_STR(pstr(p, p->sample_type[0]->type), "samples");
                        CHECK_STR(pstr(p, p->sample_type[1]->type), "cpu");
                    }
                } else {
                    CHECK_EQ_INT(p->n_sample_type, 4);
                    if (p->n_sample_type == 4) {
                        CHECK_STR(pstr(p, p->sample_type[0]->type), "alloc_objects");
                        CHECK_STR(pstr(p, p->sample_type[3]->type), "inuse_space");
                    }
                }
                CHECK(p->n_sample > 0);
                CHECK(p->n_function > 0);
                perftools__profiles__profile__free_unpacked(p, NULL);
            }
            if (pr->n_series == 2)
                CHECK(strcmp(pr->series[0]->samples[0]->id, pr->series[1]->samples[0]->id) != 0);
            push__v1__push_request__free_unpacked(pr, NULL);
        }
    }
    /* without the meta, tenant_id is the fallback */
    CHECK_EQ_INT(send_batch(c, go_batch(), &o), PC_OK);
    CHECK_EQ_INT(ts.n, 2);
    if (ts.n >= 2) CHECK_STR(th_header(&ts.recs[1], "x-scope-orgid"), "fallback");
    /* an empty batch sends nothing and succeeds */
    CHECK_EQ_INT(send_batch(c, pc_batch_new(), &o), PC_OK);
    CHECK_EQ_INT(ts.n, 2);
    exporter_free(c);
    th_stop(&ts);
}

/* A receiver's own name for a profile (the JFR decoder's pyroscope.profile.name, with
 * pyroscope.jfr_event) wins over the heuristic: ThreadPark's contentions are `block`, where the
 * sample type alone says mutex. A profile without them keeps the heuristic. */
static void test_given_name(void)
{
    static const char *const json =
        "{\"resourceProfiles\":[{\"resource\":{\"attributes\":["
        "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"javaapp\"}}]},"
        "\"scopeProfiles\":[{\"profiles\":["
        "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
        "\"periodType\":{\"typeStrindex\":3,\"unitStrindex\":2},\"attributeIndices\":[1,2],"
        "\"samples\":[{\"stackIndex\":1,\"values\":[\"3\"]}]},"
        "{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
        "\"periodType\":{\"typeStrindex\":3,\"unitStrindex\":2},"
        "\"samples\":[{\"stackIndex\":1,\"values\":[\"5\"]}]}]}]}],"
        "\"dictionary\":{\"mappingTable\":[{}],"
        "\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}]}],"
        "\"functionTable\":[{},{\"nameStrindex\":4}],\"linkTable\":[{}],"
        "\"stringTable\":[\"\",\"contentions\",\"count\",\"block\",\"park\","
        "\"pyroscope.profile.name\",\"pyroscope.jfr_event\"],"
        "\"attributeTable\":[{},{\"keyStrindex\":5,\"value\":{\"stringValue\":\"block\"}},"
        "{\"keyStrindex\":6,\"value\":{\"stringValue\":\"itimer\"}}],"
        "\"stackTable\":[{},{\"locationIndices\":[1]}]}}";
    th_server ts;
    backend_start(&ts);
    char yaml[256];
    snprintf(yaml, sizeof yaml, "endpoint: http://127.0.0.1:%d\n", ts.port);
    pc_component *c = exporter_for(&ts, yaml);
    if (!c) return;
    outcome o;
    CHECK_EQ_INT(send_batch(c, decode_json_or_die(json), &o), PC_OK);
    CHECK_EQ_INT(ts.n, 1);
    Push__V1__PushRequest *pr =
        ts.n ? push__v1__push_request__unpack(NULL, ts.recs[0].body_len, ts.recs[0].body) : NULL;
    CHECK(pr && pr->n_series == 2);
    if (pr && pr->n_series == 2) {
        CHECK_STR(series_label(pr->series[0], "__name__"), "block");
        CHECK_STR(series_label(pr->series[0], "jfr_event"), "itimer");
        CHECK_STR(series_label(pr->series[1], "__name__"), "mutex");
        CHECK(series_label(pr->series[1], "jfr_event") == NULL);
    }
    if (pr) push__v1__push_request__free_unpacked(pr, NULL);
    exporter_free(c);
    th_stop(&ts);
}

static void test_limits(void)
{
    th_server ts;
    backend_start(&ts);
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "endpoint: http://127.0.0.1:%d\nmax_label_names: 5\nmax_label_value_length: 8\n"
             "max_label_name_length: 10\nexternal_labels:\n  zz: 1\n",
             ts.port);
    pc_component *c = exporter_for(&ts, yaml);
    if (!c) return;
    /* "é" is 2 bytes: an 8-byte cut must not split it */
    const char *json =
        "{\"resourceProfiles\":[{\"resource\":{\"attributes\":["
        "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"svc\"}},"
        "{\"key\":\"a.b\",\"value\":{\"stringValue\":\"abcdefgh-long\"}},"
        "{\"key\":\"a_b\",\"value\":{\"stringValue\":\"dup\"}},"
        "{\"key\":\"c\",\"value\":{\"stringValue\":\"1234567\\u00e9\"}},"
        "{\"key\":\"d\",\"value\":{\"stringValue\":\"x\"}},"
        "{\"key\":\"e\",\"value\":{\"stringValue\":\"y\"}},"
        "{\"key\":\"a.very.long.name\",\"value\":{\"stringValue\":\"z\"}}]},"
        "\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,"
        "\"unitStrindex\":2},\"samples\":[{\"stackIndex\":1,\"values\":[\"5\"]}]}]}]}],"
        "\"dictionary\":{\"mappingTable\":[{}],\"locationTable\":[{},{\"lines\":[{"
        "\"functionIndex\":1}]}],\"functionTable\":[{},{\"nameStrindex\":3}],"
        "\"linkTable\":[{}],\"stringTable\":[\"\",\"goroutine\",\"count\",\"main\"],"
        "\"attributeTable\":[{}],\"stackTable\":[{},{\"locationIndices\":[1]}]}}";
    outcome o;
    CHECK_EQ_INT(send_batch(c, decode_json_or_die(json), &o), PC_OK);
    CHECK_EQ_INT(ts.n, 1);
    if (ts.n >= 1) {
        Push__V1__PushRequest *pr =
            push__v1__push_request__unpack(NULL, ts.recs[0].body_len, ts.recs[0].body);
        CHECK(pr && pr->n_series == 1);
        if (pr && pr->n_series == 1) {
            const Push__V1__RawProfileSeries *s = pr->series[0];
            /* __name__, service_name, zz fixed; of a_b, c, d, e the first two by name stay */
            CHECK_EQ_INT(s->n_labels, 5);
            CHECK_STR(series_label(s, "__name__"), "goroutines");
            CHECK_STR(series_label(s, "service_name"), "svc");
            CHECK_STR(series_label(s, "zz"), "1");
            CHECK_STR(series_label(s, "a_b"), "abcdefgh"); /* truncated; first of a.b/a_b */
            CHECK_STR(series_label(s, "c"), "1234567");    /* é not split */
            CHECK(series_label(s, "d") == NULL);
            CHECK(series_label(s, "e") == NULL);
            CHECK(series_label(s, "a_very_long_name") == NULL);
        }
        if (pr) push__v1__push_request__free_unpacked(pr, NULL);
    }
    exporter_free(c);
    th_stop(&ts);
}

static void test_status_mapping(void)
{
    th_server ts;
    backend_start(&ts);
    char yaml[512], err[512] = "";
    snprintf(yaml, sizeof yaml, "endpoint: http://127.0.0.1:%d\nprotocol: ingest\ntimeout: 5s\n",
             ts.port);
    pc_component *c = exporter_for(&ts, yaml);
    if (!c) return;
    outcome o;
    ts.status = 503;
    CHECK_EQ_INT(send_batch(c, decode_json_or_die(batch_json), &o), PC_EAGAIN);
    CHECK_CONTAINS(o.msg, "503");
    ts.status = 400;
    CHECK_EQ_INT(send_batch(c, decode_json_or_die(batch_json), &o), PC_EINVAL);
    CHECK_CONTAINS(o.msg, "400");
    ts.status = 429;
    CHECK_EQ_INT(send_batch(c, decode_json_or_die(batch_json), &o), PC_EBUSY);
    /* ingest: two requests, one fails: the worse outcome wins */
    ts.status = 200;
    th_clear(&ts);
    ts.status_first = 400;
    CHECK_EQ_INT(send_batch(c, decode_json_or_die(batch_json), &o), PC_EINVAL);
    ts.status = 503;
    th_clear(&ts);
    ts.status_first = 200;
    CHECK_EQ_INT(send_batch(c, decode_json_or_die(batch_json), &o), PC_EAGAIN);
    exporter_free(c);
    th_stop(&ts);

    /* nothing listens there any more: connection refused is retryable */
    int port = ts.port;
    snprintf(yaml, sizeof yaml, "endpoint: http://127.0.0.1:%d\ntimeout: 5s\n", port);
    c = exporter_new(yaml, err, sizeof err);
    CHECK(c != NULL);
    if (!c) return;
    CHECK_EQ_INT(send_batch(c, go_batch(), &o), PC_EAGAIN);
    CHECK_CONTAINS(o.msg, "failed");
    exporter_free(c);
}

int main(void)
{
    loop = uv_default_loop();
    RUN(test_config_errors);
    RUN(test_ingest);
    RUN(test_push_go);
    RUN(test_given_name);
    RUN(test_limits);
    RUN(test_status_mapping);
    uv_run(loop, UV_RUN_NOWAIT);
    CHECK_EQ_INT(uv_loop_close(loop), 0);
    return check_report();
}
