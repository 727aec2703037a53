/* The wire walk (src/pdata/wire_check.h) against the decoded path (scan, protobuf-c unpack,
 * pc_batch_validate) on every input: the same verdict, and on acceptance the same counts
 * (tests/unit/wire_oracle.h). */
#include <stdint.h>

#include "fuzz_common.h"
#include "../unit/wire_oracle.h"

FUZZ_INIT_QUIET_LOGS()

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[600];
    FUZZ_ASSERT(wire_compare(data, size, NULL, why, sizeof why) == 0, "%s", why);
    return 0;
}
