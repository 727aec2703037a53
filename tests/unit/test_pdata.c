/* pdata: protobuf round trip, JSON and protobuf decode to the same data, validation of every
 * kind of bad index, copy-on-write. */
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "check.h"
#include "payload.h"
#include "pdata/json.h"
#include "pdata/pdata.h"

/* A small but complete request, encoded as protobuf: two resources, CPU and alloc profiles,
 * every dictionary table populated, one link. Written as OTLP JSON then checked against an
 * independently built protobuf encoding below. */
static const char *const request_json =
    "{\"resourceProfiles\":[{\"resource\":{\"attributes\":["
    "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"checkout\"}},"
    "{\"keyStrindex\":5,\"value\":{\"stringValueStrindex\":6}}]},"
    "\"scopeProfiles\":[{\"scope\":{\"name\":\"pyroscope\",\"version\":\"1\"},"
    "\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"periodType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"period\":\"10000000\","
    "\"timeUnixNano\":\"1700000000000000000\",\"durationNano\":\"10000000000\","
    "\"samples\":[{\"stackIndex\":1,\"values\":[\"30\"]},"
    "{\"stackIndex\":2,\"values\":[20],\"attributeIndices\":[1],\"linkIndex\":1},"
    "{\"stackIndex\":1,\"timestampsUnixNano\":[\"1700000000000000001\",\"1700000000000000002\"]}]}]"
    "}]}],"
    "\"dictionary\":{"
    "\"mappingTable\":[{},{\"memoryStart\":\"4096\",\"memoryLimit\":\"8192\",\"filenameStrindex\":"
    "7}],"
    "\"locationTable\":[{},{\"mappingIndex\":1,\"address\":\"4100\",\"lines\":[{\"functionIndex\":"
    "1,\"line\":\"12\"}]},"
    "{\"mappingIndex\":1,\"lines\":[{\"functionIndex\":2,\"line\":3},{\"functionIndex\":1}]}],"
    "\"functionTable\":[{},{\"nameStrindex\":3,\"filenameStrindex\":7},{\"nameStrindex\":4}],"
    "\"linkTable\":[{\"traceId\":\"00000000000000000000000000000000\",\"spanId\":"
    "\"0000000000000000\"},"
    "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"a1a2a3a4a5a6a7a8\"}],"
    "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"main\",\"work\",\"host.name\",\"box1\",\"/bin/"
    "app\",\"region\",\"eu\"],"
    "\"attributeTable\":[{},{\"keyStrindex\":8,\"value\":{\"stringValue\":\"eu\"}}],"
    "\"stackTable\":[{},{\"locationIndices\":[1]},{\"locationIndices\":[2,1]}]}}";

static void test_proto_round_trip(void)
{
    pc_batch *b = decode_json_or_die(request_json);
    int64_t rejected = -1;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);
    CHECK_EQ_INT(rejected, 0);
    pc_counts c = pc_batch_counts(b);
    CHECK_EQ_INT(c.resources, 1);
    CHECK_EQ_INT(c.profiles, 1);
    CHECK_EQ_INT(c.samples, 3);

    pc_buf wire = {0};
    pc_batch_encode_proto(b, &wire);
    pc_batch *b2 = NULL;
    CHECK_EQ_INT(pc_batch_decode_proto(wire.data, wire.len, &b2, &err), 0);
    pc_buf wire2 = {0};
    pc_batch_encode_proto(b2, &wire2);
    CHECK_EQ_INT(wire.len, wire2.len);
    CHECK(wire.len == wire2.len && memcmp(wire.data, wire2.data, wire.len) == 0);

    /* JSON and protobuf decode to the same data */
    pc_buf json = {0};
    pc_batch_encode_json(b2, &json);
    pc_batch *b3 = decode_json_or_die((char *)json.data);
    pc_buf wire3 = {0};
    pc_batch_encode_proto(b3, &wire3);
    CHECK(wire.len == wire3.len && memcmp(wire.data, wire3.data, wire.len) == 0);

    const pc_dictionary *d = b2->req->dictionary;
    CHECK_EQ_INT(d->n_string_table, 10);
    CHECK_STR(pc_dict_str(d, 3), "main");
    CHECK_STR(pc_dict_str(d, 99), "");
    CHECK_EQ_INT(d->link_table[1]->trace_id.len, 16);
    CHECK_EQ_INT(d->link_table[1]->trace_id.data[15], 0x10);
    const pc_resource *res = b2->req->resource_profiles[0]->resource;
    CHECK_STR(pc_resource_attr_str(d, res, "service.name"), "checkout");
    CHECK_STR(pc_resource_attr_str(d, res, "host.name"), "box1");
    const pc_profile *p = b2->req->resource_profiles[0]->scope_profiles[0]->profiles[0];
    CHECK_EQ_INT(p->time_unix_nano, 1700000000000000000ULL);
    CHECK_EQ_INT(p->samples[2]->n_timestamps_unix_nano, 2);
    CHECK_EQ_INT(p->samples[1]->values[0], 20);

    pc_buf_free(&wire);
    pc_buf_free(&wire2);
    pc_buf_free(&wire3);
    pc_buf_free(&json);
    pc_batch_unref(b);
    pc_batch_unref(b2);
    pc_batch_unref(b3);
}

/* Each mutation must make validation refuse the request (or the profile). */
typedef void (*mutate_fn)(pc_batch *b);
static void m_stack(pc_batch *b)
{
    first_profile(b)->samples[0]->stack_index = 3;
}
static void m_stack_neg(pc_batch *b)
{
    first_profile(b)->samples[0]->stack_index = -1;
}
static void m_attr(pc_batch *b)
{
    first_profile(b)->samples[1]->attribute_indices[0] = 2;
}
static void m_link(pc_batch *b)
{
    first_profile(b)->samples[1]->link_index = 2;
}
static void m_lengths(pc_batch *b)
{
    pc_sample *s = first_profile(b)->samples[2];
    s->n_values = 1;
    s->values = first_profile(b)->samples[0]->values;
}
static void m_sample_type(pc_batch *b)
{
    first_profile(b)->sample_type->type_strindex = 10;
}
static void m_string0(pc_batch *b)
{
    b->req->dictionary->string_table[0] = "x";
}
static void m_loc_fn(pc_batch *b)
{
    b->req->dictionary->location_table[1]->lines[0]->function_index = 3;
}
static void m_loc_map(pc_batch *b)
{
    b->req->dictionary->location_table[2]->mapping_index = 2;
}
static void m_stack_loc(pc_batch *b)
{
    b->req->dictionary->stack_table[2]->location_indices[0] = 3;
}
static void m_fn_name(pc_batch *b)
{
    b->req->dictionary->function_table[2]->name_strindex = 10;
}
static void m_map_file(pc_batch *b)
{
    b->req->dictionary->mapping_table[1]->filename_strindex = 11;
}
static void m_zero_fn(pc_batch *b)
{
    b->req->dictionary->function_table[0]->name_strindex = 1;
}
static void m_zero_loc(pc_batch *b)
{
    b->req->dictionary->location_table[0]->address = 1;
}
static void m_zero_stack(pc_batch *b)
{
    b->req->dictionary->stack_table[0] = b->req->dictionary->stack_table[1];
}
static void m_zero_link(pc_batch *b)
{
    b->req->dictionary->link_table[0] = b->req->dictionary->link_table[1];
}
static void m_zero_attr(pc_batch *b)
{
    b->req->dictionary->attribute_table[0] = b->req->dictionary->attribute_table[1];
}
static void m_link_len(pc_batch *b)
{
    b->req->dictionary->link_table[1]->span_id.len = 4;
}
static void m_attr_key(pc_batch *b)
{
    b->req->dictionary->attribute_table[1]->key_strindex = 12;
}
static void m_res_key(pc_batch *b)
{
    b->req->resource_profiles[0]->resource->attributes[1]->key_strindex = 40;
}
static void m_res_val(pc_batch *b)
{
    b->req->resource_profiles[0]->resource->attributes[1]->value->string_value_strindex = 40;
}

static void test_validation_rejects(void)
{
    static const struct {
        const char *name;
        mutate_fn fn;
        const char *want;
    } cases[] = {
        {"stack_index", m_stack, "stack_index"},
        {"negative stack_index", m_stack_neg, "stack_index"},
        {"attribute index", m_attr, "attribute_indices"},
        {"link_index", m_link, "link_index"},
        {"values vs timestamps", m_lengths, "timestamps"},
        {"sample_type string", m_sample_type, "sample_type"},
        {"string_table[0]", m_string0, "string_table[0]"},
        {"location function", m_loc_fn, "function_index"},
        {"location mapping", m_loc_map, "mapping_index"},
        {"stack location", m_stack_loc, "location_indices"},
        {"function name", m_fn_name, "function_table"},
        {"mapping filename", m_map_file, "filename_strindex"},
        {"zero function", m_zero_fn, "function_table[0]"},
        {"zero location", m_zero_loc, "location_table[0]"},
        {"zero stack", m_zero_stack, "stack_table[0]"},
        {"zero link", m_zero_link, "link_table[0]"},
        {"zero attribute", m_zero_attr, "attribute_table[0]"},
        {"link length", m_link_len, "link_table[1]"},
        {"attribute key", m_attr_key, "attribute_table[1]"},
        {"resource key_strindex", m_res_key, "key_strindex"},
        {"resource string_value_strindex", m_res_val, "string_value_strindex"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pc_batch *b = decode_json_or_die(request_json);
        cases[i].fn(b);
        int64_t rejected = 0;
        pc_error err = {0};
        int rc = pc_batch_validate(b, &rejected, &err);
        if (rc != PC_EINVAL) fprintf(stderr, "case %s: accepted\n", cases[i].name);
        CHECK_EQ_INT(rc, PC_EINVAL);
        CHECK_CONTAINS(err.msg, cases[i].want);
        pc_batch_unref(b);
    }
}

static void test_partial_success(void)
{
    /* two profiles, one bad: the bad one is removed and counted, the good one kept */
    pc_batch *b = decode_json_or_die(request_json);
    pc_scope_profiles *sp = b->req->resource_profiles[0]->scope_profiles[0];
    pc_profile **two = pc_arena_alloc(b->arena, 2 * sizeof(pc_profile *));
    pc_profile *bad = pc_arena_memdup(b->arena, sp->profiles[0], sizeof(pc_profile));
    pc_sample **samples =
        pc_arena_memdup(b->arena, bad->samples, bad->n_samples * sizeof(pc_sample *));
    samples[0] = pc_arena_memdup(b->arena, samples[0], sizeof(pc_sample));
    samples[0]->stack_index = 77;
    bad->samples = samples;
    two[0] = bad;
    two[1] = sp->profiles[0];
    sp->profiles = two;
    sp->n_profiles = 2;
    int64_t rejected = 0;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);
    CHECK_EQ_INT(rejected, 1);
    CHECK_EQ_INT(sp->n_profiles, 1);
    CHECK(sp->profiles[0] == two[1]);
    CHECK_CONTAINS(err.msg, "stack_index 77");
    pc_batch_unref(b);
}

static void test_bad_protobuf(void)
{
    static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
    pc_batch *b = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_decode_proto(junk, sizeof junk, &b, &err), PC_EINVAL);
    CHECK(b == NULL);
    CHECK_CONTAINS(err.msg, "malformed");
}

static void test_copy_on_write(void)
{
    pc_batch *b = decode_json_or_die(request_json);
    pc_batch_set_meta(b, "x-scope-orgid", "tenant-a");
    pc_batch *shared = pc_batch_ref(b);
    pc_batch *w = b;
    pc_batch_make_writable(&w);
    CHECK(w != shared);
    first_profile(w)->samples[0]->values[0] = 999;
    CHECK_EQ_INT(first_profile(shared)->samples[0]->values[0], 30);
    CHECK_STR(pc_batch_get_meta(w, "x-scope-orgid"), "tenant-a");
    pc_batch *solo = w;
    pc_batch_make_writable(&solo); /* sole owner: no copy */
    CHECK(solo == w);
    pc_batch_unref(shared);
    pc_batch_unref(solo);
}

static void test_new_batch(void)
{
    pc_batch *b = pc_batch_new();
    int64_t rejected = 0;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_validate(b, &rejected, &err), 0);
    CHECK_EQ_INT(b->req->dictionary->n_string_table, 1);
    CHECK_EQ_INT(b->req->dictionary->link_table[0]->trace_id.len, 16);
    pc_batch_unref(b);
}

/* An arena made without a first block holds none until it allocates, then grows as any; a
 * bytes-only batch that owns its bytes makes one (it may never allocate). */
static void test_arena_without_block(void)
{
    pc_arena *a = pc_arena_new(0);
    CHECK_EQ_INT(pc_arena_size(a), 0);
    pc_arena_free(a); /* never allocated: nothing to free but the arena */
    a = pc_arena_new(0);
    unsigned char *p = pc_arena_alloc(a, 10);
    size_t first = pc_arena_size(a);
    CHECK(first >= 256 && first < 512);
    unsigned char *q = pc_arena_alloc(a, 16);
    CHECK(q >= p + 16 && q < p + 256); /* the same block */
    CHECK_EQ_INT(pc_arena_size(a), first);
    unsigned char *big = pc_arena_calloc(a, 1, 4096);
    CHECK(pc_arena_size(a) > first + 4096);
    CHECK_EQ_INT(big[4095], 0);
    memset(p, 1, 10);
    pc_arena_free(a);

    void *bytes = malloc(64);
    memset(bytes, 0, 64);
    pc_batch *w = pc_batch_take_wire(bytes, 64, 64, 0, 0, 1 << 20);
    CHECK_EQ_INT(pc_arena_size(w->arena), 64); /* its bytes, no block */
    pc_batch_set_meta(w, "k", "v");            /* the first allocation */
    CHECK(pc_arena_size(w->arena) > 64 + 256);
    CHECK_STR(pc_batch_get_meta(w, "k"), "v");
    pc_batch_unref(w);
}

int main(void)
{
    RUN(test_proto_round_trip);
    RUN(test_validation_rejects);
    RUN(test_partial_success);
    RUN(test_bad_protobuf);
    RUN(test_copy_on_write);
    RUN(test_new_batch);
    RUN(test_arena_without_block);
    return check_report();
}
