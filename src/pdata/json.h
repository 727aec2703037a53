/* One generic OTLP JSON codec driven by protobuf-c descriptors (ARCHITECTURE.md §3).
 *
 * OTLP JSON is the proto3 JSON mapping with the OTLP deviations: lowerCamelCase keys (snake_case
 * also accepted on input), trace_id/span_id/profile_id as hex, other bytes as base64, 64-bit
 * integers as decimal strings (string or number accepted on input), enums as integers, unknown
 * keys ignored. */
#ifndef PC_JSON_H
#define PC_JSON_H

#include <stddef.h>

#include "pdata/pdata.h"

/* Maximum nesting of messages accepted by the decoder (AnyValue arrays/kvlists are recursive). */
#define PC_JSON_MAX_DEPTH 128

/* Decode OTLP JSON into a message of type desc, allocating everything from arena (nothing to free
 * but the arena). 0 on success; PC_EINVAL with a message naming the field path in e; with a
 * budget attached to the arena, its refusal (PC_E2BIG or PC_EAGAIN, see base/budget.h). */
int pc_json_decode(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                   pc_arena *arena, ProtobufCMessage **out, pc_error *e);

/* What decoding this text may take (jansson's tree plus the decoded structs), counted from the
 * text before parsing; pc_json_decode reserves it from the arena's budget. */
size_t pc_json_decode_estimate(const char *json, size_t len);

/* Encode a message as OTLP JSON, appending to out (NUL-terminated afterwards). */
void pc_json_encode(const ProtobufCMessage *msg, pc_buf *out);

struct json_t;
struct json_error_t;
/* jansson's json_loadb for other JSON formats, with every allocation of the tree charged to budget
 * (may be NULL) as pc_json_decode charges its own; the caller reserves an estimate first
 * (pc_json_decode_estimate) and releases the tree with pc_json_free_budgeted and the same budget.
 * NULL when the text does not parse or the budget refused (budget->state says which). */
struct json_t *pc_json_load_budgeted(const char *text, size_t len, size_t flags, pc_budget *budget,
                                     struct json_error_t *jerr);
void pc_json_free_budgeted(struct json_t *root, pc_budget *budget);

#endif
