/* Joining several consumers' outcomes (consumer.h). */
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "sdk/consumer.h"

struct pc_join {
    size_t pending;
    int st;
    char msg[256];
    pc_done_fn done;
    void *arg;
};

pc_join *pc_join_new(pc_done_fn done, void *arg)
{
    pc_join *j = pc_xcalloc(1, sizeof *j);
    j->pending = 1; /* the creator's hold */
    j->done = done;
    j->arg = arg;
    return j;
}

void pc_join_add(pc_join *j)
{
    j->pending++;
}

void pc_join_done(void *arg, int st, const char *msg)
{
    pc_join *j = arg;
    if (st != PC_OK && pc_err_worse(j->st, st) != j->st) {
        j->st = pc_err_worse(j->st, st);
        snprintf(j->msg, sizeof j->msg, "%s", msg ? msg : "");
    }
    if (--j->pending) return;
    j->done(j->arg, j->st, j->st == PC_OK ? NULL : j->msg);
    free(j);
}
