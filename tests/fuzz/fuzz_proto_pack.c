/* The two-pass encoder (src/pdata/proto_pack.h) against protobuf-c's pack on every input:
 * decoded by protobuf-c as each OTLP Export*ServiceRequest (profiles, traces, metrics, logs) and
 * as a pprof Profile, whatever decodes is packed both ways and must come out byte for byte the
 * same (tests/unit/pack_oracle.h), unknown fields included. */
#include <stdint.h>

#include "fuzz_common.h"
#include "pdata/pdata.h"
#include "pprof.pb-c.h"
#include "../unit/pack_oracle.h"

FUZZ_INIT_QUIET_LOGS()

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[300];
    for (int s = 0; s <= PC_SIGNAL_COUNT; s++) {
        const ProtobufCMessageDescriptor *d = s < PC_SIGNAL_COUNT
                                                  ? pc_signal_infos[s].request
                                                  : &perftools__profiles__profile__descriptor;
        FUZZ_ASSERT(pack_compare_input(d, data, size, why, sizeof why) >= 0, "%s", why);
    }
    return 0;
}
