/* A message type made by hand with every scalar type under every label (proto3 unlabeled,
 * optional, required, oneof, packed and unpacked repeated), field numbers of every tag length,
 * and random messages of it filled with edge values: test_proto_pack packs them both ways,
 * test_proto_unpack decodes protobuf-c's bytes of them both ways. The field ranges make
 * protobuf-c's field lookup find the fields; one zeroed descriptor lies before the fields because
 * protobuf-c's merge of two messages whose oneof is unset in both reads fields[-1]. */
#ifndef PC_TEST_ALL_DESC_H
#define PC_TEST_ALL_DESC_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>

#include "base/arena.h"

/* ---- a descriptor with every type under every label ------------------------------------- */

enum { K_NONE, K_OPT, K_REQ, K_ONEOF, K_PACKED, K_UNPACKED, K_N };
#define NTYPES 17 /* PROTOBUF_C_TYPE_INT32 .. PROTOBUF_C_TYPE_MESSAGE */
#define SLOT   32 /* a value (up to ProtobufCBinaryData) and its quantifier */

static struct {
    ProtobufCFieldDescriptor before; /* zeros: see above */
    ProtobufCFieldDescriptor fields[NTYPES * K_N];
} all_store;
#define all_fields (all_store.fields)
static ProtobufCIntRange all_ranges[5];
static ProtobufCMessageDescriptor all_desc;
static unsigned all_kind[NTYPES * K_N];
static size_t oneof_case_at;
static const char default_str[] = "dflt";
/* The oneof's members in one place, as generated code has them (a union): set before all_init
 * for decoding, where protobuf-c clears the place by the member set before. Apart, each member
 * has its own (what the pack test was written with). */
static bool all_oneof_union;

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
            bool shared = all_oneof_union && k == K_ONEOF;
            if (shared && t > 0) off -= SLOT; /* every member at the first one's place */
            f->offset = (unsigned)off;
            f->quantifier_offset = (unsigned)(k == K_ONEOF ? oneof_case_at : off + 16);
            off += SLOT;
            f->descriptor = t == PROTOBUF_C_TYPE_MESSAGE ? &all_desc : NULL;
            /* (a default in the shared place would be read as any member's value) */
            f->default_value = t == PROTOBUF_C_TYPE_STRING && !shared ? default_str : NULL;
            f->flags = k == K_PACKED  ? PROTOBUF_C_FIELD_FLAG_PACKED
                       : k == K_ONEOF ? PROTOBUF_C_FIELD_FLAG_ONEOF
                                      : 0;
        }
    for (unsigned i = 0; i < n; i++)
        all_fields[i].id = field_id(i, n);
    /* 1..n-3 in a row, then three alone; the last range's end is the field count */
    for (unsigned r = 0; r < 4; r++) {
        unsigned first = r == 0 ? 0 : n - 4 + r;
        all_ranges[r].start_value = (int)all_fields[first].id;
        all_ranges[r].orig_index = (int)first;
    }
    all_ranges[4].orig_index = (int)n;
    all_desc.n_field_ranges = 4;
    all_desc.field_ranges = all_ranges;
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

/* Unknown fields: any bytes under any tag (all_wire_unknown false), or, for decoding, values that
 * are whole on the wire under tags the type does not have. */
static bool all_wire_unknown;

static void fill_unknown_value(ProtobufCMessageUnknownField *u)
{
    static const uint32_t tags[] = {3000, 30000, (1u << 22) + 7, (1u << 29) - 2};
    u->tag = tags[rnd() % 4];
    size_t n = rnd() % 5;
    switch (rnd() % 4) {
    case 0: u->wire_type = PROTOBUF_C_WIRE_TYPE_VARINT, u->len = 1; break;
    case 1: u->wire_type = PROTOBUF_C_WIRE_TYPE_64BIT, u->len = 8; break;
    case 2: u->wire_type = PROTOBUF_C_WIRE_TYPE_32BIT, u->len = 4; break;
    default: u->wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, u->len = n + 1;
    }
    for (size_t j = 0; j < u->len; j++)
        u->data[j] = (uint8_t)(rnd() & 0x7f);
    if (u->wire_type == PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) u->data[0] = (uint8_t)n;
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
        if (all_wire_unknown) {
            u->data = pc_arena_alloc(a, 8);
            fill_unknown_value(u);
            continue;
        }
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
    /* decoding: mostly a member set, or protobuf-c refuses a message sent twice (a merge) */
    if (all_oneof_union && rnd() % 4) pick = K_ONEOF * NTYPES + (unsigned)(rnd() % NTYPES);
    uint32_t c = all_kind[pick] == K_ONEOF ? all_fields[pick].id : rnd() % 2 ? 0 : 99999;
    *(uint32_t *)(base + oneof_case_at) = c;
    if (all_oneof_union && all_kind[pick] == K_ONEOF) /* the place holds the member of the case */
        fill_value(a, all_fields[pick].type, base + all_fields[pick].offset, depth, false);
    fill_unknown(a, m);
    return m;
}

#endif
