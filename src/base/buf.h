/* A growable byte buffer (malloc-owned): encoders, compression and the HTTP layer write into it. */
#ifndef PC_BASE_BUF_H
#define PC_BASE_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct pc_buf {
    uint8_t *data;
    size_t len, cap;
} pc_buf;
void pc_buf_reserve(pc_buf *b, size_t extra);
/* Decompressors write into b in bounded steps, so that a bomb stops after at most max_out and one
 * step. pc_buf_step_begin empties b and reserves exactly the size the stream declares (with the
 * byte that would prove it too large, and the NUL), when that is within max_out (else pass
 * SIZE_MAX): the bytes get a block of their size, where a step's block shrunk afterwards would
 * stay where it was put, pages apart from the next (bench/README.md, "What a queued request
 * holds"); a wrong size only costs more steps. pc_buf_step reserves the next step's room and
 * returns it: at most step, one byte past max_out (producing that byte proves the output too
 * large), and room reserved already first. pc_buf_step_end drops that proving byte (b never
 * holds more than max_out) and NUL-terminates. */
void pc_buf_step_begin(pc_buf *b, size_t max_out, size_t declared);
size_t pc_buf_step(pc_buf *b, size_t max_out, size_t step);
void pc_buf_step_end(pc_buf *b, size_t max_out);
void pc_buf_append(pc_buf *b, const void *p, size_t n);
void pc_buf_printf(pc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A C string, and an unsigned number in decimal: what an HTTP head is made of, per request,
 * without printf's cost (bench/README.md "Small requests (issue 27, third pass)"). */
void pc_buf_puts(pc_buf *b, const char *s);
void pc_buf_put_u64(pc_buf *b, uint64_t v);
/* src into dst[size] (size > 0), cut short to fit and NUL-terminated: snprintf's "%s" without its
 * cost, for the fields copied per request. Returns the length written. */
size_t pc_str_copy(char *dst, size_t size, const char *src);
void pc_buf_free(pc_buf *b);
/* v in decimal into out (20 bytes at most, not terminated): its length. */
size_t pc_fmt_u64(char *out, uint64_t v);
/* The same for a signed v (21 bytes at most): what printf's %" PRId64 " writes, without printf's
 * cost (a flame graph's JSON is mostly numbers: bench/README.md "The live view's APIs"). */
size_t pc_fmt_i64(char *out, int64_t v);

#endif
