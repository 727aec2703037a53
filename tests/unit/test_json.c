/* The generic OTLP JSON codec (src/pdata/json.c). */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "check.h"
#include "pdata/json.h"
#include "pdata/pdata.h"

#define AV(x)         OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x
#define SCOPE_DESC    (&opentelemetry__proto__common__v1__instrumentation_scope__descriptor)
#define ANYVALUE_DESC (&opentelemetry__proto__common__v1__any_value__descriptor)
#define PROFILE_DESC  (&opentelemetry__proto__profiles__v1development__profile__descriptor)
#define LINK_DESC     (&opentelemetry__proto__profiles__v1development__link__descriptor)
#define MAPPING_DESC  (&opentelemetry__proto__profiles__v1development__mapping__descriptor)
#define FUNCTION_DESC (&opentelemetry__proto__profiles__v1development__function__descriptor)

static const char REQUEST_JSON[] =
    "{\n"
    " \"resourceProfiles\": [{\n"
    "  \"resource\": {\n"
    "   \"attributes\": [\n"
    "    {\"key\": \"service.name\", \"value\": {\"stringValue\": \"checkout\"}},\n"
    "    {\"keyStrindex\": 5, \"value\": {\"stringValueStrindex\": 6}},\n"
    "    {\"key\": \"host.cpus\", \"value\": {\"intValue\": \"8\"}}\n"
    "   ],\n"
    "   \"droppedAttributesCount\": 2\n"
    "  },\n"
    "  \"schemaUrl\": \"https://opentelemetry.io/schemas/1.26.0\",\n"
    "  \"scopeProfiles\": [{\n"
    "   \"scope\": {\"name\": \"profiler\", \"version\": \"1.2.3\"},\n"
    "   \"profiles\": [{\n"
    "    \"sampleType\": {\"typeStrindex\": 1, \"unitStrindex\": 2},\n"
    "    \"periodType\": {\"typeStrindex\": 3, \"unitStrindex\": 4},\n"
    "    \"period\": \"10000000\",\n"
    "    \"timeUnixNano\": \"1700000000123456789\",\n"
    "    \"durationNano\": 5000000000,\n"
    "    \"profileId\": \"0102030405060708090A0B0C0D0E0F10\",\n"
    "    \"droppedAttributesCount\": 1,\n"
    "    \"originalPayloadFormat\": \"pprof\",\n"
    "    \"originalPayload\": \"AAEC/w==\",\n"
    "    \"attributeIndices\": [1],\n"
    "    \"unknownFutureField\": {\"ignored\": [1, 2, 3]},\n"
    "    \"samples\": [\n"
    "     {\"stackIndex\": 1, \"values\": [\"100\", 200, \"-3\"], \"linkIndex\": 1,\n"
    "      \"attributeIndices\": [1, 2],\n"
    "      \"timestampsUnixNano\": [\"1700000000000000001\", 1700000000]},\n"
    "     {\"stackIndex\": 2, \"values\": [\"9007199254740993\"]}\n"
    "    ]\n"
    "   }]\n"
    "  }]\n"
    " }],\n"
    " \"dictionary\": {\n"
    "  \"mappingTable\": [{}, {\"memoryStart\": \"4194304\", \"memoryLimit\": \"8388608\",\n"
    "                    \"fileOffset\": \"4096\", \"filenameStrindex\": 7}],\n"
    "  \"locationTable\": [{}, {\"mappingIndex\": 1, \"address\": \"4198400\",\n"
    "    \"lines\": [{\"functionIndex\": 1, \"line\": \"42\", \"column\": 7},\n"
    "              {\"functionIndex\": 2, \"line\": 10}]}],\n"
    "  \"functionTable\": [{}, {\"nameStrindex\": 8, \"systemNameStrindex\": 8,\n"
    "    \"filenameStrindex\": 9, \"startLine\": \"40\"}, {\"nameStrindex\": 10}],\n"
    "  \"linkTable\": [{}, {\"traceId\": \"5B8EFFF798038103D269B633813FC60C\",\n"
    "                     \"spanId\": \"eee19b7ec3c1b174\"}],\n"
    "  \"stringTable\": [\"\", \"cpu\", \"nanoseconds\", \"cpu\", \"nanoseconds\",\n"
    "                  \"host.name\", \"node-1\", \"/usr/bin/app\", \"main\", \"main.c\",\n"
    "                  \"helper\", \"thread.name\", \"worker \\\"1\\\"\\n\\u0001\\u00e9\"],\n"
    "  \"attributeTable\": [{}, {\"keyStrindex\": 11, \"value\": {\"stringValue\": \"w1\"},\n"
    "                          \"unitStrindex\": 0},\n"
    "                     {\"keyStrindex\": 11, \"value\": {\"boolValue\": true}}],\n"
    "  \"stackTable\": [{}, {\"locationIndices\": [1]}, {\"locationIndices\": [1, 1]}]\n"
    " }\n"
    "}\n";

static pc_request *decode_req(const char *json, pc_arena *a, pc_error *err)
{
    ProtobufCMessage *m = NULL;
    if (pc_json_decode(PC_REQUEST_DESC, json, strlen(json), a, &m, err) < 0) return NULL;
    return (pc_request *)m;
}

/* Packed protobuf bytes of a message, malloc-owned. */
static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *p = malloc(*len ? *len : 1);
    protobuf_c_message_pack(m, p);
    return p;
}

static bool same_packed(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
    size_t la, lb;
    uint8_t *pa = pack(a, &la), *pb = pack(b, &lb);
    bool eq = la == lb && memcmp(pa, pb, la) == 0;
    free(pa);
    free(pb);
    return eq;
}

static void check_request(const pc_request *r)
{
    CHECK_EQ_INT(r->n_resource_profiles, 1);
    if (r->n_resource_profiles != 1) return;
    const pc_resource_profiles *rp = r->resource_profiles[0];
    CHECK_STR(rp->schema_url, "https://opentelemetry.io/schemas/1.26.0");
    CHECK(rp->resource != NULL);
    if (!rp->resource) return;
    CHECK_EQ_INT(rp->resource->dropped_attributes_count, 2);
    CHECK_EQ_INT(rp->resource->n_attributes, 3);
    if (rp->resource->n_attributes == 3) {
        pc_keyvalue **kv = rp->resource->attributes;
        CHECK_STR(kv[0]->key, "service.name");
        CHECK_EQ_INT(kv[0]->value->value_case, AV(STRING_VALUE));
        CHECK_STR(kv[0]->value->string_value, "checkout");
        CHECK_STR(kv[1]->key, "");
        CHECK_EQ_INT(kv[1]->key_strindex, 5);
        CHECK_EQ_INT(kv[1]->value->value_case, AV(STRING_VALUE_STRINDEX));
        CHECK_EQ_INT(kv[1]->value->string_value_strindex, 6);
        CHECK_STR(kv[2]->key, "host.cpus");
        CHECK_EQ_INT(kv[2]->value->value_case, AV(INT_VALUE));
        CHECK_EQ_INT(kv[2]->value->int_value, 8);
    }
    CHECK_EQ_INT(rp->n_scope_profiles, 1);
    if (rp->n_scope_profiles != 1) return;
    const pc_scope_profiles *sp = rp->scope_profiles[0];
    CHECK_STR(sp->scope->name, "profiler");
    CHECK_STR(sp->scope->version, "1.2.3");
    CHECK_EQ_INT(sp->scope->n_attributes, 0);
    CHECK_STR(sp->schema_url, "");
    CHECK_EQ_INT(sp->n_profiles, 1);
    if (sp->n_profiles != 1) return;
    const pc_profile *p = sp->profiles[0];
    CHECK_EQ_INT(p->sample_type->type_strindex, 1);
    CHECK_EQ_INT(p->sample_type->unit_strindex, 2);
    CHECK_EQ_INT(p->period_type->type_strindex, 3);
    CHECK_EQ_INT(p->period_type->unit_strindex, 4);
    CHECK_EQ_INT(p->period, 10000000);
    CHECK(p->time_unix_nano == UINT64_C(1700000000123456789));
    CHECK(p->duration_nano == UINT64_C(5000000000));
    CHECK_EQ_INT(p->profile_id.len, 16);
    if (p->profile_id.len == 16) {
        for (int i = 0; i < 16; i++)
            CHECK_EQ_INT(p->profile_id.data[i], i + 1);
    }
    CHECK_EQ_INT(p->dropped_attributes_count, 1);
    CHECK_STR(p->original_payload_format, "pprof");
    CHECK_EQ_INT(p->original_payload.len, 4);
    if (p->original_payload.len == 4)
        CHECK(memcmp(p->original_payload.data, "\x00\x01\x02\xff", 4) == 0);
    CHECK_EQ_INT(p->n_attribute_indices, 1);
    if (p->n_attribute_indices == 1) CHECK_EQ_INT(p->attribute_indices[0], 1);
    CHECK_EQ_INT(p->n_samples, 2);
    if (p->n_samples == 2) {
        const pc_sample *s = p->samples[0];
        CHECK_EQ_INT(s->stack_index, 1);
        CHECK_EQ_INT(s->link_index, 1);
        CHECK_EQ_INT(s->n_values, 3);
        if (s->n_values == 3) {
            CHECK_EQ_INT(s->values[0], 100);
            CHECK_EQ_INT(s->values[1], 200);
            CHECK_EQ_INT(s->values[2], -3);
        }
        CHECK_EQ_INT(s->n_attribute_indices, 2);
        if (s->n_attribute_indices == 2) {
            CHECK_EQ_INT(s->attribute_indices[0], 1);
            CHECK_EQ_INT(s->attribute_indices[1], 2);
        }
        CHECK_EQ_INT(s->n_timestamps_unix_nano, 2);
        if (s->n_timestamps_unix_nano == 2) {
            CHECK(s->timestamps_unix_nano[0] == UINT64_C(1700000000000000001));
            CHECK(s->timestamps_unix_nano[1] == UINT64_C(1700000000));
        }
        s = p->samples[1];
        CHECK_EQ_INT(s->stack_index, 2);
        CHECK_EQ_INT(s->link_index, 0);
        CHECK_EQ_INT(s->n_values, 1);
        if (s->n_values == 1) CHECK(s->values[0] == INT64_C(9007199254740993)); /* 2^53 + 1 */
        CHECK_EQ_INT(s->n_timestamps_unix_nano, 0);
        CHECK_EQ_INT(s->n_attribute_indices, 0);
    }

    const pc_dictionary *d = r->dictionary;
    CHECK(d != NULL);
    if (!d) return;
    CHECK_EQ_INT(d->n_mapping_table, 2);
    if (d->n_mapping_table == 2) {
        CHECK(d->mapping_table[0]->memory_start == 0);
        CHECK(d->mapping_table[1]->memory_start == 4194304);
        CHECK(d->mapping_table[1]->memory_limit == 8388608);
        CHECK(d->mapping_table[1]->file_offset == 4096);
        CHECK_EQ_INT(d->mapping_table[1]->filename_strindex, 7);
    }
    CHECK_EQ_INT(d->n_location_table, 2);
    if (d->n_location_table == 2) {
        const pc_location *l = d->location_table[1];
        CHECK_EQ_INT(d->location_table[0]->n_lines, 0);
        CHECK_EQ_INT(l->mapping_index, 1);
        CHECK(l->address == 4198400);
        CHECK_EQ_INT(l->n_lines, 2);
        if (l->n_lines == 2) {
            CHECK_EQ_INT(l->lines[0]->function_index, 1);
            CHECK_EQ_INT(l->lines[0]->line, 42);
            CHECK_EQ_INT(l->lines[0]->column, 7);
            CHECK_EQ_INT(l->lines[1]->function_index, 2);
            CHECK_EQ_INT(l->lines[1]->line, 10);
            CHECK_EQ_INT(l->lines[1]->column, 0);
        }
    }
    CHECK_EQ_INT(d->n_function_table, 3);
    if (d->n_function_table == 3) {
        CHECK_EQ_INT(d->function_table[1]->name_strindex, 8);
        CHECK_EQ_INT(d->function_table[1]->system_name_strindex, 8);
        CHECK_EQ_INT(d->function_table[1]->filename_strindex, 9);
        CHECK_EQ_INT(d->function_table[1]->start_line, 40);
        CHECK_EQ_INT(d->function_table[2]->name_strindex, 10);
    }
    CHECK_EQ_INT(d->n_link_table, 2);
    if (d->n_link_table == 2) {
        const pc_link *l = d->link_table[1];
        CHECK_EQ_INT(d->link_table[0]->trace_id.len, 0);
        CHECK_EQ_INT(l->trace_id.len, 16);
        CHECK_EQ_INT(l->span_id.len, 8);
        if (l->trace_id.len == 16)
            CHECK(memcmp(l->trace_id.data,
                         "\x5b\x8e\xff\xf7\x98\x03\x81\x03\xd2\x69\xb6\x33\x81\x3f\xc6\x0c",
                         16) == 0);
        if (l->span_id.len == 8)
            CHECK(memcmp(l->span_id.data, "\xee\xe1\x9b\x7e\xc3\xc1\xb1\x74", 8) == 0);
    }
    CHECK_EQ_INT(d->n_string_table, 13);
    if (d->n_string_table == 13) {
        CHECK_STR(d->string_table[0], "");
        CHECK_STR(d->string_table[1], "cpu");
        CHECK_STR(d->string_table[6], "node-1");
        CHECK_STR(d->string_table[10], "helper");
        CHECK_STR(d->string_table[12], "worker \"1\"\n\x01\xc3\xa9");
    }
    CHECK_EQ_INT(d->n_attribute_table, 3);
    if (d->n_attribute_table == 3) {
        CHECK(d->attribute_table[0]->value == NULL);
        CHECK_EQ_INT(d->attribute_table[1]->key_strindex, 11);
        CHECK_EQ_INT(d->attribute_table[1]->value->value_case, AV(STRING_VALUE));
        CHECK_STR(d->attribute_table[1]->value->string_value, "w1");
        CHECK_EQ_INT(d->attribute_table[2]->value->value_case, AV(BOOL_VALUE));
        CHECK_EQ_INT(d->attribute_table[2]->value->bool_value, 1);
    }
    CHECK_EQ_INT(d->n_stack_table, 3);
    if (d->n_stack_table == 3) {
        CHECK_EQ_INT(d->stack_table[0]->n_location_indices, 0);
        CHECK_EQ_INT(d->stack_table[1]->n_location_indices, 1);
        CHECK_EQ_INT(d->stack_table[2]->n_location_indices, 2);
        if (d->stack_table[2]->n_location_indices == 2) {
            CHECK_EQ_INT(d->stack_table[2]->location_indices[0], 1);
            CHECK_EQ_INT(d->stack_table[2]->location_indices[1], 1);
        }
    }
}

static void test_decode_request(void)
{
    pc_arena *a = pc_arena_new(4096);
    pc_error err = {0};
    pc_request *r = decode_req(REQUEST_JSON, a, &err);
    CHECK(r != NULL);
    if (!r) fprintf(stderr, "decode error: %s\n", err.msg);
    if (r) check_request(r);
    pc_arena_free(a);
}

static void test_round_trip(void)
{
    pc_arena *a = pc_arena_new(4096);
    pc_error err = {0};
    pc_request *r = decode_req(REQUEST_JSON, a, &err);
    CHECK(r != NULL);
    if (!r) {
        pc_arena_free(a);
        return;
    }
    pc_buf out = {0};
    pc_json_encode(&r->base, &out);
    CHECK(out.len > 0 && out.data[out.len] == 0);
    const char *txt = (const char *)out.data;
    /* OTLP spellings: lowerCamelCase keys, hex ids (lowercase), base64, 64-bit as strings */
    CHECK_CONTAINS(txt, "\"resourceProfiles\":[");
    CHECK_CONTAINS(txt, "\"traceId\":\"5b8efff798038103d269b633813fc60c\"");
    CHECK_CONTAINS(txt, "\"spanId\":\"eee19b7ec3c1b174\"");
    CHECK_CONTAINS(txt, "\"profileId\":\"0102030405060708090a0b0c0d0e0f10\"");
    CHECK_CONTAINS(txt, "\"originalPayload\":\"AAEC/w==\"");
    CHECK_CONTAINS(txt, "\"values\":[\"100\",\"200\",\"-3\"]");
    CHECK_CONTAINS(txt, "\"timeUnixNano\":\"1700000000123456789\"");
    CHECK_CONTAINS(txt, "\"stackIndex\":1");
    CHECK_CONTAINS(txt, "\"keyStrindex\":5");
    CHECK_CONTAINS(txt, "\"stringValueStrindex\":6");
    CHECK_CONTAINS(txt, "\"intValue\":\"8\"");
    CHECK_CONTAINS(txt, "\"boolValue\":true");
    CHECK_CONTAINS(txt, "\"worker \\\"1\\\"\\n\\u0001\xc3\xa9\"");
    CHECK_CONTAINS(txt, "\"mappingTable\":[{},{");
    CHECK(strstr(txt, "unknownFutureField") == NULL);
    CHECK(strstr(txt, "\"linkIndex\":0") == NULL); /* implicit presence: zeros omitted */
    CHECK(strstr(txt, "\"schemaUrl\":\"\"") == NULL);

    /* decode the encoding again: same protobuf bytes */
    pc_request *r2 = decode_req(txt, a, &err);
    CHECK(r2 != NULL);
    if (r2) {
        check_request(r2);
        CHECK(same_packed(&r->base, &r2->base));
    }

    /* protobuf round trip: unpack(pack(json)) equals the JSON-decoded message */
    size_t len;
    uint8_t *bin = pack(&r->base, &len);
    ProtobufCMessage *u =
        protobuf_c_message_unpack(PC_REQUEST_DESC, pc_arena_allocator(a), len, bin);
    CHECK(u != NULL);
    if (u) {
        check_request((pc_request *)u);
        CHECK(same_packed(&r->base, u));
        pc_buf out2 = {0};
        pc_json_encode(u, &out2);
        CHECK(out2.len == out.len && memcmp(out2.data, out.data, out.len) == 0);
        pc_buf_free(&out2);
    }
    free(bin);
    pc_buf_free(&out);
    pc_arena_free(a);
}

static void test_snake_case(void)
{
    const char *json =
        "{\"resource_profiles\":[{\"scope_profiles\":[{\"profiles\":[{\"sample_type\":"
        "{\"type_strindex\":1,\"unit_strindex\":2},\"time_unix_nano\":\"5\",\"samples\":[{"
        "\"stack_index\":3,\"timestamps_unix_nano\":[7],\"link_index\":1}]}]}]}],"
        "\"dictionary\":{\"string_table\":[\"\",\"a\"],\"link_table\":[{\"trace_id\":"
        "\"000102030405060708090a0b0c0d0e0f\",\"span_id\":\"0001020304050607\"}]}}";
    pc_arena *a = pc_arena_new(1024);
    pc_error err = {0};
    pc_request *r = decode_req(json, a, &err);
    CHECK(r != NULL);
    if (r) {
        const pc_profile *p = r->resource_profiles[0]->scope_profiles[0]->profiles[0];
        CHECK_EQ_INT(p->sample_type->type_strindex, 1);
        CHECK_EQ_INT(p->sample_type->unit_strindex, 2);
        CHECK(p->time_unix_nano == 5);
        CHECK_EQ_INT(p->samples[0]->stack_index, 3);
        CHECK_EQ_INT(p->samples[0]->link_index, 1);
        CHECK_EQ_INT(p->samples[0]->n_timestamps_unix_nano, 1);
        CHECK(p->samples[0]->timestamps_unix_nano[0] == 7);
        CHECK_EQ_INT(r->dictionary->n_string_table, 2);
        CHECK_STR(r->dictionary->string_table[1], "a");
        CHECK_EQ_INT(r->dictionary->link_table[0]->trace_id.len, 16);
        CHECK_EQ_INT(r->dictionary->link_table[0]->trace_id.data[15], 15);
        CHECK_EQ_INT(r->dictionary->link_table[0]->span_id.data[7], 7);
    }
    pc_arena_free(a);
}

/* Decode must fail with an error containing want. */
static void expect_error(const ProtobufCMessageDescriptor *desc, const char *json, const char *want)
{
    pc_arena *a = pc_arena_new(1024);
    pc_error err = {0};
    ProtobufCMessage *m = (ProtobufCMessage *)1;
    int rc = pc_json_decode(desc, json, strlen(json), a, &m, &err);
    CHECK_EQ_INT(rc, PC_EINVAL);
    CHECK(m == NULL);
    CHECK_CONTAINS(err.msg, want);
    pc_arena_free(a);
}

static void test_errors(void)
{
    /* hex ids */
    expect_error(PC_REQUEST_DESC, "{\"dictionary\":{\"linkTable\":[{},{\"traceId\":\"abcd\"}]}}",
                 "dictionary.linkTable[1].traceId: invalid length");
    expect_error(PC_REQUEST_DESC,
                 "{\"dictionary\":{\"linkTable\":[{\"traceId\":"
                 "\"5b8efff798038103d269b633813fc60g\"}]}}",
                 "dictionary.linkTable[0].traceId: invalid hex");
    expect_error(LINK_DESC, "{\"spanId\":\"eee19b7ec3c1b17\"}", "spanId: invalid hex: odd length");
    expect_error(LINK_DESC, "{\"spanId\":\"5b8efff798038103d269b633813fc60c\"}",
                 "spanId: invalid length");
    expect_error(LINK_DESC, "{\"traceId\":12}", "traceId: expected a string");
    /* wrong JSON types */
    expect_error(PC_REQUEST_DESC, "{\"dictionary\":\"oops\"}",
                 "dictionary: expected an object (got string)");
    expect_error(PC_REQUEST_DESC, "{\"resourceProfiles\":[{\"resource\":[]}]}",
                 "resourceProfiles[0].resource: expected an object (got array)");
    expect_error(PC_REQUEST_DESC, "{\"resourceProfiles\":{}}",
                 "resourceProfiles: expected an array (got object)");
    expect_error(PC_REQUEST_DESC, "[]", "expected an object (got array)");
    expect_error(PC_REQUEST_DESC, "\"x\"", "expected an object");
    expect_error(PC_REQUEST_DESC, "{\"resourceProfiles\":[null]}",
                 "resourceProfiles[0]: null is not allowed");
    expect_error(SCOPE_DESC, "{\"name\":5}", "name: expected a string (got number)");
    expect_error(ANYVALUE_DESC, "{\"boolValue\":\"true\"}", "boolValue: expected a boolean");
    expect_error(ANYVALUE_DESC, "{\"doubleValue\":\"abc\"}", "doubleValue: not a number");
    expect_error(ANYVALUE_DESC, "{\"doubleValue\":\"inf\"}", "doubleValue: not a number");
    /* integers */
    expect_error(PC_REQUEST_DESC,
                 "{\"resourceProfiles\":[{\"scopeProfiles\":[{},{\"profiles\":[{\"samples\":"
                 "[{},{},{},{\"values\":[1.5]}]}]}]}]}",
                 "resourceProfiles[0].scopeProfiles[1].profiles[0].samples[3].values[0]: "
                 "not an integer");
    expect_error(PC_REQUEST_DESC,
                 "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{\"samples\":"
                 "[{\"values\":[\"12x\"]}]}]}]}]}",
                 "samples[0].values[0]: not an integer");
    expect_error(PROFILE_DESC, "{\"durationNano\":\"-1\"}", "durationNano: negative value");
    expect_error(PROFILE_DESC, "{\"durationNano\":-5}", "durationNano: negative value");
    expect_error(PROFILE_DESC, "{\"timeUnixNano\":\"18446744073709551616\"}",
                 "timeUnixNano: integer out of range");
    expect_error(PROFILE_DESC, "{\"period\":\"9223372036854775808\"}",
                 "period: integer out of range");
    expect_error(PROFILE_DESC, "{\"period\":\" 1\"}", "period: not an integer");
    expect_error(PROFILE_DESC, "{\"period\":\"\"}", "period: not an integer");
    expect_error(PROFILE_DESC, "{\"period\":true}", "period: not an integer (got boolean)");
    expect_error(PROFILE_DESC, "{\"droppedAttributesCount\":4294967296}",
                 "droppedAttributesCount: integer out of range");
    expect_error(PROFILE_DESC, "{\"attributeIndices\":[1,2147483648]}",
                 "attributeIndices[1]: integer out of range");
    expect_error(MAPPING_DESC, "{\"filenameStrindex\":\"-2147483649\"}",
                 "filenameStrindex: integer out of range");
    /* bytes */
    expect_error(ANYVALUE_DESC, "{\"bytesValue\":\"A\"}", "bytesValue: invalid base64");
    expect_error(ANYVALUE_DESC, "{\"bytesValue\":\"AA*A\"}", "bytesValue: invalid base64");
    expect_error(ANYVALUE_DESC, "{\"bytesValue\":\"A===\"}", "bytesValue: invalid base64");
    /* invalid JSON */
    expect_error(PC_REQUEST_DESC, "{\"resourceProfiles\":[", "invalid JSON");
    expect_error(PC_REQUEST_DESC, "", "invalid JSON");
    expect_error(PC_REQUEST_DESC, "{} x", "invalid JSON");
    expect_error(PC_REQUEST_DESC, "{\"a\":\"\\ud800\"}", "invalid JSON");
    expect_error(PC_REQUEST_DESC, "{\"a\":\"\xff\"}", "invalid JSON");
    /* a NUL the model's C strings cannot hold: the reason, not jansson's flag */
    expect_error(PC_REQUEST_DESC, "{\"dictionary\":{\"stringTable\":[\"\",\"a\\u0000b\"]}}",
                 "\\u0000 (a NUL byte) in a string: profcol holds strings without NUL bytes");
}

/* [[[...]]] through AnyValue.arrayValue, and a plain bracket bomb for the parser. */
static void test_depth(void)
{
    pc_buf b = {0};
    int levels = 200;
    for (int i = 0; i < levels; i++)
        pc_buf_printf(&b, "{\"arrayValue\":{\"values\":[");
    pc_buf_printf(&b, "{\"intValue\":1}");
    for (int i = 0; i < levels; i++)
        pc_buf_printf(&b, "]}}");
    expect_error(ANYVALUE_DESC, (const char *)b.data, "nesting too deep");
    pc_buf_free(&b);

    /* kvlist bomb */
    for (int i = 0; i < levels; i++)
        pc_buf_printf(&b, "{\"kvlistValue\":{\"values\":[{\"value\":");
    pc_buf_printf(&b, "{}");
    for (int i = 0; i < levels; i++)
        pc_buf_printf(&b, "}]}}");
    expect_error(ANYVALUE_DESC, (const char *)b.data, "nesting too deep");
    pc_buf_free(&b);

    /* 100000 brackets: jansson's own depth limit stops it */
    size_t n = 100000;
    char *s = malloc(2 * n + 1);
    memset(s, '[', n);
    memset(s + n, ']', n);
    s[2 * n] = 0;
    expect_error(PC_REQUEST_DESC, s, "invalid JSON");
    free(s);

    /* moderate nesting (20 arrays) is fine */
    for (int i = 0; i < 20; i++)
        pc_buf_printf(&b, "{\"arrayValue\":{\"values\":[");
    pc_buf_printf(&b, "{\"intValue\":\"-7\"}");
    for (int i = 0; i < 20; i++)
        pc_buf_printf(&b, "]}}");
    pc_arena *a = pc_arena_new(1024);
    pc_error err = {0};
    ProtobufCMessage *m = NULL;
    CHECK_EQ_INT(pc_json_decode(ANYVALUE_DESC, (const char *)b.data, b.len, a, &m, &err), 0);
    if (m) {
        const pc_anyvalue *v = (const pc_anyvalue *)m;
        for (int i = 0; i < 20 && v; i++) {
            CHECK_EQ_INT(v->value_case, AV(ARRAY_VALUE));
            v = v->value_case == AV(ARRAY_VALUE) && v->array_value->n_values == 1
                    ? v->array_value->values[0]
                    : NULL;
        }
        CHECK(v != NULL);
        if (v) CHECK_EQ_INT(v->int_value, -7);
    }
    pc_arena_free(a);
    pc_buf_free(&b);
}

/* decode json into desc, encode, and return the encoding (caller frees). */
static char *reencode(const ProtobufCMessageDescriptor *desc, const char *json, pc_arena *a,
                      ProtobufCMessage **m)
{
    pc_error err = {0};
    *m = NULL;
    if (pc_json_decode(desc, json, strlen(json), a, m, &err) < 0) {
        fprintf(stderr, "decode %s: %s\n", json, err.msg);
        return NULL;
    }
    pc_buf b = {0};
    pc_json_encode(*m, &b);
    return (char *)b.data;
}

static void test_int64_exact(void)
{
    pc_arena *a = pc_arena_new(1024);
    ProtobufCMessage *m;
    char *s = reencode(PROFILE_DESC,
                       "{\"timeUnixNano\":\"18446744073709551615\",\"durationNano\":"
                       "\"9007199254740993\",\"period\":\"-9223372036854775808\"}",
                       a, &m);
    CHECK(s != NULL);
    if (s) {
        const pc_profile *p = (const pc_profile *)m;
        CHECK(p->time_unix_nano == UINT64_MAX);
        CHECK(p->duration_nano == UINT64_C(9007199254740993));
        CHECK(p->period == INT64_MIN);
        CHECK_STR(s, "{\"timeUnixNano\":\"18446744073709551615\",\"durationNano\":"
                     "\"9007199254740993\",\"period\":\"-9223372036854775808\"}");
        free(s);
    }
    /* numbers within int64 keep exact values too */
    s = reencode(PROFILE_DESC, "{\"timeUnixNano\":9223372036854775807,\"period\":9007199254740993}",
                 a, &m);
    CHECK(s != NULL);
    if (s) {
        CHECK(((const pc_profile *)m)->time_unix_nano == UINT64_C(9223372036854775807));
        CHECK(((const pc_profile *)m)->period == INT64_C(9007199254740993));
        CHECK_STR(s, "{\"timeUnixNano\":\"9223372036854775807\",\"period\":\"9007199254740993\"}");
        free(s);
    }
    /* 32-bit ints accept numeric strings and integral reals, encode as numbers */
    s = reencode(MAPPING_DESC, "{\"filenameStrindex\":\"7\",\"attributeIndices\":[\"1\",2.0,3]}", a,
                 &m);
    CHECK(s != NULL);
    if (s) {
        CHECK_STR(s, "{\"filenameStrindex\":7,\"attributeIndices\":[1,2,3]}");
        free(s);
    }
    pc_arena_free(a);
}

static void test_anyvalue_oneof(void)
{
    pc_arena *a = pc_arena_new(1024);
    ProtobufCMessage *m;
    char *s;
    const pc_anyvalue *v;

    s = reencode(ANYVALUE_DESC, "{\"boolValue\":true}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->value_case == AV(BOOL_VALUE) && v->bool_value == 1);
    CHECK_STR(s, "{\"boolValue\":true}");
    free(s);
    /* a set oneof member is written even when it holds the default value */
    s = reencode(ANYVALUE_DESC, "{\"boolValue\":false}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->value_case == AV(BOOL_VALUE) && v->bool_value == 0);
    CHECK_STR(s, "{\"boolValue\":false}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"intValue\":0}", a, &m);
    CHECK_STR(s, "{\"intValue\":\"0\"}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"intValue\":-42}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->value_case == AV(INT_VALUE) && v->int_value == -42);
    CHECK_STR(s, "{\"intValue\":\"-42\"}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"stringValue\":\"\"}", a, &m);
    CHECK_STR(s, "{\"stringValue\":\"\"}");
    free(s);

    s = reencode(ANYVALUE_DESC, "{\"doubleValue\":0.1}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->value_case == AV(DOUBLE_VALUE) && v->double_value == 0.1);
    CHECK_STR(s, "{\"doubleValue\":0.1}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"doubleValue\":3}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->value_case == AV(DOUBLE_VALUE) && v->double_value == 3.0);
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"doubleValue\":1.7976931348623157e308}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->double_value == 1.7976931348623157e308);
    ProtobufCMessage *m2;
    char *s2 = s ? reencode(ANYVALUE_DESC, s, a, &m2) : NULL;
    CHECK(s2 && ((const pc_anyvalue *)m2)->double_value == 1.7976931348623157e308);
    free(s);
    free(s2);
    s = reencode(ANYVALUE_DESC, "{\"doubleValue\":\"NaN\"}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && isnan(v->double_value));
    CHECK_STR(s, "{\"doubleValue\":\"NaN\"}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"doubleValue\":\"-Infinity\"}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && isinf(v->double_value) && v->double_value < 0);
    CHECK_STR(s, "{\"doubleValue\":\"-Infinity\"}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"doubleValue\":\"Infinity\"}", a, &m);
    CHECK_STR(s, "{\"doubleValue\":\"Infinity\"}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"doubleValue\":-0.0}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->double_value == 0 && signbit(v->double_value));
    CHECK_STR(s, "{\"doubleValue\":-0.0}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"doubleValue\":0}", a, &m);
    CHECK_STR(s, "{\"doubleValue\":0}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"doubleValue\":-1.5e-300}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->double_value == -1.5e-300);
    CHECK_STR(s, "{\"doubleValue\":-1.5e-300}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"doubleValue\":\"2.5\"}", a, &m);
    CHECK_STR(s, "{\"doubleValue\":2.5}");
    free(s);

    s = reencode(ANYVALUE_DESC,
                 "{\"arrayValue\":{\"values\":[{\"stringValue\":\"x\"},{\"intValue\":\"5\"},{}]}}",
                 a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->value_case == AV(ARRAY_VALUE));
    if (v && v->value_case == AV(ARRAY_VALUE)) {
        CHECK_EQ_INT(v->array_value->n_values, 3);
        if (v->array_value->n_values == 3) {
            CHECK_STR(v->array_value->values[0]->string_value, "x");
            CHECK_EQ_INT(v->array_value->values[1]->int_value, 5);
            CHECK_EQ_INT(v->array_value->values[2]->value_case, AV(_NOT_SET));
        }
    }
    CHECK_STR(s, "{\"arrayValue\":{\"values\":[{\"stringValue\":\"x\"},{\"intValue\":\"5\"},{}]}}");
    free(s);
    s = reencode(ANYVALUE_DESC, "{\"arrayValue\":{}}", a, &m);
    CHECK_STR(s, "{\"arrayValue\":{}}");
    free(s);

    s = reencode(ANYVALUE_DESC,
                 "{\"kvlistValue\":{\"values\":[{\"key\":\"k\",\"value\":{\"doubleValue\":1.5}},"
                 "{\"key\":\"n\",\"value\":{\"kvlistValue\":{\"values\":[{\"key\":\"z\"}]}}}]}}",
                 a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->value_case == AV(KVLIST_VALUE));
    if (v && v->value_case == AV(KVLIST_VALUE)) {
        CHECK_EQ_INT(v->kvlist_value->n_values, 2);
        if (v->kvlist_value->n_values == 2) {
            CHECK_STR(v->kvlist_value->values[0]->key, "k");
            CHECK(v->kvlist_value->values[0]->value->double_value == 1.5);
            CHECK_STR(v->kvlist_value->values[1]->key, "n");
            CHECK_EQ_INT(v->kvlist_value->values[1]->value->value_case, AV(KVLIST_VALUE));
            CHECK_STR(v->kvlist_value->values[1]->value->kvlist_value->values[0]->key, "z");
        }
    }
    CHECK_STR(s, "{\"kvlistValue\":{\"values\":[{\"key\":\"k\",\"value\":{\"doubleValue\":1.5}},"
                 "{\"key\":\"n\",\"value\":{\"kvlistValue\":{\"values\":[{\"key\":\"z\"}]}}}]}}");
    free(s);

    /* null means absent */
    s = reencode(ANYVALUE_DESC, "{\"stringValue\":null}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->value_case == AV(_NOT_SET));
    CHECK_STR(s, "{}");
    free(s);
    pc_arena_free(a);
}

static void test_bytes(void)
{
    pc_arena *a = pc_arena_new(1024);
    ProtobufCMessage *m;
    const pc_anyvalue *v;
    /* every length mod 3, all byte values */
    uint8_t raw[256];
    for (int i = 0; i < 256; i++)
        raw[i] = (uint8_t)(255 - i);
    for (size_t len = 0; len <= 7; len++) {
        pc_anyvalue av = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
        av.value_case = AV(BYTES_VALUE);
        av.bytes_value.data = raw;
        av.bytes_value.len = len == 7 ? 256 : len;
        pc_buf b = {0};
        pc_json_encode(&av.base, &b);
        pc_error err = {0};
        m = NULL;
        CHECK_EQ_INT(pc_json_decode(ANYVALUE_DESC, (const char *)b.data, b.len, a, &m, &err), 0);
        v = (const pc_anyvalue *)m;
        CHECK(
            v && v->value_case == AV(BYTES_VALUE) && v->bytes_value.len == av.bytes_value.len &&
            (av.bytes_value.len == 0 || memcmp(v->bytes_value.data, raw, av.bytes_value.len) == 0));
        pc_buf_free(&b);
    }
    char *s = reencode(ANYVALUE_DESC, "{\"bytesValue\":\"aGVsbG8gd29ybGQ=\"}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->bytes_value.len == 11 && memcmp(v->bytes_value.data, "hello world", 11) == 0);
    CHECK_STR(s, "{\"bytesValue\":\"aGVsbG8gd29ybGQ=\"}");
    free(s);
    /* URL-safe alphabet and missing padding */
    s = reencode(ANYVALUE_DESC, "{\"bytesValue\":\"-_8\"}", a, &m);
    v = (const pc_anyvalue *)m;
    CHECK(v && v->bytes_value.len == 2 && v->bytes_value.data[0] == 0xfb &&
          v->bytes_value.data[1] == 0xff);
    CHECK_STR(s, "{\"bytesValue\":\"+/8=\"}");
    free(s);
    pc_arena_free(a);
}

static void test_strings(void)
{
    /* control characters, quotes, backslash and invalid UTF-8 from protobuf input */
    pc_scope sc = OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
    sc.name = "a\"b\\c\x01\x1f\t/\xe2\x82\xac";
    sc.version = "bad\xff\xc3(";
    pc_buf b = {0};
    pc_json_encode(&sc.base, &b);
    CHECK_STR((const char *)b.data, "{\"name\":\"a\\\"b\\\\c\\u0001\\u001f\\t/\xe2\x82\xac\","
                                    "\"version\":\"bad\xef\xbf\xbd\xef\xbf\xbd(\"}");
    pc_arena *a = pc_arena_new(1024);
    ProtobufCMessage *m = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(pc_json_decode(SCOPE_DESC, (const char *)b.data, b.len, a, &m, &err), 0);
    if (m) CHECK_STR(((const pc_scope *)m)->name, sc.name);
    pc_buf_free(&b);
    /* empty message, appended after existing content */
    pc_buf_append(&b, "x", 1);
    pc_scope empty = OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
    pc_json_encode(&empty.base, &b);
    CHECK_STR((const char *)b.data, "x{}");
    pc_buf_free(&b);
    /* a function with only zeros is {} */
    pc_function fn = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__FUNCTION__INIT;
    pc_json_encode(&fn.base, &b);
    CHECK_STR((const char *)b.data, "{}");
    pc_buf_free(&b);
    (void)FUNCTION_DESC;
    pc_arena_free(a);
}

static void test_batch(void)
{
    pc_batch *b = NULL;
    pc_error err = {0};
    CHECK_EQ_INT(pc_batch_decode_json(REQUEST_JSON, strlen(REQUEST_JSON), &b, &err), 0);
    CHECK(b != NULL);
    if (!b) return;
    CHECK_EQ_INT(atomic_load(&b->refs), 1);
    CHECK(b->req != NULL);
    check_request(b->req);
    pc_buf out = {0};
    pc_batch_encode_json(b, &out);
    pc_batch *b2 = NULL;
    CHECK_EQ_INT(pc_batch_decode_json((const char *)out.data, out.len, &b2, &err), 0);
    if (b2) {
        CHECK(same_packed(&b->req->base, &b2->req->base));
        pc_arena_free(b2->arena);
        free(b2);
    }
    pc_buf_free(&out);
    pc_arena_free(b->arena);
    free(b);

    /* empty request */
    CHECK_EQ_INT(pc_batch_decode_json("{}", 2, &b, &err), 0);
    if (b) {
        CHECK_EQ_INT(b->req->n_resource_profiles, 0);
        CHECK(b->req->dictionary == NULL);
        pc_arena_free(b->arena);
        free(b);
    }
    b = (pc_batch *)1;
    CHECK_EQ_INT(pc_batch_decode_json("{\"resourceProfiles\":5}", 22, &b, &err), PC_EINVAL);
    CHECK(b == NULL);
    CHECK_CONTAINS(err.msg, "resourceProfiles: expected an array");
}

/* pc_fmt_i64 / pc_fmt_u64 (base/buf.h, the JSON writers' numbers) against printf. */
static void test_fmt_int(void)
{
    const int64_t v[] = {0,   1,         -1,        9,         10,
                         -10, 123456789, INT64_MAX, INT64_MIN, -9223372036854775807};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        char got[32], want[32];
        got[pc_fmt_i64(got, v[i])] = 0;
        snprintf(want, sizeof want, "%" PRId64, v[i]);
        CHECK_STR(got, want);
    }
    char got[32], want[32];
    got[pc_fmt_u64(got, UINT64_MAX)] = 0;
    snprintf(want, sizeof want, "%" PRIu64, UINT64_MAX);
    CHECK_STR(got, want);
}

/* pc_buf_puts, pc_buf_put_u64 and pc_str_copy (base/buf.h, the HTTP heads and request fields)
 * against snprintf, including cuts at every size. */
static void test_buf_puts(void)
{
    pc_buf b = {0};
    pc_buf_puts(&b, "Content-Length: ");
    pc_buf_put_u64(&b, 1234567);
    pc_buf_puts(&b, "");
    pc_buf_put_u64(&b, 0);
    pc_buf_puts(&b, "\r\n");
    char want[64];
    snprintf(want, sizeof want, "Content-Length: %zu%d\r\n", (size_t)1234567, 0);
    CHECK_STR((char *)b.data, want);
    CHECK_EQ_INT((int)b.len, (int)strlen(want));
    pc_buf_free(&b);
    const char *src = "127.0.0.1:53211";
    for (size_t size = 1; size <= strlen(src) + 2; size++) {
        char got[32], exp[32];
        memset(got, 'x', sizeof got);
        size_t n = pc_str_copy(got, size, src);
        int m = snprintf(exp, size, "%s", src);
        CHECK_STR(got, exp);
        CHECK_EQ_INT((int)n, (int)strlen(exp));
        CHECK(m == (int)strlen(src));
    }
}

int main(void)
{
    RUN(test_fmt_int);
    RUN(test_buf_puts);
    RUN(test_decode_request);
    RUN(test_round_trip);
    RUN(test_snake_case);
    RUN(test_errors);
    RUN(test_depth);
    RUN(test_int64_exact);
    RUN(test_anyvalue_oneof);
    RUN(test_bytes);
    RUN(test_strings);
    RUN(test_batch);
    return check_report();
}
