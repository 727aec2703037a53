/* The exporter core (see exporter.h). */
#include "pipeline/exporter.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/telemetry.h"

void pc_export_outcome_set(pc_export_outcome *o, int st, const char *fmt, ...)
{
    va_list ap;
    memset(o, 0, sizeof *o);
    o->st = st;
    o->retry_after_s = -1;
    va_start(ap, fmt);
    vsnprintf(o->msg, sizeof o->msg, fmt, ap);
    va_end(ap);
}

void pc_export_outcome_merge(pc_export_outcome *acc, const pc_export_outcome *part)
{
    if (part->st != PC_OK && pc_err_worse(acc->st, part->st) != acc->st) {
        acc->st = pc_err_worse(acc->st, part->st);
        memcpy(acc->msg, part->msg, sizeof acc->msg);
    }
    if (part->retry_after_s > acc->retry_after_s) acc->retry_after_s = part->retry_after_s;
}

void pc_export_outcome_partial(pc_export_outcome *o, pc_signal sig, const uint8_t *body, size_t len,
                               bool json)
{
    int64_t rejected;
    if (!len || !pc_partial_success_parse(sig, body, len, json, &rejected, o->msg, sizeof o->msg))
        return;
    o->partial = true;
    o->rejected = rejected;
}

/* ---- one attempt ---- */

static pc_export_req *req_new(pc_exporter *e, const pc_batch *b)
{
    pc_export_req *r = pc_xcalloc(1, e->def->req_size ? e->def->req_size : sizeof(*r));
    r->e = e;
    r->batch = b;
    r->sig = b->signal;
    r->work.data = r;
    return r;
}

static void encode_work(uv_work_t *w)
{
    pc_export_req *r = w->data;
    r->e->def->encode(r);
}

static void encode_done(uv_work_t *w, int status)
{
    pc_export_req *r = w->data;
    (void)status;
    r->e->def->send(r);
}

static void run(pc_export_req *r)
{
    if (r->e->def->encode)
        uv_queue_work(r->e->c->loop, &r->work, encode_work, encode_done);
    else
        r->e->def->send(r);
}

/* The sender's send function: one attempt. */
static void send_once(void *arg, pc_batch *b, pc_send_result result, void *ctx)
{
    pc_export_req *r = req_new(arg, b);
    r->result = result;
    r->result_ctx = ctx;
    run(r);
}

static void drained(void *arg);

void pc_export_done(pc_export_req *r, const pc_export_outcome *o)
{
    pc_exporter *e = r->e;
    pc_component *c = e->c;
    if (o->st == PC_OK && o->partial) /* delivered as far as it goes: say what was not */
        PC_WARN(c->id, "partial success: backend rejected %lld %s: %s", (long long)o->rejected,
                r->sig == PC_SIGNAL_PROFILES ? "profile(s)" : pc_signal_infos[r->sig].items,
                o->msg);
    if (r->result) {
        r->result(r->result_ctx, o->st, o->retry_after_s, o->st == PC_OK ? NULL : o->msg);
    } else { /* a sink: counted here, upstream is told OK (see pc_exporter_def.sink) */
        size_t items = pc_batch_items(r->batch);
        if (o->st == PC_OK)
            e->counts.sent[r->sig] += items;
        else
            e->counts.failed[r->sig] += items;
        pc_batch_unref((pc_batch *)r->batch);
        r->done(r->done_arg, PC_OK, NULL);
    }
    if (e->def->release) e->def->release(r);
    pc_buf_free(&r->body);
    free(r);
    if (!e->def->sink) return;
    if (--e->in_flight == 0 && e->shutdown_done) drained(e);
}

/* ---- the component ---- */

int pc_exporter_create(pc_component *c, pc_error *err)
{
    pc_exporter *e = pc_xcalloc(1, sizeof(*e));
    e->c = c;
    e->def = c->type->exporter;
    e->counts.queue = !e->def->sink;
    c->priv = e;
    return e->def->create ? e->def->create(e, err) : 0;
}

static const pc_sender_cfg *sender_cfg(const pc_exporter *e)
{
    return (const pc_sender_cfg *)((const char *)e->c->cfg + e->def->sender_cfg);
}

static double queue_size_metric(const void *arg)
{
    const pc_exporter *e = arg;
    return e->sender ? (double)pc_sender_queue_size(e->sender) : 0;
}

int pc_exporter_start(pc_component *c, pc_error *err)
{
    pc_exporter *e = pc_exporter_of(c);
    int rc = e->def->start ? e->def->start(e, err) : 0;
    if (rc < 0) return rc;
    if (!e->def->sink) {
        e->sender = pc_sender_new(c, sender_cfg(e), &e->counts, send_once, e, err);
        if (!e->sender) return PC_EIO; /* its storage directory */
    }
    pc_send_counts_register(&e->counts, c, PC_SIGNAL_PROFILES);
    if (!e->sender) return 0;
    char labels[300];
    snprintf(labels, sizeof labels, "exporter=\"%s\"", c->id);
    e->capacity = (uint64_t)sender_cfg(e)->queue_size;
    pc_metric_fn(c, "otelcol_exporter_queue_size", "Current size of the sending queue",
                 PC_METRIC_GAUGE, labels, queue_size_metric, e);
    pc_metric_u64(c, "otelcol_exporter_queue_capacity", "Capacity of the sending queue",
                  PC_METRIC_GAUGE, labels, &e->capacity);
    return 0;
}

void pc_exporter_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    pc_exporter *e = pc_exporter_of(c);
    if (!e->def->sink) {
        pc_sender_consume(e->sender, b, done, arg);
        return;
    }
    pc_export_req *r = req_new(e, b); /* owns b until done */
    r->done = done;
    r->done_arg = arg;
    pc_send_counts_register(&e->counts, c, r->sig);
    e->in_flight++;
    run(r);
}

bool pc_exporter_full(pc_component *c)
{
    const pc_exporter *e = pc_exporter_of(c);
    return e && e->sender && pc_sender_full(e->sender);
}

bool pc_exporter_durable(pc_component *c, size_t batch_size)
{
    pc_exporter *e = pc_exporter_of(c);
    if (!e || !e->sender || !pc_sender_durable(e->sender)) return false;
    pc_sender_merge_at_least(e->sender, batch_size);
    return true;
}

void pc_exporter_closed(void *arg)
{
    pc_exporter *e = arg;
    pc_shutdown_done done = e->shutdown_done;
    e->shutdown_done = NULL;
    done(e->c);
}

/* Nothing is in flight any more: close the transport. */
static void drained(void *arg)
{
    pc_exporter *e = arg;
    if (e->sender) {
        /* the final counters, as the receivers' stop lines: /metrics is gone once the process
         * exits, and what a shutdown deadline dropped is counted only now */
        char totals[600];
        pc_send_counts_format(&e->counts, totals, sizeof totals);
        PC_INFO(e->c->id, "stopped (%s)", totals[0] ? totals : "nothing sent");
    }
    if (e->def->close)
        e->def->close(e);
    else
        pc_exporter_closed(e);
}

void pc_exporter_shutdown(pc_component *c, pc_shutdown_done done)
{
    pc_exporter *e = pc_exporter_of(c);
    if (!e) {
        done(c);
        return;
    }
    e->shutdown_done = done;
    if (e->def->stopping) e->def->stopping(e);
    if (e->sender)
        pc_sender_shutdown(e->sender, drained, e);
    else if (!e->in_flight)
        drained(e);
}

void pc_exporter_destroy(pc_component *c)
{
    pc_exporter *e = pc_exporter_of(c);
    if (!e) return;
    pc_metric_unregister(c);
    pc_sender_free(e->sender);
    if (e->def->destroy) e->def->destroy(e);
    free(e);
    c->priv = NULL;
}
