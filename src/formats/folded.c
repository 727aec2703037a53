/* Collapsed stacks and lines (spec/pyroscope.md §1.4, §1.6), and the stacks builder every format
 * of frame names builds its batch with (folded.h). Hostile input: every function here is bounded
 * and fuzzed. */
#include "formats/folded.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "pdata/dict.h"

typedef struct pc_stacks_type {
    const char *suffix, *type, *unit;
    int scaled; /* cpu/wall counts scale to nanoseconds with sampleRate */
} type_info;

static const type_info known_types[] = {
    {"cpu", "cpu", "nanoseconds", 1},
    {"itimer", "cpu", "nanoseconds", 1},
    {"wall", "wall", "nanoseconds", 1},
    {"seconds", "wall", "nanoseconds", 1},
    {"nanoseconds", "wall", "nanoseconds", 1},
    {"microseconds", "wall", "nanoseconds", 1},
    {"milliseconds", "wall", "nanoseconds", 1},
    {"inuse_objects", "inuse_objects", "count", 0},
    {"alloc_objects", "alloc_objects", "count", 0},
    {"inuse_space", "inuse_space", "bytes", 0},
    {"alloc_space", "alloc_space", "bytes", 0},
    {"bytes", "alloc_space", "bytes", 0},
    {"live", "inuse_objects", "count", 0},
    {"alloc_in_new_tlab_objects", "alloc_in_new_tlab_objects", "count", 0},
    {"alloc_in_new_tlab_bytes", "alloc_in_new_tlab_bytes", "bytes", 0},
    {"alloc_outside_tlab_objects", "alloc_outside_tlab_objects", "count", 0},
    {"alloc_outside_tlab_bytes", "alloc_outside_tlab_bytes", "bytes", 0},
    {"goroutines", "goroutine", "count", 0},
    {"mutex_count", "contentions", "count", 0},
    {"mutex_duration", "delay", "nanoseconds", 0},
    {"block_count", "contentions", "count", 0},
    {"block_duration", "delay", "nanoseconds", 0},
    {"lock_count", "contentions", "count", 0},
    {"lock_duration", "delay", "nanoseconds", 0},
    {"exceptions", "exceptions", "count", 0},
    {NULL, NULL, NULL, 0},
};

/* The type an app name's last '.' component names (none: cpu); NULL when unknown. *app_len gets
 * the length of the name without the suffix. */
static const type_info *type_of(const char *app, size_t *app_len)
{
    const char *dot = strrchr(app, '.');
    *app_len = strlen(app);
    if (!dot) return &known_types[0];
    *app_len = (size_t)(dot - app);
    for (const type_info *t = known_types; t->suffix; t++)
        if (strcmp(dot + 1, t->suffix) == 0) return t;
    return NULL;
}

typedef struct pc_stacks_sample {
    int32_t stack;
    int64_t value;
} folded_sample;

#define R16(n)     (((size_t)(n) + 15) & ~(size_t)15)
#define DICT_ENTRY (16 * 2 + sizeof(void *) * 2) /* hash slots at 3/4 load, table pointers */

size_t pc_stacks_estimate(size_t samples, size_t stack_frames, size_t frames, size_t frame_bytes)
{
    /* per sample: the sample, its value, its pointer, the builder's entry and a stack; per frame
     * of a stack its index (twice: the caller's array and the stack's); per new frame a string,
     * a function and a location with one line, each with its dictionary slots. Saturates. */
    const size_t per_sample = R16(sizeof(pc_sample)) + 16 + sizeof(void *) +
                              2 * sizeof(folded_sample) + R16(sizeof(pc_stack)) + DICT_ENTRY + 16;
    const size_t per_frame = R16(sizeof(pc_function)) + R16(sizeof(pc_location)) + 16 +
                             R16(sizeof(pc_line)) + 3 * DICT_ENTRY + sizeof(int32_t) + 16;
    size_t t[4], sum = 16384; /* the batch, its first arena block, the empty dictionary */
    if (__builtin_mul_overflow(frame_bytes, 2, &t[0]) ||
        __builtin_mul_overflow(samples, per_sample, &t[1]) ||
        __builtin_mul_overflow(stack_frames, 2 * sizeof(int32_t), &t[2]) ||
        __builtin_mul_overflow(frames, per_frame, &t[3]))
        return SIZE_MAX;
    for (int i = 0; i < 4; i++)
        if (__builtin_add_overflow(sum, t[i], &sum)) return SIZE_MAX;
    return sum;
}

/* The decode budget refused: PC_EAGAIN when the decodes in flight leave no room now, else
 * PC_E2BIG. */
static int over_budget(const pc_budget *b, pc_error *e)
{
    return pc_error_set(e, b->state == PC_EAGAIN ? PC_EAGAIN : PC_E2BIG,
                        "%s: over the decode budget", b->what);
}

int pc_stacks_begin(pc_stacks_builder *ib, const pc_format_opts *o, size_t estimate,
                    const char *what, pc_error *e)
{
    ib->o = o;
    if (o->budget && pc_budget_reserve(o->budget, estimate, what) < 0)
        return over_budget(o->budget, e);
    ib->b = pc_batch_new();
    pc_arena_set_budget(ib->b->arena, o->budget); /* until the receiver's pc_batch_end_budget */
    ib->db = pc_dict_builder_from(ib->b->arena, pc_batch_req(ib->b)->dictionary);
    return 0;
}

int pc_stacks_profile_begin(pc_stacks_builder *ib, const char *app, int64_t sample_rate,
                            const char *units, pc_error *e)
{
    const type_info *ti = type_of(app, &ib->app_len);
    if (!ti) return pc_error_set(e, PC_EINVAL, "unknown profile type: %s", strrchr(app, '.') + 1);
    ib->type = ti;
    ib->app = app;
    ib->units = units;
    ib->period = ti->scaled && sample_rate > 0 ? 1000000000LL / sample_rate : 0;
    ib->n = 0;
    return 0;
}

int32_t pc_stacks_frame(pc_stacks_builder *ib, const char *name, size_t len)
{
    int32_t fn = pc_dict_function(ib->db, pc_dict_string(ib->db, name, len), 0, 0, 0);
    pc_line ln = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINE__INIT;
    pc_line *lines[1] = {&ln};
    ln.function_index = fn;
    pc_location loc = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
    loc.n_lines = 1;
    loc.lines = lines;
    return pc_dict_location(ib->db, &loc);
}

void pc_stacks_sample(pc_stacks_builder *ib, int32_t stack, int64_t value)
{
    if (ib->n == ib->cap) {
        size_t old = ib->cap;
        ib->cap = ib->cap ? ib->cap * 2 : 64;
        ib->samples = pc_xrealloc(ib->samples, ib->cap * sizeof(folded_sample));
        pc_arena_charge(ib->b->arena, (ib->cap - old) * sizeof(folded_sample));
    }
    ib->samples[ib->n++] = (folded_sample){stack, value};
}

void pc_stacks_profile_end(pc_stacks_builder *ib, const char *const *xkeys,
                           const char *const *xvals, size_t nx)
{
    const pc_format_opts *o = ib->o;
    pc_batch *b = ib->b;
    const type_info *ti = ib->type;
    const char *type = ti->type, *unit = ti->unit, *units = ib->units;
    if (ti->scaled && ib->period == 0) {
        type = "samples"; /* no sampleRate: plain sample counts */
        unit = "count";
    } else if (!ti->scaled && units && *units && strcmp(unit, "count") == 0 &&
               strcmp(units, "objects") != 0 && strcmp(units, "samples") != 0 &&
               strcmp(units, "goroutines") != 0 && strcmp(units, "lock_samples") != 0) {
        unit = strcmp(units, "lock_nanoseconds") == 0 ? "nanoseconds" : units;
    }
    enum { MAX_ATTRS = 72 }; /* the receiver's 64 name labels and a few of its own */
    const char *keys[MAX_ATTRS], *vals[MAX_ATTRS];
    size_t na = 0;
    keys[na] = "service.name";
    vals[na++] = o->service ? o->service : pc_arena_strndup(b->arena, ib->app, ib->app_len);
    for (size_t i = 0; i < o->n_attrs && na < MAX_ATTRS; i++) {
        size_t x = 0;
        while (x < nx && strcmp(xkeys[x], o->attrs[i].key) != 0)
            x++;
        if (x == nx) { /* an extra attribute of the same key replaces it */
            keys[na] = o->attrs[i].key;
            vals[na++] = o->attrs[i].value;
        }
    }
    for (size_t x = 0; x < nx && na < MAX_ATTRS; x++) {
        if (!xvals[x]) continue; /* only removes the opts' attribute */
        keys[na] = xkeys[x];
        vals[na++] = xvals[x];
    }
    pc_scope_profiles *sp =
        pc_batch_add_resource(b, keys, vals, na, o->scope_name, o->scope_version);
    pc_profile *prof = pc_scope_add_profile(b, sp);
    prof->sample_type = pc_arena_calloc(b->arena, 1, sizeof(pc_value_type));
    opentelemetry__proto__profiles__v1development__value_type__init(prof->sample_type);
    prof->sample_type->type_strindex = pc_dict_cstring(ib->db, type);
    prof->sample_type->unit_strindex = pc_dict_cstring(ib->db, unit);
    if (ib->period) {
        prof->period_type = pc_arena_calloc(b->arena, 1, sizeof(pc_value_type));
        opentelemetry__proto__profiles__v1development__value_type__init(prof->period_type);
        prof->period_type->type_strindex = prof->sample_type->type_strindex;
        prof->period_type->unit_strindex = prof->sample_type->unit_strindex;
        prof->period = ib->period;
    }
    prof->time_unix_nano = (uint64_t)o->time_ns;
    prof->duration_nano = o->duration_ns > 0 ? (uint64_t)o->duration_ns : 0;
    prof->samples = pc_arena_alloc(b->arena, (ib->n ? ib->n : 1) * sizeof(pc_sample *));
    for (size_t i = 0; i < ib->n; i++) {
        pc_sample *s = pc_arena_calloc(b->arena, 1, sizeof(*s));
        opentelemetry__proto__profiles__v1development__sample__init(s);
        s->stack_index = ib->samples[i].stack;
        s->n_values = 1;
        s->values = pc_arena_alloc(b->arena, sizeof(int64_t));
        s->values[0] = ib->samples[i].value; /* already scaled by the period */
        prof->samples[prof->n_samples++] = s;
    }
    ib->n = 0;
}

static void builder_release(pc_stacks_builder *ib)
{
    if (ib->b) pc_arena_uncharge(ib->b->arena, ib->cap * sizeof(folded_sample));
    free(ib->samples);
    ib->samples = NULL;
    ib->cap = ib->n = 0;
    pc_dict_builder_free(ib->db);
    ib->db = NULL;
}

pc_batch *pc_stacks_finish(pc_stacks_builder *ib)
{
    pc_batch *b = ib->b;
    pc_batch_req(b)->dictionary = pc_dict_builder_finish(ib->db);
    builder_release(ib);
    ib->b = NULL;
    return b;
}

void pc_stacks_abort(pc_stacks_builder *ib)
{
    builder_release(ib);
    if (ib->b) pc_batch_unref(ib->b);
    ib->b = NULL;
}

static void add_stack_line(pc_stacks_builder *ib, const char *line, size_t len, int64_t value)
{
    /* frames are root first; OTLP stacks are leaf first */
    int32_t locs_local[256] = {0}, *locs = locs_local;
    size_t nl = 0, capl = 256;
    const char *f = line, *end = line + len;
    while (f <= end) {
        const char *semi = memchr(f, ';', (size_t)(end - f));
        const char *fe = semi ? semi : end;
        if (fe > f) {
            if (nl == capl) {
                capl *= 2;
                int32_t *g = pc_xmalloc(capl * sizeof(int32_t));
                memcpy(g, locs, nl * sizeof(int32_t));
                if (locs != locs_local) free(locs);
                locs = g;
            }
            locs[nl++] = pc_stacks_frame(ib, f, (size_t)(fe - f));
        }
        if (!semi) break;
        f = semi + 1;
    }
    for (size_t i = 0; i < nl / 2; i++) {
        int32_t t = locs[i];
        locs[i] = locs[nl - 1 - i];
        locs[nl - 1 - i] = t;
    }
    pc_stacks_sample(ib, pc_dict_stack(ib->db, locs, nl), value);
    if (locs != locs_local) free(locs);
}

/* What a collapsed-stacks body becomes, counted before parsing: per line a sample, its value and
 * a stack; per frame (every ';' and line) a string, a function and a location with one line, all
 * distinct at worst, each with its dictionary slots. */
static size_t folded_estimate(const char *text, size_t len)
{
    size_t lines = 1, frames = 0;
    for (size_t i = 0; i < len; i++) {
        lines += text[i] == '\n';
        frames += text[i] == ';';
    }
    frames += lines;
    return 4096 + 2 * len +
           lines * (R16(sizeof(pc_sample)) + 16 + sizeof(void *) + 2 * sizeof(folded_sample) +
                    R16(sizeof(pc_stack)) + DICT_ENTRY) +
           frames * (R16(sizeof(pc_function)) + R16(sizeof(pc_location)) + 16 +
                     R16(sizeof(pc_line)) + 3 * DICT_ENTRY + sizeof(int32_t) + 16);
}

/* One line "stack count" of collapsed stacks, added as a sample (scaled by period); a line without
 * a space is skipped, as Pyroscope does. 0, or PC_EBADMSG. */
static int folded_line(pc_stacks_builder *ib, const char *p, size_t ll, int64_t period,
                       size_t lineno, pc_error *err)
{
    const char *sp = NULL;
    for (size_t i = ll; i-- > 0;)
        if (p[i] == ' ') {
            sp = p + i;
            break;
        }
    if (!sp) return 0;
    char num[24];
    size_t dl = (size_t)(p + ll - sp - 1);
    char *e = NULL;
    long long v = -1;
    errno = 0;
    if (dl > 0 && dl < sizeof num) {
        memcpy(num, sp + 1, dl);
        num[dl] = 0;
        v = strtoll(num, &e, 10);
    }
    if (v < 0 || !e || *e || errno == ERANGE)
        return pc_error_set(err, PC_EBADMSG, "line %zu: invalid sample count", lineno);
    /* cpu/wall counts become nanoseconds: refuse what int64 cannot hold */
    int64_t value = v;
    if (period && __builtin_mul_overflow(value, period, &value))
        return pc_error_set(err, PC_EBADMSG,
                            "line %zu: sample count %lld x %lld ns (sampleRate) overflows a "
                            "64-bit value",
                            lineno, v, (long long)period);
    add_stack_line(ib, p, (size_t)(sp - p), value);
    return 0;
}

static int stacks_decode(const char *text, size_t len, const pc_format_opts *o, bool lines,
                         pc_batch **out, pc_error *err)
{
    const char *app = o->app ? o->app : "";
    *out = NULL;
    pc_stacks_builder ib = {0};
    int rc = pc_stacks_profile_begin(&ib, app, o->sample_rate, o->units, err);
    if (rc == 0) rc = pc_stacks_begin(&ib, o, folded_estimate(text, len), "collapsed stacks", err);
    int64_t period = ib.period;
    const char *p = text, *end = text + len;
    size_t lineno = 0;
    while (rc == 0 && p < end) {
        if (!pc_budget_ok(o->budget)) {
            rc = over_budget(o->budget, err);
            break;
        }
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        size_t ll = (size_t)(le - p);
        if (ll && p[ll - 1] == '\r') ll--;
        if (ll && lines)
            add_stack_line(&ib, p, ll, period ? period : 1);
        else if (ll)
            rc = folded_line(&ib, p, ll, period, lineno, err);
        p = nl ? nl + 1 : end;
    }
    if (rc < 0) {
        pc_stacks_abort(&ib);
        return rc;
    }
    pc_stacks_profile_end(&ib, NULL, NULL, 0);
    *out = pc_stacks_finish(&ib);
    return 0;
}

int pc_folded_decode(const uint8_t *data, size_t len, const pc_format_opts *o, pc_batch **out,
                     pc_error *e)
{
    return stacks_decode((const char *)data, len, o, false, out, e);
}

int pc_lines_decode(const uint8_t *data, size_t len, const pc_format_opts *o, pc_batch **out,
                    pc_error *e)
{
    return stacks_decode((const char *)data, len, o, true, out, e);
}
