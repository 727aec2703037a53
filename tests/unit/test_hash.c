/* The seeded hash (src/base/hash.h): keyed per process, length-prefixed byte runs, and ids that
 * all fell in one slot of the old fixed hashes (pprof's murmur3 finalizer, JFR's multiplicative
 * hash: issue 28) spread over the table like any others. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/hash.h"
#include "check.h"

/* c^-1 mod 2^64 (c odd), by Newton's iteration. */
static uint64_t inv64(uint64_t c)
{
    uint64_t x = c;
    for (int i = 0; i < 6; i++)
        x *= 2 - c * x;
    return x;
}

/* x with the old pprof idhash (murmur3 fmix64) of x == y. */
static uint64_t unfmix64(uint64_t y)
{
    y ^= y >> 33;
    y *= inv64(0xc4ceb9fe1a85ec53ULL);
    y ^= y >> 33;
    y *= inv64(0xff51afd7ed558ccdULL);
    return y ^ (y >> 33);
}

/* k with the old JFR umap_hash of k == y. */
static uint64_t un_umap(uint64_t y)
{
    uint64_t x = y ^ (y >> 29) ^ (y >> 58);
    return x * inv64(0x9E3779B97F4A7C15ULL);
}

static void test_keyed(void)
{
    CHECK(pc_hash_key[0] || pc_hash_key[1]); /* drawn before main */
    CHECK(pc_hash_mem("profcol", 7) == pc_hash_mem("profcol", 7));
    CHECK(pc_hash_u64(42) == pc_hash_u64(42));
    uint64_t a = pc_hash_mem("profcol", 7), b = pc_hash_u64(42);
    uint64_t saved[2] = {pc_hash_key[0], pc_hash_key[1]};
    pc_hash_key[0] ^= 1;
    CHECK(pc_hash_mem("profcol", 7) != a);
    CHECK(pc_hash_u64(42) != b);
    pc_hash_key[0] = saved[0];
    pc_hash_key[1] = saved[1];
    CHECK(pc_hash_mem("profcol", 7) == a);
}

static void test_lengths(void)
{
    CHECK(pc_hash_mem("a", 1) != pc_hash_mem("a\0", 2));
    CHECK(pc_hash_mem("", 0) != pc_hash_mem("\0", 1));
    CHECK(pc_hash_mem("12345678", 8) != pc_hash_mem("123456789", 9));
    /* "ab" then "c" is not "a" then "bc": each run carries its length */
    pc_hash h1, h2;
    pc_hash_begin(&h1);
    pc_hash_bytes(&h1, "ab", 2);
    pc_hash_bytes(&h1, "c", 1);
    pc_hash_begin(&h2);
    pc_hash_bytes(&h2, "a", 1);
    pc_hash_bytes(&h2, "bc", 2);
    CHECK(pc_hash_end(&h1) != pc_hash_end(&h2));
}

/* The most of n keys (from key(i << 32), i = 1..n) in one of 2^bits buckets. */
static unsigned max_load(uint64_t (*key)(uint64_t), unsigned n, unsigned bits)
{
    static unsigned load[1u << 16];
    unsigned most = 0;
    memset(load, 0, sizeof load);
    for (uint64_t i = 1; i <= n; i++) {
        unsigned b = (unsigned)(pc_hash_u64(key(i << 32)) & ((1u << bits) - 1));
        if (++load[b] > most) most = load[b];
    }
    return most;
}

static void test_old_collisions_spread(void)
{
    /* the inversions are right: the old hashes put every one of these in slot 0 */
    for (uint64_t i = 1; i < 100; i++) {
        uint64_t x = unfmix64(i << 32);
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ULL;
        x ^= x >> 33;
        CHECK_EQ_INT(x & 0xffffffffu, 0);
        uint64_t k = un_umap(i << 32) * 0x9E3779B97F4A7C15ULL;
        CHECK_EQ_INT((k ^ (k >> 29)) & 0xffffffffu, 0);
    }
    /* 8192 keys in 16384 buckets: about 0.5 a bucket, a handful at most */
    unsigned a = max_load(unfmix64, 8192, 14), b = max_load(un_umap, 8192, 14);
    fprintf(stderr, "  most keys in one bucket: pprof ids %u, JFR keys %u (of 8192)\n", a, b);
    CHECK(a < 16);
    CHECK(b < 16);
}

/* pc_hash_slot_u64: flame-graph keys (parent << 32 | name) that a slot from the low bits would
 * put in one slot (only parent changes, names all 7), and keys that differ in the high bits
 * only, spread over 2^14 slots like random ones; and the multiplier depends on the key. */
static void test_slot_u64(void)
{
    static unsigned load[1u << 14];
    unsigned most = 0;
    for (uint64_t i = 1; i <= 8192; i++) {
        size_t s = pc_hash_slot_u64(i << 32 | 7, 14);
        CHECK(s < (1u << 14));
        if (++load[s] > most) most = load[s];
    }
    memset(load, 0, sizeof load);
    for (uint64_t i = 1; i <= 8192; i++) {
        size_t s = pc_hash_slot_u64(i << 50, 14);
        if (++load[s] > most) most = load[s];
    }
    fprintf(stderr, "  multiply-shift: most keys in one slot %u (of 8192 in 16384)\n", most);
    CHECK(most < 16);
    uint64_t k0 = pc_hash_key[0];
    size_t a = pc_hash_slot_u64(12345, 20);
    pc_hash_key[0] ^= 0x5555555555555554ULL; /* another odd multiplier */
    size_t b = pc_hash_slot_u64(12345, 20);
    pc_hash_key[0] = k0;
    CHECK(a != b);
}

int main(void)
{
    RUN(test_keyed);
    RUN(test_lengths);
    RUN(test_old_collisions_spread);
    RUN(test_slot_u64);
    return check_report();
}
