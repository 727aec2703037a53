/* The one-pass protobuf decoder (proto_unpack.h). Each message is read twice at its own level
 * and never below: a first walk over its keys counts the elements of its repeated fields and its
 * unknown fields (checking every key, length and packed run on the way), then its arrays are
 * allocated at their final size and a second walk fills them, descending into each submessage
 * once. The rules are protobuf-c 1.4's unpack (its protobuf-c.c: which wire types a field
 * takes, how a bool is read, how packed runs are counted, what a repeated singular submessage
 * merges), reimplemented; the scan's checks (proto_scan.h) are done where the values are read. */
#include "pdata/proto_unpack.h"

#include <stdbool.h>
#include <string.h>

#include "base/utf8.h"
#include "pdata/proto_scan.h"

/* fixed-width values and packed runs are copied as they lie on the wire, as protobuf-c does on
 * little-endian hosts */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pc_proto_unpack reads fixed-width values as little-endian memory"
#endif

enum { WT_VARINT = 0, WT_64BIT = 1, WT_LEN = 2, WT_32BIT = 5 };

typedef struct unpacker {
    pc_arena *a;
    pc_budget *budget;
    bool over; /* the budget refused an allocation: stop */
} unpacker;

/* One field occurrence: the bytes after its key. */
typedef struct member {
    const uint8_t *raw; /* the value with a length prefix, as an unknown field keeps it */
    size_t raw_len;
    const uint8_t *v; /* the value (a length-delimited one: its payload) */
    size_t len;
    uint32_t tag;
    unsigned wt;
} member;

#define HOT static inline __attribute__((always_inline))

HOT void *ualloc(unpacker *u, size_t n)
{
    void *p = pc_arena_alloc(u->a, n);
    if (u->budget && u->budget->state != PC_OK) u->over = true;
    return p;
}

/* A varint at p[*i] (*i past it), as pc_proto_read_varint reads it (-1 when cut short or over
 * 10 bytes), inline: one and two bytes are most of what profiles hold. */
HOT int get_varint(const uint8_t *p, size_t len, size_t *i, uint64_t *v)
{
    size_t k = *i;
    if (k < len && p[k] < 0x80) {
        *v = p[k];
        *i = k + 1;
        return 0;
    }
    if (k + 1 < len && p[k + 1] < 0x80) {
        *v = (uint64_t)(p[k] & 0x7f) | (uint64_t)p[k + 1] << 7;
        *i = k + 2;
        return 0;
    }
    return pc_proto_read_varint(p, len, i, v);
}

/* A field's key and value at p[*i], *i past them; -1 where the scan or protobuf-c refuses: a key
 * or length prefix over 5 bytes (protobuf-c reads no more), field number 0, a value cut short, a
 * group or reserved wire type. */
HOT int read_member(const uint8_t *p, size_t len, size_t *i, member *m)
{
    size_t s = *i;
    uint64_t k;
    if (p[s] < 0x80) {
        k = p[s];
        *i = s + 1;
    } else if (get_varint(p, len, i, &k) || *i - s > 5) {
        return -1;
    }
    if (k >> 3 == 0) return -1;
    m->tag = (uint32_t)(k >> 3);
    m->wt = (unsigned)(k & 7);
    s = *i;
    m->raw = p + s;
    uint64_t l = 0;
    if (m->wt == WT_LEN) {
        if (get_varint(p, len, i, &l) || *i - s > 5 || l > len - *i) return -1;
        m->v = p + *i;
        m->len = (size_t)l;
        *i += (size_t)l;
    } else {
        if (m->wt == WT_VARINT ? get_varint(p, len, i, &l)
                               : pc_proto_skip_value(p, len, m->wt, i, &l))
            return -1;
        m->v = m->raw;
        m->len = *i - s;
    }
    m->raw_len = *i - s;
    return 0;
}

/* The field of tag, tried first at the hint (the field read last), at index tag - 1 (most
 * messages number their fields from 1 without gaps), at the next one, then through protobuf-c's
 * own lookup. */
HOT const ProtobufCFieldDescriptor *field_of(const ProtobufCMessageDescriptor *d, uint32_t tag,
                                             unsigned *hint)
{
    unsigned h = *hint;
    if (h < d->n_fields && d->fields[h].id == tag) return &d->fields[h];
    if (tag - 1 < d->n_fields && d->fields[tag - 1].id == tag) { /* numbered 1, 2, 3, ... */
        *hint = tag - 1;
        return &d->fields[tag - 1];
    }
    if (h + 1 < d->n_fields && d->fields[h + 1].id == tag) {
        *hint = h + 1;
        return &d->fields[h + 1];
    }
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, tag);
    if (f) *hint = (unsigned)(f - d->fields);
    return f;
}

HOT bool packable(ProtobufCType t)
{
    return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES &&
           t != PROTOBUF_C_TYPE_MESSAGE;
}

/* A varint of n bytes (already checked), truncated to 64 bits. */
HOT uint64_t varint_at(const uint8_t *v, size_t n)
{
    uint64_t x = 0;
    for (size_t k = 0; k < n && k < 10; k++)
        x |= (uint64_t)(v[k] & 0x7f) << (7 * k);
    return x;
}

HOT int32_t unzigzag32(uint32_t v)
{
    return (int32_t)((v >> 1) ^ (0u - (v & 1)));
}

HOT int64_t unzigzag64(uint64_t v)
{
    return (int64_t)((v >> 1) ^ (0u - (v & 1)));
}

/* A message struct as protobuf-c initialises it: its generated init, or (for descriptors made
 * by hand, which have none) zeros and the non-repeated fields' defaults. */
static void message_init(const ProtobufCMessageDescriptor *d, ProtobufCMessage *m)
{
    if (d->message_init) {
        protobuf_c_message_init(d, m);
        return;
    }
    memset(m, 0, d->sizeof_message);
    m->descriptor = d;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (!f->default_value || f->label == PROTOBUF_C_LABEL_REPEATED) continue;
        char *v = (char *)m + f->offset;
        if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)
            *(const void **)v = f->default_value;
        else
            memcpy(v, f->default_value, pc_proto_elt_size(f->type));
    }
}

static int decode(unpacker *u, const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                  int depth, ProtobufCMessage **out);
static int merge(unpacker *u, ProtobufCMessage *earlier, ProtobufCMessage *latter);

/* A packed run into dst (sized by the count): -1 for a varint protobuf-c cannot read (cut
 * short, over 10 bytes). *n grows by the elements. Bools are varints here, as protobuf-c 1.4.1
 * reads them (later versions refuse a byte over 1). */
static int unpack_packed(ProtobufCType t, const uint8_t *v, size_t len, char *dst, size_t *n)
{
    size_t c = 0, i = 0;
    switch (t) {
    case PROTOBUF_C_TYPE_BOOL: /* varints, each true when a byte has a low bit set */
        while (i < len) {
            size_t s = i;
            uint64_t x;
            if (pc_proto_read_varint(v, len, &i, &x)) return -1;
            protobuf_c_boolean b = 0;
            for (; s < i; s++)
                b |= (v[s] & 0x7f) != 0;
            ((protobuf_c_boolean *)dst)[c++] = b;
        }
        *n += c;
        return 0;
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        if (len) memcpy(dst, v, len); /* the count checked the length's multiple */
        *n += len / pc_proto_elt_size(t);
        return 0;
    default: break;
    }
    while (i < len) {
        uint64_t x;
        if (get_varint(v, len, &i, &x)) return -1;
        switch (t) {
        case PROTOBUF_C_TYPE_SINT32: ((int32_t *)dst)[c] = unzigzag32((uint32_t)x); break;
        case PROTOBUF_C_TYPE_SINT64: ((int64_t *)dst)[c] = unzigzag64(x); break;
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_UINT64: ((uint64_t *)dst)[c] = x; break;
        default: ((uint32_t *)dst)[c] = (uint32_t)x; break; /* int32, uint32, enum */
        }
        c++;
    }
    *n += c;
    return 0;
}

/* A bool of any wire type is true when a byte of its value (a length prefix included) has a
 * bit below the top one set, as protobuf-c reads it. */
HOT protobuf_c_boolean read_bool(const member *m)
{
    for (size_t k = 0; k < m->raw_len; k++)
        if (m->raw[k] & 0x7f) return 1;
    return 0;
}

/* A numeric value into dst; -1 for a wire type protobuf-c refuses for the type. */
HOT int unpack_number(ProtobufCType t, const member *m, void *dst)
{
    switch (t) {
    case PROTOBUF_C_TYPE_BOOL: *(protobuf_c_boolean *)dst = read_bool(m); return 0;
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        if (m->wt != WT_32BIT) return -1;
        memcpy(dst, m->v, 4);
        return 0;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        if (m->wt != WT_64BIT) return -1;
        memcpy(dst, m->v, 8);
        return 0;
    default: break;
    }
    if (m->wt != WT_VARINT) return -1;
    uint64_t x = varint_at(m->v, m->len);
    switch (t) {
    case PROTOBUF_C_TYPE_SINT32: *(int32_t *)dst = unzigzag32((uint32_t)x); return 0;
    case PROTOBUF_C_TYPE_SINT64: *(int64_t *)dst = unzigzag64(x); return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64: *(uint64_t *)dst = x; return 0;
    default: *(uint32_t *)dst = (uint32_t)x; return 0; /* int32, uint32, enum */
    }
}

/* One value of field f into dst (a struct member or an array element). A singular submessage
 * already there (merge) is merged into the new one, as protobuf-c merges it. */
static int unpack_value(unpacker *u, const ProtobufCFieldDescriptor *f, const member *m, void *dst,
                        bool merge_old, int depth)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        if (m->wt != WT_LEN || !pc_utf8_valid(m->v, m->len)) return -1;
        char *s = ualloc(u, m->len + 1);
        memcpy(s, m->v, m->len);
        s[m->len] = 0;
        *(char **)dst = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        if (m->wt != WT_LEN) return -1;
        ProtobufCBinaryData *b = dst;
        b->data = m->len ? ualloc(u, m->len) : NULL;
        if (m->len) memcpy(b->data, m->v, m->len);
        b->len = m->len;
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        ProtobufCMessage *sub, **pm = dst;
        if (m->wt != WT_LEN || decode(u, f->descriptor, m->v, m->len, depth - 1, &sub) < 0)
            return -1;
        ProtobufCMessage *old = *pm;
        *pm = sub;
        return merge_old && old && old != f->default_value ? merge(u, old, sub) : 0;
    }
    default: return unpack_number(f->type, m, dst);
    }
}

/* A oneof member replaces the one set before (whose bytes are cleared first: the members share
 * the place), and is never merged with it. */
static int unpack_oneof(unpacker *u, const ProtobufCFieldDescriptor *f, const member *m, char *base,
                        int depth)
{
    uint32_t *which = (uint32_t *)(base + f->quantifier_offset);
    if (*which) {
        const ProtobufCFieldDescriptor *old =
            protobuf_c_message_descriptor_get_field(((ProtobufCMessage *)base)->descriptor, *which);
        if (old) memset(base + f->offset, 0, pc_proto_elt_size(old->type));
    }
    if (unpack_value(u, f, m, base + f->offset, false, depth) < 0) return -1;
    *which = m->tag;
    return 0;
}

static int unpack_field(unpacker *u, const ProtobufCFieldDescriptor *f, const member *m, char *base,
                        int depth)
{
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        size_t *n = (size_t *)(base + f->quantifier_offset);
        char *arr = *(char **)(base + f->offset); /* NULL for an empty packed run alone */
        if (arr) arr += *n * pc_proto_elt_size(f->type);
        if (m->wt == WT_LEN && packable(f->type))
            return unpack_packed(f->type, m->v, m->len, arr, n);
        if (unpack_value(u, f, m, arr, false, depth) < 0) return -1;
        (*n)++;
        return 0;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) return unpack_oneof(u, f, m, base, depth);
    if (unpack_value(u, f, m, base + f->offset, true, depth) < 0) return -1;
    /* a has_ flag where the field has one (protobuf-c sets it for any label but required) */
    if (f->label != PROTOBUF_C_LABEL_REQUIRED && f->quantifier_offset)
        *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
    return 0;
}

/* First walk: every key and value checked, repeated elements counted into the struct's counts,
 * unknown fields counted, required fields seen marked in req (one bit per field index). */
static int count_fields(const ProtobufCMessageDescriptor *d, char *base, const uint8_t *p,
                        size_t len, size_t *n_unknown, uint8_t *req)
{
    unsigned hint = 0;
    for (size_t i = 0; i < len;) {
        member m;
        if (read_member(p, len, &i, &m) < 0) return -1;
        const ProtobufCFieldDescriptor *f = field_of(d, m.tag, &hint);
        if (!f) {
            (*n_unknown)++;
        } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t *n = (size_t *)(base + f->quantifier_offset);
            if (m.wt == WT_LEN && packable(f->type)) {
                long long c = pc_proto_packed_count(f->type, m.v, m.len);
                if (c < 0) return -1;
                *n += (size_t)c;
            } else {
                (*n)++;
            }
        } else if (f->label == PROTOBUF_C_LABEL_REQUIRED && req) {
            req[hint / 8] |= (uint8_t)(1u << (hint % 8));
        }
    }
    return 0;
}

/* The arrays at their counted sizes (the counts back to 0 for the second walk); -1 when a
 * required field without a default was not sent. */
static int alloc_arrays(unpacker *u, const ProtobufCMessageDescriptor *d, ProtobufCMessage *m,
                        const uint8_t *req, size_t n_unknown)
{
    char *base = (char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t *n = (size_t *)(base + f->quantifier_offset);
            if (!*n) continue;
            *(void **)(base + f->offset) = ualloc(u, *n * pc_proto_elt_size(f->type));
            *n = 0;
        } else if (f->label == PROTOBUF_C_LABEL_REQUIRED && !f->default_value &&
                   !(req[i / 8] & (1u << (i % 8)))) {
            return -1;
        }
    }
    if (n_unknown) m->unknown_fields = ualloc(u, n_unknown * sizeof *m->unknown_fields);
    return 0;
}

static void keep_unknown(unpacker *u, ProtobufCMessage *msg, const member *m)
{
    ProtobufCMessageUnknownField *uf = &msg->unknown_fields[msg->n_unknown_fields++];
    uf->tag = m->tag;
    uf->wire_type = (ProtobufCWireType)m->wt;
    uf->len = m->raw_len;
    uf->data = ualloc(u, m->raw_len);
    memcpy(uf->data, m->raw, m->raw_len);
}

/* Required fields are marked in a bitmap on the stack up to this many fields (then the arena). */
#define REQ_STACK_FIELDS 512

static int decode(unpacker *u, const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                  int depth, ProtobufCMessage **out)
{
    if (depth < 0) return -1;
    ProtobufCMessage *m = ualloc(u, d->sizeof_message);
    message_init(d, m);
    char *base = (char *)m;
    uint8_t req_stack[REQ_STACK_FIELDS / 8], *req = req_stack;
    size_t req_len = (d->n_fields + 7) / 8, n_unknown = 0;
    if (req_len > sizeof req_stack) req = ualloc(u, req_len);
    memset(req, 0, req_len);
    if (count_fields(d, base, p, len, &n_unknown, req) < 0) return -1;
    if (alloc_arrays(u, d, m, req, n_unknown) < 0 || u->over) return -1;
    unsigned hint = 0;
    for (size_t i = 0; i < len;) {
        member mb;
        if (read_member(p, len, &i, &mb) < 0) return -1; /* the count took it */
        const ProtobufCFieldDescriptor *f = field_of(d, mb.tag, &hint);
        if (!f)
            keep_unknown(u, m, &mb);
        else if (unpack_field(u, f, &mb, base, depth) < 0)
            return -1;
        if (u->over) return -1;
    }
    *out = m;
    return 0;
}

/* ---- a singular submessage sent again: protobuf-c's merge_messages, reimplemented --------- */

/* Repeated fields: the earlier elements, then the latter's, in a new array when both have some. */
static void merge_repeated(unpacker *u, const ProtobufCFieldDescriptor *f, char *e, char *l)
{
    size_t *ne = (size_t *)(e + f->quantifier_offset), *nl = (size_t *)(l + f->quantifier_offset);
    char **ae = (char **)(e + f->offset), **al = (char **)(l + f->offset);
    if (!*ne) return;
    if (*nl) {
        size_t w = pc_proto_elt_size(f->type);
        char *both = ualloc(u, (*ne + *nl) * w);
        memcpy(both, *ae, *ne * w);
        memcpy(both + *ne * w, *al, *nl * w);
        *al = both;
        *nl += *ne;
    } else {
        *al = *ae;
        *nl = *ne;
    }
    *ne = 0;
    *ae = NULL;
}

/* Whether the earlier value of a singular field f replaces the latter's. ec and lc are the
 * quantifiers (has_, the oneof case; for a proto3 field protobuf-c reads offset 0, the
 * descriptor pointer, so a proto3 scalar never does). */
static int earlier_wins(unpacker *u, const ProtobufCFieldDescriptor *f, char *e, char *l,
                        uint32_t ec, uint32_t lc)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_MESSAGE: {
        ProtobufCMessage *em = *(ProtobufCMessage **)(e + f->offset);
        ProtobufCMessage *lm = *(ProtobufCMessage **)(l + f->offset);
        if (em && lm) return merge(u, em, lm);
        return em && !lm;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const uint8_t *ed = ((ProtobufCBinaryData *)(e + f->offset))->data;
        const uint8_t *ld = ((ProtobufCBinaryData *)(l + f->offset))->data;
        const ProtobufCBinaryData *dv = f->default_value;
        return ed && (!dv || ed != dv->data) && (!ld || (dv && ld == dv->data));
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *es = *(char **)(e + f->offset), *ls = *(char **)(l + f->offset);
        return es != f->default_value && ls == f->default_value;
    }
    default: return ec != 0 && lc == 0;
    }
}

/* 0, or -1 where protobuf-c 1.4.1's merge fails: a oneof set in neither (it looks up the
 * member of case 0, finds none, and refuses the input). */
static int merge(unpacker *u, ProtobufCMessage *earlier, ProtobufCMessage *latter)
{
    const ProtobufCMessageDescriptor *d = latter->descriptor;
    char *e = (char *)earlier, *l = (char *)latter;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            merge_repeated(u, f, e, l);
            continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REQUIRED) continue;
        uint32_t *ec = (uint32_t *)(e + f->quantifier_offset);
        uint32_t *lc = (uint32_t *)(l + f->quantifier_offset);
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            /* the latter's member stays; else the earlier's set member moves over */
            if (*lc) continue;
            f = protobuf_c_message_descriptor_get_field(d, *ec);
            if (!f) return -1;
        }
        int wins = earlier_wins(u, f, e, l, *ec, *lc);
        if (wins <= 0) {
            if (wins < 0) return -1;
            continue;
        }
        size_t w = pc_proto_elt_size(f->type);
        memcpy(l + f->offset, e + f->offset, w);
        memset(e + f->offset, 0, w);
        if (f->quantifier_offset) {
            *lc = *ec;
            *ec = 0;
        }
    }
    return 0;
}

int pc_proto_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                    int max_depth, pc_arena *arena, ProtobufCMessage **out, pc_error *e)
{
    unpacker u = {.a = arena, .budget = pc_arena_budget(arena)};
    ProtobufCMessage *m = NULL;
    *out = NULL;
    if (decode(&u, desc, data, len, max_depth, &m) == 0 && !u.over) {
        *out = m;
        return 0;
    }
    /* Refused: the verdict and its words are the scan's when it refuses too (it names the field
     * of invalid UTF-8, and comes first in scan + unpack), then the budget's, then protobuf-c's.
     * A cold path: only refused input reads the bytes again. */
    pc_proto_scan scan;
    int rc = pc_proto_scan_message(desc, data, len, max_depth, &scan, e);
    if (rc < 0) return rc;
    if (u.over) return pc_error_set(e, u.budget->state, "over the decode budget");
    return pc_error_set(e, PC_EPROTO, "malformed protobuf");
}
