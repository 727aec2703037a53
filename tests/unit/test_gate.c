/* The thread pool's doors (sdk/pool.c): every decode's work runs once and its after_work once,
 * with its own data, on the loop the caller gave; at most as many decodes run at once as the pool
 * has threads; a busy job goes on to waiting decodes (chaining) without a round trip through the
 * loop, but only a few, and none while work queued beside the gate with pc_pool_queue_work
 * waits, so that work is not starved, nor to a decode while its behind flag is set (its
 * pipelines' sends have a backlog), while the others still chain; no after_work waits for the
 * chain's end; an after_work may free its request and queue more. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "sdk/pool.h"
#include "testloop.h"

enum { POOL = 2, N = 200 };

typedef struct item {
    uv_work_t w;
    int index;
    atomic_int ran;      /* times its work ran */
    int afters;          /* times its after_work ran */
    int afters_at_start; /* afters completed (all items) when its work started */
    int status;
    uv_loop_t *loop; /* what after_work saw */
    void *data_seen;
} item;

static atomic_int running, max_running;
static atomic_int total_afters; /* read by works on pool threads */
static atomic_int started;      /* item works begun */
static atomic_int go;           /* works wait for it: every item is queued before any runs */
static int afters_done;         /* loop thread */
static int requeue_left;
static int behind_from = 1 << 30; /* items from this index on are queued with behind_flag */
static atomic_bool behind_flag;
static uv_loop_t *test_loop;

static void work(uv_work_t *w)
{
    item *it = w->data;
    int now = atomic_fetch_add(&running, 1) + 1;
    int m = atomic_load(&max_running);
    while (now > m && !atomic_compare_exchange_weak(&max_running, &m, now)) {
    }
    atomic_fetch_add(&started, 1);
    while (!atomic_load(&go))
        usleep(50);
    it->afters_at_start = atomic_load(&total_afters);
    atomic_fetch_add(&it->ran, 1);
    usleep(300); /* long enough for the rest to queue up behind the pool */
    atomic_fetch_sub(&running, 1);
}

/* test_afters_not_held: item i's work waits (up to 10 s) until the after_work of every item
 * before it but the POOL - 1 that may still run on the other threads has run. */
static atomic_int waited_out;

static void work_waiting(uv_work_t *w)
{
    item *it = w->data;
    double until = now_ms() + 10000;
    while (atomic_load(&total_afters) < it->index - (POOL - 1) && now_ms() < until)
        usleep(100);
    if (atomic_load(&total_afters) < it->index - (POOL - 1)) atomic_fetch_add(&waited_out, 1);
    atomic_fetch_add(&it->ran, 1);
}

static void after(uv_work_t *w, int status)
{
    item *it = w->data;
    it->afters++;
    it->status = status;
    it->loop = w->loop;
    it->data_seen = w->data;
    afters_done++;
    atomic_fetch_add(&total_afters, 1);
}

static void reset(void)
{
    atomic_store(&running, 0);
    atomic_store(&max_running, 0);
    atomic_store(&total_afters, 0);
    atomic_store(&go, 0);
    atomic_store(&started, 0);
    afters_done = 0;
}

/* n items queued, each running fn; release: let the works waiting for `go` run */
static item *queue_items_running(int n, bool release, uv_work_cb fn)
{
    item *its = calloc((size_t)n, sizeof *its);
    for (int i = 0; i < n; i++) {
        its[i].index = i;
        its[i].w.data = &its[i];
        pc_decode_queue_work(test_loop, &its[i].w, fn, after,
                             i >= behind_from ? &behind_flag : NULL);
    }
    if (release) atomic_store(&go, 1);
    return its;
}

static item *queue_items(int n, bool release)
{
    return queue_items_running(n, release, work);
}

static void test_every_item_once(void)
{
    reset();
    item *its = queue_items(N, true);
    CHECK(wait_count(test_loop, &afters_done, N, 30000));
    for (int i = 0; i < N; i++) {
        CHECK_EQ_INT(atomic_load(&its[i].ran), 1);
        CHECK_EQ_INT(its[i].afters, 1);
        CHECK_EQ_INT(its[i].status, 0);
        CHECK(its[i].loop == test_loop);
        CHECK(its[i].data_seen == &its[i]);
    }
    CHECK(atomic_load(&max_running) <= POOL);
    CHECK(atomic_load(&max_running) >= 1);
    free(its);
}

/* Without chaining a waiting item's work can only start after some after_work ran (the loop
 * starts the next job when one ends); with it, the first jobs go on to waiting items at once.
 * The works wait for `go`, so every item is queued first whatever the scheduler does. */
static void test_chains(void)
{
    reset();
    item *its = queue_items(40, true);
    CHECK(wait_count(test_loop, &afters_done, 40, 30000));
    int early = 0;
    for (int i = POOL; i < 40; i++)
        early += its[i].afters_at_start == 0;
    CHECK(early > 0);
    free(its);
}

/* No item's after_work waits for the rest of its job's chain: each is handed to the loop as soon
 * as its work ran. Items are taken in order, so when item i starts every earlier one has run but
 * the at most POOL - 1 running on the other threads; a job holding its items' after_work until
 * its chain ends would wait here for its own earlier items and time out. */
static void test_afters_not_held(void)
{
    reset();
    atomic_store(&waited_out, 0);
    item *its = queue_items_running(40, false, work_waiting);
    CHECK(wait_count(test_loop, &afters_done, 40, 60000));
    CHECK_EQ_INT(atomic_load(&waited_out), 0);
    for (int i = 0; i < 40; i++)
        CHECK_EQ_INT(atomic_load(&its[i].ran), 1);
    free(its);
}

static atomic_int outside_done;
static int afters_when_outside_done = -1;

static void outside_work(uv_work_t *w)
{
    (void)w;
    atomic_store(&outside_done, 1);
}

static void outside_after(uv_work_t *w, int status)
{
    (void)w;
    (void)status;
    afters_when_outside_done = afters_done;
}

/* Work queued with uv_queue_work while the gate holds a long queue waits for the jobs running
 * then (each a few items), not for the whole queue. */
static void test_outside_work_not_starved(void)
{
    reset();
    item *its = queue_items(N, false);
    uv_work_t ow;
    uv_queue_work(test_loop, &ow, outside_work, outside_after);
    atomic_store(&go, 1);
    CHECK(wait_count(test_loop, &afters_done, N, 30000));
    CHECK(afters_when_outside_done >= 0);
    CHECK(afters_when_outside_done < N / 2);
    free(its);
}

static int started_at_beside = -1, beside_afters;

static void beside_work(uv_work_t *w)
{
    CHECK(w->data == &started_at_beside); /* the caller's data, not the pool's wrapper */
    started_at_beside = atomic_load(&started);
}

static void beside_after(uv_work_t *w, int status)
{
    CHECK(w->data == &started_at_beside);
    CHECK_EQ_INT(status, 0);
    beside_afters++;
}

/* While work queued beside the gate (pc_pool_queue_work) waits, a job does not go on to
 * waiting decodes: the beside work starts right after the first round of one decode each. */
static void test_beside_work_stops_chaining(void)
{
    reset();
    item *its = queue_items(N, false);
    uv_work_t bw;
    bw.data = &started_at_beside;
    pc_pool_queue_work(test_loop, &bw, beside_work, beside_after);
    atomic_store(&go, 1);
    CHECK(wait_count(test_loop, &afters_done, N, 30000));
    CHECK(wait_count(test_loop, &beside_afters, 1, 30000));
    CHECK(started_at_beside >= 1);
    CHECK(started_at_beside <= POOL);
    free(its);
}

/* While its behind flag is set (the sends of the pipelines it feeds have a backlog) a decode is
 * not chained to: it starts only once the loop ran the after_work of the items before it but
 * those still running. The decodes before it (other pipelines', no flag) still chain: some start
 * before the loop ran the after_work of all but the running ones. The flag is read when a job
 * would go on, not when the decode was queued: cleared while they wait, they chain again. */
static void test_behind_not_chained(void)
{
    reset();
    atomic_store(&behind_flag, true);
    behind_from = 20;
    item *its = queue_items(40, true);
    CHECK(wait_count(test_loop, &afters_done, 40, 30000));
    int early = 0;
    for (int i = POOL; i < 20; i++)
        early += its[i].afters_at_start < i - POOL + 1;
    CHECK(early > 0);
    for (int i = 20; i < 40; i++)
        CHECK(its[i].afters_at_start >= i - POOL + 1);
    free(its);

    reset();
    behind_from = 0;
    its = queue_items(40, false); /* the first jobs wait for go, the rest for them */
    behind_from = 1 << 30;
    atomic_store(&behind_flag, false);
    atomic_store(&go, 1);
    CHECK(wait_count(test_loop, &afters_done, 40, 30000));
    early = 0;
    for (int i = POOL; i < 40; i++)
        early += its[i].afters_at_start < i - POOL + 1;
    CHECK(early > 0);
    free(its);
}

/* An after_work that frees its request and queues another one. */
static void after_free_requeue(uv_work_t *w, int status);

static void queue_one(void)
{
    item *it = calloc(1, sizeof *it);
    it->w.data = it;
    pc_decode_queue_work(test_loop, &it->w, work, after_free_requeue, NULL);
}

static void after_free_requeue(uv_work_t *w, int status)
{
    item *it = w->data;
    CHECK_EQ_INT(status, 0);
    CHECK_EQ_INT(atomic_load(&it->ran), 1);
    free(it);
    afters_done++;
    atomic_fetch_add(&total_afters, 1);
    if (requeue_left > 0) {
        requeue_left--;
        queue_one();
    }
}

static void test_after_frees_and_requeues(void)
{
    reset();
    atomic_store(&go, 1);
    requeue_left = 100;
    for (int i = 0; i < 20; i++)
        queue_one();
    CHECK(wait_count(test_loop, &afters_done, 120, 30000));
    CHECK_EQ_INT(requeue_left, 0);
}

int main(void)
{
    setenv("UV_THREADPOOL_SIZE", "2", 1); /* before the pool starts: the gate reads it too */
    uv_loop_t storage;
    test_loop = test_loop_open(&storage);
    RUN(test_every_item_once);
    RUN(test_chains);
    RUN(test_afters_not_held);
    RUN(test_outside_work_not_starved);
    RUN(test_beside_work_stops_chaining);
    RUN(test_behind_not_chained);
    RUN(test_after_frees_and_requeues);
    return test_loop_close(test_loop);
}
