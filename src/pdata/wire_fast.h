/* The wire check's first pass (wire_fast.c) and what it shares with wire_check.c's second: private
 * to src/pdata. */
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

/* The oneof of a message occurrence (AnyValue's is the schema's only one): the last member
 * seen, and whether merge_messages drops it when a later occurrence has none (it carries a
 * string over only when the field has no default, and protobuf-c gives proto3 strings "" as
 * theirs; bytes only when not empty). */
typedef struct oneof_st {
    uint32_t which;
    bool lost;
} oneof_st;

/* Pass 1 over a message of desc at depth (wire_check.c's file comment): 0 or the scan's refusal
 * (c->what); *sum its oneof, *cost what unpack allocates for it. */
int pc_wf_walk1(w1 *c, const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                int depth, oneof_st *sum, size_t *cost);

#endif
