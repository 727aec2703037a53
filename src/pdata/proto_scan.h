/* One pass over protobuf input before protobuf-c unpacks it (docs/limits.md, "What a request
 * may cost"): it bounds the nesting (protobuf-c recurses without a limit), checks that every
 * string field is valid UTF-8 (as proto3 requires and Go's decoders enforce), refuses field
 * number 0 (protobuf-c accepts it but cannot encode it again), and adds up what unpack will
 * allocate: every message struct, every repeated array (elements counted first, packed ones
 * too), string and bytes copies, unknown fields, protobuf-c's scan slabs and the arrays a
 * repeated singular submessage is merged into. The sum is an upper bound of unpack's arena use,
 * so a request can be refused (or its memory reserved) before anything is allocated. */
#ifndef PC_PROTO_SCAN_H
#define PC_PROTO_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

#include "base/err.h"

typedef struct pc_proto_scan {
    size_t cost; /* bytes unpack allocates from an arena (16-byte rounded), at most */
} pc_proto_scan;

/* 0 with out->cost set; PC_EPROTO for input that is not protobuf as profcol takes it (what
 * protobuf-c would refuse too, field number 0, nesting deeper than max_depth); PC_EINVAL for
 * invalid UTF-8 in a string field. e gets the message: "malformed protobuf", "nested too
 * deeply", "invalid UTF-8 in string field resource_profiles[0].resource...", ... */
/* The wire format's steps the scan and pdata/wire_check.c share: a varint at p[*i] (*i past it;
 * PC_EPROTO when cut short or over 10 bytes), and past the value of wire type wt (a
 * length-delimited one: *l its length, *i at its start; PC_EPROTO when cut short or of a wire
 * type protobuf-c refuses). */
int pc_proto_read_varint_slow(const uint8_t *p, size_t len, size_t *i, uint64_t *v);
/* inline for the one- and two-byte varints most tags, lengths and indices are: the walks over the
 * wire read one per field (bench/README.md, "### Pass-through") */
static inline int pc_proto_read_varint(const uint8_t *p, size_t len, size_t *i, uint64_t *v)
{
    if (*i < len && p[*i] < 0x80) {
        *v = p[(*i)++];
        return 0;
    }
    if (len - *i >= 2 && p[*i + 1] < 0x80) { /* p[*i] has the continuation bit */
        *v = (uint64_t)(p[*i] & 0x7f) | (uint64_t)p[*i + 1] << 7;
        *i += 2;
        return 0;
    }
    return pc_proto_read_varint_slow(p, len, i, v);
}
static inline int pc_proto_skip_value(const uint8_t *p, size_t len, unsigned wt, size_t *i,
                                      uint64_t *l)
{
    switch (wt) {
    case 0: return pc_proto_read_varint(p, len, i, l);
    case 1:
        if (len - *i < 8) return PC_EPROTO;
        *i += 8;
        return 0;
    case 5:
        if (len - *i < 4) return PC_EPROTO;
        *i += 4;
        return 0;
    case 2: return pc_proto_read_varint(p, len, i, l) || *l > len - *i ? PC_EPROTO : 0;
    default: return PC_EPROTO; /* groups and reserved wire types */
    }
}

/* The scan's cost model, shared with pdata/wire_check.c, which reaches the same cost: */
#define PC_PROTO_R16(n) (((size_t)(n) + 15) & ~(size_t)15)
/* repeated fields are counted per field for a message's first PC_PROTO_TRACKED fields, later ones
 * are costed per element */
#define PC_PROTO_TRACKED 64
/* protobuf-c's private ScannedMember, for its size (tail cost below) */
typedef struct pc_proto_scanned_member {
    uint32_t tag;
    uint8_t wire_type, length_prefix_len;
    const void *field;
    size_t len;
    const uint8_t *data;
} pc_proto_scanned_member;
/* Elements of a packed run of type t in l bytes (varints counted by their last bytes); -1 when
 * protobuf-c would refuse it (fixed-width types whose length is not a multiple). The scan and
 * pdata/proto_unpack.c share it. */
static inline long long pc_proto_packed_count(ProtobufCType t, const uint8_t *p, size_t l)
{
    switch (t) {
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return l % 4 ? -1 : (long long)(l / 4);
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return l % 8 ? -1 : (long long)(l / 8);
    case PROTOBUF_C_TYPE_BOOL: return (long long)l;
    default: {
        long long n = 0;
        for (size_t i = 0; i < l; i++)
            n += !(p[i] & 0x80);
        return n;
    }
    }
}
/* The size of one element of a repeated field of type t in protobuf-c's structs. */
static inline size_t pc_proto_elt_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    default: return 4;
    }
}

/* what a message costs once its fields are read: the arrays of its tracked repeated fields (nf
 * of them, n_elems each), the unknown fields' slots, and protobuf-c's scan slabs for its
 * occurrences of fields (16 members on the stack, then 32, 64, ...) */
/* the array of field fi (repeated) with n elements */
static inline size_t pc_proto_array_cost(const ProtobufCMessageDescriptor *desc, size_t fi,
                                         size_t n)
{
    return n ? PC_PROTO_R16(n * pc_proto_elt_size(desc->fields[fi].type)) : 0;
}
/* the unknown fields' slots and the scan slabs */
static inline size_t pc_proto_slab_cost(size_t unknown, size_t occurrences)
{
    size_t cost = 0;
    if (unknown) cost += PC_PROTO_R16(unknown * sizeof(ProtobufCMessageUnknownField));
    for (size_t cap = 16, k = 1; occurrences > cap; k++) {
        cost += PC_PROTO_R16(sizeof(pc_proto_scanned_member) << (k + 4));
        cap += (size_t)1 << (k + 4);
    }
    return cost;
}
static inline size_t pc_proto_tail_cost(const ProtobufCMessageDescriptor *desc, size_t nf,
                                        const size_t *n_elems, size_t unknown, size_t occurrences)
{
    size_t cost = 0;
    for (size_t fi = 0; fi < nf; fi++)
        if (desc->fields[fi].label == PROTOBUF_C_LABEL_REPEATED)
            cost += pc_proto_array_cost(desc, fi, n_elems[fi]);
    return cost + pc_proto_slab_cost(unknown, occurrences);
}

int pc_proto_scan_message(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                          int max_depth, pc_proto_scan *out, pc_error *e);

#endif
