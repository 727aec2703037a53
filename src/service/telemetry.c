/* service::telemetry: the Collector's own-telemetry settings, read through a config table like a
 * component's. profcol logs to stderr (text or JSON, a level) and serves Prometheus text
 * (address, or one pull reader); every other setting is refused, never ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "net/url.h"
#include "service/internal.h"

typedef struct telemetry_cfg {
    const pc_node *log_level; /* a node: its message names the levels pc_log_parse_level takes */
    int log_encoding;
    bool development, disable_caller, disable_stacktrace, sampling;
    const pc_node *sampling_rest, *output_paths, *error_output_paths, *initial_fields,
        *log_processors;
    int metrics_level;
    const pc_node *address, *readers, *views;
    const pc_node *traces_level, *traces_processors, *propagators, *resource;
} telemetry_cfg;

static const char *const encodings[] = {"console", "json", NULL};
static const char *const metrics_levels[] = {"none", "basic", "normal", "detailed", NULL};

/* The docs are for the reader here (service::telemetry is not in docs/components.md). */
/* clang-format off */
static const pc_cfg_key telemetry_table[] = {
    /* logs: to stderr, as text or JSON, from a level */
    {"logs.level", PC_CFG_NODE, "", offsetof(telemetry_cfg, log_level), "debug, info, warn or error", NULL},
    {"logs.encoding", PC_CFG_ENUM, "console", offsetof(telemetry_cfg, log_encoding), "console (text lines) or json", encodings},
    {"logs.output_paths", PC_CFG_NODE, "", offsetof(telemetry_cfg, output_paths), "[stderr] only", NULL},
    {"logs.error_output_paths", PC_CFG_NODE, "", offsetof(telemetry_cfg, error_output_paths), "[stderr] only", NULL},
    /* switches: development and sampling off only; disable_caller and disable_stacktrace * either way (profcol's lines carry no caller and no stack trace) */
    {"logs.development", PC_CFG_BOOL, "false", offsetof(telemetry_cfg, development), "false only", NULL},
    {"logs.disable_caller", PC_CFG_BOOL, "false", offsetof(telemetry_cfg, disable_caller), "accepted", NULL},
    {"logs.disable_stacktrace", PC_CFG_BOOL, "false", offsetof(telemetry_cfg, disable_stacktrace), "accepted", NULL},
    {"logs.sampling.enabled", PC_CFG_BOOL, "false", offsetof(telemetry_cfg, sampling), "false only", NULL},
    /* sampling's parameters: accepted, nothing is sampled */
    {"logs.sampling.tick", PC_CFG_NODE, "", offsetof(telemetry_cfg, sampling_rest), "accepted", NULL},
    {"logs.sampling.initial", PC_CFG_NODE, "", offsetof(telemetry_cfg, sampling_rest), "accepted", NULL},
    {"logs.sampling.thereafter", PC_CFG_NODE, "", offsetof(telemetry_cfg, sampling_rest), "accepted", NULL},
    /* what profcol does not have: refused unless empty */
    {"logs.initial_fields", PC_CFG_NODE, "", offsetof(telemetry_cfg, initial_fields), "not supported", NULL},
    {"logs.processors", PC_CFG_NODE, "", offsetof(telemetry_cfg, log_processors), "not supported", NULL},
    {"metrics.views", PC_CFG_NODE, "", offsetof(telemetry_cfg, views), "not supported", NULL},
    {"traces.processors", PC_CFG_NODE, "", offsetof(telemetry_cfg, traces_processors), "not supported", NULL},
    {"traces.propagators", PC_CFG_NODE, "", offsetof(telemetry_cfg, propagators), "not supported", NULL},
    {"resource", PC_CFG_NODE, "", offsetof(telemetry_cfg, resource), "not supported", NULL},
    /* metrics: served as Prometheus text, unless level is none */
    {"metrics.level", PC_CFG_ENUM, "normal", offsetof(telemetry_cfg, metrics_level), "none turns the endpoint off", metrics_levels},
    {"metrics.address", PC_CFG_NODE, "", offsetof(telemetry_cfg, address), "host:port (default localhost:8888)", NULL},
    {"metrics.readers", PC_CFG_NODE, "", offsetof(telemetry_cfg, readers), "one pull reader with a prometheus exporter", NULL},
    /* traces: profcol does not trace itself */
    {"traces.level", PC_CFG_NODE, "", offsetof(telemetry_cfg, traces_level), "none only", NULL},
    {0},
};
/* clang-format on */

/* One reader: pull, with exporter: prometheus: {host, port}. */
typedef struct reader_cfg {
    const pc_node *host, *port, *periodic;
} reader_cfg;

/* clang-format off */
static const pc_cfg_key reader_table[] = {
    {"pull.exporter.prometheus.host", PC_CFG_NODE, "", offsetof(reader_cfg, host), "", NULL},
    {"pull.exporter.prometheus.port", PC_CFG_NODE, "", offsetof(reader_cfg, port), "", NULL},
    {"periodic", PC_CFG_NODE, "", offsetof(reader_cfg, periodic), "not supported", NULL},
    {0},
};
/* clang-format on */

#define P "service::telemetry"

/* output_paths: profcol writes its log to stderr only. */
static int stderr_only(const pc_node *l, const char *path, pc_error *err)
{
    if (!l || l->kind == PC_NODE_NULL) return 0;
    if (l->kind != PC_NODE_SEQ) return pc_cfg_errorf(err, l, path, "must be a list");
    for (size_t i = 0; i < l->n; i++)
        if (l->vals[i]->kind != PC_NODE_SCALAR || strcmp(l->vals[i]->scalar, "stderr") != 0)
            return pc_cfg_errorf(err, l->vals[i], path,
                                 "not supported by profcol: it logs to stderr only (want "
                                 "[stderr])");
    return 0;
}

static int check_logs(pc_service *s, const telemetry_cfg *t, const pc_node *tel, pc_error *err)
{
    int rc = 0;
    const pc_node *lvl = t->log_level;
    if (lvl && lvl->kind != PC_NODE_NULL) {
        if (lvl->kind != PC_NODE_SCALAR || pc_log_parse_level(lvl->scalar, &s->log_level))
            rc = pc_cfg_errorf(err, lvl, P "::logs::level",
                               "\"%s\" is not one of: debug, info, warn, error",
                               lvl->kind == PC_NODE_SCALAR ? lvl->scalar : "(not a scalar)");
        else
            s->log_level_set = true;
    }
    s->log_json = t->log_encoding == 1;
    if (t->development)
        rc = pc_cfg_key_errorf(err, tel, P, "logs.development",
                               "not supported by profcol: it has no development logging mode "
                               "(set false)");
    if (t->sampling)
        rc = pc_cfg_key_errorf(err, tel, P, "logs.sampling.enabled",
                               "not supported by profcol: it does not sample its log lines (set "
                               "false)");
    if (stderr_only(t->output_paths, P "::logs::output_paths", err) ||
        stderr_only(t->error_output_paths, P "::logs::error_output_paths", err))
        rc = PC_EINVAL;
    if (svc_unsupported(t->initial_fields, P "::logs::initial_fields",
                        "its lines have no extra fields", err) ||
        svc_unsupported(t->log_processors, P "::logs::processors",
                        "it does not export its own logs", err))
        rc = PC_EINVAL;
    return rc;
}

/* host:port into address, or the error at `at`. */
static int host_port(const char *hp, char *address, size_t n, const pc_node *at, const char *path,
                     pc_error *err)
{
    char host[256];
    pc_error e = {0};
    int port;
    if (pc_hostport_parse(hp, host, sizeof host, &port, &e) < 0)
        return pc_cfg_errorf(err, at, path, "%s", e.msg);
    snprintf(address, n, "%s", hp);
    return 0;
}

#define RP P "::metrics::readers"

/* readers: one pull reader whose prometheus exporter gives the address (the Collector's newer
 * spelling of address). */
static int check_readers(const pc_node *readers, bool have_address, char *address, size_t n,
                         pc_error *err)
{
    if (readers->kind != PC_NODE_SEQ)
        return pc_cfg_errorf(err, readers, RP, "must be a list of readers");
    if (have_address) return pc_cfg_errorf(err, readers, RP, "set address or readers, not both");
    if (readers->n > 1)
        return pc_cfg_errorf(err, readers, RP,
                             "not supported by profcol: one reader only (pull, prometheus)");
    const pc_node *r = readers->vals[0];
    reader_cfg rc = {0};
    if (pc_cfgtable_apply(reader_table, &rc, r, RP, err)) return PC_EINVAL;
    if (rc.periodic)
        return pc_cfg_errorf(err, rc.periodic, RP,
                             "not supported by profcol: periodic readers (it serves Prometheus "
                             "text to be scraped: use pull)");
    const pc_node *pull = pc_node_get(r, "pull");
    const pc_node *prom = pc_node_get(pc_node_get(pull, "exporter"), "prometheus");
    if (!pull) return 0;
    if (!prom)
        return pc_cfg_errorf(err, pull, RP "::pull", "want exporter: prometheus: {host, port}");
    char hp[300];
    snprintf(hp, sizeof hp, "%s:%s",
             rc.host && rc.host->kind == PC_NODE_SCALAR ? rc.host->scalar : "localhost",
             rc.port && rc.port->kind == PC_NODE_SCALAR ? rc.port->scalar : "8888");
    return host_port(hp, address, n, prom, RP "::pull::exporter::prometheus", err);
}

static int check_metrics(pc_service *s, const telemetry_cfg *t, pc_error *err)
{
    int rc = 0;
    const pc_node *addr = t->address;
    bool have_address = addr && addr->kind != PC_NODE_NULL;
    char address[300] = "localhost:8888";
    if (have_address) {
        if (addr->kind != PC_NODE_SCALAR)
            rc = pc_cfg_errorf(err, addr, P "::metrics::address", "must be host:port");
        else if (host_port(addr->scalar, address, sizeof address, addr, P "::metrics::address",
                           err))
            rc = PC_EINVAL;
    }
    if (!svc_is_empty(t->readers) &&
        check_readers(t->readers, have_address, address, sizeof address, err))
        rc = PC_EINVAL;
    if (svc_unsupported(t->views, P "::metrics::views", "its metrics have no views", err))
        rc = PC_EINVAL;
    free(s->metrics_address);
    s->metrics_address = t->metrics_level == 0 ? NULL : pc_xstrdup(address);
    return rc;
}

static int check_traces(const telemetry_cfg *t, pc_error *err)
{
    int rc = 0;
    const pc_node *tl = t->traces_level;
    if (tl && tl->kind != PC_NODE_NULL &&
        (tl->kind != PC_NODE_SCALAR || strcmp(tl->scalar, "none") != 0))
        rc = pc_cfg_errorf(err, tl, P "::traces::level",
                           "not supported by profcol: it does not trace itself (want none)");
    if (svc_unsupported(t->traces_processors, P "::traces::processors", "it does not trace itself",
                        err) ||
        svc_unsupported(t->propagators, P "::traces::propagators", "it does not trace itself",
                        err) ||
        svc_unsupported(t->resource, P "::resource",
                        "its self-metrics carry no resource attributes", err))
        rc = PC_EINVAL;
    return rc;
}

int svc_telemetry_apply(pc_service *s, pc_error *err)
{
    const pc_node *tel = pc_node_get(pc_node_get(s->root, "service"), "telemetry");
    telemetry_cfg t = {0};
    int rc = pc_cfgtable_apply(telemetry_table, &t, tel, P, err);
    if (check_logs(s, &t, tel, err)) rc = PC_EINVAL;
    if (check_metrics(s, &t, err)) rc = PC_EINVAL;
    if (check_traces(&t, err)) rc = PC_EINVAL;
    pc_cfgtable_free(telemetry_table, &t);
    return rc;
}

void svc_telemetry_use(const pc_service *s)
{
    pc_log_set_json(s->log_json);
    pc_log_set_level(s->log_level_set ? s->log_level : PC_LOG_INFO);
}
