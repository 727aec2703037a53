/* Splitting one batch into several by a per-item choice (the loadbalancing exporter's routing,
 * ARCHITECTURE.md §3).
 *
 * Profiles: each part is built with the merger (pdata/merge.h) from slices of the source's
 * profiles (the samples that go to that part), so every part gets its own compact dictionary
 * holding only the entries its samples reach, through the one dictionary builder. Resources and
 * scopes are kept, profiles keep their fields (a profile split over parts keeps its profile_id
 * in each; its original_payload goes with the part holding sample 0); samples keep their order
 * within a part. Traces: each part holds the spans chosen for it under copies of their resource
 * and scope. The items of the parts add up to the items of the source, exactly. */
#ifndef PC_SPLIT_H
#define PC_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "pdata/pdata.h"

/* A profile without samples is routed as a whole with this sample index. */
#define PC_SPLIT_WHOLE ((size_t)-1)

/* The part (< nparts) of one item: profiles, sample i of profile
 * resource_profiles[r]->scope_profiles[s]->profiles[p] (i == PC_SPLIT_WHOLE for a profile
 * without samples); traces, span i of resource_spans[r]->scope_spans[s] (p is 0). Called on
 * every item in request order, from the thread calling pc_batch_split. */
typedef uint32_t (*pc_split_fn)(void *arg, const pc_batch *b, size_t r, size_t s, size_t p,
                                size_t i);

/* Split b (profiles or traces) into out[0 .. nparts-1]: NULL where a part got nothing. When
 * every item goes to one part, that part is b itself with one more reference (no copy). Every
 * part carries b's metadata (pc_meta). Payload-sized: run it on the thread pool. */
void pc_batch_split(const pc_batch *b, uint32_t nparts, pc_split_fn part_of, void *arg,
                    pc_batch **out);

#endif
