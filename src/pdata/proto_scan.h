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
int pc_proto_read_varint(const uint8_t *p, size_t len, size_t *i, uint64_t *v);
int pc_proto_skip_value(const uint8_t *p, size_t len, unsigned wt, size_t *i, uint64_t *l);
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

int pc_proto_scan_message(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                          int max_depth, pc_proto_scan *out, pc_error *e);

#endif
