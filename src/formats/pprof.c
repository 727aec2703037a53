/* pprof -> OTLP profiles (see pprof.h for the mapping; pprof_out.c the other way). */
#include "formats/pprof.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gzip.h"
#include "base/hash.h"
#include "pdata/dict.h"
#include "pdata/proto_scan.h"
#include "base/alloc.h"
#include "pprof.pb-c.h"
#include "base/hex.h"

#include "formats/pprof_common.h"

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

/* Seeded (base/hash.h): the ids are the client's, and a fixed hash lets it pick ids that share
 * one probe run, which made decoding quadratic (issue 28). */
static size_t idhash(uint64_t x)
{
    return (size_t)pc_hash_u64(x);
}

/* 0, or PC_EBADMSG when id is already present. The map never fills: cap >= 2 * entries. */
static int idmap_put(idmap *m, uint64_t id, int32_t v)
{
    size_t mask = m->cap - 1;
    for (size_t i = idhash(id) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == id) return PC_EBADMSG;
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
    idmap lattr; /* (key, pprof string) of a one-string label -> its attribute */
    idmap larr;  /* seeded hash of a string-array label (+ probe) -> index in arrs */
    struct arr_ent *arrs;
    int64_t *aidx; /* the arrays' pprof string indices, a run each */
    size_t narrs, naidx;
    i32vec tmp; /* stack / attribute scratch */
    pc_budget *budget;
    pc_error *e;
} in_ctx;

/* PC_EBADMSG with the message: what is wrong with the pprof. */
#define FAIL(c, ...) pc_error_set((c)->e, PC_EBADMSG, __VA_ARGS__)

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
    return idx > 0 && (uint64_t)idx < c->p->n_string_table ? pc_nz(c->p->string_table[idx]) : "";
}

/* Dictionary index of pprof string idx; -1 with an error (PC_EBADMSG) in c->e naming what
 * referenced it. */
static int32_t sidx(in_ctx *c, int64_t idx, const char *what, size_t which)
{
    if (idx == 0) return 0;
    if (!str_ok(c, idx)) {
        FAIL(c, "pprof: %s %zu: string index %" PRId64 " out of range (%zu strings)", what, which,
             idx, c->p->n_string_table);
        return -1;
    }
    if (c->smap[idx] < 0) c->smap[idx] = pc_dict_cstring(c->db, pc_nz(c->p->string_table[idx]));
    return c->smap[idx];
}

static pc_anyvalue str_value(const char *s)
{
    pc_anyvalue v;
    opentelemetry__proto__common__v1__any_value__init(&v);
    v.value_case = PC_AV(STRING_VALUE);
    v.string_value = (char *)s;
    return v;
}

static pc_anyvalue int_value(int64_t x)
{
    pc_anyvalue v;
    opentelemetry__proto__common__v1__any_value__init(&v);
    v.value_case = PC_AV(INT_VALUE);
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
        if ((k.filename_strindex = sidx(c, m->filename, "mapping", i)) < 0) return PC_EBADMSG;
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
        if (name < 0 || sys < 0 || file < 0) return PC_EBADMSG;
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

/* A string-array label seen before: its key, pprof string indices (aidx[off..off+n)) and
 * attribute. Each is interned once, not once per sample naming it (its values are hashed and
 * compared by the dictionary). */
typedef struct arr_ent {
    int32_t key, attr;
    size_t off, n;
} arr_ent;

/* The entry of string labels g[0..n) (key g[0].key), or NULL with *slot the idmap key to add it
 * under. The map never fills: at most nlabels / 2 entries in 2 * nlabels slots. */
static arr_ent *arr_find(in_ctx *c, const lab *g, size_t n, uint64_t *slot)
{
    pc_hash hs;
    pc_hash_begin(&hs);
    pc_hash_word(&hs, (uint64_t)(uint32_t)g[0].key);
    pc_hash_word(&hs, n);
    for (size_t i = 0; i < n; i++)
        pc_hash_word(&hs, (uint64_t)g[i].l->str);
    uint64_t h = pc_hash_end(&hs);
    for (uint64_t probe = 0;; probe++) {
        int32_t v;
        if (h + probe == 0) continue; /* 0 marks an empty slot */
        if (!idmap_get(&c->larr, h + probe, &v)) {
            *slot = h + probe;
            return NULL;
        }
        arr_ent *e = &c->arrs[v];
        size_t i = 0;
        if (e->key == g[0].key && e->n == n)
            while (i < n && c->aidx[e->off + i] == g[i].l->str)
                i++;
        if (i == n && e->n == n && e->key == g[0].key) return e;
    }
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
    if (!is_str && (unit_idx = sidx(c, unit, "sample", si)) < 0) return PC_EBADMSG;
    if (n == 1) {
        /* a string is hashed once, not once per sample naming it (a long label value on every
         * sample made translation quadratic) */
        uint64_t ck = (uint64_t)(uint32_t)g[0].key << 32 | (uint64_t)g[0].l->str;
        bool cache = is_str && (uint64_t)g[0].l->str <= UINT32_MAX;
        if (cache && idmap_get(&c->lattr, ck, out)) return 0;
        pc_anyvalue v = is_str ? str_value(pstr(c, g[0].l->str)) : int_value(g[0].l->num);
        *out = pc_dict_attribute(c->db, g[0].key, &v, unit_idx);
        if (cache) idmap_put(&c->lattr, ck, *out);
        return 0;
    }
    uint64_t slot = 0;
    arr_ent *seen = is_str ? arr_find(c, g, n, &slot) : NULL;
    if (seen) {
        *out = seen->attr;
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
    v.value_case = PC_AV(ARRAY_VALUE);
    v.array_value = &arr;
    *out = pc_dict_attribute(c->db, g[0].key, &v, unit_idx);
    free(vals);
    free(ptrs);
    if (is_str) {
        c->arrs[c->narrs] = (arr_ent){g[0].key, *out, c->naidx, n};
        for (size_t i = 0; i < n; i++)
            c->aidx[c->naidx++] = g[i].l->str;
        idmap_put(&c->larr, slot, (int32_t)c->narrs++);
    }
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
            rc = PC_EBADMSG;
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
    if (o->type_strindex < 0 || o->unit_strindex < 0) *rc = PC_EBADMSG;
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
            v.value_case = PC_AV(ARRAY_VALUE);
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
    kv->key = pc_arena_strndup(a, pc_nz(key), strlen(pc_nz(key)));
    kv->value = pc_arena_alloc(a, sizeof *kv->value);
    *kv->value = str_value(pc_arena_strndup(a, pc_nz(val), strlen(pc_nz(val))));
    return kv;
}

/* The resource's attributes: opts' own, then service.name (opts->service, else the app name
 * whole: a pprof carries its types itself, so no suffix names one), when either is set. */
static void resource_attrs(in_ctx *c, pc_resource *res, const pc_format_opts *opts)
{
    const char *svc = opts ? (opts->service ? opts->service : opts->app) : NULL;
    size_t nra = (opts && opts->attrs ? opts->n_attrs : 0) + (svc != NULL);
    if (!nra) return;
    res->n_attributes = nra;
    res->attributes = pc_arena_alloc(c->a, nra * sizeof(pc_keyvalue *));
    for (size_t i = 0; i + (svc != NULL) < nra; i++)
        res->attributes[i] = kv_str(c->a, opts->attrs[i].key, opts->attrs[i].value);
    if (svc) res->attributes[nra - 1] = kv_str(c->a, "service.name", svc);
}

/* Sample j of the pprof becomes sample j of every profile, with values[0] = value[i]. */
static int in_samples(in_ctx *c, pc_profile **profs, size_t nt)
{
    const pp_profile *p = c->p;
    int rc;
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

    return 0;
}

/* The scope: the caller's name and version, default_sample_type as an attribute. */
static pc_scope *in_scope(in_ctx *c, const pc_format_opts *opts, int *rc)
{
    const pp_profile *p = c->p;
    /* scope: default_sample_type */
    pc_scope *scope = pc_arena_alloc(c->a, sizeof *scope);
    opentelemetry__proto__common__v1__instrumentation_scope__init(scope);
    if (opts && opts->scope_name)
        scope->name = pc_arena_strndup(c->a, opts->scope_name, strlen(opts->scope_name));
    if (opts && opts->scope_version)
        scope->version = pc_arena_strndup(c->a, opts->scope_version, strlen(opts->scope_version));
    if (!str_ok(c, p->default_sample_type))
        *rc = FAIL(c, "pprof: default_sample_type string index %" PRId64 " out of range",
                   p->default_sample_type);
    if (pstr(c, p->default_sample_type)[0]) {
        scope->n_attributes = 1;
        scope->attributes = pc_arena_alloc(c->a, sizeof(pc_keyvalue *));
        scope->attributes[0] = kv_str(c->a, ATTR_DEFAULT_SAMPLE, pstr(c, p->default_sample_type));
    }
    return scope;
}

static int translate_in(in_ctx *c, pc_batch *b, const pc_format_opts *opts)
{
    const pp_profile *p = c->p;
    if (p->n_string_table > 0 && pc_nz(p->string_table[0])[0] != 0)
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

    if ((rc = in_samples(c, profs, nt)) < 0) return rc;
    pc_scope *scope = in_scope(c, opts, &rc);
    if (rc < 0) return rc;
    pc_scope_profiles *sp = pc_arena_alloc(c->a, sizeof *sp);
    opentelemetry__proto__profiles__v1development__scope_profiles__init(sp);
    sp->scope = scope;
    sp->n_profiles = nt;
    sp->profiles = profs;

    pc_resource *res = pc_arena_alloc(c->a, sizeof *res);
    opentelemetry__proto__resource__v1__resource__init(res);
    resource_attrs(c, res, opts);
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
        /* and the label caches: at most 4 slots per label in each (cap < 4n), key and value,
         * an array entry per two labels, a string index per label */
        est += s->n_label *
               (R16(sizeof(pc_kvu)) + R16(sizeof(pc_anyvalue)) + entry +
                8 * (sizeof(uint64_t) + sizeof(int32_t)) + sizeof(arr_ent) / 2 + sizeof(int64_t));
    }
    for (size_t i = 0; i < p->n_location; i++)
        est += R16(sizeof(pc_location)) + R16(p->location[i]->n_line * sizeof(pc_line *)) +
               p->location[i]->n_line * R16(sizeof(pc_line)) + R16(sizeof(int32_t)) + entry;
    est += p->n_function * (R16(sizeof(pc_function)) + entry);
    est += p->n_mapping * (R16(sizeof(pc_mapping)) + R16(5 * sizeof(int32_t)) + entry +
                           5 * (R16(sizeof(pc_kvu)) + R16(sizeof(pc_anyvalue)) + entry));
    for (size_t i = 0; i < p->n_string_table; i++)
        est += R16(strlen(pc_nz(p->string_table[i])) + 1) + entry;
    /* pc_dict_builder_finish: a snapshot of every table's pointers */
    est += (p->n_string_table + p->n_location + p->n_function + p->n_mapping + 2 * p->n_sample) *
           sizeof(void *);
    return est;
}

/* The pprof message in data: inflated into raw when gzip, capped at max bytes. 0, PC_E2BIG or
 * PC_EBADMSG. */
static int message(const uint8_t *data, size_t len, size_t max, pc_buf *raw, const uint8_t **msg,
                   size_t *mlen, pc_error *e)
{
    *msg = data;
    *mlen = data ? len : 0;
    if (data && pc_is_gzip(data, len)) {
        int rc = pc_gzip_inflate(data, len, max, raw);
        if (rc == PC_E2BIG)
            return pc_error_set(e, PC_E2BIG, "pprof: inflated payload exceeds %zu bytes", max);
        if (rc < 0) return pc_error_set(e, PC_EBADMSG, "pprof: corrupt gzip stream");
        *msg = raw->data;
        *mlen = raw->len;
    } else if (len > max) {
        return pc_error_set(e, PC_E2BIG, "pprof: payload exceeds %zu bytes", max);
    }
    if (*mlen == 0) return pc_error_set(e, PC_EBADMSG, "pprof: empty payload");
    return 0;
}

/* The translation's side tables (string map, id maps, label cache); their bytes. */
static size_t ctx_tables(in_ctx *c)
{
    const pp_profile *p = c->p;
    size_t ns = p->n_string_table ? p->n_string_table : 1, nlabels = 0;
    c->smap = pc_xmalloc(ns * sizeof(int32_t));
    memset(c->smap, 0xff, ns * sizeof(int32_t));
    idmap_init(&c->maps, p->n_mapping);
    idmap_init(&c->funs, p->n_function);
    idmap_init(&c->locs, p->n_location);
    for (size_t i = 0; i < p->n_sample; i++)
        nlabels += p->sample[i]->n_label;
    idmap_init(&c->lattr, nlabels);
    idmap_init(&c->larr, nlabels);
    c->arrs = pc_xmalloc((nlabels / 2 + 1) * sizeof *c->arrs);
    c->aidx = pc_xmalloc((nlabels + 1) * sizeof *c->aidx);
    return ns * sizeof(int32_t) + (nlabels / 2 + 1) * sizeof *c->arrs +
           (nlabels + 1) * sizeof *c->aidx +
           (c->maps.cap + c->funs.cap + c->locs.cap + c->lattr.cap + c->larr.cap) *
               (sizeof(uint64_t) + sizeof(int32_t));
}

static void ctx_free(in_ctx *c)
{
    idmap_free(&c->maps);
    idmap_free(&c->funs);
    idmap_free(&c->locs);
    idmap_free(&c->lattr);
    idmap_free(&c->larr);
    free(c->arrs);
    free(c->aidx);
    free(c->tmp.v);
    free(c->smap);
    pc_dict_builder_free(c->db);
}

int pc_pprof_decode(const uint8_t *data, size_t len, const pc_format_opts *opts, pc_batch **out,
                    pc_error *e)
{
    size_t max = opts && opts->max_bytes ? opts->max_bytes : PC_PPROF_DEFAULT_MAX_BYTES;
    pc_buf raw = {0};
    const uint8_t *msg;
    size_t mlen;
    int rc = message(data, len, max, &raw, &msg, &mlen, e);
    if (rc < 0) {
        pc_buf_free(&raw);
        return rc;
    }

    /* counted before unpack allocates (strings checked for UTF-8, as Pyroscope requires); the
     * estimate bounds the scratch arena, so it is also its one block */
    pc_budget *budget = opts ? opts->budget : NULL;
    pc_proto_scan scan;
    pc_error why = {0};
    rc = pc_proto_scan_message(&perftools__profiles__profile__descriptor, msg, mlen,
                               PC_PROTO_MAX_DEPTH, &scan, &why);
    if (rc < 0) {
        pc_buf_free(&raw);
        /* invalid UTF-8 names its field (the scan's PC_EINVAL); the rest is just undecodable */
        return pc_error_set(e, PC_EBADMSG, "pprof: %s",
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
        return pc_error_set(e, PC_EBADMSG, "pprof: undecodable protobuf");
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
    c.db = pc_dict_builder_from(b->arena, b->req->dictionary);
    size_t side = ctx_tables(&c);
    pc_arena_charge(b->arena, side);
    rc = translate_in(&c, b, opts);
    pc_arena_uncharge(b->arena, side);
    ctx_free(&c);
    pc_arena_free(scratch);
    if (rc < 0) {
        if (!*out) pc_batch_unref(b);
        return rc;
    }
    *out = b;
    return 0;
}
