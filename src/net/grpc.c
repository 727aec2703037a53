/* gRPC framing, compression, status, timeout and status-details helpers (see grpc.h). The wire
 * rules are gRPC's PROTOCOL-HTTP2.md. */
#include "net/grpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base64.h"
#include "base/compress.h"
#include "base/alloc.h"
#include "rpc_status.pb-c.h"
#include "base/hex.h"

static const char *const code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *pc_grpc_code_name(int code)
{
    if (code < 0 || code > PC_GRPC_UNAUTHENTICATED) return "UNKNOWN";
    return code_names[code];
}

int pc_grpc_code_from_http(int http_status)
{
    switch (http_status) {
    case 400: return PC_GRPC_INTERNAL;
    case 401: return PC_GRPC_UNAUTHENTICATED;
    case 403: return PC_GRPC_PERMISSION_DENIED;
    case 404: return PC_GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504: return PC_GRPC_UNAVAILABLE;
    default: return PC_GRPC_UNKNOWN;
    }
}

int pc_grpc_code_from_err(int rc)
{
    switch (rc) {
    case PC_OK: return PC_GRPC_OK;
    case PC_E2BIG:
    case PC_EBUSY: return PC_GRPC_RESOURCE_EXHAUSTED;
    case PC_EAGAIN: return PC_GRPC_UNAVAILABLE;
    case PC_ENOTSUP: return PC_GRPC_UNIMPLEMENTED;
    case PC_EAUTH: return PC_GRPC_UNAUTHENTICATED;
    case PC_ETIMEDOUT: return PC_GRPC_DEADLINE_EXCEEDED;
    case PC_ECANCELED: return PC_GRPC_CANCELLED;
    case PC_EIO: return PC_GRPC_INTERNAL;
    default: return PC_GRPC_INVALID_ARGUMENT;
    }
}

void pc_grpc_frame(const void *msg, size_t len, bool compressed, pc_buf *out)
{
    uint8_t p[PC_GRPC_PREFIX] = {compressed ? 1 : 0, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
                                 (uint8_t)(len >> 8), (uint8_t)len};
    pc_buf_reserve(out, PC_GRPC_PREFIX + len);
    pc_buf_append(out, p, sizeof p);
    if (len) pc_buf_append(out, msg, len);
}

int pc_grpc_unframe(const uint8_t *body, size_t len, size_t max_len, const uint8_t **msg,
                    size_t *msg_len, bool *compressed, pc_error *e)
{
    if (len < PC_GRPC_PREFIX)
        return pc_error_set(e, PC_EINVAL, "%s",
                            len ? "truncated gRPC message prefix" : "no request message");
    if (body[0] > 1) return pc_error_set(e, PC_EINVAL, "invalid gRPC compressed flag %u", body[0]);
    uint64_t n =
        (uint64_t)body[1] << 24 | (uint64_t)body[2] << 16 | (uint64_t)body[3] << 8 | body[4];
    if (n > max_len) {
        return pc_error_set(e, PC_E2BIG,
                            "gRPC message of %llu bytes exceeds the limit of %zu bytes",
                            (unsigned long long)n, max_len);
    }
    if (n > len - PC_GRPC_PREFIX)
        return pc_error_set(e, PC_EINVAL,
                            "truncated gRPC message (%llu bytes declared, %zu received)",
                            (unsigned long long)n, len - PC_GRPC_PREFIX);
    if (n < len - PC_GRPC_PREFIX)
        return pc_error_set(e, PC_EINVAL, "more than one request message");
    *msg = body + PC_GRPC_PREFIX;
    *msg_len = (size_t)n;
    *compressed = body[0] == 1;
    return PC_OK;
}

int pc_grpc_decompress(const uint8_t *msg, size_t len, bool compressed, const char *encoding,
                       size_t max_len, pc_buf *out, pc_error *e)
{
    out->len = 0;
    if (!compressed) {
        if (len > max_len)
            return pc_error_set(e, PC_E2BIG, "message of %zu bytes exceeds the limit of %zu bytes",
                                len, max_len);
        pc_buf_append(out, msg, len);
        return PC_OK;
    }
    int enc = pc_enc_parse(encoding);
    if (enc == PC_ENC_NONE)
        return pc_error_set(e, PC_EINVAL, "compressed message without grpc-encoding");
    if (enc < 0)
        return pc_error_set(
            e, PC_ENOTSUP, "unsupported grpc-encoding \"%.40s\" (supported: gzip, zstd)", encoding);
    int rc = pc_decompress((pc_enc)enc, msg, len, max_len, out);
    if (rc == PC_E2BIG) {
        return pc_error_set(e, PC_E2BIG, "decompressed message exceeds the limit of %zu bytes",
                            max_len);
    }
    if (rc < 0) {
        return pc_error_set(e, PC_EINVAL, "invalid %s message", encoding);
    }
    return PC_OK;
}

/* ---- grpc-message ---- */

char *pc_grpc_message_encode(const char *msg)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(msg);
    char *out = pc_xmalloc(n * 3 + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = 0;
    return out;
}

char *pc_grpc_message_decode(const char *s)
{
    size_t n = strlen(s);
    char *out = pc_xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = pc_hexval((unsigned char)s[i + 1])) >= 0 &&
            (lo = pc_hexval((unsigned char)s[i + 2])) >= 0) {
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = 0;
    return out;
}

/* ---- grpc-timeout ---- */

int pc_grpc_timeout_parse(const char *s, uint64_t *ms)
{
    size_t nd = strspn(s, "0123456789");
    if (nd < 1 || nd > 8 || !s[nd] || s[nd + 1]) return PC_EINVAL;
    uint64_t v = strtoull(s, NULL, 10);
    switch (s[nd]) {
    case 'H': *ms = v * 3600000; break;
    case 'M': *ms = v * 60000; break;
    case 'S': *ms = v * 1000; break;
    case 'm': *ms = v; break;
    case 'u': *ms = (v + 999) / 1000; break;
    case 'n': *ms = (v + 999999) / 1000000; break;
    default: return PC_EINVAL;
    }
    return PC_OK;
}

void pc_grpc_timeout_format(uint64_t ms, char *out, size_t outlen)
{
    /* at most 8 digits: pick the finest unit that fits */
    if (ms <= 99999999)
        snprintf(out, outlen, "%llum", (unsigned long long)ms);
    else if (ms / 1000 <= 99999999)
        snprintf(out, outlen, "%lluS", (unsigned long long)(ms / 1000));
    else if (ms / 60000 <= 99999999)
        snprintf(out, outlen, "%lluM", (unsigned long long)(ms / 60000));
    else
        snprintf(out, outlen, "%lluH",
                 (unsigned long long)(ms / 3600000 > 99999999 ? 99999999 : ms / 3600000));
}

/* ---- -bin metadata ---- */

char *pc_grpc_bin_encode(const uint8_t *p, size_t n)
{
    return pc_base64_encode(p, n, false);
}

int pc_grpc_bin_decode(const char *s, pc_buf *out)
{
    size_t n = strlen(s);
    while (n && s[n - 1] == '=')
        n--;
    out->len = 0;
    pc_buf_reserve(out, n / 4 * 3 + 3);
    ssize_t got = pc_base64_decode(s, n, out->data);
    if (got < 0) return PC_EINVAL;
    out->len = (size_t)got;
    return PC_OK;
}

/* ---- status details ---- */

char *pc_grpc_status_details(int code, const char *msg, int64_t retry_delay_ms)
{
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    Google__Rpc__RetryInfo ri = GOOGLE__RPC__RETRY_INFO__INIT;
    Google__Protobuf__Duration d = GOOGLE__PROTOBUF__DURATION__INIT;
    Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT, *details[1] = {&any};
    uint8_t *ri_buf = NULL;
    st.code = code;
    st.message = (char *)(msg ? msg : "");
    if (retry_delay_ms >= 0) {
        d.seconds = retry_delay_ms / 1000;
        d.nanos = (int32_t)(retry_delay_ms % 1000) * 1000000;
        ri.retry_delay = &d;
        ri_buf = pc_xmalloc(google__rpc__retry_info__get_packed_size(&ri) + 1);
        any.value.len = google__rpc__retry_info__pack(&ri, ri_buf);
        any.value.data = ri_buf;
        any.type_url = PC_GRPC_RETRY_INFO_TYPE;
        st.n_details = 1;
        st.details = details;
    }
    uint8_t *buf = pc_xmalloc(google__rpc__status__get_packed_size(&st) + 1);
    size_t n = google__rpc__status__pack(&st, buf);
    char *out = pc_grpc_bin_encode(buf, n);
    free(buf);
    free(ri_buf);
    return out;
}

int64_t pc_grpc_status_details_retry_delay(const char *b64s)
{
    pc_buf raw = {0};
    int64_t ms = -1;
    if (pc_grpc_bin_decode(b64s, &raw) == 0) {
        Google__Rpc__Status *st = google__rpc__status__unpack(NULL, raw.len, raw.data);
        for (size_t i = 0; st && i < st->n_details; i++) {
            const Google__Protobuf__Any *a = st->details[i];
            if (strcmp(a->type_url, PC_GRPC_RETRY_INFO_TYPE) != 0) continue;
            Google__Rpc__RetryInfo *ri =
                google__rpc__retry_info__unpack(NULL, a->value.len, a->value.data);
            /* a Duration's nanos are 0..999999999 (int32: adding before the range check
             * overflowed) */
            if (ri && ri->retry_delay && ri->retry_delay->seconds >= 0 &&
                ri->retry_delay->seconds < 86400 * 365 && ri->retry_delay->nanos >= 0 &&
                ri->retry_delay->nanos <= 999999999)
                ms = ri->retry_delay->seconds * 1000 +
                     ((int64_t)ri->retry_delay->nanos + 999999) / 1000000;
            if (ri) google__rpc__retry_info__free_unpacked(ri, NULL);
            break;
        }
        if (st) google__rpc__status__free_unpacked(st, NULL);
    }
    pc_buf_free(&raw);
    return ms;
}

/* ---- answering a call ---- */

void pc_grpc_respond(pc_h2_call *call, int code, const char *msg, const void *resp, size_t len,
                     const char *details_b64)
{
    pc_h2_header hdrs[] = {{"content-type", "application/grpc"},
                           {"grpc-accept-encoding", "identity,gzip,zstd"}};
    char status[16];
    snprintf(status, sizeof status, "%d", code);
    if (code == PC_GRPC_OK) {
        pc_buf body = {0};
        pc_grpc_frame(resp, len, false, &body);
        pc_h2_header trl[] = {{"grpc-status", "0"}};
        pc_h2_respond(call, 200, hdrs, 2, body.data, body.len, trl, 1);
        pc_buf_free(&body);
        return;
    }
    char *m = pc_grpc_message_encode(msg ? msg : "");
    pc_h2_header trl[3] = {{"grpc-status", status}, {"grpc-message", m}};
    size_t nt = 2;
    if (details_b64) trl[nt++] = (pc_h2_header){"grpc-status-details-bin", details_b64};
    pc_h2_respond(call, 200, hdrs, 2, NULL, 0, trl, nt);
    free(m);
}
