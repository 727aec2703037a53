/* pc_proto_unpack (src/pdata/proto_unpack.h) against its oracle, the path it replaces:
 * pc_proto_scan_message then protobuf-c's own protobuf_c_message_unpack, for test_proto_unpack
 * and fuzz_proto_unpack. The verdicts must agree (code and message); when both take the input,
 * the two models must be equal field by field (deep compare over the descriptors: counts,
 * has_ flags, oneof cases, values, strings and bytes, unknown fields) and protobuf-c must pack
 * them to the same bytes. */
#ifndef PC_UNPACK_ORACLE_H
#define PC_UNPACK_ORACLE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>

#include "base/arena.h"
#include "pdata/pdata.h"
#include "pdata/proto_scan.h"
#include "pdata/proto_unpack.h"

static bool uo_same(const ProtobufCMessage *a, const ProtobufCMessage *b, char *why, size_t n);

/* One value of type t at a and b (a struct member or an array element). */
static bool uo_same_value(const ProtobufCFieldDescriptor *f, const void *a, const void *b,
                          char *why, size_t n)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *x = *(const char *const *)a, *y = *(const char *const *)b;
        /* protobuf-c's init leaves the default (or protobuf_c_empty_string) where nothing came */
        bool same = x == y || (x && y && strcmp(x, y) == 0 &&
                               (x == f->default_value) == (y == f->default_value));
        if (!same) snprintf(why, n, "%s: string %s / %s", f->name, x ? x : "NULL", y ? y : "NULL");
        return same;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *x = a, *y = b;
        bool same = x->len == y->len && (!x->data) == (!y->data) &&
                    (!x->len || memcmp(x->data, y->data, x->len) == 0);
        if (!same) snprintf(why, n, "%s: bytes of %zu / %zu", f->name, x->len, y->len);
        return same;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *x = *(const ProtobufCMessage *const *)a;
        const ProtobufCMessage *y = *(const ProtobufCMessage *const *)b;
        if (!x || !y) {
            if (x != y) snprintf(why, n, "%s: message %p / %p", f->name, (void *)x, (void *)y);
            return x == y;
        }
        return uo_same(x, y, why, n);
    }
    default:
        if (memcmp(a, b, pc_proto_elt_size(f->type)) == 0) return true;
        snprintf(why, n, "field %u (type %d): value differs", f->id, f->type);
        return false;
    }
}

static bool uo_same_field(const ProtobufCFieldDescriptor *f, const char *a, const char *b,
                          char *why, size_t n)
{
    const char *qa = a + f->quantifier_offset, *qb = b + f->quantifier_offset;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        size_t na = *(const size_t *)qa, nb = *(const size_t *)qb, w = pc_proto_elt_size(f->type);
        if (na != nb) {
            snprintf(why, n, "%s: %zu elements / %zu", f->name, na, nb);
            return false;
        }
        const char *xa = *(const char *const *)(a + f->offset);
        const char *xb = *(const char *const *)(b + f->offset);
        for (size_t i = 0; i < na; i++)
            if (!uo_same_value(f, xa + i * w, xb + i * w, why, n)) return false;
        return true;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t ca = *(const uint32_t *)qa, cb = *(const uint32_t *)qb;
        if (ca != cb) {
            snprintf(why, n, "%s: oneof case %u / %u", f->name, ca, cb);
            return false;
        }
        if (ca != f->id) return true;
    } else if (f->label != PROTOBUF_C_LABEL_REQUIRED && f->quantifier_offset) {
        if (*(const protobuf_c_boolean *)qa != *(const protobuf_c_boolean *)qb) {
            snprintf(why, n, "%s: has_ differs", f->name);
            return false;
        }
    }
    return uo_same_value(f, a + f->offset, b + f->offset, why, n);
}

static bool uo_same(const ProtobufCMessage *a, const ProtobufCMessage *b, char *why, size_t n)
{
    const ProtobufCMessageDescriptor *d = a->descriptor;
    if (d != b->descriptor) {
        snprintf(why, n, "descriptors differ");
        return false;
    }
    for (unsigned i = 0; i < d->n_fields; i++)
        if (!uo_same_field(&d->fields[i], (const char *)a, (const char *)b, why, n)) return false;
    if (a->n_unknown_fields != b->n_unknown_fields) {
        snprintf(why, n, "%s: %u unknown fields / %u", d->name, a->n_unknown_fields,
                 b->n_unknown_fields);
        return false;
    }
    for (unsigned i = 0; i < a->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *x = &a->unknown_fields[i], *y = &b->unknown_fields[i];
        if (x->tag != y->tag || x->wire_type != y->wire_type || x->len != y->len ||
            memcmp(x->data, y->data, x->len) != 0) {
            snprintf(why, n, "%s: unknown field %u differs", d->name, i);
            return false;
        }
    }
    return true;
}

/* Both packed by protobuf-c: the same bytes. */
static bool uo_same_bytes(const ProtobufCMessage *a, const ProtobufCMessage *b, char *why, size_t n)
{
    size_t la = protobuf_c_message_get_packed_size(a), lb = protobuf_c_message_get_packed_size(b);
    uint8_t *pa = malloc(la + 1), *pb = malloc(lb + 1);
    if (!pa || !pb) abort();
    bool same = la == lb && protobuf_c_message_pack(a, pa) == la &&
                protobuf_c_message_pack(b, pb) == lb && memcmp(pa, pb, la) == 0;
    if (!same) snprintf(why, n, "packed to %zu bytes / %zu", la, lb);
    free(pa);
    free(pb);
    return same;
}

/* 1 when both refused it alike, 0 when both took it alike, -1 (why set) when they differ. */
static int unpack_compare(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                          char *why, size_t n)
{
    pc_error ref_err = {0}, err = {0};
    pc_proto_scan scan;
    int ref_rc = pc_proto_scan_message(desc, data, len, PC_PROTO_MAX_DEPTH, &scan, &ref_err);
    ProtobufCMessage *ref = NULL;
    if (ref_rc == 0) {
        ref = protobuf_c_message_unpack(desc, NULL, len, data);
        if (!ref) ref_rc = pc_error_set(&ref_err, PC_EPROTO, "malformed protobuf");
    }
    pc_arena *a = pc_arena_new(256);
    ProtobufCMessage *m = NULL;
    int rc = pc_proto_unpack(desc, data, len, PC_PROTO_MAX_DEPTH, a, &m, &err);
    int out = ref_rc < 0 ? 1 : 0;
    if (rc != ref_rc || (rc < 0 && strcmp(err.msg, ref_err.msg) != 0)) {
        snprintf(why, n, "%s: pc_proto_unpack %d \"%.150s\", scan + protobuf-c %d \"%.150s\"",
                 desc->name, rc, rc < 0 ? err.msg : "", ref_rc, ref_rc < 0 ? ref_err.msg : "");
        out = -1;
    } else if (rc == 0 && !m) {
        snprintf(why, n, "%s: took it without a message", desc->name);
        out = -1;
    } else if (rc == 0 && (!uo_same(ref, m, why, n) || !uo_same_bytes(ref, m, why, n))) {
        out = -1;
    } else if (rc < 0 && m) {
        snprintf(why, n, "%s: refused it with a message", desc->name);
        out = -1;
    }
    if (ref) protobuf_c_message_free_unpacked(ref, NULL);
    pc_arena_free(a);
    return out;
}

#endif
