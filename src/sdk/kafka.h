/* What the kafka receiver and exporter share: librdkafka (Debian's librdkafka-dev; profcol has no
 * Kafka protocol code of its own) configured from the Collector's client keys (brokers,
 * client_id, tls, auth::sasl, auth::plain_text), and the one hand-off between librdkafka's
 * threads and the libuv loop.
 *
 * The hand-off (ARCHITECTURE.md §4). librdkafka runs threads of its own (one per broker and a
 * main one); they never touch component state. Whatever they have for the component (delivery
 * reports, consumed messages, rebalances, errors, log lines: log.queue is on) waits on one
 * librdkafka queue. When that queue goes from empty to non-empty, librdkafka calls wake() on its
 * own thread, which does exactly one thing: uv_async_send() on the component's uv_async_t. The
 * async callback runs on the loop thread and calls the component's serve(), which drains the
 * queue with rd_kafka_poll(rk, 0) or rd_kafka_consumer_poll(rk, 0): those never block, and they
 * run librdkafka's callbacks (dr_msg_cb, rebalance_cb, log_cb, error_cb) right there, on the loop
 * thread, where component state may be touched. The one thing that crosses threads is the
 * uv_async_send. A timer also calls serve() every second: a consumer whose partitions are all
 * paused gets nothing that would wake the loop, yet must poll within max.poll.interval.ms or it
 * is put out of its group. Calls that block (rd_kafka_flush, rd_kafka_consumer_close,
 * rd_kafka_destroy) run on the thread pool at close, once serve() is no longer called on the
 * loop.
 *
 * Loop thread only, but for wake() and the close work as said. */
#ifndef PC_KAFKA_H
#define PC_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/log.h"
#include "sdk/cfgtable.h"
#include "sdk/tls_config.h"

/* The client part of a kafka component's config. */
typedef struct pc_kafka_client_cfg {
    pc_strlist brokers;
    char *client_id;
    char *protocol_version; /* accepted for Collector configs; librdkafka asks the broker */
    pc_tls_client_cfg tls;
    bool tls_on; /* set by pc_kafka_client_validate: a `tls` block without insecure: true */
    char *sasl_username, *sasl_password, *sasl_mechanism;
    int64_t sasl_version;
    char *plain_username, *plain_password; /* auth::plain_text (the Collector's deprecated PLAIN) */
} pc_kafka_client_cfg;

/* The config-table group (sdk/cfgtable.h) of a kafka component's client keys, relative to a
 * pc_kafka_client_cfg. */
extern const pc_cfg_key pc_kafka_client_keys[];

/* Cross-key checks of the client part (brokers host:port, SASL complete, TLS files load); sets
 * cfg->tls_on from node. PC_EINVAL with the key path in err. */
int pc_kafka_client_validate(pc_kafka_client_cfg *cfg, const pc_node *node, const char *path,
                             pc_error *err);

/* Set one librdkafka property: 0, or PC_EINVAL with librdkafka's reason in e. */
int pc_kafka_conf_set(rd_kafka_conf_t *conf, const char *name, const char *value, pc_error *e);

/* The loop side of one rd_kafka_t. A component's state starts with one (it is the opaque of
 * every librdkafka callback: pc_kafka_of(opaque)). */
typedef struct pc_kafka {
    const char *id; /* the component's id, for log lines */
    uv_loop_t *loop;
    rd_kafka_t *rk;
    rd_kafka_queue_t *q; /* the queue whose first element wakes the loop */
    uv_async_t async;
    uv_timer_t tick; /* serve() every second, whatever wakes the loop */
    bool async_open, tick_open;
    bool closing; /* set on the loop before the close work is queued: serve() no longer runs */
    /* loop: drain the queue (the component's; rd_kafka_poll or rd_kafka_consumer_poll) */
    void (*serve)(struct pc_kafka *k);
    /* pool, at close, before rd_kafka_destroy: rd_kafka_flush or rd_kafka_consumer_close */
    void (*close_work)(struct pc_kafka *k);
    void (*closed)(void *arg);
    void *closed_arg;
    uv_work_t work;
    pc_log_limiter log_limit, error_limit; /* librdkafka repeats itself while a broker is down */
    uint64_t wakes;                        /* times librdkafka woke the loop (tests) */
} pc_kafka;

static inline pc_kafka *pc_kafka_of(void *opaque)
{
    return (pc_kafka *)opaque;
}

/* A librdkafka config for k (opaque, log and error callbacks through the hand-off) with the
 * client part of cfg set. NULL with the reason in e. */
rd_kafka_conf_t *pc_kafka_conf_new(pc_kafka *k, const pc_kafka_client_cfg *cfg, pc_error *e);
/* rd_kafka_new(type, conf) (conf is consumed either way), the log queue set, and the hand-off
 * opened on queue (NULL: the main queue; a consumer passes rd_kafka_queue_get_consumer). 0, or
 * a PC_E* code with the reason in e (nothing left open). */
int pc_kafka_open(pc_kafka *k, uv_loop_t *loop, rd_kafka_type_t type, rd_kafka_conf_t *conf,
                  bool consumer, pc_error *e);
/* Serve k's queue now (on the loop), as a wake-up would. */
void pc_kafka_serve_now(pc_kafka *k);
/* Stop serving, then on the thread pool close_work and rd_kafka_destroy, then close the async
 * handle and call closed(arg) on the loop. At once when nothing was opened. */
void pc_kafka_close(pc_kafka *k, void (*closed)(void *arg), void *arg);

/* A librdkafka error as the one convention has it (ARCHITECTURE.md §7): PC_EAGAIN for what
 * passes (transport, timeouts, leader changes, full queues, brokers down), PC_E2BIG for a
 * message over a size limit, PC_EINVAL for the rest (authorization, unknown topic, invalid
 * message). */
int pc_kafka_err(rd_kafka_resp_err_t err);

/* "a,b" from a broker list. */
void pc_kafka_brokers_str(const pc_strlist *l, char *out, size_t n);

#endif
