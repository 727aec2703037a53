/* The one interface data flows through: receivers -> processors -> exporters. */
#ifndef PC_CONSUMER_H
#define PC_CONSUMER_H

#include "pdata/pdata.h"

/* Outcome of a consume call. Receivers map it to HTTP status codes. */
typedef enum {
    PC_OK = 0,
    PC_ERR_PERMANENT = 1, /* bad data: 400, never retried */
    PC_ERR_RETRYABLE = 2, /* backend down, queue full: 503 with Retry-After */
    PC_ERR_OVERLOAD = 3,  /* memory limit, rate limit: 429 with Retry-After */
} pc_status;

/* Called exactly once, on the loop thread. msg may be NULL. */
typedef void (*pc_done_fn)(void *arg, pc_status st, const char *msg);

typedef struct pc_consumer pc_consumer;
struct pc_consumer {
    /* Takes ownership of one reference to b. Must be called on the loop thread. */
    void (*consume)(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg);
    /* True if consume may modify the batch (it then calls pc_batch_make_writable). */
    bool mutates;
};

static inline void pc_consume(pc_consumer *c, pc_batch *b, pc_done_fn done, void *arg)
{
    c->consume(c, b, done, arg);
}

/* The worse of two outcomes (retryable beats permanent: the sender should try again). */
pc_status pc_status_merge(pc_status a, pc_status b);

/* A fan-out to several consumers; completes when all have. Shares the batch by reference. */
pc_consumer *pc_fanout_new(pc_consumer **targets, size_t n);
void pc_fanout_free(pc_consumer *fanout);

#endif
