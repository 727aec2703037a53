/* Processor "tracelink": labels -> links with the right bytes, invalid ids counted and kept,
 * span-only links, remove_attributes false, samples differing only by link stay distinct,
 * custom keys, copy-on-write, and the links come back as trace_id/span_id pprof labels.
 * Span index: spans of a traces batch fill in trace ids (from labels and from zero-trace links)
 * and span names, expire after the ttl, are evicted past max_spans, are shared by instances of
 * the same id only, and the traces pass through untouched. */
#include "pdata/dict.h"
#include "formats/pprof.h"
#include "proc_driver.h"
#include "sdk/processor.h"

/* processors/tracelink.c: what it counted so far */
size_t pc_tracelink_counters(const pc_component *c, pc_proc_counter *out, size_t max);

extern const pc_component_type pc_processor_tracelink;

/* attributes: 1 trace_id T1, 2 span_id S1, 3 thread=main, 4 span_id S2, 5 trace_id "xyz",
 * 6 profile_id 00000000000000ff, 7 traceID (upper case, string_value_strindex), 8 span_id as raw
 * bytes b1..b8, 9 span_id "a1a2" (too short) */
static const char *const input_json =
    "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{"
    "\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":["
    "{\"stackIndex\":1,\"values\":[\"1\"],\"attributeIndices\":[1,2,3]},"
    "{\"stackIndex\":1,\"values\":[\"2\"],\"attributeIndices\":[1,4,3]},"
    "{\"stackIndex\":1,\"values\":[\"3\"],\"attributeIndices\":[5,2]},"
    "{\"stackIndex\":1,\"values\":[\"4\"],\"attributeIndices\":[6,3]},"
    "{\"stackIndex\":1,\"values\":[\"5\"],\"attributeIndices\":[7,8]},"
    "{\"stackIndex\":1,\"values\":[\"6\"],\"attributeIndices\":[9,3]},"
    "{\"stackIndex\":1,\"values\":[\"7\"],\"attributeIndices\":[1,2],\"linkIndex\":1}]}]}]}],"
    "\"dictionary\":{\"locationTable\":[{},{\"address\":\"4096\",\"lines\":[{\"functionIndex\":1}]}"
    "],"
    "\"functionTable\":[{},{\"nameStrindex\":9}],"
    "\"stackTable\":[{},{\"locationIndices\":[1]}],"
    "\"linkTable\":[{\"traceId\":\"00000000000000000000000000000000\",\"spanId\":"
    "\"0000000000000000\"},"
    "{\"traceId\":\"ffffffffffffffffffffffffffffffff\",\"spanId\":\"eeeeeeeeeeeeeeee\"}],"
    "\"attributeTable\":[{},"
    "{\"keyStrindex\":3,\"value\":{\"stringValue\":\"0102030405060708090a0b0c0d0e0f10\"}},"
    "{\"keyStrindex\":4,\"value\":{\"stringValue\":\"a1a2a3a4a5a6a7a8\"}},"
    "{\"keyStrindex\":5,\"value\":{\"stringValue\":\"main\"}},"
    "{\"keyStrindex\":4,\"value\":{\"stringValue\":\"a1a2a3a4a5a6a7a9\"}},"
    "{\"keyStrindex\":3,\"value\":{\"stringValue\":\"xyz\"}},"
    "{\"keyStrindex\":6,\"value\":{\"stringValue\":\"00000000000000ff\"}},"
    "{\"keyStrindex\":7,\"value\":{\"stringValueStrindex\":8}},"
    "{\"keyStrindex\":4,\"value\":{\"bytesValue\":\"sbKztLW2t7g=\"}},"
    "{\"keyStrindex\":4,\"value\":{\"stringValue\":\"a1a2\"}}],"
    "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"trace_id\",\"span_id\",\"thread\","
    "\"profile_id\",\"traceID\",\"0102030405060708090A0B0C0D0E0F10\",\"main\"]}}";

static const uint8_t T1[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t S1[8] = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8};
static const uint8_t S2[8] = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa9};
static const uint8_t S6[8] = {0, 0, 0, 0, 0, 0, 0, 0xff};
static const uint8_t SB[8] = {0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8};
static const uint8_t ZERO[16] = {0};

static driver *make(const char *yaml)
{
    return driver_make(&pc_processor_tracelink, yaml);
}

/* Does sample s link to (trace, span)? */
static int links_to(pc_batch *b, const pc_sample *s, const uint8_t *trace, const uint8_t *span)
{
    const pc_dictionary *d = b->req->dictionary;
    if (s->link_index <= 0 || (size_t)s->link_index >= d->n_link_table) return 0;
    const pc_link *l = d->link_table[s->link_index];
    return l->trace_id.len == 16 && l->span_id.len == 8 && !memcmp(l->trace_id.data, trace, 16) &&
           !memcmp(l->span_id.data, span, 8);
}

static int has_attrs(const pc_sample *s, const int32_t *want, size_t n)
{
    if (s->n_attribute_indices != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (s->attribute_indices[i] != want[i]) return 0;
    return 1;
}

static uint64_t counter(driver *d, const char *name)
{
    pc_proc_counter v[8];
    size_t n = pc_tracelink_counters(&d->c, v, 8);
    return pc_proc_counter_get(v, n, name);
}

static void test_links(void)
{
    driver *d = make("");
    pc_batch *b = driver_run(d, batch_from_json(input_json));
    pc_profile *p = first_profile(b);
    CHECK_EQ_INT(p->n_samples, 7);
    pc_sample **s = p->samples;
    CHECK(links_to(b, s[0], T1, S1));
    CHECK(has_attrs(s[0], (int32_t[]){3}, 1));
    /* identical to s[0] but for the span: a distinct link, and still two samples */
    CHECK(links_to(b, s[1], T1, S2));
    CHECK(has_attrs(s[1], (int32_t[]){3}, 1));
    CHECK(s[0]->link_index != s[1]->link_index);
    CHECK_EQ_INT(s[0]->stack_index, s[1]->stack_index);
    CHECK_EQ_INT(s[0]->values[0], 1);
    CHECK_EQ_INT(s[1]->values[0], 2);
    /* invalid trace id kept; the valid span alone makes a link with a zero trace id */
    CHECK(links_to(b, s[2], ZERO, S1));
    CHECK(has_attrs(s[2], (int32_t[]){5}, 1));
    /* profile_id is a span id key */
    CHECK(links_to(b, s[3], ZERO, S6));
    CHECK(has_attrs(s[3], (int32_t[]){3}, 1));
    /* upper-case hex through string_value_strindex; raw bytes */
    CHECK(links_to(b, s[4], T1, SB));
    CHECK_EQ_INT(s[4]->n_attribute_indices, 0);
    /* a too-short span id: no link, attributes kept */
    CHECK_EQ_INT(s[5]->link_index, 0);
    CHECK(has_attrs(s[5], (int32_t[]){9, 3}, 2));
    /* already linked: untouched */
    CHECK_EQ_INT(s[6]->link_index, 1);
    CHECK(has_attrs(s[6], (int32_t[]){1, 2}, 2));
    /* 2 old links + 5 new ones */
    CHECK_EQ_INT(b->req->dictionary->n_link_table, 7);
    CHECK_EQ_INT(counter(d, "samples_linked"), 5);
    CHECK_EQ_INT(counter(d, "span_only_links"), 2);
    CHECK_EQ_INT(counter(d, "invalid_ids"), 2);
    int64_t rejected = 0;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);
    CHECK_EQ_INT(rejected, 0);

    /* and it survives the wire: encode as OTLP and decode again */
    pc_buf wire = {0};
    pc_batch_encode_proto(b, &wire);
    pc_batch *again = NULL;
    CHECK_EQ_INT(pc_batch_decode_proto(wire.data, wire.len, &again, &err), 0);
    CHECK(links_to(again, first_profile(again)->samples[0], T1, S1));
    pc_batch_unref(again);
    pc_buf_free(&wire);
    driver_free(d);
}

/* Ids of the wrong length are not ids, however they start: a trace id over 32 hex digits (33, 34,
 * 64), a 32-digit (trace-id sized) value or 17 digits under a span key, and hex text of 32 bytes
 * in a bytes value under a span key are all kept as attributes and counted invalid; none is cut
 * down to its first 16 or 8 bytes. A valid pair in the same batch still links. */
static const char *const overlong_json =
    "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{"
    "\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":["
    "{\"stackIndex\":1,\"values\":[\"1\"],\"attributeIndices\":[1,7]},"
    "{\"stackIndex\":1,\"values\":[\"2\"],\"attributeIndices\":[2]},"
    "{\"stackIndex\":1,\"values\":[\"3\"],\"attributeIndices\":[3]},"
    "{\"stackIndex\":1,\"values\":[\"4\"],\"attributeIndices\":[4]},"
    "{\"stackIndex\":1,\"values\":[\"5\"],\"attributeIndices\":[5]},"
    "{\"stackIndex\":1,\"values\":[\"6\"],\"attributeIndices\":[6]},"
    "{\"stackIndex\":1,\"values\":[\"7\"],\"attributeIndices\":[8,7]}]}]}]}],"
    "\"dictionary\":{\"locationTable\":[{},{\"address\":\"4096\",\"lines\":[{\"functionIndex\":1}]}"
    "],\"functionTable\":[{},{\"nameStrindex\":5}],"
    "\"stackTable\":[{},{\"locationIndices\":[1]}],"
    "\"attributeTable\":[{},"
    /* 1: trace id of 33 digits (a valid id plus one) */
    "{\"keyStrindex\":3,\"value\":{\"stringValue\":\"0102030405060708090a0b0c0d0e0f101\"}},"
    /* 2: 34 digits */
    "{\"keyStrindex\":3,\"value\":{\"stringValue\":\"0102030405060708090a0b0c0d0e0f1011\"}},"
    /* 3: 64 digits */
    "{\"keyStrindex\":3,\"value\":{\"stringValue\":"
    "\"0102030405060708090a0b0c0d0e0f100102030405060708090a0b0c0d0e0f10\"}},"
    /* 4: a trace id's 32 digits under the span key */
    "{\"keyStrindex\":4,\"value\":{\"stringValue\":\"0102030405060708090a0b0c0d0e0f10\"}},"
    /* 5: 17 digits under the span key */
    "{\"keyStrindex\":4,\"value\":{\"stringValue\":\"a1a2a3a4a5a6a7a8a\"}},"
    /* 6: the 32 hex characters as a bytes value under the span key */
    "{\"keyStrindex\":4,\"value\":{\"bytesValue\":\"MDEwMjAzMDQwNTA2MDcwODA5MGEwYjBjMGQwZTBmMTA=\"}"
    "},"
    /* 7: a valid span id; 8: a valid trace id */
    "{\"keyStrindex\":4,\"value\":{\"stringValue\":\"a1a2a3a4a5a6a7a8\"}},"
    "{\"keyStrindex\":3,\"value\":{\"stringValue\":\"0102030405060708090a0b0c0d0e0f10\"}}],"
    "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"trace_id\",\"span_id\",\"main\"]}}";

static void test_overlong_ids(void)
{
    driver *d = make("");
    pc_batch *b = driver_run(d, batch_from_json(overlong_json));
    pc_profile *p = first_profile(b);
    CHECK_EQ_INT(p->n_samples, 7);
    pc_sample **s = p->samples;
    /* the over-long trace id is not taken; the valid span id alone links, with a zero trace */
    CHECK(links_to(b, s[0], ZERO, S1));
    CHECK(has_attrs(s[0], (int32_t[]){1}, 1));
    for (size_t i = 1; i <= 5; i++) { /* nothing valid: no link, the attribute stays */
        CHECK_EQ_INT(s[i]->link_index, 0);
        CHECK(has_attrs(s[i], (int32_t[]){(int32_t)i + 1}, 1));
    }
    CHECK(links_to(b, s[6], T1, S1)); /* the control: the exact lengths link */
    CHECK_EQ_INT(s[6]->n_attribute_indices, 0);
    CHECK_EQ_INT(counter(d, "invalid_ids"), 6);
    CHECK_EQ_INT(counter(d, "samples_linked"), 2);
    CHECK_EQ_INT(counter(d, "span_only_links"), 1);
    /* links: the zero link, (0, S1), (T1, S1) */
    CHECK_EQ_INT(b->req->dictionary->n_link_table, 3);
    driver_free(d);
}

static void test_keep_attributes(void)
{
    driver *d = make("remove_attributes: false\n");
    pc_batch *b = driver_run(d, batch_from_json(input_json));
    pc_sample **s = first_profile(b)->samples;
    CHECK(links_to(b, s[0], T1, S1));
    CHECK(has_attrs(s[0], (int32_t[]){1, 2, 3}, 3));
    CHECK(links_to(b, s[4], T1, SB));
    CHECK(has_attrs(s[4], (int32_t[]){7, 8}, 2));
    driver_free(d);
}

static void test_custom_keys(void)
{
    /* only "thread" counts as a span key now: "main" is not hex, so nothing links */
    driver *d = make("trace_id_keys: [tid]\nspan_id_keys: [thread]\n");
    pc_batch *b = driver_run(d, batch_from_json(input_json));
    pc_sample **s = first_profile(b)->samples;
    for (size_t i = 0; i < 6; i++)
        CHECK_EQ_INT(s[i]->link_index, 0);
    CHECK(has_attrs(s[0], (int32_t[]){1, 2, 3}, 3));
    CHECK_EQ_INT(counter(d, "invalid_ids"), 4);
    CHECK_EQ_INT(b->req->dictionary->n_link_table, 2);
    driver_free(d);

    pc_error err = {0};
    d = driver_new(&pc_processor_tracelink, "trace_id_keys: [a]\nspan_id_keys: [a]\n", &err);
    CHECK(d == NULL);
    CHECK_CONTAINS(err.msg, "processors::tracelink: \"a\" is in both");
    d = driver_new(&pc_processor_tracelink, "remove_attributes: maybe\n", &err);
    CHECK(d == NULL);
    CHECK_CONTAINS(err.msg, "remove_attributes");
}

static void test_copy_on_write(void)
{
    driver *d = make("");
    pc_batch *in = batch_from_json(input_json);
    pc_batch_ref(in);
    pc_batch *out = driver_run(d, in);
    CHECK(out != in);
    CHECK(links_to(out, first_profile(out)->samples[0], T1, S1));
    CHECK_EQ_INT(first_profile(in)->samples[0]->link_index, 0);
    CHECK(has_attrs(first_profile(in)->samples[0], (int32_t[]){1, 2, 3}, 3));
    CHECK_EQ_INT(in->req->dictionary->n_link_table, 2);
    pc_batch_unref(in);
    driver_free(d);
}

/* Shutdown waits for a batch still on the thread pool, which is passed on first. */
static void test_shutdown_drains(void)
{
    driver *d = make("");
    d->c.type->consume(&d->c, batch_from_json(input_json), tc_up_done, &d->up);
    d->c.type->shutdown(&d->c, driver_down);
    CHECK_EQ_INT(d->down, 0);
    uv_run(d->c.loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(d->down, 1);
    CHECK_EQ_INT(d->rec.n, 1);
    CHECK_EQ_INT(d->up.calls, 1);
    d->down = 0; /* driver_free shuts down once more: done at once when idle */
    driver_free(d);
}

/* Exported as pprof, the links come back as trace_id / span_id labels. */
typedef struct pprof_ctx {
    int n;
    pc_batch *back;
} pprof_ctx;

static int collect_pprof(const pc_pprof_out *o, void *ud)
{
    pprof_ctx *x = ud;
    pc_error err = {0};
    x->n++;
    if (pc_pprof_decode(o->data, o->len, NULL, &x->back, &err) < 0) {
        fprintf(stderr, "pprof back: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static const char *sample_label(pc_batch *b, const pc_sample *s, const char *key)
{
    const pc_dictionary *d = b->req->dictionary;
    for (size_t i = 0; i < s->n_attribute_indices; i++) {
        const pc_kvu *a = pc_dict_attr_at(d, s->attribute_indices[i]);
        if (a && strcmp(pc_dict_str(d, a->key_strindex), key) == 0)
            return pc_anyvalue_str(d, a->value);
    }
    return NULL;
}

static void test_pprof_labels(void)
{
    driver *d = make("");
    pc_batch *b = driver_run(d, batch_from_json(input_json));
    pprof_ctx x = {0};
    CHECK_EQ_INT(pc_batch_to_pprof(b, collect_pprof, &x), 0);
    CHECK_EQ_INT(x.n, 1);
    if (x.back) {
        pc_profile *p = first_profile(x.back);
        CHECK_EQ_INT(p->n_samples, 7);
        const pc_sample *s0 = p->samples[0], *s3 = p->samples[3];
        CHECK_STR(sample_label(x.back, s0, "trace_id"), "0102030405060708090a0b0c0d0e0f10");
        CHECK_STR(sample_label(x.back, s0, "span_id"), "a1a2a3a4a5a6a7a8");
        CHECK_STR(sample_label(x.back, s0, "thread"), "main");
        CHECK_STR(sample_label(x.back, p->samples[1], "span_id"), "a1a2a3a4a5a6a7a9");
        CHECK(sample_label(x.back, s3, "trace_id") == NULL); /* zero trace id: no label */
        CHECK_STR(sample_label(x.back, s3, "span_id"), "00000000000000ff");
        /* and tracelink turns them back into the same links */
        pc_batch *relinked = driver_run(d, x.back);
        CHECK(links_to(relinked, first_profile(relinked)->samples[0], T1, S1));
        CHECK(links_to(relinked, first_profile(relinked)->samples[3], ZERO, S6));
    }
    driver_free(d);
}

/* ---- span index ------------------------------------------------------------------------ */

extern uint64_t (*pc_tracelink_now_ms)(void);
static uint64_t fake_now = 1000000;
static uint64_t fake_clock(void)
{
    return fake_now;
}

static const uint8_t TX[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                               0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const uint8_t T2[16] = {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
static const uint8_t T3[16] = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
static const uint8_t S3[8] = {0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8};

/* A traces batch of one resource (service.name = service) with n spans, decoded from the
 * protobuf the generated structs pack to, as a receiver would hand it on. */
typedef struct tspan {
    const uint8_t *trace, *span;
    const char *name;
} tspan;

static pc_batch *traces_batch(const char *service, const tspan *spans, size_t n)
{
    pc_span sp[8], *spp[8];
    for (size_t i = 0; i < n && i < 8; i++) {
        sp[i] = (pc_span)OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
        sp[i].trace_id = (ProtobufCBinaryData){16, (uint8_t *)spans[i].trace};
        sp[i].span_id = (ProtobufCBinaryData){8, (uint8_t *)spans[i].span};
        sp[i].name = (char *)spans[i].name;
        spp[i] = &sp[i];
    }
    pc_scope_spans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT, *ssp = &ss;
    ss.n_spans = n;
    ss.spans = spp;
    pc_anyvalue v = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    v.value_case = PC_AV_STRING;
    v.string_value = (char *)service;
    pc_keyvalue kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT, *kvp = &kv;
    kv.key = "service.name";
    kv.value = &v;
    pc_resource res = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    res.n_attributes = 1;
    res.attributes = &kvp;
    pc_resource_spans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT, *rsp = &rs;
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    pc_traces_request req =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    size_t len = protobuf_c_message_get_packed_size(&req.base);
    uint8_t *buf = malloc(len ? len : 1);
    protobuf_c_message_pack(&req.base, buf);
    pc_batch *b = NULL;
    pc_error err = {0};
    if (pc_batch_decode(PC_SIGNAL_TRACES, buf, len, false, NULL, &b, &err) < 0) {
        fprintf(stderr, "traces batch: %s\n", err.msg);
        exit(1);
    }
    free(buf);
    return b;
}

static void index_spans(driver *d, const char *service, const tspan *spans, size_t n)
{
    pc_batch *out = driver_run(d, traces_batch(service, spans, n));
    CHECK(out && out->signal == PC_SIGNAL_TRACES);
}

/* attributes: 1 trace_id T1, 2 span_id S1, 3 thread=main, 4 span_id S2, 5 span.name=custom;
 * links: 1 (zero trace, S1), 2 (TX, S1); resource service.name=checkout.
 * samples: 0 [S1 thread], 1 [S2 thread], 2 [T1 S1], 3 link 1 [thread], 4 link 2 [thread],
 * 5 [S1 span.name], 6 link 1 [span.name] */
static const char *const span_json =
    "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
    "\"value\":{\"stringValue\":\"checkout\"}}]},\"scopeProfiles\":[{\"profiles\":[{"
    "\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":["
    "{\"stackIndex\":1,\"values\":[\"1\"],\"attributeIndices\":[2,3]},"
    "{\"stackIndex\":1,\"values\":[\"2\"],\"attributeIndices\":[4,3]},"
    "{\"stackIndex\":1,\"values\":[\"3\"],\"attributeIndices\":[1,2]},"
    "{\"stackIndex\":1,\"values\":[\"4\"],\"attributeIndices\":[3],\"linkIndex\":1},"
    "{\"stackIndex\":1,\"values\":[\"5\"],\"attributeIndices\":[3],\"linkIndex\":2},"
    "{\"stackIndex\":1,\"values\":[\"6\"],\"attributeIndices\":[2,5]},"
    "{\"stackIndex\":1,\"values\":[\"7\"],\"attributeIndices\":[5],\"linkIndex\":1}]}]}]}],"
    "\"dictionary\":{\"locationTable\":[{},{\"address\":\"4096\",\"lines\":[{\"functionIndex\":1}]}"
    "],"
    "\"functionTable\":[{},{\"nameStrindex\":6}],"
    "\"stackTable\":[{},{\"locationIndices\":[1]}],"
    "\"linkTable\":[{\"traceId\":\"00000000000000000000000000000000\",\"spanId\":"
    "\"0000000000000000\"},"
    "{\"traceId\":\"00000000000000000000000000000000\",\"spanId\":\"a1a2a3a4a5a6a7a8\"},"
    "{\"traceId\":\"ffffffffffffffffffffffffffffffff\",\"spanId\":\"a1a2a3a4a5a6a7a8\"}],"
    "\"attributeTable\":[{},"
    "{\"keyStrindex\":3,\"value\":{\"stringValue\":\"0102030405060708090a0b0c0d0e0f10\"}},"
    "{\"keyStrindex\":4,\"value\":{\"stringValue\":\"a1a2a3a4a5a6a7a8\"}},"
    "{\"keyStrindex\":5,\"value\":{\"stringValue\":\"main\"}},"
    "{\"keyStrindex\":4,\"value\":{\"stringValue\":\"a1a2a3a4a5a6a7a9\"}},"
    "{\"keyStrindex\":7,\"value\":{\"stringValue\":\"custom\"}}],"
    "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"trace_id\",\"span_id\",\"thread\","
    "\"main\",\"span.name\"]}}";

/* The span.name attribute index the sample carries, or 0; its value in *val. */
static int32_t span_name_of(pc_batch *b, const pc_sample *s, const char **val)
{
    const pc_dictionary *d = b->req->dictionary;
    for (size_t i = 0; i < s->n_attribute_indices; i++) {
        const pc_kvu *a = pc_dict_attr_at(d, s->attribute_indices[i]);
        if (a && strcmp(pc_dict_str(d, a->key_strindex), "span.name") == 0) {
            *val = pc_anyvalue_str(d, a->value);
            return s->attribute_indices[i];
        }
    }
    *val = NULL;
    return 0;
}

static const char *const INDEX_CFG = "span_index:\n  enabled: true\n";
static const char *const NAMES_CFG = "span_index:\n  enabled: true\nadd_span_name: true\n";

/* One instance indexes the traces and links the profiles (the same id in both pipelines). */
static void test_index_fills_trace_id(void)
{
    driver *d = make(INDEX_CFG);
    const tspan spans[] = {{T1, S1, "GET /cart"}, {T2, S3, "SELECT"}};
    index_spans(d, "checkout", spans, 2);
    CHECK_EQ_INT(counter(d, "spans_indexed"), 2);
    pc_batch *b = driver_run(d, batch_from_json(span_json));
    pc_sample **s = first_profile(b)->samples;
    CHECK(links_to(b, s[0], T1, S1)); /* span label only: trace id from the index */
    CHECK(has_attrs(s[0], (int32_t[]){3}, 1));
    CHECK(links_to(b, s[1], ZERO, S2)); /* not indexed: span only, as without the index */
    CHECK(has_attrs(s[1], (int32_t[]){3}, 1));
    CHECK(links_to(b, s[2], T1, S1));
    CHECK(has_attrs(s[2], NULL, 0));
    CHECK(links_to(b, s[3], T1, S1)); /* a zero-trace link made upstream is completed */
    CHECK_EQ_INT(s[3]->link_index, s[0]->link_index);
    CHECK(links_to(b, s[4], TX, S1)); /* a link with a trace id is left alone */
    CHECK_EQ_INT(s[4]->link_index, 2);
    CHECK(links_to(b, s[5], T1, S1));
    CHECK(has_attrs(s[5], (int32_t[]){5}, 1));
    CHECK(links_to(b, s[6], T1, S1));
    CHECK_EQ_INT(counter(d, "samples_filled"), 4);
    CHECK_EQ_INT(counter(d, "samples_linked"), 4);
    CHECK_EQ_INT(counter(d, "span_only_links"), 1);
    CHECK_EQ_INT(counter(d, "service_mismatches"), 0);
    int64_t rejected = 0;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);
    CHECK_EQ_INT(rejected, 0);

    /* spans of another service still fill in, and the disagreement is counted */
    const tspan other[] = {{T1, S1, "GET /cart"}};
    index_spans(d, "cart", other, 1);
    b = driver_run(d, batch_from_json(span_json));
    CHECK(links_to(b, first_profile(b)->samples[0], T1, S1));
    CHECK_EQ_INT(counter(d, "service_mismatches"), 4);
    driver_free(d);
}

static void test_add_span_name(void)
{
    driver *d = make(NAMES_CFG);
    const tspan spans[] = {{T1, S1, "GET /cart"}};
    index_spans(d, "checkout", spans, 1);
    pc_batch *b = driver_run(d, batch_from_json(span_json));
    pc_sample **s = first_profile(b)->samples;
    const char *name = NULL;
    int32_t n0 = span_name_of(b, s[0], &name);
    CHECK(n0 > 5);
    CHECK_STR(name, "GET /cart");
    CHECK(links_to(b, s[0], T1, S1));
    CHECK(has_attrs(s[0], (int32_t[]){3, n0}, 2));
    CHECK_EQ_INT(span_name_of(b, s[1], &name), 0); /* not indexed */
    CHECK(has_attrs(s[2], (int32_t[]){n0}, 1));    /* had the trace id: named too */
    CHECK(has_attrs(s[3], (int32_t[]){3, n0}, 2)); /* completed link */
    CHECK(has_attrs(s[4], (int32_t[]){3}, 1));     /* another trace's span: no name */
    CHECK(has_attrs(s[5], (int32_t[]){5}, 1));     /* its own span.name is kept, not doubled */
    CHECK(has_attrs(s[6], (int32_t[]){5}, 1));
    CHECK(links_to(b, s[6], T1, S1));
    CHECK_EQ_INT(counter(d, "samples_filled"), 4);
    int64_t rejected = 0;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);
    driver_free(d);

    /* remove_attributes: false keeps the labels and still adds the name */
    d = make("span_index:\n  enabled: true\nadd_span_name: true\nremove_attributes: false\n");
    index_spans(d, "checkout", spans, 1);
    b = driver_run(d, batch_from_json(span_json));
    s = first_profile(b)->samples;
    n0 = span_name_of(b, s[0], &name);
    CHECK(has_attrs(s[0], (int32_t[]){2, 3, n0}, 3));
    CHECK_STR(name, "GET /cart");
    driver_free(d);
}

static void test_index_ttl(void)
{
    uint64_t (*real_clock)(void) = pc_tracelink_now_ms;
    pc_tracelink_now_ms = fake_clock;
    driver *d = make("span_index:\n  enabled: true\n  ttl: 10s\n");
    const tspan spans[] = {{T1, S1, "GET /cart"}};
    index_spans(d, "checkout", spans, 1);
    fake_now += 9999;
    pc_batch *b = driver_run(d, batch_from_json(span_json));
    CHECK(links_to(b, first_profile(b)->samples[0], T1, S1));
    fake_now += 1;
    b = driver_run(d, batch_from_json(span_json));
    CHECK(links_to(b, first_profile(b)->samples[0], ZERO, S1));
    CHECK_EQ_INT(counter(d, "samples_filled"), 4);
    CHECK_EQ_INT(counter(d, "spans_evicted"), 0); /* expiry is not eviction */
    /* indexed again, it is found again */
    index_spans(d, "checkout", spans, 1);
    b = driver_run(d, batch_from_json(span_json));
    CHECK(links_to(b, first_profile(b)->samples[0], T1, S1));
    driver_free(d);
    pc_tracelink_now_ms = real_clock;
}

static void test_index_max_spans(void)
{
    driver *d = make("span_index:\n  enabled: true\n  max_spans: 2\n");
    const tspan first[] = {{T1, S1, "a"}, {T2, S2, "b"}};
    const tspan more[] = {{T3, S3, "c"}};
    index_spans(d, "checkout", first, 2);
    index_spans(d, "checkout", first, 1); /* seen again: no new entry, nothing evicted */
    CHECK_EQ_INT(counter(d, "spans_evicted"), 0);
    index_spans(d, "checkout", more, 1); /* full: S1, the oldest, goes */
    CHECK_EQ_INT(counter(d, "spans_evicted"), 1);
    CHECK_EQ_INT(counter(d, "spans_indexed"), 4);
    pc_batch *b = driver_run(d, batch_from_json(span_json));
    pc_sample **s = first_profile(b)->samples;
    CHECK(links_to(b, s[0], ZERO, S1));
    CHECK(links_to(b, s[1], T2, S2));
    driver_free(d);
}

/* Re-create d's instance as the config's id name, shown as the service shows processors per
 * pipeline ("name in pipeline"): the index is shared by name, never by the display id. */
static void rename_driver(driver *d, const char *name, const char *pipeline)
{
    pc_error err = {0};
    char id[200];
    snprintf(id, sizeof id, "%s in %s", name, pipeline);
    pc_metric_unregister(&d->c); /* as the service does before a destroy */
    d->c.type->destroy(&d->c);
    free(d->c.id);
    free(d->c.name);
    d->c.id = strdup(id);
    d->c.name = strdup(name);
    CHECK_EQ_INT(d->c.type->create(&d->c, &err), 0);
}

static void test_index_shared(void)
{
    driver *traces = make(INDEX_CFG), *profiles = make(INDEX_CFG);
    rename_driver(traces, "tracelink", "traces");
    rename_driver(profiles, "tracelink", "profiles/x");
    const tspan spans[] = {{T1, S1, "GET /cart"}};
    index_spans(traces, "checkout", spans, 1);
    pc_batch *b = driver_run(profiles, batch_from_json(span_json));
    CHECK(links_to(b, first_profile(b)->samples[0], T1, S1));
    CHECK_EQ_INT(counter(profiles, "samples_filled"), 4);
    CHECK_EQ_INT(counter(traces, "spans_indexed"), 1);

    /* another id has its own index */
    rename_driver(profiles, "tracelink/other", "profiles");
    b = driver_run(profiles, batch_from_json(span_json));
    CHECK(links_to(b, first_profile(b)->samples[0], ZERO, S1));

    /* the index lives while one instance of its id does: freed with the last one */
    rename_driver(profiles, "tracelink", "profiles");
    rename_driver(traces, "tracelink/gone", "traces");
    b = driver_run(profiles, batch_from_json(span_json));
    CHECK(links_to(b, first_profile(b)->samples[0], T1, S1));
    rename_driver(profiles, "tracelink/gone", "profiles");
    rename_driver(profiles, "tracelink", "profiles");
    b = driver_run(profiles, batch_from_json(span_json));
    CHECK(links_to(b, first_profile(b)->samples[0], ZERO, S1));
    driver_free(traces);
    driver_free(profiles);
}

static void pack(const pc_batch *b, pc_buf *out)
{
    const ProtobufCMessage *m = pc_batch_message(b);
    size_t len = protobuf_c_message_get_packed_size(m);
    pc_buf_reserve(out, len);
    out->len = protobuf_c_message_pack(m, out->data);
}

/* Traces are read, never copied or changed, with or without the index. */
static void test_traces_pass_through(void)
{
    const char *cfgs[] = {INDEX_CFG, ""};
    for (size_t i = 0; i < 2; i++) {
        driver *d = make(cfgs[i]);
        const tspan spans[] = {{T1, S1, "GET /cart"}, {T2, S2, "SELECT"}};
        pc_batch *in = traces_batch("checkout", spans, 2);
        pc_buf before = {0}, after = {0};
        pack(in, &before);
        pc_batch_ref(in); /* shared, as behind a fan-out */
        pc_batch *out = driver_run(d, in);
        CHECK(out == in);
        pack(out, &after);
        CHECK(before.len == after.len && !memcmp(before.data, after.data, before.len));
        CHECK_EQ_INT(pc_batch_items(out), 2);
        CHECK_EQ_INT(counter(d, "spans_indexed"), i == 0 ? 2 : 0);
        pc_batch_unref(in);
        pc_buf_free(&before);
        pc_buf_free(&after);
        driver_free(d);
    }
}

static void test_index_config(void)
{
    static const struct {
        const char *yaml, *msg;
    } bad[] = {
        {"span_index:\n  enabled: true\n  max_spans: 0\n",
         "processors::tracelink::span_index::max_spans"},
        {"span_index:\n  max_spans: 20000000\n", "must be 1 to 10000000"},
        {"span_index:\n  ttl: 0s\n", "processors::tracelink::span_index::ttl: must be > 0"},
        {"span_index:\n  ttl: soon\n", "not a duration"},
        {"add_span_name: true\n", "processors::tracelink::add_span_name"},
        {"span_index:\n  enabeld: true\n", "enabled"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pc_error err = {0};
        driver *d = driver_new(&pc_processor_tracelink, bad[i].yaml, &err);
        CHECK(d == NULL);
        CHECK_CONTAINS(err.msg, bad[i].msg);
        driver_free(d);
    }
}

/* Traces and profiles jobs of two pipelines on the thread pool at once. */
static void test_index_concurrent(void)
{
    driver *traces = make(NAMES_CFG), *profiles = make(NAMES_CFG);
    const tspan spans[] = {{T1, S1, "GET /cart"}, {T2, S2, "SELECT"}, {T3, S3, "x"}};
    index_spans(traces, "checkout", spans, 3); /* then seen again, concurrently */
    for (int i = 0; i < 12; i++) {
        traces->c.type->consume(&traces->c, traces_batch("checkout", spans, 3), tc_up_done,
                                &traces->up);
        profiles->c.type->consume(&profiles->c, batch_from_json(span_json), tc_up_done,
                                  &profiles->up);
    }
    uv_run(uv_default_loop(), UV_RUN_DEFAULT);
    CHECK_EQ_INT(traces->up.calls, 13);
    CHECK_EQ_INT(profiles->up.calls, 12);
    CHECK_EQ_INT(counter(traces, "spans_indexed"), 39);
    CHECK_EQ_INT(counter(profiles, "samples_filled"), 12 * 5);
    for (size_t i = 0; i < profiles->rec.n; i++)
        CHECK(links_to(profiles->rec.got[i], first_profile(profiles->rec.got[i])->samples[1], T2,
                       S2));
    driver_free(traces);
    driver_free(profiles);
}

int main(void)
{
    RUN(test_links);
    RUN(test_overlong_ids);
    RUN(test_keep_attributes);
    RUN(test_custom_keys);
    RUN(test_copy_on_write);
    RUN(test_shutdown_drains);
    RUN(test_pprof_labels);
    RUN(test_index_fills_trace_id);
    RUN(test_add_span_name);
    RUN(test_index_ttl);
    RUN(test_index_max_spans);
    RUN(test_index_shared);
    RUN(test_traces_pass_through);
    RUN(test_index_config);
    RUN(test_index_concurrent);
    return check_report();
}
