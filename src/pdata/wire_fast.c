/* The wire check's fast paths (wire_fast.h, profcol issue 27): the schema's common messages read
 * with their shapes inline, giving a message back to wire_check.c's generic walk on anything else.
 */
#include "pdata/wire_fast.h"

#include <limits.h>
#include <string.h>

#include "base/utf8.h"
/* A packed run of type t: -1 where the scan refuses it (a fixed-size run of the wrong length),
 * 1 where only protobuf-c does (a varint cut short or over 10 bytes), else 0; *n its elements as
 * the scan counts them (pc_proto_packed_count). One pass over the bytes: a varint ends at a byte
 * without the continuation bit, and pc_proto_read_varint refuses a tenth continuation byte. */
int pc_wf_packed_run(ProtobufCType t, const uint8_t *p, size_t l, size_t *n)
{
    switch (t) {
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT: *n = l / 4; return l % 4 ? -1 : 0;
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: *n = l / 8; return l % 8 ? -1 : 0;
    case PROTOBUF_C_TYPE_BOOL: *n = l; return 0;
    default: {
        size_t ends = 0;
        unsigned run = 0;
        bool bad = false;
        for (size_t i = 0; i < l; i++) {
            if (p[i] & 0x80) {
                bad = bad || ++run == 10;
            } else {
                ends++;
                run = 0;
            }
        }
        *n = ends;
        return bad || run ? 1 : 0;
    }
    }
}

/* A packed run of indices into table t, in one pass: packed_run's verdict (a varint cut short
 * or over 10 bytes is what pc_proto_read_varint refuses) and count, and each index noted. */
int pc_wf_index_run(w1 *c, unsigned t, const uint8_t *p, size_t l, size_t *n)
{
    size_t k = 0, i = 0;
    uint32_t top = c->top[t];
    while (i < l) {
        uint64_t w, v;
        /* eight bytes without a continuation bit: eight indices under 128, the largest the
         * largest byte */
        if (l - i >= 8 && (memcpy(&w, p + i, 8), !(w & 0x8080808080808080ull))) {
            uint32_t mx = 0;
            for (int b = 0; b < 8; b++)
                mx = p[i + b] > mx ? p[i + b] : mx;
            top = mx > top ? mx : top;
            i += 8;
            k += 8;
            continue;
        }
        if (pc_proto_read_varint(p, l, &i, &v)) return 1;
        top = (uint32_t)v > top ? (uint32_t)v : top;
        k++;
    }
    c->top[t] = top;
    *n = k;
    return 0;
}

/* ---- the leaf fast path (profcol issue 27, bench/README.md "### Pass-through") ----
 * Sample, Stack, Line and Function hold only varints and packed runs, Location those and Lines;
 * they are most of a small request's fields. Mapping holds varints and a run too, and an
 * attribute table entry (KeyValueAndUnit) two indices and an AnyValue, which is most often a
 * scalar: a string (UTF-8 checked, costed as value1 does), a varint or a double (branch
 * ckfast2). fast1 walks one of them with the shapes the schema
 * gives each field number inline and reaches walk1's bookkeeping for it (cost, notes, the Sample
 * rule); on anything else (a tag over one byte, an unknown field, another wire type, a one-element
 * repeated encoding, a second AnyValue (merged), a bad varint, run or string, a length prefix
 * protobuf-c refuses) it answers false and
 * walk1 walks the message from its start. Its notes before a bail-out are ones walk1 makes again (a
 * maximum). */
enum { F_NO, F_VAR, F_PVAR, F_PFIX64, F_MSG, F_SMSG, F_STR, F_F64 };
typedef struct fshape {
    uint8_t shape, table; /* table: the one an index field notes into (IDX), else 0; F_MSG, F_SMSG
                           * (a singular one): the kind of its message */
    uint8_t elt;          /* repeated fields: pc_proto_elt_size of the field's type, so the cost
                           * model needs no descriptor lookups (test_fast_costs holds it) */
} fshape;
/* field numbers below FAST_FIELDS; the repeated shapes (F_PVAR, F_PFIX64, F_MSG) below FAST_REP */
#define FAST_FIELDS 9
#define FAST_REP    6
#define P_          sizeof(void *)
static const fshape FAST[K_N][FAST_FIELDS] = {
    [K_SAMPLE] = {[1] = {F_VAR, T_STACK, 0},
                  [2] = {F_PVAR, T_ATTR, 4},
                  [3] = {F_VAR, T_LINK, 0},
                  [4] = {F_PVAR, 0, 8},
                  [5] = {F_PFIX64, 0, 8}},
    [K_STACK] = {[1] = {F_PVAR, T_LOCATION, 4}},
    [K_LOCATION] = {[1] = {F_VAR, T_MAPPING, 0},
                    [2] = {F_VAR, 0, 0},
                    [3] = {F_MSG, K_LINE, P_},
                    [4] = {F_PVAR, T_ATTR, 4}},
    [K_LINE] = {[1] = {F_VAR, T_FUNCTION, 0}, [2] = {F_VAR, 0, 0}, [3] = {F_VAR, 0, 0}},
    [K_FUNCTION] = {[1] = {F_VAR, T_STRING, 0},
                    [2] = {F_VAR, T_STRING, 0},
                    [3] = {F_VAR, T_STRING, 0},
                    [4] = {F_VAR, 0, 0}},
    /* the dictionary's mappings and attributes, with a scalar AnyValue (otlp_common.proto) */
    [K_MAPPING] = {[1] = {F_VAR, 0, 0},
                   [2] = {F_VAR, 0, 0},
                   [3] = {F_VAR, 0, 0},
                   [4] = {F_VAR, T_STRING, 0},
                   [5] = {F_PVAR, T_ATTR, 4}},
    [K_KVU] = {[1] = {F_VAR, T_STRING, 0}, [2] = {F_SMSG, K_ANY, 0}, [3] = {F_VAR, T_STRING, 0}},
    [K_ANY] = {[1] = {F_STR, 0, 0},
               [2] = {F_VAR, 0, 0},
               [3] = {F_VAR, 0, 0},
               [4] = {F_F64, 0, 0},
               [8] = {F_VAR, T_STRING, 0}},
};
#undef P_
/* PC_PROTO_R16(desc->sizeof_message) of each kind fast1 takes */
#define PS_(m) PC_PROTO_R16(sizeof(Opentelemetry__Proto__Profiles__V1development__##m))
static const size_t FAST_SIZE[K_N] = {
    [K_SAMPLE] = PS_(Sample),
    [K_STACK] = PS_(Stack),
    [K_LOCATION] = PS_(Location),
    [K_LINE] = PS_(Line),
    [K_FUNCTION] = PS_(Function),
    [K_MAPPING] = PS_(Mapping),
    [K_KVU] = PS_(KeyValueAndUnit),
    [K_ANY] = PC_PROTO_R16(sizeof(Opentelemetry__Proto__Common__V1__AnyValue)),
};
#undef PS_

/* A packed run (l bytes at p) of shape s: its elements, or -1 to bail out (F_PVAR fields are all
 * varint types: packed_run's varint rule). */
static long long fast_run(w1 *c, fshape s, const uint8_t *p, size_t l)
{
    size_t n = 0;
    if (s.shape == F_PFIX64) return l % 8 ? -1 : (long long)(l / 8);
    int r = s.table ? pc_wf_index_run(c, s.table, p, l, &n)
                    : pc_wf_packed_run(PROTOBUF_C_TYPE_INT64, p, l, &n);
    return r ? -1 : (long long)n;
}

/* A length-delimited field of shape s (l bytes at p, in a message at depth): *k its elements (a
 * repeated shape), *subs grows by what it costs outside the message's arrays (a string: value1's
 * cost; a message: its own); false to bail out. */
static bool fast_len(w1 *c, fshape s, const uint8_t *p, size_t l, int depth, long long *k,
                     size_t *subs)
{
    size_t sub;
    switch (s.shape) {
    case F_STR: /* value1's string: the generic walk refuses it when not UTF-8 */
        if (!pc_utf8_valid(p, l)) return false;
        *subs += PC_PROTO_R16(l + 1);
        return true;
    case F_MSG:
    case F_SMSG:
        if (depth < 1 || !pc_wf_fast1(c, s.table, p, l, depth - 1, &sub)) return false;
        *subs += sub;
        *k = 1;
        return true;
    default: *k = fast_run(c, s, p, l); return *k >= 0;
    }
}

/* The message's own size, its arrays (pc_proto_array_cost, element sizes from FAST) and slab. */
static size_t fast_cost(int kind, const size_t *n, unsigned rep, size_t occ)
{
    size_t m = FAST_SIZE[kind];
    for (; rep; rep &= rep - 1) {
        size_t fi = (size_t)__builtin_ctz(rep);
        m += n[fi] ? PC_PROTO_R16(n[fi] * FAST[kind][fi + 1].elt) : 0;
    }
    return m + pc_proto_slab_cost(0, occ);
}

/* A message of kind (not K_NONE) at depth (walk1's): true with *cost set, as walk1 would. */
bool pc_wf_fast1(w1 *c, int kind, const uint8_t *p, size_t len, int depth, size_t *cost)
{
    size_t subs = 0; /* submessages and strings */
    const fshape *sh = FAST[kind];
    size_t n[FAST_REP] = {0}, occ = 0, i = 0;
    unsigned rep = 0, once = 0; /* once: the singular messages seen */
    while (i < len) {
        unsigned key = p[i++];
        unsigned num = key >> 3, wt = key & 7;
        if (key & 0x80 || num >= FAST_FIELDS || sh[num].shape == F_NO) return false;
        fshape s = sh[num];
        uint64_t v;
        occ++;
        if (s.shape == F_VAR && wt == 0 && i < len && p[i] < 0x80) { /* the usual index */
            if (s.table) note(c, s.table, p[i]);
            i++;
            continue;
        }
        if (s.shape == F_VAR) {
            if (wt != 0 || pc_proto_read_varint(p, len, &i, &v)) return false;
            if (s.table) note(c, s.table, v);
            continue;
        }
        if (s.shape == F_F64) { /* a double */
            if (wt != 1 || len - i < 8) return false;
            i += 8;
            continue;
        }
        size_t v0 = i;
        if (wt != 2 || pc_proto_read_varint(p, len, &i, &v) || v > len - i || i - v0 > 5 ||
            v > INT_MAX)
            return false;
        /* a singular message's second occurrence is merged: the generic walk's */
        if (s.shape == F_SMSG && (once & 1u << num)) return false;
        long long k = 0;
        if (!fast_len(c, s, p + i, (size_t)v, depth, &k, &subs)) return false;
        if (s.shape == F_SMSG) {
            once |= 1u << num;
        } else if (s.shape != F_STR) {
            n[num - 1] += (size_t)k;
            rep |= 1u << (num - 1);
        }
        i += (size_t)v;
    }
    /* note_end's Sample rule: values (field 4) and timestamps (5) of different lengths */
    if (kind == K_SAMPLE && n[3] && n[4] && n[3] != n[4]) c->slow = true;
    *cost = fast_cost(kind, n, rep, occ) + subs;
    return true;
}

/* ---- the parents' fast path: Profile's samples and the dictionary's locations, functions,
 * stacks, strings, mappings and attributes, the repeated fields most of a request's messages are
 * in. walk1 hands such a child straight to fast1 and does here what value1 and note_value do for a
 * repeated message field; when fast1 bails out, walk1 takes the field its generic way. Field number
 * -> child kind: */
#define C_STRING K_N /* the dictionary's strings: not a message */
const uint8_t PC_WF_CHILD[K_N][T_N] = {
    [K_PROFILE] = {[2] = K_SAMPLE},
    [K_DICT] = {[T_LOCATION] = K_LOCATION,
                [T_FUNCTION] = K_FUNCTION,
                [T_STRING] = C_STRING,
                [T_STACK] = K_STACK,
                [T_MAPPING] = K_MAPPING,
                [T_ATTR] = K_KVU},
};

/* Field num of desc (a message of walk1's at depth), l bytes at v, a child of kind k. */
bool pc_wf_child1(w1 *c, const ProtobufCMessageDescriptor *desc, mcost *m, unsigned num, int k,
                  const uint8_t *v, size_t l, int depth)
{
    size_t sub;
    if (k == C_STRING) { /* value1's string: refused by the generic path when not UTF-8 */
        if (!pc_utf8_valid(v, l)) return false;
        sub = PC_PROTO_R16(l + 1);
    } else if (!pc_wf_fast1(c, k, v, l, depth - 1, &sub)) {
        return false;
    }
    size_t fi = (size_t)(field_of(desc, num) - desc->fields); /* a repeated message field */
    m->cost += sub;
    m->rep |= (uint64_t)1 << fi;
    m->n_elems[fi]++;
    if (k == K_SAMPLE)
        c->samples++;
    else if (c->tables[num]++ == 0)
        c->first[num] = (span){v, l};
    return true;
}
