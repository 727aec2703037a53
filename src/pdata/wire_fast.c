/* The wire check's fast paths (wire_fast.h, profcol issue 27): the schema's common messages read
 * with their shapes inline, giving a message back to wire_check.c's generic walk on anything else.
 */
#include "pdata/wire_fast.h"

#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "base/utf8.h"

/* protobuf-c's lookup, without its call for the usual case: fields numbered 1, 2, 3... (the
 * descriptor keeps them sorted by number) */
static const ProtobufCFieldDescriptor *field_of(const ProtobufCMessageDescriptor *d, unsigned num)
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

/* An index v (int32 on the wire) into table t. Read as uint32, a negative one is 2^31 or more:
 * one_pass_ok finds it in top[t] at the end. */
static inline void note(w1 *c, unsigned t, uint64_t v)
{
    uint32_t x = (uint32_t)v;
    if (x > c->top[t]) c->top[t] = x;
}

/* A packed run of type t: -1 where the scan refuses it (a fixed-size run of the wrong length),
 * 1 where only protobuf-c does (a varint cut short or over 10 bytes), else 0; *n its elements as
 * the scan counts them (pc_proto_packed_count). One pass over the bytes: a varint ends at a byte
 * without the continuation bit, and pc_proto_read_varint refuses a tenth continuation byte. */
static int packed_run(ProtobufCType t, const uint8_t *p, size_t l, size_t *n)
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
static int index_run(w1 *c, unsigned t, const uint8_t *p, size_t l, size_t *n)
{
    size_t k = 0;
    uint32_t top = c->top[t];
    for (size_t i = 0; i < l; k++) {
        uint64_t v;
        if (pc_proto_read_varint(p, l, &i, &v)) return 1;
        top = (uint32_t)v > top ? (uint32_t)v : top;
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
    int r = s.table ? index_run(c, s.table, p, l, &n) : packed_run(PROTOBUF_C_TYPE_INT64, p, l, &n);
    return r ? -1 : (long long)n;
}

static bool fast1(w1 *c, int kind, const uint8_t *p, size_t len, int depth, size_t *cost);

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
        if (depth < 1 || !fast1(c, s.table, p, l, depth - 1, &sub)) return false;
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
static bool fast1(w1 *c, int kind, const uint8_t *p, size_t len, int depth, size_t *cost)
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
static const uint8_t CHILD[K_N][T_N] = {
    [K_PROFILE] = {[2] = K_SAMPLE},
    [K_DICT] = {[T_LOCATION] = K_LOCATION,
                [T_FUNCTION] = K_FUNCTION,
                [T_STRING] = C_STRING,
                [T_STACK] = K_STACK,
                [T_MAPPING] = K_MAPPING,
                [T_ATTR] = K_KVU},
};

/* Field num of desc (a message of walk1's at depth), l bytes at v, a child of kind k. */
static bool child1(w1 *c, const ProtobufCMessageDescriptor *desc, mcost *m, unsigned num, int k,
                   const uint8_t *v, size_t l, int depth)
{
    size_t sub;
    if (k == C_STRING) { /* value1's string: refused by the generic path when not UTF-8 */
        if (!pc_utf8_valid(v, l)) return false;
        sub = PC_PROTO_R16(l + 1);
    } else if (!fast1(c, k, v, l, depth - 1, &sub)) {
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

/* singular message fields merged per message are tracked for its first fields only: the
 * profiles schema's messages have at most 11 */
#define MERGE_MAX 16

static bool lost_in_merge(const ProtobufCFieldDescriptor *f, size_t len)
{
    if (f->type == PROTOBUF_C_TYPE_STRING) return f->default_value != NULL;
    return f->type == PROTOBUF_C_TYPE_BYTES && len == 0;
}

static int fail1(w1 *c, int code, const char *what)
{
    c->code = code;
    c->what = what;
    return code;
}

static bool packable(ProtobufCType t)
{
    return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES &&
           t != PROTOBUF_C_TYPE_MESSAGE;
}

/* Whether protobuf-c's parse_required_member takes wire type wt for f (a packed run aside). */
static bool wire_type_ok(const ProtobufCFieldDescriptor *f, unsigned wt)
{
    if (f->label == PROTOBUF_C_LABEL_REPEATED && wt == 2 && packable(f->type)) return true;
    switch (f->type) {
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return wt == 5;
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return wt == 1;
    case PROTOBUF_C_TYPE_BOOL: return true; /* 1.4.1 reads a bool of any wire type */
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return wt == 2;
    default: return wt == 0;
    }
}

static bool has_oneof(const ProtobufCMessageDescriptor *d)
{
    for (unsigned i = 0; i < d->n_fields; i++)
        if (d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) return true;
    return false;
}

/* One more occurrence of a singular message (merge_messages(earlier = *st, latter = next)). */
static void merge_step(w1 *c, const ProtobufCMessageDescriptor *d, oneof_st *st, oneof_st next)
{
    if (next.which)
        *st = next;
    else if (!st->which)
        c->unpack_fails = c->unpack_fails || has_oneof(d);
    else if (st->lost)
        *st = (oneof_st){0};
}

static int walk1(w1 *c, const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                 int depth, oneof_st *sum, size_t *cost);

static void mcost_init(mcost *m, const ProtobufCMessageDescriptor *desc)
{
    m->cost = PC_PROTO_R16(desc->sizeof_message);
    m->nf = desc->n_fields < PC_PROTO_TRACKED ? desc->n_fields : PC_PROTO_TRACKED;
    m->unknown = m->occurrences = 0;
    m->rep = 0;
    /* a constant size for the schema's small messages: stores, not a call (merged[fi] is set
     * at a field's first occurrence, add_merged) */
    if (m->nf > 8)
        memset(m->n_elems, 0, m->nf * sizeof m->n_elems[0]);
    else
        for (int k = 0; k < 8; k++)
            m->n_elems[k] = 0;
}

static void add_elems(mcost *m, const ProtobufCFieldDescriptor *f, size_t fi, size_t n)
{
    if (f->label != PROTOBUF_C_LABEL_REPEATED) return;
    if (fi < PC_PROTO_TRACKED) {
        m->rep |= (uint64_t)1 << fi;
        m->n_elems[fi] += n;
    } else {
        m->cost += PC_PROTO_R16(n * pc_proto_elt_size(f->type));
    }
}

/* A singular message field's occurrence of cost sub: each one after the first is merged into
 * new arrays holding all occurrences so far (untracked fields costed as if merged fully). */
static void add_merged(mcost *m, size_t fi, size_t sub)
{
    if (fi < PC_PROTO_TRACKED && !m->n_elems[fi]) m->merged[fi] = 0;
    size_t acc = fi < PC_PROTO_TRACKED ? (m->merged[fi] += sub) : sub * 2;
    if (fi >= PC_PROTO_TRACKED || m->n_elems[fi]++ > 0) m->cost += acc;
}

#define PB_(m) opentelemetry__proto__profiles__v1development__##m##__descriptor
#define CM_(m) opentelemetry__proto__common__v1__##m##__descriptor
static const ProtobufCMessageDescriptor *const KIND[K_N] = {
    [K_SAMPLE] = &PB_(sample),     [K_LINE] = &PB_(line),
    [K_LOCATION] = &PB_(location), [K_STACK] = &PB_(stack),
    [K_FUNCTION] = &PB_(function), [K_KV] = &CM_(key_value),
    [K_ANY] = &CM_(any_value),     [K_KVU] = &PB_(key_value_and_unit),
    [K_MAPPING] = &PB_(mapping),   [K_VT] = &PB_(value_type),
    [K_PROFILE] = &PB_(profile),   [K_SCOPE] = &PB_(scope_profiles),
    [K_LINK] = &PB_(link),         [K_DICT] = &PB_(profiles_dictionary),
};
/* the index fields (proto/otlp_profiles.proto, otlp_common.proto): field number -> table */
#define IDX_FIELDS 12
static const uint8_t IDX[K_N][IDX_FIELDS] = {
    [K_SAMPLE] = {[1] = T_STACK, [2] = T_ATTR, [3] = T_LINK},
    [K_LINE] = {[1] = T_FUNCTION},
    [K_LOCATION] = {[1] = T_MAPPING, [4] = T_ATTR},
    [K_STACK] = {[1] = T_LOCATION},
    [K_FUNCTION] = {[1] = T_STRING, [2] = T_STRING, [3] = T_STRING},
    [K_KV] = {[3] = T_STRING},
    [K_ANY] = {[8] = T_STRING},
    [K_KVU] = {[1] = T_STRING, [3] = T_STRING},
    [K_MAPPING] = {[4] = T_STRING, [5] = T_ATTR},
    [K_VT] = {[1] = T_STRING, [2] = T_STRING},
    [K_PROFILE] = {[11] = T_ATTR},
};
#undef PB_
#undef CM_

static int kind_of(const ProtobufCMessageDescriptor *d)
{
    for (int k = 1; k < K_N; k++)
        if (KIND[k] == d) return k;
    return K_NONE;
}

/* A length-delimited field num (l bytes) of a message of kind k. */
static void note_value(w1 *c, int k, unsigned num, size_t l, size_t *ids)
{
    if (k == K_SCOPE && num == 2) c->profiles++;
    if (k == K_PROFILE && num == 2) c->samples++;
    if (k == K_PROFILE && num == 7 && l != 0 && l != 16) c->slow = true;
    if (k == K_LINK && (num == 1 || num == 2)) ids[num - 1] = l;
}

/* The end of a message of kind k: the rules validate.c applies to one message. */
static void note_end(w1 *c, int k, const mcost *m, const size_t *ids)
{
    /* Sample's values (field 4) and timestamps (5), counted as protobuf-c counts them */
    if (k == K_SAMPLE && m->n_elems[3] && m->n_elems[4] && m->n_elems[3] != m->n_elems[4])
        c->slow = true;
    /* a link after element 0: a trace id of 16 bytes and a span id of 8 (the last ones) */
    if (k == K_LINK && c->tables[T_LINK] > 1 && (ids[0] != 16 || ids[1] != 8)) c->slow = true;
}

/* A length-delimited value v of field f (known) in a message of desc (t: the table a packed run
 * of f indexes, else 0): the scan's checks, then the bookkeeping. */
static int value1(w1 *c, const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f,
                  const uint8_t *v, size_t vl, int depth, oneof_st *merged, bool *seen, mcost *m,
                  unsigned t)
{
    size_t fi = (size_t)(f - desc->fields);
    size_t n_new = 1;
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        if (!pc_utf8_valid(v, vl)) return fail1(c, PC_EINVAL, "invalid UTF-8 in string field");
        m->cost += PC_PROTO_R16(vl + 1);
    } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
        if (vl) m->cost += PC_PROTO_R16(vl);
    } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        oneof_st sub;
        size_t sub_cost = 0;
        int rc = walk1(c, f->descriptor, v, vl, depth - 1, &sub, &sub_cost);
        if (rc < 0) return rc;
        m->cost += sub_cost;
        bool single =
            f->label != PROTOBUF_C_LABEL_REPEATED && !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF);
        if (single) add_merged(m, fi, sub_cost);
        if (single && fi < MERGE_MAX) {
            if (seen[fi])
                merge_step(c, f->descriptor, &merged[fi], sub);
            else
                merged[fi] = sub;
            seen[fi] = true;
        }
        if (single) return 0;
    } else if (f->label == PROTOBUF_C_LABEL_REPEATED && packable(f->type)) {
        int r = t ? index_run(c, t, v, vl, &n_new) : packed_run(f->type, v, vl, &n_new);
        if (r < 0) return fail1(c, PC_EPROTO, "malformed protobuf");
        if (r > 0) c->unpack_fails = true;
    }
    add_elems(m, f, fi, n_new);
    return 0;
}

static int walk1(w1 *c, const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                 int depth, oneof_st *sum, size_t *cost)
{
    if (depth < 0) return fail1(c, PC_EPROTO, "nested too deeply");
    int kind = kind_of(desc);
    *sum = (oneof_st){0};
    if (kind >= K_SAMPLE && kind <= K_FUNCTION && fast1(c, kind, p, len, depth, cost)) return 0;
    oneof_st merged[MERGE_MAX];
    bool seen[MERGE_MAX] = {0};
    mcost m;
    mcost_init(&m, desc);
    const uint8_t *ix = IDX[kind];
    const uint8_t *ck = CHILD[kind];
    size_t i = 0, ids[2] = {0, 0};
    while (i < len) {
        uint64_t key, l = 0;
        size_t k0 = i;
        if (pc_proto_read_varint(p, len, &i, &key))
            return fail1(c, PC_EPROTO, "malformed protobuf");
        size_t klen = i - k0;
        if (key - 8 > ((uint64_t)UINT32_MAX << 3 | 7) - 8) /* field number 0 or over 2^32 - 1 */
            return fail1(c, PC_EPROTO,
                         key >> 3 ? "malformed protobuf" : "malformed protobuf (field number 0)");
        unsigned wt = (unsigned)(key & 7), num = (unsigned)(key >> 3);
        size_t v0 = i;
        if (pc_proto_skip_value(p, len, wt, &i, &l))
            return fail1(c, PC_EPROTO, "malformed protobuf");
        m.occurrences++;
        /* protobuf-c reads a tag and a length prefix of 5 bytes at most */
        if (klen > 5 || (wt == 2 && (i - v0 > 5 || l > INT_MAX))) c->unpack_fails = true;
        if (wt == 2 && num < T_N && ck[num] && depth > 0 &&
            child1(c, desc, &m, num, ck[num], p + i, (size_t)l, depth)) {
            i += (size_t)l;
            continue;
        }
        const ProtobufCFieldDescriptor *f = field_of(desc, num);
        if (!f) { /* kept as an unknown field: a copy of the value and a slot */
            m.cost += PC_PROTO_R16(wt == 2 ? (i - v0) + (size_t)l : i - v0);
            m.unknown++;
            if (wt == 2) i += (size_t)l;
            continue;
        }
        if (!wire_type_ok(f, wt)) c->unpack_fails = true;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
            *sum = (oneof_st){num, lost_in_merge(f, wt == 2 ? (size_t)l : 1)};
        if (wt != 2) {
            if (num < IDX_FIELDS && ix[num]) note(c, ix[num], l);
            add_elems(&m, f, (size_t)(f - desc->fields), 1);
            continue;
        }
        const uint8_t *v = p + i;
        i += (size_t)l;
        if (desc == c->dict && num < T_N && c->tables[num]++ == 0)
            c->first[num] = (span){v, (size_t)l};
        unsigned t = num < IDX_FIELDS ? ix[num] : 0;
        int rc = value1(c, desc, f, v, (size_t)l, depth, merged, seen, &m, t);
        if (rc < 0) return rc;
        if (kind) note_value(c, kind, num, (size_t)l, ids);
    }
    if (kind) note_end(c, kind, &m, ids);
    /* pc_proto_tail_cost over the repeated fields that occurred only */
    for (uint64_t r = m.rep; r; r &= r - 1) {
        size_t fi = (size_t)__builtin_ctzll(r);
        m.cost += pc_proto_array_cost(desc, fi, m.n_elems[fi]);
    }
    *cost = m.cost + pc_proto_slab_cost(m.unknown, m.occurrences);
    return 0;
}

int pc_wf_walk1(w1 *c, const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                int depth, oneof_st *sum, size_t *cost)
{
    return walk1(c, desc, p, len, depth, sum, cost);
}
