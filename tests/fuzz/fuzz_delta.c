/* Deltas of cumulative profiles (pdata/delta.h) on translated pprof: the input is decoded and
 * subtracted three times (every sample type cumulative). Invariants: the first is a series'
 * first; the same profile again leaves no sample (nothing changed), and is no reset; the batches
 * stay valid. */
#include <stdint.h>

#include "fuzz_otlp.h"
#include "formats/pprof.h"
#include "pdata/delta.h"

static const pc_format_opts in_opts = {.max_bytes = 1u << 20};

FUZZ_INIT_QUIET_LOGS()

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pc_delta *d = pc_delta_new();
    for (int round = 0; round < 3; round++) {
        pc_batch *b = NULL;
        pc_error err = {0};
        if (pc_pprof_decode(data, size, &in_opts, &b, &err) != 0) break;
        pc_delta_result r = pc_delta_apply(d, b, NULL);
        FUZZ_ASSERT(round > 0 || r == PC_DELTA_FIRST, "first scrape: %d", (int)r);
        FUZZ_ASSERT(round == 0 || r == PC_DELTA_OK, "the same profile again: %d", (int)r);
        if (round > 0)
            FUZZ_ASSERT(pc_batch_counts(b).samples == 0, "%zu samples left of no change",
                        pc_batch_counts(b).samples);
        int64_t rejected = 0;
        FUZZ_ASSERT(pc_batch_validate(b, &rejected, &err) == 0, "invalid after the delta: %s",
                    err.msg);
        pc_batch_unref(b);
    }
    pc_delta_free(d);
    return 0;
}
