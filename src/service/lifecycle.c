/* Start (extensions, exporters, processors, then receivers) and shutdown in phases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "service/internal.h"

static bool is_kept(const pc_service *s, const pc_component *c)
{
    for (size_t i = 0; i < s->n_kept; i++)
        if (s->kept[i] == c) return true;
    return false;
}

static int start_one(pc_service *s, pc_component *c, const char *section, pc_error *e)
{
    if (!c || !svc_owned(s, c) || is_kept(s, c) || svc_is_waiting(s, c) || !c->type->start)
        return 0;
    int rc = c->type->start(c, e);
    if (rc < 0) {
        pc_error_prefix(e, "%s::%s: ", section, c->id);
        s->state = SVC_FAILED;
    }
    return rc;
}

int svc_start_inner(pc_service *s, pc_error *e)
{
    int rc;
    for (size_t i = 0; i < s->n_extensions; i++)
        if ((rc = start_one(s, s->extensions[i], "extensions", e)) < 0) return rc;
    for (size_t i = 0; i < s->n_exporters; i++)
        if ((rc = start_one(s, s->exporters[i], "exporters", e)) < 0) return rc;
    for (size_t i = 0; i < s->n_connectors; i++)
        if ((rc = start_one(s, s->connectors[i], "connectors", e)) < 0) return rc;
    for (size_t p = 0; p < s->n_pipelines; p++)
        for (size_t i = 0; i < s->pipelines[p].n_processors; i++)
            if ((rc = start_one(s, s->pipelines[p].processors[i], "processors", e)) < 0) return rc;
    return 0;
}

int svc_start_receivers(pc_service *s, pc_error *e)
{
    int rc;
    for (size_t i = 0; i < s->n_receivers; i++)
        if ((rc = start_one(s, s->receivers[i], "receivers", e)) < 0) return rc;
    return 0;
}

int svc_start_metrics(pc_service *s, pc_error *e)
{
    /* as otelcol: a metrics port that cannot be bound ends the start. Running on would leave a
     * scraper reading whatever else holds the port, and alerts silent (issue 28). */
    if (s->metrics_address && !s->metrics) {
        s->metrics = pc_metrics_server_start(s->loop, s->metrics_address, e);
        if (!s->metrics) {
            pc_error_prefix(e, "self-metrics on %s: ", s->metrics_address);
            return e->code ? e->code : PC_EIO;
        }
    }
    return 0;
}

int pc_service_start(pc_service *s, pc_error *e)
{
    svc_telemetry_use(s);
    int rc = svc_start_metrics(s, e);
    if (rc < 0) return rc;
    rc = svc_start_inner(s, e);
    if (rc < 0 || (rc = svc_start_receivers(s, e)) < 0) return rc;
    s->state = SVC_READY;
    PC_INFO(NULL, "everything is ready: %zu pipeline(s), %zu receiver(s), %zu exporter(s)",
            s->n_pipelines, s->n_receivers, s->n_exporters);
    return 0;
}

/* ---- shutdown ---- */

static void component_down(pc_component *c)
{
    pc_service *s =
        (pc_service *)c->host; /* the service stopping it: components report back by pointer */
    if (--s->pending == 0) s->cont(s);
}

void svc_metrics_stopped(void *arg)
{
    pc_service *s = arg;
    if (--s->pending == 0) s->cont(s);
}

void svc_shutdown_one(pc_service *s, pc_component *c)
{
    if (!c) return;
    s->pending++;
    if (c->type->shutdown)
        c->type->shutdown(c, component_down);
    else
        component_down(c);
}

void svc_shutdown_phase(pc_service *s)
{
    /* phase 0: receivers; 1..: processor stage k of every pipeline (a pipeline fed through a
     * connector after those feeding it); last: exporters and connectors */
    size_t max_procs = 0;
    for (size_t p = 0; p < s->n_pipelines; p++) {
        size_t end = s->pipelines[p].stage + s->pipelines[p].n_processors;
        if (end > max_procs) max_procs = end;
    }
    for (;;) {
        int phase = s->phase++;
        s->pending = 1; /* guard against synchronous completions */
        if (phase == 0) {
            for (size_t i = 0; i < s->n_receivers; i++)
                svc_shutdown_one(s, s->receivers[i]);
        } else if ((size_t)phase <= max_procs) {
            for (size_t p = 0; p < s->n_pipelines; p++) {
                pipeline *pl = &s->pipelines[p];
                size_t k = (size_t)phase - 1 - pl->stage; /* wraps when below its stage */
                if ((size_t)phase - 1 >= pl->stage && k < pl->n_processors)
                    svc_shutdown_one(s, pl->processors[k]);
            }
        } else if ((size_t)phase == max_procs + 1) {
            uint64_t now = uv_now(s->loop);
            for (size_t i = 0; i < s->n_exporters; i++) {
                /* a persistent queue handed to a successor is left on disk at once, any other
                 * one drains */
                if (s->exporters[i])
                    s->exporters[i]->drain_deadline_ms =
                        s->quick_handover[i] ? now : now + s->shutdown_timeout_ms;
                svc_shutdown_one(s, s->exporters[i]);
            }
            for (size_t i = 0; i < s->n_connectors; i++)
                svc_shutdown_one(s, s->connectors[i]);
        } else if ((size_t)phase == max_procs + 2) {
            for (size_t i = 0; i < s->n_extensions; i++)
                svc_shutdown_one(s, s->extensions[i]);
        } else if ((size_t)phase == max_procs + 3) {
            if (s->metrics) {
                s->pending++;
                pc_metrics_server_stop(s->metrics, svc_metrics_stopped, s);
                s->metrics = NULL;
            }
        } else {
            s->done(s->done_arg);
            return;
        }
        if (--s->pending) return; /* wait for component_down */
    }
}

void svc_drain_processors(pc_service *s)
{
    for (size_t p = 0; p < s->n_pipelines; p++)
        for (size_t i = 0; i < s->pipelines[p].n_processors; i++) {
            pc_component *c = s->pipelines[p].processors[i];
            if (c && c->type->drain) c->type->drain(c);
        }
}

void pc_service_shutdown(pc_service *s, void (*done)(void *arg), void *arg)
{
    s->done = done;
    s->done_arg = arg;
    s->phase = 0;
    s->cont = svc_shutdown_phase;
    if (s->state != SVC_FAILED) s->state = SVC_STOPPING;
    svc_drain_processors(s);
    uv_update_time(s->loop);
    PC_INFO(NULL, "shutting down");
    svc_shutdown_phase(s);
}
