/* The symbolizer's debuginfod side: debug files fetched by build id through elfutils'
 * libdebuginfod (docs/symbolization.md §4), on threads of its own so that a slow server never
 * holds the loop or more than the configured wait of a batch. One fetch per build id at a time,
 * at most max_concurrent at once, a time limit per request, servers tried in order with a circuit
 * breaker each, failures remembered for negative_ttl. */
#ifndef PC_SYMBOLIZER_FETCH_H
#define PC_SYMBOLIZER_FETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "resolver.h"
#include "sdk/cfgtable.h"
#include "sdk/telemetry.h"

typedef struct sym_fetch_cfg {
    pc_strlist urls;
    char *cache_dir;
    uint64_t timeout_ms, wait_ms, negative_ttl_ms, breaker_cooldown_ms, max_size;
    int64_t max_concurrent, breaker_failures;
    bool executables;
} sym_fetch_cfg;

extern const pc_cfg_key sym_fetch_keys[];

/* What the fetcher did, copied out for the self-metrics. */
typedef struct sym_fetch_stats {
    uint64_t fetches, found, not_found, too_large, errors, bytes, breaker_open;
    pc_histogram latency; /* seconds per request */
} sym_fetch_stats;

typedef struct sym_fetch sym_fetch;

/* *out: the fetcher, or NULL when no urls are configured; PC_ENOTSUP when libdebuginfod.so.1
 * cannot be loaded (base/dynlib.h). */
int sym_fetch_new(const sym_fetch_cfg *cfg, const char *id, sym_fetch **out, pc_error *e);
/* Stops the threads (a fetch in progress is aborted at its next progress call). */
void sym_fetch_free(sym_fetch *f);

/* The local path of the debug file for build id (lower-case hex), fetching it if needed and
 * waiting at most until deadline_ms (CLOCK_MONOTONIC); malloc'd, or NULL with *why
 * (SYM_FETCH_WAIT, SYM_FETCH_ERROR, SYM_NO_FILE for a 404 everywhere). With a path, *exe is the
 * executable's (malloc'd) or NULL. */
char *sym_fetch_get(sym_fetch *f, const char *build_id, uint64_t deadline_ms, char **exe,
                    sym_reason *why);

void sym_fetch_stats_get(sym_fetch *f, sym_fetch_stats *out);
/* ms on CLOCK_MONOTONIC */
uint64_t sym_now_ms(void);

#endif
