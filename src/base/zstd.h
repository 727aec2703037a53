/* zstd in and out (Content-Encoding: zstd, grpc-encoding zstd), bounded like gzip: a zstd bomb
 * is stopped after at most max_out + one step of output, and a frame may not ask for a window
 * larger than PC_ZSTD_WINDOW_LOG_MAX (what RFC 8878 asks HTTP decoders to support), so its
 * memory is bounded too. */
#ifndef PC_ZSTD_H
#define PC_ZSTD_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define PC_ZSTD_WINDOW_LOG_MAX 23 /* 8 MiB */
#define PC_ZSTD_DEFAULT_LEVEL  1

static inline int pc_is_zstd(const uint8_t *p, size_t n)
{
    return n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd;
}
/* Decompress one or more zstd frames into out (reset first): PC_OK, PC_EINVAL for a corrupt or
 * truncated stream (or a window above the maximum), PC_E2BIG as soon as the output would exceed
 * max_out (out then holds at most max_out bytes, as always). */
int pc_zstd_decompress(const uint8_t *in, size_t len, size_t max_out, pc_buf *out);
/* Compress in into one zstd frame in out (reset first) at level (1..19). */
void pc_zstd_compress(const uint8_t *in, size_t len, int level, pc_buf *out);

#endif
