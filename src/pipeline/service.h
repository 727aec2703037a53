/* The service: builds components and pipelines from a config tree, starts and stops them. */
#ifndef PC_SERVICE_H
#define PC_SERVICE_H

#include <uv.h>

#include "pdata/pdata.h"
#include "pipeline/config.h"

typedef struct pc_service pc_service;

/* Validate the whole config and create every component used by a pipeline (no sockets yet).
 * Takes ownership of root. NULL with err filled on any config error. */
pc_service *pc_service_new(uv_loop_t *loop, pc_node *root, pc_cfg_err *err);
/* Start exporters, processors, then receivers. -1 with err (e.g. a port in use). */
int pc_service_start(pc_service *s, char *err, size_t errlen);
/* Stop receivers (in-flight requests finish), then flush processors in pipeline order, then drain
 * exporters; then call done. */
void pc_service_shutdown(pc_service *s, void (*done)(void *arg), void *arg);
void pc_service_free(pc_service *s);

/* The extension instance `id` listed in service.extensions, or NULL (components look up their
 * authenticator at start). */
struct pc_component *pc_service_extension(pc_service *s, const char *id);

/* Status of the service and every component as JSON (like the Collector's health_check);
 * returns 1 when everything is running, 0 otherwise. */
int pc_service_status_json(const pc_service *s, pc_buf *out);

#endif
