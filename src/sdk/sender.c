/* Sending queue, retries and the persistent queue, shared by every exporter. */
#include "sdk/sender.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdata/merge.h"
#include "sdk/internal/queue_file.h"
#include "sdk/pool.h"
#include "sdk/telemetry.h"

const char *const pc_sender_sizers[] = {"requests", "samples", "bytes", NULL};

/* What only a persistent queue's records need: disk work on the pool and its result (656 bytes).
 * Apart, as the retry timer is, so that an item of a memory queue is 136 bytes, not 936: a queued
 * small request is its bytes and little more (bench/README.md, "What a queued request holds"). */
typedef struct item_io {
    uv_work_t work;
    pc_error err; /* PC_EIO, PC_EINVAL (a corrupt record) */
} item_io;

typedef struct item item;
struct item {
    item *next;
    pc_sender *s;
    pc_batch *batch; /* NULL while a persisted record waits on disk */
    uint64_t seq;    /* persistent record number, 0 = memory only */
    pc_signal sig;
    size_t samples, units; /* samples: items of the signal (spans, data points, ...) */
    pc_done_fn done;       /* set when the queue is disabled: upstream waits for the outcome */
    void *arg;
    uint64_t first_attempt_ms;
    int attempt;
    int in_flight_send; /* a send call is outstanding */
    int handing;        /* retiring: handed back, the taker has not answered yet */
    item *handing_next; /* pc_sender_retire's list of what it hands back */
    uv_timer_t *timer;  /* retry backoff, made on the first retry (most items never wait) */
    item_io *io;        /* with a record on disk, or from its first merge on (io_of); else NULL */
    char *meta;         /* the batch's metadata as "key\tvalue\n" lines: only equal ones merge */
    item *follow;       /* requests merged into this one's send (sending_queue.batch.max_size) */
};

struct pc_sender {
    pc_component *c;
    pc_sender_cfg cfg;
    pc_send_fn send;
    void *send_arg;
    item *head, *tail; /* queued, not yet picked by a consumer */
    item *waiting;     /* in flight (sending or waiting for a retry), a list for shutdown */
    uint64_t queued;   /* queued items (metric) */
    uint64_t queued_units, capacity;
    bool failing; /* the last answer was a retryable failure, no success since */
    size_t active, io_busy;
    char *dir;
    uint64_t next_seq;
    int stopping, deadline_passed;
    int retiring;      /* pc_sender_retire: everything goes back through handback */
    int in_retire;     /* inside pc_sender_retire: it finishes the shutdown itself */
    int shutting_down; /* pc_sender_shutdown was called (the exporter stops) */
    pc_sender_handback handback;
    void *handback_arg;
    uv_timer_t deadline;
    int deadline_open;
    void (*shutdown_done)(void *);
    void *shutdown_arg;
    /* per signal, in that signal's unit: the exporter's counts (k), whose series are registered
     * when a signal first arrives */
    pc_send_counts *k;
    uint64_t *sent, *failed, *enqueue_failed; /* k's arrays */
    /* "queue is full" happens per request under overload: one line per interval with a count */
    pc_log_limiter full_log;
};

/* The item's disk-work part, made the first time it is needed (loop thread). */
static item_io *io_of(item *it)
{
    if (!it->io) it->io = pc_xcalloc(1, sizeof *it->io);
    return it->io;
}

static void dispatch(pc_sender *s);
static void start_item(item *it);

/* While as many items wait as there are consumers (a whole round of sends behind the ones in
 * flight), the decodes of this sender's pipelines are not to run ahead of the sends (sdk/pool.h):
 * without it, decodes of a flood take the cores from the loop that sends and the queue fills until
 * it refuses (bench/README.md, "Small requests, sixth pass"). Not while the backend fails: that
 * backlog is the backend's, and no CPU given to the loop sends it sooner. */
bool pc_sender_behind(const pc_sender *s)
{
    return s->cfg.queue_enabled && !s->failing && s->queued >= (uint64_t)s->cfg.num_consumers;
}

static void maybe_finish_shutdown(pc_sender *s);
static void hand_back(item *it);

int pc_sender_validate_at(const pc_sender_cfg *cfg, const pc_node *node, const char *path,
                          const char *prefix, pc_error *err)
{
    char key[160];
#define KEY(k) (snprintf(key, sizeof key, "%s%s", prefix, k), key)
    if (cfg->num_consumers < 1)
        return pc_cfg_key_errorf(err, node, path, KEY("sending_queue.num_consumers"),
                                 "must be >= 1");
    if (cfg->batch_max < 0)
        return pc_cfg_key_errorf(err, node, path, KEY("sending_queue.batch.max_size"),
                                 "must be >= 0");
    if (cfg->queue_size < 1)
        return pc_cfg_key_errorf(err, node, path, KEY("sending_queue.queue_size"), "must be >= 1");
    if (cfg->storage && !cfg->queue_enabled)
        return pc_cfg_key_errorf(err, node, path, KEY("sending_queue.storage"),
                                 "needs sending_queue::enabled: true");
    /* the Collector names a file_storage extension here; profcol a directory: a Collector
     * config would otherwise queue into ./file_storage */
    if (cfg->storage &&
        (!strcmp(cfg->storage, "file_storage") || !strncmp(cfg->storage, "file_storage/", 13)))
        return pc_cfg_key_errorf(err, node, path, KEY("sending_queue.storage"),
                                 "\"%s\" is the Collector's file_storage extension; profcol "
                                 "takes the queue's directory here (e.g. /var/lib/profcol/queue)",
                                 cfg->storage);
    if (cfg->initial_interval_ms == 0 || cfg->max_interval_ms < cfg->initial_interval_ms)
        return pc_cfg_key_errorf(err, node, path, KEY("retry_on_failure.initial_interval"),
                                 "need 0 < initial_interval <= max_interval");
    if (cfg->multiplier < 1.0)
        return pc_cfg_key_errorf(err, node, path, KEY("retry_on_failure.multiplier"),
                                 "must be >= 1");
    if (cfg->randomization < 0 || cfg->randomization >= 1)
        return pc_cfg_key_errorf(err, node, path, KEY("retry_on_failure.randomization_factor"),
                                 "must be in [0, 1)");
#undef KEY
    return 0;
}

int pc_sender_validate(const pc_sender_cfg *cfg, const pc_node *node, const char *path,
                       pc_error *err)
{
    return pc_sender_validate_at(cfg, node, path, "", err);
}

static size_t units_of(const pc_sender *s, size_t samples, size_t bytes)
{
    switch (s->cfg.sizer) {
    case 1: return samples ? samples : 1;
    case 2: return bytes ? bytes : 1;
    default: return 1;
    }
}

/* ---- persistent records (their format: sdk/internal/queue_file.c) ---- */

/* Worker: write the record. */
static void persist_work(uv_work_t *w)
{
    item *it = w->data;
    pc_qfile_write(it->s->dir, it->seq, it->batch, it->sig, it->samples, it->meta, &it->io->err);
}

/* Worker: read a record back; a torn or corrupt one sets err. */
static void load_record(item *it)
{
    if (pc_qfile_read(it->s->dir, it->seq, &it->sig, &it->batch, &it->io->err) == 0)
        it->samples = pc_batch_items(it->batch);
}

static void load_work(uv_work_t *w)
{
    load_record(w->data);
}

/* ---- items ---- */

static void timer_free(uv_handle_t *h)
{
    free(h);
}

/* The timer is apart from the item: it closes on its own, the item need not wait for it. */
static void item_free(item *it)
{
    if (it->timer) uv_close((uv_handle_t *)it->timer, timer_free);
    pc_batch_unref(it->batch);
    free(it->meta);
    free(it->io);
    free(it);
}

static void unlink_waiting(pc_sender *s, item *it)
{
    for (item **p = &s->waiting; *p; p = &(*p)->next)
        if (*p == it) {
            *p = it->next;
            it->next = NULL;
            return;
        }
}

static void push_queue(pc_sender *s, item *it)
{
    it->next = NULL;
    if (s->tail)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    s->queued++;
}

/* An item leaves for good: answer upstream if it waits, release resources, pull the next one. */
static void complete(item *it, int st, const char *msg, int keep_record)
{
    pc_sender *s = it->s;
    unlink_waiting(s, it);
    if (it->seq && !keep_record) pc_qfile_remove(s->dir, it->seq, s->c->id);
    for (item *f = it->follow, *next; f; f = next) { /* merged into this send: same fate */
        next = f->follow;
        if (f->seq && !keep_record) pc_qfile_remove(s->dir, f->seq, s->c->id);
        item_free(f);
    }
    it->follow = NULL;
    if (it->done) it->done(it->arg, st, msg);
    s->active--;
    item_free(it);
    dispatch(s);
    maybe_finish_shutdown(s);
}

/* Data already acknowledged upstream is lost: say so, loudly, and count it. */
static void drop(item *it, const char *why)
{
    pc_sender *s = it->s;
    s->failed[it->sig] += it->samples;
    PC_ERROR(s->c->id, "dropping %zu %s: %s", it->samples, pc_signal_infos[it->sig].items, why);
}

static uint64_t backoff_ms(const pc_sender *s, int attempt)
{
    double iv = (double)s->cfg.initial_interval_ms;
    for (int i = 1; i < attempt && iv < (double)s->cfg.max_interval_ms; i++)
        iv *= s->cfg.multiplier;
    if (iv > (double)s->cfg.max_interval_ms) iv = (double)s->cfg.max_interval_ms;
    double r = s->cfg.randomization;
    double jitter = 1.0 - r + 2.0 * r * ((double)random() / (double)RAND_MAX);
    return (uint64_t)(iv * jitter);
}

static void retry_fire(uv_timer_t *t)
{
    item *it = t->data;
    if (it->s->retiring)
        hand_back(it);
    else
        start_item(it);
}

static void start_timer(item *it, uint64_t delay)
{
    if (!it->timer) {
        it->timer = pc_xmalloc(sizeof *it->timer);
        uv_timer_init(it->s->c->loop, it->timer);
        it->timer->data = it;
    }
    uv_timer_start(it->timer, retry_fire, delay, 0);
}

static void on_result(void *ctx, int st, int retry_after_s, const char *msg)
{
    item *it = ctx;
    pc_sender *s = it->s;
    it->in_flight_send = 0;
    s->failing = pc_err_retryable(st);
    if (st == PC_OK) {
        s->sent[it->sig] += it->samples;
        complete(it, PC_OK, NULL, 0);
        return;
    }
    if (!pc_err_retryable(st)) {
        s->failed[it->sig] += it->samples;
        PC_ERROR(s->c->id, "dropping %zu %s: %s (not retryable)", it->samples,
                 pc_signal_infos[it->sig].items, msg ? msg : "");
        complete(it, st, msg, 0);
        return;
    }
    /* retryable */
    if (s->retiring) { /* the backend left: another one takes it */
        hand_back(it);
        return;
    }
    uint64_t now = uv_now(s->c->loop);
    uint64_t delay =
        retry_after_s >= 0 ? (uint64_t)retry_after_s * 1000 : backoff_ms(s, it->attempt);
    int give_up =
        !s->cfg.retry_enabled || s->deadline_passed ||
        (s->cfg.max_elapsed_ms && now + delay - it->first_attempt_ms > s->cfg.max_elapsed_ms);
    if (give_up) {
        if (it->done) { /* nobody was told OK yet: the client gets the retryable status */
            s->failed[it->sig] += it->samples;
            complete(it, st, msg, 0);
        } else if (it->seq && s->stopping) { /* stays on disk for the next start */
            complete(it, st, msg, 1);
        } else {
            char why[400];
            snprintf(why, sizeof why, "%s (retries exhausted after %d attempt(s))", msg ? msg : "",
                     it->attempt);
            drop(it, why);
            complete(it, st, msg, 0);
        }
        return;
    }
    PC_WARN(s->c->id, "%s; retrying in %llums (attempt %d)", msg ? msg : "send failed",
            (unsigned long long)delay, it->attempt + 1);
    start_timer(it, delay);
}

static void attempt(item *it)
{
    pc_sender *s = it->s;
    it->attempt++;
    if (!it->first_attempt_ms) it->first_attempt_ms = uv_now(s->c->loop);
    it->in_flight_send = 1;
    s->send(s->send_arg, it->batch, on_result, it);
}

static void load_done(uv_work_t *w, int status)
{
    item *it = w->data;
    pc_sender *s = it->s;
    (void)status;
    s->io_busy--;
    if (it->io->err.code < 0) {
        /* a torn or corrupt record is skipped with a log line, never fatal */
        PC_ERROR(s->c->id, "skipping queue record: %s", it->io->err.msg);
        pc_qfile_set_aside(s->dir, it->seq);
        complete(it, PC_EINVAL, it->io->err.msg, 1);
        return;
    }
    if (s->retiring)
        hand_back(it);
    else
        attempt(it);
}

/* Worker: load what is on disk and merge the group into one batch (the leader's). A record
 * that cannot be read sets its err and is left out. */
static void merge_work(uv_work_t *w)
{
    item *it = w->data;
    size_t n = 0, k = 0;
    for (item *x = it; x; x = x->follow) {
        if (!x->batch && x->seq) load_record(x);
        n++;
    }
    pc_batch **bs = pc_xmalloc(n * sizeof *bs);
    for (item *x = it; x; x = x->follow)
        if (x->batch && (!x->io || x->io->err.code == 0)) bs[k++] = x->batch;
    pc_batch *merged = NULL;
    if (k && it->sig == PC_SIGNAL_PROFILES) {
        pc_merger *m = pc_merger_new();
        for (size_t i = 0; i < k; i++)
            pc_merger_add(m, bs[i], NULL, 0);
        merged = pc_merger_finish(m);
    } else if (k) {
        merged = pc_batch_concat(it->sig, bs, k);
    }
    if (merged) pc_batch_copy_meta(bs[0], merged);
    for (item *x = it; x; x = x->follow) {
        pc_batch_unref(x->batch);
        x->batch = NULL;
    }
    it->batch = merged;
    free(bs);
}

static void merge_done(uv_work_t *w, int status)
{
    item *it = w->data;
    pc_sender *s = it->s;
    (void)status;
    s->io_busy--;
    for (item *x = it; x; x = x->follow) {
        if (x->io && x->io->err.code < 0) { /* skipped with a log line; kept as .corrupt */
            PC_ERROR(s->c->id, "skipping queue record: %s", x->io->err.msg);
            pc_qfile_set_aside(s->dir, x->seq);
            x->seq = 0;
        }
    }
    if (!it->batch) {
        complete(it, PC_EINVAL, "no readable record", 1);
        return;
    }
    it->samples = pc_batch_items(it->batch); /* every request's items, counted once */
    attempt(it);
}

static void start_item(item *it)
{
    pc_sender *s = it->s;
    if (it->follow && !it->attempt) { /* merge once; a retry sends the merged batch again */
        s->io_busy++;
        io_of(it)->work.data = it;
        pc_pool_queue_work(s->c->loop, &it->io->work, merge_work, merge_done);
        return;
    }
    if (!it->batch && it->seq) {
        s->io_busy++;
        io_of(it)->work.data = it;
        pc_pool_queue_work(s->c->loop, &it->io->work, load_work, load_done);
        return;
    }
    attempt(it);
}

enum { MERGE_MAX_REQUESTS = 256 };

static bool mergeable(const pc_sender *s, const item *a, const item *b, size_t samples)
{
    return s->cfg.batch_max > 0 && a->sig == b->sig && !a->done && !b->done &&
           samples + b->samples <= (size_t)s->cfg.batch_max &&
           !strcmp(a->meta ? a->meta : "", b->meta ? b->meta : "");
}

static void dispatch(pc_sender *s)
{
    while (s->head && s->active < (size_t)s->cfg.num_consumers && !s->deadline_passed &&
           !s->retiring) {
        item *it = s->head;
        s->head = it->next;
        if (!s->head) s->tail = NULL;
        s->queued--;
        s->queued_units -= it->units;
        /* requests waiting behind it, of the same signal and metadata, go in the same send */
        size_t samples = it->samples, n = 1;
        item **tail = &it->follow;
        while (s->head && n < MERGE_MAX_REQUESTS && mergeable(s, it, s->head, samples)) {
            item *f = s->head;
            s->head = f->next;
            if (!s->head) s->tail = NULL;
            s->queued--;
            s->queued_units -= f->units;
            f->next = NULL;
            *tail = f;
            tail = &f->follow;
            samples += f->samples;
            n++;
        }
        it->next = s->waiting;
        s->waiting = it;
        s->active++;
        start_item(it);
    }
}

static void persist_done(uv_work_t *w, int status)
{
    item *it = w->data;
    pc_sender *s = it->s;
    (void)status;
    s->io_busy--;
    pc_done_fn done = it->done;
    void *arg = it->arg;
    it->done = NULL;
    if (it->io->err.code < 0) {
        /* e.g. a full disk: refuse with a retryable status, the client keeps the data */
        s->queued_units -= it->units;
        s->enqueue_failed[it->sig] += it->samples;
        PC_ERROR(s->c->id, "persistent queue: %s; refusing %zu %s (retryable)", it->io->err.msg,
                 it->samples, pc_signal_infos[it->sig].items);
        done(arg, PC_EAGAIN, "persistent queue unavailable");
        item_free(it);
        maybe_finish_shutdown(s);
        return;
    }
    if (s->retiring) { /* durable, so acknowledged; then it goes where the ring says */
        s->queued_units -= it->units;
        done(arg, PC_OK, NULL);
        it->next = s->waiting;
        s->waiting = it;
        s->active++;
        hand_back(it);
        return;
    }
    /* acknowledged only now that the record is durable; memory is released until it is sent */
    pc_batch_unref(it->batch);
    it->batch = NULL;
    push_queue(s, it); /* its units were reserved in consume */
    done(arg, PC_OK, NULL);
    dispatch(s);
}

void pc_sender_consume(pc_sender *s, pc_batch *b, pc_done_fn done, void *arg)
{
    item *it = pc_xcalloc(1, sizeof(*it));
    it->s = s;
    it->batch = b;
    it->sig = b->signal;
    pc_send_counts_register(s->k, s->c, it->sig);
    it->samples = pc_batch_items(b);
    it->units = units_of(s, it->samples, pc_arena_size(b->arena));
    if (b->meta.n) {
        pc_buf m = {0};
        for (size_t i = 0; i < b->meta.n; i++)
            pc_buf_printf(&m, "%s\t%s\n", b->meta.keys[i], b->meta.vals[i]);
        it->meta = (char *)m.data;
    }
    if (s->stopping) {
        s->enqueue_failed[it->sig] += it->samples;
        done(arg, PC_EAGAIN, "exporter is shutting down");
        item_free(it);
        return;
    }
    if (!s->cfg.queue_enabled) { /* send now; the upstream answer waits for the outcome */
        it->done = done;
        it->arg = arg;
        it->next = s->waiting;
        s->waiting = it;
        s->active++;
        start_item(it);
        return;
    }
    if (s->queued_units + it->units > s->capacity) {
        s->enqueue_failed[it->sig] += it->samples;
        PC_WARN_RATELIMITED(&s->full_log, s->c->id,
                            "sending queue is full (%llu of %llu %s): refusing %zu %s (retryable)",
                            (unsigned long long)s->queued_units, (unsigned long long)s->capacity,
                            pc_sender_sizers[s->cfg.sizer], it->samples,
                            pc_signal_infos[it->sig].items);
        done(arg, PC_EAGAIN, "sending queue is full");
        item_free(it);
        return;
    }
    s->queued_units += it->units;
    if (s->dir) {
        it->seq = s->next_seq++;
        it->done = done;
        it->arg = arg;
        io_of(it)->work.data = it;
        s->io_busy++;
        pc_pool_queue_work(s->c->loop, &it->io->work, persist_work, persist_done);
        return;
    }
    push_queue(s, it);
    done(arg, PC_OK, NULL);
    dispatch(s);
}

/* ---- retiring: what a backend that left still had ---- */

static void handback_done(void *ctx, int st, const char *msg)
{
    item *it = ctx;
    pc_sender *s = it->s;
    it->handing = 0;
    if (st == PC_OK) { /* in another sender's care now (a record: durable there) */
        complete(it, PC_OK, NULL, 0);
        return;
    }
    if (it->done) { /* its upstream still waits: it gets the refusal and may resend */
        s->failed[it->sig] += it->samples;
        complete(it, st, msg, 0);
        return;
    }
    if (s->deadline_passed || s->shutting_down) { /* the exporter stops: nobody will take it */
        if (it->seq) {
            complete(it, st, msg, 1);
        } else {
            drop(it, "shutdown deadline reached while handing it to another backend");
            complete(it, st, msg, 0);
        }
        return;
    }
    PC_WARN(s->c->id, "cannot hand %zu %s to another backend (%s); trying again in 1s", it->samples,
            pc_signal_infos[it->sig].items, msg ? msg : "refused");
    start_timer(it, 1000);
}

/* it is in s->waiting and counted active. */
static void hand_back(item *it)
{
    pc_sender *s = it->s;
    if (!it->batch && it->seq) { /* read the record first; load_done comes back here */
        s->io_busy++;
        io_of(it)->work.data = it;
        pc_pool_queue_work(s->c->loop, &it->io->work, load_work, load_done);
        return;
    }
    it->handing = 1;
    s->handback(s->handback_arg, pc_batch_ref(it->batch), handback_done, it);
}

void pc_sender_retire(pc_sender *s, pc_sender_handback fn, void *arg, void (*done)(void *arg),
                      void *done_arg)
{
    s->stopping = 1;
    s->retiring = 1;
    s->handback = fn;
    s->handback_arg = arg;
    s->shutdown_done = done;
    s->shutdown_arg = done_arg;
    item *batch = NULL, **tail = &batch; /* collected first: a handback may re-enter s */
    while (s->head) {
        item *it = s->head;
        s->head = it->next;
        s->queued--;
        s->queued_units -= it->units;
        it->next = s->waiting;
        s->waiting = it;
        s->active++;
        *tail = it;
        it->handing = -1; /* collected */
        tail = &it->handing_next;
    }
    s->tail = NULL;
    for (item *it = s->waiting; it; it = it->next)
        if (!it->handing && !it->in_flight_send && it->timer &&
            uv_is_active((uv_handle_t *)it->timer)) {
            uv_timer_stop(it->timer);
            *tail = it;
            it->handing = -1;
            tail = &it->handing_next;
        }
    *tail = NULL;
    s->in_retire = 1; /* a handback answered at once must not finish (and free) s under us */
    for (item *it = batch, *next; it; it = next) {
        next = it->handing_next;
        it->handing = 0;
        hand_back(it);
    }
    s->in_retire = 0;
    maybe_finish_shutdown(s);
}

/* Queue every record left by an earlier run, oldest first: the backlog is sent first. */
static int replay(pc_sender *s, pc_error *err)
{
    uint64_t *seqs = NULL;
    size_t n = 0;
    if (pc_qfile_list(s->dir, &seqs, &n) < 0)
        return pc_error_set(err, PC_EIO, "sending_queue::storage: cannot open %s: %s", s->dir,
                            strerror(errno));
    for (size_t i = 0; i < n; i++) {
        pc_qfile_head h;
        pc_qfile_peek(s->dir, seqs[i], &h);
        item *it = pc_xcalloc(1, sizeof(*it));
        it->s = s;
        io_of(it); /* a record on disk is read back (merge_work may read it as a follower) */
        it->seq = seqs[i];
        it->sig = h.sig;
        it->samples = h.items;
        it->meta = h.meta;
        pc_send_counts_register(s->k, s->c, it->sig);
        it->units = units_of(s, it->samples, h.bytes);
        s->queued_units += it->units;
        push_queue(s, it);
        if (seqs[i] >= s->next_seq) s->next_seq = seqs[i] + 1;
    }
    if (n) PC_INFO(s->c->id, "persistent queue: replaying %zu request(s) from %s", n, s->dir);
    free(seqs);
    return 0;
}

void pc_send_counts_register(pc_send_counts *k, pc_component *c, pc_signal sig)
{
    if (k->registered & PC_SIGNAL_BIT(sig)) return;
    k->registered |= PC_SIGNAL_BIT(sig);
    char labels[400], name[128], help[160];
    pc_exporter_labels(c, k->backend, labels, sizeof labels);
    pc_exporter_register_metrics(c, labels, sig, &k->sent[sig], &k->failed[sig]);
    if (!k->queue) return;
    snprintf(name, sizeof name, "otelcol_exporter_enqueue_failed_%s", pc_signal_infos[sig].metric);
    snprintf(help, sizeof help, "%s refused because the sending queue was full or unavailable",
             sig == PC_SIGNAL_PROFILES ? "Profile samples" : pc_signal_infos[sig].items);
    pc_metric_u64(c, name, help, PC_METRIC_COUNTER, labels, &k->enqueue_failed[sig]);
}

void pc_send_counts_format(const pc_send_counts *k, char *out, size_t n)
{
    out[0] = 0;
    for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) /* "sent 12 samples, send failed 0, ..." */
        if (k->registered & PC_SIGNAL_BIT(sig))
            snprintf(out + strlen(out), n - strlen(out),
                     "%ssent %llu %s, send failed %llu, enqueue failed %llu", out[0] ? "; " : "",
                     (unsigned long long)k->sent[sig], pc_signal_infos[sig].items,
                     (unsigned long long)k->failed[sig],
                     (unsigned long long)k->enqueue_failed[sig]);
}

bool pc_sender_durable(const pc_sender *s)
{
    return s->dir != NULL;
}

void pc_sender_merge_at_least(pc_sender *s, size_t max)
{
    if ((size_t)s->cfg.batch_max < max) s->cfg.batch_max = (int64_t)max;
}

bool pc_sender_full(const pc_sender *s)
{
    return s->cfg.queue_enabled && s->queued_units >= s->capacity;
}

uint64_t pc_sender_queue_size(const pc_sender *s)
{
    return s->queued_units;
}

size_t pc_sender_held(const pc_sender *s)
{
    return (size_t)s->queued + s->active;
}

bool pc_sender_dir(const pc_component *c, const pc_sender_cfg *cfg, const char *subdir, char *out,
                   size_t n)
{
    if (!cfg->queue_enabled || !cfg->storage || n < 2) return false;
    size_t k = (size_t)snprintf(out, n, "%s/", cfg->storage);
    if (k >= n) k = n - 1;
    for (const char *p = c->id; *p && k < n - 1; p++) /* one directory per exporter */
        out[k++] = (*p == '/' || *p == ' ') ? '_' : *p;
    if (subdir && k < n - 1) out[k++] = '/';
    for (const char *p = subdir; p && *p && k < n - 1; p++) /* and per backend */
        out[k++] = strchr("/: []", *p) ? '_' : *p;
    out[k] = 0;
    return true;
}

pc_sender *pc_sender_new(pc_component *c, const pc_sender_cfg *cfg, pc_send_counts *counts,
                         pc_send_fn send, void *arg, const char *subdir, pc_error *err)
{
    pc_sender *s = pc_xcalloc(1, sizeof(*s));
    s->c = c;
    s->cfg = *cfg;
    s->cfg.storage = NULL; /* the config owns the string */
    s->send = send;
    s->send_arg = arg;
    s->k = counts;
    s->sent = counts->sent;
    s->failed = counts->failed;
    s->enqueue_failed = counts->enqueue_failed;
    s->capacity = (uint64_t)cfg->queue_size;
    s->next_seq = 1;
    char dir[4096];
    if (pc_sender_dir(c, cfg, subdir, dir, sizeof dir)) {
        if (pc_qfile_mkdirs(dir) < 0) {
            pc_error_set(err, PC_EIO, "sending_queue::storage: cannot create %s: %s", dir,
                         strerror(errno));
            free(s);
            return NULL;
        }
        s->dir = pc_xstrdup(dir);
        if (replay(s, err) < 0) {
            pc_sender_free(s);
            return NULL;
        }
    }
    dispatch(s);
    return s;
}

/* ---- shutdown ---- */

static void finish_shutdown(pc_sender *s)
{
    void (*done)(void *) = s->shutdown_done;
    s->shutdown_done = NULL;
    if (!done) return;
    done(s->shutdown_arg);
}

static void deadline_closed(uv_handle_t *h)
{
    pc_sender *s = h->data;
    s->deadline_open = 0;
    finish_shutdown(s);
}

static void maybe_finish_shutdown(pc_sender *s)
{
    if (!s->stopping || !s->shutdown_done || s->active || s->io_busy || s->in_retire) return;
    if (s->head && !s->deadline_passed) return;
    /* whatever is still queued now: on disk it waits for the next start, in memory it is lost */
    size_t left = 0, left_samples = 0;
    while (s->head) {
        item *it = s->head;
        s->head = it->next;
        left++;
        left_samples += it->samples;
        if (!it->seq) s->failed[it->sig] += it->samples;
        s->queued_units -= it->units;
        item_free(it);
    }
    s->tail = NULL;
    s->queued = 0;
    if (left && s->dir)
        PC_WARN(s->c->id, "shutdown deadline: %zu request(s) stay in %s for the next start", left,
                s->dir);
    else if (left)
        PC_ERROR(s->c->id, "shutdown deadline: dropping %zu queued request(s), %zu samples", left,
                 left_samples);
    if (s->deadline_open) {
        /* re-entered from deadline_fire after complete() already closed it: wait for the close */
        if (!uv_is_closing((uv_handle_t *)&s->deadline)) {
            uv_timer_stop(&s->deadline);
            uv_close((uv_handle_t *)&s->deadline, deadline_closed);
        }
        return;
    }
    finish_shutdown(s);
}

static void deadline_fire(uv_timer_t *t)
{
    pc_sender *s = t->data;
    s->deadline_passed = 1;
    /* items waiting on a backoff timer give up now; sends in flight finish by their timeout */
    for (item *it = s->waiting, *next; it; it = next) {
        next = it->next;
        if (it->in_flight_send || !it->timer || !uv_is_active((uv_handle_t *)it->timer)) continue;
        uv_timer_stop(it->timer);
        if (it->done)
            complete(it, PC_EAGAIN, "exporter is shutting down", 0);
        else if (it->seq)
            complete(it, PC_EAGAIN, NULL, 1);
        else {
            drop(it, "shutdown deadline reached while waiting to retry");
            complete(it, PC_EAGAIN, NULL, 0);
        }
    }
    maybe_finish_shutdown(s);
}

void pc_sender_shutdown(pc_sender *s, uint64_t deadline_ms, void (*done)(void *arg), void *arg)
{
    pc_log_limiter_flush(&s->full_log, PC_LOG_WARN, s->c->id, "refusals (sending queue full)");
    s->stopping = 1;
    s->shutting_down = 1;
    s->shutdown_done = done;
    s->shutdown_arg = arg;
    uint64_t now = uv_now(s->c->loop);
    uint64_t left = deadline_ms > now ? deadline_ms - now : 0;
    if (s->active || s->io_busy || s->head) {
        PC_INFO(s->c->id, "draining %llu queued and %zu in-flight request(s) (up to %llums)",
                (unsigned long long)s->queued, s->active, (unsigned long long)left);
        uv_timer_init(s->c->loop, &s->deadline);
        s->deadline.data = s;
        s->deadline_open = 1;
        uv_timer_start(&s->deadline, deadline_fire, left, 0);
        return;
    }
    maybe_finish_shutdown(s);
}

void pc_sender_free(pc_sender *s)
{
    if (!s) return;
    while (s->head) { /* only after shutdown; nothing pending remains but queued records */
        item *it = s->head;
        s->head = it->next;
        pc_batch_unref(it->batch);
        free(it->meta);
        free(it);
    }
    free(s->dir);
    free(s);
}

/* Config-table groups (sdk/cfgtable.h): keys and offsets relative to their struct. */
/* clang-format off */
const pc_cfg_key pc_sender_keys[] = {
    {"sending_queue.enabled", PC_CFG_BOOL, "true", offsetof(pc_sender_cfg, queue_enabled), "queue requests and acknowledge them once queued", NULL},
    {"sending_queue.num_consumers", PC_CFG_INT, "10", offsetof(pc_sender_cfg, num_consumers), "requests sent concurrently", NULL},
    {"sending_queue.queue_size", PC_CFG_INT, "1000", offsetof(pc_sender_cfg, queue_size), "queue capacity, in units of the sizer; a full queue refuses with 503", NULL},
    {"sending_queue.sizer", PC_CFG_ENUM, "requests", offsetof(pc_sender_cfg, sizer), "what queue_size counts", pc_sender_sizers},
    {"sending_queue.batch.max_size", PC_CFG_INT, "0", offsetof(pc_sender_cfg, batch_max), "a consumer sends the requests waiting in the queue (same signal and metadata) merged, up to this many samples (spans, ...) at once; 0: one request per send (a batch processor before a persistent queue raises it to its send_batch_size)", NULL},
    {"sending_queue.storage", PC_CFG_STRING, "", offsetof(pc_sender_cfg, storage), "directory for a persistent queue (acknowledged only once written and fsynced)", NULL},
    {"retry_on_failure.enabled", PC_CFG_BOOL, "true", offsetof(pc_sender_cfg, retry_enabled), "retry 429, 502, 503, 504, timeouts and connection errors", NULL},
    {"retry_on_failure.initial_interval", PC_CFG_DURATION, "5s", offsetof(pc_sender_cfg, initial_interval_ms), "first backoff", NULL},
    {"retry_on_failure.max_interval", PC_CFG_DURATION, "30s", offsetof(pc_sender_cfg, max_interval_ms), "backoff cap", NULL},
    {"retry_on_failure.multiplier", PC_CFG_FLOAT, "1.5", offsetof(pc_sender_cfg, multiplier), "backoff growth per attempt", NULL},
    {"retry_on_failure.randomization_factor", PC_CFG_FLOAT, "0.5", offsetof(pc_sender_cfg, randomization), "jitter: +/- this fraction of the interval", NULL},
    {"retry_on_failure.max_elapsed_time", PC_CFG_DURATION, "300s", offsetof(pc_sender_cfg, max_elapsed_ms), "give up after this long (0 = never)", NULL},
    {0},
};
/* clang-format on */
