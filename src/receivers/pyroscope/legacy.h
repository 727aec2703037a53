/* Pyroscope's legacy /ingest formats (docs/formats.md): the transport trie (format=trie), the
 * serialized tree (format=tree) and speedscope JSON (format=speedscope). Each is decoded into a
 * batch through the collapsed-stacks builder (ingest.h), so it gets exactly the service name,
 * sample type, units and sampleRate scaling of pc_folded_to_batch (spec/pyroscope.md §1.6).
 * Hostile input: every length, count and index is checked before use, trees are walked with an
 * explicit stack, and what the batch will take is counted and reserved from the request's budget
 * before it is built (docs/limits.md). Pure functions, fuzzed (fuzz_legacy). */
#ifndef PC_PYROSCOPE_LEGACY_H
#define PC_PYROSCOPE_LEGACY_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "pdata/pdata.h"
#include "receivers/pyroscope/ingest.h"

typedef enum pc_legacy_format {
    PC_LEGACY_NONE,
    PC_LEGACY_TRIE,
    PC_LEGACY_TREE,
    PC_LEGACY_SPEEDSCOPE,
} pc_legacy_format;

/* The legacy format a request is in, as Pyroscope picks it (spec §1.4, before every other
 * format): format=trie or Content-Type exactly binary/octet-stream+trie; then the same for tree;
 * then format=speedscope. PC_LEGACY_NONE for anything else. Either argument may be NULL. */
pc_legacy_format pc_legacy_format_of(const char *format, const char *content_type);
/* "trie", "tree", "speedscope" ("" for NONE). */
const char *pc_legacy_format_name(pc_legacy_format f);

/* Decode body (len bytes) in format f into a new batch *out, with the options of collapsed stacks
 * (o->app with its type suffix, o->sample_rate, o->units, times, resource attributes, scope,
 * o->service, o->budget; o->lines is not used). 0, or:
 *   PC_EINVAL  malformed input, an unknown profile type ("unknown profile type: x", as for
 *              collapsed stacks), or a value that does not fit 64 bits once scaled;
 *   PC_E2BIG   over the decode budget's limit, PC_EAGAIN when the decodes in flight leave no
 *              room now (the budget's refusal, o->budget->state).
 * The message in e names the format, and the offset or JSON path of what was wrong. The batch
 * stays charged to the budget until pc_batch_end_budget(). */
int pc_legacy_to_batch(pc_legacy_format f, const uint8_t *body, size_t len, const pc_folded_opts *o,
                       pc_batch **out, pc_error *e);

#endif
