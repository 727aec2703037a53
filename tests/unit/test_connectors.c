/* Connectors: the Collector's connector checks with its exact error texts (service build), and
 * the routing connector's routes (match once, split, defaults, tenant) on recording consumers. */
#include <stdlib.h>
#include <uv.h>

#include "check.h"
#include "payload.h"
#include "testcomp.h"
#include "sdk/config.h"
#include "sdk/telemetry.h"
#include "service/service.h"

extern const pc_component_type pc_connector_routing;

/* Build a service from YAML; every error message, one per line ("" when valid). */
static const char *service_error(const char *yaml)
{
    static pc_error_issues issues;
    static pc_error err;
    static char out[PC_ERROR_MAX_ISSUES * 1100];
    err = PC_ERROR_WITH_ISSUES(&issues);
    issues.n = 0;
    out[0] = 0;
    pc_node *root = pc_config_parse(yaml, strlen(yaml), "test.yaml", &err);
    pc_service *s = root ? pc_service_new(uv_default_loop(), root, &err) : NULL;
    if (s) {
        pc_service_free(s);
        return "";
    }
    for (size_t i = 0; i < err.issues->n && i < PC_ERROR_MAX_ISSUES; i++) {
        char line[1100];
        pc_error_issue_format(&err.issues->v[i], line, sizeof line);
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s\n", line);
    }
    return out;
}

#define HEAD                                                                                       \
    "receivers:\n  otlp:\n    protocols:\n      http:\nprocessors:\n  batch:\n"                    \
    "exporters:\n  debug:\n"

static void test_collector_errors(void)
{
    /* used as an exporter only (the unused forward/spare is no error, as in the Collector) */
    CHECK_CONTAINS(service_error(HEAD "connectors:\n  forward:\n  forward/spare:\n"
                                      "service:\n  pipelines:\n    traces/in:\n"
                                      "      receivers: [otlp]\n      exporters: [forward]\n"
                                      "    traces/b:\n      receivers: [otlp]\n"
                                      "      exporters: [debug, forward]\n"),
                   "service::pipelines: connector \"forward\" used as exporter in [traces/in "
                   "traces/b] pipeline but not used in any supported receiver pipeline\n");
    CHECK_CONTAINS(service_error(HEAD "connectors:\n  forward:\nservice:\n  pipelines:\n"
                                      "    profiles:\n      receivers: [otlp]\n"
                                      "      exporters: [debug]\n    profiles/out:\n"
                                      "      receivers: [forward]\n      exporters: [debug]\n"),
                   "connector \"forward\" used as receiver in [profiles/out] pipeline but not "
                   "used in any supported exporter pipeline\n");
    /* forward connects a signal to itself only */
    CHECK_CONTAINS(service_error(HEAD "connectors:\n  forward:\nservice:\n  pipelines:\n"
                                      "    traces:\n      receivers: [otlp]\n"
                                      "      exporters: [forward]\n    logs:\n"
                                      "      receivers: [forward]\n      exporters: [debug]\n"),
                   "connector \"forward\" used as exporter in [traces] pipeline but not used in "
                   "any supported receiver pipeline\n");
    /* declared, never used: valid */
    CHECK_STR(service_error(HEAD "connectors:\n  forward:\n  routing/x:\n    table: [{condition: "
                                 "'attributes[\"a\"] == \"b\"', pipelines: [profiles]}]\n"
                                 "service:\n  pipelines:\n    profiles:\n"
                                 "      receivers: [otlp]\n      exporters: [debug]\n"),
              "");
    CHECK_CONTAINS(service_error(HEAD "connectors:\n  debug:\nservice:\n  pipelines:\n"
                                      "    profiles:\n      receivers: [otlp]\n"
                                      "      exporters: [debug]\n"),
                   "connectors::debug: ambiguous ID: Found both \"debug\" exporter and \"debug\" "
                   "connector. Change one of the components' IDs to eliminate ambiguity (e.g. "
                   "rename \"debug\" connector to \"debug/connector\")");
    CHECK_CONTAINS(service_error(HEAD "connectors:\n  fwd:\nservice:\n  pipelines:\n"
                                      "    profiles:\n      receivers: [otlp]\n"
                                      "      exporters: [debug]\n"),
                   "connectors::fwd: 'connectors' unknown type: \"fwd\" for id: \"fwd\" (valid "
                   "values: [forward routing profilemetrics])\n");
    CHECK_CONTAINS(service_error(HEAD "connectors:\n  forwrd/x:\nservice:\n  pipelines:\n"
                                      "    profiles:\n      receivers: [otlp]\n"
                                      "      exporters: [debug]\n"),
                   "'connectors' unknown type: \"forwrd\" for id: \"forwrd/x\" (valid values: "
                   "[forward routing profilemetrics]); did you mean \"forward\"?\n");
    /* used in pipelines: that error alone, not one about its (unknown) signal pairs too */
    const char *one = service_error(HEAD "connectors:\n  fwd:\nservice:\n  pipelines:\n"
                                         "    profiles:\n      receivers: [otlp]\n"
                                         "      exporters: [fwd]\n    profiles/b:\n"
                                         "      receivers: [fwd]\n      exporters: [debug]\n");
    CHECK_CONTAINS(one, "'connectors' unknown type: \"fwd\" for id: \"fwd\"");
    CHECK(strstr(one, "used as") == NULL);
}

static void test_cycles(void)
{
    /* a pipeline that receives from and exports to one connector */
    CHECK_CONTAINS(service_error(HEAD "connectors:\n  forward:\nservice:\n  pipelines:\n"
                                      "    profiles/in:\n      receivers: [otlp]\n"
                                      "      exporters: [forward]\n    profiles/loop:\n"
                                      "      receivers: [forward]\n      processors: [batch]\n"
                                      "      exporters: [forward, debug]\n"),
                   "service::pipelines: cycle detected: connector \"forward\" (profiles to "
                   "profiles) -> processor \"batch\" in pipeline \"profiles/loop\" -> connector "
                   "\"forward\" (profiles to profiles)\n");
    /* through two connectors; pipelines without processors add nothing to the text; the
     * start is otelcol 0.161.0's (the first connector after the node of least id) */
    CHECK_CONTAINS(
        service_error(HEAD "connectors:\n  forward/a:\n  forward/b:\nservice:\n"
                           "  pipelines:\n    logs/in:\n      receivers: [otlp]\n"
                           "      exporters: [forward/a]\n    logs/a:\n"
                           "      receivers: [forward/a]\n"
                           "      exporters: [forward/b]\n    logs/b:\n"
                           "      receivers: [forward/b]\n      processors: [batch]\n"
                           "      exporters: [forward/a, debug]\n"),
        "cycle detected: connector \"forward/b\" (logs to logs) -> processor \"batch\" in "
        "pipeline \"logs/b\" -> connector \"forward/a\" (logs to logs) -> connector "
        "\"forward/b\" (logs to logs)\n");
    /* a fork and a join are no cycle */
    CHECK_STR(service_error(HEAD "connectors:\n  forward:\nservice:\n  pipelines:\n"
                                 "    profiles/a:\n      receivers: [otlp]\n"
                                 "      exporters: [forward]\n    profiles/b:\n"
                                 "      receivers: [otlp]\n      exporters: [forward]\n"
                                 "    profiles/x:\n      receivers: [forward]\n"
                                 "      processors: [batch]\n      exporters: [debug]\n"
                                 "    profiles/y:\n      receivers: [forward]\n"
                                 "      exporters: [debug]\n"),
              "");
}

static const char *routing_service(const char *routing)
{
    static char y[2048];
    snprintf(y, sizeof y,
             HEAD "connectors:\n  routing:\n%sservice:\n  pipelines:\n    profiles:\n"
                  "      receivers: [otlp]\n      exporters: [routing]\n    profiles/a:\n"
                  "      receivers: [routing]\n      exporters: [debug]\n",
             routing);
    return service_error(y);
}

static void test_routing_config(void)
{
    CHECK_STR(routing_service("    default_pipelines: [profiles/a]\n    table:\n"
                              "      - condition: 'attributes[\"k\"] != \"v\"'\n"
                              "        pipelines: [profiles/a]\n      - context: request\n"
                              "        condition: 'request[\"X-Scope-OrgID\"] == \"acme\"'\n"
                              "        pipelines: [profiles/a]\n"
                              "      - statement: 'route() where attributes[\"k\"] == \"w\"'\n"
                              "        pipelines: [profiles/a]\n"),
              "");
    CHECK_CONTAINS(routing_service("    table: []\n"),
                   "connectors::routing::table: invalid routing table: the routing table is empty");
    CHECK_CONTAINS(routing_service("    default_pipelines: [profiles/a]\n"),
                   "invalid routing table: the routing table is empty");
    CHECK_CONTAINS(routing_service("    table:\n      - condition: 'attributes[\"k\"] == \"v\"'\n"
                                   "        statement: 'route() where attributes[\"k\"] == \"v\"'\n"
                                   "        pipelines: [profiles/a]\n"),
                   "connectors::routing::table::0: invalid route: both condition and statement "
                   "provided");
    CHECK_CONTAINS(routing_service("    table:\n      - pipelines: [profiles/a]\n"),
                   "invalid route: no condition or statement provided");
    CHECK_CONTAINS(routing_service("    table:\n      - condition: 'attributes[\"k\"] == \"v\"'\n"),
                   "invalid route: no pipelines defined");
    CHECK_CONTAINS(routing_service("    table:\n      - context: bogus\n"
                                   "        condition: 'attributes[\"k\"] == \"v\"'\n"
                                   "        pipelines: [profiles/a]\n"),
                   "invalid context: bogus");
    CHECK_CONTAINS(routing_service("    table:\n      - condition: 'attributes[\"k\"] == \"v\"'\n"
                                   "        pipelines: [profiles/nope]\n"),
                   "connectors::routing: missing consumer: \"profiles/nope\"");
    CHECK_CONTAINS(routing_service("    default_pipelines: [profiles]\n    table:\n"
                                   "      - condition: 'attributes[\"k\"] == \"v\"'\n"
                                   "        pipelines: [profiles/a]\n"),
                   "missing consumer: \"profiles\"");
    CHECK_CONTAINS(routing_service("    table:\n      - condition: 'IsMatch(attributes[\"k\"], "
                                   "\"v.*\")'\n        pipelines: [profiles/a]\n"),
                   "unsupported condition");
    CHECK_CONTAINS(routing_service("    table:\n      - context: request\n"
                                   "        condition: 'request[\"X-Tenant\"] == \"a\"'\n"
                                   "        pipelines: [profiles/a]\n"),
                   "request[\"x-tenant\"]: profcol keeps only the tenant");
    CHECK_CONTAINS(routing_service("    match_once: true\n    table:\n"
                                   "      - condition: 'attributes[\"k\"] == \"v\"'\n"
                                   "        pipelines: [profiles/a]\n"),
                   "unknown key \"match_once\"");
}

/* ---- routing data ---- */

/* A profiles request of one resource per name (service.name; "" for none), one sample each. */
static pc_batch *batch_of(const char *const *names, size_t n, const char *tenant)
{
    char json[4096] = "{\"resourceProfiles\":[";
    for (size_t i = 0; i < n; i++) {
        char attrs[128] = "";
        if (*names[i])
            snprintf(attrs, sizeof attrs,
                     "\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":"
                     "{\"stringValue\":\"%s\"}}]},",
                     names[i]);
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "%s{%s\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,"
                 "\"unitStrindex\":2},\"samples\":[{\"stackIndex\":1,\"values\":[\"5\"]}]}]}]}",
                 i ? "," : "", attrs);
    }
    snprintf(json + strlen(json), sizeof json - strlen(json),
             "],\"dictionary\":{\"locationTable\":[{},{\"address\":\"4096\"}],"
             "\"stackTable\":[{},{\"locationIndices\":[1]}],"
             "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\"]}}");
    pc_batch *b = batch_from_json(json);
    if (tenant) pc_batch_set_tenant(b, tenant);
    return b;
}

/* The service.name of every resource of every batch r got, "a,b|c" (batches split by |). */
static const char *names_of(tc_rec *r)
{
    static char out[512];
    out[0] = 0;
    for (size_t k = 0; k < r->n; k++) {
        pc_batch *b = r->got[k];
        for (size_t i = 0; i < b->req->n_resource_profiles; i++) {
            const char *v = pc_resource_attr_str(
                b->req->dictionary, b->req->resource_profiles[i]->resource, "service.name");
            snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s",
                     i   ? ","
                     : k ? "|"
                         : "",
                     v ? v : "-");
        }
    }
    tc_rec_clear(r);
    return out;
}

typedef struct fixture {
    tc_rec a, b, d;
    char *ids[3];
    pc_consumer *cons[3];
    pc_router router;
    pc_component *c;
} fixture;

static void fixture_make(fixture *f, pc_signal sig, const char *yaml)
{
    memset(f, 0, sizeof *f);
    tc_rec_init(&f->a);
    tc_rec_init(&f->b);
    tc_rec_init(&f->d);
    f->ids[0] = "profiles/a", f->ids[1] = "profiles/b", f->ids[2] = "profiles/d";
    f->cons[0] = &f->a.base, f->cons[1] = &f->b.base, f->cons[2] = &f->d.base;
    f->router = (pc_router){3, f->ids, f->cons, NULL, sig, sig};
    pc_error err = {0};
    f->c = tc_new(&pc_connector_routing, "connectors", yaml, uv_default_loop(), NULL, &err);
    CHECK(f->c != NULL);
    f->c->router = &f->router;
    CHECK_EQ_INT(pc_connector_routing.connect(f->c, "connectors::routing", &err), 0);
}

static void fixture_send(fixture *f, pc_batch *b)
{
    tc_up up = {0};
    pc_connector_routing.consume(f->c, b, tc_up_done, &up);
    uv_run(uv_default_loop(), UV_RUN_DEFAULT); /* a split is made on the pool */
    CHECK_EQ_INT(up.calls, 1);
    CHECK_EQ_INT(up.st, PC_OK);
}

static void test_routing_resources(void)
{
    fixture f;
    fixture_make(&f, PC_SIGNAL_PROFILES,
                 "default_pipelines: [profiles/d]\ntable:\n"
                 "  - condition: attributes[\"service.name\"] == \"a\"\n"
                 "    pipelines: [profiles/a]\n"
                 "  - condition: resource.attributes[\"service.name\"] == \"a\"\n"
                 "    pipelines: [profiles/b]\n"
                 "  - statement: route() where attributes[\"service.name\"] == \"b\"\n"
                 "    pipelines: [profiles/a, profiles/b]\n");
    const char *names[] = {"a", "b", "c", "", "a"};
    fixture_send(&f, batch_of(names, 5, NULL));
    /* match once: "a" goes to the first route only; "b" to both pipelines of the third */
    CHECK_STR(names_of(&f.a), "a,a|b");
    CHECK_STR(names_of(&f.b), "b");
    CHECK_STR(names_of(&f.d), "c,-");
    /* all resources one way: the batch itself, not a copy */
    const char *one[] = {"c", "d"};
    pc_batch *b = batch_of(one, 2, NULL);
    pc_batch_ref(b);
    fixture_send(&f, b);
    CHECK(f.d.n == 1 && f.d.got[0] == b);
    pc_batch_unref(b);
    CHECK_STR(names_of(&f.d), "c,d");
    pc_buf m = {0};
    pc_metrics_render(&m);
    pc_buf_reserve(&m, 1);
    m.data[m.len] = 0;
    /* samples: one per resource sent above (a, a, b routed; c, none, c, d not) */
    CHECK_CONTAINS((char *)m.data, "profcol_connector_routed_items_total{connector=\"routing\","
                                   "signal=\"profiles\"} 3\n");
    CHECK_CONTAINS((char *)m.data, "profcol_connector_unrouted_items_total{connector=\"routing\","
                                   "signal=\"profiles\"} 4\n");
    pc_buf_free(&m);
    /* a batch to split is copied on the pool: nothing is sent before the loop runs it */
    const char *two[] = {"a", "c"};
    tc_up up = {0};
    pc_connector_routing.consume(f.c, batch_of(two, 2, NULL), tc_up_done, &up);
    CHECK(up.calls == 0 && f.a.n == 0 && f.d.n == 0);
    uv_run(uv_default_loop(), UV_RUN_DEFAULT);
    CHECK(up.calls == 1 && up.st == PC_OK);
    CHECK_STR(names_of(&f.a), "a");
    CHECK_STR(names_of(&f.d), "c");
    tc_free(f.c);
}

static void test_routing_tenant(void)
{
    fixture f;
    fixture_make(&f, PC_SIGNAL_PROFILES,
                 "table:\n  - context: request\n"
                 "    condition: request[\"X-Scope-OrgID\"] == \"acme\"\n"
                 "    pipelines: [profiles/a]\n"
                 "  - condition: attributes[\"service.name\"] == \"x\"\n"
                 "    pipelines: [profiles/b]\n");
    const char *names[] = {"x", "y"};
    fixture_send(&f, batch_of(names, 2, "acme"));
    CHECK_STR(names_of(&f.a), "x,y");
    CHECK(f.b.n == 0 && f.d.n == 0);
    fixture_send(&f, batch_of(names, 2, "other"));
    CHECK_STR(names_of(&f.b), "x");
    CHECK(f.a.n == 0 && f.d.n == 0); /* "y": no default pipelines, dropped (counted) */
    fixture_send(&f, batch_of(names, 2, NULL));
    CHECK_STR(names_of(&f.b), "x");
    pc_buf m = {0};
    pc_metrics_render(&m);
    pc_buf_reserve(&m, 1);
    m.data[m.len] = 0;
    CHECK_CONTAINS((char *)m.data, "profcol_connector_dropped_items_total{connector=\"routing\","
                                   "signal=\"profiles\"} 2\n");
    pc_buf_free(&m);
    tc_free(f.c);
}

/* Traces route as profiles do (the Collector's routing connector's own signals). */
static void test_routing_traces(void)
{
    fixture f;
    fixture_make(&f, PC_SIGNAL_TRACES,
                 "default_pipelines: [profiles/d]\ntable:\n"
                 "  - condition: attributes[\"service.name\"] == \"a\"\n"
                 "    pipelines: [profiles/a]\n");
    const char *json =
        "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
        "\"value\":{\"stringValue\":\"a\"}}]},\"scopeSpans\":[{\"spans\":[{\"name\":\"x\"}]}]},"
        "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":"
        "\"b\"}}]},\"scopeSpans\":[{\"spans\":[{\"name\":\"y\"},{\"name\":\"z\"}]}]}]}";
    pc_batch *b = NULL;
    pc_error e = {0};
    CHECK_EQ_INT(
        pc_batch_decode(PC_SIGNAL_TRACES, (const uint8_t *)json, strlen(json), true, NULL, &b, &e),
        0);
    fixture_send(&f, b);
    CHECK(f.a.n == 1 && f.d.n == 1 && f.b.n == 0);
    if (f.a.n == 1 && f.d.n == 1) {
        const pc_traces_request *ra = (const pc_traces_request *)f.a.got[0]->msg;
        const pc_traces_request *rd = (const pc_traces_request *)f.d.got[0]->msg;
        CHECK(ra->n_resource_spans == 1 && rd->n_resource_spans == 1);
        CHECK_STR(ra->resource_spans[0]->scope_spans[0]->spans[0]->name, "x");
        CHECK_EQ_INT((int)rd->resource_spans[0]->scope_spans[0]->n_spans, 2);
        CHECK_EQ_INT((int)pc_batch_items(f.d.got[0]), 2);
    }
    pc_buf m = {0};
    pc_metrics_render(&m);
    pc_buf_reserve(&m, 1);
    m.data[m.len] = 0;
    CHECK_CONTAINS((char *)m.data, "profcol_connector_unrouted_items_total{connector=\"routing\","
                                   "signal=\"traces\"} 2\n");
    pc_buf_free(&m);
    tc_rec_clear(&f.a);
    tc_rec_clear(&f.d);
    tc_free(f.c);
}

int main(void)
{
    RUN(test_collector_errors);
    RUN(test_cycles);
    RUN(test_routing_config);
    RUN(test_routing_resources);
    RUN(test_routing_tenant);
    RUN(test_routing_traces);
    return check_report();
}
