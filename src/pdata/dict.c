/* Dictionary builder: content-keyed interning with open-addressing hash tables (see dict.h). */
#include "pdata/dict.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"

enum { T_STR, T_MAP, T_LOC, T_FUN, T_LINK, T_ATTR, T_STACK, T_COUNT };

typedef struct slot {
    uint32_t h;
    int32_t idx; /* -1 = empty */
} slot;

typedef struct table {
    void **v; /* entries (arena-owned), index = position */
    size_t n, cap;
    slot *s; /* hash slots (malloc-owned), cap a power of two */
    size_t used, scap;
} table;

struct pc_dict_builder {
    pc_arena *a;
    table t[T_COUNT];
    int32_t *scratch; /* import: rewritten index lists */
    size_t scratch_cap;
    size_t heap; /* bytes of the malloc'd tables, charged to the arena's budget */
};

/* The tables live as long as the builder, which lives as long as a decode: their memory counts
 * against the decode's budget like the arena's (docs/limits.md). */
static void heap_account(pc_dict_builder *db, size_t added, size_t freed)
{
    if (added) pc_arena_charge(db->a, added);
    if (freed) pc_arena_uncharge(db->a, freed);
    db->heap += added - freed;
}

/* ---- hashing ---------------------------------------------------------------------------- */

/* Entries hash with the process's seeded hash (base/hash.h): their contents are the client's, and
 * with a fixed hash a client could pick entries that all share one probe run. A field sequence is
 * fed as words; variable-length runs carry their length, so two entries of different shapes never
 * feed the same words. */
static inline void mix(pc_hash *h, uint64_t v)
{
    pc_hash_word(h, v);
}

static inline void mix_bytes(pc_hash *h, const void *p, size_t n)
{
    pc_hash_bytes(h, p, n);
}

static inline void mix_i32s(pc_hash *h, const int32_t *v, size_t n)
{
    pc_hash_bytes(h, v, n * sizeof(int32_t));
}

static inline uint32_t fold(uint64_t h)
{
    return (uint32_t)(h ^ (h >> 32));
}

static void h_any(pc_hash *h, const pc_anyvalue *v)
{
    int c = v ? (int)v->value_case : 0;
    mix(h, (uint64_t)c);
    if (!v) return;
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE: {
        const char *s = pc_nz(v->string_value);
        mix_bytes(h, s, strlen(s));
        return;
    }
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
        mix(h, v->bool_value ? 1 : 0);
        return;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
        mix(h, (uint64_t)v->int_value);
        return;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE: {
        uint64_t bits;
        memcpy(&bits, &v->double_value, sizeof bits);
        mix(h, bits);
        return;
    }
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE:
        if (!v->array_value) {
            mix(h, 0);
            return;
        }
        mix(h, v->array_value->n_values);
        for (size_t i = 0; i < v->array_value->n_values; i++)
            h_any(h, v->array_value->values[i]);
        return;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE:
        if (!v->kvlist_value) {
            mix(h, 0);
            return;
        }
        mix(h, v->kvlist_value->n_values);
        for (size_t i = 0; i < v->kvlist_value->n_values; i++) {
            const pc_keyvalue *kv = v->kvlist_value->values[i];
            if (!kv) {
                mix(h, 0);
                continue;
            }
            const char *k = pc_nz(kv->key);
            mix_bytes(h, k, strlen(k));
            mix(h, (uint64_t)kv->key_strindex);
            h_any(h, kv->value);
        }
        return;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE:
        mix_bytes(h, v->bytes_value.data, v->bytes_value.len);
        return;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX:
        mix(h, (uint64_t)v->string_value_strindex);
        return;
    default: return;
    }
}

static bool eq_any(const pc_anyvalue *a, const pc_anyvalue *b);

static bool eq_kv(const pc_keyvalue *a, const pc_keyvalue *b)
{
    if (!a || !b) return a == b;
    return strcmp(pc_nz(a->key), pc_nz(b->key)) == 0 && a->key_strindex == b->key_strindex &&
           eq_any(a->value, b->value);
}

static bool eq_any(const pc_anyvalue *a, const pc_anyvalue *b)
{
    int ca = a ? (int)a->value_case : 0, cb = b ? (int)b->value_case : 0;
    if (ca != cb) return false;
    if (!a || !b) return true; /* both empty */
    switch (a->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        return strcmp(pc_nz(a->string_value), pc_nz(b->string_value)) == 0;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE:
        return !a->bool_value == !b->bool_value;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE:
        return a->int_value == b->int_value;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE:
        return memcmp(&a->double_value, &b->double_value, sizeof(double)) == 0;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE: {
        size_t na = a->array_value ? a->array_value->n_values : 0;
        size_t nb = b->array_value ? b->array_value->n_values : 0;
        if (na != nb) return false;
        for (size_t i = 0; i < na; i++)
            if (!eq_any(a->array_value->values[i], b->array_value->values[i])) return false;
        return true;
    }
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE: {
        size_t na = a->kvlist_value ? a->kvlist_value->n_values : 0;
        size_t nb = b->kvlist_value ? b->kvlist_value->n_values : 0;
        if (na != nb) return false;
        for (size_t i = 0; i < na; i++)
            if (!eq_kv(a->kvlist_value->values[i], b->kvlist_value->values[i])) return false;
        return true;
    }
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE:
        return a->bytes_value.len == b->bytes_value.len &&
               (a->bytes_value.len == 0 ||
                memcmp(a->bytes_value.data, b->bytes_value.data, a->bytes_value.len) == 0);
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX:
        return a->string_value_strindex == b->string_value_strindex;
    default: return true;
    }
}

/* Links compare as 16 + 8 bytes, zero-padded: an empty-bytes zero Link equals the canonical one. */
static void link_canon(const pc_link *l, uint8_t t[16], uint8_t s[8])
{
    memset(t, 0, 16);
    memset(s, 0, 8);
    if (l->trace_id.data) memcpy(t, l->trace_id.data, l->trace_id.len < 16 ? l->trace_id.len : 16);
    if (l->span_id.data) memcpy(s, l->span_id.data, l->span_id.len < 8 ? l->span_id.len : 8);
}

/* Keys used for lookups of the types that are not stored as themselves. */
typedef struct str_key {
    const char *s;
    size_t len;
} str_key;
typedef struct stack_key {
    const int32_t *v;
    size_t n;
} stack_key;

static void hash_fields(pc_hash *h, int t, const void *e)
{
    switch (t) {
    case T_STR: {
        const str_key *k = e;
        mix_bytes(h, k->s, k->len);
        return;
    }
    case T_FUN: {
        const pc_function *f = e;
        mix(h, (uint64_t)(uint32_t)f->name_strindex);
        mix(h, (uint64_t)(uint32_t)f->system_name_strindex);
        mix(h, (uint64_t)(uint32_t)f->filename_strindex);
        mix(h, (uint64_t)f->start_line);
        return;
    }
    case T_MAP: {
        const pc_mapping *m = e;
        mix(h, m->memory_start);
        mix(h, m->memory_limit);
        mix(h, m->file_offset);
        mix(h, (uint64_t)(uint32_t)m->filename_strindex);
        mix_i32s(h, m->attribute_indices, m->n_attribute_indices);
        return;
    }
    case T_LOC: {
        const pc_location *l = e;
        mix(h, (uint64_t)(uint32_t)l->mapping_index);
        mix(h, l->address);
        mix(h, l->n_lines);
        for (size_t i = 0; i < l->n_lines; i++) {
            const pc_line *ln = l->lines[i];
            mix(h, ln ? (uint64_t)(uint32_t)ln->function_index : 0);
            mix(h, ln ? (uint64_t)ln->line : 0);
            mix(h, ln ? (uint64_t)ln->column : 0);
        }
        mix_i32s(h, l->attribute_indices, l->n_attribute_indices);
        return;
    }
    case T_STACK: {
        const stack_key *k = e;
        mix_i32s(h, k->v, k->n);
        return;
    }
    case T_LINK: {
        uint8_t tr[16], sp[8];
        link_canon(e, tr, sp);
        mix_bytes(h, tr, 16);
        mix_bytes(h, sp, 8);
        return;
    }
    case T_ATTR: {
        const pc_kvu *kv = e;
        mix(h, (uint64_t)(uint32_t)kv->key_strindex);
        mix(h, (uint64_t)(uint32_t)kv->unit_strindex);
        h_any(h, kv->value);
        return;
    }
    }
}

static uint64_t hash_entry(int t, const void *e)
{
    pc_hash h;
    pc_hash_begin(&h);
    mix(&h, (uint64_t)t);
    hash_fields(&h, t, e);
    return pc_hash_end(&h);
}

static bool lines_eq(const pc_line *a, const pc_line *b)
{
    int32_t fa = a ? a->function_index : 0, fb = b ? b->function_index : 0;
    int64_t la = a ? a->line : 0, lb = b ? b->line : 0;
    int64_t ca = a ? a->column : 0, cb = b ? b->column : 0;
    return fa == fb && la == lb && ca == cb;
}

static bool i32s_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof(int32_t)) == 0);
}

/* entry: a stored table element; key: the lookup key (str_key / stack_key / the element type). */
static bool entry_eq(int t, const void *entry, const void *key)
{
    switch (t) {
    case T_STR: {
        const char *s = entry;
        const str_key *k = key;
        return strncmp(s, k->s, k->len) == 0 && s[k->len] == 0;
    }
    case T_FUN: {
        const pc_function *a = entry, *b = key;
        return a->name_strindex == b->name_strindex &&
               a->system_name_strindex == b->system_name_strindex &&
               a->filename_strindex == b->filename_strindex && a->start_line == b->start_line;
    }
    case T_MAP: {
        const pc_mapping *a = entry, *b = key;
        return a->memory_start == b->memory_start && a->memory_limit == b->memory_limit &&
               a->file_offset == b->file_offset && a->filename_strindex == b->filename_strindex &&
               i32s_eq(a->attribute_indices, a->n_attribute_indices, b->attribute_indices,
                       b->n_attribute_indices);
    }
    case T_LOC: {
        const pc_location *a = entry, *b = key;
        if (a->mapping_index != b->mapping_index || a->address != b->address ||
            a->n_lines != b->n_lines ||
            !i32s_eq(a->attribute_indices, a->n_attribute_indices, b->attribute_indices,
                     b->n_attribute_indices))
            return false;
        for (size_t i = 0; i < a->n_lines; i++)
            if (!lines_eq(a->lines[i], b->lines[i])) return false;
        return true;
    }
    case T_STACK: {
        const pc_stack *a = entry;
        const stack_key *k = key;
        return i32s_eq(a->location_indices, a->n_location_indices, k->v, k->n);
    }
    case T_LINK: {
        uint8_t ta[16], sa[8], tb[16], sb[8];
        link_canon(entry, ta, sa);
        link_canon(key, tb, sb);
        return memcmp(ta, tb, 16) == 0 && memcmp(sa, sb, 8) == 0;
    }
    case T_ATTR: {
        const pc_kvu *a = entry, *b = key;
        return a->key_strindex == b->key_strindex && a->unit_strindex == b->unit_strindex &&
               eq_any(a->value, b->value);
    }
    }
    return false;
}

/* For adopted entries the "key" of a stored element. */
static const void *entry_as_key(int t, const void *e, str_key *sk, stack_key *kk)
{
    if (t == T_STR) {
        sk->s = e;
        sk->len = strlen(e);
        return sk;
    }
    if (t == T_STACK) {
        const pc_stack *s = e;
        kk->v = s->location_indices;
        kk->n = s->n_location_indices;
        return kk;
    }
    return e;
}

/* ---- tables ----------------------------------------------------------------------------- */

static void slots_alloc(pc_dict_builder *db, table *t, size_t cap)
{
    t->s = pc_xmalloc(cap * sizeof(slot));
    heap_account(db, cap * sizeof(slot), 0);
    for (size_t i = 0; i < cap; i++)
        t->s[i].idx = -1;
    t->scap = cap;
}

static void slots_grow(pc_dict_builder *db, table *t)
{
    slot *old = t->s;
    size_t ocap = t->scap;
    slots_alloc(db, t, ocap * 2);
    size_t mask = t->scap - 1;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i].idx < 0) continue;
        size_t j = old[i].h & mask;
        while (t->s[j].idx >= 0)
            j = (j + 1) & mask;
        t->s[j] = old[i];
    }
    free(old);
    heap_account(db, 0, ocap * sizeof(slot));
}

/* Index of an entry equal to key, or -1 with *pos the free slot to insert at. */
static int32_t lookup(const pc_dict_builder *db, int ti, uint32_t h, const void *key, size_t *pos)
{
    const table *t = &db->t[ti];
    size_t mask = t->scap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const slot *s = &t->s[i];
        if (s->idx < 0) {
            *pos = i;
            return -1;
        }
        if (s->h == h && entry_eq(ti, t->v[s->idx], key)) return s->idx;
    }
}

static int32_t push(pc_dict_builder *db, table *t, void *e)
{
    if (t->n == t->cap) {
        size_t old = t->cap;
        t->cap = t->cap ? t->cap * 2 : 64;
        t->v = pc_xrealloc(t->v, t->cap * sizeof(void *));
        heap_account(db, (t->cap - old) * sizeof(void *), 0);
    }
    if (t->n >= INT32_MAX) abort(); /* indices are int32 on the wire */
    t->v[t->n] = e;
    return (int32_t)t->n++;
}

/* Append e as a new element and index it under hash h at slot pos (from a failed lookup). */
static int32_t add(pc_dict_builder *db, int ti, uint32_t h, size_t pos, void *e)
{
    table *t = &db->t[ti];
    int32_t idx = push(db, t, e);
    t->s[pos].h = h;
    t->s[pos].idx = idx;
    if (++t->used * 4 > t->scap * 3) slots_grow(db, t);
    return idx;
}

/* Append e (adopted or zero element); index it unless an equal entry is already indexed. */
static void adopt(pc_dict_builder *db, int ti, void *e)
{
    str_key sk;
    stack_key kk;
    const void *key = entry_as_key(ti, e, &sk, &kk);
    uint32_t h = fold(hash_entry(ti, key));
    size_t pos;
    if (lookup(db, ti, h, key, &pos) >= 0) {
        push(db, &db->t[ti], e);
        return;
    }
    add(db, ti, h, pos, e);
}

/* A message of type d in the arena, with its defaults. */
static void *new_message(pc_arena *a, const ProtobufCMessageDescriptor *d)
{
    void *m = pc_arena_alloc(a, d->sizeof_message);
    protobuf_c_message_init(d, m);
    return m;
}

static void *zero_element(pc_arena *a, int t)
{
    switch (t) {
    case T_STR: return pc_arena_strndup(a, "", 0);
    case T_MAP:
        return new_message(a, &opentelemetry__proto__profiles__v1development__mapping__descriptor);
    case T_LOC:
        return new_message(a, &opentelemetry__proto__profiles__v1development__location__descriptor);
    case T_FUN:
        return new_message(a, &opentelemetry__proto__profiles__v1development__function__descriptor);
    case T_LINK: {
        pc_link *l =
            new_message(a, &opentelemetry__proto__profiles__v1development__link__descriptor);
        l->trace_id.data = pc_arena_calloc(a, 1, 16);
        l->trace_id.len = 16;
        l->span_id.data = pc_arena_calloc(a, 1, 8);
        l->span_id.len = 8;
        return l;
    }
    case T_ATTR:
        return new_message(
            a, &opentelemetry__proto__profiles__v1development__key_value_and_unit__descriptor);
    case T_STACK:
        return new_message(a, &opentelemetry__proto__profiles__v1development__stack__descriptor);
    }
    return NULL;
}

static pc_dict_builder *builder_alloc(pc_arena *arena)
{
    pc_dict_builder *db = pc_xcalloc(1, sizeof *db);
    db->a = arena;
    for (int i = 0; i < T_COUNT; i++)
        slots_alloc(db, &db->t[i], i == T_STR ? 256 : 64);
    return db;
}

pc_dict_builder *pc_dict_builder_new(pc_arena *arena)
{
    pc_dict_builder *db = builder_alloc(arena);
    for (int i = 0; i < T_COUNT; i++)
        adopt(db, i, zero_element(arena, i));
    return db;
}

static void adopt_table(pc_dict_builder *db, int ti, void **v, size_t n)
{
    if (n == 0) {
        adopt(db, ti, zero_element(db->a, ti));
        return;
    }
    for (size_t i = 0; i < n; i++)
        adopt(db, ti, v[i] ? v[i] : zero_element(db->a, ti));
}

pc_dict_builder *pc_dict_builder_from(pc_arena *arena, const pc_dictionary *d)
{
    if (!d) return pc_dict_builder_new(arena);
    pc_dict_builder *db = builder_alloc(arena);
    adopt_table(db, T_STR, (void **)d->string_table, d->n_string_table);
    adopt_table(db, T_MAP, (void **)d->mapping_table, d->n_mapping_table);
    adopt_table(db, T_LOC, (void **)d->location_table, d->n_location_table);
    adopt_table(db, T_FUN, (void **)d->function_table, d->n_function_table);
    adopt_table(db, T_LINK, (void **)d->link_table, d->n_link_table);
    adopt_table(db, T_ATTR, (void **)d->attribute_table, d->n_attribute_table);
    adopt_table(db, T_STACK, (void **)d->stack_table, d->n_stack_table);
    return db;
}

void pc_dict_builder_free(pc_dict_builder *db)
{
    if (!db) return;
    for (int i = 0; i < T_COUNT; i++) {
        free(db->t[i].v);
        free(db->t[i].s);
    }
    free(db->scratch);
    heap_account(db, 0, db->heap);
    free(db);
}

pc_arena *pc_dict_builder_arena(const pc_dict_builder *db)
{
    return db->a;
}

size_t pc_dict_n_strings(const pc_dict_builder *db)
{
    return db->t[T_STR].n;
}

const char *pc_dict_builder_str(const pc_dict_builder *db, int32_t idx)
{
    if (idx < 0 || (size_t)idx >= db->t[T_STR].n) return "";
    return db->t[T_STR].v[idx];
}

/* ---- interning -------------------------------------------------------------------------- */

static int32_t *dup_i32s(pc_arena *a, const int32_t *v, size_t n)
{
    return n ? pc_arena_memdup(a, v, n * sizeof(int32_t)) : NULL;
}

/* The index of the entry key k stands for in table t: the one there, or copy(db, k) added. The
 * key may point into the caller's memory; copy makes the arena's own entry from it. */
typedef void *(*copy_fn)(pc_dict_builder *db, const void *k);

static int32_t intern(pc_dict_builder *db, int t, const void *k, copy_fn copy)
{
    uint32_t h = fold(hash_entry(t, k));
    size_t pos;
    int32_t idx = lookup(db, t, h, k, &pos);
    if (idx >= 0) return idx;
    return add(db, t, h, pos, copy(db, k));
}

static void *copy_str(pc_dict_builder *db, const void *k)
{
    const str_key *sk = k;
    return pc_arena_strndup(db->a, sk->s, sk->len);
}

static void *copy_fun(pc_dict_builder *db, const void *k)
{
    return pc_arena_memdup(db->a, k, sizeof(pc_function));
}

static void *copy_map(pc_dict_builder *db, const void *k)
{
    pc_mapping *e = pc_arena_memdup(db->a, k, sizeof *e);
    e->attribute_indices = dup_i32s(db->a, e->attribute_indices, e->n_attribute_indices);
    return e;
}

static void *copy_loc(pc_dict_builder *db, const void *k)
{
    pc_location *e = pc_arena_memdup(db->a, k, sizeof *e);
    const pc_line *const *from = (const pc_line *const *)e->lines;
    size_t n = e->n_lines;
    e->attribute_indices = dup_i32s(db->a, e->attribute_indices, e->n_attribute_indices);
    e->lines = n ? pc_arena_alloc(db->a, n * sizeof(pc_line *)) : NULL;
    pc_line *lines = n ? pc_arena_alloc(db->a, n * sizeof(pc_line)) : NULL;
    for (size_t i = 0; i < n; i++) {
        opentelemetry__proto__profiles__v1development__line__init(&lines[i]);
        if (from[i]) {
            lines[i].function_index = from[i]->function_index;
            lines[i].line = from[i]->line;
            lines[i].column = from[i]->column;
        }
        e->lines[i] = &lines[i];
    }
    return e;
}

static void *copy_stack(pc_dict_builder *db, const void *k)
{
    const stack_key *sk = k;
    pc_stack *e = pc_arena_alloc(db->a, sizeof *e);
    opentelemetry__proto__profiles__v1development__stack__init(e);
    e->n_location_indices = sk->n;
    e->location_indices = dup_i32s(db->a, sk->v, sk->n);
    return e;
}

static void *copy_link(pc_dict_builder *db, const void *k)
{
    const pc_link *l = k;
    pc_link *e = pc_arena_alloc(db->a, sizeof *e);
    opentelemetry__proto__profiles__v1development__link__init(e);
    e->trace_id.data = pc_arena_memdup(db->a, l->trace_id.data, 16);
    e->trace_id.len = 16;
    e->span_id.data = pc_arena_memdup(db->a, l->span_id.data, 8);
    e->span_id.len = 8;
    return e;
}

int32_t pc_dict_string(pc_dict_builder *db, const char *s, size_t len)
{
    if (!s) len = 0;
    len = len ? strnlen(s, len) : 0; /* protobuf strings end at the first NUL */
    str_key k = {s ? s : "", len};
    return intern(db, T_STR, &k, copy_str);
}

int32_t pc_dict_cstring(pc_dict_builder *db, const char *s)
{
    return pc_dict_string(db, s, s ? strlen(s) : 0);
}

int32_t pc_dict_function(pc_dict_builder *db, int32_t name, int32_t system_name, int32_t filename,
                         int64_t start_line)
{
    pc_function k;
    opentelemetry__proto__profiles__v1development__function__init(&k);
    k.name_strindex = name;
    k.system_name_strindex = system_name;
    k.filename_strindex = filename;
    k.start_line = start_line;
    return intern(db, T_FUN, &k, copy_fun);
}

int32_t pc_dict_mapping(pc_dict_builder *db, const pc_mapping *m)
{
    pc_mapping k;
    opentelemetry__proto__profiles__v1development__mapping__init(&k);
    k.memory_start = m->memory_start;
    k.memory_limit = m->memory_limit;
    k.file_offset = m->file_offset;
    k.filename_strindex = m->filename_strindex;
    k.n_attribute_indices = m->attribute_indices ? m->n_attribute_indices : 0;
    k.attribute_indices = m->attribute_indices;
    return intern(db, T_MAP, &k, copy_map);
}

int32_t pc_dict_location(pc_dict_builder *db, const pc_location *l)
{
    pc_location k;
    opentelemetry__proto__profiles__v1development__location__init(&k);
    k.mapping_index = l->mapping_index;
    k.address = l->address;
    k.n_lines = l->lines ? l->n_lines : 0;
    k.lines = l->lines;
    k.n_attribute_indices = l->attribute_indices ? l->n_attribute_indices : 0;
    k.attribute_indices = l->attribute_indices;
    return intern(db, T_LOC, &k, copy_loc);
}

int32_t pc_dict_stack(pc_dict_builder *db, const int32_t *locs, size_t n)
{
    stack_key k = {locs, locs ? n : 0};
    return intern(db, T_STACK, &k, copy_stack);
}

/* Deep copy of an AnyValue into the arena; string_value_strindex and key_strindex go through
 * smap (old -> new, out of range -> 0) when smap is non-NULL. NULL in, NULL out. */
static pc_anyvalue *copy_any(pc_arena *a, const pc_anyvalue *v, const int32_t *smap, size_t sn);

static pc_keyvalue *copy_kv(pc_arena *a, const pc_keyvalue *kv, const int32_t *smap, size_t sn)
{
    pc_keyvalue *c = pc_arena_alloc(a, sizeof *c);
    opentelemetry__proto__common__v1__key_value__init(c);
    if (!kv) return c;
    if (kv->key && kv->key[0]) c->key = pc_arena_strndup(a, kv->key, strlen(kv->key));
    c->key_strindex = smap ? pc_remap_index(smap, sn, kv->key_strindex) : kv->key_strindex;
    c->value = copy_any(a, kv->value, smap, sn);
    return c;
}

static pc_anyvalue *copy_any(pc_arena *a, const pc_anyvalue *v, const int32_t *smap, size_t sn)
{
    if (!v) return NULL;
    pc_anyvalue *c = pc_arena_alloc(a, sizeof *c);
    *c = *v;
    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE:
        c->string_value =
            pc_arena_strndup(a, pc_nz(v->string_value), strlen(pc_nz(v->string_value)));
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BYTES_VALUE:
        c->bytes_value.data = pc_arena_memdup(a, v->bytes_value.data, v->bytes_value.len);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX:
        if (smap) c->string_value_strindex = pc_remap_index(smap, sn, v->string_value_strindex);
        break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE: {
        Opentelemetry__Proto__Common__V1__ArrayValue *arr = pc_arena_alloc(a, sizeof *arr);
        opentelemetry__proto__common__v1__array_value__init(arr);
        size_t n = v->array_value ? v->array_value->n_values : 0;
        arr->n_values = n;
        arr->values = n ? pc_arena_alloc(a, n * sizeof(pc_anyvalue *)) : NULL;
        for (size_t i = 0; i < n; i++) {
            arr->values[i] = copy_any(a, v->array_value->values[i], smap, sn);
            if (!arr->values[i]) { /* repeated message elements are never NULL on the wire */
                arr->values[i] = pc_arena_alloc(a, sizeof(pc_anyvalue));
                opentelemetry__proto__common__v1__any_value__init(arr->values[i]);
            }
        }
        c->array_value = arr;
        break;
    }
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE: {
        Opentelemetry__Proto__Common__V1__KeyValueList *l = pc_arena_alloc(a, sizeof *l);
        opentelemetry__proto__common__v1__key_value_list__init(l);
        size_t n = v->kvlist_value ? v->kvlist_value->n_values : 0;
        l->n_values = n;
        l->values = n ? pc_arena_alloc(a, n * sizeof(pc_keyvalue *)) : NULL;
        for (size_t i = 0; i < n; i++)
            l->values[i] = copy_kv(a, v->kvlist_value->values[i], smap, sn);
        c->kvlist_value = l;
        break;
    }
    default: break;
    }
    return c;
}

static void *copy_attr(pc_dict_builder *db, const void *k)
{
    pc_kvu *e = pc_arena_memdup(db->a, k, sizeof *e);
    e->value = copy_any(db->a, e->value, NULL, 0);
    return e;
}

static void *copy_attr_owned(pc_dict_builder *db, const void *k)
{
    return pc_arena_memdup(db->a, k, sizeof(pc_kvu));
}

/* Intern an attribute whose value is given by v; when owned, v already lives in the arena and is
 * stored as is, otherwise it is deep-copied on insert. */
static int32_t attribute(pc_dict_builder *db, int32_t key, const pc_anyvalue *v, int32_t unit,
                         bool owned)
{
    if (v && v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE__NOT_SET)
        v = NULL; /* the empty value is stored as an absent one, like the zero element */
    pc_kvu k;
    opentelemetry__proto__profiles__v1development__key_value_and_unit__init(&k);
    k.key_strindex = key;
    k.unit_strindex = unit;
    k.value = (pc_anyvalue *)v;
    return intern(db, T_ATTR, &k, owned ? copy_attr_owned : copy_attr);
}

int32_t pc_dict_attribute(pc_dict_builder *db, int32_t key_strindex, const pc_anyvalue *v,
                          int32_t unit_strindex)
{
    return attribute(db, key_strindex, v, unit_strindex, false);
}

int32_t pc_dict_attr_str(pc_dict_builder *db, const char *key, const char *val, size_t len)
{
    pc_anyvalue v;
    opentelemetry__proto__common__v1__any_value__init(&v);
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    char *s = pc_xmalloc(len + 1);
    if (len) memcpy(s, val, len);
    s[len] = 0;
    v.string_value = s;
    int32_t idx = attribute(db, pc_dict_cstring(db, key), &v, 0, false);
    free(s);
    return idx;
}

int32_t pc_dict_attr_int(pc_dict_builder *db, const char *key, int64_t val, int32_t unit_strindex)
{
    pc_anyvalue v;
    opentelemetry__proto__common__v1__any_value__init(&v);
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
    v.int_value = val;
    return attribute(db, pc_dict_cstring(db, key), &v, unit_strindex, false);
}

int32_t pc_dict_attr_bool(pc_dict_builder *db, const char *key, int val)
{
    pc_anyvalue v;
    opentelemetry__proto__common__v1__any_value__init(&v);
    v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
    v.bool_value = val ? 1 : 0;
    return attribute(db, pc_dict_cstring(db, key), &v, 0, false);
}

int32_t pc_dict_link(pc_dict_builder *db, const uint8_t trace_id[16], const uint8_t span_id[8])
{
    pc_link k;
    opentelemetry__proto__profiles__v1development__link__init(&k);
    k.trace_id.data = (uint8_t *)trace_id;
    k.trace_id.len = 16;
    k.span_id.data = (uint8_t *)span_id;
    k.span_id.len = 8;
    return intern(db, T_LINK, &k, copy_link);
}

static void *snapshot(pc_arena *a, const table *t)
{
    return pc_arena_memdup(a, t->v, t->n * sizeof(void *));
}

pc_dictionary *pc_dict_builder_finish(pc_dict_builder *db)
{
    pc_dictionary *d = pc_arena_alloc(db->a, sizeof *d);
    opentelemetry__proto__profiles__v1development__profiles_dictionary__init(d);
    d->n_string_table = db->t[T_STR].n;
    d->string_table = snapshot(db->a, &db->t[T_STR]);
    d->n_mapping_table = db->t[T_MAP].n;
    d->mapping_table = snapshot(db->a, &db->t[T_MAP]);
    d->n_location_table = db->t[T_LOC].n;
    d->location_table = snapshot(db->a, &db->t[T_LOC]);
    d->n_function_table = db->t[T_FUN].n;
    d->function_table = snapshot(db->a, &db->t[T_FUN]);
    d->n_link_table = db->t[T_LINK].n;
    d->link_table = snapshot(db->a, &db->t[T_LINK]);
    d->n_attribute_table = db->t[T_ATTR].n;
    d->attribute_table = snapshot(db->a, &db->t[T_ATTR]);
    d->n_stack_table = db->t[T_STACK].n;
    d->stack_table = snapshot(db->a, &db->t[T_STACK]);
    return d;
}

/* ---- import / remap --------------------------------------------------------------------- */

static int32_t *scratch(pc_dict_builder *db, size_t n)
{
    if (n > db->scratch_cap) {
        size_t old = db->scratch_cap;
        db->scratch_cap = n < 64 ? 64 : n;
        db->scratch = pc_xrealloc(db->scratch, db->scratch_cap * sizeof(int32_t));
        heap_account(db, (db->scratch_cap - old) * sizeof(int32_t), 0);
    }
    return db->scratch;
}

/* Rewrite an index list through map into the builder's scratch buffer. */
static int32_t *remap_list(pc_dict_builder *db, const int32_t *v, size_t n, const int32_t *map,
                           size_t mn)
{
    if (!v || !n) return NULL;
    int32_t *o = scratch(db, n);
    for (size_t i = 0; i < n; i++)
        o[i] = pc_remap_index(map, mn, v[i]);
    return o;
}

static int32_t *map_alloc(size_t n)
{
    return n ? pc_xcalloc(n, sizeof(int32_t)) : NULL;
}

static void import_attributes(pc_dict_builder *db, const pc_dictionary *src, pc_dict_remap *m)
{
    m->n_attributes = src->attribute_table ? src->n_attribute_table : 0;
    m->attributes = map_alloc(m->n_attributes);
    for (size_t i = 1; i < m->n_attributes; i++) {
        const pc_kvu *kv = src->attribute_table[i];
        if (!kv) continue;
        int32_t key = pc_remap_index(m->strings, m->n_strings, kv->key_strindex);
        int32_t unit = pc_remap_index(m->strings, m->n_strings, kv->unit_strindex);
        const pc_anyvalue *v = kv->value;
        if (v &&
            (v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE ||
             v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE)) {
            pc_anyvalue *c = copy_any(db->a, v, m->strings, m->n_strings);
            m->attributes[i] = attribute(db, key, c, unit, true);
        } else if (v &&
                   v->value_case ==
                       OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX) {
            pc_anyvalue c = *v;
            c.string_value_strindex =
                pc_remap_index(m->strings, m->n_strings, v->string_value_strindex);
            m->attributes[i] = attribute(db, key, &c, unit, false);
        } else {
            m->attributes[i] = attribute(db, key, v, unit, false);
        }
    }
}

static void import_mappings_functions(pc_dict_builder *db, const pc_dictionary *src,
                                      pc_dict_remap *m)
{
    m->n_mappings = src->mapping_table ? src->n_mapping_table : 0;
    m->mappings = map_alloc(m->n_mappings);
    for (size_t i = 1; i < m->n_mappings; i++) {
        const pc_mapping *sm = src->mapping_table[i];
        if (!sm) continue;
        pc_mapping k = *sm;
        k.filename_strindex = pc_remap_index(m->strings, m->n_strings, sm->filename_strindex);
        k.attribute_indices = remap_list(db, sm->attribute_indices, sm->n_attribute_indices,
                                         m->attributes, m->n_attributes);
        k.n_attribute_indices = k.attribute_indices ? sm->n_attribute_indices : 0;
        m->mappings[i] = pc_dict_mapping(db, &k);
    }

    m->n_functions = src->function_table ? src->n_function_table : 0;
    m->functions = map_alloc(m->n_functions);
    for (size_t i = 1; i < m->n_functions; i++) {
        const pc_function *f = src->function_table[i];
        if (!f) continue;
        m->functions[i] = pc_dict_function(
            db, pc_remap_index(m->strings, m->n_strings, f->name_strindex),
            pc_remap_index(m->strings, m->n_strings, f->system_name_strindex),
            pc_remap_index(m->strings, m->n_strings, f->filename_strindex), f->start_line);
    }
}

static void import_locations(pc_dict_builder *db, const pc_dictionary *src, pc_dict_remap *m)
{
    m->n_locations = src->location_table ? src->n_location_table : 0;
    m->locations = map_alloc(m->n_locations);
    pc_line *lines = NULL, **lptrs = NULL;
    size_t lcap = 0;
    for (size_t i = 1; i < m->n_locations; i++) {
        const pc_location *sl = src->location_table[i];
        if (!sl) continue;
        pc_location k = *sl;
        k.mapping_index = pc_remap_index(m->mappings, m->n_mappings, sl->mapping_index);
        k.n_lines = sl->lines ? sl->n_lines : 0;
        if (k.n_lines > lcap) {
            lcap = k.n_lines * 2;
            lines = pc_xrealloc(lines, lcap * sizeof *lines);
            lptrs = pc_xrealloc(lptrs, lcap * sizeof *lptrs);
        }
        for (size_t j = 0; j < k.n_lines; j++) {
            opentelemetry__proto__profiles__v1development__line__init(&lines[j]);
            const pc_line *ln = sl->lines[j];
            if (ln) {
                lines[j].function_index =
                    pc_remap_index(m->functions, m->n_functions, ln->function_index);
                lines[j].line = ln->line;
                lines[j].column = ln->column;
            }
            lptrs[j] = &lines[j];
        }
        k.lines = k.n_lines ? lptrs : NULL;
        k.attribute_indices = remap_list(db, sl->attribute_indices, sl->n_attribute_indices,
                                         m->attributes, m->n_attributes);
        k.n_attribute_indices = k.attribute_indices ? sl->n_attribute_indices : 0;
        m->locations[i] = pc_dict_location(db, &k);
    }
    free(lines);
    free(lptrs);
}

/* Every table in dependency order: strings first, stacks (of locations) and links last. */
void pc_dict_import(pc_dict_builder *db, const pc_dictionary *src, pc_dict_remap *m)
{
    memset(m, 0, sizeof *m);
    if (!src) return;

    m->n_strings = src->string_table ? src->n_string_table : 0;
    m->strings = map_alloc(m->n_strings);
    for (size_t i = 1; i < m->n_strings; i++)
        m->strings[i] = pc_dict_cstring(db, src->string_table[i]);
    import_attributes(db, src, m);
    import_mappings_functions(db, src, m);
    import_locations(db, src, m);

    m->n_stacks = src->stack_table ? src->n_stack_table : 0;
    m->stacks = map_alloc(m->n_stacks);
    for (size_t i = 1; i < m->n_stacks; i++) {
        const pc_stack *s = src->stack_table[i];
        if (!s) continue;
        int32_t *v = remap_list(db, s->location_indices, s->n_location_indices, m->locations,
                                m->n_locations);
        m->stacks[i] = pc_dict_stack(db, v, v ? s->n_location_indices : 0);
    }

    m->n_links = src->link_table ? src->n_link_table : 0;
    m->links = map_alloc(m->n_links);
    for (size_t i = 1; i < m->n_links; i++) {
        const pc_link *l = src->link_table[i];
        if (!l) continue;
        uint8_t t[16], s[8];
        link_canon(l, t, s);
        m->links[i] = pc_dict_link(db, t, s);
    }
}
