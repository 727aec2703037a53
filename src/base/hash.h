/* Seeded hashing for every hash table keyed by what a client sent (ids, strings, dictionary
 * entries): SipHash-1-3 under a key drawn from getrandom() once per process.
 *
 * A fixed hash lets a client pick keys that all land in one slot and turn each insert into a
 * scan of the table (quadratic decoding, issue 28). With a secret per-process key a client cannot
 * tell which keys collide. SipHash-1-3 (one round per 8 bytes, three to finish) is the keyed hash
 * Rust's HashMap and CPython's str hash use for the same reason.
 *
 * Not for values that must agree between processes or runs (the load-balancing ring, Kafka
 * partitions): those keep their fixed hashes. Streaming use: pc_hash_begin, then words and byte
 * runs (each run is length-prefixed, so two different field sequences are never the same word
 * stream), then pc_hash_end. */
#ifndef PC_BASE_HASH_H
#define PC_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct pc_hash {
    uint64_t v0, v1, v2, v3;
} pc_hash;

/* The process's key (hash.c draws it before main runs). */
extern uint64_t pc_hash_key[2];

#define PC_HASH_ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

static inline void pc_hash_round(pc_hash *h)
{
    h->v0 += h->v1;
    h->v1 = PC_HASH_ROTL(h->v1, 13);
    h->v1 ^= h->v0;
    h->v0 = PC_HASH_ROTL(h->v0, 32);
    h->v2 += h->v3;
    h->v3 = PC_HASH_ROTL(h->v3, 16);
    h->v3 ^= h->v2;
    h->v0 += h->v3;
    h->v3 = PC_HASH_ROTL(h->v3, 21);
    h->v3 ^= h->v0;
    h->v2 += h->v1;
    h->v1 = PC_HASH_ROTL(h->v1, 17);
    h->v1 ^= h->v2;
    h->v2 = PC_HASH_ROTL(h->v2, 32);
}

static inline void pc_hash_begin(pc_hash *h)
{
    h->v0 = pc_hash_key[0] ^ 0x736f6d6570736575ULL;
    h->v1 = pc_hash_key[1] ^ 0x646f72616e646f6dULL;
    h->v2 = pc_hash_key[0] ^ 0x6c7967656e657261ULL;
    h->v3 = pc_hash_key[1] ^ 0x7465646279746573ULL;
}

static inline void pc_hash_word(pc_hash *h, uint64_t m)
{
    h->v3 ^= m;
    pc_hash_round(h);
    h->v0 ^= m;
}

/* n bytes at p, after their length. */
void pc_hash_bytes(pc_hash *h, const void *p, size_t n);

static inline uint64_t pc_hash_end(pc_hash *h)
{
    h->v2 ^= 0xff;
    pc_hash_round(h);
    pc_hash_round(h);
    pc_hash_round(h);
    return h->v0 ^ h->v1 ^ h->v2 ^ h->v3;
}

/* One 64-bit id. */
static inline uint64_t pc_hash_u64(uint64_t x)
{
    pc_hash h;
    pc_hash_begin(&h);
    pc_hash_word(&h, x);
    return pc_hash_end(&h);
}

/* A byte string. */
uint64_t pc_hash_mem(const void *p, size_t n);

/* A slot among 2^bits (1 <= bits <= 63) for one 64-bit key, by multiply-shift: the top bits of x
 * times an odd multiplier drawn from the process's key. For a multiplier the client does not know,
 * two different keys share a slot with probability at most 2 / 2^bits (Dietzfelbinger, Hagerup,
 * Katajainen, Penttonen 1997, "A reliable randomized algorithm for the closest-pair problem"), as
 * a random hash would; one multiplication where SipHash takes four rounds, for hot tables keyed by
 * ids the process gave out (profilez's flame-graph tree). */
static inline size_t pc_hash_slot_u64(uint64_t x, unsigned bits)
{
    return (size_t)((x * (pc_hash_key[0] | 1)) >> (64 - bits));
}

#endif
