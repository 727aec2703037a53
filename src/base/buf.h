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
/* The same without rounding up: room for exactly extra more bytes, for a buffer whose final size
 * is known (a block that would be shrunk afterwards stays where it was put, pages apart from the
 * next). */
void pc_buf_reserve_exact(pc_buf *b, size_t extra);
/* For a decompressor writing into b in bounded steps, so that a bomb stops after at most max_out
 * and one step: the room of its next step, reserved with a byte beyond it for the NUL. At most
 * step, one byte past max_out (producing that byte proves the output too large), and room
 * reserved already (pc_buf_reserve_exact, for a size the stream gives) first. */
size_t pc_buf_step(pc_buf *b, size_t max_out, size_t step);
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
