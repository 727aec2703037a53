/* The pre-unpack pass over protobuf input (proto_scan.h). Its cost model follows protobuf-c
 * 1.4's unpack: one struct per message, a ScannedMember per field occurrence beyond the 16 kept
 * on the stack (in slabs that double), one array per repeated field sized by a first count,
 * len + 1 per string, len per non-empty bytes, a copy and a slot per unknown field, and for a
 * singular message field seen again, new arrays holding both occurrences (merge_messages). */
#include "pdata/proto_scan.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"

#define R16(n) PC_PROTO_R16(n)
/* per-field bookkeeping for the first fields of a message; later ones are costed per element */
#define TRACKED PC_PROTO_TRACKED

typedef struct scan_ctx {
    const char *what; /* the refusal, set at the failing field */
    int code;         /* PC_EPROTO or PC_EINVAL */
    char where[200];  /* the field path of a UTF-8 refusal: "resource_profiles[0].resource..." */
} scan_ctx;

/* 0, or PC_EPROTO for a truncated or overlong varint. */
int pc_proto_read_varint_slow(const uint8_t *p, size_t len, size_t *i, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*i >= len) return PC_EPROTO;
        uint8_t b = p[(*i)++];
        if (shift < 64) x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return PC_EPROTO; /* more than 10 bytes */
}

/* Prepend "name[index]." to the error path as the recursion unwinds (the tail is cut when long). */
static void path_prepend(scan_ctx *o, const ProtobufCFieldDescriptor *f, long index)
{
    char head[96];
    int h = index >= 0 ? snprintf(head, sizeof head, "%s[%ld]", f->name, index)
                       : snprintf(head, sizeof head, "%s", f->name);
    size_t hl = h < 0 ? 0 : (size_t)h < sizeof head ? (size_t)h : sizeof head - 1;
    size_t wl = strlen(o->where), sep = wl ? 1 : 0, cap = sizeof o->where - 1;
    if (hl + sep > cap) return;
    if (hl + sep + wl > cap) wl = cap - hl - sep;
    memmove(o->where + hl + sep, o->where, wl);
    memcpy(o->where, head, hl);
    if (sep) o->where[hl] = '.';
    o->where[hl + sep + wl] = 0;
}

static int fail(scan_ctx *c, int code, const char *what)
{
    c->code = code;
    c->what = what;
    return code;
}

#define MALFORMED(c) fail(c, PC_EPROTO, "malformed protobuf")

/* A field's key at p[*i]: its number and wire type. 0, or the refusal in c. */
static int read_key(scan_ctx *c, const uint8_t *p, size_t len, size_t *i, unsigned *num,
                    unsigned *wt)
{
    uint64_t key;
    if (pc_proto_read_varint(p, len, i, &key)) return MALFORMED(c);
    /* protobuf-c accepts a padded tag for field 0 but cannot re-encode it */
    if (key >> 3 == 0) return fail(c, PC_EPROTO, "malformed protobuf (field number 0)");
    if (key >> 3 > UINT32_MAX) return MALFORMED(c);
    *wt = key & 7;
    *num = (unsigned)(key >> 3);
    return 0;
}

static int scan(scan_ctx *c, const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                int depth, size_t *cost_out)
{
    if (depth < 0) return fail(c, PC_EPROTO, "nested too deeply");
    size_t cost = R16(desc->sizeof_message);
    /* zeroed for this message's fields only: the scan runs once per Sample, and most messages
     * have a handful of fields */
    size_t nf = desc->n_fields < TRACKED ? desc->n_fields : TRACKED;
    size_t n_elems[TRACKED]; /* repeated: elements; singular message: occurrences */
    size_t merged[TRACKED];  /* singular message: cost of the occurrences so far */
    memset(n_elems, 0, nf * sizeof n_elems[0]);
    memset(merged, 0, nf * sizeof merged[0]);
    size_t occurrences = 0, unknown = 0;
    size_t i = 0;
    while (i < len) {
        uint64_t l = 0;
        unsigned wt, num;
        if (read_key(c, p, len, &i, &num, &wt) < 0) return c->code;
        size_t start = i;
        if (pc_proto_skip_value(p, len, wt, &i, &l)) return MALFORMED(c);
        occurrences++;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(desc, num);
        if (!f) { /* kept as an unknown field: a copy of the value and a slot */
            size_t vlen = wt == 2 ? (i - start) + (size_t)l : i - start;
            cost += R16(vlen);
            unknown++;
            if (wt == 2) i += (size_t)l;
            continue;
        }
        size_t fi = (size_t)(f - desc->fields);
        bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
        size_t n_new = 1; /* elements this occurrence adds to a repeated field */
        if (wt == 2) {
            const uint8_t *v = p + i;
            size_t vl = (size_t)l;
            i += vl;
            if (f->type == PROTOBUF_C_TYPE_STRING) {
                if (!pc_utf8_valid(v, vl)) {
                    c->where[0] = 0;
                    path_prepend(c, f, repeated && fi < TRACKED ? (long)n_elems[fi] : -1);
                    return fail(c, PC_EINVAL, "invalid UTF-8 in string field");
                }
                cost += R16(vl + 1);
            } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
                if (vl) cost += R16(vl);
            } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                size_t sub = 0;
                int rc = scan(c, f->descriptor, v, vl, depth - 1, &sub);
                if (rc < 0) {
                    path_prepend(c, f, repeated && fi < TRACKED ? (long)n_elems[fi] : -1);
                    return rc;
                }
                cost += sub;
                bool oneof = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
                if (!repeated && !oneof) {
                    /* each occurrence after the first is merged into new arrays holding all
                     * occurrences so far; untracked fields are costed as if merged fully */
                    size_t acc = fi < TRACKED ? (merged[fi] += sub) : sub * 2;
                    if (fi >= TRACKED || n_elems[fi]++ > 0) cost += acc;
                    continue;
                }
            } else if (repeated) { /* a packed run of scalars */
                long long n = pc_proto_packed_count(f->type, v, vl);
                if (n < 0) return MALFORMED(c);
                n_new = (size_t)n;
            }
        }
        if (repeated) {
            if (fi < TRACKED)
                n_elems[fi] += n_new;
            else
                cost += R16(n_new * pc_proto_elt_size(f->type));
        }
    }
    *cost_out = cost + pc_proto_tail_cost(desc, nf, n_elems, unknown, occurrences);
    return 0;
}

int pc_proto_scan_message(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                          int max_depth, pc_proto_scan *out, pc_error *e)
{
    memset(out, 0, sizeof *out);
    scan_ctx c = {0};
    size_t cost = 0;
    int rc = scan(&c, desc, data, len, max_depth, &cost);
    if (rc < 0) {
        if (rc == PC_EINVAL) return pc_error_set(e, rc, "%s %s", c.what, c.where);
        return pc_error_set(e, rc, "%s", c.what);
    }
    out->cost = cost;
    return 0;
}
