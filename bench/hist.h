/* An HDR-style latency histogram: exact below 128 us, then 64 linear sub-buckets per power of two
 * (relative error under 1.6 %), microseconds up to about 2^40 us. Header-only, no allocation. */
#ifndef BENCH_HIST_H
#define BENCH_HIST_H

#include <stdint.h>
#include <string.h>

enum { HIST_EXACT = 128, HIST_SUB = 64, HIST_MAX_EXP = 40 };
#define HIST_BUCKETS (HIST_EXACT + (HIST_MAX_EXP - 6) * HIST_SUB)

typedef struct hist {
    uint64_t count, max, sum;
    uint64_t b[HIST_BUCKETS];
} hist;

static inline int hist_index(uint64_t v)
{
    if (v < HIST_EXACT) return (int)v;
    int e = 63 - __builtin_clzll(v); /* >= 7 */
    if (e > HIST_MAX_EXP) return HIST_BUCKETS - 1;
    int sub = (int)((v >> (e - 6)) & (HIST_SUB - 1));
    return HIST_EXACT + (e - 7) * HIST_SUB + sub;
}

/* Highest value that lands in bucket i. */
static inline uint64_t hist_upper(int i)
{
    if (i < HIST_EXACT) return (uint64_t)i;
    int e = 7 + (i - HIST_EXACT) / HIST_SUB;
    uint64_t sub = (uint64_t)((i - HIST_EXACT) % HIST_SUB);
    return ((HIST_SUB + sub + 1) << (e - 6)) - 1;
}

static inline void hist_record(hist *h, uint64_t v)
{
    h->b[hist_index(v)]++;
    h->count++;
    h->sum += v;
    if (v > h->max) h->max = v;
}

/* Value at quantile q (0..1): the upper edge of the bucket holding it, never above max. */
static inline uint64_t hist_quantile(const hist *h, double q)
{
    if (!h->count) return 0;
    uint64_t want = (uint64_t)(q * (double)h->count + 0.999999);
    if (want < 1) want = 1;
    uint64_t acc = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        acc += h->b[i];
        if (acc >= want) {
            uint64_t u = hist_upper(i);
            return u < h->max ? u : h->max;
        }
    }
    return h->max;
}

#endif
