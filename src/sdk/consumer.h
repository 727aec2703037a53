/* The one interface data flows through: receivers -> processors -> exporters. */
#ifndef PC_CONSUMER_H
#define PC_CONSUMER_H

#include "base/err.h"
#include "pdata/pdata.h"

/* Called exactly once, on the loop thread, with the outcome of a consume call: PC_OK or a PC_E*
 * code (base/err.h), which receivers map to statuses (ARCHITECTURE.md §7): PC_EINVAL bad data
 * (400, never retried), PC_E2BIG over a limit (413), PC_EAGAIN backend down or queue full (503
 * with Retry-After), PC_EBUSY memory or rate limit (429 with Retry-After). msg may be NULL. */
typedef void (*pc_done_fn)(void *arg, int rc, const char *msg);

/* Whether a consumer would refuse any batch now, and why, so a receiver refuses a request before
 * decoding it (retryable): a memory limiter down the chain is refusing, or a sending queue is
 * full. BEHIND admits: a sender down the chain has a round of sends queued behind the ones in
 * flight, so the request is decoded without hurrying (sdk/pool.h: its decode is not chained to).
 * The worse wins where several pipelines take the data. */
typedef enum { PC_ADMIT_OK, PC_ADMIT_BEHIND, PC_ADMIT_QUEUE_FULL, PC_ADMIT_MEMORY } pc_admit;

static inline bool pc_admit_refused(pc_admit a)
{
    return a > PC_ADMIT_BEHIND;
}

typedef struct pc_consumer pc_consumer;
struct pc_consumer {
    /* Takes ownership of one reference to b. Must be called on the loop thread. */
    void (*consume)(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg);
    /* True if consume may modify the batch (it then calls pc_batch_make_writable). */
    bool mutates;
    /* True when every consumer this leads to is an exporter that sends a request's bytes as
     * received and reads nothing of its model (pass-through, ARCHITECTURE.md §2): a receiver may
     * then only check the request on the wire (pdata/wire_check.h) and hand on a batch whose
     * model is decoded only if something asks for it after all. The service sets it when it
     * builds the graph. */
    bool wire_ok;
    /* Optional: PC_ADMIT_OK, PC_ADMIT_BEHIND, or why consume would refuse any batch now; lowers
     * *room to what the decodes in flight may hold for it (a memory limiter's room under its
     * soft limit). */
    pc_admit (*admit)(pc_consumer *self, size_t *room);
    /* Optional: true when every exporter this leads to keeps a persistent queue (a batch is
     * acknowledged only once written to disk); each such queue is asked to merge the requests
     * waiting in it up to batch_size samples per send. */
    bool (*durable)(pc_consumer *self, size_t batch_size);
};

static inline void pc_consume(pc_consumer *c, pc_batch *b, pc_done_fn done, void *arg)
{
    c->consume(c, b, done, arg);
}

/* room: in, SIZE_MAX or a cap already known; out, the smallest room along the way. */
static inline pc_admit pc_consumer_admit(pc_consumer *c, size_t *room)
{
    return c && c->admit ? c->admit(c, room) : PC_ADMIT_OK;
}

static inline bool pc_consumer_durable(pc_consumer *c, size_t batch_size)
{
    return c && c->durable && c->durable(c, batch_size);
}

/* Several consumers' outcomes as one (a fan-out, a connector's routes): done(arg) is called once,
 * with the worst code and its message, when every pc_join_add has had its pc_join_done and the
 * creator has let go of its own hold, also with pc_join_done(j, PC_OK, NULL), so an outcome that
 * comes back synchronously cannot end the join before the last consumer was called. */
typedef struct pc_join pc_join;
pc_join *pc_join_new(pc_done_fn done, void *arg);
void pc_join_add(pc_join *j);
void pc_join_done(void *j, int rc, const char *msg); /* a pc_done_fn */

/* A fan-out to several consumers; completes when all have. Shares the batch by reference. */
pc_consumer *pc_fanout_new(pc_consumer **targets, size_t n);
void pc_fanout_free(pc_consumer *fanout);

#endif
