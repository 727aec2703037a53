/* Pyroscope's legacy /ingest formats: trie, tree, speedscope (docs/formats.md has the layouts and
 * where they were learnt). Each decoder runs twice over its input: a first pass checks everything
 * and counts what the batch will hold, in time linear in the input and without building anything;
 * the count is reserved from the request's budget; a second pass builds the batch through the
 * stacks builder (folded.h). Scratch memory is charged to the budget as it is taken. */
#include "formats/legacy.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hash.h"
#include "base/alloc.h"
#include "base/utf8.h"
#include "formats/folded.h"
#include "pdata/dict.h"
#include "pdata/json.h"

/* ---- scratch memory, charged to the request's budget ---- */

/* n more bytes for *p (now old bytes), reserved and charged; false when the budget refuses them. */
static bool scratch_grow(pc_budget *b, void **p, size_t old, size_t n)
{
    if (b && pc_budget_reserve(b, n - old, "decode scratch") < 0) return false;
    pc_budget_charge(b, n - old);
    *p = pc_xrealloc(*p, n);
    return true;
}

static void scratch_free(pc_budget *b, void *p, size_t n)
{
    if (!p) return;
    pc_budget_uncharge(b, n);
    free(p);
}

/* The budget refused: its state says why (PC_E2BIG over the request's limit, PC_EAGAIN no room
 * now among the decodes in flight). */
static int over_budget(const pc_format_opts *o, const char *fmt, pc_error *e)
{
    const pc_budget *b = o->budget;
    return pc_error_set(e, b && b->state == PC_EAGAIN ? PC_EAGAIN : PC_E2BIG,
                        "%s: %s: over the decode budget", fmt,
                        b && b->what[0] ? b->what : "decoded request");
}

/* v x m into *out; false when it does not fit an int64 (m 0 or 1: v unchanged). */
static bool scale(int64_t v, int64_t m, int64_t *out)
{
    if (m <= 1) {
        *out = v;
        return true;
    }
    return !__builtin_mul_overflow(v, m, out);
}

/* ---------------------------------------------------------------------------------------------
 * trie and tree: nodes in pre-order, each uvarint name length, name bytes, uvarint value, uvarint
 * child count. A node's key is the concatenation of the names from its tree's root (tree: joined
 * by ';', the root left out); the key is a collapsed stack, frames split at ';'.
 * ------------------------------------------------------------------------------------------- */

/* One node whose children are still being read. */
typedef struct level {
    uint64_t left;      /* children still to come */
    size_t key_len;     /* the path as it was before this node */
    size_t nframes;     /* completed frames before this node */
    size_t frame_start; /* where the unfinished frame began before this node */
} level;

typedef struct twalk {
    const pc_format_opts *o;
    bool tree;
    const char *fmt;
    const uint8_t *p;
    size_t len, pos;
    int64_t period;
    level *lv;
    size_t nlv, caplv;
    /* the path to the current node: key length, frames completed (non-empty, ';'-terminated),
     * and where the unfinished last frame begins */
    size_t key_len, nframes, frame_start;
    /* pass 1 counts */
    size_t samples, stack_frames, frames, frame_bytes, max_nframes, max_stack;
    /* pass 2 (ib set): the key bytes, completed frames' locations root first, a stack */
    pc_stacks_builder *ib;
    char *key;
    int32_t *locs, *stack;
} twalk;

/* Go's binary.ReadUvarint: at most 10 bytes, the 10th at most 1. */
static int uvarint(twalk *w, uint64_t *v, const char *what, size_t node, pc_error *e)
{
    uint64_t x = 0;
    for (unsigned i = 0, s = 0; i < 10; i++, s += 7) {
        if (w->pos >= w->len)
            return pc_error_set(e, PC_EBADMSG, "%s: node at offset %zu: %s: truncated varint",
                                w->fmt, node, what);
        uint8_t b = w->p[w->pos++];
        if (b < 0x80) {
            if (i == 9 && b > 1) break;
            *v = x | (uint64_t)b << s;
            return 0;
        }
        x |= (uint64_t)(b & 0x7f) << s;
    }
    return pc_error_set(e, PC_EBADMSG, "%s: node at offset %zu: %s: varint overflows 64 bits",
                        w->fmt, node, what);
}

/* A frame name the model can hold: UTF-8 (docs/limits.md), and no NUL byte (strings are C strings
 * in the model: "a\0b" would become a second "a"). */
static int check_name(const twalk *w, const char *s, size_t n, size_t node, pc_error *e)
{
    if (!pc_utf8_valid(s, n))
        return pc_error_set(e, PC_EBADMSG, "%s: node at offset %zu: frame name is not valid UTF-8",
                            w->fmt, node);
    if (memchr(s, 0, n))
        return pc_error_set(e, PC_EBADMSG, "%s: node at offset %zu: frame name holds a NUL byte",
                            w->fmt, node);
    return 0;
}

/* A frame key[start, end) is complete. */
static int frame_done(twalk *w, size_t start, size_t end, size_t node, pc_error *e)
{
    if (end == start) return 0; /* empty frames are skipped, as in collapsed stacks */
    if (!w->ib) {
        w->frames++;
        w->frame_bytes += end - start;
    } else {
        int rc = check_name(w, w->key + start, end - start, node, e);
        if (rc < 0) return rc;
        w->locs[w->nframes] = pc_stacks_frame(w->ib, w->key + start, end - start);
    }
    if (++w->nframes > w->max_nframes) w->max_nframes = w->nframes;
    return 0;
}

/* Add s[0..n) to the path, completing a frame at each ';'. */
static int append(twalk *w, const uint8_t *s, size_t n, size_t node, pc_error *e)
{
    size_t base = w->key_len;
    if (w->key) memcpy(w->key + base, s, n);
    w->key_len += n;
    for (const uint8_t *q = s, *end = s + n; (q = memchr(q, ';', (size_t)(end - q))); q++) {
        size_t at = base + (size_t)(q - s);
        int rc = frame_done(w, w->frame_start, at, node, e);
        if (rc < 0) return rc;
        w->frame_start = at + 1;
    }
    return 0;
}

/* The node just read has a value: one sample, the path's frames and the unfinished one. */
static int emit(twalk *w, uint64_t value, size_t node, pc_error *e)
{
    int64_t v;
    if (value > INT64_MAX)
        return pc_error_set(e, PC_EBADMSG,
                            "%s: node at offset %zu: value %llu overflows a 64-bit value", w->fmt,
                            node, (unsigned long long)value);
    if (!scale((int64_t)value, w->period, &v))
        return pc_error_set(e, PC_EBADMSG,
                            "%s: node at offset %zu: value %llu x %lld ns (sampleRate) overflows a "
                            "64-bit value",
                            w->fmt, node, (unsigned long long)value, (long long)w->period);
    size_t tail = w->key_len - w->frame_start, depth = w->nframes + (tail > 0);
    if (!w->ib) {
        w->samples++;
        w->stack_frames += depth;
        if (tail) w->frames++, w->frame_bytes += tail;
        if (depth > w->max_stack) w->max_stack = depth;
        return 0;
    }
    size_t n = 0;
    if (tail) {
        int rc = check_name(w, w->key + w->frame_start, tail, node, e);
        if (rc < 0) return rc;
        w->stack[n++] = pc_stacks_frame(w->ib, w->key + w->frame_start, tail);
    }
    for (size_t i = w->nframes; i-- > 0;) /* leaf first */
        w->stack[n++] = w->locs[i];
    pc_stacks_sample(w->ib, pc_dict_stack(w->ib->db, w->stack, n), v);
    return 0;
}

/* One pass over the nodes: checks and counts (w->ib NULL), or builds. */
static int walk(twalk *w, pc_error *e)
{
    pc_budget *budget = w->o->budget;
    w->pos = w->nlv = w->key_len = w->nframes = w->frame_start = 0;
    if (w->tree && w->len == 0) return pc_error_set(e, PC_EBADMSG, "tree: empty body, no root");
    while (w->pos < w->len || w->nlv > 0) {
        if (!pc_budget_ok(budget)) return over_budget(w->o, w->fmt, e);
        size_t node = w->pos;
        uint64_t name_len, value, children;
        int rc = uvarint(w, &name_len, "name length", node, e);
        if (rc < 0) return rc;
        if (name_len > w->len - w->pos)
            return pc_error_set(e, PC_EBADMSG,
                                "%s: node at offset %zu: name of %llu bytes runs past the end of "
                                "the body (%zu bytes left)",
                                w->fmt, node, (unsigned long long)name_len, w->len - w->pos);
        const uint8_t *name = w->p + w->pos;
        w->pos += name_len;
        if ((rc = uvarint(w, &value, "value", node, e)) < 0 ||
            (rc = uvarint(w, &children, "child count", node, e)) < 0)
            return rc;
        /* a child takes at least 3 bytes */
        if (children > (w->len - w->pos) / 3)
            return pc_error_set(e, PC_EBADMSG,
                                "%s: node at offset %zu: %llu children cannot fit in the %zu bytes "
                                "left",
                                w->fmt, node, (unsigned long long)children, w->len - w->pos);
        level saved = {children, w->key_len, w->nframes, w->frame_start};
        if (w->tree && w->nlv == 0) {
            name_len = value = 0; /* the root stands for the empty stack: Pyroscope drops it */
        } else if (w->tree && (rc = append(w, (const uint8_t *)";", 1, node, e)) < 0) {
            return rc;
        }
        if ((rc = append(w, name, (size_t)name_len, node, e)) < 0) return rc;
        if (value && (rc = emit(w, value, node, e)) < 0) return rc;
        if (children) {
            if (w->nlv == w->caplv) {
                size_t cap = w->caplv ? 2 * w->caplv : 64;
                if (!scratch_grow(budget, (void **)&w->lv, w->caplv * sizeof(level),
                                  cap * sizeof(level)))
                    return over_budget(w->o, w->fmt, e);
                w->caplv = cap;
            }
            w->lv[w->nlv++] = saved;
            continue;
        }
        /* a leaf: back up to the nearest node with children still to come */
        w->key_len = saved.key_len, w->nframes = saved.nframes, w->frame_start = saved.frame_start;
        while (w->nlv > 0) {
            level *t = &w->lv[w->nlv - 1];
            if (--t->left > 0) break;
            w->key_len = t->key_len, w->nframes = t->nframes, w->frame_start = t->frame_start;
            w->nlv--;
        }
        if (w->tree && w->nlv == 0) break; /* one tree per body */
    }
    if (w->pos < w->len)
        return pc_error_set(e, PC_EBADMSG, "tree: %zu bytes after the end of the tree (offset %zu)",
                            w->len - w->pos, w->pos);
    return 0;
}

static int tree_to_batch(bool tree, const uint8_t *p, size_t len, const pc_format_opts *o,
                         pc_batch **out, pc_error *e)
{
    const char *fmt = tree ? "tree" : "trie";
    pc_stacks_builder ib = {0};
    twalk w = {.o = o, .tree = tree, .fmt = fmt, .p = p, .len = len};
    size_t key_cap = 0, locs_cap = 0, stack_cap = 0;
    int rc = pc_stacks_profile_begin(&ib, o->app, o->sample_rate, o->units, e);
    if (rc < 0) return rc;
    w.period = ib.period;
    if ((rc = walk(&w, e)) < 0) goto out; /* pass 1: check and count */
    key_cap = len + 1;
    locs_cap = (w.max_nframes + 1) * sizeof(int32_t);
    stack_cap = (w.max_stack + 1) * sizeof(int32_t);
    size_t est = pc_stacks_estimate(w.samples, w.stack_frames, w.frames, w.frame_bytes) + key_cap +
                 locs_cap + stack_cap;
    if ((rc = pc_stacks_begin(&ib, o, est, tree ? "decoded tree" : "decoded trie", e)) < 0)
        goto out;
    w.key = pc_xmalloc(key_cap);
    w.locs = pc_xmalloc(locs_cap);
    w.stack = pc_xmalloc(stack_cap);
    pc_budget_charge(o->budget, key_cap + locs_cap + stack_cap);
    if ((rc = pc_stacks_profile_begin(&ib, o->app, o->sample_rate, o->units, e)) < 0) goto out;
    w.ib = &ib;
    if ((rc = walk(&w, e)) < 0) goto out; /* pass 2: build */
    if (!pc_budget_ok(o->budget)) {
        rc = over_budget(o, fmt, e);
        goto out;
    }
    pc_stacks_profile_end(&ib, NULL, NULL, 0);
    *out = pc_stacks_finish(&ib);
out:
    if (rc < 0) pc_stacks_abort(&ib);
    scratch_free(o->budget, w.lv, w.caplv * sizeof(level));
    if (w.key) {
        pc_budget_uncharge(o->budget, key_cap + locs_cap + stack_cap);
        free(w.key), free(w.locs), free(w.stack);
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * speedscope: JSON (https://www.speedscope.app/file-format-schema.json), read as Go's
 * encoding/json reads it into Pyroscope's structs: member names match case-insensitively (the
 * last match wins), null is the zero value, any other type mismatch is an error. Profiles with
 * the same name, type, unit and startValue are merged; each (merged) profile becomes an OTLP
 * profile, its stacks summed in a call tree as Pyroscope's tree sums them.
 * ------------------------------------------------------------------------------------------- */

static const char SCHEMA[] = "https://www.speedscope.app/file-format-schema.json";

typedef struct ss_unit {
    const char *name;
    int64_t default_rate; /* the sampleRate used when the request's is 100 (the default) */
    int64_t precision;    /* values are multiplied by it before the sampleRate scaling */
    int64_t default_precision;
} ss_unit;

/* Pyroscope's units.go: time units keep two decimals (x 100) at a sampleRate of 100 per unit.
 * nanoseconds would need 100e9 Hz, which overflows Pyroscope's uint32 (it then zeroes every
 * value); here they are taken as nanoseconds as they are (x 1 at 1e9 Hz: a period of 1 ns). */
static const ss_unit ss_units[] = {
    {"nanoseconds", 1000000000LL, 100, 1},
    {"microseconds", 100000000LL, 100, 100},
    {"milliseconds", 100000LL, 100, 100},
    {"seconds", 100, 100, 100},
    {"none", 10000, 100, 100},
    {"bytes", 0, 1, 1},
};

/* A node of a profile's call tree: a frame under a parent. */
typedef struct ss_node {
    uint32_t parent, fid;
    uint32_t depth; /* frames with a name on the path from the root */
    int64_t value;  /* summed self value, scaled */
} ss_node;

typedef struct ss_prof {
    size_t index; /* in the file's profiles */
    const json_t *type, *name, *unit;
    double start;
    const json_t *events, *samples, *weights;
} ss_prof;

typedef struct ss_group {
    size_t first, n; /* in the sorted order */
    char *app;       /* the app name with the type suffix this profile gets */
    const ss_unit *unit;
    bool evented;
    int64_t rate, precision, period;
    size_t root, nodes_end; /* its call tree: nodes [root, nodes_end) */
} ss_group;

typedef struct ss {
    const pc_format_opts *o;
    pc_budget *budget;
    /* frames */
    size_t nframes;
    const json_t **fname; /* name strings (NULL: "") */
    int32_t *floc;        /* pass 2: location of each frame, 0 when not made yet */
    uint8_t *fused;
    /* profiles and their groups */
    ss_prof *profs;
    size_t nprofs;
    ss_prof **order; /* sorted by merge key, then by place in the file */
    ss_group *groups;
    size_t ngroups;
    /* the call trees: nodes and a hash of (parent, frame) -> node + 1 */
    ss_node *nodes;
    size_t nnodes, capnodes;
    uint32_t *slots;
    size_t nslots;
    /* counts of what the batch will hold */
    size_t samples, stack_frames, frames, frame_bytes, max_depth;
} ss;

/* The member key of obj as Go's encoding/json finds it (case-insensitive, last wins). */
static json_t *member(const json_t *obj, const char *key)
{
    json_t *found = NULL, *v;
    const char *k;
    json_object_foreach((json_t *)obj, k, v)
    {
        if (!strcasecmp(k, key)) found = v;
    }
    return found;
}

static const char *kind_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "a number";
    }
}

/* Member key of obj, which must be null/absent or of type t: *out gets it (NULL when
 * null/absent). */
static int typed(const json_t *obj, const char *key, json_type t, const char *path,
                 const json_t **out, pc_error *e)
{
    *out = NULL;
    if (!obj) return 0;
    json_t *v = member(obj, key);
    if (!v || json_is_null(v)) return 0;
    if (json_typeof(v) != t && !(t == JSON_REAL && json_is_number(v)))
        return pc_error_set(e, PC_EBADMSG, "speedscope: %s.%s: %s where %s belongs", path, key,
                            kind_name(v),
                            t == JSON_STRING  ? "a string"
                            : t == JSON_ARRAY ? "an array"
                            : t == JSON_REAL  ? "a number"
                                              : "an object");
    *out = v;
    return 0;
}

static double num(const json_t *v)
{
    return v ? json_number_value(v) : 0;
}

/* A JSON string equal to s (NULL: the empty string). */
static bool str_is(const json_t *v, const char *s)
{
    size_t n = strlen(s);
    return v ? json_string_length(v) == n && !memcmp(json_string_value(v), s, n) : n == 0;
}

static int str_cmp(const json_t *a, const json_t *b)
{
    size_t la = a ? json_string_length(a) : 0, lb = b ? json_string_length(b) : 0;
    int c = memcmp(a ? json_string_value(a) : "", b ? json_string_value(b) : "", la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

/* Text of a JSON string for a message or a C string (NULL: ""). */
static const char *str(const json_t *v)
{
    return v ? json_string_value(v) : "";
}

/* ---- the file's structure, checked as Go's decoder would ---- */

static int read_frames(ss *s, const json_t *root, pc_error *e)
{
    const json_t *shared, *frames;
    int rc;
    if ((rc = typed(root, "shared", JSON_OBJECT, "$", &shared, e)) < 0 ||
        (rc = typed(shared, "frames", JSON_ARRAY, "$.shared", &frames, e)) < 0)
        return rc;
    s->nframes = frames ? json_array_size(frames) : 0;
    if (s->nframes > INT32_MAX) return pc_error_set(e, PC_EBADMSG, "speedscope: too many frames");
    size_t n = s->nframes ? s->nframes : 1;
    if (!scratch_grow(s->budget, (void **)&s->fname, 0, n * sizeof(*s->fname)))
        return over_budget(s->o, "speedscope", e);
    for (size_t i = 0; i < s->nframes; i++) {
        const json_t *f = json_array_get(frames, i), *dummy;
        char path[64];
        snprintf(path, sizeof path, "$.shared.frames[%zu]", i);
        s->fname[i] = NULL;
        if (json_is_null(f)) continue;
        if (!json_is_object(f))
            return pc_error_set(e, PC_EBADMSG, "speedscope: %s: %s where an object belongs", path,
                                kind_name(f));
        if ((rc = typed(f, "name", JSON_STRING, path, &s->fname[i], e)) < 0 ||
            (rc = typed(f, "file", JSON_STRING, path, &dummy, e)) < 0 ||
            (rc = typed(f, "line", JSON_REAL, path, &dummy, e)) < 0 ||
            (rc = typed(f, "col", JSON_REAL, path, &dummy, e)) < 0)
            return rc;
    }
    return 0;
}

/* Every element of array a (which may be NULL) must be null or of type t. */
static int typed_elements(const json_t *a, json_type t, const char *path, pc_error *e)
{
    for (size_t i = 0; a && i < json_array_size(a); i++) {
        const json_t *v = json_array_get(a, i);
        if (json_is_null(v) || json_typeof(v) == t || (t == JSON_REAL && json_is_number(v)))
            continue;
        return pc_error_set(e, PC_EBADMSG, "speedscope: %s[%zu]: %s where %s belongs", path, i,
                            kind_name(v), t == JSON_REAL ? "a number" : "an array");
    }
    return 0;
}

static int read_profiles(ss *s, const json_t *root, pc_error *e)
{
    const json_t *profiles, *dummy;
    int rc;
    if ((rc = typed(root, "profiles", JSON_ARRAY, "$", &profiles, e)) < 0 ||
        (rc = typed(root, "name", JSON_STRING, "$", &dummy, e)) < 0 ||
        (rc = typed(root, "exporter", JSON_STRING, "$", &dummy, e)) < 0 ||
        (rc = typed(root, "activeProfileIndex", JSON_REAL, "$", &dummy, e)) < 0)
        return rc;
    s->nprofs = profiles ? json_array_size(profiles) : 0;
    size_t n = s->nprofs ? s->nprofs : 1;
    if (!scratch_grow(s->budget, (void **)&s->profs, 0, n * sizeof(ss_prof)) ||
        !scratch_grow(s->budget, (void **)&s->order, 0, n * sizeof(ss_prof *)))
        return over_budget(s->o, "speedscope", e);
    for (size_t i = 0; i < s->nprofs; i++) {
        const json_t *p = json_array_get(profiles, i), *start, *end;
        ss_prof *sp = &s->profs[i];
        memset(sp, 0, sizeof *sp);
        sp->index = i;
        s->order[i] = sp;
        char path[64], sub[96];
        snprintf(path, sizeof path, "$.profiles[%zu]", i);
        if (json_is_null(p)) continue;
        if (!json_is_object(p))
            return pc_error_set(e, PC_EBADMSG, "speedscope: %s: %s where an object belongs", path,
                                kind_name(p));
        if ((rc = typed(p, "type", JSON_STRING, path, &sp->type, e)) < 0 ||
            (rc = typed(p, "name", JSON_STRING, path, &sp->name, e)) < 0 ||
            (rc = typed(p, "unit", JSON_STRING, path, &sp->unit, e)) < 0 ||
            (rc = typed(p, "startValue", JSON_REAL, path, &start, e)) < 0 ||
            (rc = typed(p, "endValue", JSON_REAL, path, &end, e)) < 0 ||
            (rc = typed(p, "events", JSON_ARRAY, path, &sp->events, e)) < 0 ||
            (rc = typed(p, "samples", JSON_ARRAY, path, &sp->samples, e)) < 0 ||
            (rc = typed(p, "weights", JSON_ARRAY, path, &sp->weights, e)) < 0)
            return rc;
        sp->start = num(start);
        snprintf(sub, sizeof sub, "%s.weights", path);
        if ((rc = typed_elements(sp->weights, JSON_REAL, sub, e)) < 0) return rc;
        snprintf(sub, sizeof sub, "%s.samples", path);
        if ((rc = typed_elements(sp->samples, JSON_ARRAY, sub, e)) < 0) return rc;
        for (size_t k = 0; sp->samples && k < json_array_size(sp->samples); k++) {
            snprintf(sub, sizeof sub, "%s.samples[%zu]", path, k);
            if ((rc = typed_elements(json_array_get(sp->samples, k), JSON_REAL, sub, e)) < 0)
                return rc;
        }
        for (size_t k = 0; sp->events && k < json_array_size(sp->events); k++) {
            const json_t *ev = json_array_get(sp->events, k);
            snprintf(sub, sizeof sub, "%s.events[%zu]", path, k);
            if (json_is_null(ev)) continue;
            if (!json_is_object(ev))
                return pc_error_set(e, PC_EBADMSG, "speedscope: %s: %s where an object belongs",
                                    sub, kind_name(ev));
            if ((rc = typed(ev, "type", JSON_STRING, sub, &dummy, e)) < 0 ||
                (rc = typed(ev, "at", JSON_REAL, sub, &dummy, e)) < 0 ||
                (rc = typed(ev, "frame", JSON_REAL, sub, &dummy, e)) < 0)
                return rc;
        }
    }
    return 0;
}

/* Pyroscope merges profiles of equal name, type, unit and startValue and orders them by
 * startValue; members keep their order in the file. */
static int merge_key_cmp(const ss_prof *a, const ss_prof *b)
{
    int c;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if ((c = str_cmp(a->name, b->name)) || (c = str_cmp(a->type, b->type)) ||
        (c = str_cmp(a->unit, b->unit)))
        return c;
    return 0;
}

static int order_cmp(const void *x, const void *y)
{
    const ss_prof *a = *(ss_prof *const *)x, *b = *(ss_prof *const *)y;
    int c = merge_key_cmp(a, b);
    return c ? c : (a->index > b->index) - (a->index < b->index);
}

/* ---- call trees ---- */

/* Seeded (base/hash.h): frame indices are the client's, and a fixed multiplier let it pick
 * (parent, frame) pairs that share one probe run. */
static size_t slot_hash(uint32_t parent, uint32_t fid)
{
    return (size_t)pc_hash_u64((uint64_t)parent << 32 | fid);
}

/* A new node (no hashing: roots). SIZE_MAX when the budget refuses. */
static size_t new_node(ss *s, uint32_t parent, uint32_t fid, uint32_t depth)
{
    if (s->nnodes == s->capnodes) {
        size_t cap = s->capnodes ? 2 * s->capnodes : 256;
        if (cap > UINT32_MAX - 1 ||
            !scratch_grow(s->budget, (void **)&s->nodes, s->capnodes * sizeof(ss_node),
                          cap * sizeof(ss_node)))
            return SIZE_MAX;
        s->capnodes = cap;
    }
    s->nodes[s->nnodes] = (ss_node){parent, fid, depth, 0};
    return s->nnodes++;
}

static bool rehash(ss *s)
{
    size_t n = s->nslots ? 2 * s->nslots : 1024;
    uint32_t *slots = NULL;
    if (!scratch_grow(s->budget, (void **)&slots, 0, n * sizeof(uint32_t))) return false;
    memset(slots, 0, n * sizeof(uint32_t));
    for (size_t i = 0; i < s->nslots; i++) {
        uint32_t v = s->slots[i];
        if (!v) continue;
        const ss_node *nd = &s->nodes[v - 1];
        size_t h = slot_hash(nd->parent, nd->fid) & (n - 1);
        while (slots[h])
            h = (h + 1) & (n - 1);
        slots[h] = v;
    }
    scratch_free(s->budget, s->slots, s->nslots * sizeof(uint32_t));
    s->slots = slots;
    s->nslots = n;
    return true;
}

/* The child of parent for frame fid, made when new. SIZE_MAX when the budget refuses. */
static size_t child(ss *s, size_t parent, size_t fid)
{
    if (2 * (s->nnodes + 1) > s->nslots && !rehash(s)) return SIZE_MAX;
    size_t mask = s->nslots - 1, h = slot_hash((uint32_t)parent, (uint32_t)fid) & mask;
    for (; s->slots[h]; h = (h + 1) & mask) {
        const ss_node *nd = &s->nodes[s->slots[h] - 1];
        if (nd->parent == parent && nd->fid == fid) return s->slots[h] - 1;
    }
    bool named = s->fname[fid] && json_string_length(s->fname[fid]) > 0;
    size_t c = new_node(s, (uint32_t)parent, (uint32_t)fid, s->nodes[parent].depth + named);
    if (c == SIZE_MAX) return c;
    s->slots[h] = (uint32_t)c + 1;
    return c;
}

/* Add v (a weight or duration in the profile's unit, >= 0) to node n. */
static int add_value(ss *s, const ss_group *g, size_t n, double v, const char *path, pc_error *e)
{
    if (!(v < 9223372036854775808.0))
        return pc_error_set(e, PC_EBADMSG, "speedscope: %s: value %g does not fit 64 bits", path,
                            v);
    int64_t x = (int64_t)v; /* truncated, as Go's uint64(v) */
    if (!x) return 0;
    if (!scale(x, g->precision, &x) || !scale(x, g->period, &x) ||
        __builtin_add_overflow(s->nodes[n].value, x, &x))
        return pc_error_set(e, PC_EBADMSG,
                            "speedscope: %s: value %g x %lld (unit) x %lld ns (sampleRate) "
                            "overflows a 64-bit value once summed",
                            path, v, (long long)g->precision,
                            (long long)(g->period ? g->period : 1));
    s->nodes[n].value = x;
    return 0;
}

/* A frame index as Go's int(float64) takes it, checked against the frames. */
static int frame_index(const ss *s, const json_t *v, size_t *fid, const char *path, pc_error *e)
{
    double f = trunc(num(v));
    if (!(f >= 0 && f < (double)s->nframes))
        return pc_error_set(e, PC_EBADMSG, "speedscope: %s: invalid frame %g (%zu frames)", path,
                            num(v), s->nframes);
    *fid = (size_t)f;
    return 0;
}

static int evented(ss *s, ss_group *g, pc_error *e)
{
    double last = s->order[g->first]->start;
    size_t cur = g->root;
    for (size_t m = 0; m < g->n; m++) {
        const ss_prof *p = s->order[g->first + m];
        for (size_t k = 0; p->events && k < json_array_size(p->events); k++) {
            const json_t *ev = json_array_get(p->events, k);
            const json_t *type = json_is_object(ev) ? member(ev, "type") : NULL;
            const json_t *atv = json_is_object(ev) ? member(ev, "at") : NULL;
            const json_t *frame = json_is_object(ev) ? member(ev, "frame") : NULL;
            char path[96];
            snprintf(path, sizeof path, "$.profiles[%zu].events[%zu]", p->index, k);
            if (json_is_null(type)) type = NULL;
            double at = json_is_number(atv) ? json_number_value(atv) : 0;
            size_t fid = 0; /* set by frame_index; -O3 cannot see that */
            int rc;
            if (at < last)
                return pc_error_set(e, PC_EBADMSG, "speedscope: %s: events out of order, %g < %g",
                                    path, at, last);
            if ((rc = frame_index(s, json_is_number(frame) ? frame : NULL, &fid, path, e)) < 0)
                return rc;
            if (str_is(type, "C")) {
                if (cur == g->root)
                    return pc_error_set(e, PC_EBADMSG, "speedscope: %s: no open frame to close",
                                        path);
                if (s->nodes[cur].fid != fid)
                    return pc_error_set(e, PC_EBADMSG,
                                        "speedscope: %s: closes frame %zu but frame %u is open",
                                        path, fid, s->nodes[cur].fid);
                if ((rc = add_value(s, g, cur, at - last, path, e)) < 0) return rc;
                cur = s->nodes[cur].parent;
            } else if (str_is(type, "O")) {
                /* the time since the last event is the open frame's own (Pyroscope credits it
                 * without the unit's precision multiplier: docs/formats.md) */
                if (cur != g->root && (rc = add_value(s, g, cur, at - last, path, e)) < 0)
                    return rc;
                if ((cur = child(s, cur, fid)) == SIZE_MAX)
                    return over_budget(s->o, "speedscope", e);
            } else {
                return pc_error_set(e, PC_EBADMSG, "speedscope: %s: unknown event type \"%s\"",
                                    path, str(type));
            }
            last = at;
        }
    }
    return 0;
}

static int sampled(ss *s, ss_group *g, pc_error *e)
{
    size_t nsamples = 0, nweights = 0;
    for (size_t m = 0; m < g->n; m++) {
        const ss_prof *p = s->order[g->first + m];
        nsamples += p->samples ? json_array_size(p->samples) : 0;
        nweights += p->weights ? json_array_size(p->weights) : 0;
    }
    if (nsamples != nweights)
        return pc_error_set(e, PC_EBADMSG,
                            "speedscope: $.profiles[%zu]: %zu samples but %zu weights",
                            s->order[g->first]->index, nsamples, nweights);
    /* samples and weights pair up across the merged profiles, in order */
    size_t wm = 0, wk = 0;
    for (size_t m = 0; m < g->n; m++) {
        const ss_prof *p = s->order[g->first + m];
        for (size_t k = 0; p->samples && k < json_array_size(p->samples); k++) {
            const ss_prof *wp = s->order[g->first + wm];
            while (!wp->weights || wk >= json_array_size(wp->weights))
                wp = s->order[g->first + ++wm], wk = 0;
            const json_t *wv = json_array_get(wp->weights, wk++);
            double w = json_is_number(wv) ? json_number_value(wv) : 0;
            char path[96];
            snprintf(path, sizeof path, "$.profiles[%zu].samples[%zu]", p->index, k);
            if (w < 0)
                return pc_error_set(e, PC_EBADMSG, "speedscope: %s: negative weight %g", path, w);
            const json_t *stack = json_array_get(p->samples, k);
            size_t cur = g->root;
            int rc;
            for (size_t i = 0; json_is_array(stack) && i < json_array_size(stack); i++) {
                const json_t *f = json_array_get(stack, i);
                size_t fid = 0; /* set by frame_index; -O3 cannot see that */
                char fpath[128];
                snprintf(fpath, sizeof fpath, "%s[%zu]", path, i);
                if ((rc = frame_index(s, json_is_number(f) ? f : NULL, &fid, fpath, e)) < 0)
                    return rc;
                if ((cur = child(s, cur, fid)) == SIZE_MAX)
                    return over_budget(s->o, "speedscope", e);
            }
            if ((rc = add_value(s, g, cur, w, path, e)) < 0) return rc;
        }
    }
    return 0;
}

/* Group the profiles, check each group's unit, kind and type, and build its call tree. */
static int read_groups(ss *s, pc_error *e)
{
    qsort(s->order, s->nprofs, sizeof(ss_prof *), order_cmp);
    size_t n = s->nprofs ? s->nprofs : 1;
    if (!scratch_grow(s->budget, (void **)&s->groups, 0, n * sizeof(ss_group)))
        return over_budget(s->o, "speedscope", e);
    for (size_t i = 0; i < s->nprofs;) {
        size_t j = i + 1;
        while (j < s->nprofs && !merge_key_cmp(s->order[i], s->order[j]))
            j++;
        s->groups[s->ngroups++] = (ss_group){.first = i, .n = j - i};
        i = j;
    }
    for (size_t gi = 0; gi < s->ngroups; gi++) {
        ss_group *g = &s->groups[gi];
        const ss_prof *p = s->order[g->first];
        for (size_t u = 0; u < sizeof ss_units / sizeof ss_units[0]; u++)
            if (str_is(p->unit, ss_units[u].name)) g->unit = &ss_units[u];
        if (!g->unit)
            return pc_error_set(e, PC_EBADMSG, "speedscope: $.profiles[%zu]: unknown unit \"%s\"",
                                p->index, str(p->unit));
        g->evented = str_is(p->type, "evented");
        if (!g->evented && !str_is(p->type, "sampled"))
            return pc_error_set(e, PC_EBADMSG,
                                "speedscope: $.profiles[%zu]: profile type \"%s\" is not supported",
                                p->index, str(p->type));
        /* several profiles: each is named by its unit, e.g. app.milliseconds (a wall profile) */
        size_t al = strlen(s->o->app), ul = strlen(g->unit->name);
        g->app = pc_xmalloc(al + ul + 2);
        memcpy(g->app, s->o->app, al);
        g->app[al] = 0;
        if (s->ngroups > 1) {
            g->app[al] = '.';
            memcpy(g->app + al + 1, g->unit->name, ul + 1);
        }
        bool by_default = s->o->sample_rate == 100; /* Pyroscope cannot tell 100 from unset */
        g->rate = by_default ? g->unit->default_rate : s->o->sample_rate;
        g->precision = by_default ? g->unit->default_precision : g->unit->precision;
        pc_stacks_builder probe = {0};
        int rc = pc_stacks_profile_begin(&probe, g->app, g->rate, NULL, e);
        if (rc < 0) return rc;
        g->period = probe.period;
        if ((g->root = new_node(s, UINT32_MAX, UINT32_MAX, 0)) == SIZE_MAX)
            return over_budget(s->o, "speedscope", e);
        rc = g->evented ? evented(s, g, e) : sampled(s, g, e);
        if (rc < 0) return rc;
        g->nodes_end = s->nnodes;
    }
    return 0;
}

/* What the batch will hold: a sample per node with a value, its stack, the frames used. */
static int count(ss *s, pc_error *e)
{
    size_t n = s->nframes ? s->nframes : 1;
    if (!scratch_grow(s->budget, (void **)&s->fused, 0, n))
        return over_budget(s->o, "speedscope", e);
    memset(s->fused, 0, n);
    for (size_t i = 0; i < s->nnodes; i++) {
        const ss_node *nd = &s->nodes[i];
        if (nd->fid != UINT32_MAX && !s->fused[nd->fid]) {
            s->fused[nd->fid] = 1;
            s->frames++;
            s->frame_bytes += s->fname[nd->fid] ? json_string_length(s->fname[nd->fid]) : 0;
        }
        if (nd->value) {
            s->samples++;
            s->stack_frames += nd->depth;
            if (nd->depth > s->max_depth) s->max_depth = nd->depth;
        }
    }
    return 0;
}

static int32_t frame_loc(ss *s, pc_stacks_builder *ib, uint32_t fid)
{
    if (!s->floc[fid])
        s->floc[fid] = pc_stacks_frame(ib, json_string_value(s->fname[fid]),
                                       json_string_length(s->fname[fid]));
    return s->floc[fid];
}

static int build(ss *s, pc_stacks_builder *ib, pc_error *e)
{
    int32_t *stack = pc_xmalloc((s->max_depth + 1) * sizeof(int32_t));
    int rc = 0;
    for (size_t gi = 0; gi < s->ngroups && rc == 0; gi++) {
        ss_group *g = &s->groups[gi];
        const ss_prof *p = s->order[g->first];
        const char *units = g->unit->default_rate == 0 ? "bytes" : "samples";
        if ((rc = pc_stacks_profile_begin(ib, g->app, g->rate, units, e)) < 0) break;
        for (size_t i = g->root; i < g->nodes_end; i++) {
            if (!s->nodes[i].value) continue;
            size_t n = 0;
            for (size_t c = i; c != g->root; c = s->nodes[c].parent) { /* leaf first */
                uint32_t fid = s->nodes[c].fid;
                if (s->fname[fid] && json_string_length(s->fname[fid]))
                    stack[n++] = frame_loc(s, ib, fid);
            }
            pc_stacks_sample(ib, pc_dict_stack(ib->db, stack, n), s->nodes[i].value);
        }
        if (!pc_budget_ok(s->budget)) rc = over_budget(s->o, "speedscope", e);
        /* keeps the other profiles of one upload apart, as Pyroscope's profile_name label */
        const char *key = "profile_name", *val = *str(p->name) ? str(p->name) : NULL;
        pc_stacks_profile_end(ib, &key, &val, 1);
    }
    free(stack);
    return rc;
}

static int speedscope_to_batch(const uint8_t *p, size_t len, const pc_format_opts *o,
                               pc_batch **out, pc_error *e)
{
    ss s = {.o = o, .budget = o->budget};
    pc_stacks_builder ib = {0};
    json_t *root = NULL;
    int rc;
    size_t scratch = 0;
    if (o->budget && pc_budget_reserve(o->budget, pc_json_decode_estimate((const char *)p, len),
                                       "speedscope JSON") < 0)
        return over_budget(o, "speedscope", e);
    json_error_t jerr;
    root = pc_json_load_budgeted((const char *)p, len, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL,
                                 o->budget, &jerr);
    if (!root) {
        if (!pc_budget_ok(o->budget)) return over_budget(o, "speedscope", e);
        return pc_error_set(e, PC_EBADMSG, "speedscope: invalid JSON at line %d column %d: %s",
                            jerr.line, jerr.column, jerr.text);
    }
    if (!json_is_object(root) && !json_is_null(root)) {
        rc = pc_error_set(e, PC_EBADMSG, "speedscope: %s where an object belongs", kind_name(root));
        goto out;
    }
    const json_t *schema;
    if ((rc = typed(json_is_object(root) ? root : NULL, "$schema", JSON_STRING, "$", &schema, e)) <
        0)
        goto out;
    if ((rc = read_frames(&s, json_is_object(root) ? root : NULL, e)) < 0 ||
        (rc = read_profiles(&s, json_is_object(root) ? root : NULL, e)) < 0)
        goto out;
    if (!str_is(schema, SCHEMA)) {
        rc = pc_error_set(e, PC_EBADMSG, "speedscope: unknown $schema \"%s\" (want %s)",
                          str(schema), SCHEMA);
        goto out;
    }
    if ((rc = read_groups(&s, e)) < 0 || (rc = count(&s, e)) < 0) goto out;
    scratch = (s.nframes ? s.nframes : 1) * sizeof(int32_t) + (s.max_depth + 1) * sizeof(int32_t);
    size_t est = pc_stacks_estimate(s.samples, s.stack_frames, s.frames, s.frame_bytes) + scratch +
                 s.ngroups * (2048 + (o->n_attrs + 3) * 256) /* a resource and profile each */;
    if ((rc = pc_stacks_begin(&ib, o, est, "decoded speedscope", e)) < 0) goto out;
    s.floc = pc_xcalloc(s.nframes ? s.nframes : 1, sizeof(int32_t));
    pc_budget_charge(o->budget, scratch);
    if ((rc = build(&s, &ib, e)) < 0) goto out;
    *out = pc_stacks_finish(&ib);
out:
    if (rc < 0) pc_stacks_abort(&ib);
    if (s.floc) {
        free(s.floc);
        pc_budget_uncharge(o->budget, scratch);
    }
    for (size_t g = 0; g < s.ngroups; g++)
        free(s.groups[g].app);
    size_t nf = s.nframes ? s.nframes : 1, np = s.nprofs ? s.nprofs : 1;
    scratch_free(o->budget, s.fname, nf * sizeof(*s.fname));
    scratch_free(o->budget, s.fused, nf);
    scratch_free(o->budget, s.profs, np * sizeof(ss_prof));
    scratch_free(o->budget, s.order, np * sizeof(ss_prof *));
    scratch_free(o->budget, s.groups, np * sizeof(ss_group));
    scratch_free(o->budget, s.nodes, s.capnodes * sizeof(ss_node));
    scratch_free(o->budget, s.slots, s.nslots * sizeof(uint32_t));
    pc_json_free_budgeted(root, o->budget);
    return rc;
}

/* o with an app name ("" when it has none): the builder and the speedscope names read it. */
static const pc_format_opts *with_app(const pc_format_opts *o, pc_format_opts *tmp)
{
    if (o->app) return o;
    *tmp = *o;
    tmp->app = "";
    return tmp;
}

int pc_trie_decode(const uint8_t *data, size_t len, const pc_format_opts *o, pc_batch **out,
                   pc_error *e)
{
    pc_format_opts tmp;
    *out = NULL;
    return tree_to_batch(false, data, len, with_app(o, &tmp), out, e);
}

int pc_tree_decode(const uint8_t *data, size_t len, const pc_format_opts *o, pc_batch **out,
                   pc_error *e)
{
    pc_format_opts tmp;
    *out = NULL;
    return tree_to_batch(true, data, len, with_app(o, &tmp), out, e);
}

int pc_speedscope_decode(const uint8_t *data, size_t len, const pc_format_opts *o, pc_batch **out,
                         pc_error *e)
{
    pc_format_opts tmp;
    *out = NULL;
    int rc = speedscope_to_batch(data, len, with_app(o, &tmp), out, e);
    if (rc != PC_EINVAL) return rc;
    /* the profile type comes from the body's units here, so an unknown one is undecodable data;
     * Pyroscope answers 422 for every speedscope failure (spec §1.8) */
    if (e) e->code = PC_EBADMSG;
    return PC_EBADMSG;
}
