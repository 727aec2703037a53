/* OTLP JSON decoder: decode (input is not NUL-terminated), validate, encode, and the round-trip
 * invariants of fuzz_otlp.h. */
#include <stdint.h>

#include "fuzz_otlp.h"

FUZZ_INIT_QUIET_LOGS()

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pc_batch *b = NULL;
    pc_error err = {0};
    if (pc_batch_decode_json((const char *)data, size, &b, &err) != 0) {
        FUZZ_ASSERT(b == NULL, "failed decode returned a batch");
        return 0;
    }
    FUZZ_ASSERT(b && b->req, "decode succeeded without a request");
    fuzz_check_batch(b, false);
    pc_batch_unref(b);
    return 0;
}
