/* The switch to a reloaded service (pc_service_reload): stop what holds a socket next wants,
 * take over what next keeps, start the rest, then drain and free the old service. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "service/internal.h"

bool pc_service_reload_changes(const pc_service *running, const pc_service *next)
{
    return !pc_node_equal(running->root, next->root);
}

typedef struct reload_job {
    pc_service *old, *next;
    uv_timer_t timer;
    uint64_t deadline;
    pc_reload_cb cb;
    void *arg;
} reload_job;

static void append_name(char *out, size_t n, const char *fmt, const char *a, const char *b)
{
    size_t len = strlen(out);
    if (len + 4 >= n) return;
    snprintf(out + len, n - len, "%s", len ? ", " : "");
    len = strlen(out);
    snprintf(out + len, n - len, fmt, a, b);
}

/* One line each for what restarts, what starts new and what stops. */
static void log_plan(pc_service *old, pc_service *next)
{
    char restart[1024] = "", stop[1024] = "", add[1024] = "";
    struct {
        const char *section;
        pc_component *const *a, *const *b;
        size_t na, nb;
    } kinds[] = {
        {"receivers", old->receivers, next->receivers, old->n_receivers, next->n_receivers},
        {"exporters", old->exporters, next->exporters, old->n_exporters, next->n_exporters},
        {"extensions", old->extensions, next->extensions, old->n_extensions, next->n_extensions},
        /* never kept (no state): one of an id the old config had too restarts */
        {"connectors", old->connectors, next->connectors, old->n_connectors, next->n_connectors},
    };
    for (size_t k = 0; k < N_OF(kinds); k++) {
        for (size_t i = 0; i < kinds[k].nb; i++) {
            pc_component *c = kinds[k].b[i];
            if (!svc_owned(next, c)) continue;
            append_name(svc_find_in(kinds[k].a, kinds[k].na, c->id) ? restart : add, sizeof restart,
                        "%s::%s", kinds[k].section, c->id);
        }
        for (size_t i = 0; i < kinds[k].na; i++) {
            pc_component *c = kinds[k].a[i];
            if (c && !svc_find_in(kinds[k].b, kinds[k].nb, c->id))
                append_name(stop, sizeof stop, "%s::%s", kinds[k].section, c->id);
        }
    }
    for (size_t p = 0; p < next->n_pipelines; p++)
        if (!next->pipelines[p].borrowed && next->pipelines[p].n_processors)
            append_name(svc_old_pipeline(old, next->pipelines[p].name) ? restart : add,
                        sizeof restart, "%s%s", "the processors of pipeline ",
                        next->pipelines[p].name);
    char reconf[1024] = "";
    for (size_t i = 0; i < next->n_reconf; i++)
        append_name(reconf, sizeof reconf, "%s::%s",
                    next->reconf[i]->type->kind == PC_KIND_RECEIVER ? "receivers" : "exporters",
                    next->reconf[i]->id);
    if (*reconf) PC_INFO(NULL, "reload: reconfiguring %s in place", reconf);
    if (*restart) PC_INFO(NULL, "reload: restarting %s", restart);
    if (*add) PC_INFO(NULL, "reload: starting %s", add);
    if (*stop) PC_INFO(NULL, "reload: stopping %s", stop);
    if (!*restart && !*add && !*stop && !*reconf) PC_INFO(NULL, "reload: no component changed");
}

static void keep(pc_service *next, pc_component *c)
{
    next->kept = pc_xrealloc(next->kept, (next->n_kept + 1) * sizeof(pc_component *));
    next->kept[next->n_kept++] = c;
    c->host = &next->host;
}

/* The running service's pieces next borrowed become next's: next's from now on. */
static void take_over(pc_service *old, pc_service *next)
{
    pc_component **svc_lists[] = {next->receivers, next->exporters, next->extensions};
    size_t ns[] = {next->n_receivers, next->n_exporters, next->n_extensions};
    pc_component **olists[] = {old->receivers, old->exporters, old->extensions};
    size_t ons[] = {old->n_receivers, old->n_exporters, old->n_extensions};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < ns[k]; i++) {
            pc_component *c = svc_lists[k][i];
            if (!svc_owned(old, c)) continue;
            for (size_t j = 0; j < ons[k]; j++)
                if (olists[k][j] == c) olists[k][j] = NULL;
            keep(next, c);
        }
    for (size_t p = 0; p < next->n_pipelines; p++) {
        pipeline *pl = &next->pipelines[p];
        if (!pl->borrowed) continue;
        pipeline *op = svc_old_pipeline(old, pl->name);
        for (size_t i = 0; i < op->n_processors; i++) {
            if (op->processors[i]) keep(next, op->processors[i]);
            op->processors[i] = NULL;
        }
        op->exporters_fanout = NULL;
        op->entry = NULL;
        op->built = false;
        pl->entry->svc = next;
        pl->borrowed = false;
    }
    if (old->metrics && next->metrics_address && old->metrics_address &&
        !strcmp(old->metrics_address, next->metrics_address)) {
        next->metrics = old->metrics;
        old->metrics = NULL;
    }
    for (size_t i = 0; i < next->n_reconf; i++) { /* kept, with settings applied in place */
        pc_component *c = next->reconf[i];
        c->type->reconfigure(c, next->reconf_cfg[i]);
        pc_cfgtable_free(c->type->cfg, next->reconf_cfg[i]);
        free(next->reconf_cfg[i]);
    }
    next->n_reconf = 0;
    next->from = NULL;
}

static void timer_closed(uv_handle_t *h)
{
    free(h->data);
}

static void reload_free_old(uv_timer_t *t)
{
    reload_job *j = t->data;
    if (j->old->in_flight) return; /* a late answer still refers to it */
    uv_timer_stop(t);
    pc_service_free(j->old);
    PC_INFO(NULL, "reload: complete");
    j->cb(j->arg, PC_RELOAD_COMPLETE, NULL);
    uv_close((uv_handle_t *)t, timer_closed);
}

static void old_stopped(void *arg)
{
    reload_job *j = arg;
    pc_service *next = j->next;
    pc_error e = {0};
    /* exporters that waited for their predecessor's persistent queue start now */
    while (next->state == SVC_READY && next->n_waiting) {
        pc_component *c = next->waiting[0];
        if (c->type->start && c->type->start(c, &e) < 0) {
            pc_error_prefix(&e, "exporters::%s: ", c->id);
            next->state = SVC_FAILED;
            j->cb(j->arg, PC_RELOAD_FAILED, e.msg);
            break;
        }
        memmove(next->waiting, next->waiting + 1, --next->n_waiting * sizeof(pc_component *));
    }
    /* free the old service once nothing refers to it */
    uv_timer_start(&j->timer, reload_free_old, 0, 20);
}

/* The old service's remaining processors and exporters stop once the requests that entered
 * them were answered (or shutdown_timeout passed). */
static void wait_old_quiet(uv_timer_t *t)
{
    reload_job *j = t->data;
    pc_service *old = j->old;
    if (old->in_flight && uv_now(old->loop) < j->deadline) return;
    uv_timer_stop(t);
    old->done = old_stopped;
    old->done_arg = j;
    old->phase = 1; /* its receivers stopped (or moved) already */
    old->cont = svc_shutdown_phase;
    old->state = SVC_STOPPING;
    svc_shutdown_phase(old);
}

static void old_front_stopped(pc_service *old)
{
    reload_job *j = old->done_arg;
    pc_service *next = j->next;
    pc_error e = {0};
    take_over(old, next);
    svc_telemetry_use(next);
    int rc = svc_start_metrics(next, &e);
    if (!rc) rc = svc_start_inner(next, &e);
    if (!rc) {
        /* the receivers kept switch to next's pipelines: their sockets stay open */
        for (size_t r = 0; r < next->n_receivers; r++) {
            pc_component *c = next->receivers[r];
            memcpy(c->route, next->routes[r], sizeof c->route);
            c->next = c->route[PC_SIGNAL_PROFILES];
        }
        rc = svc_start_receivers(next, &e);
    }
    if (rc < 0) {
        next->state = SVC_FAILED;
        j->cb(j->arg, PC_RELOAD_FAILED, e.msg);
    } else {
        next->state = SVC_READY;
        PC_INFO(NULL,
                "reload: running the new config: %zu pipeline(s), %zu receiver(s), %zu "
                "exporter(s)",
                next->n_pipelines, next->n_receivers, next->n_exporters);
        j->cb(j->arg, PC_RELOAD_RUNNING, NULL);
    }
    /* what only the old service still has: flush its processors, then drain its exporters */
    svc_drain_processors(old);
    j->deadline = uv_now(old->loop) + next->shutdown_timeout_ms;
    uv_timer_start(&j->timer, wait_old_quiet, 0, 20);
}

void pc_service_reload(pc_service *old, pc_service *next, pc_reload_cb cb, void *arg)
{
    reload_job *j = pc_xcalloc(1, sizeof *j);
    j->old = old;
    j->next = next;
    j->cb = cb;
    j->arg = arg;
    uv_timer_init(old->loop, &j->timer);
    j->timer.data = j;
    log_plan(old, next);
    for (size_t i = 0; i < old->n_exporters; i++)
        old->quick_handover[i] =
            old->exporters[i] && svc_find_in(next->waiting, next->n_waiting, old->exporters[i]->id);
    /* first stop what holds a socket next may want: receivers, extensions and listening
     * exporters not kept, and the metrics endpoint when it moves */
    old->done_arg = j;
    old->cont = old_front_stopped;
    old->pending = 1;
    size_t nr = old->n_receivers, ne = old->n_extensions;
    for (size_t i = 0; i < nr + ne + old->n_exporters; i++) {
        pc_component **slot = i < nr        ? &old->receivers[i]
                              : i < nr + ne ? &old->extensions[i - nr]
                                            : &old->exporters[i - nr - ne];
        pc_component *c = *slot;
        if (!c || (i < nr && svc_find_in(next->receivers, next->n_receivers, c->id) == c) ||
            (i >= nr && i < nr + ne &&
             svc_find_in(next->extensions, next->n_extensions, c->id) == c) ||
            (i >= nr + ne &&
             (!c->type->listens || svc_find_in(next->exporters, next->n_exporters, c->id) == c)))
            continue;
        *slot = NULL;
        old->retired[old->n_retired++] = c;
        svc_shutdown_one(old, c);
    }
    if (old->metrics && (!next->metrics_address || !old->metrics_address ||
                         strcmp(old->metrics_address, next->metrics_address) != 0)) {
        old->pending++;
        pc_metrics_server_stop(old->metrics, svc_metrics_stopped, old);
        old->metrics = NULL;
    }
    if (--old->pending == 0) old_front_stopped(old);
}
