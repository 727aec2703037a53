/* The processor core (ARCHITECTURE.md §9), as the Collector's processorhelper: a processor
 * writes what it does to one batch; the core runs it on the thread pool (payload-sized work
 * never runs on the loop, §4), counts it in flight, then forwards the batch, its replacement
 * (copy-on-write, a new batch) or nothing (dropped on purpose and answered PC_OK, as the
 * Collector's ErrSkipProcessingData), or refuses it with a code; shutdown waits for the jobs in
 * flight. No processor calls uv_queue_work itself. */
#ifndef PC_SDK_PROCESSOR_H
#define PC_SDK_PROCESSOR_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "sdk/component.h"
#include "sdk/telemetry.h"

/* Per processor instance: the jobs in flight and the shutdown waiting for them. */
typedef struct pc_proc_core {
    size_t inflight;          /* jobs queued and not yet answered */
    pc_shutdown_done on_down; /* shutdown waiting for inflight to reach 0 */
} pc_proc_core;

typedef struct pc_proc_job pc_proc_job;
struct pc_proc_job {
    uv_work_t work;
    pc_component *c;
    pc_proc_core *core;
    /* the job's reference: run may replace it (pc_batch_make_writable, or a new batch) */
    pc_batch *b;
    pc_done_fn done;
    void *arg;
    bool drop;       /* run: nothing to pass on (everything filtered on purpose): answered PC_OK */
    int refuse;      /* run: a PC_E* code to answer instead of forwarding */
    const char *why; /* with refuse: the detail (static or the job's own) */
    void (*run)(pc_proc_job *j);   /* thread pool: the payload-sized work */
    void (*after)(pc_proc_job *j); /* loop thread, optional: fold the job's stats into counters */
};

/* Queue j (malloc'd, with pc_proc_job as its first member; run, c, core, b, done and arg set):
 * counted in flight, run on the pool, then answered as it says and freed. */
void pc_proc_job_submit(pc_proc_job *j);

/* Work of a processor that is not one batch in, one out (batch's merge of what it holds): the
 * caller's struct starts with a pc_proc_work (c, core, run and after set); run on the pool, then
 * after on the loop (which may free it), counted in flight like a job. */
typedef struct pc_proc_work pc_proc_work;
struct pc_proc_work {
    uv_work_t work;
    pc_component *c;
    pc_proc_core *core;
    void (*run)(pc_proc_work *w);
    void (*after)(pc_proc_work *w);
};
void pc_proc_work_submit(pc_proc_work *w);

/* Shutdown: done once every job in flight has been answered. */
void pc_proc_core_shutdown(pc_proc_core *core, pc_component *c, pc_shutdown_done done);

/* ---- counters ---- */

/* What a processor counted so far, for self-metrics and tests; read on the loop thread. */
typedef struct pc_proc_counter {
    const char *name;
    uint64_t value;
} pc_proc_counter;

size_t pc_proc_counters_copy(const pc_proc_counter *all, size_t n, pc_proc_counter *out,
                             size_t max);
/* The value of one named counter (0 if absent). */
uint64_t pc_proc_counter_get(const pc_proc_counter *v, size_t n, const char *name);

/* Register one of c's counters as a self-metric, labelled processor (its id in the config) and
 * pipeline; the service unregisters what c owns before c's destroy. */
void pc_proc_metric(pc_component *c, const char *name, const char *help, const uint64_t *value);
/* Those labels, for a processor's other metrics (histograms, gauges). */
void pc_proc_labels(const pc_component *c, char *labels, size_t cap);

#endif
