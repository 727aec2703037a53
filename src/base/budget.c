/* Per-request decode budgets and the process-wide total of their reservations (budget.h). */
#include "base/budget.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Charges past the estimate grow the reservation by at least this much, so the shared counter is
 * touched once per chunk, not once per allocation. */
#define GROW_CHUNK ((size_t)1 << 20)

static atomic_size_t g_in_flight;

void pc_budget_init(pc_budget *b, size_t limit)
{
    memset(b, 0, sizeof *b);
    b->limit = limit;
    b->room = SIZE_MAX;
}

static int refuse(pc_budget *b, int code, size_t need, const char *what)
{
    if (b->state != PC_OK) return b->state;
    b->state = code;
    snprintf(b->what, sizeof b->what, "%s (%zu bytes)", what ? what : "decoded request", need);
    return code;
}

/* Move the reservation up to want bytes, while the process-wide total stays within the room. */
static bool reserve_to(pc_budget *b, size_t want)
{
    if (want <= b->reserved) return true;
    size_t delta = want - b->reserved;
    size_t cur = atomic_load_explicit(&g_in_flight, memory_order_relaxed);
    size_t cap = b->room;
    do {
        if (cur > cap || delta > cap - cur) return false;
    } while (!atomic_compare_exchange_weak_explicit(&g_in_flight, &cur, cur + delta,
                                                    memory_order_relaxed, memory_order_relaxed));
    b->reserved = want;
    return true;
}

int pc_budget_reserve(pc_budget *b, size_t est, const char *what)
{
    if (b->state != PC_OK) return b->state;
    if (b->limit && (est > b->limit || b->used > b->limit - est))
        return refuse(b, PC_E2BIG, b->used + est, what);
    if (!reserve_to(b, b->used + est)) return refuse(b, PC_EAGAIN, est, what);
    return PC_OK;
}

int pc_budget_charge_slow(pc_budget *b, size_t n)
{
    if (!b) return PC_OK;
    b->used += n;
    if (b->used > b->peak) b->peak = b->used;
    if (b->state != PC_OK) return b->state;
    if (b->limit && b->used > b->limit) return refuse(b, PC_E2BIG, b->used, "decoded request");
    if (b->used > b->reserved) {
        b->misses++;
        size_t want = b->used + GROW_CHUNK;
        if (b->limit && want > b->limit) want = b->limit;
        if (!reserve_to(b, want)) return refuse(b, PC_EAGAIN, b->used, "decoded request");
    }
    return PC_OK;
}

void pc_budget_uncharge(pc_budget *b, size_t n)
{
    if (b) b->used = n < b->used ? b->used - n : 0;
}

void pc_budget_release(pc_budget *b)
{
    if (b->reserved) atomic_fetch_sub_explicit(&g_in_flight, b->reserved, memory_order_relaxed);
    b->reserved = 0;
}

void pc_budget_message(const pc_budget *b, const char *key, char *out, size_t outlen)
{
    if (b->state == PC_EAGAIN)
        snprintf(out, outlen,
                 "%s: the decodes in flight hold all the memory the memory limiter allows now; "
                 "retry later",
                 b->what);
    else
        snprintf(out, outlen, "%s needs more memory than %s (%zu bytes) allows", b->what,
                 key ? key : "the decode budget", b->limit);
}

size_t pc_budget_in_flight(void)
{
    return atomic_load_explicit(&g_in_flight, memory_order_relaxed);
}
