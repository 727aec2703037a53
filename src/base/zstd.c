/* zstd through libzstd's streaming API. A context per call: from malloc, which keeps freed blocks
 * for the next request and gives them back when idle (base/alloc.h). */
#include "base/zstd.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "base/alloc.h"
#include "base/log.h"

enum { ZS_STEP = 256 * 1024 };

int pc_zstd_decompress(const uint8_t *in, size_t len, size_t max_out, pc_buf *out)
{
    unsigned long long size = len ? ZSTD_getFrameContentSize(in, len) : ZSTD_CONTENTSIZE_UNKNOWN;
    pc_buf_step_begin(out, max_out, size < ZSTD_CONTENTSIZE_ERROR ? (size_t)size : SIZE_MAX);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    if (!d) abort();
    ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, PC_ZSTD_WINDOW_LOG_MAX);
    ZSTD_inBuffer ib = {in, len, 0};
    int rc = PC_EINVAL;
    if (len == 0) goto out; /* not a zstd stream */
    for (;;) {
        size_t room = pc_buf_step(out, max_out, ZS_STEP);
        ZSTD_outBuffer ob = {out->data + out->len, room, 0};
        size_t r = ZSTD_decompressStream(d, &ob, &ib);
        out->len += ob.pos;
        if (out->len > max_out) {
            rc = PC_E2BIG;
            break;
        }
        if (ZSTD_isError(r)) break;        /* corrupt, checksum, window too large */
        if (ib.pos == ib.size && r == 0) { /* the last frame is complete and flushed */
            rc = PC_OK;
            break;
        }
        if (ib.pos == ib.size && ob.pos < room) break; /* nothing more to come: truncated */
    }
out:
    ZSTD_freeDCtx(d);
    pc_buf_step_end(out, max_out);
    return rc;
}

void pc_zstd_compress(const uint8_t *in, size_t len, int level, pc_buf *out)
{
    out->len = 0;
    ZSTD_CCtx *c = ZSTD_createCCtx();
    if (!c) abort();
    if (level < 1 || level > 19) level = PC_ZSTD_DEFAULT_LEVEL;
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    /* the window a decoder must hold: never more than PC_ZSTD_WINDOW_LOG_MAX */
    ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, level > 3 ? PC_ZSTD_WINDOW_LOG_MAX : 0);
    ZSTD_CCtx_setPledgedSrcSize(c, len);
    pc_buf_reserve(out, ZSTD_compressBound(len) + 1);
    size_t r = ZSTD_compress2(c, out->data, out->cap - 1, in, len);
    if (ZSTD_isError(r)) {
        PC_ERROR("zstd", "ZSTD_compress2 failed: %s", ZSTD_getErrorName(r));
        abort();
    }
    ZSTD_freeCCtx(c);
    out->len = r;
    out->data[out->len] = 0;
}
