/* gzip in and out, with a hard cap on inflated size (gzip bombs become 413, not OOM).
 *
 * Through Intel ISA-L's igzip (several times faster than zlib, bench/README.md "Codecs"), with
 * zlib doing what igzip cannot:
 * - deflate at levels 0 (stored) and 4-9: levels 1-3 are igzip's levels 1-3 (6-11x faster than
 *   zlib 1, 7-12 % larger), 4-9 stay zlib's, since no igzip level is as small as any zlib level:
 *   compression_params.level still goes from fastest (1) to smallest (9);
 * - inflate of zlib-wrapped streams (Content-Encoding: deflate), and of anything after a first
 *   gzip member that is not gzip, so both libraries accept exactly the same streams. */
#ifndef PC_GZIP_H
#define PC_GZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/* Level 1 (igzip's level 1) deflates ~10x faster than zlib 1 for ~11% more bytes (bench/README.md,
 * "Codecs"): deflate dominated a relay's CPU, so exporters default to it. */
#define PC_GZIP_DEFAULT_LEVEL 1

static inline int pc_is_gzip(const uint8_t *p, size_t n)
{
    return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}
/* A gzip stream's ISIZE (RFC 1952 §2.3.1): its last member's length mod 2^32, read from its last
 * four bytes; false when it is too short to be one (a header and a trailer, 18 bytes). */
static inline bool pc_gzip_isize(const uint8_t *p, size_t n, uint32_t *isize)
{
    if (!pc_is_gzip(p, n) || n < 18) return false;
    const uint8_t *t = p + n - 4;
    *isize = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
    return true;
}
/* Inflate a gzip (or zlib) stream into out (reset first): PC_OK, PC_EINVAL for a corrupt or
 * truncated stream, or PC_E2BIG as soon as the output would exceed max_out (out then holds at
 * most max_out bytes, as always). Concatenated gzip members are accepted. */
int pc_gzip_inflate(const uint8_t *in, size_t len, size_t max_out, pc_buf *out);
/* gzip-compress in into out (reset first) at the given zlib level (0..9, -1 default). */
void pc_gzip_deflate(const uint8_t *in, size_t len, int level, pc_buf *out);
/* The igzip level (0..3) a zlib level is deflated at, or -1 where zlib itself deflates. */
int pc_gzip_isal_level(int level);
/* The same through zlib only: the reference the fuzz target and the tests compare against. */
int pc_gzip_inflate_zlib(const uint8_t *in, size_t len, size_t max_out, pc_buf *out);
void pc_gzip_deflate_zlib(const uint8_t *in, size_t len, int level, pc_buf *out);

#endif
