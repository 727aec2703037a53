/* OTLP protobuf decoder: decode, validate, re-encode as protobuf and JSON, decode those again
 * (fuzz_otlp.h lists the invariants); the pre-unpack scan's count is never below what unpack
 * really allocates (src/pdata/proto_scan.h), so no input can take more than it was counted for. */
#include <stdint.h>

#include "base/budget.h"
#include "fuzz_otlp.h"
#include "pdata/proto_scan.h"

FUZZ_INIT_QUIET_LOGS()

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pc_batch *b = NULL;
    pc_error err = {0};
    pc_budget budget;
    pc_budget_init(&budget, 0);
    if (pc_batch_decode(PC_SIGNAL_PROFILES, data, size, false, &budget, &b, &err) != 0) {
        FUZZ_ASSERT(b == NULL, "failed decode returned a batch");
        pc_budget_release(&budget);
        return 0;
    }
    pc_proto_scan scan;
    FUZZ_ASSERT(
        pc_proto_scan_message(PC_REQUEST_DESC, data, size, PC_PROTO_MAX_DEPTH, &scan, NULL) == 0,
        "decoded input fails the scan");
    FUZZ_ASSERT(budget.peak <= scan.cost && budget.misses == 0,
                "unpack took %zu bytes, counted %zu", budget.peak, scan.cost);
    pc_batch_end_budget(b);
    FUZZ_ASSERT(budget.used == 0, "%zu bytes still charged after the decode", budget.used);
    pc_budget_release(&budget);
    FUZZ_ASSERT(b && b->req, "decode succeeded without a request");
    fuzz_check_batch(b, false);
    pc_batch_unref(b);
    return 0;
}
