/* The exporter core (see exporter.h). */
#include "sdk/exporter.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sdk/pool.h"
#include "sdk/telemetry.h"

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
    const pc_exporter_def *d = r->e->def;
    if (d->encode && !(d->encode_is_copy && d->encode_is_copy(r))) {
        pc_pool_queue_work(r->e->c->loop, &r->work, encode_work, encode_done);
        return;
    }
    if (d->encode) d->encode(r); /* only a copy: on the loop */
    d->send(r);
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

/* ---- routes ---- */

/* What the exporter keeps of one backend name, across its comings and goings. */
struct pc_backend {
    pc_backend *next;
    char *name;
    pc_send_counts counts;
    uint64_t rerouted[PC_SIGNAL_COUNT]; /* routed again to others after it left */
    unsigned rerouted_registered;
};

struct pc_route {
    pc_route *next;
    pc_exporter *e;
    pc_backend *bk;
    void *target;
    pc_sender *sender;
    uint64_t capacity;
    bool leaving; /* not on the ring any more */
    bool retired; /* its sender was told */
    bool drained; /* its sender is done: its transport is closing */
};

static pc_backend *backend_of(pc_exporter *e, const char *name)
{
    for (pc_backend *b = e->backends; b; b = b->next)
        if (!strcmp(b->name, name)) return b;
    pc_backend *b = pc_xcalloc(1, sizeof *b);
    b->name = pc_xstrdup(name);
    b->counts.queue = true;
    b->counts.backend = b->name;
    b->next = e->backends;
    e->backends = b;
    return b;
}

static pc_route *route_named(const pc_exporter *e, const char *name)
{
    for (pc_route *rt = e->routes; rt; rt = rt->next)
        if (!rt->leaving && !strcmp(rt->bk->name, name)) return rt;
    return NULL;
}

size_t pc_exporter_n_routes(const pc_exporter *e)
{
    return pc_ring_size(e->ring);
}

/* A route's sender: one attempt through the route's transport. */
static void send_route(void *arg, pc_batch *b, pc_send_result result, void *ctx)
{
    pc_route *rt = arg;
    pc_export_req *r = req_new(rt->e, b);
    r->target = rt->target;
    r->result = result;
    r->result_ctx = ctx;
    run(r);
}

static double route_queue_size(const void *arg)
{
    const pc_route *rt = arg;
    return (double)pc_sender_queue_size(rt->sender);
}

static const pc_sender_cfg *sender_cfg(const pc_exporter *e);

static pc_route *route_open(pc_exporter *e, const char *name, pc_error *err)
{
    pc_component *c = e->c;
    void *target = e->def->route_open(e, name, err);
    if (!target) return NULL;
    pc_route *rt = pc_xcalloc(1, sizeof *rt);
    rt->e = e;
    rt->bk = backend_of(e, name);
    rt->target = target;
    rt->sender = pc_sender_new(c, sender_cfg(e), &rt->bk->counts, send_route, rt, name, err);
    if (!rt->sender) { /* its storage directory */
        e->def->route_close(e, target, free, rt);
        return NULL;
    }
    char labels[400];
    pc_exporter_labels(c, name, labels, sizeof labels);
    if (e->merge_at_least) pc_sender_merge_at_least(rt->sender, e->merge_at_least);
    rt->capacity = (uint64_t)sender_cfg(e)->queue_size;
    pc_metric_fn(rt, "otelcol_exporter_queue_size", "Current size of the sending queue",
                 PC_METRIC_GAUGE, labels, route_queue_size, rt);
    pc_metric_u64(rt, "otelcol_exporter_queue_capacity", "Capacity of the sending queue",
                  PC_METRIC_GAUGE, labels, &rt->capacity);
    rt->next = e->routes;
    e->routes = rt;
    return rt;
}

static void route_closed(void *arg)
{
    pc_route *rt = arg;
    pc_exporter *e = rt->e;
    for (pc_route **p = &e->routes; *p; p = &(*p)->next)
        if (*p == rt) {
            *p = rt->next;
            break;
        }
    pc_metric_unregister(rt);
    pc_sender_free(rt->sender);
    free(rt);
    if (e->shutdown_done && !e->routes && !e->jobs) drained(e);
}

/* The route's sender is done (drained, or retired): close its transport. */
static void route_drained(void *arg)
{
    pc_route *rt = arg;
    rt->drained = true;
    if (rt->target)
        rt->e->def->route_close(rt->e, rt->target, route_closed, rt);
    else /* a queue left on disk by a backend no longer listed: there was no transport */
        route_closed(rt);
}

static void route_consume(pc_exporter *e, pc_batch *b, pc_done_fn done, void *arg);

/* Upstream's answer once every part of a batch was queued (or refused). */
typedef struct parts_done {
    size_t pending;
    int st;
    char msg[256];
    pc_done_fn done;
    void *arg;
} parts_done;

static void part_done(void *ctx, int st, const char *msg)
{
    parts_done *pd = ctx;
    if (st != PC_OK && pc_err_worse(pd->st, st) != pd->st) {
        pd->st = pc_err_worse(pd->st, st);
        snprintf(pd->msg, sizeof pd->msg, "%s", msg ? msg : "");
    }
    if (--pd->pending) return;
    pd->done(pd->arg, pd->st, pd->st == PC_OK ? NULL : pd->msg);
    free(pd);
}

/* Each part to its route (by the name its ring gave it); a part whose route left since is
 * routed again over the current ring. */
static void deliver(pc_exporter *e, const pc_ring *ring, pc_batch **parts, pc_done_fn done,
                    void *arg)
{
    size_t n = pc_ring_size(ring);
    parts_done *pd = pc_xcalloc(1, sizeof *pd);
    pd->done = done;
    pd->arg = arg;
    pd->pending = 1; /* held until every part was handed on: an answer may come at once */
    for (size_t k = 0; k < n; k++)
        if (parts[k]) pd->pending++;
    for (size_t k = 0; k < n; k++) {
        if (!parts[k]) continue;
        pc_route *rt = route_named(e, pc_ring_member(ring, k));
        if (rt && !e->stopping)
            pc_sender_consume(rt->sender, parts[k], part_done, pd);
        else
            route_consume(e, parts[k], part_done, pd);
    }
    part_done(pd, PC_OK, NULL);
}

typedef struct route_job {
    uv_work_t work;
    pc_exporter *e;
    pc_batch *b;
    pc_ring *ring;
    pc_batch **parts;
    pc_done_fn done;
    void *arg;
} route_job;

static void route_work(uv_work_t *w)
{
    route_job *j = w->data;
    j->e->def->route(j->e, j->ring, j->b, j->parts);
}

static void route_after(uv_work_t *w, int status)
{
    route_job *j = w->data;
    pc_exporter *e = j->e;
    (void)status;
    e->jobs--;
    deliver(e, j->ring, j->parts, j->done, j->arg);
    pc_batch_unref(j->b);
    pc_ring_unref(j->ring);
    free(j->parts);
    free(j);
    if (e->shutdown_done && !e->routes && !e->jobs) drained(e);
}

/* consume with routes: split on the pool by the current ring, then deliver. */
static void route_consume(pc_exporter *e, pc_batch *b, pc_done_fn done, void *arg)
{
    size_t n = pc_ring_size(e->ring);
    if (e->stopping || !n) {
        pc_signal sig = b->signal;
        pc_send_counts_register(&e->counts, e->c, sig);
        e->counts.enqueue_failed[sig] += pc_batch_items(b);
        pc_batch_unref(b);
        done(arg, PC_EAGAIN, e->stopping ? "exporter is shutting down" : "no backend to send to");
        return;
    }
    if (n == 1) { /* one backend: no key to look at */
        pc_sender_consume(route_named(e, pc_ring_member(e->ring, 0))->sender, b, done, arg);
        return;
    }
    route_job *j = pc_xcalloc(1, sizeof *j);
    j->e = e;
    j->b = b;
    j->ring = pc_ring_ref(e->ring);
    j->parts = pc_xcalloc(n, sizeof *j->parts);
    j->done = done;
    j->arg = arg;
    j->work.data = j;
    e->jobs++;
    pc_pool_queue_work(e->c->loop, &j->work, route_work, route_after);
}

/* What a retiring route hands back goes through the ring again; counted once taken. */
typedef struct handback {
    pc_backend *bk;
    pc_signal sig;
    size_t items;
    pc_done_fn done;
    void *arg;
    pc_component *c;
} handback;

static void handback_done(void *ctx, int st, const char *msg)
{
    handback *h = ctx;
    pc_backend *bk = h->bk;
    if (st == PC_OK) {
        if (!(bk->rerouted_registered & PC_SIGNAL_BIT(h->sig))) {
            char labels[400], name[160], help[200];
            bk->rerouted_registered |= PC_SIGNAL_BIT(h->sig);
            pc_exporter_labels(h->c, bk->name, labels, sizeof labels);
            snprintf(name, sizeof name, "profcol_exporter_rerouted_%s",
                     pc_signal_infos[h->sig].metric);
            snprintf(
                help, sizeof help, "%s queued for a backend that left, routed again to the others",
                h->sig == PC_SIGNAL_PROFILES ? "Profile samples" : pc_signal_infos[h->sig].items);
            pc_metric_u64(h->c, name, help, PC_METRIC_COUNTER, labels, &bk->rerouted[h->sig]);
        }
        bk->rerouted[h->sig] += h->items;
    }
    h->done(h->arg, st, msg);
    free(h);
}

static void route_handback(void *arg, pc_batch *b, pc_done_fn done, void *done_arg)
{
    pc_route *rt = arg;
    handback *h = pc_xmalloc(sizeof *h);
    *h = (handback){rt->bk, b->signal, pc_batch_items(b), done, done_arg, rt->e->c};
    route_consume(rt->e, b, handback_done, h);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Never called: an adopted queue's sender is retired before it could send. */
static void send_nowhere(void *arg, pc_batch *b, pc_send_result result, void *ctx)
{
    (void)arg, (void)b;
    result(ctx, PC_EAGAIN, -1, "the backend is no longer listed");
}

/* Queues left on disk by backends that are no longer listed (a restart, a replaced exporter):
 * each directory under <storage>/<id>/ that no route owns gets a route without a transport whose
 * sender replays it and at once hands everything back to be routed over the ring. */
static void adopt_queues(pc_exporter *e)
{
    char dir[4096];
    const pc_sender_cfg *cfg = sender_cfg(e);
    if (!pc_sender_dir(e->c, cfg, NULL, dir, sizeof dir)) return;
    DIR *d = opendir(dir);
    if (!d) return;
    char **found = NULL;
    size_t n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        bool owned = false;
        for (pc_route *rt = e->routes; rt && !owned; rt = rt->next) {
            char mine[4096], *base;
            if (pc_sender_dir(e->c, cfg, rt->bk->name, mine, sizeof mine) &&
                (base = strrchr(mine, '/')) && !strcmp(base + 1, de->d_name))
                owned = true;
        }
        char path[8300];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (owned || stat(path, &st) || !S_ISDIR(st.st_mode)) continue;
        found = pc_xrealloc(found, (n + 1) * sizeof *found);
        found[n++] = pc_xstrdup(de->d_name);
    }
    closedir(d);
    for (size_t i = 0; i < n; i++) {
        pc_error err = {0};
        pc_route *rt = pc_xcalloc(1, sizeof *rt);
        rt->e = e;
        rt->bk = backend_of(e, found[i]);
        rt->sender = pc_sender_new(e->c, cfg, &rt->bk->counts, send_nowhere, rt, found[i], &err);
        if (!rt->sender) {
            PC_WARN(e->c->id, "cannot read the queue left in %s/%s: %s", dir, found[i], err.msg);
            free(rt);
        } else {
            size_t held = pc_sender_held(rt->sender);
            if (held)
                PC_INFO(e->c->id,
                        "%zu request(s) queued for %s, no longer a backend: routing them "
                        "over the ring",
                        held, found[i]);
            rt->leaving = rt->retired = true;
            rt->next = e->routes;
            e->routes = rt;
            pc_sender_retire(rt->sender, route_handback, rt, route_drained, rt);
        }
        free(found[i]);
    }
    free(found);
}

int pc_exporter_set_routes(pc_exporter *e, const char *const *names, size_t n, pc_error *err)
{
    pc_component *c = e->c;
    int rc = 0;
    pc_buf added = {0}, removed = {0};
    const char **keep = pc_xmalloc((n ? n : 1) * sizeof *keep);
    size_t nk = 0;
    for (size_t i = 0; i < n; i++) { /* open what is new */
        bool dup = false;
        for (size_t k = 0; k < nk && !dup; k++)
            dup = !strcmp(keep[k], names[i]);
        if (dup) continue;
        if (!route_named(e, names[i])) {
            pc_error e2 = {0};
            if (!route_open(e, names[i], &e2)) {
                PC_ERROR(c->id, "backend %s left out: %s", names[i], e2.msg);
                if (!rc) {
                    rc = e2.code ? e2.code : PC_EINVAL;
                    if (err) *err = e2;
                }
                continue;
            }
            pc_buf_printf(&added, "%s%s", added.len ? ", " : "", names[i]);
        }
        keep[nk++] = names[i];
    }
    qsort(keep, nk, sizeof *keep, cmp_name);
    pc_ring *old = e->ring;
    e->ring = pc_ring_new(keep, nk);
    /* retire what left: its batches go over the new ring */
    for (pc_route *rt = e->routes; rt; rt = rt->next)
        if (!rt->leaving && pc_ring_find(e->ring, rt->bk->name) == PC_RING_NONE) {
            rt->leaving = true;
            pc_buf_printf(&removed, "%s%s (%zu request(s) to route again)", removed.len ? ", " : "",
                          rt->bk->name, pc_sender_held(rt->sender));
        }
    if (added.len || removed.len || !old)
        PC_INFO(c->id, "backends: %zu%s%s%s%s", nk, added.len ? ", added " : "",
                added.len ? (char *)added.data : "", removed.len ? ", removed " : "",
                removed.len ? (char *)removed.data : "");
    pc_ring_unref(old);
    for (pc_route *rt = e->routes, *next; rt; rt = next) {
        next = rt->next; /* retiring may close and free rt, never another route */
        if (rt->leaving && !rt->retired) {
            rt->retired = true;
            pc_sender_retire(rt->sender, route_handback, rt, route_drained, rt);
        }
    }
    if (!e->adopted) { /* once, with the first membership */
        e->adopted = true;
        adopt_queues(e);
    }
    pc_buf_free(&added);
    pc_buf_free(&removed);
    free(keep);
    return rc;
}

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
    if (rc < 0 || e->def->route) return rc; /* routes: start named the backends */
    if (!e->def->sink) {
        e->sender = pc_sender_new(c, sender_cfg(e), &e->counts, send_once, e, NULL, err);
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
    if (e->def->route) {
        route_consume(e, b, done, arg);
        return;
    }
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

/* With routes: full only when every backend's queue is (a batch may go to any of them); with no
 * backend at all, consume itself refuses and counts. */
bool pc_exporter_full(pc_component *c)
{
    const pc_exporter *e = pc_exporter_of(c);
    if (!e) return false;
    if (e->sender) return pc_sender_full(e->sender);
    bool any = false;
    for (const pc_route *rt = e->routes; rt; rt = rt->next) {
        if (rt->leaving) continue;
        if (!pc_sender_full(rt->sender)) return false;
        any = true;
    }
    return any;
}

/* A full queue refuses; sends piling up (a backend's sender behind, any of them with routes: a
 * batch is mostly split among them) admit as behind, which only this exporter's pipelines' decodes
 * feel (pc_decode_queue_work), not every pipeline's. */
pc_admit pc_exporter_admit(pc_component *c, size_t *room)
{
    (void)room;
    if (pc_exporter_full(c)) return PC_ADMIT_QUEUE_FULL;
    const pc_exporter *e = pc_exporter_of(c);
    if (!e) return PC_ADMIT_OK;
    if (e->sender) return pc_sender_behind(e->sender) ? PC_ADMIT_BEHIND : PC_ADMIT_OK;
    for (const pc_route *rt = e->routes; rt; rt = rt->next)
        if (!rt->leaving && pc_sender_behind(rt->sender)) return PC_ADMIT_BEHIND;
    return PC_ADMIT_OK;
}

/* With routes: every backend's sender has the same settings, so a persistent queue is the
 * config's (sending_queue::storage); routes opened later merge as much as those open now. */
bool pc_exporter_durable(pc_component *c, size_t batch_size)
{
    pc_exporter *e = pc_exporter_of(c);
    if (!e) return false;
    if (e->def && e->def->route) {
        const pc_sender_cfg *sc = sender_cfg(e);
        if (!sc->queue_enabled || !sc->storage) return false;
        e->merge_at_least = batch_size;
        for (pc_route *rt = e->routes; rt; rt = rt->next)
            pc_sender_merge_at_least(rt->sender, batch_size);
        return true;
    }
    if (!e->sender || !pc_sender_durable(e->sender)) return false;
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
    } else if (e->def->route) { /* the same summed over every backend there was */
        pc_send_counts sum = e->counts;
        uint64_t rerouted = 0;
        for (pc_backend *b = e->backends; b; b = b->next)
            for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++) {
                sum.sent[sig] += b->counts.sent[sig];
                sum.failed[sig] += b->counts.failed[sig];
                sum.enqueue_failed[sig] += b->counts.enqueue_failed[sig];
                sum.registered |= b->counts.registered;
                rerouted += b->rerouted[sig];
            }
        char totals[600];
        pc_send_counts_format(&sum, totals, sizeof totals);
        PC_INFO(e->c->id, "stopped (%s; routed again from backends that left: %llu)",
                totals[0] ? totals : "nothing sent", (unsigned long long)rerouted);
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
    e->stopping = true;
    if (e->def->stopping) e->def->stopping(e);
    if (e->def->route) { /* drain every route, the retiring ones too, then close */
        if (!e->routes && !e->jobs) {
            drained(e);
            return;
        }
        for (pc_route *rt = e->routes, *next; rt; rt = next) {
            next = rt->next;
            if (!rt->drained)
                pc_sender_shutdown(rt->sender, c->drain_deadline_ms, route_drained, rt);
        }
        return;
    }
    if (e->sender)
        pc_sender_shutdown(e->sender, c->drain_deadline_ms, drained, e);
    else if (!e->in_flight)
        drained(e);
}

void pc_exporter_destroy(pc_component *c)
{
    pc_exporter *e = pc_exporter_of(c);
    if (!e) return;
    pc_sender_free(e->sender);
    if (e->def->destroy) e->def->destroy(e);
    pc_ring_unref(e->ring);
    for (pc_backend *b = e->backends, *next; b; b = next) {
        next = b->next;
        free(b->name);
        free(b);
    }
    free(e);
}
