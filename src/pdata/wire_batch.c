/* Batches that hold a request's bytes and decode their model only when asked (pdata.h,
 * pc_batch_new_wire; ARCHITECTURE.md §2, pass-through). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pdata/pdata.h"
#include "base/alloc.h"
#include "base/budget.h"
#include "base/log.h"

struct pc_batch_wire {
    pthread_mutex_t lock;
    const uint8_t *data; /* the protobuf request, uncompressed, in the batch's arena */
    size_t len;
    size_t samples, profiles;
    size_t max_decoded;
    pc_batch *model; /* the decode's own batch, whose arena holds the model */
};

pc_batch *pc_batch_new_wire(const uint8_t *data, size_t len, size_t samples, size_t profiles,
                            size_t max_decoded)
{
    pc_batch *b = pc_batch_wrap(pc_arena_new(len + 256), PC_SIGNAL_PROFILES);
    struct pc_batch_wire *w = pc_xcalloc(1, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
    w->data = pc_arena_memdup(b->arena, data, len);
    w->len = len;
    w->samples = samples;
    w->profiles = profiles;
    w->max_decoded = max_decoded;
    b->wire = w;
    atomic_store_explicit(&b->lazy, true, memory_order_release);
    return b;
}

const uint8_t *pc_batch_wire_bytes(const pc_batch *b, size_t *len)
{
    if (!b->wire) return NULL;
    *len = b->wire->len;
    return b->wire->data;
}

bool pc_batch_wire_counts(const pc_batch *b, size_t *samples, size_t *profiles)
{
    if (!b->wire) return false;
    *samples = b->wire->samples;
    *profiles = b->wire->profiles;
    return true;
}

/* The decode the receiver skipped, within the same limit (docs/limits.md): reserved before it
 * allocates, so it counts among the decodes in flight the memory limiter sees. */
static pc_batch *decode_model(const struct pc_batch_wire *w)
{
    pc_budget budget;
    pc_budget_init(&budget, w->max_decoded);
    pc_batch *m = NULL;
    pc_error e = {0};
    int rc = pc_batch_decode(PC_SIGNAL_PROFILES, w->len ? w->data : (const uint8_t *)"", w->len,
                             false, &budget, &m, &e);
    pc_batch_end_budget(m);
    pc_budget_release(&budget);
    if (rc < 0 || !m) {
        /* cannot happen for bytes pc_wire_check_profiles accepted; never crash on it anyway */
        PC_ERROR(NULL, "decoding a checked request failed (%s): an empty request stands in", e.msg);
        pc_batch_unref(m);
        m = pc_batch_new();
    }
    return m;
}

pc_request *pc_batch_req_decode(const pc_batch *cb)
{
    pc_batch *b = (pc_batch *)cb; /* the model is a cache of the bytes: filling it is no change */
    struct pc_batch_wire *w = b->wire;
    pthread_mutex_lock(&w->lock);
    if (atomic_load_explicit(&b->lazy, memory_order_acquire)) {
        w->model = decode_model(w);
        b->req = w->model->req;
        atomic_store_explicit(&b->lazy, false, memory_order_release);
    }
    pthread_mutex_unlock(&w->lock);
    return b->req;
}

void pc_batch_wire_free(pc_batch *b)
{
    struct pc_batch_wire *w = b->wire;
    if (!w) return;
    pc_batch_unref(w->model);
    pthread_mutex_destroy(&w->lock);
    free(w);
    b->wire = NULL;
}
