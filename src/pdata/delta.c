/* Deltas of cumulative profiles (delta.h). */
#include "pdata/delta.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

/* Two 64-bit hashes over the same bytes (FNV-1a, and a multiply-rotate one): a collision of
 * both would merge two stacks' counts, so 128 bits make it as unlikely as Alloy's murmur3. */
typedef struct key {
    uint64_t a, b;
} key;

static void mix(key *k, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        k->a = (k->a ^ p[i]) * 0x100000001b3ULL;
        k->b = (k->b + p[i] + 1) * 0x9e3779b97f4a7c15ULL;
        k->b ^= k->b >> 29;
    }
}

static void mix_u64(key *k, uint64_t v)
{
    mix(k, &v, sizeof v);
}

static void mix_str(key *k, const char *s)
{
    s = pc_nz(s);
    size_t n = strlen(s);
    mix_u64(k, n); /* length first: "ab"+"c" is not "a"+"bc" */
    mix(k, s, n);
}

typedef struct entry {
    key k;
    bool used;
    int64_t prev, cur;
    uint64_t cur_gen;  /* the scrape that set cur */
    uint64_t emit_gen; /* the scrape whose first sample of this key took the delta */
} entry;

struct pc_delta {
    entry *t;
    size_t cap, n;
    uint64_t gen;
    bool seeded;
    uint64_t prev_time;
};

pc_delta *pc_delta_new(void)
{
    pc_delta *d = pc_xcalloc(1, sizeof *d);
    d->cap = 64;
    d->t = pc_xcalloc(d->cap, sizeof *d->t);
    return d;
}

void pc_delta_free(pc_delta *d)
{
    if (!d) return;
    free(d->t);
    free(d);
}

size_t pc_delta_size(const pc_delta *d)
{
    return d->n;
}

static entry *slot(entry *t, size_t cap, key k)
{
    size_t i = (size_t)k.a & (cap - 1);
    while (t[i].used && (t[i].k.a != k.a || t[i].k.b != k.b))
        i = (i + 1) & (cap - 1);
    return &t[i];
}

static entry *find(pc_delta *d, key k)
{
    if (2 * (d->n + 1) > d->cap) { /* at most half full */
        size_t cap = d->cap * 2;
        entry *t = pc_xcalloc(cap, sizeof *t);
        for (size_t i = 0; i < d->cap; i++)
            if (d->t[i].used) *slot(t, cap, d->t[i].k) = d->t[i];
        free(d->t);
        d->t = t;
        d->cap = cap;
    }
    entry *e = slot(d->t, d->cap, k);
    if (!e->used) {
        *e = (entry){.k = k, .used = true};
        d->n++;
    }
    return e;
}

static void mix_value(key *k, const pc_dictionary *dict, const pc_anyvalue *v)
{
    mix_u64(k, v ? (uint64_t)v->value_case : 0);
    if (!v) return;
    switch (v->value_case) {
    case PC_AV_STRING:
    case PC_AV_STRINDEX: mix_str(k, pc_anyvalue_str(dict, v)); break;
    case PC_AV_INT: mix_u64(k, (uint64_t)v->int_value); break;
    case PC_AV_BOOL: mix_u64(k, (uint64_t)v->bool_value); break;
    case PC_AV_DOUBLE: mix(k, &v->double_value, sizeof v->double_value); break;
    default: break; /* arrays and maps: by kind only */
    }
}

static void mix_location(key *k, const pc_dictionary *d, int32_t li)
{
    const pc_location *l =
        li > 0 && (size_t)li < d->n_location_table ? d->location_table[li] : NULL;
    mix_u64(k, l ? l->address : 0);
    mix_u64(k, l ? l->n_lines : 0);
    for (size_t i = 0; l && i < l->n_lines; i++) {
        int32_t fi = l->lines[i]->function_index;
        const pc_function *f =
            fi > 0 && (size_t)fi < d->n_function_table ? d->function_table[fi] : NULL;
        mix_str(k, f ? pc_dict_str(d, f->name_strindex) : "");
        mix_str(k, f ? pc_dict_str(d, f->filename_strindex) : "");
        mix_u64(k, (uint64_t)l->lines[i]->line);
    }
}

/* The key of a sample's content (delta.h), before the value index. */
static key sample_key(const pc_dictionary *d, const pc_profile *p, const pc_sample *s)
{
    key k = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL};
    const pc_value_type *vt = p->sample_type;
    mix_str(&k, vt ? pc_dict_str(d, vt->type_strindex) : "");
    mix_str(&k, vt ? pc_dict_str(d, vt->unit_strindex) : "");
    int32_t si = s->stack_index;
    const pc_stack *st = si > 0 && (size_t)si < d->n_stack_table ? d->stack_table[si] : NULL;
    mix_u64(&k, st ? st->n_location_indices : 0);
    for (size_t i = 0; st && i < st->n_location_indices; i++)
        mix_location(&k, d, st->location_indices[i]);
    mix_u64(&k, s->n_attribute_indices);
    for (size_t i = 0; i < s->n_attribute_indices; i++) {
        const pc_kvu *a = pc_dict_attr_at(d, s->attribute_indices[i]);
        mix_str(&k, a ? pc_dict_str(d, a->key_strindex) : "");
        mix_value(&k, d, a ? a->value : NULL);
        mix_str(&k, a ? pc_dict_str(d, a->unit_strindex) : "");
    }
    const pc_link *ln = s->link_index > 0 && (size_t)s->link_index < d->n_link_table
                            ? d->link_table[s->link_index]
                            : NULL;
    if (ln) {
        mix(&k, ln->trace_id.data, ln->trace_id.len);
        mix(&k, ln->span_id.data, ln->span_id.len);
    }
    return k;
}

static key value_key(key k, size_t i)
{
    mix_u64(&k, i);
    return k;
}

static bool subtracted(const pc_dictionary *d, const pc_profile *p, const char *const *types)
{
    if (!types) return true;
    const char *t = p->sample_type ? pc_dict_str(d, p->sample_type->type_strindex) : "";
    for (size_t i = 0; types[i]; i++)
        if (!strcmp(types[i], t)) return true;
    return false;
}

/* Pass 1: this scrape's sums per key into cur. */
static void collect(pc_delta *d, const pc_request *req, const char *const *types)
{
    const pc_dictionary *dict = req->dictionary;
    pc_profile_iter it = {0};
    while (pc_profile_next(req, &it)) {
        const pc_profile *p = it.prof;
        if (!p || !subtracted(dict, p, types)) continue;
        for (size_t s = 0; s < pc_profile_n_samples(p); s++) {
            key base = sample_key(dict, p, p->samples[s]);
            for (size_t v = 0; v < p->samples[s]->n_values; v++) {
                entry *e = find(d, value_key(base, v));
                if (e->cur_gen != d->gen) e->cur = 0, e->cur_gen = d->gen;
                e->cur += p->samples[s]->values[v];
            }
        }
    }
}

static int64_t current(const pc_delta *d, const entry *e)
{
    return e->cur_gen == d->gen ? e->cur : 0;
}

/* Pass 3: each sample's values become deltas; all-zero samples go. */
static void rewrite(pc_delta *d, pc_request *req, const char *const *types, uint64_t elapsed)
{
    const pc_dictionary *dict = req->dictionary;
    pc_profile_iter it = {0};
    while (pc_profile_next(req, &it)) {
        pc_profile *p = (pc_profile *)it.prof;
        if (!p || !subtracted(dict, p, types)) continue;
        size_t kept = 0;
        for (size_t s = 0; s < pc_profile_n_samples(p); s++) {
            pc_sample *smp = p->samples[s];
            key base = sample_key(dict, p, smp);
            bool any = false;
            for (size_t v = 0; v < smp->n_values; v++) {
                entry *e = find(d, value_key(base, v));
                smp->values[v] = e->emit_gen == d->gen ? 0 : current(d, e) - e->prev;
                e->emit_gen = d->gen;
                any |= smp->values[v] != 0;
            }
            if (any) p->samples[kept++] = smp;
        }
        p->n_samples = kept;
        if (elapsed) p->duration_nano = elapsed;
    }
}

static uint64_t batch_time(const pc_request *req, const pc_dictionary *dict,
                           const char *const *types)
{
    pc_profile_iter it = {0};
    while (pc_profile_next(req, &it))
        if (it.prof && subtracted(dict, it.prof, types)) return it.prof->time_unix_nano;
    return 0;
}

pc_delta_result pc_delta_apply(pc_delta *d, pc_batch *b, const char *const *types)
{
    pc_request *req = pc_batch_req(b);
    d->gen++;
    collect(d, req, types);
    bool down = false;
    for (size_t i = 0; i < d->cap && !down; i++)
        if (d->t[i].used && current(d, &d->t[i]) < d->t[i].prev) down = true;
    uint64_t now = batch_time(req, req->dictionary, types);
    pc_delta_result r = !d->seeded ? PC_DELTA_FIRST : down ? PC_DELTA_RESET : PC_DELTA_OK;
    if (r == PC_DELTA_OK)
        rewrite(d, req, types, d->prev_time && now > d->prev_time ? now - d->prev_time : 0);
    for (size_t i = 0; i < d->cap; i++)
        if (d->t[i].used) d->t[i].prev = current(d, &d->t[i]);
    d->seeded = true;
    d->prev_time = now;
    return r;
}
