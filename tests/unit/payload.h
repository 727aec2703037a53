/* Payloads for unit tests, built and read back independently of the code under test's encoders:
 * batches from hand-written OTLP JSON (a test fixture that does not decode is a broken test:
 * exit), hand-made protobuf bytes (shapes no encoder would write), pprof messages decoded with
 * protobuf-c, and short views of a batch (a profile, a stack's function names). Real profiles
 * from tests/data are read by testdata.h. */
#ifndef PC_PAYLOAD_H
#define PC_PAYLOAD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gzip.h"
#include "pdata/pdata.h"
#include "pprof.pb-c.h"

/* ---- OTLP JSON fixtures ---- */

/* The batch json (len bytes) decodes to, not validated (a test of validation wants it as it
 * is). */
static inline pc_batch *decode_json_n_or_die(const char *json, size_t len)
{
    pc_batch *b = NULL;
    pc_error err = {0};
    if (pc_batch_decode_json(json, len, &b, &err) < 0) {
        fprintf(stderr, "decode_json: %s\n%.*s\n", err.msg, (int)len, json);
        exit(1);
    }
    return b;
}

/* The same for a NUL-terminated request. */
static inline pc_batch *decode_json_or_die(const char *json)
{
    return decode_json_n_or_die(json, strlen(json));
}

/* b, which must validate with nothing rejected. */
static inline pc_batch *validate_or_die(pc_batch *b)
{
    pc_error err = {0};
    int64_t rejected = 0;
    if (pc_batch_validate(b, &rejected, &err) < 0 || rejected) {
        fprintf(stderr, "test batch invalid: %s\n", err.msg);
        exit(1);
    }
    return b;
}

/* A valid batch from a NUL-terminated OTLP JSON request. */
static inline pc_batch *batch_from_json(const char *json)
{
    return validate_or_die(decode_json_or_die(json));
}

/* ---- views of a batch ---- */

/* Profile i of the first scope of the first resource. */
static inline pc_profile *nth_profile(const pc_batch *b, size_t i)
{
    return b->req->resource_profiles[0]->scope_profiles[0]->profiles[i];
}

static inline pc_profile *first_profile(const pc_batch *b)
{
    return nth_profile(b, 0);
}

/* The function names of stack stack_index (each location's first line), leaf first, joined by
 * sep, into out. */
static inline const char *stack_names(const pc_batch *b, int32_t stack_index, const char *sep,
                                      char *out, size_t n)
{
    const pc_dictionary *d = b->req->dictionary;
    const pc_stack *st = d->stack_table[stack_index];
    out[0] = 0;
    for (size_t i = 0; i < st->n_location_indices; i++) {
        const pc_location *l = d->location_table[st->location_indices[i]];
        const pc_function *f = d->function_table[l->lines[0]->function_index];
        if (i) strncat(out, sep, n - strlen(out) - 1);
        strncat(out, pc_dict_str(d, f->name_strindex), n - strlen(out) - 1);
    }
    return out;
}

/* ---- hand-made protobuf ---- */

static inline void pb_put_varint(pc_buf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pc_buf_append(b, t, n);
}

/* A length-delimited field (wire type 2): tag, length, bytes. */
static inline void pb_put_len(pc_buf *b, unsigned field, const void *p, size_t n)
{
    pb_put_varint(b, (uint64_t)field << 3 | 2);
    pb_put_varint(b, n);
    pc_buf_append(b, p, n);
}

/* ---- pprof, read with protobuf-c ---- */

typedef Perftools__Profiles__Profile pp_profile;

/* A pprof message (gzip or not), or NULL if it does not decode; free with
 * perftools__profiles__profile__free_unpacked. */
static inline pp_profile *decode_pprof(const uint8_t *data, size_t len)
{
    pc_buf raw = {0};
    if (pc_is_gzip(data, len)) {
        if (pc_gzip_inflate(data, len, 1u << 28, &raw) < 0) return NULL;
        data = raw.data;
        len = raw.len;
    }
    pp_profile *p = perftools__profiles__profile__unpack(NULL, len, data);
    pc_buf_free(&raw);
    return p;
}

/* String i of p's table, "<bad>" when out of range. */
static inline const char *pstr(const pp_profile *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "<bad>";
}

#endif
