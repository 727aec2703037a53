/* pc_proto_unpack (src/pdata/proto_unpack.h) against scan + protobuf-c's unpack
 * (tests/unit/unpack_oracle.h: the same verdict and message; taken, the same model field by
 * field and the same bytes packed again): thousands of random messages of a type with every
 * field type under every label (tests/unit/all_desc.h), two of them back to back (protobuf-c
 * merges the singular submessages sent twice), and mutations of them; the test data files and
 * the fuzz seeds as each signal's request; refusals built by hand; and the arena's use under a
 * budget, never above the scan's estimate. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "all_desc.h"
#include "check.h"
#include "payload.h"
#include "testdata.h"
#include "unpack_oracle.h"

#include "base/budget.h"
#include "pdata/proto_pack.h"

static char why[600];

/* the oracle's verdict: 0 taken by both, 1 refused by both; -1 (a failure) when they differ */
static int compare(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n)
{
    int rc = unpack_compare(d, p, n, why, sizeof why);
    if (rc < 0) fprintf(stderr, "  %s\n", why);
    return rc;
}

static void all_wire(pc_buf *out, int depth)
{
    pc_arena *a = pc_arena_new(1 << 16);
    ProtobufCMessage *m = all_new(a, depth);
    size_t n = protobuf_c_message_get_packed_size(m);
    pc_buf_reserve(out, out->len + n + 1);
    out->len += protobuf_c_message_pack(m, out->data + out->len);
    pc_arena_free(a);
}

/* One change to p: a byte flipped, set, dropped or inserted, the end cut, a slice doubled. */
static void mutate(pc_buf *p)
{
    if (!p->len) return;
    size_t at = rnd() % p->len;
    switch (rnd() % 6) {
    case 0: p->data[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
    case 1: p->data[at] = (uint8_t)rnd(); break;
    case 2: memmove(p->data + at, p->data + at + 1, p->len - at - 1), p->len--; break;
    case 3: p->len = at; break;
    case 4: {
        uint8_t b = (uint8_t)rnd();
        pc_buf_reserve(p, p->len + 2);
        memmove(p->data + at + 1, p->data + at, p->len - at);
        p->data[at] = b;
        p->len++;
        break;
    }
    default: {
        size_t n = rnd() % (p->len - at) + 1;
        pc_buf_reserve(p, p->len + n + 1);
        memmove(p->data + at + n, p->data + at, p->len - at);
        p->len += n; /* the slice [at, at + n) now twice */
    }
    }
}

/* All's required message field: an All, which requires one, and so on; where the generator
 * stops, protobuf-c writes an empty one, which lacks its required fields and is refused. Most
 * rounds make it optional so that most messages decode. */
static ProtobufCFieldDescriptor *required_message(void)
{
    for (unsigned i = 0; i < all_desc.n_fields; i++)
        if (all_kind[i] == K_REQ && all_fields[i].type == PROTOBUF_C_TYPE_MESSAGE)
            return &all_fields[i];
    return NULL;
}

static void test_random_messages(void)
{
    all_oneof_union = true;
    all_init();
    all_wire_unknown = true;
    ProtobufCFieldDescriptor *rm = required_message();
    CHECK(rm != NULL);
    int failed = 0, taken = 0, refused = 0;
    for (int i = 0; i < 3000 && failed < 5; i++) {
        rm->label = i % 5 ? PROTOBUF_C_LABEL_OPTIONAL : PROTOBUF_C_LABEL_REQUIRED;
        pc_buf w = {0};
        all_wire(&w, i % 4);
        if (i % 3 == 0) all_wire(&w, (i / 3) % 4); /* two back to back: merged */
        int rc = compare(&all_desc, w.data, w.len);
        failed += rc < 0;
        taken += rc == 0;
        for (int k = 0; k < 4; k++) {
            mutate(&w);
            rc = compare(&all_desc, w.data, w.len);
            failed += rc < 0;
            taken += rc == 0;
            refused += rc == 1;
        }
        pc_buf_free(&w);
    }
    fprintf(stderr, "  taken %d, refused %d (mutated)\n", taken, refused);
    CHECK_EQ_INT(failed, 0);
    CHECK(taken > 3000);
    CHECK(refused > 1000);
    all_wire_unknown = false;
    rm->label = PROTOBUF_C_LABEL_REQUIRED;
}

/* Every field of All, alone, under every wire type with odd values: bools of many bytes, varints
 * of 10 and 11 bytes, packed runs cut short, lengths of the wrong multiple. The required fields
 * are made optional for it, or protobuf-c would refuse every one. */
static void test_every_field_every_wire_type(void)
{
    static const struct {
        unsigned wt;
        uint8_t n, v[12];
    } vals[] = {
        {0, 1, {0x40}},
        {0, 2, {0x80, 0x01}},
        {0, 2, {0x80, 0x00}},
        {0, 10, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
        {0, 11, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
        {1, 8, {0, 0, 0, 0, 0, 0, 0x40, 0}},
        {5, 4, {0, 0, 0x80, 0}},
        {2, 1, {0}},
        {2, 2, {1, 0x40}},
        {2, 5, {4, 0x80, 0x01, 0x02, 0x03}},
        {2, 3, {2, 0x80, 0x80}},
        {2, 9, {8, 1, 2, 3, 4, 5, 6, 7, 8}},
        {2, 6, {0x85, 0x80, 0x80, 0x80, 0x00, 0x61}},
        {2, 3, {2, 0xc3, 0xa9}},
        {2, 2, {1, 0xff}},
    };
    all_oneof_union = true;
    all_init();
    for (unsigned i = 0; i < all_desc.n_fields; i++)
        if (all_fields[i].label == PROTOBUF_C_LABEL_REQUIRED)
            all_fields[i].label = PROTOBUF_C_LABEL_OPTIONAL;
    int failed = 0, taken = 0;
    for (unsigned i = 0; i < all_desc.n_fields; i++)
        for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++)
            for (int twice = 0; twice < 2; twice++) {
                uint8_t w[64];
                uint8_t *p = w;
                for (int r = 0; r <= twice; r++) {
                    p = pc_proto_put_varint(p, (uint64_t)all_fields[i].id << 3 | vals[k].wt);
                    memcpy(p, vals[k].v, vals[k].n);
                    p += vals[k].n;
                }
                int rc = compare(&all_desc, w, (size_t)(p - w));
                if (rc < 0)
                    fprintf(stderr,
                            "  field %u (type %d, label %d, kind %u), value %zu, twice %d\n",
                            all_fields[i].id, all_fields[i].type, all_fields[i].label, all_kind[i],
                            k, twice);
                failed += rc < 0;
                taken += rc == 0;
            }
    fprintf(stderr, "  %d of %u taken\n", taken, all_desc.n_fields * 30);
    CHECK_EQ_INT(failed, 0);
    CHECK(taken > 500);
    all_init(); /* the labels back */
}

/* The files the pack test reads: OTLP from the Go profiles, decoded as profiles requests. */
static void test_data_files(void)
{
    const char *files[] = {"go-cpu.pb.gz", "go-heap.pb.gz"};
    for (size_t i = 0; i < 2; i++) {
        pc_batch *b = NULL;
        CHECK_EQ_INT(read_pprof_batch(files[i], NULL, &b), 0);
        if (!b) continue;
        pc_buf enc = {0};
        pc_batch_encode_proto(b, &enc);
        CHECK_EQ_INT(compare(PC_REQUEST_DESC, enc.data, enc.len), 0);
        for (int k = 0; k < 200; k++) { /* a mutation at a time, never two */
            pc_buf m = {0};
            pc_buf_append(&m, enc.data, enc.len);
            mutate(&m);
            CHECK(compare(PC_REQUEST_DESC, m.data, m.len) >= 0);
            pc_buf_free(&m);
        }
        pc_buf_free(&enc);
        pc_batch_unref(b);
    }
}

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
            int rc = compare(pc_signal_infos[s].request, in.data + skip, in.len - skip);
            CHECK(rc >= 0);
            decoded += rc == 0;
        }
        CHECK(decoded > 0);
        pc_buf_free(&in);
    }
}

/* Refusals by hand: each must match the oracle, and say what the scan says. */
static void test_refusals(void)
{
    pc_buf deep = {0}, tmp = {0};
    for (int i = 0; i < 80; i++) { /* All in All: far too deep */
        tmp.len = 0;
        pb_put_len(&tmp, 17, deep.data, deep.len); /* All.f17: a message */
        deep.len = 0;
        pc_buf_append(&deep, tmp.data, tmp.len);
    }
    all_init();
    CHECK_EQ_INT(compare(&all_desc, deep.data, deep.len), 1);
    pc_error e = {0};
    pc_arena *a = pc_arena_new(256);
    ProtobufCMessage *m = NULL;
    CHECK_EQ_INT(pc_proto_unpack(&all_desc, deep.data, deep.len, 64, a, &m, &e), PC_EPROTO);
    CHECK_CONTAINS(e.msg, "nested too deeply");
    static const uint8_t field0[] = {0x00, 0x01}, bad_utf8[] = {0x2a, 0x01, 0xff};
    CHECK_EQ_INT(pc_proto_unpack(PC_REQUEST_DESC, field0, 2, 64, a, &m, &e), PC_EPROTO);
    CHECK_CONTAINS(e.msg, "field number 0");
    CHECK_EQ_INT(compare(PC_REQUEST_DESC, field0, 2), 1);
    /* ProfilesDictionary.string_table (5) */
    CHECK_EQ_INT(
        pc_proto_unpack(
            &opentelemetry__proto__profiles__v1development__profiles_dictionary__descriptor,
            bad_utf8, 3, 64, a, &m, &e),
        PC_EINVAL);
    CHECK_CONTAINS(e.msg, "invalid UTF-8 in string field string_table[0]");
    CHECK(m == NULL);
    pc_arena_free(a);
    pc_buf_free(&deep), pc_buf_free(&tmp);
}

/* Under a budget: the arena's charges never pass the scan's estimate (the reservation
 * pc_batch_decode makes), and a budget too small refuses with its state. */
static void test_budget(void)
{
    pc_batch *b = NULL;
    CHECK_EQ_INT(read_pprof_batch("go-heap.pb.gz", NULL, &b), 0);
    if (!b) return;
    pc_buf enc = {0};
    pc_batch_encode_proto(b, &enc);
    pc_proto_scan scan;
    CHECK_EQ_INT(pc_proto_scan_message(PC_REQUEST_DESC, enc.data, enc.len, 64, &scan, NULL), 0);
    for (int limited = 0; limited < 2; limited++) {
        pc_budget bud;
        pc_budget_init(&bud, limited ? scan.cost / 4 : 0);
        pc_arena *a = pc_arena_new(256);
        pc_arena_set_budget(a, &bud);
        ProtobufCMessage *m = NULL;
        pc_error e = {0};
        int rc = pc_proto_unpack(PC_REQUEST_DESC, enc.data, enc.len, 64, a, &m, &e);
        fprintf(stderr, "  limit %zu: rc %d, peak %zu, scan's estimate %zu\n", bud.limit, rc,
                bud.peak, scan.cost);
        CHECK_EQ_INT(rc, limited ? PC_E2BIG : 0);
        CHECK(bud.peak <= scan.cost);
        if (limited) CHECK_CONTAINS(e.msg, "over the decode budget");
        pc_arena_free(a);
        CHECK_EQ_INT(bud.used, 0);
        pc_budget_release(&bud);
    }
    pc_buf_free(&enc);
    pc_batch_unref(b);
}

int main(void)
{
    RUN(test_random_messages);
    RUN(test_every_field_every_wire_type);
    RUN(test_data_files);
    RUN(test_fuzz_seeds);
    RUN(test_refusals);
    RUN(test_budget);
    fprintf(stderr, "%d checks, %d failures\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}
