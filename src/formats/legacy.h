/* Pyroscope's legacy /ingest formats (docs/formats.md): the transport trie (format=trie), the
 * serialized tree (format=tree) and speedscope JSON (format=speedscope). Each is decoded into a
 * batch through the stacks builder (folded.h), so it gets exactly the service name,
 * sample type, units and sampleRate scaling of pc_folded_decode (spec/pyroscope.md §1.6).
 * Hostile input: every length, count and index is checked before use, trees are walked with an
 * explicit stack, and what the batch will take is counted and reserved from the request's budget
 * before it is built (docs/limits.md). Pure functions, fuzzed (fuzz_legacy). */
#ifndef PC_FORMATS_LEGACY_H
#define PC_FORMATS_LEGACY_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "pdata/pdata.h"
#include "formats/format.h"

/* Each into a new batch *out (format.h), with the options of collapsed stacks (o->app with its
 * type suffix, o->sample_rate, o->units, times, attributes, scope, o->service, o->budget). 0, or:
 *   PC_EBADMSG  malformed input, or a value that does not fit 64 bits once scaled; for
 *               speedscope every failure but the budget's, an unknown profile type too;
 *   PC_EINVAL   trie, tree: an unknown profile type in o->app ("unknown profile type: x");
 *   PC_E2BIG    over the decode budget's limit, PC_EAGAIN when the decodes in flight leave no
 *               room now (the budget's refusal, o->budget->state).
 * The message in e names the format, and the offset or JSON path of what was wrong. The batch
 * stays charged to the budget until pc_batch_end_budget(). */
PC_FORMAT_DECODER(pc_trie_decode);
PC_FORMAT_DECODER(pc_tree_decode);
PC_FORMAT_DECODER(pc_speedscope_decode);

#endif
