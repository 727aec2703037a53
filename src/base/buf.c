/* Growable byte buffer (buf.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

#include "base/alloc.h"

void pc_buf_reserve(pc_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra)
        cap *= 2;
    b->data = pc_xrealloc(b->data, cap);
    b->cap = cap;
}

void pc_buf_step_begin(pc_buf *b, size_t max_out, size_t declared)
{
    b->len = 0;
    size_t want = declared <= max_out && declared < SIZE_MAX - 2 ? declared + 2 : 1;
    if (b->cap < want) { /* exactly, not rounded up as pc_buf_reserve does */
        b->data = pc_xrealloc(b->data, want);
        b->cap = want;
    }
}

size_t pc_buf_step(pc_buf *b, size_t max_out, size_t step)
{
    size_t room = max_out - b->len + 1;
    if (room > step || room == 0) room = step;
    size_t spare = b->cap > b->len + 1 ? b->cap - b->len - 1 : 0;
    if (spare && spare < room) return spare;
    pc_buf_reserve(b, room + 1);
    return room;
}

void pc_buf_step_end(pc_buf *b, size_t max_out)
{
    if (b->len > max_out) b->len = max_out;
    b->data[b->len] = 0;
}

void pc_buf_append(pc_buf *b, const void *p, size_t n)
{
    pc_buf_reserve(b, n + 1);
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0; /* always NUL-terminated for text users */
}

void pc_buf_puts(pc_buf *b, const char *s)
{
    pc_buf_append(b, s, strlen(s));
}

void pc_buf_put_u64(pc_buf *b, uint64_t v)
{
    char tmp[20];
    pc_buf_append(b, tmp, pc_fmt_u64(tmp, v));
}

size_t pc_str_copy(char *dst, size_t size, const char *src)
{
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
    return n;
}

void pc_buf_printf(pc_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        pc_buf_append(b, tmp, (size_t)n);
        return;
    }
    pc_buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void pc_buf_free(pc_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

size_t pc_fmt_u64(char *out, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

size_t pc_fmt_i64(char *out, int64_t v)
{
    size_t n = 0;
    if (v < 0) out[n++] = '-';
    return n + pc_fmt_u64(out + n, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}
