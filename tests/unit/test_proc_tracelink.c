/* Processor "tracelink": labels -> links with the right bytes, invalid ids counted and kept,
 * span-only links, remove_attributes false, samples differing only by link stay distinct,
 * custom keys, copy-on-write, and the links come back as trace_id/span_id pprof labels. */
#include "pdata/dict.h"
#include "pdata/pprof.h"
#include "proc_driver.h"
#include "processors/proc_util.h"

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
    pc_cfg_err err;
    driver *d = driver_new(&pc_processor_tracelink, yaml, &err);
    if (!d) {
        fprintf(stderr, "config: %s\n", err.msg);
        exit(1);
    }
    return d;
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
    char err[256] = "";
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, err, sizeof err), 0);
    CHECK_EQ_INT(rejected, 0);

    /* and it survives the wire: encode as OTLP and decode again */
    pc_buf wire = {0};
    pc_batch_encode_proto(b, &wire);
    pc_batch *again = NULL;
    CHECK_EQ_INT(pc_batch_decode_proto(wire.data, wire.len, &again, err, sizeof err), 0);
    CHECK(links_to(again, first_profile(again)->samples[0], T1, S1));
    pc_batch_unref(again);
    pc_buf_free(&wire);
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

    pc_cfg_err err;
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
    d->c.type->consume(&d->c, batch_from_json(input_json), driver_done, d);
    d->c.type->shutdown(&d->c, driver_down);
    CHECK_EQ_INT(d->down, 0);
    uv_run(d->c.loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(d->down, 1);
    CHECK_EQ_INT(d->rec.n, 1);
    CHECK_EQ_INT(d->done_calls, 1);
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
    char err[256] = "";
    x->n++;
    if (pc_pprof_to_batch(o->data, o->len, NULL, &x->back, NULL, err, sizeof err)) {
        fprintf(stderr, "pprof back: %s\n", err);
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

int main(void)
{
    RUN(test_links);
    RUN(test_keep_attributes);
    RUN(test_custom_keys);
    RUN(test_copy_on_write);
    RUN(test_shutdown_drains);
    RUN(test_pprof_labels);
    return check_report();
}
