/* JFR decoder and Pyroscope's JFR -> profiles mapping (jfr.h; spec/jfr.md §2, §3).
 *
 * Per chunk: the header (§2.2), the last metadata record (§2.6) into a table of types resolved by
 * name, the checkpoint chain from the header's offset backwards (§2.8: each delta must point to an
 * earlier record of the chunk, so the walk cannot cycle) into one hash table per pool type of
 * interest (key -> where the entry's value starts; entries of a type met in several checkpoints
 * are merged, the latest checkpoint's winning), then one pass over the records for the events.
 * An event's stack trace, methods, classes, symbols, thread state and frame type are decoded
 * from the input the first time they are needed and cached per chunk; output entries are
 * interned in the batch's dictionary (pdata/dict.h), samples merged per (group, stack,
 * correlation ids) in hash tables. No allocation per event: hash tables and arrays grow by
 * doubling and are charged to the request's budget; per-chunk tables live until the chunk ends.
 *
 * Safety: every read is bounded by the end of its record (or of the chunk for an entry validated
 * when its checkpoint was read), counts are checked against the bytes left, nesting is capped
 * (PC_JFR_MAX_VALUE_DEPTH, PC_JFR_MAX_METADATA_DEPTH), and the decoding steps are capped at a
 * multiple of the input size, so no metadata shape (thousands of fields that read nothing) can
 * make a small recording expensive. */
#include "receivers/pyroscope/jfr.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/utf8.h"
#include "jfr_labels.pb-c.h"
#include "pdata/dict.h"
#include "pdata/proto_scan.h"

#define HEADER_SIZE 68

const char *const pc_jfr_kind_names[PC_JFR_KIND_COUNT] = {
    "jdk.ExecutionSample",
    "profiler.WallClockSample",
    "jdk.ObjectAllocationInNewTLAB",
    "jdk.ObjectAllocationOutsideTLAB",
    "jdk.ObjectAllocationSample",
    "profiler.LiveObject",
    "jdk.JavaMonitorEnter",
    "jdk.ThreadPark",
    "profiler.Malloc",
    "jdk.ActiveSetting",
};

/* ---- types of the metadata ---- */

enum { K_STRUCT, K_BOOL, K_BYTE, K_VARINT, K_FLOAT, K_DOUBLE, K_STRING };

typedef struct jtype {
    uint64_t id;
    const char *name;
    uint32_t first_field, n_fields;
    uint8_t kind;
    uint8_t zero_width; /* learned: a value of it reads no bytes (only fields that read none) */
    int8_t pool;        /* P_* when its constant pool is indexed, else -1 */
} jtype;

typedef struct jfield {
    const char *name;
    uint64_t type_id;
    int32_t type; /* index in the types; -1: the metadata does not define it */
    uint8_t cpool, array;
} jfield;

/* Constant pools that are indexed (every other pool is read and skipped). */
enum { P_STACK, P_METHOD, P_CLASS, P_SYMBOL, P_STATE, P_FTYPE, P_STRING, P_COUNT };
static const char *const pool_type_names[P_COUNT] = {
    "jdk.types.StackTrace",  "jdk.types.Method",    "java.lang.Class",  "jdk.types.Symbol",
    "jdk.types.ThreadState", "jdk.types.FrameType", "java.lang.String",
};

/* ---- field bindings: which fields of a type are read, into which slot ---- */

enum { B_U64, B_REF, B_STR, B_ARRAY };

typedef struct bind_spec {
    const char *field;
    uint8_t slot, kind;
    const char *type; /* B_REF: the referenced pool type; B_ARRAY: the element type */
} bind_spec;

/* Event slots. */
enum {
    S_STACK,
    S_STATE,
    S_CTX,
    S_SPAN,
    S_SPAN_NAME,
    S_TRACE_HI,
    S_TRACE_LO,
    S_SAMPLES,
    S_TLAB_SIZE,
    S_ALLOC_SIZE,
    S_WEIGHT,
    S_DURATION,
    S_SIZE,
    S_NAME,
    S_VALUE,
    S_COUNT
};
#define M(s) (1u << (s))
#define CORR (M(S_CTX) | M(S_SPAN) | M(S_SPAN_NAME) | M(S_TRACE_HI) | M(S_TRACE_LO))

/* Bound by name and shape, as Pyroscope's parser binds them; a field of another shape is skipped
 * like an unknown one. */
static const bind_spec event_spec[] = {
    {"stackTrace", S_STACK, B_REF, "jdk.types.StackTrace"},
    {"state", S_STATE, B_REF, "jdk.types.ThreadState"},
    {"contextId", S_CTX, B_U64, NULL},
    {"spanId", S_SPAN, B_U64, NULL},
    {"spanName", S_SPAN_NAME, B_U64, NULL},
    {"traceIdHi", S_TRACE_HI, B_U64, NULL},
    {"traceIdLo", S_TRACE_LO, B_U64, NULL},
    {"samples", S_SAMPLES, B_U64, NULL},
    {"tlabSize", S_TLAB_SIZE, B_U64, NULL},
    {"allocationSize", S_ALLOC_SIZE, B_U64, NULL},
    {"weight", S_WEIGHT, B_U64, NULL},
    {"duration", S_DURATION, B_U64, NULL},
    {"size", S_SIZE, B_U64, NULL},
    {"name", S_NAME, B_STR, NULL},
    {"value", S_VALUE, B_STR, NULL},
    {NULL, 0, 0, NULL},
};

/* What each event kind reads (§3.2, §3.3: only these kinds carry correlation ids). */
static const uint32_t kind_slots[PC_JFR_KIND_COUNT] = {
    [PC_JFR_EXECUTION_SAMPLE] = M(S_STACK) | M(S_STATE) | CORR,
    [PC_JFR_WALL_CLOCK_SAMPLE] = M(S_STACK) | M(S_STATE) | CORR | M(S_SAMPLES),
    [PC_JFR_ALLOC_IN_NEW_TLAB] = M(S_STACK) | CORR | M(S_TLAB_SIZE),
    [PC_JFR_ALLOC_OUTSIDE_TLAB] = M(S_STACK) | CORR | M(S_ALLOC_SIZE),
    [PC_JFR_ALLOC_SAMPLE] = M(S_STACK) | M(S_WEIGHT),
    [PC_JFR_LIVE_OBJECT] = M(S_STACK),
    [PC_JFR_MONITOR_ENTER] = M(S_STACK) | CORR | M(S_DURATION),
    [PC_JFR_THREAD_PARK] = M(S_STACK) | M(S_DURATION),
    [PC_JFR_MALLOC] = M(S_STACK) | M(S_SIZE),
    [PC_JFR_ACTIVE_SETTING] = M(S_NAME) | M(S_VALUE),
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

typedef struct plan {
    int32_t type; /* -1: the type is not in this chunk's metadata (nothing is read) */
    uint32_t bound;
    int8_t *slot; /* per field: the slot, or -1 (skipped) */
    uint8_t *kind;
} plan;

/* ---- output groups (§3.2) ---- */

enum {
    G_CPU,
    G_WALL,
    G_TLAB_IN,
    G_TLAB_OUT,
    G_ALLOC_SAMPLE,
    G_LIVE,
    G_MUTEX,
    G_BLOCK,
    G_MALLOC,
    G_COUNT
};

typedef struct group_def {
    const char *metric;
    int nvals;
    const char *type[2], *unit[2];
    const char *ptype, *punit; /* NULL: no period type */
} group_def;

static const group_def groups[G_COUNT] = {
    [G_CPU] = {"process_cpu", 1, {"cpu", NULL}, {"nanoseconds", NULL}, "cpu", "nanoseconds"},
    [G_WALL] = {"wall", 1, {"wall", NULL}, {"nanoseconds", NULL}, "wall", "nanoseconds"},
    [G_TLAB_IN] = {"memory",
                   2,
                   {"alloc_in_new_tlab_objects", "alloc_in_new_tlab_bytes"},
                   {"count", "bytes"},
                   "space",
                   "bytes"},
    [G_TLAB_OUT] = {"memory",
                    2,
                    {"alloc_outside_tlab_objects", "alloc_outside_tlab_bytes"},
                    {"count", "bytes"},
                    "space",
                    "bytes"},
    [G_ALLOC_SAMPLE] = {"memory",
                        2,
                        {"alloc_sample_objects", "alloc_sample_bytes"},
                        {"count", "bytes"},
                        "space",
                        "bytes"},
    [G_LIVE] = {"memory", 1, {"live", NULL}, {"count", NULL}, "objects", "count"},
    [G_MUTEX] = {"mutex", 2, {"contentions", "delay"}, {"count", "nanoseconds"}, "mutex", "count"},
    [G_BLOCK] = {"block", 2, {"contentions", "delay"}, {"count", "nanoseconds"}, "block", "count"},
    [G_MALLOC] = {"memory", 2, {"malloc_objects", "malloc_bytes"}, {"count", "bytes"}, NULL, NULL},
};

/* ---- small containers, charged to the budget ---- */

typedef struct umap { /* u64 key -> u32 value, open addressing */
    uint64_t *keys;
    uint32_t *vals; /* value + 1; 0: empty slot */
    size_t cap, n;
} umap;

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

typedef struct pentry {
    uint64_t pos; /* where the entry's value starts in the input */
    int32_t cache;
    int32_t done; /* cache is set */
} pentry;

typedef struct pool {
    umap map;
    pentry *v;
    size_t n, cap;
} pool;

typedef struct gsample {
    int32_t stack;
    uint32_t corr;
    uint64_t v[2];
} gsample;

typedef struct group {
    umap map; /* (stack, corr) -> sample */
    gsample *s;
    size_t n, cap;
    uint32_t kinds; /* event kinds that contributed */
} group;

typedef struct corr { /* correlation ids of an event: contextId, spanId, spanName, trace hi/lo */
    uint64_t v[5];
    uint32_t attr_off, attr_n;
} corr;

enum { ST_UNKNOWN, ST_SLEEPING, ST_RUNNABLE, ST_OTHER };

typedef Io__Pyroscope__Labels__Pb__LabelsSnapshot labels_snapshot;

/* What a chunk's values are read with. */
typedef struct chunk {
    size_t cstart, cend;
    uint64_t ticks_per_sec;
    pc_arena *ca;
    jtype *types;
    size_t ntypes, types_cap;
    jfield *fields;
    size_t nfields, fields_cap;
    umap tmap; /* type id -> index */
    pool pools[P_COUNT];
    plan pplan[P_COUNT];
    plan frame_plan;
    bool ev_have[PC_JFR_KIND_COUNT];
    uint64_t ev_id[PC_JFR_KIND_COUNT];
    plan ev_plan[PC_JFR_KIND_COUNT];
    size_t entries;
} chunk;

typedef struct dec {
    const uint8_t *buf;
    size_t len;
    const pc_jfr_opts *o;
    pc_budget *budget;
    pc_error *e;
    pc_jfr_stats *st;
    size_t max_chunks, max_depth, max_mstrings, max_elements, max_entries;
    uint64_t work, max_work;
    uint64_t period;
    size_t charged; /* bytes of malloc'd tables charged to the budget */

    /* output */
    pc_batch *b;
    pc_dict_builder *db;
    group groups[G_COUNT];
    umap corr_map; /* hash of the ids -> first corr with that hash (chained by probing) */
    corr *corrs;
    size_t ncorrs, corrs_cap;
    int32_t *cattrs;    /* the attributes of every correlation, one run each */
    const char **ckeys; /* their keys */
    size_t ncattrs, cattrs_cap, ckeys_cap;
    int32_t trunc_loc;
    sbuf event; /* the last `event` setting */
    bool have_event;

    /* labels */
    pc_arena *la;
    labels_snapshot *labels;
    umap ctx_map, str_map;

    /* scratch */
    sbuf s1, name, fix;
    int32_t *locs;
    size_t locs_cap;

    chunk *c; /* the chunk being decoded */
} dec;

/* ---- errors ---- */

static int at(dec *d, int code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int at(dec *d, int code, size_t off, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pc_error_set(d->e, code, "offset %zu: %s", off, msg);
}

static int budget_error(dec *d)
{
    return pc_error_set(d->e, PC_E2BIG, "%s: over the decode budget",
                        d->budget && d->budget->what[0] ? d->budget->what : "JFR recording");
}

static int work_error(dec *d, size_t off)
{
    return at(d, PC_EINVAL, off,
              "decoding takes more than %" PRIu64
              " steps for a %zu-byte recording (metadata with fields that read nothing?)",
              d->max_work, d->len);
}

/* ---- memory ---- */

static void charge(dec *d, size_t n)
{
    d->charged += n;
    pc_budget_charge(d->budget, n);
}

static void uncharge(dec *d, size_t n)
{
    d->charged -= n;
    pc_budget_uncharge(d->budget, n);
}

/* Grow *p (elements of size elem, capacity *cap) to hold need elements. */
static void *vgrow(dec *d, void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return p;
    size_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    p = pc_xrealloc(p, nc * elem);
    charge(d, (nc - *cap) * elem);
    *cap = nc;
    return p;
}

static void vfree(dec *d, void *p, size_t cap, size_t elem)
{
    free(p);
    uncharge(d, cap * elem);
}

static inline size_t umap_hash(uint64_t k)
{
    k *= 0x9E3779B97F4A7C15ULL;
    return (size_t)(k ^ (k >> 29));
}

static uint32_t umap_get(const umap *m, uint64_t k)
{
    if (!m->cap) return UINT32_MAX;
    size_t mask = m->cap - 1;
    for (size_t i = umap_hash(k) & mask;; i = (i + 1) & mask) {
        if (!m->vals[i]) return UINT32_MAX;
        if (m->keys[i] == k) return m->vals[i] - 1;
    }
}

static void umap_insert_raw(umap *m, uint64_t k, uint32_t vplus1)
{
    size_t mask = m->cap - 1;
    size_t i = umap_hash(k) & mask;
    while (m->vals[i])
        i = (i + 1) & mask;
    m->keys[i] = k;
    m->vals[i] = vplus1;
}

/* Insert k -> v; when k is present, replace its value only if replace. */
static void umap_put(dec *d, umap *m, uint64_t k, uint32_t v, bool replace)
{
    if (m->cap) {
        size_t mask = m->cap - 1;
        for (size_t i = umap_hash(k) & mask; m->vals[i]; i = (i + 1) & mask)
            if (m->keys[i] == k) {
                if (replace) m->vals[i] = v + 1;
                return;
            }
    }
    if ((m->n + 1) * 4 > m->cap * 3) {
        umap old = *m;
        m->cap = old.cap ? old.cap * 2 : 64;
        m->keys = pc_xmalloc(m->cap * sizeof(uint64_t));
        m->vals = pc_xcalloc(m->cap, sizeof(uint32_t));
        charge(d, m->cap * (sizeof(uint64_t) + sizeof(uint32_t)));
        for (size_t i = 0; i < old.cap; i++)
            if (old.vals[i]) umap_insert_raw(m, old.keys[i], old.vals[i]);
        free(old.keys);
        free(old.vals);
        uncharge(d, old.cap * (sizeof(uint64_t) + sizeof(uint32_t)));
    }
    umap_insert_raw(m, k, v + 1);
    m->n++;
}

static void umap_free(dec *d, umap *m)
{
    free(m->keys);
    free(m->vals);
    uncharge(d, m->cap * (sizeof(uint64_t) + sizeof(uint32_t)));
    memset(m, 0, sizeof *m);
}

/* Room for extra more bytes (and a NUL) after b->len. */
static char *sb_room(dec *d, sbuf *b, size_t extra)
{
    b->p = vgrow(d, b->p, &b->cap, b->len + extra + 1, 1);
    return b->p + b->len;
}

static void sb_put(dec *d, sbuf *b, const char *s, size_t n)
{
    char *w = sb_room(d, b, n);
    if (n) memcpy(w, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

/* ---- primitives (§2.3, §2.4) ---- */

static inline int rd_varint(dec *d, size_t *pos, size_t end, uint64_t *out)
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
    return at(d, PC_EINVAL, *pos,
              "a compressed integer runs past the end of its record (at offset %zu)", end);
}

static int skip_bytes(dec *d, size_t *pos, size_t end, size_t n)
{
    if (end - *pos < n)
        return at(d, PC_EINVAL, *pos, "%zu bytes expected, only %zu left in the record", n,
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

static struct pentry *pool_get(dec *d, int p, uint64_t key);

/* The string at *pos: skipped when s is NULL; else *s, *n = its text (pointing into the input
 * for UTF-8, which the caller validates, or into sb, which is overwritten, for the converted
 * encodings); *s = NULL for the null string and for a key missing from the string pool. A
 * pooled string is one read through a pool reference: it may not refer to the pool again. */
static int rd_string(dec *d, size_t *pos, size_t end, sbuf *sb, const char **s, size_t *n,
                     bool pooled)
{
    size_t start = *pos;
    uint64_t len;
    int rc;
    if (s) {
        *s = NULL;
        *n = 0;
    }
    if (*pos >= end)
        return at(d, PC_EINVAL, start,
                  "a string's encoding byte expected, the record ends at offset %zu", end);
    uint8_t enc = d->buf[(*pos)++];
    switch (enc) {
    case 0: return 0; /* null */
    case 1:
        if (s) *s = "";
        return 0;
    case 2: { /* a key into the java.lang.String pool */
        uint64_t key;
        if ((rc = rd_varint(d, pos, end, &key))) return rc;
        if (!s) return 0;
        if (pooled)
            return at(d, PC_EINVAL, start,
                      "a string-pool entry refers to the string pool again (key %" PRIu64 ")", key);
        pentry *e = pool_get(d, P_STRING, key);
        if (!e) return 0;
        size_t p = (size_t)e->pos;
        return rd_string(d, &p, d->c->cend, sb, s, n, true);
    }
    case 3:   /* UTF-8 bytes */
    case 5: { /* Latin-1 bytes */
        if ((rc = rd_varint(d, pos, end, &len))) return rc;
        if (len > end - *pos)
            return at(d, PC_EINVAL, start,
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
        char *o = sb_room(d, sb, (size_t)len * 2);
        size_t w = 0;
        for (size_t i = 0; i < len; i++)
            put_utf8(o, &w, b[i]);
        *s = o;
        *n = w;
        return 0;
    }
    case 4: { /* UTF-16 code units, one compressed integer each */
        if ((rc = rd_varint(d, pos, end, &len))) return rc;
        if (len > end - *pos)
            return at(d, PC_EINVAL, start,
                      "string of %" PRIu64
                      " UTF-16 units runs past the end of its record (at offset %zu)",
                      len, end);
        uint64_t u;
        if (!s) {
            for (uint64_t i = 0; i < len; i++)
                if ((rc = rd_varint(d, pos, end, &u))) return rc;
            return 0;
        }
        sb->len = 0;
        char *o = sb_room(d, sb, (size_t)len * 3); /* at most 3 bytes per unit */
        size_t w = 0;
        uint32_t hi = 0;
        for (uint64_t i = 0; i < len; i++) {
            if ((rc = rd_varint(d, pos, end, &u))) return rc;
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
    default: return at(d, PC_EINVAL, start, "unknown string encoding %u (0 to 5 expected)", enc);
    }
}

/* s[0..n) as valid UTF-8: itself, or a copy in d->fix with each invalid byte as U+FFFD. */
static const char *utf8_fixed(dec *d, const char *s, size_t n, size_t *outn)
{
    size_t bad = pc_utf8_invalid_at(s, n);
    *outn = n;
    if (bad == n) return s;
    d->fix.len = 0;
    size_t i = 0;
    for (;;) {
        sb_put(d, &d->fix, s + i, bad);
        i += bad;
        if (i >= n) break;
        sb_put(d, &d->fix, "\xEF\xBF\xBD", 3);
        i++;
        bad = pc_utf8_invalid_at(s + i, n - i);
    }
    *outn = d->fix.len;
    return d->fix.p;
}

/* ---- generic values (§2.7) ---- */

static int skip_value(dec *d, int32_t ti, size_t *pos, size_t end, int depth);

static int skip_field(dec *d, const jfield *f, size_t *pos, size_t end, int depth)
{
    uint64_t count = 1, v;
    int rc;
    if (!f->cpool && f->type < 0)
        return at(d, PC_EINVAL, *pos,
                  "field \"%s\" has type id %" PRIu64 ", which the metadata does not define",
                  f->name ? f->name : "", f->type_id);
    if (f->array) {
        size_t start = *pos;
        if ((rc = rd_varint(d, pos, end, &count))) return rc;
        if (count > end - *pos)
            return at(d, PC_EINVAL, start,
                      "array of %" PRIu64 " elements, only %zu bytes left in the record", count,
                      end - *pos);
    }
    for (uint64_t i = 0; i < count; i++) {
        size_t before = *pos;
        rc = f->cpool ? rd_varint(d, pos, end, &v) : skip_value(d, f->type, pos, end, depth);
        if (rc) return rc;
        if (*pos == before) break; /* elements that read nothing: so do the others */
    }
    return 0;
}

static int skip_value(dec *d, int32_t ti, size_t *pos, size_t end, int depth)
{
    jtype *t = &d->c->types[ti];
    uint64_t v;
    switch (t->kind) {
    case K_BOOL:
    case K_BYTE: return skip_bytes(d, pos, end, 1);
    case K_VARINT: return rd_varint(d, pos, end, &v);
    case K_FLOAT: return skip_bytes(d, pos, end, 4);
    case K_DOUBLE: return skip_bytes(d, pos, end, 8);
    case K_STRING: return rd_string(d, pos, end, NULL, NULL, NULL, false);
    default: break;
    }
    if (t->zero_width) return 0;
    if (depth >= PC_JFR_MAX_VALUE_DEPTH)
        return at(d, PC_EINVAL, *pos, "values nested deeper than %d levels (in type \"%s\")",
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
static int read_fields(dec *d, const plan *pl, size_t *pos, size_t end, uint64_t *slots)
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
                    rc = rd_varint(d, pos, end, &slots[s]);
                } else {
                    rc = skip_bytes(d, pos, end, 1);
                    if (!rc) slots[s] = d->buf[*pos - 1];
                }
                break;
            case B_REF: rc = rd_varint(d, pos, end, &slots[s]); break;
            case B_STR:
                slots[s] = *pos;
                rc = rd_string(d, pos, end, NULL, NULL, NULL, false);
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

static bool shape_ok(const dec *d, const jfield *f, const bind_spec *sp)
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

static void make_plan(dec *d, int32_t ti, const bind_spec *spec, uint32_t mask, plan *pl)
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

static int parse_header(dec *d, size_t pos, chunk_header *h)
{
    const uint8_t *p = d->buf + pos;
    size_t left = d->len - pos;
    if (left < HEADER_SIZE)
        return at(d, PC_EINVAL, pos, "truncated chunk header: %d bytes expected, %zu left",
                  HEADER_SIZE, left);
    if (memcmp(p, "FLR\0", 4) != 0)
        return at(d, PC_EINVAL, pos,
                  "chunk magic %02x%02x%02x%02x, expected 464c5200 (\"FLR\\0\"): not a JFR "
                  "recording",
                  p[0], p[1], p[2], p[3]);
    unsigned major = (unsigned)p[4] << 8 | p[5], minor = (unsigned)p[6] << 8 | p[7];
    if (major != 1 && major != 2)
        return at(d, PC_EINVAL, pos + 4, "JFR version %u.%u, expected 1.x or 2.x", major, minor);
    h->size = be64(p + 8);
    h->cp_offset = be64(p + 16);
    h->meta_offset = be64(p + 24);
    h->ticks_per_sec = be64(p + 56);
    if (h->size < HEADER_SIZE)
        return at(d, PC_EINVAL, pos + 8, "chunk size %" PRIu64 " is less than its %d-byte header",
                  h->size, HEADER_SIZE);
    if (h->size > left)
        return at(d, PC_EINVAL, pos + 8,
                  "chunk of %" PRIu64 " bytes, only %zu left in the recording (truncated?)",
                  h->size, left);
    if (h->cp_offset == 0 || h->meta_offset == 0)
        return at(d, PC_EINVAL, pos + 16,
                  "chunk is unfinished (constant-pool offset %" PRIu64 ", metadata offset %" PRIu64
                  "): still being written?",
                  h->cp_offset, h->meta_offset);
    if (h->cp_offset < HEADER_SIZE || h->cp_offset >= h->size)
        return at(d, PC_EINVAL, pos + 16,
                  "constant-pool offset %" PRIu64 " outside the chunk (%d to %" PRIu64 ")",
                  h->cp_offset, HEADER_SIZE, h->size - 1);
    if (h->meta_offset < HEADER_SIZE || h->meta_offset >= h->size)
        return at(d, PC_EINVAL, pos + 24,
                  "metadata offset %" PRIu64 " outside the chunk (%d to %" PRIu64 ")",
                  h->meta_offset, HEADER_SIZE, h->size - 1);
    return 0;
}

/* A record's size and type at *pos; *end is where it ends. */
static int record_head(dec *d, size_t *pos, size_t *end, uint64_t *type, const char *what)
{
    size_t rec = *pos;
    uint64_t size;
    int rc;
    if ((rc = rd_varint(d, pos, d->c->cend, &size))) return rc;
    if (size == 0) return at(d, PC_EINVAL, rec, "%s of size 0 (at least 2 bytes expected)", what);
    if (size > d->c->cend - rec)
        return at(d, PC_EINVAL, rec,
                  "%s of %" PRIu64 " bytes runs past the end of the chunk (at offset %zu)", what,
                  size, d->c->cend);
    *end = rec + (size_t)size;
    if ((rc = rd_varint(d, pos, *end, type))) return rc;
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

static int meta_index(dec *d, meta *m, size_t *pos, size_t end, const char **out)
{
    size_t start = *pos;
    uint64_t i;
    int rc;
    *out = NULL;
    if ((rc = rd_varint(d, pos, end, &i))) return rc;
    if (i >= m->nstr)
        return at(d, PC_EINVAL, start,
                  "metadata string index %" PRIu64 " out of range (%" PRIu64 " strings)", i,
                  m->nstr);
    *out = m->str[i].s;
    return 0;
}

static int parse_element(dec *d, meta *m, size_t *pos, size_t end, int depth, int parent)
{
    size_t start = *pos;
    const char *ename, *k, *v;
    uint64_t nattr, nchild;
    int rc;
    if (depth > PC_JFR_MAX_METADATA_DEPTH)
        return at(d, PC_EINVAL, start, "metadata elements nested deeper than %d levels",
                  PC_JFR_MAX_METADATA_DEPTH);
    if (++m->elements > d->max_elements)
        return at(d, PC_E2BIG, start,
                  "metadata has more than %zu elements (limit jfr.max_metadata_elements)",
                  d->max_elements);
    if ((rc = meta_index(d, m, pos, end, &ename))) return rc;
    if ((rc = rd_varint(d, pos, end, &nattr))) return rc;
    if (nattr > (end - *pos) / 2)
        return at(d, PC_EINVAL, start,
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
    if (kind == E_CLASS) {
        uint64_t tid;
        if (parse_u64(id, &tid))
            return at(d, PC_EINVAL, start, "metadata class \"%s\" has no numeric id (\"%s\")",
                      name ? name : "", id ? id : "");
        d->c->types = vgrow(d, d->c->types, &d->c->types_cap, d->c->ntypes + 1, sizeof(jtype));
        d->c->types[d->c->ntypes++] = (jtype){.id = tid,
                                              .name = name ? name : "",
                                              .first_field = (uint32_t)d->c->nfields,
                                              .kind = K_STRUCT,
                                              .pool = -1};
    } else if (kind == E_FIELD) {
        uint64_t tid, dimension = 0;
        if (parse_u64(cls, &tid))
            return at(d, PC_EINVAL, start, "metadata field \"%s\" has no numeric class (\"%s\")",
                      name ? name : "", cls ? cls : "");
        if (dim && (parse_u64(dim, &dimension) || dimension > 1))
            return at(d, PC_EINVAL, start, "metadata field \"%s\" has dimension \"%s\" (0 or 1)",
                      name ? name : "", dim);
        d->c->fields = vgrow(d, d->c->fields, &d->c->fields_cap, d->c->nfields + 1, sizeof(jfield));
        d->c->fields[d->c->nfields++] = (jfield){.name = name ? name : "",
                                                 .type_id = tid,
                                                 .type = -1,
                                                 .cpool = streq(cpool, "true"),
                                                 .array = dimension == 1};
        d->c->types[d->c->ntypes - 1].n_fields++;
    }
    if ((rc = rd_varint(d, pos, end, &nchild))) return rc;
    if (nchild > (end - *pos) / 3)
        return at(d, PC_EINVAL, start,
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

static int32_t find_type(const dec *d, const char *name)
{
    for (size_t i = 0; i < d->c->ntypes; i++)
        if (strcmp(d->c->types[i].name, name) == 0) return (int32_t)i;
    return -1;
}

static int parse_metadata(dec *d, size_t pos)
{
    size_t rec = pos, end;
    uint64_t type, v, nstr;
    int rc;
    if ((rc = record_head(d, &pos, &end, &type, "metadata record"))) return rc;
    if (type != 0)
        return at(d, PC_EINVAL, rec,
                  "the header's metadata offset points at a record of type %" PRIu64
                  " (metadata, type 0, expected)",
                  type);
    for (int i = 0; i < 3; i++) /* start time, duration, metadata id */
        if ((rc = rd_varint(d, &pos, end, &v))) return rc;
    size_t at_count = pos;
    if ((rc = rd_varint(d, &pos, end, &nstr))) return rc;
    if (nstr > d->max_mstrings)
        return at(d, PC_E2BIG, at_count,
                  "metadata has %" PRIu64
                  " strings, more than %zu (limit jfr.max_metadata_strings)",
                  nstr, d->max_mstrings);
    if (nstr > end - pos)
        return at(d, PC_EINVAL, at_count,
                  "metadata claims %" PRIu64 " strings, only %zu bytes left in the record", nstr,
                  end - pos);
    meta m = {.str = pc_arena_alloc(d->c->ca, (size_t)(nstr ? nstr : 1) * sizeof(mstr)),
              .nstr = nstr};
    for (uint64_t i = 0; i < nstr; i++) {
        const char *s;
        size_t n;
        if ((rc = rd_string(d, &pos, end, &d->s1, &s, &n, false))) return rc;
        m.str[i].s = s ? pc_arena_strndup(d->c->ca, s, n) : NULL;
    }
    if ((rc = parse_element(d, &m, &pos, end, 0, E_OTHER))) return rc;
    if (!pc_budget_ok(d->budget)) return budget_error(d);

    /* ids -> types; field types; primitive kinds */
    for (size_t i = 0; i < d->c->ntypes; i++) {
        jtype *t = &d->c->types[i];
        uint32_t dup = umap_get(&d->c->tmap, t->id);
        if (dup != UINT32_MAX)
            return at(d, PC_EINVAL, rec, "metadata defines type id %" PRIu64 " twice (%s, %s)",
                      t->id, d->c->types[dup].name, t->name);
        umap_put(d, &d->c->tmap, t->id, (uint32_t)i, false);
        t->kind = kind_of(t->name);
    }
    for (size_t i = 0; i < d->c->nfields; i++) {
        uint32_t ti = umap_get(&d->c->tmap, d->c->fields[i].type_id);
        d->c->fields[i].type = ti == UINT32_MAX ? -1 : (int32_t)ti;
    }
    for (int p = 0; p < P_COUNT; p++) {
        int32_t ti = find_type(d, pool_type_names[p]);
        if (ti >= 0) d->c->types[ti].pool = (int8_t)p;
        make_plan(d, pool_spec[p] ? ti : -1, pool_spec[p], ~0u, &d->c->pplan[p]);
    }
    make_plan(d, find_type(d, "jdk.types.StackFrame"), frame_spec, ~0u, &d->c->frame_plan);
    for (int k = 0; k < PC_JFR_KIND_COUNT; k++) {
        int32_t ti = find_type(d, pc_jfr_kind_names[k]);
        d->c->ev_have[k] = ti >= 0 && d->c->types[ti].kind == K_STRUCT;
        if (!d->c->ev_have[k]) continue;
        d->c->ev_id[k] = d->c->types[ti].id;
        make_plan(d, ti, event_spec, kind_slots[k], &d->c->ev_plan[k]);
    }
    return 0;
}

/* ---- constant pools (§2.8) ---- */

static pentry *pool_get(dec *d, int p, uint64_t key)
{
    pool *pl = &d->c->pools[p];
    uint32_t i = umap_get(&pl->map, key);
    return i == UINT32_MAX ? NULL : &pl->v[i];
}

static void pool_add(dec *d, int p, uint64_t key, size_t pos)
{
    pool *pl = &d->c->pools[p];
    if (umap_get(&pl->map, key) != UINT32_MAX) return; /* a later checkpoint's entry wins */
    pl->v = vgrow(d, pl->v, &pl->cap, pl->n + 1, sizeof(pentry));
    pl->v[pl->n] = (pentry){.pos = pos};
    umap_put(d, &pl->map, key, (uint32_t)pl->n, false);
    pl->n++;
}

static int parse_pool(dec *d, size_t *pos, size_t end)
{
    size_t start = *pos;
    uint64_t tid, count, key;
    int rc;
    if ((rc = rd_varint(d, pos, end, &tid))) return rc;
    if ((rc = rd_varint(d, pos, end, &count))) return rc;
    uint32_t ti = umap_get(&d->c->tmap, tid);
    if (ti == UINT32_MAX)
        return at(d, PC_EINVAL, start,
                  "constant pool of type id %" PRIu64 ", which the metadata does not define", tid);
    if (count > end - *pos)
        return at(d, PC_EINVAL, start,
                  "constant pool of %" PRIu64 " entries, only %zu bytes left in the checkpoint",
                  count, end - *pos);
    if (count > d->max_entries - d->c->entries)
        return at(d, PC_E2BIG, start,
                  "the chunk has more than %zu constant-pool entries (limit "
                  "jfr.max_pool_entries)",
                  d->max_entries);
    d->c->entries += (size_t)count;
    int p = d->c->types[ti].pool;
    for (uint64_t i = 0; i < count; i++) {
        if ((rc = rd_varint(d, pos, end, &key))) return rc;
        size_t vpos = *pos;
        if (p == P_STACK && d->c->pplan[P_STACK].type >= 0) {
            /* the one limit checked on content: frames per stack trace */
            uint64_t s[2] = {0, 0}, nframes;
            if ((rc = read_fields(d, &d->c->pplan[P_STACK], pos, end, s))) return rc;
            if (d->c->pplan[P_STACK].bound & 2) {
                size_t fp = (size_t)s[1];
                if ((rc = rd_varint(d, &fp, end, &nframes))) return rc;
                if (nframes > d->max_depth)
                    return at(d, PC_E2BIG, (size_t)s[1],
                              "stack trace of %" PRIu64
                              " frames, more than %zu (limit jfr.max_stack_depth)",
                              nframes, d->max_depth);
            }
        } else if ((rc = skip_value(d, (int32_t)ti, pos, end, 0))) {
            return rc;
        }
        if (p >= 0) pool_add(d, p, key, vpos);
        if ((i & 1023) == 1023 && !pc_budget_ok(d->budget)) return budget_error(d);
    }
    return 0;
}

/* The chain from the header's offset: each checkpoint's delta leads to the one before it, 0 ends
 * it. A delta must point back into the chunk's records, so the walk always ends. */
static int parse_checkpoints(dec *d, size_t pos)
{
    for (;;) {
        size_t rec = pos, end;
        uint64_t type, v, delta_u, npools;
        int rc;
        if ((rc = record_head(d, &pos, &end, &type, "checkpoint record"))) return rc;
        if (type != 1)
            return at(d, PC_EINVAL, rec,
                      "the checkpoint chain leads to a record of type %" PRIu64
                      " (checkpoint, type 1, expected)",
                      type);
        if ((rc = rd_varint(d, &pos, end, &v)) || (rc = rd_varint(d, &pos, end, &v))) return rc;
        size_t delta_at = pos;
        if ((rc = rd_varint(d, &pos, end, &delta_u))) return rc;
        if ((rc = rd_varint(d, &pos, end, &v))) return rc; /* flags */
        if ((rc = rd_varint(d, &pos, end, &npools))) return rc;
        if (npools > end - pos)
            return at(d, PC_EINVAL, rec,
                      "checkpoint of %" PRIu64 " pools, only %zu bytes left in it", npools,
                      end - pos);
        for (uint64_t i = 0; i < npools; i++)
            if ((rc = parse_pool(d, &pos, end))) return rc;
        if (!pc_budget_ok(d->budget)) return budget_error(d);
        int64_t delta = (int64_t)delta_u;
        if (delta == 0) return 0;
        uint64_t back = (uint64_t)0 - delta_u;
        size_t first = d->c->cstart + HEADER_SIZE;
        if (delta > 0 || back > rec - first)
            return at(d, PC_EINVAL, delta_at,
                      "checkpoint delta %" PRId64
                      " does not lead back to an earlier record of the chunk (offsets %zu to "
                      "%zu)",
                      delta, first, rec - 1);
        pos = rec - (size_t)back;
    }
}

/* ---- resolving what an event refers to ---- */

/* Pyroscope's rewrites of generated class and library names (§3.5), applied to one symbol
 * appended to out at from. Each is the anchored regular expression of the spec, written out. */
static bool all_digits(const char *s, size_t n)
{
    if (!n) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

static bool all_hex(const char *s, size_t n)
{
    if (!n) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

static bool starts(const char *s, size_t n, const char *prefix, size_t *i)
{
    size_t pl = strlen(prefix);
    if (n - *i < pl || memcmp(s + *i, prefix, pl) != 0) return false;
    *i += pl;
    return true;
}

/* (\$?\d*[./](0x)?[\da-f]+|\d+) over all of s */
static bool lambda_suffix(const char *s, size_t n)
{
    if (all_digits(s, n)) return true;
    size_t i = 0;
    if (i < n && s[i] == '$') i++;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    if (i >= n || (s[i] != '.' && s[i] != '/')) return false;
    i++;
    if (n - i > 2 && s[i] == '0' && s[i + 1] == 'x' && all_hex(s + i + 2, n - i - 2)) return true;
    return all_hex(s + i, n - i);
}

/* (\.?/tmp/)?, (...)( \(deleted\))?$ around a library name */
static void tmp_prefix(const char *s, size_t n, size_t *i)
{
    if (!starts(s, n, "./tmp/", i)) starts(s, n, "/tmp/", i);
}

static bool so_end(const char *s, size_t n, size_t i)
{
    if (!starts(s, n, ".so", &i)) return false;
    starts(s, n, " (deleted)", &i);
    return i == n;
}

static bool digits_then(const char *s, size_t n, size_t *i, char c)
{
    size_t j = *i;
    while (j < n && s[j] >= '0' && s[j] <= '9')
        j++;
    if (j == *i || j >= n || s[j] != c) return false;
    *i = j + 1;
    return true;
}

/* Rightmost occurrence of pat at a position >= 1 (the greedy ".+" before it). */
static size_t rfind_after_first(const char *s, size_t n, const char *pat)
{
    size_t pl = strlen(pat);
    for (size_t p = n >= pl ? n - pl : 0; p >= 1 && n >= pl; p--)
        if (memcmp(s + p, pat, pl) == 0) return p;
    return SIZE_MAX;
}

static size_t rewrite_symbol(char *s, size_t n)
{
    static const char gma[] = "jdk/internal/reflect/GeneratedMethodAccessor";
    size_t i = 0;
    bool nl = memchr(s, '\n', n) != NULL; /* '.' of the expressions does not match a newline */
    if (starts(s, n, gma, &i) && all_digits(s + i, n - i)) {
        s[i] = '_';
        n = i + 1;
    }
    if (!nl && memmem(s, n, "$$Lambda", 8)) {
        for (size_t p = n; p-- > 1;) {
            if (p + 8 > n || memcmp(s + p, "$$Lambda", 8) != 0) continue;
            if (lambda_suffix(s + p + 8, n - p - 8)) {
                s[p + 8] = '_';
                n = p + 9;
                break;
            }
        }
    }
    if (memmem(s, n, "libzstd-jni-", 12)) {
        i = 0;
        tmp_prefix(s, n, &i);
        if (starts(s, n, "libzstd-jni-", &i) && digits_then(s, n, &i, '.') &&
            digits_then(s, n, &i, '.') && digits_then(s, n, &i, '-') &&
            digits_then(s, n, &i, '.') && so_end(s, n, i - 1)) {
            memcpy(s, "libzstd-jni-_.so", 16);
            n = 16;
        }
    }
    if (memmem(s, n, "amazonCorrettoCryptoProvider", 28)) {
        i = 0;
        tmp_prefix(s, n, &i);
        starts(s, n, "lib", &i);
        if (starts(s, n, "amazonCorrettoCryptoProvider", &i)) {
            starts(s, n, "NativeLibraries.", &i);
            if (n - i >= 16 && all_hex(s + i, 16)) {
                i += 16;
                if (!starts(s, n, "/libcrypto", &i))
                    starts(s, n, "/libamazonCorrettoCryptoProvider", &i);
                if (so_end(s, n, i)) {
                    memcpy(s, "libamazonCorrettoCryptoProvider_.so", 35);
                    n = 35;
                }
            }
        }
    }
    if (memmem(s, n, "libasyncProfiler-", 17)) {
        static const char *const plat[] = {"linux-arm64-", "linux-musl-x64-", "linux-x64-",
                                           "macos-"};
        i = 0;
        tmp_prefix(s, n, &i);
        if (starts(s, n, "libasyncProfiler-", &i)) {
            for (size_t k = 0; k < 4; k++) {
                size_t j = i;
                if (starts(s, n, plat[k], &j) &&
                    starts(s, n, "17b9a1d8156277a98ccc871afa9a8f69215f92", &j) && so_end(s, n, j)) {
                    memcpy(s, "libasyncProfiler-_.so", 21);
                    n = 21;
                    break;
                }
            }
        }
    }
    if (!nl) {
        size_t p = rfind_after_first(s, n, "$$EnhancerBySpringCGLIB$$");
        if (p != SIZE_MAX) { /* the buffer has room for the one byte this may add */
            s[p + 25] = '_';
            n = p + 26;
        }
    }
    return n;
}

/* Append the (rewritten) text of Symbol key to out; nothing when the symbol is missing. */
static int append_symbol(dec *d, uint64_t key, sbuf *out)
{
    pentry *e = pool_get(d, P_SYMBOL, key);
    if (!e) return 0;
    const plan *pl = &d->c->pplan[P_SYMBOL];
    if (!(pl->bound & 1)) return 0;
    uint64_t s[1] = {0};
    size_t p = (size_t)e->pos;
    int rc;
    if ((rc = read_fields(d, pl, &p, d->c->cend, s))) return rc;
    const char *str;
    size_t n;
    p = (size_t)s[0];
    if ((rc = rd_string(d, &p, d->c->cend, &d->s1, &str, &n, false))) return rc;
    if (!str) return 0;
    char *w = sb_room(d, out, n + 1);
    memcpy(w, str, n);
    out->len += rewrite_symbol(w, n);
    out->p[out->len] = 0;
    return 0;
}

/* Append the name of Class key to out; *found = false when the class is missing. */
static int class_name(dec *d, uint64_t key, sbuf *out, bool *found)
{
    pentry *e = pool_get(d, P_CLASS, key);
    *found = e != NULL;
    if (!e) return 0;
    uint64_t cs[1] = {0};
    size_t p = (size_t)e->pos;
    int rc;
    if ((rc = read_fields(d, &d->c->pplan[P_CLASS], &p, d->c->cend, cs))) return rc;
    return (d->c->pplan[P_CLASS].bound & 1) ? append_symbol(d, cs[0], out) : 0;
}

/* Method key -> function index; -1 when the method or its class is missing. */
static int resolve_method(dec *d, uint64_t key, int32_t *fn)
{
    pentry *e = pool_get(d, P_METHOD, key);
    *fn = -1;
    if (!e) return 0;
    if (e->done) {
        *fn = e->cache;
        return 0;
    }
    e->done = 1;
    e->cache = -1;
    uint64_t ms[2] = {0, 0};
    size_t p = (size_t)e->pos;
    bool found = false;
    int rc;
    if ((rc = read_fields(d, &d->c->pplan[P_METHOD], &p, d->c->cend, ms))) return rc;
    d->name.len = 0;
    if ((d->c->pplan[P_METHOD].bound & 1) && (rc = class_name(d, ms[0], &d->name, &found)))
        return rc;
    if (!found) return 0;
    sb_put(d, &d->name, ".", 1);
    if (d->c->pplan[P_METHOD].bound & 2)
        if ((rc = append_symbol(d, ms[1], &d->name))) return rc;
    size_t n;
    const char *s = utf8_fixed(d, d->name.p, d->name.len, &n);
    e->cache = pc_dict_function(d->db, pc_dict_string(d->db, s, n), 0, 0, 0);
    *fn = e->cache;
    return 0;
}

/* The string field (slot 0) of the pool entry, or NULL. */
static int entry_string(dec *d, int p, uint64_t key, const char **s, size_t *n)
{
    pentry *e = pool_get(d, p, key);
    *s = NULL;
    *n = 0;
    if (!e) return 0;
    const plan *pl = &d->c->pplan[p];
    if (!(pl->bound & 1)) return 0;
    uint64_t sl[1] = {0};
    size_t pos = (size_t)e->pos;
    int rc;
    if ((rc = read_fields(d, pl, &pos, d->c->cend, sl))) return rc;
    pos = (size_t)sl[0];
    return rd_string(d, &pos, d->c->cend, &d->s1, s, n, false);
}

/* FrameType key -> the jfr.frame.type attribute, 0 when missing or empty. */
static int resolve_ftype(dec *d, uint64_t key, int32_t *attr)
{
    pentry *e = pool_get(d, P_FTYPE, key);
    *attr = 0;
    if (!e) return 0;
    if (!e->done) {
        const char *s;
        size_t n;
        int rc;
        if ((rc = entry_string(d, P_FTYPE, key, &s, &n))) return rc;
        e->done = 1;
        e->cache = 0;
        if (s && n) {
            s = utf8_fixed(d, s, n, &n);
            e->cache = pc_dict_attr_str(d->db, "jfr.frame.type", s, n);
        }
    }
    *attr = e->cache;
    return 0;
}

static int resolve_state(dec *d, uint64_t key, int *state)
{
    pentry *e = pool_get(d, P_STATE, key);
    *state = ST_UNKNOWN;
    if (!e) return 0;
    if (!e->done) {
        const char *s;
        size_t n;
        int rc;
        if ((rc = entry_string(d, P_STATE, key, &s, &n))) return rc;
        e->done = 1;
        e->cache = ST_OTHER;
        if (s && n == 14 && memcmp(s, "STATE_SLEEPING", 14) == 0) e->cache = ST_SLEEPING;
        if (s && n == 14 && memcmp(s, "STATE_RUNNABLE", 14) == 0) e->cache = ST_RUNNABLE;
    }
    *state = e->cache;
    return 0;
}

static int32_t location(dec *d, int32_t fn, int64_t line, int32_t attr)
{
    pc_line ln = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINE__INIT;
    pc_line *lines[1] = {&ln};
    pc_location loc = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
    ln.function_index = fn;
    ln.line = line;
    loc.n_lines = 1;
    loc.lines = lines;
    if (attr) {
        loc.n_attribute_indices = 1;
        loc.attribute_indices = &attr;
    }
    return pc_dict_location(d->db, &loc);
}

/* StackTrace key -> stack index (leaf first, as JFR writes it); -1 when missing. */
static int resolve_stack(dec *d, uint64_t key, int32_t *out)
{
    pentry *e = pool_get(d, P_STACK, key);
    *out = -1;
    if (!e) return 0;
    if (e->done) {
        *out = e->cache;
        return 0;
    }
    const plan *pl = &d->c->pplan[P_STACK], *fp = &d->c->frame_plan;
    uint64_t s[2] = {0, 0}, count = 0;
    size_t p = (size_t)e->pos, n = 0;
    int rc;
    if ((rc = read_fields(d, pl, &p, d->c->cend, s))) return rc;
    if (pl->bound & 2) {
        p = (size_t)s[1];
        if ((rc = rd_varint(d, &p, d->c->cend, &count))) return rc;
    }
    d->locs = vgrow(d, d->locs, &d->locs_cap, (size_t)count + 1, sizeof(int32_t));
    for (uint64_t i = 0; i < count; i++) {
        uint64_t f[3] = {0, 0, 0};
        int32_t fn, attr = 0;
        if ((rc = read_fields(d, fp, &p, d->c->cend, f))) return rc;
        if ((rc = resolve_method(d, f[0], &fn))) return rc;
        if (!(fp->bound & 1) || fn < 0) {
            d->st->frames_dropped++;
            continue;
        }
        if ((fp->bound & 4) && (rc = resolve_ftype(d, f[2], &attr))) return rc;
        /* the line as Pyroscope reads it: 32 bits, unsigned */
        int64_t line = (fp->bound & 2) ? (int64_t)(uint32_t)f[1] : 0;
        d->locs[n++] = location(d, fn, line, attr);
    }
    if ((pl->bound & 1) && s[0]) {
        d->st->truncated_stacks++;
        if (!d->trunc_loc) {
            int32_t fn = pc_dict_function(d->db, pc_dict_cstring(d->db, "[truncated]"), 0, 0, 0);
            d->trunc_loc = location(d, fn, 0, 0);
        }
        d->locs[n++] = d->trunc_loc;
    }
    e->done = 1;
    e->cache = pc_dict_stack(d->db, d->locs, n);
    *out = e->cache;
    return 0;
}

/* ---- samples ---- */

static size_t corr_hash(const uint64_t *v)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < 5; i++)
        h = (h ^ v[i]) * 0x100000001b3ULL;
    return (size_t)h;
}

/* The index of an event's correlation ids (0: none); chained through the map by probing on the
 * hash with a counter. */
static uint32_t corr_index(dec *d, const uint64_t *slots)
{
    uint64_t v[5] = {slots[S_CTX], slots[S_SPAN], slots[S_SPAN_NAME], slots[S_TRACE_HI],
                     slots[S_TRACE_LO]};
    if (!(v[0] | v[1] | v[2] | v[3] | v[4])) return 0;
    uint64_t h = corr_hash(v);
    for (uint64_t probe = 0;; probe++) {
        uint32_t i = umap_get(&d->corr_map, h + probe);
        if (i == UINT32_MAX) {
            d->corrs = vgrow(d, d->corrs, &d->corrs_cap, d->ncorrs + 1, sizeof(corr));
            if (!d->ncorrs) d->ncorrs = 1; /* 0 is "none" */
            corr *c = &d->corrs[d->ncorrs];
            memcpy(c->v, v, sizeof v);
            c->attr_off = c->attr_n = 0;
            umap_put(d, &d->corr_map, h + probe, (uint32_t)d->ncorrs, false);
            return (uint32_t)d->ncorrs++;
        }
        if (memcmp(d->corrs[i].v, v, sizeof v) == 0) return i;
    }
}

static void add_sample(dec *d, int g, int kind, int32_t stack, uint32_t corr, uint64_t v0,
                       uint64_t v1)
{
    group *gr = &d->groups[g];
    uint64_t key = (uint64_t)(uint32_t)stack << 32 | corr;
    uint32_t i = umap_get(&gr->map, key);
    gr->kinds |= 1u << kind;
    if (i == UINT32_MAX) {
        gr->s = vgrow(d, gr->s, &gr->cap, gr->n + 1, sizeof(gsample));
        i = (uint32_t)gr->n++;
        gr->s[i] = (gsample){.stack = stack, .corr = corr};
        umap_put(d, &gr->map, key, i, false);
    }
    gr->s[i].v[0] += v0; /* wrapping, as Pyroscope's int64 sums */
    gr->s[i].v[1] += v1;
}

static uint64_t ticks_to_ns(const dec *d, uint64_t t)
{
    if (!d->c->ticks_per_sec || d->c->ticks_per_sec == 1000000000u) return t;
    unsigned __int128 ns = (unsigned __int128)t * 1000000000u / d->c->ticks_per_sec;
    return ns > UINT64_MAX ? UINT64_MAX : (uint64_t)ns;
}

static int on_event(dec *d, int kind, const uint64_t *s, uint32_t bound)
{
    int rc, state = ST_UNKNOWN;
    d->st->events[kind]++;
    if (kind == PC_JFR_ACTIVE_SETTING) { /* async-profiler's profiling mode: `event` */
        const char *str;
        size_t n, p = (size_t)s[S_NAME];
        if ((bound & (M(S_NAME) | M(S_VALUE))) != (M(S_NAME) | M(S_VALUE))) return 0;
        if ((rc = rd_string(d, &p, d->c->cend, &d->s1, &str, &n, false))) return rc;
        if (!str || n != 5 || memcmp(str, "event", 5) != 0) return 0;
        p = (size_t)s[S_VALUE];
        if ((rc = rd_string(d, &p, d->c->cend, &d->s1, &str, &n, false))) return rc;
        d->event.len = 0;
        if (str) {
            str = utf8_fixed(d, str, n, &n);
            sb_put(d, &d->event, str, n);
        }
        d->have_event = true;
        return 0;
    }
    bool wall = d->have_event && d->event.len == 4 && memcmp(d->event.p, "wall", 4) == 0;
    if ((kind == PC_JFR_EXECUTION_SAMPLE || kind == PC_JFR_WALL_CLOCK_SAMPLE) &&
        (bound & M(S_STATE)) && (rc = resolve_state(d, s[S_STATE], &state)))
        return rc;
    /* which groups get the event: resolve the stack only when one does */
    bool cpu = false, wallg = false;
    if (kind == PC_JFR_EXECUTION_SAMPLE) {
        cpu = state != ST_UNKNOWN && state != ST_SLEEPING;
        wallg = wall;
        if (!cpu && !wallg) return 0;
    } else if (kind == PC_JFR_WALL_CLOCK_SAMPLE) {
        cpu = state == ST_RUNNABLE && wall;
        wallg = true;
    }
    int32_t stack = -1;
    if ((bound & M(S_STACK)) && (rc = resolve_stack(d, s[S_STACK], &stack))) return rc;
    if (stack < 0) {
        d->st->stacks_not_found++;
        return 0;
    }
    uint32_t corr = (kind_slots[kind] & CORR) ? corr_index(d, s) : 0;
    switch (kind) {
    case PC_JFR_EXECUTION_SAMPLE:
    case PC_JFR_WALL_CLOCK_SAMPLE: {
        uint64_t n =
            kind == PC_JFR_WALL_CLOCK_SAMPLE && (bound & M(S_SAMPLES)) ? (uint32_t)s[S_SAMPLES] : 1;
        if (cpu) add_sample(d, G_CPU, kind, stack, corr, n * d->period, 0);
        if (wallg) add_sample(d, G_WALL, kind, stack, corr, n * d->period, 0);
        break;
    }
    case PC_JFR_ALLOC_IN_NEW_TLAB:
        add_sample(d, G_TLAB_IN, kind, stack, corr, 1, s[S_TLAB_SIZE]);
        break;
    case PC_JFR_ALLOC_OUTSIDE_TLAB:
        add_sample(d, G_TLAB_OUT, kind, stack, corr, 1, s[S_ALLOC_SIZE]);
        break;
    case PC_JFR_ALLOC_SAMPLE: add_sample(d, G_ALLOC_SAMPLE, kind, stack, 0, 1, s[S_WEIGHT]); break;
    case PC_JFR_LIVE_OBJECT: add_sample(d, G_LIVE, kind, stack, 0, 1, 0); break;
    case PC_JFR_MONITOR_ENTER:
        add_sample(d, G_MUTEX, kind, stack, corr, 1, ticks_to_ns(d, s[S_DURATION]));
        break;
    case PC_JFR_THREAD_PARK:
        add_sample(d, G_BLOCK, kind, stack, 0, 1, ticks_to_ns(d, s[S_DURATION]));
        break;
    case PC_JFR_MALLOC: add_sample(d, G_MALLOC, kind, stack, 0, 1, s[S_SIZE]); break;
    default: break;
    }
    return 0;
}

/* One pass over the chunk's records: events of the kinds above, every other record skipped. */
static int scan_events(dec *d)
{
    size_t pos = d->c->cstart + HEADER_SIZE, end;
    uint64_t type, n = 0;
    int rc;
    while (pos < d->c->cend) {
        if ((rc = record_head(d, &pos, &end, &type, "record"))) return rc;
        int kind = -1;
        if (type > 1)
            for (int k = 0; k < PC_JFR_KIND_COUNT; k++)
                if (d->c->ev_have[k] && d->c->ev_id[k] == type) {
                    kind = k;
                    break;
                }
        if (kind < 0) {
            if (type > 1) d->st->skipped_events++;
            pos = end;
            continue;
        }
        uint64_t slots[S_COUNT] = {0};
        const plan *pl = &d->c->ev_plan[kind];
        if ((rc = read_fields(d, pl, &pos, end, slots))) return rc;
        if ((rc = on_event(d, kind, slots, pl->bound))) return rc;
        pos = end;
        if ((++n & 1023) == 0 && !pc_budget_ok(d->budget)) return budget_error(d);
    }
    return pc_budget_ok(d->budget) ? 0 : budget_error(d);
}

/* ---- chunks ---- */

static void chunk_free(dec *d, chunk *c)
{
    for (int p = 0; p < P_COUNT; p++) {
        umap_free(d, &c->pools[p].map);
        vfree(d, c->pools[p].v, c->pools[p].cap, sizeof(pentry));
    }
    umap_free(d, &c->tmap);
    vfree(d, c->types, c->types_cap, sizeof(jtype));
    vfree(d, c->fields, c->fields_cap, sizeof(jfield));
    pc_arena_free(c->ca);
    free(c);
    uncharge(d, sizeof(chunk));
}

/* Decode the chunk at pos. prev is the chunk before it, freed here. */
static int parse_chunk(dec *d, size_t pos, size_t *next, chunk **prev)
{
    chunk_header h = {0};
    int rc;
    if ((rc = parse_header(d, pos, &h))) return rc;
    /* Pools are per chunk, as in Pyroscope's parser: an event whose stack trace was written only
     * in the chunk before (a monitor wait across a rotation) has none here and is dropped. */
    if (*prev) chunk_free(d, *prev);
    chunk *c = pc_xcalloc(1, sizeof *c);
    charge(d, sizeof *c);
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

/* ---- labels (§1.2, §3.4) ---- */

static int load_labels(dec *d)
{
    const pc_jfr_opts *o = d->o;
    if (!o->labels || !o->labels_len) return 0;
    const ProtobufCMessageDescriptor *desc =
        &io__pyroscope__labels__pb__labels_snapshot__descriptor;
    pc_proto_scan scan;
    pc_error pe = {0};
    if (pc_proto_scan_message(desc, o->labels, o->labels_len, PC_PROTO_MAX_DEPTH, &scan, &pe) < 0)
        return pc_error_set(d->e, PC_EINVAL, "labels: invalid LabelsSnapshot: %s", pe.msg);
    if (d->budget && pc_budget_reserve(d->budget, scan.cost, "decoded labels snapshot") < 0)
        return budget_error(d);
    d->labels = (labels_snapshot *)protobuf_c_message_unpack(desc, pc_arena_allocator(d->la),
                                                             o->labels_len, o->labels);
    if (!d->labels) {
        if (!pc_budget_ok(d->budget)) return budget_error(d);
        return pc_error_set(d->e, PC_EINVAL, "labels: invalid LabelsSnapshot: malformed protobuf");
    }
    for (size_t i = 0; i < d->labels->n_contexts; i++) /* a later entry of a key wins */
        umap_put(d, &d->ctx_map, (uint64_t)d->labels->contexts[i]->key, (uint32_t)i, true);
    for (size_t i = 0; i < d->labels->n_strings; i++)
        umap_put(d, &d->str_map, (uint64_t)d->labels->strings[i]->key, (uint32_t)i, true);
    return 0;
}

static const char *label_str(dec *d, uint64_t id)
{
    uint32_t i = d->labels ? umap_get(&d->str_map, id) : UINT32_MAX;
    const char *s = i == UINT32_MAX ? NULL : d->labels->strings[i]->value;
    return s ? s : "";
}

/* Append attribute key=val to the correlation being built unless it has key already (one
 * attribute per key: the first wins). */
static void push_attr(dec *d, size_t first, const char *key, const char *val, size_t len)
{
    for (size_t i = first; i < d->ncattrs; i++)
        if (strcmp(d->ckeys[i], key) == 0) return;
    d->cattrs = vgrow(d, d->cattrs, &d->cattrs_cap, d->ncattrs + 1, sizeof(int32_t));
    d->ckeys = vgrow(d, d->ckeys, &d->ckeys_cap, d->ncattrs + 1, sizeof(const char *));
    d->ckeys[d->ncattrs] = key;
    d->cattrs[d->ncattrs++] = pc_dict_attr_str(d->db, key, val, len);
}

/* The sample attributes of a correlation (§3.4): the context's labels, span_id, span_name,
 * trace_id. */
static void corr_attrs(dec *d, corr *c)
{
    size_t first = d->ncattrs;
    char hex[33];
    uint32_t ci = c->v[0] && d->labels ? umap_get(&d->ctx_map, c->v[0]) : UINT32_MAX;
    const Io__Pyroscope__Labels__Pb__Context *ctx =
        ci == UINT32_MAX ? NULL : d->labels->contexts[ci]->value;
    for (size_t i = 0; ctx && i < ctx->n_labels; i++) {
        const char *k = label_str(d, (uint64_t)ctx->labels[i]->key);
        const char *v = label_str(d, (uint64_t)ctx->labels[i]->value);
        if (*k) push_attr(d, first, k, v, strlen(v));
    }
    if (c->v[1]) {
        snprintf(hex, sizeof hex, "%016" PRIx64, c->v[1]);
        push_attr(d, first, "span_id", hex, 16);
    }
    if (c->v[2]) {
        const char *name = label_str(d, c->v[2]);
        if (*name) push_attr(d, first, "span_name", name, strlen(name));
    }
    if (c->v[3] || c->v[4]) {
        snprintf(hex, sizeof hex, "%016" PRIx64 "%016" PRIx64, c->v[3], c->v[4]);
        push_attr(d, first, "trace_id", hex, 32);
    }
    c->attr_off = (uint32_t)first;
    c->attr_n = (uint32_t)(d->ncattrs - first);
}

/* ---- output ---- */

static int32_t *arena_i32s(pc_arena *a, const int32_t *v, size_t n)
{
    int32_t *o = pc_arena_alloc(a, (n ? n : 1) * sizeof(int32_t));
    if (n) memcpy(o, v, n * sizeof(int32_t));
    return o;
}

static void finish(dec *d)
{
    const pc_jfr_opts *o = d->o;
    size_t any = 0;
    for (int g = 0; g < G_COUNT; g++)
        any += d->groups[g].n;
    if (!any) return;
    for (size_t i = 1; i < d->ncorrs; i++)
        corr_attrs(d, &d->corrs[i]);
    pc_arena *a = d->b->arena;
    pc_scope_profiles *sp = pc_batch_add_resource(d->b, o->attr_keys, o->attr_vals, o->n_attrs,
                                                  o->scope_name, o->scope_version);
    int32_t event_attr = 0;
    if (d->have_event && d->event.len)
        event_attr = pc_dict_attr_str(d->db, "pyroscope.jfr_event", d->event.p, d->event.len);
    for (int g = 0; g < G_COUNT; g++) {
        const group *gr = &d->groups[g];
        const group_def *gd = &groups[g];
        if (!gr->n) continue;
        char types[512]; /* every kind's name fits */
        size_t tl = 0;
        types[0] = 0;
        for (int k = 0; k < PC_JFR_KIND_COUNT; k++)
            if ((gr->kinds & (1u << k)) && tl < sizeof types)
                tl += (size_t)snprintf(types + tl, sizeof types - tl, "%s%s", tl ? "," : "",
                                       pc_jfr_kind_names[k]);
        if (tl >= sizeof types) tl = sizeof types - 1;
        int32_t pattrs[3];
        size_t np = 0;
        pattrs[np++] =
            pc_dict_attr_str(d->db, "pyroscope.profile.name", gd->metric, strlen(gd->metric));
        if (event_attr) pattrs[np++] = event_attr;
        pattrs[np++] = pc_dict_attr_str(d->db, "jfr.event.type", types, strlen(types));
        size_t nattrs = 0;
        for (size_t i = 0; i < gr->n; i++)
            nattrs += gr->s[i].corr ? d->corrs[gr->s[i].corr].attr_n : 0;
        for (int j = 0; j < gd->nvals; j++) {
            pc_profile *p = pc_scope_add_profile(d->b, sp);
            p->sample_type = pc_arena_calloc(a, 1, sizeof(pc_value_type));
            opentelemetry__proto__profiles__v1development__value_type__init(p->sample_type);
            p->sample_type->type_strindex = pc_dict_cstring(d->db, gd->type[j]);
            p->sample_type->unit_strindex = pc_dict_cstring(d->db, gd->unit[j]);
            if (gd->ptype) {
                p->period_type = pc_arena_calloc(a, 1, sizeof(pc_value_type));
                opentelemetry__proto__profiles__v1development__value_type__init(p->period_type);
                p->period_type->type_strindex = pc_dict_cstring(d->db, gd->ptype);
                p->period_type->unit_strindex = pc_dict_cstring(d->db, gd->punit);
            }
            p->time_unix_nano = o->time_ns > 0 ? (uint64_t)o->time_ns : 0;
            p->duration_nano = o->duration_ns > 0 ? (uint64_t)o->duration_ns : 0;
            p->n_attribute_indices = np;
            p->attribute_indices = arena_i32s(a, pattrs, np);
            /* every sample owns its arrays (remapping rewrites them in place) */
            pc_sample *ss = pc_arena_alloc(a, gr->n * sizeof(pc_sample));
            int64_t *vals = pc_arena_alloc(a, gr->n * sizeof(int64_t));
            int32_t *attrs = pc_arena_alloc(a, (nattrs ? nattrs : 1) * sizeof(int32_t));
            p->samples = pc_arena_alloc(a, gr->n * sizeof(pc_sample *));
            p->n_samples = gr->n;
            for (size_t i = 0; i < gr->n; i++) {
                pc_sample *s = &ss[i];
                opentelemetry__proto__profiles__v1development__sample__init(s);
                s->stack_index = gr->s[i].stack;
                vals[i] = (int64_t)gr->s[i].v[j];
                s->n_values = 1;
                s->values = &vals[i];
                if (gr->s[i].corr) {
                    const corr *c = &d->corrs[gr->s[i].corr];
                    if (c->attr_n) {
                        memcpy(attrs, d->cattrs + c->attr_off, c->attr_n * sizeof(int32_t));
                        s->attribute_indices = attrs;
                        s->n_attribute_indices = c->attr_n;
                        attrs += c->attr_n;
                    }
                }
                p->samples[i] = s;
            }
            d->st->samples += gr->n;
            d->st->profiles++;
        }
    }
}

int pc_jfr_to_batch(const uint8_t *data, size_t len, const pc_jfr_opts *o, pc_batch **out,
                    pc_jfr_stats *st, pc_error *e)
{
    pc_jfr_stats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    *out = NULL;
    dec *d = pc_xcalloc(1, sizeof *d);
    d->buf = data;
    d->len = len;
    d->o = o;
    d->budget = o->budget;
    d->e = e;
    d->st = st;
    d->max_chunks = o->max_chunks ? o->max_chunks : PC_JFR_DEFAULT_MAX_CHUNKS;
    d->max_depth = o->max_stack_depth ? o->max_stack_depth : PC_JFR_DEFAULT_MAX_STACK_DEPTH;
    d->max_mstrings =
        o->max_metadata_strings ? o->max_metadata_strings : PC_JFR_DEFAULT_MAX_METADATA_STRINGS;
    d->max_elements =
        o->max_metadata_elements ? o->max_metadata_elements : PC_JFR_DEFAULT_MAX_METADATA_ELEMENTS;
    d->max_entries = o->max_pool_entries ? o->max_pool_entries : PC_JFR_DEFAULT_MAX_POOL_ENTRIES;
    /* a field visit per input byte is the norm; 64 leave room for any real metadata */
    d->max_work = 64 * (uint64_t)len + (1u << 20);
    d->period = o->sample_rate > 0 ? (uint64_t)(1000000000LL / o->sample_rate) : 0;
    int rc = 0;
    /* what the decode is expected to hold; every table it grows is charged as it goes */
    if (d->budget && pc_budget_reserve(d->budget, 65536 + 2 * len, "decoded JFR recording") < 0) {
        rc = budget_error(d);
        goto done;
    }
    d->b = pc_batch_new();
    pc_arena_set_budget(d->b->arena, d->budget);
    d->db = pc_dict_builder_from(d->b->arena, d->b->req->dictionary);
    d->la = pc_arena_new(4096);
    pc_arena_set_budget(d->la, d->budget);
    if ((rc = load_labels(d))) goto done;
    chunk *last = NULL; /* the chunk decoded last */
    for (size_t pos = 0, next = 0; pos < len; pos = next) {
        if (st->chunks == d->max_chunks) {
            rc = at(d, PC_E2BIG, pos,
                    "the recording has more than %zu chunks (limit jfr.max_chunks)", d->max_chunks);
            break;
        }
        st->chunks++;
        if ((rc = parse_chunk(d, pos, &next, &last))) break;
    }
    if (last) chunk_free(d, last);
    d->c = NULL;
    if (!rc) finish(d);
    if (!rc && !pc_budget_ok(d->budget)) rc = budget_error(d);
done:
    if (d->db) {
        if (!rc) d->b->req->dictionary = pc_dict_builder_finish(d->db);
        pc_dict_builder_free(d->db);
    }
    if (rc && d->b) pc_batch_unref(d->b);
    if (!rc) *out = d->b;
    for (int g = 0; g < G_COUNT; g++) {
        umap_free(d, &d->groups[g].map);
        vfree(d, d->groups[g].s, d->groups[g].cap, sizeof(gsample));
    }
    umap_free(d, &d->corr_map);
    umap_free(d, &d->ctx_map);
    umap_free(d, &d->str_map);
    vfree(d, d->corrs, d->corrs_cap, sizeof(corr));
    vfree(d, d->cattrs, d->cattrs_cap, sizeof(int32_t));
    vfree(d, d->ckeys, d->ckeys_cap, sizeof(const char *));
    vfree(d, d->locs, d->locs_cap, sizeof(int32_t));
    vfree(d, d->s1.p, d->s1.cap, 1);
    vfree(d, d->name.p, d->name.cap, 1);
    vfree(d, d->fix.p, d->fix.cap, 1);
    vfree(d, d->event.p, d->event.cap, 1);
    if (d->la) pc_arena_free(d->la);
    free(d);
    return rc;
}
