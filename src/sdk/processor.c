/* The processor core (sdk/processor.h). */
#include "sdk/processor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/pool.h"

/* After a job's answer: the shutdown waiting for the last one goes on. */
static void job_left(pc_proc_core *core, pc_component *c)
{
    if (core->inflight == 0 && core->on_down) {
        pc_shutdown_done down = core->on_down;
        core->on_down = NULL;
        down(c);
    }
}

static void job_work(uv_work_t *w)
{
    pc_proc_job *j = w->data;
    j->run(j);
}

static void job_after(uv_work_t *w, int status)
{
    pc_proc_job *j = w->data;
    (void)status; /* a cancelled job (loop closing) still answers for its batch */
    pc_component *c = j->c;
    pc_proc_core *core = j->core;
    if (j->after) j->after(j);
    if (j->refuse || j->drop) {
        pc_batch_unref(j->b);
        j->done(j->arg, j->refuse, j->refuse ? j->why : NULL);
    } else {
        pc_consume(c->next, j->b, j->done, j->arg);
    }
    free(j); /* j is the first member of the processor's job struct */
    core->inflight--;
    job_left(core, c);
}

void pc_proc_job_submit(pc_proc_job *j)
{
    j->core->inflight++;
    j->work.data = j;
    pc_pool_queue_work(j->c->loop, &j->work, job_work, job_after);
}

static void work_run(uv_work_t *uw)
{
    pc_proc_work *w = uw->data;
    w->run(w);
}

static void work_after(uv_work_t *uw, int status)
{
    pc_proc_work *w = uw->data;
    pc_proc_core *core = w->core;
    pc_component *c = w->c;
    (void)status;
    core->inflight--; /* before after, which may look (batch's shutdown waits for none left) */
    w->after(w);      /* may free w */
    job_left(core, c);
}

void pc_proc_work_submit(pc_proc_work *w)
{
    w->core->inflight++;
    w->work.data = w;
    pc_pool_queue_work(w->c->loop, &w->work, work_run, work_after);
}

void pc_proc_core_shutdown(pc_proc_core *core, pc_component *c, pc_shutdown_done done)
{
    if (core->inflight == 0)
        done(c);
    else
        core->on_down = done;
}

size_t pc_proc_counters_copy(const pc_proc_counter *all, size_t n, pc_proc_counter *out, size_t max)
{
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = all[i];
    return n;
}

uint64_t pc_proc_counter_get(const pc_proc_counter *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0) return v[i].value;
    return 0;
}

void pc_proc_labels(const pc_component *c, char *labels, size_t cap)
{
    /* the service shows a processor as "name in pipeline" (one instance per pipeline) */
    const char *in = strstr(c->id, " in ");
    int n = in ? (int)(in - c->id) : (int)strlen(c->id);
    if (in)
        snprintf(labels, cap, "processor=\"%.*s\",pipeline=\"%s\"", n, c->id, in + 4);
    else
        snprintf(labels, cap, "processor=\"%s\"", c->id);
}

void pc_proc_metric(pc_component *c, const char *name, const char *help, const uint64_t *value)
{
    char labels[300];
    pc_proc_labels(c, labels, sizeof labels);
    pc_metric_u64(c, name, help, PC_METRIC_COUNTER, labels, value);
}
