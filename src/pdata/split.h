/* Splitting requests: the batch processor's send_batch_max_size, the kafka exporter's
 * producer::max_message_bytes and partition keys, and the loadbalancing exporter's routing
 * (ARCHITECTURE.md §3).
 *
 * Profiles are cut through the merger (merge.h) with slices, so each part carries only the
 * dictionary entries it reaches and a profile may be cut between any two samples. Traces,
 * metrics and logs are cut by building shallow views of the request (the original messages,
 * fewer of them; a metric's data points may be cut too), which are packed and decoded into the
 * new parts. No item is lost or repeated: the parts together hold exactly the items of the
 * request, in order. */
#ifndef PC_SPLIT_H
#define PC_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "pdata/merge.h"
#include "pdata/pdata.h"

/* ---- a plan over profiles ------------------------------------------------------------------- */

/* One slice of a plan: samples of one profile of input `input`, going into chunk `chunk`. */
typedef struct pc_split_slice {
    pc_merge_slice sl;
    size_t input;
    size_t chunk;
} pc_split_slice;

/* Slices in input order; the slices of one chunk are consecutive. */
typedef struct pc_split_plan {
    pc_split_slice *v;
    size_t n, cap, chunks;
} pc_split_plan;

/* Cut the profiles of every input (profiles batches, in order) into chunks of at most max
 * samples (max 0: one chunk). Samples are independent, so a profile is cut anywhere; a profile
 * without samples is one empty slice. */
void pc_split_plan_make(pc_batch *const *in, size_t n_in, size_t max, pc_split_plan *pl);
void pc_split_plan_free(pc_split_plan *pl);

/* ---- splitting one batch of any signal ------------------------------------------------------ */

/* Parts of b holding at most max_items items each (samples, spans, data points, log records;
 * max_items >= 1), in order, as a malloc'd array in *out; returns how many. A b that already
 * fits is returned as its own only part (one more reference). Parts carry b's metadata. */
size_t pc_batch_split(const pc_batch *b, size_t max_items, pc_batch ***out);

/* One part per resource (ResourceProfiles, ResourceSpans, ...) holding items, in order. */
size_t pc_batch_split_resources(const pc_batch *b, pc_batch ***out);

/* Traces and logs: one part per trace id, in the order the ids first appear; (*ids)[16 i...]
 * is part i's trace id (16 zero bytes for items without one). A malloc'd array each. */
size_t pc_batch_split_trace_ids(const pc_batch *b, pc_batch ***out, uint8_t **ids);

/* ---- routing: a per-item choice ------------------------------------------------------------ */

/* A profile without samples is routed as a whole with this sample index. */
#define PC_SPLIT_WHOLE ((size_t)-1)

/* The part (< nparts) of one item: profiles, sample i of profile
 * resource_profiles[r]->scope_profiles[s]->profiles[p] (i == PC_SPLIT_WHOLE for a profile
 * without samples); other signals, item i (span, metric, log record) of scope s of resource r
 * (p is 0). Called on every item in request order, from the thread calling pc_batch_route. */
typedef uint32_t (*pc_split_fn)(void *arg, const pc_batch *b, size_t r, size_t s, size_t p,
                                size_t i);

/* Split b into out[0 .. nparts-1] by part_of: NULL where a part got nothing. When every item
 * goes to one part, that part is b itself with one more reference (no copy). A profile split
 * over parts keeps its fields in each (its original_payload goes with the part holding sample
 * 0); samples keep their order within a part. Every part carries b's metadata. Payload-sized:
 * run it on the thread pool. */
void pc_batch_route(const pc_batch *b, uint32_t nparts, pc_split_fn part_of, void *arg,
                    pc_batch **out);

/* The resource of each part of pc_batch_split_resources (NULL when it has none), and the
 * dictionary its strings may live in (profiles; NULL otherwise). */
const pc_resource *pc_batch_first_resource(const pc_batch *b, const pc_dictionary **d);

#endif
