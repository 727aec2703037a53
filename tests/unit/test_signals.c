/* Traces, metrics and logs in pdata (src/pdata/signal.c): decode protobuf and OTLP JSON, encode
 * back, count items, reach resources, concatenate, copy-on-write, refuse malformed input. The
 * protobuf inputs are the bytes protoc (C++ protobuf, an independent codec) writes for the
 * text-format requests quoted above them; the JSON inputs are what an OTLP/HTTP client sends for
 * the same data, so JSON decoded here must pack to exactly protoc's bytes. */
#include <stdint.h>

#include "check.h"
#include "payload.h"
#include "pdata/json.h"
#include "pdata/pdata.h"

#define TR(x) Opentelemetry__Proto__Trace__V1__##x
#define MT(x) Opentelemetry__Proto__Metrics__V1__##x
#define LG(x) Opentelemetry__Proto__Logs__V1__##x
#define AV(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x
#define MC(x) OPENTELEMETRY__PROTO__METRICS__V1__##x

/* stop checking a structure whose shape is already wrong (no NULL dereference on failure) */
#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        CHECK(c);                                                                                  \
        if (!(c)) return;                                                                          \
    } while (0)
#define REQUIRE_EQ(a, b)                                                                           \
    do {                                                                                           \
        CHECK_EQ_INT(a, b);                                                                        \
        if ((long long)(a) != (long long)(b)) return;                                              \
    } while (0)
#define LEN(lit) (sizeof(lit) - 1)

/* ---------------------------------------------------------------------------------------------
 * Traces
 * ------------------------------------------------------------------------------------------- */

/* resource_spans {
 *   resource {
 *     attributes { key: "service.name" value { string_value: "checkout" } }
 *     attributes { key: "host.cpus" value { int_value: 8 } }
 *     dropped_attributes_count: 1
 *   }
 *   scope_spans {
 *     scope { name: "io.opentelemetry.http" version: "1.2.3" }
 *     spans {
 *       trace_id: "\x5b\x8e\xff\xf7\x98\x03\x81\x03\xd2\x69\xb6\x33\x81\x3f\xc6\x0c"
 *       span_id: "\xee\xe1\x9b\x7e\xc3\xc1\xb1\x74"
 *       trace_state: "rojo=00f067aa0ba902b7"
 *       parent_span_id: "\xee\xe1\x9b\x7e\xc3\xc1\xb1\x73"
 *       flags: 257
 *       name: "GET /api/cart"
 *       kind: SPAN_KIND_SERVER
 *       start_time_unix_nano: 1544712660000000000
 *       end_time_unix_nano: 1544712661000000000
 *       attributes { key: "http.status_code" value { int_value: 200 } }
 *       attributes { key: "ratio" value { double_value: 0.25 } }
 *       attributes { key: "ok" value { bool_value: true } }
 *       dropped_attributes_count: 3
 *       events {
 *         time_unix_nano: 1544712660500000000
 *         name: "cache miss"
 *         attributes { key: "key" value { string_value: "cart:42" } }
 *       }
 *       dropped_events_count: 1
 *       links {
 *         trace_id: "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"
 *         span_id: "\x11\x12\x13\x14\x15\x16\x17\x18"
 *         trace_state: "k=v"
 *         attributes { key: "link.kind" value { string_value: "follows" } }
 *         flags: 1
 *       }
 *       dropped_links_count: 2
 *       status { message: "upstream timeout" code: STATUS_CODE_ERROR }
 *     }
 *     spans {
 *       trace_id: "\x5b\x8e\xff\xf7\x98\x03\x81\x03\xd2\x69\xb6\x33\x81\x3f\xc6\x0c"
 *       span_id: "\x00\x00\x00\x00\x00\x00\x00\x01"
 *       name: "SELECT carts"
 *       kind: SPAN_KIND_CLIENT
 *       start_time_unix_nano: 1544712660100000000
 *       end_time_unix_nano: 1544712660200000000
 *       status { }
 *     }
 *   }
 *   schema_url: "https://opentelemetry.io/schemas/1.26.0"
 * }
 * resource_spans {
 *   scope_spans {
 *     spans {
 *       trace_id: "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
 *       span_id: "\x01\x02\x03\x04\x05\x06\x07\x08"
 *       name: "orphan"
 *     }
 *   }
 * } */
/* protoc --encode of the text-format request in a comment above (529 bytes) */
static const uint8_t TRACES_PB[] =
    "\x0a\xe4\x03\x0a\x2f\x0a\x1a\x0a\x0c\x73\x65\x72\x76\x69\x63\x65\x2e\x6e\x61\x6d"
    "\x65\x12\x0a\x0a\x08\x63\x68\x65\x63\x6b\x6f\x75\x74\x0a\x0f\x0a\x09\x68\x6f\x73"
    "\x74\x2e\x63\x70\x75\x73\x12\x02\x18\x08\x10\x01\x12\x87\x03\x0a\x1e\x0a\x15\x69"
    "\x6f\x2e\x6f\x70\x65\x6e\x74\x65\x6c\x65\x6d\x65\x74\x72\x79\x2e\x68\x74\x74\x70"
    "\x12\x05\x31\x2e\x32\x2e\x33\x12\xa2\x02\x0a\x10\x5b\x8e\xff\xf7\x98\x03\x81\x03"
    "\xd2\x69\xb6\x33\x81\x3f\xc6\x0c\x12\x08\xee\xe1\x9b\x7e\xc3\xc1\xb1\x74\x1a\x15"
    "\x72\x6f\x6a\x6f\x3d\x30\x30\x66\x30\x36\x37\x61\x61\x30\x62\x61\x39\x30\x32\x62"
    "\x37\x22\x08\xee\xe1\x9b\x7e\xc3\xc1\xb1\x73\x2a\x0d\x47\x45\x54\x20\x2f\x61\x70"
    "\x69\x2f\x63\x61\x72\x74\x30\x02\x39\x00\x48\x59\xe3\xfa\xeb\x6f\x15\x41\x00\x12"
    "\xf4\x1e\xfb\xeb\x6f\x15\x4a\x17\x0a\x10\x68\x74\x74\x70\x2e\x73\x74\x61\x74\x75"
    "\x73\x5f\x63\x6f\x64\x65\x12\x03\x18\xc8\x01\x4a\x12\x0a\x05\x72\x61\x74\x69\x6f"
    "\x12\x09\x21\x00\x00\x00\x00\x00\x00\xd0\x3f\x4a\x08\x0a\x02\x6f\x6b\x12\x02\x10"
    "\x01\x50\x03\x5a\x27\x09\x00\xad\x26\x01\xfb\xeb\x6f\x15\x12\x0a\x63\x61\x63\x68"
    "\x65\x20\x6d\x69\x73\x73\x1a\x10\x0a\x03\x6b\x65\x79\x12\x09\x0a\x07\x63\x61\x72"
    "\x74\x3a\x34\x32\x60\x01\x6a\x3e\x0a\x10\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a"
    "\x0b\x0c\x0d\x0e\x0f\x10\x12\x08\x11\x12\x13\x14\x15\x16\x17\x18\x1a\x03\x6b\x3d"
    "\x76\x22\x16\x0a\x09\x6c\x69\x6e\x6b\x2e\x6b\x69\x6e\x64\x12\x09\x0a\x07\x66\x6f"
    "\x6c\x6c\x6f\x77\x73\x35\x01\x00\x00\x00\x70\x02\x7a\x14\x12\x10\x75\x70\x73\x74"
    "\x72\x65\x61\x6d\x20\x74\x69\x6d\x65\x6f\x75\x74\x18\x02\x85\x01\x01\x01\x00\x00"
    "\x12\x40\x0a\x10\x5b\x8e\xff\xf7\x98\x03\x81\x03\xd2\x69\xb6\x33\x81\x3f\xc6\x0c"
    "\x12\x08\x00\x00\x00\x00\x00\x00\x00\x01\x2a\x0c\x53\x45\x4c\x45\x43\x54\x20\x63"
    "\x61\x72\x74\x73\x30\x03\x39\x00\x29\x4f\xe9\xfa\xeb\x6f\x15\x41\x00\x0a\x45\xef"
    "\xfa\xeb\x6f\x15\x7a\x00\x1a\x27\x68\x74\x74\x70\x73\x3a\x2f\x2f\x6f\x70\x65\x6e"
    "\x74\x65\x6c\x65\x6d\x65\x74\x72\x79\x2e\x69\x6f\x2f\x73\x63\x68\x65\x6d\x61\x73"
    "\x2f\x31\x2e\x32\x36\x2e\x30\x0a\x28\x12\x26\x12\x24\x0a\x10\xff\xff\xff\xff\xff"
    "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x12\x08\x01\x02\x03\x04\x05\x06\x07"
    "\x08\x2a\x06\x6f\x72\x70\x68\x61\x6e";

static const char TRACES_JSON[] =
    "{\"resourceSpans\": [\n"
    " {\"resource\": {\"attributes\": [\n"
    "    {\"key\": \"service.name\", \"value\": {\"stringValue\": \"checkout\"}},\n"
    "    {\"key\": \"host.cpus\", \"value\": {\"intValue\": \"8\"}}],\n"
    "   \"droppedAttributesCount\": 1},\n"
    "  \"schemaUrl\": \"https://opentelemetry.io/schemas/1.26.0\",\n"
    "  \"scopeSpans\": [{\n"
    "   \"scope\": {\"name\": \"io.opentelemetry.http\", \"version\": \"1.2.3\"},\n"
    "   \"spans\": [\n"
    "    {\"traceId\": \"5B8EFFF798038103D269B633813FC60C\",\n"
    "     \"spanId\": \"eee19b7ec3c1b174\",\n"
    "     \"parentSpanId\": \"eee19b7ec3c1b173\",\n"
    "     \"traceState\": \"rojo=00f067aa0ba902b7\",\n"
    "     \"name\": \"GET /api/cart\",\n"
    "     \"kind\": 2,\n"
    "     \"startTimeUnixNano\": \"1544712660000000000\",\n"
    "     \"endTimeUnixNano\": \"1544712661000000000\",\n"
    "     \"flags\": 257,\n"
    "     \"attributes\": [\n"
    "      {\"key\": \"http.status_code\", \"value\": {\"intValue\": \"200\"}},\n"
    "      {\"key\": \"ratio\", \"value\": {\"doubleValue\": 0.25}},\n"
    "      {\"key\": \"ok\", \"value\": {\"boolValue\": true}}],\n"
    "     \"droppedAttributesCount\": 3,\n"
    "     \"events\": [{\"timeUnixNano\": \"1544712660500000000\", \"name\": \"cache miss\",\n"
    "                 \"attributes\": [{\"key\": \"key\", \"value\": {\"stringValue\": "
    "\"cart:42\"}}]}],\n"
    "     \"droppedEventsCount\": 1,\n"
    "     \"links\": [{\"traceId\": \"0102030405060708090a0b0c0d0e0f10\",\n"
    "                \"spanId\": \"1112131415161718\", \"traceState\": \"k=v\", \"flags\": 1,\n"
    "                \"attributes\": [{\"key\": \"link.kind\",\n"
    "                                \"value\": {\"stringValue\": \"follows\"}}]}],\n"
    "     \"droppedLinksCount\": 2,\n"
    "     \"status\": {\"code\": 2, \"message\": \"upstream timeout\"}},\n"
    "    {\"traceId\": \"5b8efff798038103d269b633813fc60c\",\n"
    "     \"spanId\": \"0000000000000001\",\n"
    "     \"parentSpanId\": \"\",\n"
    "     \"name\": \"SELECT carts\",\n"
    "     \"kind\": \"SPAN_KIND_CLIENT\",\n"
    "     \"startTimeUnixNano\": 1544712660100000000,\n"
    "     \"endTimeUnixNano\": \"1544712660200000000\",\n"
    "     \"attributes\": [],\n"
    "     \"status\": {}}]}]},\n"
    " {\"scopeSpans\": [{\"spans\": [{\"traceId\": \"ffffffffffffffffffffffffffffffff\",\n"
    "                              \"spanId\": \"0102030405060708\", \"name\": \"orphan\"}]}]}\n"
    "]}\n";

/* ProtobufCBinaryData equals the bytes written as hex */
static bool bin_is(ProtobufCBinaryData b, const char *hex)
{
    size_t n = strlen(hex) / 2;
    if (b.len != n || (n && !b.data)) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1 || b.data[i] != v) return false;
    }
    return true;
}

/* the value of attribute key among kv[0..n) (first match), NULL if absent */
static const pc_anyvalue *attr(pc_keyvalue *const *kv, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (kv[i] && kv[i]->key && strcmp(kv[i]->key, key) == 0) return kv[i]->value;
    return NULL;
}

static const char *attr_str(pc_keyvalue *const *kv, size_t n, const char *key)
{
    const pc_anyvalue *v = attr(kv, n, key);
    return v && v->value_case == AV(STRING_VALUE) ? v->string_value : NULL;
}

#define ATTR_STR(m, key) attr_str((m)->attributes, (m)->n_attributes, key)

static void check_span0(const pc_span *s)
{
    CHECK(bin_is(s->trace_id, "5b8efff798038103d269b633813fc60c"));
    CHECK(bin_is(s->span_id, "eee19b7ec3c1b174"));
    CHECK(bin_is(s->parent_span_id, "eee19b7ec3c1b173"));
    CHECK_STR(s->trace_state, "rojo=00f067aa0ba902b7");
    CHECK_EQ_INT(s->flags, 257);
    CHECK_STR(s->name, "GET /api/cart");
    CHECK_EQ_INT(s->kind, OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER);
    CHECK(s->start_time_unix_nano == UINT64_C(1544712660000000000));
    CHECK(s->end_time_unix_nano == UINT64_C(1544712661000000000));
    CHECK_EQ_INT(s->dropped_attributes_count, 3);
    CHECK_EQ_INT(s->dropped_events_count, 1);
    CHECK_EQ_INT(s->dropped_links_count, 2);
    REQUIRE_EQ(s->n_attributes, 3);
    const pc_anyvalue *v = attr(s->attributes, 3, "http.status_code");
    CHECK(v && v->value_case == AV(INT_VALUE) && v->int_value == 200);
    v = attr(s->attributes, 3, "ratio");
    CHECK(v && v->value_case == AV(DOUBLE_VALUE) && v->double_value == 0.25);
    v = attr(s->attributes, 3, "ok");
    CHECK(v && v->value_case == AV(BOOL_VALUE) && v->bool_value);
    CHECK_STR(s->attributes[0]->key, "http.status_code"); /* order kept */
    CHECK_STR(s->attributes[2]->key, "ok");
    REQUIRE_EQ(s->n_events, 1);
    const TR(Span__Event) *e = s->events[0];
    CHECK(e->time_unix_nano == UINT64_C(1544712660500000000));
    CHECK_STR(e->name, "cache miss");
    CHECK_STR(ATTR_STR(e, "key"), "cart:42");
    CHECK_EQ_INT(e->dropped_attributes_count, 0);
    REQUIRE_EQ(s->n_links, 1);
    const TR(Span__Link) *l = s->links[0];
    CHECK(bin_is(l->trace_id, "0102030405060708090a0b0c0d0e0f10"));
    CHECK(bin_is(l->span_id, "1112131415161718"));
    CHECK_STR(l->trace_state, "k=v");
    CHECK_EQ_INT(l->flags, 1);
    CHECK_STR(ATTR_STR(l, "link.kind"), "follows");
    REQUIRE(s->status != NULL);
    CHECK_EQ_INT(s->status->code,
                 OPENTELEMETRY__PROTO__TRACE__V1__STATUS__STATUS_CODE__STATUS_CODE_ERROR);
    CHECK_STR(s->status->message, "upstream timeout");
}

static void check_traces(const ProtobufCMessage *m)
{
    REQUIRE(m && m->descriptor == pc_signal_infos[PC_SIGNAL_TRACES].request);
    const pc_traces_request *r = (const pc_traces_request *)m;
    REQUIRE_EQ(r->n_resource_spans, 2);
    const pc_resource_spans *rs = r->resource_spans[0];
    CHECK_STR(rs->schema_url, "https://opentelemetry.io/schemas/1.26.0");
    REQUIRE(rs->resource != NULL);
    CHECK_EQ_INT(rs->resource->dropped_attributes_count, 1);
    REQUIRE_EQ(rs->resource->n_attributes, 2);
    CHECK_STR(ATTR_STR(rs->resource, "service.name"), "checkout");
    const pc_anyvalue *v = attr(rs->resource->attributes, 2, "host.cpus");
    CHECK(v && v->value_case == AV(INT_VALUE) && v->int_value == 8);
    REQUIRE_EQ(rs->n_scope_spans, 1);
    const pc_scope_spans *ss = rs->scope_spans[0];
    REQUIRE(ss->scope != NULL);
    CHECK_STR(ss->scope->name, "io.opentelemetry.http");
    CHECK_STR(ss->scope->version, "1.2.3");
    CHECK_STR(ss->schema_url, "");
    REQUIRE_EQ(ss->n_spans, 2);
    check_span0(ss->spans[0]);
    const pc_span *s = ss->spans[1];
    CHECK(bin_is(s->trace_id, "5b8efff798038103d269b633813fc60c"));
    CHECK(bin_is(s->span_id, "0000000000000001"));
    CHECK_EQ_INT(s->parent_span_id.len, 0);
    CHECK_STR(s->name, "SELECT carts");
    CHECK_EQ_INT(s->kind, OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_CLIENT);
    CHECK(s->start_time_unix_nano == UINT64_C(1544712660100000000)); /* sent as a JSON number */
    CHECK(s->end_time_unix_nano == UINT64_C(1544712660200000000));
    CHECK_EQ_INT(s->n_attributes, 0);
    CHECK_EQ_INT(s->n_events + s->n_links + s->flags, 0);
    CHECK(s->status != NULL); /* present though empty */
    if (s->status) CHECK_EQ_INT(s->status->code, 0);

    rs = r->resource_spans[1];
    CHECK(rs->resource == NULL);
    CHECK_STR(rs->schema_url, "");
    REQUIRE_EQ(rs->n_scope_spans, 1);
    CHECK(rs->scope_spans[0]->scope == NULL);
    REQUIRE_EQ(rs->scope_spans[0]->n_spans, 1);
    s = rs->scope_spans[0]->spans[0];
    CHECK(bin_is(s->trace_id, "ffffffffffffffffffffffffffffffff"));
    CHECK(bin_is(s->span_id, "0102030405060708"));
    CHECK_STR(s->name, "orphan");
    CHECK(s->status == NULL);
}

/* ---------------------------------------------------------------------------------------------
 * Metrics
 * ------------------------------------------------------------------------------------------- */

/* resource_metrics {
 *   resource { attributes { key: "service.name" value { string_value: "api" } } }
 *   scope_metrics {
 *     scope { name: "meter" }
 *     metrics {
 *       name: "queue.depth" description: "items waiting" unit: "{item}"
 *       gauge {
 *         data_points {
 *           time_unix_nano: 1700000000000000000 as_double: 12.5
 *           attributes { key: "queue" value { string_value: "a" } }
 *         }
 *         data_points { time_unix_nano: 1700000000000000000 as_int: -7 }
 *       }
 *     }
 *     metrics {
 *       name: "requests" unit: "1"
 *       sum {
 *         aggregation_temporality: AGGREGATION_TEMPORALITY_CUMULATIVE
 *         is_monotonic: true
 *         data_points {
 *           start_time_unix_nano: 1699999990000000000
 *           time_unix_nano: 1700000000000000000
 *           as_int: 9007199254740993
 *           exemplars {
 *             time_unix_nano: 1699999995000000000
 *             as_double: 1.5
 *             trace_id: "\x5b\x8e\xff\xf7\x98\x03\x81\x03\xd2\x69\xb6\x33\x81\x3f\xc6\x0c"
 *             span_id: "\xee\xe1\x9b\x7e\xc3\xc1\xb1\x74"
 *             filtered_attributes { key: "user" value { string_value: "u1" } }
 *           }
 *         }
 *       }
 *     }
 *     metrics {
 *       name: "latency" unit: "ms"
 *       histogram {
 *         aggregation_temporality: AGGREGATION_TEMPORALITY_DELTA
 *         data_points {
 *           start_time_unix_nano: 1 time_unix_nano: 2 count: 6 sum: 40.5
 *           bucket_counts: [1, 2, 3] explicit_bounds: [5, 10.5] min: 0.5 max: 20 flags: 1
 *         }
 *         data_points { time_unix_nano: 3 count: 0 sum: 0 }
 *         data_points { time_unix_nano: 4 count: 2 bucket_counts: [2] }
 *       }
 *     }
 *     metrics {
 *       name: "size"
 *       exponential_histogram {
 *         aggregation_temporality: AGGREGATION_TEMPORALITY_DELTA
 *         data_points {
 *           time_unix_nano: 5 count: 10 sum: -3.25 scale: -2 zero_count: 1 zero_threshold: 1e-9
 *           positive { offset: -3 bucket_counts: [4, 5] }
 *           negative { offset: 2 bucket_counts: [0] }
 *           min: -8 max: 64
 *         }
 *       }
 *     }
 *     metrics {
 *       name: "rpc.duration"
 *       summary {
 *         data_points {
 *           time_unix_nano: 6 count: 100 sum: 250.75
 *           quantile_values { quantile: 0.5 value: 2 }
 *           quantile_values { quantile: 0.99 value: 9.5 }
 *         }
 *       }
 *     }
 *   }
 * } */
/* protoc --encode of the text-format request in a comment above (600 bytes) */
static const uint8_t METRICS_PB[] =
    "\x0a\xd5\x04\x0a\x17\x0a\x15\x0a\x0c\x73\x65\x72\x76\x69\x63\x65\x2e\x6e\x61\x6d"
    "\x65\x12\x05\x0a\x03\x61\x70\x69\x12\xb9\x04\x0a\x07\x0a\x05\x6d\x65\x74\x65\x72"
    "\x12\x5c\x0a\x0b\x71\x75\x65\x75\x65\x2e\x64\x65\x70\x74\x68\x12\x0d\x69\x74\x65"
    "\x6d\x73\x20\x77\x61\x69\x74\x69\x6e\x67\x1a\x06\x7b\x69\x74\x65\x6d\x7d\x2a\x36"
    "\x0a\x20\x19\x00\x00\x2a\x36\xfe\x9c\x97\x17\x21\x00\x00\x00\x00\x00\x00\x29\x40"
    "\x3a\x0c\x0a\x05\x71\x75\x65\x75\x65\x12\x03\x0a\x01\x61\x0a\x12\x19\x00\x00\x2a"
    "\x36\xfe\x9c\x97\x17\x31\xf9\xff\xff\xff\xff\xff\xff\xff\x12\x6e\x0a\x08\x72\x65"
    "\x71\x75\x65\x73\x74\x73\x1a\x01\x31\x3a\x5f\x0a\x59\x11\x00\x1c\x1e\xe2\xfb\x9c"
    "\x97\x17\x19\x00\x00\x2a\x36\xfe\x9c\x97\x17\x2a\x3c\x11\x00\x0e\x24\x0c\xfd\x9c"
    "\x97\x17\x19\x00\x00\x00\x00\x00\x00\xf8\x3f\x22\x08\xee\xe1\x9b\x7e\xc3\xc1\xb1"
    "\x74\x2a\x10\x5b\x8e\xff\xf7\x98\x03\x81\x03\xd2\x69\xb6\x33\x81\x3f\xc6\x0c\x3a"
    "\x0c\x0a\x04\x75\x73\x65\x72\x12\x04\x0a\x02\x75\x31\x31\x01\x00\x00\x00\x00\x00"
    "\x20\x00\x10\x02\x18\x01\x12\xaa\x01\x0a\x07\x6c\x61\x74\x65\x6e\x63\x79\x1a\x02"
    "\x6d\x73\x4a\x9a\x01\x0a\x64\x11\x01\x00\x00\x00\x00\x00\x00\x00\x19\x02\x00\x00"
    "\x00\x00\x00\x00\x00\x21\x06\x00\x00\x00\x00\x00\x00\x00\x29\x00\x00\x00\x00\x00"
    "\x40\x44\x40\x32\x18\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00"
    "\x00\x03\x00\x00\x00\x00\x00\x00\x00\x3a\x10\x00\x00\x00\x00\x00\x00\x14\x40\x00"
    "\x00\x00\x00\x00\x00\x25\x40\x50\x01\x59\x00\x00\x00\x00\x00\x00\xe0\x3f\x61\x00"
    "\x00\x00\x00\x00\x00\x34\x40\x0a\x12\x19\x03\x00\x00\x00\x00\x00\x00\x00\x29\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x0a\x1c\x19\x04\x00\x00\x00\x00\x00\x00\x00\x21\x02"
    "\x00\x00\x00\x00\x00\x00\x00\x32\x08\x02\x00\x00\x00\x00\x00\x00\x00\x10\x01\x12"
    "\x5c\x0a\x04\x73\x69\x7a\x65\x52\x54\x0a\x50\x19\x05\x00\x00\x00\x00\x00\x00\x00"
    "\x21\x0a\x00\x00\x00\x00\x00\x00\x00\x29\x00\x00\x00\x00\x00\x00\x0a\xc0\x30\x03"
    "\x39\x01\x00\x00\x00\x00\x00\x00\x00\x42\x06\x08\x05\x12\x02\x04\x05\x4a\x05\x08"
    "\x04\x12\x01\x00\x61\x00\x00\x00\x00\x00\x00\x20\xc0\x69\x00\x00\x00\x00\x00\x00"
    "\x50\x40\x71\x95\xd6\x26\xe8\x0b\x2e\x11\x3e\x10\x01\x12\x55\x0a\x0c\x72\x70\x63"
    "\x2e\x64\x75\x72\x61\x74\x69\x6f\x6e\x5a\x45\x0a\x43\x19\x06\x00\x00\x00\x00\x00"
    "\x00\x00\x21\x64\x00\x00\x00\x00\x00\x00\x00\x29\x00\x00\x00\x00\x00\x58\x6f\x40"
    "\x32\x12\x09\x00\x00\x00\x00\x00\x00\xe0\x3f\x11\x00\x00\x00\x00\x00\x00\x00\x40"
    "\x32\x12\x09\xae\x47\xe1\x7a\x14\xae\xef\x3f\x11\x00\x00\x00\x00\x00\x00\x23\x40";

static const char METRICS_JSON[] =
    "{\"resourceMetrics\": [{\n"
    " \"resource\": {\"attributes\": [{\"key\": \"service.name\", \"value\": {\"stringValue\": "
    "\"api\"}}]},\n"
    " \"scopeMetrics\": [{\n"
    "  \"scope\": {\"name\": \"meter\"},\n"
    "  \"metrics\": [\n"
    "   {\"name\": \"queue.depth\", \"description\": \"items waiting\", \"unit\": \"{item}\",\n"
    "    \"gauge\": {\"dataPoints\": [\n"
    "     {\"timeUnixNano\": \"1700000000000000000\", \"asDouble\": 12.5,\n"
    "      \"attributes\": [{\"key\": \"queue\", \"value\": {\"stringValue\": \"a\"}}]},\n"
    "     {\"timeUnixNano\": \"1700000000000000000\", \"asInt\": \"-7\"}]}},\n"
    "   {\"name\": \"requests\", \"unit\": \"1\",\n"
    "    \"sum\": {\"aggregationTemporality\": 2, \"isMonotonic\": true, \"dataPoints\": [\n"
    "     {\"startTimeUnixNano\": \"1699999990000000000\", \"timeUnixNano\": "
    "\"1700000000000000000\",\n"
    "      \"asInt\": \"9007199254740993\",\n"
    "      \"exemplars\": [{\"timeUnixNano\": \"1699999995000000000\", \"asDouble\": 1.5,\n"
    "                     \"traceId\": \"5b8efff798038103d269b633813fc60c\",\n"
    "                     \"spanId\": \"eee19b7ec3c1b174\",\n"
    "                     \"filteredAttributes\": [{\"key\": \"user\",\n"
    "                                             \"value\": {\"stringValue\": \"u1\"}}]}]}]}},\n"
    "   {\"name\": \"latency\", \"unit\": \"ms\",\n"
    "    \"histogram\": {\"aggregationTemporality\": \"AGGREGATION_TEMPORALITY_DELTA\",\n"
    "     \"dataPoints\": [\n"
    "      {\"startTimeUnixNano\": \"1\", \"timeUnixNano\": \"2\", \"count\": \"6\", \"sum\": "
    "40.5,\n"
    "       \"bucketCounts\": [\"1\", \"2\", 3], \"explicitBounds\": [5, 10.5],\n"
    "       \"min\": 0.5, \"max\": 20, \"flags\": 1},\n"
    "      {\"timeUnixNano\": \"3\", \"count\": \"0\", \"sum\": 0},\n"
    "      {\"timeUnixNano\": \"4\", \"count\": 2, \"bucketCounts\": [\"2\"]}]}},\n"
    "   {\"name\": \"size\",\n"
    "    \"exponentialHistogram\": {\"aggregationTemporality\": 1, \"dataPoints\": [\n"
    "     {\"timeUnixNano\": \"5\", \"count\": \"10\", \"sum\": -3.25, \"scale\": -2,\n"
    "      \"zeroCount\": \"1\", \"zeroThreshold\": 1e-9,\n"
    "      \"positive\": {\"offset\": -3, \"bucketCounts\": [\"4\", \"5\"]},\n"
    "      \"negative\": {\"offset\": 2, \"bucketCounts\": [\"0\"]},\n"
    "      \"min\": -8, \"max\": 64}]}},\n"
    "   {\"name\": \"rpc.duration\",\n"
    "    \"summary\": {\"dataPoints\": [\n"
    "     {\"timeUnixNano\": \"6\", \"count\": \"100\", \"sum\": 250.75,\n"
    "      \"quantileValues\": [{\"quantile\": 0.5, \"value\": 2},\n"
    "                         {\"quantile\": 0.99, \"value\": 9.5}]}]}}\n"
    "  ]}]}]}\n";

static void check_gauge_sum(MT(Metric) *const *ms)
{
    const MT(Metric) *m = ms[0];
    CHECK_STR(m->name, "queue.depth");
    CHECK_STR(m->description, "items waiting");
    CHECK_STR(m->unit, "{item}");
    REQUIRE_EQ(m->data_case, MC(METRIC__DATA_GAUGE));
    REQUIRE_EQ(m->gauge->n_data_points, 2);
    const MT(NumberDataPoint) *p = m->gauge->data_points[0];
    CHECK(p->time_unix_nano == UINT64_C(1700000000000000000));
    CHECK(p->start_time_unix_nano == 0);
    CHECK_EQ_INT(p->value_case, MC(NUMBER_DATA_POINT__VALUE_AS_DOUBLE));
    CHECK(p->as_double == 12.5);
    CHECK_STR(ATTR_STR(p, "queue"), "a");
    p = m->gauge->data_points[1];
    CHECK_EQ_INT(p->value_case, MC(NUMBER_DATA_POINT__VALUE_AS_INT));
    CHECK_EQ_INT(p->as_int, -7);
    CHECK_EQ_INT(p->n_attributes, 0);

    m = ms[1];
    CHECK_STR(m->name, "requests");
    CHECK_STR(m->description, "");
    CHECK_STR(m->unit, "1");
    REQUIRE_EQ(m->data_case, MC(METRIC__DATA_SUM));
    CHECK_EQ_INT(m->sum->aggregation_temporality,
                 MC(AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE));
    CHECK_EQ_INT(m->sum->is_monotonic, 1);
    REQUIRE_EQ(m->sum->n_data_points, 1);
    p = m->sum->data_points[0];
    CHECK(p->start_time_unix_nano == UINT64_C(1699999990000000000));
    CHECK(p->time_unix_nano == UINT64_C(1700000000000000000));
    CHECK_EQ_INT(p->value_case, MC(NUMBER_DATA_POINT__VALUE_AS_INT));
    CHECK(p->as_int == INT64_C(9007199254740993)); /* 2^53 + 1: not a double */
    REQUIRE_EQ(p->n_exemplars, 1);
    const MT(Exemplar) *x = p->exemplars[0];
    CHECK(x->time_unix_nano == UINT64_C(1699999995000000000));
    CHECK_EQ_INT(x->value_case, MC(EXEMPLAR__VALUE_AS_DOUBLE));
    CHECK(x->as_double == 1.5);
    CHECK(bin_is(x->trace_id, "5b8efff798038103d269b633813fc60c"));
    CHECK(bin_is(x->span_id, "eee19b7ec3c1b174"));
    CHECK_STR(attr_str(x->filtered_attributes, x->n_filtered_attributes, "user"), "u1");
}

static void check_histogram(const MT(Metric) * m)
{
    CHECK_STR(m->name, "latency");
    CHECK_STR(m->unit, "ms");
    REQUIRE_EQ(m->data_case, MC(METRIC__DATA_HISTOGRAM));
    /* sent as the enum's name */
    CHECK_EQ_INT(m->histogram->aggregation_temporality,
                 MC(AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_DELTA));
    REQUIRE_EQ(m->histogram->n_data_points, 3);
    const MT(HistogramDataPoint) *h = m->histogram->data_points[0];
    CHECK(h->start_time_unix_nano == 1 && h->time_unix_nano == 2);
    CHECK(h->count == 6);
    CHECK_EQ_INT(h->_sum_case, MC(HISTOGRAM_DATA_POINT___SUM_SUM));
    CHECK(h->sum == 40.5);
    CHECK_EQ_INT(h->_min_case, MC(HISTOGRAM_DATA_POINT___MIN_MIN));
    CHECK(h->min == 0.5);
    CHECK_EQ_INT(h->_max_case, MC(HISTOGRAM_DATA_POINT___MAX_MAX));
    CHECK(h->max == 20);
    CHECK_EQ_INT(h->flags, 1);
    REQUIRE_EQ(h->n_bucket_counts, 3);
    CHECK(h->bucket_counts[0] == 1 && h->bucket_counts[1] == 2 && h->bucket_counts[2] == 3);
    REQUIRE_EQ(h->n_explicit_bounds, 2);
    CHECK(h->explicit_bounds[0] == 5 && h->explicit_bounds[1] == 10.5);
    /* an explicitly present sum of 0 stays present; min and max stay absent */
    h = m->histogram->data_points[1];
    CHECK(h->time_unix_nano == 3 && h->count == 0);
    CHECK_EQ_INT(h->_sum_case, MC(HISTOGRAM_DATA_POINT___SUM_SUM));
    CHECK(h->sum == 0);
    CHECK_EQ_INT(h->_min_case, MC(HISTOGRAM_DATA_POINT___MIN__NOT_SET));
    CHECK_EQ_INT(h->_max_case, MC(HISTOGRAM_DATA_POINT___MAX__NOT_SET));
    CHECK_EQ_INT(h->n_bucket_counts, 0);
    /* no sum at all */
    h = m->histogram->data_points[2];
    CHECK(h->time_unix_nano == 4 && h->count == 2);
    CHECK_EQ_INT(h->_sum_case, MC(HISTOGRAM_DATA_POINT___SUM__NOT_SET));
    REQUIRE_EQ(h->n_bucket_counts, 1);
    CHECK(h->bucket_counts[0] == 2);
}

static void check_exp_summary(MT(Metric) *const *ms)
{
    const MT(Metric) *m = ms[0];
    CHECK_STR(m->name, "size");
    REQUIRE_EQ(m->data_case, MC(METRIC__DATA_EXPONENTIAL_HISTOGRAM));
    const MT(ExponentialHistogram) *eh = m->exponential_histogram;
    CHECK_EQ_INT(eh->aggregation_temporality,
                 MC(AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_DELTA));
    REQUIRE_EQ(eh->n_data_points, 1);
    const MT(ExponentialHistogramDataPoint) *e = eh->data_points[0];
    CHECK(e->time_unix_nano == 5 && e->count == 10 && e->zero_count == 1);
    CHECK_EQ_INT(e->_sum_case, MC(EXPONENTIAL_HISTOGRAM_DATA_POINT___SUM_SUM));
    CHECK(e->sum == -3.25);
    CHECK_EQ_INT(e->scale, -2);
    CHECK(e->zero_threshold == 1e-9);
    CHECK_EQ_INT(e->_min_case, MC(EXPONENTIAL_HISTOGRAM_DATA_POINT___MIN_MIN));
    CHECK(e->min == -8);
    CHECK_EQ_INT(e->_max_case, MC(EXPONENTIAL_HISTOGRAM_DATA_POINT___MAX_MAX));
    CHECK(e->max == 64);
    REQUIRE(e->positive && e->negative);
    CHECK_EQ_INT(e->positive->offset, -3);
    REQUIRE_EQ(e->positive->n_bucket_counts, 2);
    CHECK(e->positive->bucket_counts[0] == 4 && e->positive->bucket_counts[1] == 5);
    CHECK_EQ_INT(e->negative->offset, 2);
    REQUIRE_EQ(e->negative->n_bucket_counts, 1);
    CHECK(e->negative->bucket_counts[0] == 0);

    m = ms[1];
    CHECK_STR(m->name, "rpc.duration");
    REQUIRE_EQ(m->data_case, MC(METRIC__DATA_SUMMARY));
    REQUIRE_EQ(m->summary->n_data_points, 1);
    const MT(SummaryDataPoint) *s = m->summary->data_points[0];
    CHECK(s->time_unix_nano == 6 && s->count == 100 && s->sum == 250.75);
    REQUIRE_EQ(s->n_quantile_values, 2);
    CHECK(s->quantile_values[0]->quantile == 0.5 && s->quantile_values[0]->value == 2);
    CHECK(s->quantile_values[1]->quantile == 0.99 && s->quantile_values[1]->value == 9.5);
}

static void check_metrics(const ProtobufCMessage *msg)
{
    REQUIRE(msg && msg->descriptor == pc_signal_infos[PC_SIGNAL_METRICS].request);
    const pc_metrics_request *r = (const pc_metrics_request *)msg;
    REQUIRE_EQ(r->n_resource_metrics, 1);
    const MT(ResourceMetrics) *rm = r->resource_metrics[0];
    REQUIRE(rm->resource != NULL);
    CHECK_STR(ATTR_STR(rm->resource, "service.name"), "api");
    REQUIRE_EQ(rm->n_scope_metrics, 1);
    const MT(ScopeMetrics) *sm = rm->scope_metrics[0];
    REQUIRE(sm->scope != NULL);
    CHECK_STR(sm->scope->name, "meter");
    CHECK_STR(sm->scope->version, "");
    REQUIRE_EQ(sm->n_metrics, 5);
    check_gauge_sum(sm->metrics);
    check_histogram(sm->metrics[2]);
    check_exp_summary(sm->metrics + 3);
}

/* ---------------------------------------------------------------------------------------------
 * Logs
 * ------------------------------------------------------------------------------------------- */

/* resource_logs {
 *   resource { attributes { key: "service.name" value { string_value: "worker" } } }
 *   scope_logs {
 *     scope { name: "logger" attributes { key: "lib" value { string_value: "slog" } } }
 *     log_records {
 *       time_unix_nano: 1700000000000000001
 *       observed_time_unix_nano: 1700000000000000002
 *       severity_number: SEVERITY_NUMBER_INFO
 *       severity_text: "INFO"
 *       body { string_value: "user logged in" }
 *       attributes { key: "user.id" value { int_value: 42 } }
 *       dropped_attributes_count: 1
 *       flags: 1
 *       trace_id: "\x5b\x8e\xff\xf7\x98\x03\x81\x03\xd2\x69\xb6\x33\x81\x3f\xc6\x0c"
 *       span_id: "\xee\xe1\x9b\x7e\xc3\xc1\xb1\x74"
 *       event_name: "login"
 *     }
 *     log_records {
 *       severity_number: SEVERITY_NUMBER_WARN
 *       body { kvlist_value { values { key: "a" value { array_value {
 *         values { int_value: 1 } values { bytes_value: "\x00\x01" } } } } } }
 *     }
 *     log_records { body { } }
 *     schema_url: "https://opentelemetry.io/schemas/1.24.0"
 *   }
 * } */
/* protoc --encode of the text-format request in a comment above (234 bytes) */
static const uint8_t LOGS_PB[] =
    "\x0a\xe7\x01\x0a\x1a\x0a\x18\x0a\x0c\x73\x65\x72\x76\x69\x63\x65\x2e\x6e\x61\x6d"
    "\x65\x12\x08\x0a\x06\x77\x6f\x72\x6b\x65\x72\x12\xc8\x01\x0a\x17\x0a\x06\x6c\x6f"
    "\x67\x67\x65\x72\x1a\x0d\x0a\x03\x6c\x69\x62\x12\x06\x0a\x04\x73\x6c\x6f\x67\x12"
    "\x65\x09\x01\x00\x2a\x36\xfe\x9c\x97\x17\x10\x09\x1a\x04\x49\x4e\x46\x4f\x2a\x10"
    "\x0a\x0e\x75\x73\x65\x72\x20\x6c\x6f\x67\x67\x65\x64\x20\x69\x6e\x32\x0d\x0a\x07"
    "\x75\x73\x65\x72\x2e\x69\x64\x12\x02\x18\x2a\x38\x01\x45\x01\x00\x00\x00\x4a\x10"
    "\x5b\x8e\xff\xf7\x98\x03\x81\x03\xd2\x69\xb6\x33\x81\x3f\xc6\x0c\x52\x08\xee\xe1"
    "\x9b\x7e\xc3\xc1\xb1\x74\x59\x02\x00\x2a\x36\xfe\x9c\x97\x17\x62\x05\x6c\x6f\x67"
    "\x69\x6e\x12\x19\x10\x0d\x2a\x15\x32\x13\x0a\x11\x0a\x01\x61\x12\x0c\x2a\x0a\x0a"
    "\x02\x18\x01\x0a\x04\x3a\x02\x00\x01\x12\x02\x2a\x00\x1a\x27\x68\x74\x74\x70\x73"
    "\x3a\x2f\x2f\x6f\x70\x65\x6e\x74\x65\x6c\x65\x6d\x65\x74\x72\x79\x2e\x69\x6f\x2f"
    "\x73\x63\x68\x65\x6d\x61\x73\x2f\x31\x2e\x32\x34\x2e\x30";

static const char LOGS_JSON[] =
    "{\"resourceLogs\": [{\n"
    " \"resource\": {\"attributes\": [{\"key\": \"service.name\", \"value\": {\"stringValue\": "
    "\"worker\"}}]},\n"
    " \"scopeLogs\": [{\n"
    "  \"scope\": {\"name\": \"logger\",\n"
    "            \"attributes\": [{\"key\": \"lib\", \"value\": {\"stringValue\": \"slog\"}}]},\n"
    "  \"schemaUrl\": \"https://opentelemetry.io/schemas/1.24.0\",\n"
    "  \"logRecords\": [\n"
    "   {\"timeUnixNano\": \"1700000000000000001\", \"observedTimeUnixNano\": "
    "\"1700000000000000002\",\n"
    "    \"severityNumber\": 9, \"severityText\": \"INFO\",\n"
    "    \"body\": {\"stringValue\": \"user logged in\"},\n"
    "    \"attributes\": [{\"key\": \"user.id\", \"value\": {\"intValue\": \"42\"}}],\n"
    "    \"droppedAttributesCount\": 1, \"flags\": 1,\n"
    "    \"traceId\": \"5b8efff798038103d269b633813fc60c\", \"spanId\": \"eee19b7ec3c1b174\",\n"
    "    \"eventName\": \"login\"},\n"
    "   {\"severityNumber\": \"SEVERITY_NUMBER_WARN\",\n"
    "    \"body\": {\"kvlistValue\": {\"values\": [{\"key\": \"a\", \"value\": {\"arrayValue\":\n"
    "      {\"values\": [{\"intValue\": \"1\"}, {\"bytesValue\": \"AAE=\"}]}}}]}}},\n"
    "   {\"body\": {}}\n"
    "  ]}]}]}\n";

static void check_logs(const ProtobufCMessage *msg)
{
    REQUIRE(msg && msg->descriptor == pc_signal_infos[PC_SIGNAL_LOGS].request);
    const pc_logs_request *r = (const pc_logs_request *)msg;
    REQUIRE_EQ(r->n_resource_logs, 1);
    const LG(ResourceLogs) *rl = r->resource_logs[0];
    REQUIRE(rl->resource != NULL);
    CHECK_STR(ATTR_STR(rl->resource, "service.name"), "worker");
    REQUIRE_EQ(rl->n_scope_logs, 1);
    const LG(ScopeLogs) *sl = rl->scope_logs[0];
    CHECK_STR(sl->schema_url, "https://opentelemetry.io/schemas/1.24.0");
    REQUIRE(sl->scope != NULL);
    CHECK_STR(sl->scope->name, "logger");
    CHECK_STR(ATTR_STR(sl->scope, "lib"), "slog");
    REQUIRE_EQ(sl->n_log_records, 3);
    const LG(LogRecord) *l = sl->log_records[0];
    CHECK(l->time_unix_nano == UINT64_C(1700000000000000001));
    CHECK(l->observed_time_unix_nano == UINT64_C(1700000000000000002));
    CHECK_EQ_INT(l->severity_number,
                 OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_INFO);
    CHECK_STR(l->severity_text, "INFO");
    CHECK(l->body && l->body->value_case == AV(STRING_VALUE));
    if (l->body) CHECK_STR(l->body->string_value, "user logged in");
    const pc_anyvalue *v = attr(l->attributes, l->n_attributes, "user.id");
    CHECK(v && v->value_case == AV(INT_VALUE) && v->int_value == 42);
    CHECK_EQ_INT(l->dropped_attributes_count, 1);
    CHECK_EQ_INT(l->flags, 1);
    CHECK(bin_is(l->trace_id, "5b8efff798038103d269b633813fc60c"));
    CHECK(bin_is(l->span_id, "eee19b7ec3c1b174"));
    CHECK_STR(l->event_name, "login");

    l = sl->log_records[1];
    CHECK_EQ_INT(l->severity_number,
                 OPENTELEMETRY__PROTO__LOGS__V1__SEVERITY_NUMBER__SEVERITY_NUMBER_WARN);
    CHECK(l->time_unix_nano == 0 && l->trace_id.len == 0);
    REQUIRE(l->body && l->body->value_case == AV(KVLIST_VALUE));
    REQUIRE_EQ(l->body->kvlist_value->n_values, 1);
    const pc_keyvalue *kv = l->body->kvlist_value->values[0];
    CHECK_STR(kv->key, "a");
    REQUIRE(kv->value && kv->value->value_case == AV(ARRAY_VALUE));
    REQUIRE_EQ(kv->value->array_value->n_values, 2);
    v = kv->value->array_value->values[0];
    CHECK(v->value_case == AV(INT_VALUE) && v->int_value == 1);
    v = kv->value->array_value->values[1];
    CHECK(v->value_case == AV(BYTES_VALUE) && bin_is(v->bytes_value, "0001"));

    l = sl->log_records[2];
    CHECK(l->body != NULL); /* an empty AnyValue is still a body */
    if (l->body) CHECK_EQ_INT(l->body->value_case, AV(_NOT_SET));
    CHECK_EQ_INT(l->severity_number, 0);
}

/* ---------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------- */

typedef void (*check_fn)(const ProtobufCMessage *m);

static const struct fixture {
    pc_signal sig;
    const char *json;
    const uint8_t *pb;
    size_t pb_len;
    check_fn check;
    size_t items, resources;
} FIXTURES[] = {
    {PC_SIGNAL_TRACES, TRACES_JSON, TRACES_PB, LEN(TRACES_PB), check_traces, 3, 2},
    {PC_SIGNAL_METRICS, METRICS_JSON, METRICS_PB, LEN(METRICS_PB), check_metrics, 8, 1},
    {PC_SIGNAL_LOGS, LOGS_JSON, LOGS_PB, LEN(LOGS_PB), check_logs, 3, 1},
};
#define N_FIXTURES (sizeof(FIXTURES) / sizeof(FIXTURES[0]))

static pc_batch *decode_ok(pc_signal sig, const void *data, size_t len, bool json)
{
    pc_batch *b = (pc_batch *)1;
    pc_error err = {0};
    int rc = pc_batch_decode(sig, data, len, json, NULL, &b, &err);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "  decode %s (%s) failed: %s\n", pc_signal_infos[sig].name,
                json ? "JSON" : "protobuf", err.msg);
        return NULL;
    }
    CHECK(b != NULL && b != (pc_batch *)1);
    if (!b || b == (pc_batch *)1) return NULL;
    CHECK_EQ_INT(b->signal, sig);
    CHECK(b->req == NULL && b->msg != NULL);
    CHECK_EQ_INT(atomic_load(&b->refs), 1);
    return b;
}

/* PC_EINVAL with err containing want, and no batch */
static void decode_fails(pc_signal sig, const void *data, size_t len, bool json, const char *want)
{
    pc_batch *b = (pc_batch *)1;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_decode(sig, data, len, json, NULL, &b, &err), PC_EINVAL);
    CHECK(b == NULL);
    CHECK_CONTAINS(err.msg, want);
    if (b && b != (pc_batch *)1) pc_batch_unref(b);
}

static void decode_json_fails(pc_signal sig, const char *json, const char *want)
{
    decode_fails(sig, json, strlen(json), true, want);
}

static bool same_bytes(const pc_buf *a, const uint8_t *b, size_t blen, const char *what)
{
    if (a->len == blen && (blen == 0 || memcmp(a->data, b, blen) == 0)) return true;
    size_t i = 0;
    while (i < a->len && i < blen && a->data[i] == b[i])
        i++;
    fprintf(stderr, "  %s: %zu vs %zu bytes, first difference at offset %zu\n", what, a->len, blen,
            i);
    return false;
}

static bool same_message(const pc_batch *a, const pc_batch *b)
{
    pc_buf pa = {0}, pb = {0};
    pc_batch_encode_proto(a, &pa);
    pc_batch_encode_proto(b, &pb);
    bool eq = same_bytes(&pa, pb.data, pb.len, "messages differ");
    pc_buf_free(&pa);
    pc_buf_free(&pb);
    return eq;
}

/* A Resource with one string attribute, from the batch arena (as the resource processor does). */
static pc_resource *new_resource(pc_batch *b, const char *key, const char *val)
{
    pc_resource *r = pc_arena_calloc(b->arena, 1, sizeof(*r));
    opentelemetry__proto__resource__v1__resource__init(r);
    pc_keyvalue *kv = pc_arena_calloc(b->arena, 1, sizeof(*kv));
    opentelemetry__proto__common__v1__key_value__init(kv);
    kv->key = pc_arena_strndup(b->arena, key, strlen(key));
    kv->value = pc_arena_calloc(b->arena, 1, sizeof(pc_anyvalue));
    opentelemetry__proto__common__v1__any_value__init(kv->value);
    kv->value->value_case = AV(STRING_VALUE);
    kv->value->string_value = pc_arena_strndup(b->arena, val, strlen(val));
    r->attributes = pc_arena_alloc(b->arena, sizeof(pc_keyvalue *));
    r->attributes[0] = kv;
    r->n_attributes = 1;
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------- */

static void test_signal_table(void)
{
    static const char *const names[] = {"profiles", "traces", "metrics", "logs"};
    for (int s = 0; s < PC_SIGNAL_COUNT; s++) {
        pc_signal out = PC_SIGNAL_COUNT;
        CHECK_EQ_INT(pc_signal_parse(names[s], strlen(names[s]), &out), 0);
        CHECK_EQ_INT(out, s);
        CHECK_STR(pc_signal_infos[s].name, names[s]);
        CHECK(pc_signal_infos[s].request != NULL && pc_signal_infos[s].response != NULL);
    }
    pc_signal out = PC_SIGNAL_LOGS;
    /* the length decides: a prefix of a longer buffer parses, near misses do not */
    CHECK_EQ_INT(pc_signal_parse("tracesXYZ", 6, &out), 0);
    CHECK_EQ_INT(out, PC_SIGNAL_TRACES);
    out = PC_SIGNAL_LOGS;
    CHECK_EQ_INT(pc_signal_parse("trace", 5, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_signal_parse("traces", 5, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_signal_parse("Traces", 6, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_signal_parse("logs ", 5, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_signal_parse("", 0, &out), PC_EINVAL);
    CHECK_EQ_INT(pc_signal_parse("spans", 5, &out), PC_EINVAL);
    CHECK_EQ_INT(out, PC_SIGNAL_LOGS); /* untouched on failure */

    const pc_signal_info *t = &pc_signal_infos[PC_SIGNAL_TRACES];
    CHECK_STR(t->http_path, "/v1/traces");
    CHECK_STR(t->grpc_path, "/opentelemetry.proto.collector.trace.v1.TraceService/Export");
    CHECK_STR(t->request->name, "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest");
    CHECK_STR(t->response->name,
              "opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse");
    CHECK_STR(t->endpoint_key, "traces_endpoint");
    const pc_signal_info *m = &pc_signal_infos[PC_SIGNAL_METRICS];
    CHECK_STR(m->http_path, "/v1/metrics");
    CHECK_STR(m->grpc_path, "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export");
    CHECK_STR(m->request->name,
              "opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest");
    CHECK_STR(m->endpoint_key, "metrics_endpoint");
    const pc_signal_info *l = &pc_signal_infos[PC_SIGNAL_LOGS];
    CHECK_STR(l->http_path, "/v1/logs");
    CHECK_STR(l->grpc_path, "/opentelemetry.proto.collector.logs.v1.LogsService/Export");
    CHECK_STR(l->request->name, "opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest");
    CHECK_STR(l->response->name, "opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse");
    CHECK_STR(pc_signal_infos[PC_SIGNAL_PROFILES].http_path, "/v1development/profiles");
    CHECK(pc_signal_infos[PC_SIGNAL_PROFILES].request == PC_REQUEST_DESC);
}

static void test_empty(void)
{
    for (int s = PC_SIGNAL_TRACES; s < PC_SIGNAL_COUNT; s++) {
        pc_batch *b = pc_batch_new_signal((pc_signal)s);
        CHECK(b != NULL);
        if (!b) continue;
        CHECK_EQ_INT(b->signal, s);
        CHECK(b->req == NULL && b->msg != NULL);
        CHECK(b->msg && b->msg->descriptor == pc_signal_infos[s].request);
        CHECK(pc_batch_message(b) == b->msg);
        CHECK_EQ_INT(pc_batch_items(b), 0);
        CHECK_EQ_INT(pc_batch_n_resources(b), 0);
        CHECK_EQ_INT(pc_batch_counts(b).samples, 0);
        pc_buf out = {0};
        pc_batch_encode_proto(b, &out);
        CHECK_EQ_INT(out.len, 0);
        pc_buf_free(&out);
        pc_batch_encode_json(b, &out);
        CHECK_STR((const char *)out.data, "{}");
        pc_buf_free(&out);
        pc_batch_unref(b);

        /* an empty body is an empty request in both encodings */
        b = decode_ok((pc_signal)s, "", 0, false);
        if (b) CHECK_EQ_INT(pc_batch_n_resources(b), 0);
        pc_batch_unref(b);
        b = decode_ok((pc_signal)s, "{}", 2, true);
        if (b) CHECK_EQ_INT(pc_batch_items(b), 0);
        pc_batch_unref(b);
    }
    pc_batch *p = pc_batch_new_signal(PC_SIGNAL_PROFILES);
    CHECK(p && p->signal == PC_SIGNAL_PROFILES && p->req && p->req->dictionary && !p->msg);
    if (p) CHECK_EQ_INT(pc_batch_items(p), 0);
    pc_batch_unref(p);
}

/* JSON -> check -> protobuf == protoc's bytes; protoc's bytes -> check; JSON of that -> check,
 * the same message, and the same JSON again. */
static void round_trip(const struct fixture *f, pc_buf *json_out)
{
    const char *name = pc_signal_infos[f->sig].name;
    pc_batch *bj = decode_ok(f->sig, f->json, strlen(f->json), true);
    if (!bj) return;
    f->check(bj->msg);
    CHECK_EQ_INT(pc_batch_items(bj), f->items);
    CHECK_EQ_INT(pc_batch_n_resources(bj), f->resources);
    pc_buf pb = {0};
    pc_batch_encode_proto(bj, &pb);
    if (!same_bytes(&pb, f->pb, f->pb_len, name))
        CHECK(!"JSON input does not pack to protoc's bytes");
    pc_buf_free(&pb);

    pc_batch *bp = decode_ok(f->sig, f->pb, f->pb_len, false);
    if (bp) {
        f->check(bp->msg);
        CHECK_EQ_INT(pc_batch_items(bp), f->items);
        CHECK(same_message(bj, bp));
        pc_batch_encode_proto(bp, &pb);
        CHECK(same_bytes(&pb, f->pb, f->pb_len, name));
        pc_buf_free(&pb);

        pc_batch_encode_json(bp, json_out);
        CHECK(json_out->len > 0 && json_out->data[json_out->len] == 0);
        pc_batch *bj2 = decode_ok(f->sig, json_out->data, json_out->len, true);
        if (bj2) {
            f->check(bj2->msg);
            CHECK(same_message(bj2, bp));
            pc_buf j2 = {0};
            pc_batch_encode_json(bj2, &j2);
            CHECK(same_bytes(&j2, json_out->data, json_out->len, "JSON is not a fixed point"));
            pc_buf_free(&j2);
        }
        pc_batch_unref(bj2);
    }
    pc_batch_unref(bp);
    pc_batch_unref(bj);
}

static void test_traces(void)
{
    pc_buf j = {0};
    round_trip(&FIXTURES[0], &j);
    const char *t = (const char *)j.data;
    /* ids as lowercase hex, 64-bit integers as strings, enums as integers */
    CHECK_CONTAINS(t, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service."
                      "name\",\"value\":{\"stringValue\":\"checkout\"}},{\"key\":\"host.cpus\","
                      "\"value\":{\"intValue\":\"8\"}}],\"droppedAttributesCount\":1},");
    CHECK_CONTAINS(t, "\"spans\":[{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":"
                      "\"eee19b7ec3c1b174\",\"traceState\":\"rojo=00f067aa0ba902b7\","
                      "\"parentSpanId\":\"eee19b7ec3c1b173\",\"name\":\"GET /api/cart\",\"kind\":2,"
                      "\"startTimeUnixNano\":\"1544712660000000000\",\"endTimeUnixNano\":"
                      "\"1544712661000000000\",\"attributes\":[");
    CHECK_CONTAINS(t, "{\"key\":\"ratio\",\"value\":{\"doubleValue\":0.25}}");
    CHECK_CONTAINS(t, "\"links\":[{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":"
                      "\"1112131415161718\",\"traceState\":\"k=v\",\"attributes\":[{\"key\":"
                      "\"link.kind\",\"value\":{\"stringValue\":\"follows\"}}],\"flags\":1}]");
    CHECK_CONTAINS(t, "\"droppedLinksCount\":2,\"status\":{\"message\":\"upstream timeout\","
                      "\"code\":2},\"flags\":257}");
    CHECK_CONTAINS(t, "\"kind\":3,\"startTimeUnixNano\":\"1544712660100000000\"");
    CHECK_CONTAINS(t, "\"status\":{}}");
    CHECK_CONTAINS(t, "{\"resourceSpans\":[");
    CHECK_CONTAINS(t,
                   "],\"schemaUrl\":\"https://opentelemetry.io/schemas/1.26.0\"},{\"scopeSpans\":"
                   "[{\"spans\":[{\"traceId\":\"ffffffffffffffffffffffffffffffff\"");
    CHECK(strstr(t, "parentSpanId\":\"\"") == NULL); /* empty bytes omitted */
    CHECK(strstr(t, "SPAN_KIND") == NULL);
    pc_buf_free(&j);

    /* snake_case keys and unknown keys (a newer client) are accepted */
    const char *snake =
        "{\"resource_spans\":[{\"scope_spans\":[{\"spans\":[{\"trace_id\":"
        "\"000102030405060708090a0b0c0d0e0f\",\"parent_span_id\":\"0102030405060708\","
        "\"start_time_unix_nano\":\"7\",\"futureField\":{\"x\":[1]}}]}]}],\"extra\":true}";
    pc_batch *b = decode_ok(PC_SIGNAL_TRACES, snake, strlen(snake), true);
    if (b) {
        const pc_traces_request *r = (const pc_traces_request *)b->msg;
        CHECK_EQ_INT(pc_batch_items(b), 1);
        if (pc_batch_items(b) == 1) {
            const pc_span *s = r->resource_spans[0]->scope_spans[0]->spans[0];
            CHECK(bin_is(s->trace_id, "000102030405060708090a0b0c0d0e0f"));
            CHECK(bin_is(s->parent_span_id, "0102030405060708"));
            CHECK(s->start_time_unix_nano == 7);
        }
    }
    pc_batch_unref(b);
}

static void test_metrics(void)
{
    pc_buf j = {0};
    round_trip(&FIXTURES[1], &j);
    const char *t = (const char *)j.data;
    CHECK_CONTAINS(t, "\"gauge\":{\"dataPoints\":[{\"timeUnixNano\":\"1700000000000000000\","
                      "\"asDouble\":12.5,\"attributes\":[{\"key\":\"queue\",\"value\":{"
                      "\"stringValue\":\"a\"}}]},{\"timeUnixNano\":\"1700000000000000000\","
                      "\"asInt\":\"-7\"}]}");
    CHECK_CONTAINS(t, "\"sum\":{\"dataPoints\":[{\"startTimeUnixNano\":\"1699999990000000000\","
                      "\"timeUnixNano\":\"1700000000000000000\",\"exemplars\":[{"
                      "\"timeUnixNano\":\"1699999995000000000\",\"asDouble\":1.5,\"spanId\":"
                      "\"eee19b7ec3c1b174\",\"traceId\":\"5b8efff798038103d269b633813fc60c\","
                      "\"filteredAttributes\":[{\"key\":\"user\",\"value\":{\"stringValue\":"
                      "\"u1\"}}]}],\"asInt\":\"9007199254740993\"}],\"aggregationTemporality\":2,"
                      "\"isMonotonic\":true}");
    /* histogram: present sum/min/max written (also a sum of 0), absent ones not */
    CHECK_CONTAINS(t, "\"histogram\":{\"dataPoints\":[{\"startTimeUnixNano\":\"1\","
                      "\"timeUnixNano\":\"2\",\"count\":\"6\",\"sum\":40.5,\"bucketCounts\":["
                      "\"1\",\"2\",\"3\"],\"explicitBounds\":[5,10.5],\"flags\":1,\"min\":0.5,"
                      "\"max\":20},{\"timeUnixNano\":\"3\",\"sum\":0},{\"timeUnixNano\":\"4\","
                      "\"count\":\"2\",\"bucketCounts\":[\"2\"]}],\"aggregationTemporality\":1}");
    CHECK_CONTAINS(t, "\"exponentialHistogram\":{\"dataPoints\":[{\"timeUnixNano\":\"5\","
                      "\"count\":\"10\",\"sum\":-3.25,\"scale\":-2,\"zeroCount\":\"1\","
                      "\"positive\":{\"offset\":-3,\"bucketCounts\":[\"4\",\"5\"]},\"negative\":{"
                      "\"offset\":2,\"bucketCounts\":[\"0\"]},\"min\":-8,\"max\":64,"
                      "\"zeroThreshold\":1e-09}],\"aggregationTemporality\":1}");
    CHECK_CONTAINS(t, "\"summary\":{\"dataPoints\":[{\"timeUnixNano\":\"6\",\"count\":\"100\","
                      "\"sum\":250.75,\"quantileValues\":[{\"quantile\":0.5,\"value\":2},{"
                      "\"quantile\":0.99,\"value\":9.5}]}]}");
    pc_buf_free(&j);

    /* a metric with no data (data oneof unset) counts no points and survives both encodings */
    const char *nodata = "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"name\":\"x\"},"
                         "{\"name\":\"y\",\"gauge\":{}},{\"name\":\"z\",\"summary\":{"
                         "\"dataPoints\":[{},{}]}}]}]}]}";
    pc_batch *b = decode_ok(PC_SIGNAL_METRICS, nodata, strlen(nodata), true);
    if (b) {
        CHECK_EQ_INT(pc_batch_items(b), 2);
        pc_buf out = {0};
        pc_batch_encode_json(b, &out);
        CHECK_STR((const char *)out.data,
                  "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"name\":\"x\"},{"
                  "\"name\":\"y\",\"gauge\":{}},{\"name\":\"z\",\"summary\":{\"dataPoints\":[{},{"
                  "}]}}]}]}]}");
        pc_buf_free(&out);
        pc_batch_encode_proto(b, &out);
        pc_batch *b2 = decode_ok(PC_SIGNAL_METRICS, out.data, out.len, false);
        if (b2) {
            CHECK_EQ_INT(pc_batch_items(b2), 2);
            const MT(Metric) *m = ((const pc_metrics_request *)b2->msg)
                                      ->resource_metrics[0]
                                      ->scope_metrics[0]
                                      ->metrics[1];
            CHECK_EQ_INT(m->data_case, MC(METRIC__DATA_GAUGE)); /* an empty gauge stays a gauge */
        }
        pc_batch_unref(b2);
        pc_buf_free(&out);
    }
    pc_batch_unref(b);
}

static void test_logs(void)
{
    pc_buf j = {0};
    round_trip(&FIXTURES[2], &j);
    const char *t = (const char *)j.data;
    CHECK_CONTAINS(t, "\"logRecords\":[{\"timeUnixNano\":\"1700000000000000001\","
                      "\"severityNumber\":9,\"severityText\":\"INFO\",\"body\":{\"stringValue\":"
                      "\"user logged in\"},\"attributes\":[{\"key\":\"user.id\",\"value\":{"
                      "\"intValue\":\"42\"}}],\"droppedAttributesCount\":1,\"flags\":1,"
                      "\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":"
                      "\"eee19b7ec3c1b174\",\"observedTimeUnixNano\":\"1700000000000000002\","
                      "\"eventName\":\"login\"}");
    CHECK_CONTAINS(t, "{\"severityNumber\":13,\"body\":{\"kvlistValue\":{\"values\":[{\"key\":"
                      "\"a\",\"value\":{\"arrayValue\":{\"values\":[{\"intValue\":\"1\"},{"
                      "\"bytesValue\":\"AAE=\"}]}}}]}}},{\"body\":{}}]");
    CHECK_CONTAINS(t, "\"schemaUrl\":\"https://opentelemetry.io/schemas/1.24.0\"");
    pc_buf_free(&j);
}

static void test_resources(void)
{
    /* traces: read both slots, fill the empty one, replace the other */
    pc_batch *b = decode_ok(PC_SIGNAL_TRACES, TRACES_JSON, strlen(TRACES_JSON), true);
    if (!b) return;
    CHECK_EQ_INT(pc_batch_n_resources(b), 2);
    pc_resource **slot = pc_batch_resource_slot(b, 0);
    CHECK(slot && *slot);
    if (slot && *slot) CHECK_STR(pc_resource_attr_str(NULL, *slot, "service.name"), "checkout");
    slot = pc_batch_resource_slot(b, 1);
    CHECK(slot && *slot == NULL);
    if (slot) *slot = new_resource(b, "service.name", "orphanage");
    slot = pc_batch_resource_slot(b, 0);
    if (slot) *slot = new_resource(b, "deployment.environment", "prod");
    pc_buf out = {0};
    pc_batch_encode_proto(b, &out);
    pc_batch *b2 = decode_ok(PC_SIGNAL_TRACES, out.data, out.len, false);
    pc_buf_free(&out);
    if (b2) {
        const pc_traces_request *r = (const pc_traces_request *)b2->msg;
        CHECK_EQ_INT(r->n_resource_spans, 2);
        if (r->n_resource_spans == 2 && r->resource_spans[0]->resource &&
            r->resource_spans[1]->resource) {
            CHECK_STR(ATTR_STR(r->resource_spans[0]->resource, "deployment.environment"), "prod");
            CHECK(ATTR_STR(r->resource_spans[0]->resource, "service.name") == NULL);
            CHECK_STR(ATTR_STR(r->resource_spans[1]->resource, "service.name"), "orphanage");
            CHECK_STR(r->resource_spans[1]->scope_spans[0]->spans[0]->name, "orphan");
        } else {
            CHECK(!"resources not written");
        }
        CHECK_EQ_INT(pc_batch_items(b2), 3);
    }
    pc_batch_unref(b2);
    pc_batch_encode_json(b, &out);
    CHECK_CONTAINS((const char *)out.data,
                   "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{"
                   "\"stringValue\":\"orphanage\"}}]},\"scopeSpans\":[{\"spans\":[{");
    pc_buf_free(&out);
    pc_batch_unref(b);

    /* metrics and logs: the slot is the ResourceMetrics / ResourceLogs resource */
    for (size_t i = 1; i < N_FIXTURES; i++) {
        const struct fixture *f = &FIXTURES[i];
        b = decode_ok(f->sig, f->pb, f->pb_len, false);
        if (!b) continue;
        CHECK_EQ_INT(pc_batch_n_resources(b), 1);
        slot = pc_batch_resource_slot(b, 0);
        CHECK(slot && *slot);
        if (!slot || !*slot) {
            pc_batch_unref(b);
            continue;
        }
        CHECK_STR(pc_resource_attr_str(NULL, *slot, "service.name"),
                  f->sig == PC_SIGNAL_METRICS ? "api" : "worker");
        *slot = new_resource(b, "service.name", "renamed");
        pc_batch_encode_json(b, &out);
        pc_batch *bj = decode_ok(f->sig, out.data, out.len, true);
        pc_buf_free(&out);
        if (bj) {
            pc_resource **s2 = pc_batch_resource_slot(bj, 0);
            CHECK(s2 && *s2);
            if (s2 && *s2) {
                CHECK_STR(pc_resource_attr_str(NULL, *s2, "service.name"), "renamed");
                CHECK_EQ_INT((*s2)->n_attributes, 1);
            }
            CHECK_EQ_INT(pc_batch_items(bj), f->items);
        }
        pc_batch_unref(bj);
        pc_batch_unref(b);
    }

    /* profiles go through the same interface */
    pc_batch *p = pc_batch_new();
    const char *k = "service.name", *v = "prof";
    pc_batch_add_resource(p, &k, &v, 1, "scope", NULL);
    CHECK_EQ_INT(pc_batch_n_resources(p), 1);
    slot = pc_batch_resource_slot(p, 0);
    CHECK(slot && *slot && *slot == p->req->resource_profiles[0]->resource);
    if (slot && *slot) CHECK_STR(pc_resource_attr_str(NULL, *slot, "service.name"), "prof");
    pc_batch_unref(p);
}

static void test_concat(void)
{
    for (size_t i = 0; i < N_FIXTURES; i++) {
        const struct fixture *f = &FIXTURES[i];
        const char *name = pc_signal_infos[f->sig].name;
        /* JSON-decoded, protobuf-decoded, and edited: three different sources */
        pc_batch *in[3];
        in[0] = decode_ok(f->sig, f->json, strlen(f->json), true);
        in[1] = decode_ok(f->sig, f->pb, f->pb_len, false);
        in[2] = decode_ok(f->sig, f->json, strlen(f->json), true);
        if (!in[0] || !in[1] || !in[2]) {
            for (int k = 0; k < 3; k++)
                pc_batch_unref(in[k]);
            continue;
        }
        *pc_batch_resource_slot(in[2], 0) = new_resource(in[2], "service.name", "third");

        pc_buf p[3] = {{0}}, all = {0};
        for (int k = 0; k < 3; k++) {
            pc_batch_encode_proto(in[k], &p[k]);
            pc_buf_append(&all, p[k].data, p[k].len);
        }
        pc_batch *out = pc_batch_concat(f->sig, in, 3);
        CHECK(out != NULL);
        if (out) {
            CHECK_EQ_INT(out->signal, f->sig);
            CHECK_EQ_INT(atomic_load(&out->refs), 1);
            CHECK(out->msg && out->msg != in[0]->msg);
            CHECK_EQ_INT(pc_batch_items(out), 3 * f->items);
            CHECK_EQ_INT(pc_batch_n_resources(out), 3 * f->resources);
            pc_buf got = {0};
            pc_batch_encode_proto(out, &got);
            if (!same_bytes(&got, all.data, all.len, name))
                CHECK(!"concat is not the three requests in order");
            pc_buf_free(&got);
            /* the inputs are untouched and still owned by the caller */
            for (int k = 0; k < 3; k++) {
                CHECK_EQ_INT(atomic_load(&in[k]->refs), 1);
                pc_batch_encode_proto(in[k], &got);
                CHECK(same_bytes(&got, p[k].data, p[k].len, "input changed"));
                pc_buf_free(&got);
            }
            f->check(in[0]->msg);
        }
        for (int k = 0; k < 3; k++) {
            pc_batch_unref(in[k]);
            pc_buf_free(&p[k]);
        }
        pc_buf_free(&all);
        if (out) {
            /* the output owns its data: readable after the inputs are gone */
            pc_resource **s = pc_batch_resource_slot(out, 2 * f->resources);
            CHECK(s && *s);
            if (s && *s) CHECK_STR(pc_resource_attr_str(NULL, *s, "service.name"), "third");
            s = pc_batch_resource_slot(out, f->resources);
            if (s && *s) CHECK(pc_resource_attr_str(NULL, *s, "service.name") != NULL);
            pc_buf j = {0};
            pc_batch_encode_json(out, &j);
            pc_batch *back = decode_ok(f->sig, j.data, j.len, true);
            if (back) CHECK(same_message(back, out));
            pc_batch_unref(back);
            pc_buf_free(&j);
        }
        pc_batch_unref(out);

        /* nothing to concatenate: an empty request of the signal */
        out = pc_batch_concat(f->sig, NULL, 0);
        CHECK(out && out->signal == f->sig && out->msg);
        if (out) CHECK_EQ_INT(pc_batch_n_resources(out), 0);
        pc_batch_unref(out);
    }
}

static void test_make_writable(void)
{
    for (size_t i = 0; i < N_FIXTURES; i++) {
        const struct fixture *f = &FIXTURES[i];
        pc_batch *b = decode_ok(f->sig, f->json, strlen(f->json), true);
        if (!b) continue;
        pc_batch_set_meta(b, "x-scope-orgid", "tenant-1");

        /* sole owner: nothing is copied */
        pc_batch *same = b;
        pc_batch_make_writable(&same);
        CHECK(same == b);
        CHECK_EQ_INT(atomic_load(&b->refs), 1);

        pc_batch *shared = pc_batch_ref(b);
        CHECK_EQ_INT(atomic_load(&b->refs), 2);
        pc_batch_make_writable(&shared);
        CHECK(shared != b);
        CHECK_EQ_INT(atomic_load(&b->refs), 1);
        CHECK_EQ_INT(atomic_load(&shared->refs), 1);
        CHECK_EQ_INT(shared->signal, f->sig);
        CHECK(shared->req == NULL && shared->msg && shared->msg != b->msg);
        CHECK(shared->arena != b->arena);
        CHECK_STR(pc_batch_get_meta(shared, "x-scope-orgid"), "tenant-1");
        CHECK(same_message(shared, b));
        f->check(shared->msg);
        CHECK_EQ_INT(pc_batch_items(shared), f->items);

        /* edits to the copy do not reach the original */
        pc_resource **slot = pc_batch_resource_slot(shared, 0);
        pc_resource *orig = *pc_batch_resource_slot(b, 0);
        CHECK(slot && *slot && *slot != orig);
        if (slot) *slot = NULL;
        CHECK(*pc_batch_resource_slot(b, 0) == orig);
        f->check(b->msg);
        pc_batch_unref(b); /* the copy outlives the original */
        CHECK_EQ_INT(pc_batch_items(shared), f->items);
        pc_buf j = {0};
        pc_batch_encode_json(shared, &j);
        CHECK(strstr((const char *)j.data, "service.name") == NULL); /* only the copy lost it */
        pc_buf_free(&j);
        pc_batch_unref(shared);
    }
}

/* b as the content of field `field`: tag, length, then what b held. */
static void wrap_field(pc_buf *b, unsigned field)
{
    pc_buf w = {0};
    pb_put_len(&w, field, b->data, b->len);
    pc_buf_free(b);
    *b = w;
}

/* Nested AnyValue arrays in a log body, depth levels of array_value. */
static void nested_logs(pc_buf *out, int depth)
{
    out->len = 0; /* innermost: an empty AnyValue */
    for (int i = 0; i < depth; i++) {
        wrap_field(out, 1); /* ArrayValue.values */
        wrap_field(out, 5); /* AnyValue.array_value */
    }
    wrap_field(out, 5); /* LogRecord.body */
    wrap_field(out, 2); /* ScopeLogs.log_records */
    wrap_field(out, 2); /* ResourceLogs.scope_logs */
    wrap_field(out, 1); /* request.resource_logs */
}

static void test_malformed_proto(void)
{
    for (size_t i = 0; i < N_FIXTURES; i++) {
        const struct fixture *f = &FIXTURES[i];
        char want[128];
        snprintf(want, sizeof want, "cannot decode %s: malformed protobuf",
                 pc_signal_infos[f->sig].request->short_name);
        decode_fails(f->sig, f->pb, f->pb_len - 1, false, want);
        decode_fails(f->sig, f->pb, f->pb_len / 2, false, want);
        decode_fails(f->sig, f->pb, 3, false, want);
        decode_fails(f->sig, "\x0a\x05\x0a", 3, false, want);     /* length past the end */
        decode_fails(f->sig, "\x0a\x02\x0f\x00", 4, false, want); /* bad wire type inside */
        decode_fails(f->sig, "\x0a\x80", 2, false, want);         /* truncated varint */
        decode_fails(f->sig, "\x0a\x00\x02\x00", 4, false, "malformed protobuf (field number 0)");
    }
    CHECK_STR(pc_signal_infos[PC_SIGNAL_TRACES].request->short_name, "ExportTraceServiceRequest");

    /* a body nested past the limit is refused before protobuf-c recurses into it */
    pc_buf buf = {0};
    nested_logs(&buf, 40);
    decode_fails(PC_SIGNAL_LOGS, buf.data, buf.len, false,
                 "cannot decode ExportLogsServiceRequest: nested too deeply");
    nested_logs(&buf, 10);
    pc_batch *b = decode_ok(PC_SIGNAL_LOGS, buf.data, buf.len, false);
    if (b) {
        CHECK_EQ_INT(pc_batch_items(b), 1);
        const pc_anyvalue *v = ((const pc_logs_request *)b->msg)
                                   ->resource_logs[0]
                                   ->scope_logs[0]
                                   ->log_records[0]
                                   ->body;
        int depth = 0;
        while (v && v->value_case == AV(ARRAY_VALUE) && v->array_value->n_values == 1) {
            v = v->array_value->values[0];
            depth++;
        }
        CHECK_EQ_INT(depth, 10);
    }
    pc_batch_unref(b);
    pc_buf_free(&buf);
}

static void test_malformed_json(void)
{
    const pc_signal T = PC_SIGNAL_TRACES, M = PC_SIGNAL_METRICS, L = PC_SIGNAL_LOGS;
    decode_json_fails(T, "{\"resourceSpans\":[", "invalid JSON at line 1");
    decode_json_fails(T, "", "invalid JSON");
    decode_json_fails(L, "[]", "expected an object (got array)");
    /* hex ids: odd length, wrong length, bad digit; the path names the field */
    decode_json_fails(
        T, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"abc\"}]}]}]}",
        "resourceSpans[0].scopeSpans[0].spans[0].traceId: invalid hex: odd length 3");
    decode_json_fails(T,
                      "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{},{\"spanId\":"
                      "\"0102030405060708090a\"}]}]}]}",
                      "resourceSpans[0].scopeSpans[0].spans[1].spanId: invalid length: 20 hex "
                      "digits, want 16");
    decode_json_fails(T,
                      "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"parentSpanId\":"
                      "\"5b8efff798038103d269b633813fc60c\"}]}]}]}",
                      "spans[0].parentSpanId: invalid length: 32 hex digits, want 16");
    decode_json_fails(T,
                      "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"links\":[{\"traceId\":"
                      "\"0102\"}]}]}]}]}",
                      "spans[0].links[0].traceId: invalid length: 4 hex digits, want 32");
    decode_json_fails(L,
                      "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[{\"traceId\":"
                      "\"5b8efff798038103d269b633813fc6zz\"}]}]}]}",
                      "logRecords[0].traceId: invalid hex character");
    decode_json_fails(M,
                      "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"gauge\":{"
                      "\"dataPoints\":[{\"exemplars\":[{\"spanId\":\"eee19b7e\"}]}]}}]}]}]}",
                      "resourceMetrics[0].scopeMetrics[0].metrics[0].gauge.dataPoints[0]."
                      "exemplars[0].spanId: invalid length: 8 hex digits, want 16");
    /* wrong types */
    decode_json_fails(M, "{\"resourceMetrics\":5}",
                      "resourceMetrics: expected an array (got number)");
    decode_json_fails(T,
                      "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"startTimeUnixNano\":"
                      "true}]}]}]}",
                      "spans[0].startTimeUnixNano: not an integer (got boolean)");
    decode_json_fails(T,
                      "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"endTimeUnixNano\":"
                      "\"12x\"}]}]}]}",
                      "spans[0].endTimeUnixNano: not an integer");
    decode_json_fails(T,
                      "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"kind\":"
                      "\"SPAN_KIND_BOGUS\"}]}]}]}",
                      "spans[0].kind: not an integer");
    decode_json_fails(T, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":5}]}]}]}",
                      "spans[0].name: expected a string (got number)");
    decode_json_fails(T, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"flags\":-1}]}]}]}",
                      "spans[0].flags: negative value for an unsigned integer");
    decode_json_fails(T, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"status\":[]}]}]}]}",
                      "spans[0].status: expected an object (got array)");
    decode_json_fails(M,
                      "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"sum\":{"
                      "\"isMonotonic\":\"true\"}}]}]}]}",
                      "metrics[0].sum.isMonotonic: expected a boolean (got string)");
    decode_json_fails(M,
                      "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"gauge\":{"
                      "\"dataPoints\":[{\"asDouble\":\"abc\"}]}}]}]}]}",
                      "gauge.dataPoints[0].asDouble: not a number");
    decode_json_fails(M,
                      "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"histogram\":{"
                      "\"dataPoints\":[{\"bucketCounts\":[\"1\",null]}]}}]}]}]}",
                      "histogram.dataPoints[0].bucketCounts[1]: null is not allowed in an array");
    decode_json_fails(M,
                      "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"histogram\":{"
                      "\"dataPoints\":[{\"sum\":\"forty\"}]}}]}]}]}",
                      "histogram.dataPoints[0].sum: not a number");
    decode_json_fails(M,
                      "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{"
                      "\"exponentialHistogram\":{\"dataPoints\":[{\"scale\":2147483648}]}}]}]}]}",
                      "exponentialHistogram.dataPoints[0].scale: integer out of range");
    decode_json_fails(M,
                      "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"sum\":{"
                      "\"dataPoints\":[{\"timeUnixNano\":\"-5\"}]}}]}]}]}",
                      "sum.dataPoints[0].timeUnixNano: negative value for an unsigned integer");
    decode_json_fails(M,
                      "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"gauge\":{"
                      "\"dataPoints\":[{\"asInt\":\"9223372036854775808\"}]}}]}]}]}",
                      "gauge.dataPoints[0].asInt: integer out of range");
    decode_json_fails(L,
                      "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[{\"severityNumber\":"
                      "1.5}]}]}]}",
                      "logRecords[0].severityNumber: not an integer");
    decode_json_fails(L,
                      "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":[{\"body\":"
                      "\"text\"}]}]}]}",
                      "logRecords[0].body: expected an object (got string)");
    decode_json_fails(L, "{\"resourceLogs\":[{\"resource\":{\"attributes\":{}}}]}",
                      "resourceLogs[0].resource.attributes: expected an array (got object)");
    /* the signals' top-level keys are not interchangeable: a traces body sent to /v1/logs
     * decodes as an empty logs request, which is what the Collector does too */
    pc_batch *b = decode_ok(L, TRACES_JSON, strlen(TRACES_JSON), true);
    if (b) CHECK_EQ_INT(pc_batch_n_resources(b), 0);
    pc_batch_unref(b);
}

int main(void)
{
    RUN(test_signal_table);
    RUN(test_empty);
    RUN(test_traces);
    RUN(test_metrics);
    RUN(test_logs);
    RUN(test_resources);
    RUN(test_concat);
    RUN(test_make_writable);
    RUN(test_malformed_proto);
    RUN(test_malformed_json);
    return check_report();
}
