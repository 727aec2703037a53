/* The thread pool's two doors (sdk/pool.h): the decode gate, and the work queued beside it. */
#include "sdk/pool.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "base/alloc.h"

/* One piece of work through either door: the caller's callbacks and data; while it runs,
 * req->data points at the item. */
typedef struct pool_item pool_item;
struct pool_item {
    uv_work_t *req;
    uv_work_cb work;
    uv_after_work_cb after;
    void *data;                /* the caller's req->data */
    pool_item *next;           /* the gate: the items a job ran after this one (see gate_work) */
    const atomic_bool *behind; /* the gate: not chained to while set (pc_decode_queue_work) */
};

static pool_item *item_new(pool_item g)
{
    pool_item *it = pc_xmalloc(sizeof *it);
    *it = g;
    it->next = NULL;
    g.req->data = it;
    return it;
}

static void item_run(pool_item *it)
{
    it->req->data = it->data;
    it->work(it->req);
    it->req->data = it;
}

/* The caller's after_work for it, which may free its req; it is freed first. */
static void item_after(pool_item *it, int status)
{
    uv_after_work_cb after = it->after;
    uv_work_t *r = it->req;
    r->data = it->data;
    free(it);
    after(r, status);
}

/* ---- beside the gate ---- */

/* Work queued with pc_pool_queue_work and not started yet: while there is any, a gate job does
 * not go on to waiting decodes (what was accepted is sent before more is taken in). */
static atomic_size_t beside_waiting;

static void beside_work(uv_work_t *req)
{
    atomic_fetch_sub(&beside_waiting, 1);
    item_run(req->data);
}

static void beside_after(uv_work_t *req, int status)
{
    if (status == UV_ECANCELED) atomic_fetch_sub(&beside_waiting, 1); /* never started */
    item_after(req->data, status);
}

void pc_pool_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work, uv_after_work_cb after)
{
    item_new((pool_item){req, work, after, req->data, NULL, NULL});
    atomic_fetch_add(&beside_waiting, 1);
    uv_queue_work(loop, req, beside_work, beside_after);
}

/* ---- the decode gate ---- */

/* A job runs its item and then up to GATE_CHAIN - 1 waiting ones, so a busy pool thread goes on
 * to the next decode without a wake-up through the loop and back (a futex call on each side and
 * two context switches per request: bench/README.md, "Small requests, fourth pass" and "sixth
 * pass"). No after_work waits for the chain's end: the job hands each item to the loop as soon as
 * it ran, through the gate's async handle. The bound is for work queued on libuv's
 * pool by others (DNS lookups, files), which waits behind a job; the SDK's own work beside the
 * gate stops the chain at once. */
enum { GATE_CHAIN = 16 };

/* One per process, as the thread pool it guards (libuv has one pool), used by one loop at a time:
 * `running` and `async` are the loop thread's; the ring of waiting work and the items that ran
 * are shared with the jobs, under `mu`. `async` is open while a job runs (so a loop
 * with no decode in flight holds no handle of the gate's and closes cleanly), and a job reads it
 * only while it runs. */
static struct {
    size_t running, limit;
    uv_mutex_t mu;
    pool_item *q; /* a ring of waiting work */
    size_t head, n, cap;
    pool_item *done, **done_tail; /* items that ran, their after_work to run */
    uv_async_t *async;
} gate;

static void gate_next(uv_loop_t *loop);

/* The oldest waiting item, taken out of the ring (under gate.mu), or false; for a job going on
 * (chain), false too while that item is behind. */
static bool gate_pop(pool_item *g, bool chain)
{
    if (!gate.n) return false;
    const atomic_bool *behind = gate.q[gate.head].behind;
    if (chain && behind && atomic_load_explicit(behind, memory_order_relaxed)) return false;
    *g = gate.q[gate.head];
    gate.head = (gate.head + 1) % gate.cap;
    gate.n--;
    return true;
}

/* A job: the gate's own request on libuv's pool, so that every item's after_work (the first's
 * too) can run while the job goes on: an after_work may free its item's request. */
typedef struct gate_job {
    uv_work_t w;
    pool_item *first;
} gate_job;

static void gate_work(uv_work_t *w)
{
    pool_item *it = ((gate_job *)w->data)->first;
    for (int k = 1;; k++) {
        item_run(it);
        uv_mutex_lock(&gate.mu);
        *gate.done_tail = it;
        gate.done_tail = &it->next;
        pool_item g;
        bool got = k < GATE_CHAIN && !atomic_load(&beside_waiting) && gate_pop(&g, true);
        uv_mutex_unlock(&gate.mu);
        uv_async_send(gate.async); /* sends before the loop runs the callback are one wake-up */
        if (!got) return;
        it = item_new(g);
    }
}

/* The loop thread: the after_work of the items that ran, in their order. */
static void gate_deliver(void)
{
    uv_mutex_lock(&gate.mu);
    pool_item *it = gate.done;
    gate.done = NULL;
    gate.done_tail = &gate.done;
    uv_mutex_unlock(&gate.mu);
    while (it) {
        pool_item *nx = it->next;
        item_after(it, 0);
        it = nx;
    }
}

static void gate_async_cb(uv_async_t *a)
{
    (void)a;
    gate_deliver();
}

static void async_free(uv_handle_t *h)
{
    free(h);
}

static void gate_after(uv_work_t *w, int status)
{
    gate_job *j = w->data;
    uv_loop_t *loop = w->loop;
    gate.running--;
    if (status == UV_ECANCELED) item_after(j->first, status); /* it never ran */
    free(j);
    gate_deliver(); /* what this job ran, if the async callback has not run yet */
    gate_next(loop);
    if (!gate.running && gate.async) { /* no job left to send on it */
        uv_close((uv_handle_t *)gate.async, async_free);
        gate.async = NULL;
    }
}

static void gate_start(uv_loop_t *loop, pool_item g)
{
    if (!gate.async) {
        gate.async = pc_xmalloc(sizeof *gate.async);
        uv_async_init(loop, gate.async, gate_async_cb);
        uv_unref((uv_handle_t *)gate.async); /* the jobs keep the loop alive, not the handle */
    }
    gate_job *j = pc_xmalloc(sizeof *j);
    j->w.data = j;
    j->first = item_new(g);
    gate.running++;
    uv_queue_work(loop, &j->w, gate_work, gate_after);
}

static void gate_next(uv_loop_t *loop)
{
    while (gate.running < gate.limit) {
        pool_item g;
        uv_mutex_lock(&gate.mu);
        bool got = gate_pop(&g, false);
        uv_mutex_unlock(&gate.mu);
        if (!got) return;
        gate_start(loop, g);
    }
}

void pc_decode_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work, uv_after_work_cb after,
                          const atomic_bool *behind)
{
    if (!gate.limit) { /* main.c sizes the pool through UV_THREADPOOL_SIZE before the loop runs */
        const char *env = getenv("UV_THREADPOOL_SIZE");
        long n = env ? strtol(env, NULL, 10) : 0;
        gate.limit = n > 0 && n < 1024 ? (size_t)n : 4; /* libuv's default */
        uv_mutex_init(&gate.mu);
        gate.done_tail = &gate.done;
    }
    /* the loop field is uv_queue_work's to set; an item's request is never queued there (its
     * job's is), and its after_work may read it */
    req->loop = loop;
    pool_item g = {req, work, after, req->data, NULL, behind};
    uv_mutex_lock(&gate.mu);
    bool now = gate.running < gate.limit && !gate.n;
    if (!now) {
        if (gate.n == gate.cap) { /* grow the ring, keeping the order */
            size_t cap = gate.cap ? gate.cap * 2 : 64;
            pool_item *q = pc_xmalloc(cap * sizeof *q);
            for (size_t i = 0; i < gate.n; i++)
                q[i] = gate.q[(gate.head + i) % gate.cap];
            free(gate.q);
            gate.q = q;
            gate.head = 0;
            gate.cap = cap;
        }
        gate.q[(gate.head + gate.n++) % gate.cap] = g;
    }
    uv_mutex_unlock(&gate.mu);
    if (now) gate_start(loop, g);
}
