/* A protobuf decoder over protobuf-c's descriptors that checks and unpacks in one pass into an
 * arena (issue 27; bench/README.md, "One-pass decode"). It builds exactly the structs
 * protobuf_c_message_unpack (protobuf-c 1.4) builds: the same arrays, last-one-wins for scalars,
 * a singular submessage sent twice merged as protobuf-c merges it, unknown fields kept as it
 * keeps them. It refuses what pc_proto_scan_message (proto_scan.h) or protobuf-c refuses, with
 * the same code and message as the two in a row: nesting deeper than max_depth, invalid UTF-8
 * in a string field, field number 0, and malformed input.
 *
 * Memory comes from the arena as it goes; with a budget attached to the arena
 * (pc_arena_set_budget) every allocation is charged, and a refused budget stops the decode. Each
 * message's repeated arrays are sized by a count of its fields first (as protobuf-c does), so
 * the arena use is protobuf-c's less its scan slabs, and pc_proto_scan_message's estimate still
 * bounds it (tests/unit/test_proto_unpack.c, tests/fuzz/fuzz_proto_unpack.c). */
#ifndef PC_PDATA_PROTO_UNPACK_H
#define PC_PDATA_PROTO_UNPACK_H

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

#include "base/arena.h"
#include "base/err.h"

/* 0 with *out set (in the arena); else *out NULL and the refusal in e: PC_EPROTO ("malformed
 * protobuf", "nested too deeply", "malformed protobuf (field number 0)"), PC_EINVAL ("invalid
 * UTF-8 in string field <path>"), as pc_proto_scan_message says them; or the arena's budget
 * state (PC_E2BIG, PC_EAGAIN: "over the decode budget") when the input is well-formed but the
 * budget refused its memory. What was allocated stays in the arena until it is freed. */
int pc_proto_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                    int max_depth, pc_arena *arena, ProtobufCMessage **out, pc_error *e);

#endif
