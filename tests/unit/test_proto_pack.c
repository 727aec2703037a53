/* pc_proto_pack (src/pdata/proto_pack.h) against protobuf-c's own pack (tests/unit/pack_oracle.h):
 * hand-built OTLP messages with their bytes written out by hand too, a synthetic descriptor with
 * every scalar type under every label (proto3 unlabeled, optional, required, oneof, packed and
 * unpacked repeated) filled with edge values thousands of times, the test data files and the
 * fuzz seeds decoded as each signal's request. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "pack_oracle.h"
#include "testdata.h"

#include "base/arena.h"
#include "pdata/pdata.h"

static char why[400];

#define SAME(m)                                                                                    \
    do {                                                                                           \
        int rc_ = pack_compare((const ProtobufCMessage *)(m), why, sizeof why);                    \
        if (rc_) fprintf(stderr, "  %s\n", why);                                                   \
        CHECK_EQ_INT(rc_, 0);                                                                      \
    } while (0)

/* m's pc_proto_pack bytes are exactly want (n bytes). */
static void expect_bytes(const ProtobufCMessage *m, const uint8_t *want, size_t n)
{
    pc_buf out = {0};
    CHECK_EQ_INT(pc_proto_pack(m, &out), n);
    CHECK(out.len == n && memcmp(out.data, want, n) == 0);
    pc_buf_free(&out);
    SAME(m);
}

static void test_varint_len(void)
{
    CHECK_EQ_INT(pc_proto_varint_len(0), 1);
    for (unsigned bits = 1; bits <= 64; bits++) {
        uint64_t top = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
        CHECK_EQ_INT(pc_proto_varint_len(top), (bits + 6) / 7);
        CHECK_EQ_INT(pc_proto_varint_len(1ull << (bits - 1)), (bits + 6) / 7);
    }
}

/* A negative int32 is a 10-byte varint; packed and unpacked repeated; empty repeated left out. */
static void test_sample_by_hand(void)
{
    pc_sample s = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SAMPLE__INIT;
    s.stack_index = -1;
    int64_t values[] = {1, -1};
    s.values = values;
    s.n_values = 2;
    uint64_t ts[] = {5};
    s.timestamps_unix_nano = ts;
    s.n_timestamps_unix_nano = 1;
    static const uint8_t want[] = {
        0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, /* stack_index -1 */
        0x22, 0x0b, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, /* values */
        0x2a, 0x08, 5,    0,    0,    0,    0,    0,    0,    0, /* timestamps, fixed64 */
    };
    expect_bytes(&s.base, want, sizeof want);

    /* unpacked repeated: one tag per string, "" included; an empty table is left out */
    pc_dictionary d = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    char *strs[] = {"", "ab"};
    d.string_table = strs;
    d.n_string_table = 2;
    static const uint8_t want_d[] = {0x2a, 0x00, 0x2a, 0x02, 'a', 'b'};
    expect_bytes(&d.base, want_d, sizeof want_d);
}

/* A oneof member is written even when zero (its case says it is set); unknown fields follow the
 * known ones, as they came. */
static void test_oneof_and_unknown_by_hand(void)
{
    pc_anyvalue v = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
    v.bool_value = 0;
    static const uint8_t want_b[] = {0x10, 0x00};
    expect_bytes(&v.base, want_b, sizeof want_b);
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    v.string_value = NULL; /* a NULL string member is not set */
    expect_bytes(&v.base, (const uint8_t *)"", 0);

    pc_keyvalue kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    kv.key = "k";
    kv.value = &v;
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
    v.int_value = 0;
    uint8_t payload[] = {0x03, 'x', 'y', 'z'};
    ProtobufCMessageUnknownField u[] = {
        {.tag = 2000, .wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, .len = 4, .data = payload},
        {.tag = 9, .wire_type = PROTOBUF_C_WIRE_TYPE_VARINT, .len = 1, .data = payload + 1},
    };
    kv.base.unknown_fields = u;
    kv.base.n_unknown_fields = 2;
    static const uint8_t want_kv[] = {0x0a, 0x01, 'k',  0x12, 0x02, 0x18, 0x00, /* key, value */
                                      0x82, 0x7d, 0x03, 'x',  'y',  'z',  0x48, 'x'};
    expect_bytes(&kv.base, want_kv, sizeof want_kv);
}

#include "all_desc.h"

static void test_every_kind(void)
{
    all_init();
    CHECK(all_desc.n_fields == NTYPES * K_N - 3);
    int failed = 0;
    for (int i = 0; i < 3000 && failed < 5; i++) {
        pc_arena *a = pc_arena_new(1 << 16);
        ProtobufCMessage *m = all_new(a, i % 4);
        int rc = pack_compare(m, why, sizeof why);
        if (rc) fprintf(stderr, "  message %d: %s\n", i, why);
        failed += rc != 0;
        pc_arena_free(a);
    }
    CHECK_EQ_INT(failed, 0);
}

/* An all-zero All message: only the required fields are written. */
static void test_every_kind_zero(void)
{
    pc_arena *a = pc_arena_new(4096);
    ProtobufCMessage *m = pc_arena_calloc(a, 1, all_desc.sizeof_message);
    m->descriptor = &all_desc;
    SAME(m);
    pc_arena_free(a);
}

/* ---- real data ---------------------------------------------------------------------------- */

static void test_data_files(void)
{
    const char *files[] = {"go-cpu.pb.gz", "go-heap.pb.gz"};
    for (size_t i = 0; i < 2; i++) {
        pc_batch *b = NULL;
        CHECK_EQ_INT(read_pprof_batch(files[i], NULL, &b), 0);
        if (!b) continue;
        SAME(pc_batch_message(b));
        pc_buf enc = {0};
        pc_batch_encode_proto(b, &enc);
        uint8_t *ref = malloc(enc.len + 1);
        CHECK_EQ_INT(protobuf_c_message_pack(pc_batch_message(b), ref), enc.len);
        CHECK(memcmp(ref, enc.data, enc.len) == 0);
        free(ref);
        pc_buf_free(&enc);
        pc_batch_unref(b);
    }
}

/* The fuzz seeds of the protobuf targets, decoded as every signal's request (each must decode
 * as one at least); fuzz_signals' seeds start with a byte choosing the signal. */
static void test_fuzz_seeds(void)
{
    const char *seeds[] = {"fuzz_signals/traces_proto",  "fuzz_signals/metrics_proto",
                           "fuzz_signals/logs_proto",    "fuzz_wire_check/go-cpu.pb",
                           "fuzz_wire_check/go-heap.pb", "fuzz_wire_check/values.pb"};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char name[200];
        snprintf(name, sizeof name, "../fuzz/corpus/%s", seeds[i]);
        pc_buf in = {0};
        CHECK_EQ_INT(read_file(name, &in), 0);
        size_t skip = strncmp(seeds[i], "fuzz_signals/", 13) == 0;
        int decoded = 0;
        for (int s = 0; s < PC_SIGNAL_COUNT && in.len >= skip; s++) {
            int rc = pack_compare_input(pc_signal_infos[s].request, in.data + skip, in.len - skip,
                                        why, sizeof why);
            if (rc < 0) fprintf(stderr, "  %s: %s\n", seeds[i], why);
            CHECK(rc >= 0);
            decoded += rc == 0;
        }
        CHECK(decoded > 0);
        pc_buf_free(&in);
    }
}

int main(void)
{
    RUN(test_varint_len);
    RUN(test_sample_by_hand);
    RUN(test_oneof_and_unknown_by_hand);
    RUN(test_every_kind);
    RUN(test_every_kind_zero);
    RUN(test_data_files);
    RUN(test_fuzz_seeds);
    fprintf(stderr, "%d checks, %d failures\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}
