/* Pyroscope's JFR -> profiles mapping (jfr.h; spec/jfr.md §3) on the container decoder
 * (jfr_reader.h): which event types are read and which fields, the profile each becomes, the
 * symbol rewrites, the labels. An event's stack trace, methods, classes, symbols, thread state and
 * frame type are decoded from the input the first time they are needed and cached per chunk
 * (in the pool entry); output entries are interned in the batch's dictionary (pdata/dict.h),
 * samples merged per (group, stack, correlation ids) in hash tables. */
#include "formats/jfr.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/gzip.h"
#include "base/hash.h"
#include "formats/jfr_attrs.h"
#include "formats/jfr_reader.h"
#include "pdata/dict.h"
#include "pdata/proto_scan.h"

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

_Static_assert(PC_JFR_KIND_COUNT <= JFR_MAX_EVENTS, "the reader's table of event types");
_Static_assert(S_COUNT <= JFR_MAX_SLOTS, "the reader's slots of an event");

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

typedef struct dec {
    jfr_reader r; /* the recording */
    const pc_format_opts *o;
    pc_jfr_stats *st;
    uint64_t period;

    /* output */
    pc_batch *b;
    pc_dict_builder *db;
    group groups[G_COUNT];
    umap corr_map; /* hash of the ids -> first corr with that hash (chained by probing) */
    corr *corrs;
    size_t ncorrs, corrs_cap;
    int32_t *cattrs; /* the attributes of every correlation, one run each */
    size_t ncattrs, cattrs_cap;
    int32_t trunc_loc;
    sbuf event;           /* the last `event` setting */
    uint64_t event_key;   /* its String pool key (UINT64_MAX: inline) */
    size_t event_chunk;   /* in chunk number event_chunk */
    umap mname_map;       /* hash of (class, name) keys + probe -> mnames index */
    struct mname *mnames; /* methods' names worked out in this chunk */
    size_t nmnames, mnames_cap, mname_chunk;
    bool have_event;

    /* labels */
    const uint8_t *labels_data; /* the LabelsSnapshot protobuf, or NULL */
    size_t labels_len;
    jfr_attrs attrs;

    /* scratch */
    sbuf name;
    int32_t *locs;
    size_t locs_cap;
} dec;

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
    pentry *e = jfr_pool_get(&d->r, P_SYMBOL, key);
    if (!e) return 0;
    const plan *pl = &d->r.c->pplan[P_SYMBOL];
    if (!(pl->bound & 1)) return 0;
    uint64_t s[1] = {0};
    size_t p = (size_t)e->pos;
    int rc;
    if ((rc = jfr_read_fields(&d->r, pl, &p, d->r.c->cend, s))) return rc;
    const char *str;
    size_t n;
    p = (size_t)s[0];
    if ((rc = jfr_rd_string(&d->r, &p, d->r.c->cend, &d->r.s1, &str, &n, false))) return rc;
    if (!str) return 0;
    char *w = jfr_sb_room(&d->r, out, n + 1);
    memcpy(w, str, n);
    out->len += rewrite_symbol(w, n);
    out->p[out->len] = 0;
    return 0;
}

/* Append the name of Class key to out; *found = false when the class is missing. */
static int class_name(dec *d, uint64_t key, sbuf *out, bool *found)
{
    pentry *e = jfr_pool_get(&d->r, P_CLASS, key);
    *found = e != NULL;
    if (!e) return 0;
    uint64_t cs[1] = {0};
    size_t p = (size_t)e->pos;
    int rc;
    if ((rc = jfr_read_fields(&d->r, &d->r.c->pplan[P_CLASS], &p, d->r.c->cend, cs))) return rc;
    return (d->r.c->pplan[P_CLASS].bound & 1) ? append_symbol(d, cs[0], out) : 0;
}

/* A method's name by its class and name keys: many methods may share one long class name, and
 * building "class.name" again for each was quadratic. Pool keys are the chunk's own: the table
 * starts over with each chunk. */
typedef struct mname {
    uint64_t cls, sym;
    int32_t fn;
} mname;

/* The entry of (cls, sym); a new one with fn = INT32_MIN when none. Chained by probing on a
 * seeded hash with a counter, like corr_index. */
static mname *method_name(dec *d, uint64_t cls, uint64_t sym)
{
    if (d->mname_chunk != d->r.chunks) {
        jfr_umap_free(&d->r, &d->mname_map);
        d->nmnames = 0;
        d->mname_chunk = d->r.chunks;
    }
    pc_hash hs;
    pc_hash_begin(&hs);
    pc_hash_word(&hs, cls);
    pc_hash_word(&hs, sym);
    uint64_t h = pc_hash_end(&hs);
    for (uint64_t probe = 0;; probe++) {
        uint32_t i = jfr_umap_get(&d->mname_map, h + probe);
        if (i == UINT32_MAX) {
            d->mnames = jfr_vgrow(&d->r, d->mnames, &d->mnames_cap, d->nmnames + 1, sizeof(mname));
            d->mnames[d->nmnames] = (mname){cls, sym, INT32_MIN};
            jfr_umap_put(&d->r, &d->mname_map, h + probe, (uint32_t)d->nmnames, false);
            return &d->mnames[d->nmnames++];
        }
        if (d->mnames[i].cls == cls && d->mnames[i].sym == sym) return &d->mnames[i];
    }
}

/* Method key -> function index; -1 when the method or its class is missing. */
static int resolve_method(dec *d, uint64_t key, int32_t *fn)
{
    pentry *e = jfr_pool_get(&d->r, P_METHOD, key);
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
    if ((rc = jfr_read_fields(&d->r, &d->r.c->pplan[P_METHOD], &p, d->r.c->cend, ms))) return rc;
    unsigned bound = d->r.c->pplan[P_METHOD].bound;
    mname *mn = method_name(d, bound & 1 ? ms[0] : 0, bound & 2 ? ms[1] : 0);
    if (mn->fn != INT32_MIN) {
        *fn = e->cache = mn->fn;
        return 0;
    }
    size_t mi = (size_t)(mn - d->mnames);
    d->name.len = 0;
    if ((bound & 1) && (rc = class_name(d, ms[0], &d->name, &found))) return rc;
    if (found) {
        jfr_sb_put(&d->r, &d->name, ".", 1);
        if ((bound & 2) && (rc = append_symbol(d, ms[1], &d->name))) return rc;
        size_t n;
        const char *s = jfr_utf8_fixed(&d->r, d->name.p, d->name.len, &n);
        e->cache = pc_dict_function(d->db, pc_dict_string(d->db, s, n), 0, 0, 0);
    }
    d->mnames[mi].fn = *fn = e->cache;
    return 0;
}

/* The string field (slot 0) of the pool entry, or NULL. */
static int entry_string(dec *d, int p, uint64_t key, const char **s, size_t *n)
{
    pentry *e = jfr_pool_get(&d->r, p, key);
    *s = NULL;
    *n = 0;
    if (!e) return 0;
    const plan *pl = &d->r.c->pplan[p];
    if (!(pl->bound & 1)) return 0;
    uint64_t sl[1] = {0};
    size_t pos = (size_t)e->pos;
    int rc;
    if ((rc = jfr_read_fields(&d->r, pl, &pos, d->r.c->cend, sl))) return rc;
    pos = (size_t)sl[0];
    return jfr_rd_string(&d->r, &pos, d->r.c->cend, &d->r.s1, s, n, false);
}

/* FrameType key -> the jfr.frame.type attribute, 0 when missing or empty. */
static int resolve_ftype(dec *d, uint64_t key, int32_t *attr)
{
    pentry *e = jfr_pool_get(&d->r, P_FTYPE, key);
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
            s = jfr_utf8_fixed(&d->r, s, n, &n);
            e->cache = pc_dict_attr_str(d->db, "jfr.frame.type", s, n);
        }
    }
    *attr = e->cache;
    return 0;
}

static int resolve_state(dec *d, uint64_t key, int *state)
{
    pentry *e = jfr_pool_get(&d->r, P_STATE, key);
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
    pentry *e = jfr_pool_get(&d->r, P_STACK, key);
    *out = -1;
    if (!e) return 0;
    if (e->done) {
        *out = e->cache;
        return 0;
    }
    const plan *pl = &d->r.c->pplan[P_STACK], *fp = &d->r.c->frame_plan;
    uint64_t s[2] = {0, 0}, count = 0;
    size_t p = (size_t)e->pos, n = 0;
    int rc;
    if ((rc = jfr_read_fields(&d->r, pl, &p, d->r.c->cend, s))) return rc;
    if (pl->bound & 2) {
        p = (size_t)s[1];
        if ((rc = jfr_rd_varint(&d->r, &p, d->r.c->cend, &count))) return rc;
    }
    d->locs = jfr_vgrow(&d->r, d->locs, &d->locs_cap, (size_t)count + 1, sizeof(int32_t));
    for (uint64_t i = 0; i < count; i++) {
        uint64_t f[3] = {0, 0, 0};
        int32_t fn, attr = 0;
        if ((rc = jfr_read_fields(&d->r, fp, &p, d->r.c->cend, f))) return rc;
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

/* Seeded: ids that shared a fixed hash would share one chain below. */
static uint64_t corr_hash(const uint64_t *v)
{
    pc_hash h;
    pc_hash_begin(&h);
    for (int i = 0; i < 5; i++)
        pc_hash_word(&h, v[i]);
    return pc_hash_end(&h);
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
        uint32_t i = jfr_umap_get(&d->corr_map, h + probe);
        if (i == UINT32_MAX) {
            d->corrs = jfr_vgrow(&d->r, d->corrs, &d->corrs_cap, d->ncorrs + 1, sizeof(corr));
            if (!d->ncorrs) d->ncorrs = 1; /* 0 is "none" */
            corr *c = &d->corrs[d->ncorrs];
            memcpy(c->v, v, sizeof v);
            c->attr_off = c->attr_n = 0;
            jfr_umap_put(&d->r, &d->corr_map, h + probe, (uint32_t)d->ncorrs, false);
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
    uint32_t i = jfr_umap_get(&gr->map, key);
    gr->kinds |= 1u << kind;
    if (i == UINT32_MAX) {
        gr->s = jfr_vgrow(&d->r, gr->s, &gr->cap, gr->n + 1, sizeof(gsample));
        i = (uint32_t)gr->n++;
        gr->s[i] = (gsample){.stack = stack, .corr = corr};
        jfr_umap_put(&d->r, &gr->map, key, i, false);
    }
    gr->s[i].v[0] += v0; /* wrapping, as Pyroscope's int64 sums */
    gr->s[i].v[1] += v1;
}

static uint64_t ticks_to_ns(const dec *d, uint64_t t)
{
    if (!d->r.c->ticks_per_sec || d->r.c->ticks_per_sec == 1000000000u) return t;
    unsigned __int128 ns = (unsigned __int128)t * 1000000000u / d->r.c->ticks_per_sec;
    return ns > UINT64_MAX ? UINT64_MAX : (uint64_t)ns;
}

/* The length (bytes or UTF-16 units) of the sized string at p, through one String pool reference
 * (its key in *key, else UINT64_MAX). false for the null and empty strings and anything odd: the
 * caller then reads it as usual, which reports what is wrong. */
static bool string_head(dec *d, size_t p, uint64_t *len, uint64_t *key)
{
    const uint8_t *b = d->r.buf;
    size_t end = d->r.c->cend, q;
    *key = UINT64_MAX;
    if (p >= end) return false;
    if (b[p] == 2) {
        uint64_t k;
        q = p + 1;
        pentry *e;
        if (jfr_rd_varint(&d->r, &q, end, &k) || !(e = jfr_pool_get(&d->r, P_STRING, k)))
            return false;
        *key = k;
        p = (size_t)e->pos;
        if (p >= end) return false;
    }
    q = p + 1;
    return b[p] >= 3 && b[p] <= 5 && jfr_rd_varint(&d->r, &q, end, len) == 0;
}

/* async-profiler's profiling mode: the setting `event`. A name or value read through the String
 * pool is not read again per event when it cannot be "event" or is the value already held (a
 * long pooled string named by every event was quadratic). */
static int active_setting(dec *d, const uint64_t *s, uint32_t bound)
{
    const char *str;
    uint64_t len, key;
    size_t n, p = (size_t)s[S_NAME];
    int rc;
    if ((bound & (M(S_NAME) | M(S_VALUE))) != (M(S_NAME) | M(S_VALUE))) return 0;
    if (string_head(d, p, &len, &key) && len != 5) return 0;
    if ((rc = jfr_rd_string(&d->r, &p, d->r.c->cend, &d->r.s1, &str, &n, false))) return rc;
    if (!str || n != 5 || memcmp(str, "event", 5) != 0) return 0;
    p = (size_t)s[S_VALUE];
    bool head = string_head(d, p, &len, &key);
    if (head && key != UINT64_MAX && d->have_event && key == d->event_key &&
        d->event_chunk == d->r.chunks)
        return 0;
    if ((rc = jfr_rd_string(&d->r, &p, d->r.c->cend, &d->r.s1, &str, &n, false))) return rc;
    d->event.len = 0;
    if (str) {
        str = jfr_utf8_fixed(&d->r, str, n, &n);
        jfr_sb_put(&d->r, &d->event, str, n);
    }
    d->event_key = head ? key : UINT64_MAX;
    d->event_chunk = d->r.chunks;
    d->have_event = true;
    return 0;
}

static int on_event(dec *d, int kind, const uint64_t *s, uint32_t bound)
{
    int rc, state = ST_UNKNOWN;
    d->st->events[kind]++;
    if (kind == PC_JFR_ACTIVE_SETTING) return active_setting(d, s, bound);
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

/* ---- labels (§1.2, §3.4): jfr_attrs.c ---- */

/* The sample attributes of a correlation. */
static void corr_attrs(dec *d, corr *c)
{
    size_t first = d->ncattrs;
    jfr_attrs_of(&d->r, &d->attrs, d->db, c->v, &d->cattrs, &d->ncattrs, &d->cattrs_cap);
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

/* The one ResourceProfiles: the opts' attributes, then service.name (o->service, else the app
 * name whole: a recording's event types give the profile types), when either is set. */
static pc_scope_profiles *add_resource(pc_batch *b, const pc_format_opts *o)
{
    const char *svc = o->service ? o->service : o->app;
    size_t n = (o->attrs ? o->n_attrs : 0) + (svc != NULL);
    const char **keys = pc_arena_alloc(b->arena, (n ? n : 1) * sizeof(char *));
    const char **vals = pc_arena_alloc(b->arena, (n ? n : 1) * sizeof(char *));
    for (size_t i = 0; i + (svc != NULL) < n; i++) {
        keys[i] = o->attrs[i].key;
        vals[i] = o->attrs[i].value;
    }
    if (svc) {
        keys[n - 1] = "service.name";
        vals[n - 1] = svc;
    }
    return pc_batch_add_resource(b, keys, vals, n, o->scope_name, o->scope_version);
}

/* The bytes a group's profiles take in the batch arena (each rounded as the arena rounds). */
static size_t group_bytes(const dec *d, const group *gr, size_t nattrs)
{
    size_t per = ((gr->n * sizeof(pc_sample) + 15) & ~(size_t)15) +
                 ((gr->n * sizeof(int64_t) + 15) & ~(size_t)15) +
                 ((gr->n * sizeof(pc_sample *) + 15) & ~(size_t)15) +
                 ((nattrs * sizeof(int32_t) + 15) & ~(size_t)15) + 256;
    return (size_t)groups[gr - d->groups].nvals * per;
}

/* The profiles of group g: one per value, every sample owning its arrays (remapping rewrites
 * them in place). */
static void group_profiles(dec *d, int g, pc_scope_profiles *sp, int32_t event_attr, size_t nattrs)
{
    const group *gr = &d->groups[g];
    const group_def *gd = &groups[g];
    pc_arena *a = d->b->arena;
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
        p->time_unix_nano = d->o->time_ns > 0 ? (uint64_t)d->o->time_ns : 0;
        p->duration_nano = d->o->duration_ns > 0 ? (uint64_t)d->o->duration_ns : 0;
        p->n_attribute_indices = np;
        p->attribute_indices = arena_i32s(a, pattrs, np);
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
            const corr *c = gr->s[i].corr ? &d->corrs[gr->s[i].corr] : NULL;
            if (c && c->attr_n) {
                memcpy(attrs, d->cattrs + c->attr_off, c->attr_n * sizeof(int32_t));
                s->attribute_indices = attrs;
                s->n_attribute_indices = c->attr_n;
                attrs += c->attr_n;
            }
            p->samples[i] = s;
        }
        d->st->samples += gr->n;
        d->st->profiles++;
    }
}

/* The batch from the groups. The output is counted against the budget before it is built (issue
 * 28: 2M TLAB events were refused only after their profiles took three times the budget), and
 * the correlations' attributes as they grow. */
static int finish(dec *d)
{
    size_t any = 0, out = 0, nattrs[G_COUNT];
    for (int g = 0; g < G_COUNT; g++)
        any += d->groups[g].n;
    if (!any) return 0;
    for (size_t i = 1; i < d->ncorrs; i++) {
        corr_attrs(d, &d->corrs[i]);
        if (!pc_budget_ok(d->r.budget)) return jfr_budget_error(&d->r);
    }
    for (int g = 0; g < G_COUNT; g++) {
        const group *gr = &d->groups[g];
        nattrs[g] = 0;
        for (size_t i = 0; i < gr->n; i++)
            nattrs[g] += gr->s[i].corr ? d->corrs[gr->s[i].corr].attr_n : 0;
        out += gr->n ? group_bytes(d, gr, nattrs[g]) : 0;
    }
    if (d->r.budget && pc_budget_reserve(d->r.budget, out, "decoded JFR recording") < 0)
        return jfr_budget_error(&d->r);
    pc_scope_profiles *sp = add_resource(d->b, d->o);
    int32_t event_attr = 0;
    if (d->have_event && d->event.len)
        event_attr = pc_dict_attr_str(d->db, "pyroscope.jfr_event", d->event.p, d->event.len);
    for (int g = 0; g < G_COUNT; g++) {
        if (!d->groups[g].n) continue;
        group_profiles(d, g, sp, event_attr, nattrs[g]);
        if (!pc_budget_ok(d->r.budget)) return jfr_budget_error(&d->r);
    }
    return 0;
}

static void dec_free(dec *d)
{
    for (int g = 0; g < G_COUNT; g++) {
        jfr_umap_free(&d->r, &d->groups[g].map);
        jfr_vfree(&d->r, d->groups[g].s, d->groups[g].cap, sizeof(gsample));
    }
    jfr_umap_free(&d->r, &d->corr_map);
    jfr_attrs_free(&d->r, &d->attrs);
    jfr_umap_free(&d->r, &d->mname_map);
    jfr_vfree(&d->r, d->mnames, d->mnames_cap, sizeof(mname));
    jfr_vfree(&d->r, d->corrs, d->corrs_cap, sizeof(corr));
    jfr_vfree(&d->r, d->cattrs, d->cattrs_cap, sizeof(int32_t));
    jfr_vfree(&d->r, d->locs, d->locs_cap, sizeof(int32_t));
    jfr_vfree(&d->r, d->name.p, d->name.cap, 1);
    jfr_vfree(&d->r, d->event.p, d->event.cap, 1);
    jfr_reader_free(&d->r);
    free(d);
}

static int on_event_cb(void *ud, int type, const uint64_t *slots, uint32_t bound)
{
    return on_event(ud, type, slots, bound);
}

static int decode(const uint8_t *data, size_t len, const uint8_t *labels, size_t labels_len,
                  const pc_format_opts *o, pc_batch **out, pc_jfr_stats *st, pc_error *e)
{
    dec *d = pc_xcalloc(1, sizeof *d);
    const pc_jfr_limits *l = &o->jfr;
    d->o = o;
    d->st = st;
    d->labels_data = labels;
    d->labels_len = labels_len;
    d->r.budget = o->budget;
    d->r.e = e;
    d->r.max_chunks = l->max_chunks ? l->max_chunks : PC_JFR_DEFAULT_MAX_CHUNKS;
    d->r.max_depth = l->max_stack_depth ? l->max_stack_depth : PC_JFR_DEFAULT_MAX_STACK_DEPTH;
    d->r.max_mstrings =
        l->max_metadata_strings ? l->max_metadata_strings : PC_JFR_DEFAULT_MAX_METADATA_STRINGS;
    d->r.max_elements =
        l->max_metadata_elements ? l->max_metadata_elements : PC_JFR_DEFAULT_MAX_METADATA_ELEMENTS;
    d->r.max_entries = l->max_pool_entries ? l->max_pool_entries : PC_JFR_DEFAULT_MAX_POOL_ENTRIES;
    /* as Pyroscope's JFR path: a negative sampleRate is the default 100 Hz */
    int64_t rate = o->sample_rate < 0 ? 100 : o->sample_rate;
    d->period = rate > 0 ? (uint64_t)(1000000000LL / rate) : 0;
    const jfr_events ev = {PC_JFR_KIND_COUNT, pc_jfr_kind_names, event_spec,
                           kind_slots,        on_event_cb,       d};
    int rc = 0;
    /* what the decode is expected to hold; every table it grows is charged as it goes */
    if (o->budget && pc_budget_reserve(o->budget, 65536 + 2 * len, "decoded JFR recording") < 0) {
        rc = jfr_budget_error(&d->r);
        goto done;
    }
    d->b = pc_batch_new();
    pc_arena_set_budget(d->b->arena, o->budget);
    d->db = pc_dict_builder_from(d->b->arena, pc_batch_req(d->b)->dictionary);
    if (!(rc = jfr_attrs_load(&d->r, &d->attrs, d->labels_data, d->labels_len)))
        rc = jfr_read(&d->r, data, len, &ev);
    if (!rc) rc = finish(d);
    if (!rc && !pc_budget_ok(o->budget)) rc = jfr_budget_error(&d->r);
done:
    st->chunks = d->r.chunks;
    st->skipped_events = d->r.skipped_events;
    if (d->db) {
        if (!rc) pc_batch_req(d->b)->dictionary = pc_dict_builder_finish(d->db);
        pc_dict_builder_free(d->db);
    }
    if (rc && d->b) pc_batch_unref(d->b);
    if (!rc) *out = d->b;
    dec_free(d);
    return rc;
}

/* A part sent gzipped (as the Java agent sends them; a raw body too, more lenient than
 * Pyroscope), inflated into buf up to max bytes: 0, PC_E2BIG or PC_EBADMSG. */
static int gunzip(const char *what, const uint8_t **data, size_t *len, size_t max, pc_buf *buf,
                  pc_error *e)
{
    if (!*data || !pc_is_gzip(*data, *len)) return 0;
    int rc = pc_gzip_inflate(*data, *len, max, buf);
    if (rc == PC_E2BIG)
        return pc_error_set(e, PC_E2BIG, "%s: decompressed size exceeds max_request_body_size",
                            what);
    if (rc < 0) return pc_error_set(e, PC_EBADMSG, "%s: invalid gzip", what);
    *data = buf->data;
    *len = buf->len;
    return 0;
}

int pc_jfr_decode(const uint8_t *data, size_t len, const pc_format_opts *o, pc_batch **out,
                  pc_error *e)
{
    pc_jfr_stats local;
    pc_jfr_stats *st = o->jfr_stats ? o->jfr_stats : &local;
    size_t max = o->max_bytes ? o->max_bytes : PC_FORMAT_DEFAULT_MAX_BYTES;
    pc_buf rec = {0}, lab = {0};
    const uint8_t *labels = o->extra;
    size_t labels_len = labels ? o->extra_len : 0;
    memset(st, 0, sizeof *st);
    *out = NULL;
    int rc = gunzip("labels", &labels, &labels_len, max, &lab, e);
    if (!rc) rc = gunzip("jfr", &data, &len, max, &rec, e);
    if (!rc && (rc = decode(data, len, labels, labels_len, o, out, st, e)) && e)
        pc_error_prefix(e, "jfr: ");
    pc_buf_free(&rec);
    pc_buf_free(&lab);
    return rc;
}
