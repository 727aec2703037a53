/* pprof <-> OTLP profiles (see pprof.h for the mapping). */
#include "pdata/pprof.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gzip.h"
#include "pdata/dict.h"
#include "pdata/proto_scan.h"
#include "base/alloc.h"
#include "pprof.pb-c.h"
#include "base/hex.h"

typedef Perftools__Profiles__Profile pp_profile;
typedef Perftools__Profiles__ValueType pp_value_type;
typedef Perftools__Profiles__Sample pp_sample;
typedef Perftools__Profiles__Label pp_label;
typedef Perftools__Profiles__Mapping pp_mapping;
typedef Perftools__Profiles__Location pp_location;
typedef Perftools__Profiles__Line pp_line;
typedef Perftools__Profiles__Function pp_function;

#define ATTR_BUILD_ID       "process.executable.build_id.gnu"
#define ATTR_HAS_FUNCTIONS  "pprof.mapping.has_functions"
#define ATTR_HAS_FILENAMES  "pprof.mapping.has_filenames"
#define ATTR_HAS_LINES      "pprof.mapping.has_line_numbers"
#define ATTR_HAS_INLINE     "pprof.mapping.has_inline_frames"
#define ATTR_IS_FOLDED      "pprof.location.is_folded"
#define ATTR_DROP_FRAMES    "pprof.profile.drop_frames"
#define ATTR_KEEP_FRAMES    "pprof.profile.keep_frames"
#define ATTR_DOC_URL        "pprof.profile.doc_url"
#define ATTR_COMMENT        "pprof.profile.comment"
#define ATTR_DEFAULT_SAMPLE "pprof.scope.default_sample_type"

#define AV(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x

static const char *nz(const char *s)
{
    return s ? s : "";
}

/* ---- small growable vectors (malloc-owned) ---------------------------------------------- */

typedef struct i32vec {
    int32_t *v;
    size_t n, cap;
} i32vec;

static void i32_push(i32vec *x, int32_t v)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 32;
        x->v = pc_xrealloc(x->v, x->cap * sizeof(int32_t));
    }
    x->v[x->n++] = v;
}

typedef struct ptrvec {
    void **v;
    size_t n, cap;
} ptrvec;

static void ptr_push(ptrvec *x, void *p)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 32;
        x->v = pc_xrealloc(x->v, x->cap * sizeof(void *));
    }
    x->v[x->n++] = p;
}

/* ---- pprof id -> dictionary index (ids are arbitrary non-zero uint64) ------------------- */

typedef struct idmap {
    uint64_t *keys; /* 0 = empty */
    int32_t *vals;
    size_t cap;
} idmap;

static void idmap_init(idmap *m, size_t n)
{
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    m->keys = pc_xcalloc(cap, sizeof(uint64_t));
    m->vals = pc_xmalloc(cap * sizeof(int32_t));
    m->cap = cap;
}

static void idmap_free(idmap *m)
{
    free(m->keys);
    free(m->vals);
}

static size_t idhash(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* 0, or PC_EINVAL when id is already present. The map never fills: cap >= 2 * entries. */
static int idmap_put(idmap *m, uint64_t id, int32_t v)
{
    size_t mask = m->cap - 1;
    for (size_t i = idhash(id) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == id) return PC_EINVAL;
        if (m->keys[i] == 0) {
            m->keys[i] = id;
            m->vals[i] = v;
            return 0;
        }
    }
}

static int idmap_get(const idmap *m, uint64_t id, int32_t *v)
{
    if (id == 0) return 0;
    size_t mask = m->cap - 1;
    for (size_t i = idhash(id) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == 0) return 0;
        if (m->keys[i] == id) {
            *v = m->vals[i];
            return 1;
        }
    }
}

/* ==== pprof -> OTLP ======================================================================= */

typedef struct in_ctx {
    const pp_profile *p;
    pc_dict_builder *db;
    pc_arena *a;   /* the batch arena */
    int32_t *smap; /* pprof string index -> dictionary index, -1 = not interned yet */
    idmap maps, funs, locs;
    i32vec tmp; /* stack / attribute scratch */
    pc_budget *budget;
    pc_error *e;
} in_ctx;

/* PC_EINVAL with the message: what is wrong with the pprof. */
#define FAIL(c, ...) pc_error_set((c)->e, PC_EINVAL, __VA_ARGS__)

/* The budget's refusal (PC_E2BIG or PC_EAGAIN) with the message. */
static int over_budget(const in_ctx *c)
{
    return pc_error_set(c->e, c->budget->state, "pprof: %s: over the decode budget",
                        c->budget->what);
}

/* Checked once per element: the batch arena and the dictionary's tables charge the budget. */
#define BUDGET_CHECK(c)                                                                            \
    do {                                                                                           \
        if (!pc_budget_ok((c)->budget)) return over_budget(c);                                     \
    } while (0)

static int str_ok(const in_ctx *c, int64_t idx)
{
    return idx == 0 || (idx > 0 && (uint64_t)idx < c->p->n_string_table);
}

static const char *pstr(const in_ctx *c, int64_t idx)
{
    return idx > 0 && (uint64_t)idx < c->p->n_string_table ? nz(c->p->string_table[idx]) : "";
}

/* Dictionary index of pprof string idx; -1 with an error (PC_EINVAL) in c->e naming what
 * referenced it. */
static int32_t sidx(in_ctx *c, int64_t idx, const char *what, size_t which)
{
    if (idx == 0) return 0;
    if (!str_ok(c, idx)) {
        FAIL(c, "pprof: %s %zu: string index %" PRId64 " out of range (%zu strings)", what, which,
             idx, c->p->n_string_table);
        return -1;
    }
    if (c->smap[idx] < 0) c->smap[idx] = pc_dict_cstring(c->db, nz(c->p->string_table[idx]));
    return c->smap[idx];
}

static pc_anyvalue str_value(const char *s)
{
    pc_anyvalue v;
    opentelemetry__proto__common__v1__any_value__init(&v);
    v.value_case = AV(STRING_VALUE);
    v.string_value = (char *)s;
    return v;
}

static pc_anyvalue int_value(int64_t x)
{
    pc_anyvalue v;
    opentelemetry__proto__common__v1__any_value__init(&v);
    v.value_case = AV(INT_VALUE);
    v.int_value = x;
    return v;
}

static int32_t *dup_list(pc_arena *a, const int32_t *v, size_t n)
{
    return n ? pc_arena_memdup(a, v, n * sizeof(int32_t)) : NULL;
}

static int in_mappings(in_ctx *c)
{
    const pp_profile *p = c->p;
    int32_t attrs[5];
    for (size_t i = 0; i < p->n_mapping; i++) {
        BUDGET_CHECK(c);
        const pp_mapping *m = p->mapping[i];
        if (m->id == 0) return FAIL(c, "pprof: mapping %zu has id 0", i);
        pc_mapping k;
        opentelemetry__proto__profiles__v1development__mapping__init(&k);
        k.memory_start = m->memory_start;
        k.memory_limit = m->memory_limit;
        k.file_offset = m->file_offset;
        if ((k.filename_strindex = sidx(c, m->filename, "mapping", i)) < 0) return PC_EINVAL;
        if (!str_ok(c, m->build_id))
            return FAIL(c, "pprof: mapping %zu: build_id string index %" PRId64 " out of range", i,
                        m->build_id);
        size_t n = 0;
        const char *bid = pstr(c, m->build_id);
        if (bid[0]) attrs[n++] = pc_dict_attr_str(c->db, ATTR_BUILD_ID, bid, strlen(bid));
        if (m->has_functions) attrs[n++] = pc_dict_attr_bool(c->db, ATTR_HAS_FUNCTIONS, 1);
        if (m->has_filenames) attrs[n++] = pc_dict_attr_bool(c->db, ATTR_HAS_FILENAMES, 1);
        if (m->has_line_numbers) attrs[n++] = pc_dict_attr_bool(c->db, ATTR_HAS_LINES, 1);
        if (m->has_inline_frames) attrs[n++] = pc_dict_attr_bool(c->db, ATTR_HAS_INLINE, 1);
        k.n_attribute_indices = n;
        k.attribute_indices = n ? attrs : NULL;
        if (idmap_put(&c->maps, m->id, pc_dict_mapping(c->db, &k)) < 0)
            return FAIL(c, "pprof: duplicate mapping id %" PRIu64, m->id);
    }
    return 0;
}

static int in_functions(in_ctx *c)
{
    const pp_profile *p = c->p;
    for (size_t i = 0; i < p->n_function; i++) {
        BUDGET_CHECK(c);
        const pp_function *f = p->function[i];
        if (f->id == 0) return FAIL(c, "pprof: function %zu has id 0", i);
        int32_t name = sidx(c, f->name, "function", i);
        int32_t sys = sidx(c, f->system_name, "function", i);
        int32_t file = sidx(c, f->filename, "function", i);
        if (name < 0 || sys < 0 || file < 0) return PC_EINVAL;
        if (idmap_put(&c->funs, f->id, pc_dict_function(c->db, name, sys, file, f->start_line)) < 0)
            return FAIL(c, "pprof: duplicate function id %" PRIu64, f->id);
    }
    return 0;
}

static int in_locations(in_ctx *c)
{
    const pp_profile *p = c->p;
    ptrvec lp = {0};
    pc_line *lines = NULL;
    size_t lcap = 0;
    int rc = 0;
    for (size_t i = 0; i < p->n_location && rc == 0; i++) {
        const pp_location *l = p->location[i];
        if (!pc_budget_ok(c->budget)) {
            rc = over_budget(c);
            break;
        }
        if (l->id == 0) {
            rc = FAIL(c, "pprof: location %zu has id 0", i);
            break;
        }
        pc_location k;
        opentelemetry__proto__profiles__v1development__location__init(&k);
        k.address = l->address;
        if (l->mapping_id && !idmap_get(&c->maps, l->mapping_id, &k.mapping_index)) {
            rc = FAIL(c, "pprof: location %" PRIu64 " references unknown mapping id %" PRIu64,
                      l->id, l->mapping_id);
            break;
        }
        if (l->n_line > lcap) {
            lcap = l->n_line * 2;
            lines = pc_xrealloc(lines, lcap * sizeof *lines);
        }
        lp.n = 0;
        for (size_t j = 0; j < l->n_line; j++) {
            const pp_line *ln = l->line[j];
            pc_line *o = &lines[j];
            opentelemetry__proto__profiles__v1development__line__init(o);
            if (ln->function_id && !idmap_get(&c->funs, ln->function_id, &o->function_index)) {
                rc = FAIL(c, "pprof: location %" PRIu64 " references unknown function id %" PRIu64,
                          l->id, ln->function_id);
                break;
            }
            o->line = ln->line;
            o->column = ln->column;
            ptr_push(&lp, o);
        }
        if (rc) break;
        k.n_lines = lp.n;
        k.lines = (pc_line **)lp.v;
        int32_t folded;
        if (l->is_folded) {
            folded = pc_dict_attr_bool(c->db, ATTR_IS_FOLDED, 1);
            k.n_attribute_indices = 1;
            k.attribute_indices = &folded;
        }
        if (idmap_put(&c->locs, l->id, pc_dict_location(c->db, &k)) < 0)
            rc = FAIL(c, "pprof: duplicate location id %" PRIu64, l->id);
    }
    free(lp.v);
    free(lines);
    return rc;
}

typedef struct lab {
    int32_t key; /* dictionary index */
    size_t pos;
    const pp_label *l;
} lab;

static int lab_cmp(const void *a, const void *b)
{
    const lab *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* One attribute for labels g[0..n) that share a key (an array attribute when n > 1). */
static int label_group(in_ctx *c, size_t si, const lab *g, size_t n, int32_t *out)
{
    bool is_str = g[0].l->str != 0;
    int64_t unit = g[0].l->num_unit;
    for (size_t i = 1; i < n; i++)
        if ((g[i].l->str != 0) != is_str || (!is_str && g[i].l->num_unit != unit))
            return FAIL(c, "pprof: sample %zu: label %s mixes string and numeric values or units",
                        si, pc_dict_builder_str(c->db, g[0].key));
    int32_t unit_idx = 0;
    if (!is_str && (unit_idx = sidx(c, unit, "sample", si)) < 0) return PC_EINVAL;
    if (n == 1) {
        pc_anyvalue v = is_str ? str_value(pstr(c, g[0].l->str)) : int_value(g[0].l->num);
        *out = pc_dict_attribute(c->db, g[0].key, &v, unit_idx);
        return 0;
    }
    pc_anyvalue *vals = pc_xmalloc(n * sizeof *vals);
    pc_anyvalue **ptrs = pc_xmalloc(n * sizeof *ptrs);
    for (size_t i = 0; i < n; i++) {
        vals[i] = is_str ? str_value(pstr(c, g[i].l->str)) : int_value(g[i].l->num);
        ptrs[i] = &vals[i];
    }
    Opentelemetry__Proto__Common__V1__ArrayValue arr;
    opentelemetry__proto__common__v1__array_value__init(&arr);
    arr.n_values = n;
    arr.values = ptrs;
    pc_anyvalue v;
    opentelemetry__proto__common__v1__any_value__init(&v);
    v.value_case = AV(ARRAY_VALUE);
    v.array_value = &arr;
    *out = pc_dict_attribute(c->db, g[0].key, &v, unit_idx);
    free(vals);
    free(ptrs);
    return 0;
}

/* Sample labels -> attribute indices in c->tmp. */
static int in_labels(in_ctx *c, const pp_sample *s, size_t si)
{
    c->tmp.n = 0;
    if (s->n_label == 0) return 0;
    lab *ls = pc_xmalloc(s->n_label * sizeof *ls);
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < s->n_label; i++) {
        const pp_label *l = s->label[i];
        if (!str_ok(c, l->str) || !str_ok(c, l->num_unit)) {
            rc = FAIL(c, "pprof: sample %zu: label %zu string index out of range", si, i);
            break;
        }
        int32_t key = sidx(c, l->key, "sample", si);
        if (key < 0) {
            rc = PC_EINVAL;
            break;
        }
        if (l->str == 0 && l->num == 0 && l->num_unit == 0) continue; /* empty: dropped, like Go */
        ls[n].key = key;
        ls[n].pos = i;
        ls[n].l = l;
        n++;
    }
    if (rc == 0) {
        qsort(ls, n, sizeof *ls, lab_cmp);
        for (size_t i = 0; i < n && rc == 0;) {
            size_t j = i + 1;
            while (j < n && ls[j].key == ls[i].key)
                j++;
            int32_t idx = 0;
            rc = label_group(c, si, ls + i, j - i, &idx);
            if (rc == 0) i32_push(&c->tmp, idx);
            i = j;
        }
    }
    free(ls);
    return rc;
}

static pc_value_type *in_value_type(in_ctx *c, const pp_value_type *vt, const char *what, size_t i,
                                    int *rc)
{
    pc_value_type *o = pc_arena_alloc(c->a, sizeof *o);
    opentelemetry__proto__profiles__v1development__value_type__init(o);
    if (!vt) return o;
    o->type_strindex = sidx(c, vt->type, what, i);
    o->unit_strindex = sidx(c, vt->unit, what, i);
    if (o->type_strindex < 0 || o->unit_strindex < 0) *rc = PC_EINVAL;
    return o;
}

/* Profile-level attributes shared by every Profile made from this pprof, into c->tmp. */
static int in_profile_attrs(in_ctx *c)
{
    const pp_profile *p = c->p;
    c->tmp.n = 0;
    struct {
        int64_t idx;
        const char *key;
    } one[] = {{p->drop_frames, ATTR_DROP_FRAMES},
               {p->keep_frames, ATTR_KEEP_FRAMES},
               {p->doc_url, ATTR_DOC_URL}};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        if (!str_ok(c, one[i].idx))
            return FAIL(c, "pprof: %s string index %" PRId64 " out of range", one[i].key + 14,
                        one[i].idx);
        const char *s = pstr(c, one[i].idx);
        if (s[0]) i32_push(&c->tmp, pc_dict_attr_str(c->db, one[i].key, s, strlen(s)));
    }
    if (p->n_comment) {
        pc_anyvalue *vals = pc_xmalloc(p->n_comment * sizeof *vals);
        pc_anyvalue **ptrs = pc_xmalloc(p->n_comment * sizeof *ptrs);
        int rc = 0;
        for (size_t i = 0; i < p->n_comment; i++) {
            if (!str_ok(c, p->comment[i])) {
                rc = FAIL(c, "pprof: comment %zu: string index %" PRId64 " out of range", i,
                          p->comment[i]);
                break;
            }
            vals[i] = str_value(pstr(c, p->comment[i]));
            ptrs[i] = &vals[i];
        }
        if (rc == 0) {
            Opentelemetry__Proto__Common__V1__ArrayValue arr;
            opentelemetry__proto__common__v1__array_value__init(&arr);
            arr.n_values = p->n_comment;
            arr.values = ptrs;
            pc_anyvalue v;
            opentelemetry__proto__common__v1__any_value__init(&v);
            v.value_case = AV(ARRAY_VALUE);
            v.array_value = &arr;
            i32_push(&c->tmp,
                     pc_dict_attribute(c->db, pc_dict_cstring(c->db, ATTR_COMMENT), &v, 0));
        }
        free(vals);
        free(ptrs);
        if (rc) return rc;
    }
    return 0;
}

static pc_keyvalue *kv_str(pc_arena *a, const char *key, const char *val)
{
    pc_keyvalue *kv = pc_arena_alloc(a, sizeof *kv);
    opentelemetry__proto__common__v1__key_value__init(kv);
    kv->key = pc_arena_strndup(a, nz(key), strlen(nz(key)));
    kv->value = pc_arena_alloc(a, sizeof *kv->value);
    *kv->value = str_value(pc_arena_strndup(a, nz(val), strlen(nz(val))));
    return kv;
}

static int translate_in(in_ctx *c, pc_batch *b, const pc_pprof_in_opts *opts)
{
    const pp_profile *p = c->p;
    if (p->n_string_table > 0 && nz(p->string_table[0])[0] != 0)
        return FAIL(c, "pprof: string_table[0] must be empty");
    int rc = 0;
    if ((rc = in_mappings(c)) < 0 || (rc = in_functions(c)) < 0 || (rc = in_locations(c)) < 0)
        return rc;

    size_t nt = p->n_sample_type;
    pc_profile **profs = nt ? pc_arena_alloc(c->a, nt * sizeof *profs) : NULL;
    if ((rc = in_profile_attrs(c)) < 0) return rc;
    int32_t *pattrs = dup_list(c->a, c->tmp.v, c->tmp.n);
    size_t n_pattrs = c->tmp.n;
    for (size_t i = 0; i < nt; i++) {
        pc_profile *o = pc_arena_alloc(c->a, sizeof *o);
        opentelemetry__proto__profiles__v1development__profile__init(o);
        o->sample_type = in_value_type(c, p->sample_type[i], "sample_type", i, &rc);
        if (p->period_type)
            o->period_type = in_value_type(c, p->period_type, "period_type", 0, &rc);
        if (rc < 0) return rc;
        o->time_unix_nano = (uint64_t)p->time_nanos;
        o->duration_nano = (uint64_t)p->duration_nanos;
        o->period = p->period;
        o->n_attribute_indices = n_pattrs;
        o->attribute_indices = i == 0 ? pattrs : dup_list(c->a, pattrs, n_pattrs);
        o->n_samples = p->n_sample;
        o->samples = p->n_sample ? pc_arena_alloc(c->a, p->n_sample * sizeof(pc_sample *)) : NULL;
        profs[i] = o;
    }

    for (size_t j = 0; j < p->n_sample; j++) {
        BUDGET_CHECK(c);
        const pp_sample *s = p->sample[j];
        if (s->n_value != nt)
            return FAIL(c, "pprof: sample %zu has %zu values, expected %zu (one per sample type)",
                        j, s->n_value, nt);
        c->tmp.n = 0;
        for (size_t k = 0; k < s->n_location_id; k++) {
            int32_t li;
            if (!idmap_get(&c->locs, s->location_id[k], &li))
                return FAIL(c, "pprof: sample %zu references unknown location id %" PRIu64, j,
                            s->location_id[k]);
            i32_push(&c->tmp, li);
        }
        int32_t stack = pc_dict_stack(c->db, c->tmp.v, c->tmp.n);
        if ((rc = in_labels(c, s, j)) < 0) return rc;
        for (size_t i = 0; i < nt; i++) {
            pc_sample *o = pc_arena_alloc(c->a, sizeof *o);
            opentelemetry__proto__profiles__v1development__sample__init(o);
            o->stack_index = stack;
            o->n_attribute_indices = c->tmp.n;
            o->attribute_indices = dup_list(c->a, c->tmp.v, c->tmp.n);
            o->n_values = 1;
            o->values = pc_arena_alloc(c->a, sizeof(int64_t));
            o->values[0] = s->value[i];
            profs[i]->samples[j] = o;
        }
    }

    /* scope: default_sample_type */
    pc_scope *scope = pc_arena_alloc(c->a, sizeof *scope);
    opentelemetry__proto__common__v1__instrumentation_scope__init(scope);
    if (opts && opts->scope_name)
        scope->name = pc_arena_strndup(c->a, opts->scope_name, strlen(opts->scope_name));
    if (opts && opts->scope_version)
        scope->version = pc_arena_strndup(c->a, opts->scope_version, strlen(opts->scope_version));
    if (!str_ok(c, p->default_sample_type))
        return FAIL(c, "pprof: default_sample_type string index %" PRId64 " out of range",
                    p->default_sample_type);
    if (pstr(c, p->default_sample_type)[0]) {
        scope->n_attributes = 1;
        scope->attributes = pc_arena_alloc(c->a, sizeof(pc_keyvalue *));
        scope->attributes[0] = kv_str(c->a, ATTR_DEFAULT_SAMPLE, pstr(c, p->default_sample_type));
    }
    pc_scope_profiles *sp = pc_arena_alloc(c->a, sizeof *sp);
    opentelemetry__proto__profiles__v1development__scope_profiles__init(sp);
    sp->scope = scope;
    sp->n_profiles = nt;
    sp->profiles = profs;

    pc_resource *res = pc_arena_alloc(c->a, sizeof *res);
    opentelemetry__proto__resource__v1__resource__init(res);
    size_t nra = opts ? opts->n_resource_attrs : 0;
    if (nra && opts->resource_attrs) {
        res->n_attributes = nra;
        res->attributes = pc_arena_alloc(c->a, nra * sizeof(pc_keyvalue *));
        for (size_t i = 0; i < nra; i++)
            res->attributes[i] =
                kv_str(c->a, opts->resource_attrs[i].key, opts->resource_attrs[i].value);
    }
    pc_resource_profiles *rp = pc_arena_alloc(c->a, sizeof *rp);
    opentelemetry__proto__profiles__v1development__resource_profiles__init(rp);
    rp->resource = res;
    rp->n_scope_profiles = 1;
    rp->scope_profiles = pc_arena_alloc(c->a, sizeof(pc_scope_profiles *));
    rp->scope_profiles[0] = sp;

    /* Commit: nothing above touched the request. */
    pc_request *req = b->req;
    pc_resource_profiles **rps =
        pc_arena_alloc(c->a, (req->n_resource_profiles + 1) * sizeof(pc_resource_profiles *));
    if (req->n_resource_profiles)
        memcpy(rps, req->resource_profiles, req->n_resource_profiles * sizeof(*rps));
    rps[req->n_resource_profiles] = rp;
    req->resource_profiles = rps;
    req->n_resource_profiles++;
    req->dictionary = pc_dict_builder_finish(c->db);
    return 0;
}

#define R16(n) (((size_t)(n) + 15) & ~(size_t)15)

/* What translate_in adds to the batch arena and the dictionary's tables, counted from the decoded
 * pprof before translating: per sample type a Sample with its value and attribute list for every
 * pprof sample, a stack per sample (all distinct at worst), the locations, functions, mappings
 * and strings copied, an attribute per label, and a hash slot and table pointer per entry. */
static size_t translation_estimate(const pp_profile *p)
{
    const size_t entry = 16 * 2 + sizeof(void *) * 2; /* hash slots at 3/4 load, table pointers */
    size_t nt = p->n_sample_type ? p->n_sample_type : 1, est = 4096;
    est += nt * (R16(sizeof(pc_profile)) + R16(p->n_sample * sizeof(pc_sample *)));
    for (size_t i = 0; i < p->n_sample; i++) {
        const pp_sample *s = p->sample[i];
        est += nt * (R16(sizeof(pc_sample)) + 16 + R16(s->n_label * sizeof(int32_t)));
        est += R16(sizeof(pc_stack)) + R16(s->n_location_id * sizeof(int32_t)) + entry;
        est += s->n_label * (R16(sizeof(pc_kvu)) + R16(sizeof(pc_anyvalue)) + entry);
    }
    for (size_t i = 0; i < p->n_location; i++)
        est += R16(sizeof(pc_location)) + R16(p->location[i]->n_line * sizeof(pc_line *)) +
               p->location[i]->n_line * R16(sizeof(pc_line)) + R16(sizeof(int32_t)) + entry;
    est += p->n_function * (R16(sizeof(pc_function)) + entry);
    est += p->n_mapping * (R16(sizeof(pc_mapping)) + R16(5 * sizeof(int32_t)) + entry +
                           5 * (R16(sizeof(pc_kvu)) + R16(sizeof(pc_anyvalue)) + entry));
    for (size_t i = 0; i < p->n_string_table; i++)
        est += R16(strlen(nz(p->string_table[i])) + 1) + entry;
    /* pc_dict_builder_finish: a snapshot of every table's pointers */
    est += (p->n_string_table + p->n_location + p->n_function + p->n_mapping + 2 * p->n_sample) *
           sizeof(void *);
    return est;
}

int pc_pprof_to_batch(const uint8_t *data, size_t len, const pc_pprof_in_opts *opts, pc_batch **out,
                      pc_error *e)
{
    size_t max = opts && opts->max_bytes ? opts->max_bytes : PC_PPROF_DEFAULT_MAX_BYTES;
    pc_buf raw = {0};
    const uint8_t *msg = data;
    size_t mlen = len;
    if (!data) mlen = 0;
    if (data && pc_is_gzip(data, len)) {
        int rc = pc_gzip_inflate(data, len, max, &raw);
        if (rc < 0) {
            pc_buf_free(&raw);
            if (rc == PC_E2BIG)
                return pc_error_set(e, PC_E2BIG, "pprof: inflated payload exceeds %zu bytes", max);
            return pc_error_set(e, PC_EINVAL, "pprof: corrupt gzip stream");
        }
        msg = raw.data;
        mlen = raw.len;
    } else if (len > max) {
        return pc_error_set(e, PC_E2BIG, "pprof: payload exceeds %zu bytes", max);
    }
    if (mlen == 0) {
        pc_buf_free(&raw);
        return pc_error_set(e, PC_EINVAL, "pprof: empty payload");
    }

    /* counted before unpack allocates (strings checked for UTF-8, as Pyroscope requires); the
     * estimate bounds the scratch arena, so it is also its one block */
    pc_budget *budget = opts ? opts->budget : NULL;
    pc_proto_scan scan;
    pc_error why = {0};
    int rc = pc_proto_scan_message(&perftools__profiles__profile__descriptor, msg, mlen,
                                   PC_PROTO_MAX_DEPTH, &scan, &why);
    if (rc < 0) {
        pc_buf_free(&raw);
        /* invalid UTF-8 names its field (PC_EINVAL); anything else is just undecodable */
        return pc_error_set(e, PC_EINVAL, "pprof: %s",
                            rc == PC_EINVAL ? why.msg : "undecodable protobuf");
    }
    if (budget && (rc = pc_budget_reserve(budget, scan.cost, "decoded pprof")) < 0) {
        pc_buf_free(&raw);
        return pc_error_set(e, rc, "pprof: %s: over the decode budget", budget->what);
    }
    pc_arena *scratch = pc_arena_new(scan.cost + 64);
    pc_arena_set_budget(scratch, budget);
    pp_profile *p = perftools__profiles__profile__unpack(pc_arena_allocator(scratch), mlen, msg);
    pc_buf_free(&raw); /* unpack copies strings and bytes */
    if (!p) {
        pc_arena_free(scratch);
        if (!pc_budget_ok(budget))
            return pc_error_set(e, budget->state, "pprof: %s: over the decode budget",
                                budget->what);
        return pc_error_set(e, PC_EINVAL, "pprof: undecodable protobuf");
    }
    if (budget &&
        (rc = pc_budget_reserve(budget, translation_estimate(p), "pprof translated to OTLP")) < 0) {
        pc_arena_free(scratch);
        return pc_error_set(e, rc, "pprof: %s: over the decode budget", budget->what);
    }

    pc_batch *b = *out;
    if (!b) {
        b = pc_batch_new();
        pc_arena_set_budget(b->arena, budget); /* until the receiver's pc_batch_end_budget */
    }
    in_ctx c = {.p = p, .a = b->arena, .budget = budget, .e = e};
    size_t ns = p->n_string_table ? p->n_string_table : 1;
    c.db = pc_dict_builder_from(b->arena, b->req->dictionary);
    c.smap = pc_xmalloc(ns * sizeof(int32_t));
    memset(c.smap, 0xff, ns * sizeof(int32_t));
    idmap_init(&c.maps, p->n_mapping);
    idmap_init(&c.funs, p->n_function);
    idmap_init(&c.locs, p->n_location);
    size_t side = ns * sizeof(int32_t) +
                  (c.maps.cap + c.funs.cap + c.locs.cap) * (sizeof(uint64_t) + sizeof(int32_t));
    pc_arena_charge(b->arena, side);
    rc = translate_in(&c, b, opts);
    pc_arena_uncharge(b->arena, side);
    idmap_free(&c.maps);
    idmap_free(&c.funs);
    idmap_free(&c.locs);
    free(c.tmp.v);
    free(c.smap);
    pc_dict_builder_free(c.db);
    pc_arena_free(scratch);
    if (rc < 0) {
        if (!*out) pc_batch_unref(b);
        return rc;
    }
    *out = b;
    return 0;
}

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
    return idx > 0 && (size_t)idx < o->n_str ? nz(o->d->string_table[idx]) : "";
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
    if (v->value_case == AV(STRING_VALUE)) return nz(v->string_value);
    if (v->value_case == AV(STRING_VALUE_STRINDEX)) return dstr(o, v->string_value_strindex);
    return NULL;
}

static int any_true(const pc_anyvalue *v)
{
    return v && v->value_case == AV(BOOL_VALUE) && v->bool_value;
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
    case AV(STRING_VALUE):
    case AV(STRING_VALUE_STRINDEX): break;
    case AV(INT_VALUE):
        l = new_label(o, key);
        l->num = v->int_value;
        l->num_unit = ostr(o, unit);
        ptr_push(labels, l);
        return;
    case AV(BOOL_VALUE): s = v->bool_value ? "true" : "false"; break;
    case AV(DOUBLE_VALUE):
        snprintf(buf, sizeof buf, "%.17g", v->double_value);
        s = buf;
        break;
    case AV(ARRAY_VALUE):
        if (v->array_value)
            for (size_t i = 0; i < v->array_value->n_values; i++) {
                const pc_anyvalue *e = v->array_value->values[i];
                if (e && e->value_case != AV(ARRAY_VALUE)) value_label(o, labels, key, e, unit);
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

static void out_tables(out_ctx *o, pp_profile *pp)
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
            if (v && v->value_case == AV(ARRAY_VALUE) && v->array_value)
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
    const pc_request *req = b->req;
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
