/* gzip inflate under a 1 MiB cap (never more output than the cap, corrupt input refused), through
 * both paths of base/gzip.c: ISA-L's igzip (pc_gzip_inflate) and zlib (pc_gzip_inflate_zlib, the
 * reference) must accept the same streams with the same output. Then a deflate/inflate round trip
 * of what came out at an igzip level and a zlib level, each inflated by the other library, and
 * the output fed to the OTLP protobuf decoder as the receiver does. The same input also goes
 * through the zstd decoder under the same cap. */
#include <stdint.h>
#include <string.h>

#include "fuzz_otlp.h"
#include "base/gzip.h"
#include "base/zstd.h"

#define CAP (1u << 20)

FUZZ_INIT_QUIET_LOGS()

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the same input as zstd: refused or within the cap, and a round trip when it decodes */
    pc_buf zo = {0};
    int zr = pc_zstd_decompress(data, size, CAP, &zo);
    FUZZ_ASSERT(zr == PC_OK || zr == PC_EINVAL || zr == PC_E2BIG, "zstd rc %d", zr);
    FUZZ_ASSERT(zo.len <= CAP, "zstd: %zu bytes past the %u cap", zo.len, CAP);
    if (zr == PC_OK) {
        pc_buf zz = {0}, zb = {0};
        pc_zstd_compress(zo.data, zo.len, 1, &zz);
        FUZZ_ASSERT(pc_zstd_decompress(zz.data, zz.len, CAP, &zb) == PC_OK, "zstd round trip");
        FUZZ_ASSERT(zb.len == zo.len && (zo.len == 0 || !memcmp(zb.data, zo.data, zo.len)),
                    "zstd round trip changed the data");
        pc_buf_free(&zz);
        pc_buf_free(&zb);
    }
    pc_buf_free(&zo);

    pc_buf out = {0}, ref = {0};
    int rc = pc_gzip_inflate(data, size, CAP, &out);
    int rz = pc_gzip_inflate_zlib(data, size, CAP, &ref);
    FUZZ_ASSERT(rc == PC_OK || rc == PC_EINVAL || rc == PC_E2BIG, "rc %d", rc);
    FUZZ_ASSERT(out.len <= CAP, "inflated %zu bytes past the %u cap", out.len, CAP);
    /* a stream both too large and corrupt may be found either first; otherwise the same answer */
    FUZZ_ASSERT((rc == PC_OK) == (rz == PC_OK), "igzip says %d, zlib says %d", rc, rz);
    if (rc == PC_OK)
        FUZZ_ASSERT(out.len == ref.len && (out.len == 0 || !memcmp(out.data, ref.data, out.len)),
                    "igzip and zlib inflated different bytes (%zu, %zu)", out.len, ref.len);
    pc_buf_free(&ref);
    if (rc != PC_OK) {
        pc_buf_free(&out);
        return 0;
    }

    /* deflate what came out (igzip level 1, zlib level 6) and inflate it with the other
     * library: same bytes */
    static const int levels[] = {1, 6};
    for (int i = 0; i < 2; i++) {
        pc_buf z = {0}, back = {0};
        pc_gzip_deflate(out.data, out.len, levels[i], &z);
        FUZZ_ASSERT(pc_is_gzip(z.data, z.len), "deflate did not produce gzip");
        int r = i == 0 ? pc_gzip_inflate_zlib(z.data, z.len, CAP, &back)
                       : pc_gzip_inflate(z.data, z.len, CAP, &back);
        FUZZ_ASSERT(r == PC_OK, "re-inflate of level %d failed", levels[i]);
        FUZZ_ASSERT(back.len == out.len &&
                        (out.len == 0 || memcmp(back.data, out.data, out.len) == 0),
                    "gzip round trip at level %d changed the data (%zu -> %zu bytes)", levels[i],
                    out.len, back.len);
        pc_buf_free(&z);
        pc_buf_free(&back);
    }

    pc_batch *b = NULL;
    pc_error err = {0};
    if (pc_batch_decode_proto(out.data, out.len, &b, &err) == 0) {
        fuzz_check_batch(b, false);
        pc_batch_unref(b);
    }
    pc_buf_free(&out);
    return 0;
}
