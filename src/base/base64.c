/* Base64 (base64.h). */
#include "base/base64.h"

#include "base/alloc.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t pc_base64_len(size_t n, bool pad)
{
    return pad ? (n + 2) / 3 * 4 : n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

size_t pc_base64_write(char *out, const void *data, size_t n, bool pad)
{
    const uint8_t *p = data;
    char *o = out;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (i < n) { /* one or two bytes left: two or three characters, then the padding */
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        if (i + 1 < n) *o++ = alphabet[(v >> 6) & 63];
        while (pad && (o - out) % 4)
            *o++ = '=';
    }
    return (size_t)(o - out);
}

char *pc_base64_encode(const void *data, size_t n, bool pad)
{
    char *out = pc_xmalloc(pc_base64_len(n, pad) + 1);
    out[pc_base64_write(out, data, n, pad)] = 0;
    return out;
}

static int value(int ch)
{
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+' || ch == '-') return 62;
    if (ch == '/' || ch == '_') return 63;
    return -1;
}

ssize_t pc_base64_decode(const char *s, size_t n, uint8_t *out)
{
    if (n % 4 == 1) return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = value((unsigned char)s[i]);
        if (v < 0) return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return (ssize_t)o;
}
