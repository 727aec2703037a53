/* The one dictionary builder (ARCHITECTURE.md §3): interning of strings, functions, mappings,
 * locations, stacks, attributes and links into a ProfilesDictionary, and re-indexing (import) of
 * another dictionary. pprof translation, batch merging, redaction and trace linking all use it.
 *
 * Every table starts with its zero element at index 0 ("" / Function{} / Mapping{} / Location{} /
 * Stack{} / KeyValueAndUnit{} / Link{16 zero bytes, 8 zero bytes}); interning the zero content
 * returns 0. Entries are content-keyed (open-addressing hash tables, seeded hashing) and
 * everything interned is copied into the builder's arena; the hash tables themselves are
 * malloc-owned and released by pc_dict_builder_free. Not thread-safe: one builder per work item. */
#ifndef PC_DICT_H
#define PC_DICT_H

#include <stddef.h>
#include <stdint.h>

#include "pdata/pdata.h"

typedef struct pc_dict_builder pc_dict_builder;

/* A builder whose tables hold only their zero elements; interned data goes into arena. */
pc_dict_builder *pc_dict_builder_new(pc_arena *arena);
/* A builder seeded with an existing dictionary d: every entry of d keeps its index (entries are
 * shared, not copied, so d's storage must outlive the result, normally because it lives in
 * arena). Tables of d that are empty get their zero element. Use it to append to a batch that
 * already has a dictionary: pc_dict_builder_from(b->arena, pc_batch_req(b)->dictionary). */
pc_dict_builder *pc_dict_builder_from(pc_arena *arena, const pc_dictionary *d);
/* Frees the builder and its hash tables; entries stay in the arena. NULL is fine. */
void pc_dict_builder_free(pc_dict_builder *db);
pc_arena *pc_dict_builder_arena(const pc_dict_builder *db);

/* Interning. Each returns the index of the (possibly new) entry. All *_strindex / *_index
 * arguments must already be indices of this builder. */
int32_t pc_dict_string(pc_dict_builder *db, const char *s, size_t len); /* "" -> 0 */
int32_t pc_dict_cstring(pc_dict_builder *db, const char *s);            /* NUL-terminated */
int32_t pc_dict_function(pc_dict_builder *db, int32_t name, int32_t system_name, int32_t filename,
                         int64_t start_line);
/* Content-deduped on memory_start/limit, file_offset, filename and the attribute_indices list. */
int32_t pc_dict_mapping(pc_dict_builder *db, const pc_mapping *m);
/* Content-deduped on mapping_index, address, lines (function_index, line, column) and
 * attribute_indices; the lines are deep-copied. */
int32_t pc_dict_location(pc_dict_builder *db, const pc_location *l);
/* A stack of location indices, leaf first; n == 0 -> 0. */
int32_t pc_dict_stack(pc_dict_builder *db, const int32_t *locs, size_t n);
/* Deep-copies v (may be NULL = empty value) into the arena; dedup by key + value + unit.
 * string_value_strindex / nested key_strindex inside v must be indices of this builder. */
int32_t pc_dict_attribute(pc_dict_builder *db, int32_t key_strindex, const pc_anyvalue *v,
                          int32_t unit_strindex);
/* Shorthands for common attribute values. */
int32_t pc_dict_attr_str(pc_dict_builder *db, const char *key, const char *val, size_t len);
int32_t pc_dict_attr_int(pc_dict_builder *db, const char *key, int64_t val, int32_t unit_strindex);
int32_t pc_dict_attr_bool(pc_dict_builder *db, const char *key, int val);
/* All-zero ids -> 0. */
int32_t pc_dict_link(pc_dict_builder *db, const uint8_t trace_id[16], const uint8_t span_id[8]);

/* Current table sizes (the next new index of each table). */
size_t pc_dict_n_strings(const pc_dict_builder *db);
const char *pc_dict_builder_str(const pc_dict_builder *db, int32_t idx); /* "" if out of range */

/* A ProfilesDictionary in the arena holding a snapshot of every table. The builder stays usable;
 * a later finish returns a new, larger snapshot. */
pc_dictionary *pc_dict_builder_finish(pc_dict_builder *db);

/* Re-indexing: old index (in a source dictionary) -> new index (in the builder), per table. */
typedef struct pc_dict_remap {
    int32_t *strings, *mappings, *locations, *functions, *links, *attributes, *stacks;
    size_t n_strings, n_mappings, n_locations, n_functions, n_links, n_attributes, n_stacks;
} pc_dict_remap;

/* Import every entry of src (which may live in another arena; NULL = empty dictionary) into db,
 * filling map (arrays malloc'd; release with pc_dict_remap_free). Indices inside src that are out
 * of range (or negative) are mapped to 0, never dereferenced. Merging two batches is:
 * pc_dict_builder_from(dst), pc_dict_import(src), pc_dict_remap_* on src's profiles, finish. */
void pc_dict_import(pc_dict_builder *db, const pc_dictionary *src, pc_dict_remap *map);
void pc_dict_remap_free(pc_dict_remap *map);

/* One index through one remap array: out of range -> 0. */
static inline int32_t pc_remap_index(const int32_t *map, size_t n, int32_t old)
{
    return old > 0 && (size_t)old < n ? map[old] : 0;
}
/* Rewrite, in place, every dictionary index a profile holds (sample_type, period_type, samples'
 * stack/attributes/link, profile attributes) from the source space of map to the builder's. */
void pc_dict_remap_profile(const pc_dict_remap *map, pc_profile *p);
/* Rewrite key_strindex / string_value_strindex (recursively) of a KeyValue, e.g. for resource and
 * scope attributes that use the profiles-only string-table forms. */
void pc_dict_remap_keyvalue(const pc_dict_remap *map, pc_keyvalue *kv);

#endif
