/* The exporter core: one implementation of everything an exporter does around "send this
 * request", so that an exporter type only says how a batch becomes a request (encode, on the
 * thread pool) and how a request reaches its backend (send, on the loop).
 *
 * The core does the rest: the component callbacks (create, start, consume, shutdown, destroy),
 * the sender (pipeline/sender.h: the sending queue, persistent queue, retries with backoff and
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
 * How two exporters plug in (loadbalancing is still to come; kafka is built):
 *
 * - loadbalancing (one sender per backend, created and torn down as membership changes). What
 *   is in place for it: the counters live in the core (pc_send_counts), not in a sender, so any
 *   number of senders count into one set of otelcol_exporter_* series and a removed backend does
 *   not take its counts with it; a sender calls its send function with an opaque argument, not
 *   the component, so one send function can serve many senders. What the core grows with it
 *   (no other exporter changes): e->sender becomes a list of routes {sender, target};
 *   pc_exporter_route_add(e, target) creates a route's sender with the route as its send
 *   argument, so the one request cycle here sets r->target before encode and the exporter's
 *   send function reaches that backend; a def hook route(e, b) lets the core's consume split a
 *   batch by routing key (trace id, service name) and hand each part to its route's sender;
 *   pc_exporter_route_remove() asks the removed route's sender to hand back what is still
 *   queued (pc_sender_take, beside pc_sender_shutdown in sender.c: the queued batches instead of
 *   a drain), consumes those batches again so they are routed to the remaining backends, then
 *   shuts that sender down (its sends in flight finish) and frees it. Shutdown drains every
 *   route before def->close; the queue gauges sum over the routes.
 * - Kafka (exporters/kafka.c; sends through librdkafka, acknowledged via a callback): encode
 *   produces the messages (values and keys) on the pool as otlphttp encodes its body: one per
 *   partition key when one is asked for, each split through pdata/split.h until it fits
 *   producer::max_message_bytes. send calls rd_kafka_producev() for each with its part of the
 *   request as the message's opaque and returns. librdkafka keeps the delivery reports on its
 *   queue; the hand-off of pipeline/kafka.h (its queue-event callback on librdkafka's thread
 *   only does uv_async_send on a uv_async_t opened in start) lets the loop serve them with
 *   rd_kafka_poll(rk, 0), so the delivery-report callback itself runs on the loop thread: no
 *   list crosses threads. Broker errors map to retryable (queue full, timeouts, transport) or
 *   permanent (message too large, authorization) by pc_kafka_err. A request split into several
 *   messages merges their outcomes with pc_export_outcome_merge(), as the Pyroscope exporter
 *   does for /ingest, and calls pc_export_done() when the last one is reported. The close hook
 *   flushes and destroys the producer on the pool (pc_kafka_close), then closes the async
 *   handle and calls back. */
#ifndef PC_EXPORTER_H
#define PC_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/component.h"
#include "pipeline/sender.h"

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
    pc_buf body; /* what encode produced, for exporters that send one body; freed by the core */
    /* the core's */
    uv_work_t work;
    pc_send_result result; /* sender: its answer */
    void *result_ctx;
    pc_done_fn done; /* sink: upstream's answer */
    void *done_arg;
};

/* Called on the loop thread exactly once per request (also for an empty one). */
void pc_export_done(pc_export_req *r, const pc_export_outcome *o);

typedef struct pc_exporter_def {
    /* bytes of the exporter's request type (starting with a pc_export_req); 0: a plain one */
    size_t req_size;
    /* offsetof the pc_sender_cfg (PC_SENDER_KEYS) in the config struct */
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
} pc_exporter_def;

struct pc_exporter {
    pc_component *c;
    const pc_exporter_def *def;
    void *priv; /* the exporter type's state */
    /* the core's */
    pc_send_counts counts;
    pc_sender *sender; /* NULL for a sink, or before start */
    uint64_t capacity; /* the queue capacity gauge */
    size_t in_flight;  /* sink: batches not yet written */
    pc_shutdown_done shutdown_done;
};

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
void pc_exporter_shutdown(pc_component *c, pc_shutdown_done done);
void pc_exporter_destroy(pc_component *c);

/* In a pc_component_type of kind PC_KIND_EXPORTER: the callbacks and the exporter's def. */
#define PC_EXPORTER_CORE(def)                                                                      \
    .create = pc_exporter_create, .start = pc_exporter_start, .consume = pc_exporter_consume,      \
    .shutdown = pc_exporter_shutdown, .destroy = pc_exporter_destroy, .exporter = (def)

#endif
