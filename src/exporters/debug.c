/* Exporter "debug": prints what arrives (counts, per-profile lines, or top-functions tables) to
 * stderr. Formatting grows with the batch, so it runs on the thread pool; the write happens on
 * the loop thread in one call so lines of concurrent batches never interleave. */
#include <stdio.h>
#include <stdlib.h>

#include "pdata/summary.h"
#include "pipeline/component.h"

typedef struct debug_cfg {
    int verbosity;
    int64_t top;
} debug_cfg;

static const char *const verbosities[] = {"basic", "normal", "detailed", NULL};

static const pc_cfg_key debug_keys[] = {
    {"verbosity", PC_CFG_ENUM, "basic", offsetof(debug_cfg, verbosity),
     "basic: a line per batch; normal: a line per profile; detailed: top functions per profile",
     verbosities},
    {"top", PC_CFG_INT, "10", offsetof(debug_cfg, top), "rows in the detailed top-functions table",
     NULL},
    {NULL, 0, NULL, 0, NULL, NULL},
};

typedef struct debug_job {
    uv_work_t work;
    pc_component *c;
    pc_batch *batch;
    pc_buf text;
    pc_done_fn done;
    void *arg;
} debug_job;

static int debug_validate(void *cfgp, const pc_node *node, const char *path, pc_cfg_err *err)
{
    debug_cfg *cfg = cfgp;
    if (cfg->top < 1 || cfg->top > 10000) {
        pc_cfg_key_errorf(err, node, path, "top", "must be between 1 and 10000");
        return -1;
    }
    return 0;
}

static void format_work(uv_work_t *w)
{
    debug_job *j = w->data;
    debug_cfg *cfg = j->c->cfg;
    const pc_batch *b = j->batch;
    if (b->signal == PC_SIGNAL_PROFILES) {
        pc_summary_format(b, (pc_verbosity)cfg->verbosity, (int)cfg->top, j->c->id, &j->text);
        return;
    }
    /* traces, metrics, logs: a count line; detailed adds the request as OTLP JSON */
    pc_buf_printf(&j->text, "%s: %s: %zu resource(s), %zu %s\n", j->c->id,
                  pc_signal_infos[b->signal].name, pc_batch_n_resources(b), pc_batch_items(b),
                  pc_signal_infos[b->signal].items);
    if (cfg->verbosity == PC_VERBOSITY_DETAILED) {
        pc_batch_encode_json(b, &j->text);
        pc_buf_printf(&j->text, "\n");
    }
}

static void format_done(uv_work_t *w, int status)
{
    debug_job *j = w->data;
    (void)status;
    if (j->text.len) {
        fwrite(j->text.data, 1, j->text.len, stderr);
        fflush(stderr);
    }
    pc_batch_unref(j->batch);
    pc_buf_free(&j->text);
    j->done(j->arg, PC_OK, NULL);
    free(j);
}

static void debug_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    debug_job *j = pc_xcalloc(1, sizeof(*j));
    j->c = c;
    j->batch = b;
    j->done = done;
    j->arg = arg;
    j->work.data = j;
    uv_queue_work(c->loop, &j->work, format_work, format_done);
}

const pc_component_type pc_exporter_debug = {
    .name = "debug",
    .kind = PC_KIND_EXPORTER,
    .stability = "alpha",
    .doc = "prints what arrives to stderr (profiles: counts, per-profile lines, top functions; "
           "other signals: counts, and OTLP JSON when detailed)",
    .cfg_size = sizeof(debug_cfg),
    .cfg = debug_keys,
    .validate = debug_validate,
    .consume = debug_consume,
    .signals = PC_SIGNALS_ALL,
};
