/* The wire check's fast paths (wire_fast.c) and what they share with wire_check.c: private to
 * src/pdata. */
#ifndef PC_WIRE_FAST_H
#define PC_WIRE_FAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pdata/pdata.h"
#include "pdata/proto_scan.h"

/* ProfilesDictionary's tables by field number (proto/otlp_profiles.proto) */
enum { T_MAPPING = 1, T_LOCATION, T_FUNCTION, T_LINK, T_STRING, T_ATTR, T_STACK, T_N };

typedef struct span {
    const uint8_t *d;
    size_t n;
} span;

typedef struct w1 {
    const char *what; /* the scan's refusal */
    int code;
    bool unpack_fails; /* protobuf-c would refuse (after a clean scan) */
    const ProtobufCMessageDescriptor *dict;
    size_t tables[T_N]; /* elements of each dictionary table, over every occurrence */
    /* the one-pass verdict (see "one pass" below): */
    bool slow;         /* a rule may fail: pass 2 decides */
    uint32_t top[T_N]; /* the largest index into each table any index field holds */
    span first[T_N];   /* element 0 of each table */
    size_t profiles, samples;
} w1;

/* protobuf-c's lookup, without its call for the usual case: fields numbered 1, 2, 3... (the
 * descriptor keeps them sorted by number) */
static inline const ProtobufCFieldDescriptor *field_of(const ProtobufCMessageDescriptor *d,
                                                       unsigned num)
{
    if (num - 1 < d->n_fields && d->fields[num - 1].id == num) return &d->fields[num - 1];
    return protobuf_c_message_descriptor_get_field(d, num);
}

/* What unpack will allocate for one message occurrence, as pdata/proto_scan.c counts it (the
 * decode budget's estimate, docs/limits.md): the scan's model over the same walk. */
typedef struct mcost {
    size_t cost, nf, unknown, occurrences;
    uint64_t rep; /* bit fi: field fi is repeated and counted in n_elems (the tail's arrays) */
    size_t n_elems[PC_PROTO_TRACKED]; /* repeated: elements; singular message: occurrences */
    size_t merged[PC_PROTO_TRACKED];  /* singular message: cost of the occurrences so far */
} mcost;

/* ---- one pass (bench/README.md "### Pass-through") ----
 * Pass 1 also notes what validate.c's rules read: per dictionary table, the largest index any
 * index field of the schema holds (in every occurrence: a superset of the last occurrences and
 * merged oneof members validate.c checks), and the rules a message breaks alone (negative index,
 * values and timestamps of different lengths, profile_id or link ids of the wrong length). When
 * none is broken, every index is below its table's final size and each table's element 0 is the
 * zero value, validate.c finds nothing and pass 2 is skipped; otherwise pass 2 decides (and
 * finds which profiles fail). Message kinds by descriptor: */
enum {
    K_NONE,
    K_SAMPLE,
    K_LINE,
    K_LOCATION,
    K_STACK,
    K_FUNCTION,
    K_KV,
    K_ANY,
    K_KVU,
    K_MAPPING,
    K_VT,
    K_PROFILE,
    K_SCOPE,
    K_LINK,
    K_DICT,
    K_N
};

/* An index v (int32 on the wire) into table t. Read as uint32, a negative one is 2^31 or more:
 * one_pass_ok finds it in top[t] at the end. */
static inline void note(w1 *c, unsigned t, uint64_t v)
{
    uint32_t x = (uint32_t)v;
    if (x > c->top[t]) c->top[t] = x;
}

int pc_wf_packed_run(ProtobufCType t, const uint8_t *p, size_t l, size_t *n);
int pc_wf_index_run(w1 *c, unsigned t, const uint8_t *p, size_t l, size_t *n);
/* The leaf fast path: a message of kind at depth (walk1's); true with *cost set, as walk1
 * would, false to have walk1 walk it. */
bool pc_wf_fast1(w1 *c, int kind, const uint8_t *p, size_t len, int depth, size_t *cost);
/* The parents' fast path: field num (l bytes at v) of desc, a child of kind k (PC_WF_CHILD). */
bool pc_wf_child1(w1 *c, const ProtobufCMessageDescriptor *desc, mcost *m, unsigned num, int k,
                  const uint8_t *v, size_t l, int depth);
extern const uint8_t PC_WF_CHILD[K_N][T_N];

#endif
