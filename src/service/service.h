/* The service: builds components and pipelines from a config tree, starts and stops them, and
 * swaps to a new config on SIGHUP restarting only what changed. */
#ifndef PC_SERVICE_H
#define PC_SERVICE_H

#include <stdbool.h>
#include <uv.h>

#include "pdata/pdata.h"
#include "sdk/config.h"

typedef struct pc_service pc_service;

/* Validate the whole config and create every component used by a pipeline (no sockets yet).
 * Takes ownership of root. NULL with every error found in err (give it a list:
 * PC_ERROR_WITH_ISSUES; without one, err must hold no error yet). */
pc_service *pc_service_new(uv_loop_t *loop, pc_node *root, pc_error *err);
/* Start exporters, processors, then receivers. 0, or the failing component's code with its
 * message in e, led by its key path (e.g. a port in use). */
int pc_service_start(pc_service *s, pc_error *e);
/* Stop receivers (in-flight requests finish), then flush processors in pipeline order, then drain
 * exporters; then call done. */
void pc_service_shutdown(pc_service *s, void (*done)(void *arg), void *arg);
void pc_service_free(pc_service *s);

/* A reload (SIGHUP): a service for root (owned) that will take over the components of running
 * whose config, pipeline membership and authenticator extensions are unchanged (and the
 * processors of pipelines whose processors and exporters are all unchanged). Nothing of running
 * is touched; NULL with every error in err. */
pc_service *pc_service_new_reload(pc_service *running, pc_node *root, pc_error *err);
/* False when next would keep every component and setting of running (nothing to do). */
bool pc_service_reload_changes(const pc_service *running, const pc_service *next);
/* Switch from running to next (from pc_service_new_reload): stop running's changed receivers and
 * extensions, start next's new components, re-route the receivers kept (their sockets and
 * connections stay), then drain running's changed processors and exporters once their in-flight
 * requests are answered (a replaced exporter with a persistent queue leaves it on disk for its
 * successor, which starts after). Logs what restarts. cb reports PC_RELOAD_RUNNING (next serves;
 * it may be shut down from now on) or PC_RELOAD_FAILED with why (a new component could not start:
 * the caller stops next, as the Collector exits), then PC_RELOAD_COMPLETE once running is freed
 * (only then may another reload begin). */
typedef enum { PC_RELOAD_RUNNING, PC_RELOAD_FAILED, PC_RELOAD_COMPLETE } pc_reload_event;
typedef void (*pc_reload_cb)(void *arg, pc_reload_event ev, const char *msg);
void pc_service_reload(pc_service *running, pc_service *next, pc_reload_cb cb, void *arg);

/* The extension instance `id` listed in service.extensions, or NULL (components look up their
 * authenticator at start). */
struct pc_component *pc_service_extension(pc_service *s, const char *id);
/* The enabled authenticator extension `id`, usable on that side (server: receivers; client:
 * exporters); NULL with a reason naming auth::authenticator in e (PC_EINVAL). */
struct pc_auth *pc_service_authenticator(pc_service *s, const char *id, bool server, pc_error *e);

/* Status of the service and every component as JSON (like the Collector's health_check);
 * returns 1 when everything is running, 0 otherwise. */
int pc_service_status_json(const pc_service *s, pc_buf *out);

#endif
