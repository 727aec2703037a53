/* Merging batches and what it needs: reachability of dictionary entries, and pruning.
 *
 * The dictionary work itself (interning, import, remap) is the one builder in dict.h; this file
 * decides WHAT goes into a builder: whole batches, or slices of profiles (sample ranges) with only
 * the dictionary entries they reach, so split requests carry no orphans. */
#ifndef PC_MERGE_H
#define PC_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pdata/pdata.h"

/* ---- reachability --------------------------------------------------------------------------- */

/* Marks of the entries of one dictionary reached from profiles, resources and scopes. Marks are
 * epoch-stamped, so pc_dict_used_reset is O(1) and a profile costs only what it reaches. */
typedef struct pc_dict_used pc_dict_used;

pc_dict_used *pc_dict_used_new(const pc_dictionary *d);
void pc_dict_used_free(pc_dict_used *u);
/* Forget every mark (and the byte count). */
void pc_dict_used_reset(pc_dict_used *u);
/* Mark what samples [from, to) of p reach, plus p's own sample/period types and attributes. */
void pc_dict_used_profile(pc_dict_used *u, const pc_profile *p, size_t from, size_t to);
/* Mark the strings that key_strindex / string_value_strindex forms of kv reference. */
void pc_dict_used_keyvalues(pc_dict_used *u, pc_keyvalue *const *kv, size_t n);
/* Encoded bytes (protobuf, with field tag and length) of every entry marked since the last reset.
 */
size_t pc_dict_used_bytes(const pc_dict_used *u);
/* A shallow copy of the dictionary whose unmarked entries are NULL, which pc_dict_import skips:
 * importing it imports exactly the marked entries. Pointer tables are malloc'd; free with
 * pc_dict_used_view_free. */
pc_dictionary *pc_dict_used_view(const pc_dict_used *u);
void pc_dict_used_view_free(pc_dictionary *view);

/* ---- merging -------------------------------------------------------------------------------- */

/* Samples [from, to) of profile resource_profiles[r]->scope_profiles[s]->profiles[p]; or, when
 * pick is set, the n_pick samples of that profile whose indices it lists (ascending; from and
 * to are then ignored). */
typedef struct pc_merge_slice {
    size_t r, s, p;
    size_t from, to;
    const uint32_t *pick;
    size_t n_pick;
} pc_merge_slice;

/* Builds one new batch from parts of others: one de-duplicated dictionary, and one
 * ResourceProfiles per distinct resource (schema_url, attributes compared by resolved key/value
 * content whatever their string-table form, entity refs, dropped count) holding one ScopeProfiles
 * per distinct scope (schema_url, name, version, attributes, dropped count). Profiles are copied
 * (the sources may be freed afterwards); their order is kept. */
typedef struct pc_merger pc_merger;

pc_merger *pc_merger_new(void);
/* Keep every resource added a ResourceProfiles of its own (no grouping by content): for joining
 * the parts of one request, one decoded at a time. */
void pc_merger_keep_resources_apart(pc_merger *m);
/* Bytes the merged batch holds so far (its arena). */
size_t pc_merger_bytes(const pc_merger *m);
/* Add all of src (slices == NULL: its whole dictionary is imported), or only the given slices
 * (only the entries they reach are imported). A profile split over several slices keeps its
 * profile_id in every part; original_payload goes only with the part that holds sample 0. */
void pc_merger_add(pc_merger *m, const pc_batch *src, const pc_merge_slice *slices, size_t n);
/* Samples added so far. */
size_t pc_merger_samples(const pc_merger *m);
/* The merged batch (no metadata); frees the merger. */
pc_batch *pc_merger_finish(pc_merger *m);

/* ---- content hash --------------------------------------------------------------------------- */

/* A hash of a set of attributes by content, as the merge key compares them: order does not
 * matter, and strings are compared by content whether inline or through d's string table (d may
 * be NULL for traces, metrics and logs). Equal sets hash equal in every process and run (the
 * kafka exporter's partition key). */
uint64_t pc_attrs_hash(const pc_dictionary *d, pc_keyvalue *const *kv, size_t n);

/* ---- pruning -------------------------------------------------------------------------------- */

/* Remove NULL profiles, then ScopeProfiles without profiles and ResourceProfiles without scopes
 * (arrays are compacted in place). */
void pc_request_prune(pc_request *r);

#endif
