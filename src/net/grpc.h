/* gRPC over HTTP/2, the parts that are not HTTP/2 itself: message framing (a 5-byte prefix:
 * compressed flag, big-endian length), grpc-encoding gzip, status codes, grpc-message
 * percent-encoding, grpc-timeout, and google.rpc.Status details (RetryInfo) in
 * grpc-status-details-bin. Pure functions: safe on any thread. */
#ifndef PC_GRPC_H
#define PC_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/h2_server.h"
#include "base/buf.h"
#include "base/err.h"

typedef enum {
    PC_GRPC_OK = 0,
    PC_GRPC_CANCELLED = 1,
    PC_GRPC_UNKNOWN = 2,
    PC_GRPC_INVALID_ARGUMENT = 3,
    PC_GRPC_DEADLINE_EXCEEDED = 4,
    PC_GRPC_NOT_FOUND = 5,
    PC_GRPC_ALREADY_EXISTS = 6,
    PC_GRPC_PERMISSION_DENIED = 7,
    PC_GRPC_RESOURCE_EXHAUSTED = 8,
    PC_GRPC_FAILED_PRECONDITION = 9,
    PC_GRPC_ABORTED = 10,
    PC_GRPC_OUT_OF_RANGE = 11,
    PC_GRPC_UNIMPLEMENTED = 12,
    PC_GRPC_INTERNAL = 13,
    PC_GRPC_UNAVAILABLE = 14,
    PC_GRPC_DATA_LOSS = 15,
    PC_GRPC_UNAUTHENTICATED = 16,
} pc_grpc_code;

#define PC_GRPC_PREFIX          5
#define PC_GRPC_RETRY_INFO_TYPE "type.googleapis.com/google.rpc.RetryInfo"

/* "UNAVAILABLE"; "CODE(n)" style names are not needed: unknown codes give "UNKNOWN". */
const char *pc_grpc_code_name(int code);
/* The gRPC code a non-200 HTTP status means when the response has no grpc-status (gRPC's
 * http-grpc-status-mapping.md). */
int pc_grpc_code_from_http(int http_status);

/* The gRPC code for a PC_E* code (base/err.h): PC_OK -> OK, E2BIG and EBUSY ->
 * RESOURCE_EXHAUSTED, EAGAIN -> UNAVAILABLE, ENOTSUP -> UNIMPLEMENTED, EAUTH -> UNAUTHENTICATED,
 * ETIMEDOUT -> DEADLINE_EXCEEDED, ECANCELED -> CANCELLED, EIO -> INTERNAL, the other (permanent)
 * codes -> INVALID_ARGUMENT. */
int pc_grpc_code_from_err(int rc);

/* Append one length-prefixed message to out. */
void pc_grpc_frame(const void *msg, size_t len, bool compressed, pc_buf *out);

/* A unary body: exactly one message. Points *msg into body. PC_EINVAL for a truncated prefix,
 * a length that disagrees with the body, more or fewer than one message, or flag bits other
 * than bit 0; PC_E2BIG when the declared length exceeds max_len. */
int pc_grpc_unframe(const uint8_t *body, size_t len, size_t max_len, const uint8_t **msg,
                    size_t *msg_len, bool *compressed, pc_error *e);

/* A message's payload after decompression into out (or copied when not compressed). encoding:
 * the grpc-encoding header (NULL = identity). 0, or PC_E2BIG when the (inflated) size exceeds
 * max_len, PC_EINVAL for corrupt data or a compressed message without an encoding, PC_ENOTSUP
 * for an encoding we do not speak. A server answers with pc_grpc_code_from_err. */
int pc_grpc_decompress(const uint8_t *msg, size_t len, bool compressed, const char *encoding,
                       size_t max_len, pc_buf *out, pc_error *e);

/* grpc-message: percent-encode bytes outside 0x20..0x7e and '%' (malloc'd). */
char *pc_grpc_message_encode(const char *msg);
/* ...and decode (malformed escapes are kept literally; malloc'd). */
char *pc_grpc_message_decode(const char *s);

/* grpc-timeout: 1..8 ASCII digits and a unit (H M S m u n) -> milliseconds (rounded up; at
 * most ~ 11 years). PC_EINVAL for a malformed value. */
int pc_grpc_timeout_parse(const char *s, uint64_t *ms);
/* Milliseconds -> a grpc-timeout value in out (>= 12 bytes). */
void pc_grpc_timeout_format(uint64_t ms, char *out, size_t outlen);

/* base64 for -bin metadata: encode without padding; decode accepting either (PC_EINVAL when
 * malformed). */
char *pc_grpc_bin_encode(const uint8_t *p, size_t n);
int pc_grpc_bin_decode(const char *s, pc_buf *out);

/* grpc-status-details-bin: base64 of google.rpc.Status{code, message, details}, with one
 * RetryInfo detail when retry_delay_ms >= 0. malloc'd. */
char *pc_grpc_status_details(int code, const char *msg, int64_t retry_delay_ms);
/* The RetryInfo delay in a grpc-status-details-bin value, in ms; -1 if absent or malformed. */
int64_t pc_grpc_status_details_retry_delay(const char *b64);

/* Answer a unary call on the loop thread. code 0: resp (the serialized response message, framed
 * here, not compressed) with grpc-status 0 in trailers. Otherwise a trailers-only response with
 * grpc-status, grpc-message (percent-encoded) and, when details_b64 is set,
 * grpc-status-details-bin. */
void pc_grpc_respond(pc_h2_call *call, int code, const char *msg, const void *resp, size_t len,
                     const char *details_b64);

#endif
