/* Dispatch over the wire compressions (compress.h). */
#include "base/compress.h"

#include <strings.h>

#include "base/err.h"
#include "base/gzip.h"
#include "base/zstd.h"

int pc_enc_parse(const char *name)
{
    if (!name || !*name || !strcasecmp(name, "identity")) return PC_ENC_NONE;
    if (!strcasecmp(name, "gzip") || !strcasecmp(name, "x-gzip") || !strcasecmp(name, "deflate"))
        return PC_ENC_GZIP;
    if (!strcasecmp(name, "zstd")) return PC_ENC_ZSTD;
    return -1;
}

const char *pc_enc_name(pc_enc enc)
{
    return enc == PC_ENC_GZIP ? "gzip" : enc == PC_ENC_ZSTD ? "zstd" : "identity";
}

int pc_decompress(pc_enc enc, const uint8_t *in, size_t len, size_t max_out, pc_buf *out)
{
    switch (enc) {
    case PC_ENC_GZIP: return pc_gzip_inflate(in, len, max_out, out);
    case PC_ENC_ZSTD: return pc_zstd_decompress(in, len, max_out, out);
    default:
        out->len = 0;
        if (len > max_out) return PC_E2BIG;
        pc_buf_append(out, in, len);
        return PC_OK;
    }
}

void pc_compress(pc_enc enc, const uint8_t *in, size_t len, int level, pc_buf *out)
{
    switch (enc) {
    case PC_ENC_GZIP: pc_gzip_deflate(in, len, level ? level : PC_GZIP_DEFAULT_LEVEL, out); return;
    case PC_ENC_ZSTD: pc_zstd_compress(in, len, level ? level : PC_ZSTD_DEFAULT_LEVEL, out); return;
    default:
        out->len = 0;
        pc_buf_append(out, in, len);
        return;
    }
}

bool pc_enc_forwardable(pc_enc enc, const uint8_t *in, size_t len, size_t inflated)
{
    switch (enc) {
    case PC_ENC_GZIP: {
        uint32_t isize;
        return inflated && pc_gzip_isize(in, len, &isize) && isize == (uint32_t)inflated;
    }
    case PC_ENC_ZSTD: return pc_is_zstd(in, len);
    default: return true;
    }
}
