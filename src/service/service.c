/* The service object (ARCHITECTURE.md §2): receivers and exporters are one instance per id shared
 * by every pipeline that lists them; processors are instantiated per pipeline. Validation looks
 * at the whole config and reports every error it finds. A reload builds a second service that
 * borrows the running one's unchanged components, then switches over (reload.c). The other
 * concerns have their files (internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "sdk/auth.h"
#include "service/internal.h"

static pc_component *host_extension(pc_host *h, const char *id)
{
    return pc_service_extension((pc_service *)h, id);
}

static pc_auth *host_authenticator(pc_host *h, const char *id, bool server, pc_error *e)
{
    return pc_service_authenticator((pc_service *)h, id, server, e);
}

static int host_status_json(const pc_host *h, pc_buf *out)
{
    return pc_service_status_json((const pc_service *)h, out);
}

static const pc_host_ops host_ops = {host_extension, host_authenticator, host_status_json};

static pc_service *service_build(uv_loop_t *loop, pc_node *root, pc_service *from, pc_error *err)
{
    pc_service *s = pc_xcalloc(1, sizeof(*s));
    s->host.ops = &host_ops;
    s->loop = loop;
    s->root = root;
    s->from = from;
    s->shutdown_timeout_ms = 30000;
    pc_error none = {0};
    if (!err) err = &none;
    size_t before = pc_error_count(err);
    /* every check runs; building instances only happens on a config without errors so far */
    svc_check_sections(s, err);
    svc_telemetry_apply(s, err);
    svc_validate_section(s, "receivers", PC_KIND_RECEIVER, err);
    svc_validate_section(s, "processors", PC_KIND_PROCESSOR, err);
    svc_validate_section(s, "exporters", PC_KIND_EXPORTER, err);
    svc_validate_section(s, "connectors", PC_KIND_CONNECTOR, err);
    svc_validate_section(s, "extensions", PC_KIND_EXTENSION, err);
    /* extensions first: a profiles pipeline's fan-out takes the taps of the enabled ones */
    bool dry = pc_error_count(err) != before;
    svc_build_extensions(s, dry, err);
    dry = pc_error_count(err) != before;
    svc_build_pipelines(s, dry, err);
    if (pc_error_count(err) == before) svc_check_authenticators(s, err);
    if (pc_error_count(err) != before) {
        pc_service_free(s);
        return NULL;
    }
    return s;
}

pc_service *pc_service_new(uv_loop_t *loop, pc_node *root, pc_error *err)
{
    pc_service *s = service_build(loop, root, NULL, err);
    if (s) svc_telemetry_use(s); /* at once: start-up lines already follow the configured level */
    return s;
}

pc_service *pc_service_new_reload(pc_service *running, pc_node *root, pc_error *err)
{
    return service_build(running->loop, root, running, err);
}

void pc_service_free(pc_service *s)
{
    if (!s) return;
    svc_free_connectors(s); /* before the pipelines: their routers name them */
    for (size_t i = 0; i < s->n_receivers; i++) {
        if (svc_owned(s, s->receivers[i])) svc_component_free(s->receivers[i]);
        for (int sig = 0; sig < PC_SIGNAL_COUNT; sig++)
            pc_fanout_free(s->receiver_fanouts[i][sig]);
    }
    for (size_t p = 0; p < s->n_pipelines; p++) {
        pipeline *pl = &s->pipelines[p];
        if (!pl->borrowed) {
            for (size_t i = 0; i < pl->n_processors; i++)
                if (svc_owned(s, pl->processors[i])) svc_component_free(pl->processors[i]);
            pc_fanout_free(pl->exporters_fanout);
            free(pl->entry);
        }
        free(pl->processors);
        free(pl->name);
    }
    free(s->pipelines);
    for (size_t i = 0; i < s->n_exporters; i++)
        if (svc_owned(s, s->exporters[i])) svc_component_free(s->exporters[i]);
    for (size_t i = 0; i < s->n_extensions; i++)
        if (svc_owned(s, s->extensions[i])) svc_component_free(s->extensions[i]);
    for (size_t i = 0; i < s->n_retired; i++)
        svc_component_free(s->retired[i]);
    for (size_t i = 0; i < s->n_reconf; i++) { /* a reload that never switched */
        pc_cfgtable_free(s->reconf[i]->type->cfg, s->reconf_cfg[i]);
        free(s->reconf_cfg[i]);
    }
    pc_node_free(s->root);
    free(s->metrics_address);
    free(s->kept);
    free(s);
}
