/* Text summaries of a batch for the `debug` exporter (see summary.h). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdata/pdata.h"
#include "pdata/summary.h"
#include "base/hash.h"
#include "base/alloc.h"

/* Element count of a repeated field, 0 when the array pointer is missing (hostile input). */
#define ARR_N(arr, n) ((arr) ? (n) : 0)

/* ---- formatting helpers ---- */

/* At most this many stack frames (lines) are walked per profile for the top table, so a hostile
 * batch (deep stacks of locations with many lines) cannot make the summary quadratic. */
#ifndef PC_SUMMARY_MAX_FRAMES
#define PC_SUMMARY_MAX_FRAMES ((size_t)1 << 25)
#endif

/* Append s with control characters escaped as \xNN so that one line stays one line. */
static void put_esc(pc_buf *o, const char *s)
{
    if (!s) return;
    const char *run = s;
    const char *p = s;
    for (; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x20 && c != 0x7f) continue;
        pc_buf_append(o, run, (size_t)(p - run));
        pc_buf_printf(o, "\\x%02x", c);
        run = p + 1;
    }
    pc_buf_append(o, run, (size_t)(p - run));
}

static void put_esc_or_dash(pc_buf *o, const char *s)
{
    put_esc(o, s && *s ? s : "-");
}

int64_t pc_sample_value(const pc_sample *s)
{
    size_t nv = ARR_N(s->values, s->n_values);
    if (nv) {
        int64_t v = 0;
        for (size_t i = 0; i < nv; i++)
            v = pc_sat_add(v, s->values[i]);
        return v;
    }
    size_t nt = ARR_N(s->timestamps_unix_nano, s->n_timestamps_unix_nano);
    return nt > (size_t)INT64_MAX ? INT64_MAX : (int64_t)nt;
}

typedef enum { UNIT_RAW, UNIT_NS, UNIT_BYTES } unit_kind;

static unit_kind unit_kind_of(const char *u)
{
    if (!strcmp(u, "nanoseconds") || !strcmp(u, "ns")) return UNIT_NS;
    if (!strcmp(u, "bytes") || !strcmp(u, "By")) return UNIT_BYTES;
    return UNIT_RAW;
}

/* v (already scaled) with up to 3 significant digits, trailing zeros trimmed, then suffix. */
static void fmt_scaled(char *buf, size_t n, double v, const char *suffix)
{
    double a = v < 0 ? -v : v;
    int prec = a >= 100 ? 0 : a >= 10 ? 1 : 2;
    int len = snprintf(buf, n, "%.*f", prec, v);
    if (len < 0 || (size_t)len >= n) return;
    if (prec > 0) {
        while (len > 0 && buf[len - 1] == '0')
            len--;
        if (len > 0 && buf[len - 1] == '.') len--;
        buf[len] = 0;
    }
    snprintf(buf + len, n - (size_t)len, "%s", suffix);
}

typedef struct {
    double div;
    const char *sfx;
} unit_scale;

static const unit_scale ns_scales[] = {{1, "ns"}, {1e3, "us"}, {1e6, "ms"}, {1e9, "s"}};
static const unit_scale byte_scales[] = {{1, "B"},
                                         {1024.0, "kB"},
                                         {1024.0 * 1024, "MB"},
                                         {1024.0 * 1024 * 1024, "GB"},
                                         {1024.0 * 1024 * 1024 * 1024, "TB"},
                                         {1024.0 * 1024 * 1024 * 1024 * 1024, "PB"},
                                         {1024.0 * 1024 * 1024 * 1024 * 1024 * 1024, "EB"}};

/* Human form of v in the given unit: "12.5ms", "3.2MB"; "0" for zero. */
static void fmt_human(char *buf, size_t n, double v, unit_kind k)
{
    double a = v < 0 ? -v : v;
    if (a == 0 || k == UNIT_RAW) {
        snprintf(buf, n, "%.0f", v);
        return;
    }
    const unit_scale *t = k == UNIT_NS ? ns_scales : byte_scales;
    size_t cnt = k == UNIT_NS ? sizeof ns_scales / sizeof ns_scales[0]
                              : sizeof byte_scales / sizeof byte_scales[0];
    size_t i = 0;
    while (i + 1 < cnt && a >= t[i + 1].div)
        i++;
    fmt_scaled(buf, n, v / t[i].div, t[i].sfx);
}

/* A value as the table shows it: the human form for known units, the raw integer otherwise. */
static void fmt_value(char *buf, size_t n, int64_t v, unit_kind k)
{
    if (k == UNIT_RAW)
        snprintf(buf, n, "%" PRId64, v);
    else
        fmt_human(buf, n, (double)v, k);
}

/* Append " (human)" after a raw integer when the unit has a human form and v != 0. */
static void put_human_suffix(pc_buf *o, double v, unit_kind k)
{
    if (k == UNIT_RAW || v == 0) return;
    char h[48];
    fmt_human(h, sizeof h, v, k);
    pc_buf_printf(o, " (%s)", h);
}

static void fmt_pct(char *buf, size_t n, int64_t num, int64_t den)
{
    if (den == 0)
        snprintf(buf, n, "-");
    else if (num == 0)
        snprintf(buf, n, "0%%");
    else if (num == den)
        snprintf(buf, n, "100%%");
    else
        snprintf(buf, n, "%.2f%%", (double)num / (double)den * 100.0);
}

/* RFC 3339 UTC ("2024-01-02T03:04:05.5Z"); "-" for 0 (unset). No libc time functions: any
 * uint64 is representable. */
static void fmt_time(char *buf, size_t n, uint64_t t)
{
    if (t == 0) {
        snprintf(buf, n, "-");
        return;
    }
    uint64_t secs = t / 1000000000u;
    unsigned frac = (unsigned)(t % 1000000000u);
    uint64_t days = secs / 86400, sod = secs % 86400;
    /* civil_from_days (H. Hinnant), days since 1970-01-01; z >= 0 here. */
    uint64_t z = days + 719468;
    uint64_t era = z / 146097;
    uint64_t doe = z - era * 146097;
    uint64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    uint64_t y = yoe + era * 400;
    uint64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    uint64_t mp = (5 * doy + 2) / 153;
    unsigned d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
    unsigned m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
    if (m <= 2) y++;
    int len = snprintf(buf, n, "%04" PRIu64 "-%02u-%02uT%02u:%02u:%02u", y, m, d,
                       (unsigned)(sod / 3600), (unsigned)(sod / 60 % 60), (unsigned)(sod % 60));
    if (len < 0 || (size_t)len >= n) return;
    if (frac) {
        char f[16];
        int fl = snprintf(f, sizeof f, ".%09u", frac);
        while (fl > 1 && f[fl - 1] == '0')
            fl--;
        f[fl] = 0;
        len += snprintf(buf + len, n - (size_t)len, "%s", f);
        if ((size_t)len >= n) return;
    }
    snprintf(buf + len, n - (size_t)len, "Z");
}

static void put_value_type(pc_buf *o, const pc_dictionary *d, const pc_value_type *vt)
{
    put_esc_or_dash(o, vt ? pc_dict_str(d, vt->type_strindex) : "");
    pc_buf_append(o, "/", 1);
    put_esc_or_dash(o, vt ? pc_dict_str(d, vt->unit_strindex) : "");
}

static void put_anyvalue(pc_buf *o, const pc_dictionary *d, const pc_anyvalue *v)
{
    if (!v) return;
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        put_esc(o, v->string_value);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX:
        put_esc(o, pc_dict_str(d, v->string_value_strindex));
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
        pc_buf_printf(o, "%s", v->bool_value ? "true" : "false");
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
        pc_buf_printf(o, "%" PRId64, v->int_value);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
        pc_buf_printf(o, "%g", v->double_value);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE: {
        size_t len = v->bytes_value.data ? v->bytes_value.len : 0;
        pc_buf_append(o, "0x", 2);
        for (size_t i = 0; i < len && i < 32; i++)
            pc_buf_printf(o, "%02x", v->bytes_value.data[i]);
        if (len > 32) pc_buf_append(o, "...", 3);
        break;
    }
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE:
        pc_buf_printf(o, "[%zu values]",
                      v->array_value ? ARR_N(v->array_value->values, v->array_value->n_values) : 0);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE:
        pc_buf_printf(o, "{%zu entries}",
                      v->kvlist_value ? ARR_N(v->kvlist_value->values, v->kvlist_value->n_values)
                                      : 0);
        break;
    default: break;
    }
}

static void put_resource(pc_buf *o, const char *who, const pc_dictionary *d, const pc_resource *r,
                         size_t ri)
{
    pc_buf_printf(o, "%s:   resource %zu:", who, ri);
    size_t n = r ? ARR_N(r->attributes, r->n_attributes) : 0;
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        const pc_keyvalue *kv = r->attributes[i];
        if (!kv) continue;
        pc_buf_append(o, " ", 1);
        put_esc_or_dash(o, pc_keyvalue_key(d, kv));
        pc_buf_append(o, "=", 1);
        put_anyvalue(o, d, kv->value);
        shown++;
    }
    if (!shown) pc_buf_printf(o, " (no attributes)");
    if (r && r->dropped_attributes_count)
        pc_buf_printf(o, " (dropped %" PRIu32 ")", r->dropped_attributes_count);
    pc_buf_append(o, "\n", 1);
}

static void put_scope(pc_buf *o, const char *who, const pc_scope *s, size_t ri, size_t si)
{
    pc_buf_printf(o, "%s:   scope %zu/%zu: name=", who, ri, si);
    put_esc_or_dash(o, s ? s->name : NULL);
    pc_buf_printf(o, " version=");
    put_esc_or_dash(o, s ? s->version : NULL);
    pc_buf_append(o, "\n", 1);
}

/* Totals of one profile. */
typedef struct {
    size_t samples, linked;
    int64_t total;
} prof_stats;

static prof_stats profile_stats(const pc_profile *p)
{
    prof_stats st = {0, 0, 0};
    size_t n = ARR_N(p->samples, p->n_samples);
    for (size_t i = 0; i < n; i++) {
        const pc_sample *s = p->samples[i];
        if (!s) continue;
        st.samples++;
        st.total = pc_sat_add(st.total, pc_sample_value(s));
        if (s->link_index != 0) st.linked++;
    }
    return st;
}

static void put_profile_line(pc_buf *o, const char *who, const pc_dictionary *d,
                             const pc_profile *p, const char *service, const prof_stats *st,
                             size_t ri, size_t si, size_t pi)
{
    unit_kind uk =
        unit_kind_of(p->sample_type ? pc_dict_str(d, p->sample_type->unit_strindex) : "");
    unit_kind pk =
        unit_kind_of(p->period_type ? pc_dict_str(d, p->period_type->unit_strindex) : "");
    char h[64];

    pc_buf_printf(o, "%s:   profile %zu/%zu/%zu service=", who, ri, si, pi);
    put_esc_or_dash(o, service);
    pc_buf_printf(o, " type=");
    put_value_type(o, d, p->sample_type);
    pc_buf_printf(o, " period_type=");
    put_value_type(o, d, p->period_type);
    pc_buf_printf(o, " period=%" PRId64, p->period);
    put_human_suffix(o, (double)p->period, pk);
    pc_buf_printf(o, " samples=%zu total=%" PRId64, st->samples, st->total);
    put_human_suffix(o, (double)st->total, uk);
    fmt_human(h, sizeof h, (double)p->duration_nano, UNIT_NS);
    pc_buf_printf(o, " duration=%s", h);
    fmt_time(h, sizeof h, p->time_unix_nano);
    pc_buf_printf(o, " start=%s linked=%zu\n", h, st->linked);
}

/* ---- top functions: an open-addressing hash table keyed by function name ---- */

typedef struct {
    const char *name; /* NULL = empty slot */
    uint64_t hash;
    int64_t flat, cum;
    size_t stamp; /* the last stack that added to cum */
    char *own;    /* malloc'd copy that name points to, or NULL */
} fn_ent;

struct pc_top {
    fn_ent *slots;
    size_t cap, n; /* cap is 0 or a power of two */
    size_t stamp;  /* current stack, from 1 */
    int64_t val;   /* its value */
    bool leaf;     /* the next frame added is the leaf */
};

/* Seeded: function names are the client's (base/hash.h). */
static uint64_t name_hash(const char *s)
{
    return pc_hash_mem(s, strlen(s));
}

static void fn_grow(pc_top *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 256;
    fn_ent *ns = pc_xcalloc(ncap, sizeof *ns);
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slots[i].name) continue;
        size_t j = (size_t)t->slots[i].hash & (ncap - 1);
        while (ns[j].name)
            j = (j + 1) & (ncap - 1);
        ns[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = ns;
    t->cap = ncap;
}

/* The entry for name, inserted if new; copy = name is not stable and must be duplicated. */
static fn_ent *fn_get(pc_top *t, const char *name, bool copy)
{
    if ((t->n + 1) * 10 > t->cap * 7) fn_grow(t);
    uint64_t h = name_hash(name);
    size_t j = (size_t)h & (t->cap - 1);
    while (t->slots[j].name) {
        if (t->slots[j].hash == h && strcmp(t->slots[j].name, name) == 0) return &t->slots[j];
        j = (j + 1) & (t->cap - 1);
    }
    fn_ent *e = &t->slots[j];
    e->own = copy ? pc_xstrdup(name) : NULL;
    e->name = copy ? e->own : name;
    e->hash = h;
    t->n++;
    return e;
}

pc_top *pc_top_new(void)
{
    return pc_xcalloc(1, sizeof(pc_top));
}

void pc_top_free(pc_top *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i].own);
    free(t->slots);
    free(t);
}

void pc_top_stack(pc_top *t, int64_t value)
{
    t->stamp++;
    t->val = value;
    t->leaf = true;
}

void pc_top_frame(pc_top *t, const char *name, bool stable)
{
    fn_ent *e = fn_get(t, name, !stable);
    if (t->leaf) {
        e->flat = pc_sat_add(e->flat, t->val);
        t->leaf = false;
    }
    if (e->stamp != t->stamp) { /* once per stack, even when the function recurses */
        e->stamp = t->stamp;
        e->cum = pc_sat_add(e->cum, t->val);
    }
}

void pc_top_add(pc_top *t, const char *name, bool stable, int64_t flat, int64_t cum)
{
    fn_ent *e = fn_get(t, name, !stable);
    e->flat = pc_sat_add(e->flat, flat);
    e->cum = pc_sat_add(e->cum, cum);
}

static int cmp_row(const void *a, const void *b)
{
    const pc_top_row *x = a, *y = b;
    if (x->flat != y->flat) return x->flat > y->flat ? -1 : 1;
    return strcmp(x->name, y->name);
}

pc_top_row *pc_top_rows(const pc_top *t, size_t *n)
{
    pc_top_row *rows = pc_xmalloc((t->n ? t->n : 1) * sizeof *rows);
    size_t k = 0;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].name)
            rows[k++] = (pc_top_row){t->slots[i].name, t->slots[i].flat, t->slots[i].cum};
    qsort(rows, k, sizeof *rows, cmp_row);
    *n = k;
    return rows;
}

const char *pc_function_name(const pc_dictionary *d, int32_t fidx)
{
    if (fidx > 0 && d && d->function_table && (size_t)fidx < d->n_function_table) {
        const pc_function *f = d->function_table[fidx];
        if (f) {
            const char *s = pc_dict_str(d, f->name_strindex);
            if (*s) return s;
            s = pc_dict_str(d, f->system_name_strindex);
            if (*s) return s;
        }
    }
    return "<unknown>";
}

bool pc_location_frames(const pc_dictionary *d, int32_t li, size_t *budget, pc_frame_visit visit,
                        void *arg)
{
    const pc_location *loc = li > 0 && d && d->location_table && (size_t)li < d->n_location_table
                                 ? d->location_table[li]
                                 : NULL;
    size_t nl = loc ? ARR_N(loc->lines, loc->n_lines) : 0;
    if (nl == 0) {
        if (*budget == 0) return false;
        (*budget)--;
        if (loc && loc->address) {
            char hex[24];
            snprintf(hex, sizeof hex, "0x%" PRIx64, loc->address);
            visit(arg, hex, false);
        } else {
            visit(arg, "<unknown>", true);
        }
        return true;
    }
    for (size_t k = 0; k < nl; k++) {
        if (*budget == 0) return false;
        (*budget)--;
        const pc_line *ln = loc->lines[k];
        visit(arg, pc_function_name(d, ln ? ln->function_index : 0), true);
    }
    return true;
}

bool pc_stack_frames(const pc_dictionary *d, const pc_stack *st, size_t *budget,
                     pc_frame_visit visit, void *arg)
{
    size_t n = ARR_N(st->location_indices, st->n_location_indices);
    for (size_t i = 0; i < n; i++)
        if (!pc_location_frames(d, st->location_indices[i], budget, visit, arg)) return false;
    return true;
}

static void top_visit(void *arg, const char *name, bool stable)
{
    pc_top_frame(arg, name, stable);
}

typedef struct {
    int32_t stack;
    int64_t val;
} stack_val;

static int cmp_stack_val(const void *a, const void *b)
{
    int32_t x = ((const stack_val *)a)->stack, y = ((const stack_val *)b)->stack;
    return (x > y) - (x < y);
}

static void put_top(pc_buf *o, const char *who, const pc_dictionary *d, const pc_profile *p,
                    int64_t total, int top)
{
    size_t ntop = top > 0 ? (size_t)top : PC_SUMMARY_DEFAULT_TOP;
    size_t nstk = d ? ARR_N(d->stack_table, d->n_stack_table) : 0;
    size_t ns = ARR_N(p->samples, p->n_samples);

    /* Group samples by stack so that each distinct stack is walked once. */
    stack_val *sv = pc_xmalloc((ns ? ns : 1) * sizeof *sv);
    size_t m = 0;
    for (size_t i = 0; i < ns; i++) {
        const pc_sample *s = p->samples[i];
        if (!s || s->stack_index <= 0 || (size_t)s->stack_index >= nstk) continue;
        if (!d->stack_table[s->stack_index]) continue;
        sv[m].stack = s->stack_index;
        sv[m].val = pc_sample_value(s);
        m++;
    }
    qsort(sv, m, sizeof *sv, cmp_stack_val);

    pc_top *t = pc_top_new();
    size_t budget = PC_SUMMARY_MAX_FRAMES;
    bool partial = false;
    for (size_t i = 0; i < m && !partial;) {
        size_t j = i;
        int64_t v = 0;
        while (j < m && sv[j].stack == sv[i].stack)
            v = pc_sat_add(v, sv[j++].val);
        pc_top_stack(t, v);
        if (!pc_stack_frames(d, d->stack_table[sv[i].stack], &budget, top_visit, t)) partial = true;
        i = j;
    }
    free(sv);

    size_t k;
    pc_top_row *ents = pc_top_rows(t, &k);

    unit_kind uk =
        unit_kind_of(p->sample_type ? pc_dict_str(d, p->sample_type->unit_strindex) : "");
    char tot[48];
    fmt_value(tot, sizeof tot, total, uk);
    size_t shown = k < ntop ? k : ntop;
    pc_buf_printf(o, "%s:     top %zu of %zu functions by flat, total %s\n", who, shown, k, tot);
    if (partial)
        pc_buf_printf(o, "%s:     (partial: stopped after %zu frames)\n", who,
                      (size_t)PC_SUMMARY_MAX_FRAMES);
    if (shown)
        pc_buf_printf(o, "%s:           flat  flat%%   sum%%        cum   cum%%  function\n", who);
    int64_t sum = 0;
    for (size_t i = 0; i < shown; i++) {
        const pc_top_row *e = &ents[i];
        char flat[48], cum[48], fp[16], sp[16], cp[16];
        sum = pc_sat_add(sum, e->flat);
        fmt_value(flat, sizeof flat, e->flat, uk);
        fmt_value(cum, sizeof cum, e->cum, uk);
        fmt_pct(fp, sizeof fp, e->flat, total);
        fmt_pct(sp, sizeof sp, sum, total);
        fmt_pct(cp, sizeof cp, e->cum, total);
        pc_buf_printf(o, "%s:     %10s %6s %6s %10s %6s  ", who, flat, fp, sp, cum, cp);
        put_esc(o, e->name);
        pc_buf_append(o, "\n", 1);
    }
    free(ents);
    pc_top_free(t);
}

/* ---- entry point ---- */

void pc_summary_format(const pc_batch *b, pc_verbosity v, int top, const char *who, pc_buf *out)
{
    if (!out) return;
    if (!who) who = "";
    const pc_request *req = b ? pc_batch_req(b) : NULL;
    const pc_dictionary *d = req ? req->dictionary : NULL;
    size_t nres = req ? ARR_N(req->resource_profiles, req->n_resource_profiles) : 0;

    size_t resources = 0, profiles = 0, samples = 0;
    for (size_t ri = 0; ri < nres; ri++) {
        const pc_resource_profiles *rp = req->resource_profiles[ri];
        if (!rp) continue;
        resources++;
        size_t nsc = ARR_N(rp->scope_profiles, rp->n_scope_profiles);
        for (size_t si = 0; si < nsc; si++) {
            const pc_scope_profiles *sp = rp->scope_profiles[si];
            if (!sp) continue;
            size_t np = ARR_N(sp->profiles, sp->n_profiles);
            for (size_t pi = 0; pi < np; pi++) {
                const pc_profile *p = sp->profiles[pi];
                if (!p) continue;
                profiles++;
                size_t nsm = ARR_N(p->samples, p->n_samples);
                for (size_t i = 0; i < nsm; i++)
                    samples += p->samples[i] != NULL;
            }
        }
    }
    pc_buf_printf(out, "%s: resources=%zu profiles=%zu samples=%zu\n", who, resources, profiles,
                  samples);
    if (v <= PC_VERBOSITY_BASIC) return;
    bool detailed = v >= PC_VERBOSITY_DETAILED;

    for (size_t ri = 0; ri < nres; ri++) {
        const pc_resource_profiles *rp = req->resource_profiles[ri];
        if (!rp) continue;
        const char *service = pc_service_name(d, rp->resource);
        if (detailed) put_resource(out, who, d, rp->resource, ri);
        size_t nsc = ARR_N(rp->scope_profiles, rp->n_scope_profiles);
        for (size_t si = 0; si < nsc; si++) {
            const pc_scope_profiles *sp = rp->scope_profiles[si];
            if (!sp) continue;
            if (detailed) put_scope(out, who, sp->scope, ri, si);
            size_t np = ARR_N(sp->profiles, sp->n_profiles);
            for (size_t pi = 0; pi < np; pi++) {
                const pc_profile *p = sp->profiles[pi];
                if (!p) continue;
                prof_stats st = profile_stats(p);
                put_profile_line(out, who, d, p, service, &st, ri, si, pi);
                if (detailed) put_top(out, who, d, p, st.total, top);
            }
        }
    }
}

const char *pc_service_name(const pc_dictionary *d, const pc_resource *r)
{
    const char *service = pc_resource_attr_str(d, r, "service.name");
    return service && *service ? service : "unknown_service";
}
