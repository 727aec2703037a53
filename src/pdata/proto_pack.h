/* A protobuf encoder over protobuf-c's descriptors that sizes every sub-message once (issue 27;
 * bench/README.md, "Encoder"). protobuf-c sizes a message before writing it, then packs each
 * nested message and moves it behind its length prefix, level after level; here pass 1 sizes
 * every sub-message (and every packed varint array) once, in pre-order, into an array, and pass
 * 2 writes the bytes straight into the output, each length prefix taken from that array.
 *
 * The bytes are exactly protobuf-c 1.4's protobuf_c_message_pack's for any message it can pack
 * (tests/unit/test_proto_pack.c, tests/fuzz/fuzz_proto_pack.c): fields in descriptor order, then
 * the unknown fields; proto3 fields left out when zero (its field_is_zeroish), oneof members by
 * their case, optional ones by has_ (strings and messages by their pointer), negative int32 as
 * 10-byte varints, lengths as protobuf-c truncates them (32 bits). */
#ifndef PC_PDATA_PROTO_PACK_H
#define PC_PDATA_PROTO_PACK_H

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

#include "base/buf.h"

/* Appends m's encoding to out (out->len grows by it, one spare byte reserved past it) and
 * returns its size. */
size_t pc_proto_pack(const ProtobufCMessage *m, pc_buf *out);

/* v as a protobuf varint at p; returns the byte after it (1..10 written). */
static inline uint8_t *pc_proto_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* The same appended to b (the hand-built messages of the remote-write and pyroscope exporters). */
static inline void pc_proto_buf_varint(pc_buf *b, uint64_t v)
{
    uint8_t t[10];
    pc_buf_append(b, t, (size_t)(pc_proto_put_varint(t, v) - t));
}

/* Bytes of v as a protobuf varint (1..10). */
static inline size_t pc_proto_varint_len(uint64_t v)
{
    /* 9/64 is 1/7 rounded up far enough for 1..64 significant bits; most values are small */
    return v < 0x80 ? 1 : (size_t)((64 - __builtin_clzll(v)) * 9 + 64) / 64;
}

#endif
