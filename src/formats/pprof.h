/* The one pprof <-> OTLP profiles translator, each way (ARCHITECTURE.md §3, spec/otlp-profiles.md
 * §3.1, §3.2, §4.1): pprof.c in, pprof_out.c out. Dictionary work goes through pdata/dict.h.
 *
 * pprof -> OTLP: one Profile per pprof sample_type (sample j of the pprof is sample j of every
 * Profile, with values = [value[i]]); mappings, locations, functions, stacks, labels deduped into
 * the batch dictionary. Labels: string -> string attribute; numeric -> int attribute with
 * unit_strindex = num_unit; a key with several values -> one array attribute (string or int).
 * Attributes written: mapping `process.executable.build_id.gnu` (build_id),
 * `pprof.mapping.has_{functions,filenames,line_numbers,inline_frames}` (when true); location
 * `pprof.location.is_folded` (when true); profile `pprof.profile.drop_frames`,
 * `pprof.profile.keep_frames`, `pprof.profile.doc_url` (when non-empty) and `pprof.profile.comment`
 * (string array); scope `pprof.scope.default_sample_type` (when set). `trace_id` / `span_id` labels
 * stay plain string attributes (turning them into Links is the trace-link processor's job). The
 * original payload is not kept.
 *
 * OTLP -> pprof: per (resource, scope), consecutive profiles whose samples line up (same number of
 * samples; per index the same stack, attributes and link, one value each; same time, duration,
 * period and profile attributes) become one multi-value pprof; any other profile becomes a pprof of
 * its own (a sample's value is then the sum of its values, or its number of timestamps). Sample
 * attributes -> labels (array attributes -> one label per element); a Link -> string labels
 * `trace_id` (unless all-zero) and `span_id` (unless all-zero) in lowercase hex, replacing sample
 * attributes of those keys; the attributes above are turned back into pprof fields. Function,
 * location and mapping ids are 1..n in dictionary order; the string table is rebuilt. */
#ifndef PC_FORMATS_PPROF_H
#define PC_FORMATS_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/format.h"
#include "pdata/pdata.h"

#define PC_PPROF_DEFAULT_MAX_BYTES PC_FORMAT_DEFAULT_MAX_BYTES

/* Translate one pprof payload (raw protobuf, or gzip: detected by the magic 1f 8b) into a new
 * ResourceProfiles + ScopeProfiles appended to *out (format.h). When *out is NULL a new batch is
 * created; otherwise *out must be writable and its dictionary is extended. Reads from o (may be
 * NULL): attrs, then service.name (o->service, else o->app whole, when set), scope_name /
 * scope_version, max_bytes (cap on the message after inflate; 0: 64 MiB) and budget (the pprof is
 * counted before it is unpacked and again before it is translated). Returns 0; otherwise a code
 * with a message in e (and *out unchanged): PC_EBADMSG for undecodable or invalid input (e.g.
 * "pprof: sample 3 references unknown location id 77", or invalid UTF-8 in a string, which
 * Pyroscope refuses too), PC_E2BIG when the payload exceeds max_bytes, or the budget's refusal
 * (budget->state: PC_E2BIG or PC_EAGAIN). Safe on hostile input. */
PC_FORMAT_DECODER(pc_pprof_decode);

/* One produced pprof, valid during the callback only. */
typedef struct pc_pprof_out {
    const pc_resource_profiles *rp;
    const pc_scope_profiles *sp;
    const pc_profile *const *profiles; /* sample_type[i] of the pprof comes from profiles[i] */
    size_t n_profiles;
    const uint8_t *data; /* gzip-compressed pprof protobuf */
    size_t len;
} pc_pprof_out;

/* Return 0 to continue; anything else stops pc_batch_to_pprof, which then returns that value. */
typedef int (*pc_pprof_cb)(const pc_pprof_out *o, void *ud);

/* Translate every profile of b to gzip-compressed pprof, calling cb once per produced pprof, in
 * resource / scope / profile order. Indices out of range are read as 0 (never dereferenced).
 * Returns 0, or the first non-zero value returned by cb. */
int pc_batch_to_pprof(const pc_batch *b, pc_pprof_cb cb, void *ud);

#endif
