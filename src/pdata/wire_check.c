/* The validating wire walk (wire_check.h). Pass 1 follows proto_scan.c rule for rule (so its
 * first refusal is the scan's, in the same order) and notes, without stopping, what protobuf-c
 * 1.4.1's unpack refuses after a clean scan: a tag or a length prefix of more than 5 bytes, a
 * length over INT_MAX, a known field of the wrong wire type, a packed varint run cut short, a
 * repeated singular message whose oneof is unset in two occurrences (merge_messages cannot look
 * up case 0). Pass 2 runs on bytes pass 1 found well-formed and applies validate.c: last
 * occurrence wins for scalars, repeated fields and singular messages concatenate (protobuf-c
 * merges them), and a oneof keeps its last member. Pass 2 runs only when pass 1's notes ("one
 * pass" below) do not already prove it would find nothing: for a valid request only pass 1 runs
 * (bench/README.md, "### Pass-through"). */
#include "pdata/wire_check.h"

#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "pdata/pdata.h"
#include "pdata/proto_scan.h"
#include "pdata/wire_fast.h"
#include "base/utf8.h"

/* singular message fields merged per message are tracked for its first fields only: the
 * profiles schema's messages have at most 11 */
#define MERGE_MAX 16

/* The oneof of a message occurrence (AnyValue's is the schema's only one): the last member
 * seen, and whether merge_messages drops it when a later occurrence has none (it carries a
 * string over only when the field has no default, and protobuf-c gives proto3 strings "" as
 * theirs; bytes only when not empty). */
typedef struct oneof_st {
    uint32_t which;
    bool lost;
} oneof_st;

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
        int r = t ? pc_wf_index_run(c, t, v, vl, &n_new) : pc_wf_packed_run(f->type, v, vl, &n_new);
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
    if (kind >= K_SAMPLE && kind <= K_FUNCTION && pc_wf_fast1(c, kind, p, len, depth, cost))
        return 0;
    oneof_st merged[MERGE_MAX];
    bool seen[MERGE_MAX] = {0};
    mcost m;
    mcost_init(&m, desc);
    const uint8_t *ix = IDX[kind];
    const uint8_t *ck = PC_WF_CHILD[kind];
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
            pc_wf_child1(c, desc, &m, num, ck[num], p + i, (size_t)l, depth)) {
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

/* ---- pass 2: validate.c on well-formed bytes ---- */

typedef struct fld {
    unsigned num, wt;
    uint64_t v;       /* wire types 0, 1, 5 */
    const uint8_t *d; /* wire type 2 */
    size_t n;
} fld;

typedef struct rd {
    const uint8_t *p;
    size_t len, i;
} rd;

static rd rd_of(const uint8_t *p, size_t n)
{
    return (rd){p, n, 0};
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--)
        v = v << 8 | p[k];
    return v;
}

/* The next field; false at the end (or, never after pass 1, on bytes it cannot read). */
static bool next(rd *r, fld *f)
{
    uint64_t key, l;
    if (r->i >= r->len || pc_proto_read_varint(r->p, r->len, &r->i, &key)) return false;
    f->num = (unsigned)(key >> 3);
    f->wt = (unsigned)(key & 7);
    size_t at = r->i;
    if (pc_proto_skip_value(r->p, r->len, f->wt, &r->i, &l)) return false;
    f->v = f->wt == 0 ? l : f->wt == 1 ? le(r->p + at, 8) : f->wt == 5 ? le(r->p + at, 4) : 0;
    f->d = r->p + r->i;
    f->n = f->wt == 2 ? (size_t)l : 0;
    if (f->wt == 2) r->i += (size_t)l;
    return true;
}

typedef struct w2 {
    size_t t[T_N]; /* table sizes (pass 1) */
} w2;

static bool idx_ok(int32_t idx, size_t n)
{
    /* validate.c: index 0 means "unset" and is valid even for an absent table */
    return idx == 0 || (idx > 0 && (size_t)idx < n);
}

static int32_t i32(uint64_t v)
{
    return (int32_t)(uint32_t)v;
}

/* A repeated int32 index field's occurrence (one value or a packed run): every index in range;
 * *count gets the elements. */
static bool indices_ok(const fld *f, size_t table, size_t *count)
{
    if (f->wt == 0) {
        ++*count;
        return idx_ok(i32(f->v), table);
    }
    bool ok = true;
    for (size_t i = 0; i < f->n;) {
        uint64_t v = 0;
        if (pc_proto_read_varint(f->d, f->n, &i, &v)) break;
        ++*count;
        ok = ok && idx_ok(i32(v), table);
    }
    return ok;
}

/* Elements of a repeated numeric field's occurrence (a packed run: as protobuf-c counts). */
static size_t n_elems(const fld *f, size_t fixed)
{
    if (f->wt != 2) return 1;
    if (fixed) return f->n / fixed;
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++)
        n += !(f->d[i] & 0x80);
    return n;
}

/* An AnyValue after merging its occurrences: its member (which = 0: none) and where it is. */
typedef struct av {
    bool present;
    oneof_st st;
    fld m;
} av;

/* One AnyValue occurrence: its last oneof member (every field of AnyValue is one; string_value
 * (1) and empty bytes_value (7) are lost in a merge, as lost_in_merge says). */
static av av_one(const uint8_t *d, size_t n)
{
    av a = {.present = true};
    rd r = rd_of(d, n);
    fld f;
    while (next(&r, &f))
        if (f.num >= 1 && f.num <= 8) {
            a.st = (oneof_st){f.num, f.num == 1 || (f.num == 7 && f.n == 0)};
            a.m = f;
        }
    return a;
}

/* Another occurrence of a singular AnyValue field: as merge_step (pass 1 refused the rest). */
static void av_merge(av *a, const fld *f)
{
    av nx = av_one(f->d, f->n);
    if (!a->present || nx.st.which)
        *a = nx;
    else if (a->st.lost)
        a->st = (oneof_st){0};
}

static bool kv_ok(const w2 *s, const uint8_t *d, size_t n, int depth);

/* validate.c's check_anyvalue. */
static bool av_ok(const w2 *s, const av *a, int depth)
{
    if (!a->present) return true;
    if (depth > 32) return false;
    rd r = rd_of(a->m.d, a->m.n);
    fld f;
    switch (a->st.which) {
    case 8: return idx_ok(i32(a->m.v), s->t[T_STRING]);
    case 5:
        while (next(&r, &f)) {
            if (f.num != 1 || f.wt != 2) continue;
            av e = av_one(f.d, f.n);
            if (!av_ok(s, &e, depth + 1)) return false;
        }
        return true;
    case 6:
        while (next(&r, &f))
            if (f.num == 1 && f.wt == 2 && !kv_ok(s, f.d, f.n, depth + 1)) return false;
        return true;
    default: return true;
    }
}

/* A KeyValue: key_strindex in range, its value valid at depth. */
static bool kv_ok(const w2 *s, const uint8_t *d, size_t n, int depth)
{
    int32_t key = 0;
    av a = {0};
    rd r = rd_of(d, n);
    fld f;
    while (next(&r, &f)) {
        if (f.num == 3 && f.wt == 0) key = i32(f.v);
        if (f.num == 2 && f.wt == 2) av_merge(&a, &f);
    }
    return idx_ok(key, s->t[T_STRING]) && av_ok(s, &a, depth);
}

/* Every KeyValue in field kv_num of a message (Resource: 1, InstrumentationScope: 3). */
static bool attrs_ok(const w2 *s, const fld *m, unsigned kv_num)
{
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f))
        if (f.num == kv_num && f.wt == 2 && !kv_ok(s, f.d, f.n, 0)) return false;
    return true;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* dictionary elements; first: element 0 of its table (the zero value required) */
static bool mapping_ok(const w2 *s, const fld *m, bool first)
{
    uint64_t nz = 0;
    int32_t file = 0;
    size_t n_attr = 0;
    bool ok = true;
    uint64_t last[4] = {0};
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num >= 1 && f.num <= 4 && f.wt == 0) last[f.num - 1] = f.v;
        if (f.num == 5) ok = indices_ok(&f, s->t[T_ATTR], &n_attr) && ok;
    }
    file = i32(last[3]);
    nz = last[0] | last[1] | last[2] | (uint64_t)(uint32_t)file | n_attr;
    return ok && idx_ok(file, s->t[T_STRING]) && !(first && nz);
}

static bool location_ok(const w2 *s, const fld *m, bool first)
{
    int32_t map = 0;
    uint64_t addr = 0;
    size_t n_lines = 0, n_attr = 0;
    bool ok = true;
    rd r = rd_of(m->d, m->n);
    fld f, g;
    while (next(&r, &f)) {
        if (f.num == 1 && f.wt == 0) map = i32(f.v);
        if (f.num == 2 && f.wt == 0) addr = f.v;
        if (f.num == 4) ok = indices_ok(&f, s->t[T_ATTR], &n_attr) && ok;
        if (f.num != 3 || f.wt != 2) continue;
        n_lines++;
        int32_t fn = 0;
        rd lr = rd_of(f.d, f.n);
        while (next(&lr, &g))
            if (g.num == 1 && g.wt == 0) fn = i32(g.v);
        ok = ok && idx_ok(fn, s->t[T_FUNCTION]);
    }
    if (first && (map || addr || n_lines || n_attr)) return false;
    return ok && idx_ok(map, s->t[T_MAPPING]);
}

static bool function_ok(const w2 *s, const fld *m, bool first)
{
    uint64_t last[4] = {0};
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f))
        if (f.num >= 1 && f.num <= 4 && f.wt == 0) last[f.num - 1] = f.v;
    if (first && (i32(last[0]) || i32(last[1]) || i32(last[2]) || last[3])) return false;
    return idx_ok(i32(last[0]), s->t[T_STRING]) && idx_ok(i32(last[1]), s->t[T_STRING]) &&
           idx_ok(i32(last[2]), s->t[T_STRING]);
}

static bool link_ok(const fld *m, bool first)
{
    fld id[2] = {{0}, {0}}; /* trace_id, span_id: the last occurrence */
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f))
        if ((f.num == 1 || f.num == 2) && f.wt == 2) id[f.num - 1] = f;
    if (!first) return id[0].n == 16 && id[1].n == 8;
    return all_zero(id[0].d, id[0].n) && all_zero(id[1].d, id[1].n) &&
           (id[0].n == 0 || id[0].n == 16) && (id[1].n == 0 || id[1].n == 8);
}

static bool kvu_ok(const w2 *s, const fld *m, bool first)
{
    int32_t key = 0, unit = 0;
    av a = {0};
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num == 1 && f.wt == 0) key = i32(f.v);
        if (f.num == 3 && f.wt == 0) unit = i32(f.v);
        if (f.num == 2 && f.wt == 2) av_merge(&a, &f);
    }
    if (first && (key || unit || (a.present && a.st.which))) return false;
    return idx_ok(key, s->t[T_STRING]) && idx_ok(unit, s->t[T_STRING]) && av_ok(s, &a, 0);
}

static bool stack_ok(const w2 *s, const fld *m, bool first)
{
    size_t n = 0;
    bool ok = true;
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f))
        if (f.num == 1) ok = indices_ok(&f, s->t[T_LOCATION], &n) && ok;
    return ok && !(first && n);
}

/* An element of table f->num (element 0: first). */
static bool elem_ok(const w2 *s, const fld *f, bool first)
{
    switch (f->num) {
    case T_MAPPING: return mapping_ok(s, f, first);
    case T_LOCATION: return location_ok(s, f, first);
    case T_FUNCTION: return function_ok(s, f, first);
    case T_LINK: return link_ok(f, first);
    case T_STRING: return !(first && f->n && f->d[0]);
    case T_ATTR: return kvu_ok(s, f, first);
    default: return stack_ok(s, f, first);
    }
}

/* One dictionary occurrence; seen: the elements of each table in earlier occurrences. */
static bool dict_ok(const w2 *s, const fld *d, size_t *seen)
{
    rd r = rd_of(d->d, d->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num >= T_N || f.num == 0 || f.wt != 2) continue;
        if (!elem_ok(s, &f, seen[f.num]++ == 0)) return false;
    }
    return true;
}

/* A ValueType (the last occurrence: merging keeps the latter's scalars): indices in range. */
static bool value_type_ok(const w2 *s, const fld *vt)
{
    if (!vt->d) return true;
    int32_t ty = 0, unit = 0;
    rd r = rd_of(vt->d, vt->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num == 1 && f.wt == 0) ty = i32(f.v);
        if (f.num == 2 && f.wt == 0) unit = i32(f.v);
    }
    return idx_ok(ty, s->t[T_STRING]) && idx_ok(unit, s->t[T_STRING]);
}

static bool sample_ok(const w2 *s, const fld *m)
{
    int32_t stack = 0, link = 0;
    size_t n_attr = 0, n_values = 0, n_ts = 0;
    bool ok = true;
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num == 1 && f.wt == 0) stack = i32(f.v);
        if (f.num == 3 && f.wt == 0) link = i32(f.v);
        if (f.num == 2) ok = indices_ok(&f, s->t[T_ATTR], &n_attr) && ok;
        if (f.num == 4) n_values += n_elems(&f, 0);
        if (f.num == 5) n_ts += n_elems(&f, 8);
    }
    if (n_values && n_ts && n_values != n_ts) return false;
    return ok && idx_ok(stack, s->t[T_STACK]) && idx_ok(link, s->t[T_LINK]);
}

/* validate.c's check_profile; *samples gets the profile's samples either way. */
static bool profile_ok(const w2 *s, const fld *m, size_t *samples)
{
    fld st = {0}, pt = {0};
    size_t n_attr = 0, id_len = 0;
    bool ok = true;
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num == 2 && f.wt == 2) {
            ++*samples;
            ok = ok && sample_ok(s, &f);
        }
        if (f.num == 1 && f.wt == 2) st = f;
        if (f.num == 5 && f.wt == 2) pt = f;
        if (f.num == 7 && f.wt == 2) id_len = f.n;
        if (f.num == 11) ok = indices_ok(&f, s->t[T_ATTR], &n_attr) && ok;
    }
    return ok && value_type_ok(s, &st) && value_type_ok(s, &pt) && (id_len == 0 || id_len == 16);
}

/* A ScopeProfiles (or, scope = false, ResourceProfiles: then each ScopeProfiles in it). */
static int container_ok(const w2 *s, const fld *m, bool scope, pc_wire_counts *out)
{
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f)) {
        if (f.wt != 2) continue;
        if (f.num == 1 && !attrs_ok(s, &f, scope ? 3 : 1)) return PC_EINVAL;
        if (f.num != 2) continue;
        if (!scope) {
            if (container_ok(s, &f, true, out) < 0) return PC_EINVAL;
            continue;
        }
        size_t n = 0;
        bool ok = profile_ok(s, &f, &n);
        out->profiles++;
        out->samples += n;
        if (ok)
            out->kept_samples += n;
        else
            out->rejected++;
    }
    return 0;
}

static int pass2(const w2 *s, const uint8_t *data, size_t len, pc_wire_counts *out, pc_error *e)
{
    size_t seen[T_N] = {0};
    rd r = rd_of(data, len);
    fld f;
    while (next(&r, &f))
        if (f.num == 2 && f.wt == 2 && !dict_ok(s, &f, seen))
            return pc_error_set(e, PC_EINVAL, "invalid dictionary");
    r = rd_of(data, len);
    while (next(&r, &f))
        if (f.num == 1 && f.wt == 2 && container_ok(s, &f, false, out) < 0)
            return pc_error_set(e, PC_EINVAL, "invalid resource or scope attribute");
    if (out->rejected) {
        pc_error_set(e, PC_EINVAL, "%lld invalid profiles", (long long)out->rejected);
        if ((size_t)out->rejected == out->profiles) return PC_EINVAL;
    }
    return 0;
}

/* Whether pass 1's notes prove validate.c finds nothing ("one pass" above). max_depth at most
 * PC_PROTO_MAX_DEPTH (64) keeps AnyValues nested 32 deep at most (each level is two messages),
 * so check_anyvalue's depth rule cannot fail. */
static bool one_pass_ok(const w1 *c, const w2 *s)
{
    if (c->slow) return false;
    for (unsigned t = 1; t < T_N; t++) {
        /* 2^31 or more: a negative index, which validate.c refuses */
        if (c->top[t] >> 31 || (c->top[t] && c->top[t] >= s->t[t])) return false;
        fld f = {.num = t, .wt = 2, .d = c->first[t].d, .n = c->first[t].n};
        if (s->t[t] && !elem_ok(s, &f, true)) return false;
    }
    return true;
}

int pc_wire_check_profiles(const uint8_t *data, size_t len, int max_depth, pc_wire_counts *out,
                           pc_error *e)
{
    memset(out, 0, sizeof *out);
    w1 c = {.dict =
                &opentelemetry__proto__profiles__v1development__profiles_dictionary__descriptor};
    oneof_st top;
    int rc = walk1(&c, PC_REQUEST_DESC, data, len, max_depth, &top, &out->cost);
    if (rc < 0) return pc_error_set(e, rc, "%s", c.what);
    if (c.unpack_fails) return pc_error_set(e, PC_EPROTO, "malformed protobuf");
    w2 s;
    memcpy(s.t, c.tables, sizeof s.t);
    if (max_depth <= PC_PROTO_MAX_DEPTH && one_pass_ok(&c, &s)) {
        out->profiles = c.profiles;
        out->samples = out->kept_samples = c.samples;
        return 0;
    }
    return pass2(&s, data, len, out, e);
}
