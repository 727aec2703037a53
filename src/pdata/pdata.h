/* The in-memory model: an OTLP ExportProfilesServiceRequest in an arena (ARCHITECTURE.md §3). */
#ifndef PC_PDATA_H
#define PC_PDATA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "otlp_logs_service.pb-c.h"
#include "otlp_metrics_service.pb-c.h"
#include "otlp_profiles_service.pb-c.h"
#include "otlp_trace_service.pb-c.h"
#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"

/* The signals a pipeline can carry. Profiles are the model (ARCHITECTURE.md §3); traces, metrics
 * and logs pass through as their decoded OTLP Export*ServiceRequest, re-shaped by nothing but the
 * resource processor (and merged by batch). */
typedef enum {
    PC_SIGNAL_PROFILES,
    PC_SIGNAL_TRACES,
    PC_SIGNAL_METRICS,
    PC_SIGNAL_LOGS,
    PC_SIGNAL_COUNT
} pc_signal;
/* The signals' names as compile-time strings, for tables written per signal (config keys):
 * X(signal, name, OTLP/HTTP path, Kafka topic), the Collector's defaults, in enum order. */
#define PC_SIGNALS_EACH(X)                                                                         \
    X(PC_SIGNAL_PROFILES, "profiles", "/v1development/profiles", "otlp_profiles")                  \
    X(PC_SIGNAL_TRACES, "traces", "/v1/traces", "otlp_spans")                                      \
    X(PC_SIGNAL_METRICS, "metrics", "/v1/metrics", "otlp_metrics")                                 \
    X(PC_SIGNAL_LOGS, "logs", "/v1/logs", "otlp_logs")
#define PC_SIGNAL_BIT(s) (1u << (s))
#define PC_SIGNALS_ALL   ((1u << PC_SIGNAL_COUNT) - 1)

typedef struct pc_signal_info {
    const char *name;         /* "traces": the pipeline type in service::pipelines */
    const char *http_path;    /* "/v1/traces" */
    const char *grpc_path;    /* "/opentelemetry.proto.collector.trace.v1.TraceService/Export" */
    const char *items;        /* "spans": what is counted, in log lines */
    const char *metric;       /* "spans": otelcol_receiver_accepted_<metric> */
    const char *endpoint_key; /* "traces_endpoint": otlphttp's per-signal URL key */
    const ProtobufCMessageDescriptor *request, *response;
} pc_signal_info;
extern const pc_signal_info pc_signal_infos[PC_SIGNAL_COUNT];
/* "traces" -> PC_SIGNAL_TRACES (len bytes of name); PC_EINVAL if unknown. */
int pc_signal_parse(const char *name, size_t len, pc_signal *out);

/* Short names for the protobuf-c generated types. */
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    pc_request;
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse
    pc_response;
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesPartialSuccess
    pc_partial_success;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pc_dictionary;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles pc_resource_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles pc_scope_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pc_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pc_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Stack pc_stack;
typedef Opentelemetry__Proto__Profiles__V1development__Location pc_location;
typedef Opentelemetry__Proto__Profiles__V1development__Line pc_line;
typedef Opentelemetry__Proto__Profiles__V1development__Function pc_function;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping pc_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Link pc_link;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType pc_value_type;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pc_kvu;
typedef Opentelemetry__Proto__Resource__V1__Resource pc_resource;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope pc_scope;
typedef Opentelemetry__Proto__Common__V1__KeyValue pc_keyvalue;
typedef Opentelemetry__Proto__Common__V1__AnyValue pc_anyvalue;

#define PC_REQUEST_DESC                                                                            \
    (&opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor)
#define PC_RESPONSE_DESC                                                                           \
    (&opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__descriptor)

/* Request-scoped metadata that travels with a batch (tenant pass-through, batch metadata_keys). */
#define PC_META_MAX 8
typedef struct pc_meta {
    size_t n;
    char *keys[PC_META_MAX]; /* lower-case header names, arena-owned */
    char *vals[PC_META_MAX];
} pc_meta;

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest pc_traces_request;
typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest
    pc_metrics_request;
typedef Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest pc_logs_request;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans pc_resource_spans;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans pc_scope_spans;
typedef Opentelemetry__Proto__Trace__V1__Span pc_span;

/* What a batch made by pc_batch_new_wire holds besides its arena (defined here so that
 * pc_batch_req can call decode: the lazy decode lives in signal.c beside pc_batch_decode, and a
 * function pointer keeps batch.c and this header from depending on it). */
struct pc_batch;
struct pc_batch_wire {
    pthread_mutex_t lock; /* one decode, whoever asks first */
    const uint8_t *data;  /* the protobuf request, uncompressed, in the batch's arena */
    size_t len;
    void *owned; /* data's malloc'd block when the batch took it (pc_batch_take_wire), else NULL */
    size_t samples, profiles; /* pc_wire_check_profiles' counts */
    size_t max_decoded;       /* the request's decode limit (docs/limits.md) */
    struct pc_batch *model;   /* the decode's own batch, whose arena holds the model */
    /* decodes the model once (under lock) and returns it: pc_batch_req's slow path */
    pc_request *(*decode)(const struct pc_batch *b);
};

/* One batch of one signal. consume() takes ownership of one reference. */
typedef struct pc_batch {
    pc_arena *arena;
    pc_signal signal;
    /* profiles: the model, read through pc_batch_req() (req->dictionary may be NULL for an empty
     * request); else NULL. A batch made by pc_batch_new_wire() has none until first asked for. */
    pc_request *req;
    /* true while the model is still to be decoded from wire (pc_batch_req does it, once) */
    atomic_bool lazy;
    struct pc_batch_wire *wire; /* pc_batch_new_wire's bytes, lock and counts; else NULL */
    /* traces, metrics, logs: the Export*ServiceRequest (pc_traces_request, ...); else NULL */
    ProtobufCMessage *msg;
    atomic_int refs;
    pc_meta meta;
    /* Pass-through (ARCHITECTURE.md §2): the validated request's bytes as received, arena-owned
     * (protobuf, or JSON with raw_json; compressed with raw_enc, a pc_enc of base/compress.h),
     * kept while nothing has changed the data. NULL once anything may have:
     * pc_batch_make_writable clears it, and merged or translated batches never have it. */
    const uint8_t *raw;
    size_t raw_len;
    int raw_enc;
    bool raw_json;
} pc_batch;

/* An empty request with a dictionary whose tables hold only their zero elements. */
pc_batch *pc_batch_new(void);
/* A profiles batch of len bytes of an ExportProfilesServiceRequest that
 * pc_wire_check_profiles() accepted whole (nothing rejected), copied, with the counts it gave
 * (samples, profiles) and the request's decode limit (docs/limits.md): its model is decoded only
 * when something asks for it (pc_batch_req), so bytes that are passed through are never
 * decoded (ARCHITECTURE.md §2). */
pc_batch *pc_batch_new_wire(const uint8_t *data, size_t len, size_t samples, size_t profiles,
                            size_t max_decoded);
/* The same without the copy: the batch takes buf's block (malloc'd; len bytes used of cap) and
 * frees it; its arena's size counts cap. A block much larger than len is trimmed, which may move
 * it: read the bytes back with pc_batch_wire_bytes. */
pc_batch *pc_batch_take_wire(void *buf, size_t len, size_t cap, size_t samples, size_t profiles,
                             size_t max_decoded);
/* The profiles model of a batch (NULL for other signals): every reader of the model goes
 * through here. */
static inline pc_request *pc_batch_req(const pc_batch *b)
{
    if (atomic_load_explicit(&((pc_batch *)b)->lazy, memory_order_acquire))
        return b->wire->decode(b);
    return b->req;
}
/* The bytes and counts of a batch made by pc_batch_new_wire (NULL, false for any other). */
const uint8_t *pc_batch_wire_bytes(const pc_batch *b, size_t *len);
bool pc_batch_wire_counts(const pc_batch *b, size_t *samples, size_t *profiles);
/* Whether the model of b was not decoded (yet): its bytes were only checked on the wire. */
static inline bool pc_batch_is_wire(const pc_batch *b)
{
    return atomic_load_explicit(&((pc_batch *)b)->lazy, memory_order_acquire);
}
/* The request message of any signal. */
static inline const ProtobufCMessage *pc_batch_message(const pc_batch *b)
{
    pc_request *r = pc_batch_req(b);
    return r ? &r->base : b->msg;
}
/* An empty request of any signal (profiles: as pc_batch_new). */
pc_batch *pc_batch_new_signal(pc_signal sig);
pc_batch *pc_batch_ref(pc_batch *b);
void pc_batch_unref(pc_batch *b);
/* Copy-on-write: when *b is shared, replace it by a private deep copy (dropping one ref). Either
 * way the batch that comes back has no pass-through bytes (raw): its caller is about to change
 * the data. */
void pc_batch_make_writable(pc_batch **b);
/* Keep len bytes of the request as received (copied into the arena) for pass-through. */
void pc_batch_set_raw(pc_batch *b, const uint8_t *data, size_t len, int enc, bool json);
void pc_batch_set_meta(pc_batch *b, const char *key, const char *val);
const char *pc_batch_get_meta(const pc_batch *b, const char *key);
/* The tenant (Grafana's X-Scope-OrgID): every receiver that sees one records it, every exporter
 * that sends a tenant reads it. It is the metadata entry PC_META_TENANT, so that batch's
 * metadata_keys can keep tenants apart by that name. */
#define PC_META_TENANT "x-scope-orgid"
void pc_batch_set_tenant(pc_batch *b, const char *tenant); /* NULL or "": none */
const char *pc_batch_tenant(const pc_batch *b);            /* NULL: none */
/* Every metadata entry of from set on to (a batch made from from: a split part, a copy). */
void pc_batch_copy_meta(const pc_batch *from, pc_batch *to);

/* Decode a request of any signal, protobuf or JSON: 0, or PC_EINVAL with a message in e for
 * undecodable input (nesting deeper than PC_PROTO_MAX_DEPTH, invalid UTF-8 in a string field,
 * duplicate JSON keys or fields...). Profiles are validated separately (pc_batch_validate);
 * other signals only have to decode. With a budget (docs/limits.md) the decoded size is counted
 * before anything is allocated and every allocation is charged: a refusal returns budget->state,
 * PC_E2BIG when the request was over its limit or PC_EAGAIN when the process had no room now.
 * The budget stays attached to the batch's arena until pc_batch_end_budget(). */
int pc_batch_decode(pc_signal sig, const uint8_t *data, size_t len, bool json, pc_budget *budget,
                    pc_batch **out, pc_error *e);
/* Profiles without a budget (tests, tools). */
int pc_batch_decode_proto(const uint8_t *data, size_t len, pc_batch **out, pc_error *e);
int pc_batch_decode_json(const char *data, size_t len, pc_batch **out, pc_error *e);
/* The decode is over: stop charging the batch's arena to the request's budget. */
static inline void pc_batch_end_budget(pc_batch *b)
{
    if (b) pc_arena_set_budget(b->arena, NULL);
}
/* A batch of signal sig owning arena a (message pointers are set by the caller). */
pc_batch *pc_batch_wrap(pc_arena *a, pc_signal sig);
#define PC_PROTO_MAX_DEPTH 64

void pc_batch_encode_proto(const pc_batch *b, pc_buf *out);
void pc_batch_encode_json(const pc_batch *b, pc_buf *out);

/* Validation (ARCHITECTURE.md §3). Dictionary errors make the whole request invalid
 * (PC_EINVAL). Otherwise invalid profiles are removed and counted in *rejected, with the first
 * reason in e (as PC_EINVAL); returns 0. A request whose every profile is invalid also returns
 * PC_EINVAL. */
int pc_batch_validate(pc_batch *b, int64_t *rejected, pc_error *e);

/* The profiles of a request in order (skipping absent resources and scopes; a profile may be
 * NULL only in a request that was never decoded):
 *     pc_profile_iter it = {0};
 *     while (pc_profile_next(req, &it)) ... it.r, it.s, it.p, it.prof ...
 * The one walk over resource_profiles[r]->scope_profiles[s]->profiles[p]. */
typedef struct pc_profile_iter {
    size_t r, s, p;
    const pc_profile *prof;
    bool started;
} pc_profile_iter;
bool pc_profile_next(const pc_request *req, pc_profile_iter *it);
/* A profile's number of samples (0 for NULL). */
size_t pc_profile_n_samples(const pc_profile *p);

typedef struct pc_counts {
    size_t resources, scopes, profiles, samples;
} pc_counts;
pc_counts pc_batch_counts(const pc_batch *b); /* profiles; zeros for other signals */
/* What a signal counts: profile samples, spans, metric data points or log records. */
size_t pc_batch_items(const pc_batch *b);
/* The data points of one metric, whatever its kind (0 for none). */
size_t pc_metric_points(const Opentelemetry__Proto__Metrics__V1__Metric *m);
/* The resources of any signal: n entries (ResourceProfiles, ResourceSpans, ...) whose Resource
 * pointer is *pc_batch_resource_slot(b, i) (may be NULL: the processor may set it, from the
 * arena). */
size_t pc_batch_n_resources(const pc_batch *b);
pc_resource **pc_batch_resource_slot(pc_batch *b, size_t i);
/* Keep only the resources i with keep[i] (in order) of a writable batch of any signal (a
 * profiles dictionary stays whole: what the others referenced is unused, not wrong). */
void pc_batch_keep_resources(pc_batch *b, const bool *keep);
/* One request of signal sig holding the data of every batch in bs (serialized requests
 * concatenated, then decoded once). Not for profiles (see pdata/merge.h). */
pc_batch *pc_batch_concat(pc_signal sig, pc_batch *const *bs, size_t n);
/* Traces, metrics, logs: every trace id 16 bytes, span id 8 (or empty); PC_EINVAL with e naming
 * the field otherwise. Profiles have pc_batch_validate. */
int pc_signal_validate(const pc_batch *b, pc_error *e);
/* An Export*ServiceResponse body of signal sig: 1 when it carries a partial success (with the
 * number rejected and the backend's message), 0 when not or undecodable. */
int pc_partial_success_parse(pc_signal sig, const uint8_t *body, size_t len, bool json,
                             int64_t *rejected, char *msg, size_t msglen);

/* Append a ResourceProfiles (plain key/string_value attributes) with one ScopeProfiles to a
 * writable batch; returns the new ScopeProfiles to add profiles to. */
pc_scope_profiles *pc_batch_add_resource(pc_batch *b, const char *const *keys,
                                         const char *const *vals, size_t n, const char *scope_name,
                                         const char *scope_version);
/* Set the string attribute key = val (len bytes) on every resource of a writable batch of any
 * signal, replacing any attribute with that key (whatever its form); a missing Resource is made. */
void pc_batch_set_resource_attr(pc_batch *b, const char *key, const char *val, size_t len);
/* Append a profile (zero-initialised, in the batch arena) to a ScopeProfiles. */
pc_profile *pc_scope_add_profile(pc_batch *b, pc_scope_profiles *sp);

/* Dictionary string lookup: "" for index 0 or out of range. */
const char *pc_dict_str(const pc_dictionary *d, int32_t idx);
/* A KeyValue's key in either form: the plain key, else key_strindex ("" for NULL kv). */
const char *pc_keyvalue_key(const pc_dictionary *d, const pc_keyvalue *kv);
/* A value's string in either form (string_value or string_value_strindex); NULL when v is not a
 * string or its index is out of range. */
const char *pc_anyvalue_str(const pc_dictionary *d, const pc_anyvalue *v);
/* The string value of a resource attribute (plain key/string or key_strindex/string_value_strindex
 * forms); NULL if absent or not a string. */
const char *pc_resource_attr_str(const pc_dictionary *d, const pc_resource *r, const char *key);

/* An AnyValue kind by its short name: PC_AV(STRING_VALUE). */
#define PC_AV(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x
/* protobuf-c leaves unset strings NULL; "" reads the same for comparing and hashing */
static inline const char *pc_nz(const char *s)
{
    return s ? s : "";
}

/* AnyValue kinds, and a dictionary attribute by index (NULL for 0 or out of range): what
 * processors read attributes with, in both the plain and the profiles-only strindex forms. */
#define PC_AV_STRING   OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
#define PC_AV_BOOL     OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE
#define PC_AV_INT      OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE
#define PC_AV_DOUBLE   OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE
#define PC_AV_BYTES    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE
#define PC_AV_STRINDEX OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX
static inline const pc_kvu *pc_dict_attr_at(const pc_dictionary *d, int32_t idx)
{
    if (!d || idx <= 0 || (size_t)idx >= d->n_attribute_table) return NULL;
    return d->attribute_table[idx];
}

#endif
