/* The exporter core: one implementation of everything an exporter does around "send this
 * request", so that an exporter type only says how a batch becomes a request (encode, on the
 * thread pool) and how a request reaches its backend (send, on the loop).
 *
 * The core does the rest: the component callbacks (create, start, consume, shutdown, destroy),
 * the sender (sdk/sender.h: the sending queue, persistent queue, retries with backoff and
 * Retry-After), the counting and the otelcol_exporter_* series per signal, the log lines
 * (partial success, what was dropped, the totals at stop), and the shutdown order (drain the
 * sender, then close the transport, then report done).
 *
 * One attempt to send one batch:
 *   loop      the sender (or, for a sink, consume) hands the core a batch; the core allocates a
 *             request of def->req_size bytes, which starts with a pc_export_req
 *   pool      def->encode(r) turns r->batch into r->body (or into the exporter's own fields)
 *   loop      def->send(r) hands the request to the transport; when the backend has answered
 *             it calls pc_export_done(r, &outcome) exactly once, on the loop thread
 *   loop      the core logs a partial success, releases the request and tells the sender the
 *             outcome: PC_OK, retryable (PC_EAGAIN / PC_EBUSY, with an optional
 *             Retry-After) or permanent (PC_EINVAL), with a message
 *
 * An exporter type fills a pc_exporter_def and puts PC_EXPORTER_CORE(&def) into its
 * pc_component_type (it keeps its own validate, which ends with pc_sender_validate, and its
 * optional check_signal). Its own state hangs at e->priv; its config is e->c->cfg (read-only,
 * also from encode on the pool).
 *
 * Routes (the loadbalancing exporter): an exporter whose def has route, route_open and
 * route_close sends each batch to several backends, one route {sender, target} per backend,
 * named by a string ("host:port"). The exporter names its backends with pc_exporter_set_routes
 * (from start, from its resolver, from a reload); the core opens a route per new name (the
 * sender with its queue, retries and persistent queue under <storage>/<id>/<name>, and the
 * exporter's transport to that backend, route_open), puts the names on a consistent-hash ring
 * (sdk/ring.h) and retires the routes of names that left: their sender hands back what it
 * still holds (pc_sender_retire), which is routed again over the new ring, then drains what is
 * in flight, and route_close closes the transport. consume runs def->route on the thread pool
 * with a reference to the current ring: it splits the batch by routing key into one part per
 * ring member (pc_batch_route); each part goes to its route's sender (a part whose route left
 * meanwhile is routed again), and upstream is answered once every part was queued, with the
 * worst status of the parts. The one request cycle below serves every route: the core sets
 * r->target to the route's transport before encode, so one send function reaches each backend.
 * Counting: every backend has its own pc_send_counts (otelcol_exporter_* with a backend label,
 * kept after the backend leaves, so the series add up) and a count of what was routed again
 * from it (profcol_exporter_rerouted_*); what is refused for want of any backend counts in the
 * exporter's own counts. Shutdown drains every route before def->close.
 *
 * Kafka (exporters/kafka.c), the exporter that sends through librdkafka and is acknowledged
 * via a callback: encode produces the messages (values and keys) on the pool as otlphttp encodes
 * its body: one per partition key when one is asked for, each split through pdata/split.h until it
 * fits producer::max_message_bytes. send calls rd_kafka_producev() for each with its part of the
 * request as the message's opaque and returns. librdkafka keeps the delivery reports on its
 * queue; the hand-off of sdk/kafka.h (its queue-event callback on librdkafka's thread
 * only does uv_async_send on a uv_async_t opened in start) lets the loop serve them with
 * rd_kafka_poll(rk, 0), so the delivery-report callback itself runs on the loop thread: no
 * list crosses threads. Broker errors map to retryable (queue full, timeouts, transport) or
 * permanent (message too large, authorization) by pc_kafka_err. A request split into several
 * messages merges their outcomes with pc_export_outcome_merge(), as the Pyroscope exporter
 * does for /ingest, and calls pc_export_done() when the last one is reported. The close hook
 * flushes and destroys the producer on the pool (pc_kafka_close), then closes the async
 * handle and calls back. */
#ifndef PC_EXPORTER_H
#define PC_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdk/component.h"
#include "sdk/ring.h"
#include "sdk/sender.h"

typedef struct pc_exporter pc_exporter;
typedef struct pc_export_req pc_export_req;

/* What one send attempt came to. */
typedef struct pc_export_outcome {
    int st;            /* PC_OK; PC_EAGAIN or PC_EBUSY: retried; PC_EINVAL */
    int retry_after_s; /* the backend's Retry-After (or gRPC RetryInfo) in seconds, -1 if none */
    bool partial;      /* PC_OK with a partial success: the backend rejected some items */
    int64_t rejected;  /* with partial: how many (profiles for profiles, else the signal's items) */
    char msg[512];     /* why (the backend's message for a partial success) */
} pc_export_outcome;

/* OK, without a Retry-After or a partial success. */
#define PC_EXPORT_OK ((pc_export_outcome){.st = PC_OK, .retry_after_s = -1})

/* An outcome with st and a formatted message, retry_after_s -1. */
void pc_export_outcome_set(pc_export_outcome *o, int st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A request sent as several parts: acc keeps the worst status (pc_err_worse) with its
 * message and the longest Retry-After. Start acc as PC_EXPORT_OK. */
void pc_export_outcome_merge(pc_export_outcome *acc, const pc_export_outcome *part);
/* An OK answer's body (an Export*ServiceResponse of sig, proto or JSON): a partial success in it
 * sets o->partial, o->rejected and o->msg. */
void pc_export_outcome_partial(pc_export_outcome *o, pc_signal sig, const uint8_t *body, size_t len,
                               bool json);

/* One attempt to send one batch. An exporter's request type starts with this struct. */
struct pc_export_req {
    pc_exporter *e;
    const pc_batch *batch; /* borrowed until pc_export_done (read it, never change it) */
    pc_signal sig;
    pc_buf body;  /* what encode produced, for exporters that send one body; freed by the core */
    void *target; /* an exporter with routes: the route's transport (route_open's); else NULL */
    /* the core's */
    uv_work_t work;
    pc_send_result result; /* sender: its answer */
    void *result_ctx;
    pc_done_fn done; /* sink: upstream's answer */
    void *done_arg;
};

/* Called on the loop thread exactly once per request (also for an empty one). */
void pc_export_done(pc_export_req *r, const pc_export_outcome *o);

/* The largest copy an exporter's encode may leave to the loop (encode_is_copy): ~2 us. */
#define PC_EXPORT_LOOP_COPY_MAX (64u << 10)

typedef struct pc_exporter_def {
    /* bytes of the exporter's request type (starting with a pc_export_req); 0: a plain one */
    size_t req_size;
    /* offsetof the pc_sender_cfg (a group row over pc_sender_keys) in the config struct */
    size_t sender_cfg;
    /* no sender: a local sink (debug) that cannot fail in a way a resend would mend. Each batch
     * is encoded and sent at once, counted as sent or send_failed, and upstream is told OK once
     * it was sent; shutdown waits for the batches in flight. */
    bool sink;

    /* Optional: allocate e->priv from the validated config. No sockets yet. */
    int (*create)(pc_exporter *e, pc_error *err);
    /* Optional: open the transport (clients, TLS, authenticator) and log where it sends. 0, or a
     * PC_E* code with the message in err. The sender starts after it (a persistent queue replays
     * at once). */
    int (*start)(pc_exporter *e, pc_error *err);
    /* Optional, thread pool: r->batch to r->body (or to the exporter's request fields). */
    void (*encode)(pc_export_req *r);
    /* Optional, loop: true when encode(r) is only a copy of at most PC_EXPORT_LOOP_COPY_MAX
     * bytes (a small request passed through as it was received), so the core runs it on the
     * loop: a hand-off to the pool and back costs more than the copy (bench/README.md, "Small
     * requests, fourth pass"); a larger one stays on the pool, as the loop does nothing whose
     * cost grows with a payload (docs/ARCHITECTURE.md). */
    bool (*encode_is_copy)(const pc_export_req *r);
    /* Loop: send r; call pc_export_done(r, ...) once the backend has answered. */
    void (*send)(pc_export_req *r);
    /* Optional: free what encode or send left in the exporter's request fields. */
    void (*release)(pc_export_req *r);
    /* Optional: shutdown has begun (before the drain); e.g. a log line of the exporter's own
     * counts. */
    void (*stopping)(pc_exporter *e);
    /* Optional: after the drain, close the transport, then call pc_exporter_closed(e) once (at
     * once when nothing is open: start may never have run, or failed half way). */
    void (*close)(pc_exporter *e);
    /* Optional: free e->priv (the transport is closed). */
    void (*destroy)(pc_exporter *e);

    /* Routes (see above); all three or none. Thread pool: split b among the ring's members,
     * parts[k] (NULL: nothing) for member k, as pc_batch_route does. */
    void (*route)(pc_exporter *e, const struct pc_ring *ring, const pc_batch *b, pc_batch **parts);
    /* Loop: the transport to backend name (r->target of its requests); NULL with err. */
    void *(*route_open)(pc_exporter *e, const char *name, pc_error *err);
    /* Loop: the route's sends are over: close target, then call done(arg) once. */
    void (*route_close)(pc_exporter *e, void *target, void (*done)(void *arg), void *arg);
} pc_exporter_def;

typedef struct pc_route pc_route;
typedef struct pc_backend pc_backend;

struct pc_exporter {
    pc_component *c;
    const pc_exporter_def *def;
    void *priv; /* the exporter type's state */
    /* the core's */
    pc_send_counts counts; /* with routes: what was refused for want of a backend */
    pc_sender *sender;     /* NULL for a sink, with routes, or before start */
    uint64_t capacity;     /* the queue capacity gauge */
    size_t in_flight;      /* sink: batches not yet written */
    pc_shutdown_done shutdown_done;
    /* routes */
    pc_route *routes;     /* open, and retiring ones (leaving) until their sends are over */
    struct pc_ring *ring; /* the names of the routes not leaving */
    pc_backend *backends; /* per backend name: counts, kept for the exporter's life */
    size_t jobs;          /* consumes splitting on the thread pool */
    bool stopping;
    bool adopted;          /* queues left on disk by former backends were looked for */
    size_t merge_at_least; /* a durable batch before: every route's sender merges this much */
};

/* Exporters with routes: the backends are now names[0..n-1] (any order; duplicates count once).
 * Routes of new names open, routes of names no longer listed retire (what they hold is routed
 * again over the new ring); only the ring's share of keys moves. Logs the change. 0, or the
 * error of the first route that could not open (it is left out; the others are set). */
int pc_exporter_set_routes(pc_exporter *e, const char *const *names, size_t n, pc_error *err);
/* Routes open and not leaving (the ring's members). */
size_t pc_exporter_n_routes(const pc_exporter *e);

/* The exporter of a component built with PC_EXPORTER_CORE (its type's state is ->priv). */
static inline pc_exporter *pc_exporter_of(const pc_component *c)
{
    return (pc_exporter *)c->priv;
}

/* def->close is done: the shutdown completes. A void * argument, to serve as the close callback
 * of a client (pc_http_client_close(client, pc_exporter_closed, e)). */
void pc_exporter_closed(void *e);

/* The component callbacks (for PC_EXPORTER_CORE). */
int pc_exporter_create(pc_component *c, pc_error *err);
int pc_exporter_start(pc_component *c, pc_error *err);
void pc_exporter_consume(pc_component *c, pc_batch *b, pc_done_fn done, void *arg);
bool pc_exporter_full(pc_component *c);
pc_admit pc_exporter_admit(pc_component *c, size_t *room);
bool pc_exporter_durable(pc_component *c, size_t batch_size);
void pc_exporter_shutdown(pc_component *c, pc_shutdown_done done);
void pc_exporter_destroy(pc_component *c);

/* In a pc_component_type of kind PC_KIND_EXPORTER: the callbacks and the exporter's def. */
#define PC_EXPORTER_CORE(def)                                                                      \
    .create = pc_exporter_create, .start = pc_exporter_start, .consume = pc_exporter_consume,      \
    .admit = pc_exporter_admit, .durable = pc_exporter_durable, .shutdown = pc_exporter_shutdown,  \
    .destroy = pc_exporter_destroy, .exporter = (def)

#endif
