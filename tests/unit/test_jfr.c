/* The JFR decoder (formats/jfr.c on formats/jfr_reader.c) against recordings written here by a
 * small JFR writer built from the layouts of spec/jfr.md §2 (chunk header, compressed integers, the
 * six string encodings, the metadata element tree, checkpoints with their delta chain, events) with
 * the event layouts of §3.1, including what only async-profiler writes (WallClockSample,
 * LiveObject, Malloc, contextId, span and trace ids, the ActiveSetting `event`).
 *
 * What the decoder must produce is computed here from what the test wrote, with the mapping of
 * §3.2-§3.5 (the sample-type table, the naming rule, the symbol rewrites of the spec's examples):
 * each side becomes sorted lines "profile type|frames|labels value" that must be equal. Then
 * every refusal: truncated at every length, wrong magic, a checkpoint chain that points forward,
 * outside the chunk or into a cycle, a string-pool entry that refers to itself, a stack of
 * 100,000 frames, a string claiming 4 GB, metadata over its caps, and budgets too small. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "jfr_labels.pb-c.h"
#include "pdata/dict.h"
#include "pdata/pdata.h"
#include "formats/pprof.h"
#include "formats/jfr.h"

/* ---- bytes ---- */

typedef struct wb {
    uint8_t *p;
    size_t len, cap;
} wb;

static void wput(wb *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    if (n) memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void w8(wb *b, uint8_t v)
{
    wput(b, &v, 1);
}

static void wbe(wb *b, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--)
        w8(b, (uint8_t)(v >> (8 * i)));
}

/* A JFR compressed integer padded to width bytes (1..9; the 9th byte carries 8 bits). */
static void wvarw(wb *b, uint64_t v, int width)
{
    for (int i = 0; i < width - 1; i++) {
        w8(b, (uint8_t)((v & 0x7f) | 0x80));
        v >>= 7;
    }
    w8(b, (uint8_t)v);
}

static int varlen(uint64_t v)
{
    int n = 1;
    while (n < 9 && v >= (1ULL << (7 * n)))
        n++;
    return n;
}

static void wvar(wb *b, uint64_t v)
{
    wvarw(b, v, varlen(v));
}

static void wb_free(wb *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- strings (§2.4) ---- */

enum { SE_NULL, SE_EMPTY, SE_POOL, SE_UTF8, SE_UTF16, SE_LATIN1 };

/* Next code point of UTF-8 s (valid input from this file). */
static uint32_t next_cp(const unsigned char **s)
{
    const unsigned char *p = *s;
    uint32_t c = *p++;
    if (c >= 0xF0) {
        c = (c & 7) << 18 | (uint32_t)(p[0] & 0x3F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 |
            (p[2] & 0x3F);
        p += 3;
    } else if (c >= 0xE0) {
        c = (c & 15) << 12 | (uint32_t)(p[0] & 0x3F) << 6 | (p[1] & 0x3F);
        p += 2;
    } else if (c >= 0xC0) {
        c = (c & 31) << 6 | (p[0] & 0x3F);
        p += 1;
    }
    *s = p;
    return c;
}

/* s in encoding enc (SE_POOL: s is the decimal pool key). UTF-16 and Latin-1 are converted
 * from the UTF-8 text here. */
static void wstr(wb *b, int enc, const char *s)
{
    w8(b, (uint8_t)enc);
    switch (enc) {
    case SE_POOL: wvar(b, strtoull(s, NULL, 10)); break;
    case SE_UTF8:
        wvar(b, strlen(s));
        wput(b, s, strlen(s));
        break;
    case SE_LATIN1: {
        wb t = {0};
        for (const unsigned char *p = (const unsigned char *)s; *p;)
            w8(&t, (uint8_t)next_cp(&p));
        wvar(b, t.len);
        wput(b, t.p, t.len);
        wb_free(&t);
        break;
    }
    case SE_UTF16: {
        uint32_t units[512];
        size_t n = 0;
        for (const unsigned char *p = (const unsigned char *)s; *p;) {
            uint32_t c = next_cp(&p);
            if (c >= 0x10000) {
                units[n++] = 0xD800 + ((c - 0x10000) >> 10);
                units[n++] = 0xDC00 + ((c - 0x10000) & 0x3FF);
            } else {
                units[n++] = c;
            }
        }
        wvar(b, n);
        for (size_t i = 0; i < n; i++)
            wvar(b, units[i]);
        break;
    }
    default: break;
    }
}

/* ---- metadata layouts (§2.6, §2.9, §3.1) ---- */

typedef struct mfield {
    const char *name, *type;
    int cpool, array;
} mfield;

typedef struct mclass {
    const char *name, *super;
    mfield f[12];
} mclass;

/* The class named wide_class has its last field wide_repeat more times (a test sets them). */
static const char *wide_class;
static int wide_repeat;

#define PRIMS                                                                                      \
    {"boolean", NULL, {{0}}}, {"byte", NULL, {{0}}}, {"char", NULL, {{0}}},                        \
        {"short", NULL, {{0}}}, {"int", NULL, {{0}}}, {"long", NULL, {{0}}},                       \
        {"float", NULL, {{0}}}, {"double", NULL, {{0}}},                                           \
    {                                                                                              \
        "java.lang.String", NULL,                                                                  \
        {                                                                                          \
            {                                                                                      \
                0                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
#define EV "jdk.jfr.Event"

/* async-profiler's layout (with the Grafana fork's correlation fields). */
static const mclass ap_layout[] = {
    PRIMS,
    {"jdk.types.Symbol", NULL, {{"string", "java.lang.String", 0, 0}}},
    {"jdk.types.Package", NULL, {{"name", "jdk.types.Symbol", 1, 0}}},
    {"java.lang.Class",
     NULL,
     {{"classLoader", "jdk.types.ClassLoader", 1, 0},
      {"name", "jdk.types.Symbol", 1, 0},
      {"package", "jdk.types.Package", 1, 0},
      {"modifiers", "int", 0, 0}}},
    {"jdk.types.ClassLoader",
     NULL,
     {{"type", "java.lang.Class", 1, 0}, {"name", "jdk.types.Symbol", 1, 0}}},
    {"jdk.types.Method",
     NULL,
     {{"type", "java.lang.Class", 1, 0},
      {"name", "jdk.types.Symbol", 1, 0},
      {"descriptor", "jdk.types.Symbol", 1, 0},
      {"modifiers", "int", 0, 0},
      {"hidden", "boolean", 0, 0}}},
    {"jdk.types.FrameType", NULL, {{"description", "java.lang.String", 0, 0}}},
    {"jdk.types.StackFrame",
     NULL,
     {{"method", "jdk.types.Method", 1, 0},
      {"lineNumber", "int", 0, 0},
      {"bytecodeIndex", "int", 0, 0},
      {"type", "jdk.types.FrameType", 1, 0}}},
    {"jdk.types.StackTrace",
     NULL,
     {{"truncated", "boolean", 0, 0}, {"frames", "jdk.types.StackFrame", 0, 1}}},
    {"jdk.types.ThreadState", NULL, {{"name", "java.lang.String", 0, 0}}},
    {"java.lang.Thread",
     NULL,
     {{"osName", "java.lang.String", 0, 0},
      {"osThreadId", "long", 0, 0},
      {"javaName", "java.lang.String", 0, 0},
      {"javaThreadId", "long", 0, 0}}},
    {"jdk.ExecutionSample",
     EV,
     {{"startTime", "long", 0, 0},
      {"sampledThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"state", "jdk.types.ThreadState", 1, 0},
      {"contextId", "long", 0, 0}}},
    {"profiler.WallClockSample",
     EV,
     {{"startTime", "long", 0, 0},
      {"sampledThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"state", "jdk.types.ThreadState", 1, 0},
      {"samples", "int", 0, 0},
      {"timeSpan", "long", 0, 0},
      {"spanId", "long", 0, 0},
      {"spanName", "long", 0, 0},
      {"contextId", "long", 0, 0},
      {"traceIdHi", "long", 0, 0},
      {"traceIdLo", "long", 0, 0}}},
    {"jdk.ObjectAllocationInNewTLAB",
     EV,
     {{"startTime", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"objectClass", "java.lang.Class", 1, 0},
      {"allocationSize", "long", 0, 0},
      {"tlabSize", "long", 0, 0},
      {"contextId", "long", 0, 0}}},
    {"jdk.ObjectAllocationOutsideTLAB",
     EV,
     {{"startTime", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"objectClass", "java.lang.Class", 1, 0},
      {"allocationSize", "long", 0, 0},
      {"contextId", "long", 0, 0}}},
    {"jdk.ObjectAllocationSample",
     EV,
     {{"startTime", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"objectClass", "java.lang.Class", 1, 0},
      {"weight", "long", 0, 0},
      {"contextId", "long", 0, 0}}},
    {"profiler.LiveObject",
     EV,
     {{"startTime", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"objectClass", "java.lang.Class", 1, 0},
      {"allocationSize", "long", 0, 0},
      {"allocationTime", "long", 0, 0},
      {"contextId", "long", 0, 0}}},
    {"jdk.JavaMonitorEnter",
     EV,
     {{"startTime", "long", 0, 0},
      {"duration", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"monitorClass", "java.lang.Class", 1, 0},
      {"previousOwner", "java.lang.Thread", 1, 0},
      {"address", "long", 0, 0},
      {"contextId", "long", 0, 0}}},
    {"jdk.ThreadPark",
     EV,
     {{"startTime", "long", 0, 0},
      {"duration", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"parkedClass", "java.lang.Class", 1, 0},
      {"timeout", "long", 0, 0},
      {"until", "long", 0, 0},
      {"address", "long", 0, 0},
      {"contextId", "long", 0, 0}}},
    {"profiler.Malloc",
     EV,
     {{"startTime", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"address", "long", 0, 0},
      {"size", "long", 0, 0},
      {"contextId", "long", 0, 0}}},
    {"profiler.Free",
     EV,
     {{"startTime", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"address", "long", 0, 0}}},
    {"jdk.ActiveSetting",
     EV,
     {{"startTime", "long", 0, 0},
      {"duration", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"id", "long", 0, 0},
      {"name", "java.lang.String", 0, 0},
      {"value", "java.lang.String", 0, 0}}},
    /* an event type nobody maps, with every kind of value to skip */
    {"test.Inner",
     NULL,
     {{"x", "int", 0, 0}, {"y", "java.lang.String", 0, 0}, {"f", "float", 0, 0}}},
    {"test.Unknown",
     EV,
     {{"startTime", "long", 0, 0},
      {"d", "double", 0, 0},
      {"b", "byte", 0, 0},
      {"c", "char", 0, 0},
      {"s", "short", 0, 0},
      {"inner", "test.Inner", 0, 0},
      {"arr", "test.Inner", 0, 1},
      {"refs", "java.lang.Thread", 1, 1},
      {"str", "java.lang.String", 0, 0}}},
    {"jdk.jfr.Label", "java.lang.annotation.Annotation", {{"value", "java.lang.String", 0, 0}}},
};

/* The JDK's layout (§2.9: more fields, other pools; no correlation fields). */
static const mclass jdk_layout[] = {
    {"jdk.jfr.Label", "java.lang.annotation.Annotation", {{"value", "java.lang.String", 0, 0}}},
    {"jdk.ObjectAllocationInNewTLAB",
     EV,
     {{"startTime", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"objectClass", "java.lang.Class", 1, 0},
      {"allocationSize", "long", 0, 0},
      {"tlabSize", "long", 0, 0}}},
    {"jdk.ExecutionSample",
     EV,
     {{"startTime", "long", 0, 0},
      {"sampledThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"state", "jdk.types.ThreadState", 1, 0}}},
    {"jdk.NativeMethodSample",
     EV,
     {{"startTime", "long", 0, 0},
      {"sampledThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"state", "jdk.types.ThreadState", 1, 0}}},
    {"jdk.JavaMonitorEnter",
     EV,
     {{"startTime", "long", 0, 0},
      {"duration", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"monitorClass", "java.lang.Class", 1, 0},
      {"previousOwner", "java.lang.Thread", 1, 0},
      {"address", "long", 0, 0}}},
    {"jdk.ThreadPark",
     EV,
     {{"startTime", "long", 0, 0},
      {"duration", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"parkedClass", "java.lang.Class", 1, 0},
      {"timeout", "long", 0, 0},
      {"until", "long", 0, 0},
      {"address", "long", 0, 0}}},
    {"jdk.ObjectAllocationSample",
     EV,
     {{"startTime", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"objectClass", "java.lang.Class", 1, 0},
      {"weight", "long", 0, 0}}},
    {"jdk.ActiveSetting",
     EV,
     {{"startTime", "long", 0, 0},
      {"duration", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"stackTrace", "jdk.types.StackTrace", 1, 0},
      {"id", "long", 0, 0},
      {"name", "java.lang.String", 0, 0},
      {"value", "java.lang.String", 0, 0}}},
    {"jdk.GCPhaseParallel",
     EV,
     {{"startTime", "long", 0, 0},
      {"duration", "long", 0, 0},
      {"eventThread", "java.lang.Thread", 1, 0},
      {"gcId", "int", 0, 0},
      {"gcWorkerId", "int", 0, 0},
      {"name", "java.lang.String", 0, 0}}},
    PRIMS,
    {"java.lang.Thread",
     NULL,
     {{"osName", "java.lang.String", 0, 0},
      {"osThreadId", "long", 0, 0},
      {"javaName", "java.lang.String", 0, 0},
      {"javaThreadId", "long", 0, 0},
      {"group", "jdk.types.ThreadGroup", 1, 0}}},
    {"jdk.types.ThreadGroup",
     NULL,
     {{"parent", "jdk.types.ThreadGroup", 1, 0}, {"name", "java.lang.String", 0, 0}}},
    {"jdk.types.StackTrace",
     NULL,
     {{"truncated", "boolean", 0, 0}, {"frames", "jdk.types.StackFrame", 0, 1}}},
    {"jdk.types.StackFrame",
     NULL,
     {{"method", "jdk.types.Method", 1, 0},
      {"lineNumber", "int", 0, 0},
      {"bytecodeIndex", "int", 0, 0},
      {"type", "jdk.types.FrameType", 1, 0}}},
    {"jdk.types.Method",
     NULL,
     {{"type", "java.lang.Class", 1, 0},
      {"name", "jdk.types.Symbol", 1, 0},
      {"descriptor", "jdk.types.Symbol", 1, 0},
      {"modifiers", "int", 0, 0},
      {"hidden", "boolean", 0, 0}}},
    {"java.lang.Class",
     NULL,
     {{"classLoader", "jdk.types.ClassLoader", 1, 0},
      {"name", "jdk.types.Symbol", 1, 0},
      {"package", "jdk.types.Package", 1, 0},
      {"modifiers", "int", 0, 0},
      {"hidden", "boolean", 0, 0}}},
    {"jdk.types.ClassLoader",
     NULL,
     {{"type", "java.lang.Class", 1, 0}, {"name", "jdk.types.Symbol", 1, 0}}},
    {"jdk.types.Package",
     NULL,
     {{"name", "jdk.types.Symbol", 1, 0},
      {"module", "jdk.types.Module", 1, 0},
      {"exported", "boolean", 0, 0}}},
    {"jdk.types.Module",
     NULL,
     {{"name", "jdk.types.Symbol", 1, 0},
      {"version", "jdk.types.Symbol", 1, 0},
      {"location", "jdk.types.Symbol", 1, 0},
      {"classLoader", "jdk.types.ClassLoader", 1, 0}}},
    {"jdk.types.Symbol", NULL, {{"string", "java.lang.String", 0, 0}}},
    {"jdk.types.FrameType", NULL, {{"description", "java.lang.String", 0, 0}}},
    {"jdk.types.ThreadState", NULL, {{"name", "java.lang.String", 0, 0}}},
    {"jdk.types.ChunkHeader", NULL, {{"payload", "byte", 0, 1}}},
};

#define NCLS(l) ((int)(sizeof(l) / sizeof((l)[0])))

static int nfields(const mclass *c)
{
    int n = 0;
    while (n < 12 && c->f[n].name)
        n++;
    return n && wide_class && !strcmp(c->name, wide_class) ? n + wide_repeat : n;
}

static const mfield *field_at(const mclass *c, int i)
{
    int n = 0;
    while (n < 12 && c->f[n].name)
        n++;
    return &c->f[i < n ? i : n - 1];
}

/* ---- the chunk writer ---- */

typedef struct jw {
    wb b; /* the chunk, header first */
    const mclass *cls;
    int ncls;
    uint64_t base, stride; /* type ids: base + index * stride */
    int senc;              /* metadata strings: SE_UTF8 (async-profiler) or SE_UTF16 (JDK) */
    int ev_width;          /* event size varints: 0 minimal, else padded to this width */
    uint64_t tps;          /* ticks per second */
    uint16_t minor;
    uint64_t start_ns, duration_ns;
    uint16_t flags; /* header flags: 1 compressed integers, 2 the recording's last chunk */
    size_t meta_off, last_cp;
    bool force; /* the next checkpoint's delta is force_delta, written in 9 bytes */
    int64_t force_delta;
    size_t delta_at; /* where the last checkpoint's delta was written, in the chunk */
} jw;

static int cls_index(const jw *w, const char *name)
{
    for (int i = 0; i < w->ncls; i++)
        if (strcmp(w->cls[i].name, name) == 0) return i;
    fprintf(stderr, "test layout has no class %s\n", name);
    abort();
}

static uint64_t tid(const jw *w, const char *name)
{
    return w->base + (uint64_t)cls_index(w, name) * w->stride;
}

static void jw_begin(jw *w, const mclass *cls, int ncls, uint64_t base, int senc, uint64_t tps)
{
    memset(w, 0, sizeof *w);
    w->cls = cls;
    w->ncls = ncls;
    w->base = base;
    w->stride = 3;
    w->senc = senc;
    w->tps = tps;
    w->minor = 1;
    w->start_ns = 1700000000000000000ULL;
    w->duration_ns = 5000000000ULL;
    w->flags = 1;
    for (int i = 0; i < 68; i++)
        w8(&w->b, 0);
}

/* A record: size (padded to width, or minimal when 0) including itself, then body. */
static void jw_record(jw *w, const wb *body, int width)
{
    size_t total = body->len + 1;
    if (!width) {
        while (varlen(total) != (int)(total - body->len))
            total++;
        width = (int)(total - body->len);
    } else {
        total = body->len + (size_t)width;
    }
    wvarw(&w->b, total, width);
    wput(&w->b, body->p, body->len);
}

/* String table of the metadata. */
typedef struct stab {
    char *s[4096];
    int n;
} stab;

static uint64_t sidx(stab *t, const char *s)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->s[i], s) == 0) return (uint64_t)i;
    t->s[t->n] = strdup(s);
    return (uint64_t)t->n++;
}

static char *num(uint64_t v)
{
    static char bufs[512][24];
    static int next;
    char *b = bufs[next++ % 512];
    snprintf(b, 24, "%" PRIu64, v);
    return b;
}

static void el_begin(wb *t, stab *st, const char *name, int nattr, const char *const *kv)
{
    wvar(t, sidx(st, name));
    wvar(t, (uint64_t)nattr);
    for (int i = 0; i < nattr; i++) {
        wvar(t, sidx(st, kv[2 * i]));
        wvar(t, sidx(st, kv[2 * i + 1]));
    }
}

/* The metadata record (§2.6): strings, then root{metadata{class{setting?, field{annotation?},
 * annotation?}...}, region}. */
static void jw_metadata(jw *w, int width)
{
    stab *st = calloc(1, sizeof *st);
    wb tree = {0}, body = {0};
    el_begin(&tree, st, "root", 0, NULL);
    wvar(&tree, 2);
    el_begin(&tree, st, "metadata", 0, NULL);
    wvar(&tree, (uint64_t)w->ncls);
    uint64_t label_id = tid(w, "jdk.jfr.Label");
    for (int i = 0; i < w->ncls; i++) {
        const mclass *c = &w->cls[i];
        const char *kv[8] = {"name", c->name, "id", num(tid(w, c->name))};
        int na = 2;
        if (c->super) {
            kv[4] = "superType";
            kv[5] = c->super;
            na = 3;
        }
        el_begin(&tree, st, "class", na, kv);
        int nf = nfields(c);
        bool event = c->super && strcmp(c->super, EV) == 0;
        wvar(&tree, (uint64_t)(nf + (event ? 2 : 0)));
        if (event) { /* a setting (with an annotation) and an annotation: both skipped */
            const char *skv[6] = {"name",         "enabled", "class", num(tid(w, "boolean")),
                                  "defaultValue", "true"};
            el_begin(&tree, st, "setting", 3, skv);
            wvar(&tree, 1);
            const char *akv[4] = {"class", num(label_id), "value", "Enabled"};
            el_begin(&tree, st, "annotation", 2, akv);
            wvar(&tree, 0);
        }
        for (int f = 0; f < nf; f++) {
            const mfield *fd = field_at(c, f);
            const char *fkv[8] = {"name", fd->name, "class", num(tid(w, fd->type))};
            int fna = 2;
            if (fd->cpool) {
                fkv[2 * fna] = "constantPool";
                fkv[2 * fna + 1] = "true";
                fna++;
            }
            if (fd->array) {
                fkv[2 * fna] = "dimension";
                fkv[2 * fna + 1] = "1";
                fna++;
            }
            el_begin(&tree, st, "field", fna, fkv);
            wvar(&tree, 1);
            const char *akv[4] = {"class", num(label_id), "value", fd->name};
            el_begin(&tree, st, "annotation", 2, akv);
            wvar(&tree, 0);
        }
        if (event) {
            const char *akv[4] = {"class", num(label_id), "value", c->name};
            el_begin(&tree, st, "annotation", 2, akv);
            wvar(&tree, 0);
        }
    }
    const char *rkv[4] = {"locale", "en_US", "gmtOffset", "0"};
    el_begin(&tree, st, "region", 2, rkv);
    wvar(&tree, 0);

    wvar(&body, 0);          /* type: metadata */
    wvar(&body, 123456);     /* start */
    wvar(&body, 0);          /* duration */
    wvar(&body, 0x7fffffff); /* metadata id */
    wvar(&body, (uint64_t)st->n);
    for (int i = 0; i < st->n; i++)
        wstr(&body, w->senc, st->s[i]);
    wput(&body, tree.p, tree.len);
    w->meta_off = w->b.len;
    jw_record(w, &body, width);
    wb_free(&tree);
    wb_free(&body);
    for (int i = 0; i < st->n; i++)
        free(st->s[i]);
    free(st);
}

/* A checkpoint (§2.8) holding npools pools already written in pools; delta to the previous. */
static void jw_checkpoint(jw *w, const wb *pools, int npools, int flags, int width)
{
    wb body = {0};
    size_t here = w->b.len;
    wvar(&body, 1);
    wvar(&body, 1000);
    wvar(&body, 0);
    w->delta_at = here + (size_t)varlen(body.len) + body.len; /* right for minimal sizes */
    if (width) w->delta_at = here + (size_t)width + body.len;
    if (w->force) {
        wvarw(&body, (uint64_t)w->force_delta, 9);
        w->force = false;
    } else {
        wvar(&body, w->last_cp ? (uint64_t)((int64_t)w->last_cp - (int64_t)here) : 0);
    }
    wvar(&body, (uint64_t)flags);
    wvar(&body, (uint64_t)npools);
    wput(&body, pools->p, pools->len);
    w->last_cp = here;
    jw_record(w, &body, width);
    wb_free(&body);
}

static void jw_end(jw *w, wb *out)
{
    uint8_t *h = w->b.p;
    wb hb = {0};
    wput(&hb, "FLR\0", 4);
    wbe(&hb, 2, 2);
    wbe(&hb, w->minor, 2);
    wbe(&hb, w->b.len, 8);
    wbe(&hb, w->last_cp, 8);
    wbe(&hb, w->meta_off, 8);
    wbe(&hb, w->start_ns, 8);
    wbe(&hb, w->duration_ns, 8);
    wbe(&hb, 1000, 8);
    wbe(&hb, w->tps, 8);
    wbe(&hb, w->flags, 4); /* generation 0, padding, flags */
    memcpy(h, hb.p, 68);
    wb_free(&hb);
    wput(out, w->b.p, w->b.len);
    wb_free(&w->b);
}

/* ---- values by field name ---- */

typedef struct nv {
    const char *name;
    uint64_t u;
    const char *s; /* strings: text (or the pool key for SE_POOL) */
    int enc;
    int width; /* padded varint width, 0 minimal */
} nv;

typedef struct nvs {
    nv v[12];
    int n;
} nvs;

static const nv *nv_get(const nvs *x, const char *name)
{
    for (int i = 0; x && i < x->n; i++)
        if (strcmp(x->v[i].name, name) == 0) return &x->v[i];
    return NULL;
}

static void w_value(jw *w, wb *b, const char *type, const char *field, const nvs *x, int depth);

/* Every field of class name, values from x (defaults: 7 for numbers, key 0, "s" in UTF-8). */
static void w_struct(jw *w, wb *b, const char *name, const nvs *x, int depth)
{
    const mclass *c = &w->cls[cls_index(w, name)];
    for (int f = 0; f < nfields(c); f++) {
        const mfield *fd = field_at(c, f);
        const nv *v = nv_get(x, fd->name);
        if (fd->array) {
            wvar(b, 2);
            for (int i = 0; i < 2; i++) {
                if (fd->cpool)
                    wvar(b, 1);
                else
                    w_value(w, b, fd->type, fd->name, NULL, depth + 1);
            }
        } else if (fd->cpool) {
            if (v && v->width)
                wvarw(b, v->u, v->width);
            else
                wvar(b, v ? v->u : 0);
        } else {
            w_value(w, b, fd->type, fd->name, x, depth + 1);
        }
    }
}

static void w_value(jw *w, wb *b, const char *type, const char *field, const nvs *x, int depth)
{
    const nv *v = nv_get(x, field);
    uint64_t u = v ? v->u : 7;
    if (!strcmp(type, "boolean") || !strcmp(type, "byte")) {
        w8(b, (uint8_t)u);
    } else if (!strcmp(type, "char") || !strcmp(type, "short") || !strcmp(type, "int") ||
               !strcmp(type, "long")) {
        if (v && v->width)
            wvarw(b, u, v->width);
        else
            wvar(b, u);
    } else if (!strcmp(type, "float")) {
        wbe(b, 0x3f800000, 4);
    } else if (!strcmp(type, "double")) {
        wbe(b, 0x3ff0000000000000ULL, 8);
    } else if (!strcmp(type, "java.lang.String")) {
        if (v)
            wstr(b, v->enc, v->s);
        else
            wstr(b, SE_UTF8, "s");
    } else {
        w_struct(w, b, type, NULL, depth);
    }
}

/* ---- the model of a recording: what is written, and so what must come out ---- */

typedef struct tsym {
    uint64_t key;
    const char *s; /* UTF-8 as written (SE_POOL: the string-pool key); NULL: not a symbol */
    int enc;
    const char *want; /* the name Pyroscope gives it (§3.5), when not s */
} tsym;

typedef struct tkv {
    uint64_t key, a, b; /* class: name symbol; method: class, name symbol */
} tkv;

typedef struct tframe {
    uint64_t method;
    uint64_t line;
    uint64_t ftype;
    int line_width;
} tframe;

typedef struct tstack {
    uint64_t key;
    int truncated;
    tframe f[8];
    int n;
} tstack;

#define END (-2) /* the end of an event list */

typedef struct tev {
    int kind; /* pc_jfr_kind, or -1 for an event of another type (named by type) */
    const char *type;
    uint64_t stack, state, value, ctx, span, span_name, thi, tlo;
    const char *set_name, *set_value; /* ActiveSetting */
    int set_value_enc;
} tev;

typedef struct tstr { /* java.lang.String pool */
    uint64_t key;
    const char *s;
    int enc;
} tstr;

typedef struct tchunk {
    const mclass *layout;
    int nlayout;
    uint64_t base;
    int senc, ev_width;
    uint64_t tps;
    const tsym *syms;
    const tkv *classes, *methods;
    const tstack *stacks;
    const tkv *ftypes; /* key, -, - with names in ftype_names */
    const char *const *ftype_names;
    const tkv *states;
    const char *const *state_names;
    const tstr *strs;
    const tev *events;
    int split; /* JDK style: three checkpoints, events between them, keys defined late */
} tchunk;

static size_t count_syms(const tsym *s)
{
    size_t n = 0;
    while (s && s[n].s)
        n++;
    return n;
}

static size_t count_kv(const tkv *k)
{
    size_t n = 0;
    while (k && k[n].key)
        n++;
    return n;
}

static size_t count_stacks(const tstack *s)
{
    size_t n = 0;
    while (s && s[n].key)
        n++;
    return n;
}

static size_t count_events(const tev *e)
{
    size_t n = 0;
    while (e && e[n].kind != END)
        n++;
    return n;
}

/* Pools of types T, entries [from, to) of each list. */
static void w_symbol_pool(jw *w, wb *p, const tsym *s, size_t from, size_t to)
{
    wvar(p, tid(w, "jdk.types.Symbol"));
    wvar(p, to - from);
    for (size_t i = from; i < to; i++) {
        wvar(p, s[i].key);
        nvs x = {.v = {{.name = "string", .s = s[i].s, .enc = s[i].enc}}, .n = 1};
        w_struct(w, p, "jdk.types.Symbol", &x, 0);
    }
}

static void w_kv_pool(jw *w, wb *p, const char *type, const tkv *k, size_t from, size_t to)
{
    wvar(p, tid(w, type));
    wvar(p, to - from);
    for (size_t i = from; i < to; i++) {
        wvar(p, k[i].key);
        nvs x = {.n = 2};
        if (!strcmp(type, "java.lang.Class")) {
            x.v[0] = (nv){.name = "name", .u = k[i].a};
            x.v[1] = (nv){.name = "package", .u = 0};
        } else {
            x.v[0] = (nv){.name = "type", .u = k[i].a};
            x.v[1] = (nv){.name = "name", .u = k[i].b};
        }
        w_struct(w, p, type, &x, 0);
    }
}

static void w_named_pool(jw *w, wb *p, const char *type, const char *field, const tkv *k,
                         const char *const *names)
{
    size_t n = count_kv(k);
    wvar(p, tid(w, type));
    wvar(p, n);
    for (size_t i = 0; i < n; i++) {
        wvar(p, k[i].key - 1000); /* keys stored +1000 in the model: 0 is a real key */
        nvs x = {.v = {{.name = field, .s = names[i], .enc = i % 2 ? SE_UTF16 : SE_UTF8}}, .n = 1};
        w_struct(w, p, type, &x, 0);
    }
}

static void w_stack_pool(jw *w, wb *p, const tstack *s, size_t from, size_t to)
{
    wvar(p, tid(w, "jdk.types.StackTrace"));
    wvar(p, to - from);
    for (size_t i = from; i < to; i++) {
        wvar(p, s[i].key);
        w8(p, (uint8_t)s[i].truncated);
        wvar(p, (uint64_t)s[i].n);
        for (int f = 0; f < s[i].n; f++) {
            nvs x = {
                .v = {{.name = "method", .u = s[i].f[f].method},
                      {.name = "lineNumber", .u = s[i].f[f].line, .width = s[i].f[f].line_width},
                      {.name = "type", .u = s[i].f[f].ftype}},
                .n = 3};
            w_struct(w, p, "jdk.types.StackFrame", &x, 0);
        }
    }
}

static void w_string_pool(jw *w, wb *p, const tstr *s)
{
    size_t n = 0;
    while (s && s[n].s)
        n++;
    wvar(p, tid(w, "java.lang.String"));
    wvar(p, n);
    for (size_t i = 0; i < n; i++) {
        wvar(p, s[i].key);
        wstr(p, s[i].enc, s[i].s);
    }
}

static const char *const value_field[PC_JFR_KIND_COUNT] = {
    [PC_JFR_WALL_CLOCK_SAMPLE] = "samples",
    [PC_JFR_ALLOC_IN_NEW_TLAB] = "tlabSize",
    [PC_JFR_ALLOC_OUTSIDE_TLAB] = "allocationSize",
    [PC_JFR_ALLOC_SAMPLE] = "weight",
    [PC_JFR_LIVE_OBJECT] = "allocationSize",
    [PC_JFR_MONITOR_ENTER] = "duration",
    [PC_JFR_THREAD_PARK] = "duration",
    [PC_JFR_MALLOC] = "size",
};

static void w_event(jw *w, const tev *e)
{
    const char *type = e->kind >= 0 ? pc_jfr_kind_names[e->kind] : e->type;
    wb body = {0};
    nvs x = {.n = 0};
    x.v[x.n++] = (nv){.name = "stackTrace", .u = e->stack};
    x.v[x.n++] = (nv){.name = "state", .u = e->state ? e->state - 1000 : 0};
    x.v[x.n++] = (nv){.name = "contextId", .u = e->ctx};
    x.v[x.n++] = (nv){.name = "spanId", .u = e->span};
    x.v[x.n++] = (nv){.name = "spanName", .u = e->span_name};
    x.v[x.n++] = (nv){.name = "traceIdHi", .u = e->thi};
    x.v[x.n++] = (nv){.name = "traceIdLo", .u = e->tlo};
    x.v[x.n++] = (nv){.name = "sampledThread", .u = 1};
    x.v[x.n++] = (nv){.name = "eventThread", .u = 1};
    if (e->kind >= 0 && value_field[e->kind])
        x.v[x.n++] = (nv){.name = value_field[e->kind], .u = e->value};
    if (e->set_name) {
        x.v[x.n++] = (nv){.name = "name", .s = e->set_name, .enc = SE_UTF8};
        x.v[x.n++] = (nv){.name = "value", .s = e->set_value, .enc = e->set_value_enc};
    }
    wvar(&body, tid(w, type));
    w_struct(w, &body, type, &x, 0);
    jw_record(w, &body, w->ev_width);
    wb_free(&body);
}

/* Write chunk c into out. JDK style (split): checkpoint 1 (strings, states, the first half of
 * the symbols), half the events, checkpoint 2 (the rest of the symbols, classes, methods, the
 * first half of the stacks), the other events, checkpoint 3 (the other stacks, frame types, a
 * chunk-header pool): events refer to keys written after them, pools are split across
 * checkpoints. Otherwise async-profiler style: metadata first, events, one checkpoint last. */
static void write_chunk(const tchunk *c, wb *out)
{
    jw w;
    jw_begin(&w, c->layout, c->nlayout, c->base, c->senc, c->tps);
    w.ev_width = c->ev_width;
    size_t ns = count_syms(c->syms), nc = count_kv(c->classes), nm = count_kv(c->methods);
    size_t nst = count_stacks(c->stacks), ne = count_events(c->events);
    wb p = {0};
    if (!c->split) {
        jw_metadata(&w, 5);
        for (size_t i = 0; i < ne; i++)
            w_event(&w, &c->events[i]);
        int np = 0;
        w_named_pool(&w, &p, "jdk.types.FrameType", "description", c->ftypes, c->ftype_names);
        w_named_pool(&w, &p, "jdk.types.ThreadState", "name", c->states, c->state_names);
        np += 2;
        /* the thread pool is of no interest: decoded and skipped */
        wvar(&p, tid(&w, "java.lang.Thread"));
        wvar(&p, 1);
        wvar(&p, 1);
        w_struct(&w, &p, "java.lang.Thread", NULL, 0);
        np++;
        w_stack_pool(&w, &p, c->stacks, 0, nst);
        w_kv_pool(&w, &p, "jdk.types.Method", c->methods, 0, nm);
        w_kv_pool(&w, &p, "java.lang.Class", c->classes, 0, nc);
        w_symbol_pool(&w, &p, c->syms, 0, ns);
        w_string_pool(&w, &p, c->strs);
        np += 5;
        jw_checkpoint(&w, &p, np, 1, 5);
    } else {
        w_string_pool(&w, &p, c->strs);
        w_named_pool(&w, &p, "jdk.types.ThreadState", "name", c->states, c->state_names);
        w_symbol_pool(&w, &p, c->syms, 0, ns / 2);
        jw_checkpoint(&w, &p, 3, 0, 8); /* size padded to 8 bytes, as the JDK does */
        p.len = 0;
        for (size_t i = 0; i < ne / 2; i++)
            w_event(&w, &c->events[i]);
        jw_metadata(&w, 4); /* in the middle, as the JDK writes it */
        w_symbol_pool(&w, &p, c->syms, ns / 2, ns);
        w_kv_pool(&w, &p, "java.lang.Class", c->classes, 0, nc);
        w_kv_pool(&w, &p, "jdk.types.Method", c->methods, 0, nm);
        w_stack_pool(&w, &p, c->stacks, 0, nst / 2);
        jw_checkpoint(&w, &p, 4, 0, 0);
        p.len = 0;
        for (size_t i = ne / 2; i < ne; i++)
            w_event(&w, &c->events[i]);
        w_stack_pool(&w, &p, c->stacks, nst / 2, nst);
        w_named_pool(&w, &p, "jdk.types.FrameType", "description", c->ftypes, c->ftype_names);
        wvar(&p, tid(&w, "jdk.types.ChunkHeader"));
        wvar(&p, 1);
        wvar(&p, 1);
        wvar(&p, 68);
        for (int i = 0; i < 68; i++)
            w8(&p, (uint8_t)i);
        wvar(&p, tid(&w, "jdk.types.ThreadGroup"));
        wvar(&p, 2);
        wvar(&p, 1);
        nvs g = {.v = {{.name = "parent", .u = 0}, {.name = "name", .s = "system", .enc = 4}},
                 .n = 2};
        w_struct(&w, &p, "jdk.types.ThreadGroup", &g, 0);
        wvar(&p, 2);
        g.v[0].u = 1;
        w_struct(&w, &p, "jdk.types.ThreadGroup", &g, 0);
        jw_checkpoint(&w, &p, 4, 2, 0);
    }
    wb_free(&p);
    jw_end(&w, out);
}

/* ---- what must come out (§3.2-§3.5), computed from the model ---- */

typedef struct line {
    char *key;
    uint64_t v;
} line;

typedef struct lines {
    line *v;
    size_t n, cap;
} lines;

static void lines_add(lines *l, const char *key, uint64_t v)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].key, key)) {
            l->v[i].v += v;
            return;
        }
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 32;
        l->v = realloc(l->v, l->cap * sizeof(line));
    }
    l->v[l->n].key = strdup(key);
    l->v[l->n++].v = v;
}

static int line_cmp(const void *a, const void *b)
{
    return strcmp(((const line *)a)->key, ((const line *)b)->key);
}

/* Sorted "key value" lines, one string. */
static char *lines_text(lines *l)
{
    qsort(l->v, l->n, sizeof(line), line_cmp);
    size_t cap = 64, len = 0;
    for (size_t i = 0; i < l->n; i++)
        cap += strlen(l->v[i].key) + 32;
    char *t = malloc(cap);
    t[0] = 0;
    for (size_t i = 0; i < l->n; i++)
        len += (size_t)snprintf(t + len, cap - len, "%s %" PRIu64 "\n", l->v[i].key, l->v[i].v);
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].key);
    free(l->v);
    memset(l, 0, sizeof *l);
    return t;
}

/* The profile type of each group, from the spec's table (§3.2). */
typedef struct gdef {
    const char *id[2];
} gdef;
enum { G_CPU, G_WALL, G_TIN, G_TOUT, G_ASAMPLE, G_LIVE, G_MUTEX, G_BLOCK, G_MALLOC };
static const gdef gdefs[] = {
    [G_CPU] = {{"process_cpu:cpu:nanoseconds:cpu:nanoseconds", NULL}},
    [G_WALL] = {{"wall:wall:nanoseconds:wall:nanoseconds", NULL}},
    [G_TIN] = {{"memory:alloc_in_new_tlab_objects:count:space:bytes",
                "memory:alloc_in_new_tlab_bytes:bytes:space:bytes"}},
    [G_TOUT] = {{"memory:alloc_outside_tlab_objects:count:space:bytes",
                 "memory:alloc_outside_tlab_bytes:bytes:space:bytes"}},
    [G_ASAMPLE] = {{"memory:alloc_sample_objects:count:space:bytes",
                    "memory:alloc_sample_bytes:bytes:space:bytes"}},
    [G_LIVE] = {{"memory:live:count:objects:count", NULL}},
    [G_MUTEX] = {{"mutex:contentions:count:mutex:count", "mutex:delay:nanoseconds:mutex:count"}},
    [G_BLOCK] = {{"block:contentions:count:block:count", "block:delay:nanoseconds:block:count"}},
    [G_MALLOC] = {{"memory:malloc_objects:count::", "memory:malloc_bytes:bytes::"}},
};

/* The labels snapshot of the tests. */
typedef struct tlabels {
    struct {
        int64_t id;
        const char *s;
    } strings[8];
    struct {
        int64_t ctx;
        int64_t pairs[4][2];
        int npairs;
    } contexts[4];
} tlabels;

static const char *tl_str(const tlabels *l, int64_t id)
{
    for (int i = 0; l && i < 8; i++)
        if (l->strings[i].s && l->strings[i].id == id) return l->strings[i].s;
    return "";
}

static const char *sym_name(const tchunk *c, uint64_t key)
{
    for (const tsym *s = c->syms; s->s; s++) {
        if (s->key != key) continue;
        if (s->want) return s->want;
        if (s->enc == SE_NULL || s->enc == SE_EMPTY) return "";
        if (s->enc == SE_POOL) {
            uint64_t k = strtoull(s->s, NULL, 10);
            for (const tstr *t = c->strs; t && t->s; t++)
                if (t->key == k) return t->s;
            return "";
        }
        return s->s;
    }
    return "";
}

static const tkv *kv_find(const tkv *k, uint64_t key)
{
    for (; k && k->key; k++)
        if (k->key == key) return k;
    return NULL;
}

/* "name@line#type;..." leaf first, as the decoder's stacks read (see actual_lines). */
static bool stack_text(const tchunk *c, uint64_t key, char *out, size_t cap)
{
    const tstack *s = NULL;
    for (const tstack *t = c->stacks; t->key; t++)
        if (t->key == key) s = t;
    if (!s) return false;
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < s->n; i++) {
        const tkv *m = kv_find(c->methods, s->f[i].method);
        const tkv *k = m ? kv_find(c->classes, m->a) : NULL;
        if (!m || !k) continue; /* dropped, as Pyroscope drops them */
        const tkv *ft = kv_find(c->ftypes, s->f[i].ftype + 1000);
        const char *ftn = ft ? c->ftype_names[ft - c->ftypes] : "";
        len += (size_t)snprintf(out + len, cap - len, "%s%s.%s@%" PRIu64 "#%s", len ? ";" : "",
                                sym_name(c, k->a), sym_name(c, m->b),
                                (uint64_t)(uint32_t)s->f[i].line, ftn);
    }
    if (s->truncated) snprintf(out + len, cap - len, "%s[truncated]@0#", len ? ";" : "");
    return true;
}

static void labels_text(const tlabels *l, const tev *e, char *out, size_t cap)
{
    char keys[16][64], vals[16][80];
    int n = 0;
    for (int i = 0; l && e->ctx && i < 4; i++) {
        if (l->contexts[i].ctx != (int64_t)e->ctx) continue;
        for (int j = 0; j < l->contexts[i].npairs; j++) {
            const char *k = tl_str(l, l->contexts[i].pairs[j][0]);
            if (!*k) continue;
            snprintf(keys[n], 64, "%s", k);
            snprintf(vals[n++], 80, "%s", tl_str(l, l->contexts[i].pairs[j][1]));
        }
    }
    if (e->span) {
        snprintf(keys[n], 64, "span_id");
        snprintf(vals[n++], 80, "%016" PRIx64, e->span);
    }
    if (e->span_name && *tl_str(l, (int64_t)e->span_name)) {
        snprintf(keys[n], 64, "span_name");
        snprintf(vals[n++], 80, "%s", tl_str(l, (int64_t)e->span_name));
    }
    if (e->thi || e->tlo) {
        snprintf(keys[n], 64, "trace_id");
        snprintf(vals[n++], 80, "%016" PRIx64 "%016" PRIx64, e->thi, e->tlo);
    }
    /* sorted by key */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(keys[j], keys[i]) < 0) {
                char t[80];
                strcpy(t, keys[i]), strcpy(keys[i], keys[j]), strcpy(keys[j], t);
                strcpy(t, vals[i]), strcpy(vals[i], vals[j]), strcpy(vals[j], t);
            }
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s=%s", i ? "," : "", keys[i], vals[i]);
}

static const char *state_name(const tchunk *c, uint64_t key)
{
    const tkv *s = kv_find(c->states, key);
    return s ? c->state_names[s - c->states] : NULL;
}

typedef struct expect_ctx {
    lines l;
    const char *event; /* the ActiveSetting `event`, across chunks */
    uint64_t period;
    uint64_t counts[PC_JFR_KIND_COUNT], skipped, not_found;
} expect_ctx;

static void expect_add(expect_ctx *x, int g, const char *stack, const char *labels, uint64_t v0,
                       uint64_t v1)
{
    char key[4096];
    snprintf(key, sizeof key, "%s|%s|%s", gdefs[g].id[0], stack, labels);
    lines_add(&x->l, key, v0);
    if (gdefs[g].id[1]) {
        snprintf(key, sizeof key, "%s|%s|%s", gdefs[g].id[1], stack, labels);
        lines_add(&x->l, key, v1);
    }
}

static uint64_t ticks_ns(uint64_t t, uint64_t tps)
{
    return (uint64_t)((unsigned __int128)t * 1000000000u / tps);
}

/* Pyroscope's rules (§3.2, §3.3) applied to the events of c, in order. */
static void expect_chunk(expect_ctx *x, const tchunk *c, const tlabels *l)
{
    for (const tev *e = c->events; e->kind != END; e++) {
        if (e->kind < 0) {
            x->skipped++;
            continue;
        }
        x->counts[e->kind]++;
        if (e->kind == PC_JFR_ACTIVE_SETTING) {
            if (!strcmp(e->set_name, "event")) {
                const char *v = e->set_value;
                if (e->set_value_enc == SE_POOL) {
                    uint64_t k = strtoull(v, NULL, 10);
                    for (const tstr *t = c->strs; t && t->s; t++)
                        if (t->key == k) v = t->s;
                }
                x->event = v;
            }
            continue;
        }
        const char *st = state_name(c, e->state);
        bool wall = x->event && !strcmp(x->event, "wall");
        bool cpu = false, wallg = false;
        if (e->kind == PC_JFR_EXECUTION_SAMPLE) {
            cpu = st && strcmp(st, "STATE_SLEEPING") != 0;
            wallg = wall;
            if (!cpu && !wallg) continue;
        } else if (e->kind == PC_JFR_WALL_CLOCK_SAMPLE) {
            cpu = st && !strcmp(st, "STATE_RUNNABLE") && wall;
            wallg = true;
        }
        char stack[2048], labels[512] = "";
        if (!stack_text(c, e->stack, stack, sizeof stack)) {
            x->not_found++;
            continue;
        }
        bool corr = e->kind == PC_JFR_EXECUTION_SAMPLE || e->kind == PC_JFR_WALL_CLOCK_SAMPLE ||
                    e->kind == PC_JFR_ALLOC_IN_NEW_TLAB || e->kind == PC_JFR_ALLOC_OUTSIDE_TLAB ||
                    e->kind == PC_JFR_MONITOR_ENTER;
        if (corr) labels_text(l, e, labels, sizeof labels);
        switch (e->kind) {
        case PC_JFR_EXECUTION_SAMPLE:
        case PC_JFR_WALL_CLOCK_SAMPLE: {
            uint64_t n = e->kind == PC_JFR_WALL_CLOCK_SAMPLE ? e->value : 1;
            if (cpu) expect_add(x, G_CPU, stack, labels, n * x->period, 0);
            if (wallg) expect_add(x, G_WALL, stack, labels, n * x->period, 0);
            break;
        }
        case PC_JFR_ALLOC_IN_NEW_TLAB: expect_add(x, G_TIN, stack, labels, 1, e->value); break;
        case PC_JFR_ALLOC_OUTSIDE_TLAB: expect_add(x, G_TOUT, stack, labels, 1, e->value); break;
        case PC_JFR_ALLOC_SAMPLE: expect_add(x, G_ASAMPLE, stack, labels, 1, e->value); break;
        case PC_JFR_LIVE_OBJECT: expect_add(x, G_LIVE, stack, labels, 1, 0); break;
        case PC_JFR_MONITOR_ENTER:
            expect_add(x, G_MUTEX, stack, labels, 1, ticks_ns(e->value, c->tps));
            break;
        case PC_JFR_THREAD_PARK:
            expect_add(x, G_BLOCK, stack, labels, 1, ticks_ns(e->value, c->tps));
            break;
        case PC_JFR_MALLOC: expect_add(x, G_MALLOC, stack, labels, 1, e->value); break;
        default: break;
        }
    }
}

/* ---- what came out, read back from the batch ---- */

static const char *attr_str(const pc_dictionary *d, const int32_t *idx, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++) {
        const pc_kvu *a = d->attribute_table[idx[i]];
        if (!strcmp(pc_dict_str(d, a->key_strindex), key)) return pc_anyvalue_str(d, a->value);
    }
    return NULL;
}

static char *actual_lines(const pc_batch *b)
{
    lines l = {0};
    const pc_dictionary *d = b->req->dictionary;
    for (size_t r = 0; r < b->req->n_resource_profiles; r++) {
        const pc_scope_profiles *sp = b->req->resource_profiles[r]->scope_profiles[0];
        for (size_t i = 0; i < sp->n_profiles; i++) {
            const pc_profile *p = sp->profiles[i];
            char type[256], key[4096];
            const char *metric =
                attr_str(d, p->attribute_indices, p->n_attribute_indices, "pyroscope.profile.name");
            snprintf(type, sizeof type, "%s:%s:%s:%s:%s", metric ? metric : "?",
                     pc_dict_str(d, p->sample_type->type_strindex),
                     pc_dict_str(d, p->sample_type->unit_strindex),
                     p->period_type ? pc_dict_str(d, p->period_type->type_strindex) : "",
                     p->period_type ? pc_dict_str(d, p->period_type->unit_strindex) : "");
            for (size_t j = 0; j < p->n_samples; j++) {
                const pc_sample *s = p->samples[j];
                const pc_stack *st = d->stack_table[s->stack_index];
                size_t len = (size_t)snprintf(key, sizeof key, "%s|", type);
                for (size_t k = 0; k < st->n_location_indices; k++) {
                    const pc_location *loc = d->location_table[st->location_indices[k]];
                    const char *ft = attr_str(d, loc->attribute_indices, loc->n_attribute_indices,
                                              "jfr.frame.type");
                    len += (size_t)snprintf(
                        key + len, sizeof key - len, "%s%s@%" PRId64 "#%s", k ? ";" : "",
                        pc_dict_str(
                            d, d->function_table[loc->lines[0]->function_index]->name_strindex),
                        loc->lines[0]->line, ft ? ft : "");
                }
                /* sample attributes, sorted by key */
                const char *ks[16], *vs[16];
                size_t na = s->n_attribute_indices;
                for (size_t a = 0; a < na && a < 16; a++) {
                    const pc_kvu *kv = d->attribute_table[s->attribute_indices[a]];
                    ks[a] = pc_dict_str(d, kv->key_strindex);
                    vs[a] = pc_anyvalue_str(d, kv->value);
                }
                for (size_t a = 0; a < na; a++)
                    for (size_t c = a + 1; c < na; c++)
                        if (strcmp(ks[c], ks[a]) < 0) {
                            const char *t = ks[a];
                            ks[a] = ks[c], ks[c] = t;
                            t = vs[a], vs[a] = vs[c], vs[c] = t;
                        }
                len += (size_t)snprintf(key + len, sizeof key - len, "|");
                for (size_t a = 0; a < na; a++)
                    len += (size_t)snprintf(key + len, sizeof key - len, "%s%s=%s", a ? "," : "",
                                            ks[a], vs[a]);
                lines_add(&l, key, (uint64_t)s->values[0]);
            }
        }
    }
    return lines_text(&l);
}

/* ---- the recordings ---- */

static const char *const ap_ftypes[] = {"Interpreted", "JIT compiled", "Inlined",
                                        "Native",      "C++",          "Kernel"};
static const tkv ap_ftype_keys[] = {{1000, 0, 0}, {1001, 0, 0}, {1002, 0, 0}, {1003, 0, 0},
                                    {1004, 0, 0}, {1005, 0, 0}, {0, 0, 0}};
/* async-profiler HEAD: 0 DEFAULT, 1 RUNNABLE, 2 SLEEPING (keys +1000 in the model) */
static const char *const ap_states[] = {"STATE_DEFAULT", "STATE_RUNNABLE", "STATE_SLEEPING"};
static const tkv ap_state_keys[] = {{1000, 0, 0}, {1001, 0, 0}, {1002, 0, 0}, {0, 0, 0}};

#define BIG_KEY 0xFFFFFFFFFFFFFFF0ULL

static const tsym ap_syms[] = {
    {1, "com/example/App", SE_UTF8, NULL},
    {2, "main", SE_UTF8, NULL},
    {3, "café", SE_LATIN1, NULL},
    {4, "Foo$$Lambda$669.0x0000000800fd7318", SE_UTF8, "Foo$$Lambda_"},
    {5, "run", SE_UTF16, NULL},
    {6, "Fib$$Lambda.0x00007ffa600c4da0", SE_UTF16, "Fib$$Lambda_"},
    {7, "jdk/internal/reflect/GeneratedMethodAccessor31", SE_UTF8,
     "jdk/internal/reflect/GeneratedMethodAccessor_"},
    {8, "500", SE_POOL, NULL}, /* -> "invoke" via the string pool */
    {9, "libasyncProfiler-linux-x64-17b9a1d8156277a98ccc871afa9a8f69215f92.so", SE_UTF8,
     "libasyncProfiler-_.so"},
    {10, "Profiler::recordSample", SE_UTF8, NULL},
    {11, "", SE_NULL, NULL},
    {12, "unknown_Java", SE_UTF8, NULL},
    {13, "com/example/Svc$$EnhancerBySpringCGLIB$$abc123", SE_UTF8,
     "com/example/Svc$$EnhancerBySpringCGLIB$$_"},
    {14, "", SE_EMPTY, NULL},
    {15, "Burn$$Lambda$93+0x00007f50bc007a08/1908981452", SE_UTF8, NULL}, /* not merged */
    {16, "\xF0\x9D\x84\x9E clef", SE_UTF16, NULL},
    {17, "libc.so.6", SE_UTF8, NULL},
    {18, "bad\xFFutf8", SE_UTF8, "bad\xEF\xBF\xBDutf8"},
    {19, "/tmp/libzstd-jni-1.5.1-16931311898282279136.so (deleted)", SE_UTF8, "libzstd-jni-_.so"},
    {20, "./tmp/amazonCorrettoCryptoProviderNativeLibraries.7382c2f79097f415/libcrypto.so",
     SE_LATIN1, "libamazonCorrettoCryptoProvider_.so"},
    {21, "Foo$$Lambda$1234", SE_UTF8, NULL}, /* not merged (§3.5) */
    {0, NULL, 0, NULL},
};
static const tstr ap_strs[] = {{500, "invoke", SE_UTF8}, {501, "wall", SE_UTF16}, {0, NULL, 0}};
static const tkv ap_classes[] = {{1, 1, 0},   {2, 4, 0},   {3, 6, 0},   {4, 7, 0},  {5, 9, 0},
                                 {6, 11, 0},  {7, 13, 0},  {8, 15, 0},  {9, 17, 0}, {10, 18, 0},
                                 {11, 19, 0}, {12, 20, 0}, {13, 21, 0}, {0, 0, 0}};
static const tkv ap_methods[] = {{1, 1, 2},   {2, 1, 3},   {3, 2, 5},   {4, 3, 5},
                                 {5, 4, 8},   {6, 5, 10},  {7, 6, 12},  {8, 7, 16},
                                 {9, 8, 14},  {10, 9, 2},  {11, 10, 2}, {12, 99, 2},
                                 {13, 11, 2}, {14, 12, 5}, {15, 13, 2}, {0, 0, 0}};
static const tstack ap_stacks[] = {
    {1, 0, {{2, 10, 1, 0}, {1, 5, 0, 0}}, 2},
    {2, 0, {{3, 7, 2, 0}, {4, 8, 1, 0}, {1, 1, 0, 0}}, 3},
    {3, 0, {{6, 0, 4, 0}, {10, 0, 3, 0}, {5, 3, 1, 0}, {13, 1, 5, 0}, {1, 2, 0, 0}}, 5},
    {4, 1, {{7, 0, 0, 0}, {8, 1, 1, 0}, {9, 2, 2, 0}, {1, 3, 0, 0}}, 4},
    /* a frame whose class is missing, one whose method is missing */
    {5, 0, {{11, 1, 0, 0}, {12, 2, 0, 0}, {77, 3, 0, 0}, {14, 9, 1, 0}, {15, 4, 0, 0}}, 5},
    /* the JDK's -1 line (zero-extended 32 bits, 5 bytes), a frame type key missing */
    {BIG_KEY, 0, {{1, 0xFFFFFFFFu, 0, 0}, {2, 12, 9, 9}}, 2},
    {0, 0, {{0}}, 0},
};
static const tev ap_events[] = {
    {PC_JFR_EXECUTION_SAMPLE, NULL, 1, 1001, 0, 0, 0, 0, 0, 0, NULL, NULL, 0}, /* before `event` */
    {PC_JFR_ACTIVE_SETTING, NULL, 0, 0, 0, 0, 0, 0, 0, 0, "event", "501", SE_POOL},
    {PC_JFR_ACTIVE_SETTING, NULL, 0, 0, 0, 0, 0, 0, 0, 0, "other", "cpu", SE_UTF8},
    {PC_JFR_EXECUTION_SAMPLE, NULL, 1, 1001, 0, 1, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_EXECUTION_SAMPLE, NULL, 2, 1002, 0, 2, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_EXECUTION_SAMPLE, NULL, 3, 1009, 0, 0, 0, 0, 0, 0, NULL, NULL, 0}, /* no state */
    {PC_JFR_EXECUTION_SAMPLE, NULL, 1, 1001, 0, 1, 0, 0, 0, 0, NULL, NULL, 0}, /* merges */
    {PC_JFR_WALL_CLOCK_SAMPLE, NULL, 2, 1001, 3, 0, 0x1122334455667788ULL, 3, 0x0102030405060708ULL,
     0x090a0b0c0d0e0f10ULL, NULL, NULL, 0},
    {PC_JFR_WALL_CLOCK_SAMPLE, NULL, 4, 1002, 2, 1, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_WALL_CLOCK_SAMPLE, NULL, 5, 1000, 4, 0, 0xabcdefULL, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_ALLOC_IN_NEW_TLAB, NULL, 1, 0, 4096, 2, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_ALLOC_IN_NEW_TLAB, NULL, 1, 0, 8192, 2, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_ALLOC_OUTSIDE_TLAB, NULL, 3, 0, 50000, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_ALLOC_SAMPLE, NULL, 5, 0, 777, 1, 0, 0, 0, 0, NULL, NULL, 0}, /* no labels */
    {PC_JFR_LIVE_OBJECT, NULL, BIG_KEY, 0, 64, 1, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_MONITOR_ENTER, NULL, 2, 0, 5000, 3, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_MONITOR_ENTER, NULL, 2, 0, 7500, 4, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_THREAD_PARK, NULL, 3, 0, 2500, 2, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_MALLOC, NULL, 1, 0, 1024, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_MALLOC, NULL, 4, 0, 1 << 20, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {-1, "profiler.Free", 1, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {-1, "test.Unknown", 1, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_EXECUTION_SAMPLE, NULL, 4242, 1001, 0, 0, 0, 0, 0, 0, NULL, NULL, 0}, /* no stack */
    {PC_JFR_MONITOR_ENTER, NULL, 4242, 0, 1, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {END, NULL, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0},
};

static const tchunk ap_chunk = {
    .layout = ap_layout,
    .nlayout = NCLS(ap_layout),
    .base = 20,
    .senc = SE_UTF8,
    .ev_width = 5, /* async-profiler pads event sizes to 5 bytes */
    .tps = 2500000000ULL,
    .syms = ap_syms,
    .classes = ap_classes,
    .methods = ap_methods,
    .stacks = ap_stacks,
    .ftypes = ap_ftype_keys,
    .ftype_names = ap_ftypes,
    .states = ap_state_keys,
    .state_names = ap_states,
    .strs = ap_strs,
    .events = ap_events,
};

/* The JDK chunk: other type ids, UTF-16 metadata, the same keys meaning other things. */
static const char *const jdk_ftypes[] = {"Interpreted", "JIT compiled", "Inlined", "Native"};
static const tkv jdk_ftype_keys[] = {
    {1000, 0, 0}, {1001, 0, 0}, {1002, 0, 0}, {1003, 0, 0}, {0, 0, 0}};
static const char *const jdk_states[] = {"STATE_NEW", "STATE_RUNNABLE", "STATE_SLEEPING",
                                         "STATE_PARKED"};
static const tkv jdk_state_keys[] = {
    {1000, 0, 0}, {1005, 0, 0}, {1225, 0, 0}, {1657, 0, 0}, {0, 0, 0}};
static const tsym jdk_syms[] = {
    {1, "java/lang/Thread", SE_UTF8, NULL},
    {2, "run", SE_UTF16, NULL},
    {3, "Burn", SE_LATIN1, NULL},
    {4, "burnAlpha", SE_UTF8, NULL},
    {5, "700", SE_POOL, NULL}, /* "java/util/concurrent/locks/LockSupport" in UTF-16 */
    {6, "park", SE_UTF8, NULL},
    {7, "Foo$$Lambda/0x000071b0e8009000", SE_UTF8, "Foo$$Lambda_"}, /* JDK 25's form */
    {0, NULL, 0, NULL},
};
static const tstr jdk_strs[] = {{700, "java/util/concurrent/locks/LockSupport", SE_UTF16},
                                {0, NULL, 0}};
static const tkv jdk_classes[] = {{1, 3, 0}, {2, 1, 0}, {3, 5, 0}, {4, 7, 0}, {0, 0, 0}};
static const tkv jdk_methods[] = {{1, 2, 2}, {2, 1, 4}, {3, 3, 6}, {4, 4, 2}, {0, 0, 0}};
static const tstack jdk_stacks[] = {
    {1, 0, {{2, 10, 1, 0}, {1, 840, 0, 0}}, 2},
    {2, 0, {{3, 0xFFFFFFFFu, 3, 5}, {2, 11, 2, 0}, {1, 841, 0, 0}}, 3},
    {7, 1, {{4, 0xFFFFFFFFu, 0, 0}, {1, 840, 0, 0}}, 2},
    {9, 0, {{2, 12, 1, 0}}, 1},
    {0, 0, {{0}}, 0},
};
static const tev jdk_events[] = {
    {PC_JFR_EXECUTION_SAMPLE, NULL, 1, 1005, 0, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_EXECUTION_SAMPLE, NULL, 9, 1225, 0, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_ACTIVE_SETTING, NULL, 0, 0, 0, 0, 0, 0, 0, 0, "enabled", "true", SE_UTF16},
    {-1, "jdk.GCPhaseParallel", 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {-1, "jdk.NativeMethodSample", 1, 1005, 0, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_MONITOR_ENTER, NULL, 2, 0, 1000000, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_THREAD_PARK, NULL, 7, 0, 2500000, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_ALLOC_SAMPLE, NULL, 2, 0, 123456, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_ALLOC_IN_NEW_TLAB, NULL, 1, 0, 65536, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_EXECUTION_SAMPLE, NULL, 2, 1657, 0, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {PC_JFR_EXECUTION_SAMPLE, NULL, 1, 1005, 0, 0, 0, 0, 0, 0, NULL, NULL, 0},
    {END, NULL, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 0},
};

static const tchunk jdk_chunk = {
    .layout = jdk_layout,
    .nlayout = NCLS(jdk_layout),
    .base = 101,
    .senc = SE_UTF16,
    .ev_width = 4, /* the JDK's Java writer pads large event sizes to 4 bytes */
    .tps = 1000000000ULL,
    .syms = jdk_syms,
    .classes = jdk_classes,
    .methods = jdk_methods,
    .stacks = jdk_stacks,
    .ftypes = jdk_ftype_keys,
    .ftype_names = jdk_ftypes,
    .states = jdk_state_keys,
    .state_names = jdk_states,
    .strs = jdk_strs,
    .events = jdk_events,
    .split = 1,
};

static const tlabels test_labels = {
    .strings = {{1, "thread_name"}, {2, "pool-1"}, {3, "GET /api"}, {4, "pool-2"}, {5, "user"}},
    .contexts = {{1, {{1, 2}}, 1}, {2, {{1, 4}, {5, 2}}, 2}, {3, {{5, 9}}, 1}, {4, {{8, 1}}, 1}},
};

/* The LabelsSnapshot protobuf of l (malloc'd). */
static uint8_t *labels_pb(const tlabels *l, size_t *len)
{
    Io__Pyroscope__Labels__Pb__LabelsSnapshot snap =
        IO__PYROSCOPE__LABELS__PB__LABELS_SNAPSHOT__INIT;
    Io__Pyroscope__Labels__Pb__LabelsSnapshot__StringsEntry se[8], *sp[8];
    Io__Pyroscope__Labels__Pb__LabelsSnapshot__ContextsEntry ce[4], *cp[4];
    Io__Pyroscope__Labels__Pb__Context ctx[4];
    Io__Pyroscope__Labels__Pb__Context__LabelsEntry le[4][4], *lp[4][4];
    for (int i = 0; i < 8 && l->strings[i].s; i++) {
        io__pyroscope__labels__pb__labels_snapshot__strings_entry__init(&se[i]);
        se[i].key = l->strings[i].id;
        se[i].value = (char *)l->strings[i].s;
        sp[snap.n_strings++] = &se[i];
    }
    for (int i = 0; i < 4 && l->contexts[i].ctx; i++) {
        io__pyroscope__labels__pb__labels_snapshot__contexts_entry__init(&ce[i]);
        io__pyroscope__labels__pb__context__init(&ctx[i]);
        for (int j = 0; j < l->contexts[i].npairs; j++) {
            io__pyroscope__labels__pb__context__labels_entry__init(&le[i][j]);
            le[i][j].key = l->contexts[i].pairs[j][0];
            le[i][j].value = l->contexts[i].pairs[j][1];
            lp[i][j] = &le[i][j];
        }
        ctx[i].n_labels = (size_t)l->contexts[i].npairs;
        ctx[i].labels = lp[i];
        ce[i].key = l->contexts[i].ctx;
        ce[i].value = &ctx[i];
        cp[snap.n_contexts++] = &ce[i];
    }
    snap.strings = sp;
    snap.contexts = cp;
    *len = io__pyroscope__labels__pb__labels_snapshot__get_packed_size(&snap);
    uint8_t *b = malloc(*len ? *len : 1);
    io__pyroscope__labels__pb__labels_snapshot__pack(&snap, b);
    return b;
}

static const pc_format_attr rattrs[] = {{"service.name", "javaapp"}, {"env", "test"}};

static pc_format_opts base_opts(void)
{
    return (pc_format_opts){.sample_rate = 100,
                            .time_ns = 1700000000000000000LL,
                            .duration_ns = 10000000000LL,
                            .attrs = rattrs,
                            .n_attrs = 2,
                            .scope_name = "com.grafana.pyroscope/java",
                            .scope_version = "2.1.0"};
}

static int decode(const wb *rec, const pc_format_opts *o, pc_batch **b, pc_jfr_stats *st,
                  pc_error *e)
{
    *b = NULL;
    pc_error_clear(e);
    pc_format_opts with_stats = *o;
    with_stats.jfr_stats = st;
    return pc_jfr_decode(rec->p, rec->len, &with_stats, b, e);
}

/* Decode chunks cs (written one after another) with labels l; compare with the expectation. */
static void check_recording(const tchunk *const *cs, int n, const tlabels *l, int64_t rate)
{
    wb rec = {0};
    expect_ctx x = {.period = rate > 0 ? (uint64_t)(1000000000 / rate) : 0};
    for (int i = 0; i < n; i++) {
        write_chunk(cs[i], &rec);
        expect_chunk(&x, cs[i], l);
    }
    size_t lblen = 0;
    uint8_t *lb = l ? labels_pb(l, &lblen) : NULL;
    pc_format_opts o = base_opts();
    o.sample_rate = rate;
    o.extra = lb;
    o.extra_len = lblen;
    pc_batch *b;
    pc_jfr_stats st;
    pc_error e = {0};
    CHECK_EQ_INT(decode(&rec, &o, &b, &st, &e), 0);
    if (e.code) fprintf(stderr, "decode: %s\n", e.msg);
    if (b) {
        char *want = lines_text(&x.l), *got = actual_lines(b);
        if (getenv("TEST_JFR_VERBOSE")) fprintf(stderr, "%s", got);
        CHECK_STR(got, want);
        free(want);
        free(got);
        CHECK_EQ_INT(st.chunks, n);
        for (int k = 0; k < PC_JFR_KIND_COUNT; k++)
            CHECK_EQ_INT(st.events[k], x.counts[k]);
        CHECK_EQ_INT(st.skipped_events, x.skipped);
        CHECK_EQ_INT(st.stacks_not_found, x.not_found);
        int64_t rejected = 0;
        pc_error ve = {0};
        CHECK_EQ_INT(pc_batch_validate(b, &rejected, &ve), 0);
        CHECK_EQ_INT(rejected, 0);
        /* resource and scope as given */
        const pc_resource_profiles *rp = b->req->resource_profiles[0];
        CHECK_STR(pc_resource_attr_str(b->req->dictionary, rp->resource, "service.name"),
                  "javaapp");
        CHECK_STR(rp->scope_profiles[0]->scope->name, "com.grafana.pyroscope/java");
        pc_batch_unref(b);
    }
    free(lb);
    wb_free(&rec);
}

static void test_async_profiler_recording(void)
{
    const tchunk *cs[] = {&ap_chunk};
    check_recording(cs, 1, &test_labels, 100);
    check_recording(cs, 1, &test_labels, 0); /* sampleRate=0: CPU and wall values 0 */
    check_recording(cs, 1, NULL, 250);       /* no labels part: span and trace ids still */
}

static void test_jdk_recording(void)
{
    const tchunk *cs[] = {&jdk_chunk};
    check_recording(cs, 1, NULL, 100);
}

static void test_several_chunks(void)
{
    /* type ids, pools and string encodings differ per chunk; the same keys mean other things;
     * async-profiler's `event` setting of the first chunk holds in the second */
    const tchunk *cs[] = {&ap_chunk, &jdk_chunk, &ap_chunk};
    check_recording(cs, 3, &test_labels, 100);
    const tchunk *cs2[] = {&jdk_chunk, &ap_chunk};
    check_recording(cs2, 2, &test_labels, 100);
}

/* What else the spec fixes: attributes, frame types, the truncated marker, the 32-bit line, the
 * names of §3.5, stats, and the two-value profiles joining into one pprof. */
static int count_pprofs(const pc_pprof_out *o, void *ud)
{
    int *n = ud;
    n[0]++;
    n[o->n_profiles]++;
    return 0;
}

static void test_details(void)
{
    wb rec = {0};
    write_chunk(&ap_chunk, &rec);
    size_t lblen;
    uint8_t *lb = labels_pb(&test_labels, &lblen);
    pc_format_opts o = base_opts();
    o.extra = lb;
    o.extra_len = lblen;
    pc_batch *b;
    pc_jfr_stats st;
    pc_error e = {0};
    CHECK_EQ_INT(decode(&rec, &o, &b, &st, &e), 0);
    if (!b) goto out;
    const pc_dictionary *d = b->req->dictionary;
    const pc_scope_profiles *sp = b->req->resource_profiles[0]->scope_profiles[0];
    /* cpu, wall, 2 x in-TLAB, 2 x outside, 2 x sample, live, 2 x mutex, 2 x block, 2 x malloc */
    CHECK_EQ_INT(sp->n_profiles, 15);
    CHECK_EQ_INT(st.profiles, 15);
    const pc_profile *cpu = sp->profiles[0];
    CHECK_STR(pc_dict_str(d, cpu->sample_type->type_strindex), "cpu");
    CHECK_STR(
        attr_str(d, cpu->attribute_indices, cpu->n_attribute_indices, "pyroscope.profile.name"),
        "process_cpu");
    CHECK_STR(attr_str(d, cpu->attribute_indices, cpu->n_attribute_indices, "pyroscope.jfr_event"),
              "wall");
    CHECK_STR(attr_str(d, cpu->attribute_indices, cpu->n_attribute_indices, "jfr.event.type"),
              "jdk.ExecutionSample,profiler.WallClockSample");
    CHECK_EQ_INT(cpu->period, 0); /* not set, as Pyroscope */
    CHECK_EQ_INT((int64_t)cpu->time_unix_nano, o.time_ns);
    CHECK_EQ_INT((int64_t)cpu->duration_nano, o.duration_ns);
    const pc_profile *malloc_objs = sp->profiles[13];
    CHECK_STR(pc_dict_str(d, malloc_objs->sample_type->type_strindex), "malloc_objects");
    CHECK(malloc_objs->period_type == NULL);
    CHECK_STR(attr_str(d, sp->profiles[11]->attribute_indices,
                       sp->profiles[11]->n_attribute_indices, "pyroscope.profile.name"),
              "block");
    /* frames dropped: stack 5 has a method whose class is missing and a missing method */
    CHECK_EQ_INT(st.frames_dropped, 2);
    CHECK_EQ_INT(st.truncated_stacks, 1);
    /* one pprof per Pyroscope profile: nine, six of them with two sample types */
    int n[4] = {0};
    pc_batch_to_pprof(b, count_pprofs, n);
    CHECK_EQ_INT(n[0], 9);
    CHECK_EQ_INT(n[2], 6);
    CHECK_EQ_INT(n[1], 3);
    pc_batch_unref(b);

    /* a JDK recording has no `event` setting: no pyroscope.jfr_event attribute */
    wb jrec = {0};
    write_chunk(&jdk_chunk, &jrec);
    o = base_opts();
    CHECK_EQ_INT(decode(&jrec, &o, &b, &st, &e), 0);
    if (b) {
        const pc_profile *p = b->req->resource_profiles[0]->scope_profiles[0]->profiles[0];
        CHECK(!attr_str(b->req->dictionary, p->attribute_indices, p->n_attribute_indices,
                        "pyroscope.jfr_event"));
        CHECK_STR(attr_str(b->req->dictionary, p->attribute_indices, p->n_attribute_indices,
                           "jfr.event.type"),
                  "jdk.ExecutionSample");
        pc_batch_unref(b);
    }
    wb_free(&jrec);

    /* nothing but an empty body: no chunks, no profiles, no error (Pyroscope: 200) */
    wb empty = {0};
    CHECK_EQ_INT(decode(&empty, &o, &b, &st, &e), 0);
    CHECK(b && b->req->n_resource_profiles == 0);
    if (b) pc_batch_unref(b);
out:
    free(lb);
    wb_free(&rec);
}

/* The allocations of a decode are all given back: the batch's arena until pc_batch_end_budget,
 * every table at the end. */
static void test_budget(void)
{
    wb rec = {0};
    write_chunk(&ap_chunk, &rec);
    write_chunk(&jdk_chunk, &rec);
    pc_format_opts o = base_opts();
    pc_budget bud;
    pc_batch *b;
    pc_jfr_stats st;
    pc_error e = {0};

    pc_budget_init(&bud, 64u << 20);
    o.budget = &bud;
    CHECK_EQ_INT(decode(&rec, &o, &b, &st, &e), 0);
    CHECK(bud.used > 0);
    pc_batch_end_budget(b);
    CHECK_EQ_INT(bud.used, 0);
    pc_batch_unref(b);
    pc_budget_release(&bud);

    /* too small for the first reservation */
    pc_budget_init(&bud, 1000);
    CHECK_EQ_INT(decode(&rec, &o, &b, &st, &e), PC_E2BIG);
    CHECK(b == NULL);
    CHECK_EQ_INT(bud.state, PC_E2BIG);
    CHECK_CONTAINS(e.msg, "decode budget");
    pc_budget_release(&bud);
    wb_free(&rec);
}

/* ---- refusals ---- */

static void expect_refused(const wb *rec, const pc_format_opts *o, int code, const char *msg)
{
    pc_batch *b;
    pc_jfr_stats st;
    pc_error e = {0};
    int rc = decode(rec, o, &b, &st, &e);
    CHECK_EQ_INT(rc, code);
    CHECK(b == NULL);
    CHECK_CONTAINS(e.msg, msg);
    if (b) pc_batch_unref(b);
}

static void test_truncated(void)
{
    wb rec = {0};
    write_chunk(&ap_chunk, &rec);
    size_t one = rec.len;
    write_chunk(&jdk_chunk, &rec);
    pc_format_opts o = base_opts();
    pc_batch *b;
    pc_jfr_stats st;
    pc_error e = {0};
    int refused = 0;
    /* every cut: inside a chunk refused naming an offset; at the boundary the first chunk */
    for (size_t cut = 1; cut < rec.len; cut++) {
        wb part = {.p = rec.p, .len = cut};
        int rc = decode(&part, &o, &b, &st, &e);
        if (cut == one) {
            CHECK_EQ_INT(rc, 0);
            CHECK_EQ_INT(st.chunks, 1);
        } else if (rc == PC_EBADMSG && strstr(e.msg, "offset ")) {
            refused++;
        }
        if (b) pc_batch_unref(b);
    }
    CHECK_EQ_INT(refused, rec.len - 2);
    /* the message of a cut chunk says what was expected */
    wb part = {.p = rec.p, .len = one + 30};
    char want[128];
    snprintf(want, sizeof want, "offset %zu: truncated chunk header: 68 bytes expected, 30 left",
             one);
    expect_refused(&part, &o, PC_EBADMSG, want);
    part.len = one + 500;
    snprintf(want, sizeof want, "offset %zu: chunk of ", one + 8);
    expect_refused(&part, &o, PC_EBADMSG, want);
    wb_free(&rec);
}

static void test_bad_header(void)
{
    wb rec = {0};
    write_chunk(&ap_chunk, &rec);
    size_t one = rec.len;
    write_chunk(&ap_chunk, &rec);
    pc_format_opts o = base_opts();
    char want[160];

    rec.p[3] = 1;
    expect_refused(&rec, &o, PC_EBADMSG, "offset 0: chunk magic 464c5201, expected 464c5200");
    rec.p[3] = 0;
    rec.p[one] = 'J'; /* the second chunk */
    snprintf(want, sizeof want, "offset %zu: chunk magic 4a4c5200", one);
    expect_refused(&rec, &o, PC_EBADMSG, want);
    rec.p[one] = 'F';

    wb bad = {0};
    wput(&bad, rec.p, one);
    bad.p[5] = 3; /* version 3.1 */
    expect_refused(&bad, &o, PC_EBADMSG, "offset 4: JFR version 3.1");
    bad.p[5] = 2;
    memset(bad.p + 16, 0, 16); /* both offsets 0: a chunk still being written */
    expect_refused(&bad, &o, PC_EBADMSG, "offset 16: chunk is unfinished");
    bad.len = 0;
    wput(&bad, rec.p, one);
    memset(bad.p + 16, 0, 8);
    bad.p[23] = 10; /* constant-pool offset 10: inside the header */
    expect_refused(&bad, &o, PC_EBADMSG, "offset 16: constant-pool offset 10 outside the chunk");
    bad.len = 0;
    wput(&bad, rec.p, one);
    memset(bad.p + 8, 0, 8); /* size 0 */
    expect_refused(&bad, &o, PC_EBADMSG, "offset 8: chunk size 0 is less than its 68-byte header");
    /* the metadata offset on an event, the checkpoint offset on the metadata */
    bad.len = 0;
    wput(&bad, rec.p, one);
    uint64_t meta = 0, cp = 0;
    for (int i = 0; i < 8; i++) {
        cp = cp << 8 | bad.p[16 + i];
        meta = meta << 8 | bad.p[24 + i];
    }
    for (int i = 0; i < 8; i++)
        bad.p[16 + i] = (uint8_t)(meta >> (56 - 8 * i));
    snprintf(want, sizeof want,
             "offset %" PRIu64 ": the checkpoint chain leads to a record of type 0", meta);
    expect_refused(&bad, &o, PC_EBADMSG, want);
    for (int i = 0; i < 8; i++)
        bad.p[24 + i] = (uint8_t)(cp >> (56 - 8 * i));
    snprintf(want, sizeof want,
             "offset %" PRIu64 ": the header's metadata offset points at a record of type 1", cp);
    expect_refused(&bad, &o, PC_EBADMSG, want);
    wb_free(&bad);
    wb_free(&rec);
}

/* A chunk of the async-profiler layout with a metadata record and the pools of pools (already
 * written by the caller into w), for the refusals. */
static void mini_begin(jw *w)
{
    jw_begin(w, ap_layout, NCLS(ap_layout), 20, SE_UTF8, 1000000000ULL);
    jw_metadata(w, 5);
}

static void mini_symbols(jw *w, wb *p, const char *s)
{
    nvs x = {.v = {{.name = "string", .s = s, .enc = SE_UTF8}}, .n = 1};
    wvar(p, tid(w, "jdk.types.Symbol"));
    wvar(p, 1);
    wvar(p, 1);
    w_struct(w, p, "jdk.types.Symbol", &x, 0);
}

static void test_checkpoint_chain(void)
{
    pc_format_opts o = base_opts();
    wb rec = {0}, p = {0};
    jw w;
    char want[200];

    /* a delta that leads before the first record: into the header */
    mini_begin(&w);
    mini_symbols(&w, &p, "a");
    jw_checkpoint(&w, &p, 1, 0, 5);
    size_t cp2 = w.b.len;
    w.force = true;
    w.force_delta = -(int64_t)(cp2 - 10);
    jw_checkpoint(&w, &p, 1, 0, 5);
    size_t delta_at = w.delta_at;
    jw_end(&w, &rec);
    snprintf(want, sizeof want,
             "offset %zu: checkpoint delta %" PRId64
             " does not lead back to an earlier record of the chunk (offsets 68 to %zu)",
             delta_at, -(int64_t)(cp2 - 10), cp2 - 1);
    expect_refused(&rec, &o, PC_EBADMSG, want);
    rec.len = 0;

    /* a delta past the start of the input */
    mini_begin(&w);
    w.force = true;
    w.force_delta = -((int64_t)1 << 40);
    jw_checkpoint(&w, &p, 1, 0, 5);
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_EBADMSG, "does not lead back to an earlier record");
    rec.len = 0;

    /* a cycle: the first checkpoint's delta points forward at the second, which points back */
    mini_begin(&w);
    w.force = true;
    w.force_delta = 0; /* patched below */
    jw_checkpoint(&w, &p, 1, 0, 5);
    size_t first = w.last_cp, first_delta = w.delta_at;
    jw_checkpoint(&w, &p, 1, 0, 5);
    size_t second = w.last_cp;
    wb patch = {0};
    wvarw(&patch, (uint64_t)(second - first), 9);
    memcpy(w.b.p + first_delta, patch.p, 9);
    wb_free(&patch);
    jw_end(&w, &rec);
    snprintf(want, sizeof want, "offset %zu: checkpoint delta %zu does not lead back", first_delta,
             second - first);
    expect_refused(&rec, &o, PC_EBADMSG, want);
    rec.len = 0;

    /* a delta of the chunk itself: points at itself is delta 0, the end of the chain; a
     * string-pool entry pointing at itself is refused when read */
    p.len = 0;
    mini_begin(&w);
    wvar(&p, tid(&w, "java.lang.String"));
    wvar(&p, 1);
    wvar(&p, 5);
    wstr(&p, SE_POOL, "5");
    nvs x = {.v = {{.name = "string", .s = "5", .enc = SE_POOL}}, .n = 1};
    wvar(&p, tid(&w, "jdk.types.Symbol"));
    wvar(&p, 1);
    wvar(&p, 1);
    w_struct(&w, &p, "jdk.types.Symbol", &x, 0);
    wvar(&p, tid(&w, "java.lang.Class"));
    wvar(&p, 1);
    wvar(&p, 1);
    nvs c = {.v = {{.name = "name", .u = 1}}, .n = 1};
    w_struct(&w, &p, "java.lang.Class", &c, 0);
    wvar(&p, tid(&w, "jdk.types.Method"));
    wvar(&p, 1);
    wvar(&p, 1);
    nvs m = {.v = {{.name = "type", .u = 1}, {.name = "name", .u = 1}}, .n = 2};
    w_struct(&w, &p, "jdk.types.Method", &m, 0);
    tstack st = {1, 0, {{1, 1, 0, 0}}, 1};
    w_stack_pool(&w, &p, &st, 0, 1);
    tev ev = {PC_JFR_MALLOC, NULL, 1, 0, 10, 0, 0, 0, 0, 0, NULL, NULL, 0};
    w_event(&w, &ev);
    jw_checkpoint(&w, &p, 5, 1, 0);
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_EBADMSG, "a string-pool entry refers to the string pool again");
    wb_free(&p);
    wb_free(&rec);
}

static void test_limits(void)
{
    pc_format_opts o = base_opts();
    wb rec = {0}, p = {0};
    jw w;
    char want[200];

    /* a stack of 100,000 frames: over max_stack_depth (8192 by default) */
    mini_begin(&w);
    wvar(&p, tid(&w, "jdk.types.StackTrace"));
    wvar(&p, 1);
    wvar(&p, 1);
    w8(&p, 0);
    wvar(&p, 100000);
    for (int i = 0; i < 100000; i++) {
        wvar(&p, 1);
        wvar(&p, (uint64_t)i);
        wvar(&p, 0);
        wvar(&p, 0);
    }
    mini_symbols(&w, &p, "deep");
    wvar(&p, tid(&w, "java.lang.Class"));
    wvar(&p, 1);
    wvar(&p, 1);
    nvs c = {.v = {{.name = "name", .u = 1}}, .n = 1};
    w_struct(&w, &p, "java.lang.Class", &c, 0);
    wvar(&p, tid(&w, "jdk.types.Method"));
    wvar(&p, 1);
    wvar(&p, 1);
    nvs m = {.v = {{.name = "type", .u = 1}, {.name = "name", .u = 1}}, .n = 2};
    w_struct(&w, &p, "jdk.types.Method", &m, 0);
    tev ev = {PC_JFR_MALLOC, NULL, 1, 0, 10, 0, 0, 0, 0, 0, NULL, NULL, 0};
    w_event(&w, &ev);
    jw_checkpoint(&w, &p, 4, 1, 0);
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_E2BIG,
                   "stack trace of 100000 frames, more than 8192 (limit jfr.max_stack_depth)");
    o.jfr.max_stack_depth = 100000; /* within the limit it decodes, every frame kept */
    pc_batch *b;
    pc_jfr_stats st;
    pc_error e = {0};
    CHECK_EQ_INT(decode(&rec, &o, &b, &st, &e), 0);
    if (b) {
        const pc_dictionary *d = b->req->dictionary;
        const pc_profile *pr = b->req->resource_profiles[0]->scope_profiles[0]->profiles[0];
        CHECK_EQ_INT(d->stack_table[pr->samples[0]->stack_index]->n_location_indices, 100000);
        pc_batch_unref(b);
    }

    /* metadata over its caps, more pool entries or chunks than allowed */
    o.jfr.max_metadata_strings = 10;
    expect_refused(&rec, &o, PC_E2BIG, "more than 10 (limit jfr.max_metadata_strings)");
    o.jfr.max_metadata_strings = 0;
    o.jfr.max_metadata_elements = 50;
    expect_refused(&rec, &o, PC_E2BIG,
                   "metadata has more than 50 elements (limit jfr.max_metadata_elements)");
    o.jfr.max_metadata_elements = 0;
    o.jfr.max_pool_entries = 3;
    expect_refused(&rec, &o, PC_E2BIG,
                   "more than 3 constant-pool entries (limit jfr.max_pool_entries)");
    o.jfr.max_pool_entries = 0;
    size_t one = rec.len;
    wput(&rec, rec.p, one); /* two chunks */
    o.jfr.max_chunks = 1;
    snprintf(want, sizeof want,
             "offset %zu: the recording has more than 1 chunks (limit jfr.max_chunks)", one);
    expect_refused(&rec, &o, PC_E2BIG, want);

    /* a budget that allows the first reservation but not what the decode then holds */
    pc_budget bud;
    rec.len = one;
    o.jfr.max_chunks = 0;
    pc_budget_init(&bud, 65536 + 2 * rec.len + 4096);
    o.budget = &bud;
    expect_refused(&rec, &o, PC_E2BIG, "decode budget");
    CHECK_EQ_INT(bud.state, PC_E2BIG);
    CHECK_EQ_INT(bud.used, 0);
    pc_budget_release(&bud);
    wb_free(&p);
    wb_free(&rec);
}

static void test_bad_strings(void)
{
    pc_format_opts o = base_opts();
    wb rec = {0}, p = {0};
    jw w;
    char want[200];

    /* a symbol claiming 4 GB */
    mini_begin(&w);
    wvar(&p, tid(&w, "jdk.types.Symbol"));
    wvar(&p, 1);
    wvar(&p, 1);
    size_t str_in_pools = p.len;
    w8(&p, SE_UTF8);
    wvar(&p, 0xFFFFFFFFu);
    wput(&p, "short", 5);
    /* the checkpoint body: type, start, duration, delta, flags, count, then the pools */
    size_t cp = w.b.len;
    jw_checkpoint(&w, &p, 1, 1, 5);
    size_t at = cp + 5 + 1 + 2 + 1 + 1 + 1 + 1 + str_in_pools;
    jw_end(&w, &rec);
    snprintf(want, sizeof want,
             "offset %zu: string of 4294967295 bytes runs past the end of its record", at);
    expect_refused(&rec, &o, PC_EBADMSG, want);
    rec.len = 0;
    p.len = 0;

    /* and in UTF-16 units; then an unknown encoding */
    mini_begin(&w);
    wvar(&p, tid(&w, "jdk.types.Symbol"));
    wvar(&p, 1);
    wvar(&p, 1);
    w8(&p, SE_UTF16);
    wvar(&p, 0xFFFFFFFFu);
    jw_checkpoint(&w, &p, 1, 1, 5);
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_EBADMSG, "string of 4294967295 UTF-16 units runs past the end");
    rec.len = 0;
    p.len = 0;
    mini_begin(&w);
    wvar(&p, tid(&w, "jdk.types.Symbol"));
    wvar(&p, 1);
    wvar(&p, 1);
    w8(&p, 9);
    jw_checkpoint(&w, &p, 1, 1, 5);
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_EBADMSG, "unknown string encoding 9 (0 to 5 expected)");
    wb_free(&p);
    wb_free(&rec);
}

static void test_bad_records(void)
{
    pc_format_opts o = base_opts();
    wb rec = {0}, p = {0};
    jw w;
    char want[200];

    /* a record of size 0 among the events */
    mini_begin(&w);
    size_t zero = w.b.len;
    w8(&w.b, 0);
    jw_checkpoint(&w, &p, 0, 1, 5);
    jw_end(&w, &rec);
    snprintf(want, sizeof want, "offset %zu: record of size 0", zero);
    expect_refused(&rec, &o, PC_EBADMSG, want);
    rec.len = 0;

    /* a record that runs past the chunk */
    mini_begin(&w);
    size_t big = w.b.len;
    wvarw(&w.b, 1u << 20, 5);
    wvar(&w.b, 99);
    jw_checkpoint(&w, &p, 0, 1, 5);
    jw_end(&w, &rec);
    snprintf(want, sizeof want,
             "offset %zu: record of 1048576 bytes runs past the end of the chunk", big);
    expect_refused(&rec, &o, PC_EBADMSG, want);
    rec.len = 0;

    /* a pool of a type the metadata does not define */
    mini_begin(&w);
    wvar(&p, 9999);
    wvar(&p, 1);
    wvar(&p, 1);
    jw_checkpoint(&w, &p, 1, 1, 5);
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_EBADMSG,
                   "constant pool of type id 9999, which the metadata does not define");
    rec.len = 0;
    p.len = 0;

    /* an array claiming more elements than bytes */
    mini_begin(&w);
    wvar(&p, tid(&w, "jdk.types.StackTrace"));
    wvar(&p, 1);
    wvar(&p, 1);
    w8(&p, 0);
    wvar(&p, 1000000);
    jw_checkpoint(&w, &p, 1, 1, 5);
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_EBADMSG, "array of 1000000 elements, only");
    rec.len = 0;
    p.len = 0;

    /* labels that are not a LabelsSnapshot */
    write_chunk(&ap_chunk, &rec);
    static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0x01};
    o.extra = junk;
    o.extra_len = sizeof junk;
    expect_refused(&rec, &o, PC_EBADMSG, "labels: invalid LabelsSnapshot");
    tlabels bad = test_labels;
    bad.strings[0].s = "bad\xff";
    size_t lblen;
    uint8_t *lb = labels_pb(&bad, &lblen);
    o.extra = lb;
    o.extra_len = lblen;
    expect_refused(&rec, &o, PC_EBADMSG, "labels: invalid LabelsSnapshot");
    free(lb);
    wb_free(&p);
    wb_free(&rec);
}

/* Metadata shapes: a duplicate id, nesting too deep, values nested in themselves, and thousands of
 * fields that read nothing. */
static void test_bad_metadata(void)
{
    pc_format_opts o = base_opts();
    wb rec = {0}, p = {0};
    jw w;

    /* two classes with one id */
    jw_begin(&w, ap_layout, NCLS(ap_layout), 20, SE_UTF8, 1000000000ULL);
    w.stride = 0; /* every class gets id 20 */
    jw_metadata(&w, 5);
    jw_checkpoint(&w, &p, 0, 1, 5);
    rec.len = 0;
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_EBADMSG, "metadata defines type id 20 twice");
    rec.len = 0;

    /* elements nested 20 deep */
    jw_begin(&w, ap_layout, NCLS(ap_layout), 20, SE_UTF8, 1000000000ULL);
    wb body = {0};
    wvar(&body, 0);
    for (int i = 0; i < 3; i++)
        wvar(&body, 0);
    wvar(&body, 1);
    wstr(&body, SE_UTF8, "x");
    for (int i = 0; i < 20; i++) {
        wvar(&body, 0); /* name "x" */
        wvar(&body, 0); /* no attributes */
        wvar(&body, i < 19 ? 1 : 0);
    }
    w.meta_off = w.b.len;
    jw_record(&w, &body, 5);
    wb_free(&body);
    jw_checkpoint(&w, &p, 0, 1, 5);
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_EBADMSG, "metadata elements nested deeper than 16 levels");
    rec.len = 0;

    /* a value that contains itself */
    mclass *loop = calloc((size_t)NCLS(ap_layout) + 2, sizeof(mclass));
    memcpy(loop, ap_layout, sizeof ap_layout);
    loop[NCLS(ap_layout)] = (mclass){"test.Loop", NULL, {{"next", "test.Loop", 0, 0}}};
    jw_begin(&w, loop, NCLS(ap_layout) + 1, 20, SE_UTF8, 1000000000ULL);
    jw_metadata(&w, 5);
    wvar(&p, tid(&w, "test.Loop"));
    wvar(&p, 1);
    wvar(&p, 1);
    jw_checkpoint(&w, &p, 1, 1, 5);
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_EBADMSG,
                   "values nested deeper than 32 levels (in type \"test.Loop\")");
    rec.len = 0;
    p.len = 0;

    /* 100,000 fields that read nothing in a struct with one that does: each value costs 100,001
     * steps for 2 bytes, so the steps (64 per input byte) run out long before the time does */
    loop[NCLS(ap_layout)] = (mclass){"test.Empty", NULL, {{0}}};
    loop[NCLS(ap_layout) + 1] =
        (mclass){"test.Wide", NULL, {{"x", "int", 0, 0}, {"e", "test.Empty", 0, 0}}};
    wide_class = "test.Wide";
    wide_repeat = 99999;
    jw_begin(&w, loop, NCLS(ap_layout) + 2, 20, SE_UTF8, 1000000000ULL);
    jw_metadata(&w, 5);
    wvar(&p, tid(&w, "test.Wide"));
    wvar(&p, 3000);
    for (int i = 0; i < 3000; i++) {
        wvar(&p, (uint64_t)i + 1);
        wvar(&p, 1);
    }
    jw_checkpoint(&w, &p, 1, 1, 5);
    jw_end(&w, &rec);
    expect_refused(&rec, &o, PC_EBADMSG, "decoding takes more than");
    wide_class = NULL;
    free(loop);
    wb_free(&p);
    wb_free(&rec);
}

/* Pools are per chunk (Pyroscope's parser resets them; each chunk is self-contained, §2.1): an
 * event of the second chunk whose stack trace was written only in the first (a monitor wait
 * across a rotation) has no stack and is dropped, also when the second chunk continues the first
 * (not final, starting where it ended) and the event before it had the same key. */
static void rotation_chunk0(jw *w, wb *rec, uint64_t start, uint16_t flags)
{
    wb p = {0};
    mini_begin(w);
    w->start_ns = start;
    w->flags = flags;
    tev ev = {PC_JFR_MALLOC, NULL, 77, 0, 4096, 0, 0, 0, 0, 0, NULL, NULL, 0};
    w_event(w, &ev);
    mini_symbols(w, &p, "Rotated");
    wvar(&p, tid(w, "java.lang.Class"));
    wvar(&p, 1);
    wvar(&p, 1);
    nvs c = {.v = {{.name = "name", .u = 1}}, .n = 1};
    w_struct(w, &p, "java.lang.Class", &c, 0);
    wvar(&p, tid(w, "jdk.types.Method"));
    wvar(&p, 1);
    wvar(&p, 1);
    nvs m = {.v = {{.name = "type", .u = 1}, {.name = "name", .u = 1}}, .n = 2};
    w_struct(w, &p, "jdk.types.Method", &m, 0);
    tstack st[2] = {{77, 0, {{1, 42, 0, 0}}, 1}, {78, 0, {{1, 43, 0, 0}}, 1}};
    w_stack_pool(w, &p, st, 0, 2);
    jw_checkpoint(w, &p, 4, 1, 0);
    jw_end(w, rec);
    wb_free(&p);
}

static void test_rotation(void)
{
    static const struct {
        uint64_t start1;
        uint16_t flags0;
        int continues;
    } cases[] = {
        {1700000005000000000ULL, 1, 1}, /* continues the first */
        {1700000005000000000ULL, 3, 0}, /* the first chunk ends its recording */
        {1700000006000000000ULL, 1, 0}, /* a gap: another recording */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wb rec = {0}, p = {0};
        jw w;
        rotation_chunk0(&w, &rec, 1700000000000000000ULL, cases[i].flags0);
        /* the second chunk: other type ids, a pool without stack traces */
        jw_begin(&w, ap_layout, NCLS(ap_layout), 300, SE_UTF16, 1000000000ULL);
        w.start_ns = cases[i].start1;
        jw_metadata(&w, 4);
        tev same = {PC_JFR_MALLOC, NULL, 77, 0, 4096, 0, 0, 0, 0, 0, NULL, NULL, 0};
        tev other = {PC_JFR_MALLOC, NULL, 78, 0, 100, 0, 0, 0, 0, 0, NULL, NULL, 0};
        w_event(&w, &same);
        w_event(&w, &other);
        mini_symbols(&w, &p, "Other");
        jw_checkpoint(&w, &p, 1, 1, 0);
        jw_end(&w, &rec);
        pc_format_opts o = base_opts();
        pc_batch *b;
        pc_jfr_stats st;
        pc_error e = {0};
        CHECK_EQ_INT(decode(&rec, &o, &b, &st, &e), 0);
        CHECK_EQ_INT(st.stacks_not_found, 2);
        if (b) {
            char *got = actual_lines(b), want[256];
            snprintf(want, sizeof want,
                     "memory:malloc_bytes:bytes::|Rotated.Rotated@42#| %d\n"
                     "memory:malloc_objects:count::|Rotated.Rotated@42#| %d\n",
                     4096, 1);
            CHECK_STR(got, want);
            free(got);
            pc_batch_unref(b);
        }
        wb_free(&p);
        wb_free(&rec);
    }
}

/* TEST_JFR_SEEDS=dir: write this file's recordings as fuzz_jfr inputs (tests/fuzz/README.md):
 * an options byte, the labels when bit 0 is set, the recording. */
static void write_seed(const char *dir, const char *name, uint8_t opt, const tlabels *l,
                       const tchunk *const *cs, int n)
{
    wb out = {0}, rec = {0};
    w8(&out, opt);
    if (l) {
        size_t len;
        uint8_t *lb = labels_pb(l, &len);
        w8(&out, (uint8_t)len);
        w8(&out, (uint8_t)(len >> 8));
        wput(&out, lb, len);
        free(lb);
    }
    for (int i = 0; i < n; i++)
        write_chunk(cs[i], &rec);
    wput(&out, rec.p, rec.len);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(out.p, 1, out.len, f);
        fclose(f);
    }
    wb_free(&out);
    wb_free(&rec);
}

static void write_seeds(const char *dir)
{
    const tchunk *ap[] = {&ap_chunk}, *jdk[] = {&jdk_chunk}, *both[] = {&jdk_chunk, &ap_chunk};
    write_seed(dir, "async-profiler-labels", 1, &test_labels, ap, 1);
    write_seed(dir, "jdk-split-pools", 0, NULL, jdk, 1);
    write_seed(dir, "two-chunks-small-limits", 2, NULL, both, 2);
}

int main(void)
{
    const char *seeds = getenv("TEST_JFR_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        return 0;
    }
    RUN(test_async_profiler_recording);
    RUN(test_jdk_recording);
    RUN(test_several_chunks);
    RUN(test_rotation);
    RUN(test_details);
    RUN(test_budget);
    RUN(test_truncated);
    RUN(test_bad_header);
    RUN(test_checkpoint_chain);
    RUN(test_limits);
    RUN(test_bad_strings);
    RUN(test_bad_records);
    RUN(test_bad_metadata);
    return check_report();
}
