/* The service's own header, shared by its files and included by nothing else (no component
 * includes service/): the service and pipeline structs, and what one file of the service calls
 * in another. The files, by concern:
 *   service.c    the service object: creating it (validate, then build), freeing it
 *   graph.c      building the graph: extensions, pipelines, receivers' routes
 *   connect.c    connectors in the graph: their checks, instances and routers
 *   plan.c       what a reload keeps of the running service
 *   reload.c     the switch from the running service to the reloaded one
 *   lifecycle.c  start and shutdown
 *   telemetry.c  service::telemetry
 *   status.c     the status JSON
 *   instance.c   component instances and the consumers wrapping them
 *   cfgcheck.c   reading the config's own sections: key paths, unknown keys
 * Each calls only files listed below it (no circle): service.c and reload.c on top, instance.c
 * and cfgcheck.c at the bottom. */
#ifndef PC_SERVICE_INTERNAL_H
#define PC_SERVICE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/log.h"
#include "sdk/cfgtable.h"
#include "sdk/component.h"
#include "sdk/telemetry.h"
#include "service/service.h"

#define MAX_COMPONENTS 256

/* Where receivers hand data to a pipeline: counts the requests the pipeline has not answered
 * yet, so a service being replaced is freed only once nothing of it is in use. */
typedef struct pipe_entry {
    pc_consumer base;
    pc_consumer *next;
    pc_service *svc;
} pipe_entry;

typedef struct pipeline {
    char *name; /* "profiles" or "profiles/x", "traces", ... */
    pc_signal signal;
    pc_component **processors; /* own instances */
    size_t n_processors;
    pc_consumer *exporters_fanout; /* NULL when a single exporter */
    pc_consumer *first;            /* the first processor (or the exporters) */
    pipe_entry *entry;             /* what receivers call: counts, then first */
    bool borrowed;                 /* processors, fan-out and entry belong to `from` until the
                                      switch (an unchanged pipeline of a reload) */
    bool built;
    size_t stage; /* shutdown: phases before its first processor's (after every pipeline that
                     feeds it through a connector: upstream flushes reach it still running) */
} pipeline;

struct pc_service {
    pc_host host; /* first: what components see of the service (sdk/component.h) */
    uv_loop_t *loop;
    pc_node *root;
    pc_component *receivers[MAX_COMPONENTS], *exporters[MAX_COMPONENTS];
    pc_component *extensions[MAX_COMPONENTS];
    size_t n_receivers, n_exporters, n_extensions;
    /* connector nodes: one per (exporter signal, receiver signal, id); never kept by a reload
     * (they hold no state), their routers name this service's pipelines */
    pc_component *connectors[MAX_COMPONENTS];
    pc_router routers[MAX_COMPONENTS];
    const char *conn_ids[MAX_COMPONENTS]; /* keys of root's connectors section */
    size_t n_connectors;
    enum { SVC_STARTING, SVC_READY, SVC_STOPPING, SVC_FAILED } state;
    pipeline *pipelines;
    size_t n_pipelines;
    pc_consumer *receiver_fanouts[MAX_COMPONENTS][PC_SIGNAL_COUNT];
    pc_consumer *routes[MAX_COMPONENTS][PC_SIGNAL_COUNT]; /* per receiver, applied at start */
    char *metrics_address;                                /* NULL: metrics not served */
    uint64_t shutdown_timeout_ms;
    pc_log_level log_level;
    bool log_level_set, log_json;
    pc_metrics_server *metrics;
    /* reload */
    pc_service *from; /* the running service this one borrows from */
    /* stopped early by a reload (receivers, extensions, listening exporters), freed with it */
    pc_component *retired[3 * MAX_COMPONENTS];
    size_t n_retired;
    pc_component *waiting[MAX_COMPONENTS]; /* exporters that start once their predecessor left
                                              its persistent queue; they refuse data until then */
    size_t n_waiting;
    bool quick_handover[MAX_COMPONENTS]; /* per exporter: leave the persistent queue on disk */
    size_t in_flight;                    /* requests inside this service's pipelines */
    pc_component **kept;                 /* taken over at the switch: running already */
    size_t n_kept;
    /* kept instances whose new definition they apply in place at the switch (reconfigure) */
    pc_component *reconf[MAX_COMPONENTS];
    void *reconf_cfg[MAX_COMPONENTS];
    size_t n_reconf;
    /* shutdown state */
    size_t pending;
    int phase;
    void (*cont)(pc_service *s); /* what runs once pending reaches 0 */
    void (*done)(void *);
    void *done_arg;
};
#define N_OF(a) (sizeof(a) / sizeof(a)[0])

/* ---- instance.c ---- */

/* c is one of the exporters that start once their predecessor left its persistent queue. */
bool svc_is_waiting(const pc_service *s, const pc_component *c);
/* c is s's own (not borrowed from the running service). */
bool svc_owned(const pc_service *s, const pc_component *c);
/* Split "type/name" and look the type up (errors with a "did you mean"). */
const pc_component_type *svc_lookup_type(pc_kind kind, const char *id, const pc_node *at,
                                         const char *path, pc_error *err);
/* Parse and validate one component's config; create the instance (NULL with errors in err). */
pc_component *svc_component_new(pc_service *s, pc_kind kind, const char *id, const pc_node *node,
                                const char *path, const char *log_id, pc_error *err);
void svc_component_free(pc_component *c);
/* A component's admission (its consumer's admit): its type's verdict, then, unless that refuses,
 * what follows it (a processor's next, a connector's pipelines); the worse of the two. */
pc_admit svc_component_admit(pc_consumer *self, size_t *room);
/* What receivers call for a pipeline: counts its requests in s->in_flight, then next. */
pipe_entry *svc_entry_new(pc_service *s, pc_consumer *next);

/* ---- cfgcheck.c ---- */

/* path::key into out (truncated to n). */
void svc_path_join(char *out, size_t n, const char *path, const char *key);
/* Every key of map must be in allowed (errors with a "did you mean"); PC_EINVAL otherwise. */
int svc_check_keys(const pc_node *map, const char *const *allowed, size_t n, const char *path,
                   pc_error *err);
/* NULL, null, or an empty mapping or list. */
bool svc_is_empty(const pc_node *n);
/* A Collector setting profcol does not implement (n set): refused, never ignored. */
int svc_unsupported(const pc_node *n, const char *path, const char *why, pc_error *err);
/* The definition of id in the top-level section; NULL (and an error at `at` when err) if none. */
const pc_node *svc_find_definition(pc_service *s, const char *section, const char *id,
                                   const pc_node *at, const char *path, pc_error *err);

/* ---- connect.c ---- */

/* id is defined in the top-level connectors section. */
bool svc_is_connector(pc_service *s, const char *id);
/* The Collector's connector checks (exact texts); records the connector nodes. */
int svc_check_connectors(pc_service *s, const pc_node *pls, pc_error *err);
int svc_build_connectors(pc_service *s, pc_error *err);
/* Append the connector nodes a pipeline of sig exporting to id feeds; how many. */
size_t svc_connector_targets(pc_service *s, const char *id, pc_signal sig, pc_consumer **out);
/* Once the pipelines are built: each connector's router, then its type's connect. */
int svc_wire_connectors(pc_service *s, const pc_node *pls, pc_error *err);
void svc_free_connectors(pc_service *s);
/* Each pipeline's shutdown stage: after the processors of the pipelines feeding it. */
void svc_order_pipelines(pc_service *s, const pc_node *pls);

/* ---- graph.c ---- */

int svc_check_sections(pc_service *s, pc_error *err);
int svc_validate_section(pc_service *s, const char *section, pc_kind kind, pc_error *err);
/* dry: errors were found already: check references, build nothing. */
int svc_build_extensions(pc_service *s, bool dry, pc_error *err);
int svc_build_pipelines(pc_service *s, bool dry, pc_error *err);
int svc_check_authenticators(pc_service *s, pc_error *err);

/* ---- plan.c ---- */

/* The pipeline node lists id under `list` ("receivers", ...). */
bool svc_lists(const pc_node *pipeline, const char *list, const char *id);
pc_component *svc_find_in(pc_component *const *list, size_t n, const char *id);
/* An exporter on the core whose sending queue is on disk. */
bool svc_persistent_queue(const pc_component *c);
/* The running instance a reload keeps, or NULL. */
pc_component *svc_kept_extension(pc_service *s, const char *id);
pc_component *svc_kept_instance(pc_service *s, pc_kind kind, const char *id);
/* Parse the kept c's new definition, to apply in place at the switch. */
void svc_plan_reconfigure(pc_service *s, pc_component *c, const char *section, const pc_node *def,
                          const char *path);
/* The built pipeline `name` of old, or NULL. */
pipeline *svc_old_pipeline(const pc_service *old, const char *name);
/* keep[i]: pipeline i of pls keeps the running one's processors, fan-out and entry. */
void svc_plan_pipelines(pc_service *s, const pc_node *pls, bool *keep);

/* ---- lifecycle.c ---- */

int svc_start_inner(pc_service *s, pc_error *e); /* extensions, exporters, processors */
int svc_start_receivers(pc_service *s, pc_error *e);
int svc_start_metrics(pc_service *s, pc_error *e);
/* One more component to wait for in this phase (s->pending). */
void svc_shutdown_one(pc_service *s, pc_component *c);
/* Shutdown phases: receivers, then processors pipeline by pipeline in chain order, then
 * exporters, extensions, the metrics endpoint; each waits for every done callback. */
void svc_shutdown_phase(pc_service *s);
void svc_drain_processors(pc_service *s);
void svc_metrics_stopped(void *arg);

/* ---- telemetry.c ---- */

/* Read service::telemetry into s (log level and encoding, metrics address); errors in err. */
int svc_telemetry_apply(pc_service *s, pc_error *err);
/* Make s's log settings the process's. */
void svc_telemetry_use(const pc_service *s);

#endif
