/* Merging batches into one request with one dictionary (see merge.h). */
#include "pdata/merge.h"

#include <stdlib.h>
#include <string.h>

#include "pdata/dict.h"
#include "pdata/proto_pack.h"
#include "base/alloc.h"
#include "base/hash.h"

/* AnyValue nesting deeper than this is not walked (keys treat it as opaque, marks stop). */
#define MAX_DEPTH 64

/* ---- reachability --------------------------------------------------------------------------- */

enum { U_STR, U_MAP, U_LOC, U_FUN, U_LINK, U_ATTR, U_STACK, U_N };

struct pc_dict_used {
    const pc_dictionary *d;
    uint32_t epoch;
    uint32_t *mark[U_N];
    size_t n[U_N];
    size_t bytes;
};

/* Bytes one repeated field element of payload size n costs on the wire. */
static size_t field_len(size_t n)
{
    return 1 + pc_proto_varint_len(n) + n;
}

pc_dict_used *pc_dict_used_new(const pc_dictionary *d)
{
    pc_dict_used *u = pc_xcalloc(1, sizeof *u);
    u->d = d;
    u->epoch = 1;
    if (!d) return u;
    u->n[U_STR] = d->string_table ? d->n_string_table : 0;
    u->n[U_MAP] = d->mapping_table ? d->n_mapping_table : 0;
    u->n[U_LOC] = d->location_table ? d->n_location_table : 0;
    u->n[U_FUN] = d->function_table ? d->n_function_table : 0;
    u->n[U_LINK] = d->link_table ? d->n_link_table : 0;
    u->n[U_ATTR] = d->attribute_table ? d->n_attribute_table : 0;
    u->n[U_STACK] = d->stack_table ? d->n_stack_table : 0;
    for (int t = 0; t < U_N; t++)
        u->mark[t] = u->n[t] ? pc_xcalloc(u->n[t], sizeof(uint32_t)) : NULL;
    return u;
}

void pc_dict_used_free(pc_dict_used *u)
{
    if (!u) return;
    for (int t = 0; t < U_N; t++)
        free(u->mark[t]);
    free(u);
}

void pc_dict_used_reset(pc_dict_used *u)
{
    u->bytes = 0;
    if (++u->epoch != 0) return;
    /* wrapped after 4G resets: clear for real once */
    for (int t = 0; t < U_N; t++)
        if (u->mark[t]) memset(u->mark[t], 0, u->n[t] * sizeof(uint32_t));
    u->epoch = 1;
}

size_t pc_dict_used_bytes(const pc_dict_used *u)
{
    return u->bytes;
}

/* True the first time idx of table t is marked in this epoch. Index 0 (the zero element) and
 * out-of-range indices are never marked. */
static bool mark(pc_dict_used *u, int t, int32_t idx)
{
    if (idx <= 0 || (size_t)idx >= u->n[t] || u->mark[t][idx] == u->epoch) return false;
    u->mark[t][idx] = u->epoch;
    return true;
}

static size_t msg_len(const void *m)
{
    return m ? protobuf_c_message_get_packed_size(m) : 0;
}

static void mark_str(pc_dict_used *u, int32_t i)
{
    if (!mark(u, U_STR, i)) return;
    const char *s = u->d->string_table[i];
    u->bytes += field_len(s ? strlen(s) : 0);
}

static void mark_any(pc_dict_used *u, const pc_anyvalue *v, int depth);

static void mark_kv(pc_dict_used *u, const pc_keyvalue *kv, int depth)
{
    if (!kv) return;
    mark_str(u, kv->key_strindex);
    mark_any(u, kv->value, depth);
}

static void mark_any(pc_dict_used *u, const pc_anyvalue *v, int depth)
{
    if (!v || depth > MAX_DEPTH) return;
    switch (v->value_case) {
    case PC_AV(STRING_VALUE_STRINDEX): mark_str(u, v->string_value_strindex); break;
    case PC_AV(ARRAY_VALUE):
        if (v->array_value)
            for (size_t i = 0; i < v->array_value->n_values; i++)
                mark_any(u, v->array_value->values[i], depth + 1);
        break;
    case PC_AV(KVLIST_VALUE):
        if (v->kvlist_value)
            for (size_t i = 0; i < v->kvlist_value->n_values; i++)
                mark_kv(u, v->kvlist_value->values[i], depth + 1);
        break;
    default: break;
    }
}

static void mark_attr(pc_dict_used *u, int32_t i)
{
    if (!mark(u, U_ATTR, i)) return;
    const pc_kvu *kv = u->d->attribute_table[i];
    if (!kv) return;
    u->bytes += field_len(msg_len(kv));
    mark_str(u, kv->key_strindex);
    mark_str(u, kv->unit_strindex);
    mark_any(u, kv->value, 0);
}

static void mark_attrs(pc_dict_used *u, const int32_t *v, size_t n)
{
    if (!v) return;
    for (size_t i = 0; i < n; i++)
        mark_attr(u, v[i]);
}

static void mark_fun(pc_dict_used *u, int32_t i)
{
    if (!mark(u, U_FUN, i)) return;
    const pc_function *f = u->d->function_table[i];
    if (!f) return;
    u->bytes += field_len(msg_len(f));
    mark_str(u, f->name_strindex);
    mark_str(u, f->system_name_strindex);
    mark_str(u, f->filename_strindex);
}

static void mark_mapping(pc_dict_used *u, int32_t i)
{
    if (!mark(u, U_MAP, i)) return;
    const pc_mapping *m = u->d->mapping_table[i];
    if (!m) return;
    u->bytes += field_len(msg_len(m));
    mark_str(u, m->filename_strindex);
    mark_attrs(u, m->attribute_indices, m->n_attribute_indices);
}

static void mark_loc(pc_dict_used *u, int32_t i)
{
    if (!mark(u, U_LOC, i)) return;
    const pc_location *l = u->d->location_table[i];
    if (!l) return;
    u->bytes += field_len(msg_len(l));
    mark_mapping(u, l->mapping_index);
    if (l->lines)
        for (size_t j = 0; j < l->n_lines; j++)
            if (l->lines[j]) mark_fun(u, l->lines[j]->function_index);
    mark_attrs(u, l->attribute_indices, l->n_attribute_indices);
}

static void mark_stack(pc_dict_used *u, int32_t i)
{
    if (!mark(u, U_STACK, i)) return;
    const pc_stack *s = u->d->stack_table[i];
    if (!s) return;
    u->bytes += field_len(msg_len(s));
    if (s->location_indices)
        for (size_t j = 0; j < s->n_location_indices; j++)
            mark_loc(u, s->location_indices[j]);
}

static void mark_link(pc_dict_used *u, int32_t i)
{
    if (!mark(u, U_LINK, i)) return;
    if (u->d->link_table[i]) u->bytes += field_len(msg_len(u->d->link_table[i]));
}

static void mark_vt(pc_dict_used *u, const pc_value_type *vt)
{
    if (!vt) return;
    mark_str(u, vt->type_strindex);
    mark_str(u, vt->unit_strindex);
}

static void mark_sample(pc_dict_used *u, const pc_sample *s)
{
    if (!s) return;
    mark_stack(u, s->stack_index);
    mark_attrs(u, s->attribute_indices, s->n_attribute_indices);
    mark_link(u, s->link_index);
}

static void mark_profile_head(pc_dict_used *u, const pc_profile *p)
{
    mark_vt(u, p->sample_type);
    mark_vt(u, p->period_type);
    mark_attrs(u, p->attribute_indices, p->n_attribute_indices);
}

void pc_dict_used_profile(pc_dict_used *u, const pc_profile *p, size_t from, size_t to)
{
    if (!p) return;
    mark_profile_head(u, p);
    size_t n = pc_profile_n_samples(p);
    if (to > n) to = n;
    for (size_t i = from; i < to; i++)
        mark_sample(u, p->samples[i]);
}

/* What a slice reaches: its range, or its picked samples. */
static void mark_slice(pc_dict_used *u, const pc_profile *p, const pc_merge_slice *sl)
{
    if (!p) return;
    if (!sl->pick) {
        pc_dict_used_profile(u, p, sl->from, sl->to);
        return;
    }
    mark_profile_head(u, p);
    size_t n = pc_profile_n_samples(p);
    for (size_t k = 0; k < sl->n_pick; k++)
        if (sl->pick[k] < n) mark_sample(u, p->samples[sl->pick[k]]);
}

void pc_dict_used_keyvalues(pc_dict_used *u, pc_keyvalue *const *kv, size_t n)
{
    if (!kv) return;
    for (size_t i = 0; i < n; i++)
        mark_kv(u, kv[i], 0);
}

/* A copy of table v (n entries) keeping element 0 and the marked entries, NULL elsewhere. */
static void *view_table(const pc_dict_used *u, int t, void *const *v)
{
    size_t n = u->n[t];
    if (!n) return NULL;
    void **o = pc_xcalloc(n, sizeof(void *));
    o[0] = v[0];
    for (size_t i = 1; i < n; i++)
        if (u->mark[t][i] == u->epoch) o[i] = v[i];
    return o;
}

pc_dictionary *pc_dict_used_view(const pc_dict_used *u)
{
    pc_dictionary *d = pc_xcalloc(1, sizeof *d);
    opentelemetry__proto__profiles__v1development__profiles_dictionary__init(d);
    const pc_dictionary *s = u->d;
    if (!s) return d;
    d->n_string_table = u->n[U_STR];
    d->string_table = view_table(u, U_STR, (void *const *)s->string_table);
    d->n_mapping_table = u->n[U_MAP];
    d->mapping_table = view_table(u, U_MAP, (void *const *)s->mapping_table);
    d->n_location_table = u->n[U_LOC];
    d->location_table = view_table(u, U_LOC, (void *const *)s->location_table);
    d->n_function_table = u->n[U_FUN];
    d->function_table = view_table(u, U_FUN, (void *const *)s->function_table);
    d->n_link_table = u->n[U_LINK];
    d->link_table = view_table(u, U_LINK, (void *const *)s->link_table);
    d->n_attribute_table = u->n[U_ATTR];
    d->attribute_table = view_table(u, U_ATTR, (void *const *)s->attribute_table);
    d->n_stack_table = u->n[U_STACK];
    d->stack_table = view_table(u, U_STACK, (void *const *)s->stack_table);
    return d;
}

void pc_dict_used_view_free(pc_dictionary *d)
{
    if (!d) return;
    free(d->string_table);
    free(d->mapping_table);
    free(d->location_table);
    free(d->function_table);
    free(d->link_table);
    free(d->attribute_table);
    free(d->stack_table);
    free(d);
}

/* ---- content keys of resources and scopes ------------------------------------------------- */

static void key_bytes(pc_buf *k, const void *p, size_t n)
{
    uint32_t len = (uint32_t)n;
    pc_buf_append(k, &len, sizeof len);
    if (n) pc_buf_append(k, p, n);
}

static void key_count(pc_buf *k, size_t n)
{
    uint64_t v = n;
    pc_buf_append(k, &v, sizeof v);
}

static void key_str(pc_buf *k, const char *s)
{
    key_bytes(k, s ? s : "", s ? strlen(s) : 0);
}

static void key_tag(pc_buf *k, char t)
{
    pc_buf_append(k, &t, 1);
}

static void key_any(pc_buf *k, const pc_dictionary *d, const pc_anyvalue *v, int depth);

static void key_kv(pc_buf *k, const pc_dictionary *d, const pc_keyvalue *kv, int depth)
{
    if (!kv) {
        key_tag(k, '-');
        return;
    }
    key_str(k, pc_keyvalue_key(d, kv));
    key_any(k, d, kv->value, depth);
}

/* Strings compare by content whether inline or through the string table. */
static void key_any(pc_buf *k, const pc_dictionary *d, const pc_anyvalue *v, int depth)
{
    if (!v || depth > MAX_DEPTH) {
        key_tag(k, '0');
        return;
    }
    switch (v->value_case) {
    case PC_AV(STRING_VALUE):
        key_tag(k, 's');
        key_str(k, v->string_value);
        break;
    case PC_AV(STRING_VALUE_STRINDEX):
        key_tag(k, 's');
        key_str(k, pc_dict_str(d, v->string_value_strindex));
        break;
    case PC_AV(BOOL_VALUE): key_tag(k, v->bool_value ? 'T' : 'F'); break;
    case PC_AV(INT_VALUE):
        key_tag(k, 'i');
        pc_buf_append(k, &v->int_value, sizeof v->int_value);
        break;
    case PC_AV(DOUBLE_VALUE):
        key_tag(k, 'd');
        pc_buf_append(k, &v->double_value, sizeof v->double_value);
        break;
    case PC_AV(BYTES_VALUE):
        key_tag(k, 'y');
        key_bytes(k, v->bytes_value.data, v->bytes_value.len);
        break;
    case PC_AV(ARRAY_VALUE): {
        size_t n = v->array_value ? v->array_value->n_values : 0;
        key_tag(k, 'a');
        key_count(k, n);
        for (size_t i = 0; i < n; i++)
            key_any(k, d, v->array_value->values[i], depth + 1);
        break;
    }
    case PC_AV(KVLIST_VALUE): {
        size_t n = v->kvlist_value ? v->kvlist_value->n_values : 0;
        key_tag(k, 'k');
        key_count(k, n);
        for (size_t i = 0; i < n; i++)
            key_kv(k, d, v->kvlist_value->values[i], depth + 1);
        break;
    }
    default: key_tag(k, '0'); break;
    }
}

typedef struct span {
    size_t off, len;
    const uint8_t *base;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->base + x->off, y->base + y->off, n);
    if (c) return c;
    return (x->len > y->len) - (x->len < y->len);
}

/* Attributes as a set: each is keyed on its own, and the keys are sorted. */
static void key_attrs(pc_buf *k, const pc_dictionary *d, pc_keyvalue *const *kv, size_t n)
{
    if (!kv) n = 0;
    key_count(k, n);
    if (!n) return;
    pc_buf tmp = {0};
    span *sp = pc_xmalloc(n * sizeof *sp);
    for (size_t i = 0; i < n; i++) {
        sp[i].off = tmp.len;
        key_kv(&tmp, d, kv[i], 0);
        sp[i].len = tmp.len - sp[i].off;
    }
    for (size_t i = 0; i < n; i++)
        sp[i].base = tmp.data;
    qsort(sp, n, sizeof *sp, span_cmp);
    for (size_t i = 0; i < n; i++)
        key_bytes(k, tmp.data + sp[i].off, sp[i].len);
    free(sp);
    pc_buf_free(&tmp);
}

static void key_resource(pc_buf *k, const pc_dictionary *d, const pc_resource_profiles *rp)
{
    k->len = 0;
    key_str(k, rp->schema_url);
    const pc_resource *r = rp->resource;
    key_tag(k, r ? 'r' : '-');
    if (!r) return;
    key_count(k, r->dropped_attributes_count);
    key_attrs(k, d, r->attributes, r->n_attributes);
    size_t ne = r->entity_refs ? r->n_entity_refs : 0;
    key_count(k, ne);
    for (size_t i = 0; i < ne; i++) {
        const ProtobufCMessage *e = (const ProtobufCMessage *)r->entity_refs[i];
        size_t n = msg_len(e);
        uint8_t *buf = pc_xmalloc(n + 1);
        if (e) protobuf_c_message_pack(e, buf);
        key_bytes(k, buf, n);
        free(buf);
    }
}

static void key_scope(pc_buf *k, const pc_dictionary *d, const pc_scope_profiles *sp)
{
    k->len = 0;
    key_str(k, sp->schema_url);
    const pc_scope *s = sp->scope;
    key_tag(k, s ? 's' : '-');
    if (!s) return;
    key_str(k, s->name);
    key_str(k, s->version);
    key_count(k, s->dropped_attributes_count);
    key_attrs(k, d, s->attributes, s->n_attributes);
}

/* Fixed, not seeded: pc_attrs_hash keys Kafka messages, which must agree across processes. */
static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t pc_attrs_hash(const pc_dictionary *d, pc_keyvalue *const *kv, size_t n)
{
    pc_buf k = {0};
    key_attrs(&k, d, kv, n);
    uint64_t h = hash_bytes(k.data, k.len);
    pc_buf_free(&k);
    return h;
}

/* ---- merger --------------------------------------------------------------------------------- */

/* What resource and scope groups are found by: the hash and bytes of their merge key. */
typedef struct gkey {
    uint64_t h;
    uint8_t *key;
    size_t keylen;
} gkey;

/* An index over a group array: element + 1 per slot, 0 empty; cap 0 or a power of two. Without
 * it each new group was a scan of all the groups before it: a request of many distinct resources
 * was quadratic to merge. */
typedef struct gindex {
    uint32_t *slots;
    size_t cap;
} gindex;

typedef struct sgroup {
    gkey k; /* first: find_group treats a group array as gkey-led elements */
    pc_scope_profiles *sp;
    pc_profile **pv;
    size_t n, cap;
} sgroup;

typedef struct rgroup {
    gkey k; /* first, as in sgroup */
    pc_resource_profiles *rp;
    sgroup *sg;
    size_t n, cap;
    gindex ix; /* over sg */
} rgroup;

struct pc_merger {
    pc_batch *out;
    pc_dict_builder *db;
    rgroup *rg;
    size_t n, cap;
    gindex ix;  /* over rg */
    bool apart; /* each resource added is a group of its own */
    size_t samples;
    pc_buf kbuf;
};

pc_merger *pc_merger_new(void)
{
    pc_merger *m = pc_xcalloc(1, sizeof *m);
    m->out = pc_batch_new();
    m->db = pc_dict_builder_from(m->out->arena, pc_batch_req(m->out)->dictionary);
    return m;
}

void pc_merger_keep_resources_apart(pc_merger *m)
{
    m->apart = true;
}

size_t pc_merger_bytes(const pc_merger *m)
{
    return pc_arena_size(m->out->arena);
}

size_t pc_merger_samples(const pc_merger *m)
{
    return m->samples;
}

/* A deep copy of any message into the arena (through the wire format: exact and short). */
static void *copy_msg(pc_arena *a, const void *msg)
{
    const ProtobufCMessage *src = msg;
    size_t n = protobuf_c_message_get_packed_size(src);
    uint8_t *buf = pc_xmalloc(n + 1);
    protobuf_c_message_pack(src, buf);
    ProtobufCMessage *c = protobuf_c_message_unpack(src->descriptor, pc_arena_allocator(a), n, buf);
    free(buf);
    if (!c) abort(); /* we just encoded it */
    return c;
}

static char *copy_str(pc_arena *a, const char *s)
{
    return s && *s ? pc_arena_strndup(a, s, strlen(s)) : (char *)protobuf_c_empty_string;
}

static void remap_kvs(const pc_dict_remap *map, pc_keyvalue **kv, size_t n)
{
    if (!kv) return;
    for (size_t i = 0; i < n; i++)
        pc_dict_remap_keyvalue(map, kv[i]);
}

static gkey *gkey_at(void *v, size_t size, size_t i)
{
    return (gkey *)((char *)v + i * size);
}

/* Rebuild ix over the n groups of v at twice the size. */
static void gindex_grow(gindex *ix, void *v, size_t n, size_t size)
{
    free(ix->slots);
    ix->cap = ix->cap ? ix->cap * 2 : 16;
    ix->slots = pc_xcalloc(ix->cap, sizeof *ix->slots);
    for (size_t i = 0; i < n; i++) {
        size_t j = (size_t)gkey_at(v, size, i)->h & (ix->cap - 1);
        while (ix->slots[j])
            j = (j + 1) & (ix->cap - 1);
        ix->slots[j] = (uint32_t)i + 1;
    }
}

/* The group of *v (n used, cap allocated, elements of size bytes, each led by a gkey, indexed by
 * ix) whose key is `key`; a new zeroed one with a copy of the key when there is none (*added
 * set). The hash is seeded: merge keys are the client's attributes. */
static void *find_group(void **v, size_t *n, size_t *cap, size_t size, gindex *ix,
                        const pc_buf *key, bool *added)
{
    uint64_t h = pc_hash_mem(key->data, key->len);
    if ((*n + 1) * 4 > ix->cap * 3) gindex_grow(ix, *v, *n, size);
    size_t j = (size_t)h & (ix->cap - 1);
    for (; ix->slots[j]; j = (j + 1) & (ix->cap - 1)) {
        gkey *k = gkey_at(*v, size, ix->slots[j] - 1);
        if (k->h == h && k->keylen == key->len && !memcmp(k->key, key->data, k->keylen)) {
            *added = false;
            return k;
        }
    }
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        *v = pc_xrealloc(*v, *cap * size);
    }
    ix->slots[j] = (uint32_t)*n + 1;
    gkey *k = gkey_at(*v, size, (*n)++);
    memset(k, 0, size);
    k->h = h;
    k->keylen = key->len;
    k->key = pc_xmalloc(k->keylen + 1);
    memcpy(k->key, key->data, k->keylen);
    *added = true;
    return k;
}

static rgroup *find_resource(pc_merger *m, const pc_dictionary *d, const pc_resource_profiles *rp,
                             const pc_dict_remap *map)
{
    key_resource(&m->kbuf, d, rp);
    if (m->apart) key_count(&m->kbuf, m->n); /* a key no earlier group has */
    bool added;
    void *v = m->rg;
    rgroup *g = find_group(&v, &m->n, &m->cap, sizeof *g, &m->ix, &m->kbuf, &added);
    m->rg = v;
    if (!added) return g;
    pc_arena *a = m->out->arena;
    g->rp = pc_arena_alloc(a, sizeof *g->rp);
    opentelemetry__proto__profiles__v1development__resource_profiles__init(g->rp);
    g->rp->schema_url = copy_str(a, rp->schema_url);
    if (rp->resource) {
        g->rp->resource = copy_msg(a, rp->resource);
        remap_kvs(map, g->rp->resource->attributes, g->rp->resource->n_attributes);
    }
    return g;
}

static sgroup *find_scope(pc_merger *m, rgroup *rg, const pc_dictionary *d,
                          const pc_scope_profiles *sp, const pc_dict_remap *map)
{
    key_scope(&m->kbuf, d, sp);
    bool added;
    void *v = rg->sg;
    sgroup *g = find_group(&v, &rg->n, &rg->cap, sizeof *g, &rg->ix, &m->kbuf, &added);
    rg->sg = v;
    if (!added) return g;
    pc_arena *a = m->out->arena;
    g->sp = pc_arena_alloc(a, sizeof *g->sp);
    opentelemetry__proto__profiles__v1development__scope_profiles__init(g->sp);
    g->sp->schema_url = copy_str(a, sp->schema_url);
    if (sp->scope) {
        g->sp->scope = copy_msg(a, sp->scope);
        remap_kvs(map, g->sp->scope->attributes, g->sp->scope->n_attributes);
    }
    return g;
}

static pc_value_type *copy_vt(pc_arena *a, const pc_value_type *vt)
{
    if (!vt) return NULL;
    pc_value_type *o = pc_arena_alloc(a, sizeof *o);
    opentelemetry__proto__profiles__v1development__value_type__init(o);
    o->type_strindex = vt->type_strindex;
    o->unit_strindex = vt->unit_strindex;
    return o;
}

static void *dup_arr(pc_arena *a, const void *v, size_t n, size_t size)
{
    return v && n ? pc_arena_memdup(a, v, n * size) : NULL;
}

static ProtobufCBinaryData copy_bytes(pc_arena *a, ProtobufCBinaryData b)
{
    ProtobufCBinaryData o = {0, NULL};
    if (b.data && b.len) {
        o.data = pc_arena_memdup(a, b.data, b.len);
        o.len = b.len;
    }
    return o;
}

/* Sample i of p (index i of a slice's range or pick list), or NULL. */
static const pc_sample *slice_sample(const pc_profile *p, const pc_merge_slice *sl, size_t k)
{
    size_t i = sl->pick ? sl->pick[k] : k;
    return p->samples && i < p->n_samples ? p->samples[i] : NULL;
}

/* The slice's samples of p (its range [from, to), or its picks), copied into a (indices still
 * in p's dictionary space). */
static pc_profile *copy_profile(pc_arena *a, const pc_profile *p, const pc_merge_slice *sl,
                                size_t from, size_t to)
{
    pc_profile *o = pc_arena_alloc(a, sizeof *o);
    opentelemetry__proto__profiles__v1development__profile__init(o);
    o->sample_type = copy_vt(a, p->sample_type);
    o->period_type = copy_vt(a, p->period_type);
    o->time_unix_nano = p->time_unix_nano;
    o->duration_nano = p->duration_nano;
    o->period = p->period;
    o->profile_id = copy_bytes(a, p->profile_id);
    o->dropped_attributes_count = p->dropped_attributes_count;
    bool first = sl->pick ? sl->n_pick && sl->pick[0] == 0 : from == 0;
    if (first) { /* the original payload travels once, with the part holding sample 0 */
        o->original_payload_format = copy_str(a, p->original_payload_format);
        o->original_payload = copy_bytes(a, p->original_payload);
    }
    o->attribute_indices =
        dup_arr(a, p->attribute_indices, p->n_attribute_indices, sizeof(int32_t));
    o->n_attribute_indices = o->attribute_indices ? p->n_attribute_indices : 0;
    size_t n = sl->pick ? sl->n_pick : to - from;
    if (!n) return o;
    pc_sample *ss = pc_arena_alloc(a, n * sizeof *ss);
    o->samples = pc_arena_alloc(a, n * sizeof *o->samples);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const pc_sample *s = slice_sample(p, sl, sl->pick ? i : from + i);
        if (!s) continue;
        pc_sample *c = &ss[k];
        opentelemetry__proto__profiles__v1development__sample__init(c);
        c->stack_index = s->stack_index;
        c->link_index = s->link_index;
        c->attribute_indices =
            dup_arr(a, s->attribute_indices, s->n_attribute_indices, sizeof(int32_t));
        c->n_attribute_indices = c->attribute_indices ? s->n_attribute_indices : 0;
        c->values = dup_arr(a, s->values, s->n_values, sizeof(int64_t));
        c->n_values = c->values ? s->n_values : 0;
        c->timestamps_unix_nano =
            dup_arr(a, s->timestamps_unix_nano, s->n_timestamps_unix_nano, sizeof(uint64_t));
        c->n_timestamps_unix_nano = c->timestamps_unix_nano ? s->n_timestamps_unix_nano : 0;
        o->samples[k++] = c;
    }
    o->n_samples = k;
    return o;
}

static void group_push(sgroup *g, pc_profile *p)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 8;
        g->pv = pc_xrealloc(g->pv, g->cap * sizeof *g->pv);
    }
    g->pv[g->n++] = p;
}

/* Where the previous slice went: consecutive slices of one scope skip the key lookups. */
typedef struct cursor {
    size_t r, s;
    size_t rgi; /* an index: m->rg may move when it grows */
    sgroup *sg; /* stable until its resource group gets a new scope, which resets it */
    bool valid;
} cursor;

static void add_slice(pc_merger *m, const pc_request *req, const pc_dict_remap *map,
                      const pc_merge_slice *sl, cursor *cur)
{
    const pc_dictionary *d = req->dictionary;
    if (sl->r >= req->n_resource_profiles || !req->resource_profiles[sl->r]) return;
    const pc_resource_profiles *rp = req->resource_profiles[sl->r];
    if (!rp->scope_profiles || sl->s >= rp->n_scope_profiles || !rp->scope_profiles[sl->s]) return;
    const pc_scope_profiles *sp = rp->scope_profiles[sl->s];
    if (!sp->profiles || sl->p >= sp->n_profiles || !sp->profiles[sl->p]) return;
    const pc_profile *p = sp->profiles[sl->p];
    size_t to = sl->to < pc_profile_n_samples(p) ? sl->to : pc_profile_n_samples(p);
    size_t from = sl->from < to ? sl->from : to;

    if (!cur->valid || cur->r != sl->r) {
        rgroup *g = find_resource(m, d, rp, map);
        cur->rgi = (size_t)(g - m->rg);
        cur->r = sl->r;
        cur->valid = false;
    }
    rgroup *rg = &m->rg[cur->rgi];
    if (!cur->valid || cur->s != sl->s) {
        cur->sg = NULL;
        cur->s = sl->s;
    }
    if (!cur->sg) cur->sg = find_scope(m, rg, d, sp, map);
    cur->valid = true;

    pc_profile *o = copy_profile(m->out->arena, p, sl, from, to);
    pc_dict_remap_profile(map, o);
    group_push(cur->sg, o);
    m->samples += o->n_samples;
}

void pc_merger_add(pc_merger *m, const pc_batch *src, const pc_merge_slice *slices, size_t n)
{
    const pc_request *req = pc_batch_req(src);
    const pc_dictionary *d = req->dictionary;
    pc_dict_remap map;
    cursor cur = {0};
    if (!slices) {
        pc_dict_import(m->db, d, &map);
        pc_profile_iter it = {0};
        while (pc_profile_next(req, &it)) {
            pc_merge_slice sl = {
                .r = it.r, .s = it.s, .p = it.p, .to = pc_profile_n_samples(it.prof)};
            add_slice(m, req, &map, &sl, &cur);
        }
        pc_dict_remap_free(&map);
        return;
    }

    /* only what the slices reach: mark it, then import a view holding just those entries */
    pc_dict_used *u = pc_dict_used_new(d);
    for (size_t i = 0; i < n; i++) {
        const pc_merge_slice *sl = &slices[i];
        if (sl->r >= req->n_resource_profiles || !req->resource_profiles[sl->r]) continue;
        const pc_resource_profiles *rp = req->resource_profiles[sl->r];
        if (rp->resource)
            pc_dict_used_keyvalues(u, rp->resource->attributes, rp->resource->n_attributes);
        if (!rp->scope_profiles || sl->s >= rp->n_scope_profiles || !rp->scope_profiles[sl->s])
            continue;
        const pc_scope_profiles *sp = rp->scope_profiles[sl->s];
        if (sp->scope) pc_dict_used_keyvalues(u, sp->scope->attributes, sp->scope->n_attributes);
        if (!sp->profiles || sl->p >= sp->n_profiles) continue;
        mark_slice(u, sp->profiles[sl->p], sl);
    }
    pc_dictionary *view = pc_dict_used_view(u);
    pc_dict_import(m->db, view, &map);
    pc_dict_used_view_free(view);
    pc_dict_used_free(u);
    for (size_t i = 0; i < n; i++)
        add_slice(m, req, &map, &slices[i], &cur);
    pc_dict_remap_free(&map);
}

pc_batch *pc_merger_finish(pc_merger *m)
{
    pc_batch *out = m->out;
    pc_arena *a = out->arena;
    pc_request *req = pc_batch_req(out);
    req->n_resource_profiles = m->n;
    req->resource_profiles = m->n ? pc_arena_alloc(a, m->n * sizeof(pc_resource_profiles *)) : NULL;
    for (size_t i = 0; i < m->n; i++) {
        rgroup *rg = &m->rg[i];
        rg->rp->n_scope_profiles = rg->n;
        if (rg->n) rg->rp->scope_profiles = pc_arena_alloc(a, rg->n * sizeof(pc_scope_profiles *));
        for (size_t j = 0; j < rg->n; j++) {
            sgroup *sg = &rg->sg[j];
            sg->sp->n_profiles = sg->n;
            sg->sp->profiles = dup_arr(a, sg->pv, sg->n, sizeof(pc_profile *));
            rg->rp->scope_profiles[j] = sg->sp;
            free(sg->pv);
            free(sg->k.key);
        }
        req->resource_profiles[i] = rg->rp;
        free(rg->sg);
        free(rg->ix.slots);
        free(rg->k.key);
    }
    req->dictionary = pc_dict_builder_finish(m->db);
    pc_dict_builder_free(m->db);
    pc_buf_free(&m->kbuf);
    free(m->rg);
    free(m->ix.slots);
    free(m);
    return out;
}

/* ---- pruning -------------------------------------------------------------------------------- */

void pc_request_prune(pc_request *r)
{
    size_t nr = 0;
    for (size_t i = 0; r->resource_profiles && i < r->n_resource_profiles; i++) {
        pc_resource_profiles *rp = r->resource_profiles[i];
        if (!rp) continue;
        size_t ns = 0;
        for (size_t j = 0; rp->scope_profiles && j < rp->n_scope_profiles; j++) {
            pc_scope_profiles *sp = rp->scope_profiles[j];
            if (!sp) continue;
            size_t np = 0;
            for (size_t k = 0; sp->profiles && k < sp->n_profiles; k++)
                if (sp->profiles[k]) sp->profiles[np++] = sp->profiles[k];
            sp->n_profiles = np;
            if (np) rp->scope_profiles[ns++] = sp;
        }
        rp->n_scope_profiles = ns;
        if (ns) r->resource_profiles[nr++] = rp;
    }
    r->n_resource_profiles = nr;
}
