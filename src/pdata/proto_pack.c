/* The two-pass protobuf encoder (proto_pack.h). The rules are protobuf-c 1.4's pack (its
 * protobuf-c.c: which fields it writes and how), reimplemented: pass 1 (msg_size) and pass 2
 * (msg_write) take the same decisions field by field, so they visit the same sub-messages and
 * packed varint arrays in the same order, and pass 2 consumes the sizes pass 1 left, one slot
 * each, in that order. Each pass switches on a field's type once and loops over a repeated
 * field's elements inside that case: the per-field dispatch is what an encoder over descriptors
 * spends its time on (bench/README.md, "Encoder"). */
#include "pdata/proto_pack.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

/* fixed-width values and packed arrays are copied as they lie in memory, as protobuf-c's
 * little-endian path does; a big-endian host would need its byte swaps */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pc_proto_pack writes fixed-width values as little-endian memory"
#endif

/* Slots on the stack cover a typical request; larger ones grow a heap array (once per pack). */
#define STACK_SLOTS 1024

typedef struct packer {
    uint32_t *size; /* pass 1 appends, pass 2 reads in the same order; 32 bits as protobuf-c
                       writes a length */
    size_t n, cap, next;
    uint32_t stack[STACK_SLOTS];
} packer;

enum { WT_VARINT = 0, WT_64BIT = 1, WT_LEN = 2, WT_32BIT = 5 };

static size_t slot_grow(packer *pk)
{
    size_t cap = pk->cap * 2;
    if (pk->size == pk->stack) {
        pk->size = pc_xmalloc(cap * sizeof *pk->size);
        memcpy(pk->size, pk->stack, sizeof pk->stack);
    } else {
        pk->size = pc_xrealloc(pk->size, cap * sizeof *pk->size);
    }
    pk->cap = cap;
    return pk->n++;
}

static inline size_t slot_new(packer *pk)
{
    return pk->n < pk->cap ? pk->n++ : slot_grow(pk);
}

static inline uint32_t zigzag32(int32_t v)
{
    return ((uint32_t)v << 1) ^ (0u - ((uint32_t)v >> 31));
}

static inline uint64_t zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (0u - ((uint64_t)v >> 63));
}

/* int32 and enum are sign-extended to 64 bits: a negative one takes 10 bytes */
static inline uint64_t sext32(int32_t v)
{
    return (uint64_t)(int64_t)v;
}

static inline size_t tag_len(uint32_t id)
{
    return id < 16 ? 1 : pc_proto_varint_len((uint64_t)id << 3);
}

static inline uint8_t *put_tag(uint8_t *p, uint32_t id, unsigned wt)
{
    if (id < 16) {
        *p = (uint8_t)(id << 3 | wt);
        return p + 1;
    }
    return pc_proto_put_varint(p, (uint64_t)id << 3 | wt);
}

/* A length-delimited value's bytes: the prefix holds n as protobuf-c writes it (32 bits). */
static inline size_t delimited(size_t n)
{
    return pc_proto_varint_len((uint32_t)n) + n;
}

static inline uint8_t *put_delimited(uint8_t *p, const void *data, size_t n)
{
    p = pc_proto_put_varint(p, (uint32_t)n);
    if (n) memcpy(p, data, n);
    return p + n;
}

/* The wire type and in-memory size of the numeric types (0 for strings, bytes, messages). */
static inline unsigned wire_type(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return WT_32BIT;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return WT_64BIT;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return WT_LEN;
    default: return WT_VARINT;
    }
}

static inline size_t numeric_width(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return 0;
    default: return 4;
    }
}

/* A message or string pointer protobuf-c takes as unset in a oneof or optional field. */
static inline bool ptr_unset(const ProtobufCFieldDescriptor *f, const void *v)
{
    if (f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING) return false;
    const void *p = *(const void *const *)v;
    return !p || p == f->default_value;
}

/* Whether a required, oneof or optional field is written; a proto3 unlabeled one is written
 * unless zero (protobuf-c's field_is_zeroish), which the type switches below decide. */
static inline bool labeled_present(const ProtobufCFieldDescriptor *f, const char *base)
{
    const void *v = base + f->offset, *q = base + f->quantifier_offset;
    if (f->label == PROTOBUF_C_LABEL_REQUIRED) return true;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)q == f->id && !ptr_unset(f, v);
    if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING)
        return !ptr_unset(f, v);
    return *(const protobuf_c_boolean *)q != 0;
}

static inline bool unlabeled(const ProtobufCFieldDescriptor *f)
{
    return f->label == PROTOBUF_C_LABEL_NONE && !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF);
}

/* protobuf-c packs only numeric repeated fields; a packed flag elsewhere is never generated. */
static inline bool packed(const ProtobufCFieldDescriptor *f)
{
    return (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED) && numeric_width(f->type);
}

/* ---- pass 1: sizes ---------------------------------------------------------------------- */

static size_t msg_size(packer *pk, const ProtobufCMessage *m);

/* A non-repeated numeric value's bytes (no tag); zero when z (a proto3 field) and it is zero:
 * protobuf-c compares floats with 0, so -0.0 is left out and NaN written; bool 2 is one byte. */
#define HOT static inline __attribute__((always_inline))

HOT size_t number_size(ProtobufCType t, const void *v, bool z)
{
    switch (t) {
    case PROTOBUF_C_TYPE_ENUM:
    case PROTOBUF_C_TYPE_INT32: {
        int32_t x = *(const int32_t *)v;
        return z && !x ? 0 : pc_proto_varint_len(sext32(x));
    }
    case PROTOBUF_C_TYPE_SINT32: {
        int32_t x = *(const int32_t *)v;
        return z && !x ? 0 : pc_proto_varint_len(zigzag32(x));
    }
    case PROTOBUF_C_TYPE_UINT32: {
        uint32_t x = *(const uint32_t *)v;
        return z && !x ? 0 : pc_proto_varint_len(x);
    }
    case PROTOBUF_C_TYPE_SINT64: {
        int64_t x = *(const int64_t *)v;
        return z && !x ? 0 : pc_proto_varint_len(zigzag64(x));
    }
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64: {
        uint64_t x = *(const uint64_t *)v;
        return z && !x ? 0 : pc_proto_varint_len(x);
    }
    case PROTOBUF_C_TYPE_BOOL: return z && !*(const protobuf_c_boolean *)v ? 0 : 1;
    case PROTOBUF_C_TYPE_FLOAT: return z && *(const float *)v == 0 ? 0 : 4;
    case PROTOBUF_C_TYPE_DOUBLE: return z && *(const double *)v == 0 ? 0 : 8;
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32: return z && !*(const uint32_t *)v ? 0 : 4;
    default: return z && !*(const uint64_t *)v ? 0 : 8; /* fixed64, sfixed64 */
    }
}

/* A non-repeated field's bytes with its tag, 0 when protobuf-c leaves it out. */
static inline size_t single_size(packer *pk, const ProtobufCFieldDescriptor *f, const char *base)
{
    bool z = unlabeled(f);
    if (!z && !labeled_present(f, base)) return 0;
    const void *v = base + f->offset;
    size_t n;
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)v;
        if (z && (!s || !*s)) return 0;
        n = delimited(s ? strlen(s) : 0);
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        size_t len = ((const ProtobufCBinaryData *)v)->len;
        if (z && !len) return 0;
        n = delimited(len);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(const ProtobufCMessage *const *)v;
        if (!m && z) return 0;
        n = m ? delimited(msg_size(pk, m)) : 1;
        break;
    }
    default:
        n = number_size(f->type, v, z);
        if (!n) return 0;
    }
    return tag_len(f->id) + n;
}

/* The bytes of n numeric values, as a packed payload (and, with n tags more, unpacked). */
static size_t numbers_size(ProtobufCType t, size_t n, const void *a)
{
    size_t total = 0;
    switch (t) {
    case PROTOBUF_C_TYPE_ENUM:
    case PROTOBUF_C_TYPE_INT32:
        for (size_t i = 0; i < n; i++)
            total += pc_proto_varint_len(sext32(((const int32_t *)a)[i]));
        return total;
    case PROTOBUF_C_TYPE_SINT32:
        for (size_t i = 0; i < n; i++)
            total += pc_proto_varint_len(zigzag32(((const int32_t *)a)[i]));
        return total;
    case PROTOBUF_C_TYPE_UINT32:
        for (size_t i = 0; i < n; i++)
            total += pc_proto_varint_len(((const uint32_t *)a)[i]);
        return total;
    case PROTOBUF_C_TYPE_SINT64:
        for (size_t i = 0; i < n; i++)
            total += pc_proto_varint_len(zigzag64(((const int64_t *)a)[i]));
        return total;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64:
        for (size_t i = 0; i < n; i++)
            total += pc_proto_varint_len(((const uint64_t *)a)[i]);
        return total;
    case PROTOBUF_C_TYPE_BOOL: return n;
    default: return n * numeric_width(t); /* fixed-width */
    }
}

static size_t repeated_size(packer *pk, const ProtobufCFieldDescriptor *f, size_t n, const void *a)
{
    size_t tags = n * tag_len(f->id), total = 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_MESSAGE:
        for (size_t i = 0; i < n; i++) {
            const ProtobufCMessage *m = ((const ProtobufCMessage *const *)a)[i];
            total += m ? delimited(msg_size(pk, m)) : 1;
        }
        return tags + total;
    case PROTOBUF_C_TYPE_STRING:
        for (size_t i = 0; i < n; i++) {
            const char *s = ((const char *const *)a)[i];
            total += delimited(s ? strlen(s) : 0);
        }
        return tags + total;
    case PROTOBUF_C_TYPE_BYTES:
        for (size_t i = 0; i < n; i++)
            total += delimited(((const ProtobufCBinaryData *)a)[i].len);
        return tags + total;
    default: break;
    }
    total = numbers_size(f->type, n, a);
    if (!packed(f)) return tags + total;
    if (wire_type(f->type) == WT_VARINT) { /* pass 2 needs the payload's size before it */
        size_t s = slot_new(pk);           /* apart: slot_new may move pk->size */
        pk->size[s] = (uint32_t)total;
    }
    return tag_len(f->id) + delimited(total);
}

static size_t msg_size(packer *pk, const ProtobufCMessage *m)
{
    size_t slot = slot_new(pk), total = 0;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            total += single_size(pk, f, base);
            continue;
        }
        size_t n = *(const size_t *)(base + f->quantifier_offset);
        if (n) total += repeated_size(pk, f, n, *(const void *const *)(base + f->offset));
    }
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
        total += pc_proto_varint_len((uint64_t)u->tag << 3) + u->len;
    }
    pk->size[slot] = (uint32_t)total;
    return total;
}

/* ---- pass 2: bytes ---------------------------------------------------------------------- */

static uint8_t *msg_write(packer *pk, const ProtobufCMessage *m, uint8_t *p);

static inline uint8_t *sub_write(packer *pk, const ProtobufCMessage *m, uint8_t *p)
{
    if (!m) {
        *p = 0;
        return p + 1;
    }
    p = pc_proto_put_varint(p, pk->size[pk->next++]);
    return msg_write(pk, m, p);
}

/* One numeric value. */
HOT uint8_t *number_write(ProtobufCType t, const void *v, uint8_t *p)
{
    switch (t) {
    case PROTOBUF_C_TYPE_ENUM:
    case PROTOBUF_C_TYPE_INT32: return pc_proto_put_varint(p, sext32(*(const int32_t *)v));
    case PROTOBUF_C_TYPE_SINT32: return pc_proto_put_varint(p, zigzag32(*(const int32_t *)v));
    case PROTOBUF_C_TYPE_UINT32: return pc_proto_put_varint(p, *(const uint32_t *)v);
    case PROTOBUF_C_TYPE_SINT64: return pc_proto_put_varint(p, zigzag64(*(const int64_t *)v));
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64: return pc_proto_put_varint(p, *(const uint64_t *)v);
    case PROTOBUF_C_TYPE_BOOL: *p = *(const protobuf_c_boolean *)v ? 1 : 0; return p + 1;
    default: { /* fixed-width, little-endian hosts only, as protobuf-c's fast path */
        size_t w = numeric_width(t);
        memcpy(p, v, w);
        return p + w;
    }
    }
}

/* n numeric values, one after another (a packed payload). */
static uint8_t *numbers_write(ProtobufCType t, size_t n, const void *a, uint8_t *p)
{
    switch (t) {
    case PROTOBUF_C_TYPE_ENUM:
    case PROTOBUF_C_TYPE_INT32:
        for (size_t i = 0; i < n; i++)
            p = pc_proto_put_varint(p, sext32(((const int32_t *)a)[i]));
        return p;
    case PROTOBUF_C_TYPE_SINT32:
        for (size_t i = 0; i < n; i++)
            p = pc_proto_put_varint(p, zigzag32(((const int32_t *)a)[i]));
        return p;
    case PROTOBUF_C_TYPE_UINT32:
        for (size_t i = 0; i < n; i++)
            p = pc_proto_put_varint(p, ((const uint32_t *)a)[i]);
        return p;
    case PROTOBUF_C_TYPE_SINT64:
        for (size_t i = 0; i < n; i++)
            p = pc_proto_put_varint(p, zigzag64(((const int64_t *)a)[i]));
        return p;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64:
        for (size_t i = 0; i < n; i++)
            p = pc_proto_put_varint(p, ((const uint64_t *)a)[i]);
        return p;
    case PROTOBUF_C_TYPE_BOOL:
        for (size_t i = 0; i < n; i++)
            *p++ = ((const protobuf_c_boolean *)a)[i] ? 1 : 0;
        return p;
    default: /* fixed-width, little-endian hosts only, as protobuf-c's fast path */
        memcpy(p, a, n * numeric_width(t));
        return p + n * numeric_width(t);
    }
}

static uint8_t *single_write(packer *pk, const ProtobufCFieldDescriptor *f, const char *base,
                             uint8_t *p)
{
    bool z = unlabeled(f);
    if (!z && !labeled_present(f, base)) return p;
    const void *v = base + f->offset;
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)v;
        if (z && (!s || !*s)) return p;
        p = put_tag(p, f->id, WT_LEN);
        return put_delimited(p, s, s ? strlen(s) : 0);
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = v;
        if (z && !b->len) return p;
        p = put_tag(p, f->id, WT_LEN);
        return put_delimited(p, b->data, b->len);
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(const ProtobufCMessage *const *)v;
        if (!m && z) return p;
        return sub_write(pk, m, put_tag(p, f->id, WT_LEN));
    }
    default:
        if (z && !number_size(f->type, v, true)) return p;
        return number_write(f->type, v, put_tag(p, f->id, wire_type(f->type)));
    }
}

static uint8_t *repeated_write(packer *pk, const ProtobufCFieldDescriptor *f, size_t n,
                               const void *a, uint8_t *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_MESSAGE:
        for (size_t i = 0; i < n; i++)
            p = sub_write(pk, ((const ProtobufCMessage *const *)a)[i], put_tag(p, f->id, WT_LEN));
        return p;
    case PROTOBUF_C_TYPE_STRING:
        for (size_t i = 0; i < n; i++) {
            const char *s = ((const char *const *)a)[i];
            p = put_delimited(put_tag(p, f->id, WT_LEN), s, s ? strlen(s) : 0);
        }
        return p;
    case PROTOBUF_C_TYPE_BYTES:
        for (size_t i = 0; i < n; i++) {
            const ProtobufCBinaryData *b = &((const ProtobufCBinaryData *)a)[i];
            p = put_delimited(put_tag(p, f->id, WT_LEN), b->data, b->len);
        }
        return p;
    default: break;
    }
    unsigned wt = wire_type(f->type);
    if (!packed(f)) {
        size_t w = numeric_width(f->type);
        for (size_t i = 0; i < n; i++)
            p = number_write(f->type, (const char *)a + i * w, put_tag(p, f->id, wt));
        return p;
    }
    p = put_tag(p, f->id, WT_LEN);
    if (wt == WT_VARINT)
        p = pc_proto_put_varint(p, pk->size[pk->next++]);
    else
        p = pc_proto_put_varint(p, (uint32_t)(n * numeric_width(f->type)));
    return numbers_write(f->type, n, a, p);
}

static uint8_t *msg_write(packer *pk, const ProtobufCMessage *m, uint8_t *p)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            p = single_write(pk, f, base, p);
            continue;
        }
        size_t n = *(const size_t *)(base + f->quantifier_offset);
        if (n) p = repeated_write(pk, f, n, *(const void *const *)(base + f->offset), p);
    }
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
        p = pc_proto_put_varint(p, (uint64_t)u->tag << 3 | u->wire_type);
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
