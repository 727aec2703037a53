/* The service's status as JSON (health_check). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "service/internal.h"

static void status_list(pc_buf *out, const char *kind, pc_component *const *list, size_t n,
                        const char *status, int *first)
{
    for (size_t i = 0; i < n; i++) {
        if (!list[i]) continue;
        pc_buf_printf(out, "%s\"%s:%s\":{\"status\":\"%s\"}", *first ? "" : ",", kind, list[i]->id,
                      status);
        *first = 0;
    }
}

int pc_service_status_json(const pc_service *s, pc_buf *out)
{
    static const char *const names[] = {"StatusStarting", "StatusOK", "StatusStopping",
                                        "StatusPermanentError"};
    const char *st = names[s->state];
    pc_buf_printf(out, "{\"status\":\"%s\",\"healthy\":%s,\"components\":{", st,
                  s->state == SVC_READY ? "true" : "false");
    int first = 1;
    status_list(out, "receiver", s->receivers, s->n_receivers, st, &first);
    for (size_t p = 0; p < s->n_pipelines; p++)
        status_list(out, "processor", s->pipelines[p].processors, s->pipelines[p].n_processors, st,
                    &first);
    status_list(out, "exporter", s->exporters, s->n_exporters, st, &first);
    status_list(out, "connector", s->connectors, s->n_connectors, st, &first);
    status_list(out, "extension", s->extensions, s->n_extensions, st, &first);
    pc_buf_printf(out, "}}");
    return s->state == SVC_READY;
}
