/* OTLP profiles -> pprof (see pprof.h for the mapping; pprof.c the other way). */
#include "formats/pprof.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/gzip.h"
#include "base/hex.h"
#include "formats/pprof_common.h"
#include "pdata/dict.h"

/* ==== OTLP -> pprof ======================================================================= */

typedef struct out_ctx {
    const pc_dictionary *d;
    size_t n_str, n_map, n_loc, n_fun, n_attr, n_stack, n_link;
    /* dictionary index -> pprof string index / id, for the pprof being built (0 = none yet;
     * strings: -1 = none yet). Reset through the touched lists after each pprof. */
    int32_t *smap;
    uint64_t *mid, *lid, *fid;
    i32vec ts, tm, tl, tf;
    /* per pprof */
    pc_arena *a;
    pc_dict_builder *st; /* the pprof string table */
} out_ctx;

static const char *dstr(const out_ctx *o, int32_t idx)
{
    return idx > 0 && (size_t)idx < o->n_str ? pc_nz(o->d->string_table[idx]) : "";
}

static const pc_kvu *dattr(const out_ctx *o, int32_t idx)
{
    return idx > 0 && (size_t)idx < o->n_attr ? o->d->attribute_table[idx] : NULL;
}

static const pc_stack *dstack(const out_ctx *o, int32_t idx)
{
    return idx > 0 && (size_t)idx < o->n_stack ? o->d->stack_table[idx] : NULL;
}

static const pc_location *dloc(const out_ctx *o, int32_t idx)
{
    return idx > 0 && (size_t)idx < o->n_loc ? o->d->location_table[idx] : NULL;
}

/* The string of a string or string_value_strindex value; NULL for other kinds. */
static const char *any_str(const out_ctx *o, const pc_anyvalue *v)
{
    if (!v) return NULL;
    if (v->value_case == PC_AV(STRING_VALUE)) return pc_nz(v->string_value);
    if (v->value_case == PC_AV(STRING_VALUE_STRINDEX)) return dstr(o, v->string_value_strindex);
    return NULL;
}

static int any_true(const pc_anyvalue *v)
{
    return v && v->value_case == PC_AV(BOOL_VALUE) && v->bool_value;
}

/* pprof string index of dictionary string idx. */
static int64_t ostr(out_ctx *o, int32_t idx)
{
    if (idx <= 0 || (size_t)idx >= o->n_str) return 0;
    if (o->smap[idx] < 0) {
        o->smap[idx] = pc_dict_cstring(o->st, dstr(o, idx));
        i32_push(&o->ts, idx);
    }
    return o->smap[idx];
}

static int64_t ostr_c(out_ctx *o, const char *s)
{
    return pc_dict_cstring(o->st, s);
}

static void mark(uint64_t *ids, i32vec *touched, int32_t idx, size_t n)
{
    if (idx <= 0 || (size_t)idx >= n || ids[idx]) return;
    ids[idx] = 1;
    i32_push(touched, idx);
}

static int i32_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Ids 1..n in ascending dictionary order (keeps e.g. the main binary's mapping first). */
static void assign_ids(uint64_t *ids, i32vec *t)
{
    if (t->n > 1) qsort(t->v, t->n, sizeof(int32_t), i32_cmp);
    for (size_t i = 0; i < t->n; i++)
        ids[t->v[i]] = i + 1;
}

static pp_value_type *out_vt(out_ctx *o, const pc_value_type *vt)
{
    pp_value_type *x = pc_arena_alloc(o->a, sizeof *x);
    perftools__profiles__value_type__init(x);
    if (vt) {
        x->type = ostr(o, vt->type_strindex);
        x->unit = ostr(o, vt->unit_strindex);
    }
    return x;
}

static pp_label *new_label(out_ctx *o, int64_t key)
{
    pp_label *l = pc_arena_alloc(o->a, sizeof *l);
    perftools__profiles__label__init(l);
    l->key = key;
    return l;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* One value of an attribute as a label (appended to labels); kinds pprof cannot carry are
 * skipped. */
static void value_label(out_ctx *o, ptrvec *labels, int64_t key, const pc_anyvalue *v, int32_t unit)
{
    if (!v) return;
    char buf[64];
    const char *s = any_str(o, v);
    pp_label *l;
    switch (v->value_case) {
    case PC_AV(STRING_VALUE):
    case PC_AV(STRING_VALUE_STRINDEX): break;
    case PC_AV(INT_VALUE):
        l = new_label(o, key);
        l->num = v->int_value;
        l->num_unit = ostr(o, unit);
        ptr_push(labels, l);
        return;
    case PC_AV(BOOL_VALUE): s = v->bool_value ? "true" : "false"; break;
    case PC_AV(DOUBLE_VALUE):
        snprintf(buf, sizeof buf, "%.17g", v->double_value);
        s = buf;
        break;
    case PC_AV(ARRAY_VALUE):
        if (v->array_value)
            for (size_t i = 0; i < v->array_value->n_values; i++) {
                const pc_anyvalue *e = v->array_value->values[i];
                if (e && e->value_case != PC_AV(ARRAY_VALUE)) value_label(o, labels, key, e, unit);
            }
        return;
    default: return;
    }
    l = new_label(o, key);
    l->str = ostr_c(o, s);
    ptr_push(labels, l);
}

static void out_labels(out_ctx *o, const pc_sample *s, pp_sample *ps)
{
    ptrvec labels = {0};
    bool have_trace = false, have_span = false;
    if (s->link_index > 0 && (size_t)s->link_index < o->n_link) {
        const pc_link *ln = o->d->link_table[s->link_index];
        char buf[33];
        if (ln && ln->trace_id.len == 16 && !all_zero(ln->trace_id.data, 16)) {
            pc_hex_encode(buf, ln->trace_id.data, 16);
            pp_label *l = new_label(o, ostr_c(o, "trace_id"));
            l->str = ostr_c(o, buf);
            ptr_push(&labels, l);
            have_trace = true;
        }
        if (ln && ln->span_id.len == 8 && !all_zero(ln->span_id.data, 8)) {
            pc_hex_encode(buf, ln->span_id.data, 8);
            pp_label *l = new_label(o, ostr_c(o, "span_id"));
            l->str = ostr_c(o, buf);
            ptr_push(&labels, l);
            have_span = true;
        }
    }
    for (size_t i = 0; s->attribute_indices && i < s->n_attribute_indices; i++) {
        const pc_kvu *kv = dattr(o, s->attribute_indices[i]);
        if (!kv) continue;
        const char *key = dstr(o, kv->key_strindex);
        if ((have_trace && strcmp(key, "trace_id") == 0) ||
            (have_span && strcmp(key, "span_id") == 0))
            continue;
        value_label(o, &labels, ostr(o, kv->key_strindex), kv->value, kv->unit_strindex);
    }
    ps->n_label = labels.n;
    ps->label = labels.n ? pc_arena_memdup(o->a, labels.v, labels.n * sizeof(void *)) : NULL;
    free(labels.v);
}

static const pc_stack *sample_stack(const out_ctx *o, const pc_sample *s)
{
    return s ? dstack(o, s->stack_index) : NULL;
}

/* Mark every location, mapping and function used by the samples of p. */
static void mark_used(out_ctx *o, const pc_profile *p)
{
    for (size_t j = 0; j < p->n_samples; j++) {
        const pc_stack *st = sample_stack(o, p->samples[j]);
        for (size_t k = 0; st && st->location_indices && k < st->n_location_indices; k++)
            mark(o->lid, &o->tl, st->location_indices[k], o->n_loc);
    }
    for (size_t i = 0; i < o->tl.n; i++) {
        const pc_location *l = dloc(o, o->tl.v[i]);
        if (!l) continue;
        mark(o->mid, &o->tm, l->mapping_index, o->n_map);
        for (size_t k = 0; l->lines && k < l->n_lines; k++) {
            if (!l->lines[k]) continue;
            int32_t fi = l->lines[k]->function_index;
            if (fi > 0 && (size_t)fi < o->n_fun) {
                mark(o->fid, &o->tf, fi, o->n_fun);
            } else if (!o->fid[0]) {
                /* the null function (a pprof function without any name interns to it): pprof
                 * has no null, so it becomes one function of empty strings */
                o->fid[0] = 1;
                i32_push(&o->tf, 0);
            }
        }
    }
    assign_ids(o->lid, &o->tl);
    assign_ids(o->mid, &o->tm);
    assign_ids(o->fid, &o->tf);
}

/* The mappings used, with their attributes turned back into pprof fields. */
static void out_mappings(out_ctx *o, pp_profile *pp)
{
    pp->n_mapping = o->tm.n;
    pp->mapping = o->tm.n ? pc_arena_alloc(o->a, o->tm.n * sizeof(pp_mapping *)) : NULL;
    for (size_t i = 0; i < o->tm.n; i++) {
        const pc_mapping *m = o->d->mapping_table[o->tm.v[i]];
        pp_mapping *x = pc_arena_alloc(o->a, sizeof *x);
        perftools__profiles__mapping__init(x);
        x->id = i + 1;
        if (m) {
            x->memory_start = m->memory_start;
            x->memory_limit = m->memory_limit;
            x->file_offset = m->file_offset;
            x->filename = ostr(o, m->filename_strindex);
            const char *bid = NULL;
            int bid_rank = 0; /* prefer gnu, then go, then htlhash */
            for (size_t k = 0; m->attribute_indices && k < m->n_attribute_indices; k++) {
                const pc_kvu *kv = dattr(o, m->attribute_indices[k]);
                if (!kv) continue;
                const char *key = dstr(o, kv->key_strindex);
                const char *sv = any_str(o, kv->value);
                int rank = strcmp(key, ATTR_BUILD_ID) == 0                           ? 3
                           : strcmp(key, "process.executable.build_id.go") == 0      ? 2
                           : strcmp(key, "process.executable.build_id.htlhash") == 0 ? 1
                                                                                     : 0;
                if (rank > bid_rank && sv && sv[0]) {
                    bid = sv;
                    bid_rank = rank;
                }
                if (strcmp(key, ATTR_HAS_FUNCTIONS) == 0) x->has_functions = any_true(kv->value);
                if (strcmp(key, ATTR_HAS_FILENAMES) == 0) x->has_filenames = any_true(kv->value);
                if (strcmp(key, ATTR_HAS_LINES) == 0) x->has_line_numbers = any_true(kv->value);
                if (strcmp(key, ATTR_HAS_INLINE) == 0) x->has_inline_frames = any_true(kv->value);
            }
            if (bid) x->build_id = ostr_c(o, bid);
        }
        pp->mapping[i] = x;
    }
}

static void out_functions(out_ctx *o, pp_profile *pp)
{
    pp->n_function = o->tf.n;
    pp->function = o->tf.n ? pc_arena_alloc(o->a, o->tf.n * sizeof(pp_function *)) : NULL;
    for (size_t i = 0; i < o->tf.n; i++) {
        const pc_function *f = o->tf.v[i] ? o->d->function_table[o->tf.v[i]] : NULL;
        pp_function *x = pc_arena_alloc(o->a, sizeof *x);
        perftools__profiles__function__init(x);
        x->id = i + 1;
        if (f) {
            x->name = ostr(o, f->name_strindex);
            x->system_name = ostr(o, f->system_name_strindex);
            x->filename = ostr(o, f->filename_strindex);
            x->start_line = f->start_line;
        }
        pp->function[i] = x;
    }
}

static void out_locations(out_ctx *o, pp_profile *pp)
{
    pp->n_location = o->tl.n;
    pp->location = o->tl.n ? pc_arena_alloc(o->a, o->tl.n * sizeof(pp_location *)) : NULL;
    for (size_t i = 0; i < o->tl.n; i++) {
        const pc_location *l = o->d->location_table[o->tl.v[i]];
        pp_location *x = pc_arena_alloc(o->a, sizeof *x);
        perftools__profiles__location__init(x);
        x->id = i + 1;
        if (l) {
            x->address = l->address;
            if (l->mapping_index > 0 && (size_t)l->mapping_index < o->n_map)
                x->mapping_id = o->mid[l->mapping_index];
            size_t nl = l->lines ? l->n_lines : 0;
            x->n_line = nl;
            x->line = nl ? pc_arena_alloc(o->a, nl * sizeof(pp_line *)) : NULL;
            for (size_t k = 0; k < nl; k++) {
                pp_line *ln = pc_arena_alloc(o->a, sizeof *ln);
                perftools__profiles__line__init(ln);
                const pc_line *sl = l->lines[k];
                if (sl) {
                    if (sl->function_index > 0 && (size_t)sl->function_index < o->n_fun)
                        ln->function_id = o->fid[sl->function_index];
                    else
                        ln->function_id = o->fid[0]; /* the null function, see mark_used */
                    ln->line = sl->line;
                    ln->column = sl->column;
                }
                x->line[k] = ln;
            }
            for (size_t k = 0; l->attribute_indices && k < l->n_attribute_indices; k++) {
                const pc_kvu *kv = dattr(o, l->attribute_indices[k]);
                if (kv && strcmp(dstr(o, kv->key_strindex), ATTR_IS_FOLDED) == 0)
                    x->is_folded = any_true(kv->value);
            }
        }
        pp->location[i] = x;
    }
}

/* The mapping, function and location tables of the pprof, ids 1..n in dictionary order. */
static void out_tables(out_ctx *o, pp_profile *pp)
{
    out_mappings(o, pp);
    out_functions(o, pp);
    out_locations(o, pp);
}

/* drop/keep frames, doc url, comments from the profile attributes. */
static void out_profile_attrs(out_ctx *o, const pc_profile *p, pp_profile *pp)
{
    ptrvec comments = {0};
    for (size_t k = 0; p->attribute_indices && k < p->n_attribute_indices; k++) {
        const pc_kvu *kv = dattr(o, p->attribute_indices[k]);
        if (!kv) continue;
        const char *key = dstr(o, kv->key_strindex);
        const char *sv = any_str(o, kv->value);
        if (strcmp(key, ATTR_DROP_FRAMES) == 0 && sv)
            pp->drop_frames = ostr_c(o, sv);
        else if (strcmp(key, ATTR_KEEP_FRAMES) == 0 && sv)
            pp->keep_frames = ostr_c(o, sv);
        else if (strcmp(key, ATTR_DOC_URL) == 0 && sv)
            pp->doc_url = ostr_c(o, sv);
        else if (strcmp(key, ATTR_COMMENT) == 0 ||
                 strncmp(key, ATTR_COMMENT ".", sizeof ATTR_COMMENT) == 0) {
            /* semconv string[]; the contrib translator writes pprof.profile.comment.<i> */
            if (sv) ptr_push(&comments, (void *)sv);
            const pc_anyvalue *v = kv->value;
            if (v && v->value_case == PC_AV(ARRAY_VALUE) && v->array_value)
                for (size_t i = 0; i < v->array_value->n_values; i++) {
                    const char *e = any_str(o, v->array_value->values[i]);
                    if (e) ptr_push(&comments, (void *)e);
                }
        }
    }
    pp->n_comment = comments.n;
    pp->comment = comments.n ? pc_arena_alloc(o->a, comments.n * sizeof(int64_t)) : NULL;
    for (size_t i = 0; i < comments.n; i++)
        pp->comment[i] = ostr_c(o, comments.v[i]);
    free(comments.v);
}

static const char *scope_default_type(const out_ctx *o, const pc_scope_profiles *sp)
{
    const pc_scope *sc = sp->scope;
    for (size_t i = 0; sc && sc->attributes && i < sc->n_attributes; i++) {
        const pc_keyvalue *kv = sc->attributes[i];
        if (!kv) continue;
        const char *key = kv->key && kv->key[0] ? kv->key : dstr(o, kv->key_strindex);
        if (strcmp(key, ATTR_DEFAULT_SAMPLE) == 0) return any_str(o, kv->value);
    }
    return NULL;
}

static bool i32s_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    if (!a) na = 0;
    if (!b) nb = 0;
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof(int32_t)) == 0);
}

static int32_t vt_type(const pc_value_type *v)
{
    return v ? v->type_strindex : 0;
}

static int32_t vt_unit(const pc_value_type *v)
{
    return v ? v->unit_strindex : 0;
}

/* Can b's samples share a multi-value pprof with a's? */
static bool lines_up(const pc_profile *a, const pc_profile *b)
{
    if (a->n_samples != b->n_samples || a->time_unix_nano != b->time_unix_nano ||
        a->duration_nano != b->duration_nano || a->period != b->period ||
        vt_type(a->period_type) != vt_type(b->period_type) ||
        vt_unit(a->period_type) != vt_unit(b->period_type) ||
        !i32s_eq(a->attribute_indices, a->n_attribute_indices, b->attribute_indices,
                 b->n_attribute_indices))
        return false;
    for (size_t j = 0; j < a->n_samples; j++) {
        const pc_sample *x = a->samples[j], *y = b->samples[j];
        if (!x || !y || x->n_values != 1 || y->n_values != 1 || !x->values || !y->values ||
            x->stack_index != y->stack_index || x->link_index != y->link_index ||
            !i32s_eq(x->attribute_indices, x->n_attribute_indices, y->attribute_indices,
                     y->n_attribute_indices))
            return false;
    }
    return true;
}

static int64_t sample_value(const pc_sample *s)
{
    if (!s) return 0;
    if (s->n_values == 1 && s->values) return s->values[0];
    if (s->n_values && s->values) {
        uint64_t sum = 0; /* wrap instead of overflowing */
        for (size_t i = 0; i < s->n_values; i++)
            sum += (uint64_t)s->values[i];
        return (int64_t)sum;
    }
    return (int64_t)s->n_timestamps_unix_nano;
}

static void reset(out_ctx *o)
{
    for (size_t i = 0; i < o->ts.n; i++)
        o->smap[o->ts.v[i]] = -1;
    for (size_t i = 0; i < o->tm.n; i++)
        o->mid[o->tm.v[i]] = 0;
    for (size_t i = 0; i < o->tl.n; i++)
        o->lid[o->tl.v[i]] = 0;
    for (size_t i = 0; i < o->tf.n; i++)
        o->fid[o->tf.v[i]] = 0;
    o->ts.n = o->tm.n = o->tl.n = o->tf.n = 0;
}

/* Build, encode and hand over one pprof for profiles ps[0..n). */
static int out_one(out_ctx *o, const pc_resource_profiles *rp, const pc_scope_profiles *sp,
                   const pc_profile *const *ps, size_t n, pc_pprof_cb cb, void *ud)
{
    o->a = pc_arena_new(64 * 1024);
    o->st = pc_dict_builder_new(o->a);
    const pc_profile *p0 = ps[0];
    pp_profile *pp = pc_arena_alloc(o->a, sizeof *pp);
    perftools__profiles__profile__init(pp);

    pp->n_sample_type = n;
    pp->sample_type = pc_arena_alloc(o->a, n * sizeof(pp_value_type *));
    for (size_t i = 0; i < n; i++)
        pp->sample_type[i] = out_vt(o, ps[i]->sample_type);
    if (p0->period_type) pp->period_type = out_vt(o, p0->period_type);
    pp->period = p0->period;
    pp->time_nanos = (int64_t)p0->time_unix_nano;
    pp->duration_nanos = (int64_t)p0->duration_nano;
    out_profile_attrs(o, p0, pp);
    const char *dst = scope_default_type(o, sp);
    if (dst && dst[0]) pp->default_sample_type = ostr_c(o, dst);

    mark_used(o, p0);
    out_tables(o, pp);

    pp->n_sample = p0->n_samples;
    pp->sample = p0->n_samples ? pc_arena_alloc(o->a, p0->n_samples * sizeof(pp_sample *)) : NULL;
    for (size_t j = 0; j < p0->n_samples; j++) {
        const pc_sample *s = p0->samples[j];
        pp_sample *x = pc_arena_alloc(o->a, sizeof *x);
        perftools__profiles__sample__init(x);
        const pc_stack *st = sample_stack(o, s);
        size_t nl = st && st->location_indices ? st->n_location_indices : 0;
        x->n_location_id = nl;
        x->location_id = nl ? pc_arena_alloc(o->a, nl * sizeof(uint64_t)) : NULL;
        for (size_t k = 0; k < nl; k++) {
            int32_t li = st->location_indices[k];
            x->location_id[k] = li > 0 && (size_t)li < o->n_loc ? o->lid[li] : 0;
        }
        x->n_value = n;
        x->value = pc_arena_alloc(o->a, n * sizeof(int64_t));
        for (size_t i = 0; i < n; i++)
            x->value[i] = sample_value(ps[i]->samples[j]);
        if (s) out_labels(o, s, x);
        pp->sample[j] = x;
    }
    /* A location id 0 (a stack entry out of range) would make the pprof invalid: drop it. */
    for (size_t j = 0; j < pp->n_sample; j++) {
        pp_sample *x = pp->sample[j];
        size_t w = 0;
        for (size_t k = 0; k < x->n_location_id; k++)
            if (x->location_id[k]) x->location_id[w++] = x->location_id[k];
        x->n_location_id = w;
    }

    pc_dictionary *strings = pc_dict_builder_finish(o->st);
    pp->n_string_table = strings->n_string_table;
    pp->string_table = strings->string_table;

    size_t sz = perftools__profiles__profile__get_packed_size(pp);
    uint8_t *raw = pc_xmalloc(sz ? sz : 1);
    perftools__profiles__profile__pack(pp, raw);
    pc_buf gz = {0};
    pc_gzip_deflate(raw, sz, PC_GZIP_DEFAULT_LEVEL, &gz);
    free(raw);

    pc_pprof_out out = {
        .rp = rp, .sp = sp, .profiles = ps, .n_profiles = n, .data = gz.data, .len = gz.len};
    int rc = cb(&out, ud);
    pc_buf_free(&gz);
    pc_dict_builder_free(o->st);
    pc_arena_free(o->a);
    o->st = NULL;
    o->a = NULL;
    reset(o);
    return rc;
}

int pc_batch_to_pprof(const pc_batch *b, pc_pprof_cb cb, void *ud)
{
    const pc_request *req = pc_batch_req(b);
    if (!req) return 0;
    static const pc_dictionary empty =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    out_ctx o = {.d = req->dictionary ? req->dictionary : &empty};
    const pc_dictionary *d = o.d;
    o.n_str = d->string_table ? d->n_string_table : 0;
    o.n_map = d->mapping_table ? d->n_mapping_table : 0;
    o.n_loc = d->location_table ? d->n_location_table : 0;
    o.n_fun = d->function_table ? d->n_function_table : 0;
    o.n_attr = d->attribute_table ? d->n_attribute_table : 0;
    o.n_stack = d->stack_table ? d->n_stack_table : 0;
    o.n_link = d->link_table ? d->n_link_table : 0;
    o.smap = pc_xmalloc((o.n_str + 1) * sizeof(int32_t));
    memset(o.smap, 0xff, (o.n_str + 1) * sizeof(int32_t));
    o.mid = pc_xcalloc(o.n_map + 1, sizeof(uint64_t));
    o.lid = pc_xcalloc(o.n_loc + 1, sizeof(uint64_t));
    o.fid = pc_xcalloc(o.n_fun + 1, sizeof(uint64_t));

    int rc = 0;
    for (size_t r = 0; rc == 0 && req->resource_profiles && r < req->n_resource_profiles; r++) {
        const pc_resource_profiles *rp = req->resource_profiles[r];
        for (size_t s = 0; rc == 0 && rp && rp->scope_profiles && s < rp->n_scope_profiles; s++) {
            const pc_scope_profiles *sp = rp->scope_profiles[s];
            if (!sp || !sp->profiles) continue;
            const pc_profile *const *ps = (const pc_profile *const *)sp->profiles;
            for (size_t i = 0; rc == 0 && i < sp->n_profiles;) {
                if (!ps[i]) {
                    i++;
                    continue;
                }
                size_t j = i + 1;
                while (j < sp->n_profiles && ps[j] && lines_up(ps[i], ps[j]))
                    j++;
                /* A lone profile whose samples do not each hold one value still gets a pprof. */
                rc = out_one(&o, rp, sp, ps + i, j - i, cb, ud);
                i = j;
            }
        }
    }
    free(o.smap);
    free(o.mid);
    free(o.lid);
    free(o.fid);
    free(o.ts.v);
    free(o.tm.v);
    free(o.tl.v);
    free(o.tf.v);
    return rc;
}
