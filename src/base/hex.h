/* Hexadecimal digits, written once for every id and escape that needs them: trace and span ids
 * (JSON bytes fields, pprof labels, tracelink), percent-encoding (query strings, grpc-message). */
#ifndef PC_BASE_HEX_H
#define PC_BASE_HEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The value of one hex digit (either case), -1 for anything else. */
static inline int pc_hexval(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* n bytes as 2n lowercase hex digits and a NUL (out holds 2n + 1). */
static inline void pc_hex_encode(char *out, const uint8_t *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = 0;
}

/* Exactly 2n hex digits (len == 2n) into n bytes; false for another length or a non-digit. */
static inline bool pc_hex_decode(const char *s, size_t len, uint8_t *out, size_t n)
{
    if (len != 2 * n) return false;
    for (size_t i = 0; i < n; i++) {
        int hi = pc_hexval((unsigned char)s[2 * i]), lo = pc_hexval((unsigned char)s[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

#endif
