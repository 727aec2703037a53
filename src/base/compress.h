/* The wire compressions profcol speaks (Content-Encoding, grpc-encoding, exporters'
 * compression): one place that names them and dispatches to base/gzip.c or base/zstd.c. */
#ifndef PC_COMPRESS_H
#define PC_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef enum { PC_ENC_NONE, PC_ENC_GZIP, PC_ENC_ZSTD } pc_enc;

/* A Content-Encoding or grpc-encoding value: NULL, "" and "identity" are PC_ENC_NONE; "gzip",
 * "x-gzip" and "deflate" (zlib-wrapped, which base/gzip.c also reads) PC_ENC_GZIP; "zstd"
 * PC_ENC_ZSTD; anything else -1. Case-insensitive. */
int pc_enc_parse(const char *name);
/* "identity", "gzip", "zstd" */
const char *pc_enc_name(pc_enc enc);
/* Decompress into out (reset first): PC_OK, PC_EINVAL (corrupt or truncated), PC_E2BIG (over
 * max_out, stopped after at most one step beyond it). PC_ENC_NONE copies, PC_E2BIG over max. */
int pc_decompress(pc_enc enc, const uint8_t *in, size_t len, size_t max_out, pc_buf *out);
/* Compress into out (reset first); level is the encoding's (gzip 1..9, zstd 1..19), or 0 for its
 * default (PC_GZIP_DEFAULT_LEVEL, PC_ZSTD_DEFAULT_LEVEL). */
void pc_compress(pc_enc enc, const uint8_t *in, size_t len, int level, pc_buf *out);
/* in (len bytes, compressed with enc, which decompressed to inflated bytes) can be forwarded as
 * it is to any peer of that encoding: a zstd stream; one gzip member without trailing bytes (its
 * ISIZE matches: no padding, no zlib-wrapped "deflate" body); anything for PC_ENC_NONE. */
bool pc_enc_forwardable(pc_enc enc, const uint8_t *in, size_t len, size_t inflated);

#endif
