/* Exporter "debug": prints what arrives (counts, per-profile lines, or top-functions tables) to
 * stderr. Formatting grows with the batch, so it runs on the thread pool; the write happens on
 * the loop thread in one call so lines of concurrent batches never interleave. */
#include <stdio.h>
#include <stdlib.h>

#include "pdata/summary.h"
#include "pipeline/component.h"
#include "pipeline/telemetry.h"

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

/* What was printed, per signal, as every exporter counts it (otelcol_exporter_sent_*). A write
 * to stderr that fails counts as send_failed. */
typedef struct debug_exp {
    uint64_t sent[PC_SIGNAL_COUNT], failed[PC_SIGNAL_COUNT];
    unsigned registered;
    size_t in_flight;
    pc_shutdown_done shutdown_done;
} debug_exp;

typedef struct debug_job {
    uv_work_t work;
    pc_component *c;
    pc_batch *batch;
    pc_signal sig;
    size_t items;
    pc_buf text;
    pc_done_fn done;
    void *arg;
} debug_job;

/* The series of a signal, registered when it is first printed (profiles at start), as the
 * sender does for the other exporters. */
static void register_signal(pc_component *c, pc_signal sig)
{
    debug_exp *x = c->priv;
    if (x->registered & PC_SIGNAL_BIT(sig)) return;
    x->registered |= PC_SIGNAL_BIT(sig);
    pc_exporter_register_metrics(c, sig, &x->sent[sig], &x->failed[sig]);
}

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
    pc_component *c = j->c;
    debug_exp *x = c->priv;
    (void)status;
    int ok = 1;
    if (j->text.len) ok = fwrite(j->text.data, 1, j->text.len, stderr) == j->text.len;
    if (fflush(stderr)) ok = 0;
    if (ok)
        x->sent[j->sig] += j->items;
    else
        x->failed[j->sig] += j->items;
    pc_batch_unref(j->batch);
    pc_buf_free(&j->text);
    j->done(j->arg, PC_OK, NULL);
    free(j);
    if (--x->in_flight == 0 && x->shutdown_done) {
        pc_shutdown_done done = x->shutdown_done;
        x->shutdown_done = NULL;
        done(c);
    }
}

static void debug_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    debug_exp *x = c->priv;
    debug_job *j = pc_xcalloc(1, sizeof(*j));
    j->c = c;
    j->batch = b;
    j->sig = b->signal;
    j->items = pc_batch_items(b);
    j->done = done;
    j->arg = arg;
    j->work.data = j;
    register_signal(c, j->sig);
    x->in_flight++;
    uv_queue_work(c->loop, &j->work, format_work, format_done);
}

static int debug_create(pc_component *c, pc_cfg_err *err)
{
    (void)err;
    c->priv = pc_xcalloc(1, sizeof(debug_exp));
    return 0;
}

static int debug_start(pc_component *c, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    register_signal(c, PC_SIGNAL_PROFILES);
    return 0;
}

/* Done once every batch handed in was printed. */
static void debug_shutdown(pc_component *c, pc_shutdown_done done)
{
    debug_exp *x = c->priv;
    if (x->in_flight) {
        x->shutdown_done = done;
        return;
    }
    done(c);
}

static void debug_destroy(pc_component *c)
{
    pc_metric_unregister(c);
    free(c->priv);
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
    .create = debug_create,
    .start = debug_start,
    .consume = debug_consume,
    .shutdown = debug_shutdown,
    .destroy = debug_destroy,
    .signals = PC_SIGNALS_ALL,
};
