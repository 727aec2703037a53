/* The process's hash key and the byte-string steps of the seeded hash (hash.h). */
#include "base/hash.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

uint64_t pc_hash_key[2];

/* Before main, so no table is ever built under another key. getrandom() blocks only until the
 * kernel's pool is first initialized (early boot); should it fail, the clock, pid and an address
 * still make the key differ between processes. */
__attribute__((constructor)) static void pc_hash_seed(void)
{
    uint64_t k[2] = {0, 0};
    if (getrandom(k, sizeof k, 0) != (ssize_t)sizeof k) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        k[0] ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ts.tv_sec;
        k[1] ^= (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&k;
    }
    pc_hash_key[0] = k[0];
    pc_hash_key[1] = k[1];
}

void pc_hash_bytes(pc_hash *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    pc_hash_word(h, (uint64_t)n);
    for (; n >= 8; n -= 8, b += 8) {
        uint64_t m;
        memcpy(&m, b, 8);
        pc_hash_word(h, m);
    }
    if (n) { /* the tail, zero-padded: the length above tells "a" from "a\0" */
        uint64_t m = 0;
        memcpy(&m, b, n);
        pc_hash_word(h, m);
    }
}

uint64_t pc_hash_mem(const void *p, size_t n)
{
    pc_hash h;
    pc_hash_begin(&h);
    pc_hash_bytes(&h, p, n);
    return pc_hash_end(&h);
}
