/* gzip in and out, with a hard cap on inflated size (gzip bombs become 413, not OOM). */
#ifndef PC_GZIP_H
#define PC_GZIP_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/* Level 1 costs ~4% more bytes than 6 on profiles for ~3x less CPU (bench/README.md): deflate
 * dominates a relay's CPU, so exporters default to it. */
#define PC_GZIP_DEFAULT_LEVEL 1

static inline int pc_is_gzip(const uint8_t *p, size_t n)
{
    return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}
/* Inflate a gzip (or zlib) stream into out (reset first): PC_OK, PC_EINVAL for a corrupt or
 * truncated stream, or PC_E2BIG as soon as the output would exceed max_out. Concatenated gzip
 * members are accepted. */
int pc_gzip_inflate(const uint8_t *in, size_t len, size_t max_out, pc_buf *out);
/* gzip-compress in into out (reset first) at the given level (1..9, -1 default). */
void pc_gzip_deflate(const uint8_t *in, size_t len, int level, pc_buf *out);

#endif
