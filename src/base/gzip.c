/* gzip via zlib. Inflate streams into the output in bounded steps so a bomb is stopped after at
 * most max_out + one step of output, never after inflating it whole. */
#include "base/gzip.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/log.h"

enum { GZ_STEP = 256 * 1024 };

/* zlib counts in uInt; feed larger inputs in slices. */
static void feed(z_stream *zs, const uint8_t **in, size_t *left)
{
    if (zs->avail_in > 0 || *left == 0) return;
    size_t n = *left > UINT_MAX ? UINT_MAX : *left;
    zs->next_in = (Bytef *)*in;
    zs->avail_in = (uInt)n;
    *in += n;
    *left -= n;
}

static int only_zeros(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

int pc_gzip_inflate(const uint8_t *in, size_t len, size_t max_out, pc_buf *out)
{
    out->len = 0;
    pc_buf_reserve(out, 1);
    out->data[0] = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 15 + 32) != Z_OK) return PC_EINVAL; /* 32: gzip or zlib header */
    const uint8_t *next = in;
    size_t left = len;
    int rc = PC_EINVAL;
    for (;;) {
        feed(&zs, &next, &left);
        /* Allow one byte beyond the cap: producing it proves the output is too large. */
        size_t room = max_out - out->len + 1;
        if (room > GZ_STEP || room == 0) room = GZ_STEP;
        pc_buf_reserve(out, room + 1);
        zs.next_out = out->data + out->len;
        zs.avail_out = (uInt)room;
        int zr = inflate(&zs, Z_NO_FLUSH);
        out->len += room - zs.avail_out;
        if (out->len > max_out) {
            rc = PC_E2BIG;
            break;
        }
        if (zr == Z_STREAM_END) {
            size_t rest = zs.avail_in + left;
            /* Trailing zero padding (tape/block devices) is tolerated like gzip(1) does. */
            if (rest == 0 || (left == 0 && only_zeros(zs.next_in, zs.avail_in))) {
                rc = PC_OK;
                break;
            }
            inflateReset(&zs); /* another concatenated member follows */
            continue;
        }
        if (zr != Z_OK) break; /* data error, need-dict, mem error, or no progress possible */
        if (zs.avail_in == 0 && left == 0 && zs.avail_out > 0) break; /* truncated stream */
    }
    inflateEnd(&zs);
    out->data[out->len] = 0;
    return rc;
}

void pc_gzip_deflate(const uint8_t *in, size_t len, int level, pc_buf *out)
{
    out->len = 0;
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (level < -1 || level > 9) level = Z_DEFAULT_COMPRESSION;
    /* 15 + 16: gzip wrapper, which every HTTP peer understands as Content-Encoding: gzip */
    if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        PC_ERROR("gzip", "deflateInit2 failed");
        abort();
    }
    pc_buf_reserve(out, deflateBound(&zs, len > ULONG_MAX ? ULONG_MAX : (uLong)len) + 1);
    const uint8_t *next = in;
    size_t left = len;
    int zr;
    do {
        feed(&zs, &next, &left);
        if (out->cap - out->len < 64) pc_buf_reserve(out, out->cap); /* double */
        size_t room = out->cap - out->len - 1;
        if (room > UINT_MAX) room = UINT_MAX;
        zs.next_out = out->data + out->len;
        zs.avail_out = (uInt)room;
        zr = deflate(&zs, left == 0 ? Z_FINISH : Z_NO_FLUSH);
        out->len += room - zs.avail_out;
    } while (zr == Z_OK || zr == Z_BUF_ERROR);
    deflateEnd(&zs);
    out->data[out->len] = 0;
}
