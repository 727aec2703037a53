/* Merging ExportProfilesServiceRequests on the wire, without building a model (profcol issue 27,
 * ARCHITECTURE.md §2): the batch processor's flush of requests that were only wire-checked.
 *
 * Protobuf concatenation appends repeated fields and merges a singular message, so the result is
 * every request's resource_profiles in order, then ONE dictionary: the first request's entries,
 * then each later request's entries not already present, de-duplicated by their bytes after
 * their own indices were rewritten, an entry of the zero value in any form becoming element 0
 * ("Duplicates SHOULD NOT occur", ../shared/spec/otlp-profiles.md); every index field of a
 * request is rewritten through its table's remap.
 * Resources are not grouped by content (the model merge does): the same data, more
 * ResourceProfiles. */
#ifndef PC_WIRE_MERGE_H
#define PC_WIRE_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Merge the n requests data[i] (len[i] bytes each), every one accepted whole by
 * pc_wire_check_profiles, into out (cleared first). 0; or PC_ENOTSUP when this merger cannot
 * (a dictionary in more than one occurrence, a table's element 0 not the zero value, a field it
 * does not know in a message of a request whose indices it must rewrite, an index out of
 * range): the caller then decodes and merges the models. A request none of whose indices change
 * (the first, without duplicates) is copied as it is, unknown fields and all. */
int pc_wire_merge(const uint8_t *const *data, const size_t *len, size_t n, pc_buf *out);

#endif
