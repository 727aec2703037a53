/* The receiver recipe (ARCHITECTURE.md §9): one request's way through a receiver, whatever brings
 * it (an HTTP request, a gRPC call, a Kafka message, a scrape):
 *
 *   loop  admission: refused before decoding (retryable) when the pipelines would refuse anyway
 *         (a memory limiter is refusing, a sending queue is full)
 *   pool  behind the one decode gate: the receiver's decode step within the request's budget,
 *         then validation, counting, the budget's end
 *   loop  consume by the signal's pipelines, then the receiver's answer, exactly once
 *
 * A receiver writes only its decode step and its answer; the counting (otelcol_receiver_*,
 * profcol_receiver_refused_requests), the rate-limited log lines, the tenant and the statuses'
 * codes are the recipe's. One outcome runs end to end: a PC_E* code and its detail, never text,
 * decides what the client is told. */
#ifndef PC_SDK_RECEIVER_H
#define PC_SDK_RECEIVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/budget.h"
#include "base/log.h"
#include "sdk/component.h"
#include "sdk/telemetry.h"

/* The default decode budget of a request, as a multiple of its size: decoded OTLP takes 6-11x
 * its wire size for real profiles and spans (docs/limits.md), hostile shapes 70x and more. */
#define PC_DECODED_PER_BODY 16
static inline uint64_t pc_decoded_limit(uint64_t max_decoded, uint64_t max_body)
{
    return max_decoded ? max_decoded : PC_DECODED_PER_BODY * max_body;
}

/* A receiver's counters for one transport ("http", "grpc", "kafka"), its self-metrics. */
typedef struct pc_receiver_stats {
    uint64_t accepted[PC_SIGNAL_COUNT], refused[PC_SIGNAL_COUNT]; /* items: samples, spans... */
    pc_refused_requests refused_requests;
    uint64_t wire_checked; /* requests accepted on the wire check alone (pc_receive.wire) */
} pc_receiver_stats;

/* Register stats under transport for the signals c has routes for (profiles only: c->next). */
void pc_receiver_stats_register(pc_component *c, pc_receiver_stats *s, const char *transport);

/* What the recipe keeps per receiver instance: requests alive (a gauge) and the two log lines a
 * client can trigger at will, rate-limited (base/log.h). */
typedef struct pc_receiver_core {
    pc_component *c;
    uint64_t in_flight;
    /* per signal: the last admission found its pipelines behind in sending (PC_ADMIT_BEHIND);
     * the decodes waiting for the pool read it (pc_decode_queue_work) */
    atomic_bool behind[PC_SIGNAL_COUNT];
    pc_log_limiter refused_log, pipeline_log;
} pc_receiver_core;

void pc_receiver_core_init(pc_receiver_core *rc, pc_component *c);
/* At shutdown: the counts of lines held back. */
void pc_receiver_core_flush(pc_receiver_core *rc);

typedef struct pc_receive pc_receive;

typedef struct pc_receive_ops {
    /* Thread pool: turn the request into rq->batch, reserving from budget (attach it to the
     * arenas made). 0, or a PC_E* code with e: PC_EINVAL bad request, PC_EBADMSG undecodable
     * body, PC_E2BIG over a limit, PC_ENOTSUP unsupported encoding, PC_EAGAIN no room now.
     * With rq->wire it may instead hand on a batch of pc_batch_new_wire for a request
     * pc_wire_check_profiles accepted whole within the budget (pc_receive_wire_check); the
     * recipe then counts what the check counted and validates nothing again. */
    int (*decode)(pc_receive *rq, pc_budget *budget, pc_error *e);
    /* Thread pool, optional: after validation kept the batch (e.g. pass-through bytes, headers
     * as resource attributes). */
    void (*decoded)(pc_receive *rq);
    /* Loop, optional: false to let go of a decoded request without consuming it (its Kafka
     * partition was revoked meanwhile); answer then gets PC_ECANCELED. */
    bool (*wanted)(pc_receive *rq);
    /* Loop, exactly once: st is PC_OK (rq->rejected profiles were taken out by validation, msg
     * says why) or the refusal's code and detail; rq->stage says who refused. The request is the
     * receiver's again: free it here. */
    void (*answer)(pc_receive *rq, int st, const char *msg);
} pc_receive_ops;

typedef enum {
    PC_RECEIVE_ADMISSION, /* refused before decoding (PC_EAGAIN) */
    PC_RECEIVE_DECODE,    /* refused by decode or validation */
    PC_RECEIVE_PIPELINE,  /* the pipelines' outcome */
} pc_receive_stage;

/* One request; the receiver embeds it in its own job and fills the first part. */
struct pc_receive {
    const pc_receive_ops *ops;
    pc_receiver_core *core;
    pc_receiver_stats *stats;
    /* the signal's pipelines: the receiver's slot (c->route[sig]), read when used, since a reload
     * re-routes a kept receiver and frees the old pipelines while requests decode */
    pc_consumer *const *route;
    pc_signal sig;
    const char *who;         /* the client in log lines: "127.0.0.1:5311", "topic t [0] offset 7" */
    uint64_t max_decoded;    /* the request's decode budget */
    const char *decoded_key; /* the key that sets it, named when it refuses */
    int invalid_code;        /* a batch that fails validation: PC_EINVAL, or PC_EBADMSG */
    char tenant[256];        /* X-Scope-OrgID when the client sent one: pc_receive_set_tenant */

    /* the recipe's */
    uv_work_t work;
    pc_receive_stage stage;
    size_t decode_room; /* what the pipelines' memory limiters leave for decodes in flight */
    pc_batch *batch;    /* decode's output; the recipe consumes or frees it */
    /* profiles whose every consumer passes bytes through (pc_consumer.wire_ok): the decode step
     * may check the request on the wire instead of decoding it */
    bool wire;
    int64_t rejected;  /* profiles validation took out */
    size_t items;      /* what reaches the pipelines */
    size_t invalid;    /* what decode or validation refused */
    int code;          /* the refusal before the pipelines, else PC_OK */
    bool wire_checked; /* accepted on the wire check alone (counted on the loop) */
    char msg[512];
};

/* Record the tenant a client named (Grafana's X-Scope-OrgID header or gRPC metadata); it travels
 * with the batch (pc_batch_tenant). Values with control characters are ignored. */
void pc_receive_set_tenant(pc_receive *rq, const char *tenant);

/* Thread pool, for a decode step with rq->wire: a batch of pc_batch_new_wire in rq->batch when
 * len bytes of protobuf pass pc_wire_check_profiles with nothing to reject and their decode
 * estimate fits the budget (reserved, then released as the decode's would be); false when the
 * request is to be decoded (anything refused, or rejected: the decode then gives the same answer
 * and message as without the check). */
bool pc_receive_wire_check(pc_receive *rq, const uint8_t *data, size_t len, pc_budget *budget);
/* The same for bytes inflated into buf (all of buf->data): the batch takes buf's block instead
 * of copying it (bench/README.md, "### Pass-through"), leaving buf empty. */
bool pc_receive_wire_check_buf(pc_receive *rq, pc_buf *buf, pc_budget *budget);

/* Loop: admission, decode behind the gate, validate, count, consume, answer. */
void pc_receive_start(pc_receive *rq);

#endif
