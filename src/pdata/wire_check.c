/* The validating wire walk (wire_check.h). Pass 1 follows proto_scan.c rule for rule (so its
 * first refusal is the scan's, in the same order) and notes, without stopping, what protobuf-c
 * 1.4.1's unpack refuses after a clean scan: a tag or a length prefix of more than 5 bytes, a
 * length over INT_MAX, a known field of the wrong wire type, a packed varint run cut short, a
 * repeated singular message whose oneof is unset in two occurrences (merge_messages cannot look
 * up case 0). Pass 2 runs on bytes pass 1 found well-formed and applies validate.c: last
 * occurrence wins for scalars, repeated fields and singular messages concatenate (protobuf-c
 * merges them), and a oneof keeps its last member. Pass 2 runs only when pass 1's notes ("one
 * pass" below) do not already prove it would find nothing: for a valid request only pass 1 runs
 * (bench/README.md, "### Pass-through"). */
#include "pdata/wire_check.h"

#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "pdata/pdata.h"
#include "pdata/proto_scan.h"
#include "pdata/wire_fast.h"
#include "base/utf8.h"

/* ---- pass 2: validate.c on well-formed bytes ---- */

typedef struct fld {
    unsigned num, wt;
    uint64_t v;       /* wire types 0, 1, 5 */
    const uint8_t *d; /* wire type 2 */
    size_t n;
} fld;

typedef struct rd {
    const uint8_t *p;
    size_t len, i;
} rd;

static rd rd_of(const uint8_t *p, size_t n)
{
    return (rd){p, n, 0};
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; k--)
        v = v << 8 | p[k];
    return v;
}

/* The next field; false at the end (or, never after pass 1, on bytes it cannot read). */
static bool next(rd *r, fld *f)
{
    uint64_t key, l;
    if (r->i >= r->len || pc_proto_read_varint(r->p, r->len, &r->i, &key)) return false;
    f->num = (unsigned)(key >> 3);
    f->wt = (unsigned)(key & 7);
    size_t at = r->i;
    if (pc_proto_skip_value(r->p, r->len, f->wt, &r->i, &l)) return false;
    f->v = f->wt == 0 ? l : f->wt == 1 ? le(r->p + at, 8) : f->wt == 5 ? le(r->p + at, 4) : 0;
    f->d = r->p + r->i;
    f->n = f->wt == 2 ? (size_t)l : 0;
    if (f->wt == 2) r->i += (size_t)l;
    return true;
}

typedef struct w2 {
    size_t t[T_N]; /* table sizes (pass 1) */
} w2;

static bool idx_ok(int32_t idx, size_t n)
{
    /* validate.c: index 0 means "unset" and is valid even for an absent table */
    return idx == 0 || (idx > 0 && (size_t)idx < n);
}

static int32_t i32(uint64_t v)
{
    return (int32_t)(uint32_t)v;
}

/* A repeated int32 index field's occurrence (one value or a packed run): every index in range;
 * *count gets the elements. */
static bool indices_ok(const fld *f, size_t table, size_t *count)
{
    if (f->wt == 0) {
        ++*count;
        return idx_ok(i32(f->v), table);
    }
    bool ok = true;
    for (size_t i = 0; i < f->n;) {
        uint64_t v = 0;
        if (pc_proto_read_varint(f->d, f->n, &i, &v)) break;
        ++*count;
        ok = ok && idx_ok(i32(v), table);
    }
    return ok;
}

/* Elements of a repeated numeric field's occurrence (a packed run: as protobuf-c counts). */
static size_t n_elems(const fld *f, size_t fixed)
{
    if (f->wt != 2) return 1;
    if (fixed) return f->n / fixed;
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++)
        n += !(f->d[i] & 0x80);
    return n;
}

/* An AnyValue after merging its occurrences: its member (which = 0: none) and where it is. */
typedef struct av {
    bool present;
    oneof_st st;
    fld m;
} av;

/* One AnyValue occurrence: its last oneof member (every field of AnyValue is one; string_value
 * (1) and empty bytes_value (7) are lost in a merge, as lost_in_merge says). */
static av av_one(const uint8_t *d, size_t n)
{
    av a = {.present = true};
    rd r = rd_of(d, n);
    fld f;
    while (next(&r, &f))
        if (f.num >= 1 && f.num <= 8) {
            a.st = (oneof_st){f.num, f.num == 1 || (f.num == 7 && f.n == 0)};
            a.m = f;
        }
    return a;
}

/* Another occurrence of a singular AnyValue field: as merge_step (pass 1 refused the rest). */
static void av_merge(av *a, const fld *f)
{
    av nx = av_one(f->d, f->n);
    if (!a->present || nx.st.which)
        *a = nx;
    else if (a->st.lost)
        a->st = (oneof_st){0};
}

static bool kv_ok(const w2 *s, const uint8_t *d, size_t n, int depth);

/* validate.c's check_anyvalue. */
static bool av_ok(const w2 *s, const av *a, int depth)
{
    if (!a->present) return true;
    if (depth > 32) return false;
    rd r = rd_of(a->m.d, a->m.n);
    fld f;
    switch (a->st.which) {
    case 8: return idx_ok(i32(a->m.v), s->t[T_STRING]);
    case 5:
        while (next(&r, &f)) {
            if (f.num != 1 || f.wt != 2) continue;
            av e = av_one(f.d, f.n);
            if (!av_ok(s, &e, depth + 1)) return false;
        }
        return true;
    case 6:
        while (next(&r, &f))
            if (f.num == 1 && f.wt == 2 && !kv_ok(s, f.d, f.n, depth + 1)) return false;
        return true;
    default: return true;
    }
}

/* A KeyValue: key_strindex in range, its value valid at depth. */
static bool kv_ok(const w2 *s, const uint8_t *d, size_t n, int depth)
{
    int32_t key = 0;
    av a = {0};
    rd r = rd_of(d, n);
    fld f;
    while (next(&r, &f)) {
        if (f.num == 3 && f.wt == 0) key = i32(f.v);
        if (f.num == 2 && f.wt == 2) av_merge(&a, &f);
    }
    return idx_ok(key, s->t[T_STRING]) && av_ok(s, &a, depth);
}

/* Every KeyValue in field kv_num of a message (Resource: 1, InstrumentationScope: 3). */
static bool attrs_ok(const w2 *s, const fld *m, unsigned kv_num)
{
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f))
        if (f.num == kv_num && f.wt == 2 && !kv_ok(s, f.d, f.n, 0)) return false;
    return true;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* dictionary elements; first: element 0 of its table (the zero value required) */
static bool mapping_ok(const w2 *s, const fld *m, bool first)
{
    uint64_t nz = 0;
    int32_t file = 0;
    size_t n_attr = 0;
    bool ok = true;
    uint64_t last[4] = {0};
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num >= 1 && f.num <= 4 && f.wt == 0) last[f.num - 1] = f.v;
        if (f.num == 5) ok = indices_ok(&f, s->t[T_ATTR], &n_attr) && ok;
    }
    file = i32(last[3]);
    nz = last[0] | last[1] | last[2] | (uint64_t)(uint32_t)file | n_attr;
    return ok && idx_ok(file, s->t[T_STRING]) && !(first && nz);
}

static bool location_ok(const w2 *s, const fld *m, bool first)
{
    int32_t map = 0;
    uint64_t addr = 0;
    size_t n_lines = 0, n_attr = 0;
    bool ok = true;
    rd r = rd_of(m->d, m->n);
    fld f, g;
    while (next(&r, &f)) {
        if (f.num == 1 && f.wt == 0) map = i32(f.v);
        if (f.num == 2 && f.wt == 0) addr = f.v;
        if (f.num == 4) ok = indices_ok(&f, s->t[T_ATTR], &n_attr) && ok;
        if (f.num != 3 || f.wt != 2) continue;
        n_lines++;
        int32_t fn = 0;
        rd lr = rd_of(f.d, f.n);
        while (next(&lr, &g))
            if (g.num == 1 && g.wt == 0) fn = i32(g.v);
        ok = ok && idx_ok(fn, s->t[T_FUNCTION]);
    }
    if (first && (map || addr || n_lines || n_attr)) return false;
    return ok && idx_ok(map, s->t[T_MAPPING]);
}

static bool function_ok(const w2 *s, const fld *m, bool first)
{
    uint64_t last[4] = {0};
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f))
        if (f.num >= 1 && f.num <= 4 && f.wt == 0) last[f.num - 1] = f.v;
    if (first && (i32(last[0]) || i32(last[1]) || i32(last[2]) || last[3])) return false;
    return idx_ok(i32(last[0]), s->t[T_STRING]) && idx_ok(i32(last[1]), s->t[T_STRING]) &&
           idx_ok(i32(last[2]), s->t[T_STRING]);
}

static bool link_ok(const fld *m, bool first)
{
    fld id[2] = {{0}, {0}}; /* trace_id, span_id: the last occurrence */
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f))
        if ((f.num == 1 || f.num == 2) && f.wt == 2) id[f.num - 1] = f;
    if (!first) return id[0].n == 16 && id[1].n == 8;
    return all_zero(id[0].d, id[0].n) && all_zero(id[1].d, id[1].n) &&
           (id[0].n == 0 || id[0].n == 16) && (id[1].n == 0 || id[1].n == 8);
}

static bool kvu_ok(const w2 *s, const fld *m, bool first)
{
    int32_t key = 0, unit = 0;
    av a = {0};
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num == 1 && f.wt == 0) key = i32(f.v);
        if (f.num == 3 && f.wt == 0) unit = i32(f.v);
        if (f.num == 2 && f.wt == 2) av_merge(&a, &f);
    }
    if (first && (key || unit || (a.present && a.st.which))) return false;
    return idx_ok(key, s->t[T_STRING]) && idx_ok(unit, s->t[T_STRING]) && av_ok(s, &a, 0);
}

static bool stack_ok(const w2 *s, const fld *m, bool first)
{
    size_t n = 0;
    bool ok = true;
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f))
        if (f.num == 1) ok = indices_ok(&f, s->t[T_LOCATION], &n) && ok;
    return ok && !(first && n);
}

/* An element of table f->num (element 0: first). */
static bool elem_ok(const w2 *s, const fld *f, bool first)
{
    switch (f->num) {
    case T_MAPPING: return mapping_ok(s, f, first);
    case T_LOCATION: return location_ok(s, f, first);
    case T_FUNCTION: return function_ok(s, f, first);
    case T_LINK: return link_ok(f, first);
    case T_STRING: return !(first && f->n && f->d[0]);
    case T_ATTR: return kvu_ok(s, f, first);
    default: return stack_ok(s, f, first);
    }
}

/* One dictionary occurrence; seen: the elements of each table in earlier occurrences. */
static bool dict_ok(const w2 *s, const fld *d, size_t *seen)
{
    rd r = rd_of(d->d, d->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num >= T_N || f.num == 0 || f.wt != 2) continue;
        if (!elem_ok(s, &f, seen[f.num]++ == 0)) return false;
    }
    return true;
}

/* A ValueType (the last occurrence: merging keeps the latter's scalars): indices in range. */
static bool value_type_ok(const w2 *s, const fld *vt)
{
    if (!vt->d) return true;
    int32_t ty = 0, unit = 0;
    rd r = rd_of(vt->d, vt->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num == 1 && f.wt == 0) ty = i32(f.v);
        if (f.num == 2 && f.wt == 0) unit = i32(f.v);
    }
    return idx_ok(ty, s->t[T_STRING]) && idx_ok(unit, s->t[T_STRING]);
}

static bool sample_ok(const w2 *s, const fld *m)
{
    int32_t stack = 0, link = 0;
    size_t n_attr = 0, n_values = 0, n_ts = 0;
    bool ok = true;
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num == 1 && f.wt == 0) stack = i32(f.v);
        if (f.num == 3 && f.wt == 0) link = i32(f.v);
        if (f.num == 2) ok = indices_ok(&f, s->t[T_ATTR], &n_attr) && ok;
        if (f.num == 4) n_values += n_elems(&f, 0);
        if (f.num == 5) n_ts += n_elems(&f, 8);
    }
    if (n_values && n_ts && n_values != n_ts) return false;
    return ok && idx_ok(stack, s->t[T_STACK]) && idx_ok(link, s->t[T_LINK]);
}

/* validate.c's check_profile; *samples gets the profile's samples either way. */
static bool profile_ok(const w2 *s, const fld *m, size_t *samples)
{
    fld st = {0}, pt = {0};
    size_t n_attr = 0, id_len = 0;
    bool ok = true;
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f)) {
        if (f.num == 2 && f.wt == 2) {
            ++*samples;
            ok = ok && sample_ok(s, &f);
        }
        if (f.num == 1 && f.wt == 2) st = f;
        if (f.num == 5 && f.wt == 2) pt = f;
        if (f.num == 7 && f.wt == 2) id_len = f.n;
        if (f.num == 11) ok = indices_ok(&f, s->t[T_ATTR], &n_attr) && ok;
    }
    return ok && value_type_ok(s, &st) && value_type_ok(s, &pt) && (id_len == 0 || id_len == 16);
}

/* A ScopeProfiles (or, scope = false, ResourceProfiles: then each ScopeProfiles in it). */
static int container_ok(const w2 *s, const fld *m, bool scope, pc_wire_counts *out)
{
    rd r = rd_of(m->d, m->n);
    fld f;
    while (next(&r, &f)) {
        if (f.wt != 2) continue;
        if (f.num == 1 && !attrs_ok(s, &f, scope ? 3 : 1)) return PC_EINVAL;
        if (f.num != 2) continue;
        if (!scope) {
            if (container_ok(s, &f, true, out) < 0) return PC_EINVAL;
            continue;
        }
        size_t n = 0;
        bool ok = profile_ok(s, &f, &n);
        out->profiles++;
        out->samples += n;
        if (ok)
            out->kept_samples += n;
        else
            out->rejected++;
    }
    return 0;
}

static int pass2(const w2 *s, const uint8_t *data, size_t len, pc_wire_counts *out, pc_error *e)
{
    size_t seen[T_N] = {0};
    rd r = rd_of(data, len);
    fld f;
    while (next(&r, &f))
        if (f.num == 2 && f.wt == 2 && !dict_ok(s, &f, seen))
            return pc_error_set(e, PC_EINVAL, "invalid dictionary");
    r = rd_of(data, len);
    while (next(&r, &f))
        if (f.num == 1 && f.wt == 2 && container_ok(s, &f, false, out) < 0)
            return pc_error_set(e, PC_EINVAL, "invalid resource or scope attribute");
    if (out->rejected) {
        pc_error_set(e, PC_EINVAL, "%lld invalid profiles", (long long)out->rejected);
        if ((size_t)out->rejected == out->profiles) return PC_EINVAL;
    }
    return 0;
}

/* Whether pass 1's notes prove validate.c finds nothing ("one pass" above). max_depth at most
 * PC_PROTO_MAX_DEPTH (64) keeps AnyValues nested 32 deep at most (each level is two messages),
 * so check_anyvalue's depth rule cannot fail. */
static bool one_pass_ok(const w1 *c, const w2 *s)
{
    if (c->slow) return false;
    for (unsigned t = 1; t < T_N; t++) {
        /* 2^31 or more: a negative index, which validate.c refuses */
        if (c->top[t] >> 31 || (c->top[t] && c->top[t] >= s->t[t])) return false;
        fld f = {.num = t, .wt = 2, .d = c->first[t].d, .n = c->first[t].n};
        if (s->t[t] && !elem_ok(s, &f, true)) return false;
    }
    return true;
}

int pc_wire_check_profiles(const uint8_t *data, size_t len, int max_depth, pc_wire_counts *out,
                           pc_error *e)
{
    memset(out, 0, sizeof *out);
    w1 c = {.dict =
                &opentelemetry__proto__profiles__v1development__profiles_dictionary__descriptor};
    oneof_st top;
    int rc = pc_wf_walk1(&c, PC_REQUEST_DESC, data, len, max_depth, &top, &out->cost);
    if (rc < 0) return pc_error_set(e, rc, "%s", c.what);
    if (c.unpack_fails) return pc_error_set(e, PC_EPROTO, "malformed protobuf");
    w2 s;
    memcpy(s.t, c.tables, sizeof s.t);
    if (max_depth <= PC_PROTO_MAX_DEPTH && one_pass_ok(&c, &s)) {
        out->profiles = c.profiles;
        out->samples = out->kept_samples = c.samples;
        return 0;
    }
    return pass2(&s, data, len, out, e);
}
