/* gzip through Intel ISA-L's igzip, with zlib where igzip cannot do the job (gzip.h says which).
 * Inflate streams into the output in bounded steps so a bomb is stopped after at most max_out +
 * one step of output, never after inflating it whole. */
#include "base/gzip.h"

#include <isa-l/igzip_lib.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/alloc.h"
#include "base/log.h"

enum { GZ_STEP = 256 * 1024 };

/* igzip's state: ~170 KiB, and the level buffer ~280 KiB, per call. From malloc, which keeps
 * freed blocks for the next request and gives them back when profcol is idle (base/alloc.h), so
 * they cost neither fresh pages while busy nor resident memory while idle. */
/* ---- levels ---- */

/* zlib level -> igzip level (0..3), or -1: zlib deflates at that level. Measured on the
 * otlp-large payloads (bench/README.md, "Codecs"): igzip's levels 1-3 deflate 6-11x faster than
 * zlib 1 but 7-12 % larger, and no igzip level is as small as any zlib level. So levels 1-3 (the
 * fast end, 1 the exporters' default) are igzip's 1-3, and 4-9 stay zlib's: the knob still goes
 * from fastest to smallest, and a level chosen for size gives what it gave before. */
static const int isal_level_of[10] = {-1, 1, 2, 3, -1, -1, -1, -1, -1, -1};

int pc_gzip_isal_level(int level)
{
    if (level == -1) level = 6; /* zlib's default */
    return level >= 0 && level <= 9 ? isal_level_of[level] : -1;
}

/* ---- inflate ---- */

static int only_zeros(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

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

/* zlib, appending to out: gzip or zlib wrapper (auto-detected per member). */
static int inflate_zlib(const uint8_t *in, size_t len, size_t max_out, pc_buf *out)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 15 + 32) != Z_OK) return PC_EINVAL; /* 32: gzip or zlib header */
    const uint8_t *next = in;
    size_t left = len;
    int rc = PC_EINVAL;
    for (;;) {
        feed(&zs, &next, &left);
        size_t room = pc_buf_step(out, max_out, GZ_STEP);
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
    return rc;
}

/* A gzip member's reserved FLG bits (5-7) set: RFC 1952 §2.3.1.2 has a decompressor refuse it,
 * as zlib does; igzip ignores them (found by fuzz_gzip). */
static bool reserved_flags(const uint8_t *member, size_t n)
{
    return n > 3 && (member[3] & 0xe0);
}

/* igzip, appending to out, for input that starts with the gzip magic. A member that follows and
 * is not gzip (a zlib stream, garbage) goes to zlib, so both paths accept the same streams. */
static int inflate_isal_with(struct inflate_state *st, const uint8_t *in, size_t len,
                             size_t max_out, pc_buf *out)
{
    if (reserved_flags(in, len)) return PC_EINVAL;
    isal_inflate_init(st);
    st->crc_flag = ISAL_GZIP;
    const uint8_t *next = in;
    size_t left = len;
    for (;;) {
        if (st->avail_in == 0 && left > 0) {
            size_t n = left > UINT32_MAX ? UINT32_MAX : left;
            st->next_in = (uint8_t *)next;
            st->avail_in = (uint32_t)n;
            next += n;
            left -= n;
        }
        size_t room = pc_buf_step(out, max_out, GZ_STEP);
        st->next_out = out->data + out->len;
        st->avail_out = (uint32_t)room;
        int r = isal_inflate(st);
        out->len += room - st->avail_out;
        if (out->len > max_out) return PC_E2BIG;
        if (r != ISAL_DECOMP_OK) return PC_EINVAL; /* corrupt, bad checksum, needs a dictionary */
        if (st->block_state == ISAL_BLOCK_FINISH) {
            const uint8_t *rest = st->next_in;
            size_t rest_len = st->avail_in + left;
            if (rest_len == 0 || (left == 0 && only_zeros(rest, st->avail_in))) return PC_OK;
            if (!pc_is_gzip(rest, rest_len)) /* one buffer: what is left follows next_in */
                return inflate_zlib(rest, rest_len, max_out, out);
            if (reserved_flags(rest, rest_len)) return PC_EINVAL;
            uint32_t avail = st->avail_in;
            isal_inflate_reset(st); /* another concatenated member follows */
            st->crc_flag = ISAL_GZIP;
            st->next_in = (uint8_t *)rest;
            st->avail_in = avail;
            continue;
        }
        if (st->avail_in == 0 && left == 0 && st->avail_out > 0) return PC_EINVAL; /* truncated */
    }
}

static int inflate_isal(const uint8_t *in, size_t len, size_t max_out, pc_buf *out)
{
    /* not zeroed: isal_inflate_init sets every field a stream reads before writing it (the
     * tables are filled from each block's header), and clearing 85 KiB cost about a tenth of a
     * small request's instructions (bench/README.md, "Small requests") */
    struct inflate_state *st = pc_xmalloc(sizeof *st);
    int rc = inflate_isal_with(st, in, len, max_out, out);
    free(st);
    return rc;
}

static int inflate_into(const uint8_t *in, size_t len, size_t max_out, pc_buf *out, bool zlib)
{
    /* the size a gzip stream gives: its last member's ISIZE (one member is what clients send) */
    uint32_t isize;
    pc_buf_step_begin(out, max_out, pc_gzip_isize(in, len, &isize) ? isize : SIZE_MAX);
    int rc = !zlib && pc_is_gzip(in, len) ? inflate_isal(in, len, max_out, out)
                                          : inflate_zlib(in, len, max_out, out);
    pc_buf_step_end(out, max_out);
    return rc;
}

int pc_gzip_inflate(const uint8_t *in, size_t len, size_t max_out, pc_buf *out)
{
    return inflate_into(in, len, max_out, out, false);
}

int pc_gzip_inflate_zlib(const uint8_t *in, size_t len, size_t max_out, pc_buf *out)
{
    return inflate_into(in, len, max_out, out, true);
}

/* ---- deflate ---- */

static void deflate_zlib(const uint8_t *in, size_t len, int level, pc_buf *out)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
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
}

static uint32_t isal_level_buf_size(int level)
{
    switch (level) {
    case 1: return ISAL_DEF_LVL1_DEFAULT;
    case 2: return ISAL_DEF_LVL2_DEFAULT;
    case 3: return ISAL_DEF_LVL3_DEFAULT;
    default: return 0;
    }
}

static void deflate_isal(const uint8_t *in, size_t len, int level, pc_buf *out)
{
    uint32_t need = isal_level_buf_size(level);
    uint8_t *lvl_buf = need ? pc_xmalloc(need) : NULL;
    struct isal_zstream *zs = pc_xcalloc(1, sizeof *zs); /* init leaves some of it */
    isal_deflate_init(zs);
    zs->gzip_flag = IGZIP_GZIP;
    zs->level = (uint32_t)level;
    zs->level_buf = lvl_buf;
    zs->level_buf_size = need;
    zs->flush = NO_FLUSH;
    /* stored blocks bound the output: the input plus 5 bytes per 64 KiB, header and trailer */
    pc_buf_reserve(out, len + len / 8192 + 1024);
    const uint8_t *next = in;
    size_t left = len;
    do {
        if (zs->avail_in == 0 && left > 0) {
            size_t n = left > (1u << 30) ? (1u << 30) : left;
            zs->next_in = (uint8_t *)next;
            zs->avail_in = (uint32_t)n;
            next += n;
            left -= n;
        }
        zs->end_of_stream = left == 0;
        if (out->cap - out->len < 1024) pc_buf_reserve(out, out->cap); /* double */
        size_t room = out->cap - out->len - 1;
        if (room > UINT32_MAX) room = UINT32_MAX;
        zs->next_out = out->data + out->len;
        zs->avail_out = (uint32_t)room;
        if (isal_deflate(zs) != COMP_OK) {
            PC_ERROR("gzip", "isal_deflate failed");
            abort();
        }
        out->len += room - zs->avail_out;
    } while (zs->internal_state.state != ZSTATE_END);
    free(zs);
    free(lvl_buf);
}

void pc_gzip_deflate(const uint8_t *in, size_t len, int level, pc_buf *out)
{
    out->len = 0;
    if (level < -1 || level > 9) level = Z_DEFAULT_COMPRESSION;
    int il = pc_gzip_isal_level(level);
    if (il >= 0)
        deflate_isal(in, len, il, out);
    else
        deflate_zlib(in, len, level, out);
    out->data[out->len] = 0;
}

void pc_gzip_deflate_zlib(const uint8_t *in, size_t len, int level, pc_buf *out)
{
    out->len = 0;
    if (level < -1 || level > 9) level = Z_DEFAULT_COMPRESSION;
    deflate_zlib(in, len, level, out);
    out->data[out->len] = 0;
}
