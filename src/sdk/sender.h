/* The sender (ARCHITECTURE.md §2, like the Collector's exporterhelper queue and retry): a bounded
 * sending queue, optionally persisted on disk, consumers that send with capped, jittered
 * exponential backoff honouring Retry-After, and the counting of what was sent, failed or refused.
 * The exporter core (sdk/exporter.h) runs one per exporter and gives it "send this batch
 * once". Loop thread only. */
#ifndef PC_SENDER_H
#define PC_SENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sdk/component.h"

typedef struct pc_sender_cfg {
    bool queue_enabled;
    int64_t num_consumers;
    int64_t queue_size;
    int sizer; /* 0 requests, 1 samples, 2 bytes */
    char *storage;
    int64_t batch_max; /* merge queued requests up to this many samples per send; 0: never */
    bool retry_enabled;
    uint64_t initial_interval_ms, max_interval_ms, max_elapsed_ms;
    double multiplier, randomization;
} pc_sender_cfg;

/* The config-table group (sdk/cfgtable.h) of an exporter's "sending_queue.*" and
 * "retry_on_failure.*" keys, relative to a pc_sender_cfg. */
extern const pc_cfg_key pc_sender_keys[];

extern const char *const pc_sender_sizers[];

/* Check the sender part of an exporter's config; PC_EINVAL with err. */
int pc_sender_validate(const pc_sender_cfg *cfg, const pc_node *node, const char *path,
                       pc_error *err);
/* The same for keys at "<prefix>sending_queue." and "<prefix>retry_on_failure.". */
int pc_sender_validate_at(const pc_sender_cfg *cfg, const pc_node *node, const char *path,
                          const char *prefix, pc_error *err);

/* What an exporter counts per signal, in the signal's unit (profile samples, spans, ...): the
 * otelcol_exporter_* series. One per exporter (the exporter core's), shared by its senders, so
 * it outlives any one of them. */
typedef struct pc_send_counts {
    uint64_t sent[PC_SIGNAL_COUNT], failed[PC_SIGNAL_COUNT], enqueue_failed[PC_SIGNAL_COUNT];
    unsigned registered; /* PC_SIGNAL_BIT()s whose series exist */
    bool queue;          /* also otelcol_exporter_enqueue_failed_* (an exporter with a queue) */
    const char *backend; /* NULL, or the series' backend="..." label (one backend of several) */
} pc_send_counts;

/* Register sig's series of k (owned by c) unless they exist. */
void pc_send_counts_register(pc_send_counts *k, pc_component *c, pc_signal sig);
/* "sent 12 samples, send failed 0, enqueue failed 0; ..." for the signals seen (the stop line). */
void pc_send_counts_format(const pc_send_counts *k, char *out, size_t n);

/* Outcome of one send attempt. retry_after_s: the server's Retry-After, or -1. */
typedef void (*pc_send_result)(void *ctx, int st, int retry_after_s, const char *msg);
/* Send b once (arg as given to pc_sender_new). b is borrowed: the sender keeps its reference
 * until result is called. */
typedef void (*pc_send_fn)(void *arg, pc_batch *b, pc_send_result result, void *ctx);

typedef struct pc_sender pc_sender;

/* In start(): opens (and replays) the persistent queue, counting into counts (which must
 * outlive the sender). The queue's directory is <storage>/<c->id>, or <storage>/<c->id>/<subdir>
 * when subdir is set (one sender of several; '/', ':', '[', ']' and ' ' become '_'). NULL with
 * the reason in err (PC_EIO: the storage directory). */
pc_sender *pc_sender_new(pc_component *c, const pc_sender_cfg *cfg, pc_send_counts *counts,
                         pc_send_fn send, void *arg, const char *subdir, pc_error *err);
/* The queue directory pc_sender_new uses for c and subdir (above) into out; false without
 * storage. */
bool pc_sender_dir(const pc_component *c, const pc_sender_cfg *cfg, const char *subdir, char *out,
                   size_t n);
/* The exporter's consume: takes one reference to b. */
void pc_sender_consume(pc_sender *s, pc_batch *b, pc_done_fn done, void *arg);
/* The queue is on disk: a batch is acknowledged only once written and fsynced. */
bool pc_sender_durable(const pc_sender *s);
/* Merge waiting requests up to at least max samples per send (sending_queue.batch.max_size). */
void pc_sender_merge_at_least(pc_sender *s, size_t max);
/* The queue has no room for one more request (with the requests sizer: queue_size reached; with
 * the others: less than one unit left). */
bool pc_sender_full(const pc_sender *s);
/* A round of sends (as many as there are consumers) waits behind the ones in flight, and the
 * backend is not failing: this sender's pipelines are admitted as behind (pc_exporter_admit), so
 * their decodes do not run ahead of the sends (sdk/pool.h). */
bool pc_sender_behind(const pc_sender *s);
/* Queued, in units of the sizer (the queue size gauge). */
uint64_t pc_sender_queue_size(const pc_sender *s);
/* Requests not yet delivered: queued, in flight or waiting to retry. */
size_t pc_sender_held(const pc_sender *s);
/* Stop accepting, drain until empty or deadline_ms (uv_now time), then call done. What is left
 * stays on disk (persistent queue) or is logged and counted as dropped. */
void pc_sender_shutdown(pc_sender *s, uint64_t deadline_ms, void (*done)(void *arg), void *arg);

/* Where a retiring sender hands its batches: fn takes one reference to b and calls
 * done(done_arg, st, msg) exactly once, PC_OK once the batch is in someone else's care. */
typedef void (*pc_sender_handback)(void *arg, pc_batch *b, pc_done_fn done, void *done_arg);
/* The backend of s is gone (a loadbalancing exporter's backend left the ring): stop accepting
 * and hand every batch not yet delivered to fn: the queued ones at once (a persisted record once
 * read back, and removed once fn's done says OK), those waiting to retry at once, those in
 * flight when their send fails retryably; a send that succeeds or fails for good counts as
 * usual. A batch fn refuses is offered again a second later (or, when its upstream still waits
 * for the outcome: with the queue disabled, upstream gets the refusal). done runs once nothing
 * is left, unless pc_sender_shutdown is called meanwhile (the exporter stops): then its done
 * replaces this one, and what is refused from then on, or still waits at the shutdown
 * deadline, is given up as a shutdown gives it up (in memory: dropped and counted; on disk:
 * left for the next start). */
void pc_sender_retire(pc_sender *s, pc_sender_handback fn, void *arg, void (*done)(void *arg),
                      void *done_arg);
void pc_sender_free(pc_sender *s);

#endif
