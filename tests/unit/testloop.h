/* Running a test's uv loop until something happened, for unit tests whose servers, clients and
 * components share one loop: wait_until(loop, pred, arg, ms) with a few ready predicates, a
 * monotonic clock, and the start and end every networked test's main() has. */
#ifndef PC_TESTLOOP_H
#define PC_TESTLOOP_H

#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <uv.h>

#include "base/log.h"
#include "check.h"

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct tl_waiter {
    int (*pred)(void *);
    void *arg;
    double deadline;
} tl_waiter;

static inline void tl_wait_tick(uv_timer_t *t)
{
    tl_waiter *w = t->data;
    if (w->pred(w->arg) || now_ms() > w->deadline) uv_stop(t->loop);
}

/* Run loop until pred(arg) holds or ms pass; returns whether pred holds. A 2 ms timer looks, so
 * a predicate set from another thread is seen too. */
static inline int wait_until(uv_loop_t *loop, int (*pred)(void *), void *arg, unsigned ms)
{
    tl_waiter w = {pred, arg, now_ms() + ms};
    uv_timer_t t;
    uv_timer_init(loop, &t);
    t.data = &w;
    uv_timer_start(&t, tl_wait_tick, 2, 2);
    if (!pred(arg)) uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return pred(arg);
}

/* Predicates and setters: an atomic_int flag (set from any thread), a plain int (loop thread). */
static inline int flag_set(void *p)
{
    return atomic_load((atomic_int *)p) != 0;
}

static inline void set_flag(void *p)
{
    atomic_store((atomic_int *)p, 1);
}

static inline int int_set(void *p)
{
    return *(int *)p != 0;
}

static inline void set_int(void *p)
{
    *(int *)p = 1;
}

typedef struct tl_count {
    const int *count;
    int want;
} tl_count;

static inline int tl_count_reached(void *p)
{
    const tl_count *c = p;
    return *c->count >= c->want;
}

/* Run loop until *count reaches want or ms pass; returns whether it did. */
static inline int wait_count(uv_loop_t *loop, const int *count, int want, unsigned ms)
{
    tl_count c = {count, want};
    return wait_until(loop, tl_count_reached, &c, ms);
}

/* The start of a networked test: writes to a closed peer are errors, not SIGPIPE; only errors
 * are logged; a loop of its own. */
static inline uv_loop_t *test_loop_open(uv_loop_t *storage)
{
    signal(SIGPIPE, SIG_IGN);
    pc_log_set_level(PC_LOG_ERROR);
    uv_loop_init(storage);
    return storage;
}

/* The end: run what is left, then every handle must have been closed. */
static inline int test_loop_close(uv_loop_t *loop)
{
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(loop), 0);
    return check_report();
}

#endif
