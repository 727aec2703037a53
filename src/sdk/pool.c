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
    void *data;      /* the caller's req->data */
    pool_item *next; /* the gate: the items a job ran after this one (see gate_work) */
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
    item_new((pool_item){req, work, after, req->data, NULL});
    atomic_fetch_add(&beside_waiting, 1);
    uv_queue_work(loop, req, beside_work, beside_after);
}

/* ---- the decode gate ---- */

/* A job runs its own item and then up to GATE_CHAIN - 1 waiting ones, so a busy pool thread
 * goes on to the next decode without a wake-up through the loop and back (two context switches
 * and a futex call per request, about 10 % of small requests' CPU: bench/README.md, "Small
 * requests, fourth pass"). Bounded, because the chain's answers wait for its last item and
 * work queued outside the gate waits for the job. */
enum { GATE_CHAIN = 4 };

/* One per process, as the thread pool it guards (libuv has one pool). `running` is the loop
 * thread's; the ring of waiting work is shared with the jobs, under `mu`. */
static struct {
    size_t running, limit;
    uv_mutex_t mu;
    pool_item *q; /* a ring of waiting work */
    size_t head, n, cap;
} gate;

static void gate_next(uv_loop_t *loop);

/* The oldest waiting item, taken out of the ring (under gate.mu), or false. */
static bool gate_pop(pool_item *g)
{
    if (!gate.n) return false;
    *g = gate.q[gate.head];
    gate.head = (gate.head + 1) % gate.cap;
    gate.n--;
    return true;
}

static void gate_work(uv_work_t *req)
{
    pool_item *it = req->data, *last = it;
    item_run(it);
    for (int k = 1; k < GATE_CHAIN && !atomic_load(&beside_waiting); k++) {
        pool_item g;
        uv_mutex_lock(&gate.mu);
        bool got = gate_pop(&g);
        uv_mutex_unlock(&gate.mu);
        if (!got) break;
        pool_item *nx = item_new(g);
        item_run(nx);
        last = last->next = nx;
    }
}

static void gate_after(uv_work_t *req, int status)
{
    pool_item *it = req->data;
    uv_loop_t *loop = req->loop;
    gate.running--;
    while (it) { /* the job's own item first, then those it ran, in their order */
        pool_item *nx = it->next;
        item_after(it, status);
        status = 0; /* the chained items ran: only the job itself can be canceled */
        it = nx;
    }
    gate_next(loop);
}

static void gate_start(uv_loop_t *loop, pool_item g)
{
    item_new(g);
    gate.running++;
    uv_queue_work(loop, g.req, gate_work, gate_after);
}

static void gate_next(uv_loop_t *loop)
{
    while (gate.running < gate.limit) {
        pool_item g;
        uv_mutex_lock(&gate.mu);
        bool got = gate_pop(&g);
        uv_mutex_unlock(&gate.mu);
        if (!got) return;
        gate_start(loop, g);
    }
}

void pc_decode_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work, uv_after_work_cb after)
{
    if (!gate.limit) { /* main.c sizes the pool through UV_THREADPOOL_SIZE before the loop runs */
        const char *env = getenv("UV_THREADPOOL_SIZE");
        long n = env ? strtol(env, NULL, 10) : 0;
        gate.limit = n > 0 && n < 1024 ? (size_t)n : 4; /* libuv's default */
        uv_mutex_init(&gate.mu);
    }
    /* the loop field is uv_queue_work's to set; a chained item is never queued there, and its
     * after_work may read it */
    req->loop = loop;
    pool_item g = {req, work, after, req->data, NULL};
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
