/* pdata/split.h: one request cut into parts (the kafka exporter's max_message_bytes and partition
 * keys; the batch processor's send_batch_max_size shares the profiles plan). Every signal: parts
 * hold at most the asked number of items, and together exactly the items of the request (a
 * multiset of items with their resource and scope, each resolved by this test on its own), by
 * size, by resource, by trace id; the attribute hash used as the partition key. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "payload.h"
#include "pdata/json.h"
#include "pdata/merge.h"
#include "pdata/split.h"
#include "resolved.h"

/* ---- inputs --------------------------------------------------------------------------------- */

/* Two resources (one in string-table form), three profiles, sample attributes, links, timestamps,
 * a sample-less profile. */
static const char *const profiles_json =
    "{\"resourceProfiles\":["
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"a\"}}]},"
    " \"scopeProfiles\":[{\"scope\":{\"name\":\"s1\"},\"profiles\":["
    "  {\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":["
    "   {\"stackIndex\":1,\"values\":[1]},{\"stackIndex\":2,\"values\":[2],"
    "\"attributeIndices\":[1]},"
    "   {\"stackIndex\":3,\"values\":[3],\"linkIndex\":1},{\"stackIndex\":1,\"values\":[4]},"
    "   {\"stackIndex\":2,\"timestampsUnixNano\":[\"5\",\"6\"]}]},"
    "  {\"sampleType\":{\"typeStrindex\":3,\"unitStrindex\":4},\"samples\":[]}]}]},"
    "{\"resource\":{\"attributes\":[{\"keyStrindex\":8,\"value\":{\"stringValueStrindex\":9}}]},"
    " \"scopeProfiles\":[{\"scope\":{\"name\":\"s2\"},\"profiles\":["
    "  {\"sampleType\":{\"typeStrindex\":3,\"unitStrindex\":4},\"samples\":["
    "   {\"stackIndex\":3,\"values\":[10],\"attributeIndices\":[2]},"
    "{\"stackIndex\":2,\"values\":[20]},"
    "   {\"stackIndex\":1,\"values\":[30],\"linkIndex\":1}]}]}]}],"
    "\"dictionary\":{"
    " \"mappingTable\":[{}],"
    " \"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}]},{\"lines\":[{\"functionIndex\":2}]}"
    ","
    "  {\"lines\":[{\"functionIndex\":3}]}],"
    " \"functionTable\":[{},{\"nameStrindex\":5},{\"nameStrindex\":6},{\"nameStrindex\":7}],"
    " \"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"alloc\",\"bytes\",\"main\",\"work\","
    "\"leaf\",\"service.name\",\"b\",\"thread\"],"
    " \"attributeTable\":[{},{\"keyStrindex\":10,\"value\":{\"stringValue\":\"t1\"}},"
    "  {\"keyStrindex\":10,\"value\":{\"intValue\":\"7\"}}],"
    " \"linkTable\":[{},{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\","
    "\"spanId\":\"0102030405060708\"}],"
    " \"stackTable\":[{},{\"locationIndices\":[1]},{\"locationIndices\":[2,1]},"
    "  {\"locationIndices\":[3,2,1]}]}}";

#define TID(n) "\"traceId\":\"0000000000000000000000000000000" #n "\""
#define SID(n) "\"spanId\":\"000000000000000" #n "\""

static const char *const traces_json =
    "{\"resourceSpans\":["
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"a\"}}]},"
    " \"scopeSpans\":[{\"scope\":{\"name\":\"s1\"},\"spans\":["
    "  {" TID(1) "," SID(1) ",\"name\":\"a1\"},{" TID(2) "," SID(
        2) ",\"name\":\"a2\"},"
           "  {" TID(1) "," SID(
               3) ",\"name\":\"a3\"}]},"
                  "  {\"scope\":{\"name\":\"s2\"},\"spans\":[{" TID(3) "," SID(
                      4) ",\"name\":\"a4\"}]}]},"
                         "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{"
                         "\"stringValue\":\"b\"}}]},"
                         " \"scopeSpans\":[{\"scope\":{\"name\":\"s1\"},\"spans\":["
                         "  {" TID(2) "," SID(5) ",\"name\":\"b1\"},{" TID(1) "," SID(
                             6) ",\"name\":\"b2\"}]}]}]}";

static const char *const metrics_json =
    "{\"resourceMetrics\":["
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"a\"}}]},"
    " \"scopeMetrics\":[{\"scope\":{\"name\":\"m\"},\"metrics\":["
    "  {\"name\":\"g\",\"gauge\":{\"dataPoints\":[{\"asInt\":\"1\"},{\"asInt\":\"2\"},"
    "{\"asInt\":\"3\"},{\"asInt\":\"4\"},{\"asInt\":\"5\"}]}},"
    "  {\"name\":\"s\",\"sum\":{\"aggregationTemporality\":2,\"isMonotonic\":true,"
    "\"dataPoints\":[{\"asDouble\":1.5},{\"asDouble\":2.5}]}},"
    "  {\"name\":\"empty\",\"gauge\":{}}]}]},"
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"b\"}}]},"
    " \"scopeMetrics\":[{\"scope\":{\"name\":\"m\"},\"metrics\":["
    "  {\"name\":\"h\",\"histogram\":{\"aggregationTemporality\":1,\"dataPoints\":["
    "{\"count\":\"3\",\"sum\":6,\"bucketCounts\":[\"1\",\"2\"],\"explicitBounds\":[1]}]}}]}]}]}";

static const char *const logs_json =
    "{\"resourceLogs\":["
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"a\"}}]},"
    " \"scopeLogs\":[{\"scope\":{\"name\":\"l\"},\"logRecords\":["
    "  {" TID(1) ",\"body\":{\"stringValue\":\"x1\"}},{\"body\":{\"stringValue\":\"x2\"}},"
                 "  {" TID(2) ",\"body\":{\"stringValue\":\"x3\"}},{" TID(
                     1) ",\"body\":{\"stringValue\":\"x4\"}}"
                        "]}]},"
                        "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{"
                        "\"stringValue\":\"b\"}}]},"
                        " \"scopeLogs\":[{\"scope\":{\"name\":\"l\"},\"logRecords\":["
                        "  {\"body\":{\"stringValue\":\"y1\"}}]}]}]}";

static pc_batch *decode(pc_signal sig, const char *json)
{
    pc_batch *b = NULL;
    pc_error e = {0};
    if (pc_batch_decode(sig, (const uint8_t *)json, strlen(json), true, NULL, &b, &e) < 0) {
        fprintf(stderr, "decode %s: %s\n", pc_signal_infos[sig].name, e.msg);
        exit(1);
    }
    if (sig == PC_SIGNAL_PROFILES) {
        int64_t rejected = 0;
        if (pc_batch_validate(b, &rejected, &e) < 0 || rejected) {
            fprintf(stderr, "validate: %s\n", e.msg);
            exit(1);
        }
    }
    return b;
}

/* ---- the oracle: every item as a string, with its resource and scope ------------------------ */

/* Traces, metrics (per data point), logs: the item's own bytes with its resource and scope. */
static void packed(pc_buf *o, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *p = malloc(n + 1);
    protobuf_c_message_pack(m, p);
    rs_hex(o, p, n);
    free(p);
}

typedef Opentelemetry__Proto__Metrics__V1__Metric metric;

static void signal_items(const pc_batch *b, rs_lines *out)
{
    const ProtobufCMessage *req = b->msg;
    const ProtobufCFieldDescriptor *f1 =
        protobuf_c_message_descriptor_get_field(req->descriptor, 1);
    size_t nr = *(const size_t *)((const char *)req + f1->quantifier_offset);
    ProtobufCMessage **rv = *(ProtobufCMessage ***)((const char *)req + f1->offset);
    for (size_t r = 0; r < nr; r++) {
        const ProtobufCFieldDescriptor *f2 =
            protobuf_c_message_descriptor_get_field(rv[r]->descriptor, 2);
        size_t ns = *(const size_t *)((const char *)rv[r] + f2->quantifier_offset);
        ProtobufCMessage **sv = *(ProtobufCMessage ***)((const char *)rv[r] + f2->offset);
        pc_resource *res = *pc_batch_resource_slot((pc_batch *)b, r);
        for (size_t s = 0; s < ns; s++) {
            const ProtobufCFieldDescriptor *f3 =
                protobuf_c_message_descriptor_get_field(sv[s]->descriptor, 2);
            const ProtobufCFieldDescriptor *fs =
                protobuf_c_message_descriptor_get_field(sv[s]->descriptor, 1);
            const pc_scope *scope = *(pc_scope **)((const char *)sv[s] + fs->offset);
            size_t ni = *(const size_t *)((const char *)sv[s] + f3->quantifier_offset);
            ProtobufCMessage **iv = *(ProtobufCMessage ***)((const char *)sv[s] + f3->offset);
            for (size_t i = 0; i < ni; i++) {
                pc_buf o = {0};
                if (res) rs_kvs(&o, NULL, res->attributes, res->n_attributes, 0);
                pc_buf_printf(&o, "|%s|", scope ? scope->name : "");
                if (b->signal != PC_SIGNAL_METRICS) {
                    packed(&o, iv[i]);
                    rs_push(out, &o);
                    pc_buf_free(&o);
                    continue;
                }
                /* each data point with its metric's name and kind */
                const metric *m = (const metric *)iv[i];
                ProtobufCMessage *data = m->data_case == 5    ? &m->gauge->base
                                         : m->data_case == 7  ? &m->sum->base
                                         : m->data_case == 9  ? &m->histogram->base
                                         : m->data_case == 10 ? &m->exponential_histogram->base
                                         : m->data_case == 11 ? &m->summary->base
                                                              : NULL;
                const ProtobufCFieldDescriptor *fd =
                    data ? protobuf_c_message_descriptor_get_field(data->descriptor, 1) : NULL;
                size_t nd = fd ? *(const size_t *)((const char *)data + fd->quantifier_offset) : 0;
                ProtobufCMessage **dv =
                    fd ? *(ProtobufCMessage ***)((const char *)data + fd->offset) : NULL;
                if (!nd) { /* a metric without points still must arrive */
                    pc_buf_printf(&o, "%s kind %d empty", m->name, (int)m->data_case);
                    rs_push(out, &o);
                }
                for (size_t k = 0; k < nd; k++) {
                    pc_buf p = {0};
                    pc_buf_printf(&p, "%s%s kind %d ", (const char *)o.data, m->name,
                                  (int)m->data_case);
                    packed(&p, dv[k]);
                    rs_push(out, &p);
                    pc_buf_free(&p);
                }
                pc_buf_free(&o);
            }
        }
    }
}

static void items(const pc_batch *b, rs_lines *out)
{
    if (b->signal == PC_SIGNAL_PROFILES) {
        /* samples only: a profile split across parts has its head line in each */
        rs_lines all = {0};
        rs_resolve(b, &all);
        for (size_t i = 0; i < all.n; i++) {
            pc_buf o = {0};
            if (!strstr(all.v[i], "|stack:")) continue;
            pc_buf_append(&o, all.v[i], strlen(all.v[i]));
            rs_push(out, &o);
            pc_buf_free(&o);
        }
        rs_lines_free(&all);
    } else
        signal_items(b, out);
}

/* The parts hold exactly b's items (as a multiset), each part at most max items (0: any). */
static void check_parts(const pc_batch *b, pc_batch **parts, size_t n, size_t max)
{
    rs_lines want = {0}, got = {0};
    items(b, &want);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = pc_batch_items(parts[i]);
        total += k;
        if (max) CHECK(k <= max);
        CHECK_EQ_INT(parts[i]->signal, b->signal);
        items(parts[i], &got);
    }
    CHECK_EQ_INT(total, pc_batch_items(b));
    CHECK_EQ_INT(got.n, want.n);
    rs_sort(&want);
    rs_sort(&got);
    for (size_t i = 0; i < want.n && i < got.n; i++)
        if (strcmp(want.v[i], got.v[i])) {
            CHECK_STR(got.v[i], want.v[i]);
            break;
        }
    rs_lines_free(&want);
    rs_lines_free(&got);
}

static void free_parts(pc_batch **parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pc_batch_unref(parts[i]);
    free(parts);
}

/* ---- by size -------------------------------------------------------------------------------- */

static void by_size(pc_signal sig, const char *json)
{
    pc_batch *b = decode(sig, json);
    size_t total = pc_batch_items(b);
    for (size_t max = 1; max <= total + 1; max++) {
        pc_batch **parts;
        size_t n = pc_batch_split(b, max, &parts);
        CHECK_EQ_INT(n, max >= total ? 1 : (total + max - 1) / max);
        check_parts(b, parts, n, max);
        if (max >= total) CHECK(parts[0] == b); /* fits: itself, no copy */
        free_parts(parts, n);
    }
    pc_batch_unref(b);
}

static void test_profiles_by_size(void)
{
    by_size(PC_SIGNAL_PROFILES, profiles_json);
}

static void test_traces_by_size(void)
{
    by_size(PC_SIGNAL_TRACES, traces_json);
}

static void test_metrics_by_size(void)
{
    /* 8 data points; a gauge of 5 is cut inside the metric */
    by_size(PC_SIGNAL_METRICS, metrics_json);
}

static void test_logs_by_size(void)
{
    by_size(PC_SIGNAL_LOGS, logs_json);
}

/* A part of a profile split carries only the dictionary entries it reaches. */
static void test_profile_parts_carry_what_they_reach(void)
{
    pc_batch *b = decode(PC_SIGNAL_PROFILES, profiles_json);
    pc_batch **parts;
    size_t n = pc_batch_split(b, 1, &parts);
    CHECK_EQ_INT(n, 8);
    /* the first sample: stack 1 (main) only, no attribute, no link */
    const pc_dictionary *d = parts[0]->req->dictionary;
    CHECK_EQ_INT(d->n_stack_table, 2);
    CHECK_EQ_INT(d->n_function_table, 2);
    CHECK_EQ_INT(d->n_link_table, 1);
    CHECK(d->n_string_table < b->req->dictionary->n_string_table);
    free_parts(parts, n);
    pc_batch_unref(b);
}

/* ---- by resource, by trace id --------------------------------------------------------------- */

static void by_resource(pc_signal sig, const char *json)
{
    pc_batch *b = decode(sig, json);
    pc_batch **parts;
    size_t n = pc_batch_split_resources(b, &parts);
    CHECK_EQ_INT(n, 2);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ_INT(pc_batch_n_resources(parts[i]), 1);
    /* the service names, in order */
    const pc_dictionary *d;
    const pc_resource *r0 = pc_batch_first_resource(parts[0], &d);
    CHECK_STR(pc_resource_attr_str(d, r0, "service.name"), "a");
    const pc_resource *r1 = pc_batch_first_resource(parts[1], &d);
    CHECK_STR(pc_resource_attr_str(d, r1, "service.name"), "b");
    check_parts(b, parts, n, 0);
    free_parts(parts, n);
    pc_batch_unref(b);
}

static void test_by_resource(void)
{
    by_resource(PC_SIGNAL_PROFILES, profiles_json);
    by_resource(PC_SIGNAL_TRACES, traces_json);
    by_resource(PC_SIGNAL_METRICS, metrics_json);
    by_resource(PC_SIGNAL_LOGS, logs_json);
}

static void test_by_trace_id(void)
{
    static const char *const want_traces[] = {"a1,a3,b2", "a2,b1", "a4"};
    pc_batch *b = decode(PC_SIGNAL_TRACES, traces_json);
    pc_batch **parts;
    uint8_t *ids;
    size_t n = pc_batch_split_trace_ids(b, &parts, &ids);
    CHECK_EQ_INT(n, 3);
    for (size_t i = 0; i < n && i < 3; i++) {
        /* trace ids 1, 2, 3 in the order they first appear; every span of a part has it */
        CHECK_EQ_INT(ids[16 * i + 15], (int)i + 1);
        pc_buf names = {0};
        const pc_traces_request *t = (const pc_traces_request *)parts[i]->msg;
        for (size_t r = 0; r < t->n_resource_spans; r++)
            for (size_t s = 0; s < t->resource_spans[r]->n_scope_spans; s++)
                for (size_t k = 0; k < t->resource_spans[r]->scope_spans[s]->n_spans; k++) {
                    const pc_span *sp = t->resource_spans[r]->scope_spans[s]->spans[k];
                    CHECK(sp->trace_id.len == 16 && !memcmp(sp->trace_id.data, ids + 16 * i, 16));
                    pc_buf_printf(&names, "%s%s", names.len ? "," : "", sp->name);
                }
        CHECK_STR((const char *)names.data, want_traces[i]);
        pc_buf_free(&names);
    }
    check_parts(b, parts, n, 0);
    free(ids);
    free_parts(parts, n);
    pc_batch_unref(b);

    /* logs: records without a trace id make a part of their own, with a zero id */
    b = decode(PC_SIGNAL_LOGS, logs_json);
    n = pc_batch_split_trace_ids(b, &parts, &ids);
    CHECK_EQ_INT(n, 3);
    static const uint8_t zero[16];
    CHECK_EQ_INT(ids[15], 1);
    CHECK(!memcmp(ids + 16, zero, 16));
    CHECK_EQ_INT(pc_batch_items(parts[1]), 2); /* x2 and y1 */
    CHECK_EQ_INT(ids[32 + 15], 2);
    check_parts(b, parts, n, 0);
    free(ids);
    free_parts(parts, n);
    pc_batch_unref(b);
}

/* ---- the partition key ---------------------------------------------------------------------- */

static void test_attrs_hash(void)
{
    pc_batch *b = decode(PC_SIGNAL_PROFILES, profiles_json);
    const pc_dictionary *d = b->req->dictionary;
    pc_resource *ra = b->req->resource_profiles[0]->resource;
    pc_resource *rb = b->req->resource_profiles[1]->resource;
    uint64_t ha = pc_attrs_hash(d, ra->attributes, ra->n_attributes);
    uint64_t hb = pc_attrs_hash(d, rb->attributes, rb->n_attributes);
    CHECK(ha != hb);
    /* the same content in the plain form, in another order, hashes the same */
    pc_batch *t = decode(PC_SIGNAL_TRACES,
                         "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
                         "{\"key\":\"x\",\"value\":{\"intValue\":\"1\"}},"
                         "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"b\"}}]}},"
                         "{\"resource\":{\"attributes\":["
                         "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"b\"}},"
                         "{\"key\":\"x\",\"value\":{\"intValue\":\"1\"}}]}},"
                         "{\"resource\":{\"attributes\":["
                         "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"b\"}}]}}]}");
    pc_resource *t0 = *pc_batch_resource_slot(t, 0), *t1 = *pc_batch_resource_slot(t, 1),
                *t2 = *pc_batch_resource_slot(t, 2);
    uint64_t h0 = pc_attrs_hash(NULL, t0->attributes, t0->n_attributes);
    CHECK(h0 == pc_attrs_hash(NULL, t1->attributes, t1->n_attributes));
    CHECK(h0 != pc_attrs_hash(NULL, t2->attributes, t2->n_attributes));
    CHECK(hb == pc_attrs_hash(NULL, t2->attributes, t2->n_attributes)); /* strindex = plain */
    pc_batch_unref(t);
    pc_batch_unref(b);
}

/* A split keeps the request's metadata on every part. */
static void test_parts_keep_metadata(void)
{
    pc_batch *b = decode(PC_SIGNAL_LOGS, logs_json);
    pc_batch_set_meta(b, "x-scope-orgid", "tenant-1");
    pc_batch **parts;
    size_t n = pc_batch_split(b, 2, &parts);
    CHECK_EQ_INT(n, 3);
    for (size_t i = 0; i < n; i++)
        CHECK_STR(pc_batch_get_meta(parts[i], "x-scope-orgid"), "tenant-1");
    free_parts(parts, n);
    pc_batch_unref(b);
}

int main(void)
{
    RUN(test_profiles_by_size);
    RUN(test_traces_by_size);
    RUN(test_metrics_by_size);
    RUN(test_logs_by_size);
    RUN(test_profile_parts_carry_what_they_reach);
    RUN(test_by_resource);
    RUN(test_by_trace_id);
    RUN(test_attrs_hash);
    RUN(test_parts_keep_metadata);
    return check_report();
}
