/* Config: YAML tree, env substitution, merge, config tables and every error with its line. */
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "testio.h"
#include "pdata/pdata.h"
#include "sdk/cfgtable.h"
#include "sdk/config.h"
#include "service/service.h"

static pc_node *parse(const char *y, pc_error *err)
{
    return pc_config_parse(y, strlen(y), "test.yaml", err);
}

/* Every error of an error object with a list, one per line. */
static const char *all_errors(const pc_error *err)
{
    static char out[PC_ERROR_MAX_ISSUES * 1100];
    out[0] = 0;
    for (size_t i = 0; i < err->issues->n && i < PC_ERROR_MAX_ISSUES; i++) {
        char line[1100];
        pc_error_issue_format(&err->issues->v[i], line, sizeof line);
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s\n", line);
    }
    return out;
}

/* Build a service from YAML; returns every error message, one per line ("" when valid). */
static const char *service_error(const char *yaml)
{
    static pc_error_issues issues;
    static pc_error err;
    err = PC_ERROR_WITH_ISSUES(&issues);
    issues.n = 0;
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
    pc_error_issues issues = {0};
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
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
    pc_error_issues issues = {0};
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
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

static char tmpdir[] = "/tmp/profcol-cfgtest-XXXXXX";

static char tmp_paths[16][256];
static int tmp_count;

static const char *tmp_file(const char *name, const char *text)
{
    char *p = tmp_paths[tmp_count++ % 16];
    snprintf(p, 256, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    return p;
}

/* Every error of a config in one pass: unknown keys in the service, telemetry, a component and a
 * pipeline, a bad value, an undefined exporter; each with file, line and key path. */
static void test_every_error(void)
{
    pc_error_issues issues = {0};
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
    const char *y = "receivers:\n"                     /* 1 */
                    "  otlp:\n"                        /* 2 */
                    "    protocols:\n"                 /* 3 */
                    "      htttp:\n"                   /* 4 */
                    "exporters:\n"                     /* 5 */
                    "  debug:\n"                       /* 6 */
                    "    verbosity: loud\n"            /* 7 */
                    "service:\n"                       /* 8 */
                    "  extension: []\n"                /* 9 */
                    "  telemetry:\n"                   /* 10 */
                    "    logs:\n"                      /* 11 */
                    "      levle: debug\n"             /* 12 */
                    "  pipelines:\n"                   /* 13 */
                    "    profiles:\n"                  /* 14 */
                    "      receivers: [otlp]\n"        /* 15 */
                    "      exporters: [debug, nope]\n" /* 16 */
                    "      procesors: [batch]\n";      /* 17 */
    pc_node *root = parse(y, &err);
    CHECK(root != NULL);
    CHECK(pc_service_new(uv_default_loop(), root, &err) == NULL);
    CHECK_EQ_INT(pc_error_count(&err), 6);
    const char *all = all_errors(&err);
    CHECK_CONTAINS(all, "test.yaml:4: receivers::otlp::protocols::htttp: unknown key \"htttp\" "
                        "(did you mean \"http\"?)");
    CHECK_CONTAINS(all, "test.yaml:7: exporters::debug::verbosity: \"loud\" is not one of");
    CHECK_CONTAINS(all, "test.yaml:9: service::extension: unknown key \"extension\" (did you mean "
                        "\"extensions\"?)");
    CHECK_CONTAINS(all, "test.yaml:12: service::telemetry::logs::levle: unknown key \"levle\" "
                        "(did you mean \"level\"?)");
    CHECK_CONTAINS(all, "test.yaml:16: service::pipelines::profiles: exporters \"nope\" is not "
                        "defined");
    CHECK_CONTAINS(all, "test.yaml:17: service::pipelines::profiles::procesors: unknown key");
    /* printed one per line, in file order, each with the prefix */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pc_error_print(&err, f, "profcol: invalid config: ");
    fclose(f);
    const char *first = strstr(buf, "test.yaml:4:"), *last = strstr(buf, "test.yaml:17:");
    CHECK(first && last && first < last);
    size_t lines = 0;
    for (const char *p = buf; *p; p++)
        lines += *p == '\n';
    CHECK_EQ_INT(lines, 6);
    free(buf);
    /* more errors than the carrier keeps: counted, and said */
    pc_error_issues many_issues = {0};
    pc_error many = PC_ERROR_WITH_ISSUES(&many_issues);
    for (int i = 0; i < PC_ERROR_MAX_ISSUES + 5; i++)
        pc_cfg_error_at(&many, "x.yaml", i + 1, "a::b", "error %d", i);
    CHECK_EQ_INT(pc_error_count(&many), PC_ERROR_MAX_ISSUES + 5);
    f = open_memstream(&buf, &len);
    pc_error_print(&many, f, "");
    fclose(f);
    CHECK_CONTAINS(buf, "... and 5 more error(s)");
    free(buf);
}

/* service::telemetry and the other non-component sections, as the Collector has them. */
static void test_service_sections(void)
{
    const char *base = "receivers:\n  otlp:\n    protocols:\n      http:\nexporters:\n  debug:\n"
                       "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                       "      exporters: [debug]\n";
    char y[2048];
#define WITH(extra) (snprintf(y, sizeof y, "%s%s", base, extra), service_error(y))
    CHECK_STR(WITH("  telemetry:\n    logs:\n      level: warn\n      encoding: json\n"
                   "      disable_caller: true\n      disable_stacktrace: false\n"
                   "      sampling:\n        enabled: false\n      output_paths: [stderr]\n"
                   "      error_output_paths: [stderr]\n"
                   "    metrics:\n      level: detailed\n      readers:\n        - pull:\n"
                   "            exporter:\n              prometheus:\n"
                   "                host: 127.0.0.1\n                port: 18888\n"
                   "    traces:\n      level: none\n"),
              "");
    CHECK_CONTAINS(WITH("  telemetry:\n    logs:\n      encoding: xml\n"),
                   "service::telemetry::logs::encoding: \"xml\" is not one of: console, json");
    /* not a scalar: the choices are named too (issue 28: "must be one of" ended there) */
    CHECK_CONTAINS(WITH("  telemetry:\n    logs:\n      encoding: [json]\n"),
                   "service::telemetry::logs::encoding: must be one of: console, json");
    CHECK_CONTAINS(WITH("  telemetry:\n    logs:\n      development: true\n"),
                   "logs::development: not supported by profcol");
    CHECK_CONTAINS(WITH("  telemetry:\n    logs:\n      sampling:\n        enabled: true\n"),
                   "logs::sampling::enabled: not supported by profcol");
    CHECK_CONTAINS(WITH("  telemetry:\n    logs:\n      sampling:\n        tik: 1s\n"),
                   "sampling::tik: unknown key \"tik\" (did you mean \"tick\"?)");
    CHECK_CONTAINS(WITH("  telemetry:\n    logs:\n      output_paths: [/var/log/x]\n"),
                   "logs::output_paths: not supported by profcol: it logs to stderr only");
    CHECK_CONTAINS(WITH("  telemetry:\n    logs:\n      initial_fields: {a: b}\n"),
                   "logs::initial_fields: not supported by profcol");
    CHECK_CONTAINS(WITH("  telemetry:\n    metrics:\n      level: bogus\n"),
                   "metrics::level: \"bogus\" is not one of: none, basic, normal, detailed");
    CHECK_CONTAINS(WITH("  telemetry:\n    metrics:\n      readers:\n        - periodic: {}\n"),
                   "not supported by profcol: periodic readers");
    CHECK_CONTAINS(WITH("  telemetry:\n    metrics:\n      address: x:1\n      readers:\n"
                        "        - pull: {exporter: {prometheus: {port: 1}}}\n"),
                   "set address or readers, not both");
    CHECK_CONTAINS(WITH("  telemetry:\n    metrics:\n      views: [{}]\n"),
                   "metrics::views: not supported by profcol");
    CHECK_CONTAINS(WITH("  telemetry:\n    traces:\n      level: basic\n"),
                   "traces::level: not supported by profcol: it does not trace itself");
    CHECK_CONTAINS(WITH("  telemetry:\n    resource:\n      service.name: x\n"),
                   "service::telemetry::resource: not supported by profcol");
    CHECK_CONTAINS(
        WITH("  telemetry:\n    metric:\n      level: none\n"),
        "service::telemetry::metric: unknown key \"metric\" (did you mean \"metrics\"?)");
    CHECK_STR(WITH("connectors:\n  forward: {}\n"), ""); /* declared, unused: no error */
    CHECK_STR(WITH("connectors: {}\n"), "");
    CHECK_CONTAINS(WITH("extensions:\n  health_check:\n  health_check/2:\n    endpoint: x:2\n"
                        "  zpages: {}\n"),
                   "unknown extension type \"zpages\"");
#undef WITH
    /* a component listed twice in one list, as the Collector refuses it */
    CHECK_CONTAINS(service_error("receivers:\n  otlp:\n    protocols:\n      http:\nprocessors:\n"
                                 "  batch:\nexporters:\n  debug:\nextensions:\n  health_check:\n"
                                 "service:\n  extensions: [health_check, health_check]\n"
                                 "  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                                 "      processors: [batch, batch]\n      exporters: [debug]\n"),
                   "processor \"batch\" listed twice");
    CHECK_CONTAINS(service_error("receivers:\n  otlp:\n    protocols:\n      http:\nexporters:\n"
                                 "  debug:\nextensions:\n  health_check:\n"
                                 "service:\n  extensions: [health_check, health_check]\n"
                                 "  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                                 "      exporters: [debug]\n"),
                   "service::extensions: extension \"health_check\" listed twice");
}

static void parse_env_refs(void *arg)
{
    pc_error *err = arg;
    pc_node *r = parse("a: ${env:PC_T_NOPE_1}\nb: ${PC_T_NOPE_2:-d}\nc: x${PC_T_NOPE_3}y\n", err);
    if (r) {
        CHECK_STR(pc_node_get(r, "a")->scalar, "");
        CHECK_STR(pc_node_get(r, "b")->scalar, "d");
        CHECK_STR(pc_node_get(r, "c")->scalar, "xy");
    }
    pc_node_free(r);
}

/* ${file:...}, ${env:...} as confmap's providers: verbatim values, mappings as subtrees,
 * references inside retrieved values, warnings for unset variables, errors for bad names. */
static void test_providers(void)
{
    pc_error_issues issues = {0};
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
    unsetenv("PC_T_NOPE_1");
    unsetenv("PC_T_NOPE_2");
    unsetenv("PC_T_NOPE_3");
    char *log = capture_stderr(parse_env_refs, &err);
    CHECK_EQ_INT(pc_error_count(&err), 0);
    CHECK_CONTAINS(log, "test.yaml:1: a: configuration references unset environment variable "
                        "\"PC_T_NOPE_1\"");
    CHECK(strstr(log, "PC_T_NOPE_2") == NULL); /* it has a default */
    CHECK_CONTAINS(log, "test.yaml:3: c: configuration references unset environment variable "
                        "\"PC_T_NOPE_3\"");
    free(log);

    setenv("PC_T_INNER", "inner", 1);
    const char *tok = tmp_file("token", "s3cret\n");
    const char *quoted = tmp_file("quoted", "\"q\"");
    const char *recv = tmp_file("recv.yaml", "otlp:\n  protocols:\n    http:\n"
                                             "      endpoint: 127.0.0.1:${env:PC_T_PORT:-4318}\n");
    const char *nested = tmp_file("nested", "pre-${env:PC_T_INNER}");
    char y[1024];
    snprintf(y, sizeof y,
             "tok: ${file:%s}\nq: ${file:%s}\nreceivers: ${file:%s}\nin: <${file:%s}>\n"
             "list: ${env:PC_T_LIST}\n",
             tok, quoted, recv, nested);
    setenv("PC_T_LIST", "[a, b]", 1);
    pc_node *r = parse(y, &err);
    CHECK(r != NULL);
    if (r) {
        CHECK_STR(pc_node_get(r, "tok")->scalar, "s3cret\n"); /* verbatim, as the Collector */
        CHECK_STR(pc_node_get(r, "q")->scalar, "\"q\"");
        const pc_node *http = pc_node_get(
            pc_node_get(pc_node_get(pc_node_get(r, "receivers"), "otlp"), "protocols"), "http");
        CHECK_STR(pc_node_get(http, "endpoint")->scalar, "127.0.0.1:4318");
        CHECK_STR(pc_node_get(http, "endpoint")->file, recv); /* errors point into that file */
        CHECK_EQ_INT(pc_node_get(http, "endpoint")->line, 4);
        CHECK_STR(pc_node_get(r, "in")->scalar, "<pre-inner>");
        const pc_node *l = pc_node_get(r, "list");
        CHECK(l && l->kind == PC_NODE_SEQ && l->n == 2);
    }
    pc_node_free(r);

    /* errors: each with file, line and key path; all of them */
    pc_error_clear(&err);
    r = parse("a:\n  b: ${file:/nonexistent/x}\nc: ${env:BAD-NAME}\nd: ${vault:secret}\n"
              "e: ${https://example.com/x}\nf: ${file:/dev/null}\n",
              &err);
    CHECK(r == NULL);
    CHECK_EQ_INT(pc_error_count(&err), 5);
    const char *all = all_errors(&err);
    CHECK_CONTAINS(all, "test.yaml:2: a::b: ${file:/nonexistent/x}: cannot read /nonexistent/x: "
                        "No such file or directory");
    CHECK_CONTAINS(all, "test.yaml:3: c: ${env:BAD-NAME}: environment variable \"BAD-NAME\" has "
                        "an invalid name");
    CHECK_CONTAINS(all, "test.yaml:4: d: ${vault:secret}: unsupported provider \"vault\"");
    CHECK_CONTAINS(all, "fetches nothing over HTTP");
    CHECK_CONTAINS(all, "test.yaml:6: f: ${file:/dev/null}: cannot read /dev/null: not a regular "
                        "file");

    /* a value that refers to itself */
    pc_error_clear(&err);
    setenv("PC_T_LOOP", "${env:PC_T_LOOP}", 1);
    r = parse("a: x${env:PC_T_LOOP}\n", &err);
    CHECK(r == NULL);
    CHECK_CONTAINS(err.msg, "too many recursive expansions");
}

/* a::b keys nest, and merge with the map a; plain duplicate keys stay errors. */
static void test_path_keys(void)
{
    pc_error_issues issues = {0};
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
    pc_node *r = parse("exporters::debug::verbosity: detailed\n"
                       "exporters:\n  otlp:\n    endpoint: x:1\n"
                       "exporters::debug::top: 5\n",
                       &err);
    CHECK(r != NULL);
    if (r) {
        const pc_node *ex = pc_node_get(r, "exporters");
        CHECK_EQ_INT(ex->n, 2);
        CHECK_STR(pc_node_get(pc_node_get(ex, "debug"), "verbosity")->scalar, "detailed");
        CHECK_STR(pc_node_get(pc_node_get(ex, "debug"), "top")->scalar, "5");
        CHECK_STR(pc_node_get(pc_node_get(ex, "otlp"), "endpoint")->scalar, "x:1");
    }
    pc_node_free(r);
    pc_error_clear(&err);
    CHECK(parse("a:\n  b: 1\na:\n  c: 2\n", &err) == NULL);
    CHECK_CONTAINS(err.msg, "duplicate key \"a\"");
    pc_error_clear(&err);
    CHECK(parse("a::b: 1\na::b: 2\n", &err) == NULL);
    CHECK_CONTAINS(err.msg, "duplicate key \"b\"");
    pc_error_clear(&err);
    CHECK(parse("a: 1\na::b: 2\n", &err) == NULL);
    CHECK_CONTAINS(err.msg, "\"a::b\" is set twice");
    pc_error_clear(&err);
    CHECK(parse("a::: 1\n", &err) == NULL);
    CHECK_CONTAINS(err.msg, "empty part");
}

/* --config URIs (path, file:, env:, yaml:) and --set, merged in order, every error reported. */
static void test_sources(void)
{
    pc_error_issues issues = {0};
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
    const char *base = tmp_file("base.yaml", "receivers:\n  otlp:\n    protocols:\n      http:\n"
                                             "exporters:\n  debug:\n    verbosity: basic\n"
                                             "service:\n  pipelines:\n    profiles:\n"
                                             "      receivers: [otlp]\n      exporters: [debug]\n");
    char file_uri[300];
    snprintf(file_uri, sizeof file_uri, "file:%s", base);
    setenv("PC_T_CFG", "exporters:\n  debug:\n    top: 7\n", 1);
    const char *uris[] = {file_uri, "env:PC_T_CFG",
                          "yaml:receivers::otlp::protocols::http::endpoint: 127.0.0.1:1234"};
    const char *sets[] = {"exporters.debug.verbosity=detailed",
                          "service::pipelines::profiles::exporters = [debug]"};
    pc_config_sources src = {uris, 3, sets, 2, NULL};
    pc_node *r = pc_config_load(&src, &err);
    CHECK(r != NULL);
    if (r) {
        const pc_node *dbg = pc_node_get(pc_node_get(r, "exporters"), "debug");
        CHECK_STR(pc_node_get(dbg, "verbosity")->scalar, "detailed"); /* --set wins */
        CHECK_STR(pc_node_get(dbg, "top")->scalar, "7");
        const pc_node *http = pc_node_get(
            pc_node_get(pc_node_get(pc_node_get(r, "receivers"), "otlp"), "protocols"), "http");
        CHECK_STR(pc_node_get(http, "endpoint")->scalar, "127.0.0.1:1234");
        pc_service *svc = pc_service_new(uv_default_loop(), pc_node_clone(r), &err);
        CHECK(svc != NULL);
        pc_service_free(svc);
    }
    pc_node_free(r);
    /* --set applies after every --config, whatever the order given */
    const char *later[] = {"yaml:exporters::debug::verbosity: normal"};
    const char *set1[] = {"exporters::debug::verbosity=basic"};
    pc_config_sources src2 = {later, 1, set1, 1, NULL};
    r = pc_config_load(&src2, &err);
    CHECK(
        r &&
        !strcmp(pc_node_get(pc_node_get(pc_node_get(r, "exporters"), "debug"), "verbosity")->scalar,
                "basic"));
    pc_node_free(r);
    /* no --config: the default, with --set over it */
    pc_config_sources src3 = {NULL, 0, set1, 1, "exporters:\n  debug:\n    verbosity: normal\n"};
    r = pc_config_load(&src3, &err);
    CHECK(
        r &&
        !strcmp(pc_node_get(pc_node_get(pc_node_get(r, "exporters"), "debug"), "verbosity")->scalar,
                "basic"));
    pc_node_free(r);
    CHECK_EQ_INT(pc_error_count(&err), 0);

    /* every source's errors */
    const char *bad1 = tmp_file("bad1.yaml", "a: [unclosed\n");
    const char *bad[] = {bad1, "/nonexistent/config.yaml", "http://example.com/c.yaml",
                         "yaml:a: b: c"};
    const char *badset[] = {"novalue"};
    pc_config_sources src4 = {bad, 4, badset, 1, NULL};
    CHECK(pc_config_load(&src4, &err) == NULL);
    CHECK_EQ_INT(pc_error_count(&err), 5);
    const char *all = all_errors(&err);
    CHECK_CONTAINS(all, "bad1.yaml:2: invalid YAML");
    CHECK_CONTAINS(all, "cannot read config /nonexistent/config.yaml: No such file or directory");
    CHECK_CONTAINS(all, "--config http://example.com/c.yaml: unsupported scheme \"http\"");
    CHECK_CONTAINS(all, "--config yaml:a: b: c:1: invalid YAML");
    CHECK_CONTAINS(all, "--set novalue: missing equal sign");
    pc_error e = {0};
    CHECK_EQ_INT(pc_config_set_check("a::b=", &e), 0);
    CHECK_EQ_INT(pc_config_set_check("=x", &e), PC_EINVAL);
}

static const char *print(const pc_node *root, pc_print_format fmt, bool redacted)
{
    static char *buf;
    size_t len = 0;
    free(buf);
    buf = NULL;
    FILE *f = open_memstream(&buf, &len);
    CHECK_EQ_INT(pc_config_print(root, fmt, redacted, f), 0);
    fclose(f);
    return buf;
}

/* print-config: secrets redacted, the rest as it is; the YAML reads back to the same tree. */
static void test_print_config(void)
{
    pc_error_issues issues = {0};
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
    const char *y = "exporters:\n"
                    "  otlphttp:\n"
                    "    endpoint: http://x:1\n"
                    "    headers:\n      x-api-token: tok1\n      Authorization: \"Bearer tok2\"\n"
                    "    auth:\n      authenticator: bearertokenauth\n"
                    "  pyroscope:\n    endpoint: http://p:1\n"
                    "    basic_auth: {username: user1, password: pass1}\n"
                    "extensions:\n"
                    "  bearertokenauth:\n    token: tok3\n    scheme: Bearer\n"
                    "  basicauth:\n    client_auth: {username: user2, password: pass2}\n"
                    "    htpasswd: {file: /etc/htpasswd, inline: \"u:{SHA}x\"}\n"
                    "  oauth2client:\n    auth: {client_id: id1, client_secret: sec4}\n"
                    "list: [\"\", \"true\", \"a: b\", null, \"null\", \"~\"]\n";
    pc_node *r = parse(y, &err);
    CHECK(r != NULL);
    if (!r) return;
    const char *out = print(r, PC_PRINT_YAML, true);
    static const char *const secrets[] = {"tok1",  "tok2",     "tok3", "pass1",
                                          "pass2", "u:{SHA}x", "id1",  "sec4"};
    for (size_t i = 0; i < sizeof secrets / sizeof *secrets; i++)
        CHECK(strstr(out, secrets[i]) == NULL);
    static const char *const kept[] = {"authenticator: bearertokenauth",
                                       "username: user1",
                                       "username: user2",
                                       "file: /etc/htpasswd",
                                       "scheme: Bearer",
                                       "endpoint: http://x:1"};
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        CHECK_CONTAINS(out, kept[i]);
    CHECK_CONTAINS(out, "x-api-token: '[REDACTED]'");
    /* the YAML reads back as the same tree but for the redacted values */
    pc_node *back = pc_config_parse(out, strlen(out), "printed.yaml", &err);
    CHECK(back != NULL);
    CHECK(back && !pc_node_equal(back, r));
    pc_node_free(back);
    out = print(r, PC_PRINT_YAML, false);
    back = pc_config_parse(out, strlen(out), "printed.yaml", &err);
    CHECK(back && pc_node_equal(back, r));
    pc_node_free(back);
    out = print(r, PC_PRINT_JSON, true);
    CHECK_CONTAINS(out, "\"x-api-token\": \"[REDACTED]\"");
    CHECK_CONTAINS(out, "\"authenticator\": \"bearertokenauth\"");
    CHECK(strstr(out, "tok3") == NULL);
    out = print(r, PC_PRINT_JSON, false);
    CHECK_CONTAINS(out, "\"token\": \"tok3\"");
    CHECK_EQ_INT(pc_error_count(&err), 0);
    pc_node_free(r);
}

static void test_node_equal(void)
{
    pc_error_issues issues = {0};
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
    pc_node *a = parse("x: 1\ny: {a: [1, 2], b: c}\n", &err);
    pc_node *b = parse("\n\ny:\n  b: c\n  a: [1, 2]\nx: 1\n", &err);
    pc_node *c = parse("x: 1\ny: {a: [2, 1], b: c}\n", &err);
    pc_node *d = pc_node_clone(a);
    CHECK(pc_node_equal(a, b));
    CHECK(!pc_node_equal(a, c));
    CHECK(pc_node_equal(a, d));
    pc_node_free(a);
    pc_node_free(b);
    pc_node_free(c);
    pc_node_free(d);
}

/* The seed's exporter: an OTLP/gRPC endpoint with a URL path is accepted (the path is dropped
 * at start, with a warning the e2e test reads). */
static void test_grpc_endpoint_path(void)
{
    CHECK_STR(service_error("receivers:\n  otlp:\n    protocols:\n      grpc:\nexporters:\n"
                            "  otlp/profiles:\n    endpoint: https://example.com/otlp\n"
                            "service:\n  pipelines:\n    profiles:\n      receivers: [otlp]\n"
                            "      exporters: [otlp/profiles]\n"),
              "");
    CHECK_CONTAINS(service_error("exporters:\n  otlp:\n    endpoint: ftp://example.com/otlp\n"),
                   "exporters::otlp::endpoint: endpoint \"ftp://example.com/otlp\": unsupported "
                   "scheme \"ftp\"");
}

/* Group rows (sdk/cfgtable.h): a table of its own, nested, under a prefix, at an offset. */
typedef struct inner_cfg {
    int64_t n;
    char *name;
} inner_cfg;
typedef struct mid_cfg {
    bool on;
    inner_cfg in;
} mid_cfg;
typedef struct outer_cfg {
    char *top;
    mid_cfg a, b;
} outer_cfg;

/* clang-format off */
static const pc_cfg_key inner_keys[] = {
    {"inner.n", PC_CFG_INT, "7", offsetof(inner_cfg, n), "a number", NULL},
    {"inner.name", PC_CFG_STRING, "", offsetof(inner_cfg, name), "a name", NULL},
    {0},
};
static const pc_cfg_key mid_keys[] = {
    {"on", PC_CFG_BOOL, "false", offsetof(mid_cfg, on), "a switch", NULL},
    {"", PC_CFG_GROUP, "", offsetof(mid_cfg, in), "the inner part", inner_keys},
    {0},
};
static const pc_cfg_key outer_keys[] = {
    {"top", PC_CFG_STRING, "t", offsetof(outer_cfg, top), "top", NULL},
    {"a.", PC_CFG_GROUP, "", offsetof(outer_cfg, a), "part a", mid_keys},
    {"b.", PC_CFG_GROUP, "", offsetof(outer_cfg, b), "part b", mid_keys},
    {0},
};
/* clang-format on */

static void test_groups(void)
{
    const pc_cfg_key *flat = pc_cfgtable_flat(outer_keys);
    CHECK(flat == pc_cfgtable_flat(outer_keys)); /* built once */
    const char *want[] = {"top",  "a.on",      "a.inner.n",   "a.inner.name",
                          "b.on", "b.inner.n", "b.inner.name"};
    size_t n = 0;
    for (; flat[n].key; n++)
        CHECK_STR(flat[n].key, n < 7 ? want[n] : "(more)");
    CHECK_EQ_INT(n, 7);
    CHECK(pc_cfgtable_flat(inner_keys) == inner_keys); /* nothing to expand */

    pc_error_issues issues = {0};
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
    pc_node *root = parse("b:\n  on: true\n  inner:\n    n: 42\n    name: x\n", &err);
    outer_cfg cfg = {0};
    CHECK_EQ_INT(pc_cfgtable_apply(outer_keys, &cfg, root, "c", &err), 0);
    CHECK_STR(cfg.top, "t");
    CHECK(!cfg.a.on && cfg.a.in.n == 7 && cfg.a.in.name == NULL); /* defaults */
    CHECK(cfg.b.on && cfg.b.in.n == 42);
    CHECK_STR(cfg.b.in.name, "x");
    pc_cfgtable_free(outer_keys, &cfg);
    pc_node_free(root);

    root = parse("a:\n  inner:\n    nn: 1\n", &err);
    outer_cfg bad = {0};
    CHECK(pc_cfgtable_apply(outer_keys, &bad, root, "c", &err) < 0);
    CHECK_CONTAINS(all_errors(&err), "c::a::inner::nn: unknown key \"nn\" (did you mean \"n\"?)");
    pc_cfgtable_free(outer_keys, &bad);
    pc_node_free(root);
}

static void test_billion_laughs(void)
{
    pc_error_issues issues = {0};
    pc_error err = PC_ERROR_WITH_ISSUES(&issues);
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
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_substitution);
    RUN(test_merge);
    RUN(test_units);
    RUN(test_valid_example);
    RUN(test_seed_config);
    RUN(test_errors);
    RUN(test_billion_laughs);
    RUN(test_groups);
    RUN(test_every_error);
    RUN(test_service_sections);
    RUN(test_providers);
    RUN(test_path_keys);
    RUN(test_sources);
    RUN(test_print_config);
    RUN(test_node_equal);
    RUN(test_grpc_endpoint_path);
    for (int i = 0; i < tmp_count && i < 16; i++)
        unlink(tmp_paths[i]);
    rmdir(tmpdir);
    return check_report();
}
