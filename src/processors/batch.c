/* Processor "batch": merges incoming batches into larger requests with one de-duplicated
 * dictionary, like the Collector's batch processor. On traces, metrics and logs pipelines it
 * concatenates requests (send_batch_size counts spans, data points or log records there;
 * send_batch_max_size splits profiles only).
 *
 * Buffered data is not acknowledged: every upstream (done, arg) stays pending until the flush
 * that carried its data has its downstream result, so backpressure and errors reach the sender
 * and nothing is lost silently. Where every exporter behind it keeps a persistent queue, the
 * processor buffers nothing: each request goes straight on and is answered as soon as it is on
 * disk, and those queues merge what waits in them up to send_batch_size samples per send
 * (sending_queue.batch.max_size): the same batching, without holding a client for a timeout.
 * Batches are kept apart per distinct values of metadata_keys
 * ("shards"). Merging and splitting run on the thread pool in a flush job that owns the buffered
 * batches; the loop thread only touches shards, the timer and counters. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pdata/merge.h"
#include "pdata/split.h"
#include "pdata/wire_merge.h"
#include "base/compress.h"
#include "sdk/component.h"
#include "sdk/telemetry.h"
#include "sdk/processor.h"

typedef struct batch_cfg {
    uint64_t timeout_ms;
    int64_t send_batch_size;
    int64_t send_batch_max_size;
    pc_strlist metadata_keys;
    int64_t metadata_cardinality_limit;
} batch_cfg;

/* clang-format off */
static const pc_cfg_key batch_keys[] = {
    {"timeout", PC_CFG_DURATION, "200ms", offsetof(batch_cfg, timeout_ms), "send a batch this long after its first data arrived, whatever its size (0: at once)", NULL},
    {"send_batch_size", PC_CFG_INT, "8192", offsetof(batch_cfg, send_batch_size), "send as soon as this many samples (spans, data points, log records) are pending (0: only the timeout sends)", NULL},
    {"send_batch_max_size", PC_CFG_INT, "0", offsetof(batch_cfg, send_batch_max_size), "split requests above this many samples, inside a profile if need be (0: no limit)", NULL},
    {"metadata_keys", PC_CFG_LIST, "", offsetof(batch_cfg, metadata_keys), "request metadata (header names) whose distinct values are batched separately; the tenant (x-scope-orgid) always is", NULL},
    {"metadata_cardinality_limit", PC_CFG_INT, "1000", offsetof(batch_cfg, metadata_cardinality_limit), "most distinct metadata value combinations pending at once; more are refused (retryable)", NULL},
    {0},
};
/* clang-format on */

/* One buffered upstream request. */
typedef struct input {
    pc_batch *b;
    pc_done_fn done;
    void *arg;
    int st;
} input;

/* Pending data of one combination of metadata values. */
typedef struct shard {
    char **vals; /* one per metadata key; NULL = absent */
    input *in;
    size_t n_in, cap;
    size_t samples;
    uint64_t deadline; /* uv_now() when the timer flushes it */
} shard;

typedef struct batch_proc {
    pc_component *c;
    shard **shards;
    size_t n_shards;
    uv_timer_t timer;
    bool timer_inited, closing, shutting;
    bool durable;      /* every exporter behind keeps a persistent queue: pass each request on */
    size_t inflight;   /* flush jobs whose outputs are not all answered yet */
    pc_proc_core core; /* their merges on the thread pool */
    pc_shutdown_done shutdown_done;
    /* counters (self-metrics) */
    uint64_t flushes_size, flushes_timeout, flushes_shutdown, requests_out, samples_out,
        refused_cardinality, wire_merges;
    pc_histogram send_size; /* items per request sent */
} batch_proc;

/* Which inputs an output request carries data of. */
typedef struct output {
    pc_batch *b;
    size_t *inputs;
    size_t n_inputs;
    struct flush_job *job;
} output;

typedef struct flush_job {
    pc_proc_work work; /* first: the processor core's */
    batch_proc *bp;
    input *in;
    size_t n_in;
    char **meta_keys, **meta_vals; /* shard metadata for the outputs */
    size_t n_meta;
    output *out;
    size_t n_out;
    size_t pending;
    bool wire_merged; /* its inputs were merged on the wire (wire_inputs) */
    char msg[256];
} flush_job;

static int batch_validate(void *cfgp, const pc_node *node, const char *path, pc_error *err)
{
    batch_cfg *cfg = cfgp;
    if (cfg->send_batch_size < 0)
        return pc_cfg_key_errorf(err, node, path, "send_batch_size", "must be >= 0");
    if (cfg->send_batch_max_size < 0)
        return pc_cfg_key_errorf(err, node, path, "send_batch_max_size", "must be >= 0");
    if (cfg->send_batch_max_size > 0 && cfg->send_batch_max_size < cfg->send_batch_size)
        return pc_cfg_key_errorf(err, node, path, "send_batch_max_size",
                                 "must be >= send_batch_size (%lld)",
                                 (long long)cfg->send_batch_size);
    if (cfg->metadata_cardinality_limit < 1)
        return pc_cfg_key_errorf(err, node, path, "metadata_cardinality_limit", "must be >= 1");
    if (cfg->metadata_keys.n > PC_META_MAX)
        return pc_cfg_key_errorf(err, node, path, "metadata_keys", "at most %d keys", PC_META_MAX);
    for (size_t i = 0; i < cfg->metadata_keys.n; i++) {
        for (size_t j = 0; j < i; j++) {
            if (strcasecmp(cfg->metadata_keys.v[i], cfg->metadata_keys.v[j]) == 0)
                return pc_cfg_key_errorf(err, node, path, "metadata_keys", "\"%s\" is listed twice",
                                         cfg->metadata_keys.v[i]);
        }
    }
    return 0;
}

static int batch_create(pc_component *c, pc_error *err)
{
    (void)err;
    batch_cfg *cfg = c->cfg;
    /* batch metadata keys are lower-case header names */
    bool tenant = false;
    for (size_t i = 0; i < cfg->metadata_keys.n; i++) {
        for (char *p = cfg->metadata_keys.v[i]; *p; p++)
            if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
        tenant |= strcmp(cfg->metadata_keys.v[i], PC_META_TENANT) == 0;
    }
    /* Tenants are always batched apart: a batch of two tenants' data would reach the backend
     * under neither (its metadata keeps only what every input agrees on; docs/components.md). */
    if (!tenant && cfg->metadata_keys.n < PC_META_MAX) {
        size_t n = cfg->metadata_keys.n;
        cfg->metadata_keys.v = pc_xrealloc(cfg->metadata_keys.v, (n + 1) * sizeof(char *));
        cfg->metadata_keys.v[n] = pc_xstrdup(PC_META_TENANT);
        cfg->metadata_keys.n = n + 1;
    } else if (!tenant) {
        PC_WARN(c->id,
                "metadata_keys has %d keys and not " PC_META_TENANT
                ": batches may hold several tenants' data, sent under none",
                PC_META_MAX);
    }
    batch_proc *bp = pc_xcalloc(1, sizeof *bp);
    bp->c = c;
    c->priv = bp;
    return 0;
}

static void timer_cb(uv_timer_t *t);

/* The Collector's buckets for batch_send_size (its batch processor, scraped from otelcol
 * 0.161.0), so that the same dashboards read both. */
static const double send_size_bounds[] = {10,   25,    50,    75,    100,   250,   500,  750,
                                          1000, 2000,  3000,  4000,  5000,  6000,  7000, 8000,
                                          9000, 10000, 20000, 30000, 50000, 100000};

static double metadata_cardinality(const void *arg)
{
    return (double)((const batch_proc *)arg)->n_shards;
}

static int batch_start(pc_component *c, pc_error *e)
{
    batch_proc *bp = c->priv;
    int rc = uv_timer_init(c->loop, &bp->timer);
    if (rc) return pc_error_set(e, PC_EIO, "timer: %s", uv_strerror(rc));
    bp->timer.data = bp;
    bp->timer_inited = true;
    const batch_cfg *cfg = c->cfg;
    size_t merge = cfg->send_batch_size > 0 ? (size_t)cfg->send_batch_size : 8192;
    bp->durable = pc_consumer_durable(c->next, merge);
    if (bp->durable)
        PC_INFO(c->id,
                "every exporter behind keeps a persistent queue: requests are answered once on "
                "disk, and the queues merge them (up to %zu samples per send)",
                merge);
    char labels[300];
    pc_proc_labels(c, labels, sizeof labels);
    bp->send_size.bounds = send_size_bounds;
    bp->send_size.n_bounds = sizeof send_size_bounds / sizeof send_size_bounds[0];
    pc_metric_histogram(c, "otelcol_processor_batch_batch_send_size",
                        "Number of units in the batch (samples, spans, data points, log records)",
                        labels, &bp->send_size);
    pc_metric_fn(c, "otelcol_processor_batch_metadata_cardinality",
                 "Number of distinct metadata value combinations being processed", PC_METRIC_GAUGE,
                 labels, metadata_cardinality, bp);
    pc_proc_metric(c, "otelcol_processor_batch_batch_size_trigger_send",
                   "Flushes because send_batch_size was reached", &bp->flushes_size);
    pc_proc_metric(c, "otelcol_processor_batch_timeout_trigger_send",
                   "Flushes because the timeout fired", &bp->flushes_timeout);
    pc_proc_metric(c, "profcol_processor_batch_wire_merges",
                   "Flushes whose requests were merged on the wire, none decoded "
                   "(ARCHITECTURE.md section 2)",
                   &bp->wire_merges);
    return 0;
}

/* ---- flushing (thread pool) ----------------------------------------------------------------- */

static void add_input(output *o, size_t input)
{
    if (o->n_inputs && o->inputs[o->n_inputs - 1] == input) return;
    o->inputs = pc_xrealloc(o->inputs, (o->n_inputs + 1) * sizeof *o->inputs);
    o->inputs[o->n_inputs++] = input;
}

/* Traces, metrics and logs: one request carrying every input. */
static void concat_inputs(flush_job *j)
{
    pc_batch **bs = pc_xmalloc(j->n_in * sizeof *bs);
    j->n_out = 1;
    j->out = pc_xcalloc(1, sizeof *j->out);
    for (size_t i = 0; i < j->n_in; i++) {
        bs[i] = j->in[i].b;
        add_input(&j->out[0], i);
    }
    j->out[0].b = pc_batch_concat(bs[0]->signal, bs, j->n_in);
    free(bs);
}

/* Profiles: merged into one request per chunk of the split plan, each with one dictionary. */
static void merge_chunks(flush_job *j, const pc_split_plan *pl)
{
    j->n_out = pl->chunks;
    j->out = pc_xcalloc(j->n_out, sizeof *j->out);
    if (pl->chunks == 1) {
        /* the common case: whole batches, whole dictionaries */
        pc_merger *m = pc_merger_new();
        for (size_t i = 0; i < j->n_in; i++) {
            pc_merger_add(m, j->in[i].b, NULL, 0);
            add_input(&j->out[0], i);
        }
        j->out[0].b = pc_merger_finish(m);
        return;
    }
    /* split: each part of an input brings only the dictionary entries it reaches */
    pc_merge_slice *tmp = pc_xmalloc(pl->n * sizeof *tmp);
    size_t k = 0;
    for (size_t ch = 0; ch < pl->chunks; ch++) {
        pc_merger *m = pc_merger_new();
        while (k < pl->n && pl->v[k].chunk == ch) {
            size_t in = pl->v[k].input, n = 0;
            while (k < pl->n && pl->v[k].chunk == ch && pl->v[k].input == in)
                tmp[n++] = pl->v[k++].sl;
            pc_merger_add(m, j->in[in].b, tmp, n);
            add_input(&j->out[ch], in);
        }
        j->out[ch].b = pc_merger_finish(m);
    }
    free(tmp);
}

/* Profiles whose every input is still bytes only (checked on the wire, its model never decoded,
 * ARCHITECTURE.md §2) and that need no split: one bytes-only request without decoding any, the
 * lone input as received or the inputs merged on the wire (pdata/wire_merge.h), which the
 * exporter deflates without encoding (bench/README.md, "Merging on the wire"). NULL when any
 * input has a model, there is no profile, a split is due or the wire merge cannot: the model
 * path then. *merged: the output is a new request (it gets the shard's metadata). */
static pc_batch *wire_inputs(flush_job *j, size_t max, bool *merged)
{
    size_t samples = 0, profiles = 0, s, p, decode_limit = 0;
    bool unlimited = false;
    for (size_t i = 0; i < j->n_in; i++) {
        const pc_batch *b = j->in[i].b;
        if (!pc_batch_is_wire(b) || !pc_batch_wire_counts(b, &s, &p)) return NULL;
        samples += s;
        profiles += p;
        /* the merged request's lazy decode may take what its parts could have (0: no limit) */
        size_t lim = b->wire->max_decoded;
        unlimited = unlimited || lim == 0;
        decode_limit = decode_limit > SIZE_MAX - lim ? SIZE_MAX : decode_limit + lim;
    }
    if (unlimited) decode_limit = 0;
    if (!profiles || (max && samples > max)) return NULL;
    *merged = j->n_in > 1;
    if (j->n_in == 1) return pc_batch_ref(j->in[0].b);
    const uint8_t **data = pc_xmalloc(j->n_in * sizeof *data);
    size_t *len = pc_xmalloc(j->n_in * sizeof *len);
    for (size_t i = 0; i < j->n_in; i++)
        data[i] = pc_batch_wire_bytes(j->in[i].b, &len[i]);
    pc_buf out = {0};
    pc_batch *b = NULL;
    if (pc_wire_merge(data, len, j->n_in, &out) == 0) {
        b = pc_batch_take_wire(out.data, out.len, out.cap, samples, profiles, decode_limit);
        out = (pc_buf){0};
        size_t wl = 0;
        const uint8_t *w = pc_batch_wire_bytes(b, &wl);
        pc_batch_set_raw(b, w, wl, PC_ENC_NONE, false); /* what passes through: deflated only */
    }
    pc_buf_free(&out);
    free(data);
    free(len);
    return b;
}

static void one_output(flush_job *j, pc_batch *b)
{
    j->n_out = 1;
    j->out = pc_xcalloc(1, sizeof *j->out);
    j->out[0].b = b;
    for (size_t i = 0; i < j->n_in; i++)
        add_input(&j->out[0], i);
}

static void flush_work(pc_proc_work *w)
{
    flush_job *j = (flush_job *)w;
    const batch_cfg *cfg = j->bp->c->cfg;
    pc_split_plan pl = {0};
    bool profiles = !j->n_in || j->in[0].b->signal == PC_SIGNAL_PROFILES, merged = true;
    pc_batch *wired =
        profiles && j->n_in ? wire_inputs(j, (size_t)cfg->send_batch_max_size, &merged) : NULL;
    if (wired) {
        one_output(j, wired);
        j->wire_merged = merged;
    } else if (profiles) {
        pc_batch **ins = pc_xmalloc((j->n_in ? j->n_in : 1) * sizeof *ins);
        for (size_t i = 0; i < j->n_in; i++)
            ins[i] = j->in[i].b;
        pc_split_plan_make(ins, j->n_in, (size_t)cfg->send_batch_max_size, &pl);
        free(ins);
        if (pl.n == 0) goto out; /* nothing but empty scopes */
    }
    if (!wired && j->n_in == 1 && (!profiles || pl.chunks == 1)) {
        /* one request, not split: forwarded as received, as the Collector's batch does; its
         * metadata is the output's already, and its bytes can still pass through
         * (ARCHITECTURE.md §2) */
        one_output(j, pc_batch_ref(j->in[0].b));
        merged = false;
    } else if (!wired) {
        if (profiles)
            merge_chunks(j, &pl);
        else
            concat_inputs(j);
    }
    for (size_t o = 0; merged && o < j->n_out; o++)
        for (size_t i = 0; i < j->n_meta; i++)
            if (j->meta_vals[i]) pc_batch_set_meta(j->out[o].b, j->meta_keys[i], j->meta_vals[i]);
    for (size_t o = 0; o < j->n_out; o++)
        j->out[o].job = j;
out:
    pc_split_plan_free(&pl);
    /* the inputs' data now lives in the outputs */
    for (size_t i = 0; i < j->n_in; i++) {
        pc_batch_unref(j->in[i].b);
        j->in[i].b = NULL;
    }
}

static void maybe_finish_shutdown(batch_proc *bp);

static void job_free(flush_job *j)
{
    for (size_t o = 0; o < j->n_out; o++)
        free(j->out[o].inputs);
    free(j->out);
    for (size_t i = 0; i < j->n_meta; i++) {
        free(j->meta_keys[i]);
        free(j->meta_vals[i]);
    }
    free(j->meta_keys);
    free(j->meta_vals);
    free(j->in);
    free(j);
}

/* Every output has its downstream result: answer every upstream request with the worst result
 * of the outputs that carried its data. */
static void job_complete(flush_job *j)
{
    batch_proc *bp = j->bp;
    bp->inflight--;
    for (size_t i = 0; i < j->n_in; i++)
        j->in[i].done(j->in[i].arg, j->in[i].st, j->in[i].st == PC_OK ? NULL : j->msg);
    job_free(j);
    maybe_finish_shutdown(bp);
}

static void output_done(void *arg, int st, const char *msg)
{
    output *o = arg;
    flush_job *j = o->job;
    if (st != PC_OK) {
        if (!j->msg[0]) snprintf(j->msg, sizeof j->msg, "%s", msg ? msg : "export failed");
        for (size_t i = 0; i < o->n_inputs; i++)
            j->in[o->inputs[i]].st = pc_err_worse(j->in[o->inputs[i]].st, st);
    }
    if (--j->pending == 0) job_complete(j);
}

static void flush_after(pc_proc_work *w)
{
    flush_job *j = (flush_job *)w;
    batch_proc *bp = j->bp;
    j->pending = 1; /* downstream may answer synchronously */
    bp->wire_merges += j->wire_merged;
    for (size_t o = 0; o < j->n_out; o++) {
        size_t items = pc_batch_items(j->out[o].b);
        /* a bytes-only request is not decoded to count its resources for a log line */
        if (pc_batch_is_wire(j->out[o].b))
            PC_DEBUG(bp->c->id, "sending %zu %s, bytes only (part %zu/%zu)", items,
                     pc_signal_infos[j->out[o].b->signal].items, o + 1, j->n_out);
        else
            PC_DEBUG(bp->c->id, "sending %zu %s of %zu resources (part %zu/%zu)", items,
                     pc_signal_infos[j->out[o].b->signal].items, pc_batch_n_resources(j->out[o].b),
                     o + 1, j->n_out);
        bp->requests_out++;
        bp->samples_out += items;
        pc_histogram_observe(&bp->send_size, (double)items);
        j->pending++;
        pc_batch *b = j->out[o].b;
        j->out[o].b = NULL;
        pc_consume(bp->c->next, b, output_done, &j->out[o]);
    }
    if (--j->pending == 0) job_complete(j);
}

static void shard_free(shard *s, size_t nkeys)
{
    for (size_t i = 0; i < nkeys; i++)
        free(s->vals[i]);
    free(s->vals);
    free(s->in);
    free(s);
}

/* Hand the shard's buffered inputs to a flush job on the thread pool; the shard goes away. */
static void flush_shard(batch_proc *bp, size_t idx)
{
    const batch_cfg *cfg = bp->c->cfg;
    shard *s = bp->shards[idx];
    bp->shards[idx] = bp->shards[--bp->n_shards];

    flush_job *j = pc_xcalloc(1, sizeof *j);
    j->bp = bp;
    j->in = s->in;
    j->n_in = s->n_in;
    s->in = NULL;
    /* outputs carry the shard's key values, and any other metadata all inputs agree on */
    size_t cap = PC_META_MAX;
    j->meta_keys = pc_xcalloc(cap, sizeof(char *));
    j->meta_vals = pc_xcalloc(cap, sizeof(char *));
    for (size_t i = 0; i < cfg->metadata_keys.n; i++) {
        j->meta_keys[j->n_meta] = pc_xstrdup(cfg->metadata_keys.v[i]);
        j->meta_vals[j->n_meta++] = s->vals[i] ? pc_xstrdup(s->vals[i]) : NULL;
    }
    const pc_meta *m0 = &j->in[0].b->meta;
    for (size_t k = 0; k < m0->n && j->n_meta < cap; k++) {
        bool keyed = false, same = true;
        for (size_t i = 0; i < cfg->metadata_keys.n; i++)
            keyed |= strcmp(cfg->metadata_keys.v[i], m0->keys[k]) == 0;
        for (size_t i = 1; i < j->n_in && same; i++) {
            const char *v = pc_batch_get_meta(j->in[i].b, m0->keys[k]);
            same = v && strcmp(v, m0->vals[k]) == 0;
        }
        if (keyed || !same) continue;
        j->meta_keys[j->n_meta] = pc_xstrdup(m0->keys[k]);
        j->meta_vals[j->n_meta++] = pc_xstrdup(m0->vals[k]);
    }
    PC_DEBUG(bp->c->id, "flushing %zu requests with %zu samples", s->n_in, s->samples);
    shard_free(s, cfg->metadata_keys.n);

    bp->inflight++;
    j->work =
        (pc_proc_work){.c = bp->c, .core = &bp->core, .run = flush_work, .after = flush_after};
    pc_proc_work_submit(&j->work);
}

/* ---- timer and shards (loop thread) --------------------------------------------------------- */

static void rearm(batch_proc *bp)
{
    if (!bp->timer_inited || bp->closing) return;
    uint64_t next = UINT64_MAX;
    for (size_t i = 0; i < bp->n_shards; i++)
        if (bp->shards[i]->deadline < next) next = bp->shards[i]->deadline;
    if (next == UINT64_MAX) {
        uv_timer_stop(&bp->timer);
        return;
    }
    uint64_t now = uv_now(bp->c->loop);
    uv_timer_start(&bp->timer, timer_cb, next > now ? next - now : 0, 0);
}

static void timer_cb(uv_timer_t *t)
{
    batch_proc *bp = t->data;
    uint64_t now = uv_now(bp->c->loop);
    for (size_t i = bp->n_shards; i-- > 0;) {
        if (bp->shards[i]->deadline > now) continue;
        bp->flushes_timeout++;
        flush_shard(bp, i);
    }
    rearm(bp);
}

static bool same_val(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* The shard for b's metadata values (new ones within the cardinality limit), or PC_EBUSY when
 * it would be one more than the limit. */
static long find_shard(batch_proc *bp, const pc_batch *b)
{
    const batch_cfg *cfg = bp->c->cfg;
    size_t nk = cfg->metadata_keys.n;
    for (size_t i = 0; i < bp->n_shards; i++) {
        size_t k = 0;
        while (k < nk &&
               same_val(bp->shards[i]->vals[k], pc_batch_get_meta(b, cfg->metadata_keys.v[k])))
            k++;
        if (k == nk) return (long)i;
    }
    if (bp->n_shards >= (size_t)cfg->metadata_cardinality_limit) return PC_EBUSY;
    shard *s = pc_xcalloc(1, sizeof *s);
    s->vals = pc_xcalloc(nk ? nk : 1, sizeof(char *));
    for (size_t k = 0; k < nk; k++) {
        const char *v = pc_batch_get_meta(b, cfg->metadata_keys.v[k]);
        s->vals[k] = v ? pc_xstrdup(v) : NULL;
    }
    s->deadline = uv_now(bp->c->loop) + cfg->timeout_ms;
    bp->shards = pc_xrealloc(bp->shards, (bp->n_shards + 1) * sizeof *bp->shards);
    bp->shards[bp->n_shards] = s;
    return (long)bp->n_shards++;
}

/* No profile (no resource for other signals): nothing to send. A bytes-only batch answers
 * from its wire counts: reading its model would decode it, here on the loop thread. */
static bool batch_empty(const pc_batch *b)
{
    size_t samples, profiles;
    if (b->signal != PC_SIGNAL_PROFILES) return pc_batch_n_resources(b) == 0;
    if (pc_batch_is_wire(b) && pc_batch_wire_counts(b, &samples, &profiles)) return !profiles;
    return pc_batch_counts(b).profiles == 0;
}

static void batch_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg)
{
    batch_proc *bp = c->priv;
    const batch_cfg *cfg = c->cfg;
    size_t items = pc_batch_items(b);
    if (batch_empty(b)) { /* nothing to send, nothing to wait for */
        pc_batch_unref(b);
        done(arg, PC_OK, NULL);
        return;
    }
    if (bp->durable) { /* acknowledged by the persistent queue, batched there */
        bp->requests_out++;
        bp->samples_out += items;
        pc_histogram_observe(&bp->send_size, (double)items);
        pc_consume(c->next, b, done, arg);
        return;
    }
    long idx = find_shard(bp, b);
    if (idx < 0) {
        bp->refused_cardinality++;
        PC_WARN(c->id, "refusing a request: more than %lld metadata value combinations pending",
                (long long)cfg->metadata_cardinality_limit);
        pc_batch_unref(b);
        done(arg, PC_EBUSY, "batch: too many distinct metadata values pending");
        return;
    }
    shard *s = bp->shards[idx];
    if (s->n_in == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->in = pc_xrealloc(s->in, s->cap * sizeof *s->in);
    }
    s->in[s->n_in++] = (input){b, done, arg, PC_OK};
    s->samples += items;
    bool full = cfg->send_batch_size > 0 && s->samples >= (size_t)cfg->send_batch_size;
    if (full || cfg->timeout_ms == 0 || bp->shutting || !bp->timer_inited) {
        if (full) bp->flushes_size++;
        flush_shard(bp, (size_t)idx);
    }
    rearm(bp);
}

/* ---- shutdown ------------------------------------------------------------------------------- */

static void timer_closed(uv_handle_t *h)
{
    batch_proc *bp = h->data;
    bp->timer_inited = false;
    pc_shutdown_done done = bp->shutdown_done;
    bp->shutdown_done = NULL;
    PC_DEBUG(bp->c->id, "stopped: %llu requests, %llu samples sent",
             (unsigned long long)bp->requests_out, (unsigned long long)bp->samples_out);
    done(bp->c);
}

static void maybe_finish_shutdown(batch_proc *bp)
{
    if (!bp->shutting || !bp->shutdown_done || bp->inflight || bp->n_shards || bp->closing) return;
    if (bp->timer_inited) {
        bp->closing = true;
        uv_close((uv_handle_t *)&bp->timer, timer_closed);
        return;
    }
    pc_shutdown_done done = bp->shutdown_done;
    bp->shutdown_done = NULL;
    done(bp->c);
}

/* Shutdown begins: flush what is buffered and pass later data on at once, so receivers waiting
 * for answers need not wait for the timer. */
static void batch_drain(pc_component *c)
{
    batch_proc *bp = c->priv;
    bp->shutting = true;
    while (bp->n_shards) {
        bp->flushes_shutdown++;
        flush_shard(bp, bp->n_shards - 1);
    }
}

static void batch_shutdown(pc_component *c, pc_shutdown_done done)
{
    batch_proc *bp = c->priv;
    bp->shutdown_done = done;
    batch_drain(c);
    maybe_finish_shutdown(bp);
}

static void batch_destroy(pc_component *c)
{
    batch_proc *bp = c->priv;
    if (!bp) return;
    const batch_cfg *cfg = c->cfg;
    /* only reached with data pending if the service never ran: refuse it, lose nothing silently */
    for (size_t i = 0; i < bp->n_shards; i++) {
        shard *s = bp->shards[i];
        for (size_t k = 0; k < s->n_in; k++) {
            pc_batch_unref(s->in[k].b);
            s->in[k].done(s->in[k].arg, PC_EAGAIN, "batch: shutting down");
        }
        shard_free(s, cfg->metadata_keys.n);
    }
    free(bp->shards);
    free(bp);
}

const pc_component_type pc_processor_batch = {
    .name = "batch",
    .kind = PC_KIND_PROCESSOR,
    .stability = "development",
    .cfg_size = sizeof(batch_cfg),
    .cfg = batch_keys,
    .validate = batch_validate,
    .create = batch_create,
    .start = batch_start,
    .consume = batch_consume,
    .drain = batch_drain,
    .shutdown = batch_shutdown,
    .destroy = batch_destroy,
    .signals = PC_SIGNALS_ALL,
    /* flush_work merges bytes-only requests on the wire and reads no model of them */
    .wire_through = true,
    .doc = "merges requests into larger ones with one de-duplicated dictionary; splits above "
           "send_batch_max_size; keeps metadata_keys values apart",
};
