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

/* ---- a descriptor with every type under every label ------------------------------------- */

enum { K_NONE, K_OPT, K_REQ, K_ONEOF, K_PACKED, K_UNPACKED, K_N };
#define NTYPES 17 /* PROTOBUF_C_TYPE_INT32 .. PROTOBUF_C_TYPE_MESSAGE */
#define SLOT   32 /* a value (up to ProtobufCBinaryData) and its quantifier */

static ProtobufCFieldDescriptor all_fields[NTYPES * K_N];
static ProtobufCMessageDescriptor all_desc;
static unsigned all_kind[NTYPES * K_N];
static size_t oneof_case_at;
static const char default_str[] = "dflt";

static bool pointer_type(ProtobufCType t)
{
    return t == PROTOBUF_C_TYPE_STRING || t == PROTOBUF_C_TYPE_BYTES ||
           t == PROTOBUF_C_TYPE_MESSAGE;
}

static size_t stride(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    default: return 4;
    }
}

/* Field numbers of every tag length: 1-15 one byte, then two, then up to 2^29-1 (five). */
static uint32_t field_id(unsigned i, unsigned n)
{
    if (i + 3 < n) return i + 1;
    return i + 3 == n ? 2047 + i : i + 2 == n ? (1u << 21) + i : (1u << 29) - 1;
}

static void all_init(void)
{
    size_t off = (sizeof(ProtobufCMessage) + 15) & ~(size_t)15;
    oneof_case_at = off;
    off += 16;
    unsigned n = 0;
    for (unsigned k = 0; k < K_N; k++)
        for (unsigned t = 0; t < NTYPES; t++) {
            if (k == K_PACKED && pointer_type((ProtobufCType)t)) continue;
            ProtobufCFieldDescriptor *f = &all_fields[n];
            all_kind[n++] = k;
            f->name = "f";
            f->type = (ProtobufCType)t;
            f->label = k == K_NONE    ? PROTOBUF_C_LABEL_NONE
                       : k == K_REQ   ? PROTOBUF_C_LABEL_REQUIRED
                       : k == K_OPT   ? PROTOBUF_C_LABEL_OPTIONAL
                       : k == K_ONEOF ? (t % 2 ? PROTOBUF_C_LABEL_NONE : PROTOBUF_C_LABEL_OPTIONAL)
                                      : PROTOBUF_C_LABEL_REPEATED;
            f->offset = (unsigned)off;
            f->quantifier_offset = (unsigned)(k == K_ONEOF ? oneof_case_at : off + 16);
            off += SLOT;
            f->descriptor = t == PROTOBUF_C_TYPE_MESSAGE ? &all_desc : NULL;
            f->default_value = t == PROTOBUF_C_TYPE_STRING ? default_str : NULL;
            f->flags = k == K_PACKED  ? PROTOBUF_C_FIELD_FLAG_PACKED
                       : k == K_ONEOF ? PROTOBUF_C_FIELD_FLAG_ONEOF
                                      : 0;
        }
    for (unsigned i = 0; i < n; i++)
        all_fields[i].id = field_id(i, n);
    all_desc.magic = PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC;
    all_desc.name = all_desc.short_name = all_desc.c_name = "All";
    all_desc.package_name = "test";
    all_desc.sizeof_message = off;
    all_desc.n_fields = n;
    all_desc.fields = all_fields;
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Integers at the varint length steps, the sign bits of 32 and 64 bits, and random ones. */
static uint64_t edge_u64(void)
{
    static const uint64_t edges[] = {0,
                                     1,
                                     127,
                                     128,
                                     16383,
                                     16384,
                                     0x7fffffff,
                                     0x80000000u,
                                     0xffffffffu,
                                     1ull << 35,
                                     0x7fffffffffffffffull,
                                     1ull << 63,
                                     UINT64_MAX};
    uint64_t r = rnd();
    if (r % 3) return edges[(r >> 8) % (sizeof edges / sizeof edges[0])];
    return rnd() >> (rnd() % 64);
}

static ProtobufCMessage *all_new(pc_arena *a, int depth);

static void fill_string(pc_arena *a, char **v, bool repeated)
{
    static const char *const strs[] = {"", "x", default_str, NULL, NULL};
    size_t r = rnd() % 6;
    if (r < 5) *v = (char *)strs[r];
    if (r == 3 || r == 5) { /* 200 bytes: a two-byte length */
        *v = pc_arena_alloc(a, 201);
        memset(*v, 'a', 200);
        (*v)[200] = 0;
    }
    if (r == 4 && repeated) *v = ""; /* protobuf-c cannot size a NULL element */
}

static void fill_value(pc_arena *a, ProtobufCType t, void *v, int depth, bool repeated)
{
    size_t w = stride(t);
    if (t == PROTOBUF_C_TYPE_STRING) {
        fill_string(a, v, repeated);
    } else if (t == PROTOBUF_C_TYPE_BYTES) {
        ProtobufCBinaryData *b = v;
        size_t lens[] = {0, 0, 3, 300};
        b->len = lens[rnd() % 4];
        b->data = b->len || rnd() % 2 ? pc_arena_alloc(a, b->len + 1) : NULL;
        for (size_t i = 0; i < b->len; i++)
            b->data[i] = (uint8_t)rnd();
    } else if (t == PROTOBUF_C_TYPE_MESSAGE) {
        bool make = repeated || (depth > 0 && rnd() % 3 == 0);
        *(ProtobufCMessage **)v = make ? all_new(a, depth - 1) : NULL;
    } else if (t == PROTOBUF_C_TYPE_FLOAT || t == PROTOBUF_C_TYPE_DOUBLE) {
        double d[] = {0.0, -0.0, NAN, 1.5, -2.25e10};
        double x = d[rnd() % 5];
        float f = (float)x;
        if (rnd() % 4 == 0) {
            uint64_t bits = rnd();
            memcpy(v, &bits, w);
        } else {
            memcpy(v, t == PROTOBUF_C_TYPE_FLOAT ? (void *)&f : (void *)&x, w);
        }
    } else if (t == PROTOBUF_C_TYPE_BOOL) {
        *(protobuf_c_boolean *)v = (protobuf_c_boolean)(rnd() % 3); /* 2 is written as 1 */
    } else {
        uint64_t x = edge_u64();
        memcpy(v, &x, w); /* little-endian: the low half for 32-bit types */
    }
}

static void fill_repeated(pc_arena *a, const ProtobufCFieldDescriptor *f, char *base, int depth)
{
    size_t n = rnd() % 5;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED && rnd() % 8 == 0) n = 10 + rnd() % 200;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE && depth < 0) n = 0;
    size_t w = stride(f->type);
    char *arr = n || rnd() % 2 ? pc_arena_calloc(a, n + 1, w) : NULL;
    for (size_t i = 0; i < n; i++)
        fill_value(a, f->type, arr + i * w, depth, true);
    *(void **)(base + f->offset) = arr;
    *(size_t *)(base + f->quantifier_offset) = n;
}

static void fill_unknown(pc_arena *a, ProtobufCMessage *m)
{
    static const uint32_t tags[] = {0, 1, 15, 16, 2047, 2048, 1u << 21, (1u << 29) - 1};
    static const uint8_t wts[] = {0, 1, 2, 5};
    m->n_unknown_fields = rnd() % 3;
    if (!m->n_unknown_fields) return;
    m->unknown_fields = pc_arena_calloc(a, m->n_unknown_fields, sizeof *m->unknown_fields);
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
        u->tag = tags[rnd() % 8];
        u->wire_type = (ProtobufCWireType)wts[rnd() % 4];
        u->len = rnd() % 4 == 0 ? 200 : rnd() % 6;
        u->data = u->len ? pc_arena_alloc(a, u->len) : NULL;
        for (size_t j = 0; j < u->len; j++)
            u->data[j] = (uint8_t)rnd();
    }
}

/* A message of the All type: every field filled at random (half left zero), has_ flags and the
 * oneof case random (also a case that names no member), sub-messages down to depth. */
static ProtobufCMessage *all_new(pc_arena *a, int depth)
{
    char *base = pc_arena_calloc(a, 1, all_desc.sizeof_message);
    ProtobufCMessage *m = (ProtobufCMessage *)base;
    m->descriptor = &all_desc;
    for (unsigned i = 0; i < all_desc.n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &all_fields[i];
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            fill_repeated(a, f, base, depth);
            continue;
        }
        if (rnd() % 2) fill_value(a, f->type, base + f->offset, depth, false);
        if (all_kind[i] == K_OPT) *(protobuf_c_boolean *)(base + f->quantifier_offset) = rnd() % 2;
    }
    unsigned pick = (unsigned)(rnd() % all_desc.n_fields);
    uint32_t c = all_kind[pick] == K_ONEOF ? all_fields[pick].id : rnd() % 2 ? 0 : 99999;
    *(uint32_t *)(base + oneof_case_at) = c;
    fill_unknown(a, m);
    return m;
}

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
