/* Component types (ARCHITECTURE.md §5): one static descriptor per type, listed in one table. */
#ifndef PC_COMPONENT_H
#define PC_COMPONENT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <uv.h>

#include "base/alloc.h"
#include "base/log.h"
#include "sdk/cfgtable.h"
#include "sdk/consumer.h"

typedef enum {
    PC_KIND_RECEIVER,
    PC_KIND_PROCESSOR,
    PC_KIND_EXPORTER,
    PC_KIND_CONNECTOR,
    PC_KIND_EXTENSION
} pc_kind;

typedef struct pc_component pc_component;
typedef void (*pc_shutdown_done)(pc_component *c);
struct pc_auth;

/* What a component may ask of whatever runs it (the service, or a test's driver), as the
 * Collector's component.Host: the extensions it names. Components never see the service. */
typedef struct pc_host pc_host;
typedef struct pc_host_ops {
    /* The extension instance `id` listed in service.extensions, or NULL. */
    pc_component *(*extension)(pc_host *h, const char *id);
    /* The enabled authenticator extension `id`, usable on that side (server: receivers; client:
     * exporters); NULL with a reason naming auth::authenticator in e (PC_EINVAL). */
    struct pc_auth *(*authenticator)(pc_host *h, const char *id, bool server, pc_error *e);
    /* Status of the host and every component as JSON (like the Collector's health_check);
     * 1 when everything is running, 0 otherwise. */
    int (*status_json)(const pc_host *h, struct pc_buf *out);
} pc_host_ops;
struct pc_host {
    const pc_host_ops *ops;
};

typedef struct pc_component_type {
    const char *name;
    pc_kind kind;
    const char *stability; /* "alpha", "development", ... */
    const char *doc;
    size_t cfg_size;
    const pc_cfg_key *cfg; /* terminated by an entry with key == NULL */

    /* Cross-key validation after the table has parsed the config; node is the component's
     * YAML (may be NULL) for PC_CFG_NODE keys. Fills err (with the key path) and returns
     * PC_EINVAL. */
    int (*validate)(void *cfg, const pc_node *node, const char *path, pc_error *err);
    /* Allocate instance state into c->priv. No sockets or timers yet. 0, or PC_EINVAL with the
     * error (a config issue) in err. */
    int (*create)(pc_component *c, pc_error *err);
    /* Open sockets and timers. Returns fast. 0, or a PC_E* code with the message in e (which
     * may be NULL). */
    int (*start)(pc_component *c, pc_error *e);
    /* Processors and exporters: take ownership of one reference to b. */
    void (*consume)(pc_component *c, pc_batch *b, pc_done_fn done, void *arg);
    /* Shutdown has begun: stop holding data (e.g. flush buffers now and pass later data straight
     * on) so receivers waiting for answers can finish. Optional; called before any shutdown. */
    void (*drain)(pc_component *c);
    /* Stop accepting, flush, drain, then call done (once). Tolerates never having started. */
    void (*shutdown)(pc_component *c, pc_shutdown_done done);
    /* Free c->priv; handles are already closed. */
    void (*destroy)(pc_component *c);
    bool mutates; /* processors: modifies batches (copy-on-write is then applied) */
    /* processors: hands bytes-only batches on (pc_batch_is_wire) without reading their model
     * (batch merges them on the wire): it passes bytes through (pc_consumer.wire_ok) when its
     * next consumer does (service/graph.c) */
    bool wire_through;
    bool authenticator; /* extensions: priv starts with a pc_auth (sdk/auth.h) */
    /* exporters that serve on a socket of their own (prometheus): a reload that replaces the
     * instance stops the old one with the receivers, before the new one binds the same port */
    bool listens;
    /* Extensions that watch the profiles passing through (profilez): the tap, a consumer the
     * service adds to every profiles pipeline as one more target of its exporters' fan-out
     * (ARCHITECTURE.md §2, "The tap"). It is asked for once the instance is created; it must
     * never slow, refuse or change data: it keeps its reference to the shared batch (read only,
     * released when done with it), calls done(PC_OK) at once, and before start or after shutdown
     * just releases the batch. */
    pc_consumer *(*tap)(pc_component *c);
    /* PC_SIGNAL_BIT()s of the pipelines it may be in; 0 means profiles only. A pipeline of
     * another signal listing it is a config error. */
    unsigned signals;
    /* Optional: whether this instance's config can serve a pipeline of sig (e.g. an exporter
     * with only traces_endpoint cannot take profiles); PC_ENOTSUP with a reason otherwise. */
    int (*check_signal)(const pc_component *c, pc_signal sig, pc_error *e);
    /* Optional (receivers, exporters): settings a reload (SIGHUP) applies to the running
     * instance instead of replacing it. reconfigurable: whether the two definitions (the
     * component's YAML, old and new) differ only in such settings. reconfigure: on the loop
     * thread, when the service switches to the new config, take those settings from new_cfg (the
     * new definition, parsed and validated; the service frees it afterwards with the config
     * table, so take what you keep by swapping it into c->cfg). */
    bool (*reconfigurable)(const pc_node *old_def, const pc_node *new_def);
    void (*reconfigure)(pc_component *c, void *new_cfg);
    /* Optional: PC_ADMIT_OK, or why consume would refuse any batch now, lowering *room to what
     * decodes in flight may hold (the memory_limiter); exporters: a full queue, or
     * PC_ADMIT_BEHIND while sends pile up (pc_exporter_admit). Receivers ask the chain before
     * decoding (pc_consumer_admit). */
    pc_admit (*admit)(pc_component *c, size_t *room);
    /* Optional, exporters: whether this instance sends a request's bytes as received and reads
     * nothing of its model when nothing before it changed the data (pc_consumer.wire_ok). */
    bool (*wire_ok)(const pc_component *c);
    /* Optional, exporters: whether consume acknowledges only data on disk (pc_consumer.durable). */
    bool (*durable)(pc_component *c, size_t batch_size);
    /* Exporters on the exporter core (sdk/exporter.h, PC_EXPORTER_CORE): what the core's
     * callbacks above plug in. */
    const struct pc_exporter_def *exporter;
    /* Connectors (the exporter of one pipeline, the receiver of others): per exporter-side
     * signal, the PC_SIGNAL_BIT()s of the receiver-side signals it converts to. */
    unsigned connects[PC_SIGNAL_COUNT];
    /* Connectors: c->router is set (the pipelines it feeds); resolve what the config names in
     * it. 0, or PC_EINVAL with the error in err (a config issue). Optional. */
    int (*connect)(pc_component *c, const char *path, pc_error *err);
} pc_component_type;

/* Connectors: where an instance sends, as the Collector's connector router: the receiving
 * pipelines by id, and one consumer feeding them all (the default for forward). */
typedef struct pc_router {
    size_t n;
    char **pipelines;        /* "profiles/a", ... */
    pc_consumer **consumers; /* each pipeline's entry */
    pc_consumer *all;        /* every one of them */
    pc_signal from, to;      /* the exporter-side and receiver-side signals of this instance */
} pc_router;

/* The consumer of the router's pipeline `id`, or NULL. */
static inline pc_consumer *pc_router_consumer(const pc_router *r, const char *id)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->pipelines[i], id)) return r->consumers[i];
    return NULL;
}

static inline bool pc_component_type_supports(const pc_component_type *t, pc_signal sig)
{
    return ((t->signals ? t->signals : PC_SIGNAL_BIT(PC_SIGNAL_PROFILES)) & PC_SIGNAL_BIT(sig)) !=
           0;
}

struct pc_component {
    const pc_component_type *type;
    char *id;   /* "otlphttp/backend"; processors: "batch in pipeline profiles/x" for logs */
    char *name; /* the id in the config: "batch", "otlphttp/backend" (NULL: id) */
    void *cfg;  /* parsed config struct of type->cfg_size bytes */
    uv_loop_t *loop;
    pc_consumer self;  /* processors and exporters: how upstream reaches this component */
    pc_consumer *next; /* receivers: profiles fan-out (= route[0]); processors: next */
    /* receivers: per signal, the fan-out over the pipelines of that signal listing this
     * receiver; NULL when none does (the receiver then refuses that signal) */
    pc_consumer *route[PC_SIGNAL_COUNT];
    pc_host *host; /* what runs this component (pc_host_*; NULL in some unit tests) */
    /* Exporters: the uv_now time (ms) by which shutdown gives up draining what is queued. The
     * service sets it per instance just before type->shutdown (a persistent queue handed to a
     * successor is left at once); 0 gives up at once. */
    uint64_t drain_deadline_ms;
    pc_router *router; /* connectors: the pipelines it feeds (set before type->connect) */
    void *priv;
};

static inline struct pc_auth *pc_host_authenticator(pc_component *c, const char *id, bool server,
                                                    pc_error *e)
{
    if (!c->host) {
        pc_error_set(e, PC_EINVAL,
                     "auth::authenticator: extension \"%s\" is not enabled (list it in "
                     "service::extensions)",
                     id);
        return NULL;
    }
    return c->host->ops->authenticator(c->host, id, server, e);
}

static inline int pc_host_status_json(const pc_component *c, struct pc_buf *out)
{
    return c->host ? c->host->ops->status_json(c->host, out) : 0;
}

/* The table of every component type, NULL-terminated. */
extern const pc_component_type *const pc_component_types[];
const pc_component_type *pc_component_type_find(pc_kind kind, const char *name);
const char *pc_kind_name(pc_kind kind);

#endif
