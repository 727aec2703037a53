/* A validating walk over an ExportProfilesServiceRequest as it is on the wire, for pass-through
 * (ARCHITECTURE.md §2, profcol issue 27): it builds nothing and allocates nothing, yet reaches
 * the verdict of the decoded path on the same bytes, pc_proto_scan_message (PC_PROTO_MAX_DEPTH)
 * then protobuf-c's unpack then pc_batch_validate: the same accept or refuse, the same error
 * code, the same counts. One pass checks the wire format as the scan and protobuf-c 1.4 do,
 * takes the dictionary's table sizes (the dictionary may come after the profiles) and notes the
 * largest index into each table and the rules a message breaks alone; when that proves
 * validate.c finds nothing, that is the verdict. Otherwise a second pass applies every index and
 * rule of validate.c (which profiles fail). Messages are shorter than the decoded
 * path's; a refused request is decoded again to explain itself. */
#ifndef PC_WIRE_CHECK_H
#define PC_WIRE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct pc_wire_counts {
    size_t profiles, samples; /* in the request as received (pc_batch_counts before validate) */
    size_t kept_samples;      /* in the profiles validation keeps (pc_batch_items after it) */
    int64_t rejected;         /* profiles validation would take out (its *rejected) */
    /* what the decode would reserve from its budget: pc_proto_scan_message's cost, exactly
     * (set once the wire format was found well-formed) */
    size_t cost;
} pc_wire_counts;

/* 0 when the decoded path accepts the request (rejected > 0 then means some profiles would be
 * taken out: the bytes cannot pass through as they are); else what the decoded path returns
 * first: PC_EPROTO (malformed, field 0, nested deeper than max_depth: the scan, or what
 * protobuf-c refuses), PC_EINVAL (invalid UTF-8; a dictionary, resource or scope attribute
 * rule; every profile invalid). out is set either way (counts are complete only for 0). */
int pc_wire_check_profiles(const uint8_t *data, size_t len, int max_depth, pc_wire_counts *out,
                           pc_error *e);

#endif
