/* What one request may cost in decoded memory, and what every decode in flight costs together.
 *
 * A decoder works out what a request will take before it allocates (pdata/proto_scan.h counts
 * every repeated element of a protobuf message; the JSON, pprof and collapsed-stack decoders
 * count theirs), reserves that estimate, and refuses the request when the estimate is over the
 * request's limit (an HTTP 413 naming the limit) or when the process-wide total of reservations
 * in flight cannot take it (a retryable 503). While it works, every byte it allocates for the
 * request (arena blocks, parser trees, hash tables) is charged, so a wrong estimate is still
 * stopped at the limit. The memory limiter adds the reservations to its RSS reading and sets the
 * process-wide cap from its soft limit. A budget belongs to one request on one thread at a time. */
#ifndef PC_BASE_BUDGET_H
#define PC_BASE_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

typedef struct pc_budget {
    size_t limit;    /* the most the request may hold decoded at once; 0: no limit */
    size_t used;     /* bytes charged and not yet released */
    size_t peak;     /* the most used at any time */
    size_t reserved; /* held in the process-wide total (>= used while decoding) */
    /* the most the decodes in flight may hold in all while this one reserves (SIZE_MAX: no cap;
     * a receiver sets what the memory limiters of its pipelines leave, pc_consumer_admit) */
    size_t room;
    unsigned misses; /* times the charges passed the estimates (a decoder's count was low) */
    /* PC_OK; PC_E2BIG once the request needed more than its limit (refuse it: 413); PC_EAGAIN
     * once the decodes in flight held what memory may be used now (retry: 503) */
    int state;
    char what[160]; /* the first refusal, for the message: "decoded OTLP request: 1.2 GB" */
} pc_budget;

void pc_budget_init(pc_budget *b, size_t limit);
/* Before the work: reserve an estimate of what the decode will hold. PC_OK, or the refusal
 * (state set): PC_E2BIG when est is over the limit, PC_EAGAIN over the room; what
 * names the data ("pprof", "OTLP request"). */
int pc_budget_reserve(pc_budget *b, size_t est, const char *what);
/* Charge n bytes allocated for the request (also grows the reservation when the estimate was
 * low). PC_OK, or the refusal (state) once the budget is refused; the bytes are charged either
 * way. b may be NULL. */
int pc_budget_charge_slow(pc_budget *b, size_t n);
/* Inline because a decode charges every allocation (about a thousand per small OTLP request,
 * bench/README.md "Small requests (issue 27, third pass)"): within the reservation, a charge only
 * moves used and peak; everything else (limit, growing the reservation, refusals) is the slow
 * path's. */
static inline int pc_budget_charge(pc_budget *b, size_t n)
{
    if (!b) return PC_OK;
    size_t u = b->used + n;
    if (b->state == PC_OK && u >= n && u <= b->reserved && (!b->limit || u <= b->limit)) {
        b->used = u;
        if (u > b->peak) b->peak = u;
        return PC_OK;
    }
    return pc_budget_charge_slow(b, n);
}
/* n bytes charged earlier were freed. */
void pc_budget_uncharge(pc_budget *b, size_t n);
static inline bool pc_budget_ok(const pc_budget *b)
{
    return !b || b->state == PC_OK;
}
/* After the work: give the reservation back to the process-wide total. */
void pc_budget_release(pc_budget *b);
/* "decoded OTLP request needs more than max_request_decoded_size (41943040 bytes)" and the like;
 * key names the config key of the limit. */
void pc_budget_message(const pc_budget *b, const char *key, char *out, size_t outlen);

/* Process-wide: bytes reserved by decodes in flight (memory is the process's). */
size_t pc_budget_in_flight(void);

#endif
