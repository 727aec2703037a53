/* The two-pass protobuf encoder (proto_pack.h). The rules are protobuf-c 1.4's pack (its
 * protobuf-c.c: which fields it writes and how), reimplemented: pass 1 (msg_size) and pass 2
 * (msg_write) decide what to write with the same functions, so they visit the same
 * sub-messages and packed arrays in the same order, and pass 2 consumes the sizes pass 1 left,
 * one slot each, in that order. */
#include "pdata/proto_pack.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

/* Slots on the stack cover a typical request; larger ones grow a heap array (once per pack). */
#define STACK_SLOTS 512

typedef struct packer {
    size_t *size; /* pass 1 appends, pass 2 reads in the same order */
    size_t n, cap, next;
    size_t stack[STACK_SLOTS];
} packer;

enum { WT_VARINT = 0, WT_64BIT = 1, WT_LEN = 2, WT_32BIT = 5 };

static size_t slot_new(packer *pk)
{
    if (pk->n == pk->cap) {
        size_t cap = pk->cap * 2;
        if (pk->size == pk->stack) {
            pk->size = pc_xmalloc(cap * sizeof *pk->size);
            memcpy(pk->size, pk->stack, sizeof pk->stack);
        } else {
            pk->size = pc_xrealloc(pk->size, cap * sizeof *pk->size);
        }
        pk->cap = cap;
    }
    return pk->n++;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint32_t zigzag32(int32_t v)
{
    return ((uint32_t)v << 1) ^ (0u - ((uint32_t)v >> 31));
}

static inline uint64_t zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (0u - ((uint64_t)v >> 63));
}

/* The varint a varint-typed value is written as: int32 and enum sign-extended to 64 bits (a
 * negative one takes 10 bytes), sint zigzagged, bool as 0 or 1. */
static inline uint64_t varint_of(ProtobufCType t, const void *v)
{
    switch (t) {
    case PROTOBUF_C_TYPE_ENUM:
    case PROTOBUF_C_TYPE_INT32: return (uint64_t)(int64_t) * (const int32_t *)v;
    case PROTOBUF_C_TYPE_SINT32: return zigzag32(*(const int32_t *)v);
    case PROTOBUF_C_TYPE_UINT32: return *(const uint32_t *)v;
    case PROTOBUF_C_TYPE_SINT64: return zigzag64(*(const int64_t *)v);
    case PROTOBUF_C_TYPE_BOOL: return *(const protobuf_c_boolean *)v ? 1 : 0;
    default: return *(const uint64_t *)v; /* int64, uint64 */
    }
}

static bool is_varint(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_ENUM:
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_BOOL: return true;
    default: return false;
    }
}

/* 4 or 8 for the fixed-width types, else 0. */
static size_t fixed_width(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return 4;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    default: return 0;
    }
}

static unsigned wire_type(ProtobufCType t)
{
    if (is_varint(t)) return WT_VARINT;
    size_t w = fixed_width(t);
    return w == 4 ? WT_32BIT : w == 8 ? WT_64BIT : WT_LEN;
}

/* A value's in-memory size (a repeated field's element stride). */
static size_t elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    default: return is_varint(t) ? 4 : fixed_width(t); /* int32, sint32, uint32, enum */
    }
}

/* protobuf-c's field_is_zeroish: a proto3 (unlabeled) field it leaves out. bytes are empty when
 * their len (the struct's first word) is 0; -0.0 counts as zero, NaN does not. */
static bool zeroish(ProtobufCType t, const void *v)
{
    switch (t) {
    case PROTOBUF_C_TYPE_BOOL: return *(const protobuf_c_boolean *)v == 0;
    case PROTOBUF_C_TYPE_FLOAT: return *(const float *)v == 0;
    case PROTOBUF_C_TYPE_DOUBLE: return *(const double *)v == 0;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)v;
        return !s || !*s;
    }
    case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)v)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE: return *(const void *const *)v == NULL;
    default: return elem_size(t) == 8 ? *(const uint64_t *)v == 0 : *(const uint32_t *)v == 0;
    }
}

/* A message or string pointer protobuf-c takes as unset in a oneof or optional field. */
static bool ptr_unset(const ProtobufCFieldDescriptor *f, const void *v)
{
    if (f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING) return false;
    const void *p = *(const void *const *)v;
    return !p || p == f->default_value;
}

/* Whether a non-repeated field is written (protobuf-c's pack, label by label). */
static bool present(const ProtobufCFieldDescriptor *f, const char *base)
{
    const void *v = base + f->offset, *q = base + f->quantifier_offset;
    if (f->label == PROTOBUF_C_LABEL_REQUIRED) return true;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)q == f->id && !ptr_unset(f, v);
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
        if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING)
            return !ptr_unset(f, v);
        return *(const protobuf_c_boolean *)q != 0;
    }
    return !zeroish(f->type, v);
}

/* protobuf-c packs only numeric repeated fields; a packed flag elsewhere is never generated. */
static bool packed(const ProtobufCFieldDescriptor *f)
{
    return (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED) &&
           (is_varint(f->type) || fixed_width(f->type));
}

static inline uint64_t tag_of(const ProtobufCFieldDescriptor *f, unsigned wt)
{
    return ((uint64_t)f->id << 3) | wt;
}

/* ---- pass 1: sizes ---------------------------------------------------------------------- */

static size_t msg_size(packer *pk, const ProtobufCMessage *m);

/* A length-delimited value's bytes: the prefix holds n as protobuf-c writes it (32 bits). */
static inline size_t delimited(size_t n)
{
    return pc_proto_varint_len((uint32_t)n) + n;
}

/* One value of f without its tag; sub-messages get their slots. */
static size_t value_size(packer *pk, const ProtobufCFieldDescriptor *f, const void *v)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)v;
        return delimited(s ? strlen(s) : 0);
    }
    case PROTOBUF_C_TYPE_BYTES: return delimited(((const ProtobufCBinaryData *)v)->len);
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(const ProtobufCMessage *const *)v;
        return m ? delimited(msg_size(pk, m)) : 1;
    }
    default: {
        size_t w = fixed_width(f->type);
        return w ? w : pc_proto_varint_len(varint_of(f->type, v));
    }
    }
}

static size_t packed_size(packer *pk, const ProtobufCFieldDescriptor *f, size_t n, const void *a)
{
    size_t payload = n * fixed_width(f->type);
    if (!payload) { /* varints: their sum takes a slot, pass 2 needs it before them */
        size_t es = elem_size(f->type);
        for (size_t i = 0; i < n; i++)
            payload += pc_proto_varint_len(varint_of(f->type, (const char *)a + i * es));
        size_t s = slot_new(pk); /* apart: slot_new may move pk->size */
        pk->size[s] = payload;
    }
    return pc_proto_varint_len(tag_of(f, WT_LEN)) + delimited(payload);
}

static size_t repeated_size(packer *pk, const ProtobufCFieldDescriptor *f, size_t n, const void *a)
{
    if (!n) return 0;
    if (packed(f)) return packed_size(pk, f, n, a);
    size_t total = n * pc_proto_varint_len(tag_of(f, wire_type(f->type)));
    size_t es = elem_size(f->type);
    for (size_t i = 0; i < n; i++)
        total += value_size(pk, f, (const char *)a + i * es);
    return total;
}

static size_t msg_size(packer *pk, const ProtobufCMessage *m)
{
    size_t slot = slot_new(pk), total = 0;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const void *v = base + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED)
            total += repeated_size(pk, f, *(const size_t *)(base + f->quantifier_offset),
                                   *(const void *const *)v);
        else if (present(f, base))
            total += pc_proto_varint_len(tag_of(f, wire_type(f->type))) + value_size(pk, f, v);
    }
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
        total += pc_proto_varint_len((uint64_t)u->tag << 3) + u->len;
    }
    pk->size[slot] = total;
    return total;
}

/* ---- pass 2: bytes ---------------------------------------------------------------------- */

static uint8_t *msg_write(packer *pk, const ProtobufCMessage *m, uint8_t *p);

static inline uint8_t *put_delimited(uint8_t *p, const void *data, size_t n)
{
    p = put_varint(p, (uint32_t)n);
    if (n) memcpy(p, data, n);
    return p + n;
}

static uint8_t *value_write(packer *pk, const ProtobufCFieldDescriptor *f, const void *v,
                            uint8_t *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)v;
        return put_delimited(p, s, s ? strlen(s) : 0);
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = v;
        return put_delimited(p, b->data, b->len);
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(const ProtobufCMessage *const *)v;
        if (!m) {
            *p = 0;
            return p + 1;
        }
        p = put_varint(p, (uint32_t)pk->size[pk->next++]);
        return msg_write(pk, m, p);
    }
    default: {
        size_t w = fixed_width(f->type);
        if (!w) return put_varint(p, varint_of(f->type, v));
        memcpy(p, v, w); /* little-endian hosts only, as protobuf-c's fast path */
        return p + w;
    }
    }
}

static uint8_t *repeated_write(packer *pk, const ProtobufCFieldDescriptor *f, size_t n,
                               const void *a, uint8_t *p)
{
    if (!n) return p;
    size_t es = elem_size(f->type);
    if (packed(f)) {
        size_t w = fixed_width(f->type);
        p = put_varint(p, tag_of(f, WT_LEN));
        if (w) {
            p = put_varint(p, (uint32_t)(n * w));
            memcpy(p, a, n * w);
            return p + n * w;
        }
        p = put_varint(p, (uint32_t)pk->size[pk->next++]);
        for (size_t i = 0; i < n; i++)
            p = put_varint(p, varint_of(f->type, (const char *)a + i * es));
        return p;
    }
    uint64_t tag = tag_of(f, wire_type(f->type));
    for (size_t i = 0; i < n; i++) {
        p = put_varint(p, tag);
        p = value_write(pk, f, (const char *)a + i * es, p);
    }
    return p;
}

static uint8_t *msg_write(packer *pk, const ProtobufCMessage *m, uint8_t *p)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const void *v = base + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            p = repeated_write(pk, f, *(const size_t *)(base + f->quantifier_offset),
                               *(const void *const *)v, p);
        } else if (present(f, base)) {
            p = put_varint(p, tag_of(f, wire_type(f->type)));
            p = value_write(pk, f, v, p);
        }
    }
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
        p = put_varint(p, ((uint64_t)u->tag << 3) | u->wire_type);
        if (u->len) memcpy(p, u->data, u->len);
        p += u->len;
    }
    return p;
}

size_t pc_proto_pack(const ProtobufCMessage *m, pc_buf *out)
{
    packer pkr, *pk = &pkr;
    pk->size = pk->stack;
    pk->n = pk->next = 0;
    pk->cap = STACK_SLOTS;
    size_t total = msg_size(pk, m);
    pc_buf_reserve(out, total + 1);
    uint8_t *start = out->data + out->len;
    pk->next = 1; /* slot 0 is m's own size */
    uint8_t *end = msg_write(pk, m, start);
    if ((size_t)(end - start) != total || pk->next != pk->n)
        abort(); /* the passes disagree: a bug, and bytes past the reservation may be written */
    out->len += total;
    if (pk->size != pk->stack) free(pk->size);
    return total;
}
