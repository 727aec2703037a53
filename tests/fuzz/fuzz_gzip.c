/* gzip inflate under a 1 MiB cap (never more output than the cap, corrupt input refused), a
 * deflate/inflate round trip of what came out, and the output fed to the OTLP protobuf decoder as
 * the receiver does. */
#include <stdint.h>
#include <string.h>

#include "fuzz_otlp.h"
#include "base/gzip.h"

#define CAP (1u << 20)

FUZZ_INIT_QUIET_LOGS()

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pc_buf out = {0};
    int rc = pc_gzip_inflate(data, size, CAP, &out);
    FUZZ_ASSERT(rc == PC_OK || rc == PC_EINVAL || rc == PC_E2BIG, "rc %d", rc);
    FUZZ_ASSERT(out.len <= CAP, "inflated %zu bytes past the %u cap", out.len, CAP);
    if (rc != PC_OK) {
        pc_buf_free(&out);
        return 0;
    }

    /* deflate what came out and inflate it again: same bytes */
    pc_buf z = {0}, back = {0};
    pc_gzip_deflate(out.data, out.len, 1, &z);
    FUZZ_ASSERT(pc_is_gzip(z.data, z.len), "deflate did not produce gzip");
    FUZZ_ASSERT(pc_gzip_inflate(z.data, z.len, CAP, &back) == PC_OK, "re-inflate failed");
    FUZZ_ASSERT(back.len == out.len && (out.len == 0 || memcmp(back.data, out.data, out.len) == 0),
                "gzip round trip changed the data (%zu -> %zu bytes)", out.len, back.len);
    pc_buf_free(&z);
    pc_buf_free(&back);

    pc_batch *b = NULL;
    pc_error err = {0};
    if (pc_batch_decode_proto(out.data, out.len, &b, &err) == 0) {
        fuzz_check_batch(b, false);
        pc_batch_unref(b);
    }
    pc_buf_free(&out);
    return 0;
}
