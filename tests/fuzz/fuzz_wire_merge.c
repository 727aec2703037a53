/* The wire merge (src/pdata/wire_merge.h) on two requests cut from one input (its first two
 * bytes, little-endian, give the first one's length modulo what follows), when
 * pc_wire_check_profiles accepts both whole (the merger's precondition): a clean "cannot", or
 * bytes that wire_check accepts with the summed samples and that decode to the same resolved
 * content as the model merge (tests/unit/wmerge_oracle.h). */
#include <stdint.h>

#include "fuzz_common.h"
#include "../unit/wmerge_oracle.h"

FUZZ_INIT_QUIET_LOGS()

static int accepted(const uint8_t *p, size_t n)
{
    pc_wire_counts wc;
    pc_error e = {0};
    return pc_wire_check_profiles(p, n, PC_PROTO_MAX_DEPTH, &wc, &e) == 0 && !wc.rejected;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    size_t rest = size - 2, cut = rest ? (size_t)(data[0] | data[1] << 8) % (rest + 1) : 0;
    const uint8_t *d[2] = {data + 2, data + 2 + cut};
    size_t l[2] = {cut, rest - cut};
    if (!accepted(d[0], l[0]) || !accepted(d[1], l[1])) return 0;
    char why[2048];
    int rc = wm_check(d, l, 2, false, why, sizeof why);
    FUZZ_ASSERT(rc != 1, "%s", why);
    return 0;
}
