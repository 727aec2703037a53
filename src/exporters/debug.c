/* Exporter "debug": prints what arrives (counts, per-profile lines, or top-functions tables) to
 * stderr. Formatting grows with the batch, so it runs on the thread pool; the write happens on
 * the loop thread in one call so lines of concurrent batches never interleave. */
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "pdata/summary.h"
#include "sdk/component.h"
#include "sdk/exporter.h"

typedef struct debug_cfg {
    int verbosity;
    int64_t top;
} debug_cfg;

static const char *const verbosities[] = {"basic", "normal", "detailed", NULL};

/* clang-format off */
static const pc_cfg_key debug_keys[] = {
    {"verbosity", PC_CFG_ENUM, "basic", offsetof(debug_cfg, verbosity), "basic: a line per batch; normal: a line per profile; detailed: top functions per profile", verbosities},
    {"top", PC_CFG_INT, "10", offsetof(debug_cfg, top), "rows in the detailed top-functions table", NULL},
    {0},
};
/* clang-format on */

static int debug_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    debug_cfg *cfg = cfgp;
    if (cfg->top < 1 || cfg->top > 10000)
        return pc_cfg_key_errorf(err, node, path, "top", "must be between 1 and 10000");
    return 0;
}

static void debug_text(pc_export_req *r, pc_buf *text)
{
    debug_cfg *cfg = r->e->c->cfg;
    const char *id = r->e->c->id;
    const pc_batch *b = r->batch;
    if (b->signal == PC_SIGNAL_PROFILES) {
        pc_summary_format(b, (pc_verbosity)cfg->verbosity, (int)cfg->top, id, text);
        return;
    }
    /* traces, metrics, logs: a count line; detailed adds the request as OTLP JSON */
    pc_buf_printf(text, "%s: %s: %zu resource(s), %zu %s\n", id, pc_signal_infos[b->signal].name,
                  pc_batch_n_resources(b), pc_batch_items(b), pc_signal_infos[b->signal].items);
    if (cfg->verbosity == PC_VERBOSITY_DETAILED) {
        pc_batch_encode_json(b, text);
        pc_buf_printf(text, "\n");
    }
}

/* What a batch prints, in the log's encoding: with logs encoding json one JSON record per batch
 * (the Collector's debug exporter writes through its logger, so its output follows it too). */
static void debug_format(pc_export_req *r)
{
    if (!pc_log_json()) {
        debug_text(r, &r->body);
        return;
    }
    pc_buf text = {0};
    debug_text(r, &text);
    pc_log_record(&r->body, PC_LOG_INFO, r->e->c->id, text.data ? (const char *)text.data : "",
                  text.len);
    pc_buf_free(&text);
}

/* A write to stderr that fails counts as send_failed. */
static void debug_write(pc_export_req *r)
{
    pc_export_outcome o = PC_EXPORT_OK;
    int ok = 1;
    if (r->body.len) ok = fwrite(r->body.data, 1, r->body.len, stderr) == r->body.len;
    if (fflush(stderr)) ok = 0;
    if (!ok) pc_export_outcome_set(&o, PC_EINVAL, "cannot write to stderr");
    pc_export_done(r, &o);
}

/* A sink on the exporter core: it counts what was printed, per signal, as every exporter counts
 * what it sent (otelcol_exporter_sent_*), and shutdown waits for every batch handed in. */
static const pc_exporter_def debug_def = {
    .sink = true,
    .encode = debug_format,
    .send = debug_write,
};

const pc_component_type pc_exporter_debug = {
    .name = "debug",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .cfg_size = sizeof(debug_cfg),
    .cfg = debug_keys,
    .validate = debug_validate,
    PC_EXPORTER_CORE(&debug_def),
    .signals = PC_SIGNALS_ALL,
    .doc = "prints what arrives to stderr (profiles: counts, per-profile lines, top functions; "
           "other signals: counts, and OTLP JSON when detailed)",
};
