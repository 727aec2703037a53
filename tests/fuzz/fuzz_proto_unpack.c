/* The one-pass decoder (src/pdata/proto_unpack.h) against the path it replaces on every input:
 * pc_proto_scan_message then protobuf-c's protobuf_c_message_unpack, for each OTLP
 * Export*ServiceRequest (profiles, traces, metrics, logs) and a pprof Profile. Same verdict and
 * message; when both take it, the same model field by field and the same bytes packed again
 * (tests/unit/unpack_oracle.h). */
#include <stdint.h>

#include "fuzz_common.h"
#include "pdata/pdata.h"
#include "pprof.pb-c.h"
#include "../unit/unpack_oracle.h"

FUZZ_INIT_QUIET_LOGS()

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[600];
    for (int s = 0; s <= PC_SIGNAL_COUNT; s++) {
        const ProtobufCMessageDescriptor *d = s < PC_SIGNAL_COUNT
                                                  ? pc_signal_infos[s].request
                                                  : &perftools__profiles__profile__descriptor;
        FUZZ_ASSERT(unpack_compare(d, data, size, why, sizeof why) >= 0, "%s", why);
    }
    return 0;
}
