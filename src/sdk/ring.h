/* A consistent-hash ring of backend names, for the loadbalancing exporter (ARCHITECTURE.md §5).
 *
 * Every member (a backend's "host:port" string as configured or resolved) owns PC_RING_VNODES
 * points on a 64-bit ring; a key belongs to the member owning the first point at or after the
 * key's hash (wrapping around). Adding or removing one of N members moves only the keys of the
 * points it gains or loses: about 1/N of them, and no key moves between two members that stay.
 *
 * The hash is fixed and documented so that any two processes (two sidecars, or another
 * implementation) with the same membership route every key alike, whatever the order in which
 * the members were listed:
 *
 *   pc_ring_hash(bytes) = fmix64(FNV-1a-64(bytes))
 *     FNV-1a-64: h = 0xcbf29ce484222325; for each byte: h ^= byte, h *= 0x100000001b3
 *     fmix64 (splitmix64's finalizer): h ^= h >> 30; h *= 0xbf58476d1ce4e5b9; h ^= h >> 27;
 *                                      h *= 0x94d049bb133111eb; h ^= h >> 31
 *   point v of member m (v = 0 .. PC_RING_VNODES-1) = pc_ring_hash("<m>#<v>"), v in decimal,
 *     e.g. "10.0.0.7:4317#0"
 *   owner of key hash k = the member of the smallest point >= k, else of the smallest point;
 *     equal points are ordered by member name (byte order)
 *
 * A ring is immutable once made; a changed membership makes a new ring. Rings are shared by
 * reference count on the loop thread, and may be read from the thread pool by a job that holds
 * a reference. */
#ifndef PC_RING_H
#define PC_RING_H

#include <stddef.h>
#include <stdint.h>

#define PC_RING_VNODES 512

typedef struct pc_ring pc_ring;

/* The ring of n members (copied; duplicates count once). NULL-free even for n == 0 (a lookup on
 * an empty ring returns PC_RING_NONE). One reference. */
pc_ring *pc_ring_new(const char *const *members, size_t n);
pc_ring *pc_ring_ref(pc_ring *r);
void pc_ring_unref(pc_ring *r);

/* Members, in byte order of their names. */
size_t pc_ring_size(const pc_ring *r);
const char *pc_ring_member(const pc_ring *r, size_t i);
/* The index of name among the members, or PC_RING_NONE. */
size_t pc_ring_find(const pc_ring *r, const char *name);

#define PC_RING_NONE ((size_t)-1)
/* The member owning key hash k (an index for pc_ring_member), PC_RING_NONE on an empty ring. */
size_t pc_ring_owner(const pc_ring *r, uint64_t k);

/* The key hash (above) of n bytes. */
uint64_t pc_ring_hash(const void *data, size_t n);
/* Incremental form: start with PC_RING_HASH_INIT, feed bytes, finish. */
#define PC_RING_HASH_INIT 0xcbf29ce484222325ULL
uint64_t pc_ring_hash_add(uint64_t h, const void *data, size_t n);
uint64_t pc_ring_hash_finish(uint64_t h);

#endif
