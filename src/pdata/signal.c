/* The signals a pipeline carries, and what pdata does for every one of them: decode, count,
 * reach the resources, concatenate. Profiles have their own model code (batch.c, merge.c);
 * traces, metrics and logs are passed through as decoded OTLP requests. */
#include <stdio.h>
#include <string.h>

#include "pdata/json.h"
#include "pdata/pdata.h"
#include "pdata/proto_pack.h"
#include "pdata/proto_scan.h"
#include "pdata/proto_unpack.h"
#include "base/alloc.h"
#include "base/budget.h"
#include "base/compress.h"
#include "base/log.h"

#define COLLECTOR(sig, svc) "/opentelemetry.proto.collector." sig ".v1." svc "/Export"

const pc_signal_info pc_signal_infos[PC_SIGNAL_COUNT] = {
    [PC_SIGNAL_PROFILES] = {"profiles", "/v1development/profiles",
                            "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/"
                            "Export",
                            "samples", "profile_samples", "profiles_endpoint", PC_REQUEST_DESC,
                            PC_RESPONSE_DESC},
    [PC_SIGNAL_TRACES] =
        {"traces", "/v1/traces", COLLECTOR("trace", "TraceService"), "spans", "spans",
         "traces_endpoint",
         &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor,
         &opentelemetry__proto__collector__trace__v1__export_trace_service_response__descriptor},
    [PC_SIGNAL_METRICS] =
        {"metrics", "/v1/metrics", COLLECTOR("metrics", "MetricsService"), "data points",
         "metric_points", "metrics_endpoint",
         &opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__descriptor,
         &opentelemetry__proto__collector__metrics__v1__export_metrics_service_response__descriptor},
    [PC_SIGNAL_LOGS] =
        {"logs", "/v1/logs", COLLECTOR("logs", "LogsService"), "log records", "log_records",
         "logs_endpoint",
         &opentelemetry__proto__collector__logs__v1__export_logs_service_request__descriptor,
         &opentelemetry__proto__collector__logs__v1__export_logs_service_response__descriptor},
};

int pc_signal_parse(const char *name, size_t len, pc_signal *out)
{
    for (int s = 0; s < PC_SIGNAL_COUNT; s++)
        if (strlen(pc_signal_infos[s].name) == len && !memcmp(pc_signal_infos[s].name, name, len)) {
            *out = (pc_signal)s;
            return 0;
        }
    return PC_EINVAL;
}

static pc_batch *wrap(pc_signal sig, pc_arena *a, ProtobufCMessage *m)
{
    pc_batch *b = pc_batch_wrap(a, sig);
    if (sig == PC_SIGNAL_PROFILES)
        b->req = (pc_request *)m;
    else
        b->msg = m;
    return b;
}

pc_batch *pc_batch_new_signal(pc_signal sig)
{
    if (sig == PC_SIGNAL_PROFILES) return pc_batch_new();
    pc_arena *a = pc_arena_new(1024);
    const ProtobufCMessageDescriptor *d = pc_signal_infos[sig].request;
    ProtobufCMessage *m = pc_arena_calloc(a, 1, d->sizeof_message);
    protobuf_c_message_init(d, m);
    return wrap(sig, a, m);
}

/* The arena a protobuf request is decoded into. With a budget the scan counts the request first
 * (docs/limits.md, "What a request may cost"): admission needs the count before anything is
 * allocated, a request over its limit is refused (413) and one the process cannot hold now is
 * told to retry (503) without spending the memory; the estimate also sizes the arena's one
 * block. Without a budget nothing is reserved and pc_proto_unpack (pdata/proto_unpack.h) checks
 * and unpacks in one pass. 0, or the refusal (e set). */
static int proto_decode_arena(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
                              pc_budget *budget, pc_arena **out, pc_error *e)
{
    if (!budget) {
        *out = pc_arena_new(len * 2 + 1024);
        return 0;
    }
    pc_proto_scan scan;
    pc_error why = {0};
    if (pc_proto_scan_message(d, data, len, PC_PROTO_MAX_DEPTH, &scan, &why) < 0)
        return pc_error_set(e, PC_EINVAL, "cannot decode %s: %s", d->short_name, why.msg);
    int rc = pc_budget_reserve(budget, scan.cost, "decoded protobuf request");
    if (rc < 0) return pc_error_set(e, rc, "%s: over the decode budget", budget->what);
    *out = pc_arena_new(scan.cost + 64);
    pc_arena_set_budget(*out, budget);
    return 0;
}

int pc_batch_decode(pc_signal sig, const uint8_t *data, size_t len, bool json, pc_budget *budget,
                    pc_batch **out, pc_error *e)
{
    const ProtobufCMessageDescriptor *d = pc_signal_infos[sig].request;
    *out = NULL;
    ProtobufCMessage *m = NULL;
    pc_arena *a = NULL;
    if (json) {
        a = pc_arena_new(len / 2 + 4096);
        pc_arena_set_budget(a, budget);
        int rc = pc_json_decode(d, (const char *)data, len, a, &m, e);
        if (rc < 0) {
            pc_arena_free(a);
            return rc;
        }
    } else {
        int rc = proto_decode_arena(d, data, len, budget, &a, e);
        if (rc < 0) return rc;
        pc_error why = {0};
        /* after the scan, protobuf-c's unpack costs fewer instructions than the one pass (2,801 +
         * 4,378 per sample against 2,801 + 4,566: bench/README.md, "One-pass decode"); the one
         * pass is the whole decode only where nothing is reserved */
        if (budget) {
            m = protobuf_c_message_unpack(d, pc_arena_allocator(a), len, data);
            if (!m) pc_error_set(&why, PC_EPROTO, "malformed protobuf");
        }
        if (!budget ? pc_proto_unpack(d, data, len, PC_PROTO_MAX_DEPTH, a, &m, &why) < 0 : !m) {
            pc_arena_free(a);
            if (!pc_budget_ok(budget))
                return pc_error_set(e, budget->state, "%s: over the decode budget", budget->what);
            return pc_error_set(e, PC_EINVAL, "cannot decode %s: %s", d->short_name, why.msg);
        }
    }
    *out = wrap(sig, a, m);
    return 0;
}

int pc_batch_decode_proto(const uint8_t *data, size_t len, pc_batch **out, pc_error *e)
{
    return pc_batch_decode(PC_SIGNAL_PROFILES, data, len, false, NULL, out, e);
}

int pc_batch_decode_json(const char *data, size_t len, pc_batch **out, pc_error *e)
{
    return pc_batch_decode(PC_SIGNAL_PROFILES, (const uint8_t *)data, len, true, NULL, out, e);
}

void pc_batch_set_raw(pc_batch *b, const uint8_t *data, size_t len, int enc, bool json)
{
    size_t wl = 0;
    const uint8_t *w = pc_batch_wire_bytes(b, &wl);
    /* the checked bytes, kept already (the very block when the batch took the receiver's) */
    if (w && enc == PC_ENC_NONE && !json && wl == len && (w == data || !memcmp(w, data, len)))
        b->raw = w;
    else
        b->raw = pc_arena_memdup(b->arena, data, len);
    b->raw_len = len;
    b->raw_enc = enc;
    b->raw_json = json;
}

/* Copy-on-write (pdata.h): the copy goes through the wire format, so it lives here beside the
 * decoder of every signal. */
void pc_batch_make_writable(pc_batch **bp)
{
    pc_batch *b = *bp;
    if (atomic_load_explicit(&b->refs, memory_order_acquire) == 1) {
        b->raw = NULL; /* the caller changes the data: the bytes received no longer match it */
        return;
    }
    /* Deep copy through the wire format: simple, exact, and only paid when data is shared. */
    pc_buf buf = {0};
    pc_batch_encode_proto(b, &buf);
    pc_batch *copy = NULL;
    pc_error e = {0};
    if (pc_batch_decode(b->signal, buf.data ? buf.data : (const uint8_t *)"", buf.len, false, NULL,
                        &copy, &e) < 0) {
        /* cannot happen for data that decoded and validated; never crash on it anyway */
        PC_ERROR(NULL, "copy-on-write failed (%s): the processor gets an empty batch", e.msg);
        copy = pc_batch_new_signal(b->signal);
    }
    pc_buf_free(&buf);
    pc_batch_copy_meta(b, copy);
    pc_batch_unref(b);
    *bp = copy;
}

size_t pc_metric_points(const Opentelemetry__Proto__Metrics__V1__Metric *m)
{
    switch (m->data_case) {
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE: return m->gauge->n_data_points;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM: return m->sum->n_data_points;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM:
        return m->histogram->n_data_points;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_EXPONENTIAL_HISTOGRAM:
        return m->exponential_histogram->n_data_points;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY: return m->summary->n_data_points;
    default: return 0;
    }
}

size_t pc_batch_items(const pc_batch *b)
{
    size_t n = 0;
    switch (b->signal) {
    case PC_SIGNAL_PROFILES: {
        size_t samples, profiles;
        if (pc_batch_is_wire(b) && pc_batch_wire_counts(b, &samples, &profiles)) return samples;
        return pc_batch_counts(b).samples;
    }
    case PC_SIGNAL_TRACES: {
        const pc_traces_request *r = (const pc_traces_request *)b->msg;
        for (size_t i = 0; i < r->n_resource_spans; i++)
            for (size_t j = 0; j < r->resource_spans[i]->n_scope_spans; j++)
                n += r->resource_spans[i]->scope_spans[j]->n_spans;
        return n;
    }
    case PC_SIGNAL_METRICS: {
        const pc_metrics_request *r = (const pc_metrics_request *)b->msg;
        for (size_t i = 0; i < r->n_resource_metrics; i++)
            for (size_t j = 0; j < r->resource_metrics[i]->n_scope_metrics; j++) {
                const Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm =
                    r->resource_metrics[i]->scope_metrics[j];
                for (size_t k = 0; k < sm->n_metrics; k++)
                    n += pc_metric_points(sm->metrics[k]);
            }
        return n;
    }
    case PC_SIGNAL_LOGS: {
        const pc_logs_request *r = (const pc_logs_request *)b->msg;
        for (size_t i = 0; i < r->n_resource_logs; i++)
            for (size_t j = 0; j < r->resource_logs[i]->n_scope_logs; j++)
                n += r->resource_logs[i]->scope_logs[j]->n_log_records;
        return n;
    }
    default: return 0;
    }
}

size_t pc_batch_n_resources(const pc_batch *b)
{
    switch (b->signal) {
    case PC_SIGNAL_PROFILES: return pc_batch_req(b)->n_resource_profiles;
    case PC_SIGNAL_TRACES: return ((const pc_traces_request *)b->msg)->n_resource_spans;
    case PC_SIGNAL_METRICS: return ((const pc_metrics_request *)b->msg)->n_resource_metrics;
    case PC_SIGNAL_LOGS: return ((const pc_logs_request *)b->msg)->n_resource_logs;
    default: return 0;
    }
}

pc_resource **pc_batch_resource_slot(pc_batch *b, size_t i)
{
    switch (b->signal) {
    case PC_SIGNAL_PROFILES: return &pc_batch_req(b)->resource_profiles[i]->resource;
    case PC_SIGNAL_TRACES: return &((pc_traces_request *)b->msg)->resource_spans[i]->resource;
    case PC_SIGNAL_METRICS: return &((pc_metrics_request *)b->msg)->resource_metrics[i]->resource;
    case PC_SIGNAL_LOGS: return &((pc_logs_request *)b->msg)->resource_logs[i]->resource;
    default: return NULL;
    }
}

void pc_batch_keep_resources(pc_batch *b, const bool *keep)
{
    void **v = NULL;
    size_t *n = NULL;
    switch (b->signal) {
    case PC_SIGNAL_PROFILES:
        v = (void **)pc_batch_req(b)->resource_profiles, n = &pc_batch_req(b)->n_resource_profiles;
        break;
    case PC_SIGNAL_TRACES:
        v = (void **)((pc_traces_request *)b->msg)->resource_spans;
        n = &((pc_traces_request *)b->msg)->n_resource_spans;
        break;
    case PC_SIGNAL_METRICS:
        v = (void **)((pc_metrics_request *)b->msg)->resource_metrics;
        n = &((pc_metrics_request *)b->msg)->n_resource_metrics;
        break;
    case PC_SIGNAL_LOGS:
        v = (void **)((pc_logs_request *)b->msg)->resource_logs;
        n = &((pc_logs_request *)b->msg)->n_resource_logs;
        break;
    default: return;
    }
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (keep[i]) v[k++] = v[i];
    *n = k;
}

pc_batch *pc_batch_concat(pc_signal sig, pc_batch *const *bs, size_t n)
{
    /* each request is only field 1 repeated: the concatenation is the merged request */
    pc_buf buf = {0};
    for (size_t i = 0; i < n; i++)
        pc_proto_pack(pc_batch_message(bs[i]), &buf);
    pc_batch *out = NULL;
    pc_error e = {0};
    if (pc_batch_decode(sig, buf.data ? buf.data : (const uint8_t *)"", buf.len, false, NULL, &out,
                        &e) < 0) {
        /* cannot happen for requests that decoded; never crash on it anyway */
        PC_ERROR(NULL, "merging %s requests failed (%s)", pc_signal_infos[sig].name, e.msg);
        out = pc_batch_new_signal(sig);
    }
    pc_buf_free(&buf);
    return out;
}

int pc_partial_success_parse(pc_signal sig, const uint8_t *body, size_t len, bool json,
                             int64_t *rejected, char *msg, size_t msglen)
{
    /* every Export*ServiceResponse is {1: partial_success {1: int64 rejected, 2: string}}:
     * read it through the descriptors, whatever the signal calls the count */
    const ProtobufCMessageDescriptor *d = pc_signal_infos[sig].response;
    pc_arena *a = pc_arena_new(1024);
    ProtobufCMessage *m = NULL;
    int found = 0;
    *rejected = 0;
    if (msglen) msg[0] = 0;
    if (json) {
        if (pc_json_decode(d, (const char *)body, len, a, &m, NULL) < 0) m = NULL;
    } else {
        m = protobuf_c_message_unpack(d, pc_arena_allocator(a), len, body);
    }
    const ProtobufCFieldDescriptor *f = m ? protobuf_c_message_descriptor_get_field(d, 1) : NULL;
    const ProtobufCMessage *ps =
        f ? *(ProtobufCMessage *const *)((const char *)m + f->offset) : NULL;
    if (ps) {
        const ProtobufCFieldDescriptor *fr =
            protobuf_c_message_descriptor_get_field(ps->descriptor, 1);
        const ProtobufCFieldDescriptor *fm =
            protobuf_c_message_descriptor_get_field(ps->descriptor, 2);
        *rejected = *(const int64_t *)((const char *)ps + fr->offset);
        const char *s = *(char *const *)((const char *)ps + fm->offset);
        if (s && msglen) snprintf(msg, msglen, "%s", s);
        found = *rejected != 0 || (s && *s);
    }
    pc_arena_free(a);
    return found;
}

/* Ids are fixed-size (or empty): a wrong length is refused as the Collector's pdata refuses it,
 * rather than forwarded to a backend that would drop the whole request. */
static int id_len(const ProtobufCFieldDescriptor *f)
{
    if (f->type != PROTOBUF_C_TYPE_BYTES) return -1;
    if (!strcmp(f->name, "trace_id")) return 16;
    if (!strcmp(f->name, "span_id") || !strcmp(f->name, "parent_span_id")) return 8;
    return -1;
}

static int check_ids(const ProtobufCMessage *m, pc_error *e, int depth)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (depth > 64) return 0; /* decoders already bound nesting */
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF &&
            *(const uint32_t *)(base + f->quantifier_offset) != f->id)
            continue;
        int want = id_len(f);
        if (want > 0 && f->label != PROTOBUF_C_LABEL_REPEATED) {
            const ProtobufCBinaryData *v = (const ProtobufCBinaryData *)(base + f->offset);
            if (v->len != 0 && v->len != (size_t)want) {
                return pc_error_set(e, PC_EINVAL,
                                    "%s.%s: invalid length %zu, want %d bytes (or empty)",
                                    d->short_name, f->name, v->len, want);
            }
            continue;
        }
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t k = 0; k < n; k++)
                if (v[k] && check_ids(v[k], e, depth + 1) < 0) return PC_EINVAL;
        } else {
            const ProtobufCMessage *v = *(ProtobufCMessage *const *)(base + f->offset);
            if (v && check_ids(v, e, depth + 1) < 0) return PC_EINVAL;
        }
    }
    return 0;
}

int pc_signal_validate(const pc_batch *b, pc_error *e)
{
    if (b->signal == PC_SIGNAL_PROFILES || !b->msg) return 0;
    return check_ids(b->msg, e, 0);
}

void pc_batch_set_resource_attr(pc_batch *b, const char *key, const char *val, size_t len)
{
    const pc_dictionary *d = pc_batch_req(b) ? pc_batch_req(b)->dictionary : NULL;
    size_t n = pc_batch_n_resources(b);
    for (size_t i = 0; i < n; i++) {
        pc_resource **slot = pc_batch_resource_slot(b, i);
        if (!slot) continue;
        if (!*slot) {
            *slot = pc_arena_alloc(b->arena, sizeof **slot);
            opentelemetry__proto__resource__v1__resource__init(*slot);
        }
        pc_resource *r = *slot;
        pc_keyvalue **kv = pc_arena_alloc(b->arena, (r->n_attributes + 1) * sizeof *kv);
        size_t k = 0;
        for (size_t j = 0; j < r->n_attributes; j++)
            if (r->attributes[j] && strcmp(pc_keyvalue_key(d, r->attributes[j]), key) != 0)
                kv[k++] = r->attributes[j];
        pc_keyvalue *nkv = pc_arena_alloc(b->arena, sizeof *nkv);
        opentelemetry__proto__common__v1__key_value__init(nkv);
        nkv->key = pc_arena_strndup(b->arena, key, strlen(key));
        pc_anyvalue *v = pc_arena_alloc(b->arena, sizeof *v);
        opentelemetry__proto__common__v1__any_value__init(v);
        v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        v->string_value = pc_arena_strndup(b->arena, val, len);
        nkv->value = v;
        kv[k++] = nkv;
        r->attributes = kv;
        r->n_attributes = k;
    }
}

/* ---- batches that hold a checked request's bytes and decode their model only when asked
 * (pdata.h, pc_batch_new_wire; ARCHITECTURE.md §2, pass-through) ---- */

/* The decode the receiver skipped, within the same limit (docs/limits.md): reserved before it
 * allocates, so it counts among the decodes in flight the memory limiter sees. */
static pc_batch *decode_model(const struct pc_batch_wire *w)
{
    pc_budget budget;
    pc_budget_init(&budget, w->max_decoded);
    pc_batch *m = NULL;
    pc_error e = {0};
    int rc = pc_batch_decode(PC_SIGNAL_PROFILES, w->len ? w->data : (const uint8_t *)"", w->len,
                             false, &budget, &m, &e);
    pc_batch_end_budget(m);
    pc_budget_release(&budget);
    if (rc < 0 || !m) {
        /* cannot happen for bytes pc_wire_check_profiles accepted; never crash on it anyway */
        PC_ERROR(NULL, "decoding a checked request failed (%s): an empty request stands in", e.msg);
        pc_batch_unref(m);
        m = pc_batch_new();
    }
    return m;
}

/* pc_batch_req's slow path for a bytes-only batch: the decode, once, under the batch's lock,
 * since a shared batch may be read by several consumers on pool threads at once. */
static pc_request *req_decode(const pc_batch *cb)
{
    pc_batch *b = (pc_batch *)cb; /* the model is a cache of the bytes: filling it is no change */
    struct pc_batch_wire *w = b->wire;
    pthread_mutex_lock(&w->lock);
    if (atomic_load_explicit(&b->lazy, memory_order_acquire)) {
        w->model = decode_model(w);
        b->req = w->model->req;
        atomic_store_explicit(&b->lazy, false, memory_order_release);
    }
    pthread_mutex_unlock(&w->lock);
    return b->req;
}

/* A bytes-only batch of len bytes at data (own: its block, taken, of cap bytes; else copied). */
static pc_batch *new_wire(const uint8_t *data, size_t len, void *own, size_t cap, size_t samples,
                          size_t profiles, size_t max_decoded)
{
    pc_batch *b = pc_batch_wrap(pc_arena_new(own ? 0 : len + 256), PC_SIGNAL_PROFILES);
    struct pc_batch_wire *w = pc_xcalloc(1, sizeof *w);
    pthread_mutex_init(&w->lock, NULL);
    w->owned = own;
    if (own) pc_arena_add_size(b->arena, cap);
    w->data = own ? data : pc_arena_memdup(b->arena, data, len);
    w->len = len;
    w->samples = samples;
    w->profiles = profiles;
    w->max_decoded = max_decoded;
    w->decode = req_decode;
    b->wire = w;
    atomic_store_explicit(&b->lazy, true, memory_order_release);
    return b;
}

pc_batch *pc_batch_new_wire(const uint8_t *data, size_t len, size_t samples, size_t profiles,
                            size_t max_decoded)
{
    return new_wire(data, len, NULL, 0, samples, profiles, max_decoded);
}

pc_batch *pc_batch_take_wire(void *buf, size_t len, size_t cap, size_t samples, size_t profiles,
                             size_t max_decoded)
{
    /* an inflate's output grows geometrically: the bytes may have far more room than they use,
     * which a queued batch would hold on to. realloc may move the block: callers read the bytes
     * back with pc_batch_wire_bytes */
    if (cap - len > len / 4 + 4096) {
        cap = len ? len : 1;
        buf = pc_xrealloc(buf, cap);
    }
    return new_wire(buf, len, buf, cap, samples, profiles, max_decoded);
}
