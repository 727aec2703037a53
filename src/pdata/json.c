/* Generic OTLP JSON codec driven by protobuf-c descriptors (ARCHITECTURE.md §3): no per-message
 * code. Decoding parses with jansson and fills arena-allocated protobuf-c structs; encoding walks
 * the descriptors and writes JSON text directly into a pc_buf. */
#include "pdata/json.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/base64.h"
#include "base/hex.h"

/* ---------------------------------------------------------------------------------------------
 * Shared helpers
 * ------------------------------------------------------------------------------------------- */

/* OTLP (and the Collector's pdata) write these bytes fields as hex rather than base64. */
static int hex_field_len(const ProtobufCFieldDescriptor *f)
{
    if (f->type != PROTOBUF_C_TYPE_BYTES) return -1;
    if (strcmp(f->name, "trace_id") == 0) return 16;
    if (strcmp(f->name, "span_id") == 0 || strcmp(f->name, "parent_span_id") == 0) return 8;
    if (strcmp(f->name, "profile_id") == 0) return 16;
    return -1;
}

/* protoc's ToJsonName: drop underscores, upper-case the character after one. */
static size_t camel_name(const char *snake, char *out, size_t outlen)
{
    size_t n = 0;
    bool up = false;
    for (; *snake; snake++) {
        if (*snake == '_') {
            up = true;
            continue;
        }
        char c = *snake;
        if (up && c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
        up = false;
        if (n + 1 < outlen) out[n] = c;
        n++;
    }
    if (outlen) out[n < outlen ? n : outlen - 1] = 0;
    return n;
}

/* Whether key is snake's JSON name (field names are short: a longer one is never matched). */
static bool key_is_camel(const char *snake, const char *key)
{
    char camel[128];
    return camel_name(snake, camel, sizeof camel) < sizeof camel && strcmp(camel, key) == 0;
}

static size_t elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return 8;
    case PROTOBUF_C_TYPE_FLOAT: return sizeof(float);
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM: return sizeof(int);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* In protobuf-c, optional (proto2 / proto3 `optional`) fields other than strings and messages
 * carry a has_<field> flag at quantifier_offset. */
static bool has_flag(const ProtobufCFieldDescriptor *f)
{
    return f->label == PROTOBUF_C_LABEL_OPTIONAL && !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
           f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE;
}

/* ---------------------------------------------------------------------------------------------
 * Decoder
 * ------------------------------------------------------------------------------------------- */

typedef struct frame {
    const ProtobufCFieldDescriptor *field;
    size_t index; /* SIZE_MAX: not an array element */
} frame;

typedef struct dctx {
    pc_arena *arena;
    pc_error *e;
    int depth; /* message nesting */
    int nframes;
    frame frames[PC_JSON_MAX_DEPTH * 2 + 8];
} dctx;

/* PC_EINVAL with "a[1].bC[2]: msg" from the frame stack; a very long path keeps its start and
 * end. */
static int fail(dctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(dctx *c, const char *fmt, ...)
{
    if (!c->e) return PC_EINVAL;
    char path[4096];
    size_t n = 0;
    path[0] = 0;
    for (int i = 0; i < c->nframes && n < sizeof(path) - 1; i++) {
        char name[128];
        camel_name(c->frames[i].field->name, name, sizeof(name));
        int w;
        if (c->frames[i].index == SIZE_MAX)
            w = snprintf(path + n, sizeof(path) - n, "%s%s", i ? "." : "", name);
        else
            w = snprintf(path + n, sizeof(path) - n, "%s%s[%zu]", i ? "." : "", name,
                         c->frames[i].index);
        if (w < 0) break;
        n += (size_t)w;
        if (n >= sizeof(path)) n = sizeof(path) - 1;
    }
    enum { HEAD = 80, TAIL = 120 };
    if (n > HEAD + TAIL + 3) {
        memmove(path + HEAD + 3, path + n - TAIL, TAIL + 1);
        memcpy(path + HEAD, "...", 3);
        n = HEAD + 3 + TAIL;
    }
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n) return pc_error_set(c->e, PC_EINVAL, "%s: %s", path, msg);
    return pc_error_set(c->e, PC_EINVAL, "%s", msg);
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER:
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Decimal integer text: optional '-', then 1..20 digits, nothing else. PC_EINVAL when it is not
 * one, PC_E2BIG when it does not fit 64 bits. */
static int parse_dec(const char *s, size_t len, bool *neg, uint64_t *mag)
{
    size_t i = 0;
    *neg = false;
    if (i < len && s[i] == '-') {
        *neg = true;
        i++;
    }
    if (i == len || len - i > 20) return PC_EINVAL;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return PC_EINVAL;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return PC_E2BIG; /* overflow */
        v = v * 10 + d;
    }
    *mag = v;
    return 0;
}

/* A JSON value holding an integer (number, integral real or decimal string) as sign+magnitude. */
static int get_integer(dctx *c, const json_t *v, bool *neg, uint64_t *mag)
{
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        *neg = x < 0;
        *mag = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!isfinite(d) || d != trunc(d)) return fail(c, "not an integer");
        *neg = d < 0;
        double a = fabs(d);
        if (a >= 18446744073709551616.0) return fail(c, "integer out of range");
        *mag = (uint64_t)a;
        return 0;
    }
    if (json_is_string(v)) {
        int r = parse_dec(json_string_value(v), json_string_length(v), neg, mag);
        if (r == PC_E2BIG) return fail(c, "integer out of range");
        if (r < 0) return fail(c, "not an integer");
        return 0;
    }
    return fail(c, "not an integer (got %s)", json_type_name(v));
}

static int get_signed(dctx *c, const json_t *v, int64_t min, int64_t max, int64_t *out)
{
    bool neg = false;
    uint64_t mag = 0;
    if (get_integer(c, v, &neg, &mag) < 0) return PC_EINVAL;
    if (neg) {
        if (mag > (uint64_t)0 - (uint64_t)min) return fail(c, "integer out of range");
        *out = mag == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)max) return fail(c, "integer out of range");
        *out = (int64_t)mag;
    }
    return 0;
}

static int get_unsigned(dctx *c, const json_t *v, uint64_t max, uint64_t *out)
{
    bool neg = false;
    uint64_t mag = 0;
    if (get_integer(c, v, &neg, &mag) < 0) return PC_EINVAL;
    if (neg && mag != 0) return fail(c, "negative value for an unsigned integer");
    if (mag > max) return fail(c, "integer out of range");
    *out = mag;
    return 0;
}

static int get_double(dctx *c, const json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        if (strcmp(s, "NaN") == 0) {
            *out = NAN;
            return 0;
        }
        if (strcmp(s, "Infinity") == 0) {
            *out = INFINITY;
            return 0;
        }
        if (strcmp(s, "-Infinity") == 0) {
            *out = -INFINITY;
            return 0;
        }
        /* a number in a string: JSON number syntax only (no hex, inf, nan, spaces) */
        bool ok = len > 0 && len < 64;
        for (size_t i = 0; ok && i < len; i++)
            ok = (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '+' || s[i] == '.' ||
                 s[i] == 'e' || s[i] == 'E';
        if (ok) {
            char *end;
            errno = 0;
            double d = strtod(s, &end);
            if (end == s + len && errno == 0) {
                *out = d;
                return 0;
            }
        }
        return fail(c, "not a number");
    }
    return fail(c, "not a number (got %s)", json_type_name(v));
}

static int get_bytes(dctx *c, const ProtobufCFieldDescriptor *f, const json_t *v,
                     ProtobufCBinaryData *out)
{
    if (!json_is_string(v)) return fail(c, "expected a string (got %s)", json_type_name(v));
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    out->len = 0;
    out->data = NULL;
    if (len == 0) return 0;
    int want = hex_field_len(f);
    if (want >= 0) {
        if (len % 2) return fail(c, "invalid hex: odd length %zu", len);
        if (len / 2 != (size_t)want)
            return fail(c, "invalid length: %zu hex digits, want %d", len, want * 2);
        uint8_t *d = pc_arena_alloc(c->arena, len / 2);
        if (!pc_hex_decode(s, len, d, len / 2)) return fail(c, "invalid hex character");
        out->data = d;
        out->len = len / 2;
        return 0;
    }
    /* base64, standard or URL-safe alphabet, padding optional */
    size_t n = len;
    while (n > 0 && s[n - 1] == '=')
        n--;
    if (len - n > 2 || (len - n > 0 && len % 4 != 0)) return fail(c, "invalid base64 padding");
    if (n % 4 == 1) return fail(c, "invalid base64 length");
    uint8_t *d = pc_arena_alloc(c->arena, n / 4 * 3 + 3);
    ssize_t o = pc_base64_decode(s, n, d);
    if (o < 0) return fail(c, "invalid base64 character");
    out->data = d;
    out->len = (size_t)o;
    return 0;
}

static int decode_message(dctx *c, const ProtobufCMessageDescriptor *desc, const json_t *obj,
                          ProtobufCMessage **out);

/* An integer of a signed or unsigned 32- or 64-bit field, range-checked, into dst. */
static int decode_integer(dctx *c, const json_t *v, bool sgn, bool wide, void *dst)
{
    if (sgn) {
        int64_t s = 0;
        if (get_signed(c, v, wide ? INT64_MIN : INT32_MIN, wide ? INT64_MAX : INT32_MAX, &s) < 0)
            return PC_EINVAL;
        if (wide)
            *(int64_t *)dst = s;
        else
            *(int32_t *)dst = (int32_t)s;
        return 0;
    }
    uint64_t u = 0;
    if (get_unsigned(c, v, wide ? UINT64_MAX : UINT32_MAX, &u) < 0) return PC_EINVAL;
    if (wide)
        *(uint64_t *)dst = u;
    else
        *(uint32_t *)dst = (uint32_t)u;
    return 0;
}

/* One (non-repeated) value of field f from v into dst. */
static int decode_value(dctx *c, const ProtobufCFieldDescriptor *f, const json_t *v, void *dst)
{
    double d = 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return decode_integer(c, v, true, false, dst);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return decode_integer(c, v, false, false, dst);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return decode_integer(c, v, true, true, dst);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return decode_integer(c, v, false, true, dst);
    case PROTOBUF_C_TYPE_DOUBLE:
        if (get_double(c, v, &d) < 0) return PC_EINVAL;
        *(double *)dst = d;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT:
        if (get_double(c, v, &d) < 0) return PC_EINVAL;
        if (isfinite(d) && (d > 3.4028234663852886e38 || d < -3.4028234663852886e38))
            return fail(c, "float out of range");
        *(float *)dst = (float)d;
        return 0;
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v)) return fail(c, "expected a boolean (got %s)", json_type_name(v));
        *(protobuf_c_boolean *)dst = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_ENUM:
        if (json_is_string(v) && f->descriptor) {
            const ProtobufCEnumValue *ev =
                protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, json_string_value(v));
            if (ev) {
                *(int *)dst = ev->value;
                return 0;
            }
        }
        return decode_integer(c, v, true, false, dst); /* an int: protobuf-c's enum storage */
    case PROTOBUF_C_TYPE_STRING:
        if (!json_is_string(v)) return fail(c, "expected a string (got %s)", json_type_name(v));
        *(char **)dst = pc_arena_strndup(c->arena, json_string_value(v), json_string_length(v));
        return 0;
    case PROTOBUF_C_TYPE_BYTES: return get_bytes(c, f, v, dst);
    case PROTOBUF_C_TYPE_MESSAGE:
        return decode_message(c, f->descriptor, v, (ProtobufCMessage **)dst);
    }
    return fail(c, "unsupported field type");
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *desc,
                                                  const char *key)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(desc, key);
    if (f) return f;
    for (unsigned i = 0; i < desc->n_fields; i++)
        if (key_is_camel(desc->fields[i].name, key)) return &desc->fields[i];
    return NULL;
}

static int decode_field(dctx *c, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                        const json_t *v)
{
    char *base = (char *)msg;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        if (!json_is_array(v)) return fail(c, "expected an array (got %s)", json_type_name(v));
        size_t n = json_array_size(v), sz = elem_size(f->type);
        void *arr = n ? pc_arena_calloc(c->arena, n, sz) : NULL;
        /* keep the message consistent even if an element fails */
        *(size_t *)(base + f->quantifier_offset) = 0;
        *(void **)(base + f->offset) = arr;
        frame *fr = &c->frames[c->nframes - 1];
        for (size_t i = 0; i < n; i++) {
            const json_t *e = json_array_get(v, i);
            fr->index = i;
            if (json_is_null(e)) return fail(c, "null is not allowed in an array");
            if (decode_value(c, f, e, (char *)arr + i * sz) < 0) return PC_EINVAL;
        }
        *(size_t *)(base + f->quantifier_offset) = n;
        return 0;
    }
    if (decode_value(c, f, v, base + f->offset) < 0) return PC_EINVAL;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        *(uint32_t *)(base + f->quantifier_offset) = f->id;
    else if (has_flag(f))
        *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
    return 0;
}

static int decode_message(dctx *c, const ProtobufCMessageDescriptor *desc, const json_t *obj,
                          ProtobufCMessage **out)
{
    if (!json_is_object(obj)) return fail(c, "expected an object (got %s)", json_type_name(obj));
    if (c->depth >= PC_JSON_MAX_DEPTH) return fail(c, "nesting too deep");
    if ((size_t)c->nframes >= sizeof(c->frames) / sizeof(c->frames[0]))
        return fail(c, "nesting too deep");
    ProtobufCMessage *msg = pc_arena_alloc(c->arena, desc->sizeof_message);
    if (desc->message_init)
        desc->message_init(msg);
    else
        protobuf_c_message_init(desc, msg);
    *out = msg;
    c->depth++;
    const char *key;
    json_t *v;
    /* a field given twice (as "memoryStart" and "memory_start") or two members of one oneof lose
     * data whichever wins: refused, as protojson refuses them (duplicate keys are refused by the
     * parser already) */
    uint64_t seen = 0;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (json_is_null(v)) continue;
        const ProtobufCFieldDescriptor *f = find_field(desc, key);
        if (!f) continue; /* unknown keys are ignored */
        if (!pc_budget_ok(pc_arena_budget(c->arena))) return fail(c, "over the decode budget");
        size_t fi = (size_t)(f - desc->fields);
        if (fi < 64) {
            if (seen & (1ull << fi)) return fail(c, "duplicate field \"%s\"", key);
            seen |= 1ull << fi;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t cur = *(uint32_t *)((char *)msg + f->quantifier_offset);
            if (cur && cur != f->id) return fail(c, "more than one member of a oneof is set");
        }
        c->frames[c->nframes].field = f;
        c->frames[c->nframes].index = SIZE_MAX;
        c->nframes++;
        int r = decode_field(c, msg, f, v);
        c->nframes--;
        if (r < 0) return PC_EINVAL;
    }
    c->depth--;
    return 0;
}

/* ---- what a JSON document costs, before jansson builds its tree ---- */

/* jansson's allocations go through these, so a decode's parser tree is charged to its budget;
 * outside a budgeted decode they are plain malloc and free. */
static _Thread_local pc_budget *tls_budget;

static void *budget_malloc(size_t n)
{
    void *p = malloc(n);
    if (p && tls_budget && pc_budget_charge(tls_budget, malloc_usable_size(p)) < 0) {
        pc_budget_uncharge(tls_budget, malloc_usable_size(p));
        free(p);
        return NULL; /* jansson fails the parse with "out of memory" */
    }
    return p;
}

static void budget_free(void *p)
{
    if (p && tls_budget) pc_budget_uncharge(tls_budget, malloc_usable_size(p));
    free(p);
}

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static void install_hooks(void)
{
    json_set_alloc_funcs(budget_malloc, budget_free);
}

typedef struct json_counts {
    size_t objects, arrays, members, values, big_ints;
} json_counts;

/* Is the integer token s[0..n) outside int64? (JSON integer grammar assumed.) */
static bool int_outside_i64(const char *s, size_t n)
{
    bool neg = s[0] == '-';
    size_t d = n - neg;
    if (d < 19) return false;
    if (d > 19) return true;
    return memcmp(s + neg, neg ? "9223372036854775808" : "9223372036854775807", 19) > 0;
}

/* One pass over the text outside strings: counts what jansson will allocate and finds integer
 * tokens jansson cannot hold (it refuses anything outside int64, so 64-bit unsigned values written
 * as numbers, as Go's and Python's OTLP encoders write them, need quoting first). A token at
 * [i, j) is an integer when it is -?(0|[1-9][0-9]*) and no '.', 'e' or 'E' follows. */
static void json_count(const char *s, size_t len, json_counts *o, char *out, size_t *outlen)
{
    size_t w = 0;
    for (size_t i = 0; i < len;) {
        char ch = s[i];
        if (ch == '"') {
            size_t j = i + 1;
            while (j < len && s[j] != '"')
                j += s[j] == '\\' ? 2 : 1;
            j = j < len ? j + 1 : len;
            if (out) memcpy(out + w, s + i, j - i), w += j - i;
            o->values++;
            i = j;
            continue;
        }
        if (ch == '-' || (ch >= '0' && ch <= '9')) {
            size_t j = i + (ch == '-');
            size_t digits = j;
            while (j < len && s[j] >= '0' && s[j] <= '9')
                j++;
            bool integer = j > digits && !(s[digits] == '0' && j - digits > 1) &&
                           !(j < len && (s[j] == '.' || s[j] == 'e' || s[j] == 'E'));
            bool quote = integer && int_outside_i64(s + i, j - i);
            o->big_ints += quote;
            if (out) {
                if (quote) out[w++] = '"';
                memcpy(out + w, s + i, j - i), w += j - i;
                if (quote) out[w++] = '"';
            }
            o->values++;
            i = j;
            continue;
        }
        o->objects += ch == '{';
        o->arrays += ch == '[';
        o->members += ch == ':';
        o->values += ch == 't' || ch == 'f' || ch == 'n';
        if (out) out[w++] = ch;
        i++;
    }
    if (outlen) *outlen = w;
}

/* Bytes jansson takes per object (struct, hashtable, first bucket array), per member (pair with
 * list links and a bucket slot as the table doubles), per array (struct and first table), per
 * value (a string or number struct, an array slot), plus the text itself for keys and strings;
 * the decoded structs and pointer arrays come on top. Measured with malloc_usable_size on
 * jansson 2.14 (tests/unit/test_json.c keeps the estimate above the real use). */
static size_t json_estimate(const json_counts *k, size_t len)
{
    return k->objects * 480 + k->members * 128 + k->arrays * 224 + k->values * 96 + len * 3;
}

size_t pc_json_decode_estimate(const char *json, size_t len)
{
    json_counts k = {0};
    json_count(json, len, &k, NULL, NULL);
    return json_estimate(&k, len);
}

int pc_json_decode(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                   pc_arena *arena, ProtobufCMessage **out, pc_error *e)
{
    *out = NULL;
    pc_budget *budget = pc_arena_budget(arena);
    json_counts k = {0};
    json_count(json, len, &k, NULL, NULL);
    if (budget && pc_budget_reserve(budget, json_estimate(&k, len), "decoded JSON request") < 0)
        return pc_error_set(e, budget->state, "%s: over the decode budget", budget->what);
    char *quoted = NULL;
    if (k.big_ints) {
        size_t qlen = len + 2 * k.big_ints;
        quoted = pc_xmalloc(qlen);
        pc_arena_charge(arena, qlen);
        json_count(json, len, &(json_counts){0}, quoted, &len);
        json = quoted;
    }
    pthread_once(&hooks_once, install_hooks);
    pc_budget *prev = tls_budget;
    tls_budget = budget;
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    int r = PC_EINVAL;
    if (!root) {
        if (!pc_budget_ok(budget))
            r = pc_error_set(e, budget->state, "%s: over the decode budget", budget->what);
        else if (json_error_code(&jerr) == json_error_null_character)
            /* jansson's text names its own flag; the client wants the reason (docs/limits.md) */
            pc_error_set(e, PC_EINVAL,
                         "invalid JSON at line %d column %d: \\u0000 (a NUL byte) in a string: "
                         "profcol holds strings without NUL bytes",
                         jerr.line, jerr.column);
        else
            pc_error_set(e, PC_EINVAL, "invalid JSON at line %d column %d: %s", jerr.line,
                         jerr.column, jerr.text);
        goto out;
    }
    dctx *c = pc_xcalloc(1, sizeof(*c));
    c->arena = arena;
    c->e = e;
    ProtobufCMessage *msg = NULL;
    r = decode_message(c, desc, root, &msg);
    free(c);
    json_decref(root);
    /* a refusal by the budget wins over the error it caused */
    if (!pc_budget_ok(budget))
        r = pc_error_set(e, budget->state, "%s: over the decode budget", budget->what);
    if (r == 0) *out = msg;
out:
    tls_budget = prev;
    if (quoted) {
        free(quoted);
        pc_arena_uncharge(arena, len);
    }
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Encoder
 * ------------------------------------------------------------------------------------------- */

static inline char *wr(pc_buf *b, size_t n)
{
    pc_buf_reserve(b, n + 1);
    return (char *)b->data + b->len;
}

static inline void put(pc_buf *b, const char *s, size_t n)
{
    memcpy(wr(b, n), s, n);
    b->len += n;
}

static inline void putc_(pc_buf *b, char ch)
{
    *wr(b, 1) = ch;
    b->len++;
}

static void put_u64(pc_buf *b, uint64_t v, bool quote)
{
    char *p = wr(b, 24), *s = p;
    if (quote) *p++ = '"';
    p += pc_fmt_u64(p, v);
    if (quote) *p++ = '"';
    b->len += (size_t)(p - s);
}

static void put_i64(pc_buf *b, int64_t v, bool quote)
{
    char *p = wr(b, 24), *s = p;
    if (quote) *p++ = '"';
    if (v < 0) *p++ = '-';
    p += pc_fmt_u64(p, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
    if (quote) *p++ = '"';
    b->len += (size_t)(p - s);
}

/* Shortest of %.{15,16,17}g that reads back exactly (%.17g always does). */
static void put_double(pc_buf *b, double d, bool is_float)
{
    if (isnan(d)) {
        put(b, "\"NaN\"", 5);
        return;
    }
    if (isinf(d)) {
        if (d > 0)
            put(b, "\"Infinity\"", 10);
        else
            put(b, "\"-Infinity\"", 11);
        return;
    }
    if (d == 0) {
        /* "-0" would read back as the integer 0: keep the sign with a fraction */
        if (signbit(d))
            put(b, "-0.0", 4);
        else
            put(b, "0", 1);
        return;
    }
    char tmp[40];
    int n = 0;
    if (is_float) {
        for (int prec = 6; prec <= 9; prec++) {
            n = snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
            if ((float)strtod(tmp, NULL) == (float)d) break;
        }
    } else {
        for (int prec = 15; prec <= 17; prec++) {
            n = snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
            if (prec == 17 || strtod(tmp, NULL) == d) break;
        }
    }
    put(b, tmp, (size_t)n);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c0 = s[0];
    if (c0 < 0x80) return 1;
    if (c0 >= 0xC2 && c0 <= 0xDF) return n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c0 >= 0xE0 && c0 <= 0xEF) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c0 == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c0 == 0xED && s[1] > 0x9F) return 0; /* surrogate */
        return 3;
    }
    if (c0 >= 0xF0 && c0 <= 0xF4) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (c0 == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c0 == 0xF4 && s[1] > 0x8F) return 0; /* > U+10FFFF */
        return 4;
    }
    return 0;
}

/* A JSON string; invalid UTF-8 bytes become U+FFFD so the output is always valid JSON text. */
static void put_string(pc_buf *b, const char *str, size_t len)
{
    static const char hexd[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    /* worst case: every byte becomes \u00XX (6) or U+FFFD (3) */
    char *p = wr(b, len * 6 + 2), *start = p;
    *p++ = '"';
    size_t i = 0;
    while (i < len) {
        unsigned char ch = s[i];
        if (ch >= 0x20 && ch < 0x80 && ch != '"' && ch != '\\') {
            *p++ = (char)ch;
            i++;
            continue;
        }
        if (ch < 0x80) {
            *p++ = '\\';
            switch (ch) {
            case '"': *p++ = '"'; break;
            case '\\': *p++ = '\\'; break;
            case '\n': *p++ = 'n'; break;
            case '\r': *p++ = 'r'; break;
            case '\t': *p++ = 't'; break;
            case '\b': *p++ = 'b'; break;
            case '\f': *p++ = 'f'; break;
            default:
                *p++ = 'u';
                *p++ = '0';
                *p++ = '0';
                *p++ = hexd[ch >> 4];
                *p++ = hexd[ch & 15];
            }
            i++;
            continue;
        }
        size_t n = utf8_seq(s + i, len - i);
        if (n == 0) {
            *p++ = (char)0xEF;
            *p++ = (char)0xBF;
            *p++ = (char)0xBD;
            i++;
            continue;
        }
        memcpy(p, s + i, n);
        p += n;
        i += n;
    }
    *p++ = '"';
    b->len += (size_t)(p - start);
}

static void put_bytes(pc_buf *b, const ProtobufCFieldDescriptor *f, const ProtobufCBinaryData *bd)
{
    static const char hexd[] = "0123456789abcdef";
    const uint8_t *d = bd->data;
    size_t n = d ? bd->len : 0;
    if (hex_field_len(f) >= 0) {
        char *p = wr(b, n * 2 + 2), *s = p;
        *p++ = '"';
        for (size_t i = 0; i < n; i++) {
            *p++ = hexd[d[i] >> 4];
            *p++ = hexd[d[i] & 15];
        }
        *p++ = '"';
        b->len += (size_t)(p - s);
        return;
    }
    char *p = wr(b, pc_base64_len(n, true) + 2), *s = p;
    *p++ = '"';
    p += pc_base64_write(p, d, n, true);
    *p++ = '"';
    b->len += (size_t)(p - s);
}

static void encode_message(pc_buf *b, const ProtobufCMessage *msg);

static void encode_value(pc_buf *b, const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: put_i64(b, *(const int32_t *)p, false); break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: put_u64(b, *(const uint32_t *)p, false); break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: put_i64(b, *(const int64_t *)p, true); break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: put_u64(b, *(const uint64_t *)p, true); break;
    case PROTOBUF_C_TYPE_FLOAT: put_double(b, *(const float *)p, true); break;
    case PROTOBUF_C_TYPE_DOUBLE: put_double(b, *(const double *)p, false); break;
    case PROTOBUF_C_TYPE_BOOL:
        if (*(const protobuf_c_boolean *)p)
            put(b, "true", 4);
        else
            put(b, "false", 5);
        break;
    case PROTOBUF_C_TYPE_ENUM: put_i64(b, *(const int *)p, false); break;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)p;
        if (!s) s = "";
        put_string(b, s, strlen(s));
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: put_bytes(b, f, p); break;
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(const ProtobufCMessage *const *)p;
        if (m)
            encode_message(b, m);
        else
            put(b, "{}", 2);
        break;
    }
    }
}

/* proto3 implicit presence: is this singular value the default (and so omitted)? */
static bool is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return *(const uint32_t *)p == 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return *(const uint64_t *)p == 0;
    case PROTOBUF_C_TYPE_FLOAT: return *(const float *)p == 0;
    case PROTOBUF_C_TYPE_DOUBLE: return *(const double *)p == 0;
    case PROTOBUF_C_TYPE_BOOL: return !*(const protobuf_c_boolean *)p;
    case PROTOBUF_C_TYPE_ENUM: return *(const int *)p == 0;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)p;
        return !s || !*s;
    }
    case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)p)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE: return *(const void *const *)p == NULL;
    }
    return true;
}

static void put_key(pc_buf *b, const ProtobufCFieldDescriptor *f, bool *first)
{
    char name[128];
    size_t n = camel_name(f->name, name, sizeof(name));
    if (n >= sizeof(name)) n = sizeof(name) - 1;
    char *p = wr(b, n + 4), *s = p;
    if (!*first) *p++ = ',';
    *first = false;
    *p++ = '"';
    memcpy(p, name, n);
    p += n;
    *p++ = '"';
    *p++ = ':';
    b->len += (size_t)(p - s);
}

static void encode_message(pc_buf *b, const ProtobufCMessage *msg)
{
    const ProtobufCMessageDescriptor *desc = msg->descriptor;
    const char *base = (const char *)msg;
    bool first = true;
    putc_(b, '{');
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        const void *p = base + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            const char *arr = *(const char *const *)p;
            if (n == 0 || !arr) continue;
            size_t sz = elem_size(f->type);
            put_key(b, f, &first);
            putc_(b, '[');
            for (size_t j = 0; j < n; j++) {
                if (j) putc_(b, ',');
                encode_value(b, f, arr + j * sz);
            }
            putc_(b, ']');
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *)(base + f->quantifier_offset) != f->id) continue;
            if ((f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) &&
                !*(const void *const *)p)
                continue;
        } else if (has_flag(f)) {
            if (!*(const protobuf_c_boolean *)(base + f->quantifier_offset)) continue;
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL || f->label == PROTOBUF_C_LABEL_REQUIRED) {
            if ((f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) &&
                !*(const void *const *)p)
                continue;
        } else if (is_default(f, p)) {
            continue;
        }
        put_key(b, f, &first);
        encode_value(b, f, p);
    }
    putc_(b, '}');
}

void pc_json_encode(const ProtobufCMessage *msg, pc_buf *out)
{
    encode_message(out, msg);
    wr(out, 0)[0] = 0; /* keep the buffer NUL-terminated like pc_buf_append does */
}

/* ---------------------------------------------------------------------------------------------
 * Batches
 * ------------------------------------------------------------------------------------------- */

void pc_batch_encode_json(const pc_batch *b, pc_buf *out)
{
    pc_json_encode(pc_batch_message(b), out);
}

/* ---------------------------------------------------------------------------------------------
 * jansson trees for other JSON formats, charged to a budget like pc_json_decode's
 * ------------------------------------------------------------------------------------------- */

json_t *pc_json_load_budgeted(const char *text, size_t len, size_t flags, pc_budget *budget,
                              json_error_t *jerr)
{
    pthread_once(&hooks_once, install_hooks);
    pc_budget *prev = tls_budget;
    tls_budget = budget;
    json_t *root = json_loadb(text, len, flags, jerr);
    tls_budget = prev;
    return root;
}

void pc_json_free_budgeted(json_t *root, pc_budget *budget)
{
    pc_budget *prev = tls_budget;
    tls_budget = budget;
    json_decref(root);
    tls_budget = prev;
}
