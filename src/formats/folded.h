/* Collapsed stacks (spec/pyroscope.md §1.4, §1.6): "root;child;leaf 12" per line (Pyroscope's
 * folded, groups, collapsed) or one stack per line counting 1 (lines), and the stacks builder the
 * formats of frame names (these two, trie, tree, speedscope: legacy.h) build their batch with, so
 * all get the same service name, sample type, units and sampleRate scaling. */
#ifndef PC_FORMATS_FOLDED_H
#define PC_FORMATS_FOLDED_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "formats/format.h"
#include "pdata/dict.h"
#include "pdata/pdata.h"

/* Collapsed stacks into a new batch (format.h): one ResourceProfiles with service.name (o->service,
 * else o->app without its ".type" suffix) and o->attrs, one Profile of the type o->app's suffix
 * names (none: cpu), counts scaled by the o->sample_rate period for cpu/wall types, o->units for
 * types without a unit of their own. PC_EINVAL for an unknown type suffix; PC_EBADMSG for a
 * malformed line, a count outside int64 or one that overflows once scaled; the budget's refusal. */
PC_FORMAT_DECODER(pc_folded_decode);
/* The same for "lines": every line one stack counting 1 (one period for cpu/wall types). */
PC_FORMAT_DECODER(pc_lines_decode);

/* The stacks builder: one dictionary, and per profile a ResourceProfiles with service.name, the
 * opts' attributes and scope, one sample type from the app name's suffix (§1.6), the sampleRate
 * period, time and duration. Use, on a zeroed builder: pc_stacks_begin (the first
 * pc_stacks_profile_begin may come before it, to learn the type and period while counting), then
 * per profile pc_stacks_profile_begin, pc_stacks_frame / pc_dict_stack / pc_stacks_sample, and
 * pc_stacks_profile_end; then pc_stacks_finish, or pc_stacks_abort on any failure. */
typedef struct pc_stacks_builder {
    const pc_format_opts *o;
    pc_batch *b;
    pc_dict_builder *db; /* intern stacks here (pc_dict_stack, leaf first) */
    int64_t period;      /* of the current profile: ns per count (cpu/wall with a sampleRate),
                            0 when values stay as counted; the caller scales by it */
    const struct pc_stacks_type *type;
    const char *app, *units;
    size_t app_len;
    struct pc_stacks_sample *samples;
    size_t n, cap;
} pc_stacks_builder;

/* What a batch of samples (with stack_frames location indices in all) and frames new frames
 * (frame_bytes name bytes in all) may take at most: the estimate to pass to pc_stacks_begin. */
size_t pc_stacks_estimate(size_t samples, size_t stack_frames, size_t frames, size_t frame_bytes);
/* Reserve estimate bytes from o->budget (what names the data in the refusal) and start a new
 * batch charged to it: 0, or the budget's refusal (PC_E2BIG over the limit, PC_EAGAIN no room
 * now). */
int pc_stacks_begin(pc_stacks_builder *ib, const pc_format_opts *o, size_t estimate,
                    const char *what, pc_error *e);
/* Start a profile for app ("name" or "name.type") at sample_rate Hz (0: none) with a units=
 * parameter (or NULL), by the rules of pc_folded_decode: 0, or PC_EINVAL "unknown profile
 * type: x". */
int pc_stacks_profile_begin(pc_stacks_builder *ib, const char *app, int64_t sample_rate,
                            const char *units, pc_error *e);
/* The location of a frame named name[0..len): one line, a function of that name. */
int32_t pc_stacks_frame(pc_stacks_builder *ib, const char *name, size_t len);
/* One sample of the current profile: a stack index and its value, already scaled. */
void pc_stacks_sample(pc_stacks_builder *ib, int32_t stack, int64_t value);
/* End the current profile; n extra resource attributes are added, each replacing an opts'
 * attribute of the same key (a NULL value only removes it). */
void pc_stacks_profile_end(pc_stacks_builder *ib, const char *const *keys, const char *const *vals,
                           size_t n);
/* The batch built (still charged to the budget until pc_batch_end_budget), or everything freed. */
pc_batch *pc_stacks_finish(pc_stacks_builder *ib);
void pc_stacks_abort(pc_stacks_builder *ib);

#endif
