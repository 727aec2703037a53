/* Fan-out: one batch to several consumers, shared by reference; done fires once all are done. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/consumer.h"
#include "base/alloc.h"

typedef struct fanout {
    pc_consumer base;
    size_t n;
    pc_consumer **targets;
} fanout;

static void fanout_consume(pc_consumer *self, pc_batch *b, pc_done_fn done, void *arg)
{
    fanout *f = (fanout *)self;
    pc_join *j = pc_join_new(done, arg);
    for (size_t i = 0; i < f->n; i++) {
        pc_join_add(j);
        pc_consume(f->targets[i], pc_batch_ref(b), pc_join_done, j);
    }
    pc_batch_unref(b);
    pc_join_done(j, PC_OK, NULL);
}

/* Full when any target is: the request would be refused as a whole. */
/* Every target takes the batch: the worst reason to refuse and the least room among them. */
static pc_admit fanout_admit(pc_consumer *self, size_t *room)
{
    fanout *f = (fanout *)self;
    pc_admit worst = PC_ADMIT_OK;
    for (size_t i = 0; i < f->n; i++) {
        pc_admit a = pc_consumer_admit(f->targets[i], room);
        if (a > worst) worst = a;
    }
    return worst;
}

/* Durable when every target is (each is asked, so each queue learns the batch size). */
static bool fanout_durable(pc_consumer *self, size_t batch_size)
{
    fanout *f = (fanout *)self;
    bool all = f->n > 0;
    for (size_t i = 0; i < f->n; i++)
        all &= pc_consumer_durable(f->targets[i], batch_size);
    return all;
}

pc_consumer *pc_fanout_new(pc_consumer **targets, size_t n)
{
    fanout *f = pc_xcalloc(1, sizeof(*f));
    f->base.consume = fanout_consume;
    f->base.admit = fanout_admit;
    f->base.durable = fanout_durable;
    f->n = n;
    f->targets = pc_xcalloc(n, sizeof(pc_consumer *));
    memcpy(f->targets, targets, n * sizeof(pc_consumer *));
    f->base.wire_ok = n > 0;
    for (size_t i = 0; i < n; i++) {
        f->base.mutates |= targets[i]->mutates;
        f->base.wire_ok &= targets[i]->wire_ok;
    }
    return &f->base;
}

void pc_fanout_free(pc_consumer *c)
{
    fanout *f = (fanout *)c;
    if (!f) return;
    free(f->targets);
    free(f);
}
