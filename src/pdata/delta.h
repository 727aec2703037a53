/* Deltas of cumulative profiles (spec/scrape.md §2.6): what a pull receiver sends for a Go
 * endpoint whose values only grow (allocations, mutex, block) is each scrape minus the previous
 * one of the same series, per stack.
 *
 * A sample's key is its content, not dictionary indices (every scrape is decoded into a new
 * dictionary): the sample type and unit, per location its address and its lines (function name,
 * file, line), the attributes (key, value, unit) and the link; two 64-bit hashes of it. Samples
 * with the same key in one scrape are summed. Keys never expire, as Alloy's.
 *
 * Where profcol differs from Alloy: a value that went down (the process restarted, or a stack
 * vanished) makes the scrape a new series' first instead of forwarding negative values. */
#ifndef PC_DELTA_H
#define PC_DELTA_H

#include <stdint.h>

#include "pdata/pdata.h"

typedef struct pc_delta pc_delta;

typedef enum {
    PC_DELTA_OK,    /* the batch now holds the deltas */
    PC_DELTA_FIRST, /* the series' first scrape: state seeded, nothing to send */
    PC_DELTA_RESET, /* a value went down: a new series, state seeded, nothing to send */
} pc_delta_result;

pc_delta *pc_delta_new(void);
void pc_delta_free(pc_delta *d); /* NULL is fine */
/* Keys held (one per sample type, stack, attributes and value index seen). */
size_t pc_delta_size(const pc_delta *d);

/* Subtract the previous scrape from every profile of b (writable, freshly decoded) whose sample
 * type is one of types (NULL-terminated names: "alloc_space", "contentions", ...; NULL: every
 * type): each sample's values become current minus previous, duplicates are merged into the first,
 * samples left all zero are removed, and duration_nano becomes the time since the previous scrape.
 * Profiles of other types are left as they are. On PC_DELTA_FIRST and PC_DELTA_RESET b is left
 * unchanged. */
pc_delta_result pc_delta_apply(pc_delta *d, pc_batch *b, const char *const *types);

#endif
