/* The JFR container decoder (jfr_reader.h; spec/jfr.md §2): chunks, metadata, constant pools,
 * events. It knows no event type of its own: the caller names the types it wants and the fields
 * to bind, and gets each such event's fields.
 *
 * Per chunk: the header (§2.2), the last metadata record (§2.6) into a table of types resolved by
 * name, the checkpoint chain from the header's offset backwards (§2.8: each delta must point to an
 * earlier record of the chunk, so the walk cannot cycle) into one hash table per pool type of
 * interest (key -> where the entry's value starts; entries of a type met in several checkpoints
 * are merged, the latest checkpoint's winning), then one pass over the records for the events.
 * No allocation per event: hash tables and arrays grow by doubling and are charged to the
 * request's budget; per-chunk tables live until the chunk ends.
 *
 * Safety: every read is bounded by the end of its record (or of the chunk for an entry validated
 * when its checkpoint was read), counts are checked against the bytes left, nesting is capped
 * (PC_JFR_MAX_VALUE_DEPTH, PC_JFR_MAX_METADATA_DEPTH), and the decoding steps are capped at a
 * multiple of the input size, so no metadata shape (thousands of fields that read nothing) can
 * make a small recording expensive. */
#include "formats/jfr_reader.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/utf8.h"

#define HEADER_SIZE 68

static const char *const pool_type_names[P_COUNT] = {
    "jdk.types.StackTrace",  "jdk.types.Method",    "java.lang.Class",  "jdk.types.Symbol",
    "jdk.types.ThreadState", "jdk.types.FrameType", "java.lang.String",
};

static const bind_spec stack_spec[] = {
    {"truncated", 0, B_U64, NULL},
    {"frames", 1, B_ARRAY, "jdk.types.StackFrame"},
    {NULL, 0, 0, NULL},
};
static const bind_spec frame_spec[] = {
    {"method", 0, B_REF, "jdk.types.Method"},
    {"lineNumber", 1, B_U64, NULL},
    {"type", 2, B_REF, "jdk.types.FrameType"},
    {NULL, 0, 0, NULL},
};
static const bind_spec method_spec[] = {
    {"type", 0, B_REF, "java.lang.Class"},
    {"name", 1, B_REF, "jdk.types.Symbol"},
    {NULL, 0, 0, NULL},
};
static const bind_spec class_spec[] = {
    {"name", 0, B_REF, "jdk.types.Symbol"},
    {NULL, 0, 0, NULL},
};
static const bind_spec symbol_spec[] = {{"string", 0, B_STR, NULL}, {NULL, 0, 0, NULL}};
static const bind_spec state_spec[] = {{"name", 0, B_STR, NULL}, {NULL, 0, 0, NULL}};
static const bind_spec ftype_spec[] = {{"description", 0, B_STR, NULL}, {NULL, 0, 0, NULL}};
static const bind_spec *const pool_spec[P_COUNT] = {
    stack_spec, method_spec, class_spec, symbol_spec, state_spec, ftype_spec, NULL};

static int work_error(jfr_reader *d, size_t off)
{
    return jfr_at(d, PC_EBADMSG, off,
                  "decoding takes more than %" PRIu64
                  " steps for a %zu-byte recording (metadata with fields that read nothing?)",
                  d->max_work, d->len);
}

/* ---- primitives (§2.3, §2.4) ---- */

int jfr_rd_varint(jfr_reader *d, size_t *pos, size_t end, uint64_t *out)
{
    size_t p = *pos;
    const uint8_t *b = d->buf;
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; i++) {
        if (p >= end) goto trunc;
        uint8_t c = b[p++];
        v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *pos = p;
            *out = v;
            return 0;
        }
    }
    if (p >= end) goto trunc;
    v |= (uint64_t)b[p++] << 56; /* the 9th byte carries 8 bits and ends the number */
    *pos = p;
    *out = v;
    return 0;
trunc:
    *out = 0;
    return jfr_at(d, PC_EBADMSG, *pos,
                  "a compressed integer runs past the end of its record (at offset %zu)", end);
}

static int skip_bytes(jfr_reader *d, size_t *pos, size_t end, size_t n)
{
    if (end - *pos < n)
        return jfr_at(d, PC_EBADMSG, *pos, "%zu bytes expected, only %zu left in the record", n,
                      end - *pos);
    *pos += n;
    return 0;
}

static void put_utf8(char *o, size_t *w, uint32_t cp)
{
    if (cp < 0x80) {
        o[(*w)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*w)++] = (char)(0xC0 | (cp >> 6));
        o[(*w)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*w)++] = (char)(0xE0 | (cp >> 12));
        o[(*w)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*w)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*w)++] = (char)(0xF0 | (cp >> 18));
        o[(*w)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[(*w)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*w)++] = (char)(0x80 | (cp & 0x3F));
    }
}

struct pentry *jfr_pool_get(jfr_reader *d, int p, uint64_t key);

/* A string of encoding 3 (UTF-8) or 5 (Latin-1, converted into sb), its length first. */
static int rd_bytes(jfr_reader *d, uint8_t enc, size_t start, size_t *pos, size_t end, sbuf *sb,
                    const char **s, size_t *n)
{
    uint64_t len;
    int rc;
    if ((rc = jfr_rd_varint(d, pos, end, &len))) return rc;
    if (len > end - *pos)
        return jfr_at(d, PC_EBADMSG, start,
                      "string of %" PRIu64 " bytes runs past the end of its record (at offset %zu)",
                      len, end);
    const uint8_t *b = d->buf + *pos;
    *pos += (size_t)len;
    if (!s) return 0;
    if (enc == 3) {
        *s = (const char *)b;
        *n = (size_t)len;
        return 0;
    }
    sb->len = 0;
    char *o = jfr_sb_room(d, sb, (size_t)len * 2);
    size_t w = 0;
    for (size_t i = 0; i < len; i++)
        put_utf8(o, &w, b[i]);
    *s = o;
    *n = w;
    return 0;
}

/* A string of UTF-16 code units (encoding 4), one compressed integer each, converted into sb. */
static int rd_utf16(jfr_reader *d, size_t start, size_t *pos, size_t end, sbuf *sb, const char **s,
                    size_t *n)
{
    uint64_t len, u;
    int rc;
    if ((rc = jfr_rd_varint(d, pos, end, &len))) return rc;
    if (len > end - *pos)
        return jfr_at(d, PC_EBADMSG, start,
                      "string of %" PRIu64
                      " UTF-16 units runs past the end of its record (at offset %zu)",
                      len, end);
    if (!s) {
        for (uint64_t i = 0; i < len; i++)
            if ((rc = jfr_rd_varint(d, pos, end, &u))) return rc;
        return 0;
    }
    sb->len = 0;
    char *o = jfr_sb_room(d, sb, (size_t)len * 3); /* at most 3 bytes per unit */
    size_t w = 0;
    uint32_t hi = 0;
    for (uint64_t i = 0; i < len; i++) {
        if ((rc = jfr_rd_varint(d, pos, end, &u))) return rc;
        uint32_t c = (uint16_t)u;
        if (hi) {
            if (c >= 0xDC00 && c <= 0xDFFF) {
                put_utf8(o, &w, 0x10000 + ((hi - 0xD800) << 10) + (c - 0xDC00));
                hi = 0;
                continue;
            }
            put_utf8(o, &w, 0xFFFD); /* a lone high surrogate */
            hi = 0;
        }
        if (c >= 0xD800 && c <= 0xDBFF)
            hi = c;
        else
            put_utf8(o, &w, c >= 0xDC00 && c <= 0xDFFF ? 0xFFFD : c);
    }
    if (hi) put_utf8(o, &w, 0xFFFD);
    *s = o;
    *n = w;
    return 0;
}

/* The string at *pos: skipped when s is NULL; else *s, *n = its text (pointing into the input
 * for UTF-8, which the caller validates, or into sb, which is overwritten, for the converted
 * encodings); *s = NULL for the null string and for a key missing from the string pool. A
 * pooled string is one read through a pool reference: it may not refer to the pool again. */
int jfr_rd_string(jfr_reader *d, size_t *pos, size_t end, sbuf *sb, const char **s, size_t *n,
                  bool pooled)
{
    size_t start = *pos;
    int rc;
    if (s) {
        *s = NULL;
        *n = 0;
    }
    if (*pos >= end)
        return jfr_at(d, PC_EBADMSG, start,
                      "a string's encoding byte expected, the record ends at offset %zu", end);
    uint8_t enc = d->buf[(*pos)++];
    switch (enc) {
    case 0: return 0; /* null */
    case 1:
        if (s) *s = "";
        return 0;
    case 2: { /* a key into the java.lang.String pool */
        uint64_t key;
        if ((rc = jfr_rd_varint(d, pos, end, &key))) return rc;
        if (!s) return 0;
        if (pooled)
            return jfr_at(d, PC_EBADMSG, start,
                          "a string-pool entry refers to the string pool again (key %" PRIu64 ")",
                          key);
        pentry *e = jfr_pool_get(d, P_STRING, key);
        if (!e) return 0;
        size_t p = (size_t)e->pos;
        return jfr_rd_string(d, &p, d->c->cend, sb, s, n, true);
    }
    case 3: /* UTF-8 bytes */
    case 5: /* Latin-1 bytes */ return rd_bytes(d, enc, start, pos, end, sb, s, n);
    case 4: return rd_utf16(d, start, pos, end, sb, s, n);
    default:
        return jfr_at(d, PC_EBADMSG, start, "unknown string encoding %u (0 to 5 expected)", enc);
    }
}

/* s[0..n) as valid UTF-8: itself, or a copy in d->fix with each invalid byte as U+FFFD. */
const char *jfr_utf8_fixed(jfr_reader *d, const char *s, size_t n, size_t *outn)
{
    size_t bad = pc_utf8_invalid_at(s, n);
    *outn = n;
    if (bad == n) return s;
    d->fix.len = 0;
    size_t i = 0;
    for (;;) {
        jfr_sb_put(d, &d->fix, s + i, bad);
        i += bad;
        if (i >= n) break;
        jfr_sb_put(d, &d->fix, "\xEF\xBF\xBD", 3);
        i++;
        bad = pc_utf8_invalid_at(s + i, n - i);
    }
    *outn = d->fix.len;
    return d->fix.p;
}

/* ---- generic values (§2.7) ---- */

static int skip_value(jfr_reader *d, int32_t ti, size_t *pos, size_t end, int depth);

static int skip_field(jfr_reader *d, const jfield *f, size_t *pos, size_t end, int depth)
{
    uint64_t count = 1, v;
    int rc;
    if (!f->cpool && f->type < 0)
        return jfr_at(d, PC_EBADMSG, *pos,
                      "field \"%s\" has type id %" PRIu64 ", which the metadata does not define",
                      f->name ? f->name : "", f->type_id);
    if (f->array) {
        size_t start = *pos;
        if ((rc = jfr_rd_varint(d, pos, end, &count))) return rc;
        if (count > end - *pos)
            return jfr_at(d, PC_EBADMSG, start,
                          "array of %" PRIu64 " elements, only %zu bytes left in the record", count,
                          end - *pos);
    }
    for (uint64_t i = 0; i < count; i++) {
        size_t before = *pos;
        rc = f->cpool ? jfr_rd_varint(d, pos, end, &v) : skip_value(d, f->type, pos, end, depth);
        if (rc) return rc;
        if (*pos == before) break; /* elements that read nothing: so do the others */
    }
    return 0;
}

static int skip_value(jfr_reader *d, int32_t ti, size_t *pos, size_t end, int depth)
{
    jtype *t = &d->c->types[ti];
    uint64_t v;
    switch (t->kind) {
    case K_BOOL:
    case K_BYTE: return skip_bytes(d, pos, end, 1);
    case K_VARINT: return jfr_rd_varint(d, pos, end, &v);
    case K_FLOAT: return skip_bytes(d, pos, end, 4);
    case K_DOUBLE: return skip_bytes(d, pos, end, 8);
    case K_STRING: return jfr_rd_string(d, pos, end, NULL, NULL, NULL, false);
    default: break;
    }
    if (t->zero_width) return 0;
    if (depth >= PC_JFR_MAX_VALUE_DEPTH)
        return jfr_at(d, PC_EBADMSG, *pos, "values nested deeper than %d levels (in type \"%s\")",
                      PC_JFR_MAX_VALUE_DEPTH, t->name ? t->name : "");
    d->work += t->n_fields + 1;
    if (d->work > d->max_work) return work_error(d, *pos);
    size_t start = *pos;
    for (uint32_t i = 0; i < t->n_fields; i++) {
        int rc = skip_field(d, &d->c->fields[t->first_field + i], pos, end, depth + 1);
        if (rc) return rc;
    }
    if (*pos == start) t->zero_width = 1;
    return 0;
}

/* Read the fields of a value of pl's type: bound ones into slots (a number, a pool key, or where a
 * string or array starts), the others skipped. */
int jfr_read_fields(jfr_reader *d, const plan *pl, size_t *pos, size_t end, uint64_t *slots)
{
    if (pl->type < 0) return 0;
    const jtype *t = &d->c->types[pl->type];
    d->work += t->n_fields + 1;
    if (d->work > d->max_work) return work_error(d, *pos);
    for (uint32_t i = 0; i < t->n_fields; i++) {
        const jfield *f = &d->c->fields[t->first_field + i];
        int s = pl->slot[i], rc;
        if (s < 0) {
            rc = skip_field(d, f, pos, end, 1);
        } else {
            switch (pl->kind[i]) {
            case B_U64:
                if (d->c->types[f->type].kind == K_VARINT) {
                    rc = jfr_rd_varint(d, pos, end, &slots[s]);
                } else {
                    rc = skip_bytes(d, pos, end, 1);
                    if (!rc) slots[s] = d->buf[*pos - 1];
                }
                break;
            case B_REF: rc = jfr_rd_varint(d, pos, end, &slots[s]); break;
            case B_STR:
                slots[s] = *pos;
                rc = jfr_rd_string(d, pos, end, NULL, NULL, NULL, false);
                break;
            default:
                slots[s] = *pos;
                rc = skip_field(d, f, pos, end, 1);
                break;
            }
        }
        if (rc) return rc;
    }
    return 0;
}

static bool streq(const char *a, const char *b)
{
    return a && strcmp(a, b) == 0;
}

static bool shape_ok(const jfr_reader *d, const jfield *f, const bind_spec *sp)
{
    const jtype *ft = f->type >= 0 ? &d->c->types[f->type] : NULL;
    if (!ft) return false;
    switch (sp->kind) {
    case B_U64:
        return !f->cpool && !f->array &&
               (ft->kind == K_VARINT || ft->kind == K_BOOL || ft->kind == K_BYTE);
    case B_REF: return f->cpool && !f->array && streq(ft->name, sp->type);
    case B_STR: return !f->cpool && !f->array && ft->kind == K_STRING;
    default: return !f->cpool && f->array && ft->kind == K_STRUCT && streq(ft->name, sp->type);
    }
}

static void make_plan(jfr_reader *d, int32_t ti, const bind_spec *spec, uint32_t mask, plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->type = -1;
    if (ti < 0 || d->c->types[ti].kind != K_STRUCT) return;
    const jtype *t = &d->c->types[ti];
    pl->type = ti;
    pl->slot = pc_arena_alloc(d->c->ca, t->n_fields + 1);
    pl->kind = pc_arena_alloc(d->c->ca, t->n_fields + 1);
    for (uint32_t i = 0; i < t->n_fields; i++) {
        const jfield *f = &d->c->fields[t->first_field + i];
        pl->slot[i] = -1;
        pl->kind[i] = 0;
        for (const bind_spec *sp = spec; sp->field; sp++) {
            uint32_t bit = 1u << sp->slot;
            if (!(mask & bit) || (pl->bound & bit) || !streq(f->name, sp->field) ||
                !shape_ok(d, f, sp))
                continue;
            pl->slot[i] = (int8_t)sp->slot;
            pl->kind[i] = sp->kind;
            pl->bound |= bit;
            break;
        }
    }
}

/* ---- chunk header (§2.2) ---- */

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

typedef struct chunk_header {
    uint64_t size, cp_offset, meta_offset, ticks_per_sec;
} chunk_header;

static int parse_header(jfr_reader *d, size_t pos, chunk_header *h)
{
    const uint8_t *p = d->buf + pos;
    size_t left = d->len - pos;
    if (left < HEADER_SIZE)
        return jfr_at(d, PC_EBADMSG, pos, "truncated chunk header: %d bytes expected, %zu left",
                      HEADER_SIZE, left);
    if (memcmp(p, "FLR\0", 4) != 0)
        return jfr_at(d, PC_EBADMSG, pos,
                      "chunk magic %02x%02x%02x%02x, expected 464c5200 (\"FLR\\0\"): not a JFR "
                      "recording",
                      p[0], p[1], p[2], p[3]);
    unsigned major = (unsigned)p[4] << 8 | p[5], minor = (unsigned)p[6] << 8 | p[7];
    if (major != 1 && major != 2)
        return jfr_at(d, PC_EBADMSG, pos + 4, "JFR version %u.%u, expected 1.x or 2.x", major,
                      minor);
    h->size = be64(p + 8);
    h->cp_offset = be64(p + 16);
    h->meta_offset = be64(p + 24);
    h->ticks_per_sec = be64(p + 56);
    if (h->size < HEADER_SIZE)
        return jfr_at(d, PC_EBADMSG, pos + 8,
                      "chunk size %" PRIu64 " is less than its %d-byte header", h->size,
                      HEADER_SIZE);
    if (h->size > left)
        return jfr_at(d, PC_EBADMSG, pos + 8,
                      "chunk of %" PRIu64 " bytes, only %zu left in the recording (truncated?)",
                      h->size, left);
    if (h->cp_offset == 0 || h->meta_offset == 0)
        return jfr_at(d, PC_EBADMSG, pos + 16,
                      "chunk is unfinished (constant-pool offset %" PRIu64
                      ", metadata offset %" PRIu64 "): still being written?",
                      h->cp_offset, h->meta_offset);
    if (h->cp_offset < HEADER_SIZE || h->cp_offset >= h->size)
        return jfr_at(d, PC_EBADMSG, pos + 16,
                      "constant-pool offset %" PRIu64 " outside the chunk (%d to %" PRIu64 ")",
                      h->cp_offset, HEADER_SIZE, h->size - 1);
    if (h->meta_offset < HEADER_SIZE || h->meta_offset >= h->size)
        return jfr_at(d, PC_EBADMSG, pos + 24,
                      "metadata offset %" PRIu64 " outside the chunk (%d to %" PRIu64 ")",
                      h->meta_offset, HEADER_SIZE, h->size - 1);
    return 0;
}

/* A record's size and type at *pos; *end is where it ends. */
static int record_head(jfr_reader *d, size_t *pos, size_t *end, uint64_t *type, const char *what)
{
    size_t rec = *pos;
    uint64_t size;
    int rc;
    if ((rc = jfr_rd_varint(d, pos, d->c->cend, &size))) return rc;
    if (size == 0)
        return jfr_at(d, PC_EBADMSG, rec, "%s of size 0 (at least 2 bytes expected)", what);
    if (size > d->c->cend - rec)
        return jfr_at(d, PC_EBADMSG, rec,
                      "%s of %" PRIu64 " bytes runs past the end of the chunk (at offset %zu)",
                      what, size, d->c->cend);
    *end = rec + (size_t)size;
    if ((rc = jfr_rd_varint(d, pos, *end, type))) return rc;
    return 0;
}

/* ---- metadata (§2.6) ---- */

typedef struct mstr {
    const char *s; /* NUL-terminated, in the chunk arena; NULL: the null string */
} mstr;

typedef struct meta {
    mstr *str;
    uint64_t nstr;
    size_t elements;
} meta;

enum { E_ROOT, E_METADATA, E_CLASS, E_FIELD, E_OTHER };

static int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || !*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10) return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

static int meta_index(jfr_reader *d, meta *m, size_t *pos, size_t end, const char **out)
{
    size_t start = *pos;
    uint64_t i;
    int rc;
    *out = NULL;
    if ((rc = jfr_rd_varint(d, pos, end, &i))) return rc;
    if (i >= m->nstr)
        return jfr_at(d, PC_EBADMSG, start,
                      "metadata string index %" PRIu64 " out of range (%" PRIu64 " strings)", i,
                      m->nstr);
    *out = m->str[i].s;
    return 0;
}

/* The attributes of a metadata element that a class or field is made of. */
typedef struct eattrs {
    const char *name, *id, *cls, *cpool, *dim;
} eattrs;

/* A class element becomes a type, a field element a field of the last type. */
static int add_type(jfr_reader *d, int kind, size_t start, const eattrs *ea)
{
    const char *name = ea->name, *id = ea->id, *cls = ea->cls, *cpool = ea->cpool, *dim = ea->dim;
    if (kind == E_CLASS) {
        uint64_t tid;
        if (parse_u64(id, &tid))
            return jfr_at(d, PC_EBADMSG, start, "metadata class \"%s\" has no numeric id (\"%s\")",
                          name ? name : "", id ? id : "");
        d->c->types = jfr_vgrow(d, d->c->types, &d->c->types_cap, d->c->ntypes + 1, sizeof(jtype));
        d->c->types[d->c->ntypes++] = (jtype){.id = tid,
                                              .name = name ? name : "",
                                              .first_field = (uint32_t)d->c->nfields,
                                              .kind = K_STRUCT,
                                              .pool = -1};
    } else if (kind == E_FIELD) {
        uint64_t tid, dimension = 0;
        if (parse_u64(cls, &tid))
            return jfr_at(d, PC_EBADMSG, start,
                          "metadata field \"%s\" has no numeric class (\"%s\")", name ? name : "",
                          cls ? cls : "");
        if (dim && (parse_u64(dim, &dimension) || dimension > 1))
            return jfr_at(d, PC_EBADMSG, start,
                          "metadata field \"%s\" has dimension \"%s\" (0 or 1)", name ? name : "",
                          dim);
        d->c->fields =
            jfr_vgrow(d, d->c->fields, &d->c->fields_cap, d->c->nfields + 1, sizeof(jfield));
        d->c->fields[d->c->nfields++] = (jfield){.name = name ? name : "",
                                                 .type_id = tid,
                                                 .type = -1,
                                                 .cpool = streq(cpool, "true"),
                                                 .array = dimension == 1};
        d->c->types[d->c->ntypes - 1].n_fields++;
    }
    return 0;
}

static int parse_element(jfr_reader *d, meta *m, size_t *pos, size_t end, int depth, int parent)
{
    size_t start = *pos;
    const char *ename, *k, *v;
    uint64_t nattr, nchild;
    int rc;
    if (depth > PC_JFR_MAX_METADATA_DEPTH)
        return jfr_at(d, PC_EBADMSG, start, "metadata elements nested deeper than %d levels",
                      PC_JFR_MAX_METADATA_DEPTH);
    if (++m->elements > d->max_elements)
        return jfr_at(d, PC_E2BIG, start,
                      "metadata has more than %zu elements (limit jfr.max_metadata_elements)",
                      d->max_elements);
    if ((rc = meta_index(d, m, pos, end, &ename))) return rc;
    if ((rc = jfr_rd_varint(d, pos, end, &nattr))) return rc;
    if (nattr > (end - *pos) / 2)
        return jfr_at(d, PC_EBADMSG, start,
                      "metadata element with %" PRIu64 " attributes, only %zu bytes left", nattr,
                      end - *pos);
    int kind = E_OTHER;
    if (depth == 0)
        kind = E_ROOT;
    else if (parent == E_ROOT && streq(ename, "metadata"))
        kind = E_METADATA;
    else if (parent == E_METADATA && streq(ename, "class"))
        kind = E_CLASS;
    else if (parent == E_CLASS && streq(ename, "field"))
        kind = E_FIELD;
    const char *name = NULL, *id = NULL, *cls = NULL, *cpool = NULL, *dim = NULL;
    for (uint64_t i = 0; i < nattr; i++) {
        if ((rc = meta_index(d, m, pos, end, &k))) return rc;
        if ((rc = meta_index(d, m, pos, end, &v))) return rc;
        if (streq(k, "name"))
            name = v;
        else if (streq(k, "id"))
            id = v;
        else if (streq(k, "class"))
            cls = v;
        else if (streq(k, "constantPool"))
            cpool = v;
        else if (streq(k, "dimension"))
            dim = v;
    }
    if ((kind == E_CLASS || kind == E_FIELD) &&
        (rc = add_type(d, kind, start, &(eattrs){name, id, cls, cpool, dim})))
        return rc;
    if ((rc = jfr_rd_varint(d, pos, end, &nchild))) return rc;
    if (nchild > (end - *pos) / 3)
        return jfr_at(d, PC_EBADMSG, start,
                      "metadata element with %" PRIu64 " children, only %zu bytes left", nchild,
                      end - *pos);
    for (uint64_t i = 0; i < nchild; i++)
        if ((rc = parse_element(d, m, pos, end, depth + 1, kind))) return rc;
    return 0;
}

static uint8_t kind_of(const char *name)
{
    static const struct {
        const char *name;
        uint8_t kind;
    } prims[] = {{"boolean", K_BOOL}, {"byte", K_BYTE},     {"char", K_VARINT},
                 {"short", K_VARINT}, {"int", K_VARINT},    {"long", K_VARINT},
                 {"float", K_FLOAT},  {"double", K_DOUBLE}, {"java.lang.String", K_STRING}};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        if (strcmp(name, prims[i].name) == 0) return prims[i].kind;
    return K_STRUCT;
}

static int32_t find_type(const jfr_reader *d, const char *name)
{
    for (size_t i = 0; i < d->c->ntypes; i++)
        if (strcmp(d->c->types[i].name, name) == 0) return (int32_t)i;
    return -1;
}

static int parse_metadata(jfr_reader *d, size_t pos)
{
    size_t rec = pos, end;
    uint64_t type, v, nstr;
    int rc;
    if ((rc = record_head(d, &pos, &end, &type, "metadata record"))) return rc;
    if (type != 0)
        return jfr_at(d, PC_EBADMSG, rec,
                      "the header's metadata offset points at a record of type %" PRIu64
                      " (metadata, type 0, expected)",
                      type);
    for (int i = 0; i < 3; i++) /* start time, duration, metadata id */
        if ((rc = jfr_rd_varint(d, &pos, end, &v))) return rc;
    size_t at_count = pos;
    if ((rc = jfr_rd_varint(d, &pos, end, &nstr))) return rc;
    if (nstr > d->max_mstrings)
        return jfr_at(d, PC_E2BIG, at_count,
                      "metadata has %" PRIu64
                      " strings, more than %zu (limit jfr.max_metadata_strings)",
                      nstr, d->max_mstrings);
    if (nstr > end - pos)
        return jfr_at(d, PC_EBADMSG, at_count,
                      "metadata claims %" PRIu64 " strings, only %zu bytes left in the record",
                      nstr, end - pos);
    meta m = {.str = pc_arena_alloc(d->c->ca, (size_t)(nstr ? nstr : 1) * sizeof(mstr)),
              .nstr = nstr};
    for (uint64_t i = 0; i < nstr; i++) {
        const char *s;
        size_t n;
        if ((rc = jfr_rd_string(d, &pos, end, &d->s1, &s, &n, false))) return rc;
        m.str[i].s = s ? pc_arena_strndup(d->c->ca, s, n) : NULL;
    }
    if ((rc = parse_element(d, &m, &pos, end, 0, E_OTHER))) return rc;
    if (!pc_budget_ok(d->budget)) return jfr_budget_error(d);

    /* ids -> types; field types; primitive kinds */
    for (size_t i = 0; i < d->c->ntypes; i++) {
        jtype *t = &d->c->types[i];
        uint32_t dup = jfr_umap_get(&d->c->tmap, t->id);
        if (dup != UINT32_MAX)
            return jfr_at(d, PC_EBADMSG, rec, "metadata defines type id %" PRIu64 " twice (%s, %s)",
                          t->id, d->c->types[dup].name, t->name);
        jfr_umap_put(d, &d->c->tmap, t->id, (uint32_t)i, false);
        t->kind = kind_of(t->name);
    }
    for (size_t i = 0; i < d->c->nfields; i++) {
        uint32_t ti = jfr_umap_get(&d->c->tmap, d->c->fields[i].type_id);
        d->c->fields[i].type = ti == UINT32_MAX ? -1 : (int32_t)ti;
    }
    for (int p = 0; p < P_COUNT; p++) {
        int32_t ti = find_type(d, pool_type_names[p]);
        if (ti >= 0) d->c->types[ti].pool = (int8_t)p;
        make_plan(d, pool_spec[p] ? ti : -1, pool_spec[p], ~0u, &d->c->pplan[p]);
    }
    make_plan(d, find_type(d, "jdk.types.StackFrame"), frame_spec, ~0u, &d->c->frame_plan);
    for (size_t k = 0; k < d->ev->n; k++) {
        int32_t ti = find_type(d, d->ev->names[k]);
        d->c->ev_have[k] = ti >= 0 && d->c->types[ti].kind == K_STRUCT;
        if (!d->c->ev_have[k]) continue;
        d->c->ev_id[k] = d->c->types[ti].id;
        make_plan(d, ti, d->ev->spec, d->ev->slots[k], &d->c->ev_plan[k]);
    }
    return 0;
}

/* ---- constant pools (§2.8) ---- */

pentry *jfr_pool_get(jfr_reader *d, int p, uint64_t key)
{
    pool *pl = &d->c->pools[p];
    uint32_t i = jfr_umap_get(&pl->map, key);
    return i == UINT32_MAX ? NULL : &pl->v[i];
}

static void pool_add(jfr_reader *d, int p, uint64_t key, size_t pos)
{
    pool *pl = &d->c->pools[p];
    if (jfr_umap_get(&pl->map, key) != UINT32_MAX) return; /* a later checkpoint's entry wins */
    pl->v = jfr_vgrow(d, pl->v, &pl->cap, pl->n + 1, sizeof(pentry));
    pl->v[pl->n] = (pentry){.pos = pos};
    jfr_umap_put(d, &pl->map, key, (uint32_t)pl->n, false);
    pl->n++;
}

static int parse_pool(jfr_reader *d, size_t *pos, size_t end)
{
    size_t start = *pos;
    uint64_t tid, count, key;
    int rc;
    if ((rc = jfr_rd_varint(d, pos, end, &tid))) return rc;
    if ((rc = jfr_rd_varint(d, pos, end, &count))) return rc;
    uint32_t ti = jfr_umap_get(&d->c->tmap, tid);
    if (ti == UINT32_MAX)
        return jfr_at(d, PC_EBADMSG, start,
                      "constant pool of type id %" PRIu64 ", which the metadata does not define",
                      tid);
    if (count > end - *pos)
        return jfr_at(d, PC_EBADMSG, start,
                      "constant pool of %" PRIu64 " entries, only %zu bytes left in the checkpoint",
                      count, end - *pos);
    if (count > d->max_entries - d->c->entries)
        return jfr_at(d, PC_E2BIG, start,
                      "the chunk has more than %zu constant-pool entries (limit "
                      "jfr.max_pool_entries)",
                      d->max_entries);
    d->c->entries += (size_t)count;
    int p = d->c->types[ti].pool;
    for (uint64_t i = 0; i < count; i++) {
        if ((rc = jfr_rd_varint(d, pos, end, &key))) return rc;
        size_t vpos = *pos;
        if (p == P_STACK && d->c->pplan[P_STACK].type >= 0) {
            /* the one limit checked on content: frames per stack trace */
            uint64_t s[2] = {0, 0}, nframes;
            if ((rc = jfr_read_fields(d, &d->c->pplan[P_STACK], pos, end, s))) return rc;
            if (d->c->pplan[P_STACK].bound & 2) {
                size_t fp = (size_t)s[1];
                if ((rc = jfr_rd_varint(d, &fp, end, &nframes))) return rc;
                if (nframes > d->max_depth)
                    return jfr_at(d, PC_E2BIG, (size_t)s[1],
                                  "stack trace of %" PRIu64
                                  " frames, more than %zu (limit jfr.max_stack_depth)",
                                  nframes, d->max_depth);
            }
        } else if ((rc = skip_value(d, (int32_t)ti, pos, end, 0))) {
            return rc;
        }
        if (p >= 0) pool_add(d, p, key, vpos);
        if ((i & 1023) == 1023 && !pc_budget_ok(d->budget)) return jfr_budget_error(d);
    }
    return 0;
}

/* The chain from the header's offset: each checkpoint's delta leads to the one before it, 0 ends
 * it. A delta must point back into the chunk's records, so the walk always ends. */
static int parse_checkpoints(jfr_reader *d, size_t pos)
{
    for (;;) {
        size_t rec = pos, end;
        uint64_t type, v, delta_u, npools;
        int rc;
        if ((rc = record_head(d, &pos, &end, &type, "checkpoint record"))) return rc;
        if (type != 1)
            return jfr_at(d, PC_EBADMSG, rec,
                          "the checkpoint chain leads to a record of type %" PRIu64
                          " (checkpoint, type 1, expected)",
                          type);
        if ((rc = jfr_rd_varint(d, &pos, end, &v)) || (rc = jfr_rd_varint(d, &pos, end, &v)))
            return rc;
        size_t delta_at = pos;
        if ((rc = jfr_rd_varint(d, &pos, end, &delta_u))) return rc;
        if ((rc = jfr_rd_varint(d, &pos, end, &v))) return rc; /* flags */
        if ((rc = jfr_rd_varint(d, &pos, end, &npools))) return rc;
        if (npools > end - pos)
            return jfr_at(d, PC_EBADMSG, rec,
                          "checkpoint of %" PRIu64 " pools, only %zu bytes left in it", npools,
                          end - pos);
        for (uint64_t i = 0; i < npools; i++)
            if ((rc = parse_pool(d, &pos, end))) return rc;
        if (!pc_budget_ok(d->budget)) return jfr_budget_error(d);
        int64_t delta = (int64_t)delta_u;
        if (delta == 0) return 0;
        uint64_t back = (uint64_t)0 - delta_u;
        size_t first = d->c->cstart + HEADER_SIZE;
        if (delta > 0 || back > rec - first)
            return jfr_at(d, PC_EBADMSG, delta_at,
                          "checkpoint delta %" PRId64
                          " does not lead back to an earlier record of the chunk (offsets %zu to "
                          "%zu)",
                          delta, first, rec - 1);
        pos = rec - (size_t)back;
    }
}

/* One pass over the chunk's records: events of the types asked for, every other record skipped. */
static int scan_events(jfr_reader *d)
{
    size_t pos = d->c->cstart + HEADER_SIZE, end;
    uint64_t type, n = 0;
    int rc;
    while (pos < d->c->cend) {
        if ((rc = record_head(d, &pos, &end, &type, "record"))) return rc;
        int kind = -1;
        if (type > 1)
            for (int k = 0; k < (int)d->ev->n; k++)
                if (d->c->ev_have[k] && d->c->ev_id[k] == type) {
                    kind = k;
                    break;
                }
        if (kind < 0) {
            if (type > 1) d->skipped_events++;
            pos = end;
            continue;
        }
        uint64_t slots[JFR_MAX_SLOTS] = {0};
        const plan *pl = &d->c->ev_plan[kind];
        if ((rc = jfr_read_fields(d, pl, &pos, end, slots))) return rc;
        if ((rc = d->ev->on_event(d->ev->ud, kind, slots, pl->bound))) return rc;
        pos = end;
        if ((++n & 1023) == 0 && !pc_budget_ok(d->budget)) return jfr_budget_error(d);
    }
    return pc_budget_ok(d->budget) ? 0 : jfr_budget_error(d);
}

/* ---- chunks ---- */

static void chunk_free(jfr_reader *d, chunk *c)
{
    for (int p = 0; p < P_COUNT; p++) {
        jfr_umap_free(d, &c->pools[p].map);
        jfr_vfree(d, c->pools[p].v, c->pools[p].cap, sizeof(pentry));
    }
    jfr_umap_free(d, &c->tmap);
    jfr_vfree(d, c->types, c->types_cap, sizeof(jtype));
    jfr_vfree(d, c->fields, c->fields_cap, sizeof(jfield));
    pc_arena_free(c->ca);
    free(c);
    jfr_uncharge(d, sizeof(chunk));
}

/* Decode the chunk at pos. prev is the chunk before it, freed here. */
static int parse_chunk(jfr_reader *d, size_t pos, size_t *next, chunk **prev)
{
    chunk_header h = {0};
    int rc;
    if ((rc = parse_header(d, pos, &h))) return rc;
    /* Pools are per chunk, as in Pyroscope's parser: an event whose stack trace was written only
     * in the chunk before (a monitor wait across a rotation) has none here and is dropped. */
    if (*prev) chunk_free(d, *prev);
    chunk *c = pc_xcalloc(1, sizeof *c);
    jfr_charge(d, sizeof *c);
    *prev = d->c = c;
    c->cstart = pos;
    c->cend = pos + (size_t)h.size;
    c->ticks_per_sec = h.ticks_per_sec;
    *next = c->cend;
    c->ca = pc_arena_new(16384);
    pc_arena_set_budget(c->ca, d->budget);
    if ((rc = parse_metadata(d, pos + (size_t)h.meta_offset))) return rc;
    if ((rc = parse_checkpoints(d, pos + (size_t)h.cp_offset))) return rc;
    return scan_events(d);
}

int jfr_read(jfr_reader *d, const uint8_t *data, size_t len, const jfr_events *ev)
{
    d->buf = data;
    d->len = len;
    d->ev = ev;
    /* a field visit per input byte is the norm; 64 leave room for any real metadata */
    d->max_work = 64 * (uint64_t)len + (1u << 20);
    int rc = 0;
    chunk *last = NULL; /* the chunk decoded last */
    for (size_t pos = 0, next = 0; pos < len; pos = next) {
        if (d->chunks == d->max_chunks) {
            rc = jfr_at(d, PC_E2BIG, pos,
                        "the recording has more than %zu chunks (limit jfr.max_chunks)",
                        d->max_chunks);
            break;
        }
        d->chunks++;
        if ((rc = parse_chunk(d, pos, &next, &last))) break;
    }
    if (last) chunk_free(d, last);
    d->c = NULL;
    return rc;
}

void jfr_reader_free(jfr_reader *d)
{
    jfr_vfree(d, d->s1.p, d->s1.cap, 1);
    jfr_vfree(d, d->fix.p, d->fix.cap, 1);
    memset(&d->s1, 0, sizeof d->s1);
    memset(&d->fix, 0, sizeof d->fix);
}
