/* Config: YAML tree, env substitution, merge, config tables and every error with its line. */
#include <stdlib.h>
#include <uv.h>

#include "check.h"
#include "pdata/pdata.h"
#include "pipeline/cfgtable.h"
#include "pipeline/config.h"
#include "pipeline/service.h"

static pc_node *parse(const char *y, pc_cfg_err *err)
{
    return pc_config_parse(y, strlen(y), "test.yaml", err);
}

/* Every error of a carrier, one per line. */
static const char *all_errors(const pc_cfg_err *err)
{
    static char out[PC_CFG_MAX_ISSUES * 700];
    out[0] = 0;
    for (size_t i = 0; i < err->n && i < PC_CFG_MAX_ISSUES; i++) {
        char line[700];
        pc_cfg_issue_format(&err->issues[i], line, sizeof line);
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s\n", line);
    }
    return out;
}

/* Build a service from YAML; returns every error message, one per line ("" when valid). */
static const char *service_error(const char *yaml)
{
    static pc_cfg_err err;
    memset(&err, 0, sizeof err);
    pc_node *root = parse(yaml, &err);
    if (!root) return all_errors(&err);
    pc_service *s = pc_service_new(uv_default_loop(), root, &err);
    if (s) {
        pc_service_free(s);
        return "";
    }
    return all_errors(&err);
}

static const char *const good = "receivers:\n"
                                "  otlp:\n"
                                "    protocols:\n"
                                "      http:\n"
                                "        endpoint: 127.0.0.1:4318\n"
                                "exporters:\n"
                                "  otlphttp/gateway:\n"
                                "    endpoint: http://127.0.0.1:14318\n"
                                "    headers:\n"
                                "      x-api-token: ${env:API_TOKEN:-none}\n"
                                "  debug:\n"
                                "    verbosity: detailed\n"
                                "service:\n"
                                "  pipelines:\n"
                                "    profiles:\n"
                                "      receivers: [otlp]\n"
                                "      exporters: [otlphttp/gateway, debug]\n";

static void test_substitution(void)
{
    pc_cfg_err err = {{0}};
    setenv("PC_T_A", "alpha", 1);
    unsetenv("PC_T_UNSET");
    setenv("ONEUPTIME_TOKEN", "tok123", 1);
    pc_node *r = parse("a: ${env:PC_T_A}\n"
                       "b: ${PC_T_A}-x\n"
                       "c: ${env:PC_T_UNSET:-fallback}\n"
                       "d: ${PC_T_UNSET}\n"
                       "e: $${PC_T_A}\n"
                       "f: pre ${env:PC_T_A:-no} post\n"
                       "x-oneuptime-token: ${ONEUPTIME_TOKEN}\n",
                       &err);
    CHECK(r != NULL);
    if (!r) return;
    CHECK_STR(pc_node_get(r, "a")->scalar, "alpha");
    CHECK_STR(pc_node_get(r, "b")->scalar, "alpha-x");
    CHECK_STR(pc_node_get(r, "c")->scalar, "fallback");
    CHECK_STR(pc_node_get(r, "d")->scalar, "");
    CHECK_STR(pc_node_get(r, "e")->scalar, "${PC_T_A}");
    CHECK_STR(pc_node_get(r, "f")->scalar, "pre alpha post");
    CHECK_STR(pc_node_get(r, "x-oneuptime-token")->scalar, "tok123");
    CHECK_EQ_INT(pc_node_get(r, "f")->line, 6);
    pc_node_free(r);
}

static void test_merge(void)
{
    pc_cfg_err err = {{0}};
    pc_node *a = parse("x:\n  y: 1\n  z: 2\nlist: [a, b]\n", &err);
    pc_node *b = parse("x:\n  z: 3\n  w: 4\nlist: [c]\n", &err);
    pc_config_merge(a, b);
    CHECK_STR(pc_node_get(pc_node_get(a, "x"), "y")->scalar, "1");
    CHECK_STR(pc_node_get(pc_node_get(a, "x"), "z")->scalar, "3");
    CHECK_STR(pc_node_get(pc_node_get(a, "x"), "w")->scalar, "4");
    const pc_node *l = pc_node_get(a, "list");
    CHECK_EQ_INT(l->n, 1);
    CHECK_STR(l->vals[0]->scalar, "c");
    pc_node_free(a);
}

static void test_units(void)
{
    uint64_t v;
    CHECK(pc_parse_duration_ms("200ms", &v) == 0 && v == 200);
    CHECK(pc_parse_duration_ms("1m30s", &v) == 0 && v == 90000);
    CHECK(pc_parse_duration_ms("5", &v) == 0 && v == 5000);
    CHECK(pc_parse_duration_ms("5 parsecs", &v) != 0);
    CHECK(pc_parse_duration_ms("-1s", &v) != 0);
    CHECK(pc_parse_size("20MiB", &v) == 0 && v == 20u * 1024 * 1024);
    CHECK(pc_parse_size("1k", &v) == 0 && v == 1000);
    CHECK(pc_parse_size("1048576", &v) == 0 && v == 1048576);
    CHECK(pc_parse_size("lots", &v) != 0);
}

static void test_valid_example(void)
{
    CHECK_STR(service_error(good), "");
}

/* The issue's config, as users copy it from the profiling guides: every signal's pipeline. */
static void test_seed_config(void)
{
    CHECK_STR(service_error("receivers:\n  otlp:\n    protocols:\n      grpc:\n"
                            "        endpoint: 0.0.0.0:4317\n      http:\n"
                            "        endpoint: 0.0.0.0:4318\n  otlp/profiles:\n    protocols:\n"
                            "      grpc:\n        endpoint: 0.0.0.0:4327\nprocessors:\n  batch:\n"
                            "    timeout: 1s\n  resource:\n    attributes:\n"
                            "    - key: service.name\n      from_attribute: service.name\n"
                            "      action: upsert\nexporters:\n  otlphttp/traces:\n"
                            "    endpoint: https://otlp.example.com\n    headers:\n"
                            "      x-api-token: ${API_TOKEN}\n  otlphttp/pyroscope:\n"
                            "    endpoint: http://pyroscope:4040\n  otlp/profiles:\n"
                            "    endpoint: https://otlp.example.com:4317\n    headers:\n"
                            "      Authorization: \"Bearer ${API_TOKEN}\"\nservice:\n"
                            "  pipelines:\n    traces:\n      receivers: [otlp]\n"
                            "      processors: [batch, resource]\n"
                            "      exporters: [otlphttp/traces]\n    profiles:\n"
                            "      receivers: [otlp/profiles]\n      processors: [batch]\n"
                            "      exporters: [otlphttp/pyroscope, otlp/profiles]\n"),
              "");
}

static void test_errors(void)
{
    /* unknown key with a suggestion, file, line and key path */
    const char *e = service_error("exporters:\n"
                                  "  otlphttp/backend:\n"
                                  "    endpont: http://x:1\n"
                                  "service:\n  pipelines:\n    profiles:\n"
                                  "      receivers: [otlp]\n      exporters: [otlphttp/backend]\n");
    CHECK_CONTAINS(e, "test.yaml:3");
    CHECK_CONTAINS(e, "exporters::otlphttp/backend::endpont");
    CHECK_CONTAINS(e, "did you mean \"endpoint\"");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\n        endpoitn: x:1\n");
    CHECK_CONTAINS(e, "receivers::otlp::protocols::http::endpoitn");
    CHECK_CONTAINS(e, "did you mean \"endpoint\"");

    e = service_error("exporters:\n  otlphtp:\n    endpoint: http://x:1\n");
    CHECK_CONTAINS(e, "unknown exporter type \"otlphtp\"");
    CHECK_CONTAINS(e, "did you mean \"otlphttp\"");
    CHECK_CONTAINS(e, "test.yaml:2");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\nexporters:\n  debug:\n"
                      "service:\n  pipelines:\n    profiles:\n"
                      "      receivers: [otlp]\n      exporters: [debug/missing]\n");
    CHECK_CONTAINS(e, "exporters \"debug/missing\" is not defined");
    CHECK_CONTAINS(e, "test.yaml:11");
    CHECK_CONTAINS(e, "service::pipelines::profiles");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\nexporters:\n  debug:\n"
                      "service:\n  pipelines:\n    profiles:\n      exporters: [debug]\n");
    CHECK_CONTAINS(e, "at least one receiver");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\nexporters:\n  debug:\n"
                      "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n");
    CHECK_CONTAINS(e, "at least one exporter");

    /* other signals: only components that handle them; the error names what they handle */
    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\nprocessors:\n  filter:\n"
                      "exporters:\n  debug:\nservice:\n  pipelines:\n    traces:\n"
                      "      receivers: [otlp]\n      processors: [filter]\n"
                      "      exporters: [debug]\n");
    CHECK_CONTAINS(e, "processor \"filter\" does not support traces pipelines (only: profiles)");
    CHECK_CONTAINS(e, "service::pipelines::traces");
    CHECK_CONTAINS(e, "test.yaml:13");

    e = service_error("receivers:\n  pyroscope:\nexporters:\n  debug:\n"
                      "service:\n  pipelines:\n    logs/x:\n"
                      "      receivers: [pyroscope]\n      exporters: [debug]\n");
    CHECK_CONTAINS(e, "receiver \"pyroscope\" does not support logs pipelines");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\nexporters:\n"
                      "  pyroscope:\n    endpoint: http://x:1\nservice:\n  pipelines:\n"
                      "    metrics:\n      receivers: [otlp]\n      exporters: [pyroscope]\n");
    CHECK_CONTAINS(e, "exporter \"pyroscope\" does not support metrics pipelines");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\nexporters:\n"
                      "  otlphttp/t:\n    traces_endpoint: http://x:1/t\nservice:\n  pipelines:\n"
                      "    traces:\n      receivers: [otlp]\n      exporters: [otlphttp/t]\n"
                      "    profiles:\n      receivers: [otlp]\n      exporters: [otlphttp/t]\n");
    CHECK_CONTAINS(e, "exporter \"otlphttp/t\" cannot serve profiles pipelines: no endpoint for "
                      "profiles (set endpoint or profiles_endpoint)");
    CHECK_CONTAINS(e, "test.yaml:15");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\n"
                      "        logs_url_path: v1/traces/\n");
    CHECK_CONTAINS(e, "receivers::otlp::protocols::http::logs_url_path");
    CHECK_CONTAINS(e, "\"/v1/traces\" is already traces_url_path");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\n"
                      "        traces_url_path: \"/a?b\"\n");
    CHECK_CONTAINS(e, "must be a URL path such as /v1/traces");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\nexporters:\n  debug:\n"
                      "service:\n  pipelines:\n    events:\n"
                      "      receivers: [otlp]\n      exporters: [debug]\n");
    CHECK_CONTAINS(e, "unknown pipeline \"events\"");

    e = service_error("exporters:\n  otlphttp:\n    endpoint: http://x:1\n    timeout: soon\n");
    CHECK_CONTAINS(e, "exporters::otlphttp::timeout");
    CHECK_CONTAINS(e, "not a duration");
    CHECK_CONTAINS(e, "test.yaml:4");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\n"
                      "        max_request_body_size: huge\n");
    CHECK_CONTAINS(e, "not a size");

    e = service_error("exporters:\n  otlphttp:\n    endpoint: localhost:4318\n");
    CHECK_CONTAINS(e, "exporters::otlphttp");
    CHECK_CONTAINS(e, "endpoint");

    e = service_error("receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: nope\n");
    CHECK_CONTAINS(e, "receivers::otlp");

    e = service_error("exporters:\n  debug:\n    verbosity: loud\n");
    CHECK_CONTAINS(e, "not one of: basic, normal, detailed");

    e = service_error("recievers:\n  otlp:\n");
    CHECK_CONTAINS(e, "did you mean \"receivers\"");

    e = service_error("a: [unclosed\n");
    CHECK_CONTAINS(e, "invalid YAML");

    e = service_error("a: &x [1]\nb: *x\nb: 2\n");
    CHECK_CONTAINS(e, "duplicate key");
}

static void test_billion_laughs(void)
{
    pc_cfg_err err = {{0}};
    pc_buf y = {0};
    pc_buf_printf(&y, "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i < 12; i++)
        pc_buf_printf(&y,
                      "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i,
                      i, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
    pc_node *r = pc_config_parse((char *)y.data, y.len, "laughs.yaml", &err);
    CHECK(r == NULL);
    CHECK_CONTAINS(err.msg, "too large");
    pc_buf_free(&y);
}

int main(void)
{
    RUN(test_substitution);
    RUN(test_merge);
    RUN(test_units);
    RUN(test_valid_example);
    RUN(test_seed_config);
    RUN(test_errors);
    RUN(test_billion_laughs);
    return check_report();
}
